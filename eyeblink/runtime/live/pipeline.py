"""Live mode: a camera or a network stream in, EAR rows and blinks out while the frames arrive.

``eyeblink live SOURCE -o OUTDIR`` runs the multiprocess pipeline of
:mod:`eyeblink.runtime.procs.parallel` with a live loader and writes the same files as ``process``
(``<stem>.frames.csv`` with one appended column, ``dropped``; ``<stem>.blinks.csv``;
``<stem>.summary.json``), incrementally. When the capture ends normally,
:func:`eyeblink.outputs.analysis.finalize` calibrates the FEC column and writes the trials, traces,
plots and NWB that the conditioning options ask for, exactly as after ``process``.

The live loader (a child process, which connects to the source itself) runs a capture thread that
stamps every frame on arrival (:class:`~eyeblink.sources.live.Captured`), gives it the next frame
index and puts it into a free slot of the shared-memory ring; its main thread watches the stop
request and the heartbeat.

Overload policy (``--on-overload``), applied when a frame arrives and the ring has no free slot:

* ``drop`` (default): the frame is dropped at once and written as a gap row (``face`` 0, empty EAR,
  ``dropped`` 1) in its place; ``frames_dropped`` counts it. The capture never waits, so the
  camera's or the socket's buffer never overflows behind our back.
* ``block``: the capture waits for a free slot. Nothing is dropped by eyeblink, but the source backs
  up: a TCP sender slows down, a camera's driver drops frames (visible as timestamp gaps,
  ``timestamp_gaps`` in the summary, and for Basler cameras ``camera_skipped_frames``).

Low-latency layout (measured with ``scripts/bench_live.py``, see its docstring): frames go to the
workers in chunks of :data:`LIVE_CHUNK_FRAMES` dealt round-robin, in messages of
:data:`LIVE_BATCH_FRAMES`, and each worker keeps tracking the face from one of its chunks to the
next (``ParallelConfig.track_across_chunks``), so no chunk starts with a forced detection. Every
worker then works at 1/W of the camera's rate all the time, instead of one worker at the full rate
for a whole chunk (files: contiguous chunks of 128, throughput first). The workers load and warm up
before the source is connected and the ring (``--buffer`` seconds of frames, which absorbs a hiccup
of the machine without dropping) is reserved and faulted in meanwhile (:meth:`_LiveRun._start`).
``--landmarks auto`` (the default) picks the landmark model the machine can run at the source's rate
(:func:`~eyeblink.runtime.choose.choose_landmarks`), from costs measured on this machine before the
capture starts (:mod:`eyeblink.runtime.costs`): the run's config is resolved once when the source
connects (the rate is known only then; no frame is analysed before it), into a new frozen config the
run keeps to its end (:func:`~eyeblink.runtime.choose.resolve_run_config`). During the run the sink
steps down a ladder of cheaper settings when frames drop or the backlog grows, and back up when
headroom returns (:mod:`eyeblink.runtime.live.adapt`): each step is a warning line, a metric and a
``summary.json`` entry, and changes the workers' state (eye model, mesh reuse, ``detect_every``),
never the config.

Stopping: SIGINT (Ctrl-C) or SIGTERM stops the capture; frames already captured are analysed, every
file is flushed and the run exits 0 (a second Ctrl-C stops at once, status ``interrupted``). A
stream that ends stops the run the same way, with a message; a lost source (after ``--reconnect``
tries) stops it with :class:`~eyeblink.sources.live.SourceLostError` (exit 4), rows kept.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from eyeblink import host, stopping
from eyeblink.config import (
    LIVE_BATCH_FRAMES,
    LIVE_CHUNK_FRAMES,
    LiveConfig,
)
from eyeblink.errors import ConfigError, EyeblinkError, WorkerError, picklable_error, warn
from eyeblink.frame.locate import FixedRegion, locator_for
from eyeblink.outputs.export import ResultWriter
from eyeblink.runtime.choose import (
    AUTO_LANDMARKS,
    choose_dealt_workers,
    resolve_eye_model,
    resolve_run_config,
)
from eyeblink.runtime.live.hops import HopRecord
from eyeblink.runtime.live.livewriter import LIVE_FRAME_COLUMNS, LiveResultWriter
from eyeblink.runtime.live.memory import NUT_HINT, MemoryWatch, rss_bytes
from eyeblink.runtime.live.priority import raise_priority, settle_heap
from eyeblink.runtime.procs.parallel import ParallelPipeline, _Run
from eyeblink.runtime.procs.roles.base import _POLL_S, _Stop
from eyeblink.runtime.procs.roles.loader import _Batcher
from eyeblink.runtime.procs.shm import FrameRing, RingSpec, ring_cap_bytes, ring_refusal

if TYPE_CHECKING:
    from eyeblink.runtime.costs import HostCosts
    from eyeblink.runtime.live.adapt import StepController

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.runtime.live.metrics import LiveMetrics
    from eyeblink.runtime.live.publish import LiveTap
    from eyeblink.runtime.pipeline import RunResult, SessionSink
    from eyeblink.sources.live import LiveSource, StreamSource

__all__ = [
    "LIVE_BATCH_FRAMES",
    "LIVE_CHUNK_FRAMES",
    "LIVE_FRAME_COLUMNS",
    "LiveConfig",
    "LivePipeline",
    "open_file_view",
]

log = logging.getLogger("eyeblink.live")

#: Ring slots mapped into every process before the capture when the ring could not be reserved in
#: advance (FrameRing.prefault): the frames in flight cycle through the lowest slots, ~10 at 500
#: FPS.
PREFAULT_SLOTS = 64
#: warm-up frames the blink detector re-judges per new frame (BlinkDetector rescan_per_frame)
LIVE_RESCAN_PER_FRAME = 25
#: rungs of the cost ladder at most (eyeblink.runtime.live.adapt)
MAX_RUNGS = 8
#: the accelerator stage's largest batch compiled before a live capture starts (see
#: _LiveRun.warm_batch)
LIVE_WARM_BATCH = 32
#: a run that drops more than this share of its frames (the loader's and the late ones) says so: one
#: warning line, the summary's ``warnings`` and ``live.status`` ``overloaded``
DROP_WARN_SHARE = 0.01
#: start-up: the frames read at connection (a stream's rate probe, up to 0.5 s of a slow stream) and
#: those that arrive in the first this many seconds of the capture are analysed whatever their age
#: (never gap rows of the latency bound, and not counted as rows past it): the workers' first frames
#: and the burst of the connection are not the run falling behind ...
LIVE_STARTUP_GRACE_S = 0.5
#: ... but at most this many frames after those read at connection (a fast stream's backlog stays
#: short)
LIVE_STARTUP_GRACE_FRAMES = 128
#: the GIL switch interval of a live run's processes (Python's default: 5 ms). Each process has
#: threads that hand a frame on (the loader's capture thread and its queue's feeder thread, a
#: worker's analysis and its feeder, the sink and the API's consumer); a thread woken to pass a
#: frame on waits for the GIL up to the switch interval whenever another thread of its process is
#: busy in Python, so every hand-off could add up to 5 ms
LIVE_SWITCH_INTERVAL_S = 0.0005
#: what the live loader reads of the parent's state set once the source is connected (the rest of
#: the run's state it got when it started): the rate (its recording's), the ring's geometry and the
#: slots to map, the workers dealt to
LOADER_SETTINGS = ("fps", "spec", "prefault_slots", "dealt")
#: A recording of one eye (``--eye-roi``) with no measure named: the loader holds the stream's first
#: frames, at most this many seconds ...
LIVE_SURVEY_S = 10.0
#: ... and this many frames (a 500 FPS camera's first second; 640x480: 150 MB held), chooses the
#: measure on them as ``process`` does on a file's first seconds, then hands them to the workers
#: first (see :meth:`_LiveRun._survey`)
LIVE_SURVEY_FRAMES = 500
#: with --on-overload drop, the share of --max-latency-ms a frame may wait before its worker starts
#: it; the rest is for what follows the worker (its batch, the results queue, the sink's reorder and
#: its write), which took up to ~150 ms more on a 2-core host at 1,000 FPS: a frame started at the
#: whole bound reached LSL and the gate past it
LIVE_LATE_SHARE = 0.5


class _LiveRun(_Run):
    """One live source through the pipeline: the live loader, gap rows, metrics, graceful stop.

    Its config (``cfg``) is resolved when the source connects (:meth:`_choose`: ``auto``'s eye model
    needs the rate, known only then, and no frame is analysed before it) and stored once; until then
    it reads as the requested one (:attr:`requested`). What the cost ladder changes during the run
    is the workers' state."""

    resolves_at_connection = True
    #: the sink's side of a live run besides the file run's: publishing, metrics, the memory watch,
    #: the ladder
    PARENT_ONLY = (*_Run.PARENT_ONLY, "tap", "metrics", "memory", "steps", "hops")

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        # the models to pick from, by name: a child loads its own (pipe.eye_models)
        if state.get("fitters"):
            state["fitters"] = dict.fromkeys(state["fitters"])
        return state

    def __init__(self, pipe: LivePipeline, source: LiveSource, tap: LiveTap | None = None) -> None:
        super().__init__(pipe, source)
        ctx = pipe._ctx
        self.live = pipe.live
        self.tap = tap
        # --view: the loader hands the view a frame when asked
        if tap is not None and tap.preview is not None:
            self.preview = tap.preview
        self.capture_stop = ctx.Event()
        self.n_in = ctx.RawValue("q", 0)
        self.n_dropped = ctx.RawValue("q", 0)
        self.n_reconnects = ctx.RawValue("q", 0)
        self.ready = ctx.Semaphore(0)  # one release per worker whose detector is built
        # frames received before the capture started (a stream's rate probe): analysed whatever
        # their age
        self.startup_frames = ctx.RawValue("q", 0)
        # the first frame the latency bound drops: set by the loader at the first frame that arrives
        # LIVE_STARTUP_GRACE_S after the capture started (until then every frame is analysed,
        # whatever its age)
        self.late_from_frame = ctx.RawValue("q", 2**62)
        # 0 once the source's clock is not believable (the metric)
        self.clock_believed = ctx.RawValue("i", 1)
        self.prefault_slots = 0  # ring slots every process maps before the capture (see _start)
        self.fitters = pipe.fitters  # --landmarks auto: the models to pick from
        self.model_reason: str | None = None
        self.costs: HostCosts | None = None  # measured in _start, before the workers fork
        # the cost ladder (eyeblink.runtime.live.adapt): the sink writes the rung, the workers read
        # it per batch
        self.models = tuple(sorted(pipe.fitters or (pipe.cfg.landmarks.model,)))
        self.level = ctx.RawValue("i", 0)
        # (model index, mesh_reuse_ms, detect_every) each
        self.rung_table = ctx.RawArray("d", 3 * MAX_RUNGS)
        self.applied_level = 0  # in a worker: the rung it runs
        self.steps: StepController | None = None
        self.warnings_extra: list[str] = []  # the summary's: e.g. a model that cannot hold the rate
        # the blink detector re-scans its warm-up (~1 s of frames) 25 frames per new frame, not in
        # one ~100 ms go that would hold every row behind it
        self.rescan_per_frame = LIVE_RESCAN_PER_FRAME
        # the accelerator stage: a live stream's batches are the few frames of one flush deadline
        # (more while it catches up): their programs are compiled before the capture starts, not on
        # the stream's first frames
        self.warm_batch = LIVE_WARM_BATCH
        self.n_written = 0
        self.aborted = False  # abort(): the sink stops at its next rows
        # gap rows written: the loader's drops and the frames the workers found too late
        self.n_gap = 0
        # --on-overload drop: the newest frames win; a frame older than this when its worker gets to
        # it is a gap (part of the bound: the rest is for the way to the sink, see LIVE_LATE_SHARE)
        self.late_s = (
            self.live.max_latency_ms / 1000.0 * LIVE_LATE_SHARE
            if self.live.overload == "drop"
            else None
        )
        # the rate the ring and the LSL outlets were sized for (see _start)
        self.fps: float | None = None
        self.stop_reason: str | None = None
        self.metrics: LiveMetrics | None = None
        # the RSS of the run's processes, sampled by the sink: a run of hours must not grow
        # (eyeblink.runtime.live.memory)
        self.memory = MemoryWatch(self._memory_processes, hint=self._memory_hint)
        self.priority: dict[str, Any] = {
            "asked": self.live.priority,
            "applied": self.live.priority == "normal",
            "refused": None,
        }
        # where each frame's time went, arrival -> row written (eyeblink.runtime.live.hops)
        self.hops = HopRecord()
        # how many workers get frames (choose_dealt_workers, in _choose)
        self.dealt_reason = "as forked"

    def _ring_spec(self) -> RingSpec | None:
        # sized in _start, once the stream is open and its frame size and rate are known
        return None

    def _start(self) -> None:
        """Workers and the loader first, the workers warmed up; then the loader opens the stream,
        the ring is sized and the capture starts.

        A network stream starts sending when it is opened: every frame that arrives before the
        workers can analyse it waits in the socket (a paced sender then catches up in a burst) and
        comes out late. So the workers are started and warmed up (LiteRT's first invoke, the dlib
        model paged in) before the loader connects (:meth:`LiveSource.start`, in the loader: a
        connection cannot be handed to a spawned process), and every child attaches to the ring by
        name when it exists. The ring's memory is reserved and faulted in meanwhile: a frame that
        lands on a fresh page pays the fault in the loader and again in its worker (up to ~2 ms a
        frame in a VM), and on the first second of a stream that is a backlog that feeds itself."""
        # one tracker for the ring, shared by the children (see shm)
        host.start_shared_memory_tracker()
        # what each part costs on this machine, timed now (nothing else runs yet): auto's choice and
        # the ladder
        self.costs = self.pipe.measure_host()  # type: ignore[attr-defined]
        self._make_queues(0)  # the ring bounds the frames in flight; its size is not known yet
        ctx = self.pipe._ctx
        # the loader connects to the source itself (a connection cannot be handed to a spawned
        # process): the parent tells it when (loader_q), it answers with what the connection found
        # (connect_q)
        self.loader_q, self.connect_q = ctx.Queue(), ctx.Queue()
        source: LiveSource = self.source  # type: ignore[assignment]
        # a signal while the loader waits for a sender stops the wait
        source.cancelled = self.capture_stop.is_set
        source.close()  # a camera's handle is the loader's from here on (it opens its own)
        self._fork_workers()
        (self.loader,) = self._fork((self._loader_main, (), "eyeblink-loader"))
        # the most the ring may take (a share of the memory and shared memory free), measured before
        # any of it
        cap, cap_why = ring_cap_bytes()
        # while the workers load: reserve the ring for the likely geometry (the configured or the
        # camera's rate, at most 1,000 FPS, and size, else 500 FPS 640x480), so that its page faults
        # come now; within the cap
        guess = min(self.requested.fps or source.nominal_fps or 500.0, 1000.0)
        likely = RingSpec(
            self.live.parallel(guess, base=self.par).slots,
            (source.height or 480, source.width or 640),
        )
        block: Any = FrameRing.reserve(likely.nbytes if cap is None else min(likely.nbytes, cap))
        try:
            deadline = time.perf_counter() + self.par.stall_timeout_s
            for _ in range(self.n_done):  # the workers (and the accelerator stage, once compiled)
                while not self.ready.acquire(timeout=_POLL_S):
                    if any(p.exitcode is not None for p in self.procs):
                        return  # a worker failed while loading: the sink loop reports it
                    if time.perf_counter() > deadline:
                        raise WorkerError(
                            f"the workers did not load their models within "
                            f"{self.par.stall_timeout_s:.0f} s"
                        )
            settle_heap()  # the sink's process, before the first frame (see settle_heap)
            # the gate socket (and the outlets if their rate is known) before any frame
            if self.tap is not None:
                asked = AUTO_LANDMARKS[0] if self.fitters else self.requested.landmarks.model
                self.tap.open(
                    source=source.spec,
                    stem=source.name,
                    nominal_fps=self.requested.fps or source.nominal_fps,
                    eye_model=asked,
                    cancelled=self.capture_stop.is_set,
                )
            log.info("waiting for %s", source.spec)
            if not self._connect_through_loader(source):
                self._stopped_before_connect()  # Ctrl-C / SIGTERM while waiting for the sender
                return
            self._connected(source)
            locator = locator_for(self.requested)
            # one eye: its region, first
            if isinstance(locator, FixedRegion) and source.width and source.height:
                locator.check_frame(source.width, source.height, f"the frames of {source.name}")
            # the rate: --fps when given, else the source's (a stream's measured from its
            # timestamps)
            self.fps = self.requested.fps or source.nominal_fps
            self._choose(source)  # the run's config, stored once: self.cfg from here on
            # a stream's own rate is known now; the capture has not started
            if self.tap is not None:
                self.tap.connected(self.fps, self.cfg.landmarks.model)
            # the ring: --buffer seconds at the rate measured as the first frames arrived (not a
            # claimed one)
            ring_fps = source.measured_fps or self.fps
            self.par = self.live.parallel(ring_fps, base=self.par)
            slots = self.par.slots
            if self.accelerated:
                from eyeblink.runtime.procs.accelerator import stage_slots

                slots = stage_slots(self.cfg, slots, self.W, self.B)
            self.spec = RingSpec(slots, (source.height, source.width))
            if cap is not None and self.spec.nbytes > cap:  # refused before the ring is allocated
                raise ConfigError(
                    ring_refusal(self.spec, ring_fps, self.live.buffer_s, cap, cap_why)
                )
            if self.spec.nbytes <= block.size:
                self.ring, block = FrameRing(self.spec, block=block), None
                self.prefault_slots = self.spec.slots
            # a bigger stream than reserved for: a fresh block, the slots in use faulted in now
            else:
                self.ring = FrameRing(self.spec)
                self.prefault_slots = PREFAULT_SLOTS
                self.ring.prefault(self.prefault_slots)
        finally:
            if block is not None:
                block.close()
                block.unlink()
        self.ring_name = self.ring.name
        if self.metrics is not None:
            self.metrics.landmark_model.labels(model=self.cfg.landmarks.model).set(1)
        self._announce_ring(("ring", self.ring.name, self.spec, self.prefault_slots, self.cfg))
        self.loader_q.put(
            (
                "ring",
                self.ring.name,
                self.cfg,
                {name: getattr(self, name) for name in LOADER_SETTINGS},
            )
        )

    def _queues(self) -> tuple[Any, ...]:
        return (
            *super()._queues(),
            getattr(self, "loader_q", None),
            getattr(self, "connect_q", None),
        )

    def _connect_through_loader(self, source: LiveSource) -> bool:
        """Have the loader connect to the source and take over what it found (size, rate, clock, the
        frames read at connection): True once connected; False when a signal stopped the wait for a
        sender. A source that cannot be opened raises its one-line error here, in the parent, as
        before any frame."""
        from eyeblink.config import physical_cores

        # with them, the loader's survey of a recording of one eye keeps to a measure that holds the
        # stream's rate
        self.loader_q.put(
            ("connect", self.costs if not self.accelerated else None, physical_cores())
        )
        while True:
            try:
                msg = self.connect_q.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if self.loader is not None and self.loader.exitcode is not None:
                    raise WorkerError(
                        f"the loader (pid {self.loader.pid}) ended while connecting to "
                        f"{source.spec} "
                        f"(exit status {self.loader.exitcode})"
                    ) from None
        if msg[0] == "failed":
            if self.capture_stop.is_set():
                return False
            raise msg[1]
        _, state, settled, held = msg
        source.adopt(state)
        self.held_frames = held
        # the loader's survey of a recording of one eye: the run's measure, said once
        if settled is not None:
            self.requested = settled
            choice = settled.eye_measure
            print(f"eyeblink: eye measure {choice.why}", file=sys.stderr, flush=True)
            if choice.warning:
                warn(choice.warning)
        return True

    def _survey(
        self, source: LiveSource, costs: HostCosts | None = None, cores: int = 1
    ) -> RunConfig | None:
        """In the loader, once connected, for a recording of one eye whose measure is not settled:
        the stream's first frames (:data:`LIVE_SURVEY_S`, at most :data:`LIVE_SURVEY_FRAMES`; and a
        compressed stream's packets, for ``--record``) held here, and the requested config with the
        measure chosen on them (:func:`eyeblink.runtime.runner.settle_from_frames`, as ``process``
        chooses). The capture hands the held frames out first, then the stream's next ones
        (:meth:`_frames`): none is lost or reordered. Held before the ring and the workers' config
        exist, they are start-up frames (analysed whatever their age, never gap rows of the latency
        bound) and wait for a free slot of the ring whatever ``--on-overload`` says (more of them
        than the ring holds would otherwise be dropped): the workers measure every frame with the
        chosen measure from the first on. The cost: a later first row (the survey's length), and the
        frames that arrive while the choice is made and the workers work through the held frames
        come late: under ``--on-overload drop`` those past the latency bound are gap rows until the
        workers have caught up (a few seconds; name ``--landmarks area`` or ``contour`` to measure
        from the first frame as it comes). A survey held in the loader is the simplest sound design
        here: the workers are forked and warmed up before the stream connects, and the run's config
        (the measure among it) is fixed once, before any frame is analysed, so the measure must be
        known before the first frame reaches a worker. Where ``contour`` cannot hold the stream's
        rate on ``cores`` (:meth:`_too_slow`), there is no contest: ``area``, its settings from
        :data:`~eyeblink.landmarks.region.NAMED_SURVEY_FRAMES` frames, and the line says why. None
        (nothing held) otherwise."""
        self._held: tuple[list[Any], Any] = ([], None)
        self._held_packets: list[Any] = []
        cfg = self.requested
        if cfg.eye.roi is None or cfg.eye_measure is not None or not cfg.landmarks.region_auto:
            return None  # no region, or a measure named: measured from the first frame, as it comes
        from eyeblink.landmarks.region import NAMED_SURVEY_FRAMES
        from eyeblink.runtime.runner import settle_from_frames

        region = cfg.eye.region
        if source.width and source.height and region is not None:
            try:
                region.check_inside(source.width, source.height)
            except ConfigError:
                # past the stream's frames: the parent refuses the region in one line, nothing held
                return None

        survey, slow = cfg, self._too_slow(cfg, source, costs, cores)
        most = LIVE_SURVEY_FRAMES
        # one measure keeps up with this camera here: its settings from a few frames, no contest
        if slow:
            survey = replace(cfg, landmarks=replace(cfg.landmarks, model="area", region_auto=False))
            most = NAMED_SURVEY_FRAMES
        if cfg.max_frames is not None:
            most = min(most, cfg.max_frames)
        frames = iter(source.capture())
        held: list[Any] = []
        self._survey_error: EyeblinkError | None = None
        # a compressed stream: its packets too, for --record's stream copy
        if hasattr(source, "on_packet"):
            source.on_packet = self._held_packets.append
        try:
            for cap in frames:
                held.append(cap)
                if (
                    len(held) >= most
                    or cap.timestamp_s - held[0].timestamp_s >= LIVE_SURVEY_S
                    or self.capture_stop.is_set()
                    or self.stop.is_set()
                ):
                    break
        # the source lost during the survey: raised after the held frames
        except EyeblinkError as exc:
            self._survey_error = exc
        finally:
            if hasattr(source, "on_packet"):
                source.on_packet = None
        self._held = (held, frames)
        seconds = held[-1].timestamp_s - held[0].timestamp_s if held else 0.0
        settled = settle_from_frames([c.image for c in held], seconds, survey, source.name)
        if not slow:
            return settled
        assert settled.eye_measure is not None
        why = f"area: {'; '.join(slow)}; name --landmarks contour to measure with it all the same"
        measure = replace(settled.eye_measure, how="chosen", why=why)
        return replace(
            settled, landmarks=replace(settled.landmarks, region_auto=True), eye_measure=measure
        )

    @staticmethod
    def _too_slow(
        cfg: RunConfig, source: LiveSource, costs: HostCosts | None, cores: int
    ) -> list[str]:
        """For a recording of one eye with no measure named: why each region measure but ``area``
        cannot hold the stream's rate on ``cores`` (``costs`` measured before the capture, as
        ``--landmarks auto`` is chosen); empty when they all can (or nothing was measured), and the
        survey compares them."""
        if costs is None:
            return []
        from eyeblink.landmarks import region_models
        from eyeblink.runtime.choose import choose_landmarks
        from eyeblink.runtime.costs import with_decode

        rate = cfg.fps or source.nominal_fps
        costs = with_decode(
            costs, source.describe().get("codec"), source.width or 640, source.height or 480
        )
        slow = []
        for model in region_models():
            if model == "area" or model not in costs.fit_ms:
                continue
            _, reason, holds = choose_landmarks(
                rate,
                cores,
                cfg.landmarks.mesh_reuse_ms,
                costs=costs,
                detect_every=cfg.detect.keyframe_frames(rate),
                candidates=(model,),
            )
            if not holds:
                slow.append(reason.split("; ")[0].replace(f"{model} CANNOT", f"{model} cannot"))
        return slow

    def _frames(self, source: LiveSource) -> Any:
        """What the capture places: the frames the survey held (:meth:`_survey`), then the
        stream's."""
        held, rest = getattr(self, "_held", ([], None))
        if rest is None:
            yield from source.capture()
            return
        self._held = ([], None)
        yield from held
        if self._survey_error is not None:
            raise self._survey_error
        yield from rest

    def _connect_in_loader(self, source: LiveSource) -> bool:
        """In the loader: connect when the parent says so, tell it what the connection found, then
        wait for the ring and the run's settings. False: nothing to capture (stopped, or the
        connection failed: the parent reports it)."""
        ask = self._get(self.loader_q)
        if ask[0] != "connect":
            return False
        _, costs, cores = ask
        try:
            source.start()
        except EyeblinkError as exc:
            self._put(self.connect_q, ("failed", picklable_error(exc)))
            return False
        # a recording of one eye: its measure, from its first frames
        settled = self._survey(source, costs, cores)
        self._put(
            self.connect_q, ("connected", source.connection_state(), settled, len(self._held[0]))
        )
        _, name, config, settings = self._get(self.loader_q)
        self.__dict__.update(settings)
        self.cfg = config  # the run's, resolved at connection: stored once in this process too
        assert self.spec is not None  # sized by the parent at connection (LOADER_SETTINGS)
        self.ring = FrameRing.attach(name, self.spec)
        source.clock.on_mismatch = self._clock_mismatch
        return True

    def _connected(self, source: LiveSource) -> None:
        """The source is connected: its first frames (a stream's rate probe) are start-up frames,
        analysed whatever their age; a clock found not believable there is said now (one warning
        line, the metric)."""
        # and the frames the survey of a recording of one eye held (they include the probe's)
        self.startup_frames.value = max(
            int(getattr(source, "startup_frames", 0)), getattr(self, "held_frames", 0)
        )
        source.clock.on_mismatch = self._clock_mismatch
        if not source.clock.believed and source.clock.text:
            self._clock_mismatch(source.clock.text)

    def _clock_mismatch(self, text: str) -> None:
        """The source's clock is not believable (in the parent at connection, or the loader
        during the capture)."""
        self.clock_believed.value = 0
        warn(text)

    def late_from(self) -> int:
        """The first frame the latency bound drops (those before it arrived while the run
        started)."""
        return int(self.late_from_frame.value)

    def _choose(self, source: LiveSource) -> None:
        """Now that the rate, size and codec are known: the decode cost, the run's config
        (``auto``'s model, :func:`resolve_run_config`, stored once in ``self.cfg`` before any frame
        is analysed), the cost ladder."""
        from eyeblink.config import physical_cores
        from eyeblink.runtime.costs import with_decode
        from eyeblink.runtime.live.adapt import Rung, StepController, ladder

        fps = self.fps  # --fps when given, else the source's
        rate = fps if fps and fps > 0 else 500.0
        if self.costs is not None and self.costs.measured:
            self.costs = with_decode(
                self.costs,
                source.describe().get("codec"),
                source.width or 640,
                source.height or 480,
            )
        # --landmarks auto: the model for this rate; a model of the user's: whether it can keep up
        choice = resolve_run_config(
            self.requested,
            auto=bool(self.fitters),
            fps=fps,
            cores=physical_cores(),
            costs=self.costs,
            check=not self.accelerated,
        )
        self.cfg = choice.config  # the run's config, once (a second store raises)
        self.model_reason, holds = choice.reason, choice.holds
        lm = self.cfg.landmarks
        # detect_every, or more at a fast camera (detect_min_ms)
        every = self.cfg.detect.keyframe_frames(fps)
        # all frames to one worker while it holds the rate (choose_dealt_workers)
        if not self.accelerated:
            self.dealt, self.dealt_reason = choose_dealt_workers(
                self.costs,
                self.cfg.landmarks.model,
                fps,
                workers=self.W,
                asked=self.live.workers,
                mesh_reuse_ms=lm.mesh_reuse_ms,
                detect_every=every,
            )
            log.info("live: %s", self.dealt_reason)
        if self.model_reason:
            print(f"eyeblink: eye model {self.model_reason}", file=sys.stderr, flush=True)
            if not holds:
                self.warnings_extra.append(f"eye model {self.model_reason}")
        if self.live.adapt and self.costs is not None and not self.accelerated:
            start = Rung(self.cfg.landmarks.model, lm.mesh_reuse_ms, self.cfg.detect.detect_every)
            # a recording of one eye keeps the measure its survey chose (another measures another
            # quantity)
            models = self.models if self.cfg.eye_measure is None else (self.cfg.landmarks.model,)
            rungs = ladder(start, rate, self.costs, models, detect=self.cfg.detect)[:MAX_RUNGS]
            for i, r in enumerate(rungs):
                self.rung_table[3 * i : 3 * i + 3] = [
                    float(self.models.index(r.model)) if r.model in self.models else -1.0,
                    r.mesh_reuse_ms,
                    float(r.detect_every),
                ]
            self.steps = StepController(rungs)

    def _on_batch(self, analyzer: Any, fitters: dict[str, Any]) -> None:
        """In a worker, before each batch: run the rung the sink chose
        (eyeblink.runtime.live.adapt). The rung is the analyzer's state (its eye model, the model's
        mesh reuse, its ``detect_every``); its config stays the run's."""
        level = self.level.value
        if level == self.applied_level:
            return
        self.applied_level = level
        k, reuse_ms, every = self.rung_table[3 * level : 3 * level + 3]
        if k >= 0 and self.models[int(k)] in fitters:
            analyzer.fitter = fitters[self.models[int(k)]]
        # a model that reuses its mesh (not mesh-ear)
        if getattr(analyzer.fitter, "mesh_reuse_s", 0.0) > 0:
            analyzer.fitter.mesh_reuse_s = reuse_ms / 1000.0
        analyzer.detect_every = int(every)

    def _judge(self, rows: np.ndarray) -> None:
        """In the sink, after each write: step down or up the ladder (one warning line, a metric,
        an entry)."""
        if self.steps is None or not len(rows):
            return
        backlog = max(0, int(self.n_in.value) - int(self.n_dropped.value) - self.n_written)
        # the drops of both kinds: the loader's (ring full) and the frames the workers found too
        # late, the only kind while the ring is large enough to hold the backlog
        step = self.steps.observe(
            time.perf_counter(),
            dropped=self.frames_dropped(),
            backlog=backlog,
            age_s=max(0.0, time.perf_counter() - float(rows["t_decoded"][-1])),
            frame=int(rows["index"][-1]),
            t_s=float(rows["timestamp_s"][-1]),
        )
        if step is None:
            return
        self.level.value = self.steps.level
        rung = self.steps.rung
        word = (
            "stepping down to" if step["direction"] == "down" else "headroom again, stepping up to"
        )
        warn(f"live: {step['why']}; {word} {rung.label()} at frame {step['frame']}")
        if self.metrics is not None:
            self.metrics.adapted(step["direction"], self.steps.level)

    def _stopped_before_connect(self) -> None:
        """A signal arrived before the sender connected: no frames; the workers end and the sink
        sees an empty input (the run ends normally, exit 0, as for a stop during the capture)."""
        log.info("%s: stopped before a sender connected", getattr(self.source, "spec", self.source))
        for q in self.work_qs:
            for _ in range(self.ends_per_queue):
                q.put(None)
        self.out_q.put(("eof", 0, None, 0.0, 0, None))

    # ------------------------------------------------------------ children

    def _child_setup(self) -> None:
        super()._child_setup()
        sys.setswitchinterval(LIVE_SWITCH_INTERVAL_S)  # see LIVE_SWITCH_INTERVAL_S
        # --priority: the sink said already whether the OS allows it
        raise_priority(self.live.priority)

    def _worker_ready(self, wid: int) -> None:
        # its models loaded and warmed up: no full collection of them during the session
        settle_heap()
        self.ready.release()

    def _worker_main(self, wid: int) -> None:
        log.debug("worker %d started", wid)
        super()._worker_main(wid)
        log.debug("worker %d finished", wid)

    def _loader_main(self) -> None:
        self._child_setup()
        source: LiveSource = self.source  # type: ignore[assignment]
        try:
            if not self._connect_in_loader(source):
                return
        except _Stop:
            source.close()
            return
        ring = self.ring
        assert ring is not None
        # a new mapping in this process: its page tables are filled now
        ring.prefault(self.prefault_slots)
        settle_heap()
        block = self.live.overload == "block"
        # frames the survey held: placed first, never dropped
        held = len(getattr(self, "_held", ([], None))[0])
        max_frames = self.cfg.max_frames
        duration = self.live.duration_s
        lock = threading.Lock()
        free: list[int] = list(range(len(ring) - 1, -1, -1))
        batch = _Batcher(self)
        st: dict[str, Any] = {
            "closed": False,
            "reason": None,
            "error": None,
            "bug": None,
            "t0": None,
        }
        rec = None
        # the frames as received, beside the session (eyeblink.runtime.live.record)
        if self.live.record is not None:
            from eyeblink.runtime.live.record import Recorder

            # only a network stream (StreamSource) is ever compressed
            compressed = getattr(source, "compressed", False)
            template = cast("StreamSource", source).video_stream() if compressed else None
            rec = Recorder(
                self.live.record, source.width, source.height, self.fps, template=template
            )
            if rec.copy:  # a compressed stream: its packets as they came (stream copy)
                # the survey's (held frames: recorded whole, waiting if need be)
                for packet in self._held_packets:
                    rec.put_packet(packet, wait=True)
                self._held_packets = []
                source.on_packet = rec.put_packet  # type: ignore[attr-defined]

        def take_slot() -> int:
            if not free:
                while True:  # take back whatever is free without waiting
                    try:
                        free.extend(self.free_q.get_nowait())
                    except queue.Empty:
                        break
            # the survey's held frames wait for a slot (see _survey)
            if not free and (block or batch.n < held):
                # the sender backs up meanwhile: frames arrive late, not its clock's fault
                source.clock.note_wait()
                free.extend(self._get(self.free_q))
            return free.pop() if free else -1

        def place(image: np.ndarray, ts: float, arrival: float) -> None:
            if rec is not None and not rec.copy:
                rec.put(image, ts, wait=batch.n < held)  # the survey's held frames: recorded whole
            slot = take_slot()
            if slot >= 0:
                ring.put(slot, image)
            else:
                self.n_dropped.value += 1
            self.n_in.value += 1
            batch.add(slot, ts, arrival)

        def capture() -> None:
            # start-up: see LIVE_STARTUP_GRACE_S
            grace_until: float | None = time.perf_counter() + LIVE_STARTUP_GRACE_S
            grace_frames = int(self.startup_frames.value) + LIVE_STARTUP_GRACE_FRAMES
            try:
                for cap in self._frames(source):
                    with lock:
                        if st["closed"]:
                            return
                        if grace_until is not None and (
                            cap.arrival_s >= grace_until or batch.n >= grace_frames
                        ):
                            # this frame's index: the bound applies from here
                            self.late_from_frame.value = batch.n
                            grace_until = None
                        place(cap.image, cap.timestamp_s, cap.arrival_s)
                        if st["t0"] is None:
                            st["t0"] = cap.arrival_s
                        if max_frames is not None and batch.n >= max_frames:
                            st["reason"] = f"--max-frames {max_frames} reached"
                            return
                        if duration is not None and cap.arrival_s - st["t0"] >= duration:
                            st["reason"] = f"--duration {duration:g} s reached"
                            return
                    self.n_reconnects.value = int(getattr(source, "reconnects", 0))
                st["reason"] = source.end_reason or "end of stream"
            except _Stop:
                st["reason"] = "pipeline stopped"
            except EyeblinkError as exc:
                st["reason"], st["error"] = str(exc), exc
            except BaseException as exc:
                st["bug"] = exc

        # stopped at once: what was received so far is a whole file (the recorder closed in any
        # case)
        with self._as_loader(batch, on_exit=lambda: rec.close() if rec is not None else None):
            log.info(
                "capture started: %s (%dx%d, %s FPS nominal), overload policy %s",
                source.spec,
                source.width,
                source.height,
                f"{source.nominal_fps:g}" if source.nominal_fps else "?",
                self.live.overload,
            )
            thread = threading.Thread(target=capture, name="eyeblink-capture", daemon=True)
            thread.start()
            next_tick = time.perf_counter() + 1.0
            while thread.is_alive():
                thread.join(0.05)
                if self.stop.is_set() or not host.parent_alive():
                    raise _Stop
                if self.capture_stop.is_set():
                    st["reason"] = st["reason"] or "stop requested (signal)"
                    break
                # heartbeat: the sink's stall check sees us alive
                if time.perf_counter() >= next_tick:
                    next_tick = time.perf_counter() + 1.0
                    with contextlib.suppress(queue.Full):
                        self.out_q.put_nowait(("tick",))
            if st["bug"] is not None:
                raise st["bug"]
            # the capture thread may still be blocked in a read: it stops at its next frame
            with lock:
                st["closed"] = True
                batch.flush()
            n = batch.n
            info = source.describe()
            info["live"] = {
                "stop_reason": st["reason"],
                "frames_in": n,
                "frames_dropped": int(self.n_dropped.value),
                "recording": rec.close() if rec is not None else None,
            }
            rec = None
            log.info(
                "capture stopped: %s; %d frames in, %d dropped",
                st["reason"],
                n,
                self.n_dropped.value,
            )
            err = st["error"]
            self._put(self.out_q, ("eof", n, info, 0.0, 0, err))
            self._end_of_input()

    # ------------------------------------------------------------ parent

    def _make_writer(self, outdir: Path, stem: str) -> ResultWriter:
        return LiveResultWriter(outdir, stem, tap=self.tap)

    def _sink_loop(self, sink: Any, clock: Any, redet: Any, bar: Any) -> Any:
        """Every row written, the capture over: the last blink and the ``end`` line now (not
        after the files)."""
        info = super()._sink_loop(sink, clock, redet, bar)
        if self.tap is not None and sink is not None:
            sink.finish()
            self.tap.end(self.end_reason())
        return info

    def end_reason(self) -> str | None:
        """Why the run ended: a stop asked for (a signal, the API), else the capture's own (its
        ``eof``)."""
        return self.stop_reason or ((self._info or {}).get("live") or {}).get("stop_reason")

    def _write(self, sink: SessionSink | None, rows: np.ndarray) -> None:
        from eyeblink.frame.analyzer import FrameResult

        assert sink is not None  # live runs always have their sink
        if self.aborted:
            raise KeyboardInterrupt("stopped at once (a second Ctrl-C)")
        # the run's config, resolved at connection: the sink takes it before any row
        if sink.cfg is not self.cfg:
            sink.use_config(self.cfg)
        n_events = len(sink.events)
        if self.tap is not None:
            self.tap.detector = sink.blinks  # the state machine whose changes the tap publishes
            # the start-up rows: not counted as past the bound
            self.tap.startup_frames = self.late_from()
            self.tap.arrivals(rows["index"].tolist(), rows["t_decoded"].tolist())
        dropped = rows["dropped"]
        # a batch's rows and its counts, all or none (a second Ctrl-C comes after both)
        with stopping.held():
            self.n_gap += int(dropped.sum())
            if not dropped.any():
                super()._write(sink, rows)
            # runs of analysed rows go through the usual path; gap rows get face 0 and dropped 1
            else:
                edges = np.flatnonzero(np.diff(dropped.astype(np.int8))) + 1
                for part in np.split(rows, edges):
                    if not part["dropped"][0]:
                        super()._write(sink, part)
                        continue
                    writer: LiveResultWriter = sink.writer  # type: ignore[assignment]
                    writer.dropped = True
                    try:
                        for r in part:
                            sink.add(
                                FrameResult(int(r["index"]), float(r["timestamp_s"]), None, False)
                            )
                    finally:
                        writer.dropped = False
            self.n_written += len(rows)
        self.hops.add(rows, time.perf_counter())
        self._judge(rows)
        if self.metrics is not None:
            self.metrics.observe(rows, time.perf_counter(), len(sink.events) - n_events)
        warning = self.memory.sample(time.perf_counter())
        if warning is not None:
            warn(warning)

    def _memory_processes(self) -> dict[str, int]:
        """``{role: pid}`` of the run's processes alive now: the sink (this process), the loader,
        the workers."""
        out = {"sink": os.getpid()}
        for p in self.procs:
            if p.pid is not None and p.exitcode is None:
                out[p.name.removeprefix("eyeblink-")] = p.pid
        return out

    def _memory_hint(self, role: str) -> str | None:
        """What the growth warning adds when ``role`` grew most: the known cause of a growing
        loader."""
        if role == "loader" and (self._info or self.source.describe()).get("container") == "nut":
            return NUT_HINT
        return None

    def frames_dropped(self) -> int:
        """Frames written as gap rows (or dropped by the loader): the loader's drops and the late
        ones."""
        return max(int(self.n_dropped.value), self.n_gap)

    def drop_warning(self) -> str | None:
        """One line when more than :data:`DROP_WARN_SHARE` of the rows written are gap rows (None
        otherwise): its counts are those of frames.csv, also when a run stopped at once left
        captured frames unwritten."""
        n = self.n_written
        d = self.n_gap
        if not n or d / n <= DROP_WARN_SHARE:
            return None
        model = self.cfg.landmarks.model
        cheaper = " or ".join(f"--landmarks {m}" for m in ("lids", "mesh-ear") if m != model)
        return (
            f"{d} of {n} frames ({100.0 * d / n:.1f}%) were dropped, more than "
            f"{DROP_WARN_SHARE:.0%}: this "
            f"machine did not analyse the stream in real time with --landmarks {model} (gap rows, "
            "dropped=1); "
            f"try {cheaper}, fewer frames per second, or more cores"
        )

    def unpublished_warning(self) -> str | None:
        """One line when more than :data:`DROP_WARN_SHARE` of the rows reached the sink past
        ``--max-latency-ms`` and were not published (None otherwise)."""
        n = self.n_written  # the rows in frames.csv (the tap sees each one as it is written)
        u = self.tap.late_rows if self.tap is not None else 0
        if not n or u / n <= DROP_WARN_SHARE:
            return None
        return (
            f"{u} of {n} rows ({100.0 * u / n:.1f}%) reached the end of the pipeline more than "
            "--max-latency-ms "
            f"({self.live.max_latency_ms:g} ms) after their frame arrived: they are in frames.csv "
            "but were not "
            f"published (no LSL sample, no state); this machine was too busy for the session"
        )

    def _extra_warnings(self) -> list[str]:
        steps = self.steps.steps if self.steps is not None else []
        out = [*self.warnings_extra]
        clock = (self._info or self.source.describe()).get("clock") or {}
        if clock.get("message"):  # said when it was found
            out.append(clock["message"])
        downs = sum(s["direction"] == "down" for s in steps)
        if downs:
            out.append(
                f"live: the pipeline fell behind and stepped down {downs} times (summary "
                "live.adaptations)"
            )
        if self.memory.warning:
            out.append(self.memory.warning)
        rec = ((self._info or {}).get("live") or {}).get("recording") or {}
        if rec.get("dropped") or rec.get("error"):
            text = (
                f"--record {rec.get('path')}: {rec.get('dropped')} frames missing from the "
                "recording "
                f"({rec.get('error') or 'the disk did not keep up'}); the session's rows are "
                "complete"
            )
            warn(text)
            out.append(text)
        unwritten = int(self.n_in.value) - self.n_written
        if unwritten > 0 and self.n_written:
            out.append(
                warn(
                    f"{unwritten} of the {int(self.n_in.value)} frames captured were never "
                    "written (the run "
                    f"stopped before they were analysed): frames.csv holds {self.n_written} rows"
                )
            )
        for line in (self.drop_warning(), self.unpublished_warning()):
            if line is not None:
                warn(line)
                out.append(line)
        return out

    def _extra_summary(self) -> dict[str, Any]:
        info = (self._info or {}).get("live", {})
        return {
            "live": {
                **asdict(self.live),
                "ring_slots": self.spec.slots if self.spec else None,
                "fps": self.fps,
                "landmarks_model": self.cfg.landmarks.model,
                "landmarks_choice": self.model_reason or "as configured",
                "host_costs": self.costs.as_dict() if self.costs is not None else None,
                "adaptations": self.steps.steps if self.steps is not None else [],
                "ladder": [r.as_dict() for r in self.steps.rungs] if self.steps is not None else [],
                "frames_in": int(self.n_in.value),
                "rows_written": self.n_written,
                "frames_dropped": self.n_gap,  # the gap rows in frames.csv
                "frames_late": max(0, self.n_gap - int(self.n_dropped.value)),
                "status": (
                    "overloaded"
                    if self.drop_warning() is not None or self.unpublished_warning() is not None
                    else "ok"
                ),
                "recording": info.get("recording"),
                "stop_reason": self.end_reason(),
                "timestamps": (self._info or {}).get("timestamps"),
                "measured_fps": (self._info or self.source.describe()).get("measured_fps"),
                "startup_frames": int(self.startup_frames.value),
                # the source's clock against the arrival clock (eyeblink.sources.clock): which one
                # the run used
                "clock": (self._info or self.source.describe()).get("clock"),
                "publish": self.tap.summary() if self.tap is not None else None,
                "memory": self.memory.summary(),
                "workers_dealt": self.dealt,
                "workers_dealt_reason": self.dealt_reason,
                "hops_ms": self.hops.summary(),
                "priority": self.priority,
            }
        }

    def gauges(self) -> dict[str, Any]:
        """Scrape-time readers of the loader's counters and the queues (for
        :class:`LiveMetrics`)."""

        def work_depth() -> float:
            return float(sum(q.qsize() for q in self.work_qs))

        return {
            "frames_in": lambda: self.n_in.value,
            "frames_dropped": self.frames_dropped,
            "reconnects": lambda: self.n_reconnects.value,
            "clock_believed": lambda: self.clock_believed.value,
            "rows_unpublished": lambda: self.tap.late_rows if self.tap is not None else 0,
            "queue:ring": lambda: max(0, self.n_in.value - self.n_dropped.value - self.n_written),
            "queue:work": work_depth,
            "queue:results": lambda: self.out_q.qsize() if self.out_q is not None else 0,
            "memory_rss": lambda: {
                role: rss_bytes(pid) for role, pid in self._memory_processes().items()
            },
        }

    def abort(self) -> None:
        """Stop at once (from any thread): what a second Ctrl-C does. The capture stops, the next
        rows to arrive end the run as a KeyboardInterrupt in the sink would (summary
        ``interrupted``, every file closed, the children stopped and the ring unlinked)."""
        self.aborted = True
        self.request_stop("stopped by SIGINT")

    def request_stop(self, reason: str) -> None:
        """Stop the capture and drain (from any thread): what Ctrl-C does, for the Python API."""
        if not self.capture_stop.is_set():
            self.stop_reason = reason
            self.capture_stop.set()

    def execute_live(self, outdir: Path, *, signals: bool = True) -> RunResult:
        """:meth:`execute` with SIGINT/SIGTERM turned into "stop the capture and drain"
        (``signals``: only in the main thread; the Python API runs the session in a thread and stops
        it with :meth:`request_stop`). The sink's process hands rows on with a short GIL switch
        interval meanwhile (:data:`LIVE_SWITCH_INTERVAL_S`)."""
        from eyeblink.runtime.live import priority

        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, LIVE_SWITCH_INTERVAL_S))
        saved = priority.current()
        # --priority: the sink first (its threads: LSL, the gate, metrics start later and inherit
        # it); the loader and the workers apply it to themselves as they start (_child_setup)
        refused = priority.raise_priority(self.live.priority)
        self.priority = {
            "asked": self.live.priority,
            "applied": refused is None,
            "refused": refused,
        }
        if refused is not None:
            warn(f"live: {refused}")
        try:
            return self._execute_live(outdir, signals=signals)
        finally:
            sys.setswitchinterval(interval)
            priority.restore_priority(saved)

    def _execute_live(self, outdir: Path, *, signals: bool) -> RunResult:
        if not signals:
            return self.execute(outdir, None)
        stopping.check()  # a stop during start-up (eyeblink.stopping): interrupted, exit 130

        def on_signal(signum: int, _frame: Any) -> None:
            name = signal.Signals(signum).name
            if self.capture_stop.is_set():
                # a second Ctrl-C (or Ctrl-Break) stops at once, as any command does:
                if signum != signal.SIGTERM:
                    # never inside the summary's write
                    stopping.on_signal(signum, _frame)
                return
            self.stop_reason = f"stopped by {name}"
            log.info("%s: stopping the capture, draining the pipeline", name)
            self.capture_stop.set()

        old = {s: signal.signal(s, on_signal) for s in stopping.STOP_SIGNALS}
        try:
            return self.execute(outdir, None)
        finally:
            for s, h in old.items():
                # None: the handler before was not Python's (an embedding application's)
                signal.signal(s, h if h is not None else signal.SIG_DFL)


