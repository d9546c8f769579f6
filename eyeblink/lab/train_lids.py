"""``eyeblink train-lids``: train the lid network of ``--landmarks lids`` (Keras 3 on TensorFlow, CPU).

The student reproduces the ``mesh`` eye model's lid aperture (the teacher: face mesh + MediaPipe's iris
network, :mod:`eyeblink.lab.lids_data`) from the two eye crops the face mesh places
(:mod:`eyeblink.landmarks.lids`). Each training step sees a strip cut from the cached context with a
random placement jitter (roll ±6°, scale ±10 %, shift), flipped left-right half of the time (the eyes'
labels swapped), and photometric noise: gamma, gain and offset, blur, down-and-up scaling, sensor noise,
row banding (mains flicker / rolling shutter) and glasses-like bars (rims and bridges, dark or bright).

The network (:func:`build_model`, 31k parameters at the default width): per eye crop (40x60, the
subject's left eye mirrored) a per-crop standardisation, a 3x3 stride-2 convolution, three
depthwise-separable stride-2 blocks and two dense layers, giving the aperture and the log of its
expected error. Loss: the squared aperture error (in units of 0.02) plus 0.1 x the Gaussian negative
log-likelihood of that error under the predicted sigma (sigma's head only: the aperture is not pulled
by it).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, DatasetError
from eyeblink.outputs.paths import OutputPlan, atomic_path, write_text

if TYPE_CHECKING:
    import numpy as np

#: Scale of the aperture loss: an error of this size costs 1.
APERTURE_UNIT = 0.02
SIGMA_WEIGHT = 0.1


# --------------------------------------------------------------------------- the network


def training_keras() -> Any:
    """Keras 3 on TensorFlow (training and .tflite export run on TensorFlow)."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        raise ConfigError('train-lids needs TensorFlow, which is not installed: pip install "eyeblink[tf]"') from None
    from eyeblink.detect.keras_graph import use_keras_backend

    return use_keras_backend("tensorflow", eyeblink_backend="train-lids")


def build_model(width: int = 16, seed: int = 0) -> Any:
    """The lid network: ``(B, 40, 60, 1)`` eye crops in [0, 1] -> ``(B, 2)`` (aperture, log sigma)."""
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


def lids_loss(y_true: Any, y_pred: Any) -> Any:
    """Squared aperture error (units of :data:`APERTURE_UNIT`) + :data:`SIGMA_WEIGHT` x the Gaussian NLL of
    the (stopped) error under the predicted log sigma."""
    from keras import ops

    y = y_true[:, 0]
    mu, ls = y_pred[:, 0], ops.clip(y_pred[:, 1], -8.0, 2.0)
    err = mu - y
    nll = ls + 0.5 * ops.square(ops.stop_gradient(err)) * ops.exp(-2.0 * ls)
    return ops.mean(ops.square(err / APERTURE_UNIT) + SIGMA_WEIGHT * nll)


# --------------------------------------------------------------------------- augmentation


def crop_strips(ctx: np.ndarray, rng: np.random.Generator | None, *, jitter: bool = True) -> np.ndarray:
    """``(N, 40, 120)`` strips from ``(N, H, W)`` context strips: the centre crop, or (``rng``) a random
    placement jitter (roll ±6°, scale ±10 %, shift ±4 x ±3 px)."""
    import cv2
    import numpy as np

    from eyeblink.landmarks.lids import STRIP_SHAPE

    n, ch, cw = ctx.shape
    h, w = STRIP_SHAPE
    oy, ox = (ch - h) / 2, (cw - w) / 2
    if rng is None or not jitter:
        return np.ascontiguousarray(ctx[:, int(oy):int(oy) + h, int(ox):int(ox) + w])
    out = np.empty((n, h, w), np.uint8)
    for i in range(n):
        m = cv2.getRotationMatrix2D((w / 2, h / 2), float(rng.uniform(-6, 6)),
                                    float(np.exp(rng.uniform(-0.1, 0.1))))  # strip -> strip (about its centre)
        m[:, 2] += (ox + rng.uniform(-4, 4), oy + rng.uniform(-3, 3))  # ... -> context
        out[i] = cv2.warpAffine(ctx[i], m, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                borderMode=cv2.BORDER_REPLICATE)
    return out


