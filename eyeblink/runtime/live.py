"""Live mode: a camera or a network stream in, EAR rows and blinks out while the frames arrive.

``eyeblink live SOURCE -o OUTDIR`` runs the multiprocess pipeline of :mod:`eyeblink.runtime.parallel` with a
live loader and writes the same files as ``process`` (``<stem>.frames.csv`` with one appended
column, ``dropped``; ``<stem>.blinks.csv``; ``<stem>.summary.json``), incrementally. When the capture
ends normally, :func:`eyeblink.outputs.analysis.finalize` calibrates the FEC column and writes the trials,
traces, plots and NWB that the conditioning options ask for, exactly as after ``process``.

The live loader (a forked process) runs a capture thread that stamps every frame on arrival
(:class:`~eyeblink.sources.live.Captured`), gives it the next frame index and puts it into a free
slot of the shared-memory ring; its main thread watches the stop request and the heartbeat.

Overload policy (``--on-overload``), applied when a frame arrives and the ring has no free slot:

* ``drop`` (default): the frame is dropped at once and written as a gap row (``face`` 0, empty
  EAR, ``dropped`` 1) in its place; ``frames_dropped`` counts it. The capture never waits, so
  the camera's or the socket's buffer never overflows behind our back.
* ``block``: the capture waits for a free slot. Nothing is dropped by eyeblink, but the source
  backs up: a TCP sender slows down, a camera's driver drops frames (visible as timestamp gaps,
  ``timestamp_gaps`` in the summary, and for Basler cameras ``camera_skipped_frames``).

Low-latency layout (measured with ``scripts/bench_live.py``, see its docstring): frames go to the
workers in chunks of :data:`LIVE_CHUNK_FRAMES` dealt round-robin, in messages of
:data:`LIVE_BATCH_FRAMES`, and each worker keeps tracking the face from one of its chunks to the
next (``ParallelConfig.track_across_chunks``), so no chunk starts with a forced detection. Every
worker then works at 1/W of the camera's rate all the time, instead of one worker at the full rate
for a whole chunk (files: contiguous chunks of 128, throughput first). The workers load and warm up
before the source is connected and the ring (``--buffer`` seconds of frames, which absorbs a hiccup
of the machine without dropping) is reserved and faulted in meanwhile (:meth:`_LiveRun._start`).
``--landmarks auto`` (the default) picks the landmark model the machine can run at the source's
rate (:func:`choose_landmarks`), from costs measured on this machine before the capture starts
(:mod:`eyeblink.runtime.host`). During the run the sink steps down a ladder of cheaper settings when frames
drop or the backlog grows, and back up when headroom returns (:mod:`eyeblink.runtime.adapt`): each step is a
warning line, a metric and a ``summary.json`` entry.

Stopping: SIGINT (Ctrl-C) or SIGTERM stops the capture; frames already captured are analysed, every
file is flushed and the run exits 0 (a second Ctrl-C stops at once, status ``interrupted``). A
stream that ends stops the run the same way, with a message; a lost source (after ``--reconnect``
tries) stops it with :class:`~eyeblink.sources.live.SourceLostError` (exit 4), rows kept.
"""

from __future__ import annotations

import argparse
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
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.config import (
    LIVE_BATCH_FRAMES,
    LIVE_CHUNK_FRAMES,
    LIVE_LANDMARKS,
    LIVE_PRIORITIES,
    OVERLOAD_POLICIES,
    LiveConfig,
)
from eyeblink.errors import ConfigError, EyeblinkError, VideoOpenError, WorkerError, warn
from eyeblink.outputs.analysis import AnalysisOptions
from eyeblink.outputs.export import FRAME_COLUMNS, ResultWriter
from eyeblink.runtime.hops import HopRecord
from eyeblink.runtime.memory import NUT_HINT, MemoryWatch, rss_bytes
from eyeblink.runtime.parallel import _POLL_S, ParallelPipeline, _Batcher, _Run, _Stop
from eyeblink.runtime.priority import raise_priority
from eyeblink.runtime.shm import FrameRing, RingSpec, ring_cap_bytes, ring_refusal

if TYPE_CHECKING:
    from eyeblink.runtime.adapt import StepController
    from eyeblink.runtime.host import HostCosts

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.runtime.metrics import LiveMetrics
    from eyeblink.runtime.pipeline import RunResult, SessionSink
    from eyeblink.runtime.publish import LiveTap
    from eyeblink.signals.blinks import BlinkEvent
    from eyeblink.sources.live import LiveSource

__all__ = ["LIVE_BATCH_FRAMES", "LIVE_CHUNK_FRAMES", "LIVE_FRAME_COLUMNS", "LiveConfig", "LivePipeline",
           "add_parser", "run"]

log = logging.getLogger("eyeblink.live")

#: frames.csv of a live run: the contract's columns, then ``dropped`` (1 = a gap row of the overload policy).
LIVE_FRAME_COLUMNS = (*FRAME_COLUMNS, "dropped")
#: Unit and meaning of the columns a live frames.csv adds to the contract's (generated into the docs).
LIVE_FRAME_COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "dropped": ("0/1", "live runs only: 1 for a gap row, a frame the overload policy dropped (--on-overload drop) "
                       "or that never arrived; its measurement cells are empty"),
}
#: Ring slots mapped into every process before the capture when the ring could not be reserved in
#: advance (FrameRing.prefault): the frames in flight cycle through the lowest slots, ~10 at 500 FPS.
PREFAULT_SLOTS = 64
#: warm-up frames the blink detector re-judges per new frame (BlinkDetector rescan_per_frame)
LIVE_RESCAN_PER_FRAME = 25
#: the live pipeline keeps its cores at most this busy (30% headroom): above it, queueing makes the latency
#: tail grow fast
LIVE_MAX_LOAD = 0.7
#: with the default ``--workers``, all frames go to one worker while its networks need at most this share of a
#: core at the source's rate (see :func:`choose_dealt_workers`)
LIVE_ONE_WORKER_LOAD = 0.6
#: ``--landmarks auto`` candidates, first choice first (Apache-2.0 models only): ``lids`` is as accurate as
#: ``mesh`` on people it never saw at about half the cost; ``mesh-ear`` is the fallback where ``lids`` cannot
#: hold the rate (its face mesh on every frame is cheaper than the lids' mesh only at low rates).
AUTO_LANDMARKS = ("lids", "mesh-ear")
#: rungs of the cost ladder at most (eyeblink.runtime.adapt)
MAX_RUNGS = 8
#: the accelerator stage's largest batch compiled before a live capture starts (see _LiveRun.warm_batch)
LIVE_WARM_BATCH = 32
#: a run that drops more than this share of its frames (the loader's and the late ones) says so: one warning
#: line, the summary's ``warnings`` and ``live.status`` ``overloaded``
DROP_WARN_SHARE = 0.01
#: start-up: the frames read at connection (a stream's rate probe, up to 0.5 s of a slow stream) and those that
#: arrive in the first this many seconds of the capture are analysed whatever their age (never gap rows of the
#: latency bound, and not counted as rows past it): the workers' first frames and the burst of the connection
#: are not the run falling behind ...
LIVE_STARTUP_GRACE_S = 0.5
#: ... but at most this many frames after those read at connection (a fast stream's backlog stays short)
LIVE_STARTUP_GRACE_FRAMES = 128
#: the GIL switch interval of a live run's processes (Python's default: 5 ms). Each process has threads that hand
#: a frame on (the loader's capture thread and its queue's feeder thread, a worker's analysis and its feeder, the
#: sink and the API's consumer); a thread woken to pass a frame on waits for the GIL up to the switch interval
#: whenever another thread of its process is busy in Python, so every hand-off could add up to 5 ms
LIVE_SWITCH_INTERVAL_S = 0.0005
#: with --on-overload drop, the share of --max-latency-ms a frame may wait before its worker starts it; the rest is
#: for what follows the worker (its batch, the results queue, the sink's reorder and its write), which took up to
#: ~150 ms more on a 2-core host at 1,000 FPS: a frame started at the whole bound reached LSL and the gate past it
LIVE_LATE_SHARE = 0.5


