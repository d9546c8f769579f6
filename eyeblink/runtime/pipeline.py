"""The reference pipeline: one process, frame by frame, in order.

source -> face detection (keyframe policy) -> dlib eye fit + EAR -> blink
detector -> writers. The multiprocess pipeline reuses :class:`FrameAnalyzer`
and :class:`SessionSink` so both give byte-identical rows for the same boxes.
"""

from __future__ import annotations

import contextlib
import math
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink import stopping
from eyeblink.config import RunConfig
from eyeblink.errors import OutputError, warn
from eyeblink.frames import Frame
from eyeblink.landmarks.eyes import eye_strip, inter_ocular
from eyeblink.outputs.crops import BlinkCrops, crops_path
from eyeblink.outputs.export import ResultWriter
from eyeblink.outputs.session import RunResult
from eyeblink.runtime.keyframes import InlineKeyframes, KeyframeJob, holds_box
from eyeblink.runtime.summary import Outcome, finish_session, run_warnings, session_outcome, write_running_summary
from eyeblink.signals.blinks import BlinkDetector, BlinkEvent
from eyeblink.signals.closure import OnlineClosure

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection, FaceDetector
    from eyeblink.landmarks import EyeModel
    from eyeblink.landmarks.eyes import EyeFit
    from eyeblink.sources.files import FrameSource

STAGES = ("decode", "detect", "landmarks", "blinks", "write")

#: Tracking segments, in frames: the keyframe policy's state (the tracked box, the frames since the last
#: detection, the reference inter-ocular distance, the box's adoption time and what the eye model carries from
#: fit to fit) starts afresh on every frame whose index is a multiple of this, in every runtime. So a frame's
#: row depends only on the recording, the settings and its own segment: never on how frames were dealt to
#: workers, loaders, Ray tasks or nodes (they are dealt in whole segments). 128 frames is 0.26 s at 500 FPS:
#: one forced detection per segment costs ~1% of the frame time under the default ``detect_every`` of 10.
SEGMENT_FRAMES = 128


#: a frame that waits longer than this for the keyframe work it uses (the work outlasted ``keyframe_lag_ms``) is
#: counted in the stage clock's ``keyframe_wait`` (the summary's ``timings.keyframe_waits``)
KEYFRAME_WAIT_S = 0.0005


def aligned_frames(frames: int) -> int:
    """``frames`` rounded up to whole tracking segments (:data:`SEGMENT_FRAMES`; at least one): the unit in
    which frames may be dealt to workers, loaders and chunks without changing any row."""
    from eyeblink.sources.ranges import round_up

    return round_up(frames, SEGMENT_FRAMES)


@dataclass(frozen=True, slots=True)
class FrameResult:
    """What the per-frame stages measured for one frame (the sink's input)."""

    index: int
    timestamp_s: float
    face: FaceDetection | None
    detected: bool
    ear_left: float = math.nan
    ear_right: float = math.nan
    eye_patches: np.ndarray | None = None  # (2, 12, 24) uint8 (landmarks.eye_patches): the blink appearance cue
    #: ``eye_crops`` runs only: both eyes upright (landmarks.eye_strip) and the 12 eye points in its pixels
    eye_strip: np.ndarray | None = None
    strip_points: np.ndarray | None = None
    #: ``points`` runs only (``--points``): the eye model's 12 points in frame pixels, the face mesh's head pose
    #: (yaw, pitch, roll; degrees) and the frame whose mesh run measured it (None where no mesh ran)
    eye_points: np.ndarray | None = None
    pose: tuple[float, float, float] | None = None
    pose_frame: int | None = None
    #: the values of the frame table's worker columns (:attr:`eyeblink.outputs.columns.FrameColumn.worker`) as a
    #: worker's record carried them to the sink; None: computed by the sink from this result
    columns: tuple[Any, ...] | None = None

    @property
    def ear(self) -> float:
        left, right = self.ear_left, self.ear_right
        if left == left:
            return (0 + left + right) / 2 if right == right else (0 + left) / 1
        return (0 + right) / 1 if right == right else math.nan


