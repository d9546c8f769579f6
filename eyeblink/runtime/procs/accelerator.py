"""The accelerator stage of the multiprocess pipeline: one process owns the device.

::

    loader(s) ──► shared-memory ring ──► accelerator process ──► post-process workers ──► sink
      decode       (slots; queues carry    batches of frames:      eye patches (and the    ordered
                    small records)         BlazeFace + face mesh   report's eye strips) from
                                           + lid refinement        the ring's pixels, rows

With ``detect.stage = "accelerator"`` (the ``gpu`` preset; ``--stage accelerator``) the
detect+landmark workers of :mod:`eyeblink.runtime.procs.parallel` are replaced by this stage. The
loaders send their frame records to one queue; the accelerator process gathers them into batches of
up to ``detect.batch_size`` frames, runs :class:`~eyeblink.landmarks.batched.BatchedFaceEyes` on a
batch (three batched network calls: detection, face mesh, iris), and sends each record message on
with one small fit record per frame (:data:`FIT_DTYPE`: box, keypoints, the 12 eye points, each
eye's openness) to the CPU workers, dealt round-robin. A worker reads the frame's pixels from the
ring only for the eye patches (and the report's strips), writes the rows and frees the slots. The
CPU does decoding and post-processing; the device does every network.

Batching and latency: a batch is run when the next message would overflow ``batch_size``, at the end
of the input, or once its oldest frame has waited ``detect.flush_ms`` (5 ms): files fill whole
batches (the loader runs ahead), a live camera at 500 FPS gets batches of ~2-3 frames and a bounded
wait instead of waiting for 512 frames (:class:`BatchGatherer`). The ring holds at least two
batches, so the loader fills one while the device runs the other.

Which frames are detected: on the ``jax`` and ``tensorflow`` backends (a GPU) every frame, in
batches (see :mod:`eyeblink.landmarks.batched`): rows equal those of ``--detect-every 1``, and a
keyframe setting (``detect_every`` > 1) is set to 1 with one warning, so that the summary states the
settings the rows were made with. On the ``litert`` backend (the stage on a CPU) with the keyframe
policy (``detect_every`` > 1, the default) the stage runs the reference's
:class:`~eyeblink.frame.analyzer.FrameAnalyzer` frame by frame (:class:`KeyframeEngine`): the rows
of the fused workers and of one process, byte for byte. Its tracking state is per chunk (whole
tracking segments), so with several stage processes each gets whole chunks (one input queue per
process, chunks dealt by number as to fused workers) instead of sharing one queue.

Compiling is answering, not stalling: building and warming up the networks, and a batch of a size
not run before (its programs are compiled on first use), may take minutes on a slow host (XLA on the
CPU). Meanwhile :class:`Heartbeat` sends the sink ``("tick", "compiling")`` a few times a second,
which the sink's stall check (``parallel.stall_timeout_s``) counts as an answer; it stops after
``parallel.compile_timeout_s`` (10 min), so a compile that hangs is still reported, one stall
timeout later. Nothing else sends ticks: a stage stuck outside a compile is a stall as before.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.frames import Frame
from eyeblink.landmarks.eyes import eye_patches, eye_strip
from eyeblink.outputs import columns as _columns
from eyeblink.runtime.procs.results import rows_message
from eyeblink.runtime.procs.shm import FrameRing

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.detect.blazeface import FaceDetection
    from eyeblink.landmarks.batched import BatchedFaceEyes

__all__ = [
    "FIT_DTYPE",
    "BatchGatherer",
    "Heartbeat",
    "KeyframeEngine",
    "build_engine",
    "check_stage",
    "keyframe_stage",
    "post_worker_main",
    "stage_main",
    "stage_note",
    "stage_processes",
    "stage_slots",
    "stage_summary",
]

#: One frame's result from the accelerator stage to a worker (no pixels).
FIT_DTYPE = np.dtype(
    [
        ("face", "?"),
        ("detected", "?"),
        ("box", "f8", (4,)),
        ("score", "f8"),
        ("keypoints", "f8", (6, 2)),
        ("has_points", "?"),
        ("points", "f4", (12, 2)),
        ("ear_left", "f8"),
        ("ear_right", "f8"),
        ("t_start", "f8"),
    ]
)
#: ``--points`` runs: the fit record also carries the head pose of the face mesh and the frame it
#: ran on (only in those runs; under the keyframe policy a mesh is reused for a few frames).
POSE_FIT_DTYPE = np.dtype(
    [*FIT_DTYPE.descr, ("has_pose", "?"), ("pose", "f8", (3,)), ("pose_frame", "i8")]
)


def check_stage(config: RunConfig) -> None:
    """:class:`~eyeblink.errors.ConfigError` unless the accelerator stage can run ``config``
    (backend and eye model), naming the fix; the backend's packages must be installed (checked
    without importing them)."""
    from eyeblink.detect import require_backend
    from eyeblink.errors import ConfigError
    from eyeblink.landmarks.batched import BATCHED_BACKENDS, BATCHED_MODELS

    backend = str(config.detect.backend).strip().lower()
    if backend not in BATCHED_BACKENDS:
        raise ConfigError(
            "the accelerator stage runs on the jax, tensorflow or litert backend, not "
            f"{backend!r}; "
            "use --stage fused or another --backend"
        )
    if config.landmarks.model not in BATCHED_MODELS:
        raise ConfigError(
            f"the accelerator stage runs the face-mesh eye models ({', '.join(BATCHED_MODELS)}), "
            "not "
            f"{config.landmarks.model!r}; use --landmarks mesh or --stage fused"
        )
    require_backend(backend)


def _backend(config: RunConfig) -> str:
    return str(config.detect.backend).strip().lower()


def keyframe_stage(config: RunConfig) -> bool:
    """Whether the stage applies the keyframe policy (:class:`KeyframeEngine`): the ``litert``
    backend with ``detect_every`` > 1. The Keras backends detect on every frame
    (:func:`stage_note`)."""
    return _backend(config) == "litert" and config.detect.detect_every > 1


def stage_note(config: RunConfig) -> str | None:
    """The warning for a keyframe setting the stage does not apply (a Keras backend with
    ``detect_every`` > 1), or None. The pipeline then runs with ``detect_every`` = 1, which the
    summary records."""
    if keyframe_stage(config) or config.detect.detect_every <= 1:
        return None
    return (
        f"the accelerator stage on {_backend(config)} detects the face on every frame: "
        "--detect-every "
        f"{config.detect.detect_every} does not apply, the rows are those of --detect-every 1 "
        "(the litert "
        "backend applies the keyframe policy)"
    )


def stage_slots(config: RunConfig, slots: int, workers: int, batch_frames: int) -> int:
    """Ring slots for the accelerator stage: the pipeline's own, and at least two device batches
    plus what the workers hold."""
    return max(slots, 2 * config.detect.batch_size + 2 * workers * batch_frames)


def stage_processes(config: RunConfig, cores: int | None = None) -> int:
    """Processes of the accelerator stage (``detect.stage_processes``; 0 = one per 4 cores, 1 to 4).

    The device is not what limits one stage process: its own host work is (letterbox, crops and
    decoding: ~1 ms a frame on one core here, ``host_ms_per_frame`` in the summary), so one process
    feeds a GPU ~1,000 frames a second. Several processes share the device (each compiles its
    programs and takes a share of its memory) and take batches from the same queue.
    """
    n = config.detect.stage_processes
    if n:
        return n
    from eyeblink.config import physical_cores

    return max(1, min(4, (cores or physical_cores()) // 4))


def stage_summary(infos: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The summary's ``parallel.accelerator``: the stage processes' reports added up."""
    if not infos:
        return None
    frames = sum(i["frames"] for i in infos)
    seconds = {k: sum(i["seconds"][k] for i in infos) for k in infos[0]["seconds"]}
    batches = sum(i["batches"] for i in infos)
    first = infos[0]
    return {
        "processes": len(infos),
        "backend": first["backend"],
        "device": first["device"],
        # batch_size: the setting (detect.batch_size); largest_batch: the largest batch run, more
        # than the setting when one loader message held more frames (a message is never split), so
        # mean_batch <= largest_batch always
        "batch_size": first["batch_size"],
        "largest_batch": max(i["largest_batch"] for i in infos),
        "flush_ms": first["flush_ms"],
        "batches": batches,
        "mean_batch": frames / batches if batches else None,
        "warm_up_s": max(i["warm_up_s"] for i in infos),
        "ms_per_frame": {k: v * 1000.0 / max(frames, 1) for k, v in seconds.items()},
        # the stage's own CPU work per frame (letterbox, crops, decoding): its ceiling per process
        # on any device
        "host_ms_per_frame": (seconds["detect"] + seconds["landmarks"] - seconds["network"])
        * 1000.0
        / max(frames, 1),
        "warnings": sorted({w for i in infos for w in i["warnings"]}),
    }


