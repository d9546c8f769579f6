"""Many short recordings at once: a pool of long-lived processes, each running whole files.

Labs that record eyeblink conditioning often keep one short video per trial (100 trials a session,
0.5-2 s each). Through the multiprocess pipeline (:mod:`eyeblink.runtime.procs.parallel`) every
input costs its own start: a loader and ``W`` workers forked, a detector built and warmed up in
each, a ring made and unlinked, the processes joined: 0.3-0.5 s before the first frame, longer than
a short trial takes to analyse. Here the ``W`` processes are forked once, build their detector once,
keep the eye model the parent loaded (shared copy-on-write, as the pipeline's workers do), and each
takes the next whole input as soon as it is free:

    parent (deals inputs, gathers results, progress)
      ├─ file worker 0: open ─► reference pipeline (process_source) ─► finalize ─► next input …
      └─ file worker W-1: …

Each input runs the single-process reference from its first frame to its last, so its rows are the
reference's byte for byte (as every layout's are: tracking segments,
:mod:`eyeblink.runtime.pipeline`), and its files are complete when the worker reports it, whatever
the other inputs are doing. An input longer than :data:`POOL_MAX_FRAMES` (or of unknown length) is
handed back: the caller runs it through the multiprocess pipeline, where one file's frames use every
core.

Failures: an input's own error (:class:`~eyeblink.errors.EyeblinkError`: truncated, no face, ...) is
that input's, the others go on; a run-wide one (a model that does not load, an unwritable output)
stops the run; a worker that dies (a signal, the OOM killer) fails the input it held with a one-line
:class:`~eyeblink.errors.WorkerError`, and the others go on in the workers left. Stops: SIGINT and
SIGTERM reach the workers too (the parent forwards them); each stops its input at the current frame,
with its rows and an ``interrupted`` summary on disk, as the single-process run does.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink import host, stopping
from eyeblink.config import RunConfig
from eyeblink.errors import EyeblinkError, WorkerError, picklable_error
from eyeblink.landmarks import model_specs, register_missing
from eyeblink.runtime.procs.parallel import close_queues, end_processes
from eyeblink.runtime.procs.queues import POLL_S, get_until_stopped, put_until_stopped

if TYPE_CHECKING:
    from eyeblink.landmarks import EyeModel
    from eyeblink.outputs.session import RunResult

#: Inputs up to this many frames (16 tracking segments: 4 s at 500 FPS) run whole in one pool
#: process; a longer one goes through the multiprocess pipeline, whose start (~0.3-0.5 s) is then
#: under ~10% of its run.
POOL_MAX_FRAMES = 2048


@dataclass
class PoolOutcome:
    """What the pool did with its inputs: ``results`` and ``failures`` by input position,
    ``handed_back``: the positions of inputs too long (or of unknown length) for the pool, in input
    order."""

    results: dict[int, RunResult] = field(default_factory=dict)
    failures: dict[int, EyeblinkError] = field(default_factory=dict)
    handed_back: list[int] = field(default_factory=list)


class FilePool:
    """``workers`` processes that each run whole inputs through the single-process reference.

    ``run_one(source)`` is what a worker does with one opened input (process it, finalize it); it
    runs in the worker with the analyzer the worker built once (``self.analyzer``). ``fatal``: the
    error types that stop the whole run (raised in the parent once the workers have finished the
    inputs they hold). ``start_method``: how its processes start (the run's; None: the
    environment's, else auto).
    """

    def __init__(
        self,
        config: RunConfig,
        workers: int,
        fitter: EyeModel,
        run_one: Callable[[Any, Any], RunResult],
        fatal: tuple[type[EyeblinkError], ...],
        *,
        max_frames: int | None = None,
        start_method: str | None = None,
    ) -> None:
        self.cfg = config
        self.W = workers
        self.fitter = fitter
        self.run_one = run_one
        self.fatal = fatal
        self.max_frames = max_frames if max_frames is not None else POOL_MAX_FRAMES
        from eyeblink.runtime.procs.processes import context, resolve_start_method

        self._ctx = context(resolve_start_method(start_method))

    def __getstate__(self) -> dict[str, Any]:
        """What a worker started with ``spawn`` or ``forkserver`` gets: the settings, the queues; it
        loads the eye model itself (the parent's is shared only with forked workers)."""
        state = self.__dict__.copy()
        state.pop("_ctx", None)
        state["fitter"] = None
        # a model registered at run time too
        state["_eye_model_specs"] = model_specs((self.cfg.landmarks.model,))
        return state

    # ------------------------------------------------------------------ worker side

    def _worker_main(self, wid: int, paths: Sequence[Path]) -> None:
        """Take input positions from this worker's queue until ``None``; report each outcome."""
        # a stop (forwarded by the parent, or the terminal's) ends the input in order
        restore = stopping.install()
        threading.Thread(target=self._watch_stop, name="eyeblink-stop-watch", daemon=True).start()
        try:
            from eyeblink.frame.analyzer import FrameAnalyzer, StageClock, build_fitter
            from eyeblink.runtime.pipeline import build_detector
            from eyeblink.sources.files import open_source

            register_missing(getattr(self, "_eye_model_specs", {}))
            # the parent's (forked), else loaded here once
            fitter = self.fitter or build_fitter(self.cfg)
            analyzer = FrameAnalyzer(self.cfg, build_detector(self.cfg), fitter, StageClock())
            self._put(("ready", wid))
            while True:
                i = self._get(self.task_qs[wid])
                if i is None:
                    break
                self._put(self._one(i, paths[i], analyzer, open_source))
        except KeyboardInterrupt:
            pass
        # building the detector, or a bug outside an input: the run's error
        except BaseException as exc:
            self._put(("broken", wid, picklable_error(exc), traceback.format_exc()))
        finally:
            restore()
            if self._stopped():
                for q in (self.out_q, *self.task_qs):
                    q.cancel_join_thread()

    def _watch_stop(self) -> None:
        """The parent's forwarded stop, raised in this worker's main thread as the signal it was
        (``_thread.interrupt_main``: the stop handler runs as for a real signal, on every OS)."""
        while not self._stopped():
            signum = self.stop_signal.value
            if signum:
                _thread.interrupt_main(signum)
                return
            time.sleep(POLL_S)

    def _one(self, i: int, path: Path, analyzer: Any, open_source: Any) -> tuple[Any, ...]:
        try:
            with open_source(path, fps=self.cfg.fps) as source:
                n = source.frame_count_hint
                if n is None or n > self.max_frames:
                    return ("long", i)
                analyzer.reset()
                return ("done", i, self.run_one(source, analyzer))
        except KeyboardInterrupt as exc:  # the input's rows and its interrupted summary are on disk
            return ("stopped", i, stopping.reason(exc))
        except EyeblinkError as exc:
            return (
                "fatal" if isinstance(exc, self.fatal) else "failed",
                i,
                picklable_error(exc),
                None,
            )
        except Exception as exc:  # a bug: the input fails with the traceback, the others go on
            err = WorkerError(
                f"file worker (pid {os.getpid()}) failed on {path}: {type(exc).__name__}: {exc}"
            )
            return ("failed", i, err, traceback.format_exc())

    def _stopped(self) -> bool:
        return self.stop.is_set() or not host.parent_alive()

    def _get(self, q: Any) -> Any:
        return get_until_stopped(q, self._stopped, KeyboardInterrupt)

    def _put(self, item: Any) -> None:
        put_until_stopped(self.out_q, item, self._orphaned, KeyboardInterrupt)

    def _orphaned(self) -> bool:
        return not host.parent_alive()

    # ------------------------------------------------------------------ parent side

    def run(
        self, paths: Sequence[Path], *, on_done: Callable[[int, RunResult], None] | None = None
    ) -> PoolOutcome:
        """Process ``paths`` (each a whole input) on the pool; ``on_done(position, result)`` as each
        ends.

        Raises the stop (``KeyboardInterrupt``) once every worker has ended the input it held, or
        the first run-wide error (``fatal``)."""
        ctx = self._ctx
        self.stop = ctx.Event()
        # the parent's stop for the inputs in hand: its signal number
        self.stop_signal = ctx.Value("i", 0)
        self.task_qs = [ctx.Queue() for _ in range(self.W)]
        self.out_q = ctx.Queue()
        procs: list[Any] = []
        state = _Dealing(paths, self.W)
        try:
            self._fork(paths, procs)  # not inside a hold: the workers inherit none
        except BaseException:
            self._forward_stop(signal.SIGTERM)
            with stopping.held():
                self._shutdown(procs)
            raise
        # a stop signal is only recorded meanwhile: it is read below, between messages
        hold = stopping.held()
        try:
            self._loop(procs, state, on_done)
        # not through eyeblink.stopping (the Python API in a program)
        except KeyboardInterrupt as exc:
            state.stop = state.stop or exc
            self._forward_stop(signal.SIGINT)
        finally:
            hold.release(raise_stop=False)
            with stopping.held():
                self._shutdown(procs)
        if state.stop is not None:
            raise state.stop
        if state.fatal is not None:
            raise state.fatal
        out = state.out
        for i in state.todo:  # every worker died: what is left fails
            out.failures[i] = WorkerError(
                f"no file worker was left to process {paths[i]}; run it again"
            )
        out.handed_back.sort()
        return out

    def _loop(
        self, procs: list[Any], st: _Dealing, on_done: Callable[[int, RunResult], None] | None
    ) -> None:
        while True:
            if st.stop is None and stopping.received() is not None:
                st.stop = stopping.Stopped(stopping.received())  # type: ignore[arg-type]
                self._forward_stop(stopping.received())
            while st.idle and st.todo and st.fatal is None and st.stop is None:
                wid = st.idle.pop()
                st.holding[wid] = st.todo.pop()
                self.task_qs[wid].put(st.holding[wid])
            busy = any(i is not None for i in st.holding.values())
            if not busy and (
                not st.todo or st.fatal is not None or st.stop is not None or not st.alive
            ):
                return
            try:
                msg = self.out_q.get(timeout=POLL_S)
            except queue.Empty:
                self._check_deaths(procs, st)
                continue
            kind = msg[0]
            if kind == "ready":
                st.idle.append(msg[1])
                continue
            if kind == "broken":  # a worker that could not start (its detector): the run's error
                st.alive.discard(msg[1])
                st.fatal = st.fatal or _with_traceback(msg[2], msg[3])
                continue
            i = msg[1]
            wid = next(w for w, h in st.holding.items() if h == i)
            st.holding[wid] = None
            st.idle.append(wid)
            if kind == "done":
                st.out.results[i] = msg[2]
                if on_done is not None:
                    on_done(i, msg[2])
            elif kind == "long":
                st.out.handed_back.append(i)
            elif kind == "stopped":
                st.stop = st.stop or KeyboardInterrupt(msg[2])
            elif kind == "fatal":
                st.fatal = st.fatal or _with_traceback(msg[2], msg[3])
            else:
                st.out.failures[i] = _with_traceback(msg[2], msg[3])

    def _check_deaths(self, procs: list[Any], st: _Dealing) -> None:
        """A worker that died without a word (a signal, the OOM killer) fails the input it held."""
        for wid in list(st.alive):
            code = procs[wid].exitcode
            if code is None:
                continue
            st.alive.discard(wid)
            with contextlib.suppress(ValueError):
                st.idle.remove(wid)
            i = st.holding.pop(wid, None)
            if i is not None:
                why = (
                    f"killed by signal {signal.Signals(-code).name}"
                    if code < 0
                    else f"exited with status {code}"
                )
                st.out.failures[i] = WorkerError(
                    f"file worker {wid} (pid {procs[wid].pid}) died while processing "
                    f"{st.paths[i]} ({why}); run it again"
                )

    def _fork(self, paths: Sequence[Path], procs: list[Any]) -> None:
        """Start the workers (appended to ``procs`` as they start;
        :func:`~eyeblink.runtime.procs.processes.start_children`, SIGINT and SIGTERM blocked
        meanwhile: a stop then is recorded by the parent and forwarded)."""
        from eyeblink.runtime.procs.processes import start_children

        start_children(
            self._ctx,
            [(self._worker_main, (w, paths), f"eyeblink-files-{w}") for w in range(self.W)],
            procs,
        )

    def _forward_stop(self, signum: int | None) -> None:
        """Pass the parent's stop (the same signal) to every worker: each ends its input at the
        current frame, its rows and its ``interrupted`` summary on disk. Through shared memory, not
        a signal: on Windows a signal sent to a process ends it at once (no handler runs), and a
        stop that did not come from the console (a program that stops its ``eyeblink.process``)
        would reach no worker by itself."""
        with self.stop_signal.get_lock():
            if not self.stop_signal.value:
                self.stop_signal.value = int(signum or signal.SIGTERM)

    def _shutdown(self, procs: list[Any]) -> None:
        for q in self.task_qs:
            with contextlib.suppress(Exception):
                q.put(None)
        end_processes(procs, 10.0, self.stop.set, terminate_wait_s=2.0)
        close_queues((*self.task_qs, self.out_q))


class _Dealing:
    """The parent's view of the pool while it runs: inputs left (``todo``, next last), what each
    worker holds."""

    def __init__(self, paths: Sequence[Path], workers: int) -> None:
        self.paths = paths
        self.todo = list(range(len(paths)))[::-1]
        self.holding: dict[int, int | None] = dict.fromkeys(range(workers))
        self.idle: list[int] = []
        self.alive = set(range(workers))
        self.out = PoolOutcome()
        self.fatal: EyeblinkError | None = None
        self.stop: BaseException | None = None


def _with_traceback(exc: EyeblinkError, tb: str | None) -> EyeblinkError:
    if tb:
        exc.traceback_text = tb  # type: ignore[attr-defined]
    return exc
