"""``eyeblink bench detectors``: the face detectors side by side on real frames.

Candidates (``--detectors``, default all): ``blazeface-short`` (eyeblink's detector: MediaPipe's
short-range BlazeFace on LiteRT), ``blazeface-full`` (MediaPipe's full-range BlazeFace, same wheel
and licence, 192x192 input), ``dlib-hog`` (``dlib.get_frontal_face_detector``, upsampled once as in
dlib's examples; extra ``dlib``), ``haar`` (OpenCV's ``haarcascade_frontalface_default.xml``,
scale step 1.1, 5 neighbours) and ``mtcnn`` (the ``mtcnn`` package on TensorFlow; extra ``mtcnn``).
A detector whose package is missing gets a row that says how to install it.

Measured on (every input path is an argument):

* ``--photos DIR``: photos with hand-drawn face boxes in dlib imglab XML files (e.g. dlib's
  ``examples/faces``; files ending ``_with_face_landmarks.xml`` repeat the same boxes and are
  skipped). Detections match boxes one-to-one, best IoU first; a match needs IoU >= 0.5.
  Reported: precision, recall, and the mean IoU of the matches (box conventions differ: dlib's
  boxes are square from the brows to the chin, MTCNN's and Haar's include more forehead).
* ``--videos [NAME=]PATH`` (repeatable; a file or a folder searched recursively; one table group per
  argument): recordings with one face in every frame. Every ``--every``-th frame and the frame
  after it are detected (a pair, at most ``--max-pairs`` per group spread evenly over its videos).
  Reported: recall (frames with at least one box), false boxes per frame (boxes beyond the one
  face), and box jitter: 1 - IoU of the face's box in the two frames of a pair (the first frame's
  best box, the second frame's box overlapping it most), median and 90th percentile.
  Video frames are decoded gray (the product's cameras are gray) and given to every detector as
  three equal channels.
* time: ms per 640x480 frame on one core (the process is pinned to one CPU; LiteRT, OpenCV and
  TensorFlow are limited to one thread), over ``--timing-frames`` frames taken from the video
  samples (resized to 640x480 when they are not) after 2 untimed calls: median, min and max.

Output: a Markdown table on stdout and ``--json FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: One detection: ``(x0, y0, x1, y1)`` in pixels and a score (higher = more confident).
Box = tuple[float, float, float, float]
Found = list[tuple[Box, float]]

DETECTORS = ("blazeface-short", "blazeface-full", "dlib-hog", "haar", "mtcnn")
VIDEO_SUFFIXES = (".avi", ".mp4", ".mkv", ".mov", ".m4v", ".webm")
IOU_MATCH = 0.5
TIMING_SIZE = (640, 480)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--photos",
        metavar="DIR",
        default=None,
        help="folder of photos with face boxes in dlib imglab XML files (e.g. data/faces-dlib)",
    )
    p.add_argument(
        "--videos",
        metavar="PATH",
        action="append",
        default=[],
        help="[NAME=]PATH: a video, or a folder searched recursively for videos, with one face in "
        "every "
        "frame; repeat for several groups (e.g. zju=data/zju-dev "
        "eyeblink8=data/eyeblink8-blink-clips"
        "/clips); the table names a group NAME or the path's last component",
    )
    p.add_argument(
        "--detectors",
        metavar="LIST",
        default=",".join(DETECTORS),
        help=f"comma-separated subset of {', '.join(DETECTORS)} (default: all)",
    )
    p.add_argument(
        "--every",
        type=int,
        default=10,
        metavar="N",
        help="detect every N-th video frame and the frame after it (default 10)",
    )
    p.add_argument(
        "--max-pairs",
        type=int,
        default=150,
        metavar="K",
        help="at most K frame pairs per --videos group, spread evenly over it (default 150)",
    )
    p.add_argument(
        "--timing-frames",
        type=int,
        default=30,
        metavar="T",
        help="640x480 frames timed per detector (default 30)",
    )
    p.add_argument(
        "--dlib-upsample",
        type=int,
        default=1,
        metavar="U",
        help="times dlib's HOG detector upsamples the image (default 1, as dlib's examples: "
        "faces down to ~40 px; 0 finds only faces of ~80 px and more, ~4x faster)",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")


# --------------------------------------------------------------------------- the candidates


@dataclass
class Candidate:
    """A detector under test: ``detect(rgb)`` -> boxes with scores, and ``close()``."""

    name: str
    detect: Callable[[np.ndarray], Found]
    close: Callable[[], None]


def _install_hint(name: str) -> str | None:
    """Why ``name`` cannot run here (None: it can)."""
    if name == "haar":
        import cv2

        # OpenCV 5 moved the cascades out of the main wheel
        if not hasattr(cv2, "CascadeClassifier"):
            # no downgrade hint: eyeblink's own OpenCV stays as installed; the row is measured
            # elsewhere
            return (
                f"not available: OpenCV {cv2.__version__} has no Haar cascade (moved out of the "
                "main wheel in "
                "5.0); keep this OpenCV for eyeblink and measure the Haar row in a separate "
                "virtual "
                "environment with OpenCV 4"
            )
        return None
    need = {
        "dlib-hog": (("dlib",), 'pip install "eyeblink[dlib]"'),
        "mtcnn": (("mtcnn", "tensorflow"), 'pip install "eyeblink[mtcnn]"'),
    }.get(name)
    if need is None:
        return None
    missing = [m for m in need[0] if importlib.util.find_spec(m) is None]
    return f"not installed: {need[1]} (missing {', '.join(missing)})" if missing else None


def build(name: str, *, dlib_upsample: int = 1) -> Candidate:
    """Construct one candidate, single-threaded (the caller checked :func:`_install_hint`)."""
    if name in ("blazeface-short", "blazeface-full"):
        from eyeblink.detect.blazeface import FaceDetector
        from eyeblink.detect.full_range import FullRangeFaceDetector

        short = name == "blazeface-short"
        bf: FaceDetector | FullRangeFaceDetector = (
            FaceDetector("litert", num_threads=1) if short else FullRangeFaceDetector(num_threads=1)
        )

        def detect_bf(rgb: np.ndarray) -> Found:
            return [(d.box, d.score) for d in bf.detect(rgb)]

        return Candidate(name, detect_bf, bf.close)
    if name == "haar":
        import cv2

        # OpenCV 4 only (see _install_hint); looked up by name so that type checking against OpenCV
        # 5 passes
        data_dir = Path(cv2.__dict__["data"].haarcascades)
        cascade = cv2.__dict__["CascadeClassifier"](
            str(data_dir / "haarcascade_frontalface_default.xml")
        )
        if cascade.empty():
            from eyeblink.errors import ModelFileError

            raise ModelFileError(
                "OpenCV's haarcascade_frontalface_default.xml cannot be loaded; reinstall "
                "opencv-python-headless"
            )

        def detect_haar(rgb: np.ndarray) -> Found:
            gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
            rects, _levels, weights = cascade.detectMultiScale3(
                gray, scaleFactor=1.1, minNeighbors=5, outputRejectLevels=True
            )
            return [
                ((float(x), float(y), float(x + w), float(y + h)), float(s))
                for (x, y, w, h), s in zip(
                    np.reshape(rects, (-1, 4)), np.ravel(weights), strict=True
                )
            ]

        return Candidate(name, detect_haar, lambda: None)
    if name == "dlib-hog":
        import dlib

        hog = dlib.get_frontal_face_detector()

        def detect_hog(rgb: np.ndarray) -> Found:
            rects, scores, _ = hog.run(rgb, dlib_upsample, 0.0)
            # dlib rectangles are inclusive: right/bottom are the last pixel inside
            return [
                (
                    (float(r.left()), float(r.top()), float(r.right() + 1), float(r.bottom() + 1)),
                    float(s),
                )
                for r, s in zip(rects, scores, strict=True)
            ]

        return Candidate(name, detect_hog, lambda: None)
    if name == "mtcnn":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        with contextlib.suppress(RuntimeError):  # already initialised
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        from mtcnn import MTCNN

        net = MTCNN(device="CPU:0")

        def detect_mtcnn(rgb: np.ndarray) -> Found:
            out = net.detect_faces(rgb)
            return [
                ((float(x), float(y), float(x + w), float(y + h)), float(f["confidence"]))
                for f in out
                for x, y, w, h in [f["box"]]
            ]

        return Candidate(name, detect_mtcnn, lambda: None)
    raise ValueError(f"unknown detector {name!r}")


# --------------------------------------------------------------------------- inputs


def read_imglab(folder: Path) -> list[tuple[Path, list[Box]]]:
    """Photos and their face boxes from every imglab XML in ``folder`` (each photo once)."""
    from eyeblink.errors import ConfigError

    out: dict[str, tuple[Path, list[Box]]] = {}
    xmls = sorted(
        x for x in folder.glob("*.xml") if not x.name.endswith("_with_face_landmarks.xml")
    )
    for xml in xmls:
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError as exc:
            raise ConfigError(
                f"{xml} is not an imglab XML file ({exc}); give a folder of dlib imglab XML "
                "files and their photos"
            ) from None
        for image in root.iter("image"):
            path = folder / image.get("file", "")
            boxes = [
                (
                    float(b.get("left", 0)),
                    float(b.get("top", 0)),
                    float(b.get("left", 0)) + float(b.get("width", 0)),
                    float(b.get("top", 0)) + float(b.get("height", 0)),
                )
                for b in image.iter("box")
                if b.get("ignore", "0") != "1"
            ]
            if path.is_file():
                out.setdefault(path.name, (path, boxes))
    if not out:
        raise ConfigError(
            f"no imglab XML with photos found in {folder}; --photos takes a folder of photos and "
            "dlib imglab XML files (<image file=...><box top left width height/>)"
        )
    return list(out.values())


def read_rgb(path: Path) -> np.ndarray:
    """A photo as uint8 RGB (ConfigError naming it when it cannot be read)."""
    import cv2

    from eyeblink.errors import ConfigError

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ConfigError(
            f"cannot read the photo {path}; check the file, or remove it from the imglab XML"
        )
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def video_files(path: Path) -> list[Path]:
    from eyeblink.errors import ConfigError

    files = (
        [path]
        if path.is_file()
        else sorted(
            p for p in path.rglob("*") if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file()
        )
    )
    if not files:
        raise ConfigError(
            f"no video ({', '.join(VIDEO_SUFFIXES)}) found in {path}; give a video or a folder of "
            "videos"
        )
    return files


def sample_pairs(
    videos: list[Path], every: int, max_pairs: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Frame pairs ``(i, i+1)`` for every ``every``-th frame ``i`` of each video (gray), at most
    ``max_pairs``."""
    from eyeblink.sources.files import open_source

    where: list[tuple[int, int]] = []
    counts = []
    for v, path in enumerate(videos):
        with open_source(path) as src:
            n = sum(1 for _ in src)
        counts.append(n)
        where.extend((v, i) for i in range(0, n - 1, every))
    if len(where) > max_pairs:
        pick = np.linspace(0, len(where) - 1, max_pairs).round().astype(int)
        where = [where[k] for k in sorted(set(pick.tolist()))]
    wanted: dict[int, set[int]] = {}
    for v, i in where:
        wanted.setdefault(v, set()).add(i)
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for v, starts in sorted(wanted.items()):
        keep = starts | {i + 1 for i in starts}
        frames: dict[int, np.ndarray] = {}
        with open_source(videos[v]) as src:
            for k, fr in enumerate(src):
                if k in keep:
                    frames[k] = fr.gray.copy()
                if k > max(keep):
                    break
        pairs.extend(
            (frames[i], frames[i + 1]) for i in sorted(starts) if i in frames and i + 1 in frames
        )
    return pairs


