"""Train a 12-point eye-contour landmark model (``eyeblink train-landmarks``).

Why: dlib's 68-point predictor is 100 MB; its fit walks 7,500 trees whose leaves hold 136
floats, which does not fit in any CPU cache, so it costs 0.5-2.5 ms per face -- the pipeline's
largest per-frame cost. The blink signal needs only the 12 eye points. An ERT cascade that
predicts only those is a few MB, stays in cache and fits in a fraction of the time.

How (distillation): the 68-point model labels frames of *your* camera (videos or image folders),
and :mod:`eyeblink.lab.synth` adds rendered frames whose eyelid closure is known (so the model sees
fully closed eyes, which the teacher's labels under-represent). Each frame is augmented (roll,
scale, shift, blur, gain/offset, sensor noise, flicker banding); the *augmented* frame goes through
BlazeFace and the box is mapped, derotated and enlarged exactly as :class:`LandmarkFitter` does at
run time, so the training boxes have the run-time box statistics (jitter included). Labels are the
teacher's fit on the *clean* frame carried through the augmentation (the teacher is not asked to
label blurred, noisy frames). The samples are written as a dlib imglab XML (+ PNG crops) into a
temporary folder and trained with ``dlib.train_shape_predictor``; parts are renumbered 0-11:
0-5 = dlib 36-41 (subject's right eye), 6-11 = dlib 42-47 (subject's left eye), which is the
order :class:`eyeblink.landmarks.dlib.EyeFit` uses, so the trained ``.dat`` works with
``--landmark-model`` and ``--landmarks eye12``.

Keep the frames you evaluate on out of training *by subject* (different people, not just
different frames of the same video): ``--test`` takes such held-out inputs and prints the
comparison with the 68-point model (eye-point error / inter-ocular distance, EAR, fit time).
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, EmptySourceError, NoFaceError
from eyeblink.lab import add_command
from eyeblink.outputs.paths import OutputPlan, atomic_path, check_writable

#: Image suffixes read as single photos (a folder of them is read as a frame sequence).
PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".tif", ".tiff")
#: The crop written for a sample spans this many box sides around the box centre (features are
#: sampled near the eye points, well inside; the margin keeps oversampling jitter on real pixels).
CROP_SPAN = 1.3

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class TrainOptions:
    """``dlib.shape_predictor_training_options`` plus the data settings of :func:`build_samples`.

    Model size ~ ``cascade_depth x trees x 2**tree_depth x 12 x 2 x 4`` bytes (the leaves), fit time
    ~ ``cascade_depth x trees x tree_depth``. Defaults: the shipped ``eye12`` model (see
    ``weights/README.md``).
    """

    cascade_depth: int = 10
    num_trees_per_cascade_level: int = 300
    tree_depth: int = 4
    nu: float = 0.1
    oversampling_amount: int = 10
    oversampling_translation_jitter: float = 0.1
    feature_pool_size: int = 400
    feature_pool_region_padding: float = 0.2
    num_test_splits: int = 20
    lambda_param: float = 0.1
    num_threads: int = 0  # 0 = dlib's default: train on the calling thread only
    augment: int = 3  # augmented copies per labelled frame (plus the clean frame itself)
    frame_step: int = 5  # take every N-th frame of a video
    max_frames_per_input: int = 120
    synthetic: int = 600  # rendered frames with random eyelid closure
    seed: int = 0
    verbose: bool = False  # dlib prints its progress per cascade stage

    def __post_init__(self) -> None:
        for name in (
            "cascade_depth",
            "num_trees_per_cascade_level",
            "tree_depth",
            "oversampling_amount",
            "feature_pool_size",
            "num_test_splits",
            "frame_step",
            "max_frames_per_input",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"train option {name} must be >= 1, got {getattr(self, name)}")
        for name in ("augment", "synthetic", "num_threads", "seed"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train option {name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 < self.nu <= 1.0:
            raise ConfigError(f"train option nu must be in (0, 1], got {self.nu}")
        if self.tree_depth > 8:
            raise ConfigError(
                f"train option tree_depth must be <= 8 (model size grows as 2**depth), got "
                f"{self.tree_depth}"
            )

    def dlib_options(self) -> Any:
        import dlib

        o = dlib.shape_predictor_training_options()
        for name in (
            "cascade_depth",
            "num_trees_per_cascade_level",
            "tree_depth",
            "nu",
            "oversampling_amount",
            "oversampling_translation_jitter",
            "feature_pool_size",
            "feature_pool_region_padding",
            "num_test_splits",
            "lambda_param",
            "num_threads",
        ):
            setattr(o, name, getattr(self, name))
        o.random_seed = str(self.seed)
        o.be_verbose = self.verbose
        return o


@dataclass
class LabelledFrame:
    """A clean frame and the 12 reference eye points (frame pixels) of one face on it."""

    source: str
    gray: np.ndarray
    points: np.ndarray  # (12, 2) float64: 0-5 subject's right eye (dlib 36-41), 6-11 left (42-47)
    kind: str = "teacher"  # teacher (68-point model's fit), synthetic (rendered truth) or human


@dataclass
class Sample:
    """One augmented frame, its BlazeFace detection and its reference points (frame pixels)."""

    source: str
    kind: str
    gray: np.ndarray
    face: Any  # FaceDetection
    points: np.ndarray  # (12, 2)
    augmented: bool = False


# --------------------------------------------------------------------------- frames


def iter_inputs(
    paths: Iterable[str | Path], *, frame_step: int, max_frames: int
) -> Iterator[tuple[str, np.ndarray]]:
    """(source name, gray frame) from videos (every ``frame_step``-th frame), image folders and
    photos."""
    import cv2

    from eyeblink.sources.files import open_source

    for p in map(Path, paths):
        if p.is_file() and p.suffix.lower() in PHOTO_SUFFIXES:
            img = cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)
            if img is None:
                raise EmptySourceError(f"cannot read image {p}")
            yield p.name, img
            continue
        n = 0
        with open_source(p, fps=1.0) as src:
            for i, frame in enumerate(src):
                if i % frame_step:
                    continue
                yield f"{p.name}#{frame.index}", frame.gray.copy()
                n += 1
                if n >= max_frames:
                    break


def teacher_frames(
    paths: Iterable[str | Path],
    detector: Any,
    teacher: Any,
    *,
    frame_step: int,
    max_frames: int,
    min_face_px: float = 60.0,
    all_faces: bool = False,
) -> list[LabelledFrame]:
    """Label frames with the teacher (the 68-point :class:`LandmarkFitter`) on BlazeFace boxes.

    Videos: the subject (largest face); photos: every face at least ``min_face_px`` wide when
    ``all_faces`` (group photos), else the subject.
    """
    import numpy as np

    from eyeblink.detect.blazeface import select_subject

    out: list[LabelledFrame] = []
    for name, gray in iter_inputs(paths, frame_step=frame_step, max_frames=max_frames):
        dets = detector.detect(gray)
        faces = [d for d in dets if d.width >= min_face_px] if all_faces else [select_subject(dets)]
        for face in faces:
            if face is None or face.width < min_face_px:
                continue
            fit = teacher.fit(gray, face)
            if np.isfinite(fit.points).all():
                out.append(LabelledFrame(name, gray, fit.points.astype(np.float64)))
    return out


def synthetic_frames(n: int, *, seed: int = 0) -> list[LabelledFrame]:
    """``n`` rendered frames (:mod:`eyeblink.lab.synth`) with random per-eye closure and their true
    eye points.

    A third of the frames have both eyes nearly or fully closed, a third are mid-blink, a third
    open: the teacher's labels on real video are mostly open eyes.
    """
    import numpy as np

    from eyeblink.lab.synth import FaceRenderer, SynthConfig, eye_landmarks_at

    rng = np.random.default_rng([seed, 0x5359])
    scales = (110.0, 160.0, 220.0, 300.0)
    out: list[LabelledFrame] = []
    for k, scale in enumerate(scales):
        cfg = SynthConfig(
            face_scale=scale,
            seed=seed + k,
            head_roll_deg=4.0,
            head_shift_px=20.0,
            noise_sigma=float(rng.uniform(1.0, 4.0)),
        )
        renderer = FaceRenderer(cfg)
        m = n // len(scales) + (1 if k < n % len(scales) else 0)
        for _ in range(m):
            t = float(rng.uniform(0.0, cfg.duration_s))
            mode = rng.integers(3)
            base = (
                rng.uniform(0.85, 1.0)
                if mode == 0
                else rng.uniform(0.2, 0.85)
                if mode == 1
                else rng.uniform(0.0, 0.2)
            )
            cl = float(np.clip(base + rng.normal(0, 0.05), 0.0, 1.0))
            cr = float(np.clip(base + rng.normal(0, 0.05), 0.0, 1.0))
            gray = renderer.render(t, cl, cr, rng)
            pts = np.vstack(
                [eye_landmarks_at(cr, "right", cfg, t), eye_landmarks_at(cl, "left", cfg, t)]
            )
            out.append(LabelledFrame(f"synth{int(scale)}@{t:.3f}", gray, pts, kind="synthetic"))
    return out


# --------------------------------------------------------------------------- augmentation


def augment(
    gray: np.ndarray,
    points: np.ndarray,
    rng: np.random.Generator,
    *,
    strength: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """A randomly perturbed copy of ``gray`` and ``points`` carried along.

    Geometry: roll ±25° and scale 0.65-1.5 about the eye centre, a shift of up to 10% of the
    frame. Photometry: Gaussian blur (sigma 0-1.5 px), gain 0.5-1.4 and offset ±30 gray levels,
    gamma 0.7-1.4, horizontal flicker/rolling-shutter banding (±8%), sensor noise sigma 0-8.
    ``strength`` 0 returns the frame unchanged.
    """
    import cv2
    import numpy as np

    if strength <= 0:
        return gray, points
    h, w = gray.shape
    c = points.mean(0)
    roll = rng.uniform(-25, 25) * strength
    iod = float(np.linalg.norm(points[:6].mean(0) - points[6:].mean(0)))
    # keep the face between ~40 and ~250 px inter-ocular distance (BlazeFace short range, a 640x480
    # frame)
    lo, hi = max(0.65, 30.0 / max(iod, 1.0)), min(1.5, 0.45 * min(h, w) / max(iod, 1.0))
    scale = float(np.exp(rng.uniform(np.log(lo), np.log(max(hi, lo))))) if strength else 1.0
    m: np.ndarray = np.asarray(
        cv2.getRotationMatrix2D((float(c[0]), float(c[1])), roll, scale), np.float64
    )
    m[:, 2] += rng.uniform(-0.1, 0.1, 2) * (w, h) * strength
    img = cv2.warpAffine(gray, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT101)
    pts = points @ m[:, :2].T + m[:, 2]
    f: np.ndarray = img.astype(np.float32)
    sigma = rng.uniform(0.0, 1.5) * strength
    if sigma > 0.3:
        f = cv2.GaussianBlur(f, (0, 0), sigma)
    gamma = float(np.exp(rng.uniform(np.log(0.7), np.log(1.4)) * strength))
    f = 255.0 * np.power(np.clip(f / 255.0, 0, 1), gamma)
    gain = 1.0 + rng.uniform(-0.5, 0.4) * strength
    offset = rng.uniform(-30, 30) * strength
    period = rng.uniform(40, 400)
    band = 1.0 + rng.uniform(0, 0.08) * strength * np.sin(
        2 * np.pi * np.arange(h) / period + rng.uniform(0, 6.3)
    )
    f = f * (gain * band.astype(np.float32))[:, None] + offset
    f += rng.standard_normal(f.shape, dtype=np.float32) * float(rng.uniform(0, 8) * strength)
    return np.clip(f + 0.5, 0, 255).astype(np.uint8), pts


def match_face(dets: Sequence[Any], points: np.ndarray, max_err: float = 0.35) -> Any:
    """The detection whose eye keypoints sit on ``points``' eye centres (within ``max_err`` IOD),
    or None."""
    import numpy as np

    re_c, le_c = points[:6].mean(0), points[6:].mean(0)
    iod = float(np.linalg.norm(re_c - le_c))
    best, best_err = None, max_err
    for d in dets:
        err = float(
            max(
                np.linalg.norm(np.asarray(d.keypoints[0]) - re_c),
                np.linalg.norm(np.asarray(d.keypoints[1]) - le_c),
            )
        )
        if err / max(iod, 1e-6) < best_err:
            best, best_err = d, err / iod
    return best


def build_samples(
    frames: Sequence[LabelledFrame], detector: Any, *, augment_copies: int, rng: np.random.Generator
) -> list[Sample]:
    """The clean frame plus ``augment_copies`` augmented copies of each, with BlazeFace run on
    each."""

    out: list[Sample] = []
    for fr in frames:
        for k in range(augment_copies + 1):
            img, pts = augment(fr.gray, fr.points, rng, strength=0.0 if k == 0 else 1.0)
            face = match_face(detector.detect(img), pts)
            if face is not None:
                out.append(Sample(fr.source, fr.kind, img, face, pts, augmented=k > 0))
    return out


# --------------------------------------------------------------------------- run-time geometry


def runtime_crop(
    gray: np.ndarray, face: Any, fitter: Any
) -> tuple[np.ndarray, tuple[int, int, int, int], np.ndarray]:
    """What ``fitter`` (a :class:`LandmarkFitter`) feeds dlib for ``face``: (crop, rect, 2x3
    frame->crop).

    Mirrors :meth:`LandmarkFitter.fit`: an upright face of at least ``min_face_px`` is fitted on the
    frame itself (here: an integer-offset window of it, the same pixels), a rolled or small one on a
    crop rotated upright and enlarged to ``min_face_px``. The crop spans :data:`CROP_SPAN` box
    sides.
    """
    import cv2
    import numpy as np

    cx, cy, side, roll = fitter.square_for(face)
    scale = max(1.0, fitter.min_face_px / side) if side > 0 else 1.0
    if abs(roll) < fitter.derotate_min_deg and scale == 1.0:
        half = side / 2
        rect = (round(cx - half), round(cy - half), round(cx + half), round(cy + half))
        pad = math.ceil(side * (CROP_SPAN - 1) / 2)
        x0, y0 = rect[0] - pad, rect[1] - pad
        size = rect[2] - rect[0] + 2 * pad + 1
        m = np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0]])
        crop = cv2.warpAffine(
            gray, m, (size, size), flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_REPLICATE
        )
        return crop, (rect[0] - x0, rect[1] - y0, rect[2] - x0, rect[3] - y0), m
    roll = roll if abs(roll) >= fitter.derotate_min_deg else 0.0
    size = math.ceil(side * scale * CROP_SPAN)
    m = cv2.getRotationMatrix2D((cx, cy), roll, scale)
    m[0, 2] += size / 2 - cx
    m[1, 2] += size / 2 - cy
    crop = cv2.warpAffine(
        gray, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    half, c0 = side * scale / 2, size / 2
    return crop, (round(c0 - half), round(c0 - half), round(c0 + half), round(c0 + half)), m


def write_imglab(samples: Sequence[Sample], fitter: Any, folder: Path) -> Path:
    """Write the run-time crops as PNGs and a dlib imglab XML (parts ``00``-``11``) into
    ``folder``."""
    import xml.etree.ElementTree as ET

    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    root = ET.Element("dataset")
    ET.SubElement(root, "name").text = "eyeblink eye12 training set"
    images = ET.SubElement(root, "images")
    for i, s in enumerate(samples):
        crop, (x0, t, r, b), m = runtime_crop(s.gray, s.face, fitter)
        name = f"{i:06d}.png"
        cv2.imwrite(str(folder / name), crop)
        pts = s.points @ m[:, :2].T + m[:, 2]
        im = ET.SubElement(images, "image", file=name)
        box = ET.SubElement(
            im, "box", top=str(t), left=str(x0), width=str(r - x0 + 1), height=str(b - t + 1)
        )
        for k, (x, y) in enumerate(pts):
            ET.SubElement(
                box, "part", name=f"{k:02d}", x=str(round(float(x))), y=str(round(float(y)))
            )
    xml = folder / "eye12.xml"
    ET.ElementTree(root).write(xml)
    return xml


def train_model(
    samples: Sequence[Sample],
    output: Path,
    options: TrainOptions,
    *,
    fitter: Any,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Train a 12-point predictor on ``samples`` into ``output``; returns timing and size.

    The imglab set goes to ``workdir`` when given (kept, e.g. to inspect with dlib's ``imglab``),
    else to a temporary folder that is removed afterwards.
    """
    import dlib

    if not samples:
        raise NoFaceError("no training samples: BlazeFace found no face on any training frame")
    tmp = Path(tempfile.mkdtemp(prefix="eyeblink-eye12-")) if workdir is None else workdir
    try:
        t0 = time.perf_counter()
        xml = write_imglab(samples, fitter, tmp)
        t1 = time.perf_counter()
        output.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(output) as tmp:  # whole or not at all
            dlib.train_shape_predictor(str(xml), str(tmp), options.dlib_options())
        t2 = time.perf_counter()
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "samples": len(samples),
        "write_s": round(t1 - t0, 1),
        "train_s": round(t2 - t1, 1),
        "bytes": output.stat().st_size,
    }


