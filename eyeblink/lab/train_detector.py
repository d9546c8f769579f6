"""Fine-tune BlazeFace on a lab's own recordings (``eyeblink train-detector``).

Why: BlazeFace's box jitters a little from frame to frame even on a still face; at 500 FPS the
face-mesh crop follows it, and a camera unlike MediaPipe's training data (infrared, a nozzle in
front of the eye, a small or rolled face) can cost recall. This command adapts the shipped
short-range model to *your* frames and reports the change on frames of other subjects.

How (distillation from a slower, steadier teacher):

* **Frames**: every ``--every``-th frame of the training inputs (videos or image folders), at most
  ``--max-frames`` per input. The ``--holdout`` inputs (other subjects!) are never sampled for
  training; the report is measured on them.
* **Teacher labels**, on the clean frame: the face mesh (:mod:`eyeblink.landmarks.mesh`, 468
  points) on MediaPipe's ROI of the stock BlazeFace box, then again on the ROI of the box derived
  from that first mesh, each time averaged over 9 slightly shifted and scaled ROIs
  (:func:`teacher_mesh`). The box is derived from the mean and spread of
  all 468 points, which average out the noise of any single point: with ``(mx, my)`` the mean and
  ``(sx, sy)`` the standard deviation of the points along x and y, the box centre is
  ``(mx + ox*sx, my + oy*sy)`` and its size ``(kw*sx, kh*sy)``. ``ox, oy, kw, kh`` are fitted per
  training recording (medians of the per-frame values; :func:`fits_per_input`) against the stock
  detector's boxes, so each face keeps the box BlazeFace gives it on average, only steadier; the fit
  over all frames is printed, in the JSON, and used for inputs of fewer than 5 frames.
  The six keypoints, subject's viewpoint as :class:`~eyeblink.detect.blazeface.Keypoint`: right
  eye = midpoint of mesh 33 and 133 (its corners: they stay put when the lids close, so a blink
  does not move the label), left eye = midpoint of 362 and 263, nose tip = 1, mouth centre = mean
  of 13 and 14 (inner lips), right ear tragion = 234, left ear tragion = 454 (the face-contour
  points at the tragion); each plus a fitted median offset (in the face frame: along / across the
  eye line, in units of ``sqrt(sx*sy)``) to the stock keypoints.
* **Augmentation** (the clean frame plus ``--augment`` copies; frame and the 468 teacher points
  go through the same affine, then the labels are derived from the moved points): roll +-20 deg,
  scale (faces down to ~1/8 of the frame's long side) and shift, Gaussian blur, gamma, gain and
  offset, sensor noise, horizontal flicker banding, and in a third of the copies an occluding bar
  from the frame edge to near one eye (an air-puff nozzle), dark or bright.
* **Model**: BlazeFace rebuilt in Keras from the ``.tflite`` (trainable, initialised with the
  shipped weights). Anchors: the 896 short-range anchors; for matching each anchor gets its SSD
  size (MediaPipe's options with ``fixed_anchor_size`` off). A label's anchors are those of
  IoU >= 0.5 plus the best one; anchors below IoU 0.35 are negatives, in between ignored.
* **Loss** (BlazeFace's / SSD's): Huber regression of box centre, size and the 6 keypoints in
  anchor-relative input pixels (the exact inverse of :func:`eyeblink.detect.blazeface.decode`,
  see :func:`encode`) over the positive anchors, plus sigmoid cross-entropy over the positives
  and the hardest negatives, 3 per positive. Adam, small learning rate, few epochs.
* **Device**: the training steps run on the CPU (TensorFlow, the default) or, with ``--device ipu``,
  on Graphcore IPUs through the Poplar SDK's TensorFlow 2 (``IPUStrategy``, Keras ``fit`` with
  ``steps_per_execution``, I/O tiles and prefetch depth from an IPU preset, ``--pipeline``; optional
  replicas and gradient accumulation): the same loss, given to ``compile``
  (:mod:`eyeblink.lab.train_detector_ipu`). The IPU path was not run on IPU hardware; its tests use
  a stand-in for the SDK.
* **Export**: a ``.tflite`` with the stock file's interface (input ``[1, 128, 128, 3]``, outputs
  ``regressors [1, 896, 16]`` and ``classificators [1, 896, 1]``, per-grid order when resized to a
  batch, as the stock file), so ``eyeblink process --face-model tuned.tflite`` takes it; its sha256
  is written beside it (``tuned.tflite.sha256``).
* **Report**: recall, false boxes per frame and box jitter (1 - IoU of the face's box in
  consecutive frames, median and p90: the measurement of ``eyeblink bench detectors``) of the stock
  model, the teacher box and the tuned model on frame pairs of the held-out inputs, ms per
  640x480 frame on one core, and training images/s per epoch; and recall, false boxes and jitter of
  the stock and tuned models on the same pairs augmented (one random augmentation per pair, alike
  for both frames): the camera conditions above, on held-out subjects.

Needs TensorFlow (``pip install "eyeblink[tf]"``); ``--device ipu`` needs Graphcore's TensorFlow
wheel from the Poplar SDK instead.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, InputNotFoundError
from eyeblink.lab import add_command
from eyeblink.lab.train_detector_data import (
    MESH_KEYPOINTS,
    NEG_IOU,
    POS_IOU,
    TEACHER_ROIS,
    Dataset,
    Labelled,
    TeacherFit,
    augment,
    batch_targets,
    build_dataset,
    encode,
    fit_teacher,
    fits_per_input,
    label_frames,
    match,
    matching_anchors,
    teacher_mesh,
)
from eyeblink.lab.train_detector_eval import augmented_pairs, evaluate, table, verdict
from eyeblink.outputs.paths import OutputPlan, atomic_path, write_text

if TYPE_CHECKING:
    import numpy as np


# the training data's and the report's names (train_detector_data, _eval) were defined here before:
# importable from here still
__all__ = [
    "HUBER_DELTA",
    "LOSS_WEIGHTS",
    "MESH_KEYPOINTS",
    "NEG_IOU",
    "NEG_PER_POS",
    "POS_IOU",
    "REG_WEIGHT",
    "TEACHER_ROIS",
    "Dataset",
    "IPUTraining",
    "Labelled",
    "TeacherFit",
    "add_parser",
    "augment",
    "augmented_pairs",
    "batch_targets",
    "blazeface_loss",
    "build_dataset",
    "build_trainable_blazeface",
    "classification_loss",
    "encode",
    "evaluate",
    "export_tflite",
    "fit_teacher",
    "fits_per_input",
    "ipu_accelerator",
    "keras_losses",
    "keras_targets",
    "label_frames",
    "make_train_step",
    "match",
    "matching_anchors",
    "regression_loss",
    "require_tensorflow",
    "run",
    "table",
    "teacher_mesh",
    "train",
    "train_ipu",
    "training_dataset",
    "training_keras",
    "verdict",
]

NEG_PER_POS = 3
HUBER_DELTA = 1.0  # input pixels
REG_WEIGHT = 0.5


def require_tensorflow() -> None:
    """ConfigError naming the install command when TensorFlow cannot be imported."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        raise ConfigError(
            'train-detector needs TensorFlow, which is not installed: pip install "eyeblink[tf]"'
        ) from None


