"""The synthetic face (:mod:`eyeblink.lab.synth`): a real face photo (``skimage.data.astronaut()``)
whose eyelids close as a :class:`~eyeblink.lab.synth_spec.SynthConfig` says, with head motion,
flicker and sensor noise.

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
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from eyeblink.errors import ConfigError, NoFaceError
from eyeblink.lab.synth_spec import Eye, SynthConfig
from eyeblink.landmarks.eyes import eye_aspect_ratio
from eyeblink.landmarks.mesh import MESH_EYE_POINTS

#: Face-mesh indices of the six eye points per eye in dlib's order (see eyeblink.landmarks.mesh).
RIGHT_EYE_POINTS: tuple[int, ...] = MESH_EYE_POINTS[:6]
LEFT_EYE_POINTS: tuple[int, ...] = MESH_EYE_POINTS[6:]
#: Face-mesh points whose horizontal distance is the face width ``face_scale`` sets (the face oval
#: at eye level; on the astronaut 93.3 px, as dlib's jaw points 0-16 at 93.0 px).
FACE_WIDTH_POINTS = (127, 356)

# Eyelid model constants (fractions of the eye width, corner to corner).
_CORNER_EXTENSION = 0.12  # corners pushed outwards so no sclera remains at the canthi when closed
_SKIN_BAND = 0.45  # height of the upper-lid skin stretched over the eye
_MARGIN_BAND = 0.07  # lid margin + lashes, moved rigidly (not stretched)
_LASH_DARKENING = 0.35  # darkest lash-line factor at full strength
_LASH_SIGMA_FRAC = 0.03  # lash-line Gaussian half-width
_ROI_PAD = 6  # px around the lid model in the ROI

_NOISE_BANK = 4  # noise fields precomputed per renderer
_NOISE_PAD = 32  # random offset range into a noise field


# --------------------------------------------------------------------------- geometry


def _mesh_points(gray: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """The face mesh's 468 points (frame pixels) and BlazeFace's box of the one face in ``gray``."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.landmarks.mesh import MeshFitter

    with FaceDetector.from_detector(create_detector("litert")) as detector:
        faces = detector.detect(gray)
    if len(faces) != 1:
        raise NoFaceError(
            f"expected exactly one face in skimage.data.astronaut(), BlazeFace found {len(faces)}"
        )
    with MeshFitter(refine=False) as mesh:
        points = mesh.mesh(gray, mesh.face_roi(faces[0]))
    box = cast(tuple[int, int, int, int], tuple(int(np.rint(v)) for v in faces[0].box))
    return points, box


@functools.lru_cache(maxsize=1)
def _source_face() -> tuple[np.ndarray, np.ndarray, tuple[int, int, int, int]]:
    """The astronaut photo in gray, its face mesh (468 points) and BlazeFace's face box (x0, y0,
    x1, y1)."""
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
            raise NoFaceError(
                f"eye landmarks are not ordered along the eye, cannot model the lid: {p.tolist()}"
            )
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
        """Render the lid closed by ``closure`` into ``canvas`` (ROI only), reading pixels from
        ``base``."""
        import cv2

        if closure <= 0.0:
            return
        c = np.float32(min(closure, 1.0))
        ys, upper, skin_top = self.ys, self.upper, self.skin_top
        shift = c * self.opening
        edge = upper + shift  # new lid margin Uc(x)
        margin_top = edge - self.margin
        # Skin band [B, Uc - m] samples [B, U - m]; margin band [Uc - m, ...] is translated by
        # `shift`.
        scale = (upper - self.margin - skin_top) / np.maximum(
            margin_top - skin_top, np.float32(1e-3)
        )
        stretched = skin_top + (ys - skin_top) * scale
        src_y = np.where(ys < skin_top, ys, np.where(ys < margin_top, stretched, ys - shift))
        roi_base = base[self.y0 : self.y1 + 1, self.x0 : self.x1 + 1]
        lid = cv2.remap(
            base,
            self.xs,
            src_y.astype(np.float32),
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REPLICATE,
        ).astype(np.float32)
        # Lash line: a darker Gaussian ridge along the new edge, fading in over the first 30% of
        # closure.
        d = (ys - edge + 0.5 * self.lash_sigma) / self.lash_sigma
        lash = (
            (_LASH_DARKENING * min(1.0, float(c) / 0.3)) * np.exp(-0.5 * d * d) * (self.opening > 0)
        )
        lid *= 1.0 - lash
        # Fractional coverage of each pixel row by the lid (anti-aliased edge).
        alpha = np.clip(edge - ys + 0.5, 0.0, 1.0)
        out = alpha * lid + (1.0 - alpha) * roi_base.astype(np.float32)
        canvas[self.y0 : self.y1 + 1, self.x0 : self.x1 + 1] = np.clip(out + 0.5, 0, 255).astype(
            np.uint8
        )


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
    canvas = cv2.warpAffine(
        gray, affine, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT101
    )
    corners = (
        np.array([[box[0], box[1]], [box[2], box[3]]], dtype=np.float64) @ affine[:, :2].T
        + affine[:, 2]
    )
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
def _motion_params(
    seed: int, max_hz: float
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
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


def eye_landmarks_at(
    closure: float, eye: Eye, config: SynthConfig | None = None, t: float | None = None
) -> np.ndarray:
    """The six eye points (dlib order p1..p6, ``float64 (6, 2)``) of the synthetic face at
    ``closure``.

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
        self._noise = rng.standard_normal(
            (_NOISE_BANK, h, w), dtype=np.float32
        ) * config.noise_sigma + np.float32(0.5)  # +0.5 rounds on truncation
        self._work = np.empty((config.height, config.width), dtype=np.uint8)

    def render(
        self, t: float, closure_left: float, closure_right: float, rng: np.random.Generator
    ) -> np.ndarray:
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
            work,
            m,
            (cfg.width, cfg.height),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REFLECT101,
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
