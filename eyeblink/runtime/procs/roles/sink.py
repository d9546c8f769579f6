"""The sink role of a multiprocess run, in the parent: reorder the rows, write them, notice a
failing child.

:meth:`_SinkRole._sink_loop` receives the workers' record arrays, writes them in frame order through
the :class:`~eyeblink.runtime.pipeline.SessionSink` (or hands them to a caller, ``measure``), merges
the loaders' end-of-input reports and turns a child's report or death into a one-line
:class:`~eyeblink.errors.WorkerError` after the rows below it are written. :class:`LatencyRecord`
keeps the frame-to-row latencies for the summary.
"""

from __future__ import annotations

import math
import queue
import signal
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from eyeblink import stopping
from eyeblink.errors import EyeblinkError, WorkerError
from eyeblink.frame.analyzer import StageClock
from eyeblink.runtime.pipeline import SessionSink
from eyeblink.runtime.procs.results import decode_rows, record_dtype, rows_of
from eyeblink.runtime.procs.roles.base import _POLL_S, _RunState


@dataclass
class _Redetections:
    redetections: int = 0


class Pending:
    """A fixed buffer of values handed to ``account`` a buffer at a time (:meth:`flush` hands over
    the rest).

    For records a live sink feeds one frame at a time, where a NumPy update per frame would cost
    more than the frame's own bookkeeping: :meth:`put` only copies. ``width``: values are rows of
    that many floats (else scalars).
    """

    def __init__(self, account: Any, size: int = 1024, width: int | None = None) -> None:
        self.account = account
        self.size = size
        self._buf = np.empty(size if width is None else (size, width), np.float64)
        self._k = 0

    def __len__(self) -> int:
        return self._k

    @property
    def nbytes(self) -> int:
        return self._buf.nbytes

    def put(self, values: np.ndarray) -> None:
        m = len(values)
        if self._k + m > self.size:
            self.flush()
        if m > self.size:
            self.account(values)
            return
        self._buf[self._k : self._k + m] = values
        self._k += m

    def flush(self) -> None:
        if self._k:
            k, self._k = self._k, 0
            self.account(self._buf[:k])


class LatencyRecord:
    """The frame-to-row latencies of a run, for the summary's p50, p99 and max, in bounded memory.

    The first ``exact_frames`` latencies are kept as they are (the percentiles are then
    ``np.percentile``'s, as before); past them, all are counted in a histogram of log-spaced bins
    ``rel`` wide (1 µs to 10,000 s, ~23,000 bins, 184 KB), and a percentile is its bin's geometric
    middle: within ``rel / 2`` of the exact value. A live run at 500 FPS kept every latency before
    (8 bytes a frame plus a small array per batch, ~0.5 MB a minute); this holds ``8 *
    exact_frames`` bytes (the first latencies, kept) plus the histogram, however long the run. The
    max is exact.

    :meth:`add` only copies into a fixed buffer of :attr:`PENDING` latencies; they are accounted for
    a buffer at a time (and before any figure is read): a live sink adds one frame at a time, and a
    histogram update per frame (~50 µs of NumPy calls) was a tenth of its CPU at 500 FPS once a
    session passed its exact part.
    """

    LO_S = 1e-6
    HI_S = 1e4
    PENDING = 1024

    def __init__(self, exact_frames: int = 65536, rel: float = 1e-3) -> None:
        self.exact_frames = exact_frames
        self.n = 0  # accounted for (the pending ones are not yet)
        self._max_s = -math.inf
        self._exact = np.empty(exact_frames, np.float64)
        self._log_step = math.log1p(rel)
        self._bins = math.ceil(math.log(self.HI_S / self.LO_S) / self._log_step) + 1
        self._counts: np.ndarray | None = None
        self._pending = Pending(self._account, self.PENDING)

    def __len__(self) -> int:
        return self.n + len(self._pending)

    def add(self, latencies_s: np.ndarray | float) -> None:
        """Record one batch of latencies (seconds)."""
        lat = np.asarray(latencies_s, np.float64).ravel()
        if len(lat):
            self._pending.put(lat)

    def _flush(self) -> None:
        self._pending.flush()

    def _account(self, lat: np.ndarray) -> None:
        self._max_s = max(self._max_s, float(lat.max()))
        keep = min(len(lat), self.exact_frames - min(self.n, self.exact_frames))
        self._exact[self.n : self.n + keep] = lat[:keep]
        if self._counts is None and self.n + len(lat) > self.exact_frames:
            # past the exact part: everything into the histogram
            self._counts = np.zeros(self._bins, np.int64)
            self._count(self._exact[: self.n + keep])
            self._count(lat[keep:])
        elif self._counts is not None:
            self._count(lat)
        self.n += len(lat)

    def _count(self, lat: np.ndarray) -> None:
        assert self._counts is not None
        idx = np.floor(np.log(np.maximum(lat, self.LO_S) / self.LO_S) / self._log_step)
        np.add.at(self._counts, np.clip(idx, 0, self._bins - 1).astype(np.intp), 1)

    @property
    def max_s(self) -> float:
        """The largest latency (seconds; -inf before any)."""
        self._flush()
        return self._max_s

    def percentile_ms(self, q: float) -> float:
        """The ``q``-th percentile in ms: exact (as before) while the exact part holds every
        latency."""
        self._flush()
        if self._counts is None:
            return float(np.percentile(self._exact[: self.n] * 1000.0, q))
        rank = q / 100.0 * (self.n - 1)  # np.percentile's (linear) rank, 0-based
        b = int(np.searchsorted(np.cumsum(self._counts), math.floor(rank) + 1))
        return min(self.LO_S * math.exp((b + 0.5) * self._log_step), self._max_s) * 1000.0

    def exact_ms(self) -> np.ndarray:
        """The first ``exact_frames`` latencies (ms), in the order they were written
        (``scripts/bench_live.py``)."""
        self._flush()
        return self._exact[: min(self.n, self.exact_frames)] * 1000.0

    def nbytes(self) -> int:
        """Bytes held by the record's arrays."""
        return (
            self._exact.nbytes
            + self._pending.nbytes
            + (self._counts.nbytes if self._counts is not None else 0)
        )