@dataclass
class StageClock:
    """Accumulated wall time per stage, for the summary and ``bench``."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))

    def add(self, stage: str, dt: float) -> None:
        """``dt`` seconds more of ``stage`` (a stage not in :data:`STAGES`, such as ``keyframe_wait``, is added)."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + dt
        self.calls[stage] = self.calls.get(stage, 0) + 1

    def merge(self, seconds: dict[str, float], calls: dict[str, int]) -> None:
        """Another clock's ``seconds`` and ``calls`` added in (a worker's at its end, a measured chunk's)."""
        for k, v in seconds.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + float(v)
            self.calls[k] = self.calls.get(k, 0) + int(calls.get(k, 0))

    def ms_per_frame(self, frames: int) -> dict[str, float]:
        """Each of :data:`STAGES`' time per frame (the work; a wait such as ``keyframe_wait`` is not one)."""
        return {k: (v * 1000 / frames if frames else math.nan) for k, v in self.seconds.items() if k in STAGES}

    def waits(self) -> dict[str, Any] | None:
        """How often and how long frames waited for the keyframe work beside the stream (``live`` above
        1000 / ``keyframe_lag_ms`` FPS) longer than :data:`KEYFRAME_WAIT_S`; None when none did."""
        n = self.calls.get("keyframe_wait", 0)
        if not n:
            return None
        total = self.seconds["keyframe_wait"] * 1000.0
        return {"count": n, "total_ms": round(total, 1), "mean_ms": round(total / n, 2)}


def build_detector(config: RunConfig) -> FaceDetector:
    """The face detector of a run: backend, model, threads, accelerator options and thresholds."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector

    d = config.detect
    backend = create_detector(d.backend, model_path=Path(d.model_path) if d.model_path else None,
                              num_threads=d.num_threads, batch_size=d.batch_size, accelerator=d.accelerator())
    for message in run_warnings(config):
        warn_once(message)
    return FaceDetector.from_detector(backend, batch_size=d.batch_size, score_threshold=d.score_threshold,
                                      iou_threshold=d.nms_iou)


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """``eyeblink: warning: message`` on stderr, once per process (not once per input)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warn(message)


def build_fitters(config: RunConfig, models: Iterable[str]) -> dict[str, EyeModel]:
    """Each of ``models`` built as the run's eye model would be, from the registry (no model file): the candidates
    ``live --landmarks auto`` picks from."""
    from dataclasses import replace

    return {model: build_fitter(replace(config, landmarks=replace(config.landmarks, model=model, model_path=None)))
            for model in models}


def build_fitter(config: RunConfig) -> EyeModel:
    """The eye model of a run (``config.landmarks``: model, file, and the settings the model takes)."""
    from eyeblink.detect.litert import native_info_silenced
    from eyeblink.landmarks import EYE_MODELS, create_eye_model

    lm = config.landmarks
    settings = {name: getattr(lm, name) for name in EYE_MODELS[lm.model].settings}
    with native_info_silenced():  # the face mesh's LiteRT interpreter: no INFO line below --log-level info
        return create_eye_model(lm.model, model_path=lm.model_path, **settings)


