"""A paced synthetic camera on a network socket: the sender of live-mode tests and ``bench_live``.

It pre-renders ``distinct`` face frames (:class:`eyeblink.lab.synth.FaceRenderer`, with a blink or
two in them), then muxes them in a loop as raw gray video in NUT (``rawvideo``: no encoder CPU; NUT
carries the frame size and exact timestamps) to ``tcp://127.0.0.1:PORT?listen`` through PyAV, paced
at ``fps`` against the monotonic clock from the moment the receiver connects (as a camera would:
frames are not owed for the time nobody listened). It needs no ``ffmpeg`` binary: PyAV ships
FFmpeg's libraries, so CI can always run it. Sending 640x480 at 500 FPS costs ~10% of one core (the
packets are the pre-rendered frames' bytes, built once).

``--input VIDEO`` sends the first ``distinct`` decoded frames of a real recording instead (gray,
resized to ``--size``; e.g. real faces, which cost the eye model more than the rendered one).

Run it as ``python -m eyeblink.lab.loopback --port P [--fps 500] [--duration S] [--stop-after N]``;
it prints ``listening`` on stdout once the socket is bound (then waits for one receiver) and exits
when done (the receiver sees the end of the stream). ``--stop-after N`` closes the connection after
``N`` frames: a sender that stops mid-stream. ``--timestamp-step S`` stamps frame ``i`` with ``i x
S`` seconds while still sending at ``--fps``: a sender whose clock lies (``1/64000`` or ``1/30`` on
a 500 FPS stream). ``--freeze-at N --freeze-s S`` stops sending for ``S`` seconds after frame ``N``
with the connection open, then goes on where the clock is (a camera that froze: the frames of the
freeze never come). ``--blank-at N --blank-frames M`` sends frames ``N`` to ``N+M-1`` as a uniform
gray image (no face: the camera looking away), on time.

NUT is muxed without syncpoints (FFmpeg's ``-syncpoints none -strict experimental``, the muxer's
pipe mode): FFmpeg's NUT demuxer keeps every syncpoint it reads until the stream is closed, and a
NUT muxer writes one before every raw frame, so a receiver's memory would grow ~6 MiB a minute at
500 FPS 640x480 for as long as the stream lasts (docs/explanation/speed.md). A live stream is never
seeked, so syncpoints buy it nothing. ``--syncpoints`` writes them as a default ``ffmpeg -f nut``
sender does (to reproduce that growth).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys
import time
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from eyeblink.errors import EyeblinkError, one_line

__all__ = ["main", "render_loop_frames", "serve", "video_loop_frames"]


def render_loop_frames(
    n: int, *, fps: float = 500.0, width: int = 640, height: int = 480, seed: int = 0
) -> list[np.ndarray]:
    """``n`` distinct synthetic face frames at ``fps``, with one full blink when ``n`` spans >=
    0.4 s."""
    from eyeblink.lab.synth import FaceRenderer, SynthConfig

    # the default face (220 px wide) scaled down to fit a small frame (a face must fill at most 0.9
    # of it)
    face = min(SynthConfig().face_scale, 0.9 * min(width, height))
    renderer = FaceRenderer(
        SynthConfig(width=width, height=height, fps=fps, seed=seed, face_scale=face)
    )
    rng = np.random.default_rng(seed)
    frames = []
    span = n / fps
    for i in range(n):
        t = i / fps
        # a 150 ms blink centred in the loop (when the loop is long enough to hold one)
        closure = 0.0
        if span >= 0.4:
            x = (t - span / 2) / 0.075
            closure = max(0.0, math.cos(x * math.pi / 2)) if abs(x) < 1 else 0.0
        frames.append(renderer.render(t, closure, closure, rng))
    return frames


def video_loop_frames(
    path: str, n: int, *, width: int = 640, height: int = 480
) -> list[np.ndarray]:
    """The first ``n`` decoded frames of the video ``path`` as ``height`` x ``width`` gray images; a
    frame equal to the one before it is that same array (a video retimed to a higher rate repeats
    its frames: one copy each)."""
    import cv2

    from eyeblink.sources.files import open_source

    frames: list[np.ndarray] = []
    with open_source(path) as src:
        for fr in src:
            g = fr.gray
            g = g if g.shape == (height, width) else cv2.resize(g, (width, height))
            frames.append(frames[-1] if frames and np.array_equal(g, frames[-1]) else g)
            if len(frames) >= n:
                break
    if not frames:
        raise SystemExit(f"loopback: no frames decoded from {path}")
    return frames


def serve(
    port: int,
    frames: Sequence[np.ndarray],
    *,
    fps: float = 500.0,
    duration_s: float | None = None,
    stop_after: int | None = None,
    host: str = "127.0.0.1",
    announce: bool = True,
    syncpoints: bool = False,
    freeze_at: int | None = None,
    freeze_s: float = 0.0,
    blank: tuple[int, int] | None = None,
    timestamp_step: Fraction | None = None,
) -> int:
    """Listen on ``tcp://host:port``, wait for one receiver, send frames paced at ``fps``; frames
    sent.

    ``syncpoints``: write NUT syncpoints (a default ``ffmpeg -f nut`` sender; the receiver's demuxer
    then keeps one per frame for as long as the stream lasts); by default none, as a long live
    stream should be sent. ``freeze_at``: after that frame nothing is sent for ``freeze_s`` seconds
    (the connection stays open); the frames that fall in the freeze are skipped, their timestamps
    too, as a camera that froze would. ``blank``: (first, count): those frames are sent as a uniform
    gray image (no face), on time. ``timestamp_step``: frame ``i`` is stamped ``i x timestamp_step``
    seconds while the frames are still sent at ``fps`` (a sender whose clock lies: 1/64000 or 1/30
    on a 500 FPS stream); default ``1 / fps``.
    """
    import av

    height, width = frames[0].shape
    url = f"tcp://{host}:{port}?listen=1"
    if announce:
        print("listening", flush=True)
    # flush_packets: each frame leaves in full when it is sent, as from a camera (else the tail of a
    # frame waits in the muxer's I/O buffer until the next frame pushes it out: one frame interval
    # late, forever at a freeze)
    out = av.open(
        url,
        mode="w",
        format="nut",
        options={"flush_packets": "1"}
        if syncpoints
        else {"syncpoints": "none", "strict": "experimental", "flush_packets": "1"},
    )
    try:
        rate = Fraction(fps).limit_denominator(1000)
        # the rate the timestamps claim
        stamps = 1 / Fraction(timestamp_step) if timestamp_step else rate
        stream = out.add_stream("rawvideo", rate=stamps)
        stream.width, stream.height, stream.pix_fmt = width, height, "gray"
        tb = 1 / stamps
        total = (
            stop_after
            if stop_after is not None
            else (round(duration_s * fps) if duration_s is not None else None)
        )
        # a rawvideo packet is the frame's bytes: build them once, not once per frame sent (a camera
        # costs this machine nothing; the sender should cost it as little as it can)
        # one payload per distinct array (a repeated frame is the same array)
        built: dict[int, bytes] = {}
        payloads = []
        for f in frames:
            if id(f) not in built:
                built[id(f)] = np.ascontiguousarray(f, dtype=np.uint8).tobytes()
            payloads.append(built[id(f)])
        blank_payload = bytes([128]) * (width * height)
        b0, b1 = (blank[0], blank[0] + blank[1]) if blank is not None else (-1, -1)
        i = 0
        sent = 0
        start = math.nan
        while total is None or i < total:
            packet = av.Packet(blank_payload if b0 <= i < b1 else payloads[i % len(payloads)])
            packet.stream = stream
            packet.pts = packet.dts = i
            packet.time_base = tb
            packet.is_keyframe = True
            out.mux(packet)
            sent += 1
            if i == 0:  # the first write waits for the receiver to connect: the clock starts then
                start = time.perf_counter()
            i += 1
            if freeze_at is not None and i == freeze_at + 1 and freeze_s > 0:
                time.sleep(freeze_s)
                i += round(freeze_s * fps)  # the frames of the freeze never come
                if total is not None and i >= total:
                    break
            wait = start + i / fps - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
    except (av.error.FFmpegError, BrokenPipeError, ConnectionError):  # the receiver went away
        pass
    finally:
        with contextlib.suppress(av.error.FFmpegError, OSError):
            out.close()
    return sent


def _cpu_s() -> float:
    from eyeblink.host import process_cpu_seconds

    return process_cpu_seconds() or 0.0


def _step(text: str) -> Fraction:
    """``--timestamp-step``: seconds as a fraction (1/64000) or a decimal (0.002), > 0."""
    try:
        step = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(
            f"expected seconds such as 1/64000 or 0.002, got {text!r}"
        ) from None
    if step <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return step


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eyeblink.lab.loopback", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--fps", type=float, default=500.0)
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds (default: never)",
    )
    p.add_argument(
        "--stop-after",
        type=int,
        default=None,
        metavar="N",
        help="close the connection after N frames",
    )
    p.add_argument(
        "--distinct",
        type=int,
        default=500,
        metavar="N",
        help="distinct pre-rendered frames (looped)",
    )
    p.add_argument("--size", default="640x480", metavar="WxH")
    p.add_argument(
        "--input",
        default=None,
        metavar="VIDEO",
        help="loop the first --distinct frames of this video",
    )
    p.add_argument(
        "--freeze-at",
        type=int,
        default=None,
        metavar="N",
        help="after frame N send nothing for --freeze-s seconds, the connection open (a frozen "
        "camera)",
    )
    p.add_argument("--freeze-s", type=float, default=0.0, metavar="S")
    p.add_argument(
        "--blank-at",
        type=int,
        default=None,
        metavar="N",
        help="send frames N .. N+M-1 (--blank-frames M) as a uniform gray image: no face in view",
    )
    p.add_argument("--blank-frames", type=int, default=0, metavar="M")
    p.add_argument(
        "--timestamp-step",
        type=_step,
        default=None,
        metavar="S",
        help="stamp frame i with i x S seconds (e.g. 1/64000 or 1/30) while sending at --fps: a "
        "sender "
        "whose timestamps lie (default: 1/--fps)",
    )
    p.add_argument(
        "--syncpoints",
        action="store_true",
        help="write NUT syncpoints, as a default `ffmpeg -f nut` sender does (the receiver's "
        "memory grows)",
    )
    a = p.parse_args(argv)
    size = re.fullmatch(r"(\d+)x(\d+)", a.size.strip().lower())
    if size is None:
        p.error(f"--size {a.size!r} is not WIDTHxHEIGHT; give e.g. --size 640x480")
    w, h = int(size.group(1)), int(size.group(2))
    try:
        frames = (
            video_loop_frames(a.input, a.distinct, width=w, height=h)
            if a.input
            else render_loop_frames(a.distinct, fps=a.fps, width=w, height=h)
        )
    # a size no face fits, a video that cannot be read: one line, no traceback
    except EyeblinkError as exc:
        print(f"{p.prog}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    rendering = _cpu_s()
    n = serve(
        a.port,
        frames,
        fps=a.fps,
        duration_s=a.duration,
        stop_after=a.stop_after,
        host=a.host,
        syncpoints=a.syncpoints,
        freeze_at=a.freeze_at,
        freeze_s=a.freeze_s,
        timestamp_step=a.timestamp_step,
        blank=(a.blank_at, a.blank_frames)
        if a.blank_at is not None and a.blank_frames > 0
        else None,
    )
    print(
        f"sent {n} frames, rendering cpu {rendering:.3f} s, sending cpu "
        f"{_cpu_s() - rendering:.3f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