# --------------------------------------------------------------------------- metrics


def iou(a: Box, b: Box) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if inter > 0 and union > 0 else 0.0


def match(found: list[Box], truth: list[Box], threshold: float = IOU_MATCH) -> list[float]:
    """IoUs of a one-to-one matching of detections to true boxes, best pairs first, each >=
    ``threshold``."""
    cand = sorted(
        ((iou(f, t), i, j) for i, f in enumerate(found) for j, t in enumerate(truth)), reverse=True
    )
    used_f: set[int] = set()
    used_t: set[int] = set()
    out = []
    for v, i, j in cand:
        if v < threshold:
            break
        if i not in used_f and j not in used_t:
            used_f.add(i)
            used_t.add(j)
            out.append(v)
    return out


def _rgb(gray: np.ndarray) -> np.ndarray:
    return np.repeat(gray[:, :, None], 3, axis=2)


def score_photos(det: Candidate, photos: list[tuple[Path, list[Box]]]) -> dict[str, Any]:

    tp = n_found = n_true = 0
    ious: list[float] = []
    for path, truth in photos:
        found = [b for b, _ in det.detect(read_rgb(path))]
        m = match(found, truth)
        tp += len(m)
        ious += m
        n_found += len(found)
        n_true += len(truth)
    return {
        "images": len(photos),
        "faces": n_true,
        "detections": n_found,
        "true_positives": tp,
        "precision": tp / n_found if n_found else 0.0,
        "recall": tp / n_true if n_true else 0.0,
        "mean_iou_matched": statistics.fmean(ious) if ious else None,
    }


