"""MediaPipe face mesh eyelids: ``--landmarks mesh`` (the lid network's teacher) and ``mesh-ear``.

Two Apache-2.0 networks from the ``mediapipe==0.10.21`` wheel, run on LiteRT (XNNPACK) on the CPU:

* ``face_landmark.tflite`` (1.24 MB): 468 face points from a 192x192 RGB crop in [0, 1]. The crop
  is MediaPipe's: a square around the BlazeFace box, 1.5x its long side, rotated upright by the eye
  line (BlazeFace's eye keypoints), so a rolled head gives the network an upright face. Outputs
  are crop pixels (mapped back to the frame through the crop's affine) and a face-presence logit.
* ``iris_landmark.tflite`` (2.6 MB): 71 eye-region points (the first 16 are the lid contour) from a
  64x64 crop of one eye: MediaPipe's own eyelid refinement. The crop is a square centred on the
  mesh's eye corners, 2.3x their distance, rotated by the corner line; the subject's left eye is
  mirrored, as MediaPipe does (the network was trained on one eye side).

Openness per eye (``ear_left`` / ``ear_right``, subject's eyes):

* ``mesh`` (default): the *lid aperture* of the refined contour, the mean distance of the seven
  upper/lower contour pairs (contour points 9..15 over 1..7) divided by the eye width (corner points
  0 and 8). Seven pairs average out a single point's noise, and the iris network sees the eye at
  ~4x the resolution of the face mesh: frame AUC closed-vs-open on zju-dev 0.961 (glasses and
  looking up alike) vs 0.929 for the mesh's own 6-point EAR.
* ``mesh-ear``: the six-point EAR (Soukupová & Čech) of the face mesh, no second network: ~1.4
  instead of ~4.2 ms per face on one core, for live runs that must keep up with 500 FPS on few
  cores. Mesh indices, in dlib's iBUG order (corner, upper, upper, corner, lower, lower):
  subject's right eye ``33, 160, 158, 133, 153, 144``; subject's left eye ``362, 385, 387, 263,
  373, 380``.

Both values are ratios of lid distance to eye width, like dlib's EAR: ~0.25-0.35 open, towards 0
closed; :mod:`eyeblink.blinks` and the FEC calibration work on them unchanged.

The 12 ``EyeFit.points`` are six points per eye in dlib order (36..41 subject's right, 42..47
subject's left), so eye patches and the drift check work as with dlib: for ``mesh`` the refined lid
contour's corners and two upper / two lower lid points of this frame (:data:`CONTOUR_EYE_POINTS`),
for ``mesh-ear`` the mesh's six EAR points.

Reusing the mesh (``mesh``, ``mesh_reuse_ms`` > 0): the iris network does the measuring; the face
mesh only places its two eye crops. The eye corners barely move within a few milliseconds, and a
blink does not move them, so at high frame rates the face mesh runs on the first fit of a tracked
face box, then again once ``mesh_reuse_ms`` (20 ms: every 10th frame at 500 FPS) have passed since
it ran, and at once when the refined contour shows the eye has moved in its crop (its corners'
midpoint off the crop's centre by more than :data:`REFIT_SHIFT` of the eye width, or its width
changed by more than :data:`REFIT_SCALE`). A new face box (a new detection) always gets a new mesh.
At 500 FPS this takes ~40% off a fit. Frames further apart than ``mesh_reuse_ms`` (e.g. 30 FPS
video) get a mesh each, as with ``mesh_reuse_ms = 0``. The frame core tells the fitter each
frame's timestamp (:meth:`MeshFitter.set_time`); without one, every fit runs the mesh.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.errors import ModelFileError
from eyeblink.landmarks.eyes import EyeFit, FrameTimed, eye_ears, eye_patches

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection

#: Face mesh indices of the six EAR points per eye, dlib order: subject's right eye (dlib 36..41)
#: then subject's left eye (dlib 42..47).
MESH_EYE_POINTS = (33, 160, 158, 133, 153, 144, 362, 385, 387, 263, 373, 380)
#: The eye corners per eye (image-left corner first): subject's right eye, subject's left eye.
MESH_EYE_CORNERS = ((33, 133), (362, 263))

MESH_INPUT = 192
IRIS_INPUT = 64
ROI_SCALE = 1.5  # MediaPipe face_detection_front_detection_to_roi: 1.5x the detection box, square
EYE_ROI_SCALE = 2.3  # MediaPipe iris_landmark_left_and_right: 2.3x the corner distance, square
#: Upper/lower pairs of the iris network's lid contour (points 1..7 lower lid, 9..15 upper lid,
#: 0 and 8 the corners: MediaPipe's eye-contour order, outer corner first).
_LOWER = np.arange(1, 8)
_UPPER = np.arange(9, 16)
#: The six points per eye, in dlib's order, on the iris network's lid contour (16 points, corners 0
#: and 8): subject's right eye (outer corner, two upper, inner corner, two lower), then subject's
#: left eye (inner corner, two upper, outer corner, two lower); the nearest contour points to the
#: mesh's EAR points.
CONTOUR_EYE_POINTS = ((0, 11, 13, 8, 5, 3), (8, 13, 11, 0, 3, 5))
#: The refined contour's corner midpoint this far from its crop's centre (in eye widths) refits the
#: mesh.
REFIT_SHIFT = 0.25
#: ... and so does a contour width this far (relative) from the width the crop was cut for.
REFIT_SCALE = 0.25


def shape_of(detail: dict[str, Any]) -> tuple[int, ...]:
    """A LiteRT tensor's shape as plain ints (a message shows ``(1, 192, 192, 3)``, not NumPy
    reprs)."""
    return tuple(int(x) for x in detail["shape"])


def check_outputs_finite(
    it: Any, ins: list[dict[str, Any]], outs: list[dict[str, Any]], what: str, path: Path, fix: str
) -> None:
    """Run the network once on a mid-grey input: a file whose weights are damaged (its structure
    intact) gives NaN or infinite outputs, and every measurement would be empty; that is a
    :class:`ModelFileError` now."""
    for d in ins:
        it.set_tensor(
            d["index"],
            np.full(
                shape_of(d),
                0.5 if np.issubdtype(d["dtype"], np.floating) else 128,
                dtype=d["dtype"],
            ),
        )
    try:
        it.invoke()
    except (ValueError, RuntimeError) as exc:
        raise ModelFileError(
            f"{what} model {path} fails on a test input ({' '.join(str(exc).split())[:200]}); {fix}"
        ) from None
    bad = [
        d["name"]
        for d in outs
        if not np.isfinite(np.asarray(it.get_tensor(d["index"]), np.float64)).all()
    ]
    if bad:
        raise ModelFileError(
            f"{what} model {path} gives NaN or infinite outputs ({', '.join(map(str, bad))}) on a "
            f"test input: its weights are damaged; {fix}"
        )


def open_interpreter(path: Path, what: str, fix: str) -> tuple[Any, list, list]:
    """A LiteRT interpreter (one thread) for the network at ``path``, allocated, with its input and
    output details. A missing or unloadable file is :class:`ModelFileError`, one line naming
    ``what`` and ``fix``."""
    from ai_edge_litert.interpreter import Interpreter

    if not path.is_file():
        raise ModelFileError(f"{what} not found: {path}; {fix}")
    try:
        it = Interpreter(model_path=str(path), num_threads=1)
        it.allocate_tensors()
        return it, it.get_input_details(), it.get_output_details()
    except (ValueError, RuntimeError) as exc:
        raise ModelFileError(
            f"{what} {path} cannot be loaded by LiteRT ({str(exc).splitlines()[0]}); {fix}"
        ) from None


def _load(
    path: Path, expect_in: tuple[int, ...], expect_out: int, what: str, fix: str
) -> tuple[Any, int, list]:
    """A LiteRT interpreter (one thread) for ``path``, checked: one input ``expect_in``, two
    outputs."""
    it, ins, outs = open_interpreter(path, f"{what} model", fix)
    if len(ins) != 1 or shape_of(ins[0]) != expect_in or len(outs) != 2:
        raise ModelFileError(
            f"{what} model {path} has inputs {[shape_of(d) for d in ins]} and "
            f"{len(outs)} outputs, expected one input {expect_in} and 2 outputs; {fix}"
        )
    sizes = sorted(int(np.prod(d["shape"])) for d in outs)
    if sizes[-1] != expect_out:
        raise ModelFileError(
            f"{what} model {path} outputs {sizes} values, expected {expect_out}; {fix}"
        )
    check_outputs_finite(it, ins, outs, what, path, fix)
    return it, ins[0]["index"], outs


def square_roi(cx: float, cy: float, side: float, angle: float, size: int) -> np.ndarray:
    """2x3 affine taking ``size``x``size`` crop pixels to frame pixels: a square of ``side`` frame
    pixels centred on (cx, cy), its x axis along ``angle`` (radians, image coordinates)."""
    s = side / size
    ca, sa = math.cos(angle) * s, math.sin(angle) * s
    h = size / 2
    return np.array(
        [[ca, -sa, cx - ca * h + sa * h], [sa, ca, cy - sa * h - ca * h]], dtype=np.float64
    )


def crop_of(gray: np.ndarray, m: np.ndarray, size: int, *, mirror: bool = False) -> np.ndarray:
    """The ``size`` x ``size`` uint8 crop of ``m`` (crop -> frame), bilinear, zero outside the
    frame."""
    import cv2

    if mirror:  # crop column u samples the frame at the mirrored column size - u
        m = m @ np.array([[-1.0, 0.0, size], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    src = gray if gray.flags.c_contiguous else np.ascontiguousarray(gray)
    return cv2.warpAffine(
        src,
        m,
        (size, size),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )


def warp(gray: np.ndarray, m: np.ndarray, size: int, *, mirror: bool = False) -> np.ndarray:
    """The crop of ``m`` (crop -> frame) as float32 ``[1, size, size, 3]`` RGB in [0, 1]."""
    x = crop_of(gray, m, size, mirror=mirror).astype(np.float32) * (1.0 / 255.0)
    return np.repeat(x[None, :, :, None], 3, axis=3)


def warp_into(
    it: Any, index: int, gray: np.ndarray, m: np.ndarray, size: int, *, mirror: bool = False
) -> None:
    """:func:`warp`'s values written straight into input ``index`` of the LiteRT interpreter ``it``
    (no temporaries, no ``set_tensor`` copy). The view of the buffer is let go before the caller
    invokes the interpreter."""
    crop = crop_of(gray, m, size, mirror=mirror)
    x = it.tensor(index)()  # (1, size, size, 3) float32: the interpreter's own input buffer
    # warp's float32 crop times the Python float 1/255 is a float32 product, as with np.float32 here
    np.multiply(crop, np.float32(1.0 / 255.0), out=x[0, :, :, 0], casting="unsafe")
    x[0, :, :, 1] = x[0, :, :, 0]
    x[0, :, :, 2] = x[0, :, :, 0]
    del x


def to_frame(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return pts @ m[:, :2].T + m[:, 2]


def face_roi(face: FaceDetection, roi_scale: float = ROI_SCALE) -> np.ndarray:
    """MediaPipe's face ROI for a BlazeFace detection: crop -> frame affine (a square ``roi_scale``
    x the box's long side, rotated upright by the eye keypoints)."""
    x0, y0, x1, y1 = face.box
    re, le = face.keypoints[0], face.keypoints[1]
    angle = math.atan2(le[1] - re[1], le[0] - re[0])
    side = max(x1 - x0, y1 - y0) * roi_scale
    return square_roi((x0 + x1) / 2, (y0 + y1) / 2, side, angle, MESH_INPUT)


