"""Memory of a long live run: the resident memory of each of its processes, watched while it runs.

A live session lasts as long as the lab's session (20–60 minutes, or hours): memory that grows a
little with every frame is invisible in a test of seconds and ends a session hours later. The sink
samples the RSS of the run's processes (itself, the loader, the workers, the accelerator stage)
every :data:`SAMPLE_EVERY_S` seconds (:func:`eyeblink.host.rss_bytes`: on Linux a few microseconds a
process, no page-table walk). The reference is the run's memory at :data:`REFERENCE_S` (two minutes:
models loaded, the ring and the allocators warm); when the total has grown by more than
:data:`MAX_GROWTH` of it since (the figure the project holds itself to: RSS at minute 20 within 10%
of minute 2), the run warns once, one line naming the process that grew and how fast; a NUT stream
whose sender writes syncpoints (a default ``ffmpeg -f nut``) is the known cause in the loader, and
the line says so.

The figures go to the summary (``live.memory``) and to ``/metrics``
(``eyeblink_memory_rss_bytes{process}``). Where a process's memory cannot be read the watch records
nothing and never warns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from eyeblink.host import rss_bytes

__all__ = ["MAX_GROWTH", "REFERENCE_S", "SAMPLE_EVERY_S", "MemoryWatch", "rss_bytes"]

#: seconds between samples
SAMPLE_EVERY_S = 10.0
#: the reference sample: the first at or after this many seconds of the run
REFERENCE_S = 120.0
#: warn when the run's total RSS exceeds the reference by more than this fraction of it ...
MAX_GROWTH = 0.10
#: ... and by at least this many MiB (a small run's allocator noise is not a leak)
MIN_GROWTH_MIB = 32.0

_MIB = float(2**20)

NUT_HINT = (
    "the stream is NUT, and FFmpeg's NUT demuxer keeps every syncpoint it reads until the stream "
    "ends: "
    "send with `ffmpeg … -f nut -syncpoints none -strict experimental` (or use another container)"
)


class MemoryWatch:
    """Samples the RSS of a run's processes; the summary's figures and the one-time growth warning.

    ``processes`` returns ``{role: pid}`` of the processes to watch now (roles such as ``sink``,
    ``loader``, ``worker0``); ``read`` reads one process's RSS (bytes or None). :meth:`sample` is
    cheap to call often: it reads only every ``every_s`` seconds of ``now``.
    """

    def __init__(
        self,
        processes: Callable[[], Mapping[str, int]],
        *,
        every_s: float = SAMPLE_EVERY_S,
        reference_s: float = REFERENCE_S,
        max_growth: float = MAX_GROWTH,
        min_growth_mib: float = MIN_GROWTH_MIB,
        read: Callable[[int], int | None] = rss_bytes,
        hint: Callable[[str], str | None] | None = None,
    ) -> None:
        self.processes = processes
        self.every_s, self.reference_s = every_s, reference_s
        self.max_growth, self.min_growth_mib = max_growth, min_growth_mib
        self.read = read
        self.hint = hint
        self.t0: float | None = None
        self.next_t = -1.0
        self.last: dict[str, int] = {}  # role -> RSS bytes, the latest sample
        self.reference: dict[str, int] | None = None
        self.reference_t: float | None = None
        self.max_total = 0
        self.samples = 0
        self.warning: str | None = None  # the growth warning, once given

    def sample(self, now: float) -> str | None:
        """Sample if ``every_s`` has passed (``now``: seconds, any monotonic clock); the warning,
        the first time the growth passes the limit, else None."""
        if self.t0 is None:
            self.t0 = now
        if now < self.next_t:
            return None
        self.next_t = now + self.every_s
        t = now - self.t0
        current = {}
        for role, pid in self.processes().items():
            value = self.read(pid)
            if value is not None:
                current[role] = value
        if not current:
            return None
        self.last = current
        self.samples += 1
        self.max_total = max(self.max_total, sum(current.values()))
        if self.reference is None:
            if t >= self.reference_s:
                self.reference, self.reference_t = current, t
            return None
        if self.warning is None:
            self.warning = self._check(t)
            return self.warning
        return None

    def _check(self, t: float) -> str | None:
        assert self.reference is not None and self.reference_t is not None
        ref = sum(self.reference.values())
        total = sum(self.last.values())
        grown = total - ref
        if ref <= 0 or grown <= self.max_growth * ref or grown < self.min_growth_mib * _MIB:
            return None
        minutes = max((t - self.reference_t) / 60.0, 1e-9)
        # the process that grew most (a role present in both samples)
        growth = {r: self.last[r] - self.reference[r] for r in self.last if r in self.reference}
        role = max(growth, key=lambda r: growth[r]) if growth else None
        who = (
            f"; most of it in the {role} ({growth[role] / _MIB / minutes:+.1f} MiB a minute)"
            if role is not None
            else ""
        )
        hint = self.hint(role) if self.hint is not None and role is not None else None
        return (
            f"memory grew {grown / _MIB:.0f} MiB ({grown / ref:+.0%}) since minute "
            f"{self.reference_t / 60:.0f} of the run, to {total / _MIB:.0f} MiB{who}; "
            + (
                hint
                if hint
                else "a session of hours may run out of memory: report it with the summary.json"
            )
        )

    def summary(self) -> dict[str, Any]:
        """``live.memory`` of the summary: RSS (MiB) of the run's processes at the reference and
        at the end."""

        def mib(d: Mapping[str, int] | None) -> float | None:
            return round(sum(d.values()) / _MIB, 1) if d else None

        ref = mib(self.reference)
        last = mib(self.last)
        return {
            "samples": self.samples,
            "every_s": self.every_s,
            "reference_s": round(self.reference_t, 1) if self.reference_t is not None else None,
            "rss_mib_reference": ref,
            "rss_mib_last": last,
            "rss_mib_max": round(self.max_total / _MIB, 1) if self.samples else None,
            "growth_ratio": round(last / ref - 1.0, 4) if ref and last is not None else None,
            "rss_mib_by_process": {r: round(v / _MIB, 1) for r, v in sorted(self.last.items())},
        }