def build_engine(config: RunConfig, *, share: int = 1) -> BatchedFaceEyes:
    """The stage's networks for ``config`` (built in an accelerator-stage process, after the fork).
    ``share``: stage processes on the device; each JAX process then takes that share of the GPU's
    memory (unless the user set ``XLA_PYTHON_CLIENT_MEM_FRACTION``), instead of JAX's default 75%
    each."""
    import os

    from eyeblink.landmarks.batched import BatchedFaceEyes

    if share > 1:
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 / share:.3f}")

    d, lm = config.detect, config.landmarks
    # its --landmark-model is the lid network; the face mesh is the shipped one
    lids = lm.model == "lids"
    return BatchedFaceEyes(
        d.backend,
        batch_size=d.batch_size,
        refine=lm.model == "mesh",
        face_model=d.model_path,
        mesh_model=None if lids else lm.model_path,
        score_threshold=d.score_threshold,
        iou_threshold=d.nms_iou,
        jit_compile=d.jit_compile,
        num_threads=d.num_threads,
        lids=lids,
        lids_model=lm.model_path if lids else None,
    )


class KeyframeEngine:
    """The stage's work under the keyframe policy (:func:`keyframe_stage`): the reference's
    :class:`~eyeblink.frame.analyzer.FrameAnalyzer` on one frame at a time, with the tracking state
    of each unfinished chunk parked and resumed as a fused worker does it (several loaders
    interleave chunks), so the rows are those of one process. The networks are the reference's
    (LiteRT, one frame a call): on a CPU batching gains nothing. :meth:`run` is :func:`run_batch`'s
    counterpart."""

    backend = "litert"
    device = "cpu"
    batch_size = 1

    def __init__(
        self, config: RunConfig, chunk_frames: int, *, track_across_chunks: bool = False
    ) -> None:
        from eyeblink.frame.analyzer import ChunkStates, FrameAnalyzer, StageClock, build_fitter
        from eyeblink.runtime.pipeline import build_detector

        self.analyzer = FrameAnalyzer(
            config, build_detector(config), build_fitter(config), StageClock()
        )
        self.track = track_across_chunks
        # live: the face is tracked across the stage's chunks (no segment restarts)
        if track_across_chunks:
            self.analyzer.segment_frames = None
        self._chunks = ChunkStates(chunk_frames)
        self._chunk = -1
        # the analyzer asks the eye model for the head pose itself with --points
        self.pose_wanted = False
        from eyeblink.landmarks.batched import StageTimes

        self.times = StageTimes()

    def warm_up(self, shape: tuple[int, int], *, up_to: int = 1) -> None:
        """One detection and one fit on a blank frame (packs the networks' weights before the
        first frame)."""
        blank = np.full(shape, 128, np.uint8)
        self.analyzer.detector.detect(blank)
        self.analyzer.fitter.warm_up(blank)

    def run(
        self, ring: Any, messages: list[tuple[Any, ...]], dtype: np.dtype = FIT_DTYPE
    ) -> list[np.ndarray]:
        """One fit record array per message, the frames analysed in order (dropped frames, slot
        -1, stay empty)."""
        a = self.analyzer
        pose = "has_pose" in (dtype.names or ())
        out = []
        for c, first, slots, ts, _td in messages:
            if c != self._chunk and not self.track:
                self._chunks.switch(a, self._chunk, c)
                self._chunk = c
            recs = np.zeros(len(slots), dtype)
            for j, slot in enumerate(slots.tolist()):
                if slot < 0:
                    continue
                rec = recs[j]
                rec["t_start"] = time.perf_counter()
                r = a.analyze(Frame(first + j, float(ts[j]), ring[slot]))
                rec["detected"] = r.detected
                rec["ear_left"], rec["ear_right"] = r.ear_left, r.ear_right
                if r.face is None:
                    continue
                rec["face"] = True
                rec["box"], rec["score"], rec["keypoints"] = (
                    r.face.box,
                    r.face.score,
                    r.face.keypoints,
                )
                pts = a.last_points
                if pts is not None and np.isfinite(pts).all():
                    rec["has_points"] = True
                    rec["points"] = pts
                if pose and r.pose is not None:
                    rec["has_pose"], rec["pose"], rec["pose_frame"] = True, r.pose, r.pose_frame
            self._chunks.advanced(c, first + len(slots))
            out.append(recs)
            self.times.frames += int((slots >= 0).sum())
            self.times.batches += 1
        self.times.seconds["detect"] = a.clock.seconds["detect"]
        self.times.seconds["landmarks"] = a.clock.seconds["landmarks"]
        return out

    @property
    def redetections(self) -> int:
        return self.analyzer.redetections

    def close(self) -> None:
        self.analyzer.detector.close()
        self.analyzer.fitter.close()