def build_trainable_blazeface(
    model_path: Path | None = None, *, batch_size: int | None = None
) -> Any:
    """The trainable Keras BlazeFace initialised from ``model_path`` (default: the shipped model).

    ``batch_size`` fixes the batch dimension (the IPU compiles static shapes); None leaves it free.
    The one place this module reaches the Keras rebuild; re-point it here when the builder moves.
    """
    from eyeblink.detect.keras_graph import build_keras_blazeface

    training_keras()
    return build_keras_blazeface(model_path, batch_size=batch_size)


def training_keras() -> Any:
    """The Keras module, on TensorFlow (training and export run on TensorFlow)."""
    from eyeblink.detect.keras_graph import use_keras_backend

    return use_keras_backend("tensorflow", eyeblink_backend="train-detector")


# --------------------------------------------------------------------------- training and export


def regression_loss(reg: Any, tgt: Any, pos: Any) -> Any:
    """Huber loss of box and keypoints (anchor-relative input pixels), mean over the positive
    anchors.

    ``reg`` and ``tgt`` ``[B, 896, 16]``, ``pos`` ``[B, 896]`` (bool or 0/1). The one definition,
    used by the CPU step (:func:`blazeface_loss`) and the IPU path's Keras loss
    (:mod:`eyeblink.lab.train_detector_ipu`).
    """
    import tensorflow as tf

    pos_f = tf.cast(pos, tf.float32)
    n_pos = tf.maximum(tf.reduce_sum(pos_f), 1.0)
    err = tf.abs(reg - tgt)
    huber = tf.where(err < HUBER_DELTA, 0.5 * err * err / HUBER_DELTA, err - 0.5 * HUBER_DELTA)
    return tf.reduce_sum(tf.reduce_mean(huber, -1) * pos_f) / n_pos