def eye_roi(c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
    """The iris network's crop of one eye (crop -> frame affine): a square centred on the eye
    corners ``c0``, ``c1``, :data:`EYE_ROI_SCALE` x their distance, rotated by the corner line."""
    d = c1 - c0
    cx, cy = (c0 + c1) / 2
    return square_roi(
        float(cx),
        float(cy),
        float(np.hypot(*d)) * EYE_ROI_SCALE,
        math.atan2(d[1], d[0]),
        IRIS_INPUT,
    )


def mesh_to_frame(raw: np.ndarray, roi: np.ndarray) -> np.ndarray:
    """(468, 2) frame pixels from the face mesh's 1404 raw outputs (crop pixels) and its crop
    ``roi``."""
    return to_frame(roi, raw.reshape(468, 3)[:, :2].astype(np.float64))


#: Mesh indices of the head pose's axes: symmetric pairs (subject's right point, subject's left
#: point) whose differences give the head's left-right axis (eye outer and inner corners, mouth
#: corners, cheeks), and the midline's top and bottom (forehead 10, chin 152), which lie at almost
#: the same depth on a frontal face.
POSE_PAIRS = ((33, 263), (133, 362), (61, 291), (234, 454))
POSE_TOP, POSE_BOTTOM = 10, 152


#: The mesh points the head pose reads: the pairs' points, then the forehead and the chin.
POSE_POINTS = (*(i for pair in POSE_PAIRS for i in pair), POSE_TOP, POSE_BOTTOM)


def mesh_to_frame3d(
    raw: np.ndarray, roi: np.ndarray, points: tuple[int, ...] | None = None
) -> np.ndarray:
    """(468, 3) points (or those of ``points``, in that order) from the face mesh's 1404 raw
    outputs: x, y in frame pixels, z (depth, away from the camera) scaled to frame pixels by the
    crop's scale."""
    p = raw.reshape(468, 3)
    p = (p[list(points)] if points is not None else p).astype(np.float64)
    out = np.empty_like(p)
    out[:, :2] = to_frame(roi, p[:, :2])
    out[:, 2] = p[:, 2] * float(np.hypot(roi[0, 0], roi[1, 0]))
    return out


def mesh_pose(raw: np.ndarray, roi: np.ndarray) -> tuple[float, float, float]:
    """:func:`head_pose` straight from the face mesh's raw outputs and its crop (maps only the
    points it reads: ~10 µs a mesh run)."""
    return _pose(mesh_to_frame3d(raw, roi, POSE_POINTS).tolist())


def head_pose(mesh3d: np.ndarray) -> tuple[float, float, float]:
    """(yaw, pitch, roll) in degrees of the head from the face mesh's 3D points
    (:func:`mesh_to_frame3d`).

    An axis construction, not a model fit: the head's x axis is the sum of the symmetric pairs of
    :data:`POSE_PAIRS` (subject's right point to subject's left point: image left to right on an
    upright face), its y axis the chin minus the forehead made orthogonal to x, its z axis their
    cross product (into the image). Camera axes: x right, y down, z away from the camera. Yaw > 0:
    the face turns towards the image's right (the subject's left on an unmirrored camera); pitch >
    0: the face turns up; roll > 0: the head tilts counter-clockwise as the image is shown (the
    subject's left eye, image right, higher). A frontal upright face is (0, 0, 0) within a degree or
    two.
    """
    return _pose(np.asarray(mesh3d, dtype=np.float64)[list(POSE_POINTS)].tolist())


def _pose(pts: list[list[float]]) -> tuple[float, float, float]:
    """:func:`head_pose` of the :data:`POSE_POINTS` (plain floats: a few µs, where NumPy's small
    arrays cost tens)."""
    x = [0.0, 0.0, 0.0]
    for k in range(len(POSE_PAIRS)):
        a, b = pts[2 * k], pts[2 * k + 1]
        for c in range(3):
            x[c] += b[c] - a[c]
    top, bottom = pts[-2], pts[-1]
    y = [bottom[c] - top[c] for c in range(3)]
    nx = math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])
    if not nx > 1e-9:
        return math.nan, math.nan, math.nan
    x = [v / nx for v in x]
    d = y[0] * x[0] + y[1] * x[1] + y[2] * x[2]
    y = [y[c] - d * x[c] for c in range(3)]
    ny = math.sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2])
    if not ny > 1e-9:
        return math.nan, math.nan, math.nan
    y = [v / ny for v in y]
    # the face's forward direction, -(x cross y): towards the camera on a frontal face
    f = (-(x[1] * y[2] - x[2] * y[1]), -(x[2] * y[0] - x[0] * y[2]), -(x[0] * y[1] - x[1] * y[0]))
    yaw = math.degrees(math.atan2(f[0], -f[2]))
    pitch = math.degrees(math.atan2(-f[1], math.hypot(f[0], f[2])))
    roll = math.degrees(math.atan2(-x[1], x[0]))
    return yaw, pitch, roll


