"""What every eye model returns: the 12 eye points, the openness of each eye, the eye patches.

* :class:`EyeFit` — one frame's result of an eye model (see :mod:`eyeblink.landmarks`).
* :func:`eye_aspect_ratio` / :func:`eye_ears` — the six-point EAR (Soukupová & Čech 2016).
* :func:`eye_patches` — the aligned eye patches of the blink detector's appearance cue.
* :func:`eye_strip` — both eyes upright in one small image, for the report's blink crops.

Naming: ``left``/``right`` are the *subject's* eyes. Points follow dlib's iBUG-68 numbering: 36–41
the subject's right eye (image left), 42–47 the subject's left eye; a 12-point array is 36..47.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RIGHT_EYE = slice(36, 42)
LEFT_EYE = slice(42, 48)
EYE_POINTS = tuple(range(36, 48))


def eye_aspect_ratio(eye: np.ndarray) -> float:
    """EAR of one eye from its six contour points (Soukupová & Čech 2016).

    ``eye`` is ``(6, 2)`` in iBUG order: p1 outer/inner corner, p2, p3 upper
    lid, p4 the other corner, p5, p6 lower lid.
    EAR = (|p2 - p6| + |p3 - p5|) / (2 |p1 - p4|). Returns NaN for a degenerate
    eye (coincident corners).
    """
    e = np.asarray(eye, dtype=np.float64)
    if e.shape != (6, 2):
        raise ValueError(f"eye must be (6, 2) points, got shape {e.shape}")
    vert = math.hypot(*(e[1] - e[5])) + math.hypot(*(e[2] - e[4]))
    horiz = math.hypot(*(e[0] - e[3]))
    if horiz <= 1e-9:
        return float("nan")
    return vert / (2.0 * horiz)


def eye_ears(points: np.ndarray) -> tuple[float, float]:
    """(left, right) EAR from 68 points or from the 12 eye points 36..47 (subject's eyes)."""
    p = np.asarray(points)
    if p.shape == (68, 2):
        right, left = p[RIGHT_EYE], p[LEFT_EYE]
    elif p.shape == (12, 2):
        right, left = p[:6], p[6:]
    else:
        raise ValueError(f"points must be (68, 2) or (12, 2), got shape {p.shape}")
    return eye_aspect_ratio(left), eye_aspect_ratio(right)


#: Eye patch (rows, columns): 1.5 x 0.75 eye widths around the centre of the eye corners, on the
#: corner axis.
PATCH_SHAPE = (12, 24)
PATCH_SPAN = (0.75, 1.5)


def eye_patches(gray: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(2, 12, 24) uint8 patches of the subject's (left, right) eye, aligned on the fitted corners.

    The appearance cue of :mod:`eyeblink.signals.blinks` compares them with the open-eye templates:
    a closing lid covers the dark iris whatever dlib makes of the lid points. Each patch spans 1.5 x
    0.75 eye widths (corner to corner), rotated with the eye axis, bilinear; ~20 µs.
    """
    return warp_patches(gray, patch_affines(points))


def patch_affines(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two 2x3 affines (patch -> frame) of :func:`eye_patches` for the 12 eye points: an eye
    model that reuses its points over several frames computes them once (:func:`warp_patches` then
    cuts each frame's patches)."""
    p = np.asarray(points, dtype=np.float64)
    if p.shape != (12, 2):
        raise ValueError(f"points must be (12, 2), got shape {p.shape}")
    h, w = PATCH_SHAPE
    out = []
    for eye in (p[6:], p[:6]):
        c0, c1 = eye[0], eye[3]
        width = max(float(np.hypot(*(c1 - c0))), 1.0)
        ang = math.atan2(c1[1] - c0[1], c1[0] - c0[0])
        sc = PATCH_SPAN[1] * width / w
        ca, sa = math.cos(ang) * sc, math.sin(ang) * sc
        ctr = (c0 + c1) / 2
        out.append(
            np.array(
                [
                    [ca, -sa, ctr[0] - ca * w / 2 + sa * h / 2],
                    [sa, ca, ctr[1] - sa * w / 2 - ca * h / 2],
                ]
            )
        )
    return out[0], out[1]


def warp_patches(gray: np.ndarray, affines: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The (2, 12, 24) uint8 eye patches of ``gray`` under :func:`patch_affines`' two affines."""
    import cv2

    h, w = PATCH_SHAPE
    out = np.empty((2, h, w), dtype=np.uint8)
    src = _contiguous(gray)
    for k in (0, 1):
        cv2.warpAffine(
            src,
            affines[k],
            (w, h),
            dst=out[k],
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        )
    return out


#: (rows, cols) of the report's eye strip: both eyes side by side, upright, about 2 inter-ocular
#: distances wide
STRIP_SHAPE = (40, 120)
STRIP_SPAN = 2.0  # strip width / inter-ocular distance


def eye_strip(gray: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A ``STRIP_SHAPE`` uint8 view of both eyes (the report's blink crops) and the 12 points in its
    pixels.

    Centred on the two eye centres, rotated upright by the line through them, ``STRIP_SPAN``
    inter-ocular distances wide and a third of that high; the subject's right eye on the left, as an
    unmirrored camera sees an upright face (a face at any roll, upside down included, gives an
    upright strip). Bilinear, ~20 µs. Points are returned in strip pixels so the report can draw
    them.
    """
    import cv2

    p = np.asarray(points, dtype=np.float64)
    if p.shape != (12, 2):
        raise ValueError(f"points must be (12, 2), got shape {p.shape}")
    h, w = STRIP_SHAPE
    right, left = p[:6].mean(0), p[6:].mean(0)
    # upright: the eye line from the subject's right eye to the left one (the image-left eye to the
    # image-right one on an upright face; on a face upside down the other way, which turns the strip
    # the right way up)
    a, b = right, left
    iod = max(float(np.hypot(*(b - a))), 1.0)
    ang = math.atan2(b[1] - a[1], b[0] - a[0])
    sc = STRIP_SPAN * iod / w
    ca, sa = math.cos(ang) * sc, math.sin(ang) * sc
    ctr = (a + b) / 2
    m = np.array(
        [[ca, -sa, ctr[0] - ca * w / 2 + sa * h / 2], [sa, ca, ctr[1] - sa * w / 2 - ca * h / 2]]
    )
    strip = cv2.warpAffine(
        _contiguous(gray),
        m,
        (w, h),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )
    inv = cv2.invertAffineTransform(m)
    pts = (p @ inv[:, :2].T + inv[:, 2]).astype(np.float32)
    return strip, pts


def inter_ocular(points: np.ndarray) -> float:
    """Distance (pixels) between the centres of the two eyes of 12 eye points (dlib's order)."""
    return float(np.linalg.norm(points[:6].mean(0) - points[6:].mean(0)))


class FrameTimed:
    """Mixin of the eye models that reuse work from fit to fit: the frame the next fit sees, set
    by the analyzer."""

    _t: float | None = None
    _frame: int | None = None

    def set_time(self, timestamp_s: float | None, frame: int | None = None) -> None:
        """The timestamp of the frame the next :meth:`fit` sees (``mesh_reuse_ms`` counts from it)
        and its index (the ``pose_frame`` of a head pose measured on it)."""
        self._t = timestamp_s
        self._frame = frame


@dataclass(frozen=True, slots=True)
class EyeFit:
    """One frame's eye-model result: the 12 eye points (36..47) in frame pixels, each eye's openness
    (``ear_left``/``ear_right``: EAR or lid aperture, a lid distance over the eye width) and the eye
    patches."""

    points: np.ndarray  # (12, 2) float32: subject's right eye (36-41) then left eye (42-47)
    ear_left: float
    ear_right: float
    # (2, 12, 24) uint8: subject's left then right eye, see eye_patches
    patches: np.ndarray | None = None
    #: the model's own face-presence probability (face mesh); NaN where the model has none (dlib).
    #: Below ``landmarks.min_presence`` the tracked box has lost the face: the frame core
    #: re-detects.
    presence: float = math.nan
    #: the head's (yaw, pitch, roll) in degrees from the face mesh (``mesh``, ``mesh-ear``,
    #: ``lids``, when asked for: ``--points``), None where the model has no face mesh; measured on
    #: frame ``pose_frame`` (the mesh is reused for ``landmarks.mesh_reuse_ms``)
    pose: tuple[float, float, float] | None = None
    pose_frame: int | None = None

    def __post_init__(self) -> None:
        if self.points.shape != (12, 2):
            raise ValueError(f"EyeFit.points must be (12, 2), got {self.points.shape}")
        if self.patches is not None and self.patches.shape != (2, *PATCH_SHAPE):
            raise ValueError(
                f"EyeFit.patches must be (2, {PATCH_SHAPE[0]}, {PATCH_SHAPE[1]}), "
                f"got {self.patches.shape}"
            )

    @property
    def inter_ocular(self) -> float:
        """Distance between the two eye centres (pixels): the scale of the fit."""
        return inter_ocular(self.points)


def _contiguous(img: np.ndarray) -> np.ndarray:
    return img if img.flags.c_contiguous else np.ascontiguousarray(img)