class BatchGatherer:
    """Frame-record messages gathered into device batches of at most ``batch_size`` frames.

    :meth:`add` returns the batch to run now when the new message would overflow it; :meth:`due`
    says whether the oldest waiting message has waited ``flush_s``; :meth:`take` empties it. ``now``
    is any monotonic clock in seconds (a parameter so that the rule is testable).
    """

    def __init__(self, batch_size: int, flush_s: float) -> None:
        if batch_size < 1 or not flush_s > 0:
            raise ValueError(
                f"batch_size must be >= 1 and flush_s > 0, got {batch_size} and {flush_s}"
            )
        self.batch_size = batch_size
        self.flush_s = flush_s
        self.messages: list[tuple[Any, ...]] = []
        self.frames = 0
        self._since = math.inf

    def add(self, msg: tuple[Any, ...], now: float) -> list[tuple[Any, ...]] | None:
        """Add one ``(chunk, first, slots, timestamps, decoded_at)`` message; the batch to run
        first, if any."""
        n = len(msg[2])
        ready = self.take() if self.messages and self.frames + n > self.batch_size else None
        if not self.messages:
            self._since = now
        self.messages.append(msg)
        self.frames += n
        return ready

    def full(self) -> bool:
        return self.frames >= self.batch_size

    def due(self, now: float) -> bool:
        return bool(self.messages) and now - self._since >= self.flush_s

    def wait_s(self, now: float, poll_s: float) -> float:
        """How long to wait for the next message: until the oldest one is due, at most
        ``poll_s``."""
        if not self.messages:
            return poll_s
        return max(0.0, min(poll_s, self._since + self.flush_s - now))

    def take(self) -> list[tuple[Any, ...]]:
        out, self.messages, self.frames, self._since = self.messages, [], 0, math.inf
        return out