def die_with_parent(parent_pid: int) -> None:
    """In a forked child: be killed (SIGKILL) as soon as the process that forked it dies, whatever killed it
    (``kill -9`` included), so that no loader keeps the camera connection and the ring, and no worker spins.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; the parent may have died before it took effect, so the parent's
    pid is checked after. Elsewhere the children's queue polls (every ``_POLL_S``) notice the new parent.
    """
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent_pid:
        os._exit(1)


def choose_landmarks(fps: float | None, cores: int, mesh_reuse_ms: float = 20.0, *, costs: HostCosts | None = None,
                     detect_every: int = 10, candidates: tuple[str, ...] = AUTO_LANDMARKS) -> tuple[str, str, bool]:
    """``--landmarks auto``: the first of ``candidates`` that ``cores`` run at ``fps`` in real time.

    Real time needs ``fps x frame_ms`` of CPU at most ``LIVE_MAX_LOAD`` of the cores, ``frame_ms`` being the
    per-frame cost on this machine (:meth:`HostCosts.frame_ms`: the fit with its face mesh reused for
    ``mesh_reuse_ms``, BlazeFace every ``detect_every`` frames, the decode and a fixed overhead) from
    ``costs`` measured before the capture (:func:`eyeblink.runtime.host.measure_costs`), or the registry's
    constants when there are none. When none fits, the cheapest at this rate, and the reason says that it
    cannot hold the rate. An unknown rate counts as 500 FPS. Returns (model, reason, holds the rate).
    """
    from eyeblink.runtime.host import registry_costs

    rate = fps if fps and fps > 0 else 500.0
    if costs is None:
        costs = registry_costs(candidates, "not measured")
    usable = [m for m in candidates if m in costs.fit_ms] or list(candidates)

    def need(model: str) -> float:
        return costs.cores_needed(model, rate, mesh_reuse_ms=mesh_reuse_ms, detect_every=detect_every,
                                  max_load=LIVE_MAX_LOAD)

    where = costs.describe(usable)
    for model in usable:
        if need(model) <= cores:
            return model, (f"{model}: {rate:g} FPS needs ~{need(model):.1f} of the {cores} cores at most "
                           f"{LIVE_MAX_LOAD:.0%} busy; {where}"), True
    model = min(usable, key=need)
    return model, (f"{model} CANNOT hold {rate:g} FPS here: it needs ~{need(model):.1f} cores at most "
                   f"{LIVE_MAX_LOAD:.0%} busy, this machine has {cores}; frames will be dropped (lower the "
                   f"camera's rate, or use a machine with more cores); {where}"), False


def choose_dealt_workers(costs: HostCosts | None, model: str, fps: float | None, *, workers: int, asked: int,
                         mesh_reuse_ms: float, detect_every: int) -> tuple[int, str]:
    """How many of the ``workers`` forked get frames, and why.

    Each worker tracks the face over its own frames, so each runs its own keyframes and its own face-mesh refits
    (every ``mesh_reuse_ms`` of capture time): two workers run the face mesh twice as often as one, and on two
    cores four busy processes (sink, loader, two workers) wait for each other's cores. So with the default
    (``asked`` 0) all frames go to one worker while its networks, measured on this machine before the capture
    (:class:`~eyeblink.runtime.host.HostCosts`: the fit with its mesh reused, a keyframe every ``detect_every``
    frames), need at most :data:`LIVE_ONE_WORKER_LOAD` of a core at ``fps``; otherwise to all. An explicit
    ``--workers N`` is obeyed. Returns (workers dealt, reason)."""
    if asked > 0 or workers <= 1:
        return workers, f"{workers} worker{'s' if workers > 1 else ''} ({'--workers' if asked else 'one core'})"
    if costs is None or not costs.measured or model not in costs.fit_ms:
        return workers, f"{workers} workers (costs not measured)"
    rate = fps if fps and fps > 0 else 500.0
    load = rate * costs.networks_ms(model, rate, mesh_reuse_ms=mesh_reuse_ms, detect_every=detect_every) / 1000.0
    if load <= LIVE_ONE_WORKER_LOAD:
        return 1, (f"1 worker of {workers}: {model}'s networks need ~{load:.2f} of a core at {rate:g} FPS "
                   f"(<= {LIVE_ONE_WORKER_LOAD:g}); one tracker refits the face mesh half as often as two")
    return workers, (f"{workers} workers: {model}'s networks need ~{load:.2f} of a core at {rate:g} FPS "
                     f"(> {LIVE_ONE_WORKER_LOAD:g})")


class LiveResultWriter(ResultWriter):
    """frames.csv with the ``dropped`` column appended; set :attr:`dropped` before a gap row."""

    def __init__(self, outdir: str | Path, stem: str, *, flush_interval_s: float = 0.5,
                 tap: LiveTap | None = None) -> None:
        super().__init__(outdir, stem, flush_interval_s=flush_interval_s)
        self.dropped = False
        self.tap = tap  # LSL, the gate socket, the API: each row and blink right after it is written

    def frame_header(self) -> tuple[str, ...]:
        """The table's columns, then ``dropped`` (:data:`LIVE_FRAME_COLUMNS` with the default table)."""
        return (*self.table.names, *LIVE_FRAME_COLUMNS[len(FRAME_COLUMNS):])

    def write_summary(self, summary: dict[str, Any]) -> None:
        """As :meth:`ResultWriter.write_summary`; a run that ended well but fell behind (``live.status``
        ``overloaded``) says so in the top-level ``status`` too, which scripts read (the dict is updated in place:
        the run's result says the same)."""
        if summary.get("status") == "ok" and (summary.get("live") or {}).get("status") == "overloaded":
            summary["status"] = "overloaded"
        super().write_summary(summary)

    def write_frame(self, row: Any) -> None:
        full = (*row, int(self.dropped))
        super().write_frame(full)
        if self.tap is not None:
            self.tap.row(full)

    def write_blink(self, ev: BlinkEvent) -> None:
        super().write_blink(ev)
        if self.tap is not None:
            self.tap.blink(ev)


