"""Where the eye is: one interface, two locators, chosen once from a run's settings.

A run finds the eye either on a face (:class:`FaceFinder`: BlazeFace on keyframes, the eye model's
own points between them) or in a fixed region of every frame (:class:`FixedRegion`: ``--eye-roi
X,Y,W,H``, a recording of one eye with no face, measured by a region eye model such as ``area`` or
``contour``). :func:`locator_for` turns the settings into one of them, once; the code after it
passes the value (never the config's string or tuple).

A locator is a stateful object, one per :class:`~eyeblink.frame.analyzer.FrameAnalyzer` (per
worker). It must provide (:class:`EyeLocator`):

* ``name`` (its :data:`LOCATORS` key), ``needs_detector`` (whether the run's face detector runs for
  it) and ``from_config(config)``: the locator of a run's settings, or None when they do not ask for
  it;
* ``locate(frame, analysis)``: where the eye is in ``frame``, fitted: ``(face, detected, fit)``
  (:data:`Located`), the eye model fitted there through ``analysis`` (:class:`Analysis`: the
  analyzer's eye model, detector and knobs, its fits timed as the ``landmarks`` stage); ``(None,
  detected, None)``: no eye in this frame;
* ``tracking_state()`` / ``restore_tracking(state)``: what it carries from frame to frame (``None``:
  a fresh start, as on every tracking segment's first frame), ``reset()`` (a new input) and
  ``redetections`` (the detections its drift check asked for, for the summary).

A new locator is one class here and one entry in :data:`LOCATORS`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias

import numpy as np

from eyeblink.frame.keyframes import InlineKeyframes, KeyframeJob, holds_box
from eyeblink.landmarks.eyes import inter_ocular
from eyeblink.landmarks.region import EyeRegion

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.detect.blazeface import FaceDetection, FaceDetector
    from eyeblink.frames import Frame
    from eyeblink.landmarks.eyes import EyeFit

#: a frame that waits longer than this for the keyframe work it uses (the work outlasted
#: ``keyframe_lag_ms``) is counted in the stage clock's ``keyframe_wait`` (the summary's
#: ``timings.keyframe_waits``)
KEYFRAME_WAIT_S = 0.0005

#: What a locator found in a frame: the face the row carries (a face's detection, or the region's
#: box: frames.csv's face columns; None: no eye), whether the detector ran on this frame, and the
#: eye model's fit (None: no eye).
Located: TypeAlias = "tuple[FaceDetection | None, bool, EyeFit | None]"


class Analysis(Protocol):
    """What a locator asks of the analyzer it serves: the networks and knobs the runtimes set on it
    (live's cost ladder changes ``fitter`` and ``detect_every`` between batches; a live worker sets
    ``keyframes``), its stage clock, and the eye model's fits, timed as the ``landmarks`` stage."""

    detector: FaceDetector
    fitter: Any
    detect_every: int
    keyframes: Any
    clock: Any

    def fit(self, frame: Frame, where: FaceDetection | EyeRegion) -> EyeFit:
        """The eye model on ``where`` in ``frame`` (a face model on a face, a region model on a
        region)."""
        ...

    def placed_fit(self, frame: Frame, face: FaceDetection) -> tuple[EyeFit, str | None]:
        """The eye model on the placement it holds for ``face`` (the models that separate placement:
        ``lids``)."""
        ...

    def want_pose(self) -> None:
        """With ``--points``, the eye model measures the head pose too."""
        ...


class EyeLocator(Protocol):
    """Where a run's eye model measures (the module docstring says what a locator provides)."""

    name: ClassVar[str]
    #: the locator needs the face detector (a fixed region: none is warmed or timed)
    needs_detector: ClassVar[bool]

    @property
    def redetections(self) -> int:
        """The detections its drift check asked for since :meth:`reset` (the summary's)."""
        ...

    @classmethod
    def from_config(cls, config: RunConfig) -> EyeLocator | None: ...

    def locate(self, frame: Frame, analysis: Analysis) -> Located: ...

    def tracking_state(self) -> Any: ...

    def restore_tracking(self, state: Any) -> None: ...

    def reset(self) -> None: ...


