"""The per-frame core: one frame in, one :class:`FrameResult` out (every runtime's workers run it).

:class:`FrameAnalyzer` asks the run's eye locator (:mod:`eyeblink.frame.locate`: a face found by the
detector under the keyframe policy, or a fixed eye region) where the eye is, then fits the eye model
there. The keyframe work it lags on fast cameras lives in :mod:`eyeblink.frame.keyframes`; the
tracking segments (:data:`SEGMENT_FRAMES`) make a row independent of how frames were dealt to
workers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.config import RunConfig
from eyeblink.frame.locate import EyeLocator, locator_for
from eyeblink.frames import Frame
from eyeblink.landmarks.eyes import eye_strip

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection, FaceDetector
    from eyeblink.landmarks import EyeModel
    from eyeblink.landmarks.eyes import EyeFit
    from eyeblink.landmarks.region import EyeRegion

STAGES = ("decode", "detect", "landmarks", "blinks", "write")

#: Tracking segments, in frames: the keyframe policy's state (the tracked box, the frames since the
#: last detection, the reference inter-ocular distance, the box's adoption time and what the eye
#: model carries from fit to fit) starts afresh on every frame whose index is a multiple of this, in
#: every runtime. So a frame's row depends only on the recording, the settings and its own segment:
#: never on how frames were dealt to workers, loaders, Ray tasks or nodes (they are dealt in whole
#: segments). 128 frames is 0.26 s at 500 FPS: one forced detection per segment costs ~1% of the
#: frame time under the default ``detect_every`` of 10.
SEGMENT_FRAMES = 128


def aligned_frames(frames: int) -> int:
    """``frames`` rounded up to whole tracking segments (:data:`SEGMENT_FRAMES`; at least one): the
    unit in which frames may be dealt to workers, loaders and chunks without changing any row."""
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
    # (2, 12, 24) uint8 (landmarks.eye_patches): the blink appearance cue
    eye_patches: np.ndarray | None = None
    #: ``eye_crops`` runs only: both eyes upright (landmarks.eye_strip) and the 12 eye points in its
    #: pixels
    eye_strip: np.ndarray | None = None
    strip_points: np.ndarray | None = None
    #: ``points`` runs only (``--points``): the eye model's 12 points in frame pixels, the face
    #: mesh's head pose (yaw, pitch, roll; degrees) and the frame whose mesh run measured it (None
    #: where no mesh ran)
    eye_points: np.ndarray | None = None
    pose: tuple[float, float, float] | None = None
    pose_frame: int | None = None
    #: the values of the frame table's worker columns
    #: (:attr:`eyeblink.outputs.columns.FrameColumn.worker`) as a worker's record carried them to
    #: the sink; None: computed by the sink from this result
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
        """``dt`` seconds more of ``stage`` (a stage not in :data:`STAGES`, such as
        ``keyframe_wait``, is added)."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + dt
        self.calls[stage] = self.calls.get(stage, 0) + 1

    def merge(self, seconds: dict[str, float], calls: dict[str, int]) -> None:
        """Another clock's ``seconds`` and ``calls`` added in (a worker's at its end, a measured
        chunk's)."""
        for k, v in seconds.items():
            self.seconds[k] = self.seconds.get(k, 0.0) + float(v)
            self.calls[k] = self.calls.get(k, 0) + int(calls.get(k, 0))

    def ms_per_frame(self, frames: int) -> dict[str, float]:
        """Each of :data:`STAGES`' time per frame (the work; a wait such as ``keyframe_wait`` is
        not one)."""
        return {
            k: (v * 1000 / frames if frames else math.nan)
            for k, v in self.seconds.items()
            if k in STAGES
        }

    def waits(self) -> dict[str, Any] | None:
        """How often and how long frames waited for the keyframe work beside the stream (``live``
        above 1000 / ``keyframe_lag_ms`` FPS) longer than :data:`KEYFRAME_WAIT_S`; None when none
        did."""
        n = self.calls.get("keyframe_wait", 0)
        if not n:
            return None
        total = self.seconds["keyframe_wait"] * 1000.0
        return {"count": n, "total_ms": round(total, 1), "mean_ms": round(total / n, 2)}


def build_fitters(config: RunConfig, models: Iterable[str]) -> dict[str, EyeModel]:
    """Each of ``models`` built as the run's eye model would be, from the registry (no model file):
    the candidates ``live --landmarks auto`` picks from."""
    from dataclasses import replace

    return {
        model: build_fitter(
            replace(config, landmarks=replace(config.landmarks, model=model, model_path=None))
        )
        for model in models
    }


def build_fitter(config: RunConfig) -> EyeModel:
    """The eye model of a run (``config.landmarks``: model, file, and the settings the model
    takes)."""
    from eyeblink.detect.litert import native_info_silenced
    from eyeblink.landmarks import EYE_MODELS, create_eye_model

    lm = config.landmarks
    settings = {name: lm.setting(name) for name in EYE_MODELS[lm.model].settings}
    # the face mesh's LiteRT interpreter: no INFO line below --log-level info
    with native_info_silenced():
        return create_eye_model(lm.model, model_path=lm.model_path, **settings)


