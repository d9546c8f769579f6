"""Run the real frame analyzer over every zju-dev clip once per frame rate and keep what the blink
detector is fed (issue 26: appearance on/off on long recordings, low frame rates).

For each clip and each decimation ``k`` (every k-th decoded frame: ~30, ~15, ~7.5 FPS, the analyzer
reset per clip so the decimated stream is what a slower camera would give it) this writes
``<out>/<model>/k<k>/<stem>.npz``: ``frame``, ``t``, ``ear_left``, ``ear_right``, ``patches`` (n, 2,
12, 24; zeros where none), ``has_patches``, ``packet`` (the ``.tag`` frame id of each decoded
frame). Nothing is written into the project; the data stays where ``--data`` says.

    python scripts/zju_capture.py --data ../shared/data/zju-dev --out /tmp/zju-cap
                                  [--model mesh] [--every 1,2,4]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--model", default="lids")
    ap.add_argument("--every", default="1,2,4")
    args = ap.parse_args()

    from eyeblink.config import RunConfig
    from eyeblink.lab.evaluate import find_pairs
    from eyeblink.runtime.runner import build_analyzer
    from eyeblink.sources.files import open_source

    config = RunConfig()
    config = replace(config, landmarks=replace(config.landmarks, model=args.model))
    analyzer = build_analyzer(config)
    pairs = find_pairs(args.data)
    for k in (int(x) for x in args.every.split(",")):
        outdir = args.out / args.model / f"k{k}"
        outdir.mkdir(parents=True, exist_ok=True)
        started, frames = time.perf_counter(), 0
        for video, _tag in pairs:
            rows = []
            with open_source(video) as src:
                analyzer.reset()
                for fr in src:
                    if fr.index % k:
                        continue
                    r = analyzer.analyze(fr)
                    p = src.packet_index(fr.index)
                    rows.append(
                        (
                            r.index,
                            r.timestamp_s,
                            r.ear_left,
                            r.ear_right,
                            r.eye_patches,
                            -1 if p is None else p,
                        )
                    )
            frames += len(rows)
            patches = np.zeros((len(rows), 2, 12, 24), np.uint8)
            has = np.zeros(len(rows), bool)
            for i, row in enumerate(rows):
                if row[4] is not None:
                    patches[i], has[i] = row[4], True
            np.savez_compressed(
                outdir / f"{video.stem}.npz",
                frame=np.array([r[0] for r in rows]),
                t=np.array([r[1] for r in rows]),
                ear_left=np.array([r[2] for r in rows], float),
                ear_right=np.array([r[3] for r in rows], float),
                patches=patches,
                has_patches=has,
                packet=np.array([r[5] for r in rows]),
            )
        print(
            f"{args.model} k={k}: {len(pairs)} clips, {frames} frames, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
