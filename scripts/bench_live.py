"""Benchmark of live mode: a paced 500 FPS 640x480 gray stream over loopback TCP into the live
pipeline.

The sender (``python -m eyeblink.lab.loopback``, a separate process on the same machine, so its CPU
counts) pre-renders ``--distinct`` synthetic face frames and loops them as raw video in NUT, paced
at ``--fps`` against the monotonic clock from the moment the pipeline connects (like a camera: no
backlog of frames "sent" while nobody listened). Its rendering CPU is not counted, its sending CPU
is. The pipeline runs here with the live defaults (``LiveConfig()``: drop policy, chunk/batch sizes
of :mod:`eyeblink.runtime.live.pipeline`, ``--landmarks auto``) unless flags change them.

Reports frames in / processed / dropped by the pipeline, the arrival-to-row latency (p50/p99/max,
overall and after the first second), CPU seconds of the pipeline and of the sender, the CPU share
of the machine, and the load average (``os.getloadavg()``) before and after: the machine may be
shared, and other jobs' CPU use shows up as drops and latency here.

    python scripts/bench_live.py --duration 60 [--json out.json]
                                 [--chunk-frames 32 --batch-frames 4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (the sender's are counted
    apart)."""
    from eyeblink import host

    return (host.process_cpu_seconds() or 0.0) + host.children_cpu_seconds()


def main() -> int:
    from eyeblink.config import LIVE_LANDMARKS, load_preset
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.live.pipeline import (
        LIVE_BATCH_FRAMES,
        LIVE_CHUNK_FRAMES,
        LiveConfig,
        LivePipeline,
    )
    from eyeblink.sources.live import open_live_source

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--fps", type=float, default=500.0)
    ap.add_argument("--distinct", type=int, default=500)
    ap.add_argument(
        "--input",
        default=None,
        metavar="VIDEO",
        help="send the first --distinct frames of this recording (real faces) instead of rendered "
        "ones",
    )
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--chunk-frames", type=int, default=LIVE_CHUNK_FRAMES)
    ap.add_argument("--batch-frames", type=int, default=LIVE_BATCH_FRAMES)
    ap.add_argument("--overload", choices=("drop", "block"), default="drop")
    ap.add_argument("--buffer", type=float, default=1.0)
    ap.add_argument(
        "--landmarks",
        choices=LIVE_LANDMARKS,
        default="auto",
        help="eye model (default: auto, as `eyeblink live`)",
    )
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--latencies",
        default=None,
        metavar="NPY",
        help="save the per-frame arrival-to-row latencies (ms, in frame order) to this .npy file",
    )
    a = ap.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    load_before = os.getloadavg()
    sender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.loopback",
            "--port",
            str(port),
            "--fps",
            str(a.fps),
            "--duration",
            str(a.duration),
            "--distinct",
            str(a.distinct),
            *(["--input", a.input] if a.input else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert sender.stdout is not None and sender.stdout.readline().strip() == "listening"
    cfg = load_preset(resolve_preset("cpu"))
    live = LiveConfig(
        overload=a.overload,
        workers=a.workers,
        chunk_frames=a.chunk_frames,
        batch_frames=a.batch_frames,
        buffer_s=a.buffer,
        landmarks=a.landmarks,
    )
    with tempfile.TemporaryDirectory() as tmp:
        pipe = LivePipeline(cfg, live)
        source = open_live_source(f"tcp://127.0.0.1:{port}", name="bench", connect=False)
        with source:
            cpu0, t0 = _cpu(), time.perf_counter()
            result, run = pipe.run(source, Path(tmp))
            wall = time.perf_counter() - t0
        _, err = sender.communicate(timeout=30)
        cpu = _cpu() - cpu0
    # the sender's CPU while sending counts against the pipeline; rendering its frames came before
    # the run
    m = re.search(r"rendering cpu ([0-9.]+) s, sending cpu ([0-9.]+) s", err)
    render_cpu, sender_cpu = (float(m.group(1)), float(m.group(2))) if m else (0.0, float("nan"))
    cpu -= render_cpu
    lat = run.latencies.exact_ms()  # the first 65,536 frames' (131 s at 500 FPS)
    steady = lat[int(a.fps) :] if len(lat) > a.fps else lat
    s = result.summary
    cores = os.cpu_count() or 1
    out = {
        "fps": a.fps,
        "duration_s": a.duration,
        "input": a.input or "rendered",
        "workers": run.W,
        "chunk_frames": run.C,
        "batch_frames": run.B,
        "overload": a.overload,
        "ring_slots": run.spec.slots,
        "landmarks": s["live"]["landmarks_model"],
        "landmarks_choice": s["live"]["landmarks_choice"],
        "frames_in": s["live"]["frames_in"],
        "frames_dropped": s["live"]["frames_dropped"],
        "frames_processed": s["frames"] - s["live"]["frames_dropped"],
        "frames_with_face": s["frames_with_face"],
        "latency_ms": {q: float(np.percentile(lat, q)) for q in (50, 99)}
        | {"max": float(lat.max())},
        "latency_ms_after_1s": {q: float(np.percentile(steady, q)) for q in (50, 99)},
        # start-up (stream open, first frames, the blink detector's 1 s warm-up re-scan) vs steady
        # state
        **{
            f"latency_ms_after_{k}s": {
                q: float(np.percentile(lat[int(k * a.fps) :], q)) for q in (50, 99)
            }
            for k in (2, 5)
            if len(lat) > k * a.fps
        },
        "wall_s": wall,
        "cpu_s_total": cpu,
        "cpu_s_sender": sender_cpu,
        "cpu_s_pipeline": cpu - sender_cpu,
        "cpu_share_of_machine": cpu / (wall * cores),
        "cores": cores,
        "ms_per_frame": s["timings"]["ms_per_frame"],
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))
    if a.latencies:
        np.save(a.latencies, lat)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