def photometric(strips: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Gamma, gain/offset, blur, down-and-up scaling, row banding, glasses-like bars and noise, per strip
    (the per-pixel parts vectorised over the batch: a pass over 20k strips takes a few seconds)."""
    import cv2
    import numpy as np

    n, h, w = strips.shape
    f = strips.astype(np.float32)
    for i in np.flatnonzero(rng.random(n) < 0.3):  # a smaller face: fewer pixels per eye
        s = rng.uniform(0.35, 0.8)
        small = cv2.resize(f[i], (max(8, round(w * s)), max(4, round(h * s))), interpolation=cv2.INTER_AREA)
        f[i] = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    for i in np.flatnonzero(rng.random(n) < 0.4):
        f[i] = cv2.GaussianBlur(f[i], (0, 0), float(rng.uniform(0.4, 1.5)))
    for i in np.flatnonzero(rng.random(n) < 0.25):  # glasses: a rim round each eye or a bar across
        shade = float(rng.choice([rng.uniform(0, 50), rng.uniform(190, 255)]))
        t = int(rng.integers(1, 4))
        if rng.random() < 0.5:
            for cx in (w / 4, 3 * w / 4):
                cv2.ellipse(f[i], (round(cx + rng.normal(0, 2)), round(h / 2 + rng.normal(0, 2))),
                            (round(w * rng.uniform(0.17, 0.24)), round(h * rng.uniform(0.3, 0.45))),
                            float(rng.normal(0, 5)), 0, 360, shade, t)
        else:
            y = round(h * rng.choice([rng.uniform(0.05, 0.25), rng.uniform(0.75, 0.95)]))
            cv2.line(f[i], (0, y), (w, y + int(rng.integers(-4, 5))), shade, t)
        if rng.random() < 0.5:  # a reflection on the lens
            cv2.circle(f[i], (int(rng.integers(0, w)), int(rng.integers(0, h))), int(rng.integers(1, 4)),
                       float(rng.uniform(200, 255)), -1)
    gamma = np.exp(rng.uniform(np.log(0.6), np.log(1.6), (n, 1, 1))).astype(np.float32)
    f = 255.0 * np.power(np.clip(f / 255.0, 0, 1), gamma)
    rows = np.arange(h, dtype=np.float32)[None, :, None]
    band = 1.0 + rng.uniform(0, 0.12, (n, 1, 1)) * np.sin(
        2 * np.pi * rows / rng.uniform(8, 120, (n, 1, 1)) + rng.uniform(0, 6.3, (n, 1, 1)))
    f = f * (rng.uniform(0.5, 1.5, (n, 1, 1)) * band).astype(np.float32) + rng.uniform(-30, 30, (n, 1, 1))
    f += rng.standard_normal(f.shape, dtype=np.float32) * rng.uniform(0, 8, (n, 1, 1)).astype(np.float32)
    return np.clip(f + 0.5, 0, 255).astype(np.uint8)


def training_batch(ctx: np.ndarray, aperture: np.ndarray, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One augmented pass over the samples: network inputs ``(2N, 40, 60, 1)`` and targets ``(2N, 1)``."""
    import numpy as np

    from eyeblink.landmarks.lids import eye_inputs

    strips = photometric(crop_strips(ctx, rng), rng)
    ap = aperture.astype(np.float32).copy()
    flip = rng.random(len(strips)) < 0.5
    strips[flip] = strips[flip][:, :, ::-1]
    ap[flip] = ap[flip][:, ::-1]
    return eye_inputs(strips), ap.reshape(-1, 1)


# --------------------------------------------------------------------------- training and export


def train(ctx: np.ndarray, aperture: np.ndarray, *, epochs: int = 20, batch_size: int = 128, seed: int = 0,
          learning_rate: float = 3e-3, width: int = 16, log: Any = print) -> Any:
    """A trained lid network (Keras) on the context strips ``ctx`` and their teacher apertures."""
    import numpy as np

    keras = training_keras()
    if len(ctx) == 0:
        raise DatasetError("no labelled strips to train on (no face found in the training inputs?)")
    model = build_model(width, seed)
    steps = max(1, epochs * math.ceil(2 * len(ctx) / batch_size))
    sched = keras.optimizers.schedules.CosineDecay(learning_rate, steps, alpha=0.02)
    model.compile(optimizer=keras.optimizers.Adam(sched), loss=lids_loss)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        t0 = time.perf_counter()
        x, y = training_batch(ctx, aperture, rng)
        hist = model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=True, verbose=0)
        log(f"epoch {epoch + 1}/{epochs}: loss {hist.history['loss'][-1]:.4f} "
            f"({time.perf_counter() - t0:.1f} s, {len(x)} eye crops)")
    return model