def classification_loss(logits: Any, pos: Any, neg: Any) -> Any:
    """Sigmoid cross-entropy over the positive anchors and the hardest negatives (NEG_PER_POS per
    positive).

    ``logits`` ``[B, 896]``, ``pos``/``neg`` ``[B, 896]`` bool. The one definition (see
    :func:`regression_loss`).
    """
    import tensorflow as tf

    pos = tf.cast(pos, tf.bool)
    neg = tf.cast(neg, tf.bool)
    pos_f = tf.cast(pos, tf.float32)
    bce = tf.nn.sigmoid_cross_entropy_with_logits(labels=pos_f, logits=logits)
    neg_loss = tf.where(neg, bce, -1.0)
    k = tf.cast(tf.reduce_sum(pos_f, 1) * NEG_PER_POS, tf.int32)
    ranked = tf.sort(neg_loss, axis=1, direction="DESCENDING")
    kth = tf.gather(ranked, tf.clip_by_value(k - 1, 0, ranked.shape[1] - 1), batch_dims=1)
    hard = neg & (neg_loss >= kth[:, None]) & (k[:, None] > 0)
    hard_f = tf.cast(hard, tf.float32)
    return tf.reduce_sum(bce * (pos_f + hard_f)) / tf.maximum(tf.reduce_sum(pos_f + hard_f), 1.0)


def blazeface_loss(reg: Any, logits: Any, tgt: Any, pos: Any, neg: Any) -> tuple[Any, Any, Any]:
    """BlazeFace's loss ``(total, classification, regression)``: ``total = cls + REG_WEIGHT *
    reg``."""
    cls_loss = classification_loss(logits, pos, neg)
    reg_loss = regression_loss(reg, tgt, pos)
    return cls_loss + REG_WEIGHT * reg_loss, cls_loss, reg_loss


def make_train_step(model: Any, learning_rate: float, *, jit: bool = False) -> Any:
    """A compiled step ``(x, targets, pos, neg) -> (loss, cls, reg)`` with BlazeFace's loss
    (:func:`blazeface_loss`).

    Grappler's remapper is turned off: with it, TensorFlow 2.21's CPU build (oneDNN) crashes
    (segmentation fault) in the graph of this model's gradient; eager mode,
    ``TF_ENABLE_ONEDNN_OPTS=0`` and XLA (``jit``) do not.
    """
    import tensorflow as tf

    from eyeblink.detect.tensorflow import disable_remapper

    disable_remapper()
    opt = tf.keras.optimizers.Adam(learning_rate)

    spec = [
        tf.TensorSpec([None, 128, 128, 3], tf.float32),
        tf.TensorSpec([None, 896, 16], tf.float32),
        tf.TensorSpec([None, 896], tf.bool),
        tf.TensorSpec([None, 896], tf.bool),
    ]

    @tf.function(input_signature=spec, jit_compile=jit, autograph=False)
    def step(x: Any, tgt: Any, pos: Any, neg: Any) -> Any:
        with tf.GradientTape() as tape:
            reg, logits = model(x, training=True)
            loss, cls_loss, reg_loss = blazeface_loss(reg, logits, tgt, pos, neg)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss, cls_loss, reg_loss

    return step


#: ``compile``'s ``loss_weights`` for :func:`keras_losses` (outputs: regressors, scores): the
#: weighting of :func:`blazeface_loss`, ``cls + REG_WEIGHT * reg``.
LOSS_WEIGHTS = (REG_WEIGHT, 1.0)


