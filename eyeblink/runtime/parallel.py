"""The staged multiprocess pipeline: a loader, a pool of detect+landmark workers, an ordered sink.

::

    parent (sink)  ◄──────────── results queue (one numpy record array per batch) ───────────┐
      SessionSink: reorder by frame, blinks, the only writer                                  │
                                                                                              │
    loader ──► shared-memory ring of frame slots ──► worker 0 … worker W-1 (fork, dlib model shared)
      decode (PyAV / PIL),  queues per worker carry      BlazeFace (LiteRT, fused: no pixel transfer)
      one memcpy per frame  (chunk, first index,         + dlib eye fit + EAR, keyframe policy per chunk
                            slots, timestamps)           ──► free-slot queue back to the loader

Why this shape (measured on a 2-core x86 VM, 640x480 MJPG, see ``eyeblink bench``):

* Decoding is sequential in one loader (0.65 ms/frame for high-quality MJPG, i.e. ~1,500 FPS):
  one stream keeps the container's timestamps, the frame numbering and the truncation checks of
  :mod:`eyeblink.sources.files` exactly as in the single-process reference.
* Pixels travel through a :class:`~eyeblink.runtime.shm.FrameRing`; queues carry only small records, and
  a whole batch of frames (``batch_frames``) per message, so the per-frame IPC cost is a few µs.
* On a CPU the detector is fused into the landmark workers: a separate detector process would
  need the pixels too and would add a hop; detection is ~1 ms and only runs on keyframes.
  On an accelerator (``detect.stage = "accelerator"``, the ``gpu`` preset) the workers are replaced by
  the accelerator stage (:mod:`eyeblink.runtime.accelerator`): stage processes that own the device run
  detection and the eye model on batches of frames, and post-processing workers cut the eye patches.
* Workers own **contiguous chunks** of ``chunk_frames`` frames (chunk ``c`` goes to worker
  ``c % W``), not single frames round-robin, so each worker keeps the tracking state of the
  keyframe policy (last box, frames since detection, inter-ocular reference) across its chunk.
  A file's chunks are whole tracking segments (``chunk_frames`` is rounded up to a multiple of
  :data:`~eyeblink.runtime.pipeline.SEGMENT_FRAMES`): the reference run restarts its tracking on the
  same frames, so the rows are byte-identical whatever the worker count, loader count or chunk size.
  Chunk size trade-off: bigger chunks mean fewer
  forced keyframes and longer tracking runs, but a bigger ring (``~W x chunk`` slots keep every
  worker busy), a bigger reorder buffer in the sink and a higher frame-to-row latency (a frame at
  the start of chunk ``c+1`` waits for chunk ``c`` to be written: ~``chunk / per-worker FPS``).
  The default, 128 frames (0.26 s at 500 FPS), keeps p99 latency well under a second and the
  ring under 100 MB for two workers. Live mode (:mod:`eyeblink.runtime.live`) deals chunks of 2 frames
  round-robin instead and lets each worker track the face across its chunks
  (``track_across_chunks``): latency first, and no forced keyframe per chunk.
* The 100 MB dlib model is loaded once in the parent before the workers are forked
  (copy-on-write: its pages stay shared); each worker builds its own LiteRT interpreter after the
  fork (interpreters and their thread pools must not cross a fork).

Failure handling: every queue is bounded and every ``put``/``get``/``join`` has a timeout. A
worker that raises sends its traceback to the sink; one that dies without a word (``os._exit``,
a signal, the OOM killer) is noticed through its exit code. Either way the sink first writes every
row below the failing frame that the other workers computed, then the run stops with a one-line
:class:`~eyeblink.errors.WorkerError` (exit status 3) and the traceback goes to the summary.
Ctrl-C or SIGTERM: the children ignore both; the parent stops them, keeps the rows written so far and
records ``status: interrupted``.

Test hook (documented, used by ``tests/test_parallel.py``): the environment variable
``EYEBLINK_TEST_WORKER_FAULT=raise@K`` makes the worker that analyses frame ``K`` raise
``RuntimeError``; ``exit@K`` makes it die with ``os._exit(70)`` before analysing it (once the rows it
already sent are out of its queue's feeder thread); ``stall@K`` makes
it send the rows before ``K`` and then wait, without analysing ``K``, until the run is stopped (so a
test can interrupt a run that is certain to be still going); ``pause@K`` makes it pause 2 s before frame ``K``,
then go on (a live run must drop frames meanwhile, on any machine); in the accelerator stage, ``stall@K``
stalls the stage on the batch holding ``K``, and ``slowstart@S`` makes its warm-up last ``S`` seconds longer
(a slow compile: its heartbeat runs meanwhile, see :mod:`eyeblink.runtime.accelerator`). It injects a real
failure into a real run; nothing else reads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink import stopping
from eyeblink.config import ParallelConfig, RunConfig, physical_cores
from eyeblink.errors import ConfigError, EyeblinkError, WorkerError
from eyeblink.frames import Frame
from eyeblink.outputs.export import ResultWriter, clean_json
from eyeblink.runtime.accelerator import stage_processes, stage_summary
from eyeblink.runtime.keyframes import BesideKeyframes
from eyeblink.runtime.pipeline import (
    ChunkStates,
    FrameAnalyzer,
    FrameResult,
    Outcome,
    ProgressFactory,
    RunResult,
    SessionSink,
    StageClock,
    aligned_frames,
    build_detector,
    build_fitter,
    finish_session,
    progress_bar,
    session_outcome,
    warn_once,
    write_running_summary,
)
from eyeblink.runtime.profiling import profiled
from eyeblink.runtime.queues import POLL_S, get_until_stopped, put_until_stopped
from eyeblink.runtime.results import RESULT_DTYPE, decode_rows, encode_batch, record_dtype
from eyeblink.runtime.shm import FrameRing, RingSpec

if TYPE_CHECKING:
    from eyeblink.landmarks import EyeModel
    from eyeblink.sources.files import FrameSource

__all__ = [
    "FAULT_ENV",
    "RESULT_DTYPE",
    "ParallelConfig",
    "ParallelPipeline",
    "physical_cores",
    "supports",
]

#: Environment variable of the fault-injection test hook (see the module docstring).
FAULT_ENV = "EYEBLINK_TEST_WORKER_FAULT"

_POLL_S = POLL_S  # how often a blocked get/put wakes up to check the stop event and its peers


def _warm_up(analyzer: FrameAnalyzer, source: Any) -> None:
    """One detection and one fit on a blank frame before the first real one.

    The first LiteRT invoke packs XNNPACK's weights (detector, mesh) and a first dlib fit pages in its model,
    together ~100-200 ms: paid here, before a live capture starts, instead of on the first frames.
    """
    h, w = int(getattr(source, "height", 0) or 480), int(getattr(source, "width", 0) or 640)
    blank = np.full((h, w), 128, np.uint8)
    analyzer.detector.detect(blank)
    analyzer.fitter.warm_up(blank)


def beside_keyframes(config: RunConfig, fitters: Any, source: Any) -> BesideKeyframes | None:
    """A live worker's thread for keyframe work (:mod:`eyeblink.runtime.keyframes`), its networks warmed up on
    a blank frame; None when lagging is off or no eye model of the run places apart from measuring."""
    fitter = next((f for f in fitters if hasattr(f, "new_mesher")), None)
    if fitter is None or config.detect.keyframe_lag_ms <= 0:
        return None
    beside = BesideKeyframes(build_detector(config), fitter.new_mesher())
    h, w = int(getattr(source, "height", 0) or 480), int(getattr(source, "width", 0) or 640)
    blank = np.full((h, w), 128, np.uint8)
    beside.detector.detect(blank)
    beside.mesher.warm_up(blank)
    return beside


def supports(config: RunConfig) -> bool:
    """Whether :class:`ParallelPipeline` runs ``config``: CPU detection fused into the workers (LiteRT), or
    the accelerator stage (``detect.stage``; :mod:`eyeblink.runtime.accelerator`: one process owns the
    device, which must not be initialised before a fork nor once per worker).

    Other runs (the IPU backend, a Keras backend with ``--stage fused``) use the single-process reference.
    """
    from eyeblink.detect import BackendName

    return (config.detect.accelerator_stage
            or str(config.detect.backend).strip().lower() == BackendName.LITERT.value)


def end_processes(procs: Sequence[Any], wait_s: float, before_forcing: Callable[[], None] | None = None,
                  terminate_wait_s: float = 1.0) -> None:
    """Wait up to ``wait_s`` in all for ``procs`` to end; then ``before_forcing()`` (e.g. set the stop event), and
    SIGTERM, then SIGKILL, whatever is still alive."""
    deadline = time.monotonic() + wait_s
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    if before_forcing is not None:
        before_forcing()
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(timeout=terminate_wait_s)
        if p.is_alive():
            p.kill()
            p.join(timeout=1.0)


def close_queues(queues: Iterable[Any]) -> None:
    """Close multiprocessing queues without waiting for their feeder threads (the readers may be gone)."""
    for q in queues:
        if q is not None:
            q.cancel_join_thread()
            q.close()


class _Stop(Exception):
    """Raised inside a child when the run is being stopped (or the parent vanished)."""


_PAUSE_S = 2.0  # the pause@K test hook's pause


def _parse_fault() -> tuple[str, int] | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    kind, _, at = spec.partition("@")
    if kind not in ("raise", "exit", "stall", "pause", "slowstart") or not at.strip().isdigit():
        raise ConfigError(f"{FAULT_ENV} must be 'raise@K', 'exit@K', 'stall@K', 'pause@K' (K a frame index) or "
                          f"'slowstart@S' (S seconds), got {spec!r}")
    return kind, int(at)


class _SourceView:
    """What :func:`build_summary` needs from a source whose frames were decoded in another process."""

    def __init__(self, source: FrameSource, info: dict[str, Any] | None) -> None:
        self.path = source.path
        self.name = source.name
        self._source = source
        self._info = info

    def describe(self) -> dict[str, Any]:
        return self._info if self._info is not None else self._source.describe()


@dataclass
class _Redetections:
    redetections: int = 0


class ParallelPipeline:
    """Runs inputs through loader -> workers -> ordered sink. Build once per run (loads the models).

    ``fitter`` is loaded here, in the parent, so that the forked workers share its 100 MB of
    model pages; :meth:`process_source` forks a fresh loader and worker set per input (a fork of
    the loaded parent takes a few ms).
    """

    def __init__(self, config: RunConfig, parallel: ParallelConfig | None = None,
                 fitter: EyeModel | None = None) -> None:
        if sys.platform == "win32" or "fork" not in mp.get_all_start_methods():
            raise ConfigError("the multiprocess pipeline needs the 'fork' start method (Linux, macOS); "
                              "use --workers 1 here")
        self.cfg = config
        self.par = parallel or ParallelConfig()
        self.accelerated = config.detect.accelerator_stage
        #: warnings the settings get from the pipeline (the summary's, said once on stderr)
        self.notes: list[str] = []
        if self.accelerated:
            from dataclasses import replace

            from eyeblink.runtime.accelerator import check_stage, stage_note

            # the networks are built in the accelerator process: here only what can be checked without
            # starting the device (an initialised JAX, TensorFlow or CUDA must not be forked)
            check_stage(config)
            note = stage_note(config)
            if note:  # a Keras backend detects on every frame: the settings the summary records say so
                warn_once(note)
                self.notes.append(note)
                self.cfg = config = replace(config, detect=replace(config.detect, detect_every=1))
            # the model files, loaded once with LiteRT (not the device's runtime: safe before a fork), so that a
            # missing or corrupt --face-model / --landmark-model is the usual one-line error before any frame
            from eyeblink.detect import create_detector

            create_detector("litert", model_path=Path(config.detect.model_path) if config.detect.model_path
                            else None).close()
            if fitter is None:
                build_fitter(config).close()
            self.fitter: EyeModel | None = fitter  # the workers only post-process: no eye model of their own
        else:
            self.fitter = fitter or build_fitter(config)
            # fail early (in the parent, with the registry's message) if the backend or model cannot load
            build_detector(config).close()
        self._ctx = mp.get_context("fork")

    # ------------------------------------------------------------------ parent side

    def process_source(self, source: FrameSource, outdir: Path, *,
                       progress: ProgressFactory | None = None) -> RunResult:
        """Process one opened source into ``outdir`` (the same files as the reference pipeline)."""
        run = _Run(self, source)
        return run.execute(outdir, progress)

    def measure_source(self, source: FrameSource,
                       capture: Callable[[np.ndarray], None]) -> tuple[dict[str, Any] | None, StageClock, int]:
        """The per-frame stage of one opened source, its records in frame order to ``capture`` (see
        :meth:`_Run.measure`)."""
        return _Run(self, source).measure(capture)


class LatencyRecord:
    """The frame-to-row latencies of a run, for the summary's p50, p99 and max, in bounded memory.

    The first ``exact_frames`` latencies are kept as they are (the percentiles are then ``np.percentile``'s, as
    before); past them, all are counted in a histogram of log-spaced bins ``rel`` wide (1 µs to 10,000 s, ~23,000
    bins, 184 KB), and a percentile is its bin's geometric middle: within ``rel / 2`` of the exact value. A live
    run at 500 FPS kept every latency before (8 bytes a frame plus a small array per batch, ~0.5 MB a minute);
    this holds ``8 * exact_frames`` bytes (the first latencies, kept) plus the histogram, however long the run.
    The max is exact.
    """

    LO_S = 1e-6
    HI_S = 1e4

    def __init__(self, exact_frames: int = 65536, rel: float = 1e-3) -> None:
        self.exact_frames = exact_frames
        self.n = 0
        self.max_s = -math.inf
        self._exact = np.empty(exact_frames, np.float64)
        self._log_step = math.log1p(rel)
        self._bins = math.ceil(math.log(self.HI_S / self.LO_S) / self._log_step) + 1
        self._counts: np.ndarray | None = None

    def __len__(self) -> int:
        return self.n

    def add(self, latencies_s: np.ndarray) -> None:
        """Record one batch of latencies (seconds)."""
        lat = np.asarray(latencies_s, np.float64).ravel()
        if not len(lat):
            return
        self.max_s = max(self.max_s, float(lat.max()))
        keep = min(len(lat), self.exact_frames - min(self.n, self.exact_frames))
        self._exact[self.n:self.n + keep] = lat[:keep]
        if self._counts is None and self.n + len(lat) > self.exact_frames:
            self._counts = np.zeros(self._bins, np.int64)  # past the exact part: everything into the histogram
            self._count(self._exact[:self.n + keep])
            self._count(lat[keep:])
        elif self._counts is not None:
            self._count(lat)
        self.n += len(lat)

    def _count(self, lat: np.ndarray) -> None:
        assert self._counts is not None
        idx = np.floor(np.log(np.maximum(lat, self.LO_S) / self.LO_S) / self._log_step)
        np.add.at(self._counts, np.clip(idx, 0, self._bins - 1).astype(np.intp), 1)

    def percentile_ms(self, q: float) -> float:
        """The ``q``-th percentile in ms: exact (as before) while the exact part holds every latency."""
        if self._counts is None:
            return float(np.percentile(self._exact[:self.n] * 1000.0, q))
        rank = q / 100.0 * (self.n - 1)  # np.percentile's (linear) rank, 0-based
        b = int(np.searchsorted(np.cumsum(self._counts), math.floor(rank) + 1))
        return min(self.LO_S * math.exp((b + 0.5) * self._log_step), self.max_s) * 1000.0

    def exact_ms(self) -> np.ndarray:
        """The first ``exact_frames`` latencies (ms), in the order they were written (``scripts/bench_live.py``)."""
        return self._exact[:min(self.n, self.exact_frames)] * 1000.0

    def nbytes(self) -> int:
        """Bytes held by the record's arrays."""
        return self._exact.nbytes + (self._counts.nbytes if self._counts is not None else 0)