class _LiveRun(_Run):
    """One live source through the pipeline: the live loader, gap rows, metrics, graceful stop."""

    def __init__(self, pipe: LivePipeline, source: LiveSource, tap: LiveTap | None = None) -> None:
        super().__init__(pipe, source)
        ctx = pipe._ctx
        self.live = pipe.live
        self.tap = tap
        if tap is not None and tap.preview is not None:  # --view: the loader hands the view a frame when asked
            self.preview = tap.preview
        self.capture_stop = ctx.Event()
        self.n_in = ctx.RawValue("q", 0)
        self.n_dropped = ctx.RawValue("q", 0)
        self.n_reconnects = ctx.RawValue("q", 0)
        self.ready = ctx.Semaphore(0)  # one release per worker whose detector is built
        # frames received before the capture started (a stream's rate probe): analysed whatever their age
        self.startup_frames = ctx.RawValue("q", 0)
        # the first frame the latency bound drops: set by the loader at the first frame that arrives
        # LIVE_STARTUP_GRACE_S after the capture started (until then every frame is analysed, whatever its age)
        self.late_from_frame = ctx.RawValue("q", 2**62)
        self.clock_believed = ctx.RawValue("i", 1)  # 0 once the source's clock is not believable (the metric)
        self.prefault_slots = 0  # ring slots every process maps before the capture (see _start)
        self.fitters = pipe.fitters  # --landmarks auto: the models to pick from
        self.model: str | None = None if not pipe.fitters else AUTO_LANDMARKS[0]  # chosen in _start (auto)
        self.model_reason: str | None = None
        self.costs: HostCosts | None = None  # measured in _start, before the workers fork
        # the cost ladder (eyeblink.runtime.adapt): the sink writes the rung, the workers read it per batch
        self.models = tuple(sorted(pipe.fitters or (pipe.cfg.landmarks.model,)))
        self.level = ctx.RawValue("i", 0)
        self.rung_table = ctx.RawArray("d", 3 * MAX_RUNGS)  # (model index, mesh_reuse_ms, detect_every) each
        self.applied_level = 0  # in a worker: the rung it runs
        self.steps: StepController | None = None
        self.warnings_extra: list[str] = []  # the summary's: e.g. a model that cannot hold the rate
        # the blink detector re-scans its warm-up (~1 s of frames) 25 frames per new frame, not in one
        # ~100 ms go that would hold every row behind it
        self.rescan_per_frame = LIVE_RESCAN_PER_FRAME
        # the accelerator stage: a live stream's batches are the few frames of one flush deadline (more while it
        # catches up): their programs are compiled before the capture starts, not on the stream's first frames
        self.warm_batch = LIVE_WARM_BATCH
        self.n_written = 0
        self.aborted = False  # abort(): the sink stops at its next rows
        self.n_gap = 0  # gap rows written: the loader's drops and the frames the workers found too late
        # --on-overload drop: the newest frames win; a frame older than this when its worker gets to it is a gap
        # (part of the bound: the rest is for the way to the sink, see LIVE_LATE_SHARE)
        self.late_s = (self.live.max_latency_ms / 1000.0 * LIVE_LATE_SHARE if self.live.overload == "drop"
                       else None)
        self.fps: float | None = None  # the rate the ring and the LSL outlets were sized for (see _start)
        self.stop_reason: str | None = None
        self.metrics: LiveMetrics | None = None
        # the RSS of the run's processes, sampled by the sink: a run of hours must not grow (eyeblink.runtime.memory)
        self.memory = MemoryWatch(self._memory_processes, hint=self._memory_hint)
        self.priority: dict[str, Any] = {"asked": self.live.priority, "applied": self.live.priority == "normal",
                                         "refused": None}
        self.hops = HopRecord()  # where each frame's time went, arrival -> row written (eyeblink.runtime.hops)
        self.dealt_reason = "as forked"  # how many workers get frames (choose_dealt_workers, in _choose)

    def _ring_spec(self) -> RingSpec | None:
        return None  # sized in _start, once the stream is open and its frame size and rate are known

    def _start(self) -> None:
        """Workers first, warmed up; then open the stream, size the ring and start the capture.

        A network stream starts sending when it is opened: every frame that arrives before the
        workers can analyse it waits in the socket (a paced sender then catches up in a burst)
        and comes out late. So the workers are forked and warmed up (LiteRT's first invoke, the
        dlib model paged in) before :meth:`LiveSource.start` connects, and attach to the ring by
        name when it exists. The ring's memory is reserved and faulted in meanwhile: a frame that
        lands on a fresh page pays the fault in the loader and again in its worker (up to ~2 ms
        a frame in a VM), and on the first second of a stream that is a backlog that feeds itself.
        """
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()  # one tracker for the ring, shared by the children (see shm)
        # what each part costs on this machine, timed now (nothing else runs yet): auto's choice and the ladder
        self.costs = self.pipe.measure_host()  # type: ignore[attr-defined]
        self._make_queues(0)  # the ring bounds the frames in flight; its size is not known yet
        self._fork_workers()
        source: LiveSource = self.source  # type: ignore[assignment]
        # the most the ring may take (a share of the memory available and of /dev/shm), measured before any of it
        cap, cap_why = ring_cap_bytes()
        # while the workers load: reserve the ring for the likely geometry (the configured or the camera's rate,
        # at most 1,000 FPS, and size, else 500 FPS 640x480), so that its page faults come now; within the cap
        guess = min(self.cfg.fps or source.nominal_fps or 500.0, 1000.0)
        likely = RingSpec(self.live.parallel(guess, base=self.par).slots, (source.height or 480, source.width or 640))
        block: Any = FrameRing.reserve(likely.nbytes if cap is None else min(likely.nbytes, cap))
        try:
            deadline = time.monotonic() + self.par.stall_timeout_s
            for _ in range(self.n_done):  # the workers (and the accelerator stage, once compiled)
                while not self.ready.acquire(timeout=_POLL_S):
                    if any(p.exitcode is not None for p in self.procs):
                        return  # a worker failed while loading: the sink loop reports it
                    if time.monotonic() > deadline:
                        raise WorkerError(f"the workers did not load their models within "
                                          f"{self.par.stall_timeout_s:.0f} s")
            source.cancelled = self.capture_stop.is_set
            if self.tap is not None:  # the gate socket (and the outlets if their rate is known) before any frame
                self.tap.open(source=source.spec, stem=source.name, nominal_fps=self.cfg.fps or source.nominal_fps,
                              eye_model=self.model or self.cfg.landmarks.model, cancelled=self.capture_stop.is_set)
            log.info("waiting for %s", source.spec)
            try:
                source.start()
            except VideoOpenError:
                if not self.capture_stop.is_set():
                    raise
                self._stopped_before_connect()  # Ctrl-C / SIGTERM while waiting for the sender
                return
            self._connected(source)
            # the rate: --fps when given, else the source's (a stream's measured from its timestamps)
            self.fps = self.cfg.fps or source.nominal_fps
            self._choose(source)
            if self.tap is not None:  # a stream's own rate is known now; the capture has not started
                self.tap.connected(self.fps, self.cfg.landmarks.model)
            # the ring: --buffer seconds at the rate measured as the first frames arrived (not a claimed one)
            ring_fps = source.measured_fps or self.fps
            self.par = self.live.parallel(ring_fps, base=self.par)
            slots = self.par.slots
            if self.accelerated:
                from eyeblink.runtime.accelerator import stage_slots

                slots = stage_slots(self.cfg, slots, self.W, self.B)
            self.spec = RingSpec(slots, (source.height, source.width))
            if cap is not None and self.spec.nbytes > cap:  # refused before the ring is allocated
                raise ConfigError(ring_refusal(self.spec, ring_fps, self.live.buffer_s, cap, cap_why))
            if self.spec.nbytes <= block.size:
                self.ring, block = FrameRing(self.spec, block=block), None
                self.prefault_slots = self.spec.slots
            else:  # a bigger stream than reserved for: a fresh block, the slots in use faulted in now
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
        self._announce_ring(("ring", self.ring.name, self.spec, self.prefault_slots, self.model))
        (self.loader,) = self._fork((self._loader_main, (), "eyeblink-loader"))

    def _connected(self, source: LiveSource) -> None:
        """The source is connected: its first frames (a stream's rate probe) are start-up frames, analysed whatever
        their age; a clock found not believable there is said now (one warning line, the metric)."""
        self.startup_frames.value = int(getattr(source, "startup_frames", 0))
        source.clock.on_mismatch = self._clock_mismatch
        if not source.clock.believed and source.clock.text:
            self._clock_mismatch(source.clock.text)

    def _clock_mismatch(self, text: str) -> None:
        """The source's clock is not believable (in the parent at connection, or the loader during the capture)."""
        self.clock_believed.value = 0
        warn(text)

    def late_from(self) -> int:
        """The first frame the latency bound drops (those before it arrived while the run started)."""
        return int(self.late_from_frame.value)

    def _choose(self, source: LiveSource) -> None:
        """Now that the rate, size and codec are known: the decode cost, ``auto``'s model, the cost ladder."""
        from eyeblink.config import physical_cores
        from eyeblink.runtime.adapt import Rung, StepController, ladder
        from eyeblink.runtime.host import with_decode

        fps = self.fps  # --fps when given, else the source's
        rate = fps if fps and fps > 0 else 500.0
        if self.costs is not None and self.costs.measured:
            self.costs = with_decode(self.costs, source.describe().get("codec"), source.width or 640,
                                     source.height or 480)
        lm = self.cfg.landmarks
        every = self.cfg.detect.detect_every
        if self.fitters:  # --landmarks auto
            self.model, self.model_reason, holds = choose_landmarks(
                fps, physical_cores(), lm.mesh_reuse_ms, costs=self.costs, detect_every=every)
            self.cfg = replace(self.cfg, landmarks=replace(lm, model=self.model))
        elif self.costs is not None and not self.accelerated:  # a model of the user's: say if it cannot keep up
            _, self.model_reason, holds = choose_landmarks(fps, physical_cores(), lm.mesh_reuse_ms, costs=self.costs,
                                                           detect_every=every, candidates=(lm.model,))
        else:
            holds = True
        if not self.accelerated:  # all frames to one worker while it holds the rate (choose_dealt_workers)
            self.dealt, self.dealt_reason = choose_dealt_workers(
                self.costs, self.cfg.landmarks.model, fps, workers=self.W, asked=self.live.workers,
                mesh_reuse_ms=lm.mesh_reuse_ms, detect_every=every)
            log.info("live: %s", self.dealt_reason)
        if self.model_reason:
            print(f"eyeblink: eye model {self.model_reason}", file=sys.stderr, flush=True)
            if not holds:
                self.warnings_extra.append(f"eye model {self.model_reason}")
        if self.live.adapt and self.costs is not None and not self.accelerated:
            start = Rung(self.cfg.landmarks.model, lm.mesh_reuse_ms, every)
            rungs = ladder(start, rate, self.costs, self.models)[:MAX_RUNGS]
            for i, r in enumerate(rungs):
                self.rung_table[3 * i: 3 * i + 3] = [float(self.models.index(r.model)) if r.model in self.models
                                                     else -1.0, r.mesh_reuse_ms, float(r.detect_every)]
            self.steps = StepController(rungs)

    def _on_batch(self, analyzer: Any, fitters: dict[str, Any]) -> None:
        """In a worker, before each batch: run the rung the sink chose (eyeblink.runtime.adapt)."""
        level = self.level.value
        if level == self.applied_level:
            return
        self.applied_level = level
        k, reuse_ms, every = self.rung_table[3 * level: 3 * level + 3]
        if k >= 0 and self.models[int(k)] in fitters:
            analyzer.fitter = fitters[self.models[int(k)]]
        if getattr(analyzer.fitter, "mesh_reuse_s", 0.0) > 0:  # a model that reuses its mesh (not mesh-ear)
            analyzer.fitter.mesh_reuse_s = reuse_ms / 1000.0
        analyzer.cfg = replace(analyzer.cfg, detect=replace(analyzer.cfg.detect, detect_every=int(every)))

    def _judge(self, rows: np.ndarray) -> None:
        """In the sink, after each write: step down or up the ladder (one warning line, a metric, an entry)."""
        if self.steps is None or not len(rows):
            return
        backlog = max(0, int(self.n_in.value) - int(self.n_dropped.value) - self.n_written)
        # the drops of both kinds: the loader's (ring full) and the frames the workers found too late, the only
        # kind while the ring is large enough to hold the backlog
        step = self.steps.observe(time.monotonic(), dropped=self.frames_dropped(), backlog=backlog,
                                  age_s=max(0.0, time.perf_counter() - float(rows["t_decoded"][-1])),
                                  frame=int(rows["index"][-1]), t_s=float(rows["timestamp_s"][-1]))
        if step is None:
            return
        self.level.value = self.steps.level
        rung = self.steps.rung
        word = "stepping down to" if step["direction"] == "down" else "headroom again, stepping up to"
        warn(f"live: {step['why']}; {word} {rung.label()} at frame {step['frame']}")
        if self.metrics is not None:
            self.metrics.adapted(step["direction"], self.steps.level)

    def _stopped_before_connect(self) -> None:
        """A signal arrived before the sender connected: no frames; the workers end and the sink sees
        an empty input (the run ends normally, exit 0, as for a stop during the capture)."""
        log.info("%s: stopped before a sender connected", getattr(self.source, "spec", self.source))
        for q in self.work_qs:
            for _ in range(self.ends_per_queue):
                q.put(None)
        self.out_q.put(("eof", 0, None, 0.0, 0, None))

    # ------------------------------------------------------------ children


    def _child_setup(self) -> None:
        import sys

        super()._child_setup()
        die_with_parent(self.parent_pid)
        sys.setswitchinterval(LIVE_SWITCH_INTERVAL_S)  # see LIVE_SWITCH_INTERVAL_S
        raise_priority(self.live.priority)  # --priority: the sink said already whether the OS allows it

    def _worker_ready(self, wid: int) -> None:
        self.ready.release()

    def _worker_main(self, wid: int) -> None:
        log.debug("worker %d started", wid)
        super()._worker_main(wid)
        log.debug("worker %d finished", wid)

    def _loader_main(self) -> None:
        self._child_setup()
        ring = self.ring
        assert ring is not None
        ring.prefault(self.prefault_slots)  # a fork does not copy the page tables of a shared mapping
        source: LiveSource = self.source  # type: ignore[assignment]
        block = self.live.overload == "block"
        max_frames = self.cfg.max_frames
        duration = self.live.duration_s
        lock = threading.Lock()
        free: list[int] = list(range(len(ring) - 1, -1, -1))
        batch = _Batcher(self)
        st: dict[str, Any] = {"closed": False, "reason": None, "error": None, "bug": None, "t0": None}
        rec = None
        if self.live.record is not None:  # the frames as received, beside the session (eyeblink.runtime.record)
            from eyeblink.runtime.record import Recorder

            template = source.video_stream() if getattr(source, "compressed", False) else None
            rec = Recorder(self.live.record, source.width, source.height, self.fps, template=template)
            if rec.copy:  # a compressed stream: its packets as they came (stream copy)
                source.on_packet = rec.put_packet  # type: ignore[attr-defined]

        def take_slot() -> int:
            if not free:
                while True:  # take back whatever is free without waiting
                    try:
                        free.extend(self.free_q.get_nowait())
                    except queue.Empty:
                        break
            if not free and block:
                source.clock.note_wait()  # the sender backs up meanwhile: frames arrive late, not its clock's fault
                free.extend(self._get(self.free_q))
            return free.pop() if free else -1

        def place(image: np.ndarray, ts: float, arrival: float) -> None:
            if rec is not None and not rec.copy:
                rec.put(image, ts)
            slot = take_slot()
            if slot >= 0:
                ring.put(slot, image)
            else:
                self.n_dropped.value += 1
            self.n_in.value += 1
            batch.add(slot, ts, arrival)

        def capture() -> None:
            grace_until = time.perf_counter() + LIVE_STARTUP_GRACE_S  # start-up: see LIVE_STARTUP_GRACE_S
            grace_frames = int(self.startup_frames.value) + LIVE_STARTUP_GRACE_FRAMES
            try:
                for cap in source.capture():
                    with lock:
                        if st["closed"]:
                            return
                        if grace_until is not None and (cap.arrival_s >= grace_until or batch.n >= grace_frames):
                            self.late_from_frame.value = batch.n  # this frame's index: the bound applies from here
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

        # stopped at once: what was received so far is a whole file (the recorder closed in any case)
        with self._as_loader(batch, on_exit=lambda: rec.close() if rec is not None else None):
            log.info("capture started: %s (%dx%d, %s FPS nominal), overload policy %s", source.spec, source.width,
                     source.height, f"{source.nominal_fps:g}" if source.nominal_fps else "?", self.live.overload)
            thread = threading.Thread(target=capture, name="eyeblink-capture", daemon=True)
            thread.start()
            next_tick = time.monotonic() + 1.0
            while thread.is_alive():
                thread.join(0.05)
                if self.stop.is_set() or os.getppid() != self.parent_pid:
                    raise _Stop
                if self.capture_stop.is_set():
                    st["reason"] = st["reason"] or "stop requested (signal)"
                    break
                if time.monotonic() >= next_tick:  # heartbeat: the sink's stall check sees us alive
                    next_tick = time.monotonic() + 1.0
                    with contextlib.suppress(queue.Full):
                        self.out_q.put_nowait(("tick",))
            if st["bug"] is not None:
                raise st["bug"]
            with lock:  # the capture thread may still be blocked in a read: it stops at its next frame
                st["closed"] = True
                batch.flush()
            n = batch.n
            info = source.describe()
            info["live"] = {"stop_reason": st["reason"], "frames_in": n, "frames_dropped": int(self.n_dropped.value),
                            "recording": rec.close() if rec is not None else None}
            rec = None
            log.info("capture stopped: %s; %d frames in, %d dropped", st["reason"], n, self.n_dropped.value)
            err = st["error"]
            self._put(self.out_q, ("eof", n, info, 0.0, 0, err))
            self._end_of_input()

    # ------------------------------------------------------------ parent

    def _make_writer(self, outdir: Path, stem: str) -> ResultWriter:
        return LiveResultWriter(outdir, stem, tap=self.tap)

    def _write(self, sink: SessionSink | None, rows: np.ndarray) -> None:
        from eyeblink.runtime.pipeline import FrameResult

        assert sink is not None  # live runs always have their sink
        if self.aborted:
            raise KeyboardInterrupt("stopped at once (a second Ctrl-C)")
        if sink.cfg is not self.cfg:  # --landmarks auto chose the model once the rate was known (no frame before)
            sink.use_config(self.cfg)
        n_events = len(sink.events)
        if self.tap is not None:
            self.tap.detector = sink.blinks  # the state machine whose changes the tap publishes
            self.tap.startup_frames = self.late_from()  # the start-up rows: not counted as past the bound
            self.tap.arrivals(rows["index"].tolist(), rows["t_decoded"].tolist())
        dropped = rows["dropped"]
        self.n_gap += int(dropped.sum())
        if not dropped.any():
            super()._write(sink, rows)
        else:  # runs of analysed rows go through the usual path; gap rows get face 0 and dropped 1
            edges = np.flatnonzero(np.diff(dropped.astype(np.int8))) + 1
            for part in np.split(rows, edges):
                if not part["dropped"][0]:
                    super()._write(sink, part)
                    continue
                writer: LiveResultWriter = sink.writer  # type: ignore[assignment]
                writer.dropped = True
                try:
                    for r in part:
                        sink.add(FrameResult(int(r["index"]), float(r["timestamp_s"]), None, False))
                finally:
                    writer.dropped = False
        self.n_written += len(rows)
        self.hops.add(rows, time.perf_counter())
        self._judge(rows)
        if self.metrics is not None:
            self.metrics.observe(rows, time.perf_counter(), len(sink.events) - n_events)
        warning = self.memory.sample(time.monotonic())
        if warning is not None:
            warn(warning)

    def _memory_processes(self) -> dict[str, int]:
        """``{role: pid}`` of the run's processes alive now: the sink (this process), the loader, the workers."""
        out = {"sink": os.getpid()}
        for p in self.procs:
            if p.pid is not None and p.exitcode is None:
                out[p.name.removeprefix("eyeblink-")] = p.pid
        return out

    def _memory_hint(self, role: str) -> str | None:
        """What the growth warning adds when ``role`` grew most: the known cause of a growing loader."""
        if role == "loader" and (self._info or self.source.describe()).get("container") == "nut":
            return NUT_HINT
        return None

    def frames_dropped(self) -> int:
        """Frames written as gap rows (or dropped by the loader): the loader's drops and the late ones."""
        return max(int(self.n_dropped.value), self.n_gap)

    def drop_warning(self) -> str | None:
        """One line when more than :data:`DROP_WARN_SHARE` of the rows written are gap rows (None otherwise): its
        counts are those of frames.csv, also when a run stopped at once left captured frames unwritten."""
        n = self.n_written
        d = self.n_gap
        if not n or d / n <= DROP_WARN_SHARE:
            return None
        model = self.cfg.landmarks.model
        cheaper = " or ".join(f"--landmarks {m}" for m in ("lids", "mesh-ear") if m != model)
        return (f"{d} of {n} frames ({100.0 * d / n:.1f}%) were dropped, more than {DROP_WARN_SHARE:.0%}: this "
                f"machine did not analyse the stream in real time with --landmarks {model} (gap rows, dropped=1); "
                f"try {cheaper}, fewer frames per second, or more cores")

    def unpublished_warning(self) -> str | None:
        """One line when more than :data:`DROP_WARN_SHARE` of the rows reached the sink past ``--max-latency-ms``
        and were not published (None otherwise)."""
        n = self.n_written  # the rows in frames.csv (the tap sees each one as it is written)
        u = self.tap.late_rows if self.tap is not None else 0
        if not n or u / n <= DROP_WARN_SHARE:
            return None
        return (f"{u} of {n} rows ({100.0 * u / n:.1f}%) reached the end of the pipeline more than --max-latency-ms "
                f"({self.live.max_latency_ms:g} ms) after their frame arrived: they are in frames.csv but were not "
                f"published (no LSL sample, no state); this machine was too busy for the session")

    def _extra_warnings(self) -> list[str]:
        steps = self.steps.steps if self.steps is not None else []
        out = [*self.warnings_extra]
        clock = (self._info or self.source.describe()).get("clock") or {}
        if clock.get("message"):  # said when it was found
            out.append(clock["message"])
        downs = sum(s["direction"] == "down" for s in steps)
        if downs:
            out.append(f"live: the pipeline fell behind and stepped down {downs} times (summary live.adaptations)")
        if self.memory.warning:
            out.append(self.memory.warning)
        rec = ((self._info or {}).get("live") or {}).get("recording") or {}
        if rec.get("dropped") or rec.get("error"):
            text = (f"--record {rec.get('path')}: {rec.get('dropped')} frames missing from the recording "
                    f"({rec.get('error') or 'the disk did not keep up'}); the session's rows are complete")
            warn(text)
            out.append(text)
        unwritten = int(self.n_in.value) - self.n_written
        if unwritten > 0 and self.n_written:
            out.append(warn(f"{unwritten} of the {int(self.n_in.value)} frames captured were never written (the run "
                            f"stopped before they were analysed): frames.csv holds {self.n_written} rows"))
        for line in (self.drop_warning(), self.unpublished_warning()):
            if line is not None:
                warn(line)
                out.append(line)
        return out

    def _extra_summary(self) -> dict[str, Any]:
        info = (self._info or {}).get("live", {})
        return {"live": {
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
            "status": ("overloaded" if self.drop_warning() is not None or self.unpublished_warning() is not None
                       else "ok"),
            "recording": info.get("recording"),
            "stop_reason": self.stop_reason or info.get("stop_reason"),
            "timestamps": (self._info or {}).get("timestamps"),
            "measured_fps": (self._info or self.source.describe()).get("measured_fps"),
            "startup_frames": int(self.startup_frames.value),
            # the source's clock against the arrival clock (eyeblink.sources.clock): which one the run used
            "clock": (self._info or self.source.describe()).get("clock"),
            "publish": self.tap.summary() if self.tap is not None else None,
            "memory": self.memory.summary(),
            "workers_dealt": self.dealt,
            "workers_dealt_reason": self.dealt_reason,
            "hops_ms": self.hops.summary(),
            "priority": self.priority,
        }}

    def gauges(self) -> dict[str, Any]:
        """Scrape-time readers of the loader's counters and the queues (for :class:`LiveMetrics`)."""
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
            "memory_rss": lambda: {role: rss_bytes(pid) for role, pid in self._memory_processes().items()},
        }

    def abort(self) -> None:
        """Stop at once (from any thread): what a second Ctrl-C does. The capture stops, the next rows to arrive
        end the run as a KeyboardInterrupt in the sink would (summary ``interrupted``, every file closed, the
        children stopped and the ring unlinked)."""
        self.aborted = True
        self.request_stop("stopped by SIGINT")

    def request_stop(self, reason: str) -> None:
        """Stop the capture and drain (from any thread): what Ctrl-C does, for the Python API."""
        if not self.capture_stop.is_set():
            self.stop_reason = reason
            self.capture_stop.set()

    def execute_live(self, outdir: Path, *, signals: bool = True) -> RunResult:
        """:meth:`execute` with SIGINT/SIGTERM turned into "stop the capture and drain" (``signals``: only
        in the main thread; the Python API runs the session in a thread and stops it with :meth:`request_stop`).
        The sink's process hands rows on with a short GIL switch interval meanwhile (:data:`LIVE_SWITCH_INTERVAL_S`)."""
        import sys

        from eyeblink.runtime import priority

        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, LIVE_SWITCH_INTERVAL_S))
        saved = priority.current()
        # --priority: the sink first (its threads: LSL, the gate, metrics start later and inherit it); the loader
        # and the workers apply it to themselves as they start (_child_setup)
        refused = priority.raise_priority(self.live.priority)
        self.priority = {"asked": self.live.priority, "applied": refused is None, "refused": refused}
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
        from eyeblink import stopping

        stopping.check()  # a stop during start-up (eyeblink.stopping): interrupted, exit 130

        def on_signal(signum: int, _frame: Any) -> None:
            name = signal.Signals(signum).name
            if self.capture_stop.is_set():
                if signum == signal.SIGINT:  # stop at once, as any command does: never inside the summary's write
                    stopping.on_signal(signum, _frame)
                return
            self.stop_reason = f"stopped by {name}"
            log.info("%s: stopping the capture, draining the pipeline", name)
            self.capture_stop.set()

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self.execute(outdir, None)
        finally:
            for s, h in old.items():
                signal.signal(s, h)