class FaceFinder:
    """The eye on a face, under the keyframe policy: BlazeFace on every ``detect_every``-th frame
    (and at least ``detect.detect_min_ms`` apart), on the frame after a face was lost, and when the
    eye fit drifts (the eye centres leave the reused box, or the inter-ocular distance changes by
    more than 15% from the keyframe's, or the eye model's own face-presence score falls below
    ``landmarks.min_presence``). In between, the last detection is reused. On fast cameras the
    keyframe work is lagged (:mod:`eyeblink.frame.keyframes`).

    Its state (the tracked box, the frames since the last detection and its time, the reference
    inter-ocular distance, the box's adoption time, the keyframe work in flight) is
    :meth:`tracking_state`.
    """

    name: ClassVar[str] = "face"
    needs_detector: ClassVar[bool] = True

    def __init__(self, config: RunConfig) -> None:
        self.cfg = config
        #: keyframes at least this long apart in capture time (``detect.detect_min_ms``; seconds)
        self._detect_min_s = config.detect.detect_min_ms / 1000.0
        self.redetections = 0
        self._face: FaceDetection | None = None
        self._since_detect = 0
        self._detect_t = -math.inf  # the capture time of the last detection (detect.detect_min_ms)
        self._iod_ref = math.nan
        self._face_t = -math.inf  # when the tracked box was adopted (hold_max_ms)
        # the last eye points' inter-ocular distance, and the last drift verdict with what it was
        # judged on (face, points, reference distance): an eye model that reuses its points (the
        # face mesh for mesh_reuse_ms) gives the same objects frame after frame, and the same
        # answers
        self._iod_of: tuple[np.ndarray, float] | None = None
        self._drift_of: tuple[FaceDetection, np.ndarray, float, bool] | None = None
        # keyframe work done on the frame that asks (the analyzer sets no keyframes)
        self._inline: Any = None
        # the keyframe work in flight, oldest first (job, handle, where it runs, the eye model it
        # places for): at most one detection (or search) and one placement; and the timestamp of the
        # frame analysed last (None: a fresh start, which works on its own frame)
        self._pending: list[tuple[Any, Any, Any, Any]] = []
        self._prev_t: float | None = None

    @classmethod
    def from_config(cls, config: RunConfig) -> FaceFinder | None:
        return cls(config)

    # -- the state ----------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the tracked face and the drift count (a new input)."""
        self.restore_tracking(None)
        self.redetections = 0

    def tracking_state(self) -> tuple[Any, ...]:
        """The tracked face, frames since detection and its time, reference IOD, adoption time, the
        work in flight and the last frame's timestamp."""
        return (
            self._face,
            (self._since_detect, self._detect_t),
            self._iod_ref,
            self._face_t,
            list(self._pending),
            self._prev_t,
        )

    def restore_tracking(self, state: tuple[Any, ...] | None) -> None:
        """Continue from :meth:`tracking_state`'s ``state``; ``None``: no tracked face (a keyframe
        next)."""
        if state is None:
            state = (None, (0, -math.inf), math.nan, -math.inf, [], None)
        self._face, since, self._iod_ref, self._face_t, pending, self._prev_t = state
        self._since_detect, self._detect_t = since
        self._pending = list(pending)

    # -- a frame ------------------------------------------------------------------------------

    def locate(self, frame: Frame, a: Analysis) -> Located:
        prev, self._prev_t = self._prev_t, frame.timestamp_s
        lag = self.cfg.detect.keyframe_lag_ms
        if (
            lag > 0
            and a.detect_every > 1  # --detect-every 1: every frame its own detection
            and prev is not None
            and (frame.timestamp_s - prev) * 1000.0 < lag
            and hasattr(a.fitter, "placed_fit")
        ):
            return self._locate_lagged(frame, a, lag)
        while self._pending:  # frames far apart again: the work in flight is used from this frame
            self._adopt(a)
        return self._locate_now(frame, a)

    def _detect(self, frame: Frame, a: Analysis, *, hold: bool = True) -> FaceDetection | None:
        """Run the detector; keep the tracked box when the new one is nearly the same.

        BlazeFace's box wobbles by a pixel or two from frame to frame, and dlib's fit (hence
        the EAR) follows the box: every new box is a small step in the EAR trace. While the new
        detection overlaps the tracked box with IoU >= ``detect.hold_iou``, the tracked box is
        kept, for at most ``detect.hold_max_ms``; a real head movement (or the drift check)
        replaces it. Only under the keyframe policy: with ``--detect-every 1`` every frame uses its
        own detection (the original every-frame mode, identical in every pipeline layout).
        """
        t0 = time.perf_counter()
        face = a.detector.track(frame.image, self._face)  # at any roll (select_subject's tracking)
        a.clock.add("detect", time.perf_counter() - t0)
        self._since_detect = 0
        self._detect_t = frame.timestamp_s
        if (
            hold
            and face is not None
            and holds_box(
                self.cfg, a.detect_every, face, self._face, frame.timestamp_s, self._face_t
            )
        ):
            return self._face
        self._face_t = frame.timestamp_s
        return face

    def _keyframe_due(self, frame: Frame, every: int) -> bool:
        """Whether the keyframe policy detects on ``frame``: ``every`` (``detect_every``) frames
        since the last detection, and ``detect.detect_min_ms`` of capture time (a fast camera's
        keyframes are not closer than that; a timestamp that went back, or none, counts as far
        enough); with ``every`` 1, every frame."""
        dt = frame.timestamp_s - self._detect_t
        return self._since_detect + 1 >= every and (
            every == 1 or not 0.0 <= dt < self._detect_min_s - 1e-9
        )

    def _locate_now(self, frame: Frame, a: Analysis) -> Located:
        """A frame whose keyframe work is done on it (frames far apart, a segment's first frame,
        another model)."""
        detected = False
        face = self._face
        if face is None or self._keyframe_due(frame, a.detect_every):
            face = self._detect(frame, a)
            detected = True
        else:
            self._since_detect += 1
        if face is None:
            return self._no_face(detected)
        fit = a.fit(frame, face)
        if not detected and (
            self._drifted_cached(face, fit.points, self._inter_ocular(fit))
            or fit.presence < self.cfg.landmarks.min_presence
        ):
            # the reused box no longer fits the face: detect now (without holding it) and refit
            self.redetections += 1
            face = self._detect(frame, a, hold=False)
            detected = True
            if face is None:
                return self._no_face(detected)
            fit = a.fit(frame, face)
        if detected:
            self._iod_ref = self._inter_ocular(fit)
        self._face = face
        return face, detected, fit

    def _no_face(self, detected: bool) -> Located:
        """No face in this frame: forget the tracked box (the next frame detects)."""
        self._face = None
        return None, detected, None

    # -- keyframe work beside the stream (eyeblink.frame.keyframes) ---------------------------

    def _locate_lagged(self, frame: Frame, a: Analysis, lag: float) -> Located:
        """A frame closer than ``lag`` ms to the one before: rowed with the face and placement held
        now; the keyframe work it asks for starts on its pixels and is used from the first frame
        ``lag`` ms later."""
        pending = self._pending  # (adopted from the front; 1e-6: float times)
        while pending and (frame.timestamp_s - pending[0][0].t) * 1000.0 >= lag - 1e-6:
            self._adopt(a)
        # a detection in flight (a keyframe, a search): the next waits for it; a placement in flight
        # does not hold a keyframe up (the face is let go within the lag of the keyframe that no
        # longer finds it)
        detecting = any(p[0].kind != "place" for p in self._pending)
        face = self._face
        if face is None:  # no face: look for one (on this frame; the frames until it is used: none)
            if not detecting:
                self._submit(frame, a, "search", hold=False)
            return self._no_face(not detecting)
        held = getattr(a.fitter, "tracking_state", None)
        eyes = held() if held is not None else None
        if eyes is None or eyes[0] is not face:  # another model (live --landmarks auto): place now
            while self._pending:
                self._adopt(a)
            return self._locate_now(frame, a)
        detected = False
        if not detecting and self._keyframe_due(frame, a.detect_every):
            self._submit(frame, a, "detect", hold=True)
            detected = detecting = True
        else:
            self._since_detect += 1
        fit, due = a.placed_fit(frame, face)
        if not detecting and (
            self._drifted_cached(face, fit.points, self._inter_ocular(fit))
            or fit.presence < self.cfg.landmarks.min_presence
        ):
            # the held box no longer fits the face: detect again, without holding it
            self.redetections += 1
            self._submit(frame, a, "detect", hold=False)
            detected = True
        elif due and not self._pending:
            self._submit(frame, a, "place", hold=False)
        return face, detected, fit

    def _submit(self, frame: Frame, a: Analysis, kind: str, *, hold: bool) -> None:
        """Start keyframe work of ``kind`` on ``frame``."""
        face = None if kind == "search" else self._face
        fitter = a.fitter
        a.want_pose()
        # the held placement serves a kept box only if it is still fresh when the result is used
        # (else the job places too: one detection and one face mesh per keyframe, as without
        # lagging)
        used_at = frame.timestamp_s + self.cfg.detect.keyframe_lag_ms / 1000.0
        reuse_ok = kind == "detect" and face is not None and fitter.reusable(face, used_at)
        job = KeyframeJob(
            kind,
            frame.index,
            frame.timestamp_s,
            frame.image,
            frame.gray,
            face,
            self._face_t,
            hold,
            reuse_ok,
            a.detect_every,
        )
        where = a.keyframes
        if where is None:
            if self._inline is None or self._inline.detector is not a.detector:
                self._inline = InlineKeyframes(a.detector)
            where = self._inline
        self._pending.append((job, where.submit(job, self.cfg, fitter), where, fitter))
        if kind != "place":
            self._since_detect = 0
            self._detect_t = frame.timestamp_s

    def _adopt(self, a: Analysis) -> None:
        """Use the oldest keyframe work in flight from this frame on (waiting for it when it is not
        done yet)."""
        job, handle, where, fitter = self._pending.pop(0)
        t0 = time.perf_counter()
        res = where.result(handle)
        waited = time.perf_counter() - t0
        if where is not self._inline and waited > KEYFRAME_WAIT_S:
            # the work beside the stream outlasted its lag: this frame waited
            a.clock.add("keyframe_wait", waited)
        for stage, dt in res.seconds.items():
            a.clock.add(stage, dt)
        if job.kind == "place" and job.prior is not self._face:
            return  # placed for a face let go or replaced meanwhile (a detection adopted before it)
        if job.kind == "place" and not res.redetected:
            if fitter is a.fitter:
                fitter.adopt(res.placement)
            return
        if res.redetected:
            self.redetections += 1
        self._face, self._face_t = res.face, res.face_t
        if res.face is None:
            return
        if res.placement is not None and fitter is a.fitter:
            fitter.adopt(res.placement)
        self._iod_ref = inter_ocular(fitter.tracking_state()[1])

    # -- the drift check ----------------------------------------------------------------------

    def _inter_ocular(self, fit: EyeFit) -> float:
        """``fit.inter_ocular``, computed once per eye-points array."""
        known = self._iod_of
        if known is not None and known[0] is fit.points:
            return known[1]
        iod = fit.inter_ocular
        self._iod_of = (fit.points, iod)
        return iod

    def _drifted_cached(self, face: FaceDetection, pts: np.ndarray, iod: float) -> bool:
        """:meth:`_drifted`, judged again only when the face, the eye points or the reference
        distance changed (``iod`` follows from ``pts``)."""
        known = self._drift_of
        ref = self._iod_ref
        if (
            known is not None
            and known[0] is face
            and known[1] is pts
            and (known[2] == ref or (known[2] != known[2] and ref != ref))
        ):
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