def predict(model: Any, strips: np.ndarray, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(aperture, log sigma) ``(N, 2)`` each (subject's right, left eye) of ``(N, 40, 120)`` strips (Keras)."""
    import numpy as np

    from eyeblink.landmarks.lids import eye_inputs

    out = np.asarray(model.predict(eye_inputs(strips), batch_size=batch_size, verbose=0), np.float64)
    out = out.reshape(len(strips), 2, 2)
    return out[..., 0], out[..., 1]


def export_tflite(model: Any, path: Path) -> str:
    """Write ``model`` as a float32 ``.tflite`` with the run-time interface (input ``[2, 40, 60, 1]``,
    output ``[2, 2]``); returns its sha256."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from eyeblink.landmarks.lids import EYE_SHAPE

    @tf.function(input_signature=[tf.TensorSpec([2, *EYE_SHAPE, 1], tf.float32, name="eyes")], autograph=False)
    def serve(x: Any) -> Any:
        return model(x, training=False)

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())  # weights as constants
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
    return float((r[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def tag_states(tag_path: Path) -> dict[int, str]:
    """Frame id -> ``closed`` (an eye flagged fully closed), ``open`` (outside every blink) or ``blink``."""
    states: dict[int, str] = {}
    inside = False
    for line in tag_path.read_text(encoding="utf-8", errors="replace").splitlines():
        s = line.strip()
        if s == "#start":
            inside = True
            continue
        if s == "#end":
            break
        if not inside or not s:
            continue
        parts = [x.strip() for x in s.split(":")]
        fid, bid = int(parts[0]), int(parts[1])
        closed = "C" in (parts[3] if len(parts) > 3 else "", parts[5] if len(parts) > 5 else "")
        states[fid] = "closed" if closed else "open" if bid < 0 else "blink"
    return states


def frame_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Frame AUC closed-vs-open of the teacher and the student (score: minus the mean aperture of both eyes)
    and the student's mean |error| against the teacher, over ``rows`` (``teacher``, ``student``: (N, 2)
    apertures; ``states``: (N,) tag states)."""
    import numpy as np

    if not rows:
        return {}
    t = np.concatenate([r["teacher"] for r in rows]).mean(1)
    s = np.concatenate([r["student"] for r in rows]).mean(1)
    st = np.concatenate([r["states"] for r in rows])
    err = np.abs(np.concatenate([r["student"] - r["teacher"] for r in rows]))
    closed, opened = st == "closed", st == "open"
    return {"frames": len(st), "closed": int(closed.sum()), "open": int(opened.sum()),
            "auc_teacher": auc(-t[closed], -t[opened]), "auc_student": auc(-s[closed], -s[opened]),
            "mean_abs_error": float(err.mean()), "p95_abs_error": float(np.percentile(err, 95)),
            "corr": float(np.corrcoef(t, s)[0, 1]) if len(t) > 2 else math.nan}


def score_clips(model: Any, files: list[Path], tags: dict[str, Path]) -> dict[str, Any]:
    """Teacher vs student on the clean (not frame-augmented) cached strips of annotated clips, per condition
    (the ZJU file-name suffix) and overall."""
    import numpy as np

    from eyeblink.lab.evaluate import group_of
    from eyeblink.lab.lids_data import Samples

    rows = []
    for f in files:
        s = Samples.load(f)
        name = Path(s.source).stem
        tag = tags.get(name)
        keep = ~s.augmented
        if tag is None or not keep.any():
            continue
        states = tag_states(tag)
        student, _ = predict(model, crop_strips(s.ctx[keep], None))
        rows.append({"clip": name, "group": group_of(Path(name)), "teacher": s.aperture[keep],
                     "student": student, "states": np.array([states.get(int(i), "none") for i in s.frame_id[keep]])})
    out: dict[str, Any] = {"overall": frame_scores(rows), "groups": {}}
    for g in sorted({r["group"] for r in rows}):
        out["groups"][g] = frame_scores([r for r in rows if r["group"] == g])
    return out


# --------------------------------------------------------------------------- the command


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "train-lids",
        help="train the lid network of --landmarks lids on teacher (mesh) apertures (TensorFlow, CPU)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="VIDEO_DIR_OR_PHOTO",
                   help="training recordings, folders of them (searched recursively) or photos; a .tag beside a "
                        "video is used for the frame scores")
    p.add_argument("-o", "--output", required=True, metavar="TFLITE", help="the trained lid network (.tflite)")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="where the teacher-labelled strips are kept between runs (default: a folder in the "
                        "system temp dir; never inside a repository: the frames may be research-only data)")
    p.add_argument("--exclude-subjects", default="", metavar="IDS",
                   help="comma-separated people never trained on (ZJU subject ids such as 000011, Eyeblink8 "
                        "video folders such as EyeBlink8_6): leave-subjects-out; their clips are scored instead")
    p.add_argument("--synthetic", type=int, default=0, metavar="N",
                   help="also N rendered faces with planted closures (default %(default)s)")
    p.add_argument("--frame-augment", type=int, default=1, metavar="K",
                   help="rolled (±30°) / scaled copies of each video frame besides the frame itself "
                        "(photos get 12; default %(default)s)")
    p.add_argument("--epochs", type=int, default=20, metavar="E", help="training epochs (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=128, metavar="B", help="(default %(default)s)")
    p.add_argument("--width", type=int, default=16, metavar="C",
                   help="channels of the first convolution; the blocks have 2, 3, 4x (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    p.add_argument("--threads", type=int, default=1, metavar="T",
                   help="TensorFlow CPU threads (default %(default)s: the machine may be shared)")
    p.add_argument("--report", default=None, metavar="JSON",
                   help="write the teacher-vs-student frame scores of the excluded subjects here")
    return p


def expand_inputs(inputs: list[str]) -> list[Path]:
    """Videos and photos from the arguments (folders searched recursively, sorted)."""
    from eyeblink.lab.evaluate import VIDEO_EXTENSIONS
    from eyeblink.lab.lids_data import PHOTO_SUFFIXES

    out: list[Path] = []
    for a in inputs:
        p = Path(a)
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.suffix.lower() in (*VIDEO_EXTENSIONS, *PHOTO_SUFFIXES))
        elif p.is_file():
            out.append(p)
        else:
            raise DatasetError(f"training input not found: {p}; give videos, photos or folders of them")
    if not out:
        raise DatasetError(f"no videos or photos found in {', '.join(inputs)}")
    return out


