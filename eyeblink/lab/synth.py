"""Synthetic high-speed recordings with blinks at known times.

The demo (``eyeblink demo``) and the test-suite need a recording that looks like
the real thing -- one face, 640x480 grayscale at 500 FPS, a subject ~1 m from
the camera -- and whose blinks are known to the frame. This module animates a
real face photo (``skimage.data.astronaut()``) rather than drawing a cartoon,
because the point is to exercise the *real* detector and the *real* eye
models (the face mesh, dlib's predictors).

How the eyelid is synthesised
-----------------------------
Once per geometry (face size, frame size) the photo is converted to gray,
scaled so that the face (its width at eye level, FACE_WIDTH_POINTS) is ``face_scale`` pixels
wide and centred in the frame, and BlazeFace and the face mesh (Apache-2.0, shipped
in ``weights/``: no dlib model is needed to render) are fitted on that canvas.
From each eye's six points the upper lid ``U(x)`` and lower lid ``L(x)``
are modelled as cubics through the two corners (pushed outwards by 12 % of the
eye width so no sclera is left at the canthi when closed) and the two upper /
lower points. For a closure ``c`` the upper lid margin moves to
``Uc(x) = U(x) + c * (L(x) - U(x))``: the lid margin band (lashes, ~7 % of
the eye width thick) is translated rigidly, the skin band above it (up to the
brow, ~0.45 x eye width) is stretched vertically to follow -- as the real upper
lid unfolds from under the crease -- and the covered part of the eye opening
is replaced by that lid skin. The new lid edge is anti-aliased (fractional row
coverage) and a darker lash line is drawn along it. The lower lid stays put,
as it does in real blinks. Everything is a ``cv2.remap`` of a ~60x40 ROI per
eye with maps computed from precomputed column arrays, so a frame costs about
a millisecond.

Head motion (a smooth, seeded sum of slow sinusoids: translation of a few px
and roll of a couple of degrees about the face centre), 100 Hz mains flicker
(a gain of ``1 + a cos(2 pi f t)``) and Gaussian sensor noise are applied on top.

Conventions
-----------
* ``left`` / ``right`` are the *subject's* eyes, as in the output columns
  ``ear_left`` / ``ear_right``: ``right`` = dlib points 36-41 (the eye on the
  image's left), ``left`` = dlib points 42-47 (the image's right).
* Frame ``i`` is the instant ``t = i / fps``; its PTS is ``i`` in a time base of
  ``1 / fps``. Dropped frames are simply not written, so the decoded PTS show
  gaps exactly as a camera that drops frames does.
* A blink counts as a blink (``PlantedBlink.counts``) when its amplitude is at
  least :data:`FULL_BLINK_AMPLITUDE` (0.8). Partial blinks (e.g. amplitude 0.5,
  an "incomplete blink" in the blink literature) are planted on purpose as
  *don't care* events: a detector may or may not report them; a detection
  overlapping one is neither a hit nor a false positive. The demo asserts that
  every counted blink is detected.
"""

from __future__ import annotations

import functools
import json
import math
import numbers
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from eyeblink.errors import ConfigError, NoFaceError, OutputError
from eyeblink.landmarks.eyes import eye_aspect_ratio
from eyeblink.landmarks.mesh import MESH_EYE_POINTS

Eye = Literal["left", "right"]
EyesSpec = Literal["both", "left", "right"]
Codec = Literal["mjpeg", "ffv1", "rawvideo"]

#: Blinks at least this deep count as blinks; shallower ones are "don't care".
FULL_BLINK_AMPLITUDE = 0.8
#: Face-mesh indices of the six eye points per eye in dlib's order (see eyeblink.landmarks.mesh).
RIGHT_EYE_POINTS: tuple[int, ...] = MESH_EYE_POINTS[:6]
LEFT_EYE_POINTS: tuple[int, ...] = MESH_EYE_POINTS[6:]
#: Face-mesh points whose horizontal distance is the face width ``face_scale`` sets (the face oval at
#: eye level; on the astronaut 93.3 px, as dlib's jaw points 0-16 at 93.0 px).
FACE_WIDTH_POINTS = (127, 356)
#: Container suffixes accepted by :func:`write_recording` (``.avi`` is the usual one for mjpeg/rawvideo,
#: ``.mkv`` for ffv1).
VIDEO_SUFFIXES: tuple[str, ...] = (".avi", ".mkv")
_CODECS: tuple[str, ...] = ("mjpeg", "ffv1", "rawvideo")
_EYES: tuple[str, ...] = ("both", "left", "right")

# Eyelid model constants (fractions of the eye width, corner to corner).
_CORNER_EXTENSION = 0.12  # corners pushed outwards so no sclera remains at the canthi when closed
_SKIN_BAND = 0.45  # height of the upper-lid skin stretched over the eye
_MARGIN_BAND = 0.07  # lid margin + lashes, moved rigidly (not stretched)
_LASH_DARKENING = 0.35  # darkest lash-line factor at full strength
_LASH_SIGMA_FRAC = 0.03  # lash-line Gaussian half-width
_ROI_PAD = 6  # px around the lid model in the ROI

_NOISE_BANK = 4  # noise fields precomputed per renderer
_NOISE_PAD = 32  # random offset range into a noise field


def _check_finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