def presence_of(logit: float) -> float:
    """The face mesh's face-presence probability from its logit."""
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, float(logit)))))


def contour_to_frame(raw: np.ndarray, m: np.ndarray, *, mirror: bool) -> np.ndarray:
    """(16, 2) frame-pixel lid contour from the iris network's 213 raw outputs, cut with ``m``
    (mirrored or not)."""
    pts = raw.reshape(71, 3)[:16, :2].astype(np.float64)
    if mirror:
        pts[:, 0] = IRIS_INPUT - pts[:, 0]
    return to_frame(m, pts)


def aperture(contour: np.ndarray) -> float:
    """Mean upper-lower distance of the seven contour pairs over the corner distance."""
    width = float(np.hypot(*(contour[8] - contour[0])))
    if width <= 1e-9:
        return math.nan
    return float(np.hypot(*(contour[_UPPER] - contour[_LOWER]).T).mean() / width)


def mesh_eye_corners(
    mesh: np.ndarray,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The eye crops' corners from a face mesh: (subject's right eye, subject's left eye)."""
    (r0, r1), (l0, l1) = MESH_EYE_CORNERS
    return (mesh[r0], mesh[r1]), (mesh[l0], mesh[l1])


def refined_eyes(contours: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, float, float]:
    """The 12 eye points (float32, dlib order) and (ear_left, ear_right) from the two refined lid
    contours (subject's right eye, subject's left eye)."""
    right, left = (aperture(c) for c in contours)
    pts = np.concatenate(
        [contours[0][list(CONTOUR_EYE_POINTS[0])], contours[1][list(CONTOUR_EYE_POINTS[1])]]
    ).astype(np.float32)
    return pts, left, right


def mesh_ear_eyes(mesh: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The 12 eye points (float32, dlib order) and the six-point (ear_left, ear_right) of a face
    mesh."""
    pts = mesh[list(MESH_EYE_POINTS)].astype(np.float32)
    left, right = eye_ears(pts)
    return pts, left, right


class MeshFitter(FrameTimed, Closing):
    """Face mesh (+ optional iris-network lid refinement) on LiteRT. Implements the eye-model
    protocol.

    One instance per process (LiteRT interpreters are not thread-safe). ``fit`` costs ~1.4 ms per
    face on one core for the mesh, plus ~1.4 ms per eye for the refinement (``refine=True``).
    """

    name = "mesh"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        refine: bool = True,
        iris_model_path: str | Path | None = None,
        roi_scale: float = ROI_SCALE,
        mesh_reuse_ms: float = 0.0,
    ) -> None:
        from eyeblink.weights import face_mesh_path, iris_path

        fix = (
            "check --landmark-model (a face-mesh .tflite: input [1, 192, 192, 3], 1404 + 1 outputs)"
            if model_path is not None
            else "restore weights/ from the repository or reinstall eyeblink (see "
            "weights/README.md)"
        )
        path = Path(model_path) if model_path is not None else face_mesh_path()
        self._mesh, self._mesh_in, outs = _load(
            path, (1, MESH_INPUT, MESH_INPUT, 3), 1404, "face mesh", fix
        )
        by_size = {int(np.prod(d["shape"])): d["index"] for d in outs}
        self._mesh_pts, self._mesh_logit = by_size[1404], by_size[1]
        self._iris: Any = None
        if refine:
            ipath = Path(iris_model_path) if iris_model_path is not None else iris_path()
            self._iris, self._iris_in, iouts = _load(
                ipath, (1, IRIS_INPUT, IRIS_INPUT, 3), 213, "iris", fix
            )
            self._iris_contour = next(d["index"] for d in iouts if int(np.prod(d["shape"])) == 213)
        if not mesh_reuse_ms >= 0:
            raise ValueError(f"mesh_reuse_ms must be >= 0, got {mesh_reuse_ms}")
        self.refine = refine
        self.roi_scale = roi_scale
        # mesh-ear measures on the mesh
        self.mesh_reuse_s = mesh_reuse_ms / 1000.0 if refine else 0.0
        self.model_path = path
        self.presence = math.nan  # face-presence probability of the last fit
        self.mesh_runs = 0  # face-mesh inferences so far (reuse makes this smaller than the fits)
        #: compute the head pose at each face-mesh run (``--points``; off: no cost)
        self.pose_wanted = False
        #: (yaw, pitch, roll) in degrees of the last face-mesh run (:func:`head_pose`), None when
        #: not wanted
        self.pose: tuple[float, float, float] | None = None
        # (face, eye corners, presence, time of the mesh, its head pose, its frame)
        self._eyes: tuple[Any, ...] | None = None
        self._t: float | None = None  # timestamp of the frame being fitted (set_time)
        self._frame: int | None = None  # and its index

    # -- the stages -------------------------------------------------------------------------------
    def face_roi(self, face: FaceDetection) -> np.ndarray:
        """MediaPipe's face ROI for a BlazeFace detection: crop -> frame affine."""
        return face_roi(face, self.roi_scale)

    def mesh(self, gray: np.ndarray, roi: np.ndarray) -> np.ndarray:
        """(468, 2) frame-pixel face mesh points in ``roi``; sets :attr:`presence`."""
        it = self._require_open()
        warp_into(it, self._mesh_in, gray, roi, MESH_INPUT)
        it.invoke()
        self.presence = presence_of(it.get_tensor(self._mesh_logit).reshape(-1)[0])
        raw = it.get_tensor(self._mesh_pts)
        self.pose = mesh_pose(raw, roi) if self.pose_wanted else None
        return mesh_to_frame(raw, roi)

    def lid_contour(
        self, gray: np.ndarray, c0: np.ndarray, c1: np.ndarray, *, mirror: bool
    ) -> np.ndarray:
        """(16, 2) frame-pixel lid contour of one eye from the iris network (0, 8: corners)."""
        if self._iris is None:
            raise RuntimeError("lid_contour needs the iris network (MeshFitter(refine=True))")
        m = eye_roi(c0, c1)
        warp_into(self._iris, self._iris_in, gray, m, IRIS_INPUT, mirror=mirror)
        self._iris.invoke()
        return contour_to_frame(self._iris.get_tensor(self._iris_contour), m, mirror=mirror)

    @staticmethod
    def aperture(contour: np.ndarray) -> float:
        """Mean upper-lower distance of the seven contour pairs over the corner distance."""
        return aperture(contour)

    # -- the eye-model protocol -------------------------------------------------------------------
    def fit(self, gray: np.ndarray, face: FaceDetection) -> EyeFit:
        """The eye points and each eye's openness for one face (see the module docstring)."""
        if self._iris is None:
            pts, left, right = mesh_ear_eyes(self._run_mesh(gray, face))
            pose, pose_frame = self.pose, self._frame
        else:
            eyes, t = self._eyes, self._t
            fresh = not (
                eyes is not None
                and eyes[0] is face
                and t is not None
                and 0.0 <= t - eyes[3] < self.mesh_reuse_s
            )
            if fresh:
                self._eye_corners(gray, face)
            contours = self._contours(gray)
            if not fresh and self._moved(contours):
                self._eye_corners(gray, face)
                contours = self._contours(gray)
            pts, left, right = refined_eyes(contours)
            assert self._eyes is not None
            self.presence = self._eyes[2]
            pose, pose_frame = self._eyes[4], self._eyes[5]
        patches = eye_patches(gray, pts) if np.isfinite(pts).all() else None
        return EyeFit(
            points=pts,
            ear_left=left,
            ear_right=right,
            patches=patches,
            presence=self.presence,
            pose=pose,
            pose_frame=pose_frame if pose is not None else None,
        )

    def _run_mesh(self, gray: np.ndarray, face: FaceDetection) -> np.ndarray:
        self.mesh_runs += 1
        return self.mesh(gray, self.face_roi(face))

    def _eye_corners(self, gray: np.ndarray, face: FaceDetection) -> None:
        """Run the face mesh: the eye crops' corners for ``face`` (kept for the next fits of it)."""
        corners = mesh_eye_corners(self._run_mesh(gray, face))
        self._eyes = (
            face,
            corners,
            self.presence,
            self._t if self._t is not None else math.nan,
            self.pose,
            self._frame,
        )

    def _contours(self, gray: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The refined lid contour of each eye (subject's right, left) in the current eye crops."""
        assert self._eyes is not None
        (r0, r1), (l0, l1) = self._eyes[1]
        return (
            self.lid_contour(gray, r0, r1, mirror=False),
            self.lid_contour(gray, l0, l1, mirror=True),
        )

    def _moved(self, contours: tuple[np.ndarray, np.ndarray]) -> bool:
        """Has an eye moved in its crop (corner midpoint or width off the crop's)?"""
        assert self._eyes is not None
        for (c0, c1), contour in zip(self._eyes[1], contours, strict=True):
            width = float(np.hypot(*(c1 - c0)))
            got = float(np.hypot(*(contour[8] - contour[0])))
            shift = float(np.hypot(*((contour[0] + contour[8]) / 2 - (c0 + c1) / 2)))
            if not (shift <= REFIT_SHIFT * width and abs(got / width - 1.0) <= REFIT_SCALE):
                return True  # (a NaN contour refits too)
        return False

    def tracking_state(self) -> tuple[Any, ...] | None:
        """What the next fit reuses (the tracked face's eye crops); part of the frame core's
        tracking state, so that a parallel run whose chunks interleave gives the rows of the
        reference run."""
        return self._eyes

    def restore_tracking(self, state: tuple[Any, ...] | None) -> None:
        """Continue from :meth:`tracking_state`; ``None``: the next fit runs the face mesh."""
        self._eyes = state

    def warm_up(self, gray: np.ndarray) -> None:
        """One fit on ``gray`` (pays XNNPACK's weight packing before the first real frame)."""
        h, w = gray.shape[:2]
        m = square_roi(w / 2, h / 2, min(h, w) / 2, 0.0, MESH_INPUT)
        mesh = self.mesh(gray, m)
        if self._iris is not None:
            self.lid_contour(gray, mesh[33], mesh[133], mirror=False)

    def _require_open(self) -> Any:
        if self._mesh is None:
            raise RuntimeError("MeshFitter is closed")
        return self._mesh

    def close(self) -> None:
        """Release both interpreters; further fits raise ``RuntimeError``. Idempotent."""
        self._mesh = None
        self._iris = None
        self._eyes = None
