#!/usr/bin/env python
"""Share of Eyeblink8 blink clips whose EAR minimum lies strictly inside the clip.

Each of the 408 clips of ``eyeblink8-blink-clips`` holds exactly one annotated blink, cut from
closing start to reopening end (±1 frame, see its SOURCE.txt). If the EAR follows the eyelid,
its minimum (the closed eye) should lie strictly inside the clip, not on its first or last
frame. The clips carry no open-eye context, so this checks the *shape* of the EAR signal, not
the detector (there are no negatives: no precision can be measured here).

The signal per frame is the mean openness of the eyes fitted (``eyeblink``'s default pipeline:
BlazeFace box -> the eye model, ``--landmarks`` to choose it); frames without a face are skipped.
A clip with fewer than 3 measured frames is reported as ``unmeasured`` and left out of the share.

The data is research-only: it is read from ``DATA_DIR`` (argument, or env ``EYEBLINK_DATA`` +
``/eyeblink8-blink-clips``), never copied.

Usage::

    python scripts/eyeblink8_minimum.py DATA_DIR [--landmarks MODEL] [--landmark-model FILE]
                                       [--videos LIST] [--per-clip FILE.tsv]

``DATA_DIR`` is the ``eyeblink8-blink-clips`` folder (holding ``clips/*/*.mp4``) or its parent.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path


def clip_paths(data_dir: Path) -> list[Path]:
    for root in (data_dir, data_dir / "eyeblink8-blink-clips"):
        clips = sorted(root.glob("clips/*/*.mp4"))
        if clips:
            return clips
    raise SystemExit(
        f"eyeblink8_minimum: no clips/*/*.mp4 under {data_dir}; give the eyeblink8-blink-clips "
        "folder"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "data_dir",
        nargs="?",
        default=os.environ.get("EYEBLINK_DATA"),
        help="the eyeblink8-blink-clips folder (or its parent; default $EYEBLINK_DATA)",
    )
    ap.add_argument("--per-clip", metavar="TSV", help="also write one line per clip")
    from eyeblink.config import LANDMARK_MODELS

    ap.add_argument(
        "--landmarks",
        choices=LANDMARK_MODELS,
        default=None,
        help="eye model (default: the preset's)",
    )
    ap.add_argument(
        "--landmark-model",
        metavar="FILE",
        default=None,
        help="a model file of your own for --landmarks (e.g. a lid network from eyeblink "
        "train-lids)",
    )
    ap.add_argument(
        "--videos",
        metavar="LIST",
        default=None,
        help="only these clip folders, comma-separated (e.g. EyeBlink8_6,EyeBlink8_7: the ones the "
        "shipped lid network was not trained on)",
    )
    args = ap.parse_args(argv)
    if not args.data_dir:
        ap.error("give DATA_DIR (or set EYEBLINK_DATA)")
    clips = clip_paths(Path(args.data_dir))
    if args.videos:
        keep = set(args.videos.split(","))
        clips = [c for c in clips if c.parent.name in keep]

    from eyeblink.config import RunConfig
    from eyeblink.runtime.runner import build_analyzer
    from eyeblink.sources.files import open_source

    config = RunConfig()
    if args.landmarks:
        config = config.with_overrides("landmarks", model=args.landmarks)
    if args.landmark_model:
        config = config.with_overrides("landmarks", model_path=args.landmark_model)
    analyzer = build_analyzer(config)
    print(f"eye model: {config.landmarks.model}")
    inside = edge = unmeasured = 0
    lines = ["clip\tframes\tmeasured\targmin\tposition"]
    for n, clip in enumerate(clips, 1):
        analyzer.reset()
        ears: list[float] = []
        with open_source(clip) as src:
            for fr in src:
                r = analyzer.analyze(fr)
                ears.append(r.ear)
        valid = [i for i, e in enumerate(ears) if not math.isnan(e)]
        if len(valid) < 3:
            unmeasured += 1
            pos, k = "unmeasured", -1
        else:
            k = min(valid, key=lambda i: ears[i])
            strictly = valid[0] < k < valid[-1]
            inside += strictly
            edge += not strictly
            pos = "inside" if strictly else ("first" if k == valid[0] else "last")
        lines.append(f"{clip.parent.name}/{clip.name}\t{len(ears)}\t{len(valid)}\t{k}\t{pos}")
        if n % 50 == 0:
            print(f"{n}/{len(clips)} clips", file=sys.stderr)
    measured = inside + edge
    share = inside / measured if measured else math.nan
    print(
        f"clips: {len(clips)}, measured: {measured}, unmeasured (< 3 frames with a face): "
        f"{unmeasured}"
    )
    print(f"EAR minimum strictly inside the clip: {inside}/{measured} = {share:.3f}")
    print(f"on the first/last measured frame: {edge}")
    if args.per_clip:
        Path(args.per_clip).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