@dataclass(frozen=True, slots=True)
class BlinkSpec:
    """One planted blink: closing, hold (closed), opening.

    Durations are milliseconds. The closure rises from 0 to ``amplitude`` over
    ``closing_ms`` and falls back over ``opening_ms`` with raised-cosine ramps
    (zero velocity at both ends). Real spontaneous blinks close faster than they
    open (~60-80 ms vs ~120-200 ms); this is what :func:`default_blinks` plants,
    but it is not enforced because slow-closing conditioned responses are real.
    ``closed_ms`` may be 0 (no hold).
    """

    onset_s: float
    closing_ms: float = 70.0
    closed_ms: float = 30.0
    opening_ms: float = 140.0
    amplitude: float = 1.0
    eyes: EyesSpec = "both"

    def __post_init__(self) -> None:
        _check_finite("BlinkSpec.onset_s", self.onset_s)
        if self.onset_s < 0:
            raise ConfigError(f"BlinkSpec.onset_s must be >= 0 s, got {self.onset_s}")
        for name in ("closing_ms", "opening_ms"):
            value = getattr(self, name)
            _check_finite(f"BlinkSpec.{name}", value)
            if value <= 0:
                raise ConfigError(f"BlinkSpec.{name} must be > 0 ms, got {value}")
        _check_finite("BlinkSpec.closed_ms", self.closed_ms)
        if self.closed_ms < 0:
            raise ConfigError(f"BlinkSpec.closed_ms must be >= 0 ms, got {self.closed_ms}")
        _check_finite("BlinkSpec.amplitude", self.amplitude)
        if not 0.0 < self.amplitude <= 1.0:
            raise ConfigError(f"BlinkSpec.amplitude must be in (0, 1] (1 = full closure), got {self.amplitude}")
        if self.eyes not in _EYES:
            raise ConfigError(f"BlinkSpec.eyes must be one of {_EYES}, got {self.eyes!r}")

    @property
    def duration_s(self) -> float:
        """Closing + closed + opening, in seconds."""
        return (self.closing_ms + self.closed_ms + self.opening_ms) / 1000.0

    @property
    def end_s(self) -> float:
        """Time at which the lid is fully open again."""
        return self.onset_s + self.duration_s

    @property
    def peak_s(self) -> float:
        """Middle of the closed (maximum closure) plateau."""
        return self.onset_s + (self.closing_ms + 0.5 * self.closed_ms) / 1000.0

    @property
    def counts(self) -> bool:
        """Whether this blink is deep enough to count (see :data:`FULL_BLINK_AMPLITUDE`)."""
        return self.amplitude >= FULL_BLINK_AMPLITUDE

    def affects(self, eye: Eye) -> bool:
        """Whether this blink closes ``eye``."""
        return self.eyes in ("both", eye)

    def closure(self, t: np.ndarray) -> np.ndarray:
        """Closure fraction of an affected eye at times ``t`` (seconds), 0 outside the blink."""
        t = np.asarray(t, dtype=np.float64)
        u = (t - self.onset_s) * 1000.0  # ms since onset
        t_closed = self.closing_ms
        t_open = self.closing_ms + self.closed_ms
        t_end = t_open + self.opening_ms
        rise = 0.5 - 0.5 * np.cos(np.pi * np.clip(u / self.closing_ms, 0.0, 1.0))
        fall = 0.5 + 0.5 * np.cos(np.pi * np.clip((u - t_open) / self.opening_ms, 0.0, 1.0))
        out = np.where(u < t_closed, rise, np.where(u <= t_open, 1.0, fall))
        out = np.where((u <= 0.0) | (u >= t_end), 0.0, out)
        return cast(np.ndarray, self.amplitude * out)


def default_blinks(duration_s: float = 10.0) -> tuple[BlinkSpec, ...]:
    """A realistic demo schedule: 7 blinks per 10 s, one of them partial.

    Blinks last 170-300 ms, close faster than they open, and are >= 0.8 s apart
    (end to next onset). The blink at 4.4 s is partial (amplitude 0.5): it does
    not *count* (see :data:`FULL_BLINK_AMPLITUDE`) and is there to check that a
    detector neither needs it nor breaks on it. For ``duration_s`` other than
    10 s the 10-s pattern is tiled and cut: only blinks that end at least 0.1 s
    before ``duration_s`` are kept (so a recording shorter than ~0.8 s has none).
    """
    _check_finite("duration_s", duration_s)
    if duration_s <= 0:
        raise ConfigError(f"duration_s must be > 0 s, got {duration_s}")
    pattern = (
        BlinkSpec(0.70, 60.0, 30.0, 120.0),
        BlinkSpec(2.00, 70.0, 40.0, 150.0),
        BlinkSpec(3.10, 50.0, 20.0, 100.0),
        BlinkSpec(4.40, 60.0, 30.0, 130.0, amplitude=0.5),
        BlinkSpec(5.60, 80.0, 50.0, 170.0),
        BlinkSpec(7.00, 55.0, 25.0, 110.0),
        BlinkSpec(8.30, 65.0, 35.0, 140.0),
    )
    out: list[BlinkSpec] = []
    period = 10.0
    k = 0
    while k * period < duration_s:
        for b in pattern:
            shifted = BlinkSpec(b.onset_s + k * period, b.closing_ms, b.closed_ms, b.opening_ms, b.amplitude, b.eyes)
            if shifted.end_s <= duration_s - 0.1:
                out.append(shifted)
        k += 1
    return tuple(out)


