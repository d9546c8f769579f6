"""Where a live frame's time goes between its arrival and its row: the per-hop breakdown.

Every record a worker sends the sink carries its frame's times on one clock (``time.perf_counter``,
``CLOCK_MONOTONIC`` on Linux, the same in every process of the run; see
:data:`eyeblink.runtime.procs.results.RESULT_DTYPE`), and the sink adds the moment it received the
batch and the moment it had written the rows. The hops are consecutive differences of those times,
so for each frame they add up to its arrival -> row written latency exactly (and so do their means;
the medians need not):

========================  ==========================================================================
``capture_to_worker``     arrival (the capture thread has the frame) -> its worker received the
                          batch: the ring copy, waiting for the batch to fill, the loader's queue
                          (pickle, pipe, unpickle)
``waiting_in_worker``     the worker has the batch -> it starts this frame (the frames before it in
                          the batch)
``analysis``              detection (on keyframes), the eye model, the openness; at a fast camera's
                          frame that uses keyframe work done beside the stream, the wait for it when
                          it outlasted ``keyframe_lag_ms`` (counted in ``timings.keyframe_waits``)
``worker_to_sink``        the frame analysed -> the sink received its batch (the frames after it in
                          the batch, the result queue)
``sink``                  the sink received the batch -> the row written and published (reordering
                          behind another worker's frames, the blink detector, the CSV row, LSL, the
                          gate, the API)
========================  ==========================================================================

``summary.json`` (``live.hops_ms``) holds each hop's p50, p99, max and mean over the run's analysed
frames (gap rows have no hops); ``scripts/bench_lab_latency.py`` prints them beside what a consumer
measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["HOPS", "HopRecord"]

#: (name, the record field it starts at, the field it ends at; None = when the sink had written the
#: rows)
HOPS: tuple[tuple[str, str, str | None], ...] = (
    ("capture_to_worker", "t_decoded", "t_got"),
    ("waiting_in_worker", "t_got", "t_start"),
    ("analysis", "t_start", "t_end"),
    ("worker_to_sink", "t_end", "t_recv"),
    ("sink", "t_recv", None),
)


#: the record fields the hops read, in order (the last column of the buffer is when the sink wrote
#: the row)
_TIMES = ("t_decoded", "t_got", "t_start", "t_end", "t_recv")


class HopRecord:
    """The hops of a run's analysed frames, in bounded memory (each hop a
    :class:`eyeblink.runtime.procs.roles.sink.LatencyRecord`).

    :meth:`add` copies the batch's times into a fixed buffer; the hops are worked out a buffer at a
    time (and before the summary): a live sink adds one frame at a time, and six latency records
    updated per frame cost ~100 µs of NumPy calls a frame."""

    PENDING = 1024

    def __init__(self) -> None:
        from eyeblink.runtime.procs.roles.sink import LatencyRecord, Pending

        self._hops = {name: LatencyRecord() for name, _, _ in HOPS}
        self._total = LatencyRecord()
        self._sums = dict.fromkeys([*self._hops, "end_to_end"], 0.0)
        self._pending = Pending(self._account, self.PENDING, width=len(_TIMES) + 1)

    def __len__(self) -> int:
        return len(self._total) + len(self._pending)

    def add(self, rows: np.ndarray, written: float) -> None:
        """Account for one batch of rows the sink wrote at ``written`` (perf_counter)."""
        names = rows.dtype.names or ()
        if "t_recv" not in names:
            return
        done = rows[~rows["dropped"]] if "dropped" in names else rows
        if len(done):
            self._pending.put(
                np.column_stack([*(done[f] for f in _TIMES), np.full(len(done), written)])
            )

    def _account(self, t: np.ndarray) -> None:
        """Times of analysed frames, one row each: the :data:`_TIMES` fields, then when the row
        was written."""
        col = {f: t[:, i] for i, f in enumerate(_TIMES)}
        written = t[:, -1]
        for name, start, end in HOPS:
            d = (col[end] if end is not None else written) - col[start]
            self._hops[name].add(d)
            self._sums[name] += float(np.sum(d))
        total = written - col["t_decoded"]
        self._total.add(total)
        self._sums["end_to_end"] += float(np.sum(total))

    def summary(self) -> dict[str, Any]:
        """``{hop: {p50, p99, max, mean}}`` in ms, then ``end_to_end`` (arrival -> row written);
        empty before a frame."""
        self._pending.flush()
        n = len(self._total)
        if not n:
            return {}
        out: dict[str, Any] = {}
        for name, rec in (*self._hops.items(), ("end_to_end", self._total)):
            out[name] = {
                "p50": round(rec.percentile_ms(50), 3),
                "p99": round(rec.percentile_ms(99), 3),
                "max": round(rec.max_s * 1000.0, 3),
                "mean": round(self._sums[name] / n * 1000.0, 4),
            }
        out["frames"] = n
        return out