# --------------------------------------------------------------------------- comparison


def eye_error(pts: np.ndarray, ref: np.ndarray) -> float:
    """Mean distance of the 12 eye points to the reference, in reference inter-ocular distances."""
    import numpy as np

    iod = float(np.linalg.norm(ref[:6].mean(0) - ref[6:].mean(0)))
    return float(np.linalg.norm(np.asarray(pts, dtype=np.float64) - ref, axis=1).mean() / iod)


def compare(
    samples: Sequence[Sample], fitters: dict[str, Any]
) -> dict[str, dict[str, dict[str, float]]]:
    """Per fitter and per sample kind: error/IOD (mean, median, p90), |dEAR| vs reference, fit ms
    (median, p99).

    Groups: each sample kind, ``<kind>+aug`` (its augmented copies only: where the reference is the
    teacher's fit on the clean frame, the teacher itself scores 0 on the clean copy, so only the
    augmented rows compare teacher and student fairly) and ``all``.
    """
    import numpy as np

    from eyeblink.landmarks.eyes import eye_ears

    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, fitter in fitters.items():
        rows: dict[str, list[tuple[float, float, float]]] = {}
        for s in samples:
            t0 = time.perf_counter()
            fit = fitter.fit(s.gray, s.face)
            dt = (time.perf_counter() - t0) * 1e3
            dear = float(
                np.nanmean(
                    np.abs(np.array([fit.ear_left, fit.ear_right]) - np.array(eye_ears(s.points)))
                )
            )
            for key in (s.kind, "all", *((f"{s.kind}+aug",) if s.augmented else ())):
                rows.setdefault(key, []).append((eye_error(fit.points, s.points), dear, dt))
        out[name] = {}
        for key, r in rows.items():
            a = np.array(r)
            out[name][key] = {
                "n": len(a),
                "err_mean": float(a[:, 0].mean()),
                "err_median": float(np.median(a[:, 0])),
                "err_p90": float(np.percentile(a[:, 0], 90)),
                "dear_mean": float(np.nanmean(a[:, 1])),
                "ms_median": float(np.median(a[:, 2])),
                "ms_p99": float(np.percentile(a[:, 2], 99)),
            }
    return out