class LivePipeline(ParallelPipeline):
    """The multiprocess pipeline with live defaults; :meth:`run` processes one live source."""

    def __init__(self, config: RunConfig, live: LiveConfig) -> None:
        """Load the models (before the source is opened: see :meth:`_LiveRun._start`).

        With ``live.landmarks == "auto"`` both candidate models are loaded (:data:`AUTO_LANDMARKS`: a few
        MB each) and the run picks one once the source's rate is known (:func:`choose_landmarks`); otherwise the
        model of ``config.landmarks``.
        """
        from dataclasses import replace as _replace

        from eyeblink.runtime.pipeline import build_fitter

        self.live = live
        self.fitters: dict[str, Any] = {}
        if live.landmarks == "auto" and config.detect.accelerator_stage:
            # the accelerator stage runs the eye model on the device: the accurate one, whatever the CPU cores
            live = _replace(live, landmarks=AUTO_LANDMARKS[0])
            self.live = live
        if live.landmarks == "auto":
            for model in AUTO_LANDMARKS:
                self.fitters[model] = build_fitter(_replace(config, landmarks=_replace(
                    config.landmarks, model=model, model_path=None)))
        elif live.landmarks != config.landmarks.model:
            config = _replace(config, landmarks=_replace(config.landmarks, model=live.landmarks))
        super().__init__(config, live.parallel(None), fitter=self.fitters.get(AUTO_LANDMARKS[0]))

    def measure_host(self) -> HostCosts | None:
        """What BlazeFace and each loaded eye model cost on this machine, on a real face frame (before any
        worker forks: nothing else runs); None with the accelerator stage (the device runs them)."""
        from eyeblink.runtime.host import measure_costs
        from eyeblink.runtime.pipeline import build_detector

        if self.accelerated:
            return None
        fitters = self.fitters or {self.cfg.landmarks.model: self.fitter}
        with build_detector(self.cfg) as detector:
            return measure_costs(fitters, detector, width=640, height=480)

    def run(self, source: LiveSource, outdir: Path, *, metrics: bool = True, tap: LiveTap | None = None,
            signals: bool = True, started: Any = None) -> tuple[RunResult, _LiveRun]:
        """Process ``source`` into ``outdir`` until it ends or is stopped. ``tap`` publishes rows, blinks and
        state changes as they are written (LSL, the gate socket, the API); ``started(run)`` is called before the
        capture starts (the API keeps the run to stop it); ``signals``: Ctrl-C/SIGTERM stop the capture."""
        from eyeblink.outputs.export import ensure_output_dir

        ensure_output_dir(outdir)
        run = _LiveRun(self, source, tap)
        if started is not None:
            started(run)
        server = None
        if metrics and self.live.metrics_port is not None:
            from eyeblink.runtime.metrics import LiveMetrics, start_metrics_server

            run.metrics = LiveMetrics(source=source.spec, overload=self.live.overload, gauges=run.gauges())
            server, port = start_metrics_server(run.metrics, self.live.metrics_port, self.live.metrics_host)
            log.info("metrics on http://%s:%d/metrics", self.live.metrics_host, port)
        try:
            return run.execute_live(outdir, signals=signals), run
        finally:
            if tap is not None:
                tap.close(run.stop_reason or ((run._info or {}).get("live") or {}).get("stop_reason"))
            if run.metrics is not None:
                run.metrics.close()
            if server is not None:
                server.shutdown()
                server.server_close()