def run(args: argparse.Namespace) -> int:
    """``eyeblink train-lids``: label (cached), train, export, score the excluded subjects."""
    from eyeblink.lab.lids_data import PHOTO_SUFFIXES, Samples, build_cache, subject_of

    for name in ("epochs", "batch_size", "width", "threads"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.synthetic < 0 or args.frame_augment < 0:
        raise ConfigError("--synthetic and --frame-augment must be >= 0")
    out = Path(args.output)
    if out.suffix != ".tflite":
        raise ConfigError(f"--output must end in .tflite, got {out}")
    plan = OutputPlan()  # before any strip is labelled or epoch trained
    for src in args.inputs:
        plan.read(src, "the input")
    plan.write(out, "-o").write(args.report, "--report").check()
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(args.threads))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(args.threads))
    sources = expand_inputs(args.inputs)
    cache = Path(args.cache) if args.cache else Path(tempfile.gettempdir()) / "eyeblink-lids-cache"
    videos = [s for s in sources if s.suffix.lower() not in PHOTO_SUFFIXES]
    photos = [s for s in sources if s.suffix.lower() in PHOTO_SUFFIXES]
    files = build_cache(videos, cache, frame_augment=args.frame_augment, seed=args.seed)
    files += build_cache(photos, cache, frame_augment=12, synthetic=args.synthetic, seed=args.seed)
    excluded = {x.strip() for x in args.exclude_subjects.split(",") if x.strip()}
    train_items, test_files = [], []
    for f in files:
        s = Samples.load(f)
        if subject_of(Path(s.source).name) in excluded or subject_of(str(s.source)) in excluded:
            test_files.append(f)
        else:
            train_items.append(s)
    data = Samples.concat(train_items)
    if len(data) == 0:
        raise DatasetError("no labelled strips to train on: no face was found in the training inputs, or every "
                           "input's subject is in --exclude-subjects")
    print(f"training on {len(data)} strips from {len(train_items)} sources; {len(test_files)} sources excluded")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    model = train(data.ctx, data.aperture, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                  width=args.width)
    digest = export_tflite(model, out)
    print(f"wrote {out} ({out.stat().st_size:,} bytes, {model.count_params():,} parameters), sha256 {digest}")
    if test_files:
        tags = {s.stem: s.with_suffix(".tag") for s in videos if s.with_suffix(".tag").is_file()}
        scores = score_clips(model, test_files, tags)
        report = {"model": str(out), "sha256": digest, "excluded": sorted(excluded),
                  "train_strips": len(data), "scores": scores}
        ov = scores.get("overall", {})
        if ov:
            print(f"excluded subjects, frame AUC closed-vs-open: teacher {ov['auc_teacher']:.4f}, student "
                  f"{ov['auc_student']:.4f}; student - teacher aperture: mean |error| {ov['mean_abs_error']:.4f}")
        if args.report:
            from eyeblink.outputs.export import clean_json

            write_text(args.report, json.dumps(clean_json(report), indent=2) + "\n", "--report")
    return 0


__all__ = ["add_parser", "auc", "build_model", "export_tflite", "predict", "run", "train"]
