"""``--landmarks lids``: the face mesh places the eyes, the project's own lid network measures them.

The ``mesh`` eye model measures each eye's lid aperture with MediaPipe's iris network: two 64x64
runs per frame, more than half of all CPU per frame. ``lids`` (the default eye model) keeps the face
mesh (it places the eyes and gives the face-presence probability) and replaces the two iris runs by
a tiny conv/depthwise network trained by the project (``eyeblink train-lids``;
``weights/lids_v4.tflite``, the default, holds two such networks and gives their mean;
``lids_v1.tflite``, ``lids_v2.tflite`` and ``lids_v3.tflite`` beside it) to reproduce the ``mesh``
aperture, the *teacher*, from the two eye crops:

* the crop: a :data:`STRIP_SHAPE` (40x120, the report's eye-strip shape) upright strip centred
  between the two eyes' corner midpoints (face mesh points 33/133 and 362/263), :data:`STRIP_SPAN`
  inter-ocular distances wide, its x axis from the subject's right eye to the left one
  (:func:`strip_affine`). The eye *corners* place it, not the lid points, so a blink does not move
  the crop;
* the input: the strip's two halves, ``[2, 40, 60, 1]`` float32 in [0, 1] (the subject's right eye,
  then the subject's left eye mirrored: one set of weights serves both eyes, as in MediaPipe's iris
  network);
* the output: ``[2, 2]`` per eye: the aperture on the teacher's scale (the mean upper-lower lid
  distance over the eye width: ~0.25-0.35 open, towards 0 closed) and the log of its expected error
  (:attr:`LidsFitter.confidence` = ``exp(-log_sigma) * CONFIDENCE_SCALE`` clipped to [0, 1]).

The 12 ``EyeFit.points`` are the face mesh's six EAR points per eye (as ``mesh-ear``): the eye
patches and the drift check work on them; the openness comes from the lid network. Reusing the face
mesh for ``mesh_reuse_ms`` works as for ``mesh``: the crops' corners are kept, and the mesh runs
again when the lid network's confidence in either eye falls below :data:`REFIT_CONFIDENCE` (the eye
has left its crop).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.errors import ModelFileError
from eyeblink.landmarks.eyes import EyeFit, FrameTimed, patch_affines, warp_patches
from eyeblink.landmarks.mesh import MeshFitter, mesh_ear_eyes, mesh_eye_corners

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection

#: (rows, columns) of the strip both eyes are cut into (the report's eye-strip shape).
STRIP_SHAPE = (40, 120)
#: Strip width in inter-ocular distances (eye-corner midpoints): an eye is ~0.55 of it, ~40 px of
#: the 120.
STRIP_SPAN = 1.6
#: The network's input: one half of the strip per eye.
EYE_SHAPE = (STRIP_SHAPE[0], STRIP_SHAPE[1] // 2)
#: ``confidence = clip(CONFIDENCE_SCALE * exp(-log_sigma), 0, 1)``: 1 for an expected error <= 0.01
#: (aperture units; open eyes read ~0.3), 0.5 at 0.02.
CONFIDENCE_SCALE = 0.01
#: Below this confidence in either eye a reused face mesh is run again (the eye may have left its
#: crop).
REFIT_CONFIDENCE = 0.25


def eye_centres(
    corners: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """(subject's right eye, subject's left eye) centres: the midpoints of each eye's two
    corners."""
    (r0, r1), (l0, l1) = corners
    return (np.asarray(r0, np.float64) + r1) / 2, (np.asarray(l0, np.float64) + l1) / 2


def strip_affine(
    right: np.ndarray,
    left: np.ndarray,
    shape: tuple[int, int] = STRIP_SHAPE,
    *,
    span: float = STRIP_SPAN,
    pixels: float | None = None,
) -> np.ndarray:
    """2x3 affine from strip pixels to frame pixels for a ``shape`` strip centred between the eye
    centres.

    The x axis runs from the subject's ``right`` eye centre to the ``left`` one; the scale puts
    ``span`` inter-ocular distances across ``pixels`` strip columns (default: the strip's width), so
    a larger ``shape`` with the same ``pixels`` is a context around the same strip (training crops
    from it).
    """
    d = np.asarray(left, np.float64) - np.asarray(right, np.float64)
    iod = max(float(np.hypot(*d)), 1.0)
    h, w = shape
    sc = span * iod / float(pixels if pixels is not None else STRIP_SHAPE[1])
    ang = math.atan2(d[1], d[0])
    ca, sa = math.cos(ang) * sc, math.sin(ang) * sc
    cx, cy = (np.asarray(right, np.float64) + left) / 2
    return np.array(
        [[ca, -sa, cx - ca * w / 2 + sa * h / 2], [sa, ca, cy - sa * w / 2 - ca * h / 2]],
        dtype=np.float64,
    )


def cut_strip(gray: np.ndarray, m: np.ndarray, shape: tuple[int, int] = STRIP_SHAPE) -> np.ndarray:
    """The ``shape`` uint8 strip of ``gray`` under ``m`` (strip -> frame), bilinear, zero outside
    the frame."""
    import cv2

    src = gray if gray.flags.c_contiguous else np.ascontiguousarray(gray)
    return cv2.warpAffine(
        src,
        m,
        (shape[1], shape[0]),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0,
    )


def eye_inputs(strips: np.ndarray) -> np.ndarray:
    """The network's input from ``(N, 40, 120)`` uint8 strips: ``(2N, 40, 60, 1)`` float32 in [0,
    1], per strip the left half (subject's right eye) then the right half mirrored (subject's left
    eye)."""
    s = np.asarray(strips)
    if s.ndim == 2:
        s = s[None]
    half = s.shape[2] // 2
    pair = np.stack([s[:, :, :half], s[:, :, half:][:, :, ::-1]], axis=1)  # (N, 2, h, w/2)
    return (pair.reshape(-1, s.shape[1], half, 1).astype(np.float32)) * np.float32(1.0 / 255.0)


def confidence_of(log_sigma: np.ndarray | float) -> np.ndarray:
    """Per-eye confidence in [0, 1] from the network's log expected error (see the module
    docstring)."""
    # np.clip's values (the product is never -0.0), without its Python wrappers: this runs on every
    # frame
    return np.minimum(
        np.maximum(CONFIDENCE_SCALE * np.exp(-np.asarray(log_sigma, np.float64)), 0.0), 1.0
    )


def load_lid_network(path: Path, fix: str) -> tuple[Any, int, int]:
    """A LiteRT interpreter (one thread) for the lid network at ``path``, checked: input [2, 40, 60,
    1], output [2, 2]. A missing, corrupt or wrong-shaped file is :class:`ModelFileError` (one
    line)."""
    from eyeblink.landmarks.mesh import check_outputs_finite, open_interpreter, shape_of

    it, ins, outs = open_interpreter(path, "lid network", fix)

    want_in = (2, *EYE_SHAPE, 1)
    if (
        len(ins) != 1
        or shape_of(ins[0]) != want_in
        or len(outs) != 1
        or shape_of(outs[0]) != (2, 2)
    ):
        raise ModelFileError(
            f"lid network {path} has inputs {[shape_of(d) for d in ins]} and outputs "
            f"{[shape_of(d) for d in outs]}, expected one input {want_in} and one output "
            f"(2, 2); {fix}"
        )
    check_outputs_finite(it, ins, outs, "lid network", path, fix)
    return it, ins[0]["index"], outs[0]["index"]


class LidNetwork(Closing):
    """The lid network on LiteRT (one thread): ``run(strip) -> (apertures, log_sigmas)`` per eye."""

    def __init__(self, model_path: str | Path | None = None) -> None:
        from eyeblink.weights import lids_path

        fix = (
            "check --landmark-model (a lid network .tflite from eyeblink train-lids: input [2, "
            "40, 60, 1], "
            "output [2, 2])"
            if model_path is not None
            else "restore weights/ from the repository or reinstall eyeblink (see "
            "weights/README.md)"
        )
        self.path = Path(model_path) if model_path is not None else lids_path()
        self._it, self._in, self._out = load_lid_network(self.path, fix)

    def run(self, strip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(aperture, log_sigma) of (subject's right eye, subject's left eye) from one (40, 120)
        uint8 strip."""
        if self._it is None:
            raise RuntimeError("LidNetwork is closed")
        s = np.asarray(strip)
        # eye_inputs' values, written straight into the interpreter's input buffer
        if s.shape == STRIP_SHAPE:
            half, x, scale = EYE_SHAPE[1], self._it.tensor(self._in)(), np.float32(1.0 / 255.0)
            np.multiply(s[:, :half], scale, out=x[0, :, :, 0], casting="unsafe")
            np.multiply(s[:, half:][:, ::-1], scale, out=x[1, :, :, 0], casting="unsafe")
            del x  # no view of the buffer is held while the interpreter runs
        else:
            self._it.set_tensor(self._in, eye_inputs(s))
        self._it.invoke()
        out = self._it.get_tensor(self._out)
        return out[:, 0].astype(np.float64), out[:, 1].astype(np.float64)

    def close(self) -> None:
        """Release the interpreter; further runs raise ``RuntimeError``. Idempotent."""
        self._it = None


