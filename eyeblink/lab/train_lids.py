"""``eyeblink train-lids``: train the lid network of ``--landmarks lids`` (Keras 3 on TensorFlow,
CPU).

The student reproduces the ``mesh`` eye model's lid aperture (the teacher: face mesh + MediaPipe's
iris network, :mod:`eyeblink.lab.lids_data`) from the two eye crops the face mesh places
(:mod:`eyeblink.landmarks.lids`). Each training step sees a strip cut from the cached context with a
random placement jitter (roll ±6°, scale ±10 %, shift), flipped left-right half of the time (the
eyes' labels swapped), a new eye shape three times in four (squashed or stretched, a pitch-like
keystone: the label scaled with it, see :func:`jittered_strips`), and photometric noise: gamma, gain
and offset, blur, down-and-up scaling, sensor noise, row banding (mains flicker / rolling shutter)
and glasses (rims and bars, dark or bright, and the lenses' magnification, tint and glare).
``--shape-aug 0 --no-lenses`` is the first recipe (that of ``lids_v1.tflite``).

Following the lid through the blink: ``--blink-oversample K`` shows each mid-blink strip (the
teacher's aperture between open and shut, or inside a ``.tag`` blink) K times an epoch, and
``--exposure-aug F`` adds F x N long exposures (the mean of 2-5 consecutive frames' strips, labelled
with the mean of their teacher apertures: :mod:`eyeblink.lab.lids_data`). The excluded subjects'
report gives the error on open, mid-blink and exposed frames apart (:func:`lid_errors`); ``--score``
gives it for an exported file without training.

The network (:func:`build_model`, 31k parameters at the default width): per eye crop (40x60, the
subject's left eye mirrored) a per-crop standardisation, a 3x3 stride-2 convolution, three
depthwise-separable stride-2 blocks and two dense layers, giving the aperture and the log of its
expected error. Loss: the squared aperture error (in units of 0.02) plus 0.1 x the Gaussian negative
log-likelihood of that error under the predicted sigma (sigma's head only: the aperture is not
pulled by it).

Leave-subjects-out (``--exclude-subjects``): every sample of a listed person (ZJU subject ids,
Eyeblink8 video folders) is left out of training, so the model can be scored on them
(:func:`frame_scores` here on the cached strips; event F1 with ``eyeblink eval --landmarks lids
--landmark-model``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, DatasetError
from eyeblink.lab import add_command
from eyeblink.outputs.paths import OutputPlan, atomic_path, write_text

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.lab.lids_data import BlinkFrames

#: Scale of the aperture loss: an error of this size costs 1.
APERTURE_UNIT = 0.02
SIGMA_WEIGHT = 0.1
#: Default eye-shape augmentation (:func:`jittered_strips`): vertical scale within exp(±0.2), ~±20
#: %.
SHAPE_RANGE = 0.2


# --------------------------------------------------------------------------- the network


def training_keras() -> Any:
    """Keras 3 on TensorFlow (training and .tflite export run on TensorFlow)."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        raise ConfigError(
            'train-lids needs TensorFlow, which is not installed: pip install "eyeblink[tf]"'
        ) from None
    from eyeblink.detect.keras_graph import use_keras_backend

    return use_keras_backend("tensorflow", eyeblink_backend="train-lids")


def build_model(width: int = 16, seed: int = 0) -> Any:
    """The lid network: ``(B, 40, 60, 1)`` eye crops in [0, 1] -> ``(B, 2)`` (aperture, log
    sigma)."""
    from eyeblink.landmarks.lids import EYE_SHAPE

    keras = training_keras()
    from keras import layers, ops

    keras.utils.set_random_seed(seed)
    inp = keras.Input((*EYE_SHAPE, 1), name="eyes")

    def standardise(x: Any) -> Any:
        mean = ops.mean(x, axis=(1, 2, 3), keepdims=True)
        var = ops.mean(ops.square(x - mean), axis=(1, 2, 3), keepdims=True)
        return (x - mean) * ops.rsqrt(var + 1e-3)

    x = layers.Lambda(standardise, name="standardise")(inp)
    x = layers.Conv2D(width, 3, strides=2, padding="same", activation="relu")(x)  # 20x30
    for ch in (2 * width, 3 * width, 4 * width):  # 10x15, 5x8, 3x4
        x = layers.DepthwiseConv2D(3, strides=2, padding="same")(x)
        x = layers.Conv2D(ch, 1, activation="relu")(x)
    x = layers.Flatten()(x)
    x = layers.Dense(32, activation="relu")(x)
    out = layers.Dense(2, name="aperture_logsigma")(x)
    return keras.Model(inp, out, name="lids")


def ensemble(models: Sequence[Any]) -> Any:
    """One network of several trained ones, with the run-time interface of each: the aperture is
    their mean, the expected error combines theirs with their disagreement (log of sqrt(mean sigma^2
    + variance of the apertures)), so a frame the members read differently is a frame of low
    confidence."""
    keras = training_keras()
    from keras import layers, ops

    from eyeblink.landmarks.lids import EYE_SHAPE

    if len(models) == 1:
        return models[0]
    inp = keras.Input((*EYE_SHAPE, 1), name="eyes")
    # each member under its own name (a model is a layer here; names must be unique)
    outs = [keras.Model(m.inputs, m.output, name=f"member{i}")(inp) for i, m in enumerate(models)]

    def combine(ys: Any) -> Any:
        y = ops.stack(ys, axis=0)  # (M, B, 2)
        mu = ops.mean(y[..., 0], axis=0)
        var = ops.mean(ops.square(y[..., 0] - mu), axis=0)
        s2 = ops.mean(ops.exp(2.0 * ops.clip(y[..., 1], -8.0, 2.0)), axis=0)
        return ops.stack([mu, 0.5 * ops.log(s2 + var)], axis=-1)

    out = layers.Lambda(combine, name="aperture_logsigma")(outs)
    return keras.Model(inp, out, name="lids_ensemble")


