"""zju-dev as eye-only close-ups: each clip cropped to one fixed eye region (from its first frames)
and scaled up as a close-up camera would see it; the ``.tag`` labels carry over.

The dataset validates eye-region measurement (an eye camera that sees one eye and no face). For
every ``.avi`` in DATA_DIR this:

1. runs the project's own pipeline (``eyeblink process --points --max-frames 30``, one process) on
   the clip's first decoded frames and reads the 12 eye points of ``<stem>.points.csv`` (frame
   pixels, dlib's iBUG-68 numbering: 36-41 the subject's right eye, image left; 42-47 the subject's
   left eye);
2. takes the median over those frames of the chosen eye's two corners (``--eye``, default the
   subject's right; the other eye when the chosen one is measured in fewer than :data:`MIN_MEASURED`
   frames) and makes one fixed box for the whole clip: centred on the corners' midpoint,
   :data:`WIDTH_FACTOR` times the eye's width wide, with the output's aspect ratio (an integer box,
   width and height chosen so the ratio is as exact as integers allow), moved inside the frame where
   it would stick out (its size is kept, so the eye is off centre by what it was moved;
   ``regions.json`` says by how much). ``--corners tag`` takes the corners from the first annotated
   lines of the ``.tag`` instead: on the looking-up clips (``*_UNN``) the pipeline puts the eye 1-5
   pixels below the annotated corners, and the open eye then sits high in the box;
3. decodes every frame with the project's reader (:func:`eyeblink.sources.files.open_source`: the
   gray Y plane, in decode order), crops it to the box, scales it to ``--size``
   (``cv2.INTER_CUBIC``) and writes ``OUT_DIR/<stem>.avi``: FFV1 (lossless) gray in AVI, with the
   original time base and each frame's original timestamp, so the copy decodes to exactly the same
   frames (same count, same order, same times, same nominal rate);
4. writes ``<stem>.tag`` beside it with the frame IDs renumbered to decoded frames (the copy holds
   one packet per decoded frame; the original's 2-byte null packets, which the tags number, are
   gone: their lines are dropped, as ``zju_turned.py`` does), so ``eyeblink eval`` scores the copy
   as it scores the original; re-decodes the copy with the project's reader and checks its frame
   count and timestamps against the original's and the ``.tsv``'s decoded frames (a mismatch stops
   the script);
5. checks the box against the annotation: the share of annotated lines whose two corners of that eye
   (the ``.tag``'s ``LE_*`` is the image-left eye, i.e. the subject's right) lie inside the box, and
   how far the box's centre is from the annotated eye's median centre.

``OUT_DIR/regions.json`` holds, per clip: the box (x, y, w, h in original pixels), the eye used and
why, the frame count and the checks. Nothing is written into the project (an OUT_DIR inside it is
refused: the data is research-use only).

    .venv/bin/python scripts/eye_crops.py /work/shared/data/zju-dev /tmp/zju-eye
        [--size 240x160] [--eye right|left] [--corners pipeline|tag]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zju_turned import packets_of, renumbered_tag  # a sibling script: the same renumbering

#: the box is this many times the eye's width (corner to corner) wide
WIDTH_FACTOR = 1.6
#: decoded frames the pipeline measures at the start of each clip
FIRST_FRAMES = 30
#: an eye counts as measured when it has points in at least this many of those frames
MIN_MEASURED = 5
#: dlib iBUG-68 numbers of each eye's (image-left, image-right) corners: the subject's right eye is
#: image left
CORNERS: dict[str, tuple[int, int]] = {"right": (36, 39), "left": (42, 45)}
#: the ``.tag`` fields (0-based, after splitting on ':') of each eye's two corners as x, y, x, y
TAG_CORNERS: dict[str, slice] = {"right": slice(11, 15), "left": slice(15, 19)}
PROJECT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Box:
    """A crop in original frame pixels."""

    x: int
    y: int
    w: int
    h: int

    def contains(self, x: float, y: float) -> bool:
        return self.x <= x <= self.x + self.w and self.y <= y <= self.y + self.h


@dataclass(frozen=True)
class Eye:
    """One eye's median corners over the measured frames."""

    name: str  # "right" or "left": the subject's
    corners: tuple[tuple[float, float], tuple[float, float]]
    measured: int  # frames with points for it

    @property
    def centre(self) -> tuple[float, float]:
        (ax, ay), (bx, by) = self.corners
        return (ax + bx) / 2, (ay + by) / 2

    @property
    def width(self) -> float:
        (ax, ay), (bx, by) = self.corners
        return math.hypot(bx - ax, by - ay)