class LidsFitter(FrameTimed, Closing):
    """Face mesh (placement) + the project's lid network (aperture). Implements the eye-model
    protocol.

    ``model_path`` is a lid network of one's own (``eyeblink train-lids``); the face mesh is the
    shipped one. One instance per process (LiteRT interpreters are not thread-safe).
    """

    name = "lids"

    def __init__(self, model_path: str | Path | None = None, *, mesh_reuse_ms: float = 0.0) -> None:
        if not mesh_reuse_ms >= 0:
            raise ValueError(f"mesh_reuse_ms must be >= 0, got {mesh_reuse_ms}")
        self._lids = LidNetwork(model_path)
        self._mesher = MeshFitter(refine=False)
        self.model_path = self._lids.path
        self.mesh_reuse_s = mesh_reuse_ms / 1000.0
        self.presence = math.nan
        #: the lid network's confidence in (subject's left, subject's right) eye of the last fit,
        #: [0, 1]
        self.confidence = (math.nan, math.nan)
        self.mesh_runs = 0
        #: the lid network's own time so far (strip cut + LiteRT run, seconds) and its runs: its
        #: cost per frame
        self.network_s = 0.0
        self.network_runs = 0
        # (face, mesh EAR points, strip affine, presence, time, head pose, its frame)
        self._eyes: tuple[Any, ...] | None = None
        # (eye points, their eye-patch affines or None where a point is not finite): the points of a
        # reused face mesh place the same patches on every frame
        self._patch_plan: tuple[np.ndarray, Any] | None = None
        self._t: float | None = None
        self._frame: int | None = None

    @property
    def mesher(self) -> MeshFitter:
        """The face mesh that places the eyes."""
        return self._mesher

    def strip(self, gray: np.ndarray, mesh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (40, 120) uint8 strip for a face mesh and its strip -> frame affine."""
        m = strip_affine(*eye_centres(mesh_eye_corners(mesh)))
        return cut_strip(gray, m), m

    def measure(self, gray: np.ndarray, m: np.ndarray) -> tuple[float, float, np.ndarray]:
        """(ear_left, ear_right, log_sigma per subject's right/left eye) of the strip ``m`` cuts
        from ``gray``."""
        t0 = time.perf_counter()
        ap, ls = self._lids.run(cut_strip(gray, m))
        self.network_s += time.perf_counter() - t0
        self.network_runs += 1
        return float(ap[1]), float(ap[0]), ls

    def fit(self, gray: np.ndarray, face: FaceDetection) -> EyeFit:
        """The eye points (face mesh) and each eye's lid aperture (lid network) for one face."""
        fresh = not self._reusable(face, self._t)
        if fresh:
            self._place(gray, face)
        assert self._eyes is not None
        left, right, ls = self.measure(gray, self._eyes[2])
        conf = confidence_of(ls)
        if not fresh and float(conf.min()) < REFIT_CONFIDENCE:
            self._place(gray, face)
            left, right, ls = self.measure(gray, self._eyes[2])
            conf = confidence_of(ls)
        return self._eye_fit(gray, left, right, conf)

    def _reusable(self, face: FaceDetection, t: float | None) -> bool:
        """Whether the placement held now was made for ``face`` less than ``mesh_reuse_ms``
        before ``t``."""
        eyes = self._eyes
        return (
            eyes is not None
            and eyes[0] is face
            and t is not None
            and 0.0 <= t - eyes[4] < self.mesh_reuse_s
        )

    def _eye_fit(self, gray: np.ndarray, left: float, right: float, conf: np.ndarray) -> EyeFit:
        """The fit's record: the held placement's points, patches and pose with the measured
        apertures."""
        assert self._eyes is not None
        self.confidence = (float(conf[1]), float(conf[0]))
        pts = self._eyes[1]
        self.presence = self._eyes[3]
        plan = self._patch_plan
        if plan is None or plan[0] is not pts:
            plan = self._patch_plan = (pts, patch_affines(pts) if np.isfinite(pts).all() else None)
        patches = warp_patches(gray, plan[1]) if plan[1] is not None else None
        pose = self._eyes[5]
        return EyeFit(
            points=pts,
            ear_left=left,
            ear_right=right,
            patches=patches,
            presence=self.presence,
            pose=pose,
            pose_frame=self._eyes[6] if pose is not None else None,
        )

    # -- placement apart from measurement (keyframe work beside the stream:
    # eyeblink.frame.keyframes) ----------

    def placement(
        self,
        gray: np.ndarray,
        face: FaceDetection,
        t: float,
        frame: int | None,
        mesher: MeshFitter | None = None,
    ) -> tuple[Any, ...]:
        """The face mesh's placement of ``face`` in ``gray`` (a frame at ``t``, index ``frame``),
        without holding it: what :meth:`adopt` takes. ``mesher``: another face mesh than this
        fitter's own (a thread's; the networks are not thread-safe), set up alike."""
        mesher = mesher or self._mesher
        self.mesh_runs += 1
        mesh = mesher.mesh(gray, mesher.face_roi(face))
        pts = mesh_ear_eyes(mesh)[0]
        m = strip_affine(*eye_centres(mesh_eye_corners(mesh)))
        return (face, pts, m, mesher.presence, t, mesher.pose, frame)

    def new_mesher(self) -> MeshFitter:
        """A face mesh set up as this fitter's own (for a thread that places beside it)."""
        return MeshFitter(refine=False)

    def adopt(self, placement: tuple[Any, ...]) -> None:
        """Hold ``placement`` (:meth:`placement`'s) for the fits that follow."""
        self._eyes = placement

    def reusable(self, face: FaceDetection, t: float) -> bool:
        """Whether the held placement serves ``face`` at ``t`` without a new face-mesh run."""
        return self._reusable(face, t)

    def placed_fit(self, gray: np.ndarray, face: FaceDetection) -> tuple[EyeFit, str | None]:
        """The lid network on the placement held for ``face`` (no face-mesh run, whatever its age),
        and whether a new placement is due: ``"unsure"`` when the network's confidence in an eye
        fell below :data:`REFIT_CONFIDENCE` (the eye left its strip: this measurement is not to be
        trusted), ``"stale"`` when the held placement is older than ``mesh_reuse_ms``, else None."""
        assert self._eyes is not None and self._eyes[0] is face, (
            "placed_fit needs a placement of this face"
        )
        left, right, ls = self.measure(gray, self._eyes[2])
        conf = confidence_of(ls)
        due = (
            "unsure"
            if float(conf.min()) < REFIT_CONFIDENCE
            else "stale"
            if not self._reusable(face, self._t)
            else None
        )
        return self._eye_fit(gray, left, right, conf), due

    def _place(self, gray: np.ndarray, face: FaceDetection) -> None:
        """Run the face mesh: the eye points and the strip for ``face`` (kept for the next fits
        of it)."""
        self._eyes = self.placement(
            gray, face, self._t if self._t is not None else math.nan, self._frame
        )

    @property
    def pose_wanted(self) -> bool:
        """Whether each face-mesh run also gives the head pose (``--points``)."""
        return self._mesher.pose_wanted

    @pose_wanted.setter
    def pose_wanted(self, value: bool) -> None:
        self._mesher.pose_wanted = value

    def tracking_state(self) -> tuple[Any, ...] | None:
        """What the next fit reuses (the tracked face's placement); see
        :meth:`MeshFitter.tracking_state`."""
        return self._eyes

    def restore_tracking(self, state: tuple[Any, ...] | None) -> None:
        """Continue from :meth:`tracking_state`; ``None``: the next fit runs the face mesh."""
        self._eyes = state

    def warm_up(self, gray: np.ndarray) -> None:
        """One mesh and one lid-network run on ``gray`` (pays XNNPACK's weight packing up front)."""
        self._mesher.warm_up(gray)
        h, w = gray.shape[:2]
        self._lids.run(
            cut_strip(gray, strip_affine(np.array([w * 0.4, h / 2]), np.array([w * 0.6, h / 2])))
        )

    def close(self) -> None:
        """Release both networks; further fits raise ``RuntimeError``. Idempotent."""
        self._lids.close()
        self._mesher.close()
        self._eyes = None