def format_comparison(table: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = [
        f"{'model':8} {'frames':14} {'n':>5} {'err/IOD':>8} {'median':>7} {'p90':>7} {'|dEAR|':>7} "
        f"{'ms med':>7} {'ms p99':>7}"
    ]
    for name, per in table.items():
        for key, v in sorted(per.items()):
            lines.append(
                f"{name:8} {key:14} {v['n']:5d} {v['err_mean']:8.4f} {v['err_median']:7.4f} "
                f"{v['err_p90']:7.4f} {v['dear_mean']:7.4f} {v['ms_median']:7.3f} "
                f"{v['ms_p99']:7.3f}"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI


_OPTION_HELP = {
    "cascade_depth": "cascade stages (size and fit time grow linearly)",
    "num_trees_per_cascade_level": "regression trees per stage (size and fit time grow linearly)",
    "tree_depth": "depth of each tree (size grows as 2**depth)",
    "nu": "shrinkage (learning rate) of each tree, in (0, 1]",
    "oversampling_amount": "random initial shapes per training sample",
    "oversampling_translation_jitter": "jitter of those initial shapes, in box sizes",
    "feature_pool_size": "pixels sampled per stage to build split features from",
    "feature_pool_region_padding": "how far outside the eye points' box pixels are sampled",
    "num_test_splits": "random split candidates tried per tree node",
    "num_threads": "training threads (0 = dlib's single-threaded default)",
    "seed": "random seed of augmentation, synthetic frames and training",
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    d = TrainOptions()
    p = add_command(
        subparsers,
        "train-landmarks",
        __doc__,
        help="train a 12-point eye landmark model (eye12) on your own camera's frames",
    )
    p.add_argument(
        "inputs",
        nargs="*",
        metavar="VIDEO_OR_IMAGE",
        help="training recordings, image folders or photos (one subject per video; photos may hold "
        "several faces)",
    )
    p.add_argument("-o", "--output", required=True, metavar="DAT", help="the trained model (.dat)")
    p.add_argument(
        "--test",
        nargs="+",
        default=[],
        metavar="VIDEO_OR_IMAGE",
        help="held-out inputs (other subjects!): compare the trained model with the 68-point model",
    )
    p.add_argument(
        "--synthetic",
        type=int,
        default=d.synthetic,
        metavar="N",
        help="rendered frames with known eyelid closure to add (default %(default)s)",
    )
    p.add_argument(
        "--augment",
        type=int,
        default=d.augment,
        metavar="K",
        help="augmented copies per frame (default %(default)s)",
    )
    p.add_argument(
        "--frame-step",
        type=int,
        default=d.frame_step,
        metavar="N",
        help="use every N-th frame of a video (default %(default)s)",
    )
    p.add_argument(
        "--max-frames",
        type=int,
        default=d.max_frames_per_input,
        metavar="N",
        help="at most N frames per video (default %(default)s)",
    )
    p.add_argument(
        "--keep-dataset",
        metavar="DIR",
        default=None,
        help="write the imglab XML and crops here and keep them (default: a temporary folder)",
    )
    g = p.add_argument_group("dlib training options (see dlib.shape_predictor_training_options)")
    for name, text in _OPTION_HELP.items():
        default = getattr(d, name)
        g.add_argument(
            "--" + name.replace("_", "-"),
            type=type(default),
            default=default,
            metavar=name.split("_")[-1].upper(),
            help=f"{text} (default {default})",
        )
    return p


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.landmarks.dlib import LandmarkFitter

    opts = TrainOptions(
        **{
            k: getattr(args, k)
            for k in (
                "cascade_depth",
                "num_trees_per_cascade_level",
                "tree_depth",
                "nu",
                "oversampling_amount",
                "oversampling_translation_jitter",
                "feature_pool_size",
                "feature_pool_region_padding",
                "num_test_splits",
                "num_threads",
                "seed",
                "augment",
                "synthetic",
            )
        },
        frame_step=args.frame_step,
        max_frames_per_input=args.max_frames,
    )
    if not args.inputs and not opts.synthetic:
        raise ConfigError("nothing to train on: give training inputs and/or --synthetic N > 0")
    rng = np.random.default_rng(opts.seed)
    output = Path(args.output)
    plan = OutputPlan()  # before any frame is labelled
    for src in [*args.inputs, *args.test]:
        plan.read(src, "the input")
    plan.write(output, "-o").check()
    if args.keep_dataset:
        check_writable(Path(args.keep_dataset) / "training.xml", "--keep-dataset")
    teacher = LandmarkFitter()
    with FaceDetector() as detector:
        t0 = time.perf_counter()
        frames = teacher_frames(
            args.inputs,
            detector,
            teacher,
            frame_step=opts.frame_step,
            max_frames=opts.max_frames_per_input,
            all_faces=True,
        )
        frames += synthetic_frames(opts.synthetic, seed=opts.seed)
        samples = build_samples(frames, detector, augment_copies=opts.augment, rng=rng)
        print(
            f"{len(frames)} labelled frames -> {len(samples)} samples in "
            f"{time.perf_counter() - t0:.0f} s; "
            f"training {output} with {asdict(opts)}",
            flush=True,
        )
        stats = train_model(
            samples,
            output,
            opts,
            fitter=teacher,
            workdir=Path(args.keep_dataset) if args.keep_dataset else None,
        )
        print(
            f"trained in {stats['train_s']:.0f} s: {output} ({stats['bytes'] / 1e6:.2f} MB)",
            flush=True,
        )
        if args.test:
            test_frames = teacher_frames(
                args.test,
                detector,
                teacher,
                frame_step=opts.frame_step,
                max_frames=opts.max_frames_per_input,
                all_faces=True,
            )
            test = build_samples(
                test_frames, detector, augment_copies=1, rng=np.random.default_rng(opts.seed + 1)
            )
            student = LandmarkFitter(output)
            print(
                f"held-out: {len(test)} samples (reference: the 68-point model on the clean frame)"
            )
            print(format_comparison(compare(test, {"face68": teacher, "eye12": student})))
    return 0
