"""The training data of ``eyeblink train-detector`` (:mod:`eyeblink.lab.train_detector`): the
teacher's labels (the face mesh on the stock detector's box, :func:`teacher_mesh`; the box and
keypoints it implies, fitted per recording to the stock detector's convention, :class:`TeacherFit`),
the augmentation that carries a frame and its 468 points through the same geometry
(:func:`augment`), and the samples the training steps take: letterboxed inputs with their regression
targets and anchor masks (:func:`encode`, :func:`match`, :func:`batch_targets`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Mesh indices of BlazeFace's six keypoints (Keypoint order); a tuple is averaged.
MESH_KEYPOINTS: tuple[tuple[int, ...], ...] = (
    # subject's right eye: the midpoint of its corners (unlike the lids, they stay put in a blink)
    (33, 133),
    (362, 263),  # subject's left eye
    (1,),  # nose tip
    (13, 14),  # mouth centre (inner upper and lower lip)
    (234,),  # subject's right ear tragion (face contour)
    (454,),  # subject's left ear tragion
)
POS_IOU = 0.5
NEG_IOU = 0.35


# --------------------------------------------------------------------------- anchors and encoding


def matching_anchors() -> np.ndarray:
    """The 896 short-range anchors as xyxy boxes (normalised) with their SSD sizes, for IoU
    matching."""
    import numpy as np

    from eyeblink.detect.anchors import SHORT_RANGE_OPTIONS, generate_anchors

    a = generate_anchors(dataclasses.replace(SHORT_RANGE_OPTIONS, fixed_anchor_size=False))
    return np.stack(
        [
            a[:, 0] - a[:, 2] / 2,
            a[:, 1] - a[:, 3] / 2,
            a[:, 0] + a[:, 2] / 2,
            a[:, 1] + a[:, 3] / 2,
        ],
        1,
    )


def encode(
    box: np.ndarray, keypoints: np.ndarray, anchors: np.ndarray, coord_scale: float = 128.0
) -> np.ndarray:
    """Regressor targets ``(N, 16)`` of one face for every anchor: the inverse of
    ``blazeface.decode``.

    ``box`` is xyxy and ``keypoints`` ``(6, 2)``, normalised input coordinates; ``anchors`` ``(N,
    4)`` ``[x_center, y_center, w, h]`` as
    :func:`~eyeblink.detect.anchors.blazeface_short_range_anchors`.
    """
    import numpy as np

    b = np.asarray(box, dtype=np.float64)
    kp = np.asarray(keypoints, dtype=np.float64).reshape(6, 2)
    ax, ay, aw, ah = (np.asarray(anchors, dtype=np.float64)[:, i] for i in range(4))
    out = np.empty((anchors.shape[0], 16), dtype=np.float64)
    out[:, 0] = ((b[0] + b[2]) / 2 - ax) * coord_scale / aw
    out[:, 1] = ((b[1] + b[3]) / 2 - ay) * coord_scale / ah
    out[:, 2] = (b[2] - b[0]) * coord_scale / aw
    out[:, 3] = (b[3] - b[1]) * coord_scale / ah
    out[:, 4::2] = (kp[None, :, 0] - ax[:, None]) * coord_scale / aw[:, None]
    out[:, 5::2] = (kp[None, :, 1] - ay[:, None]) * coord_scale / ah[:, None]
    return out.astype(np.float32)


def match(box: np.ndarray, match_boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positive, negative) anchor masks for one face box (normalised xyxy)."""
    import numpy as np

    from eyeblink.detect.blazeface import box_iou

    ious = box_iou(np.asarray(box, dtype=np.float64), match_boxes)
    pos = ious >= POS_IOU
    pos[int(np.argmax(ious))] = True
    return pos, (ious < NEG_IOU) & ~pos


# --------------------------------------------------------------------------- the teacher