# ---------------------------------------------------------------------------- CLI


def add_parser(sub: Any, add_run_options: Any, add_log_options: Any) -> None:
    """The ``live`` subcommand."""
    from eyeblink.sources.live import STREAM_SCHEMES

    p = sub.add_parser(
        "live", help="process a camera or network stream in real time (rows written as frames arrive)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Process a live feed as it arrives into <stem>.frames.csv (plus a `dropped` column), "
                    "<stem>.blinks.csv and <stem>.summary.json. Ctrl-C or SIGTERM stops the capture, drains "
                    "the pipeline, flushes every file and exits 0.",
        epilog="SOURCE:\n  0, camera:0, /dev/video0     a V4L2 camera (OpenCV)\n"
               f"  {'://, '.join(STREAM_SCHEMES)}://...\n"
               "                               a network stream FFmpeg opens (PyAV, low-latency probing),\n"
               "                               e.g. tcp://127.0.0.1:5000, udp://@:1234, rtsp://cam/stream\n"
               "  basler:, basler:SERIAL       a Basler/GenICam camera (pip install 'eyeblink[basler]')")
    p.add_argument("source", metavar="SOURCE", help="camera index, stream URL or basler:[SERIAL] (see below)")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="output directory (created)")
    p.add_argument("--name", metavar="STEM", default=None, help="output file stem (default: from the source)")
    g = p.add_argument_group("real time")
    g.add_argument("--on-overload", choices=OVERLOAD_POLICIES, default="drop",
                   help="when the pipeline falls behind and the buffer is full: drop the frame (written as a "
                        "gap row, dropped=1) or block the capture (the source backs up) (default: %(default)s)")
    g.add_argument("--max-latency-ms", type=float, default=250.0, metavar="MS",
                   help="with --on-overload drop, the latency bound: a frame still waiting half of MS "
                        "milliseconds after it arrived is not analysed but written as a gap row (dropped=1), so that "
                        "under overload the newest frames win; a row that still reaches the end of the pipeline "
                        "more than MS after its frame arrived is written but not published (no LSL sample, no "
                        "state) (default: %(default)s)")
    g.add_argument("--buffer", type=float, default=1.0, metavar="S",
                   help="frames buffered in shared memory, in seconds at the source's rate (default: %(default)s)")
    g.add_argument("--no-adapt", action="store_true",
                   help="never step down to cheaper settings (longer face-mesh reuse, fewer keyframes, a cheaper "
                        "eye model) when frames drop or the backlog grows; by default each step is a warning line, "
                        "a metric and a summary entry")
    g.add_argument("--workers", type=int, default=0, metavar="N", help="worker processes (default: physical cores)")
    g.add_argument("--chunk-frames", type=int, default=LIVE_CHUNK_FRAMES, metavar="N",
                   help="frames dealt to one worker at a time; each worker keeps tracking the face across its "
                        "chunks (default: %(default)s)")
    g.add_argument("--batch-frames", type=int, default=LIVE_BATCH_FRAMES, metavar="N",
                   help="frames per queue message (default: %(default)s)")
    g.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds of capture")
    g.add_argument("--priority", choices=LIVE_PRIORITIES, default="normal",
                   help="run the capture and the frame path (sink, loader, workers) ahead of other programs: high "
                        "(nice -10) or realtime (SCHED_RR); needs root, CAP_SYS_NICE or a ulimit that allows it, "
                        "else one line says so and the run goes on (default: %(default)s)")
    g.add_argument("--record", default=None, metavar="FILE",
                   help="also keep the frames as received, with their timestamps, in FILE (.nut: raw gray, "
                        "lossless), written by a thread of its own; `eyeblink process FILE` re-analyses them; an "
                        "existing FILE is refused unless --overwrite")
    g.add_argument("--overwrite", action="store_true", help="with --record: replace FILE if it exists")
    g.add_argument("--report", action="store_true",
                   help="at the end of the capture also write OUTDIR/<stem>.report.html (as `eyeblink report` "
                        "does), with the eye crops of every blink kept during the capture")
    s = p.add_argument_group("streams")
    s.add_argument("--reconnect", type=int, default=0, metavar="N",
                   help="reopen a stream that ends or fails up to N times (default: %(default)s)")
    s.add_argument("--stream-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an FFmpeg option for the stream (repeatable), e.g. rtsp_transport=tcp")
    s.add_argument("--read-timeout", type=float, default=5.0, metavar="S",
                   help="a stream silent this long is lost (default: %(default)s)")
    lab = p.add_argument_group("lab programs: Lab Streaming Layer and the trial gate (docs: guides/lab-programs)")
    lab.add_argument("--lsl", action="store_true",
                     help="publish two LSL streams (pip install 'eyeblink[lsl]'): NAME, one sample per frame "
                          "(openness_left, openness_right, closure, face, frame) stamped with the frame's capture "
                          "time on LSL's clock, and NAME-markers (state:<state>, blink_start, blink_end, "
                          "open_stable, prolonged_closure, face_lost, face_found)")
    lab.add_argument("--lsl-name", default="eyeblink", metavar="NAME",
                     help="name of the LSL sample stream; the marker stream is NAME-markers (default: %(default)s)")
    lab.add_argument("--lsl-wait", type=float, default=0.0, metavar="S",
                     help="before connecting the source, wait up to S seconds for an LSL inlet (e.g. LabRecorder) "
                          "on the sample stream, so that it gets every sample (default: %(default)s, no wait)")
    lab.add_argument("--gate-port", type=int, default=None, metavar="PORT",
                     help="serve the eye state on tcp://127.0.0.1:PORT as JSON lines, one per state change and "
                          "event (0 = any free port, printed at start; default: no socket)")
    lab.add_argument("--stable-ms", type=float, default=200.0, metavar="MS",
                     help="the open_stable event: the eye state open held for MS milliseconds of capture time "
                          "(default: %(default)s)")
    lab.add_argument("--max-age-ms", type=float, default=50.0, metavar="MS",
                     help="freshness bound: no 'open' is reported about a frame received more than MS milliseconds "
                          "ago; the gate and the markers say 'stale' instead, within MS of a stall "
                          "(default: %(default)s)")
    lab.add_argument("--settle-ms", type=float, default=10.0, metavar="MS",
                     help="a new eye state is reported once it has lasted MS milliseconds of capture time "
                          "(no single-frame flicker; 0: every change at once) (default: %(default)s)")
    lab.add_argument("--face-lost-ms", type=float, default=200.0, metavar="MS",
                     help="face_lost only after no face has been fitted for MS milliseconds; dropped frames "
                          "never count (default: %(default)s)")
    add_view_options(p)
    m = p.add_argument_group("metrics (pip install 'eyeblink[metrics]')")
    m.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics on http://HOST:PORT/metrics (0 = any free port)")
    m.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="address the metrics server binds (default: %(default)s; 0.0.0.0 exposes it)")
    from eyeblink.outputs.analysis import add_cli_options

    add_cli_options(p)  # FEC calibration, trials, plots, NWB: done when the capture has ended, as in process
    add_log_options(p)
    add_run_options(p)
    for action in p._actions:  # live mode also takes --landmarks auto, its default
        if "--landmarks" in action.option_strings:
            action.choices = LIVE_LANDMARKS
            action.help = ("eye model: auto (default: lids when this machine runs it at the source's rate, else "
                           "the cheaper of lids and mesh-ear, said in the first line; costs measured on this machine "
                           "before the capture) or a model: "
                           + ", ".join(LIVE_LANDMARKS[1:]))