class FrameAnalyzer:
    """Per-frame work: detection under the keyframe policy, then the eye fit.

    Keyframe policy: the detector runs on every ``detect_every``-th frame, on
    the frame after a face was lost, and when the eye fit drifts (the eye
    centres leave the reused box, or the inter-ocular distance changes by more
    than 15% from the keyframe's, or the eye model's own face-presence score falls below
    ``landmarks.min_presence``). In between, the last detection is reused.

    The tracking state restarts on every frame whose index is a multiple of ``segment_frames``
    (:data:`SEGMENT_FRAMES`; ``None``: never, live runs whose workers track the face across their own
    chunks), so that every runtime that deals whole segments gives the same rows as one process.
    """

    def __init__(self, config: RunConfig, detector: FaceDetector, fitter: EyeModel,
                 clock: StageClock | None = None) -> None:
        self.cfg = config
        self.detector = detector
        #: the eye model in use and the keyframe interval: state (live's cost ladder changes them between batches,
        #: :mod:`eyeblink.runtime.adapt`), started from the config, which never changes
        self.fitter = fitter
        self.detect_every = config.detect.detect_every
        #: ... and at least this long apart in capture time (``detect.detect_min_ms``; seconds)
        self._detect_min_s = config.detect.detect_min_ms / 1000.0
        self.clock = clock or StageClock()
        self._face: FaceDetection | None = None
        self._since_detect = 0
        self._detect_t = -math.inf  # the capture time of the last detection (detect.detect_min_ms)
        self._iod_ref = math.nan
        self._face_t = -math.inf  # when the tracked box was adopted (hold_max_ms)
        self.redetections = 0
        self.segment_frames: int | None = SEGMENT_FRAMES
        #: the eye model's 12 points of the last analysed frame (None: no face), with or without ``--points``: the
        #: accelerator stage sends them to the workers that cut the eye patches
        self.last_points: np.ndarray | None = None
        # the last eye points' inter-ocular distance, and the last drift verdict with what it was judged on (face,
        # points, reference distance): an eye model that reuses its points (the face mesh for mesh_reuse_ms) gives
        # the same objects frame after frame, and the same answers
        self._iod_of: tuple[np.ndarray, float] | None = None
        self._drift_of: tuple[FaceDetection, np.ndarray, float, bool] | None = None
        #: where lagged keyframe work runs (eyeblink.runtime.keyframes): None, inline on the frame that asks for
        #: it; a live worker sets a BesideKeyframes (a thread with its own networks)
        self.keyframes: Any = None
        self._inline: Any = None
        # the keyframe work in flight, oldest first (job, handle, where it runs, the eye model it places for): at
        # most one detection (or search) and one placement; and the timestamp of the frame analysed last (None: a
        # fresh start, which works on its own frame)
        self._pending: list[tuple[Any, Any, Any, Any]] = []
        self._prev_t: float | None = None
        #: a recording of one eye (``detect.eye_roi``): the region, as the face every frame has; checked against
        #: the first frame's size (:meth:`_analyze_region`)
        self._region: FaceDetection | None = None
        self._region_size: tuple[int, int] | None = None
        if config.detect.eye_roi is not None:
            from eyeblink.landmarks.region import EyeRegion

            self._region = EyeRegion.parse(config.detect.eye_roi).face()

    def reset(self) -> None:
        """Forget the tracked face and restart the stage clock (a new input)."""
        self._face = None
        self._since_detect = 0
        self._detect_t = -math.inf
        self._iod_ref = math.nan
        self._face_t = -math.inf
        self.redetections = 0
        self.clock = StageClock()
        self._pending = []
        self._prev_t = None
        self._restore_fitter(None)

    def tracking_state(self) -> tuple[Any, ...]:
        """The keyframe policy's state (tracked face, frames since detection and its time, reference IOD,
        adoption time, and what the eye model carries from fit to fit: the mesh's eye crops).

        A worker whose chunks arrive interleaved (several loaders) keeps one per unfinished chunk.
        """
        get = getattr(self.fitter, "tracking_state", None)
        return (self._face, (self._since_detect, self._detect_t), self._iod_ref, self._face_t,
                get() if get else None, list(self._pending), self._prev_t)

    def restore_tracking(self, state: tuple[Any, ...] | None) -> None:
        """Continue from :meth:`tracking_state`'s ``state``; ``None``: no tracked face (a keyframe next)."""
        if state is None:
            state = (None, (0, -math.inf), math.nan, -math.inf, None, [], None)
        self._face, since, self._iod_ref, self._face_t, fitter_state, pending, self._prev_t = state
        self._since_detect, self._detect_t = since
        self._pending = list(pending)
        self._restore_fitter(fitter_state)

    def _restore_fitter(self, state: Any) -> None:
        restore = getattr(self.fitter, "restore_tracking", None)
        if restore is not None:
            restore(state)

    def _detect(self, frame: Frame, *, hold: bool = True) -> FaceDetection | None:
        """Run the detector; keep the tracked box when the new one is nearly the same.

        BlazeFace's box wobbles by a pixel or two from frame to frame, and dlib's fit (hence
        the EAR) follows the box: every new box is a small step in the EAR trace. While the new
        detection overlaps the tracked box with IoU >= ``detect.hold_iou``, the tracked box is
        kept, for at most ``detect.hold_max_ms``; a real head movement (or the drift check)
        replaces it. Only under the keyframe policy: with ``--detect-every 1`` every frame uses its
        own detection (the original every-frame mode, identical in every pipeline layout).
        """
        t0 = time.perf_counter()
        face = self.detector.track(frame.image, self._face)  # at any roll (select_subject's tracking)
        self.clock.add("detect", time.perf_counter() - t0)
        self._since_detect = 0
        self._detect_t = frame.timestamp_s
        if hold and face is not None and holds_box(self.cfg, self.detect_every, face, self._face,
                                                           frame.timestamp_s, self._face_t):
            return self._face
        self._face_t = frame.timestamp_s
        return face

    def analyze(self, frame: Frame) -> FrameResult:
        seg = self.segment_frames
        if seg and frame.index % seg == 0:  # a tracking segment starts: a keyframe, nothing carried over
            self.restore_tracking(None)
        if self._region is not None:
            return self._analyze_region(frame, self._region)
        prev, self._prev_t = self._prev_t, frame.timestamp_s
        lag = self.cfg.detect.keyframe_lag_ms
        if (lag > 0 and self.detect_every > 1  # --detect-every 1: every frame its own detection
                and prev is not None and (frame.timestamp_s - prev) * 1000.0 < lag
                and hasattr(self.fitter, "placed_fit")):
            return self._analyze_lagged(frame, lag)
        while self._pending:  # frames far apart again: the work in flight is used from this frame
            self._adopt()
        return self._analyze_now(frame)

    def _analyze_region(self, frame: Frame, region: FaceDetection) -> FrameResult:
        """A recording of one eye: the eye model on the region, no detector (:mod:`eyeblink.landmarks.region`)."""
        gray = frame.gray
        size = gray.shape[:2]
        if size != self._region_size:
            from eyeblink.landmarks.region import EyeRegion

            EyeRegion.parse(self.cfg.detect.eye_roi).check_inside(size[1], size[0])  # type: ignore[arg-type]
            self._region_size = size
        t0 = time.perf_counter()
        fit = self.fitter.fit(gray, region)
        self.clock.add("landmarks", time.perf_counter() - t0)
        return self._result(frame, region, False, fit)

    def _keyframe_due(self, frame: Frame) -> bool:
        """Whether the keyframe policy detects on ``frame``: ``detect_every`` frames since the last detection, and
        ``detect.detect_min_ms`` of capture time (a fast camera's keyframes are not closer than that; a timestamp
        that went back, or none, counts as far enough); with ``detect_every`` 1, every frame."""
        every = self.detect_every
        dt = frame.timestamp_s - self._detect_t
        return self._since_detect + 1 >= every and (every == 1 or not 0.0 <= dt < self._detect_min_s - 1e-9)

    def _analyze_now(self, frame: Frame) -> FrameResult:
        """A frame whose keyframe work is done on it (frames far apart, a segment's first frame, another model)."""
        detected = False
        face = self._face
        if face is None or self._keyframe_due(frame):
            face = self._detect(frame)
            detected = True
        else:
            self._since_detect += 1
        if face is None:
            return self._no_face(frame, detected)
        fit = self._fit(frame, face)
        if not detected and (self._drifted_cached(face, fit.points, self._inter_ocular(fit))
                             or fit.presence < self.cfg.landmarks.min_presence):
            # the reused box no longer fits the face: detect now (without holding it) and refit
            self.redetections += 1
            face = self._detect(frame, hold=False)
            detected = True
            if face is None:
                return self._no_face(frame, detected)
            fit = self._fit(frame, face)
        if detected:
            self._iod_ref = self._inter_ocular(fit)
        self._face = face
        return self._result(frame, face, detected, fit)

    def _result(self, frame: Frame, face: FaceDetection, detected: bool, fit: EyeFit) -> FrameResult:
        """The row of a frame with a face."""
        self.last_points = fit.points
        strip = pts = None
        if self.cfg.eye_crops and np.isfinite(fit.points).all():
            strip, pts = eye_strip(frame.gray, fit.points)
        if self.cfg.points:
            return FrameResult(frame.index, frame.timestamp_s, face, detected, fit.ear_left, fit.ear_right,
                               fit.patches, strip, pts, fit.points, fit.pose, fit.pose_frame)
        return FrameResult(frame.index, frame.timestamp_s, face, detected, fit.ear_left, fit.ear_right,
                           fit.patches, strip, pts)

    # -- keyframe work beside the stream (eyeblink.runtime.keyframes) -----------------------------------------

    def _analyze_lagged(self, frame: Frame, lag: float) -> FrameResult:
        """A frame closer than ``lag`` ms to the one before: rowed with the face and placement held now; the
        keyframe work it asks for starts on its pixels and is used from the first frame ``lag`` ms later."""
        while self._pending and (frame.timestamp_s - self._pending[0][0].t) * 1000.0 >= lag - 1e-6:  # (float times)
            self._adopt()
        # a detection in flight (a keyframe, a search): the next waits for it; a placement in flight does not hold
        # a keyframe up (the face is let go within the lag of the keyframe that no longer finds it)
        detecting = any(p[0].kind != "place" for p in self._pending)
        face = self._face
        if face is None:  # no face: look for one (on this frame; the frames until it is used have none)
            if not detecting:
                self._submit(frame, "search", hold=False)
            return self._no_face(frame, not detecting)
        held = getattr(self.fitter, "tracking_state", None)
        eyes = held() if held is not None else None
        if eyes is None or eyes[0] is not face:  # the eye model changed (live --landmarks auto): place now
            while self._pending:
                self._adopt()
            return self._analyze_now(frame)
        detected = False
        if not detecting and self._keyframe_due(frame):
            self._submit(frame, "detect", hold=True)
            detected = detecting = True
        else:
            self._since_detect += 1
        fit, due = self._placed_fit(frame, face)
        if not detecting and (self._drifted_cached(face, fit.points, self._inter_ocular(fit))
                              or fit.presence < self.cfg.landmarks.min_presence):
            self.redetections += 1  # the held box no longer fits the face: detect again, without holding it
            self._submit(frame, "detect", hold=False)
            detected = True
        elif due and not self._pending:
            self._submit(frame, "place", hold=False)
        return self._result(frame, face, detected, fit)

    def _placed_fit(self, frame: Frame, face: FaceDetection) -> tuple[EyeFit, str | None]:
        """The eye model on the placement it holds for ``face``, timed as the ``landmarks`` stage."""
        self.fitter.set_time(frame.timestamp_s, frame.index)  # type: ignore[attr-defined]
        self._want_pose()
        t0 = time.perf_counter()
        out = self.fitter.placed_fit(frame.gray, face)  # type: ignore[attr-defined]
        self.clock.add("landmarks", time.perf_counter() - t0)
        return out  # type: ignore[no-any-return]

    def _want_pose(self) -> None:
        """With ``--points``, the eye model's face mesh measures the head pose too (points.csv)."""
        if self.cfg.points and getattr(self.fitter, "pose_wanted", True) is False:
            self.fitter.pose_wanted = True  # type: ignore[attr-defined]

    def _submit(self, frame: Frame, kind: str, *, hold: bool) -> None:
        """Start keyframe work of ``kind`` on ``frame``."""
        face = None if kind == "search" else self._face
        fitter = self.fitter
        self._want_pose()
        # the held placement serves a kept box only if it is still fresh when the result is used (else the job
        # places too: one detection and one face mesh per keyframe, as without lagging)
        reuse_ok = (kind == "detect" and face is not None
                    and fitter.reusable(face, frame.timestamp_s + self.cfg.detect.keyframe_lag_ms / 1000.0))  # type: ignore[attr-defined]
        job = KeyframeJob(kind, frame.index, frame.timestamp_s, frame.image, frame.gray, face, self._face_t, hold,
                          reuse_ok, self.detect_every)
        where = self.keyframes
        if where is None:
            if self._inline is None or self._inline.detector is not self.detector:
                self._inline = InlineKeyframes(self.detector)
            where = self._inline
        self._pending.append((job, where.submit(job, self.cfg, fitter), where, fitter))
        if kind != "place":
            self._since_detect = 0
            self._detect_t = frame.timestamp_s

    def _adopt(self) -> None:
        """Use the oldest keyframe work in flight from this frame on (waiting for it when it is not done yet)."""
        job, handle, where, fitter = self._pending.pop(0)
        t0 = time.perf_counter()
        res = where.result(handle)
        waited = time.perf_counter() - t0
        if where is not self._inline and waited > KEYFRAME_WAIT_S:
            self.clock.add("keyframe_wait", waited)  # the work beside the stream outlasted its lag: this frame waited
        for stage, dt in res.seconds.items():
            self.clock.add(stage, dt)
        if job.kind == "place" and job.prior is not self._face:
            return  # placed for a face let go or replaced meanwhile (a detection adopted before it)
        if job.kind == "place" and not res.redetected:
            if fitter is self.fitter:
                fitter.adopt(res.placement)
            return
        if res.redetected:
            self.redetections += 1
        self._face, self._face_t = res.face, res.face_t
        if res.face is None:
            return
        if res.placement is not None and fitter is self.fitter:
            fitter.adopt(res.placement)
        self._iod_ref = inter_ocular(fitter.tracking_state()[1])

    def _fit(self, frame: Frame, face: FaceDetection) -> EyeFit:
        """The eye model on one face, timed as the ``landmarks`` stage."""
        set_time = getattr(self.fitter, "set_time", None)
        if set_time is not None:
            set_time(frame.timestamp_s, frame.index)
        self._want_pose()
        t0 = time.perf_counter()
        fit = self.fitter.fit(frame.gray, face)
        self.clock.add("landmarks", time.perf_counter() - t0)
        return fit

    def _no_face(self, frame: Frame, detected: bool) -> FrameResult:
        """No face in this frame: forget the tracked box (the next frame detects)."""
        self._face = None
        self.last_points = None
        return FrameResult(frame.index, frame.timestamp_s, None, detected)

    def _inter_ocular(self, fit: EyeFit) -> float:
        """``fit.inter_ocular``, computed once per eye-points array."""
        known = self._iod_of
        if known is not None and known[0] is fit.points:
            return known[1]
        iod = fit.inter_ocular
        self._iod_of = (fit.points, iod)
        return iod

    def _drifted_cached(self, face: FaceDetection, pts: np.ndarray, iod: float) -> bool:
        """:meth:`_drifted`, judged again only when the face, the eye points or the reference distance changed
        (``iod`` follows from ``pts``)."""
        known = self._drift_of
        ref = self._iod_ref
        if known is not None and known[0] is face and known[1] is pts and (
                known[2] == ref or (known[2] != known[2] and ref != ref)):
            return known[3]
        drifted = self._drifted(face, pts, iod)
        self._drift_of = (face, pts, ref, drifted)
        return drifted

    def _drifted(self, face: FaceDetection, pts: np.ndarray, iod: float) -> bool:
        x0, y0, x1, y1 = face.box
        centres = (pts[:6].mean(0), pts[6:].mean(0))
        if any(not (x0 <= c[0] <= x1 and y0 <= c[1] <= y1) for c in centres):
            return True
        return bool(self._iod_ref > 0 and abs(iod / self._iod_ref - 1.0) > 0.15)


