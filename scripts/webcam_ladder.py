"""zju-dev as a webcam would record it: a second kind of recording for the frame-rate ladder of the lid network.

``zju-dev`` is one camera (320x240, 30 FPS, lightly compressed) and the lid networks' training data; the held-out
laptop webcams (640x480, H.264 at a laptop's bitrate, automatic exposure and gain, 30, 15–17 and 6–8 FPS) are
where a network that passed the zju-dev ladder lost blinks. This writes, for every clip of ``zju-dev``, a copy
that has what such a webcam adds and what the original has not, then scores it with ``eyeblink eval --ladder`` (the
ladder's rungs add the slow frame rates: decimated, and exposed, each frame the mean of its frame time):

* **640x480** from 320x240 (bicubic: the webcams' sensors are not sharper than the faces need);
* **automatic exposure and gain**: the frame's gain follows a slow random walk (0.8–1.2, ~1 s steps, smoothed)
  with an offset (±10 grey levels), and the gain's noise (Gaussian, sigma 2.5 grey levels at gain 1, growing
  with the gain);
* **H.264 at a low laptop bitrate**: libx264, baseline-like (no B-frames), ``crf`` 27 (0.24 Mbit/s on average
  over the 40 clips at their 30 FPS), keyframe every 2 s, YUV 4:2:0 as the webcams write.

Each clip gets a seed from its name, so the set is the same on every machine. The copies (Matroska: it keeps the
original's nominal rate, which the ladder's rungs are cut from, and every timestamp to the millisecond) hold one
packet per decoded frame; each copy's ``.tag`` has its frame IDs renumbered to the decoded frames
(``zju_turned.py``'s renumbering). Nothing is written into the project: the data is research-use only.

    python scripts/webcam_ladder.py DATA/zju-dev OUT_DIR [--limit N]
    eyeblink eval OUT_DIR --ladder --json v3.json                      # the default network
    eyeblink eval OUT_DIR --ladder --landmark-model weights/lids_v1.tflite --against v3.json
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zju_turned import packets_of, renumbered_tag  # a sibling script: the same renumbering

PROJECT = Path(__file__).resolve().parent.parent
SIZE = (640, 480)
CRF = 27
GOP_S = 2.0
GAIN_RANGE = (0.8, 1.2)
NOISE = 2.5


def gains(n: int, fps: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per frame the gain and offset of an automatic exposure: a random walk with a step every ~1 s, smoothed over
    half a second (an auto-exposure loop does not jump)."""
    steps = max(2, int(n / max(fps, 1.0)) + 2)
    knots = np.clip(1.0 + np.cumsum(rng.normal(0, 0.12, steps)), *GAIN_RANGE)
    offsets = np.clip(np.cumsum(rng.normal(0, 3.0, steps)), -10, 10)
    t = np.arange(n) / max(fps, 1.0)
    g = np.interp(t, np.arange(steps), knots)
    o = np.interp(t, np.arange(steps), offsets)
    k = max(1, int(fps / 2))
    kernel = np.ones(k) / k
    return (np.convolve(np.pad(g, (k, k), mode="edge"), kernel, mode="same")[k:-k],
            np.convolve(np.pad(o, (k, k), mode="edge"), kernel, mode="same")[k:-k])


def webcam_copy(video: Path, out_dir: Path) -> int:
    """Write ``out_dir/<stem>.mkv`` and its renumbered ``.tag``; returns the frame count."""
    import av
    import cv2

    from eyeblink.sources.files import open_av, open_source

    with open_av(str(video)) as c:
        stream = c.streams.video[0]
        time_base = Fraction(stream.time_base)
        start = stream.start_time or 0
    frames: list[tuple[int, np.ndarray]] = []
    with open_source(video) as src:
        fps = float(src.nominal_fps or 30.0)
        for fr in src:
            frames.append((round(fr.timestamp_s / time_base) + start, fr.gray.copy()))
    if not frames:
        raise SystemExit(f"{video}: no frames decoded")
    rng = np.random.default_rng(int(hashlib.sha256(video.stem.encode()).hexdigest()[:8], 16))
    gain, offset = gains(len(frames), fps, rng)
    dest = out_dir / f"{video.stem}.mkv"  # Matroska: the nominal rate and every timestamp kept
    with av.open(str(dest), mode="w") as out:
        s = out.add_stream("libx264", rate=Fraction(1) / time_base)
        s.width, s.height, s.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        s.time_base = time_base
        s.options = {"crf": str(CRF), "bf": "0", "g": str(round(GOP_S * fps)), "preset": "veryfast"}
        for i, (pts, img) in enumerate(frames):
            big = cv2.resize(img, SIZE, interpolation=cv2.INTER_CUBIC).astype(np.float32)
            lit = big * gain[i] + offset[i] + rng.normal(0, NOISE * gain[i], big.shape).astype(np.float32)
            y = np.clip(lit, 0, 255).astype(np.uint8)
            yuv = np.concatenate([y, np.full((SIZE[1] // 2, SIZE[0]), 128, np.uint8)])  # I420: the chroma flat
            vf = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
            vf.pts, vf.time_base = pts - start, time_base
            out.mux(s.encode(vf))
        out.mux(s.encode(None))
    tag = video.with_suffix(".tag")
    if tag.is_file():
        (out_dir / tag.name).write_text(renumbered_tag(tag, packets_of(video)), encoding="utf-8")
    with open_source(dest) as again:
        n = sum(1 for _ in again)
    if n != len(frames):
        raise SystemExit(f"{video.stem}: the copy decodes to {n} frames, the original to {len(frames)}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path, help="the zju-dev folder (videos with their .tag)")
    ap.add_argument("out_dir", type=Path, help="where the copies go (never inside the project)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N clips (0: all)")
    args = ap.parse_args(argv)
    out = args.out_dir.resolve()
    if out == PROJECT or PROJECT in out.parents:
        ap.error(f"{out} is inside the project; the data is research-use only: write it elsewhere")
    videos = sorted(args.data_dir.glob("*.avi"))
    if args.limit:
        videos = videos[: args.limit]
    if not videos:
        ap.error(f"no .avi clips in {args.data_dir}")
    out.mkdir(parents=True, exist_ok=True)
    for v in videos:
        print(f"{v.stem}: {webcam_copy(v, out)} frames -> {out / (v.stem + '.mkv')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