class Tracker:
    """The subject's face across batches: the previous frame's face when frames are consecutive."""

    def __init__(self) -> None:
        self.last_index = -2
        self.last_face: FaceDetection | None = None

    def chain(self, indices: list[int]) -> tuple[FaceDetection | None, list[bool]]:
        chained = [
            i == p + 1 for p, i in zip([self.last_index, *indices[:-1]], indices, strict=True)
        ]
        return (self.last_face if chained and chained[0] else None), chained

    def advance(self, index: int, face: FaceDetection | None) -> None:
        self.last_index, self.last_face = index, face


def run_batch(
    engine: BatchedFaceEyes,
    ring: Any,
    messages: list[tuple[Any, ...]],
    tracker: Tracker,
    dtype: np.dtype = FIT_DTYPE,
) -> list[np.ndarray]:
    """Run one gathered batch; one ``dtype`` (:data:`FIT_DTYPE`, or :data:`POSE_FIT_DTYPE` with
    ``--points``) array per message (dropped frames, slot -1, stay empty)."""
    images: list[np.ndarray] = []
    where: list[tuple[int, int]] = []
    indices: list[int] = []
    out = [np.zeros(len(m[2]), dtype) for m in messages]
    for k, (_c, first, slots, _ts, _td) in enumerate(messages):
        for j, slot in enumerate(slots.tolist()):
            if slot >= 0:
                images.append(ring[slot])
                where.append((k, j))
                indices.append(first + j)
    if not images:
        return out
    previous, chained = tracker.chain(indices)
    t0 = time.perf_counter()
    results = engine.analyze(images, previous=previous, chained=chained)
    for (k, j), index, (face, fit) in zip(where, indices, results, strict=True):
        rec = out[k][j]
        rec["t_start"] = t0
        rec["detected"] = True
        rec["ear_left"] = rec["ear_right"] = math.nan
        if face is None:
            continue
        rec["face"] = True
        rec["box"], rec["score"], rec["keypoints"] = face.box, face.score, face.keypoints
        if fit is not None:
            rec["ear_left"], rec["ear_right"] = fit.ear_left, fit.ear_right
            if np.isfinite(fit.points).all():
                rec["has_points"] = True
                rec["points"] = fit.points
            if fit.pose is not None and "has_pose" in (dtype.names or ()):
                rec["has_pose"], rec["pose"], rec["pose_frame"] = True, fit.pose, index
    tracker.advance(indices[-1], results[-1][0])
    return out