class FrameAnalyzer:
    """Per-frame work: ask the run's eye locator where the eye is, fit the eye model there, build
    the row.

    The locator (:mod:`eyeblink.frame.locate`, :attr:`locator`: a face under the keyframe policy,
    or a fixed eye region) is chosen once from the config and holds what is tracked from frame to
    frame; it fits the eye model through this analyzer (:meth:`fit`, :meth:`placed_fit`: the
    ``landmarks`` stage), whose eye model and knobs (``fitter``, ``detect_every``, ``keyframes``)
    the runtimes may change between batches.

    The tracking state restarts on every frame whose index is a multiple of ``segment_frames``
    (:data:`SEGMENT_FRAMES`; ``None``: never, live runs whose workers track the face across their
    own chunks), so that every runtime that deals whole segments gives the same rows as one process.
    """

    def __init__(
        self,
        config: RunConfig,
        detector: FaceDetector,
        fitter: EyeModel,
        clock: StageClock | None = None,
    ) -> None:
        self.cfg = config
        self.detector = detector
        #: the eye model in use and the keyframe interval: state (live's cost ladder changes them
        #: between batches, :mod:`eyeblink.runtime.live.adapt`), started from the config, which
        #: never changes
        self.fitter = fitter
        self.detect_every = config.detect.detect_every
        self.clock = clock or StageClock()
        self.segment_frames: int | None = SEGMENT_FRAMES
        #: the eye model's 12 points of the last analysed frame (None: no face), with or without
        #: ``--points``: the accelerator stage sends them to the workers that cut the eye patches
        self.last_points: np.ndarray | None = None
        #: where lagged keyframe work runs (eyeblink.frame.keyframes): None, inline on the frame
        #: that asks for it; a live worker sets a BesideKeyframes (a thread with its own networks)
        self.keyframes: Any = None
        #: where the eye is (:mod:`eyeblink.frame.locate`), chosen once from the config; it holds
        #: the tracking state
        self.locator: EyeLocator = locator_for(config)

    @property
    def redetections(self) -> int:
        """The detections the drift check asked for since :meth:`reset` (the locator's count)."""
        return self.locator.redetections

    def reset(self) -> None:
        """Forget the tracked face and restart the stage clock (a new input)."""
        self.locator.reset()
        self.clock = StageClock()
        self._restore_fitter(None)

    def tracking_state(self) -> tuple[Any, ...]:
        """What is carried from frame to frame: the locator's (the keyframe policy's tracked face,
        frames since detection ...) and the eye model's (the mesh's eye crops).

        A worker whose chunks arrive interleaved (several loaders) keeps one per unfinished chunk.
        """
        get = getattr(self.fitter, "tracking_state", None)
        return self.locator.tracking_state(), get() if get else None

    def restore_tracking(self, state: tuple[Any, ...] | None) -> None:
        """Continue from :meth:`tracking_state`'s ``state``; ``None``: nothing tracked (a keyframe
        next)."""
        located, fitter_state = (None, None) if state is None else state
        self.locator.restore_tracking(located)
        self._restore_fitter(fitter_state)

    def _restore_fitter(self, state: Any) -> None:
        restore = getattr(self.fitter, "restore_tracking", None)
        if restore is not None:
            restore(state)

    def analyze(self, frame: Frame) -> FrameResult:
        seg = self.segment_frames
        # a tracking segment starts: a keyframe, nothing carried over
        if seg and frame.index % seg == 0:
            self.restore_tracking(None)
        face, detected, fit = self.locator.locate(frame, self)
        if face is None or fit is None:
            self.last_points = None
            return FrameResult(frame.index, frame.timestamp_s, None, detected)
        self.last_points = fit.points
        strip = pts = None
        if self.cfg.eye_crops and np.isfinite(fit.points).all():
            strip, pts = eye_strip(frame.gray, fit.points)
        if self.cfg.points:
            return FrameResult(
                frame.index,
                frame.timestamp_s,
                face,
                detected,
                fit.ear_left,
                fit.ear_right,
                fit.patches,
                strip,
                pts,
                fit.points,
                fit.pose,
                fit.pose_frame,
            )
        return FrameResult(
            frame.index,
            frame.timestamp_s,
            face,
            detected,
            fit.ear_left,
            fit.ear_right,
            fit.patches,
            strip,
            pts,
        )

    # -- the eye model's fits, for the locator (eyeblink.frame.locate.Analysis) ---------------

    def fit(self, frame: Frame, where: FaceDetection | EyeRegion) -> EyeFit:
        """The eye model on ``where`` (a face model on a face, a region model on the region: the
        config pairs them), timed as the ``landmarks`` stage."""
        set_time = getattr(self.fitter, "set_time", None)
        if set_time is not None:
            set_time(frame.timestamp_s, frame.index)
        self.want_pose()
        t0 = time.perf_counter()
        fit = self.fitter.fit(frame.gray, where)  # type: ignore[arg-type]
        self.clock.add("landmarks", time.perf_counter() - t0)
        return fit

    def placed_fit(self, frame: Frame, face: FaceDetection) -> tuple[EyeFit, str | None]:
        """The eye model on the placement it holds for ``face``, timed as the ``landmarks``
        stage."""
        self.fitter.set_time(frame.timestamp_s, frame.index)  # type: ignore[attr-defined]
        self.want_pose()
        t0 = time.perf_counter()
        out = self.fitter.placed_fit(frame.gray, face)  # type: ignore[attr-defined]
        self.clock.add("landmarks", time.perf_counter() - t0)
        return out

    def want_pose(self) -> None:
        """With ``--points``, the eye model's face mesh measures the head pose too (points.csv)."""
        if self.cfg.points and getattr(self.fitter, "pose_wanted", True) is False:
            self.fitter.pose_wanted = True  # type: ignore[attr-defined]


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
