"""The per-frame core: one frame in, one :class:`FrameResult` out (every runtime's workers run it).

:class:`FrameAnalyzer` asks the run's eye locator (:mod:`eyeblink.frame.locate`: a face found by the detector
under the keyframe policy, or a fixed eye region) where the eye is, then fits the eye model there. The keyframe
work it lags on fast cameras lives in :mod:`eyeblink.frame.keyframes`; the tracking segments
(:data:`SEGMENT_FRAMES`) make a row independent of how frames were dealt to workers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.config import RunConfig
from eyeblink.frame.keyframes import InlineKeyframes, KeyframeJob, holds_box
from eyeblink.frame.locate import FixedRegion, locator_for
from eyeblink.frames import Frame
from eyeblink.landmarks.eyes import eye_strip, inter_ocular

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection, FaceDetector
    from eyeblink.landmarks import EyeModel
    from eyeblink.landmarks.eyes import EyeFit

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
    settings = {name: lm.setting(name) for name in EYE_MODELS[lm.model].settings}
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
        #: :mod:`eyeblink.runtime.live.adapt`), started from the config, which never changes
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
        #: where lagged keyframe work runs (eyeblink.frame.keyframes): None, inline on the frame that asks for
        #: it; a live worker sets a BesideKeyframes (a thread with its own networks)
        self.keyframes: Any = None
        self._inline: Any = None
        # the keyframe work in flight, oldest first (job, handle, where it runs, the eye model it places for): at
        # most one detection (or search) and one placement; and the timestamp of the frame analysed last (None: a
        # fresh start, which works on its own frame)
        self._pending: list[tuple[Any, Any, Any, Any]] = []
        self._prev_t: float | None = None
        #: where the eye is (:mod:`eyeblink.frame.locate`), chosen once from the config: a face under the keyframe
        #: policy, or a fixed region (a recording of one eye: the region, as the face every frame has; checked
        #: against the first frame's size, :meth:`_analyze_region`)
        self.locator = locator_for(config)
        self._region: FaceDetection | None = None
        self._region_size: tuple[int, int] | None = None
        if isinstance(self.locator, FixedRegion):
            self._region = self.locator.face()

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
            assert isinstance(self.locator, FixedRegion)
            self.locator.check_frame(size[1], size[0])
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

    # -- keyframe work beside the stream (eyeblink.frame.keyframes) -----------------------------------------

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