def keras_targets(
    tgt: np.ndarray, pos: np.ndarray, neg: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`batch_targets`' targets as one float32 array per model output, for Keras' ``fit``.

    Regressors: ``[..., 896, 17]``, the 16 targets and the positive mask; scores: ``[..., 896, 2]``,
    the positive and negative masks. :func:`keras_losses` unpacks them.
    """
    import numpy as np

    return (
        np.concatenate([tgt, pos[..., None]], axis=-1).astype(np.float32),
        np.stack([pos, neg], axis=-1).astype(np.float32),
    )


def keras_losses(keras: Any) -> list[Any]:
    """BlazeFace's loss as two Keras losses for ``compile`` (with :data:`LOSS_WEIGHTS`), one per
    output.

    They call :func:`regression_loss` and :func:`classification_loss` on the targets of
    :func:`keras_targets`: the CPU step's loss, not a copy. Each returns the batch's value (a
    scalar), which Keras' reduction keeps as it is.
    """

    class BoxKeypointsHuber(keras.losses.Loss):
        def call(self, y_true: Any, y_pred: Any) -> Any:
            return regression_loss(y_pred, y_true[..., :16], y_true[..., 16] > 0.5)

    class HardNegativeCrossEntropy(keras.losses.Loss):
        def call(self, y_true: Any, y_pred: Any) -> Any:
            return classification_loss(y_pred, y_true[..., 0] > 0.5, y_true[..., 1] > 0.5)

    return [
        BoxKeypointsHuber(name="box_keypoints_huber"),
        HardNegativeCrossEntropy(name="classification"),
    ]


def training_dataset(ds: Dataset, *, batch_size: int, seed: int, prefetch_depth: int = 2) -> Any:
    """A repeating ``tf.data`` dataset of ``(x, (regressor targets, score targets))`` batches of
    static shape.

    Each pass over the samples takes a new random order (seeded by ``seed`` and the pass); the
    inputs and targets are :func:`batch_targets`' (packed by :func:`keras_targets`), and
    ``batch(batch_size, drop_remainder=True)`` leaves out the samples that do not fill a batch, so
    every batch has ``batch_size`` samples, as an IPU program needs.
    """
    import itertools

    import numpy as np
    import tensorflow as tf

    n = ds.images.shape[0]
    full = n // batch_size * batch_size
    passes = itertools.count()

    def samples() -> Any:
        order = np.random.default_rng([seed, next(passes)]).permutation(n)
        for s in range(0, full, batch_size):
            x, tgt, pos, neg = batch_targets(ds, order[s : s + batch_size])
            y_reg, y_cls = keras_targets(tgt, pos, neg)
            for i in range(len(x)):
                yield x[i], (y_reg[i], y_cls[i])

    signature = (
        tf.TensorSpec((128, 128, 3), tf.float32),
        (tf.TensorSpec((896, 17), tf.float32), tf.TensorSpec((896, 2), tf.float32)),
    )
    data = tf.data.Dataset.from_generator(samples, output_signature=signature)
    return data.batch(batch_size, drop_remainder=True).repeat().prefetch(prefetch_depth)


def train(
    model: Any,
    ds: Dataset,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    jit: bool = False,
    log: Any = print,
) -> list[dict[str, float]]:
    """Fine-tune ``model`` in place; per epoch: loss parts, seconds and images/s (target building
    included).

    The step's graph is traced before the first epoch (``trace_s`` in the first epoch's entry), so
    that every epoch's images/s is the steady rate.
    """
    import numpy as np

    step = make_train_step(model, learning_rate, jit=jit)
    t0 = time.perf_counter()
    step.get_concrete_function()
    trace_s = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    n = ds.images.shape[0]
    history = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(n)
        t0 = time.perf_counter()
        parts = []
        for s in range(0, n, batch_size):
            x, tgt, pos, neg = batch_targets(ds, order[s : s + batch_size])
            parts.append([float(v) for v in step(x, tgt, pos, neg)] + [len(x)])
        secs = time.perf_counter() - t0
        p = np.asarray(parts)
        mean = (p[:, :3] * p[:, 3:]).sum(0) / p[:, 3].sum()
        history.append(
            {
                **({"trace_s": trace_s} if epoch == 1 else {}),
                "epoch": epoch,
                "loss": float(mean[0]),
                "cls_loss": float(mean[1]),
                "reg_loss": float(mean[2]),
                "seconds": secs,
                "images_per_s": n / secs,
            }
        )
        log(
            f"  epoch {epoch}/{epochs}: loss {mean[0]:.4f} (cls {mean[1]:.4f}, box+keypoints "
            f"Huber {mean[2]:.3f}), "
            f"{secs:.0f} s, {n / secs:.1f} images/s",
            flush=True,
        )
    return history


@dataclass
class IPUTraining:
    """What :func:`train_ipu` returns: the model to export, the device's model, the history and
    the report entry."""

    model: Any  # the host copy (batch dimension free): export_tflite takes it
    device_model: Any  # as built and trained under IPUStrategy (static batch)
    history: list[dict[str, Any]]
    plan: Any  # train_detector_ipu.IPUTrainingPlan
    report: dict[str, Any]


def train_ipu(
    ds: Dataset,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    accelerator: Any,
    steps_per_execution: int | None = None,
    gradient_accumulation: int = 1,
    log: Any = print,
) -> IPUTraining:
    """Fine-tune BlazeFace through Graphcore's TensorFlow (:mod:`eyeblink.lab.train_detector_ipu`).

    The same model, loss (:func:`keras_losses`) and inputs as :func:`train`; ``batch_size`` is per
    replica; ``accelerator`` (:class:`~eyeblink.detect.AcceleratorOptions`) carries the preset's I/O
    tiles, prefetch depth and replicas. The trained weights are copied into a model with a free
    batch dimension for :func:`export_tflite`.
    """
    from eyeblink.detect.tensorflow import disable_remapper
    from eyeblink.lab import train_detector_ipu as tdi

    ipu = tdi.require_ipu()
    plan = tdi.plan_ipu_training(
        ds.images.shape[0],
        batch_size=batch_size,
        accelerator=accelerator,
        steps_per_execution=steps_per_execution,
        gradient_accumulation=gradient_accumulation,
    )
    keras = training_keras()
    disable_remapper()
    s = plan.settings
    log(
        f"training through {tdi.IPU_MODULE}: IPUConfig {s.ipu_config_fields()}, batch "
        f"{s.batch_size} per replica "
        f"x {s.replicas} replica(s) x gradient accumulation {plan.gradient_accumulation} = "
        f"{plan.images_per_update} "
        f"images per update, {plan.steps_per_execution} steps per execution, "
        f"{plan.steps_per_epoch} steps "
        f"({plan.images_per_epoch} of {plan.samples} samples) per epoch",
        flush=True,
    )
    device_model, history, applied = tdi.fit_on_ipu(
        plan,
        keras=keras,
        build_model=lambda b: build_trainable_blazeface(batch_size=b),
        losses=keras_losses(keras),
        loss_weights=list(LOSS_WEIGHTS),
        dataset=training_dataset(
            ds, batch_size=s.batch_size, seed=seed, prefetch_depth=s.prefetch_depth
        ),
        learning_rate=learning_rate,
        epochs=epochs,
        log=log,
    )
    model = build_trainable_blazeface()
    model.set_weights(device_model.get_weights())
    report = {
        "ran": f"the training steps through {tdi.IPU_MODULE} (IPUStrategy, Keras fit); this "
        "report does not "
        "check which hardware that module drove",
        "sdk_module": getattr(ipu, "__file__", None),
        **plan.to_dict(),
        "keras_ipu_options": applied,
    }
    return IPUTraining(model, device_model, history, plan, report)


def export_tflite(model: Any, path: Path) -> str:
    """Write ``model`` as a ``.tflite`` with the stock interface; returns its sha256 (also in
    ``path.sha256``)."""
    import tensorflow as tf
    from tensorflow.lite.tools import flatbuffer_utils
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    grid = 16 * 16 * 2

    @tf.function(
        input_signature=[tf.TensorSpec([None, 128, 128, 3], tf.float32, name="input")],
        autograph=False,
    )
    def serve(x: Any) -> Any:
        reg, scores = model(x, training=False)
        # the stock graph reshapes each head to [1, -1, C] and concatenates: per-grid order for a
        # batch
        reg = tf.concat(
            [tf.reshape(reg[:, :grid], [1, -1, 16]), tf.reshape(reg[:, grid:], [1, -1, 16])], 1
        )
        scores = tf.concat(
            [tf.reshape(scores[:, :grid], [1, -1, 1]), tf.reshape(scores[:, grid:], [1, -1, 1])], 1
        )
        return {"regressors": reg, "classificators": scores}

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    flat = tf.lite.TFLiteConverter.from_concrete_functions([frozen]).convert()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.tflite"
        raw.write_bytes(flat)
        fb = flatbuffer_utils.read_model(str(raw))
        graph = fb.subgraphs[0]
        for i in graph.outputs:  # the LiteRT backend finds its outputs by these names
            t = graph.tensors[i]
            t.name = (
                b"regressors"
                if int(t.shapeSignature[-1] if t.shapeSignature is not None else t.shape[-1]) == 16
                else b"classificators"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        # whole or not at all: a failure keeps the model that was there
        with atomic_path(path) as out:
            flatbuffer_utils.write_model(fb, str(out))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    write_text(Path(str(path) + ".sha256"), f"{digest}  {path.name}\n", "-o")
    return digest


# --------------------------------------------------------------------------- the command


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        "train-detector",
        __doc__,
        help="fine-tune the BlazeFace face detector on your own camera's frames (TensorFlow)",
    )
    p.add_argument(
        "inputs", nargs="+", metavar="VIDEO_OR_DIR", help="training recordings or image folders"
    )
    p.add_argument(
        "--holdout",
        nargs="+",
        required=True,
        metavar="VIDEO_OR_DIR",
        help="held-out recordings (other subjects!), never trained on: the before/after report",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="TFLITE", help="the tuned model (.tflite)"
    )
    p.add_argument(
        "--every",
        type=int,
        default=5,
        metavar="N",
        help="sample every N-th frame (default %(default)s)",
    )
    p.add_argument(
        "--max-frames",
        type=int,
        default=60,
        metavar="N",
        help="at most N training frames per input (default %(default)s)",
    )
    p.add_argument(
        "--augment",
        type=int,
        default=3,
        metavar="K",
        help="augmented copies per training frame, besides the frame itself (default %(default)s)",
    )
    p.add_argument(
        "--epochs", type=int, default=8, metavar="E", help="training epochs (default %(default)s)"
    )
    p.add_argument("--batch-size", type=int, default=32, metavar="B", help="(default %(default)s)")
    p.add_argument(
        "--learning-rate",
        type=float,
        default=3e-4,
        metavar="LR",
        help="Adam's (default %(default)s)",
    )
    p.add_argument(
        "--max-pairs",
        type=int,
        default=150,
        metavar="K",
        help="held-out frame pairs (every --every-th frame and the next), at most K (default "
        "%(default)s)",
    )
    p.add_argument(
        "--timing-frames",
        type=int,
        default=30,
        metavar="T",
        help="640x480 frames timed (default 30)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the frame sampling, augmentation and training order (default: %(default)s)",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write the report as JSON")
    p.add_argument(
        "--device",
        choices=("cpu", "ipu"),
        default="cpu",
        help="where the training steps run: cpu (TensorFlow) or ipu (Graphcore IPUs through the "
        "Poplar SDK's "
        "TensorFlow 2; tested with a stand-in for the SDK only, not on IPU hardware); labelling, "
        "export and the "
        "report run on the CPU either way (default: %(default)s)",
    )
    g = p.add_argument_group(
        "--device ipu (Graphcore's TensorFlow 2; --batch-size is then per replica)"
    )
    g.add_argument(
        "--pipeline",
        metavar="PRESET",
        default=None,
        help="IPU preset whose I/O tiles, infeed prefetch depth and replicas are used: ipu-mk1, "
        "ipu-mk2, "
        'low-latency or a TOML file with backend = "ipu" (default: ipu-mk2)',
    )
    g.add_argument(
        "--replicas",
        type=int,
        default=None,
        metavar="R",
        help="IPUs each training a copy on its own batches (default: the preset's)",
    )
    g.add_argument(
        "--steps-per-execution",
        type=int,
        default=None,
        metavar="N",
        help="training steps (batches, all replicas together) per IPU execution, a multiple of "
        "replicas x "
        "gradient accumulation (default: as many as fill an epoch)",
    )
    g.add_argument(
        "--gradient-accumulation",
        type=int,
        default=None,
        metavar="K",
        help="batches per replica whose gradients make one weight update (default: 1)",
    )
    return p


def ipu_accelerator(args: argparse.Namespace) -> Any:
    """The :class:`~eyeblink.detect.AcceleratorOptions` of ``--pipeline`` (an IPU preset) with
    ``--replicas``."""
    from eyeblink.config import load_preset
    from eyeblink.detect import BackendName
    from eyeblink.presets import resolve_preset

    name = args.pipeline or "ipu-mk2"
    detect = load_preset(resolve_preset(name)).detect
    if str(detect.backend).strip().lower() != BackendName.IPU.value:
        raise ConfigError(
            f"--pipeline {name} is not an IPU preset (detect.backend = {detect.backend!r}); with "
            "--device ipu "
            'give ipu-mk1, ipu-mk2, low-latency or a TOML file with backend = "ipu"'
        )
    acc = detect.accelerator()
    if args.replicas is not None:
        acc = dataclasses.replace(acc, replicas=args.replicas)
    return acc


def _accumulation(args: argparse.Namespace) -> int:
    """``--gradient-accumulation``, 1 when not given."""
    return 1 if args.gradient_accumulation is None else int(args.gradient_accumulation)


def _check(args: argparse.Namespace) -> None:
    for name in ("every", "max_frames", "epochs", "batch_size", "max_pairs", "timing_frames"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.augment < 0 or not args.learning_rate > 0:
        raise ConfigError("--augment must be >= 0 and --learning-rate > 0")
    for p in [*args.inputs, *args.holdout]:
        if not Path(p).exists():
            raise InputNotFoundError(f"input not found: {p} — check the path")
    overlap = {Path(p).resolve() for p in args.inputs} & {Path(p).resolve() for p in args.holdout}
    if overlap:
        raise ConfigError(
            f"{sorted(map(str, overlap))[0]} is both a training and a --holdout input; hold out "
            "other recordings (other subjects)"
        )
    if Path(args.output).suffix != ".tflite":
        raise ConfigError(f"--output must end in .tflite, got {args.output}")
    # before the first frame is labelled: the model is not lost to an unwritable -o
    plan = OutputPlan()
    for p in [*args.inputs, *args.holdout]:
        plan.read(p, "the input")
    plan.write(args.output, "-o").write(str(args.output) + ".sha256", "-o").write(
        args.json, "--json"
    ).check()
    ipu_only = {
        "--pipeline": args.pipeline,
        "--replicas": args.replicas,
        "--steps-per-execution": args.steps_per_execution,
        "--gradient-accumulation": args.gradient_accumulation,
    }
    if args.device != "ipu":
        given = [flag for flag, value in ipu_only.items() if value is not None]
        if given:
            raise ConfigError(
                f"{given[0]} applies to --device ipu only (this run trains with --device "
                f"{args.device})"
            )
    else:
        from eyeblink.lab.train_detector_ipu import check_ipu_training_options

        check_ipu_training_options(
            batch_size=args.batch_size,
            accelerator=ipu_accelerator(args),
            steps_per_execution=args.steps_per_execution,
            gradient_accumulation=_accumulation(args),
        )


def run(args: argparse.Namespace) -> int:
    from eyeblink.lab.bench import machine_info

    _check(args)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    require_tensorflow()
    if args.device == "ipu":
        from eyeblink.lab.train_detector_ipu import require_ipu

        require_ipu()  # before any frame is labelled
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.lab import bench_detectors as bd
    from eyeblink.landmarks.mesh import MeshFitter

    output = Path(args.output)
    machine = machine_info()
    print(f"eyeblink train-detector: {machine['cpu']}, Python {machine['python']}", flush=True)
    t0 = time.perf_counter()
    with (
        FaceDetector("litert", num_threads=1) as stock,
        contextlib.closing(MeshFitter(refine=False)) as mesher,
    ):
        frames = label_frames(
            args.inputs, every=args.every, max_frames=args.max_frames, detector=stock, mesher=mesher
        )
        if not frames:
            raise ConfigError(
                "the teacher found no face in the sampled training frames; check the inputs "
                "(one face per frame) or lower --every"
            )
        teacher = fit_teacher(
            [f.mesh for f in frames],
            [f.stock_box for f in frames],
            [f.stock_keypoints for f in frames],
        )
        ds = build_dataset(
            frames, fits_per_input(frames, teacher), copies=args.augment, seed=args.seed
        )
        print(
            f"teacher: {len(frames)} frames from {len({f.source.split('#')[0] for f in frames})} "
            "inputs, box = "
            f"mesh mean + ({teacher.ox:.3f}, {teacher.oy:.3f}) x spread, size ({teacher.kw:.3f}, "
            f"{teacher.kh:.3f}) "
            f"x spread; {ds.images.shape[0]} samples with augmentation "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        model = build_trainable_blazeface()
        print(
            f"fine-tuning BlazeFace ({model.count_params()} parameters): {args.epochs} epochs, "
            "batch "
            f"{args.batch_size}{' per replica' if args.device == 'ipu' else ''}, Adam lr "
            f"{args.learning_rate}, "
            f"on the {args.device.upper()}",
            flush=True,
        )
        ipu: str | dict[str, Any]
        if args.device == "ipu":
            trained = train_ipu(
                ds,
                epochs=args.epochs,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                seed=args.seed,
                accelerator=ipu_accelerator(args),
                steps_per_execution=args.steps_per_execution,
                gradient_accumulation=_accumulation(args),
            )
            model, history, ipu = trained.model, trained.history, trained.report
        else:
            history = train(
                model,
                ds,
                epochs=args.epochs,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                seed=args.seed,
            )
            ipu = (
                "not run: this run trained with --device cpu (--device ipu trains through "
                "Graphcore's TensorFlow)"
            )
        digest = export_tflite(model, output)
        print(f"wrote {output} (sha256 {digest}, also in {output}.sha256)", flush=True)
        holdout_videos = [v for h in args.holdout for v in bd.video_files(Path(h))]
        pairs = bd.sample_pairs(holdout_videos, args.every, args.max_pairs)
        timing = bd._timing_set({"holdout": pairs}, [], args.timing_frames)
        print(f"held out: {len(holdout_videos)} recordings, {len(pairs)} frame pairs", flush=True)
        aug = augmented_pairs(pairs, stock, mesher, args.seed)
        with FaceDetector("litert", model_path=output, num_threads=1) as tuned:
            rows = evaluate(stock, tuned, mesher, teacher, pairs, timing)
            rows_aug = evaluate(stock, tuned, mesher, teacher, aug, [], with_teacher=False)
    v = {**verdict(rows), "augmented": verdict(rows_aug)}
    print()
    print(table({"held out": rows, "held out, augmented": rows_aug}))
    print()
    for label, rs, vv in (("held-out", rows, v), ("augmented held-out", rows_aug, v["augmented"])):
        red = vv["jitter_median_reduction"]
        change = "–" if red is None else f"{abs(red):.0%} {'lower' if red >= 0 else 'higher'}"
        print(
            f"{label} recall {'not lower' if vv['recall_not_lower'] else 'LOWER'} "
            f"({rs['stock']['recall']:.3f} -> {rs['tuned']['recall']:.3f}); median jitter "
            f"{change} than stock "
            f"(target: >= 30% lower: {'met' if vv['jitter_30pct_lower'] else 'not met'})"
        )
    print(
        f"training: {statistics.median(h['images_per_s'] for h in history):.1f} images/s (median "
        "over epochs)"
    )
    if args.json:
        report = {
            "machine": machine,
            "inputs": args.inputs,
            "holdout": args.holdout,
            "every": args.every,
            "max_frames": args.max_frames,
            "augment": args.augment,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "seed": args.seed,
            "training_frames": len(frames),
            "training_samples": int(ds.images.shape[0]),
            "teacher": dataclasses.asdict(teacher),
            "mesh_keypoints": [list(k) for k in MESH_KEYPOINTS],
            "history": history,
            "model": str(output),
            "sha256": digest,
            "holdout_recordings": len(holdout_videos),
            "holdout_pairs": len(pairs),
            "rows": rows,
            "rows_augmented": rows_aug,
            "augmented_pairs": len(aug),
            "verdict": v,
            "device": args.device,
            "ipu": ipu,
        }
        write_text(args.json, json.dumps(report, indent=2, default=float) + "\n", "--json")
        print(f"wrote {args.json}")
    return 0