@dataclass(frozen=True)
class TeacherFit:
    """How a face box and keypoints follow from the 468 mesh points (see the module docstring)."""

    # defaults: the fit on zju-dev subjects 1-9 (README), used for the teacher's second-pass ROI
    ox: float = 0.0
    oy: float = 0.21
    kw: float = 4.5
    kh: float = 4.1
    keypoint_offsets: tuple[tuple[float, float], ...] = ((0.0, 0.0),) * 6

    def label(self, mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(box xyxy (4,), keypoints (6, 2))`` in the mesh's pixels."""
        import numpy as np

        (mx, my), (sx, sy), raw, (u, v) = _mesh_frame(mesh)
        cx, cy, w, h = mx + self.ox * sx, my + self.oy * sy, self.kw * sx, self.kh * sy
        off = np.asarray(self.keypoint_offsets, dtype=np.float64) * math.sqrt(sx * sy)
        kp = raw + off[:, :1] * u + off[:, 1:] * v
        return np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]), kp


def _mesh_frame(mesh: np.ndarray) -> tuple[Any, Any, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Mean, per-axis spread, the raw keypoints and the face frame (unit vectors along/across the
    eyes)."""
    import numpy as np

    m = np.asarray(mesh, dtype=np.float64)
    raw = np.array([m[list(idx)].mean(0) for idx in MESH_KEYPOINTS])
    eye = raw[1] - raw[0]
    u = eye / max(float(np.hypot(*eye)), 1e-9)
    v = np.array([-u[1], u[0]])
    return m.mean(0), m.std(0), raw, (u, v)


def fit_teacher(
    meshes: list[np.ndarray], boxes: list[np.ndarray], keypoints: list[np.ndarray]
) -> TeacherFit:
    """Fit the teacher's box and keypoint offsets to the stock detector's boxes (medians over
    frames)."""
    import numpy as np

    ox, oy, kw, kh, kps = [], [], [], [], []
    for mesh, b, k in zip(meshes, boxes, keypoints, strict=True):
        (mx, my), (sx, sy), raw, (u, v) = _mesh_frame(mesh)
        ox.append(((b[0] + b[2]) / 2 - mx) / sx)
        oy.append(((b[1] + b[3]) / 2 - my) / sy)
        kw.append((b[2] - b[0]) / sx)
        kh.append((b[3] - b[1]) / sy)
        d = (np.asarray(k) - raw) / math.sqrt(sx * sy)
        kps.append(np.stack([d @ u, d @ v], 1))
    off = np.median(np.asarray(kps), axis=0)
    return TeacherFit(
        float(np.median(ox)),
        float(np.median(oy)),
        float(np.median(kw)),
        float(np.median(kh)),
        tuple((float(a), float(b)) for a, b in off),
    )


@dataclass
class Labelled:
    source: str
    gray: np.ndarray
    mesh: np.ndarray  # (468, 2) frame pixels
    stock_box: np.ndarray
    stock_keypoints: np.ndarray


def label_frames(
    paths: list[str],
    *,
    every: int,
    max_frames: int,
    detector: Any,
    mesher: Any,
    min_presence: float = 0.5,
) -> list[Labelled]:
    """Sampled frames of ``paths`` with the subject's mesh on the stock box (frames without a
    face skipped)."""
    import numpy as np

    from eyeblink.detect.blazeface import select_subject
    from eyeblink.lab.train import iter_inputs

    out = []
    for name, gray in iter_inputs(paths, frame_step=every, max_frames=max_frames):
        face = select_subject(detector.detect(gray))
        if face is None:
            continue
        mesh = teacher_mesh(mesher, gray, face)
        if mesh is not None and mesher.presence >= min_presence:
            out.append(Labelled(name, gray, mesh, np.asarray(face.box), np.asarray(face.keypoints)))
    return out


#: The teacher's ROI perturbations (shift x, shift y as fractions of the ROI side, scale): its mesh
#: is the mean of the meshes fitted in each, which averages out the mesh's dependence on its crop.
TEACHER_ROIS = (
    (0.0, 0.0, 1.0),
    *((dx, dy, s) for dx in (-0.03, 0.03) for dy in (-0.03, 0.03) for s in (0.96, 1.04)),
)


def teacher_mesh(mesher: Any, gray: np.ndarray, face: Any, passes: int = 2) -> np.ndarray | None:
    """The teacher's 468 points for a stock detection ``face`` (None when the mesh fails).

    Pass 1 takes MediaPipe's ROI of the stock box; pass 2 the same ROI construction on the box that
    :class:`TeacherFit`'s defaults derive from pass 1's mesh (as MediaPipe's tracking derives the
    next ROI from landmarks), so the label no longer follows the stock box's jitter. In each pass
    the mesh is the mean over the :data:`TEACHER_ROIS` perturbations of the ROI. ``mesher.presence``
    is the last fit's face presence.
    """
    import numpy as np

    from eyeblink.landmarks.mesh import MESH_INPUT, square_roi

    x0, y0, x1, y1 = face.box
    re, le = face.keypoints[0], face.keypoints[1]
    mesh = None
    for _ in range(passes):
        angle = math.atan2(le[1] - re[1], le[0] - re[0])
        side = max(x1 - x0, y1 - y0) * mesher.roi_scale
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        meshes = []
        for dx, dy, sc in TEACHER_ROIS:
            m = mesher.mesh(
                gray, square_roi(cx + dx * side, cy + dy * side, side * sc, angle, MESH_INPUT)
            )
            if np.isfinite(m).all():
                meshes.append(m)
        if not meshes:
            return None
        mesh = np.mean(meshes, axis=0)
        (x0, y0, x1, y1), kp = TeacherFit().label(mesh)
        re, le = kp[0], kp[1]
    return mesh


# --------------------------------------------------------------------------- augmentation


def augment(
    gray: np.ndarray, mesh: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A perturbed copy of ``gray`` and the mesh points carried through the same geometry (module
    docstring)."""
    import cv2
    import numpy as np

    h, w = gray.shape
    c = mesh.mean(0)
    face = float(np.ptp(mesh[:, 0]))  # mesh width, px
    lo = min(1.0, max(w, h) / 8.0 / max(face, 1.0))
    hi = max(lo, min(1.4, 0.6 * min(w, h) / max(face, 1.0)))
    scale = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
    m: np.ndarray = np.asarray(
        cv2.getRotationMatrix2D((float(c[0]), float(c[1])), float(rng.uniform(-20, 20)), scale),
        np.float64,
    )
    m[:, 2] += rng.uniform(-0.15, 0.15, 2) * (w, h)
    img = cv2.warpAffine(
        gray,
        m,
        (w, h),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=float(gray.mean()),
    )
    pts = mesh @ m[:, :2].T + m[:, 2]
    f: np.ndarray = img.astype(np.float32)
    sigma = rng.uniform(0.0, 2.0)
    if sigma > 0.3:
        f = cv2.GaussianBlur(f, (0, 0), sigma)
    f = 255.0 * np.power(
        np.clip(f / 255.0, 0, 1), float(np.exp(rng.uniform(np.log(0.7), np.log(1.4))))
    )
    band = 1.0 + rng.uniform(0, 0.1) * np.sin(
        2 * np.pi * np.arange(h) / rng.uniform(20, 300) + rng.uniform(0, 6.3)
    )
    f = f * (rng.uniform(0.5, 1.4) * band.astype(np.float32))[:, None] + rng.uniform(-30, 30)
    if rng.random() < 1 / 3:  # a nozzle: a bar from the frame edge to near one eye
        eye = pts[list(MESH_KEYPOINTS[int(rng.integers(2))])].mean(0)
        iod = float(
            np.hypot(*(pts[list(MESH_KEYPOINTS[0])].mean(0) - pts[list(MESH_KEYPOINTS[1])].mean(0)))
        )
        tip = eye + rng.normal(0, 0.3, 2) * iod
        ang = rng.uniform(0, 2 * np.pi)
        end = tip + np.array([np.cos(ang), np.sin(ang)]) * 2 * max(w, h)
        cv2.line(
            f,
            (round(tip[0]), round(tip[1])),
            (round(end[0]), round(end[1])),
            float(rng.choice([rng.uniform(0, 40), rng.uniform(200, 255)])),
            thickness=max(2, round(iod * rng.uniform(0.1, 0.35))),
        )
    f += rng.standard_normal(f.shape, dtype=np.float32) * float(rng.uniform(0, 8))
    return np.clip(f + 0.5, 0, 255).astype(np.uint8), pts