def post_rows(ring: Any, msg: tuple[Any, ...], row_dtype: np.dtype, eye_crops: bool) -> np.ndarray:
    """A worker's rows for one message of fit records: the fits, plus the eye patches (and the
    report's strips) cut from the ring's pixels."""
    _c, first, slots, ts, td, fits = msg
    out = np.zeros(len(slots), row_dtype)
    # --points: the eye points, and the pose of this frame's mesh
    points = "eye_points" in (row_dtype.names or ())
    for j, slot in enumerate(slots.tolist()):
        row, rec = out[j], fits[j]
        row["index"], row["timestamp_s"], row["t_decoded"] = first + j, ts[j], td[j]
        if slot < 0:  # dropped by the live loader: a gap row
            row["dropped"] = True
            continue
        row["detected"] = rec["detected"]
        row["ear_left"], row["ear_right"] = rec["ear_left"], rec["ear_right"]
        # the stage's batch: its frame's hops start there
        row["t_start"] = row["t_got"] = rec["t_start"]
        if rec["face"]:
            row["face"] = True
            row["box"], row["score"], row["keypoints"] = rec["box"], rec["score"], rec["keypoints"]
        if rec["has_points"]:
            gray = Frame(first + j, float(ts[j]), ring[slot]).gray
            pts = rec["points"]
            row["has_patches"] = True
            row["patches"] = eye_patches(gray, pts)
            if eye_crops:
                row["has_strip"] = True
                row["strip"], row["strip_points"] = eye_strip(gray, pts)
            if points:
                row["has_points"], row["eye_points"] = True, pts
                if rec["has_pose"]:
                    row["has_pose"], row["pose"], row["pose_frame"] = (
                        True,
                        rec["pose"],
                        rec["pose_frame"],
                    )
        row["t_end"] = time.perf_counter()
    table = _columns.FRAME_TABLE
    # frame columns the workers compute: from the frame result the record gives back
    if table.worker_columns:
        from eyeblink.runtime.procs.results import decode_rows

        for (name, _), values in zip(
            table.record_fields, table.worker_values(list(decode_rows(out))), strict=True
        ):
            out[name] = values
    return out