def lids_loss(y_true: Any, y_pred: Any) -> Any:
    """Squared aperture error (units of :data:`APERTURE_UNIT`) + :data:`SIGMA_WEIGHT` x the Gaussian
    NLL of the (stopped) error under the predicted log sigma."""
    from keras import ops

    y = y_true[:, 0]
    mu, ls = y_pred[:, 0], ops.clip(y_pred[:, 1], -8.0, 2.0)
    err = mu - y
    nll = ls + 0.5 * ops.square(ops.stop_gradient(err)) * ops.exp(-2.0 * ls)
    return ops.mean(ops.square(err / APERTURE_UNIT) + SIGMA_WEIGHT * nll)


# --------------------------------------------------------------------------- augmentation


def crop_strips(
    ctx: np.ndarray, rng: np.random.Generator | None, *, jitter: bool = True
) -> np.ndarray:
    """``(N, 40, 120)`` strips from ``(N, H, W)`` context strips: the centre crop, or (``rng``) a
    random placement jitter (roll ±6°, scale ±10 %, shift ±4 x ±3 px)."""
    return jittered_strips(ctx, rng if jitter else None)[0]


def jittered_strips(
    ctx: np.ndarray, rng: np.random.Generator | None, *, shape_range: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """``(N, 40, 120)`` strips from ``(N, H, W)`` context strips and the factor ``(N,)`` each
    strip's aperture label is multiplied by: the centre crop (factor 1), or (``rng``) a random
    placement jitter (roll ±6°, scale ±10 %, shift ±4 x ±3 px) and, with ``shape_range`` > 0, three
    strips in four given a new eye shape.

    The shape change (:func:`shape_warp`): a vertical squash or stretch ``sy`` (log-uniform within
    ±``shape_range``), a horizontal one ``sx`` (within half of that) and a pitch-like keystone (the
    strip's top row wider or narrower than its bottom one, ±6 % each way). The teacher's aperture is
    a vertical lid distance over a horizontal eye width, so the label becomes ``aperture * sy / sx``
    (the keystone leaves the eyes' own row, the strip's centre row, as it was). This is what looking
    up or down does to an eye seen by a camera (foreshortening) and how people's eye shapes differ:
    it keeps the network from learning each training subject's open eye by its look instead of
    measuring the lids.
    """
    import cv2
    import numpy as np

    from eyeblink.landmarks.lids import STRIP_SHAPE

    n, ch, cw = ctx.shape
    h, w = STRIP_SHAPE
    oy, ox = (ch - h) / 2, (cw - w) / 2
    factor = np.ones(n, np.float32)
    if rng is None:
        return np.ascontiguousarray(ctx[:, int(oy) : int(oy) + h, int(ox) : int(ox) + w]), factor
    out = np.empty((n, h, w), np.uint8)
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    for i in range(n):
        m = cv2.getRotationMatrix2D(
            (w / 2, h / 2),
            float(rng.uniform(-6, 6)),
            # strip -> strip (about its centre)
            float(np.exp(rng.uniform(-0.1, 0.1))),
        )
        m[:, 2] += (ox + rng.uniform(-4, 4), oy + rng.uniform(-3, 3))  # ... -> context
        if shape_range > 0 and rng.random() < 0.75:
            sy = float(np.exp(rng.uniform(-shape_range, shape_range)))
            sx = float(np.exp(rng.uniform(-shape_range / 2, shape_range / 2)))
            full = np.vstack([m, [0.0, 0.0, 1.0]]) @ shape_warp(
                sx, sy, float(rng.uniform(-0.06, 0.06)), (h, w)
            )
            out[i] = cv2.warpPerspective(
                ctx[i], full, (w, h), flags=flags, borderMode=cv2.BORDER_REPLICATE
            )
            factor[i] = sy / sx
        else:
            out[i] = cv2.warpAffine(ctx[i], m, (w, h), flags=flags, borderMode=cv2.BORDER_REPLICATE)
    return out, factor


def shape_warp(sx: float, sy: float, keystone: float, shape: tuple[int, int]) -> np.ndarray:
    """3x3 homography from output strip pixels to input strip pixels: the content appears scaled by
    ``sx`` across and ``sy`` down about the strip's centre, its top row by ``sx * (1 - keystone)``
    and its bottom row by ``sx * (1 + keystone)`` across (a pitch: one end of the face nearer the
    camera)."""
    import cv2
    import numpy as np

    h, w = shape
    cx, cy = w / 2, h / 2
    src = np.array([[0, 0], [w, 0], [0, h], [w, h]], dtype=np.float32)
    dst = np.array(
        [
            [cx + (x - cx) * sx * (1 - keystone if y < cy else 1 + keystone), cy + (y - cy) * sy]
            for x, y in src
        ],
        dtype=np.float32,
    )
    return np.asarray(cv2.getPerspectiveTransform(dst, src), np.float64)  # output -> input


def photometric(
    strips: np.ndarray, rng: np.random.Generator, *, lenses: bool = False
) -> np.ndarray:
    """Gamma, gain/offset, blur, down-and-up scaling, row banding, glasses-like bars and noise, per
    strip (the per-pixel parts vectorised over the batch: a pass over 20k strips takes a few
    seconds).

    With ``lenses`` the glasses also get what the rims enclose (:func:`lens_effects`), on a third of
    the strips instead of a quarter."""
    import cv2
    import numpy as np

    n, h, w = strips.shape
    f = strips.astype(np.float32)
    for i in np.flatnonzero(rng.random(n) < 0.3):  # a smaller face: fewer pixels per eye
        s = rng.uniform(0.35, 0.8)
        small = cv2.resize(
            f[i], (max(8, round(w * s)), max(4, round(h * s))), interpolation=cv2.INTER_AREA
        )
        f[i] = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    for i in np.flatnonzero(rng.random(n) < 0.4):
        f[i] = cv2.GaussianBlur(f[i], (0, 0), float(rng.uniform(0.4, 1.5)))
    # glasses: rims or a bar across
    for i in np.flatnonzero(rng.random(n) < (1 / 3 if lenses else 0.25)):
        if lenses:
            f[i] = lens_effects(f[i], rng)
        shade = float(rng.choice([rng.uniform(0, 50), rng.uniform(190, 255)]))
        t = int(rng.integers(1, 4))
        if rng.random() < 0.5:
            for cx in (w / 4, 3 * w / 4):
                cv2.ellipse(
                    f[i],
                    (round(cx + rng.normal(0, 2)), round(h / 2 + rng.normal(0, 2))),
                    (round(w * rng.uniform(0.17, 0.24)), round(h * rng.uniform(0.3, 0.45))),
                    float(rng.normal(0, 5)),
                    0,
                    360,
                    shade,
                    t,
                )
        else:
            y = round(h * rng.choice([rng.uniform(0.05, 0.25), rng.uniform(0.75, 0.95)]))
            cv2.line(f[i], (0, y), (w, y + int(rng.integers(-4, 5))), shade, t)
        if rng.random() < 0.5:  # a reflection on the lens
            cv2.circle(
                f[i],
                (int(rng.integers(0, w)), int(rng.integers(0, h))),
                int(rng.integers(1, 4)),
                float(rng.uniform(200, 255)),
                -1,
            )
    gamma = np.exp(rng.uniform(np.log(0.6), np.log(1.6), (n, 1, 1))).astype(np.float32)
    f = 255.0 * np.power(np.clip(f / 255.0, 0, 1), gamma)
    rows = np.arange(h, dtype=np.float32)[None, :, None]
    band = 1.0 + rng.uniform(0, 0.12, (n, 1, 1)) * np.sin(
        2 * np.pi * rows / rng.uniform(8, 120, (n, 1, 1)) + rng.uniform(0, 6.3, (n, 1, 1))
    )
    f = f * (rng.uniform(0.5, 1.5, (n, 1, 1)) * band).astype(np.float32) + rng.uniform(
        -30, 30, (n, 1, 1)
    )
    f += rng.standard_normal(f.shape, dtype=np.float32) * rng.uniform(0, 8, (n, 1, 1)).astype(
        np.float32
    )
    return np.clip(f + 0.5, 0, 255).astype(np.uint8)


def lens_effects(strip: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A float strip seen through a pair of lenses: inside a soft ellipse round each eye the content
    scaled about the eye's centre by 0.85-1.12 (a corrective lens shrinks or enlarges the eye: the
    aperture, a ratio of two lengths, does not change), dimmed or tinted by 0.7-1.05, and half the
    time a soft glare (a blurred bright blob or a slanted band, up to 150 grey levels) somewhere on
    the lens."""
    import cv2
    import numpy as np

    h, w = strip.shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = strip.copy()
    power = float(np.exp(rng.uniform(np.log(0.85), np.log(1.12))))
    tint = float(rng.uniform(0.7, 1.05))
    for cx in (w / 4, 3 * w / 4):
        ex, ey = cx + rng.normal(0, 1.5), h / 2 + rng.normal(0, 1.5)
        ax, ay = w * rng.uniform(0.18, 0.25), h * rng.uniform(0.32, 0.5)
        m = cv2.getRotationMatrix2D((float(ex), float(ey)), 0.0, power)
        seen = cv2.warpAffine(
            strip, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        r = np.sqrt(((xx - ex) / ax) ** 2 + ((yy - ey) / ay) ** 2)
        mask = np.clip((1.15 - r) / 0.3, 0, 1)  # soft edge round the rim
        out = out * (1 - mask) + seen * tint * mask
        if rng.random() < 0.5:
            gx, gy = ex + rng.uniform(-ax, ax), ey + rng.uniform(-ay, ay)
            if rng.random() < 0.5:
                glare = np.exp(-((xx - gx) ** 2 + (yy - gy) ** 2) / (2 * rng.uniform(2, 8) ** 2))
            else:
                slope = rng.uniform(-1.5, 1.5)
                glare = np.exp(
                    -(((xx - gx) - slope * (yy - gy)) ** 2) / (2 * rng.uniform(1, 4) ** 2)
                )
            out = out + float(rng.uniform(30, 150)) * glare * mask
    return out.astype(np.float32)


def training_batch(
    ctx: np.ndarray,
    aperture: np.ndarray,
    rng: np.random.Generator,
    *,
    shape_range: float = 0.0,
    lenses: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """One augmented pass over the samples: network inputs ``(2N, 40, 60, 1)`` and targets ``(2N,
    1)`` (``shape_range``: :func:`jittered_strips`; ``lenses``: :func:`photometric`)."""
    import numpy as np

    from eyeblink.landmarks.lids import eye_inputs

    strips, factor = jittered_strips(ctx, rng, shape_range=shape_range)
    strips = photometric(strips, rng, lenses=lenses)
    ap = aperture.astype(np.float32) * factor[:, None]
    flip = rng.random(len(strips)) < 0.5
    strips[flip] = strips[flip][:, :, ::-1]
    ap[flip] = ap[flip][:, ::-1]
    return eye_inputs(strips), ap.reshape(-1, 1)


# --------------------------------------------------------------------------- training and export


def train(
    ctx: np.ndarray,
    aperture: np.ndarray,
    *,
    epochs: int = 20,
    batch_size: int = 128,
    seed: int = 0,
    learning_rate: float = 3e-3,
    width: int = 16,
    shape_range: float = SHAPE_RANGE,
    lenses: bool = True,
    blinks: BlinkFrames | None = None,
    blink_oversample: int = 1,
    exposure: float = 0.0,
    log: Any = print,
    on_epoch: Callable[[int, Any], None] | None = None,
) -> Any:
    """A trained lid network (Keras) on the context strips ``ctx`` and their teacher apertures
    (``shape_range``, ``lenses``: the augmentations of :func:`training_batch`, by default the
    shipped recipe's; ``shape_range=0, lenses=False`` the first recipe's; ``on_epoch(epoch, model)``
    after each epoch, e.g. to follow a validation set).

    With ``blinks`` (:class:`BlinkFrames` of the same strips): every epoch shows each mid-blink
    strip ``blink_oversample`` times (each copy its own augmentation) and adds ``exposure`` x N
    long-exposure samples (:func:`eyeblink.lab.lids_data.random_windows`: the mean of 2-5
    consecutive frames' strips, labelled with the mean of their teacher apertures; half of them over
    a blink)."""
    import numpy as np

    from eyeblink.lab.lids_data import BlinkFrames, exposed_samples, random_windows

    keras = training_keras()
    if len(ctx) == 0:
        raise DatasetError("no labelled strips to train on (no face found in the training inputs?)")
    if blinks is None:
        blinks = BlinkFrames(np.zeros(len(ctx), bool), np.zeros(len(ctx), bool), [])
    extra = np.repeat(np.flatnonzero(blinks.mid), max(0, blink_oversample - 1))
    n_exposed = round(exposure * len(ctx)) if blinks.runs else 0
    model = build_model(width, seed)
    steps = max(1, epochs * math.ceil(2 * (len(ctx) + len(extra) + n_exposed) / batch_size))
    sched = keras.optimizers.schedules.CosineDecay(learning_rate, steps, alpha=0.02)
    model.compile(optimizer=keras.optimizers.Adam(sched), loss=lids_loss)
    rng = np.random.default_rng(seed)
    if len(extra) or n_exposed:
        log(
            f"each epoch: {len(ctx)} strips, {len(extra)} more copies of {int(blinks.mid.sum())} "
            "mid-blink strips, "
            f"{n_exposed} long exposures"
        )
    for epoch in range(epochs):
        t0 = time.perf_counter()
        ectx, eap = exposed_samples(
            ctx, aperture, random_windows(blinks.runs, blinks.dip, n_exposed, rng)
        )
        idx = np.concatenate([np.arange(len(ctx)), extra])
        x, y = training_batch(
            np.concatenate([ctx[idx], ectx]),
            np.concatenate([aperture[idx], eap]),
            rng,
            shape_range=shape_range,
            lenses=lenses,
        )
        hist = model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=True, verbose=0)
        log(
            f"epoch {epoch + 1}/{epochs}: loss {hist.history['loss'][-1]:.4f} "
            f"({time.perf_counter() - t0:.1f} s, {len(x)} eye crops)"
        )
        if on_epoch is not None:
            on_epoch(epoch + 1, model)
    return model


def predict(
    model: Any, strips: np.ndarray, batch_size: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """(aperture, log sigma) ``(N, 2)`` each (subject's right, left eye) of ``(N, 40, 120)`` strips
    (a Keras model, or an exported file's :class:`~eyeblink.landmarks.lids.LidNetwork`)."""
    import numpy as np

    from eyeblink.landmarks.lids import LidNetwork, eye_inputs

    if isinstance(model, LidNetwork):
        runs = [model.run(s) for s in strips]
        return (
            np.array([a for a, _ in runs], np.float64).reshape(-1, 2),
            np.array([ls for _, ls in runs], np.float64).reshape(-1, 2),
        )
    out = np.asarray(
        model.predict(eye_inputs(strips), batch_size=batch_size, verbose=0), np.float64
    )
    out = out.reshape(len(strips), 2, 2)
    return out[..., 0], out[..., 1]


def export_tflite(model: Any, path: Path) -> str:
    """Write ``model`` as a float32 ``.tflite`` with the run-time interface (input ``[2, 40, 60,
    1]``, output ``[2, 2]``); returns its sha256."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from eyeblink.landmarks.lids import EYE_SHAPE

    @tf.function(
        input_signature=[tf.TensorSpec([2, *EYE_SHAPE, 1], tf.float32, name="eyes")],
        autograph=False,
    )
    def serve(x: Any) -> Any:
        return model(x, training=False)

    # weights as constants
    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    flat = tf.lite.TFLiteConverter.from_concrete_functions([frozen]).convert()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:  # whole or not at all
        tmp.write_bytes(flat)
    return hashlib.sha256(flat).hexdigest()


# --------------------------------------------------------------------------- scoring


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Area under the ROC curve: P(a ``pos`` score > a ``neg`` score), ties half (Mann-Whitney)."""
    import numpy as np
    from scipy.stats import rankdata

    pos, neg = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    r = rankdata(np.concatenate([pos, neg]))
    return float((r[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def tag_key(source: str | Path) -> str:
    """The key of a video's ``.tag`` among the inputs: its folder's name and its stem, as the
    strips' cache names a source (:func:`eyeblink.lab.lids_data.cache_name`): a clip and a rendered
    copy of it in another folder share a stem but not their tags, whose frame IDs differ."""
    p = Path(source)
    return f"{p.parent.name}/{p.stem}"


def tag_states(tag_path: Path) -> dict[int, str]:
    """Frame id -> ``closed`` (an eye flagged fully closed), ``open`` (outside every blink) or
    ``blink``."""
    from eyeblink.lab.evaluate import tag_ids, tag_rows

    states: dict[int, str] = {}
    for n, parts in tag_rows(tag_path)[1]:
        fid, bid = tag_ids(tag_path, n, parts)
        closed = "C" in (parts[3] if len(parts) > 3 else "", parts[5] if len(parts) > 5 else "")
        states[fid] = "closed" if closed else "open" if bid < 0 else "blink"
    return states


def frame_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Frame AUC closed-vs-open of the teacher and the student (score: minus the mean aperture of
    both eyes) and the student's mean |error| against the teacher, over ``rows`` (``teacher``,
    ``student``: (N, 2) apertures; ``states``: (N,) tag states)."""
    import numpy as np

    if not rows:
        return {}
    t = np.concatenate([r["teacher"] for r in rows]).mean(1)
    s = np.concatenate([r["student"] for r in rows]).mean(1)
    st = np.concatenate([r["states"] for r in rows])
    err = np.abs(np.concatenate([r["student"] - r["teacher"] for r in rows]))
    closed, opened = st == "closed", st == "open"
    return {
        "frames": len(st),
        "closed": int(closed.sum()),
        "open": int(opened.sum()),
        "auc_teacher": auc(-t[closed], -t[opened]),
        "auc_student": auc(-s[closed], -s[opened]),
        "mean_abs_error": float(err.mean()),
        "p95_abs_error": float(np.percentile(err, 95)),
        "corr": float(np.corrcoef(t, s)[0, 1]) if len(t) > 2 else math.nan,
    }


def agreement(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Student-teacher agreement over clips (``(teacher, student)`` apertures ``(N, 2)`` per clip),
    in the terms the blink detector sees: ``mae`` the mean |error|; ``open_offset`` the mean over
    clips and eyes of |student's open value / teacher's open value - 1| (open value: the clip's 80th
    percentile, as the detector's open baseline is a high percentile); ``rel_mae`` the mean |error|
    of the apertures divided by their own open value (the depth of a dip relative to the open eye,
    which the detector thresholds)."""
    import numpy as np

    err, off, rel = [], [], []
    for t, s in pairs:
        if len(t) < 2:
            continue
        ot, os_ = np.percentile(t, 80, axis=0), np.percentile(s, 80, axis=0)
        ok = (ot > 0.05) & (os_ > 0.05)
        err.append(np.abs(s - t).ravel())
        off.extend(np.abs(os_[ok] / ot[ok] - 1))
        rel.append(np.abs(s[:, ok] / os_[ok] - t[:, ok] / ot[ok]).ravel())
    if not err:
        return {}
    return {
        "mae": float(np.concatenate(err).mean()),
        "open_offset": float(np.mean(off)) if off else math.nan,
        "rel_mae": float(np.concatenate(rel).mean()) if rel else math.nan,
    }


def score_clips(model: Any, files: list[Path], tags: dict[str, Path]) -> dict[str, Any]:
    """Teacher vs student on the clean (not frame-augmented) cached strips of annotated clips, per
    condition (the ZJU file-name suffix) and overall; ``lid_errors``: :func:`lid_errors` over every
    excluded video."""
    import numpy as np

    from eyeblink.lab.evaluate import group_of
    from eyeblink.lab.lids_data import Samples

    rows, errs = [], []
    for f in files:
        s = Samples.load(f)
        name = Path(s.source).stem
        tag = tags.get(tag_key(s.source))
        keep = ~s.augmented
        if not keep.any():
            continue
        states = tag_states(tag) if tag is not None else None
        errs.append(clip_errors(model, s, states))
        if tag is None or states is None:
            continue
        student, _ = predict(model, crop_strips(s.ctx[keep], None))
        rows.append(
            {
                "clip": name,
                "group": group_of(Path(name)),
                "teacher": s.aperture[keep],
                "student": student,
                "states": np.array([states.get(int(i), "none") for i in s.frame_id[keep]]),
            }
        )
    out: dict[str, Any] = {
        "overall": frame_scores(rows),
        "groups": {},
        "lid_errors": lid_errors(errs),
    }
    for g in sorted({r["group"] for r in rows}):
        out["groups"][g] = frame_scores([r for r in rows if r["group"] == g])
    return out


def clip_errors(model: Any, s: Any, states: dict[int, str] | None) -> dict[str, Any]:
    """|student - teacher| (per eye) on one video source's clean strips, with the mid-blink mask
    (:func:`eyeblink.lab.lids_data.blink_masks`), and on its long exposures: for k = 2..5 the
    windows of k consecutive frames that tile the clip
    (:func:`~eyeblink.lab.lids_data.tiled_windows`), the mean strip against the mean teacher
    aperture, each window flagged when it holds a frame with the lid down."""
    import numpy as np

    from eyeblink.lab.lids_data import EXPOSURE_FRAMES, BlinkFrames, exposed_samples, tiled_windows

    keep = ~s.augmented
    b = BlinkFrames.of(s, states)
    student, _ = predict(model, crop_strips(s.ctx[keep], None))
    out: dict[str, Any] = {
        "error": np.abs(student - s.aperture[keep]),
        "mid": b.mid[keep],
        "exposed": {},
    }
    for k in range(EXPOSURE_FRAMES[0], EXPOSURE_FRAMES[1] + 1):
        windows = tiled_windows(b.runs, k)
        if not windows:
            continue
        ectx, eap = exposed_samples(s.ctx, s.aperture, windows)
        est, _ = predict(model, crop_strips(ectx, None))
        out["exposed"][k] = (np.abs(est - eap), np.array([bool(b.dip[w].any()) for w in windows]))
    return out


def lid_errors(clips: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean |student - teacher| apertures (both eyes) over :func:`clip_errors`' clips: every clean
    frame, the open ones, the mid-blink ones, and the long exposures (all of them, per k, and those
    over a blink)."""
    import numpy as np

    def cell(err: list[np.ndarray]) -> dict[str, Any]:
        e = np.concatenate(err) if err else np.zeros((0, 2))
        return {"n": len(e), "mae": float(e.mean()) if len(e) else math.nan}

    if not clips:
        return {}
    out = {
        "frames": cell([c["error"] for c in clips]),
        "open_frames": cell([c["error"][~c["mid"]] for c in clips]),
        "mid_blink": cell([c["error"][c["mid"]] for c in clips]),
    }
    ks = sorted({k for c in clips for k in c["exposed"]})
    out["exposed"] = cell([c["exposed"][k][0] for c in clips for k in ks if k in c["exposed"]])
    out["exposed_over_blink"] = cell(
        [c["exposed"][k][0][c["exposed"][k][1]] for c in clips for k in ks if k in c["exposed"]]
    )
    out["exposed_k"] = {
        str(k): cell([c["exposed"][k][0] for c in clips if k in c["exposed"]]) for k in ks
    }
    return out


def format_lid_errors(e: dict[str, Any]) -> str:
    """One line of :func:`lid_errors`."""

    def f(c: dict[str, Any]) -> str:
        return f"{c['mae']:.4f} ({c['n']})"

    return (
        "student - teacher mean |aperture error| (samples): all frames "
        + f(e["frames"])
        + ", open "
        + f(e["open_frames"])
        + ", mid-blink "
        + f(e["mid_blink"])
        + ", exposed 2-5 frames "
        + f(e["exposed"])
        + ", exposed over a blink "
        + f(e["exposed_over_blink"])
    )


# --------------------------------------------------------------------------- the command


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        "train-lids",
        __doc__,
        help="train the lid network of --landmarks lids on teacher (mesh) apertures (TensorFlow, "
        "CPU)",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="VIDEO_DIR_OR_PHOTO",
        help="training recordings, folders of them (searched recursively) or photos; a .tag "
        "beside a "
        "video is used for the frame scores",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="TFLITE",
        help="the trained lid network (.tflite; needed unless --score)",
    )
    p.add_argument(
        "--cache",
        default=None,
        metavar="DIR",
        help="where the teacher-labelled strips are kept between runs (default: a folder in the "
        "system temp dir; never inside a repository: the frames may be research-only data)",
    )
    p.add_argument(
        "--exclude-subjects",
        default="",
        metavar="IDS",
        help="comma-separated people never trained on (ZJU subject ids such as 000011, Eyeblink8 "
        "video folders such as EyeBlink8_6): leave-subjects-out; their clips are scored instead",
    )
    p.add_argument(
        "--synthetic",
        type=int,
        default=0,
        metavar="N",
        help="also N rendered faces with planted closures (default %(default)s)",
    )
    p.add_argument(
        "--frame-augment",
        type=int,
        default=1,
        metavar="K",
        help="rolled (±30°) / scaled copies of each video frame besides the frame itself "
        "(photos get 12; default %(default)s)",
    )
    p.add_argument(
        "--epochs", type=int, default=20, metavar="E", help="training epochs (default %(default)s)"
    )
    p.add_argument("--batch-size", type=int, default=128, metavar="B", help="(default %(default)s)")
    p.add_argument(
        "--width",
        type=int,
        default=16,
        metavar="C",
        help="channels of the first convolution; the blocks have 2, 3, 4x (default %(default)s)",
    )
    p.add_argument(
        "--shape-aug",
        type=float,
        default=SHAPE_RANGE,
        metavar="R",
        help="eye-shape augmentation: vertical squash/stretch within ±R (log), horizontal within "
        "±R/2, a "
        "pitch-like keystone, the aperture label scaled to match; 0 turns it off "
        "(default %(default)s)",
    )
    p.add_argument(
        "--no-lenses",
        dest="lenses",
        action="store_false",
        help="glasses augmentation without the lens effects (magnification, tint, glare)",
    )
    p.add_argument(
        "--blink-oversample",
        type=int,
        default=1,
        metavar="K",
        help="show each mid-blink strip K times an epoch (the teacher's aperture between open and "
        "shut, "
        "or inside a .tag blink not flagged fully closed), each copy augmented anew; 1 turns it "
        "off (default %(default)s)",
    )
    p.add_argument(
        "--exposure-aug",
        type=float,
        default=0.0,
        metavar="F",
        help="add F x N long exposures an epoch: the mean of 2-5 consecutive video frames' strips "
        "labelled with the mean of their teacher apertures, half of them over a blink (as a slow "
        "camera exposing that long records it); 0 turns it off (default %(default)s)",
    )
    p.add_argument(
        "--score",
        default=None,
        metavar="TFLITE",
        help="train nothing: score this lid network (a .tflite) on the --exclude-subjects' cached "
        "strips, as a trained one is (frame AUC, errors on mid-blink and exposed frames)",
    )
    p.add_argument(
        "--validate-subjects",
        default="",
        metavar="IDS",
        help="of the --exclude-subjects, those to follow every 5 epochs (teacher agreement: mean "
        "|error|, the open-eye offset, the error relative to the open eye), to choose settings "
        "on people other than those you score",
    )
    p.add_argument(
        "--members",
        type=int,
        default=1,
        metavar="N",
        help="train N networks (seeds SEED to SEED+N-1) and write their mean as one file with the "
        "same "
        "interface: N times the training and the lid network's run time (default %(default)s)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="T",
        help="TensorFlow CPU threads (default %(default)s: the machine may be shared)",
    )
    p.add_argument(
        "--report",
        default=None,
        metavar="JSON",
        help="write the teacher-vs-student frame scores of the excluded subjects here",
    )
    p.add_argument("--sheet", default=None, metavar="PNG", help=SHEET_HELP)
    return p


def expand_inputs(inputs: list[str]) -> list[Path]:
    """Videos and photos from the arguments (folders searched recursively, sorted)."""
    from eyeblink.lab.evaluate import VIDEO_EXTENSIONS
    from eyeblink.lab.lids_data import PHOTO_SUFFIXES

    out: list[Path] = []
    for a in inputs:
        p = Path(a)
        if p.is_dir():
            out += sorted(
                q for q in p.rglob("*") if q.suffix.lower() in (*VIDEO_EXTENSIONS, *PHOTO_SUFFIXES)
            )
        elif p.is_file():
            out.append(p)
        else:
            raise DatasetError(
                f"training input not found: {p}; give videos, photos or folders of them"
            )
    if not out:
        raise DatasetError(f"no videos or photos found in {', '.join(inputs)}")
    return out


def run(args: argparse.Namespace) -> int:
    """``eyeblink train-lids``: label (cached), train, export, score the excluded subjects."""
    from eyeblink.lab.lids_data import PHOTO_SUFFIXES, BlinkFrames, Samples, build_cache, subject_of

    for name in ("epochs", "batch_size", "width", "threads", "members"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if (
        args.synthetic < 0
        or args.frame_augment < 0
        or args.blink_oversample < 1
        or args.exposure_aug < 0
    ):
        raise ConfigError(
            "--synthetic, --frame-augment and --exposure-aug must be >= 0, --blink-oversample >= 1"
        )
    if args.output is None and args.score is None:
        raise ConfigError("give -o TFLITE for the trained network (or --score TFLITE to score one)")
    out = Path(args.output) if args.output is not None else None
    if out is not None and out.suffix != ".tflite":
        raise ConfigError(f"--output must end in .tflite, got {out}")
    if args.score is not None and not args.exclude_subjects.strip():
        raise ConfigError(
            "--score scores the --exclude-subjects: name them (e.g. --exclude-subjects "
            "000011,000013)"
        )
    plan = OutputPlan()  # before any strip is labelled or epoch trained
    for src in args.inputs:
        plan.read(src, "the input")
    if args.score is not None:
        plan.read(args.score, "--score")
    plan.write(out, "-o").write(args.report, "--report").write(args.sheet, "--sheet").check()
    if args.sheet is not None and Path(args.sheet).suffix.lower() != ".png":
        raise ConfigError(f"--sheet is a PNG: name it NAME.png, got {args.sheet}")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(args.threads))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(args.threads))
    sources = expand_inputs(args.inputs)
    cache = Path(args.cache) if args.cache else Path(tempfile.gettempdir()) / "eyeblink-lids-cache"
    videos = [s for s in sources if s.suffix.lower() not in PHOTO_SUFFIXES]
    photos = [s for s in sources if s.suffix.lower() in PHOTO_SUFFIXES]
    files = build_cache(videos, cache, frame_augment=args.frame_augment, seed=args.seed)
    files += build_cache(photos, cache, frame_augment=12, synthetic=args.synthetic, seed=args.seed)
    excluded = {x.strip() for x in args.exclude_subjects.split(",") if x.strip()}
    # each video's own .tag, by its path: two inputs may share a stem (a clip and a rendered copy of
    # it, whose tags number other frames)
    tags = {tag_key(s): s.with_suffix(".tag") for s in videos if s.with_suffix(".tag").is_file()}
    train_items, test_files = [], []
    for f in files:
        s = Samples.load(f)
        if subject_of(Path(s.source).name) in excluded or subject_of(str(s.source)) in excluded:
            test_files.append(f)
        else:
            train_items.append(s)
    data = Samples.concat(train_items)
    if args.score is not None:
        return score_file(Path(args.score), test_files, tags, excluded, args.report, args.sheet)
    if len(data) == 0:
        raise DatasetError(
            "no labelled strips to train on: no face was found in the training inputs, or every "
            "input's subject is in --exclude-subjects"
        )
    print(
        f"training on {len(data)} strips from {len(train_items)} sources; {len(test_files)} "
        "sources excluded"
    )
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    watch = {x.strip() for x in args.validate_subjects.split(",") if x.strip()}
    val = [
        s
        for s in map(Samples.load, test_files)
        if (subject_of(Path(s.source).name) in watch or subject_of(s.source) in watch)
        and (~s.augmented).any()
    ]

    def follow(epoch: int, model: Any) -> None:
        if val and (epoch % 5 == 0 or epoch == args.epochs):
            pairs = [
                (
                    s.aperture[~s.augmented],
                    predict(model, crop_strips(s.ctx[~s.augmented], None))[0],
                )
                for s in val
            ]
            print(
                f"  validation ({', '.join(sorted(watch))}: {len(val)} sources) at epoch {epoch}: "
                + ", ".join(f"{k} {v:.4f}" for k, v in agreement(pairs).items()),
                flush=True,
            )

    blinks = None
    if args.blink_oversample > 1 or args.exposure_aug > 0:
        blinks = BlinkFrames.concat(
            [
                BlinkFrames.of(
                    s, tag_states(tags[tag_key(s.source)]) if tag_key(s.source) in tags else None
                )
                for s in train_items
            ]
        )
    members = []
    for m in range(args.members):
        if args.members > 1:
            print(f"member {m + 1} of {args.members} (seed {args.seed + m})", flush=True)
        members.append(
            train(
                data.ctx,
                data.aperture,
                epochs=args.epochs,
                batch_size=args.batch_size,
                seed=args.seed + m,
                width=args.width,
                shape_range=args.shape_aug,
                lenses=args.lenses,
                blinks=blinks,
                blink_oversample=args.blink_oversample,
                exposure=args.exposure_aug,
                on_epoch=follow,
            )
        )
    model = ensemble(members)
    assert out is not None
    digest = export_tflite(model, out)
    print(
        f"wrote {out} ({out.stat().st_size:,} bytes, {model.count_params():,} parameters), sha256 "
        f"{digest}"
    )
    if test_files:
        write_scores(
            model,
            {
                "model": str(out),
                "sha256": digest,
                "excluded": sorted(excluded),
                "train_strips": len(data),
            },
            test_files,
            tags,
            args.report,
            args.sheet,
        )
    return 0


def score_file(
    path: Path,
    test_files: list[Path],
    tags: dict[str, Path],
    excluded: set[str],
    report: str | None,
    sheet: str | None = None,
) -> int:
    """``--score``: an exported lid network scored on the excluded subjects' cached strips."""
    from eyeblink.landmarks.lids import LidNetwork

    if not test_files:
        raise DatasetError(
            "--score: none of the inputs belongs to --exclude-subjects "
            f"{','.join(sorted(excluded))}"
        )
    net = LidNetwork(path)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        write_scores(
            net,
            {"model": str(path), "sha256": digest, "excluded": sorted(excluded)},
            test_files,
            tags,
            report,
            sheet,
        )
    finally:
        net.close()
    return 0


def write_scores(
    model: Any,
    head: dict[str, Any],
    test_files: list[Path],
    tags: dict[str, Path],
    report: str | None,
    sheet: str | None = None,
) -> None:
    """Score ``model`` on the excluded sources, print the summary, write ``report`` (JSON) and
    ``sheet`` (the contact sheet of the largest errors, :func:`error_sheet`) if given."""
    scores = score_clips(model, test_files, tags)
    if sheet:
        worst = error_sheet(model, test_files, tags, Path(sheet))
        scores["sheet"] = {"path": str(sheet), "strips": worst}
        print(f"contact sheet of the {len(worst)} largest student - teacher errors: {sheet}")
    ov = scores.get("overall", {})
    if ov:
        print(
            f"excluded subjects, frame AUC closed-vs-open: teacher {ov['auc_teacher']:.4f}, "
            "student "
            f"{ov['auc_student']:.4f}; student - teacher aperture: mean |error| "
            f"{ov['mean_abs_error']:.4f}"
        )
    if scores.get("lid_errors"):
        print("excluded subjects, " + format_lid_errors(scores["lid_errors"]))
    if report:
        from eyeblink.outputs.export import clean_json

        write_text(
            report, json.dumps(clean_json({**head, "scores": scores}), indent=2) + "\n", "--report"
        )


SHEET_HELP = (
    "also write a contact sheet of the excluded subjects' strips where the student's aperture "
    "differs most "
    "from the teacher's, frames inside labelled blinks first (where blinks are lost): what the "
    "next recipe "
    "should aim at"
)
#: the contact sheet: tiles, columns, each strip's scale
SHEET_TILES, SHEET_COLUMNS, SHEET_SCALE = 48, 4, 2


def error_sheet(
    model: Any, files: list[Path], tags: dict[str, Path], path: Path
) -> list[dict[str, Any]]:
    """Write ``path``: a PNG of the :data:`SHEET_TILES` clean strips where the student's aperture
    differs most from the teacher's (the larger of the two eyes' errors), frames inside a labelled
    blink (``.tag``: the lid moving or down) first, where a lost blink comes from; each tile says
    its source, frame and both apertures per eye (teacher T, student S; the subject's right eye
    first). Returns the tiles' rows (source, frame, errors)."""
    import cv2
    import numpy as np

    from eyeblink.lab.lids_data import Samples

    cands: list[tuple[bool, float, str, int, np.ndarray, np.ndarray, np.ndarray]] = []
    for f in files:
        s = Samples.load(f)
        keep = ~s.augmented
        if not keep.any():
            continue
        name = Path(s.source).stem
        states = tag_states(tags[tag_key(s.source)]) if tag_key(s.source) in tags else None
        strips = crop_strips(s.ctx[keep], None)
        student, _ = predict(model, strips)
        err = np.abs(student - s.aperture[keep]).max(axis=1)
        ids = s.frame_id[keep]
        for i in np.argsort(-err)[:SHEET_TILES]:
            in_blink = states is not None and states.get(int(ids[i]), "none") not in (
                "none",
                "open",
            )
            cands.append(
                (
                    in_blink,
                    float(err[i]),
                    name,
                    int(ids[i]),
                    strips[i],
                    s.aperture[keep][i],
                    student[i],
                )
            )
    cands.sort(key=lambda c: (not c[0], -c[1]))
    tiles, rows = [], []
    for in_blink, e, name, frame, strip, teacher, stud in cands[:SHEET_TILES]:
        img = np.clip(
            np.asarray(strip, np.float32) * (255.0 if float(np.max(strip)) <= 1.0 else 1.0), 0, 255
        )
        img = cv2.resize(
            img.astype(np.uint8),
            None,
            fx=SHEET_SCALE,
            fy=SHEET_SCALE,
            interpolation=cv2.INTER_NEAREST,
        )
        tile = np.full((img.shape[0] + 30, img.shape[1]), 255, np.uint8)
        tile[30:] = img
        cv2.putText(
            tile,
            f"{name} f{frame}{' blink' if in_blink else ''}",
            (2, 11),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.35,
            0,
            1,
            cv2.LINE_AA,
        )
        cv2.putText(
            tile,
            f"T {teacher[0]:.2f}/{teacher[1]:.2f} S {stud[0]:.2f}/{stud[1]:.2f}",
            (2, 25),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.35,
            0,
            1,
            cv2.LINE_AA,
        )
        tiles.append(tile)
        rows.append(
            {
                "source": name,
                "frame": frame,
                "in_blink": in_blink,
                "error": round(e, 4),
                "teacher": [round(float(v), 4) for v in teacher],
                "student": [round(float(v), 4) for v in stud],
            }
        )
    if not tiles:
        raise DatasetError("--sheet: no clean strip of the excluded subjects to show")
    while len(tiles) % SHEET_COLUMNS:
        tiles.append(np.full_like(tiles[0], 255))
    grid = np.vstack(
        [np.hstack(tiles[r : r + SHEET_COLUMNS]) for r in range(0, len(tiles), SHEET_COLUMNS)]
    )
    with atomic_path(path) as tmp:
        if not cv2.imwrite(str(tmp), grid):
            raise ConfigError(f"--sheet: could not write {path}")
    return rows


__all__ = [
    "add_parser",
    "auc",
    "build_model",
    "error_sheet",
    "export_tflite",
    "predict",
    "run",
    "train",
]