def parse_size(text: str) -> tuple[int, int]:
    """``"240x160"`` -> (240, 160)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected WIDTHxHEIGHT such as 240x160, got {text!r}"
        ) from None
    if w < 2 or h < 2:
        raise argparse.ArgumentTypeError(f"the size must be at least 2x2, got {text!r}")
    return w, h


def measure_eyes(video: Path, workdir: Path) -> dict[str, Eye]:
    """Each eye measured in at least :data:`MIN_MEASURED` of the clip's first decoded frames, by the
    project's pipeline (``eyeblink process``, one process): its median corners."""
    cmd = [
        sys.executable,
        "-m",
        "eyeblink",
        "process",
        str(video),
        "-o",
        str(workdir),
        "--max-frames",
        str(FIRST_FRAMES),
        "--points",
        "--workers",
        "1",
        "--no-progress",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=PROJECT)
    points_csv = workdir / f"{video.stem}.points.csv"
    if done.returncode != 0 or not points_csv.is_file():
        raise SystemExit(
            f"{video}: eyeblink process failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
    with points_csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    eyes: dict[str, Eye] = {}
    for name, (a, b) in CORNERS.items():
        pts = []
        for row in rows:
            values = [row.get(f"p{i}_{axis}", "") for i in (a, b) for axis in ("x", "y")]
            if all(values):
                pts.append([float(v) for v in values])
        if len(pts) < MIN_MEASURED:
            continue
        ax, ay, bx, by = np.median(np.array(pts), axis=0).tolist()
        eye = Eye(name, ((ax, ay), (bx, by)), len(pts))
        if eye.width >= 2:
            eyes[name] = eye
    return eyes


def fixed_box(
    eye: Eye, size: tuple[int, int], frame: tuple[int, int]
) -> tuple[Box, tuple[int, int]]:
    """The crop for ``eye``: :data:`WIDTH_FACTOR` eye widths wide, the output's aspect ratio,
    centred on the eye and moved inside the frame where needed; returns it and how far it was moved
    (dx, dy)."""
    out_w, out_h = size
    frame_w, frame_h = frame
    aspect = out_h / out_w
    target = min(WIDTH_FACTOR * eye.width, frame_w, frame_h / aspect)
    # the integer width near the target whose height is closest to the exact aspect ratio
    candidates = [
        w
        for w in range(max(2, round(target) - 3), round(target) + 4)
        if w <= frame_w and round(w * aspect) <= frame_h
    ]
    w = min(candidates, key=lambda c: (abs(c * aspect - round(c * aspect)) / c, abs(c - target)))
    h = max(2, round(w * aspect))
    cx, cy = eye.centre
    x0, y0 = round(cx - w / 2), round(cy - h / 2)
    x, y = min(max(x0, 0), frame_w - w), min(max(y0, 0), frame_h - h)
    return Box(x, y, w, h), (x - x0, y - y0)


def tag_corners(tag: Path, eye: str) -> np.ndarray:
    """The ``.tag``'s corners of ``eye`` on every annotated line, in file order: (n, 4) as x, y,
    x, y."""
    corners = []
    inside = False
    for line in tag.read_text(encoding="utf-8", errors="replace").splitlines():
        s = line.strip()
        if s == "#start":
            inside = True
        elif s == "#end":
            break
        elif inside and s:
            fields = [v.strip() for v in s.split(":")]
            try:
                corners.append([float(v) for v in fields[TAG_CORNERS[eye]]])
            except (ValueError, IndexError):
                continue
    return np.array(corners, dtype=float).reshape(-1, 4)


def annotated_eyes(tag: Path) -> dict[str, Eye]:
    """Each eye's median corners over the first :data:`FIRST_FRAMES` annotated lines of ``tag``
    (``--corners tag``: the annotation places the box, not the pipeline)."""
    eyes: dict[str, Eye] = {}
    for name in CORNERS:
        c = tag_corners(tag, name)[:FIRST_FRAMES]
        if len(c) >= MIN_MEASURED:
            ax, ay, bx, by = np.median(c, axis=0).tolist()
            eye = Eye(name, ((ax, ay), (bx, by)), len(c))
            if eye.width >= 2:
                eyes[name] = eye
    return eyes


def tag_check(tag: Path, eye: str, box: Box) -> dict[str, Any]:
    """How well ``box`` holds the eye the ``.tag`` annotates: the share of annotated lines with both
    corners of ``eye`` inside it and the offset (pixels) of the annotated eye's median centre from
    the box's centre."""
    c = tag_corners(tag, eye)
    if not len(c):
        return {"tag_lines": 0}
    held = sum(box.contains(ax, ay) and box.contains(bx, by) for ax, ay, bx, by in c)
    mx, my = np.median((c[:, 0:2] + c[:, 2:4]) / 2, axis=0)
    return {
        "tag_lines": len(c),
        "tag_corners_inside": round(held / len(c), 4),
        "tag_centre_offset_px": [
            round(float(mx - (box.x + box.w / 2)), 1),
            round(float(my - (box.y + box.h / 2)), 1),
        ],
    }


def decoded_frames(video: Path) -> list[float]:
    """The timestamps of every frame the project's reader decodes from ``video``."""
    from eyeblink.sources.files import open_source

    with open_source(video) as src:
        return [fr.timestamp_s for fr in src]


def tsv_decoded_count(tsv: Path) -> int | None:
    """The number of decoded frames the ``.packet_to_decoded_frame.tsv`` maps packets to (None
    without it)."""
    if not tsv.is_file():
        return None
    with tsv.open(newline="") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return max(int(r[1]) for r in rows) + 1 if rows else 0


def write_crop(video: Path, box: Box, size: tuple[int, int], dest: Path) -> list[float]:
    """Crop every decoded frame of ``video`` to ``box``, scale it to ``size`` and write it to
    ``dest`` (FFV1 gray AVI, the original time base and timestamps); returns the frames' timestamps.
    """
    import av
    import cv2

    from eyeblink.sources.files import open_av, open_source

    with open_av(str(video)) as c:
        stream = c.streams.video[0]
        time_base = Fraction(stream.time_base)
        rate = stream.average_rate or stream.guessed_rate or 1 / time_base
    times: list[float] = []
    with open_source(video) as src, av.open(str(dest), mode="w") as out:
        s = out.add_stream("ffv1", rate=Fraction(rate))
        s.width, s.height, s.pix_fmt = size[0], size[1], "gray"
        s.time_base = time_base
        last_pts = -1
        for fr in src:
            crop = fr.gray[box.y : box.y + box.h, box.x : box.x + box.w]
            img = np.asarray(
                cv2.resize(np.ascontiguousarray(crop), size, interpolation=cv2.INTER_CUBIC),
                np.uint8,
            )
            vf = av.VideoFrame.from_ndarray(img, format="gray")
            # timestamps relative to the start
            pts = max(round(fr.timestamp_s / time_base), last_pts + 1)
            vf.pts, vf.time_base = pts, time_base
            last_pts = pts
            out.mux(s.encode(vf))
            times.append(fr.timestamp_s)
        out.mux(s.encode(None))
    return times


def process_clip(
    video: Path, out_dir: Path, size: tuple[int, int], want: str, corners: str, workdir: Path
) -> dict[str, Any]:
    """Crop one clip, copy its labels, check the copy; returns its ``regions.json`` entry."""
    from eyeblink.sources.files import open_source

    with open_source(video) as src:
        frame = (src.width, src.height)
    tag = video.with_suffix(".tag")
    if corners == "tag":
        if not tag.is_file():
            raise SystemExit(f"{video}: --corners tag needs {tag.name} beside it")
        eyes = annotated_eyes(tag)
    else:
        eyes = measure_eyes(video, workdir)
    other = "left" if want == "right" else "right"
    if want in eyes:
        eye, why = eyes[want], "as asked"
    elif other in eyes:
        eye, why = (
            eyes[other],
            f"the {want} eye was not measured in the first {FIRST_FRAMES} frames",
        )
    else:
        raise SystemExit(
            f"{video}: no eye measured in its first {FIRST_FRAMES} frames; "
            "leave the clip out (move it aside) or look at it"
        )
    box, moved = fixed_box(eye, size, frame)
    dest = out_dir / f"{video.stem}.avi"
    written = write_crop(video, box, size, dest)
    copied = []
    if tag.is_file():
        (out_dir / tag.name).unlink(missing_ok=True)  # a read-only copy from an earlier run
        (out_dir / tag.name).write_text(renumbered_tag(tag, packets_of(video)), encoding="utf-8")
        copied.append(tag.name)

    original = decoded_frames(video)
    again = decoded_frames(dest)
    tsv = tsv_decoded_count(video.with_name(video.stem + ".packet_to_decoded_frame.tsv"))
    if not (len(original) == len(written) == len(again) and (tsv is None or tsv == len(again))):
        raise SystemExit(
            f"{video.stem}: frame counts differ: original {len(original)}, written {len(written)}, "
            f"re-decoded {len(again)}, .tsv {tsv}"
        )
    worst_dt = max((abs(a - b) for a, b in zip(original, again, strict=True)), default=0.0)
    if worst_dt > 1e-3:
        raise SystemExit(
            f"{video.stem}: the copy's timestamps differ from the original's by up to "
            f"{worst_dt:.4f} s"
        )

    entry: dict[str, Any] = {
        "box": asdict(box),
        "eye": eye.name,
        "eye_choice": why,
        "corners_from": corners,
        "frames": len(again),
        "frame_size": list(frame),
        "output_size": list(size),
        "scale": round(size[0] / box.w, 3),
        "eye_width_px": round(eye.width, 1),
        "eye_corners_px": [[round(v, 1) for v in p] for p in eye.corners],
        "measured_frames": eye.measured,
        "moved_into_frame_px": list(moved),
        "check": {
            "original_frames": len(original),
            "copy_frames": len(again),
            "tsv_frames": tsv,
            "max_timestamp_diff_s": worst_dt,
        },
        "copied": copied,
    }
    if tag.is_file():
        entry["annotation"] = tag_check(tag, eye.name, box)
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "data_dir", type=Path, help="folder of .avi clips with their .tag and .tsv (zju-dev)"
    )
    ap.add_argument(
        "out_dir", type=Path, help="where the crops go (created; never inside the project)"
    )
    ap.add_argument(
        "--size", type=parse_size, default=(240, 160), help="output WIDTHxHEIGHT (default 240x160)"
    )
    ap.add_argument(
        "--eye",
        choices=("right", "left"),
        default="right",
        help="the subject's eye to crop (default right: image left); the other where it is not "
        "measured",
    )
    ap.add_argument(
        "--corners",
        choices=("pipeline", "tag"),
        default="pipeline",
        help="where the eye's corners come from: the project's pipeline on the first frames "
        "(default) "
        "or the .tag's annotated corners of the first annotated lines",
    )
    args = ap.parse_args(argv)

    data: Path = args.data_dir.resolve()
    out: Path = args.out_dir.resolve()
    if not data.is_dir():
        ap.error(f"no such folder: {data}")
    if out == PROJECT or PROJECT in out.parents:
        ap.error(f"{out} is inside the project; the data is research-use only: write it elsewhere")
    videos = sorted(data.glob("*.avi"))
    if not videos:
        ap.error(f"no .avi clips in {data}")
    out.mkdir(parents=True, exist_ok=True)

    regions: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="eye-crops-") as tmp:
        for video in videos:
            entry = process_clip(video, out, args.size, args.eye, args.corners, Path(tmp))
            regions[video.stem] = entry
            b, a = entry["box"], entry.get("annotation", {})
            held = f"{a['tag_corners_inside']:.0%}" if "tag_corners_inside" in a else "n/a"
            offset = a.get("tag_centre_offset_px", "n/a")
            print(
                f"{video.stem:<14} {entry['eye']:>5} eye  box x={b['x']} y={b['y']} "
                f"{b['w']}x{b['h']}"
                f" (eye {entry['eye_width_px']} px, x{entry['scale']})  {entry['frames']} frames"
                f" (original {entry['check']['original_frames']}, tsv "
                f"{entry['check']['tsv_frames']})"
                f"  tag corners inside {held}, tag centre offset {offset}",
                flush=True,
            )
    (out / "regions.json").write_text(
        json.dumps(
            {
                "method": __doc__.split("\n\n")[0].replace("\n", " ").replace("``", ""),
                "data_dir": str(data),
                "eye_asked": args.eye,
                "corners_from": args.corners,
                "size": list(args.size),
                "width_factor": WIDTH_FACTOR,
                "first_frames": FIRST_FRAMES,
                "clips": regions,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"{len(regions)} clips -> {out} (regions.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