def add_view_options(p: Any) -> None:
    """``--view``, ``--view-port``, ``--view-host`` (live and process)."""
    v = p.add_argument_group("the browser view (docs: guides/live)")
    v.add_argument("--view", action="store_true",
                   help="serve the session's page while it runs: the newest frame with the face box, the closure "
                        "trace of both eyes with the blinks, the gate's state, rate, drops and latency (URL printed "
                        "at start; any number of tabs; a slow or closed browser never holds up a frame or a row)")
    v.add_argument("--view-port", type=int, default=None, metavar="PORT",
                   help="the page's port (implies --view; default: any free port)")
    v.add_argument("--view-host", default=None, metavar="ADDR",
                   help="serve the page on ADDR instead of 127.0.0.1 (implies --view), e.g. 0.0.0.0; the URL then "
                        "carries a random token, required by every request")


def view_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`LiveConfig` fields of ``--view``, ``--view-port`` and ``--view-host``."""
    on = bool(args.view or args.view_port is not None or args.view_host is not None)
    return {"view": on, "view_port": args.view_port or 0, "view_host": args.view_host or "127.0.0.1"}


@contextlib.contextmanager
def open_file_view(args: argparse.Namespace) -> Any:
    """``process --view``: the page open for the whole run (None without ``--view``), closed at the end."""
    settings = view_settings(args)
    if not settings["view"]:
        yield None
        return
    from eyeblink.runtime.view import ViewSink

    view = ViewSink(port=settings["view_port"], host=settings["view_host"],
                    announce=lambda text: print(f"eyeblink: {text}", file=sys.stderr, flush=True))
    view.open(mode="file")
    try:
        yield view
    finally:
        view.close("all inputs processed")


def prepare(spec: str, cfg: RunConfig, live: LiveConfig, *, name: str | None = None, stream: Any = None,
            report: bool = False, analysis: AnalysisOptions | None = None,
            tap: LiveTap | None = None) -> tuple[LivePipeline, LiveSource, RunConfig]:
    """Everything before the capture, for the CLI and the Python API alike: the checks, the models (loaded before
    a stream is connected), the source (not yet connected). Returns the pipeline, the source and the run's config."""
    from eyeblink.sources.live import open_live_source

    if tap is not None:
        tap.check()  # the lsl extra, before any model loads
    if live.record is not None:
        from eyeblink.runtime.record import check_record_path

        check_record_path(live.record, overwrite=live.overwrite)
    if report:  # the workers keep each blink's eye crops: a stream cannot be read again for them
        cfg = replace(cfg, eye_crops=True)
    from eyeblink.runtime.parallel import supports

    if not supports(cfg):
        raise ConfigError(f"live mode runs the multiprocess pipeline, which needs the litert backend or the "
                          f"accelerator stage (--stage accelerator with jax or tensorflow); got "
                          f"{cfg.detect.backend!r} with --stage {cfg.detect.stage}")
    pipe = LivePipeline(cfg, live)  # models first: a stream is connected only once the workers are ready
    source = open_live_source(spec, name=name, fps=cfg.fps, connect=False, stream=stream)
    (analysis or AnalysisOptions()).check_stems([source.name])  # before the capture: extras, trials file
    return pipe, source, cfg