class ChunkStates:
    """A worker's keyframe-policy state per unfinished chunk.

    With one loader a worker gets each chunk's batches back to back; with several loaders its
    queue interleaves batches of chunks from different ranges, so it parks a chunk's tracking
    state when another chunk's batch comes and resumes it with the chunk's next batch: the rows
    do not depend on the number of loaders.
    """

    def __init__(self, chunk_frames: int) -> None:
        self._c = chunk_frames
        self._parked: dict[int, tuple[Any, ...]] = {}
        self._finished = -1  # the last chunk whose last frame was analysed

    def switch(self, analyzer: FrameAnalyzer, old: int, new: int) -> None:
        if old >= 0 and old != self._finished:
            self._parked[old] = analyzer.tracking_state()
        analyzer.restore_tracking(self._parked.pop(new, None))

    def advanced(self, chunk: int, stop: int) -> None:
        """Frames of ``chunk`` up to ``stop`` are analysed: a full chunk's state is dropped."""
        if stop >= (chunk + 1) * self._c:
            self._finished = chunk
            self._parked.pop(chunk, None)


class SessionSink:
    """The ordered sink for one input: blink detection, rows, summary. The only writer."""

    def __init__(self, writer: ResultWriter, config: RunConfig, clock: StageClock, *,
                 rescan_per_frame: int | None = None) -> None:
        self.writer = writer
        self.cfg = config
        self.clock = clock
        self.blinks = BlinkDetector(config.blink_settings(), rescan_per_frame=rescan_per_frame)
        self.closure = OnlineClosure(config.closure)  # provisional FEC; finalised after the run
        self.events: list[BlinkEvent] = []
        self.frames = 0
        self.faces = 0
        self.detections = 0
        self.first_t = math.nan
        self.last_t = math.nan
        self._prev_t = math.nan
        # one frame interval per frame, for the summary's median and gaps: 8 bytes a frame (a list of floats
        # held 32, ~1 MB a minute at 500 FPS: the slow growth of a long run's memory)
        self._intervals = array("d")
        # the report's blink crops (--report): a new run of this stem replaces the old file, or removes it
        self.crops_path = crops_path(writer.outdir, writer.stem)
        self.crops = BlinkCrops() if config.eye_crops else None
        self.crops_saved = False
        self.finished = False
        self._row = writer.table.row  # the frame's cells (eyeblink.outputs.columns: the writer's header's table)
        with contextlib.suppress(OSError):
            self.crops_path.unlink()
        if config.points:  # <stem>.points.csv beside frames.csv (--points)
            writer.open_points()

    def use_config(self, config: RunConfig) -> None:
        """Take the run's config, resolved when a live source connected, before the first row (``--landmarks auto``:
        the blink settings the chosen eye model decides); the sink was made with the requested one. After a row it
        is a programming error: the rows would mix two configs."""
        if self.frames:
            raise RuntimeError("the sink takes the run's config before its first row, never after")
        self.cfg = config
        self.blinks.cfg = config.blink_settings()

    def add(self, r: FrameResult) -> None:
        with stopping.held():  # a frame's row, its blink and its counts, all or none
            self._add(r)

    def _add(self, r: FrameResult) -> None:
        t0 = time.perf_counter()
        if self.crops is not None:
            self.crops.add(r.index, r.eye_strip, r.strip_points)
        for ev in self.blinks.update(r.index, r.timestamp_s, r.ear_left, r.ear_right, r.eye_patches):
            self._blink(ev)
        t1 = time.perf_counter()
        self.clock.add("blinks", t1 - t0)
        self.writer.write_frame(self._row(r, self.blinks.baseline, self.closure))
        if self.cfg.points:
            self.writer.write_points(r.index, r.timestamp_s, r.eye_points, r.pose, r.pose_frame)
        self.clock.add("write", time.perf_counter() - t1)
        self.frames += 1
        self.faces += r.face is not None
        self.detections += r.detected
        if math.isnan(self.first_t):
            self.first_t = r.timestamp_s
        if not math.isnan(self._prev_t):
            self._intervals.append(r.timestamp_s - self._prev_t)
        self._prev_t = self.last_t = r.timestamp_s

    def _blink(self, ev: BlinkEvent) -> None:
        self.events.append(ev)
        self.writer.write_blink(ev)
        if ev.complete:
            self.closure.add_response(ev.amplitude)
        if self.crops is not None:
            self.crops.blink(ev)

    def finish(self) -> None:
        """Close the open blink and save the crops (once: a second call does nothing)."""
        if self.finished:
            return
        self.finished = True
        for ev in self.blinks.finish():
            self._blink(ev)
        if self.crops is not None:
            try:
                self.crops.save(self.crops_path)
                self.crops_saved = True
            except OutputError as exc:  # the crops are an extra of the report: the rows and summary matter more
                warn(f"{exc} (the report will show no eye crops)")

    def output_paths(self) -> dict[str, Path]:
        """Every file written for this input so far (``summary.json``'s ``outputs``; finalize adds its own)."""
        w = self.writer
        out = {"frames": w.frames_path, "blinks": w.blinks_path, "summary": w.summary_path}
        if w.points_path is not None:
            out["points"] = w.points_path
        if self.crops_saved:
            out["crops"] = self.crops_path
        return out

    def timing_summary(self) -> dict[str, Any]:
        if not self._intervals:
            return {"frame_interval_median_ms": None, "timestamp_gaps": 0, "duplicate_timestamps": 0}
        iv = np.asarray(self._intervals)
        med = float(np.median(iv))
        return {
            "frame_interval_median_ms": med * 1000,
            "timestamp_gaps": int(np.sum(iv > 1.5 * med)) if med > 0 else 0,
            "duplicate_timestamps": int(np.sum(iv <= 0)),
        }