def score_video(det: Candidate, pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    frames = hits = extra = 0
    jitter: list[float] = []
    for a, b in pairs:
        fa, fb = det.detect(_rgb(a)), det.detect(_rgb(b))
        for f in (fa, fb):
            frames += 1
            hits += bool(f)
            extra += max(0, len(f) - 1)
        if fa and fb and not np.array_equal(a, b):
            face = max(fa, key=lambda d: d[1])[0]
            jitter.append(1.0 - max(iou(face, box) for box, _ in fb))
    return {
        "frames": frames,
        "pairs": len(pairs),
        "recall": hits / frames if frames else 0.0,
        "false_boxes_per_frame": extra / frames if frames else 0.0,
        "jitter_pairs": len(jitter),
        "jitter_median": statistics.median(jitter) if jitter else None,
        "jitter_p90": float(np.percentile(jitter, 90)) if jitter else None,
    }


def time_frames(det: Candidate, frames: list[np.ndarray]) -> dict[str, Any]:
    for f in frames[:2]:
        det.detect(f)
    ms = []
    for f in frames:
        t0 = time.perf_counter()
        det.detect(f)
        ms.append((time.perf_counter() - t0) * 1000.0)
    return {
        "frames": len(ms),
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }


# --------------------------------------------------------------------------- the command


def _names(text: str) -> list[str]:
    from eyeblink.errors import ConfigError

    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in DETECTORS]
    if bad or not names:
        raise ConfigError(
            f"--detectors must be a comma-separated subset of {', '.join(DETECTORS)}, got {text!r}"
        )
    return names


