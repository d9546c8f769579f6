"""Face detection and eyelids on batches of whole frames: the work of the accelerator stage.

The multiprocess pipeline's accelerator stage (:mod:`eyeblink.runtime.procs.parallel`,
``detect.stage = "accelerator"``) gives one process the device and sends it frames in batches. This
module is what that process runs on a batch, in three batched network calls:

1. BlazeFace on every frame (letterboxed as in :class:`~eyeblink.detect.blazeface.FaceDetector`),
   decoded and reduced to the subject's face at any roll
   (:meth:`~eyeblink.detect.blazeface.FaceDetector.track_many`:
   :func:`~eyeblink.detect.blazeface.select_subject`'s tracking from the previous frame when the
   frames are consecutive, the input turned to the tracked face's roll, a new face looked for at all
   four quarter turns);
2. the face mesh on each face's MediaPipe crop (:func:`~eyeblink.landmarks.mesh.face_roi`);
3. for ``mesh``: the iris network on both eyes of each face (the lid refinement); for ``lids``: the
   project's lid network on each face's eye strip (:mod:`~eyeblink.landmarks.lids`; on every backend
   it runs on LiteRT in the stage's process, on the host CPU: ~0.03 ms a face, less than cutting the
   mesh's crop); else (``mesh-ear``) the mesh's six-point EAR.

Every frame is detected (on an accelerator a detection costs less than the keyframe bookkeeping), so
the rows are those of the reference pipeline run with ``--detect-every 1``: with the ``litert``
backend (batch 1 per call, one frame at a time: the CPU reference) byte for byte, with the Keras
backends (``jax``, ``tensorflow``) to their numerical tolerance against LiteRT
(``tests/test_accelerator.py``). The crops are cut on the host with the functions the CPU eye model
uses (:func:`~eyeblink.landmarks.mesh.warp`), so both paths feed the networks the same pixels.

What the stage returns per frame is an :class:`EyeFit` without eye patches: the patches (and the
report's eye strips) need the frame's pixels and are cut by the CPU workers that receive the
records.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.errors import ConfigError
from eyeblink.landmarks.eyes import EyeFit
from eyeblink.landmarks.mesh import (
    IRIS_INPUT,
    MESH_INPUT,
    ROI_SCALE,
    contour_to_frame,
    eye_roi,
    face_roi,
    mesh_ear_eyes,
    mesh_eye_corners,
    mesh_pose,
    mesh_to_frame,
    presence_of,
    refined_eyes,
    warp,
)

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetection

__all__ = ["BATCHED_BACKENDS", "BATCHED_MODELS", "BatchedFaceEyes", "StageTimes"]

#: The eye models the accelerator stage runs (the face-mesh models: the mesh and iris networks are
#: rebuilt for every backend; the lid network of ``lids`` runs on LiteRT in the stage process).
BATCHED_MODELS = ("mesh", "mesh-ear", "lids")
#: The backends it runs on: LiteRT (the CPU reference) and the Keras rebuild's runtimes.
BATCHED_BACKENDS = ("litert", "jax", "tensorflow")
#: Per-sample output sizes by network: the face mesh (points, presence logit), the iris network
#: (contour + brow).
_MESH_OUT = (1404, 1)
_IRIS_OUT = 213


@dataclass
class StageTimes:
    """Seconds spent per part of the stage's batches: ``detect`` and ``landmarks`` (each with its
    host work: letterbox, crops, decoding), and ``network``, the part of both spent in the network
    calls (on a GPU: the device's time plus the transfers); the rest is host work that bounds the
    stage whatever the device."""

    seconds: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("detect", "landmarks", "network"), 0.0)
    )
    frames: int = 0
    batches: int = 0


class _Timed:
    """A network (``run``) or detector (``detect``) whose calls add their time to
    ``times.seconds["network"]``."""

    def __init__(self, net: Any, owner: Any) -> None:
        self.net = net
        self.owner = owner  # whose ``times`` it adds to (the engine resets them after its warm-up)

    def _timed(self, fn: Any, x: np.ndarray) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(x)
        finally:
            self.owner.times.seconds["network"] += time.perf_counter() - t0

    def run(self, batch: np.ndarray) -> dict[int, np.ndarray]:
        return self._timed(self.net.run, batch)

    def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._timed(self.net.detect, batch)

    def close(self) -> None:
        self.net.close()


class _LiteRTNet:
    """A LiteRT network called one sample at a time (batch-1 interpreters: the CPU reference
    numerics)."""

    def __init__(self, interpreter: Any, input_index: int, outputs: list[dict[str, Any]]) -> None:
        self._it = interpreter
        self._in = input_index
        self._outs = [(int(np.prod(d["shape"])), d["index"]) for d in outputs]

    def run(self, batch: np.ndarray) -> dict[int, np.ndarray]:
        got: dict[int, list[np.ndarray]] = {size: [] for size, _ in self._outs}
        for x in batch:
            self._it.set_tensor(self._in, x[None])
            self._it.invoke()
            for size, index in self._outs:
                got[size].append(self._it.get_tensor(index).reshape(-1).copy())
        return {size: np.stack(v) for size, v in got.items()}


class _KerasNet:
    """A Keras network (:class:`~eyeblink.detect.keras_graph.BucketedRunner`) with its outputs by
    per-sample size."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def run(self, batch: np.ndarray) -> dict[int, np.ndarray]:
        outs = self.runner.run(batch)
        return {int(np.prod(o.shape[1:])): o.reshape(o.shape[0], -1) for o in outs}


class _LidsNet:
    """The lid network (LiteRT, host CPU) on one strip: ``run(strip) -> apertures`` (subject's
    right, left eye)."""

    def __init__(self, net: Any) -> None:
        self.net = net

    def run(self, strip: np.ndarray) -> np.ndarray:
        return self.net.run(strip)[0]

    def close(self) -> None:
        self.net.close()


def _keras_network(
    backend: str, name: str, path: Path | None, batch_size: int, jit_compile: bool
) -> Any:
    if backend == "jax":
        from eyeblink.detect.jax import jax_network

        return jax_network(name, model_path=path, batch_size=batch_size)
    from eyeblink.detect.tensorflow import keras_network

    return keras_network(name, model_path=path, batch_size=batch_size, jit_compile=jit_compile)


class BatchedFaceEyes(Closing):
    """BlazeFace + face mesh (+ iris lid refinement) on batches of grayscale frames, on one backend.

    ``backend``: ``litert`` (CPU, one sample per call), ``jax`` or ``tensorflow`` (the Keras rebuild
    of the three networks, XLA-compiled per batch bucket up to ``batch_size``). ``refine``: the
    ``mesh`` model's lid aperture from the iris network; ``lids``: the ``lids`` model's, from the
    lid network (``lids_model``: a file of one's own); neither: ``mesh-ear``'s six-point EAR. One
    instance per process.
    """

    def __init__(
        self,
        backend: str,
        *,
        batch_size: int = 64,
        refine: bool = True,
        face_model: str | Path | None = None,
        mesh_model: str | Path | None = None,
        score_threshold: float = 0.5,
        iou_threshold: float = 0.3,
        roi_scale: float = ROI_SCALE,
        jit_compile: bool = True,
        num_threads: int = 1,
        lids: bool = False,
        lids_model: str | Path | None = None,
    ) -> None:
        from eyeblink.detect import create_detector
        from eyeblink.detect.blazeface import FaceDetector

        if backend not in BATCHED_BACKENDS:
            raise ConfigError(
                "the accelerator stage runs on the litert, jax or tensorflow backend, not "
                f"{backend!r}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if refine and lids:
            raise ValueError(
                "refine (the iris network) and lids (the lid network) measure the same lids: pick "
                "one"
            )
        self.backend = backend
        self.batch_size = int(batch_size)
        self._lids: Any = None
        if lids:
            from eyeblink.landmarks.lids import LidNetwork

            self._lids = _Timed(_LidsNet(LidNetwork(lids_model)), self)
        self.roi_scale = roi_scale
        self.times = StageTimes()
        fpath = Path(face_model) if face_model is not None else None
        mpath = Path(mesh_model) if mesh_model is not None else None
        if backend == "litert":
            from eyeblink.landmarks.mesh import MeshFitter

            # batch 1 per call: the numbers of the CPU reference (LiteRT's batched kernels may round
            # differently)
            det = create_detector("litert", model_path=fpath, num_threads=num_threads, batch_size=1)
            # its interpreters, checked as for the CPU eye model
            fitter = MeshFitter(mpath, refine=refine)
            self._fitter: Any = fitter
            self._mesh: Any = _LiteRTNet(
                fitter._mesh, fitter._mesh_in, fitter._mesh.get_output_details()
            )
            self._iris: Any = (
                _LiteRTNet(fitter._iris, fitter._iris_in, fitter._iris.get_output_details())
                if refine
                else None
            )
            self._det_batch = 1
        else:
            from eyeblink.detect import AcceleratorOptions

            accel = AcceleratorOptions(jit_compile=jit_compile)
            det = create_detector(
                backend,
                model_path=fpath,
                num_threads=num_threads,
                batch_size=batch_size,
                accelerator=accel,
            )
            self._fitter = None
            self._mesh = _KerasNet(_keras_network(backend, "mesh", mpath, batch_size, jit_compile))
            self._iris = (
                _KerasNet(_keras_network(backend, "iris", None, 2 * batch_size, jit_compile))
                if refine
                else None
            )
            self._det_batch = batch_size
        self._det: Any = det
        self._mesh = _Timed(self._mesh, self)
        if self._iris is not None:
            self._iris = _Timed(self._iris, self)
        timed: Any = _Timed(det, self)
        self.detector = FaceDetector.from_detector(
            timed,
            batch_size=self._det_batch,
            score_threshold=score_threshold,
            iou_threshold=iou_threshold,
        )
        self.device = str(getattr(det, "device", "cpu"))
        #: also each face's head pose from its mesh (``--points``; the fits' ``pose``, their
        #: ``pose_frame`` None: every frame runs the mesh here)
        self.pose_wanted = False

    def warm_up(self, shape: tuple[int, int], *, up_to: int = 1) -> None:
        """Pack (LiteRT) or compile (Keras backends) the networks before the first frame: the
        programs for batches of up to ``up_to`` frames (live streams, whose batches the deadline
        keeps small, compile theirs before the capture starts; files compile the rest on first use:
        a full batch is a few programs)."""
        self.analyze([np.full(shape, 128, np.uint8)])
        if self._fitter is None:
            frames = [b for b in self._mesh.net.runner.buckets if b <= max(1, up_to)]
            self._det.warmup(frames)
            self._mesh.net.runner.warmup(frames)
            if self._iris is not None:
                self._iris.net.runner.warmup([2 * b for b in frames])
        self.times = StageTimes()

    def analyze(
        self,
        images: Sequence[np.ndarray],
        *,
        previous: FaceDetection | None = None,
        chained: Sequence[bool] | None = None,
    ) -> list[tuple[FaceDetection | None, EyeFit | None]]:
        """The subject's face and its eye fit (without patches) in each frame.

        ``chained[j]``: frame ``j`` directly follows frame ``j - 1`` (for ``j = 0``: follows the
        frame whose face was ``previous``), so the subject is tracked from it
        (:func:`select_subject`).
        """
        n = len(images)
        if n == 0:
            return []
        t0 = time.perf_counter()
        # the subject at any roll, tracked as the reference pipeline tracks it (FaceDetector.track)
        faces = self.detector.track_many(images, previous, chained)
        t1 = time.perf_counter()
        with_face = [j for j in range(n) if faces[j] is not None]
        fits: list[EyeFit | None] = [None] * n
        if with_face:
            rois = [face_roi(faces[j], self.roi_scale) for j in with_face]  # type: ignore[arg-type]
            crops = np.concatenate(
                [warp(images[j], m, MESH_INPUT) for j, m in zip(with_face, rois, strict=True)]
            )
            out = self._mesh.run(crops)
            meshes = [mesh_to_frame(out[_MESH_OUT[0]][k], m) for k, m in enumerate(rois)]
            presence = [presence_of(out[_MESH_OUT[1]][k][0]) for k in range(len(rois))]
            poses = (
                [mesh_pose(out[_MESH_OUT[0]][k], m) for k, m in enumerate(rois)]
                if self.pose_wanted
                else [None] * len(rois)
            )
            if self._lids is not None:
                from eyeblink.landmarks.lids import cut_strip, eye_centres, strip_affine

                for k, j in enumerate(with_face):
                    pts = mesh_ear_eyes(meshes[k])[0]
                    strip = cut_strip(
                        images[j], strip_affine(*eye_centres(mesh_eye_corners(meshes[k])))
                    )
                    ap = self._lids.run(strip)
                    fits[j] = EyeFit(
                        points=pts,
                        ear_left=float(ap[1]),
                        ear_right=float(ap[0]),
                        presence=presence[k],
                        pose=poses[k],
                    )
            elif self._iris is None:
                for k, j in enumerate(with_face):
                    pts, left, right = mesh_ear_eyes(meshes[k])
                    fits[j] = EyeFit(
                        points=pts,
                        ear_left=left,
                        ear_right=right,
                        presence=presence[k],
                        pose=poses[k],
                    )
            else:
                eye_rois: list[np.ndarray] = []
                eye_crops: list[np.ndarray] = []
                for k, j in enumerate(with_face):
                    # subject's right eye, then left
                    for e, (c0, c1) in enumerate(mesh_eye_corners(meshes[k])):
                        m = eye_roi(c0, c1)
                        eye_rois.append(m)
                        eye_crops.append(warp(images[j], m, IRIS_INPUT, mirror=e == 1))
                raw = self._iris.run(np.concatenate(eye_crops))[_IRIS_OUT]
                for k, j in enumerate(with_face):
                    contours = (
                        contour_to_frame(raw[2 * k], eye_rois[2 * k], mirror=False),
                        contour_to_frame(raw[2 * k + 1], eye_rois[2 * k + 1], mirror=True),
                    )
                    pts, left, right = refined_eyes(contours)
                    fits[j] = EyeFit(
                        points=pts,
                        ear_left=left,
                        ear_right=right,
                        presence=presence[k],
                        pose=poses[k],
                    )
        t2 = time.perf_counter()
        self.times.seconds["detect"] += t1 - t0
        self.times.seconds["landmarks"] += t2 - t1
        self.times.frames += n
        self.times.batches += 1
        return list(zip(faces, fits, strict=True))

    def close(self) -> None:
        """Release the networks. Idempotent."""
        self.detector.close()
        if self._fitter is not None:
            self._fitter.close()
        if self._lids is not None:
            self._lids.close()
        self._mesh = self._iris = self._lids = None
