"""Whether a live source's own clock can be believed: its timestamps checked against the arrival
clock.

A stream's presentation timestamps (or a camera's tick counter) are the frames' capture times only
while they advance as the frames arrive. A sender that stamps 500 frames a second 1/64,000 s (or
1/30 s) apart would otherwise size the ring for 64,000 FPS (or 30), give ``duration_s`` 0.06 s (or
133 s) for 8 s of video and make a gate's "stable for 200 ms" mean 1.6 ms (or 3.3 s) of real time.
:class:`ClockCheck` compares the two clocks, and once the source's clock is not believable the run
uses the arrival clock instead.

The arrival clock (``time.perf_counter()`` when the frame was received and decoded) is late by the
sender's, the network's and this machine's delays, never early. So the source's time running *ahead*
of the arrival clock is certain evidence, while running *behind* it is also what late frames look
like, and is judged on the frames least delayed. The offset of a frame is its arrival time minus its
timestamp (both from the first frame). Tolerances:

* **at connection** (the rate probe of :class:`~eyeblink.sources.live.StreamSource`): timestamps
  whose rate is less than 1/:data:`PROBE_FACTOR` of the rate at which the same frames arrived, and
  whose span exceeds the arrival span by more than :data:`PROBE_AHEAD_S`: not believed from the
  first frame (1/30 s steps on a 500 FPS stream). The other way (timestamps closer together than the
  frames arrive, 1/64,000 s steps) is also what a sender slow to start looks like: the probe then
  sizes the ring for the claimed rate only up to 4x the arrival rate (or
  :data:`~eyeblink.sources.live.UNKNOWN_FPS`), and the running check judges;
* **ahead** (any frame): its offset below the least-delayed frame's of the first window by more than
  :data:`AHEAD_S` and :data:`DRIFT_SHARE` of the time since: the source's time got ahead of the
  arrival clock, which no delay can do (a fast clock, a forward jump);
* **behind** (every :data:`WINDOW_S` of arrival time): the least-delayed frame of the window behind
  the least-delayed frame of the first window by more than :data:`DRIFT_S` and :data:`DRIFT_SHARE`
  of the time elapsed (a slow clock) — judged only over windows in which the capture never waited
  for a free ring slot (``--on-overload block``: the sender backs up) and the reader waited for data
  at least :data:`BACKED_UP_SHARE` of the time (one that never waits reads slower than the frames
  come);
* **back**: a timestamp more than :data:`JUMP_S` before the previous frame's.

The rate of each window (the source's time between two windows' least-delayed frames per second of
arrival time) is reported (``window_ratio``). From the first mismatch on (from the first frame when
found at connection), each frame's timestamp is the previous frame's plus the arrival step
(``timestamps`` ``arrival_monotonic`` in the summary): durations, rates, the rows' ``timestamp_s``
and every capture-time bound of the run (``--stable-ms``, ``--settle-ms``, ``--face-lost-ms``) are
then arrival time. The mismatch is one warning line, the metric ``eyeblink_stream_clock_believed`` 0
and the summary's ``live.clock``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "AHEAD_S",
    "BACKED_UP_SHARE",
    "DRIFT_S",
    "DRIFT_SHARE",
    "JUMP_S",
    "PROBE_AHEAD_S",
    "PROBE_FACTOR",
    "WINDOW_S",
    "ClockCheck",
    "probe_verdict",
]

#: at connection: the frames arrived more than this factor faster than their timestamps say ...
PROBE_FACTOR = 2.0
#: ... and their timestamps span this many seconds more than their arrival times
PROBE_AHEAD_S = 0.25
#: seconds of arrival time per window of the running check
WINDOW_S = 1.0
#: the source's time ahead of the arrival clock by more than this many seconds (beyond the
#: least-delayed frame)
AHEAD_S = 1.0
#: the source's time behind the arrival clock (least-delayed frames) by more than this many seconds
#: ...
DRIFT_S = 1.0
#: ... and more than this share of the time elapsed
DRIFT_SHARE = 0.01
#: a timestamp this many seconds before the previous frame's
JUMP_S = 1.0
#: a reader that waited for data less than this share of the time read slower than the frames came
#: (backed up)
BACKED_UP_SHARE = 0.05


def probe_verdict(
    ts_rate: float | None, arrival_rate: float | None, ts_span: float, arrival_span: float
) -> str | None:
    """At connection: why the source's clock is not believed (None: believed, or no verdict
    possible). Only its time running ahead of the arrival clock is a verdict here (see the module
    docstring)."""
    if not ts_rate or not arrival_rate or ts_rate <= 0 or arrival_rate <= 0:
        return None
    factor = arrival_rate / ts_rate
    if factor <= PROBE_FACTOR or ts_span - arrival_span <= PROBE_AHEAD_S:
        return None
    return (
        f"its timestamps give {ts_rate:.4g} FPS but its first frames arrived at "
        f"{arrival_rate:.4g} FPS: "
        f"{ts_span:.3g} s of its time in {arrival_span:.3g} s, more than {PROBE_FACTOR:g}x and "
        f"{PROBE_AHEAD_S:g} s ahead"
    )


class ClockCheck:
    """Checks a source's timestamps against arrival times frame by frame; :meth:`stamp` gives the
    timestamp to use.

    ``on_mismatch(text)`` is called once, with the one line that says what was found (the live
    loader prints it and sets the metric). Not thread-safe: the capture thread calls :meth:`stamp`;
    :meth:`note_wait` may be called from the same thread (the loader's capture waits for a slot
    there).
    """

    def __init__(self, source: str = "the source") -> None:
        self.source = source
        self.believed = True
        self.kind: str | None = None  # "probe", "ahead", "behind", "back"
        self.text: str | None = None
        self.frame: int | None = None  # the first frame stamped on the arrival clock
        # the latest window's ratio (source time per arrival second)
        self.ratio: float | None = None
        self.drift_s: float | None = None  # source time minus arrival time since the first window
        self.windows = 0
        self.on_mismatch: Callable[[str], None] | None = None
        self._n = 0
        self._last: tuple[float, float] | None = None  # (source ts, arrival) of the previous frame
        # (timestamp given, arrival) of the previous frame
        self._out: tuple[float, float] | None = None
        self._win_start: float | None = None
        self._win_best: tuple[float, float, float] | None = None  # (arrival - ts, ts, arrival)
        self._prev_best: tuple[float, float, float] | None = None
        self._ref: tuple[float, float, float] | None = None
        self._waited = False
        self._read_wait = 0.0
        self._min_offset: float | None = None

    # ------------------------------------------------------------------ inputs

    def distrust(self, kind: str, why: str) -> None:
        """The source's clock is not believed from the next frame on (``kind``: what was found,
        ``why``: in words)."""
        if not self.believed:
            return
        self.believed = False
        self.kind = kind
        self.frame = self._n
        self.text = (
            f"{self.source}: the source's clock is not believable ({why}); from frame {self._n} "
            "on the "
            f"run uses the arrival clock for timestamps, durations, rates and the gate's times"
        )
        if self.on_mismatch is not None:
            self.on_mismatch(self.text)

    def note_wait(self) -> None:
        """The capture waited for a free ring slot (``--on-overload block``): frames may arrive
        late meanwhile."""
        self._waited = True

    def note_read(self, seconds: float) -> None:
        """The reader waited ``seconds`` for the next packet (a reader that never waits is backed
        up)."""
        self._read_wait += seconds

    def new_segment(self) -> None:
        """A reconnected stream: its timestamps start again (continued on the arrival clock by
        the source)."""
        self._last = None
        self._min_offset = None
        self._win_start = self._win_best = self._prev_best = self._ref = None

    def stamp(self, ts: float, arrival: float) -> float:
        """The timestamp of a frame whose source time is ``ts`` (seconds) and arrival ``arrival``
        (``perf_counter``): ``ts`` while the source's clock is believed, else the arrival clock's.
        """
        if self.believed:
            self._check(ts, arrival)
        if self.believed:
            out = ts
        elif self._out is None:
            out = 0.0
        else:
            out = self._out[0] + max(0.0, arrival - self._out[1])
        self._out = (out, arrival)
        self._n += 1
        return out

    # ------------------------------------------------------------------ the checks

    def _check(self, ts: float, arrival: float) -> None:
        if self._last is not None and ts - self._last[0] < -JUMP_S:
            self.distrust(
                "back",
                f"its time went back {self._last[0] - ts:.3g} s between two frames, more than "
                f"{JUMP_S:g} s",
            )
            return
        offset = arrival - ts
        ref = self._ref
        base = ref[0] if ref is not None else self._min_offset
        allowed = AHEAD_S + (DRIFT_SHARE * (arrival - ref[2]) if ref is not None else 0.0)
        if base is not None and offset < base - allowed:
            self.distrust(
                "ahead",
                f"its time got {base - offset:.3g} s ahead of the arrival clock (frames cannot "
                f"arrive before they are taken), more than {AHEAD_S:g} s",
            )
            return
        if ref is None:  # until the first window is closed: the least-delayed frame so far
            self._min_offset = offset if self._min_offset is None else min(self._min_offset, offset)
        self._last = (ts, arrival)
        here = (offset, ts, arrival)
        if self._win_start is None or self._win_best is None:
            self._win_start, self._win_best = arrival, here
            return
        if arrival - self._win_start < WINDOW_S:
            if here[0] < self._win_best[0]:
                self._win_best = here
            return
        self._close_window(arrival)
        self._win_start, self._win_best = arrival, here

    def _close_window(self, now: float) -> None:
        best = self._win_best
        assert best is not None and self._win_start is not None
        self.windows += 1
        if self._read_wait < BACKED_UP_SHARE * (now - self._win_start):
            # the reader never waited for data: frames came in late (see BACKED_UP_SHARE)
            self._waited = True
        self._read_wait = 0.0
        if self._prev_best is not None and best[2] > self._prev_best[2]:
            self.ratio = (best[1] - self._prev_best[1]) / (best[2] - self._prev_best[2])
        if self._ref is None:
            self._ref = best
        else:
            behind = (best[2] - self._ref[2]) - (best[1] - self._ref[1])
            elapsed = best[2] - self._ref[2]
            self.drift_s = -behind
            if behind > max(DRIFT_S, DRIFT_SHARE * elapsed) and not self._waited:
                self.distrust(
                    "behind",
                    f"its time fell {behind:.3g} s behind the arrival clock in {elapsed:.0f} s "
                    f"(its least-delayed frames), more than {DRIFT_S:g} s and {DRIFT_SHARE:.0%}; "
                    "or the sender sends its frames later and later",
                )
        self._prev_best = best
        self._waited = False

    def summary(self) -> dict[str, Any]:
        """The summary's ``live.clock``: what was checked, found and chosen."""
        return {
            "believed": self.believed,
            "clock": "source" if self.believed else "arrival",
            "mismatch": self.kind,
            "from_frame": self.frame,
            "message": self.text,
            "window_ratio": self.ratio,
            "drift_s": self.drift_s,
            "windows": self.windows,
            "tolerance": {
                "probe_factor": PROBE_FACTOR,
                "probe_ahead_s": PROBE_AHEAD_S,
                "window_s": WINDOW_S,
                "ahead_s": AHEAD_S,
                "drift_s": DRIFT_S,
                "drift_share": DRIFT_SHARE,
                "jump_s": JUMP_S,
                "backed_up_share": BACKED_UP_SHARE,
            },
        }