def finish(result: RunResult, cfg: RunConfig, analysis: AnalysisOptions | None, *, report: bool = False) -> RunResult:
    """After the capture ended normally (end of stream, ``--duration``, a signal, the API's stop): calibrate the
    session's FEC column and write trials, traces, plots and NWB as ``process`` does, then the report."""
    from eyeblink.outputs.analysis import finalize
    from eyeblink.runtime.runner import record_failure

    try:
        result = finalize(result, cfg, analysis or AnalysisOptions())
    except EyeblinkError as exc:  # e.g. a full disk: the summary says failed, as the exit status does
        record_failure(result, exc)
        raise
    if report:
        from eyeblink.outputs.report import write_report
        from eyeblink.runtime.runner import record_output

        record_output(result, "report", write_report(result.outputs["frames"].parent / result.stem))
    return result


def stream_options(items: list[str]) -> dict[str, str]:
    """``--stream-option KEY=VALUE`` items as a dict."""
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--stream-option must be KEY=VALUE, got {item!r}")
        options[key] = value
    return options


def live_config_from_args(args: argparse.Namespace, cfg: RunConfig) -> LiveConfig:
    """The :class:`LiveConfig` of ``eyeblink live``'s flags."""
    # no --landmarks and no model file (flag or preset): auto, the model this machine runs at the source's rate
    auto = args.landmarks is None and cfg.landmarks.model_path is None
    return LiveConfig(overload=args.on_overload, workers=args.workers, chunk_frames=args.chunk_frames,
                      batch_frames=args.batch_frames, buffer_s=args.buffer, duration_s=args.duration,
                      metrics_port=args.metrics_port, metrics_host=args.metrics_host,
                      landmarks="auto" if auto else cfg.landmarks.model, lsl=args.lsl, lsl_name=args.lsl_name,
                      lsl_wait_s=args.lsl_wait, gate_port=args.gate_port, stable_ms=args.stable_ms,
                      max_age_ms=args.max_age_ms, settle_ms=args.settle_ms, face_lost_ms=args.face_lost_ms,
                      max_latency_ms=args.max_latency_ms, record=args.record, overwrite=args.overwrite,
                      adapt=not args.no_adapt, priority=args.priority, **view_settings(args))