def drain(q: Any, gather: BatchGatherer, poll_s: float) -> Any:
    """The next message of ``q`` within the gatherer's wait (``queue.Empty`` when none came)."""
    wait = gather.wait_s(time.perf_counter(), poll_s)
    if wait <= 0:
        raise queue.Empty
    return q.get(timeout=wait)


class Heartbeat:
    """While the ``with`` block runs (a compile or warm-up), a thread sends ``("tick",
    "compiling")`` to ``q`` every ``stall_timeout_s / 4`` (at most every second), for at most
    ``compile_timeout_s``. A full queue skips a tick (the sink is busy: it is receiving something
    anyway)."""

    def __init__(self, q: Any, stall_timeout_s: float, compile_timeout_s: float) -> None:
        self.q = q
        self.every_s = min(1.0, stall_timeout_s / 4)
        self.bound_s = compile_timeout_s
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name="eyeblink-compile-heartbeat", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _beat(self) -> None:
        deadline = time.perf_counter() + self.bound_s
        while not self._done.wait(self.every_s) and time.perf_counter() < deadline:
            with contextlib.suppress(queue.Full):
                self.q.put_nowait(("tick", "compiling"))


#: how often a waiting stage process wakes up to check the stop event (as the pipeline's other
#: children)
POLL_S = 0.05