def closure_at(t: float | np.ndarray, blinks: Sequence[BlinkSpec]) -> tuple[Any, Any]:
    """Closure fraction ``(left, right)`` per eye at time(s) ``t``.

    0 = open, 1 = fully closed. Overlapping blinks combine by maximum. Scalars
    in, floats out; arrays in, arrays (float64, same shape) out.
    """
    arr = np.asarray(t, dtype=np.float64)
    left = np.zeros_like(arr)
    right = np.zeros_like(arr)
    for b in blinks:
        c = b.closure(arr)
        if b.affects("left"):
            left = np.maximum(left, c)
        if b.affects("right"):
            right = np.maximum(right, c)
    if arr.ndim == 0:
        return float(left), float(right)
    return left, right


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """Everything that defines a synthetic recording (all of it is seeded/deterministic).

    ``face_scale`` is the face width (jaw, landmarks 0-16) in px: 220 px in a
    640x480 frame is a subject ~1 m from a high-speed camera with a short tele
    lens. Head motion is a smooth wander of at most ``head_shift_px`` px and
    ``head_roll_deg`` degrees with components up to ``head_motion_hz``.
    ``flicker_amplitude`` is the relative amplitude of mains flicker at
    ``flicker_hz`` (100 Hz for 50 Hz mains). ``noise_sigma`` is the sensor noise
    in gray levels. ``mjpeg_qscale`` is FFmpeg's MJPEG quantiser (1 = best,
    31 = worst; 2-3 is "high quality"). ``dropped_frames`` are frame indices that
    are rendered but not written. ``blinks`` defaults to none; use
    :meth:`demo` for the demo schedule.
    """

    duration_s: float = 10.0
    blinks: tuple[BlinkSpec, ...] = ()
    width: int = 640
    height: int = 480
    fps: float = 500.0
    seed: int = 0
    face_scale: float = 220.0
    head_shift_px: float = 3.0
    head_roll_deg: float = 2.0
    head_motion_hz: float = 1.0
    noise_sigma: float = 2.0
    flicker_amplitude: float = 0.03
    flicker_hz: float = 100.0
    codec: Codec = "mjpeg"
    mjpeg_qscale: int = 2
    dropped_frames: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in (
            "duration_s",
            "fps",
            "face_scale",
            "head_shift_px",
            "head_roll_deg",
            "head_motion_hz",
            "noise_sigma",
            "flicker_amplitude",
            "flicker_hz",
        ):
            _check_finite(f"SynthConfig.{name}", getattr(self, name))
        if self.duration_s <= 0:
            raise ConfigError(f"SynthConfig.duration_s must be > 0 s, got {self.duration_s}")
        if self.fps <= 0:
            raise ConfigError(f"SynthConfig.fps must be > 0, got {self.fps}")
        for name in ("width", "height", "seed", "mjpeg_qscale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"SynthConfig.{name} must be an int, got {value!r}")
        if self.width < 64 or self.height < 64 or self.width % 2 or self.height % 2:
            raise ConfigError(
                f"SynthConfig width/height must be even and >= 64 (4:2:0 chroma), got {self.width}x{self.height}"
            )
        if self.seed < 0:
            raise ConfigError(f"SynthConfig.seed must be >= 0, got {self.seed}")
        max_face = 0.9 * min(self.width, self.height)
        if not 80.0 <= self.face_scale <= max_face:
            raise ConfigError(
                f"SynthConfig.face_scale must be in [80, {max_face:g}] px (face width; landmark models need >= 80 px "
                f"and the face must fit the {self.width}x{self.height} frame), got {self.face_scale}"
            )
        for name in ("head_shift_px", "head_roll_deg", "noise_sigma", "flicker_amplitude"):
            if getattr(self, name) < 0:
                raise ConfigError(f"SynthConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.head_roll_deg > 25.0:
            raise ConfigError(f"SynthConfig.head_roll_deg must be <= 25 degrees, got {self.head_roll_deg}")
        if self.head_shift_px > 0.1 * min(self.width, self.height):
            raise ConfigError(
                f"SynthConfig.head_shift_px must be <= 10% of the frame's short side, got {self.head_shift_px}"
            )
        if self.head_motion_hz <= 0 or self.flicker_hz <= 0:
            raise ConfigError(
                f"SynthConfig.head_motion_hz and flicker_hz must be > 0 Hz, got "
                f"{self.head_motion_hz} and {self.flicker_hz}"
            )
        if self.flicker_amplitude >= 0.5:
            raise ConfigError(f"SynthConfig.flicker_amplitude must be < 0.5, got {self.flicker_amplitude}")
        if self.codec not in _CODECS:
            raise ConfigError(f"SynthConfig.codec must be one of {_CODECS}, got {self.codec!r}")
        if not 1 <= self.mjpeg_qscale <= 31:
            raise ConfigError(f"SynthConfig.mjpeg_qscale must be in [1, 31], got {self.mjpeg_qscale}")
        if not isinstance(self.blinks, tuple) or not all(isinstance(b, BlinkSpec) for b in self.blinks):
            raise ConfigError(f"SynthConfig.blinks must be a tuple of BlinkSpec, got {self.blinks!r}")
        for prev, nxt in zip(self.blinks, self.blinks[1:], strict=False):
            if nxt.onset_s < prev.end_s:
                raise ConfigError(
                    f"SynthConfig.blinks must be sorted by onset and must not overlap: blink at "
                    f"{nxt.onset_s} s starts before the previous one ends ({prev.end_s} s)"
                )
        for b in self.blinks:
            if b.end_s > self.duration_s:
                raise ConfigError(
                    f"blink at {b.onset_s} s ends at {b.end_s:.3f} s, after duration_s={self.duration_s} s"
                )
        n = self.n_frames
        if not isinstance(self.dropped_frames, tuple):
            raise ConfigError(f"SynthConfig.dropped_frames must be a tuple of ints, got {self.dropped_frames!r}")
        for i in self.dropped_frames:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                raise ConfigError(f"SynthConfig.dropped_frames entries must be ints in [0, {n}), got {i!r}")
        if len(set(self.dropped_frames)) != len(self.dropped_frames):
            raise ConfigError(f"SynthConfig.dropped_frames has duplicates: {self.dropped_frames}")
        if len(self.dropped_frames) >= n:
            raise ConfigError(f"SynthConfig.dropped_frames drops all {n} frames")

    @classmethod
    def demo(cls, duration_s: float = 10.0, **kwargs: Any) -> SynthConfig:
        """A config with the :func:`default_blinks` schedule for ``duration_s``."""
        return cls(duration_s=duration_s, blinks=default_blinks(duration_s), **kwargs)

    @property
    def n_frames(self) -> int:
        """Frames in the recording before drops: ``round(duration_s * fps)``."""
        return max(1, round(self.duration_s * self.fps))

    @property
    def time_base(self) -> Fraction:
        """The PTS time base, ``1 / fps`` (fps as an exact fraction)."""
        return 1 / self.frame_rate

    @property
    def frame_rate(self) -> Fraction:
        """``fps`` as a fraction (e.g. 500, or 30000/1001)."""
        return Fraction(self.fps).limit_denominator(1001000)

    @property
    def suffix(self) -> str:
        """The usual container suffix for ``codec``: ``.mkv`` for ffv1, ``.avi`` otherwise."""
        return ".mkv" if self.codec == "ffv1" else ".avi"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (blinks as dicts)."""
        d = asdict(self)
        d["blinks"] = [asdict(b) for b in self.blinks]
        d["dropped_frames"] = list(self.dropped_frames)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SynthConfig:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["blinks"] = tuple(BlinkSpec(**b) for b in d.get("blinks", ()))
        d["dropped_frames"] = tuple(int(i) for i in d.get("dropped_frames", ()))
        return cls(**d)


# --------------------------------------------------------------------------- geometry


def _mesh_points(gray: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """The face mesh's 468 points (frame pixels) and BlazeFace's box of the one face in ``gray``."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.landmarks.mesh import MeshFitter

    with FaceDetector.from_detector(create_detector("litert")) as detector:
        faces = detector.detect(gray)
    if len(faces) != 1:
        raise NoFaceError(f"expected exactly one face in skimage.data.astronaut(), BlazeFace found {len(faces)}")
    with MeshFitter(refine=False) as mesh:
        points = mesh.mesh(gray, mesh.face_roi(faces[0]))
    box = cast(tuple[int, int, int, int], tuple(int(np.rint(v)) for v in faces[0].box))
    return points, box


@functools.lru_cache(maxsize=1)
def _source_face() -> tuple[np.ndarray, np.ndarray, tuple[int, int, int, int]]:
    """The astronaut photo in gray, its face mesh (468 points) and BlazeFace's face box (x0, y0, x1, y1)."""
    import cv2
    from skimage import data

    gray = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    gray.setflags(write=False)
    points, box = _mesh_points(gray)
    return gray, points, box


@dataclass(frozen=True, slots=True, eq=False)
class _EyeModel:
    """Lid geometry of one eye on the canonical canvas, per ROI column."""

    points: np.ndarray  # (6, 2) dlib order, canvas coordinates
    x0: int
    y0: int
    x1: int  # inclusive
    y1: int  # inclusive
    upper: np.ndarray  # U(x) per ROI column (float32, (1, ncols))
    opening: np.ndarray  # L(x) - U(x) >= 0
    skin_top: np.ndarray  # B(x) = U(x) - skin band
    margin: float  # lid-margin band moved rigidly, px
    lash_sigma: float
    xs: np.ndarray  # ROI column x coordinates (float32, (nrows, ncols))
    ys: np.ndarray  # ROI row y coordinates (float32, (nrows, 1))
    upper_poly: np.ndarray
    lower_poly: np.ndarray

    @classmethod
    def build(cls, pts: np.ndarray) -> _EyeModel:
        p = np.asarray(pts, dtype=np.float64)
        lo, hi = (0, 3) if p[0, 0] <= p[3, 0] else (3, 0)
        # Upper points in left-to-right order, lower points likewise.
        upper_pts = p[[1, 2]] if lo == 0 else p[[2, 1]]
        lower_pts = p[[5, 4]] if lo == 0 else p[[4, 5]]
        c_left, c_right = p[lo], p[hi]
        width = float(np.hypot(*(c_right - c_left)))
        c_left, c_right = (
            c_left + (c_left - c_right) * _CORNER_EXTENSION,
            c_right + (c_right - c_left) * _CORNER_EXTENSION,
        )
        xu = np.array([c_left[0], upper_pts[0, 0], upper_pts[1, 0], c_right[0]])
        yu = np.array([c_left[1], upper_pts[0, 1], upper_pts[1, 1], c_right[1]])
        xl = np.array([c_left[0], lower_pts[0, 0], lower_pts[1, 0], c_right[0]])
        yl = np.array([c_left[1], lower_pts[0, 1], lower_pts[1, 1], c_right[1]])
        if np.any(np.diff(xu) <= 0) or np.any(np.diff(xl) <= 0):
            raise NoFaceError(f"eye landmarks are not ordered along the eye, cannot model the lid: {p.tolist()}")
        upper_poly = np.polyfit(xu, yu, 3)
        lower_poly = np.polyfit(xl, yl, 3)
        x0 = math.floor(c_left[0]) - _ROI_PAD
        x1 = math.ceil(c_right[0]) + _ROI_PAD
        cols = np.arange(x0, x1 + 1, dtype=np.float64)
        inside = (cols > c_left[0]) & (cols < c_right[0])
        corner_line = np.interp(cols, [c_left[0], c_right[0]], [c_left[1], c_right[1]])
        upper = np.where(inside, np.polyval(upper_poly, cols), corner_line)
        opening = np.where(inside, np.maximum(np.polyval(lower_poly, cols) - upper, 0.0), 0.0)
        skin_top = upper - _SKIN_BAND * width
        y0 = math.floor(skin_top.min()) - 2
        y1 = math.ceil((upper + opening).max()) + _ROI_PAD
        rows = np.arange(y0, y1 + 1, dtype=np.float32)[:, None]
        xs = np.broadcast_to(cols.astype(np.float32)[None, :], (rows.shape[0], cols.size)).copy()
        return cls(
            points=p,
            x0=x0,
            y0=y0,
            x1=x1,
            y1=y1,
            upper=upper.astype(np.float32)[None, :],
            opening=opening.astype(np.float32)[None, :],
            skin_top=skin_top.astype(np.float32)[None, :],
            margin=_MARGIN_BAND * width,
            lash_sigma=max(0.8, _LASH_SIGMA_FRAC * width),
            xs=xs,
            ys=rows,
            upper_poly=upper_poly,
            lower_poly=lower_poly,
        )

    def landmarks(self, closure: float) -> np.ndarray:
        """The six points (dlib order) with the upper ones moved down by the closure."""
        out = self.points.copy()
        for i in (1, 2):
            x = out[i, 0]
            gap = max(0.0, float(np.polyval(self.lower_poly, x) - np.polyval(self.upper_poly, x)))
            out[i, 1] += closure * gap
        return out

    def apply(self, canvas: np.ndarray, base: np.ndarray, closure: float) -> None:
        """Render the lid closed by ``closure`` into ``canvas`` (ROI only), reading pixels from ``base``."""
        import cv2

        if closure <= 0.0:
            return
        c = np.float32(min(closure, 1.0))
        ys, upper, skin_top = self.ys, self.upper, self.skin_top
        shift = c * self.opening
        edge = upper + shift  # new lid margin Uc(x)
        margin_top = edge - self.margin
        # Skin band [B, Uc - m] samples [B, U - m]; margin band [Uc - m, ...] is translated by `shift`.
        scale = (upper - self.margin - skin_top) / np.maximum(margin_top - skin_top, np.float32(1e-3))
        stretched = skin_top + (ys - skin_top) * scale
        src_y = np.where(ys < skin_top, ys, np.where(ys < margin_top, stretched, ys - shift))
        roi_base = base[self.y0 : self.y1 + 1, self.x0 : self.x1 + 1]
        lid = cv2.remap(
            base, self.xs, src_y.astype(np.float32), cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        ).astype(np.float32)
        # Lash line: a darker Gaussian ridge along the new edge, fading in over the first 30% of closure.
        d = (ys - edge + 0.5 * self.lash_sigma) / self.lash_sigma
        lash = (_LASH_DARKENING * min(1.0, float(c) / 0.3)) * np.exp(-0.5 * d * d) * (self.opening > 0)
        lid *= 1.0 - lash
        # Fractional coverage of each pixel row by the lid (anti-aliased edge).
        alpha = np.clip(edge - ys + 0.5, 0.0, 1.0)
        out = alpha * lid + (1.0 - alpha) * roi_base.astype(np.float32)
        canvas[self.y0 : self.y1 + 1, self.x0 : self.x1 + 1] = np.clip(out + 0.5, 0, 255).astype(np.uint8)


@dataclass(frozen=True, slots=True, eq=False)
class _Geometry:
    """The face canvas (no motion, no lids) and both eye models for one frame size/face size."""

    canvas: np.ndarray
    landmarks: np.ndarray  # (468, 2) face mesh on the canvas
    box: tuple[int, int, int, int]  # BlazeFace's face box on the canvas
    center: tuple[float, float]  # rotation centre for head motion (landmark centroid)
    left: _EyeModel
    right: _EyeModel


@functools.lru_cache(maxsize=4)
def _geometry(width: int, height: int, face_scale: float) -> _Geometry:
    import cv2

    gray, pts, box = _source_face()
    scale = face_scale / float(pts[FACE_WIDTH_POINTS[1], 0] - pts[FACE_WIDTH_POINTS[0], 0])
    cx, cy = pts.mean(axis=0)
    affine = np.array([[scale, 0.0, width / 2 - scale * cx], [0.0, scale, height / 2 - scale * cy]])
    canvas = cv2.warpAffine(gray, affine, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT101)
    corners = np.array([[box[0], box[1]], [box[2], box[3]]], dtype=np.float64) @ affine[:, :2].T + affine[:, 2]
    cbox = cast(tuple[int, int, int, int], tuple(int(np.rint(v)) for v in corners.ravel()))
    landmarks, _ = _mesh_points(canvas)
    canvas.setflags(write=False)
    return _Geometry(
        canvas=canvas,
        landmarks=landmarks,
        box=cbox,
        center=(width / 2, height / 2),
        left=_EyeModel.build(landmarks[list(LEFT_EYE_POINTS)]),
        right=_EyeModel.build(landmarks[list(RIGHT_EYE_POINTS)]),
    )


def head_pose_at(t: float, config: SynthConfig) -> tuple[float, float, float]:
    """Head motion at ``t``: ``(dx_px, dy_px, roll_deg)``, smooth and seeded by ``config.seed``.

    Each component is a weighted sum of three sinusoids with frequencies in
    ``[0.05, head_motion_hz]`` Hz, normalised so that ``|dx|, |dy| <=
    head_shift_px`` and ``|roll| <= head_roll_deg``.
    """
    params = _motion_params(config.seed, config.head_motion_hz)
    values = []
    for (freqs, phases, weights), amp in zip(
        params, (config.head_shift_px, config.head_shift_px, config.head_roll_deg), strict=True
    ):
        values.append(amp * float(np.sum(weights * np.sin(2 * np.pi * freqs * t + phases))))
    return values[0], values[1], values[2]


@functools.lru_cache(maxsize=16)
def _motion_params(seed: int, max_hz: float) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    rng = np.random.default_rng([seed, 0x4E4144])
    out = []
    for _ in range(3):
        freqs = rng.uniform(0.05, max(max_hz, 0.05), size=3)
        phases = rng.uniform(0.0, 2 * np.pi, size=3)
        weights = rng.uniform(0.3, 1.0, size=3)
        out.append((freqs, phases, weights / weights.sum()))
    return tuple(out)


def _pose_matrix(t: float, config: SynthConfig, center: tuple[float, float]) -> np.ndarray:
    import cv2

    dx, dy, roll = head_pose_at(t, config)
    m = cv2.getRotationMatrix2D(center, roll, 1.0)
    m[:, 2] += np.array([dx, dy])
    return m


def eye_landmarks_at(closure: float, eye: Eye, config: SynthConfig | None = None, t: float | None = None) -> np.ndarray:
    """The six eye points (dlib order p1..p6, ``float64 (6, 2)``) of the synthetic face at ``closure``.

    Without ``t`` the points are on the motionless canvas; with ``t`` the head
    pose at ``t`` is applied (frame coordinates). EAR is invariant to the
    similarity transform of the head motion, so :func:`expected_ear` ignores it.
    The open points are the face mesh's own fit on the canvas, so the open EAR matches
    what the mesh reports on an open frame; the closed value is geometric (~0), while
    no landmark model goes that low on a closed eye (dlib ~0.1-0.15).
    """
    cfg = config or SynthConfig()
    if eye not in ("left", "right"):
        raise ConfigError(f"eye must be 'left' or 'right', got {eye!r}")
    if not 0.0 <= closure <= 1.0:
        raise ConfigError(f"closure must be in [0, 1], got {closure}")
    geo = _geometry(cfg.width, cfg.height, cfg.face_scale)
    pts = (geo.left if eye == "left" else geo.right).landmarks(closure)
    if t is None:
        return pts
    m = _pose_matrix(t, cfg, geo.center)
    return cast(np.ndarray, pts @ m[:, :2].T + m[:, 2])


def expected_ear(closure: float, eye: Eye, config: SynthConfig | None = None) -> float:
    """Geometric EAR of the synthetic eye at ``closure`` (see :func:`eye_landmarks_at`)."""
    return eye_aspect_ratio(eye_landmarks_at(closure, eye, config))


def face_box(config: SynthConfig | None = None) -> tuple[int, int, int, int]:
    """BlazeFace's face box ``(x0, y0, x1, y1)`` on the motionless frame (rounded to pixels)."""
    cfg = config or SynthConfig()
    return _geometry(cfg.width, cfg.height, cfg.face_scale).box


# --------------------------------------------------------------------------- rendering


class FaceRenderer:
    """Renders frames of one :class:`SynthConfig`; construct once, call :meth:`render` per frame.

    Construction fits the face mesh once (cached per frame/face size) and precomputes a
    small bank of noise fields; per frame, noise is a randomly offset window of
    one of them, which is i.i.d. within a frame and uncorrelated between frames
    for practical purposes while costing no random number generation per pixel.
    """

    def __init__(self, config: SynthConfig) -> None:
        self.config = config
        self._geo = _geometry(config.width, config.height, config.face_scale)
        rng = np.random.default_rng([config.seed, 0x4E4F49])
        h, w = config.height + _NOISE_PAD, config.width + _NOISE_PAD
        self._noise = rng.standard_normal((_NOISE_BANK, h, w), dtype=np.float32) * config.noise_sigma + np.float32(
            0.5
        )  # +0.5 rounds on truncation
        self._work = np.empty((config.height, config.width), dtype=np.uint8)

    def render(self, t: float, closure_left: float, closure_right: float, rng: np.random.Generator) -> np.ndarray:
        """The frame at ``t`` with the given lid closures; ``rng`` draws the sensor noise."""
        import cv2

        cfg = self.config
        for name, c in (("closure_left", closure_left), ("closure_right", closure_right)):
            if not 0.0 <= c <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {c}")
        geo = self._geo
        work = self._work
        np.copyto(work, geo.canvas)
        geo.left.apply(work, geo.canvas, closure_left)
        geo.right.apply(work, geo.canvas, closure_right)
        m = _pose_matrix(t, cfg, geo.center)
        moved = cv2.warpAffine(
            work, m, (cfg.width, cfg.height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT101
        )
        gain = 1.0 + cfg.flicker_amplitude * math.cos(2.0 * math.pi * cfg.flicker_hz * t)
        k, oy, ox = (int(v) for v in rng.integers(0, (_NOISE_BANK, _NOISE_PAD, _NOISE_PAD)))
        noise = self._noise[k, oy : oy + cfg.height, ox : ox + cfg.width]
        out = cv2.scaleAdd(moved.astype(np.float32), gain, noise)
        return cast(np.ndarray, np.clip(out, 0.0, 255.0).astype(np.uint8))


@functools.lru_cache(maxsize=4)
def _renderer(config: SynthConfig) -> FaceRenderer:
    return FaceRenderer(config)


def render_frame(
    t: float,
    closure_left: float,
    closure_right: float,
    rng: np.random.Generator,
    config: SynthConfig | None = None,
) -> np.ndarray:
    """One ``(height, width) uint8`` frame at time ``t`` (see :class:`FaceRenderer`)."""
    return _renderer(config or SynthConfig()).render(t, closure_left, closure_right, rng)


# --------------------------------------------------------------------------- ground truth


@dataclass(frozen=True, slots=True)
class PlantedBlink:
    """A blink as planted, in seconds and in frame indices (= PTS) of the recording.

    ``onset_frame`` is the first frame at or after ``onset_s``, ``end_frame`` the
    last frame at or before ``end_s``, ``peak_frame`` the frame nearest the
    middle of the closed plateau. Frame indices refer to the undropped timeline.
    """

    onset_s: float
    end_s: float
    onset_frame: int
    end_frame: int
    peak_s: float
    peak_frame: int
    amplitude: float
    eyes: EyesSpec

    def __post_init__(self) -> None:
        if not self.onset_s < self.end_s:
            raise ValueError(f"PlantedBlink onset_s {self.onset_s} must be < end_s {self.end_s}")
        if not 0 <= self.onset_frame <= self.peak_frame <= self.end_frame:
            raise ValueError(
                f"PlantedBlink frames must satisfy 0 <= onset <= peak <= end, got "
                f"{self.onset_frame}, {self.peak_frame}, {self.end_frame}"
            )

    @property
    def counts(self) -> bool:
        """Deep enough to count as a blink (amplitude >= :data:`FULL_BLINK_AMPLITUDE`)."""
        return self.amplitude >= FULL_BLINK_AMPLITUDE

    @property
    def duration_ms(self) -> float:
        """Onset to fully open again, in milliseconds."""
        return (self.end_s - self.onset_s) * 1000.0

    @classmethod
    def from_spec(cls, spec: BlinkSpec, fps: float) -> PlantedBlink:
        """The planted blink of ``spec`` on a frame grid of ``fps``."""
        eps = 1e-9
        return cls(
            onset_s=spec.onset_s,
            end_s=spec.end_s,
            onset_frame=math.ceil(spec.onset_s * fps - eps),
            end_frame=math.floor(spec.end_s * fps + eps),
            peak_s=spec.peak_s,
            peak_frame=round(spec.peak_s * fps),
            amplitude=spec.amplitude,
            eyes=spec.eyes,
        )


def _frozen_array(a: Any, dtype: type) -> np.ndarray:
    arr: np.ndarray = np.array(a, dtype=dtype)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, eq=False)
class SyntheticTruth:
    """What was planted in a synthetic recording, per *written* frame.

    ``frame_index`` is each written frame's PTS (frame number on the undropped
    timeline), ``timestamps_s`` its presentation time, ``closure_left`` /
    ``closure_right`` the lid closure rendered (0 open .. 1 closed). Arrays are
    read-only. ``blinks`` are in onset order.
    """

    config: SynthConfig
    frame_index: np.ndarray
    timestamps_s: np.ndarray
    closure_left: np.ndarray
    closure_right: np.ndarray
    blinks: tuple[PlantedBlink, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "frame_index", _frozen_array(self.frame_index, np.int64))
        for name in ("timestamps_s", "closure_left", "closure_right"):
            object.__setattr__(self, name, _frozen_array(getattr(self, name), np.float64))
        n = self.frame_index.shape
        for name in ("frame_index", "timestamps_s", "closure_left", "closure_right"):
            arr = getattr(self, name)
            if arr.ndim != 1 or arr.shape != n:
                raise ValueError(f"SyntheticTruth.{name} must be 1-D of shape {n}, got {arr.shape}")

    @property
    def counted_blinks(self) -> tuple[PlantedBlink, ...]:
        """The blinks a detector must find (see :data:`FULL_BLINK_AMPLITUDE`)."""
        return tuple(b for b in self.blinks if b.counts)

    def to_json(self, indent: int | None = None) -> str:
        """Serialise (config, per-frame arrays rounded to 1e-6, blinks) to a JSON string."""
        return json.dumps(
            {
                "config": self.config.to_dict(),
                "frame_index": self.frame_index.tolist(),
                "timestamps_s": [round(v, 9) for v in self.timestamps_s.tolist()],
                "closure_left": [round(v, 6) for v in self.closure_left.tolist()],
                "closure_right": [round(v, 6) for v in self.closure_right.tolist()],
                "blinks": [asdict(b) for b in self.blinks],
            },
            indent=indent,
        )

    @classmethod
    def from_json(cls, text: str) -> SyntheticTruth:
        """Inverse of :meth:`to_json`."""
        d = json.loads(text)
        return cls(
            config=SynthConfig.from_dict(d["config"]),
            frame_index=np.asarray(d["frame_index"], dtype=np.int64),
            timestamps_s=np.asarray(d["timestamps_s"], dtype=np.float64),
            closure_left=np.asarray(d["closure_left"], dtype=np.float64),
            closure_right=np.asarray(d["closure_right"], dtype=np.float64),
            blinks=tuple(PlantedBlink(**b) for b in d["blinks"]),
        )


def planned_truth(config: SynthConfig) -> SyntheticTruth:
    """The ground truth of ``config`` without rendering anything."""
    dropped = set(config.dropped_frames)
    idx = np.array([i for i in range(config.n_frames) if i not in dropped], dtype=np.int64)
    times = idx * float(config.time_base)
    left, right = closure_at(times, config.blinks)
    return SyntheticTruth(
        config=config,
        frame_index=idx,
        timestamps_s=times,
        closure_left=left,
        closure_right=right,
        blinks=tuple(PlantedBlink.from_spec(b, float(config.frame_rate)) for b in config.blinks),
    )


def write_recording(path: str | Path, config: SynthConfig) -> SyntheticTruth:
    """Render ``config`` and write it to ``path`` (``.avi`` or ``.mkv``) with PyAV.

    Frame ``i`` is rendered at ``t = i / fps`` with a generator seeded by
    ``(seed, i)``, so a frame's pixels do not depend on which other frames are
    dropped. PTS are frame indices in a time base of ``1 / fps``; dropped frames
    leave gaps. MJPEG is written as ``yuvj420p`` (full range, so the Y plane is
    the gray image; neutral chroma), ffv1 and rawvideo as ``gray``. 10 s at
    500 FPS (5,000 frames) takes ~10-15 s on one core.

    AVI keeps the ``1 / fps`` time base, so decoded PTS equal frame indices.
    Matroska (``.mkv``) stores PTS in its own 1 ms time base: the decoded
    *times* are exact at 500 FPS (2 ms per frame), but at frame rates whose period
    is not a whole number of ms they are rounded to the millisecond.
    """
    import av

    out_path = Path(path)
    if out_path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ConfigError(
            f"output suffix must be one of {VIDEO_SUFFIXES} (e.g. {config.suffix} for {config.codec}), "
            f"got {out_path.name!r}"
        )
    if not out_path.parent.is_dir():
        raise OutputError(f"output directory {out_path.parent} does not exist; create it first")
    truth = planned_truth(config)
    renderer = FaceRenderer(config)
    h, w = config.height, config.width
    try:
        container = av.open(str(out_path), mode="w")
    except OSError as exc:
        raise OutputError(f"cannot write {out_path}: {exc}") from exc
    try:
        if config.codec == "mjpeg":
            q = str(config.mjpeg_qscale)
            stream = container.add_stream("mjpeg", rate=config.frame_rate, options={"qmin": q, "qmax": q})
            stream.pix_fmt = "yuvj420p"
            planes = np.full((h * 3 // 2, w), 128, dtype=np.uint8)
        else:
            stream = container.add_stream(config.codec, rate=config.frame_rate)
            stream.pix_fmt = "gray"
            planes = np.empty((h, w), dtype=np.uint8)
        stream.width, stream.height = w, h
        stream.time_base = config.time_base
        fmt = "yuvj420p" if config.codec == "mjpeg" else "gray"
        for i, t, cl, cr in zip(
            truth.frame_index.tolist(),
            truth.timestamps_s.tolist(),
            truth.closure_left.tolist(),
            truth.closure_right.tolist(),
            strict=True,
        ):
            rng = np.random.default_rng([config.seed, i])
            planes[:h] = renderer.render(t, cl, cr, rng)
            frame = av.VideoFrame.from_ndarray(planes, format=fmt)
            frame.pts = i
            frame.time_base = config.time_base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    finally:
        container.close()
    return truth
