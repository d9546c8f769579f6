"""The staged multiprocess pipeline: a loader, a pool of detect+landmark workers, an ordered sink.

::

    parent (sink)  ◄──────────── results queue (one numpy record array per batch) ─────┐
      SessionSink: reorder by frame, blinks, the only writer                            │
                                                                                        │
    loader ──► shared-memory ring of frame slots ──► worker 0 … worker W-1 (fork: models shared)
      decode (PyAV / PIL),  queues per worker carry    BlazeFace (LiteRT, fused: no pixel
      one memcpy per frame  (chunk, first index,       transfer) + eye fit + EAR, keyframe policy
                            slots, timestamps)         per chunk ──► free-slot queue to the loader

Why this shape (measured on a 2-core x86 VM, 640x480 MJPG, see ``eyeblink bench``):

* Decoding is sequential in one loader (0.65 ms/frame for high-quality MJPG, i.e. ~1,500 FPS):
  one stream keeps the container's timestamps, the frame numbering and the truncation checks of
  :mod:`eyeblink.sources.files` exactly as in the single-process reference.
* Pixels travel through a :class:`~eyeblink.runtime.procs.shm.FrameRing`; queues carry only small
  records, and a whole batch of frames (``batch_frames``) per message, so the per-frame IPC cost is
  a few µs.
* On a CPU the detector is fused into the landmark workers: a separate detector process would need
  the pixels too and would add a hop; detection is ~1 ms and only runs on keyframes. On an
  accelerator (``detect.stage = "accelerator"``, the ``gpu`` preset) the workers are replaced by the
  accelerator stage (:mod:`eyeblink.runtime.procs.accelerator`): stage processes that own the device
  run detection and the eye model on batches of frames, and post-processing workers cut the eye
  patches.
* Workers own **contiguous chunks** of ``chunk_frames`` frames (chunk ``c`` goes to worker ``c %
  W``), not single frames round-robin, so each worker keeps the tracking state of the keyframe
  policy (last box, frames since detection, inter-ocular reference) across its chunk. A file's
  chunks are whole tracking segments (``chunk_frames`` is rounded up to a multiple of
  :data:`~eyeblink.frame.analyzer.SEGMENT_FRAMES`): the reference run restarts its tracking on the
  same frames, so the rows are byte-identical whatever the worker count, loader count or chunk size.
  Chunk size trade-off: bigger chunks mean fewer forced keyframes and longer tracking runs, but a
  bigger ring (``~W x chunk`` slots keep every worker busy), a bigger reorder buffer in the sink and
  a higher frame-to-row latency (a frame at the start of chunk ``c+1`` waits for chunk ``c`` to be
  written: ~``chunk / per-worker FPS``). The default, 128 frames (0.26 s at 500 FPS), keeps p99
  latency well under a second and the ring under 100 MB for two workers. Live mode
  (:mod:`eyeblink.runtime.live.pipeline`) deals chunks of 2 frames round-robin instead and lets each
  worker track the face across its chunks (``track_across_chunks``): latency first, and no forced
  keyframe per chunk.
* The children start the platform's way (:mod:`eyeblink.runtime.procs.processes`: ``fork`` on Linux,
  ``spawn`` on Windows and macOS, or ``--start-method``). Forked, the workers share the 100 MB dlib
  model the parent loaded (copy-on-write: its pages stay shared); spawned, each loads it once
  (:meth:`ParallelPipeline.eye_models`). Either way each worker builds its own LiteRT interpreter in
  its own process (interpreters and their thread pools must not cross a fork).

Where the code is: this module holds the parent's side of a run (:class:`ParallelPipeline`,
``_Run``'s state, queues, forks and summary); each child's role is a mixin of ``_Run`` in
:mod:`eyeblink.runtime.procs.roles` (the loaders, the workers and the accelerator stage's children,
the sink), and the loader count comes from :mod:`eyeblink.runtime.procs.sizing`.

Failure handling: every queue is bounded and every ``put``/``get``/``join`` has a timeout. A worker
that raises sends its traceback to the sink; one that dies without a word (``os._exit``, a signal,
the OOM killer) is noticed through its exit code. Either way the sink first writes every row below
the failing frame that the other workers computed, then the run stops with a one-line
:class:`~eyeblink.errors.WorkerError` (exit status 3) and the traceback goes to the summary. Ctrl-C
or SIGTERM: the children ignore both; the parent stops them, keeps the rows written so far and
records ``status: interrupted``.

Test hook (documented, used by ``tests/test_parallel.py``): the environment variable
``EYEBLINK_TEST_WORKER_FAULT=raise@K`` makes the worker that analyses frame ``K`` raise
``RuntimeError``; ``exit@K`` makes it die with ``os._exit(70)`` before analysing it (once the rows
it already sent are out of its queue's feeder thread); ``stall@K`` makes it send the rows before
``K`` and then wait, without analysing ``K``, until the run is stopped (so a test can interrupt a
run that is certain to be still going); ``pause@K`` makes it pause 2 s before frame ``K``, then go
on (a live run must drop frames meanwhile, on any machine); in the accelerator stage, ``stall@K``
stalls the stage on the batch holding ``K``, and ``slowstart@S`` makes its warm-up last ``S``
seconds longer (a slow compile: its heartbeat runs meanwhile, see
:mod:`eyeblink.runtime.procs.accelerator`). It injects a real failure into a real run; nothing else
reads it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink import stopping
from eyeblink.config import ParallelConfig, RunConfig, physical_cores
from eyeblink.frame.analyzer import StageClock, aligned_frames, build_fitter, build_fitters
from eyeblink.landmarks import model_specs, register_missing
from eyeblink.outputs.export import ResultWriter, clean_json
from eyeblink.runtime.choose import ResolvedConfig
from eyeblink.runtime.pipeline import (
    ProgressFactory,
    RunResult,
    SessionSink,
    build_detector,
    progress_bar,
    warn_once,
)
from eyeblink.runtime.procs.accelerator import stage_processes, stage_summary
from eyeblink.runtime.procs.processes import context, start_children
from eyeblink.runtime.procs.profiling import profiled
from eyeblink.runtime.procs.results import RESULT_DTYPE
from eyeblink.runtime.procs.roles.base import _ChildRole
from eyeblink.runtime.procs.roles.loader import _LoaderRole
from eyeblink.runtime.procs.roles.sink import LatencyRecord, _Redetections, _SinkRole
from eyeblink.runtime.procs.roles.worker import FAULT_ENV, _parse_fault, _WorkerRole
from eyeblink.runtime.procs.shm import FrameRing, RingSpec
from eyeblink.runtime.procs.sizing import (
    WORKER_MS_PER_FRAME,
    _probe_decode_ms,
    choose_loaders,
    loader_share,
    time_decode,
    worker_ms_per_frame,
)
from eyeblink.runtime.summary import Outcome, finish_session, session_outcome, write_running_summary

if TYPE_CHECKING:
    from eyeblink.landmarks import EyeModel
    from eyeblink.sources.files import FrameSource

__all__ = [
    "FAULT_ENV",
    "RESULT_DTYPE",
    "WORKER_MS_PER_FRAME",
    "LatencyRecord",
    "ParallelConfig",
    "ParallelPipeline",
    "choose_loaders",
    "loader_share",
    "physical_cores",
    "supports",
    "time_decode",
    "worker_ms_per_frame",
]


def supports(config: RunConfig) -> bool:
    """Whether :class:`ParallelPipeline` runs ``config``: CPU detection fused into the workers
    (LiteRT), or the accelerator stage (``detect.stage``; :mod:`eyeblink.runtime.procs.accelerator`:
    one process owns the device, which must not be initialised before a fork nor once per worker).

    Other runs (the IPU backend, a Keras backend with ``--stage fused``) use the single-process
    reference.
    """
    from eyeblink.detect import BackendName

    return (
        config.detect.accelerator_stage
        or str(config.detect.backend).strip().lower() == BackendName.LITERT.value
    )


def end_processes(
    procs: Sequence[Any],
    wait_s: float,
    before_forcing: Callable[[], None] | None = None,
    terminate_wait_s: float = 1.0,
) -> None:
    """Wait up to ``wait_s`` in all for ``procs`` to end; then ``before_forcing()`` (e.g. set the
    stop event), and SIGTERM, then SIGKILL, whatever is still alive."""
    deadline = time.perf_counter() + wait_s
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.perf_counter()))
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
    """Close multiprocessing queues without waiting for their feeder threads (the readers may be
    gone)."""
    for q in queues:
        if q is not None:
            q.cancel_join_thread()
            q.close()


class _SourceView:
    """What :func:`build_summary` needs from a source whose frames were decoded in another
    process."""

    def __init__(self, source: FrameSource, info: dict[str, Any] | None) -> None:
        self.path = source.path
        self.name = source.name
        self._source = source
        self._info = info

    def describe(self) -> dict[str, Any]:
        return self._info if self._info is not None else self._source.describe()


class ParallelPipeline:
    """Runs inputs through loader -> workers -> ordered sink. Build once per run (loads the models).

    ``fitter`` is loaded here, in the parent, so that forked workers share its 100 MB of model pages
    (spawned ones load their own: :meth:`eye_models`); :meth:`process_source` starts a fresh loader
    and worker set per input (a fork of the loaded parent takes a few ms, a spawn ~0.5 s).
    """

    def __init__(
        self,
        config: RunConfig,
        parallel: ParallelConfig | None = None,
        fitter: EyeModel | None = None,
    ) -> None:
        from eyeblink.runtime.procs.processes import resolve_start_method

        self.cfg = config
        self.par = parallel or ParallelConfig()
        #: how the children start (eyeblink.runtime.procs.processes): fork, forkserver or spawn, as
        #: the run's settings ask (``ParallelConfig.start_method``)
        self.start_method = resolve_start_method(self.par.start_method)
        self.accelerated = config.detect.accelerator_stage
        #: warnings the settings get from the pipeline (the summary's, said once on stderr)
        self.notes: list[str] = []
        if self.accelerated:
            from dataclasses import replace

            from eyeblink.runtime.procs.accelerator import check_stage, stage_note

            # the networks are built in the accelerator process: here only what can be checked
            # without starting the device (an initialised JAX, TensorFlow or CUDA must not be
            # forked)
            check_stage(config)
            note = stage_note(config)
            # a Keras backend detects on every frame: the settings the summary records say so
            if note:
                warn_once(note)
                self.notes.append(note)
                self.cfg = config = replace(config, detect=replace(config.detect, detect_every=1))
            # the model files, loaded once with LiteRT (not the device's runtime: safe before a
            # fork), so that a missing or corrupt --face-model / --landmark-model is the usual
            # one-line error before any frame
            from eyeblink.detect import create_detector

            create_detector(
                "litert",
                model_path=Path(config.detect.model_path) if config.detect.model_path else None,
            ).close()
            if fitter is None:
                build_fitter(config).close()
            # the workers only post-process: no eye model of their own
            self.fitter: EyeModel | None = fitter
        else:
            self.fitter = fitter or build_fitter(config)
            # fail early (in the parent, with the registry's message) if the backend or model cannot
            # load
            build_detector(config).close()
        self._ctx = context(self.start_method)

    def __getstate__(self) -> dict[str, Any]:
        """What a spawned child gets of the pipeline: the settings; its eye models are loaded there,
        once, on first use (:meth:`eye_models`), not pickled (a LiteRT interpreter or a dlib
        predictor cannot be)."""
        state = self.__dict__.copy()
        for name in ("_ctx", "view"):
            state.pop(name, None)
        state["fitter"] = None
        if state.get("fitters"):
            state["fitters"] = dict.fromkeys(state["fitters"])
        state["_models_unloaded"] = self.fitter is not None
        # the registry entries of the models it loads: one registered at run time (a program's own
        # model) is known to a spawned child too
        state["_eye_model_specs"] = model_specs(
            (*(state.get("fitters") or ()), self.cfg.landmarks.model)
        )
        return state

    def eye_models(self) -> dict[str, EyeModel]:
        """The eye models a fused worker fits with, by name (``""``: the run's one model;
        ``--landmarks auto``: each candidate): the parent's own when the worker was forked, else
        loaded in this process once."""
        if getattr(self, "_models_unloaded", False):
            register_missing(getattr(self, "_eye_model_specs", {}))
            # live --landmarks auto: the candidates' names (their models were not pickled)
            names = getattr(self, "fitters", None)
            if names:
                self.fitters = build_fitters(self.cfg, names)
                self.fitter = next(iter(self.fitters.values()))
            else:
                self.fitter = build_fitter(self.cfg)
            self._models_unloaded = False
        fitters = getattr(self, "fitters", None)
        if fitters:
            return dict(fitters)
        assert self.fitter is not None  # fused workers: the parent loaded the eye model
        return {"": self.fitter}

    # ------------------------------------------------------------------ parent side

    def process_source(
        self, source: FrameSource, outdir: Path, *, progress: ProgressFactory | None = None
    ) -> RunResult:
        """Process one opened source into ``outdir`` (the same files as the reference pipeline)."""
        run = _Run(self, source)
        return run.execute(outdir, progress)

    def measure_source(
        self, source: FrameSource, capture: Callable[[np.ndarray], None]
    ) -> tuple[dict[str, Any] | None, StageClock, int]:
        """The per-frame stage of one opened source, its records in frame order to ``capture`` (see
        :meth:`_Run.measure`)."""
        return _Run(self, source).measure(capture)


class _Run(_LoaderRole, _WorkerRole, _SinkRole, _ChildRole):
    """One input through the process pipeline (all the state of the parent side); each child's role
    is a mixin of :mod:`eyeblink.runtime.procs.roles`."""

    #: the run's config, stored once (:class:`~eyeblink.runtime.choose.ResolvedConfig`): a file's
    #: run at once, a live run when its source connects (``auto`` resolved); :attr:`requested` is
    #: the one asked for
    cfg = ResolvedConfig()
    #: True: the config is resolved when the source connects (live), not here
    resolves_at_connection = False

    def __init__(self, pipe: ParallelPipeline, source: FrameSource) -> None:
        self.pipe: ParallelPipeline = pipe
        self.requested: RunConfig = pipe.cfg
        if not self.resolves_at_connection:
            self.cfg = pipe.cfg  # a file: nothing to resolve
        self.par = pipe.par
        self.source = source
        self.W = pipe.par.n_workers
        # the workers chunks are dealt to (a live run on few cores may use fewer: live.py)
        self.dealt = self.W
        # a file's chunks are whole tracking segments (pipeline.SEGMENT_FRAMES), so that every chunk
        # starts where the reference run restarts its tracking too: the rows do not depend on the
        # layout; live runs (each worker tracks across its own small chunks) deal the chunks they
        # ask for
        self.C = (
            pipe.par.chunk_frames
            if pipe.par.track_across_chunks
            else aligned_frames(pipe.par.chunk_frames)
        )
        self.B = pipe.par.batch_frames
        self.fault = _parse_fault()
        self.spec: RingSpec | None = self._ring_spec()
        self.parent_pid = os.getpid()
        self.ring: FrameRing | None = None
        self.ring_name: str | None = None
        #: the browser view's frame grab (eyeblink.runtime.live.view.PreviewGrab; None: no view):
        #: the loaders hand it their newest frame when it asks, at most 30 a second
        self.view: Any = getattr(pipe, "view", None)
        self.preview: Any = self.view.preview if self.view is not None else None
        self.work_qs: list[Any] = []
        self.free_q: Any = None
        self.out_q: Any = None
        self.procs: list[Any] = []
        self.loader: Any = None
        self.workers: list[Any] = []
        self._reported: set[int] = set()  # pids whose failure is already known
        # the blink detector's warm-up re-scan: at once (files)
        self.rescan_per_frame: int | None = None
        #: live (--on-overload drop): a frame that waited longer than this when its worker reaches
        #: it is not analysed but written as a gap row, so that the newest frames win and the
        #: latency stays bounded
        self.late_s: float | None = None
        self._info: dict[str, Any] | None = None
        #: :meth:`measure`: where the ordered records go instead of a sink
        self._capture: Callable[[np.ndarray], None] | None = None
        # several loaders on one input (_start_ranges); one loader: n_loaders 1, loaders []
        self.n_loaders = 1
        self.loaders: list[Any] = []
        self.free_qs: list[Any] = []
        self.plan: Any = None
        # what the automatic loader count was decided on (decode and worker ms per frame, one
        # loader's share)
        self.placement: dict[str, float] | None = None
        self.written: Any = None  # the sink's next frame to write (shared): the loaders' window
        self._parts: dict[int, tuple[Any, ...]] = {}
        # the accelerator stage (eyeblink.runtime.procs.accelerator): work_qs is then its one input
        # queue, post_qs the workers' queues; it reports "done" too (n_done)
        self.accelerated: bool = pipe.accelerated
        self.post_qs: list[Any] = []
        self.accel_procs: list[Any] = []
        self.accel_infos: list[dict[str, Any]] = []
        #: accelerator-stage processes sharing the device (detect.stage_processes; 0 when fused)
        self.n_stage = stage_processes(self.cfg) if self.accelerated else 0
        self.n_done = self.W + self.n_stage
        #: the accelerator stage's input queues: one shared by its processes, or one each under the
        #: keyframe policy (its tracking state is per chunk: whole chunks go to one process)
        self.stage_qs = 1
        if self.accelerated:
            from eyeblink.runtime.procs.accelerator import keyframe_stage

            self.stage_qs = self.n_stage if keyframe_stage(self.cfg) else 1
        #: the accelerator stage compiles its programs for batches up to this size before the first
        #: frame
        self.warm_batch = 1
        if self.accelerated and self.spec is not None:
            from eyeblink.runtime.procs.accelerator import stage_slots

            self.spec = RingSpec(
                stage_slots(self.cfg, self.spec.slots, self.W, self.B), self.spec.shape
            )

    #: the parent's side of the run (the sink, the children's handles): not handed to a child that
    #: is spawned
    PARENT_ONLY: tuple[str, ...] = ("view", "latencies", "_capture", "_reported", "loader")
    #: the parent's lists of children (each child gets them empty)
    PARENT_LISTS: tuple[str, ...] = ("procs", "loaders", "workers", "accel_procs")

    def __getstate__(self) -> dict[str, Any]:
        """What a child started with ``spawn`` or ``forkserver`` gets of the run (pickled with its
        target, a bound method of the run): every setting, queue, event and shared value the roles
        read, the ring and the view's grab by name; not the parent's own side (:attr:`PARENT_ONLY`,
        :attr:`PARENT_LISTS`), nor the loaded models (each child loads its own once:
        :meth:`ParallelPipeline.eye_models`)."""
        state = self.__dict__.copy()
        for name in self.PARENT_ONLY:
            if name in state:
                state[name] = None
        for name in self.PARENT_LISTS:
            if name in state:
                state[name] = []
        return state

    def late_from(self) -> int:
        """The first frame the latency bound (``late_s``) applies to (a hook: live mode's
        start-up frames)."""
        return 0

    def _ring_spec(self) -> RingSpec | None:
        """The ring's geometry (a hook: live mode sizes it once the stream is open)."""
        from dataclasses import replace

        return RingSpec(
            replace(self.par, chunk_frames=self.C).slots, (self.source.height, self.source.width)
        )

    def _end_of_input(self) -> None:
        """A loader's last message: one end marker per consumer of its queues (every worker, or
        every process of the accelerator stage)."""
        for q in self.work_qs:
            for _ in range(self.ends_per_queue):
                self._put(q, None)

    @property
    def ends_per_queue(self) -> int:
        """End markers a loader puts in each work queue: one per process that reads it."""
        return self.n_stage if self.accelerated and self.stage_qs == 1 else 1

    def _announce_ring(self, msg: tuple[Any, ...]) -> None:
        """Live mode: the ring exists now (``("ring", name, spec, prefault, model)``) — to every
        child that reads it."""
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
        """The queue a loader sends chunk ``chunk``'s frame records to (its worker, or the
        accelerator stage)."""
        return self.work_qs[chunk % (len(self.work_qs) if self.accelerated else self.dealt)]

    def _fork_workers(self) -> None:
        """Fork the detect+landmark workers, or the accelerator stage and its post-processing
        workers."""
        if self.accelerated:
            self.workers = self._fork(
                *[(self._post_worker_main, (w,), f"eyeblink-worker-{w}") for w in range(self.W)]
            )
            self.accel_procs = self._fork(
                *[
                    (self._accelerator_main, (k,), f"eyeblink-accelerator-{k}")
                    for k in range(self.n_stage)
                ]
            )
        else:
            self.workers = self._fork(
                *[(self._worker_main, (w,), f"eyeblink-worker-{w}") for w in range(self.W)]
            )

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
        self.work_qs = [
            ctx.Queue(maxsize=work_size)
            for _ in range(self.stage_qs if self.accelerated else self.W)
        ]
        if self.accelerated:
            self.post_qs = [ctx.Queue(maxsize=work_size) for _ in range(self.W)]
            self.stage_ends = ctx.Value("q", 0)
        self.free_q = ctx.Queue(maxsize=work_size)
        self.out_q = ctx.Queue(maxsize=max(8, 4 * self.W))

    def _fork(self, *targets: tuple[Any, tuple[Any, ...], str]) -> list[Any]:
        """Start one daemon child per ``(function, args, name)``
        (:func:`~eyeblink.runtime.procs.processes.start_children`: the start method's way, SIGINT
        and SIGTERM blocked meanwhile); they are added to :attr:`procs`."""
        return start_children(self.pipe._ctx, targets, self.procs)

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
                    # a stop since the files were created: raised here, the summary says so
                    hold.release()
                    with stopping.held():
                        write_running_summary(writer, source, cfg)
                    bar = progress_bar(stack, progress, source, cfg.max_frames)
                    try:
                        self._start()
                        info = profiled(self._sink_loop, "eyeblink-sink")(sink, clock, redet, bar)
                    finally:
                        # a second Ctrl-C does not leave children or the ring behind
                        with stopping.held():
                            self._shutdown()
            finally:
                # self.cfg: the run's config (a live run's resolved when its source connected) the
                # accelerator stage: its process says whether the device is there (the parent must
                # not ask JAX)
                with stopping.held():  # the summary is written whole, whatever arrives meanwhile
                    warnings = (
                        sorted(
                            {w for i in self.accel_infos for w in i.get("warnings", [])}
                            | set(self.pipe.notes)
                        )
                        if self.accelerated
                        else None
                    )
                    for message in warnings or ():
                        warn_once(message)
                    summary = finish_session(
                        writer,
                        sink,
                        _SourceView(source, info or self._info),  # type: ignore[arg-type]
                        self.cfg,
                        clock,
                        redet,
                        started,
                        outcome,
                        warnings=warnings,
                        extend=self._summary_sections,
                    )
        return RunResult(
            source.name, sink.frames, sink.faces, sink.events, summary, sink.output_paths()
        )

    def _summary_sections(self, summary: dict[str, Any]) -> None:
        """The multiprocess run's own sections of its summary: latencies, the layout, a live
        run's extras."""
        summary["timings"].update(self._latency_summary())
        summary["parallel"] = clean_json(
            {
                "workers": self.W,
                "loaders": self.n_loaders,
                "start_method": self.pipe.start_method,
                "split": self.plan.describe() if self.plan is not None else None,
                "placement": self.placement,
                "chunk_frames": self.C,
                "batch_frames": self.B,
                "ring_slots": self.spec.slots if self.spec else None,
                "ring_mb": self.spec.nbytes / 2**20 if self.spec else None,
                "ring_name": self.ring_name,
                "detector": "accelerator stage" if self.accelerated else "fused",
                "accelerator": stage_summary(self.accel_infos) if self.accelerated else None,
            }
        )
        summary.update(self._extra_summary())
        summary["warnings"] = [*summary.get("warnings", []), *self._extra_warnings()]

    def measure(
        self, capture: Callable[[np.ndarray], None]
    ) -> tuple[dict[str, Any] | None, StageClock, int]:
        """The per-frame stage alone: every frame's record (:func:`record_dtype`), in frame order,
        to ``capture``; no sink, no file. Returns the source's description, the stage clock and the
        redetections on drift. ``batch`` measures the chunks of one recording this way and runs one
        sink over all of them."""
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
        """The sink's writer (a hook: live mode appends a ``dropped`` column; ``process --view``
        shows the rows)."""
        if self.view is not None:
            return self.view.file_writer(outdir, self.source)
        return ResultWriter(outdir, stem)

    def _extra_warnings(self) -> list[str]:
        """Warnings the run itself raised while it ran (a hook: live mode's memory growth)."""
        return []

    def _extra_summary(self) -> dict[str, Any]:
        """Sections a subclass adds to the summary (live mode: ``live``)."""
        return {}

    # ---------------------------------------------------------------- several loaders on one input

    def _start_ranges(self) -> bool:
        """Start ``n`` range loaders when the input splits (:mod:`eyeblink.sources.ranges`); False:
        one loader.

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
            plan = plan_ranges(
                self.source,
                asked or max(2, cores // 4),
                chunk_frames=self.C,
                max_frames=self.cfg.max_frames,
            )
            if plan.loaders > 1 and not asked:
                decode_ms = _probe_decode_ms(self.source)
                worker_ms = worker_ms_per_frame(
                    self.cfg, getattr(self.source, "fallback_fps", None)
                )
                wanted = choose_loaders(
                    self.par,
                    self.W,
                    self.source,
                    cores=cores,
                    decode_ms=decode_ms,
                    worker_ms=worker_ms,
                )
                self.placement = {
                    "cores": cores,
                    "decode_ms": round(decode_ms, 3),
                    "worker_ms": round(worker_ms, 3),
                    "loader_share": round(loader_share(decode_ms, worker_ms, cores), 2),
                }
                if wanted <= 1:
                    plan = single_plan(
                        plan.frames,
                        "decoding is a small share of a frame's CPU here "
                        "(parallel.placement): one loader keeps the cores busy",
                    )
                elif wanted < plan.loaders:
                    plan = dataclasses.replace(plan, loaders=wanted)
        self.plan = plan
        if plan.loaders <= 1:
            return False
        n = self.n_loaders = plan.loaders
        assert self.spec is not None
        self.spec = RingSpec(
            max(self.spec.slots, n * 2 * self.B) + (n - 1) * 2 * self.B, self.spec.shape
        )
        self._make_queues(self.spec.slots + 2 * n)
        ctx = self.pipe._ctx
        self.free_qs = [self.free_q] + [
            ctx.Queue(maxsize=self.spec.slots + 2) for _ in range(n - 1)
        ]
        self.written = ctx.RawValue("q", 0)
        segment = plan.ranges[0].stop - plan.ranges[0].first
        self.window = 2 * n * segment + self.spec.slots
        self.ring = FrameRing(self.spec)
        self.ring_name = self.ring.name
        self._fork_workers()
        self.loaders = self._fork(
            *[(self._range_loader_main, (lid,), f"eyeblink-loader-{lid}") for lid in range(n)]
        )
        self.loader = self.loaders[0]
        return True