class _SinkRole(_RunState):
    """The sink's methods, run in the parent (a mixin of
    :class:`eyeblink.runtime.procs.parallel._Run`)."""

    def _latency_summary(self) -> dict[str, Any]:
        if not self.latencies:
            return {"latency_ms_p50": None, "latency_ms_p99": None, "latency_ms_max": None}
        lat = self.latencies
        return {
            "latency_ms_p50": lat.percentile_ms(50),
            "latency_ms_p99": lat.percentile_ms(99),
            "latency_ms_max": lat.max_s * 1000.0,
        }

    def _write(self, sink: SessionSink | None, rows: np.ndarray) -> None:
        if self._capture is not None:  # measure(): the rows go to the caller, no sink
            self._capture(rows)
        else:
            assert sink is not None
            add = sink.add
            for r in decode_rows(rows):
                add(r)
            self.latencies.add(time.perf_counter() - rows["t_decoded"])
        if self.written is not None:
            self.written.value = int(rows["index"][-1]) + 1

    def _states(self) -> str:
        """Each child's state for a stall's message: ``worker 1 pid 4242 running, loader pid 4240
        exited 0``."""
        states = []
        for p in self.procs:
            role = (
                "loader"
                if p is self.loader or p in self.loaders
                else f"accelerator {self.accel_procs.index(p)}"
                if p in self.accel_procs
                else f"worker {self.workers.index(p)}"
                if p in self.workers
                else "child"
            )
            code = p.exitcode
            states.append(f"{role} pid {p.pid} {'running' if code is None else f'exited {code}'}")
        return ", ".join(states)

    def _sink_loop(
        self, sink: SessionSink | None, clock: StageClock, redet: _Redetections, bar: Any
    ) -> dict[str, Any] | None:
        """Receive, reorder and write rows until every frame is written (or a failure stops the
        run)."""
        pending: dict[int, np.ndarray] = {}
        next_idx = 0
        expected: int | None = None
        done: set[int] = set()
        info: dict[str, Any] | None = None
        source_error: EyeblinkError | None = None
        failure: WorkerError | None = None
        limit = math.inf  # after a failure: write rows below this frame, then stop
        last_seen = dict.fromkeys(range(self.W), -1)
        fail_deadline = math.inf
        last_progress = time.perf_counter()
        stall = self.par.stall_timeout_s

        rows_file = sink.writer.frames_path.name if sink is not None else "the chunk's measurements"
        # the workers' record (eyeblink.runtime.procs.results.rows_message)
        row_dtype = record_dtype(self.cfg)

        def fail(
            role: str, wid: int, frame: int | None, line: str, tb: str | None, pid: int | None
        ) -> None:
            nonlocal failure, limit, fail_deadline
            who = {"worker": f"landmark worker {wid}", "accelerator": "accelerator stage"}.get(
                role, "frame loader"
            )
            if role == "accelerator" and self.n_stage > 1:
                who = f"accelerator stage process {wid}"
            where = f" at frame {frame}" if frame is not None and frame >= 0 else ""
            if failure is None:
                pid_s = f" (pid {pid})" if pid else ""
                failure = WorkerError(f"{who}{pid_s} failed{where}: {line}")
                failure.traceback_text = tb  # type: ignore[attr-defined]
                fail_deadline = time.perf_counter() + self.par.drain_timeout_s
            if role == "worker" and not self.accelerated:
                stop_at = (
                    frame
                    if frame is not None and frame >= 0
                    else self._first_owned_from(last_seen[wid] + 1, wid)
                )
            else:
                stop_at = frame if frame is not None and frame >= 0 else next_idx
            limit = min(limit, stop_at)

        while True:
            # a stop whose KeyboardInterrupt was swallowed on its way (an at-fork hook)
            stopping.check()
            end = expected if expected is not None else math.inf
            if failure is not None or source_error is not None:
                end = min(end, limit)
            if next_idx >= end and (
                failure is not None or source_error is not None or len(done) == self.n_done
            ):
                break
            if failure is not None and time.perf_counter() > fail_deadline:
                break
            try:
                msg = self.out_q.get(timeout=_POLL_S)
            except queue.Empty:
                now = time.perf_counter()
                for p in self.procs:
                    code = p.exitcode
                    if code not in (None, 0) and p.pid not in self._reported:
                        self._reported.add(p.pid)
                        role = (
                            "loader"
                            if p is self.loader or p in self.loaders
                            else "accelerator"
                            if p in self.accel_procs
                            else "worker"
                        )
                        wid = (
                            self.workers.index(p)
                            if role == "worker"
                            else self.accel_procs.index(p)
                            if role == "accelerator"
                            else -1
                        )
                        why = (
                            f"killed by signal {signal.Signals(-code).name}"
                            if code < 0
                            else f"exited with status {code}"
                        )
                        fail(
                            role,
                            wid,
                            None,
                            f"the process died without a report ({why})",
                            None,
                            p.pid,
                        )
                if failure is None and now - last_progress > stall:
                    raise WorkerError(
                        f"no progress for {stall:.0f} s (stuck at frame {next_idx}); "
                        f"the pipeline processes stopped answering ({self._states()})"
                    ) from None
                continue
            # any message is an answer: rows, reports, heartbeats ("tick")
            last_progress = time.perf_counter()
            if msg[0] == "part":  # one of several loaders finished: one "eof" once all have
                msg = self._merge_part(msg)
                if msg is None:
                    continue
            kind = msg[0]
            if kind == "rows":
                _, wid, payload = msg
                rows = rows_of(payload, row_dtype)
                if len(rows):
                    # the sink has it: a hop's end (eyeblink.runtime.live.hops)
                    rows["t_recv"] = time.perf_counter()
                    pending[int(rows["index"][0])] = rows
                    last_seen[wid] = int(rows["index"][-1])
                while next_idx in pending:
                    rows = pending.pop(next_idx)
                    if next_idx + len(rows) > limit:
                        rows = rows[: int(limit - next_idx)]
                        if not len(rows):
                            break
                    self._write(sink, rows)
                    next_idx += len(rows)
                    if bar is not None:
                        bar.update(len(rows))
            elif kind == "done":
                _, wid, seconds, calls, redetections, *extra = msg
                done.add(wid)
                if extra:
                    self.accel_infos.append(extra[0])
                clock.merge(seconds, calls)
                redet.redetections += redetections
            elif kind == "eof":
                _, expected, info, decode_s, decode_n, source_error = msg
                self._info = info
                clock.seconds["decode"] += decode_s
                clock.calls["decode"] += decode_n
                if source_error is not None:
                    limit = min(limit, expected)
            elif kind == "error":
                _, role, wid, frame, line, tb, user_error = msg
                pid = (
                    self._loader_pid(wid)
                    if role == "loader"
                    else self.accel_procs[wid].pid
                    if role == "accelerator"
                    else self.workers[wid].pid
                )
                if pid is not None:
                    self._reported.add(pid)
                if role == "loader" and isinstance(user_error, EyeblinkError) and failure is None:
                    source_error = user_error
                    limit = min(limit, frame)
                    fail_deadline = time.perf_counter() + self.par.drain_timeout_s
                    continue
                fail(role, wid, frame, line, tb, pid)
        if failure is not None:
            tb = failure.traceback_text  # type: ignore[attr-defined]
            # what is on disk: every row before the failure, or fewer where frames before it were
            # still queued (the accelerator stage fed by several loaders meets a later range's
            # batch first: the frames before it are never analysed once it is gone)
            kept = (
                "rows before it are in"
                if next_idx >= min(limit, expected if expected is not None else math.inf)
                else f"only the rows before frame {next_idx} (those analysed before it) are in"
            )
            err = WorkerError(
                f"{failure}; {kept} {rows_file}{' (traceback in the summary)' if tb else ''}"
            )
            err.traceback_text = tb  # type: ignore[attr-defined]
            raise err
        if source_error is not None:
            raise source_error
        return info