def run(args: argparse.Namespace, cfg: RunConfig) -> int:
    """``eyeblink live``: open the source, run, print one line; the exit status."""
    import sys

    from eyeblink.outputs.analysis import options_from_args
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.runtime.publish import LiveTap
    from eyeblink.sources.live import StreamOptions

    options = stream_options(args.stream_option)
    live = live_config_from_args(args, cfg)  # every number in its range (config.LIVE_RANGES), as in the API
    stream = StreamOptions(options=options, read_timeout_s=args.read_timeout, reconnect=args.reconnect)
    outdir = ensure_output_dir(Path(args.output))
    tap = LiveTap.from_config(live, cfg.blinks.max_blink_ms,
                              announce=lambda text: print(f"eyeblink: {text}", file=sys.stderr, flush=True))
    analysis = options_from_args(args)
    pipe, source, cfg = prepare(args.source, cfg, live, name=args.name, report=args.report, analysis=analysis,
                                tap=tap, stream=stream)
    from eyeblink.outputs.lock import session_locks

    with session_locks(outdir, [source.name]):  # one writer per session: before the capture connects
        with source:
            result, _ = pipe.run(source, outdir, tap=tap)
        # the capture ended normally (end of stream, --duration, a signal): calibrate the session's FEC column
        # and write trials, traces, plots and NWB as `process` does (a failed run keeps its provisional rows)
        result = finish(result, cfg, analysis)
    s = result.summary
    lv = s.get("live", {})
    t = s.get("timings", {})
    p99 = t.get("latency_ms_p99")
    processed = result.frames - (lv.get("frames_dropped") or 0)
    print(f"{result.stem}: {lv.get('stop_reason')}; {lv.get('frames_in')} frames in, {processed} processed, "
          f"{lv.get('frames_dropped')} dropped, face in {result.faces}, {len(result.blinks)} blinks, "
          f"p99 latency {'-' if p99 is None else f'{p99:.0f} ms'} -> {result.outputs['frames'].parent}",
          file=sys.stderr)
    if args.report:
        from eyeblink.outputs.report import write_report

        print(f"{result.stem}: report {write_report(result.outputs['frames'].parent / result.stem)}", file=sys.stderr)
    return 0
