"""Recordings of one eye: the lid measured in a fixed eye region, with no face detector
(``--eye-roi``).

Many blink rigs film one eye and nothing else: a head-fixed mouse, rat or rabbit under infrared
light, or a human eye close-up cropped to reach a high frame rate. There is no face to detect; the
user names the eye's region once, ``--eye-roi X,Y,W,H`` in pixels of the frame (:class:`EyeRegion`),
and one of two eye models measures the lid inside it on every frame:

``area`` (:class:`AreaFitter`) — any eye, any species: the share of the region's pixels that belong
to the
    eye. The eye is the part of the region darker (``polarity = "dark"``: the iris, pupil and lid
    margin of an eye in visible or near-infrared light) or brighter (``"bright"``: an eye lit from
    behind or by its own reflection) than the skin or fur around it. The threshold comes from the
    recording itself, frame by frame: ``threshold`` times the mean of the region's border band (the
    outer eighth of its width and height), which is skin or fur whether the eye is open or shut, so
    a change of exposure or gain moves the threshold with it. Visible area, as Neuroblinks measures
    it in MATLAB; an open eye reads its own share (say 0.3), a shut one towards 0. Cost: one
    comparison per pixel of the region (~30 µs for 200x150).
``contour`` (:class:`ContourFitter`) — a human eye close-up: MediaPipe's iris network (the lid
contour
    network of the ``mesh`` model) on the region, the lid aperture of its contour as in face mode.
    Its crop is fixed by the region: the eye corners taken on a line through the region's centre,
    :data:`CORNER_INSET` of its extent in from each side, level or turned to the eye's axis
    (``eye_angle``: given, or found once on the recording's first frames by :func:`find_eye_axis`: a
    rodent's eye seen from above, a turned head). (Re-centring the crop on the corners the network
    finds, once per tracking segment, lost event F1 on fixed eyes: 0.953 against 0.965 on the
    zju-dev eye crops; the region is fixed.) One network run per frame (~0.6 ms on one AVX-512
    core).

With no measure named, a run chooses one of the registry's region measures from its first seconds
(:func:`choose_measure`: the one whose openness separates closed from open frames best) and says
which and why (:class:`MeasureChoice`).

Both give the same outputs as face mode: the openness goes into ``ear_left`` (one eye: ``ear_right``
stays empty), the blink detector and the eyelid closure (FEC: 0 = this eye's open baseline, 1 = a
full closure, calibrated on a segment or on the session's largest closures,
:mod:`eyeblink.signals.closure`) work on it unchanged, and the face box columns of ``frames.csv``
hold the region. A frame's row depends on that frame only, so rows are equal across worker counts.

A region measure is a :class:`RegionModel`: ``fit(gray, region)`` on the :class:`EyeRegion` itself
(a face model's ``fit`` takes a face detection instead); the run's locator
(:class:`eyeblink.frame.locate.FixedRegion`) hands it the region on every frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from eyeblink.closing import Closing
from eyeblink.errors import ConfigError
from eyeblink.landmarks.eyes import EyeFit

# The eye models that measure in an eye region (``--eye-roi``) are the registry's entries marked
# ``region`` (:func:`eyeblink.landmarks.region_models`), each with its own settings declared there
# (``tunables``).
#: The eye model of a run with ``--eye-roi`` and no ``--landmarks``.
DEFAULT_REGION_MODEL = "area"
#: The border band of the region that sets the area threshold: this share of its width and height on
#: each side.
BORDER = 1 / 8
#: The contour measure's crop: the eye corners are taken at this share of the region's width from
#: each side (a region drawn around the eye, corner to corner, with a little margin); the crop is
#: 2.3x their distance, square.
CORNER_INSET = 0.15


@dataclass(frozen=True)
class EyeRegion:
    """A rectangle of the frame, in pixels: left ``x``, top ``y``, width ``w``, height ``h``."""

    x: int
    y: int
    w: int
    h: int

    @classmethod
    def parse(cls, text: str | tuple[float, ...] | list[float] | EyeRegion) -> EyeRegion:
        """``X,Y,W,H`` (whole pixels, W and H at least 4, X and Y not negative), or the four
        numbers."""
        if isinstance(text, EyeRegion):
            return text
        parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else list(text)
        try:
            if len(parts) != 4:
                raise ValueError
            vals = [int(p) if not isinstance(p, float) or p.is_integer() else None for p in parts]
            if any(v is None for v in vals):
                raise ValueError
        except (TypeError, ValueError):
            raise ConfigError(
                f"eye region must be X,Y,W,H in whole pixels (e.g. 220,140,200,120), got {text!r}"
            ) from None
        x, y, w, h = (int(v) for v in vals)  # type: ignore[arg-type]
        if x < 0 or y < 0:
            raise ConfigError(
                f"eye region {x},{y},{w},{h} starts outside the frame (X and Y must be >= 0); "
                "give its top-left corner in pixels of the frame"
            )
        if w < 4 or h < 4:
            raise ConfigError(
                f"eye region {x},{y},{w},{h} is {w}x{h} pixels, too small to measure; give W and "
                "H of "
                "at least 4 pixels (draw it around the whole eye)"
            )
        return cls(x, y, w, h)

    def check_inside(self, width: int, height: int, where: str = "the frame") -> None:
        """Raise :class:`ConfigError` unless the region lies inside a ``width`` x ``height``
        frame."""
        if self.x + self.w > width or self.y + self.h > height:
            raise ConfigError(
                f"eye region {self} reaches past {where} ({width}x{height} pixels: it ends at "
                f"x={self.x + self.w}, y={self.y + self.h}); choose it inside the frame "
                "(eyeblink region INPUT draws it on the first frame)"
            )

    @property
    def box(self) -> tuple[float, float, float, float]:
        return float(self.x), float(self.y), float(self.x + self.w), float(self.y + self.h)

    def as_list(self) -> list[int]:
        return [self.x, self.y, self.w, self.h]

    def __str__(self) -> str:
        return f"{self.x},{self.y},{self.w},{self.h}"


@runtime_checkable
class RegionModel(Protocol):
    """A region measure (an :data:`~eyeblink.landmarks.EYE_MODELS` entry with ``region=True``):
    ``fit(gray, region) -> EyeFit`` on one eye region, the openness in ``ear_left``; ``warm_up`` and
    ``close`` as an eye model's (:class:`~eyeblink.landmarks.EyeModel`, whose ``fit`` takes a face
    instead)."""

    def fit(self, gray: np.ndarray, region: EyeRegion) -> EyeFit: ...

    def warm_up(self, gray: np.ndarray) -> None: ...

    def close(self) -> None: ...


def _pixels(region: EyeRegion) -> tuple[int, int, int, int]:
    return region.x, region.y, region.x + region.w, region.y + region.h


def _outline(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    """Six points in dlib's eye order on the region's inscribed ellipse (corners, two upper, two
    lower)."""
    cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
    angles = (math.pi, 4 * math.pi / 3, 5 * math.pi / 3, 0.0, math.pi / 3, 2 * math.pi / 3)
    return np.array([[cx + rx * math.cos(a), cy + ry * math.sin(a)] for a in angles], np.float64)


def _one_eye(points6: np.ndarray) -> np.ndarray:
    """The 12 eye points with the measured eye in the first six (the other eye's six: NaN)."""
    out = np.full((12, 2), np.nan, np.float32)
    out[:6] = points6
    return out


def corners_at(
    x0: float, y0: float, x1: float, y1: float, angle: float
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`ContourFitter.corners` of the box ``x0, y0, x1, y1``."""
    t = math.radians(angle)
    c, s = math.cos(t), math.sin(t)
    reach = min(
        (x1 - x0) / 2 / abs(c) if abs(c) > 1e-9 else math.inf,
        # centre to the region's edge on the line
        (y1 - y0) / 2 / abs(s) if abs(s) > 1e-9 else math.inf,
    )
    half = reach * (1 - 2 * CORNER_INSET)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return np.array([cx - half * c, cy - half * s]), np.array([cx + half * c, cy + half * s])


class AreaFitter(Closing):
    """``--landmarks area``: the eye's visible share of the region (module docstring)."""

    name = "area"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        area_polarity: str = "dark",
        area_threshold: float = 0.7,
    ) -> None:
        polarity, threshold = area_polarity, area_threshold
        if model_path is not None:
            raise ConfigError("--landmarks area has no model file; leave out --landmark-model")
        if polarity not in ("dark", "bright"):
            raise ConfigError(f"landmarks.area_polarity must be dark or bright, got {polarity!r}")
        if not 0.0 < threshold < 1.0:
            raise ConfigError(f"landmarks.area_threshold must be in (0, 1), got {threshold!r}")
        self.polarity = polarity
        self.threshold = float(threshold)
        self._geom: tuple[tuple[int, int, int, int], np.ndarray, np.ndarray] | None = None

    def _geometry(
        self, region: EyeRegion
    ) -> tuple[tuple[int, int, int, int], np.ndarray, np.ndarray]:
        px = _pixels(region)
        if self._geom is None or self._geom[0] != px:
            x0, y0, x1, y1 = px
            h, w = y1 - y0, x1 - x0
            bh, bw = max(1, round(h * BORDER)), max(1, round(w * BORDER))
            band = np.ones((h, w), bool)
            band[bh : h - bh, bw : w - bw] = False
            self._geom = (px, band, _one_eye(_outline(*region.box)))
        return self._geom

    def share(self, gray: np.ndarray, region: EyeRegion) -> float:
        """The eye's share of the region's pixels in ``gray``."""
        (x0, y0, x1, y1), band, _ = self._geometry(region)
        roi = gray[y0:y1, x0:x1]
        ref = float(roi[band].mean())
        if self.polarity == "dark":
            eye = np.count_nonzero(roi < ref * self.threshold)
        else:
            eye = np.count_nonzero(roi > 255.0 - (255.0 - ref) * self.threshold)
        return eye / roi.size

    def fit(self, gray: np.ndarray, region: EyeRegion) -> EyeFit:
        _, _, points = self._geometry(region)
        return EyeFit(points, self.share(gray, region), math.nan, presence=1.0)

    def warm_up(self, gray: np.ndarray) -> None:
        """Nothing to warm up (no network)."""

    def close(self) -> None:
        self._geom = None


class ContourFitter(Closing):
    """``--landmarks contour``: MediaPipe's iris network on the region, the lid aperture of its
    contour."""

    name = "contour"

    def __init__(
        self, model_path: str | Path | None = None, *, eye_angle: float | None = None
    ) -> None:
        from eyeblink.landmarks.mesh import IRIS_INPUT, _load
        from eyeblink.weights import iris_path

        fix = (
            "check --landmark-model (an iris-landmark .tflite: input [1, 64, 64, 3], 213 + 15 "
            "outputs)"
            if model_path is not None
            else "restore weights/ from the repository or reinstall eyeblink (see "
            "weights/README.md)"
        )
        path = Path(model_path) if model_path is not None else iris_path()
        self._iris: Any
        self._iris, self._in, outs = _load(path, (1, IRIS_INPUT, IRIS_INPUT, 3), 213, "iris", fix)
        self._contour = next(d["index"] for d in outs if int(np.prod(d["shape"])) == 213)
        self.model_path = path
        #: the eye's axis, degrees clockwise from level in the image (None: level, until the run
        #: settles it)
        self.eye_angle = float(eye_angle or 0.0)
        #: the region and the corners placed on it
        self._corners: tuple[Any, np.ndarray, np.ndarray] | None = None

    def contour(self, gray: np.ndarray, c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
        """(16, 2) frame-pixel lid contour of the eye between the corners ``c0``, ``c1`` (0, 8:
        the corners)."""
        from eyeblink.landmarks.mesh import IRIS_INPUT, contour_to_frame, eye_roi, warp_into

        if self._iris is None:
            raise RuntimeError("the contour eye model is closed")
        m = eye_roi(c0, c1)
        warp_into(self._iris, self._in, gray, m, IRIS_INPUT)
        self._iris.invoke()
        return contour_to_frame(self._iris.get_tensor(self._contour), m, mirror=False)

    @staticmethod
    def corners(region: EyeRegion, angle: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The eye corners the crop is placed on: a line through the region's centre at ``angle``
        degrees (clockwise from level in the image), its ends :data:`CORNER_INSET` of the region's
        extent along that line in from the region's edges (level: the horizontal centre line,
        ``CORNER_INSET`` of the width in from each side)."""
        x0, y0, x1, y1 = region.box
        return corners_at(x0, y0, x1, y1, angle)

    def fit(self, gray: np.ndarray, region: EyeRegion) -> EyeFit:
        from eyeblink.landmarks.mesh import CONTOUR_EYE_POINTS, aperture

        if self._corners is None or self._corners[0] is not region:
            self._corners = (region, *self.corners(region, self.eye_angle))
        contour = self.contour(gray, self._corners[1], self._corners[2])
        return EyeFit(
            _one_eye(contour[list(CONTOUR_EYE_POINTS[0])]),
            aperture(contour),
            math.nan,
            presence=1.0,
        )

    def warm_up(self, gray: np.ndarray) -> None:
        """One network run (weight packing, paging in the model)."""
        h, w = gray.shape[:2]
        self.contour(gray, np.array([w * 0.3, h / 2]), np.array([w * 0.7, h / 2]))

    def close(self) -> None:
        self._iris = None
        self._corners = None


# --------------------------------------------------------------------------- the measure chosen
# from the recording

#: The first seconds of a recording on which a run with no ``--landmarks`` chooses its measure ...
SURVEY_S = 30.0
#: ... at most its first this many frames (decoding them is the survey's main cost: 2.4 s of a 500
#: FPS camera)
SURVEY_FRAMES = 1200
#: A named measure's survey (``contour``'s eye axis, the warning of a trace unlike an eye's): its
#: first frames
NAMED_SURVEY_FRAMES = 100
#: The eye's axis: the corners the iris network finds on these frames of the survey, its crop turned
#: to them, this many times from level (the axis converges in 10-15 turns on a tilted eye; a level
#: eye stays level)
AXIS_FRAMES, AXIS_TURNS = 15, 16
#: an axis within this many degrees of level is taken as level (a human eye's corners are a few
#: degrees apart)
LEVEL_DEG = 10.0
#: A dip of a measure: its openness below this share of its open level (the median of the survey;
#: dips closer than :data:`DIP_GAP` frames are one) ...
DIP, DIP_GAP = 0.75, 3
#: ... that counts when it falls this many times the open level's spread (robust sigma) below it: a
#: closure, not the open level's wander (fur, whiskers, a reflection, a pupil)
DIP_SPREADS = 4.0
#: A trace unlike an eye's: its frame-to-frame noise is this share of its open level or more (a
#: blink's depth)
NOISY_TRACE = 0.15


def find_eye_axis(fitter: ContourFitter, grays: list[np.ndarray], region: EyeRegion) -> float:
    """The eye's corner axis in degrees (clockwise from level in the image; 0: level): the iris
    network's crop turned to the corners it finds, :data:`AXIS_TURNS` times from level, on
    :data:`AXIS_FRAMES` frames spread over ``grays`` (the median axis each time)."""
    if not grays:
        return 0.0
    pick = grays[:: max(1, len(grays) // AXIS_FRAMES)][:AXIS_FRAMES]
    x0, y0, x1, y1 = region.box
    angle = 0.0
    for _ in range(AXIS_TURNS):
        axes = []
        for g in pick:
            contour = fitter.contour(g, *corners_at(x0, y0, x1, y1, angle))
            d = contour[8] - contour[0]
            axes.append(math.degrees(math.atan2(d[1], d[0])))
        angle = float(np.clip(np.median(axes), -80.0, 80.0))
    return 0.0 if abs(angle) < LEVEL_DEG else round(angle, 1)


def dips(ratio: np.ndarray, below: float, gap: int = 0) -> list[tuple[int, int]]:
    """The spans (first, last index) where ``ratio`` stays below ``below``; spans with fewer than
    ``gap`` indices between them joined."""
    low = np.concatenate([[False], np.asarray(ratio) < below, [False]])
    edges = np.flatnonzero(np.diff(low.astype(np.int8)))
    spans: list[tuple[int, int]] = []
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        if spans and a - spans[-1][1] <= gap:
            spans[-1] = (spans[-1][0], int(b) - 1)
        else:
            spans.append((int(a), int(b) - 1))
    return spans


def trace_quality(trace: np.ndarray) -> dict[str, float]:
    """An openness trace on the survey's frames: ``open_level`` (its median), ``noise`` (the
    frame-to-frame robust sigma over the open level), ``spread`` (the robust sigma of the whole
    trace over the open level: its wander), ``dips`` (the closures it shows: spans below :data:`DIP`
    of the open level, :data:`DIP_SPREADS` spreads deep or more) and ``separation`` (their median
    depth in spreads)."""
    x = np.asarray(trace, np.float64)
    level = float(np.nanmedian(x)) if x.size else math.nan
    if x.size < 10 or not level > 0:
        return {
            "open_level": level,
            "noise": math.inf,
            "spread": math.inf,
            "dips": 0,
            "separation": 0.0,
        }
    r = np.nan_to_num(x / level, nan=1.0)
    noise = 1.4826 * float(np.median(np.abs(np.diff(r)))) / math.sqrt(2.0)
    spread = max(1.4826 * float(np.median(np.abs(r - 1.0))), 1e-6)
    depths = [(1.0 - float(r[a : b + 1].min())) / spread for a, b in dips(r, DIP, DIP_GAP)]
    depths = [d for d in depths if d >= DIP_SPREADS]
    return {
        "open_level": level,
        "noise": noise,
        "spread": spread,
        "dips": len(depths),
        "separation": float(np.median(depths)) if depths else 0.0,
    }


@dataclass(frozen=True)
class MeasureChoice:
    """The measure of a run with an eye region, and why (``summary.json``'s ``eye_measure``)."""

    #: area or contour
    model: str
    #: named (``--landmarks``) or chosen (from the recording's first seconds)
    how: str
    #: one line: which measure and why
    why: str
    #: contour: the eye's corner axis, degrees clockwise from level (None: area)
    eye_angle: float | None = None
    #: given (``--eye-angle``), found (on the first frames) or None
    angle_how: str | None = None
    #: the survey's :func:`trace_quality` of each measure (a named measure: its own)
    scores: dict[str, dict[str, float]] | None = None
    #: a warning when the measure's trace looks unlike an eye's, with what to try
    warning: str | None = None


def choose_measure(
    grays: list[np.ndarray],
    seconds: float,
    region: EyeRegion,
    *,
    named: str | None,
    eye_angle: float | None,
    options: dict[str, dict[str, Any]] | None = None,
    model_path: str | Path | None = None,
) -> MeasureChoice:
    """The measure of a run with the eye region ``region`` from ``grays``, frames of the recording's
    first ``seconds``: ``named`` (``--landmarks``) if given, else the one of the region measures of
    the registry (:func:`eyeblink.landmarks.region_models`: ``area`` and ``contour``), each built
    with its ``options`` (the settings its entry declares), whose openness separates closed from
    open frames best (:func:`trace_quality`): the one that shows closures (dips far below its open
    level's spread) when the others show none, the one whose closures lie deeper in spreads when
    several show some, the steadier open level when none does (no blink in the first seconds).
    ``contour`` is measured along the eye's axis (``eye_angle``, else :func:`find_eye_axis`)."""
    from eyeblink.landmarks import create_eye_model, region_models

    fitters: dict[str, Any] = {}
    angle, angle_how = eye_angle, ("given" if eye_angle is not None else None)
    tilt = ""
    scores: dict[str, dict[str, float]] = {}
    try:
        for name in [named] if named is not None else region_models():
            # a region measure's class (the registry's region entries) is a RegionModel
            path = model_path if name == named else None
            fitters[name] = fitter = cast(
                RegionModel,
                create_eye_model(name, model_path=path, **(options or {}).get(name, {})),
            )
            # the crop along the eye's axis: given, or found once here
            if isinstance(fitter, ContourFitter):
                if eye_angle is None:
                    angle, angle_how = find_eye_axis(fitter, grays, region), "found"
                fitter.eye_angle = float(angle)  # type: ignore[arg-type]
                tilt = f", the eye's axis {angle:g} degrees from level ({angle_how})"
        for name, fitter in fitters.items():
            scores[name] = trace_quality(np.array([fitter.fit(g, region).ear_left for g in grays]))
        if named is not None:
            model = named
            why = f"{named}: named with --landmarks{tilt if named == 'contour' else ''}"
        else:
            seeing = [m for m in scores if scores[m]["dips"]]
            if not seeing:
                model = min(scores, key=lambda m: scores[m]["spread"])
                reason = "no closure seen; its open level is the steadier"
            elif len(seeing) < len(scores):
                model = max(seeing, key=lambda m: scores[m]["separation"])
                reason = "it sees closures, the other does not"
            else:
                model = max(scores, key=lambda m: scores[m]["separation"])
                reason = "its closures stand out farther from its open level"
            other = _runner_up(scores, model)
            # a live survey: a second or less
            span = f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"
            why = (
                f"{model}: chosen from the first {span} s ({reason}: closures "
                f"{scores[model]['dips']:.0f} against {other}'s {scores[other]['dips']:.0f}, depth "
                f"{scores[model]['separation']:.1f} against {scores[other]['separation']:.1f} "
                "times the open "
                f"level's spread){tilt if model == 'contour' else ''}"
            )
    finally:
        for fitter in fitters.values():
            fitter.close()
    q = scores[model]
    warning = None
    if not q["noise"] < NOISY_TRACE:
        other = _runner_up({m: {"dips": 0, "separation": 0.0} for m in region_models()}, model)
        warning = (
            f"the {model} measure's openness in the eye region looks unlike an eye's (no steady "
            "open level: "
            f"its frame-to-frame noise is {q['noise']:.2f} of it, as large as a blink); check the "
            "region with "
            "eyeblink region, draw it around the whole eye with a little margin, or try "
            f"--landmarks {other}"
        )
    return MeasureChoice(
        model,
        "named" if named is not None else "chosen",
        why,
        angle if model == "contour" else None,
        angle_how if model == "contour" else None,
        scores,
        warning,
    )


def _runner_up(scores: dict[str, dict[str, float]], model: str) -> str:
    """The measure next to ``model`` (with two measures: the other one): the most closures, then
    the deepest."""
    rest = [m for m in scores if m != model]
    return max(rest, key=lambda m: (scores[m]["dips"], scores[m]["separation"]))


__all__ = [
    "DEFAULT_REGION_MODEL",
    "AreaFitter",
    "ContourFitter",
    "EyeRegion",
    "MeasureChoice",
    "RegionModel",
    "choose_measure",
    "dips",
    "find_eye_axis",
    "trace_quality",
]
