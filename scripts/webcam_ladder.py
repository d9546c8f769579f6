"""zju-dev as a webcam would record it: a second kind of recording for the frame-rate ladder of the
lid network.

``zju-dev`` is one camera (320x240, 30 FPS, lightly compressed) and the lid networks' training data;
the held-out laptop webcams (640x480, H.264 at a laptop's bitrate, automatic exposure and gain, 30,
15–17 and 6–8 FPS) are where a network that passed the zju-dev ladder lost blinks. This writes, for
every clip of ``zju-dev``, a copy that has what such a webcam adds and what the original has not,
then scores it with ``eyeblink eval --ladder`` (the ladder's rungs add the slow frame rates:
decimated, and exposed, each frame the mean of its frame time):

* **640x480** from 320x240 (bicubic: the webcams' sensors are not sharper than the faces need);
* **automatic exposure and gain**: the frame's gain follows a slow random walk (0.8–1.2, ~1 s steps,
  smoothed) with an offset (±10 grey levels), and the gain's noise (Gaussian, sigma 2.5 grey levels
  at gain 1, growing with the gain);
* **H.264 at a low laptop bitrate**: libx264, baseline-like (no B-frames), ``crf`` 27 (0.24 Mbit/s
  on average over the 40 clips at their 30 FPS), keyframe every 2 s, YUV 4:2:0 as the webcams write.

With ``--dim K`` the copy is what the same webcam records **in a dim room**, where its automatic
exposure lengthens every exposure to K frame times and the frame rate falls to 1/K (30 FPS -> 15 FPS
with K = 2, 7.5 with 4; the held-out webcams' 15–17 and 6–8 FPS):

* **a rolling exposure**: each output frame integrates K frame times of the original, row by row,
  each row's window starting later than the one above it (the readout sweeps the frame in half a
  frame time), so a lid moving during the exposure is smeared, and differently at the eye's top and
  bottom;
* **little light**: the sensor collects a fraction of good light (0.25–0.5 of a 30 FPS frame's, per
  clip, the long exposure included), with photon (Poisson) and read noise, amplified back to the
  picture's brightness by the gain;
* then the same 640x480, exposure drift and H.264 as above, at the slower rate. The ``.tag`` has one
  line per output frame: inside a blink if any frame its exposure covers is.

Each clip gets a seed from its name, so the set is the same on every machine. The copies (Matroska:
it keeps the original's nominal rate, which the ladder's rungs are cut from, and every timestamp to
the millisecond) hold one packet per decoded frame; each copy's ``.tag`` has its frame IDs
renumbered to the decoded frames (``zju_turned.py``'s renumbering). Nothing is written into the
project: the data is research-use only.

    python scripts/webcam_ladder.py DATA/zju-dev OUT_DIR [--limit N] [--dim K]
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
#: --dim: the light collected, as a fraction of a good 30 FPS frame's (per clip, uniform), electrons
#: per grey level at full light, read noise (electrons), and the rolling readout's sweep (fraction
#: of the output frame time)
DIM_LIGHT = (0.25, 0.5)
ELECTRONS = 10.0
READ_NOISE = 4.0
READOUT = 0.5
#: --dim: the encoder's bitrate cap (the noise would otherwise triple the bitrate a laptop records
#: at)
DIM_MAXRATE, DIM_BUFSIZE = "300k", "600k"


def gains(n: int, fps: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per frame the gain and offset of an automatic exposure: a random walk with a step every ~1 s,
    smoothed over half a second (an auto-exposure loop does not jump)."""
    steps = max(2, int(n / max(fps, 1.0)) + 2)
    knots = np.clip(1.0 + np.cumsum(rng.normal(0, 0.12, steps)), *GAIN_RANGE)
    offsets = np.clip(np.cumsum(rng.normal(0, 3.0, steps)), -10, 10)
    t = np.arange(n) / max(fps, 1.0)
    g = np.interp(t, np.arange(steps), knots)
    o = np.interp(t, np.arange(steps), offsets)
    k = max(1, int(fps / 2))
    kernel = np.ones(k) / k
    return (
        np.convolve(np.pad(g, (k, k), mode="edge"), kernel, mode="same")[k:-k],
        np.convolve(np.pad(o, (k, k), mode="edge"), kernel, mode="same")[k:-k],
    )


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
            lit = (
                big * gain[i]
                + offset[i]
                + rng.normal(0, NOISE * gain[i], big.shape).astype(np.float32)
            )
            y = np.clip(lit, 0, 255).astype(np.uint8)
            # I420: the chroma flat
            yuv = np.concatenate([y, np.full((SIZE[1] // 2, SIZE[0]), 128, np.uint8)])
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
        raise SystemExit(
            f"{video.stem}: the copy decodes to {n} frames, the original to {len(frames)}"
        )
    return n


def slots_of(video: Path) -> tuple[float, list[np.ndarray], list[int]]:
    """The original on its nominal frame grid: per frame time (slot) the picture on screen and its
    packet (a null packet's or a dropped capture frame's slot shows the previous picture), with the
    nominal rate."""
    from eyeblink.sources.files import open_source

    pics: list[np.ndarray] = []
    packets: list[int] = []
    with open_source(video) as src:
        fps = float(src.nominal_fps or 30.0)
        t0: float | None = None
        for fr in src:
            t0 = fr.timestamp_s if t0 is None else t0
            slot = max(len(pics), round((fr.timestamp_s - t0) * fps))
            while len(pics) < slot:  # the previous picture stays on screen
                pics.append(pics[-1])
                packets.append(packets[-1])
            p = src.packet_index(fr.index)  # type: ignore[attr-defined]
            pics.append(fr.gray.copy())
            packets.append(-1 if p is None else int(p))
    if not pics:
        raise SystemExit(f"{video}: no frames decoded")
    return fps, pics, packets


def rolling_exposure(pics: list[np.ndarray], start: int, k: int) -> np.ndarray:
    """The exposure of frame slots [start, start + k), each row's window shifted by its readout
    delay (row r of h starts ``READOUT * k * r / h`` slots later); past the last slot the last
    picture stays."""
    h = pics[0].shape[0]
    delay = READOUT * k * np.arange(h) / h
    last = len(pics) - 1
    acc = np.zeros(pics[0].shape, np.float64)
    for s in range(start, start + k + int(np.ceil(READOUT * k)) + 1):
        # the overlap of slot [s, s+1) with each row's window [start + d, start + k + d)
        w = np.clip(np.minimum(s + 1, start + k + delay) - np.maximum(s, start + delay), 0, 1)
        if w.any():
            acc += pics[min(s, last)].astype(np.float64) * w[:, None]
    return acc / k


def low_light(img: np.ndarray, light: float, rng: np.random.Generator) -> np.ndarray:
    """``img`` (grey levels) as a sensor catching ``light`` of a good frame's light records it,
    brought back to the same brightness by the gain: photon noise (Poisson, ``ELECTRONS`` per grey
    level at full light) and read noise, both amplified by 1 / ``light``."""
    scale = light * ELECTRONS
    caught = rng.poisson(np.clip(img, 0, 255) * scale).astype(np.float32) + rng.normal(
        0, READ_NOISE, img.shape
    )
    return (caught / scale).astype(np.float32)


def dim_copy(video: Path, out_dir: Path, k: int) -> int:
    """``--dim K``: write ``out_dir/<stem>.mkv`` at 1/K of the rate, every frame a dim, rolling
    K-slot exposure, and its ``.tag`` (one line per output frame); returns the frame count."""
    import av
    import cv2

    fps, pics, packets = slots_of(video)
    rng = np.random.default_rng(
        int(hashlib.sha256(f"{video.stem}/dim{k}".encode()).hexdigest()[:8], 16)
    )
    light = rng.uniform(*DIM_LIGHT)
    n = len(pics) // k  # whole exposures only
    if n < 2:
        raise SystemExit(f"{video}: {len(pics)} frame times make fewer than two exposures of {k}")
    out_fps = fps / k
    gain, offset = gains(n, out_fps, rng)
    time_base = Fraction(1, 1000)
    dest = out_dir / f"{video.stem}.mkv"
    with av.open(str(dest), mode="w") as out:
        s = out.add_stream("libx264", rate=Fraction(out_fps).limit_denominator(1001))
        s.width, s.height, s.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        s.time_base = time_base
        s.options = {
            "crf": str(CRF),
            "bf": "0",
            "g": str(max(1, round(GOP_S * out_fps))),
            "preset": "veryfast",
            # a webcam's bitrate, whatever the noise
            "maxrate": DIM_MAXRATE,
            "bufsize": DIM_BUFSIZE,
        }
        for j in range(n):
            exposed = rolling_exposure(pics, j * k, k)
            big = cv2.resize(exposed.astype(np.float32), SIZE, interpolation=cv2.INTER_CUBIC)
            lit = low_light(big, light, rng) * gain[j] + offset[j]
            y = np.clip(lit, 0, 255).astype(np.uint8)
            yuv = np.concatenate([y, np.full((SIZE[1] // 2, SIZE[0]), 128, np.uint8)])
            vf = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
            vf.pts, vf.time_base = round(j * k / fps * 1000), time_base
            out.mux(s.encode(vf))
        out.mux(s.encode(None))
    tag = video.with_suffix(".tag")
    if tag.is_file():
        (out_dir / tag.name).write_text(dim_tag(tag, packets, k, n), encoding="utf-8")
    from eyeblink.sources.files import open_source

    with open_source(dest) as again:
        got = sum(1 for _ in again)
    if got != n:
        raise SystemExit(f"{video.stem}: the copy decodes to {got} frames, {n} were written")
    return n


def dim_tag(tag: Path, packets: list[int], k: int, n: int) -> str:
    """The ``.tag`` of a ``--dim`` copy: output frame j's line is the line of the first packet its
    exposure covers, inside a blink (that blink's id, and closed flags from any covered frame) if
    any covered frame is."""
    from eyeblink.lab.evaluate import tag_rows

    text = tag.read_text(encoding="utf-8", errors="replace").splitlines()
    head = text[: next((i for i, x in enumerate(text) if x.strip() == "#start"), len(text))]
    _, rows = tag_rows(tag)
    by_packet = {int(parts[0]): [f.strip() for f in parts] for _, parts in rows}
    reach = k + int(np.ceil(READOUT * k))  # the slots a rolling exposure touches
    lines = ["#start"]
    for j in range(n):
        covered = [
            by_packet[p] for p in dict.fromkeys(packets[j * k : j * k + reach]) if p in by_packet
        ]
        if not covered:
            continue
        line = list(covered[0])
        inside = [c for c in covered if c[1] != "-1"]
        if inside:
            line[1] = inside[0][1]
            for col in (3, 5):  # LE_FC, RE_FC: closed if closed in any covered frame
                if any(c[col] == "C" for c in inside if len(c) > col):
                    line[col] = "C"
        line[0] = str(j)
        lines.append(":".join(line))
    lines.append("#end")
    return "\n".join([*head, *lines]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path, help="the zju-dev folder (videos with their .tag)")
    ap.add_argument("out_dir", type=Path, help="where the copies go (never inside the project)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N clips (0: all)")
    ap.add_argument(
        "--dim",
        type=int,
        default=0,
        metavar="K",
        help="a dim room: every frame a rolling exposure of K frame times, little light, 1/K the "
        "rate",
    )
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
    if args.dim == 1 or args.dim < 0:
        ap.error(
            f"--dim {args.dim}: give K >= 2 frame times an exposure (2: 15 FPS from 30), or leave "
            "it out"
        )
    for v in videos:
        n = dim_copy(v, out, args.dim) if args.dim else webcam_copy(v, out)
        print(f"{v.stem}: {n} frames -> {out / (v.stem + '.mkv')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
