"""Figures of docs/explanation/long-recordings.md from the captures of scripts/zju_capture.py (issue
26).

* appearance cue on vs off: zju-dev clip by clip, and each subject's clips joined and looped to
  ``--minutes`` (the detector fed the analyzer's EARs *and* eye patches, as a session feeds it);
* low frame rates: per decimation (k = 1, 2, 4: ~30, 15, 7.5 FPS) the detector's event F1 and the
  bare threshold (openness below 0.8 x the clip's median openness) catch rate and event F1; whether
  the openness of a frame depends on which other frames the analyzer saw (tracking between distant
  frames).

Scoring is ``eyeblink eval``'s: an event's span in ``.tag`` frame ids overlaps a truth blink (one to
one); events entirely outside a clip's annotated range are unscored (strict: counted as false
positives).

    python scripts/long_measure.py --data ../shared/data/zju-dev --cap /tmp/zju-cap
                                   [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.config import BlinkConfig, RunConfig
from eyeblink.lab.evaluate import EMPTY, Score, Span, find_pairs, match_events, read_tag, within
from eyeblink.signals.blinks import BlinkDetector


def load(cap: Path, model: str, k: int, stem: str) -> dict[str, np.ndarray]:
    with np.load(cap / model / f"k{k}" / f"{stem}.npz") as z:
        return {name: z[name] for name in z.files}


def cfg_for(model: str, appearance: bool) -> BlinkConfig:
    rc = RunConfig()
    rc = replace(
        rc,
        landmarks=replace(rc.landmarks, model=model),
        blinks=replace(rc.blinks, appearance=appearance),
    )
    return rc.blink_settings()


def detect(
    streams: list[dict[str, np.ndarray]], cfg: BlinkConfig, loops: int = 1
) -> tuple[list[Any], list[int], BlinkDetector]:
    """Feed the streams one after the other (``loops`` times) to one detector; events and the packet
    id (in the joined numbering: each stream's ids offset past the previous one's) of every fed
    frame."""
    det = BlinkDetector(cfg)
    events: list[Any] = []
    packets: list[int] = []
    n = 0
    t_off = 0.0
    p_off = 0
    for _ in range(loops):
        for s in streams:
            dt = float(np.median(np.diff(s["t"]))) if len(s["t"]) > 1 else 1 / 30
            for i in range(len(s["t"])):
                patches = s["patches"][i] if s["has_patches"][i] else None
                events += det.update(
                    n,
                    t_off + float(s["t"][i] - s["t"][0]),
                    float(s["ear_left"][i]),
                    float(s["ear_right"][i]),
                    patches,
                )
                packets.append(p_off + int(s["packet"][i]))
                n += 1
            t_off += float(s["t"][-1] - s["t"][0]) + dt
            p_off += int(s["packet"].max()) + 1
    events += det.finish()
    return events, packets, det


def truth_of(
    videos: list[Path], streams: list[dict[str, np.ndarray]], loops: int
) -> tuple[list[Span], list[Span]]:
    blinks, annotated = [], []
    p_off = 0
    for _ in range(loops):
        for v, s in zip(videos, streams, strict=True):
            tag = read_tag(v.with_suffix(".tag"))
            blinks += [Span(b.start + p_off, b.end + p_off) for b in tag.blinks]
            annotated.append(Span(tag.annotated.start + p_off, tag.annotated.end + p_off))
            p_off += int(s["packet"].max()) + 1
    return blinks, annotated


def score(
    events: list[Any], packets: list[int], blinks: list[Span], annotated: list[Span]
) -> tuple[Score, int]:
    spans = [
        Span(packets[e.start_frame], max(packets[e.start_frame], packets[e.end_frame]))
        for e in events
    ]
    inside = [s for s in spans if any(s.overlap(a) for a in annotated)]
    return match_events(blinks, inside), len(spans) - len(inside)


def fmt(sc: Score, unscored: int) -> dict[str, Any]:
    return {
        "tp": sc.tp,
        "fp": sc.fp,
        "fn": sc.fn,
        "unscored": unscored,
        "f1": round(sc.f1, 3),
        "strict_f1": round(sc.strict(unscored).f1, 3),
    }


def clips(data: Path, cap: Path, model: str, k: int, appearance: bool) -> dict[str, Any]:
    total, unscored, longest = EMPTY, 0, 0.0
    cfg = cfg_for(model, appearance)
    for video, tag_path in find_pairs(data):
        s = load(cap, model, k, video.stem)
        events, packets, _ = detect([s], cfg)
        tag = read_tag(tag_path)
        spans = [
            Span(packets[e.start_frame], max(packets[e.start_frame], packets[e.end_frame]))
            for e in events
        ]
        inside, outside = within(spans, tag.annotated)
        total = total + match_events(tag.blinks, inside)
        unscored += outside
        longest = max([longest, *(e.duration_ms for e in events if e.kind == "blink")])
    return {**fmt(total, unscored), "longest_blink_ms": round(longest)}


def joined(
    data: Path, cap: Path, model: str, k: int, appearance: bool, minutes: float
) -> dict[str, Any]:
    by: dict[str, list[Path]] = {}
    for video, _ in find_pairs(data):
        m = re.match(r"(.+?)_[A-Z]{3}$", video.stem)
        by.setdefault(m.group(1) if m else video.stem, []).append(video)
    cfg = cfg_for(model, appearance)
    total, unscored, longest, closures, shifts, mins = EMPTY, 0, 0.0, 0, 0, []
    for _subject, videos in sorted(by.items()):
        streams = [load(cap, model, k, v.stem) for v in videos]
        period = sum(
            float(s["t"][-1] - s["t"][0]) + float(np.median(np.diff(s["t"]))) for s in streams
        )
        loops = max(1, math.ceil(minutes * 60 / period))
        mins.append(loops * period / 60)
        events, packets, det = detect(streams, cfg, loops)
        blinks, annotated = truth_of(videos, streams, loops)
        sc, out = score(events, packets, blinks, annotated)
        total, unscored = total + sc, unscored + out
        longest = max([longest, *(e.duration_ms for e in events if e.kind == "blink")])
        closures += sum(e.kind != "blink" for e in events)
        shifts += len(det.level_shifts)
    return {
        **fmt(total, unscored),
        "longest_blink_ms": round(longest),
        "prolonged_closures": closures,
        "level_shifts": shifts,
        "minutes_min": round(min(mins), 1),
        "subjects": len(by),
    }


def bare(data: Path, cap: Path, model: str, k: int, factor: float = 0.8) -> dict[str, Any]:
    """Openness below ``factor`` x the clip's median: truth blinks with a frame below it, and runs
    below it as events (no detector)."""
    caught = n_truth = 0
    total, unscored = EMPTY, 0
    for video, tag_path in find_pairs(data):
        s = load(cap, model, k, video.stem)
        with np.errstate(all="ignore"):
            ear = np.nanmean(np.stack([s["ear_left"], s["ear_right"]]), axis=0)
        thr = factor * float(np.nanmedian(ear))
        tag = read_tag(tag_path)
        below = ear < thr
        for b in tag.blinks:
            n_truth += 1
            m = (s["packet"] >= b.start) & (s["packet"] <= b.end)
            caught += bool(below[m].any())
        spans, i = [], 0
        while i < len(below):
            if below[i]:
                j = i
                while j + 1 < len(below) and below[j + 1]:
                    j += 1
                spans.append(Span(int(s["packet"][i]), int(s["packet"][j])))
                i = j + 1
            else:
                i += 1
        inside, outside = within(spans, tag.annotated)
        total, unscored = total + match_events(tag.blinks, inside), unscored + outside
    return {"caught": caught, "truth": n_truth, **fmt(total, unscored)}


def same_frames(data: Path, cap: Path, model: str, k: int) -> float:
    """Largest |openness difference| of a frame seen in the full stream and in the decimated one."""
    worst = 0.0
    for video, _ in find_pairs(data):
        a, b = load(cap, model, 1, video.stem), load(cap, model, k, video.stem)
        idx = {int(f): i for i, f in enumerate(a["frame"])}
        for j, f in enumerate(b["frame"]):
            i = idx[int(f)]
            for col in ("ear_left", "ear_right"):
                x, y = a[col][i], b[col][j]
                if np.isfinite(x) and np.isfinite(y):
                    worst = max(worst, abs(float(x) - float(y)))
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--cap", required=True, type=Path)
    ap.add_argument("--models", default="lids,mesh")
    ap.add_argument("--every", default="1,2,4")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument(
        "--bare-only",
        action="store_true",
        help="only the bare-threshold figures (no detector runs)",
    )
    ap.add_argument(
        "--no-joined", action="store_true", help="clip by clip only (no joined-and-looped runs)"
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    for model in args.models.split(","):
        for k in (int(x) for x in args.every.split(",")):
            if not (args.cap / model / f"k{k}").is_dir():
                continue
            key = f"{model} k={k}"
            r: dict[str, Any] = {"bare": bare(args.data, args.cap, model, k)}
            if k > 1:
                r["max_openness_change_vs_full_stream"] = same_frames(args.data, args.cap, model, k)
            for app in () if args.bare_only else (True, False):
                r[f"clips appearance={app}"] = clips(args.data, args.cap, model, k, app)
                if not args.no_joined:
                    r[f"joined appearance={app}"] = joined(
                        args.data, args.cap, model, k, app, args.minutes
                    )
            out[key] = r
            print(key, json.dumps(r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