class LivePipeline(ParallelPipeline):
    """The multiprocess pipeline with live defaults; :meth:`run` processes one live source."""

    def __init__(
        self, config: RunConfig, live: LiveConfig, *, start_method: str | None = None
    ) -> None:
        """Load the models (before the source is opened: see :meth:`_LiveRun._start`); the processes
        start by ``start_method`` (``--start-method``, the API's ``start_method=``; None: the
        environment's, else auto).

        The eye model of the two configs is made one first (:func:`resolve_eye_model`). With
        ``auto`` both candidate models are loaded (:data:`~eyeblink.runtime.choose.AUTO_LANDMARKS`:
        a few MB each) and the run picks one once the source's rate is known
        (:func:`~eyeblink.runtime.choose.choose_landmarks`); otherwise the model of
        ``config.landmarks``.
        """
        from eyeblink.frame.analyzer import build_fitters

        config, live = resolve_eye_model(config, live)
        self.live = live
        self.fitters: dict[str, Any] = (
            build_fitters(config, AUTO_LANDMARKS) if live.landmarks == "auto" else {}
        )
        super().__init__(
            config,
            replace(live.parallel(None), start_method=start_method),
            fitter=self.fitters.get(AUTO_LANDMARKS[0]),
        )

    def measure_host(self) -> HostCosts | None:
        """What BlazeFace and each loaded eye model cost on this machine, on a real face frame
        (before any worker forks: nothing else runs); None with the accelerator stage (the device
        runs them)."""
        from eyeblink.runtime.costs import measure_costs
        from eyeblink.runtime.pipeline import build_detector

        if self.accelerated:
            return None
        fitters = self.fitters or {self.cfg.landmarks.model: self.fitter}
        locator = locator_for(self.cfg)
        # a recording of one eye: no detector runs, none is timed
        if isinstance(locator, FixedRegion):
            if self.cfg.landmarks.region_auto:  # the survey may choose either measure: both timed
                from eyeblink.frame.analyzer import build_fitters

                fitters = {**build_fitters(self.cfg, ("contour",)), **fitters}
            return measure_costs(fitters, None, width=640, height=480, region=locator.region)
        with build_detector(self.cfg) as detector:
            return measure_costs(fitters, detector, width=640, height=480)

    def run(
        self,
        source: LiveSource,
        outdir: Path,
        *,
        metrics: bool = True,
        tap: LiveTap | None = None,
        signals: bool = True,
        started: Any = None,
    ) -> tuple[RunResult, _LiveRun]:
        """Process ``source`` into ``outdir`` until it ends or is stopped. ``tap`` publishes rows,
        blinks and state changes as they are written (LSL, the gate socket, the API);
        ``started(run)`` is called before the capture starts (the API keeps the run to stop it);
        ``signals``: Ctrl-C/SIGTERM stop the capture."""
        from eyeblink.outputs.export import ensure_output_dir

        ensure_output_dir(outdir)
        run = _LiveRun(self, source, tap)
        if started is not None:
            started(run)
        server = None
        if metrics and self.live.metrics_port is not None:
            from eyeblink.runtime.live.metrics import LiveMetrics, start_metrics_server

            run.metrics = LiveMetrics(
                source=source.spec, overload=self.live.overload, gauges=run.gauges()
            )
            server, port = start_metrics_server(
                run.metrics, self.live.metrics_port, self.live.metrics_host
            )
            log.info("metrics on http://%s:%d/metrics", self.live.metrics_host, port)
        try:
            return run.execute_live(outdir, signals=signals), run
        finally:
            if tap is not None:
                tap.close(run.end_reason())
            if run.metrics is not None:
                run.metrics.close()
            if server is not None:
                server.shutdown()
                server.server_close()


@contextlib.contextmanager
def open_file_view(view: bool, view_port: int = 0, view_host: str = "127.0.0.1") -> Any:
    """``process --view``: the page open for the whole run (None without ``view``), closed at the
    end."""
    if not view:
        yield None
        return
    from eyeblink.runtime.live.view import ViewSink

    page = ViewSink(
        port=view_port,
        host=view_host,
        announce=lambda text: print(f"eyeblink: {text}", file=sys.stderr, flush=True),
    )
    page.open(mode="file")
    try:
        yield page
    finally:
        page.close("all inputs processed")