def stage_main(run: Any, sid: int, at: list[int]) -> None:
    """Process ``sid`` of the accelerator stage, in a child forked by
    :mod:`eyeblink.runtime.procs.parallel` (``run``: its ``_Run``: queues, ring, settings). Builds
    and warms up the networks, then gathers the loaders' frame records into batches, runs them, and
    deals the fit records to the post-processing workers round-robin. The input ends once every
    loader's end marker was taken, by whichever stage process; each then sends the workers one end
    marker and the sink its report. ``at[0]``: the first frame of the batch being run (where a
    failure is reported)."""
    from eyeblink.detect import missing_accelerator

    cfg = run.cfg
    stall_s, compile_s_max = run.par.stall_timeout_s, run.par.compile_timeout_s
    h, w = int(getattr(run.source, "height", 0) or 480), int(getattr(run.source, "width", 0) or 640)
    keyframes = keyframe_stage(cfg)
    # building and compiling: answering, however slow the host
    with Heartbeat(run.out_q, stall_s, compile_s_max):
        engine: Any = (
            KeyframeEngine(cfg, run.C, track_across_chunks=run.par.track_across_chunks)
            if keyframes
            else build_engine(cfg, share=run.n_stage)
        )
        engine.pose_wanted = cfg.points
        fit_dtype = POSE_FIT_DTYPE if cfg.points else FIT_DTYPE
        t0 = time.perf_counter()
        engine.warm_up((h, w), up_to=run.warm_batch)
        run._slow_start()  # the test hook's slow warm-up (slowstart@S), if set
        compile_s = time.perf_counter() - t0
    run._worker_ready(-1 - sid)
    warning = missing_accelerator(cfg.detect.backend)
    ring = run.ring  # live: None until the ring message comes
    # the keyframe policy analyses each message as it comes (frame by frame in order: nothing to
    # gather)
    gather = BatchGatherer(1 if keyframes else cfg.detect.batch_size, cfg.detect.flush_ms / 1000.0)
    tracker = Tracker()
    dealt = 0
    # batch sizes whose programs are compiled (a new size may compile some)
    sizes_run: set[int] = set()
    # a loader's message is never split: a batch can exceed detect.batch_size (the summary says so)
    largest = 0

    def run_gathered(messages: list[tuple[Any, ...]]) -> None:
        nonlocal dealt, largest
        assert ring is not None
        largest = max(largest, sum(len(m[2]) for m in messages))
        at[0] = int(messages[0][1])
        run._inject_fault(at[0], sum(len(m[2]) for m in messages))
        size = sum(int((m[2] >= 0).sum()) for m in messages)
        if keyframes:
            fitted = engine.run(ring, messages, fit_dtype)
        elif size in sizes_run:
            fitted = run_batch(engine, ring, messages, tracker, fit_dtype)
        else:  # the first batch of this size: its programs may be compiled now
            with Heartbeat(run.out_q, stall_s, compile_s_max):
                fitted = run_batch(engine, ring, messages, tracker, fit_dtype)
            sizes_run.add(size)
        for m, fits in zip(messages, fitted, strict=True):
            run._put(run.post_qs[(dealt + sid) % run.W], (*m, fits))
            dealt += 1

    # one shared queue, or (keyframe policy) this process's own
    q = run.work_qs[sid % len(run.work_qs)]
    all_ends = run.n_loaders * run.n_stage  # each loader sends one end marker per stage process
    while True:
        try:
            msg = drain(q, gather, POLL_S)
        except queue.Empty:
            if gather.due(time.perf_counter()):
                run_gathered(gather.take())
            elif run.stage_ends.value >= all_ends:  # the siblings took the last end markers
                break
            else:
                run._check_stop()
            continue
        if msg is None:
            with run.stage_ends.get_lock():
                run.stage_ends.value += 1
            if run.stage_ends.value >= all_ends:
                break
            continue
        if msg[0] == "ring":  # live: the ring exists now
            ring = run.ring = FrameRing.attach(msg[1], msg[2])
            ring.prefault(msg[3])
            continue
        ready = gather.add(msg, time.perf_counter())
        if ready:
            run_gathered(ready)
        if gather.full():
            run_gathered(gather.take())
    if gather.messages:
        run_gathered(gather.take())
    for pq in run.post_qs:
        run._put(pq, None)
    t = engine.times
    info = {
        "process": sid,
        "frames": t.frames,
        "seconds": dict(t.seconds),
        "backend": engine.backend,
        "device": engine.device,
        "batch_size": engine.batch_size,
        "largest_batch": largest,
        "flush_ms": cfg.detect.flush_ms,
        "batches": t.batches,
        "warm_up_s": compile_s,
        "warnings": [warning] if warning else [],
    }
    redetections = engine.redetections if keyframes else 0
    engine.close()
    stages = {k: t.seconds[k] for k in ("detect", "landmarks")}
    run._put(
        run.out_q,
        ("done", f"accelerator-{sid}", stages, dict.fromkeys(stages, t.frames), redetections, info),
    )


def post_worker_main(run: Any, wid: int, row_dtype: np.dtype, at: list[int]) -> None:
    """A CPU worker of the accelerator stage (a child of :mod:`eyeblink.runtime.procs.parallel`):
    for each message of fit records, the rows with their eye patches (:func:`post_rows`) to the
    sink, the slots back to the loaders; done after one end marker per stage process."""
    run._worker_ready(wid)
    ring = run.ring
    seconds = 0.0
    ends = 0
    while True:
        msg = run._get(run.post_qs[wid])
        if msg is None:  # one per stage process
            ends += 1
            if ends < run.n_stage:
                continue
            break
        if msg[0] == "ring":
            ring = run.ring = FrameRing.attach(msg[1], msg[2])
            ring.prefault(msg[3])
            continue
        assert ring is not None
        at[0] = int(msg[1])
        t0 = time.perf_counter()
        rows = post_rows(ring, msg, row_dtype, run.cfg.eye_crops)
        seconds += time.perf_counter() - t0
        run._put(run.out_q, rows_message(wid, rows))
        slots = msg[2]
        run._release(slots[slots >= 0])
    run._put(run.out_q, ("done", wid, {"landmarks": seconds}, {"landmarks": 0}, 0))