class _Batcher:
    """The loader's outgoing frame records: gathered until ``batch_frames`` are waiting or a chunk
    ends, then sent as one message to the worker that owns the chunk (``chunk % W``)."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self.n = 0  # frames added so far: the next frame's index
        self._first = 0
        self._slots: list[int] = []
        self._ts: list[float] = []
        self._td: list[float] = []

    def add(self, slot: int, timestamp_s: float, t_decoded: float) -> None:
        """One frame (``slot`` -1: a gap the live loader dropped); sent when its batch or chunk is full."""
        preview = self._run.preview
        if preview is not None and slot >= 0 and preview.wanted():  # the view asked for a frame (<= 30 a second)
            preview.put(self.n, self._run.ring[slot])  # type: ignore[index]
        self._slots.append(slot)
        self._ts.append(timestamp_s)
        self._td.append(t_decoded)
        self.n += 1
        if len(self._slots) >= self._run.B or self.n % self._run.C == 0:
            self.flush()

    @property
    def starting(self) -> bool:
        """Whether the next frame starts a batch (none is waiting)."""
        return not self._slots

    def start_at(self, first: int) -> None:
        """Continue at frame ``first`` (a loader's next range; ranges start on chunk boundaries)."""
        self.flush()
        self.n = self._first = first

    def flush(self) -> None:
        """Send what is waiting (the end of the input: a partial batch)."""
        if self._slots:
            run = self._run
            c = self._first // run.C
            run._put(run._dest(c), (c, self._first, np.asarray(self._slots, np.int32),
                                              np.asarray(self._ts), np.asarray(self._td)))
            self._slots.clear()
            self._ts.clear()
            self._td.clear()
        self._first = self.n


class _Run:
    """One input through the process pipeline (all the state of the parent side)."""

    def __init__(self, pipe: ParallelPipeline, source: FrameSource) -> None:
        self.pipe = pipe
        self.cfg = pipe.cfg
        self.par = pipe.par
        self.source = source
        self.W = pipe.par.n_workers
        self.dealt = self.W  # the workers chunks are dealt to (a live run on few cores may use fewer: live.py)
        # a file's chunks are whole tracking segments (pipeline.SEGMENT_FRAMES), so that every chunk starts where
        # the reference run restarts its tracking too: the rows do not depend on the layout; live runs (each worker
        # tracks across its own small chunks) deal the chunks they ask for
        self.C = (pipe.par.chunk_frames if pipe.par.track_across_chunks
                  else aligned_frames(pipe.par.chunk_frames))
        self.B = pipe.par.batch_frames
        self.fault = _parse_fault()
        self.spec: RingSpec | None = self._ring_spec()
        self.parent_pid = os.getpid()
        self.ring: FrameRing | None = None
        self.ring_name: str | None = None
        #: the browser view's frame grab (eyeblink.runtime.view.PreviewGrab; None: no view): the loaders hand it
        #: their newest frame when it asks, at most 30 a second
        self.view: Any = getattr(pipe, "view", None)
        self.preview: Any = self.view.preview if self.view is not None else None
        self.work_qs: list[Any] = []
        self.free_q: Any = None
        self.out_q: Any = None
        self.procs: list[Any] = []
        self.loader: Any = None
        self.workers: list[Any] = []
        self._reported: set[int] = set()  # pids whose failure is already known
        self.rescan_per_frame: int | None = None  # the blink detector's warm-up re-scan: at once (files)
        #: live (--on-overload drop): a frame that waited longer than this when its worker reaches it is not
        #: analysed but written as a gap row, so that the newest frames win and the latency stays bounded
        self.late_s: float | None = None
        self._info: dict[str, Any] | None = None
        #: :meth:`measure`: where the ordered records go instead of a sink
        self._capture: Callable[[np.ndarray], None] | None = None
        # several loaders on one input (_start_ranges); one loader: n_loaders 1, loaders []
        self.n_loaders = 1
        self.loaders: list[Any] = []
        self.free_qs: list[Any] = []
        self.plan: Any = None
        # what the automatic loader count was decided on (decode and worker ms per frame, one loader's share)
        self.placement: dict[str, float] | None = None
        self.written: Any = None  # the sink's next frame to write (shared): the loaders' window
        self._parts: dict[int, tuple[Any, ...]] = {}
        # the accelerator stage (eyeblink.runtime.accelerator): work_qs is then its one input queue, post_qs
        # the workers' queues; it reports "done" too (n_done)
        self.accelerated: bool = pipe.accelerated
        self.post_qs: list[Any] = []
        self.accel_procs: list[Any] = []
        self.accel_infos: list[dict[str, Any]] = []
        #: accelerator-stage processes sharing the device (detect.stage_processes; 0 when fused)
        self.n_stage = stage_processes(self.cfg) if self.accelerated else 0
        self.n_done = self.W + self.n_stage
        #: the accelerator stage's input queues: one shared by its processes, or one each under the keyframe
        #: policy (its tracking state is per chunk: whole chunks go to one process)
        self.stage_qs = 1
        if self.accelerated:
            from eyeblink.runtime.accelerator import keyframe_stage

            self.stage_qs = self.n_stage if keyframe_stage(self.cfg) else 1
        #: the accelerator stage compiles its programs for batches up to this size before the first frame
        self.warm_batch = 1
        if self.accelerated and self.spec is not None:
            from eyeblink.runtime.accelerator import stage_slots

            self.spec = RingSpec(stage_slots(self.cfg, self.spec.slots, self.W, self.B), self.spec.shape)

    def late_from(self) -> int:
        """The first frame the latency bound (``late_s``) applies to (a hook: live mode's start-up frames)."""
        return 0

    def _ring_spec(self) -> RingSpec | None:
        """The ring's geometry (a hook: live mode sizes it once the stream is open)."""
        from dataclasses import replace

        return RingSpec(replace(self.par, chunk_frames=self.C).slots, (self.source.height, self.source.width))

    def _end_of_input(self) -> None:
        """A loader's last message: one end marker per consumer of its queues (every worker, or every process
        of the accelerator stage)."""
        for q in self.work_qs:
            for _ in range(self.ends_per_queue):
                self._put(q, None)

    @property
    def ends_per_queue(self) -> int:
        """End markers a loader puts in each work queue: one per process that reads it."""
        return self.n_stage if self.accelerated and self.stage_qs == 1 else 1

    def _announce_ring(self, msg: tuple[Any, ...]) -> None:
        """Live mode: the ring exists now (``("ring", name, spec, prefault, model)``) — to every child that reads it."""
        if self.accelerated:
            for q in self.work_qs:
                for _ in range(self.ends_per_queue):  # once to every stage process
                    q.put(msg)
            for q in self.post_qs:
                q.put(msg)
        else:
            for q in self.work_qs:
                q.put(msg)

    def _dest(self, chunk: int) -> Any:
        """The queue a loader sends chunk ``chunk``'s frame records to (its worker, or the accelerator stage)."""
        return self.work_qs[chunk % (len(self.work_qs) if self.accelerated else self.dealt)]

    # ---------------------------------------------------------------- children

    def _child_setup(self) -> None:
        # SIGINT and SIGTERM to the whole group (Ctrl-C, Slurm) are the parent's to handle (it drains); the
        # child was forked with both blocked (_fork), so none ran the parent's handler here; a child that
        # does not stop when asked is killed by _shutdown
        stopping.child_ignores_stops()

    def _stopping(self) -> bool:
        """Whether this child should stop: the run's stop event is set, or the parent is gone."""
        return self.stop.is_set() or os.getppid() != self.parent_pid

    def _get(self, q: Any) -> Any:
        return get_until_stopped(q, self._stopping, _Stop)

    def _put(self, q: Any, item: Any) -> None:
        put_until_stopped(q, item, self._stopping, _Stop)

    def _report(self, role: str, wid: int, frame: int, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        line = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        user_error = exc if isinstance(exc, EyeblinkError) else None
        with contextlib.suppress(_Stop):
            self._put(self.out_q, ("error", role, wid, frame, line, tb, user_error))

    def _take_slot(self, free: list[int], free_q: Any, drain: bool = True) -> int:
        """A free ring slot for the next frame: wait for one if none is known, and take back every
        other slot the workers have freed meanwhile without waiting (``drain``; the file loaders do at the start
        of each batch: workers free slots a batch at a time, and an empty look at the queue costs a system call).
        """
        if not free:
            free.extend(self._get(free_q))
        elif not drain:
            return free.pop()
        while True:
            try:
                free.extend(free_q.get_nowait())
            except queue.Empty:
                break
        return free.pop()

    @contextlib.contextmanager
    def _as_loader(self, batch: _Batcher, on_exit: Callable[[], object] | None = None) -> Iterator[None]:
        """A loader's ends: a stop asked for (:class:`_Stop`) quits quietly; anything else is reported with the
        frames dealt so far and ends the process with status 1 (the parent reads the report); ``on_exit`` runs
        last in every case."""
        try:
            yield
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report("loader", -1, batch.n, exc)
            self._quit()
            raise SystemExit(1) from None
        finally:
            if on_exit is not None:
                on_exit()

    def _loader_main(self) -> None:
        self._child_setup()
        ring = self.ring
        assert ring is not None
        free: list[int] = list(range(len(ring) - 1, -1, -1))
        max_frames = self.cfg.max_frames
        decode_s = 0.0
        batch = _Batcher(self)
        source_error: EyeblinkError | None = None
        with self._as_loader(batch):
            frames = iter(self.source)
            while max_frames is None or batch.n < max_frames:
                t0 = time.perf_counter()
                try:
                    frame = next(frames)
                except StopIteration:
                    break
                except EyeblinkError as exc:  # decode error part-way: what came before still counts
                    source_error = exc
                    break
                t1 = time.perf_counter()
                decode_s += t1 - t0
                slot = self._take_slot(free, self.free_q, batch.starting)
                ring.put(slot, frame.image)
                batch.add(slot, frame.timestamp_s, t1)
            batch.flush()
            n = batch.n
            info = self.source.describe()
            self.source.close()
            self._put(self.out_q, ("eof", n, info, decode_s, n, source_error))
            self._end_of_input()

    def _on_batch(self, analyzer: FrameAnalyzer, fitters: dict[str, Any]) -> None:
        """Before each batch a worker runs: files run as configured (live mode steps down under load)."""

    def _worker_main(self, wid: int) -> None:
        self._child_setup()
        frame_index = -1
        try:
            detector = build_detector(self.cfg)
            assert self.pipe.fitter is not None  # fused workers: the parent loaded the eye model
            analyzer = FrameAnalyzer(self.cfg, detector, self.pipe.fitter, StageClock())
            fitters = getattr(self.pipe, "fitters", None) or {"": self.pipe.fitter}  # live: models to pick from
            for fitter in fitters.values():
                analyzer.fitter = fitter
                _warm_up(analyzer, self.source)
            analyzer.fitter = self.pipe.fitter
            track = self.par.track_across_chunks
            if track:  # live: each worker tracks the face across its own chunks, no segment restarts
                analyzer.segment_frames = None
                analyzer.keyframes = beside_keyframes(self.cfg, fitters.values(), self.source)
            self._worker_ready(wid)
            ring = self.ring  # None: forked before the ring existed; its first message names it
            fault = self.fault if self.fault is None or self.fault[0] != "slowstart" else None  # the stage's hook
            late = self.late_s
            preview = self.preview  # --view: the eye points of the frame the view shows
            row_dtype = record_dtype(self.cfg)
            chunk = -1
            chunks = ChunkStates(self.C)
            ends = 0
            while True:
                msg = self._get(self.work_qs[wid])
                if msg is None:  # one per loader: each sends its own after its last frame
                    ends += 1
                    if ends < self.n_loaders:
                        continue
                    break
                if msg[0] == "ring":
                    _, name, spec, prefault, model = msg
                    ring = self.ring = FrameRing.attach(name, spec)
                    ring.prefault(prefault)
                    if model is not None:  # live --landmarks auto: the model picked for the source's rate
                        analyzer.fitter = fitters[model]
                    continue
                assert ring is not None
                t_got = time.perf_counter()
                c, first, slots, ts, td = msg
                self._on_batch(analyzer, fitters)
                if c != chunk and not track:  # a new chunk: forget the tracked face (keyframe on its first frame)
                    chunks.switch(analyzer, chunk, c)
                    chunk = c
                out = np.zeros(len(slots), row_dtype)
                done_at: list[int] = []  # the batch's analysed frames: encoded into out at once (encode_results)
                done: list[FrameResult] = []
                t_starts: list[float] = []
                t_ends: list[float] = []
                slot_l, ts_l = slots.tolist(), ts.tolist()  # Python ints and floats: no numpy scalar per frame
                for j in range(len(slots)):
                    frame_index = first + j
                    if fault is not None and fault[1] == frame_index and fault[0] == "pause":
                        time.sleep(_PAUSE_S)  # slow on frame K for a moment, then on as usual
                    elif fault is not None and fault[1] == frame_index:
                        if fault[0] == "exit":  # a crash on frame K, not in the middle of IPC: the rows
                            self.out_q.close()  # already sent leave the queue's feeder thread first (on any
                            self.out_q.join_thread()  # machine: no timed pause)
                            os._exit(70)
                        if j:  # the rows before the failing frame are computed: send them first
                            encode_batch(out, td, done_at, done, t_starts, t_ends, t_got)
                            self._put(self.out_q, ("rows", wid, out[:j]))
                        if fault[0] == "stall":  # stuck on frame K until the run is stopped (Ctrl-C, SIGTERM)
                            while not self.stop.wait(_POLL_S) and os.getppid() == self.parent_pid:
                                pass
                            raise _Stop
                        raise RuntimeError(f"injected failure at frame {frame_index} ({FAULT_ENV})")
                    if slot_l[j] < 0 or (late is not None and time.perf_counter() - td[j] > late
                                         and frame_index >= self.late_from()):
                        # dropped by the live loader (eyeblink.runtime.live), or too late to be worth it: a gap row
                        out[j]["index"], out[j]["timestamp_s"], out[j]["t_decoded"] = frame_index, ts[j], td[j]
                        out[j]["dropped"] = True
                        continue
                    t_starts.append(time.perf_counter())
                    done.append(analyzer.analyze(Frame(frame_index, ts_l[j], ring[slot_l[j]])))
                    if preview is not None and preview.points_wanted() == frame_index:  # the view's image
                        preview.put_points(frame_index, analyzer.last_points)
                    done_at.append(j)
                    t_ends.append(time.perf_counter())
                encode_batch(out, td, done_at, done, t_starts, t_ends, t_got)
                self._put(self.out_q, ("rows", wid, out))
                self._release(slots[slots >= 0])
                chunks.advanced(c, first + len(slots))
            if analyzer.keyframes is not None:
                analyzer.keyframes.close()
            clock = analyzer.clock
            self._put(self.out_q, ("done", wid, dict(clock.seconds), dict(clock.calls), analyzer.redetections))
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report("worker", wid, frame_index, exc)
            self._quit()
            raise SystemExit(1) from None

    def _worker_ready(self, wid: int) -> None:
        """Called in worker ``wid`` once its detector is built (a hook: live mode starts capturing then)."""

    # ------------------------------------------------------------ the accelerator stage's children

    def _accelerator_main(self, sid: int) -> None:
        """Process ``sid`` of the accelerator stage (:func:`eyeblink.runtime.accelerator.stage_main`)."""
        from eyeblink.runtime.accelerator import stage_main

        self._guarded("accelerator", sid, lambda at: stage_main(self, sid, at))

    def _post_worker_main(self, wid: int) -> None:
        """A CPU worker of the accelerator stage (:func:`eyeblink.runtime.accelerator.post_worker_main`)."""
        from eyeblink.runtime.accelerator import post_worker_main

        row_dtype = record_dtype(self.cfg)
        self._guarded("worker", wid, lambda at: post_worker_main(self, wid, row_dtype, at))

    def _guarded(self, role: str, wid: int, body: Any) -> None:
        """Run a child's ``body(at)``: a stop ends it quietly; a failure goes to the sink as a report at frame
        ``at[0]`` (what the body last set) and the child exits 1."""
        self._child_setup()
        at = [-1]
        try:
            body(at)
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report(role, wid, at[0], exc)
            self._quit()
            raise SystemExit(1) from None

    def _check_stop(self) -> None:
        """Raise :class:`_Stop` in a child when the run is being stopped or the parent is gone."""
        if self._stopping():
            raise _Stop

    def _slow_start(self) -> None:
        """The test hook ``slowstart@S`` (module docstring): the accelerator stage's warm-up lasts ``S`` s longer."""
        if self.fault is not None and self.fault[0] == "slowstart":
            self.stop.wait(self.fault[1])
            self._check_stop()

    def _inject_fault(self, first: int, n: int) -> None:
        """The test hook (module docstring) in the accelerator stage: ``raise@K`` / ``exit@K`` / ``stall@K`` in the
        batch holding frame K (``first`` .. ``first + n - 1``)."""
        fault = self.fault
        if fault is None or fault[0] == "slowstart" or not first <= fault[1] < first + n:
            return
        if fault[0] == "stall":  # stuck (not compiling: no heartbeat) until the run is stopped
            while not self.stop.wait(_POLL_S) and os.getppid() == self.parent_pid:
                pass
            raise _Stop
        if fault[0] == "exit":
            time.sleep(0.3)  # the rows already sent leave the queues first
            os._exit(70)
        raise RuntimeError(f"injected failure at frame {fault[1]} ({FAULT_ENV})")

    def _fork_workers(self) -> None:
        """Fork the detect+landmark workers, or the accelerator stage and its post-processing workers."""
        if self.accelerated:
            self.workers = self._fork(*[(self._post_worker_main, (w,), f"eyeblink-worker-{w}") for w in range(self.W)])
            self.accel_procs = self._fork(*[(self._accelerator_main, (k,), f"eyeblink-accelerator-{k}")
                                            for k in range(self.n_stage)])
        else:
            self.workers = self._fork(*[(self._worker_main, (w,), f"eyeblink-worker-{w}") for w in range(self.W)])

    def _queues(self) -> tuple[Any, ...]:
        return (*self.work_qs, *self.post_qs, self.free_q, self.out_q)

    def _quit(self) -> None:
        if self._stopping():
            for q in self._queues():
                q.cancel_join_thread()

    # ---------------------------------------------------------------- parent

    def _owner(self, frame: int) -> int:
        return (frame // self.C) % self.dealt

    def _first_owned_from(self, frame: int, wid: int) -> int:
        """The first frame >= ``frame`` in a chunk owned by worker ``wid``."""
        c = frame // self.C
        if c % self.dealt == wid:
            return frame
        ahead = (wid - c) % self.dealt
        return (c + ahead) * self.C

    def _start(self) -> None:
        if self._start_ranges():
            return
        spec = self.spec
        assert spec is not None  # files: known from the opened source (_ring_spec)
        self._make_queues(spec.slots + 2)
        self.ring = FrameRing(spec)
        self.ring_name = self.ring.name
        # workers first: they load LiteRT while the loader fills the ring
        self._fork_workers()
        (self.loader,) = self._fork((self._loader_main, (), "eyeblink-loader"))

    def _make_queues(self, work_size: int) -> None:
        """The stop event and the queues (``work_size`` 0 = unbounded work and free-slot queues)."""
        ctx = self.pipe._ctx
        self.stop = ctx.Event()
        self.work_qs = [ctx.Queue(maxsize=work_size) for _ in range(self.stage_qs if self.accelerated else self.W)]
        if self.accelerated:
            self.post_qs = [ctx.Queue(maxsize=work_size) for _ in range(self.W)]
            self.stage_ends = ctx.Value("q", 0)
        self.free_q = ctx.Queue(maxsize=work_size)
        self.out_q = ctx.Queue(maxsize=max(8, 4 * self.W))

    def _fork(self, *targets: tuple[Any, tuple[Any, ...], str]) -> list[Any]:
        """Start one daemon child per ``(function, args, name)``; they are added to :attr:`procs`."""
        ctx = self.pipe._ctx
        procs = [ctx.Process(target=profiled(fn, name), args=args, name=name, daemon=True)
                 for fn, args, name in targets]
        # OpenCV's thread pool does not survive a fork (a child that touches it deadlocks): fork with
        # the pool torn down, so the children run cv2 single-threaded (one process per core already).
        cv2 = sys.modules.get("cv2")
        threads = cv2.getNumThreads() if cv2 is not None else None
        if cv2 is not None:
            cv2.setNumThreads(1)
        try:
            # SIGINT/SIGTERM blocked while forking: a stop then is handled after the fork by the parent alone
            # (never inside an at-fork hook, where Python discards it, nor by a child before _child_setup)
            with stopping.blocked():
                for p in procs:
                    p.start()
                    self.procs.append(p)
        finally:
            if cv2 is not None and threads is not None:
                cv2.setNumThreads(threads)
        return procs

    def _shutdown(self) -> None:
        if hasattr(self, "stop"):
            self.stop.set()
        end_processes(self.procs, 3.0)
        close_queues(self._queues())
        if self.ring is not None:
            self.ring.unlink()
            self.ring.close()

    def execute(self, outdir: Path, progress: ProgressFactory | None) -> RunResult:
        cfg, source = self.cfg, self.source
        clock = StageClock()
        redet = _Redetections()
        info: dict[str, Any] | None = None
        self.latencies = LatencyRecord()
        started = time.perf_counter()
        # a stop from the files' creation on is raised inside the try that writes the final summary
        with stopping.held() as hold, ExitStack() as stack:
            writer = self._make_writer(outdir, source.name)
            stack.callback(writer.close)
            sink = SessionSink(writer, cfg, clock, rescan_per_frame=self.rescan_per_frame)
            outcome = Outcome()
            try:
                with session_outcome(sink, source) as outcome:
                    hold.release()  # a stop since the files were created: raised here, the summary says so
                    with stopping.held():
                        write_running_summary(writer, source, cfg)
                    bar = progress_bar(stack, progress, source, cfg.max_frames)
                    try:
                        self._start()
                        info = profiled(self._sink_loop, "eyeblink-sink")(sink, clock, redet, bar)
                    finally:
                        with stopping.held():  # a second Ctrl-C does not leave children or the ring behind
                            self._shutdown()
            finally:
                # self.cfg: live mode may settle the landmark model once the source is open
                # the accelerator stage: its process says whether the device is there (the parent must not ask JAX)
                with stopping.held():  # the summary is written whole, whatever arrives meanwhile
                    warnings = (sorted({w for i in self.accel_infos for w in i.get("warnings", [])}
                                       | set(self.pipe.notes)) if self.accelerated else None)
                    for message in warnings or ():
                        warn_once(message)
                    summary = finish_session(writer, sink, _SourceView(source, info or self._info),  # type: ignore[arg-type]
                                             self.cfg, clock, redet, started, outcome, warnings=warnings,
                                             extend=self._summary_sections)
        return RunResult(source.name, sink.frames, sink.faces, sink.events, summary, sink.output_paths())

    def _summary_sections(self, summary: dict[str, Any]) -> None:
        """The multiprocess run's own sections of its summary: latencies, the layout, a live run's extras."""
        summary["timings"].update(self._latency_summary())
        summary["parallel"] = clean_json({
            "workers": self.W, "loaders": self.n_loaders,
            "split": self.plan.describe() if self.plan is not None else None,
            "placement": self.placement,
            "chunk_frames": self.C, "batch_frames": self.B,
            "ring_slots": self.spec.slots if self.spec else None,
            "ring_mb": self.spec.nbytes / 2**20 if self.spec else None,
            "ring_name": self.ring_name,
            "detector": "accelerator stage" if self.accelerated else "fused",
            "accelerator": stage_summary(self.accel_infos) if self.accelerated else None,
        })
        summary.update(self._extra_summary())
        summary["warnings"] = [*summary.get("warnings", []), *self._extra_warnings()]

    def measure(self, capture: Callable[[np.ndarray], None]) -> tuple[dict[str, Any] | None, StageClock, int]:
        """The per-frame stage alone: every frame's record (:func:`record_dtype`), in frame order, to ``capture``;
        no sink, no file. Returns the source's description, the stage clock and the redetections on drift.
        ``batch`` measures the chunks of one recording this way and runs one sink over all of them."""
        clock = StageClock()
        redet = _Redetections()
        self._capture = capture
        try:
            self._start()
            info = self._sink_loop(None, clock, redet, None)
        finally:
            with stopping.held():
                self._shutdown()
        return info or self._info, clock, redet.redetections

    def _make_writer(self, outdir: Path, stem: str) -> ResultWriter:
        """The sink's writer (a hook: live mode appends a ``dropped`` column; ``process --view`` shows the rows)."""
        if self.view is not None:
            return self.view.file_writer(outdir, self.source)  # type: ignore[no-any-return]
        return ResultWriter(outdir, stem)

    def _extra_warnings(self) -> list[str]:
        """Warnings the run itself raised while it ran (a hook: live mode's memory growth)."""
        return []

    def _extra_summary(self) -> dict[str, Any]:
        """Sections a subclass adds to the summary (live mode: ``live``)."""
        return {}

    def _latency_summary(self) -> dict[str, Any]:
        if not self.latencies:
            return {"latency_ms_p50": None, "latency_ms_p99": None, "latency_ms_max": None}
        lat = self.latencies
        return {"latency_ms_p50": lat.percentile_ms(50), "latency_ms_p99": lat.percentile_ms(99),
                "latency_ms_max": lat.max_s * 1000.0}

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

    def _sink_loop(self, sink: SessionSink | None, clock: StageClock, redet: _Redetections,
                   bar: Any) -> dict[str, Any] | None:
        """Receive, reorder and write rows until every frame is written (or a failure stops the run)."""
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
        last_progress = time.monotonic()
        stall = self.par.stall_timeout_s

        rows_file = sink.writer.frames_path.name if sink is not None else "the chunk's measurements"

        def fail(role: str, wid: int, frame: int | None, line: str, tb: str | None, pid: int | None) -> None:
            nonlocal failure, limit, fail_deadline
            who = {"worker": f"landmark worker {wid}", "accelerator": "accelerator stage"}.get(role, "frame loader")
            if role == "accelerator" and self.n_stage > 1:
                who = f"accelerator stage process {wid}"
            where = f" at frame {frame}" if frame is not None and frame >= 0 else ""
            err = WorkerError(f"{who}{f' (pid {pid})' if pid else ''} failed{where}: {line}; "
                              f"rows before it are in {rows_file}"
                              f"{' (traceback in the summary)' if tb else ''}")
            err.traceback_text = tb  # type: ignore[attr-defined]
            if failure is None:
                failure = err
                fail_deadline = time.monotonic() + self.par.drain_timeout_s
            if role == "worker" and not self.accelerated:
                stop_at = frame if frame is not None and frame >= 0 else self._first_owned_from(
                    last_seen[wid] + 1, wid)
            else:
                stop_at = frame if frame is not None and frame >= 0 else next_idx
            limit = min(limit, stop_at)

        while True:
            stopping.check()  # a stop whose KeyboardInterrupt was swallowed on its way (an at-fork hook)
            end = expected if expected is not None else math.inf
            if failure is not None or source_error is not None:
                end = min(end, limit)
            if next_idx >= end and (failure is not None or source_error is not None or len(done) == self.n_done):
                break
            if failure is not None and time.monotonic() > fail_deadline:
                break
            try:
                msg = self.out_q.get(timeout=_POLL_S)
            except queue.Empty:
                now = time.monotonic()
                for p in self.procs:
                    code = p.exitcode
                    if code not in (None, 0) and p.pid not in self._reported:
                        self._reported.add(p.pid)
                        role = ("loader" if p is self.loader or p in self.loaders
                                else "accelerator" if p in self.accel_procs else "worker")
                        wid = (self.workers.index(p) if role == "worker" else
                               self.accel_procs.index(p) if role == "accelerator" else -1)
                        why = (f"killed by signal {signal.Signals(-code).name}" if code < 0
                               else f"exited with status {code}")
                        fail(role, wid, None, f"the process died without a report ({why})", None, p.pid)
                if failure is None and now - last_progress > stall:
                    raise WorkerError(f"no progress for {stall:.0f} s (stuck at frame {next_idx}); "
                                      "the pipeline processes stopped answering") from None
                continue
            last_progress = time.monotonic()  # any message is an answer: rows, reports, heartbeats ("tick")
            if msg[0] == "part":  # one of several loaders finished: one "eof" once all have
                msg = self._merge_part(msg)
                if msg is None:
                    continue
            kind = msg[0]
            if kind == "rows":
                _, wid, rows = msg
                if len(rows):
                    rows["t_recv"] = time.perf_counter()  # the sink has it: a hop's end (eyeblink.runtime.hops)
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
                for k, v in seconds.items():
                    clock.seconds[k] += v
                    clock.calls[k] += calls[k]
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
                pid = (self._loader_pid(wid) if role == "loader" else self.accel_procs[wid].pid if role == "accelerator"
                       else self.workers[wid].pid)
                if pid is not None:
                    self._reported.add(pid)
                if role == "loader" and isinstance(user_error, EyeblinkError) and failure is None:
                    source_error = user_error
                    limit = min(limit, frame)
                    fail_deadline = time.monotonic() + self.par.drain_timeout_s
                    continue
                fail(role, wid, frame, line, tb, pid)
        if failure is not None:
            raise failure
        if source_error is not None:
            raise source_error
        return info

    # ---------------------------------------------------------------- several loaders on one input

    def _start_ranges(self) -> bool:
        """Start ``n`` range loaders when the input splits (:mod:`eyeblink.sources.ranges`); False: one loader.

        Loader ``l`` owns the ring slots ``s`` with ``s % n == l`` and has its own free-slot queue
        (workers hand each slot back to its owner); it decodes ranges ``l, l + n, ...`` and starts a
        range only when it begins at most :attr:`window` frames past the sink's write position, so
        the sink's reorder buffer stays bounded however long the recording is.
        """
        from eyeblink.sources.ranges import plan_ranges, single_plan

        cores, asked = physical_cores(), self.par.loaders
        if not asked and (self.W <= 1 or cores < 2):
            plan = single_plan(0, "one worker or one core: one loader")
        else:
            # the demux-only plan first: an input too short to split needs no decode probe
            plan = plan_ranges(self.source, asked or max(2, cores // 4), chunk_frames=self.C,
                               max_frames=self.cfg.max_frames)
            if plan.loaders > 1 and not asked:
                decode_ms = _probe_decode_ms(self.source)
                worker_ms = worker_ms_per_frame(self.cfg, getattr(self.source, "fallback_fps", None))
                wanted = choose_loaders(self.par, self.W, self.source, cores=cores, decode_ms=decode_ms,
                                        worker_ms=worker_ms)
                self.placement = {"cores": cores, "decode_ms": round(decode_ms, 3), "worker_ms": round(worker_ms, 3),
                                  "loader_share": round(loader_share(decode_ms, worker_ms, cores), 2)}
                if wanted <= 1:
                    plan = single_plan(plan.frames, "decoding is a small share of a frame's CPU here "
                                                     "(parallel.placement): one loader keeps the cores busy")
                elif wanted < plan.loaders:
                    plan = dataclasses.replace(plan, loaders=wanted)
        self.plan = plan
        if plan.loaders <= 1:
            return False
        n = self.n_loaders = plan.loaders
        assert self.spec is not None
        self.spec = RingSpec(max(self.spec.slots, n * 2 * self.B) + (n - 1) * 2 * self.B, self.spec.shape)
        self._make_queues(self.spec.slots + 2 * n)
        ctx = self.pipe._ctx
        self.free_qs = [self.free_q] + [ctx.Queue(maxsize=self.spec.slots + 2) for _ in range(n - 1)]
        self.written = ctx.RawValue("q", 0)
        segment = plan.ranges[0].stop - plan.ranges[0].first
        self.window = 2 * n * segment + self.spec.slots
        self.ring = FrameRing(self.spec)
        self.ring_name = self.ring.name
        self._fork_workers()
        self.loaders = self._fork(*[(self._range_loader_main, (lid,), f"eyeblink-loader-{lid}") for lid in range(n)])
        self.loader = self.loaders[0]
        return True

    def _release(self, slots: np.ndarray) -> None:
        """A worker hands the ring slots it has read back to the loader(s) that own them."""
        if self.n_loaders == 1:
            self._put(self.free_q, slots.tolist())
            return
        owner = slots % self.n_loaders
        for lid in np.unique(owner).tolist():
            self._put(self.free_qs[lid], slots[owner == lid].tolist())

    def _loader_pid(self, lid: int) -> int | None:
        if self.loaders and 0 <= lid < len(self.loaders):
            return self.loaders[lid].pid
        return self.loader.pid if self.loader is not None else None

    def _wait_window(self, first: int) -> None:
        """Block (stop-aware) until frame ``first`` is within :attr:`window` of the sink's write position."""
        assert self.written is not None
        while first - self.written.value > self.window:
            if self.stop.is_set() or os.getppid() != self.parent_pid:
                raise _Stop
            time.sleep(0.002)

    def _range_loader_main(self, lid: int) -> None:
        from eyeblink.sources.ranges import iter_range

        self._child_setup()
        ring, plan, n = self.ring, self.plan, self.n_loaders
        assert ring is not None and plan is not None
        free: list[int] = list(range(len(ring) - 1, -1, -1))
        free = [s for s in free if s % n == lid]
        free_q = self.free_qs[lid]
        decode_s = 0.0
        decoded = 0
        batch = _Batcher(self)
        try:
            for rng in plan.ranges[lid::n]:
                self._wait_window(rng.first)
                batch.start_at(rng.first)
                frames = iter_range(self.source, plan, rng)
                while True:
                    t0 = time.perf_counter()
                    try:
                        frame = next(frames)
                    except StopIteration:
                        break
                    except EyeblinkError:  # rows below it still count: send them, then report it
                        batch.flush()
                        raise
                    t1 = time.perf_counter()
                    decode_s += t1 - t0
                    decoded += 1
                    slot = self._take_slot(free, free_q, batch.starting)
                    ring.put(slot, frame.image)
                    batch.add(slot, frame.timestamp_s, t1)
                batch.flush()
            self._put(self.out_q, ("part", lid, decode_s, decoded))
            self._end_of_input()
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report("loader", lid, batch.n, exc)
            self._quit()
            raise SystemExit(1) from None

    def _merge_part(self, msg: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Gather the loaders' ``part`` messages; the input's ``eof`` message once every loader sent one."""
        _, lid, decode_s, decoded = msg
        self._parts[lid] = (decode_s, decoded)
        if len(self._parts) < self.n_loaders:
            return None
        plan = self.plan
        return ("eof", plan.frames, plan.info or None, sum(p[0] for p in self._parts.values()),
                sum(p[1] for p in self._parts.values()), None)


#: Placement model of the loaders (ms of one core per 640x480 frame; ``eyeblink bench`` measures them).
#: A landmark worker's frame costs ~0.8 ms with the default eye model (``lids``: the lid network every frame, the
#: face mesh and BlazeFace every ~10th) to 3.5-5 ms (``mesh``, or detection on every frame); a file's decode
#: ~1 ms (MJPG) to ~1.5 ms (H.264) of CPU. The fallback when the eye model's cost is not known:
WORKER_MS_PER_FRAME = 1.7
#: A frame's CPU outside its networks and decoding (the worker's Python per frame, the hand-off, the sink and the
#: CSV writer): measured with ``lids`` on real 640x480 frames, 2-core AVX-512 VM, 2026-11-26 (~0.2 + 0.1 ms), and
#: rounded up for slower cores.
FRAME_OVERHEAD_MS = 0.4
#: BlazeFace runs per detection (a segment's first frame looks at four quarter turns): 1.24 on real recordings.
DETECT_RUNS_PER_KEYFRAME = 1.24
#: From this many cores, loaders by the throughput rule (see :func:`choose_loaders`).
MIN_CORES_FOR_LOADERS = 4
#: Below :data:`MIN_CORES_FOR_LOADERS` cores, a second loader when one loader would need at least this share of a
#: core to keep the cores busy (with the decode cost :func:`_probe_decode_ms` measures). Measured on 2 cores
#: (AVX-512 VM, real 640x480 MJPG, 20,000 frames, alternated runs): with ``lids`` (share ~1.2) a second loader
#: raised the cores' use from 0.86 to 0.97 and the rate by 7-12 %; with ``mesh`` (share ~0.75) it changed nothing.
SECOND_LOADER_SHARE = 1.0


def worker_ms_per_frame(cfg: RunConfig, fps: float | None) -> float:
    """A landmark worker's CPU per frame under ``cfg`` at ``fps`` (the registry's costs, :data:`FRAME_OVERHEAD_MS`).

    An estimate for placing processes (never for rows): the eye model's cost with its reuse at ``fps``, the
    detector's keyframes, the per-frame overhead. :data:`WORKER_MS_PER_FRAME` when the model is not registered.
    """
    from eyeblink.landmarks import EYE_MODELS
    from eyeblink.runtime.host import FALLBACK_DETECT_MS

    spec = EYE_MODELS.get(cfg.landmarks.model)
    if spec is None:
        return WORKER_MS_PER_FRAME
    rate = fps if fps and fps > 0 else 500.0
    detect = FALLBACK_DETECT_MS * DETECT_RUNS_PER_KEYFRAME / max(1, cfg.detect.detect_every)
    return spec.cost_ms(rate, cfg.landmarks.mesh_reuse_ms) + detect + FRAME_OVERHEAD_MS


def loader_share(decode_ms: float, worker_ms: float, cores: int) -> float:
    """The share of one core a single loader needs to keep ``cores`` busy: ``decode x cores / (decode + worker)``."""
    return decode_ms * cores / max(decode_ms + worker_ms, 1e-9)


def choose_loaders(par: ParallelConfig, workers: int, source: Any, *, cores: int | None = None,
                   decode_ms: float | None = None, worker_ms: float = WORKER_MS_PER_FRAME) -> int:
    """How many loaders feed ``workers`` landmark workers (``par.loaders`` when set).

    From :data:`MIN_CORES_FOR_LOADERS` cores the rule is throughput: frames flow at ``min(L / decode_ms, W /
    worker_ms)``, so ``L = ceil(W x decode_ms / worker_ms)`` loaders keep ``W`` workers busy; capped at a quarter
    of the cores (the workers are the expensive stage). Below it the cores are shared by every process, and the
    rule is the loader's share: at the rate the cores allow, one loader must run ``decode_ms x cores / (decode_ms
    + worker_ms)`` of a core; from :data:`SECOND_LOADER_SHARE` on (a cheap eye model on a costly codec) a second
    loader keeps the cores busy, otherwise one. ``decode_ms`` (CPU time) is measured on the input's first frames
    when not given. One worker or one core: one loader.
    """
    if par.loaders:
        return par.loaders
    cores = cores or physical_cores()
    if cores < 2 or workers <= 1:
        return 1
    if decode_ms is None:
        decode_ms = _probe_decode_ms(source)
    if cores < MIN_CORES_FOR_LOADERS:
        return 2 if loader_share(decode_ms, worker_ms, cores) >= SECOND_LOADER_SHARE else 1
    need = math.ceil(workers * decode_ms / worker_ms - 1e-9)
    return max(1, min(need, cores // 4))


def time_decode(source: Any, frames: int) -> tuple[int, float]:
    """Decode at most ``frames`` frames of ``source`` in this process: (frames decoded, seconds)."""
    t0 = time.perf_counter()
    n = 0
    for _ in source:
        n += 1
        if n >= frames:
            break
    return n, time.perf_counter() - t0


def _probe_decode_ms(source: Any, frames: int = 48) -> float:
    """User CPU ms per frame of decoding ``source`` in this process: frames 2 to ``frames`` (~50 ms in all).

    User CPU time (the decoder's threads included), not the wall clock: what decoding takes from the cores
    whatever else runs, without the kernel's time reading a file not yet cached. The first frame (the decoder's
    set-up) is not counted. The first frames cost more than the rest (MJPG 640x480 here: ~1.3 ms against ~0.95
    over a whole file); :data:`SECOND_LOADER_SHARE` is set on this measure.
    """
    import resource

    n, t0 = 0, 0.0
    for _ in source:
        n += 1
        if n == 1:
            t0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        if n >= frames:
            break
    seconds = resource.getrusage(resource.RUSAGE_SELF).ru_utime - t0
    with contextlib.suppress(Exception):
        source.close()
    return seconds * 1000.0 / max(n - 1, 1)