@dataclass
class Dataset:
    """Letterboxed gray inputs (uint8 ``(N, 128, 128)``, 0 = padding) and labels (normalised
    input coords)."""

    images: np.ndarray
    boxes: np.ndarray  # (N, 4)
    keypoints: np.ndarray  # (N, 6, 2)


def fits_per_input(
    frames: list[Labelled], teacher: TeacherFit, min_frames: int = 5
) -> dict[str, TeacherFit]:
    """The teacher's box convention fitted per input (recording), ``teacher`` for inputs of fewer
    frames.

    Each recording's labels then keep the stock detector's convention *for that face* on average
    (how BlazeFace boxes a face varies with its shape), only steadier; one global fit would move
    every face's box by its own difference from the average face.
    """
    groups: dict[str, list[Labelled]] = {}
    for f in frames:
        groups.setdefault(f.source.split("#")[0], []).append(f)
    return {
        name: fit_teacher(
            [f.mesh for f in fs], [f.stock_box for f in fs], [f.stock_keypoints for f in fs]
        )
        if len(fs) >= min_frames
        else teacher
        for name, fs in groups.items()
    }


def build_dataset(
    frames: list[Labelled], teacher: TeacherFit | dict[str, TeacherFit], *, copies: int, seed: int
) -> Dataset:
    """Letterboxed frames and labels: each frame and ``copies`` augmented copies.

    ``teacher``: one box convention, or one per input (:func:`fits_per_input`)."""
    import numpy as np

    from eyeblink.detect.blazeface import letterbox

    rng = np.random.default_rng(seed)
    imgs, boxes, kps = [], [], []
    for fr in frames:
        fit = (
            teacher.get(fr.source.split("#")[0], TeacherFit())
            if isinstance(teacher, dict)
            else teacher
        )
        for k in range(copies + 1):
            img, mesh = (fr.gray, fr.mesh) if k == 0 else augment(fr.gray, fr.mesh, rng)
            box, kp = fit.label(mesh)
            tensor, lb = letterbox(img)
            nb = lb.to_input(box.reshape(2, 2)).reshape(4)
            if nb[2] - nb[0] < 8 / 128 or nb[3] - nb[1] < 8 / 128:
                continue
            imgs.append(np.rint((tensor[:, :, 0] + 1.0) * 127.5).astype(np.uint8))
            boxes.append(nb)
            kps.append(lb.to_input(kp))
    return Dataset(np.asarray(imgs), np.asarray(boxes, np.float32), np.asarray(kps, np.float32))


def batch_targets(ds: Dataset, idx: np.ndarray) -> tuple[np.ndarray, ...]:
    """Network input, regression targets, positive and negative masks for samples ``idx``."""
    import numpy as np

    from eyeblink.detect.anchors import blazeface_short_range_anchors

    anchors, mboxes = blazeface_short_range_anchors(), _match_boxes()
    x = ds.images[idx].astype(np.float32) * np.float32(1 / 127.5) - np.float32(1.0)
    x = np.repeat(x[..., None], 3, axis=3)
    tgt = np.stack([encode(ds.boxes[i], ds.keypoints[i], anchors) for i in idx])
    masks = [match(ds.boxes[i], mboxes) for i in idx]
    return x, tgt, np.stack([p for p, _ in masks]), np.stack([n for _, n in masks])


_MATCH_BOXES: list[np.ndarray] = []


def _match_boxes() -> np.ndarray:
    if not _MATCH_BOXES:
        _MATCH_BOXES.append(matching_anchors())
    return _MATCH_BOXES[0]