ProgressFactory = Callable[[str, int | None], Any]


def _timed(frames: Iterator[Frame], clock: StageClock) -> Iterator[Frame]:
    while True:
        t0 = time.perf_counter()
        try:
            f = next(frames)
        except StopIteration:
            return
        clock.add("decode", time.perf_counter() - t0)
        yield f


def progress_bar(stack: ExitStack, progress: ProgressFactory | None, source: FrameSource,
                 max_frames: int | None = None) -> Any:
    """The run's progress bar (or None), closed with ``stack``: its total is the frames the run will read (the
    source's count, or ``max_frames`` when fewer), and it shows the final count before it closes."""
    total = source.frame_count_hint
    if max_frames is not None:
        total = min(total, max_frames) if total else max_frames
    bar = progress(source.name, total) if progress else None
    if bar is not None:
        stack.callback(bar.close)
        if hasattr(bar, "refresh"):
            stack.callback(bar.refresh)  # runs first: the last update may have been throttled
    return bar


def process_source(source: FrameSource, outdir: Path, config: RunConfig, *, analyzer: FrameAnalyzer,
                   progress: ProgressFactory | None = None, view: Any = None) -> RunResult:
    """Run the reference pipeline on one opened source; writes the output contract into ``outdir``.

    On any failure (decode error, interrupt, worker error) the rows computed so
    far are flushed and the summary records the status and the error before
    the exception propagates. ``view``: the browser view (``process --view``, :mod:`eyeblink.runtime.view`).
    """
    clock = analyzer.clock
    preview = view.preview if view is not None else None
    started = time.perf_counter()
    with ExitStack() as stack, stopping.held() as hold:  # a stop once the files exist: raised in the try below
        writer = stack.enter_context(ResultWriter(outdir, source.name) if view is None else
                                     view.file_writer(outdir, source))
        sink = SessionSink(writer, config, clock)
        outcome = Outcome()
        try:
            with session_outcome(sink, source) as outcome:
                hold.release()
                with stopping.held():
                    write_running_summary(writer, source, config)
                bar = progress_bar(stack, progress, source, config.max_frames)
                for n, frame in enumerate(_timed(iter(source), clock)):
                    if config.max_frames is not None and n >= config.max_frames:
                        break
                    if preview is not None and preview.wanted():
                        preview.put(frame.index, frame.image)
                    result = analyzer.analyze(frame)
                    if preview is not None and preview.points_wanted() == frame.index:  # the view's eye points,
                        preview.put_points(frame.index, analyzer.last_points)  # before its row is written
                    sink.add(result)
                    if bar is not None:
                        bar.update(1)
                    stopping.check()  # a stop whose KeyboardInterrupt was swallowed on its way
        finally:
            summary = finish_session(writer, sink, source, config, clock, analyzer, started, outcome)
    return RunResult(source.name, sink.frames, sink.faces, sink.events, summary, sink.output_paths())