@dataclass(eq=True)
class FixedRegion:
    """The eye in a fixed region of every frame (``--eye-roi``): the region model fitted on the
    region, no detector.

    The rows carry the region's box as their face columns (``face_x0`` ... ``face_y1``,
    ``face_score`` 1): :attr:`row_face`, made once. The region is checked against the first frame's
    size (and again when the size changes)."""

    region: EyeRegion
    name: ClassVar[str] = "region"
    needs_detector: ClassVar[bool] = False
    _size: tuple[int, int] | None = field(default=None, init=False, compare=False, repr=False)
    _row: FaceDetection | None = field(default=None, init=False, compare=False, repr=False)

    @classmethod
    def from_config(cls, config: RunConfig) -> FixedRegion | None:
        region = config.eye.region
        return None if region is None else cls(region)

    @property
    def redetections(self) -> int:
        """None: a fixed region never detects."""
        return 0

    @property
    def row_face(self) -> FaceDetection:
        """The region as a row's face columns carry it (the records and frames.csv: a box, a score,
        keypoints): its box, score 1, every keypoint at its centre. Not what the eye model sees (it
        gets the region)."""
        if self._row is None:
            from eyeblink.detect.blazeface import NUM_KEYPOINTS, FaceDetection

            r = self.region
            cx, cy = r.x + r.w / 2, r.y + r.h / 2
            self._row = FaceDetection(r.box, 1.0, np.tile([cx, cy], (NUM_KEYPOINTS, 1)))
        return self._row

    def check_frame(self, width: int, height: int, where: str = "the frame") -> None:
        """:class:`~eyeblink.errors.ConfigError` unless the region lies inside a ``width`` x
        ``height`` frame."""
        self.region.check_inside(width, height, where)

    def locate(self, frame: Frame, a: Analysis) -> Located:
        gray = frame.gray
        size = gray.shape[:2]
        if size != self._size:
            self.check_frame(size[1], size[0])
            self._size = size
        return self.row_face, False, a.fit(frame, self.region)

    def tracking_state(self) -> None:
        """Nothing carried from frame to frame (a frame's row depends on that frame only)."""
        return None

    def restore_tracking(self, state: Any) -> None:
        """Nothing to restore."""

    def reset(self) -> None:
        """Nothing to forget (the region and the size it was checked against stay)."""


#: The locators, the most specific first: a run's is the first whose ``from_config`` gives one.
LOCATORS: dict[str, type[EyeLocator]] = {"region": FixedRegion, "face": FaceFinder}


def locator_for(config: RunConfig) -> EyeLocator:
    """The run's eye locator, a fresh one, from its settings (``eye.roi``: a fixed region; else
    faces)."""
    for cls in LOCATORS.values():
        found = cls.from_config(config)
        if found is not None:
            return found
    raise AssertionError("FaceFinder locates in every config")  # pragma: no cover


__all__ = [
    "KEYFRAME_WAIT_S",
    "LOCATORS",
    "Analysis",
    "EyeLocator",
    "FaceFinder",
    "FixedRegion",
    "Located",
    "locator_for",
]
