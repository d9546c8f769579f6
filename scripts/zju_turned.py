"""zju-dev turned upside down: event F1 of each clip upright and rotated 180 degrees (a camera
mounted upside down).

For every clip of ``zju-dev`` (``../shared/data/zju-dev``, or ``EYEBLINK_DATA``/zju-dev, or
``--data``) this builds two lossless copies in a temporary folder (``--keep DIR`` keeps them; never
in the repository):

* ``upright/``: the frames eyeblink decodes from the clip (its gray Y plane), re-encoded as FFV1 in
  an AVI with the original time base and timestamps, so every frame is processed at the instant it
  was;
* ``turned/``: the same frames rotated by 180 degrees.

The ZJU AVIs carry 2-byte null packets ("repeat the previous frame") that the tags number but that
decode to nothing; the copies hold one packet per decoded frame, so each copy gets its clip's
``.tag`` with the frame IDs renumbered to decoded frames (a null packet's line is dropped: the frame
it repeats has its own line). Then ``eyeblink eval`` (the project's evaluation,
:mod:`eyeblink.lab.evaluate`) scores the original folder and both copies with the same settings, and
this prints the overall and strict event F1 of each. The upright copy checks the copying (it should
score as the original); the turned copy is the measure: within 0.02 of upright.

    python scripts/zju_turned.py [--data DIR] [--keep DIR]
                                 [-- extra eval options, e.g. --landmarks lids]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np


def default_data() -> Path:
    root = os.environ.get("EYEBLINK_DATA")
    base = Path(root) if root else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return base / "zju-dev"


def copy_clip(video: Path, tag: Path, out_dirs: dict[str, Path]) -> int:
    """Write the upright and turned FFV1 copies of ``video`` and their renumbered tags; returns
    the frame count."""
    import av

    from eyeblink.sources.files import open_av, open_source

    with open_av(str(video)) as c:
        stream = c.streams.video[0]
        time_base = Fraction(stream.time_base)
        start = stream.start_time or 0
    frames: list[tuple[int, np.ndarray]] = []  # (pts in the original time base, gray image)
    packet_of: list[int] = []
    with open_source(video) as src:
        for fr in src:
            frames.append((round(fr.timestamp_s / time_base) + start, fr.gray.copy()))
            p = src.packet_index(fr.index)  # type: ignore[attr-defined]
            packet_of.append(-1 if p is None else int(p))
    if not frames:
        raise SystemExit(f"{video}: no frames decoded")
    decoded_of = {p: d for d, p in enumerate(packet_of) if p >= 0}
    h, w = frames[0][1].shape
    for kind, folder in out_dirs.items():
        path = folder / (video.stem + ".avi")
        with av.open(str(path), mode="w") as out:
            s = out.add_stream("ffv1", rate=Fraction(1) / time_base)
            s.width, s.height, s.pix_fmt = w, h, "gray"
            s.time_base = time_base
            for pts, img in frames:
                pix = img if kind == "upright" else np.ascontiguousarray(img[::-1, ::-1])
                vf = av.VideoFrame.from_ndarray(pix, format="gray")
                vf.pts, vf.time_base = pts - start, time_base
                out.mux(s.encode(vf))
            out.mux(s.encode(None))
        (folder / (video.stem + ".tag")).write_text(
            renumbered_tag(tag, decoded_of), encoding="utf-8"
        )
    return len(frames)


def packets_of(video: Path) -> dict[int, int]:
    """Each packet of ``video`` that decodes to a frame -> that frame's index (a null packet has
    none)."""
    from eyeblink.sources.files import open_source

    out: dict[int, int] = {}
    with open_source(video) as src:
        for fr in src:
            p = src.packet_index(fr.index)  # type: ignore[attr-defined]
            if p is not None:
                out.setdefault(int(p), fr.index)
    return out


def renumbered_tag(tag: Path, decoded_of: dict[int, int]) -> str:
    """``tag``'s text with its frame IDs (packets of the original) renumbered to decoded frames
    (``decoded_of``); a null packet's line is dropped (the frame it repeats has its own line)."""
    lines, inside, seen = [], False, set()
    for line in tag.read_text(encoding="utf-8", errors="replace").splitlines():
        stripped = line.strip()
        if stripped.startswith("#start"):
            inside = True
        elif stripped.startswith("#end"):
            inside = False
        elif inside and ":" in stripped:
            fields = stripped.split(":")
            d = decoded_of.get(int(fields[0]))
            if d is None or d in seen:
                continue  # a null packet: its frame is the previous line's
            seen.add(d)
            line = ":".join([str(d), *fields[1:]])
        lines.append(line)
    return "\n".join(lines) + "\n"


def evaluate(folder: Path, json_path: Path, extra: list[str]) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "eyeblink",
        "eval",
        str(folder),
        "--json",
        str(json_path),
        "--no-progress",
        *extra,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"eval of {folder} failed "
            f"({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return json.loads(json_path.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the zju-dev folder (default: ../shared/data/zju-dev)",
    )
    ap.add_argument("--keep", type=Path, default=None, help="build the copies here and keep them")
    ap.add_argument("--limit", type=int, default=0, help="only the first N clips (0: all)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("extra", nargs="*", help="options for eyeblink eval (after --)")
    args = ap.parse_args(argv)
    from eyeblink.lab.evaluate import find_pairs

    data = args.data or default_data()
    if not data.is_dir():
        print(f"zju_turned: error: no zju-dev folder at {data}; give --data", file=sys.stderr)
        return 2
    pairs = find_pairs(data)
    if args.limit:
        pairs = pairs[: args.limit]
    with tempfile.TemporaryDirectory(prefix="zju-turned-") as tmp:
        root = args.keep or Path(tmp)
        dirs = {k: root / k for k in ("upright", "turned")}
        for d in (*dirs.values(), root / "original"):
            d.mkdir(parents=True, exist_ok=True)
        n = 0
        for video, tag in pairs:
            n += copy_clip(video, tag, dirs)
            # the original clips, linked (not copied) for the same eval run
            for suffix in (video.suffix, ".tag"):
                link = root / "original" / (video.stem + suffix)
                if not link.exists():
                    link.symlink_to((video if suffix == video.suffix else tag).resolve())
        print(f"{len(pairs)} clips, {n} frames copied under {root}")
        results = {}
        for name in ("original", "upright", "turned"):
            r = evaluate(root / name, root / f"{name}.json", args.extra)
            o, s = r["overall"], r["strict"]["overall"]
            results[name] = {
                "f1": o["f1"],
                "strict_f1": s["f1"],
                "tp": o["tp"],
                "fp": o["fp"],
                "fn": o["fn"],
                "unscored": r["unscored"],
                "videos": {
                    Path(v["video"]).stem: {k: v.get(k) for k in ("tp", "fp", "fn", "detected")}
                    for v in r["videos"]
                },
            }
            print(
                f"{name:<9} F1 {o['f1']:.3f} (TP {o['tp']} FP {o['fp']} FN {o['fn']}, unscored "
                f"{r['unscored']})"
                f"  strict F1 {s['f1']:.3f}"
            )
        up, turned = results["upright"], results["turned"]
        worse = [v for v, c in up["videos"].items() if turned["videos"].get(v) != c]
        d_f1, d_strict = turned["f1"] - up["f1"], turned["strict_f1"] - up["strict_f1"]
        print(
            f"turned - upright: F1 {d_f1:+.3f}, strict F1 {d_strict:+.3f}; "
            f"clips scored differently: {', '.join(worse) or 'none'}"
        )
        if args.json is not None:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
