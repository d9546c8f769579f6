"""Teacher (``mesh``) vs student (``lids``) on zju-dev, leave-subjects-out: the tables of
docs/explanation/lid-network.md.

Inputs are ``eyeblink eval`` runs (``--json`` and ``-o`` kept): the teacher on the clips, and per
fold the student trained without that fold's subjects on that fold's clips. Prints, per condition
(the ZJU file-name suffix) and overall: event F1 in both conventions (unscored, strict), and the
frame AUC closed-vs-open from the per-frame openness the pipeline wrote (score: minus the mean of
``ear_left``/``ear_right``; closed: a tag frame with an eye flagged fully closed; open: a tag frame
outside every blink; ZJU's null packets skipped, the tag frame mapped to its decoded frame through
``<clip>.packet_to_decoded_frame.tsv``).

    python scripts/lids_validation.py DATA/zju-dev --teacher teacher.json:teacher_out/ \\
        --student foldA_on_B.json:outB/ foldB_on_A.json:outA/
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.lab.evaluate import Score, group_of
from eyeblink.lab.train_lids import auc, tag_states


def frame_values(outdir: Path, data: Path, clip: str) -> tuple[np.ndarray, np.ndarray]:
    """(openness, state) per non-null tag frame of ``clip``."""
    with open(outdir / f"{clip}.frames.csv", newline="") as fh:
        ears = {
            int(r["frame"]): (float(r["ear_left"] or "nan") + float(r["ear_right"] or "nan")) / 2
            for r in csv.DictReader(fh)
        }
    states = tag_states(data / f"{clip}.tag")
    vals, sts = [], []
    for line in (data / f"{clip}.packet_to_decoded_frame.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        tag_id, dec, _pts, _size, null = (int(x) for x in line.split("\t")[:5])
        if null or tag_id not in states:
            continue
        v = ears.get(dec, math.nan)
        if math.isfinite(v):
            vals.append(v)
            sts.append(states[tag_id])
    return np.array(vals), np.array(sts)


def load(runs: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    rows, outs = {}, {}
    for spec in runs:
        js, out = spec.split(":", 1)
        for r in json.loads(Path(js).read_text())["videos"]:
            clip = Path(r["video"]).stem
            rows[clip], outs[clip] = r, Path(out)
    return rows, outs


def table(data: Path, teacher: list[str], student: list[str]) -> str:
    t_rows, t_out = load(teacher)
    s_rows, s_out = load(student)
    clips = sorted(s_rows)
    groups: dict[str, list[str]] = defaultdict(list)
    for c in clips:
        groups[group_of(Path(c))].append(c)
    groups["overall"] = clips
    lines = [
        "| condition | clips | blinks | F1 unscored teacher | student | F1 strict teacher | "
        "student | "
        "frame AUC teacher | student |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g, cs in sorted(groups.items(), key=lambda kv: (kv[0] == "overall", kv[0])):
        cells = []
        for rows in (t_rows, s_rows):
            sc = sum(
                (Score(rows[c]["tp"], rows[c]["fp"], rows[c]["fn"], ()) for c in cs),
                Score(0, 0, 0, ()),
            )
            un = sum(rows[c]["unscored"] for c in cs)
            cells.append((sc.f1, sc.strict(un).f1))
        aucs = []
        for outs in (t_out, s_out):
            v = [frame_values(outs[c], data, c) for c in cs]
            vals, sts = np.concatenate([x[0] for x in v]), np.concatenate([x[1] for x in v])
            aucs.append(auc(-vals[sts == "closed"], -vals[sts == "open"]))
        n_blinks = sum(t_rows[c]["truth"] for c in cs)
        lines.append(
            f"| {g} | {len(cs)} | {n_blinks} | {cells[0][0]:.3f} | {cells[1][0]:.3f} | "
            f"{cells[0][1]:.3f} | "
            f"{cells[1][1]:.3f} | {aucs[0]:.4f} | {aucs[1]:.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("data", type=Path, help="the zju-dev folder (tags and packet maps)")
    p.add_argument("--teacher", nargs="+", required=True, metavar="JSON:OUTDIR")
    p.add_argument("--student", nargs="+", required=True, metavar="JSON:OUTDIR")
    args = p.parse_args()
    print(table(args.data, args.teacher, args.student))


if __name__ == "__main__":
    main()
