"""MediaPipe's Face Landmarker (v2) six-point EAR on zju-dev at ~30, 15 and 7.5 FPS, scored as the
default ``mesh`` openness and ``mesh-ear`` are in docs/explanation/long-recordings.md (issue 26,
item 4).

Per zju-dev clip: decode with the project's file source (frame ids mapped to ``.tag`` ids as
scripts/zju_capture.py does), run the project's default analyzer (BlazeFace on every frame +
``mesh``: its openness is kept as a control), and on the analyzer's BlazeFace detection cut the Face
Landmarker's crop with the project's ``face_roi`` geometry (a square 1.5 x the box's long side,
rotated upright by the eye keypoints: MediaPipe's own detection-to-ROI rule for the mesh and the
landmarker alike) at 256 x 256, RGB in [0, 1]; run ``face_landmarks_detector.tflite`` from the
``.task`` zip (read in memory, never copied); EAR of points 362,385,387,263,373,380 /
33,160,158,133,153,144 per eye (the project's ``mesh_ear_eyes``). Frames are decoded gray as the
project's pipeline decodes them (the crop repeats the gray in R, G, B, as the mesh's does);
``--color`` decodes RGB and feeds the landmarker colour. Every frame is analysed on its own (no
tracking: the face detector runs on every frame), so the ~15 and ~7.5 FPS streams are every 2nd /
4th decoded frame of the same results, as in scripts/zju_capture.py (whose openness was shown
identical either way).

Captures go to ``<out>/<model>/k<k>/<stem>.npz`` in zju_capture.py's format (models ``landmarker``
and ``mesh``); the figures are scripts/long_measure.py's functions, imported: the bare threshold
(blink caught when one of its frames is below 0.8 x the clip's median openness; runs below it as
events) and the project's blink detector clip by clip (strict and unscored event F1), with
mesh-ear's settings for the landmarker's EAR.

    python scripts/landmarker_lowfps.py --data ../shared/data/zju-dev \\
        --model ../shared/models/face_landmarker_2023-07-09.task --out /tmp/lm-cap [--json out.json]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

LM_INPUT = 256


def load_landmarker(task: Path) -> tuple[Any, int, int]:
    """The Face Landmarker's landmarks network from its ``.task`` zip (in memory): interpreter,
    input and the 1434-value output tensor index."""
    from ai_edge_litert.interpreter import Interpreter

    with zipfile.ZipFile(task) as z:
        blob = z.read("face_landmarks_detector.tflite")
    it = Interpreter(model_content=blob, num_threads=1)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    if tuple(int(x) for x in ins[0]["shape"]) != (1, LM_INPUT, LM_INPUT, 3):
        raise SystemExit(
            f"landmarker_lowfps: error: {task} input {ins[0]['shape']}, expected [1, 256, 256, 3]"
        )
    pts = next(d["index"] for d in outs if int(np.prod(d["shape"])) == 1434)
    return it, ins[0]["index"], pts


def landmarker_eyes(
    it: Any, inp: int, out: int, image: np.ndarray, face: Any
) -> tuple[np.ndarray, float, float]:
    """(12 eye points, ear_left, ear_right) of the Face Landmarker on ``face``'s crop of
    ``image``."""
    from eyeblink.landmarks.mesh import ROI_SCALE, mesh_ear_eyes, square_roi, to_frame, warp

    x0, y0, x1, y1 = face.box
    re, le = face.keypoints[0], face.keypoints[1]
    angle = math.atan2(le[1] - re[1], le[0] - re[0])
    roi = square_roi(
        (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * ROI_SCALE, angle, LM_INPUT
    )
    if image.ndim == 3:  # RGB: warp each channel as the project's warp does gray
        x = np.concatenate(
            [warp(np.ascontiguousarray(image[:, :, c]), roi, LM_INPUT)[..., :1] for c in range(3)],
            axis=3,
        )
    else:
        x = warp(image, roi, LM_INPUT)
    it.set_tensor(inp, x)
    it.invoke()
    pts = to_frame(roi, it.get_tensor(out).reshape(478, 3)[:468, :2].astype(np.float64))
    return mesh_ear_eyes(pts)


def capture(data: Path, task: Path, out: Path, every: list[int], color: bool) -> None:
    from eyeblink.config import RunConfig
    from eyeblink.lab.evaluate import find_pairs
    from eyeblink.landmarks.eyes import eye_patches
    from eyeblink.runtime.runner import build_analyzer
    from eyeblink.sources.files import open_source

    analyzer = build_analyzer(RunConfig())  # the defaults: BlazeFace + mesh
    it, inp, outi = load_landmarker(task)
    started, frames = time.perf_counter(), 0
    for video, _tag in find_pairs(data):
        rows: dict[str, list[tuple[Any, ...]]] = {"mesh": [], "landmarker": []}
        with open_source(video, color=color) as src:
            analyzer.reset()
            for fr in src:
                r = analyzer.analyze(fr)
                p = src.packet_index(fr.index)
                p = -1 if p is None else p
                rows["mesh"].append(
                    (r.index, r.timestamp_s, r.ear_left, r.ear_right, r.eye_patches, p)
                )
                el = er = math.nan
                patches = None
                if r.face is not None:
                    pts, el, er = landmarker_eyes(it, inp, outi, fr.image, r.face)
                    if np.isfinite(pts).all():
                        patches = eye_patches(fr.gray, pts)
                rows["landmarker"].append((r.index, r.timestamp_s, el, er, patches, p))
        frames += len(rows["mesh"])
        for model, rs in rows.items():
            for k in every:
                sub = [row for row in rs if row[0] % k == 0]
                write(out / model / f"k{k}" / f"{video.stem}.npz", sub)
    print(f"captured {frames} frames in {time.perf_counter() - started:.0f} s", flush=True)


def write(path: Path, rows: list[tuple[Any, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    patches = np.zeros((len(rows), 2, 12, 24), np.uint8)
    has = np.zeros(len(rows), bool)
    for i, row in enumerate(rows):
        if row[4] is not None:
            patches[i], has[i] = row[4], True
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        frame=np.array([r[0] for r in rows]),
        t=np.array([r[1] for r in rows]),
        ear_left=np.array([r[2] for r in rows], float),
        ear_right=np.array([r[3] for r in rows], float),
        patches=patches,
        has_patches=has,
        packet=np.array([r[5] for r in rows]),
    )
    path.write_bytes(buf.getvalue())


def detector_clips(
    data: Path, cap: Path, model: str, k: int, settings_of: str, appearance: bool
) -> dict[str, Any]:
    """long_measure.clips with the blink settings of ``settings_of`` (the landmarker is no
    project model)."""
    import long_measure as lm

    from eyeblink.lab.evaluate import EMPTY, Span, find_pairs, match_events, read_tag, within

    total, unscored = EMPTY, 0
    cfg = lm.cfg_for(settings_of, appearance)
    for video, tag_path in find_pairs(data):
        s = lm.load(cap, model, k, video.stem)
        events, packets, _ = lm.detect([s], cfg)
        tag = read_tag(tag_path)
        spans = [
            Span(packets[e.start_frame], max(packets[e.start_frame], packets[e.end_frame]))
            for e in events
        ]
        inside, outside = within(spans, tag.annotated)
        total = total + match_events(tag.blinks, inside)
        unscored += outside
    return lm.fmt(total, unscored)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--model", required=True, type=Path, help="face_landmarker_*.task (a zip)")
    ap.add_argument(
        "--out", required=True, type=Path, help="captures go here (never into the project)"
    )
    ap.add_argument("--every", default="1,2,4")
    ap.add_argument(
        "--color",
        action="store_true",
        help="decode RGB (the landmarker gets colour; the analyzer its luma) instead of gray",
    )
    ap.add_argument("--skip-capture", action="store_true", help="score captures already in --out")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    for p, what in ((args.data, "--data"), (args.model, "--model")):
        if not p.exists():
            print(
                f"landmarker_lowfps: error: {what} {p} does not exist; pass the zju-dev folder / "
                "the .task file",
                file=sys.stderr,
            )
            return 2
    every = [int(x) for x in args.every.split(",")]
    if not args.skip_capture:
        capture(args.data, args.model, args.out, every, args.color)

    import long_measure as lm

    res: dict[str, Any] = {}
    for model, settings_of in (("mesh", "mesh"), ("landmarker", "mesh-ear")):
        for k in every:
            r: dict[str, Any] = {"bare": lm.bare(args.data, args.out, model, k)}
            for app in (True, False):
                r[f"detector appearance={app}"] = detector_clips(
                    args.data, args.out, model, k, settings_of, app
                )
            res[f"{model} k={k}"] = r
            print(f"{model} k={k}", json.dumps(r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
