"""`eyeblink process` against FFmpeg decoding the same file alone: the "share of decode-only"
figure, on this host.

    python scripts/decode_ratio.py RECORDING [--frames 20000] [--rounds 3] [--json out.json]
                                   [-- PROCESS OPTIONS]

What runs (all real, on this machine):

* ``RECORDING`` (a real face recording, any format FFmpeg reads) is looped and re-encoded once to a
  640x480 gray MJPG AVI of ``--frames`` frames at 500 FPS (``-q:v 2``), cached beside ``--work``
  (the speed tables' input: Eyeblink8's calibration video looped to 20,000 frames). ``--as-is`` uses
  ``RECORDING`` unchanged.
* each round: ``ffmpeg -v error -i FILE -f null -`` (decode only, FFmpeg's own threads), then
  ``eyeblink process FILE`` with this interpreter and any options after ``--``; the two alternate,
  so a host whose speed drifts (a virtual machine's neighbours) affects both alike.

Printed and written to ``--json``: the host class (CPU model, vector extensions, cores: what the
speed tables are grouped by), per round the wall-clock FPS of both, their ratio, `process`'s CPU per
frame over all its processes (and beyond FFmpeg's own CPU per frame of the round), per role (the
loaders, the workers, the parent's sink loop and the rest of the parent: its start-up, the models it
loads, finalize; ``EYEBLINK_PROFILE_MODE=cpu``, which adds no profiler) and the cores' use, the
loader choice (``parallel.placement``), and the median and range of the ratio. The figure a release
states for a host class is this median, with its range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def ffmpeg() -> str:
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


def make_input(recording: Path, frames: int, work: Path) -> Path:
    """``recording`` looped to ``frames`` 640x480 gray frames, MJPG q 2 at 500 FPS (made once,
    then reused)."""
    out = work / f"{recording.stem}.{frames}.mjpg.avi"
    if out.exists():
        return out
    tmp = out.with_suffix(".part.avi")
    cmd = [
        ffmpeg(),
        "-v",
        "error",
        "-y",
        "-stream_loop",
        "-1",
        "-i",
        str(recording),
        "-frames:v",
        str(frames),
        "-vf",
        "scale=640:480,hue=s=0",
        "-r",
        "500",
        "-c:v",
        "mjpeg",
        "-q:v",
        "2",
        "-pix_fmt",
        "yuvj420p",
        "-an",
        str(tmp),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(
            f"decode_ratio: FFmpeg could not loop {recording} into an MJPG ({last}) — give a video"
        )
    tmp.replace(out)
    return out


def children_cpu_s() -> float:
    from eyeblink.host import children_cpu_seconds

    return children_cpu_seconds()


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children)."""
    cpu0, t0 = children_cpu_s(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0, children_cpu_s() - cpu0


#: the roles `process` runs, by the name its processes' CPU files start with
#: (``EYEBLINK_PROFILE_MODE=cpu``)
ROLES = (
    ("loaders", "eyeblink-loader"),
    ("workers", "eyeblink-worker"),
    ("accelerator", "eyeblink-accelerator"),
    ("sink", "eyeblink-sink"),
)


def cpu_by_role(folder: Path, total_s: float, frames: int) -> dict[str, float]:
    """CPU ms a frame per role of one `process` run, from the files ``EYEBLINK_PROFILE_MODE=cpu``
    left in ``folder``; ``parent_rest``: the rest of the command (the parent's start-up, models and
    finalize)."""
    out = {role: 0.0 for role, _ in ROLES}
    for f in folder.glob("*.cpu.json"):
        d = json.loads(f.read_text())
        role = next((r for r, prefix in ROLES if d["name"].startswith(prefix)), None)
        if role is not None:
            out[role] += d["user_s"] + d["system_s"]
    out["parent_rest"] = total_s - sum(out.values())
    return {
        k: round(1000 * v / frames, 3)
        for k, v in out.items()
        if v or k in ("workers", "parent_rest")
    }


def count_frames(path: Path) -> int:
    import av

    with av.open(str(path)) as c:
        return sum(1 for p in c.demux(c.streams.video[0]) if p.size)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recording", type=Path)
    ap.add_argument(
        "--frames", type=int, default=20000, help="length of the looped MJPG (default 20000)"
    )
    ap.add_argument(
        "--as-is", action="store_true", help="time RECORDING itself, not a looped MJPG of it"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "eyeblink-decode-ratio"
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("process_options", nargs="*", help="after --: options for `eyeblink process`")
    args = ap.parse_args()
    if not args.recording.exists():
        print(
            f"decode_ratio: {args.recording} not found — give a recording's path", file=sys.stderr
        )
        return 2
    from eyeblink.runtime.costs import host_info
    from eyeblink.runtime.procs.profiling import MODE_ENV, PROFILE_ENV

    args.work.mkdir(parents=True, exist_ok=True)
    video = args.recording if args.as_is else make_input(args.recording, args.frames, args.work)
    n = count_frames(video)
    host = host_info()
    stand_in = (
        f"; under slow-host: every network run x{host['stand_in_network_factor']:g}, decoding not "
        "slowed"
        if "stand_in_network_factor" in host
        else ""
    )
    print(
        f"host: {host['cpu']} [{host['class']}: {' '.join(host['vector'])}], "
        f"{host['physical_cores']} physical "
        f"cores, {host['logical_cpus']} CPUs{stand_in}; input {video} ({n} frames); load "
        f"{os.getloadavg()[0]:.2f}"
    )
    rounds: list[dict[str, Any]] = []
    out = args.work / "out"
    # each process's CPU seconds (EYEBLINK_PROFILE_MODE=cpu: no profiler, no cost)
    profiles = args.work / "cpu"
    for i in range(args.rounds):
        ff_wall, ff_cpu = timed([ffmpeg(), "-v", "error", "-i", str(video), "-f", "null", "-"])
        subprocess.run(["rm", "-rf", str(out), str(profiles)], check=True)
        env = {**os.environ, PROFILE_ENV: str(profiles), MODE_ENV: "cpu"}
        wall, cpu = timed(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "process",
                str(video),
                "-o",
                str(out),
                "--no-progress",
                *args.process_options,
            ],
            env,
        )
        summary = json.loads((out / f"{video.stem}.summary.json").read_text())
        par = summary.get("parallel") or {}
        row = {
            "round": i + 1,
            "ffmpeg_fps": n / ff_wall,
            "ffmpeg_cpu_ms_per_frame": 1000 * ff_cpu / n,
            "process_fps": n / wall,
            "ratio": ff_wall / wall,
            "process_cpu_ms_per_frame": 1000 * cpu / n,
            "cores_busy": cpu / wall / max(1, host["physical_cores"]),
            "loaders": par.get("loaders"),
            "placement": par.get("placement"),
            "load": os.getloadavg()[0],
            "cpu_ms_per_frame_by_role": cpu_by_role(profiles, cpu, n),
        }
        row["beyond_decode_ms_per_frame"] = (
            row["process_cpu_ms_per_frame"] - row["ffmpeg_cpu_ms_per_frame"]
        )
        rounds.append(row)
        roles = ", ".join(f"{k} {v:.3f}" for k, v in row["cpu_ms_per_frame_by_role"].items())
        print(
            f"round {i + 1}: FFmpeg {row['ffmpeg_fps']:.0f} FPS, process {row['process_fps']:.0f} "
            "FPS "
            f"= {row['ratio']:.2f} of decode; process CPU {row['process_cpu_ms_per_frame']:.2f} "
            "ms/frame "
            f"({row['beyond_decode_ms_per_frame']:.2f} beyond FFmpeg's "
            f"{row['ffmpeg_cpu_ms_per_frame']:.2f}; "
            f"per process: {roles}), cores busy {row['cores_busy']:.2f}, loaders {row['loaders']}, "
            f"load {row['load']:.2f}"
        )
    ratios = [r["ratio"] for r in rounds]
    fps = [r["process_fps"] for r in rounds]
    beyond = [r["beyond_decode_ms_per_frame"] for r in rounds]
    result = {
        "host": host,
        "input": str(video),
        "frames": n,
        "process_options": args.process_options,
        "rounds": rounds,
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "beyond_decode_ms_per_frame_median": statistics.median(beyond),
        "beyond_decode_ms_per_frame_range": [min(beyond), max(beyond)],
        "process_fps_median": statistics.median(fps),
        "process_fps_range": [min(fps), max(fps)],
    }
    print(
        f"process: {result['process_fps_median']:.0f} FPS ({min(fps):.0f}–{max(fps):.0f}), "
        f"{result['ratio_median']:.2f} ({min(ratios):.2f}–{max(ratios):.2f}) of FFmpeg's "
        "decode-only rate"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
