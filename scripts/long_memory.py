"""Memory over long runs: RSS of ``eyeblink process`` on a long 500 FPS file and of ``eyeblink
live`` on a long 500 FPS loopback stream, sampled every few seconds over the whole process tree
(issue 26, item 5).

* ``process``: builds a ``--minutes`` long 640x480 500 FPS MJPEG recording from the project's synth
  renderer (:mod:`eyeblink.lab.synth`: ``--loop-s`` seconds rendered once with the demo's blinks,
  its packets muxed again and again with running timestamps: a real encoded file, no re-encoding),
  in a temporary folder (``--keep DIR`` keeps it), then runs ``eyeblink process`` on it.
* ``live``: a paced 500 FPS sender (:mod:`eyeblink.lab.loopback`, 640x480 rendered frames, looped,
  NUT without syncpoints unless ``--syncpoints``) for ``--minutes``, into ``eyeblink live
  tcp://127.0.0.1:PORT``; the run's own memory watch (``live.memory`` of its summary) and warnings
  are reported beside the script's samples.

Every ``--every`` seconds it sums, over the eyeblink process and all its descendants (workers,
loaders, the stage), the RSS and the PSS (:func:`eyeblink.host.pss_bytes`: shared pages divided
among the processes that share them, so forked workers are not counted twice; Linux only), and each
process's RSS (reported as its growth a minute, by process id: the run's own process has the
lowest). It reports the tree's RSS and PSS at minute 2 and over the last minute, their ratio (issue
target: last minute within 10% of minute 2), the largest sample, and the frames lost: ``process``,
rows written vs frames in the file; ``live``, frames the pipeline dropped and frames sent but never
received.

    python scripts/long_memory.py process --minutes 10 [--landmarks lids] [--json out.json]
    python scripts/long_memory.py live --minutes 5
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from eyeblink import host


def tree(root: int) -> list[int]:
    """``root`` and all its live descendants."""
    return [root, *host.descendants(root)]


def memory(root: int) -> tuple[int, int, int]:
    """(RSS bytes, PSS bytes, processes) of the tree under ``root`` (PSS 0 where the OS keeps
    none)."""
    rss = pss = n = 0
    for pid in tree(root):
        got = host.rss_bytes(pid)
        if got is None:
            continue
        rss += got
        pss += host.pss_bytes(pid) or 0
        n += 1
    return rss, pss, n


def rss_by_process(root: int) -> dict[int, dict[str, int]]:
    """RSS bytes of each process of the tree under ``root``: in all (``rss``) and its parts
    (:func:`eyeblink.host.memory_parts`, Linux only): ``anon`` (the process's own heap), ``shmem``
    (shared memory it has touched: the frame ring), ``file``."""
    out = {}
    for pid in tree(root):
        parts = host.memory_parts(pid)
        if parts is not None:
            out[pid] = parts
    return out


#: (t, {pid: {rss, anon, file, shmem bytes}}) of each sample of the last :func:`watch`: which
#: process grows (the loader, the parent...) and in what (its own heap, or pages of the shared ring
#: touched the first time)
PER_PROCESS: list[tuple[float, dict[int, dict[str, int]]]] = []


def watch(
    proc: subprocess.Popen, every: float, limit_s: float | None = None
) -> list[tuple[float, int, int, int]]:
    """Sample the tree of ``proc`` every ``every`` seconds until it exits; (t, rss, pss,
    processes)."""
    t0 = time.monotonic()
    samples = []
    PER_PROCESS.clear()
    while proc.poll() is None:
        t = time.monotonic() - t0
        samples.append((t, *memory(proc.pid)))
        PER_PROCESS.append((t, rss_by_process(proc.pid)))
        if limit_s is not None and t > limit_s:
            proc.terminate()
        time.sleep(every)
    return samples


def figures(samples: list[tuple[float, int, int, int]]) -> dict:
    """RSS/PSS (MiB) at minute 2 and over the last minute, and their ratio."""
    mib = 1024.0 * 1024.0
    if not samples:
        return {}
    # the run's steady part: every process of the tree up (not the start-up, nor the workers' exit
    # at the end)
    full = max(s[3] for s in samples)
    steady = [s for s in samples if s[3] == full] or samples
    end = steady[-1][0]
    at2 = [s for s in steady if 110 <= s[0] <= 130] or [min(steady, key=lambda s: abs(s[0] - 120))]
    last = [s for s in steady if s[0] >= end - 60] or steady[-1:]
    out: dict = {"wall_s": round(samples[-1][0], 1), "samples": len(samples)}
    for k, name in ((1, "rss"), (2, "pss")):
        a = sum(s[k] for s in at2) / len(at2) / mib
        b = sum(s[k] for s in last) / len(last) / mib
        out[f"{name}_mib_minute2"] = round(a, 1)
        out[f"{name}_mib_last_minute"] = round(b, 1)
        out[f"{name}_ratio"] = round(b / a, 3) if a else None
        out[f"{name}_mib_max"] = round(max(s[k] for s in samples) / mib, 1)
    out["processes"] = full
    # each process's growth over the steady part (MiB a minute): which one grows
    t_first, t_last = steady[0][0], steady[-1][0]
    first = next((d for t, d in PER_PROCESS if t >= t_first), {})
    final = next((d for t, d in reversed(PER_PROCESS) if t <= t_last), {})
    if t_last > t_first:
        minutes = (t_last - t_first) / 60
        out["per_process_rss_mib_per_minute"] = {
            str(pid): {
                k: round((final[pid][k] - first[pid][k]) / mib / minutes, 2)
                for k in ("rss", "anon", "shmem", "file")
            }
            for pid in sorted(first)
            if pid in final
        }
        out["per_process_mib_at_the_end"] = {
            str(pid): {k: round(v / mib, 1) for k, v in final[pid].items()} for pid in sorted(final)
        }

        # the run's own memory (RSS less the shared ring's pages, which each process touches the
        # first time while it runs: bounded by the ring's size): the total anonymous RSS at minute 2
        # and over the last minute
        def anon(t0: float, t1: float) -> float | None:
            xs = [
                sum(d[p]["anon"] for p in d)
                for t, d in PER_PROCESS
                if t0 <= t <= t1 and len(d) == full
            ]
            return round(sum(xs) / len(xs) / mib, 1) if xs else None

        a2, al = anon(110, 130), anon(end - 60, end)
        out["anon_mib_minute2"], out["anon_mib_last_minute"] = a2, al
        out["anon_ratio"] = round(al / a2, 3) if a2 and al else None
    # the trend: mean RSS and PSS (MiB) of each minute of the run
    out["per_minute_rss_pss_mib"] = [
        [round(sum(s[k] for s in m) / len(m) / mib, 1) for k in (1, 2)]
        for m in (
            [s for s in samples if 60 * i <= s[0] < 60 * (i + 1)] for i in range(int(end // 60) + 1)
        )
        if m
    ]
    return out


def build_recording(path: Path, minutes: float, loop_s: float, qscale: int) -> int:
    """A ``minutes`` long 500 FPS MJPEG AVI: ``loop_s`` rendered once, its packets muxed again
    with running PTS."""
    import av

    from eyeblink.lab.synth import SynthConfig, write_recording

    cfg = SynthConfig.demo(duration_s=loop_s, mjpeg_qscale=qscale, seed=7)
    loop = path.with_name("loop.avi")
    write_recording(loop, cfg)
    per_loop = cfg.n_frames
    total = round(minutes * 60 * cfg.fps)
    n = 0
    with av.open(str(loop)) as src, av.open(str(path), mode="w") as out:
        s_in = src.streams.video[0]
        packets = [bytes(p) for p in src.demux(s_in) if p.size]
        rate = Fraction(cfg.frame_rate)
        s_out = out.add_stream("mjpeg", rate=rate)
        s_out.width, s_out.height, s_out.pix_fmt = cfg.width, cfg.height, "yuvj420p"
        s_out.time_base = 1 / rate
        while n < total:
            pkt = av.Packet(packets[n % per_loop])
            pkt.stream = s_out
            pkt.pts = pkt.dts = n
            pkt.time_base = 1 / rate
            pkt.is_keyframe = True
            out.mux(pkt)
            n += 1
    loop.unlink()
    return n


def run_process(args: argparse.Namespace, work: Path) -> dict:
    video = work / "long.avi"
    t0 = time.monotonic()
    frames = build_recording(video, args.minutes, args.loop_s, args.qscale)
    built_s = time.monotonic() - t0
    print(
        f"process: {frames} frames ({frames / 500 / 60:.1f} min at 500 FPS), "
        f"{video.stat().st_size / 1e9:.2f} GB, built in {built_s:.0f} s",
        flush=True,
    )
    out = work / "out"
    cmd = [
        sys.executable,
        "-m",
        "eyeblink",
        "process",
        str(video),
        "-o",
        str(out),
        "--no-progress",
        *args.extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = watch(proc, args.every, args.limit_s)
    err = proc.stderr.read() if proc.stderr else ""
    summary = (
        json.loads((out / "long.summary.json").read_text())
        if (out / "long.summary.json").is_file()
        else {}
    )
    with (out / "long.frames.csv").open("rb") as fh:
        rows = sum(1 for _ in fh) - 1
    res = {
        "command": " ".join(cmd[2:]),
        "exit": proc.returncode,
        "status": summary.get("status"),
        "frames_in_file": frames,
        "rows": rows,
        "frames_lost": frames - rows,
        "recording_minutes": round(frames / 500 / 60, 2),
        "blinks": summary.get("blinks"),
        **figures(samples),
        "stderr_tail": err[-500:],
    }
    res["frames_per_s"] = round(rows / res["wall_s"], 1) if res.get("wall_s") else None
    return res


def run_live(args: argparse.Namespace, work: Path) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    duration = args.minutes * 60
    sender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.loopback",
            "--port",
            str(port),
            "--fps",
            "500",
            "--duration",
            str(duration),
            "--distinct",
            str(args.distinct),
            *(["--syncpoints"] if args.syncpoints else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert sender.stdout is not None and sender.stdout.readline().strip() == "listening"
    out = work / "live"
    cmd = [
        sys.executable,
        "-m",
        "eyeblink",
        "live",
        f"tcp://127.0.0.1:{port}",
        "-o",
        str(out),
        "--name",
        "long",
        *args.extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = watch(proc, args.every, duration + 120)
    err = proc.stderr.read() if proc.stderr else ""
    _, sent_err = sender.communicate(timeout=60)
    sent = next((int(w.split()[1]) for w in sent_err.splitlines() if w.startswith("sent ")), None)
    summary = (
        json.loads((out / "long.summary.json").read_text())
        if (out / "long.summary.json").is_file()
        else {}
    )
    live = summary.get("live") or {}
    received = live.get("frames_in")
    return {
        "command": " ".join(cmd[2:]),
        "exit": proc.returncode,
        "status": summary.get("status"),
        "stream_minutes": args.minutes,
        "frames_sent": sent,
        "frames_in": received,
        "frames_dropped": live.get("frames_dropped"),
        "frames_never_received": (sent - received)
        if sent is not None and received is not None
        else None,
        "eye_model": live.get("landmarks_model"),
        "blinks": summary.get("blinks"),
        "sender_syncpoints": args.syncpoints,
        "run_memory": live.get("memory"),
        "warnings": summary.get("warnings"),
        **figures(samples),
        "stderr_tail": err[-500:],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("process", "live"))
    ap.add_argument(
        "--minutes", type=float, default=20.0, help="length of the recording / stream (default 20)"
    )
    ap.add_argument("--every", type=float, default=5.0, help="seconds between memory samples")
    ap.add_argument(
        "--loop-s", type=float, default=10.0, help="process: seconds rendered and looped"
    )
    ap.add_argument(
        "--qscale", type=int, default=6, help="process: MJPEG quantiser of the recording"
    )
    ap.add_argument(
        "--distinct", type=int, default=500, help="live: distinct frames the sender loops"
    )
    ap.add_argument(
        "--syncpoints",
        action="store_true",
        help="live: the sender writes NUT syncpoints (a default `ffmpeg -f nut`; the loader then "
        "grows)",
    )
    ap.add_argument(
        "--limit-s",
        type=float,
        default=None,
        help="process: stop it (SIGTERM) after this many seconds",
    )
    ap.add_argument(
        "--keep", type=Path, default=None, help="work here and keep the recording and outputs"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    # options for eyeblink process/live, after --: e.g. -- --landmarks lids
    args.extra = argv[cut + 1 :]
    load = host.load_average()
    with tempfile.TemporaryDirectory(prefix="eyeblink-long-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        res = run_process(args, work) if args.mode == "process" else run_live(args, work)
    res["loadavg_before"], res["loadavg_after"], res["cores"] = (
        load,
        host.load_average(),
        os.cpu_count(),
    )
    print(json.dumps(res, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