def _check(args: argparse.Namespace) -> list[str]:
    from eyeblink.errors import ConfigError, InputNotFoundError

    names = _names(args.detectors)
    if not args.photos and not args.videos:
        raise ConfigError(
            "nothing to measure: give --photos DIR (imglab face boxes) and/or --videos PATH"
        )
    if args.every < 1 or args.max_pairs < 1 or args.timing_frames < 1 or args.dlib_upsample < 0:
        raise ConfigError(
            "--every, --max-pairs and --timing-frames must be >= 1 and --dlib-upsample >= 0"
        )
    for p in [args.photos, *(str(_video_group(v)[1]) for v in args.videos)]:
        if p and not Path(p).exists():
            raise InputNotFoundError(f"input not found: {p} — check the path")
    return names


def _video_group(text: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH`` (named after its last component)."""
    name, sep, rest = text.partition("=")
    if sep and name and "/" not in name and rest:
        return name, Path(rest)
    return Path(text).name, Path(text)


def _timing_set(
    groups: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    photos: list[tuple[Path, list[Box]]],
    count: int,
) -> list[np.ndarray]:
    import cv2

    pool = [a for pairs in groups.values() for a, _ in pairs]
    if pool:
        pick = np.linspace(0, len(pool) - 1, min(count, len(pool))).round().astype(int)
        chosen = [_rgb(pool[k]) for k in pick]
    else:
        chosen = [read_rgb(p) for p, _ in photos[:count]]
    return [
        f
        if f.shape[1::-1] == TIMING_SIZE
        else cv2.resize(f, TIMING_SIZE, interpolation=cv2.INTER_LINEAR)
        for f in chosen
    ]


@contextlib.contextmanager
def _one_core() -> Iterator[None]:
    import cv2

    from eyeblink import host

    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    # None on macOS (no CPU affinity there): timed on whatever core runs it
    before = host.pin_to_one_core()
    try:
        yield
    finally:
        cv2.setNumThreads(threads)
        if before is not None:
            host.restore_cpus(before)


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in (
        "opencv-python-headless",
        "dlib-bin",
        "mtcnn",
        "tensorflow",
        "tensorflow-cpu",
        "ai-edge-litert",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def run(args: argparse.Namespace, machine: dict[str, Any]) -> int:
    names = _check(args)
    machine = {**machine, "detector_packages": _versions()}
    photos = read_imglab(Path(args.photos)) if args.photos else []
    groups: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for v in args.videos:
        label, path = _video_group(v)
        label = label if label not in groups else str(path)
        groups[label] = sample_pairs(video_files(path), args.every, args.max_pairs)
    timing = _timing_set(groups, photos, args.timing_frames)
    print(
        f"eyeblink bench detectors: {machine['cpu']}, one core, Python {machine['python']}",
        flush=True,
    )
    if photos:
        print(
            f"photos: {args.photos}: {len(photos)} images, {sum(len(b) for _, b in photos)} face "
            "boxes",
            flush=True,
        )
    for label, pairs in groups.items():
        print(
            f"videos {label}: {len(pairs)} frame pairs (every {args.every}th frame and the next)",
            flush=True,
        )
    print(f"timing: {len(timing)} frames of {TIMING_SIZE[0]}x{TIMING_SIZE[1]}", flush=True)
    results: dict[str, Any] = {}
    with _one_core():
        for name in names:
            hint = _install_hint(name)
            if hint:
                results[name] = {"status": hint}
                print(f"  {name}: {hint}", flush=True)
                continue
            det = build(name, dlib_upsample=args.dlib_upsample)
            try:
                t0 = time.perf_counter()
                r: dict[str, Any] = {"status": "ok"}
                if photos:
                    r["photos"] = score_photos(det, photos)
                r["videos"] = {label: score_video(det, pairs) for label, pairs in groups.items()}
                r["timing"] = time_frames(det, timing)
            finally:
                det.close()
            results[name] = r
            print(f"  {name}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    print()
    print(table(results, photos=bool(photos), groups=list(groups)))
    if args.json:
        report = {
            "machine": machine,
            "photos": args.photos,
            "videos": args.videos,
            "every": args.every,
            "max_pairs": args.max_pairs,
            "dlib_upsample": args.dlib_upsample,
            "iou_match": IOU_MATCH,
            "timing_size": list(TIMING_SIZE),
            "detectors": results,
        }
        from eyeblink.outputs.paths import write_text

        write_text(args.json, json.dumps(report, indent=2) + "\n", "--json")
        print(f"wrote {args.json}")
    return 0


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "–" if v is None else format(v, spec)


def table(results: dict[str, Any], *, photos: bool, groups: list[str]) -> str:
    """The Markdown table: one row per detector."""
    head = ["detector"]
    if photos:
        head += ["photos P", "photos R", "photos IoU"]
    for g in groups:
        head += [f"{g} recall", f"{g} false/frame", f"{g} jitter med (p90)"]
    head += ["ms/frame 640x480 median [min–max]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in results.items():
        if r["status"] != "ok":
            lines.append(f"| {name} | {r['status']} |" + " |" * (len(head) - 2))
            continue
        row = [name]
        if photos:
            p = r["photos"]
            row += [
                _fmt(p["precision"], ".2f"),
                _fmt(p["recall"], ".2f"),
                _fmt(p["mean_iou_matched"], ".2f"),
            ]
        for g in groups:
            v = r["videos"][g]
            row += [
                _fmt(v["recall"]),
                _fmt(v["false_boxes_per_frame"]),
                f"{_fmt(v['jitter_median'])} ({_fmt(v['jitter_p90'])})",
            ]
        t = r["timing"]
        row.append(f"{t['median_ms']:.1f} [{t['min_ms']:.1f}–{t['max_ms']:.1f}]")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
