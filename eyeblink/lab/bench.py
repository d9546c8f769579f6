"""``eyeblink bench``: end-to-end throughput, latency and memory of the pipeline on this machine.

Modes (each run in a fresh Python process, ``--repeats`` times, so that memory and caches do
not carry over from one mode to the next):

* ``decode``    — decode only (:mod:`eyeblink.sources.files`, gray fast path): the ceiling.
* ``default``   — the multiprocess pipeline with the preset's keyframe policy (``detect_every``).
* ``every``     — the multiprocess pipeline detecting on every frame.
* ``reference`` — the single-process reference (:func:`eyeblink.runtime.pipeline.process_source`),
  every frame.
* ``short``     — many short files in one ``process`` (not in the default set): ``--short-files``
  clips of 0.5-2 s cut from the input's frames (one trial per file, as conditioning labs record),
  processed as ``eyeblink process CLIPS...`` does (the file pool with several workers,
  :mod:`eyeblink.runtime.procs.pool`); FPS over the whole run, models and worker start included, and
  the per-file overhead against ``default``.

Reported per mode: FPS (median and min–max over the repeats; frames / wall time of the run, worker
start-up included), per-stage milliseconds per frame (summed over processes: CPU-side cost, not
wall), p50/p99 latency from a frame's decode to its row being written, the peak of the process
tree's memory (sum of PSS over every process, sampled every 50 ms with
:func:`eyeblink.host.pss_bytes`: shared pages — the dlib model, the frame ring — are counted once;
RSS where the OS keeps no PSS), and the share of the machine's CPU used by *other* processes during
the run (a busy machine makes numbers meaningless; it is printed so that nobody trusts them by
accident).

The input is ``--input VIDEO`` or a synthetic 640x480 gray 500 FPS MJPG recording of
``--frames`` frames (:func:`eyeblink.lab.synth.write_recording`), rendered once and cached.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

from eyeblink.lab import add_command

MODES = ("decode", "default", "every", "reference", "short")
#: The modes run when ``--modes`` is not given (``short`` cuts and encodes clips first: asked for by
#: name).
DEFAULT_MODES = ("decode", "default", "every", "reference")
#: Lengths of the ``short`` mode's clips, seconds, in turn (trials of eyeblink conditioning: 0.5-2
#: s).
SHORT_CLIP_S = (0.5, 0.875, 1.25, 1.625, 2.0)


# --------------------------------------------------------------------------- CLI


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        "bench",
        __doc__,
        help="measure FPS, latency and memory of the pipeline on this machine",
    )
    p.add_argument(
        "--input",
        metavar="VIDEO",
        default=None,
        help="recording to use (default: a cached synthetic 640x480 500 FPS MJPG recording)",
    )
    p.add_argument(
        "--frames",
        type=int,
        default=5000,
        metavar="N",
        help="frames of the synthetic recording, or at most N frames of --input (default 5000)",
    )
    p.add_argument("--repeats", type=int, default=3, metavar="R", help="runs per mode (default 3)")
    p.add_argument(
        "--workers",
        type=_int_list,
        default=None,
        metavar="N[,N...]",
        help="landmark workers of the multiprocess modes; a comma-separated list sweeps them in "
        "one "
        "run, e.g. 1,2,4 (default: physical cores)",
    )
    p.add_argument(
        "--loaders",
        type=int,
        default=1,
        metavar="L",
        help="loader processes decoding the input in ranges (--loaders of `process`; 0 = auto); "
        "the decode-only mode uses as many (default 1)",
    )
    p.add_argument(
        "--detect-every",
        type=int,
        default=None,
        metavar="N",
        help="keyframe interval of the 'default' mode (default: from the preset)",
    )
    p.add_argument(
        "--pipeline", metavar="PRESET", default="cpu", help="device preset (default: cpu)"
    )
    p.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated subset of {', '.join(MODES)} (default: all but short)",
    )
    p.add_argument(
        "--short-files",
        type=int,
        default=40,
        metavar="N",
        help="clips of the 'short' mode: N files of 0.5-2 s cut from the input's frames (default "
        "40)",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where the synthetic recording is cached (default: $XDG_CACHE_HOME/eyeblink or "
        "~/.cache)",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before each run, wait up to S seconds for the machine to be idle (other processes "
        "under 10%% of the CPUs over one second); for shared machines (default: do not wait)",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")
    from eyeblink.lab import bench_detector

    bsub = p.add_subparsers(
        dest="bench_command",
        metavar="WHAT",
        help="what to measure instead of the whole pipeline: `detector`, `landmarks`, `detectors` "
        "(see `eyeblink bench detector -h`, `eyeblink bench landmarks -h`, "
        "`eyeblink bench detectors -h`)",
    )
    d = bsub.add_parser(
        "detector",
        help="the face detector alone, per backend: batch-size sweep, latency sweep, "
        "images/s/W (the paper's experiment)",
        description="Batch-size sweep (run time, images/s, time per image, compile time), "
        "low-latency sweep (batch 1-16) and energy efficiency of each detector backend "
        "on this machine; Markdown and JSON output.",
    )
    bench_detector.add_arguments(d)
    from eyeblink.lab import bench_landmarks

    lm = bsub.add_parser(
        "landmarks",
        help="one eye-model fit, per model, on one core (ms per face on real frames)",
        description=bench_landmarks.__doc__.split("\n\n", 1)[1]
        if bench_landmarks.__doc__
        else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench_landmarks.add_arguments(lm)
    from eyeblink.lab import bench_detectors

    dd = bsub.add_parser(
        "detectors",
        help="the face detectors side by side (BlazeFace short and full range, dlib "
        "HOG, OpenCV Haar, MTCNN): precision/recall, jitter, ms per frame",
        description=bench_detectors.__doc__.split("\n\n", 1)[1]
        if bench_detectors.__doc__
        else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench_detectors.add_arguments(dd)
    return p


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got {text!r}"
        )
    return values


def check_outputs(args: argparse.Namespace) -> None:
    """``--json`` (and ``bench detector --markdown``): writable, not a folder, not the ``--input``
    recording, before anything is measured (see :mod:`eyeblink.outputs.paths`)."""
    from eyeblink.outputs.paths import OutputPlan

    plan = OutputPlan().read(getattr(args, "input", None), "the --input recording")
    plan.write(getattr(args, "json", None), "--json").write(
        getattr(args, "markdown", None), "--markdown"
    ).check()


def run(args: argparse.Namespace) -> int:
    check_outputs(args)  # every bench: an unwritable --json fails now, not after the measurements
    if getattr(args, "bench_command", None) == "detector":
        from eyeblink.lab import bench_detector

        return bench_detector.run(args)
    if getattr(args, "bench_command", None) == "detectors":
        from eyeblink.lab import bench_detectors

        return bench_detectors.run(args, machine_info())
    if getattr(args, "bench_command", None) == "landmarks":
        from eyeblink.lab import bench_landmarks

        bench_landmarks.models(args)  # bad options fail before the recording is rendered
        video = Path(args.input) if args.input else synthetic_recording(args.frames, args.cache_dir)
        return bench_landmarks.run(args, video, machine_info())
    from eyeblink.config import load_preset
    from eyeblink.errors import ConfigError
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.procs.parallel import physical_cores

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ConfigError(
            f"--modes must be a comma-separated subset of {', '.join(MODES)}, got {args.modes!r}"
        )
    if args.frames < 1 or args.repeats < 1:
        raise ConfigError(
            f"--frames and --repeats must be >= 1, got {args.frames} and {args.repeats}"
        )
    if "short" in modes and args.short_files < 2:
        raise ConfigError(f"--short-files must be >= 2, got {args.short_files}")
    cfg = load_preset(resolve_preset(args.pipeline))
    every_n = args.detect_every or cfg.detect.detect_every
    sweep = args.workers if args.workers is not None else [physical_cores()]
    loaders = int(args.loaders)
    video = Path(args.input) if args.input else synthetic_recording(args.frames, args.cache_dir)
    machine = machine_info()
    print(
        f"eyeblink bench: {video} ({args.frames} frames max), {args.repeats} repeats, "
        f"workers {','.join(map(str, sweep))}, loaders {loaders or 'auto'}, "
        f"default policy detect_every={every_n}",
        flush=True,
    )
    print(
        f"machine: {machine['cpu']} [{machine['host_class']}: "
        f"{' '.join(machine['vector']) or 'no AVX'}], "
        f"{machine['logical_cpus']} CPUs ({machine['physical_cores']} physical cores), "
        f"{machine['ram_gb']:.0f} GB RAM, Python {machine['python']}",
        flush=True,
    )
    clips = short_clips(video, args.short_files, args.cache_dir) if "short" in modes else None
    results: dict[str, Any] = {}
    for mode, w in _runs(modes, sweep):
        runs = []
        key = mode if len(sweep) == 1 or mode in ("decode", "reference") else f"{mode}@{w}w"
        for _ in range(args.repeats):
            child = {
                "decode": ["decode", "0", "0"],
                "default": ["parallel", str(w), str(every_n)],
                "every": ["parallel", str(w), "1"],
                "reference": ["reference", "1", "1"],
                "short": ["short", str(w), str(every_n)],
            }[mode]
            if args.wait_quiet > 0:
                wait_quiet(args.wait_quiet)
            source = clips if mode == "short" and clips is not None else video
            runs.append(
                _run_child([*child, str(source), str(args.frames), args.pipeline, str(loaders)])
            )
        results[key] = _aggregate(mode, runs)
        _print_mode(key, results[key])
        long_key = key.replace("short", "default")
        if mode == "short" and long_key in results:
            _print_short(results[key], results[long_key])
    if len(sweep) > 1:
        _print_scaling(results, sweep)
    decode_fps = results.get("decode", {}).get("fps_median")
    if decode_fps and "default" in results:
        results["default"]["fraction_of_decode"] = results["default"]["fps_median"] / decode_fps
        print(
            f"default policy: {100 * results['default']['fraction_of_decode']:.0f}% of "
            "decode-only FPS"
        )
    report = {
        "input": str(video),
        "frames": args.frames,
        "repeats": args.repeats,
        "workers": sweep,
        "loaders": loaders,
        "detect_every_default": every_n,
        "machine": machine,
        "modes": results,
    }
    if args.json:
        from eyeblink.outputs.paths import write_text

        write_text(args.json, json.dumps(report, indent=2) + "\n", "--json")
        print(f"wrote {args.json}")
    return 0


def _print_short(short: dict[str, Any], long: dict[str, Any]) -> None:
    """The ``short`` mode against one long file (``default``): FPS ratio and the per-file
    overhead."""
    files, frames = short["files"], short["frames"]
    overhead_ms = 1000.0 * (frames / short["fps_median"] - frames / long["fps_median"]) / files
    # CPU time (all processes, models loaded in both): the figure that holds on a shared machine
    cpu_overhead_ms = (short["cpu_s_per_frame_ms"] - long["cpu_s_per_frame_ms"]) * frames / files
    short["fraction_of_default"] = short["fps_median"] / long["fps_median"]
    short["overhead_ms_per_file"] = overhead_ms
    short["overhead_cpu_ms_per_file"] = cpu_overhead_ms
    print(
        f"    short: {files} files, {frames} frames: {100 * short['fraction_of_default']:.0f}% of "
        "one long "
        f"file's FPS; per-file overhead {overhead_ms:.0f} ms of wall time, {cpu_overhead_ms:.0f} "
        "ms of CPU",
        flush=True,
    )


# --------------------------------------------------------------------------- inputs and machine


def short_clips(video: Path, count: int, where: str | None = None) -> Path:
    """A folder of ``count`` clips of :data:`SHORT_CLIP_S` seconds each in turn, cut one after the
    other from ``video``'s frames (from its start again when they run out), gray MJPG at ``video``'s
    rate; cached."""
    import av
    import numpy as np

    from eyeblink.sources.files import open_source

    folder = cache_dir(where) / f"short-{video.stem}-{count}"
    if len(list(folder.glob("*.avi"))) == count:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with open_source(video) as src:
        frames = [f.image for f in src]
        fps = src.nominal_fps or 500.0
    if not frames:
        from eyeblink.errors import VideoDecodeError

        raise VideoDecodeError(f"{video} has no frames to cut clips from; give another --input")
    print(
        f"cutting {count} clips of {SHORT_CLIP_S[0]}-{SHORT_CLIP_S[-1]} s from {video} into "
        f"{folder} (once) ...",
        flush=True,
    )
    at = 0
    for k in range(count):
        n = max(1, round(SHORT_CLIP_S[k % len(SHORT_CLIP_S)] * fps))
        path = folder / f"trial{k:04d}.avi"
        with av.open(str(path), "w") as out:
            stream = out.add_stream("mjpeg", rate=round(fps))
            h, w = frames[0].shape[:2]
            stream.width, stream.height, stream.pix_fmt = w, h, "yuvj420p"
            stream.options = {"qscale": "4"}
            for i in range(n):
                img = frames[(at + i) % len(frames)]
                gray = img if img.ndim == 2 else img[..., 0]
                frame = av.VideoFrame.from_ndarray(
                    np.ascontiguousarray(gray), format="gray"
                ).reformat(format="yuvj420p")
                frame.pts = i
                out.mux(stream.encode(frame))
            out.mux(stream.encode())
        at += n
    return folder


def cache_dir(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eyeblink" / "bench"


def synthetic_recording(frames: int, where: str | None = None) -> Path:
    """A cached synthetic demo recording of ``frames`` frames (rendered on first use, ~2
    ms/frame)."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    folder = cache_dir(where)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"synth-demo-{frames}f-seed0.avi"
    if not path.is_file():
        print(f"rendering {frames} synthetic frames into {path} (once) ...", flush=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            part = Path(tmp) / path.name
            write_recording(part, SynthConfig.demo(frames / 500.0))
            part.replace(path)
    return path


def machine_info() -> dict[str, Any]:
    from importlib import metadata

    from eyeblink import host
    from eyeblink.runtime.procs.parallel import physical_cores
    from eyeblink.version import __version__

    cpu = host.cpu_info().get("model name") or platform.processor() or platform.machine()
    ram = (host.memory_total_bytes() or 0) / 2**30
    versions = {"eyeblink": __version__}
    for dist in ("numpy", "av", "dlib-bin", "ai-edge-litert", "opencv-python-headless"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    from eyeblink.runtime.costs import host_info

    cls = host_info()
    return {
        "cpu": cpu,
        "vector": cls["vector"],
        "host_class": cls["class"],
        "logical_cpus": os.cpu_count(),
        "physical_cores": physical_cores(),
        "ram_gb": ram,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


# --------------------------------------------------------------------------- measuring a child run


def tree_pss_bytes(pid: int) -> int:
    """Sum of PSS over ``pid`` and its descendants (shared pages counted once overall); of RSS where
    the OS keeps no PSS (macOS, Windows: shared pages then count in each process)."""
    from eyeblink import host

    return sum(host.pss_bytes(p) or host.rss_bytes(p) or 0 for p in [pid, *host.descendants(pid)])


def _busy_seconds() -> float:
    from eyeblink.host import cpu_busy_seconds

    got = cpu_busy_seconds()
    if got is None:
        raise OSError("the CPUs' busy time cannot be read on this machine")
    return got[0]


def wait_quiet(timeout_s: float, *, threshold: float = 0.10) -> bool:
    """Wait until the CPUs were less than ``threshold`` busy over one second; False on timeout."""
    deadline = time.perf_counter() + timeout_s
    ncpu = os.cpu_count() or 1
    while True:
        b0, t0 = _busy_seconds(), time.perf_counter()
        time.sleep(1.0)
        if (_busy_seconds() - b0) / ((time.perf_counter() - t0) * ncpu) < threshold:
            return True
        if time.perf_counter() > deadline:
            return False


def _run_child(argv: list[str]) -> dict[str, Any]:
    from eyeblink.host import wait_with_cpu

    cmd = [sys.executable, "-m", "eyeblink.lab.bench", "--child", *argv]
    busy0 = _busy_seconds()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_pss_bytes(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        # reaps the child with its CPU time, which includes the grandchildren it joined
        _, ours = wait_with_cpu(proc)
    except KeyboardInterrupt:
        proc.kill()
        raise
    finally:
        done.set()
        sampler.join(timeout=1)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    busy = _busy_seconds() - busy0
    if proc.returncode != 0:
        from eyeblink.errors import WorkerError

        tail = stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise WorkerError(
            f"benchmark run {' '.join(argv[:3])} failed with status {proc.returncode}: {tail[0]}"
        )
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    result["peak_pss_mb"] = peak / 2**20
    result["cpu_s"] = ours
    ncpu = os.cpu_count() or 1
    result["other_cpu_pct"] = max(0.0, 100 * (busy - ours) / (wall * ncpu))
    return result


def _aggregate(mode: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    fps = [r["fps"] for r in runs]
    out: dict[str, Any] = {
        "fps_median": statistics.median(fps),
        "fps_min": min(fps),
        "fps_max": max(fps),
        "fps_runs": fps,
        "frames": runs[0]["frames"],
        "peak_pss_mb": max(r["peak_pss_mb"] for r in runs),
        "other_cpu_pct_max": max(r["other_cpu_pct"] for r in runs),
        "cpu_s_per_frame_ms": statistics.median(
            1000 * r["cpu_s"] / max(r["frames"], 1) for r in runs
        ),
    }
    if runs[0].get("ms_per_frame"):
        keys = runs[0]["ms_per_frame"].keys()
        out["ms_per_frame"] = {
            k: statistics.median(r["ms_per_frame"][k] or 0.0 for r in runs) for k in keys
        }
    for k in ("latency_ms_p50", "latency_ms_p99"):
        vals = [r[k] for r in runs if r.get(k) is not None]
        if vals:
            out[k] = statistics.median(vals)
    for k in ("detector_runs", "redetections_on_drift", "mean_abs_ear_diff", "loaders", "files"):
        if k in runs[0]:
            out[k] = runs[0][k]
    stage = [r["accelerator"] for r in runs if r.get("accelerator")]
    if stage:  # the accelerator stage of the median run (by FPS): one run's consistent numbers
        out["accelerator"] = sorted(zip(fps, stage, strict=False), key=lambda x: x[0])[
            len(stage) // 2
        ][1]
    return out


def _runs(modes: list[str], sweep: list[int]) -> list[tuple[str, int]]:
    """(mode, workers) pairs: decode and reference once, the multiprocess modes once per worker
    count."""
    out = []
    for mode in modes:
        if mode in ("decode", "reference"):
            out.append((mode, 1))
        else:
            out.extend((mode, w) for w in sweep)
    return out


def _print_scaling(results: dict[str, Any], sweep: list[int]) -> None:
    """FPS per worker count against linear scaling from the smallest count, per multiprocess
    mode."""
    for mode in ("default", "every"):
        rows = [
            (w, results[f"{mode}@{w}w"]["fps_median"]) for w in sweep if f"{mode}@{w}w" in results
        ]
        if len(rows) < 2:
            continue
        w0, f0 = rows[0]
        parts = [f"{w}w {f:.0f} FPS ({100 * f / (f0 * w / w0):.0f}% of linear)" for w, f in rows]
        print(f"scaling {mode}: " + ", ".join(parts), flush=True)


def _print_mode(mode: str, r: dict[str, Any]) -> None:
    line = (
        f"{mode:>9}: {r['fps_median']:7.0f} FPS [{r['fps_min']:.0f}–{r['fps_max']:.0f}]  "
        f"{r.get('loaders', 1)} loader(s)  "
        f"peak mem {r['peak_pss_mb']:6.0f} MB  CPU {r['cpu_s_per_frame_ms']:.2f} ms/frame"
    )
    if "latency_ms_p50" in r:
        line += f"  latency p50 {r['latency_ms_p50']:.0f} ms p99 {r['latency_ms_p99']:.0f} ms"
    if "ms_per_frame" in r:
        line += "\n           stages ms/frame: " + ", ".join(
            f"{k} {v:.2f}" for k, v in r["ms_per_frame"].items()
        )
    if "detector_runs" in r:
        line += (
            f"\n           detector runs {r['detector_runs']} "
            f"({r.get('redetections_on_drift', 0)} on drift)"
        )
    acc = r.get("accelerator")
    if acc:  # the accelerator stage: where its time went
        ms = acc["ms_per_frame"]
        line += (
            f"\n           accelerator stage: {acc['processes']} x {acc['backend']} on "
            f"{acc['device']}, "
            f"{acc['batches']} batches of {acc['mean_batch']:.0f} frames "
            f"(batch_size {acc['batch_size']}, largest "
            f"{acc.get('largest_batch', acc['batch_size'])}), "
            f"network {ms['network']:.2f} ms/frame, host {acc['host_ms_per_frame']:.2f} ms/frame, "
            f"compile {acc['warm_up_s']:.1f} s"
        )
    if r["other_cpu_pct_max"] > 10:
        line += (
            f"\n           WARNING: other processes used up to {r['other_cpu_pct_max']:.0f}% "
            "of the CPUs"
        )
    print(line, flush=True)


# --------------------------------------------------------------------------- the child side


def _child(argv: list[str]) -> dict[str, Any]:
    kind, workers, every, video, max_frames, preset, *rest = argv
    loaders = int(rest[0]) if rest else 1
    from dataclasses import replace

    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset
    from eyeblink.sources.files import open_source

    limit = int(max_frames)
    if kind == "decode" and loaders != 1:
        return _decode_ranges(video, limit, loaders, preset)
    if kind == "decode":
        from eyeblink.runtime.procs.sizing import time_decode

        with open_source(video) as src:
            n, wall = time_decode(src, limit)
        return {"frames": n, "fps": n / wall, "ms_per_frame": {"decode": 1000 * wall / n}}
    cfg = load_preset(resolve_preset(preset))
    if kind == "short":
        return _short_run(
            cfg.with_overrides("detect", detect_every=int(every)), Path(video), int(workers)
        )
    cfg = replace(cfg.with_overrides("detect", detect_every=int(every)), max_frames=limit)
    out = Path(tempfile.mkdtemp(prefix="eyeblink-bench-"))
    if kind == "parallel":
        from eyeblink.runtime.procs.parallel import ParallelConfig, ParallelPipeline

        pipe = ParallelPipeline(cfg, ParallelConfig(workers=int(workers), loaders=loaders))
        with open_source(video) as src:
            result = pipe.process_source(src, out)
        s = result.summary
        s["loaders"] = s["parallel"]["loaders"]
    else:
        s = _reference_run(cfg, video, out)
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    t = s["timings"]
    return {
        "frames": s["frames"],
        "fps": t["fps"],
        "ms_per_frame": t["ms_per_frame"],
        "latency_ms_p50": t.get("latency_ms_p50"),
        "latency_ms_p99": t.get("latency_ms_p99"),
        "detector_runs": s["detector_runs"],
        "redetections_on_drift": s["redetections_on_drift"],
        "loaders": s.get("loaders", 1),
        "accelerator": s.get("parallel", {}).get("accelerator"),
        "output": str(out),
    }


def _short_run(cfg: Any, folder: Path, workers: int) -> dict[str, Any]:
    """``eyeblink process`` on every clip of ``folder`` in one run (models, workers and all):
    frames / wall."""
    import shutil

    from eyeblink.runtime.runner import process_paths

    clips = sorted(folder.glob("*.avi"))
    out = Path(tempfile.mkdtemp(prefix="eyeblink-bench-"))
    try:
        t0 = time.perf_counter()
        results, failures = process_paths(clips, out, cfg, workers=workers)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if failures:
        raise failures[0][1]
    frames = sum(r.frames for r in results)
    return {
        "frames": frames,
        "fps": frames / wall,
        "files": len(results),
        "wall_s": wall,
        "detector_runs": sum(r.summary["detector_runs"] for r in results),
    }


def _decode_share(video: str, plan: Any, lid: int, times: Any) -> None:
    """Loader ``lid`` of :func:`_decode_ranges`: its share of ``plan``'s ranges decoded from its own
    open of ``video``; (frames, CPU seconds of the decoding) put on ``times``."""
    from eyeblink.sources.files import open_source
    from eyeblink.sources.ranges import iter_range

    with open_source(video) as src:
        t0, n = time.process_time(), 0
        for rng in plan.ranges[lid :: plan.loaders]:
            for _ in iter_range(src, plan, rng):
                n += 1
    times.put((n, time.process_time() - t0))


def _decode_ranges(video: str, limit: int, loaders: int, preset: str) -> dict[str, Any]:
    """Decode-only with ``loaders`` processes (0: the count ``process`` would choose under
    ``preset``), each decoding its ranges as ``process --loaders`` would."""
    from eyeblink.config import ParallelConfig, load_preset, physical_cores
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.procs.processes import context, resolve_start_method
    from eyeblink.runtime.procs.sizing import choose_loaders, worker_ms_per_frame
    from eyeblink.sources.files import open_source
    from eyeblink.sources.ranges import plan_ranges

    with open_source(video) as src:
        # as `process` asks (only a video file has a fallback rate)
        fps = getattr(src, "fallback_fps", None)
        worker_ms = worker_ms_per_frame(load_preset(resolve_preset(preset)), fps)
        wanted = choose_loaders(
            ParallelConfig(loaders=loaders), physical_cores(), src, worker_ms=worker_ms
        )
        plan = plan_ranges(
            src, wanted, chunk_frames=ParallelConfig().chunk_frames, max_frames=limit
        )
        ctx = context(resolve_start_method())  # the start method of `process` here
        times = ctx.Queue()
        t0 = time.perf_counter()
        procs = [
            ctx.Process(target=_decode_share, args=(video, plan, lid, times))
            for lid in range(plan.loaders)
        ]
        for p in procs:
            p.start()
        parts = [times.get(timeout=600) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        wall = time.perf_counter() - t0
    n = sum(p[0] for p in parts)
    return {
        "frames": n,
        "fps": n / wall,
        "ms_per_frame": {"decode": 1000 * sum(p[1] for p in parts) / n},
        "loaders": plan.loaders,
    }


def _reference_run(cfg: Any, video: str, out: Path) -> dict[str, Any]:
    """The reference path, with decode->row latency taken from a timing source wrapper and the
    progress hook."""
    import numpy as np

    from eyeblink.runtime.pipeline import process_source
    from eyeblink.runtime.runner import build_analyzer
    from eyeblink.sources.files import FrameSource, open_source

    decoded: list[float] = []
    written: list[float] = []

    class Bar:
        def update(self, n: int) -> None:
            written.append(time.perf_counter())

        def close(self) -> None:
            pass

    class Timed:
        def __init__(self, src: Any) -> None:
            self._src = src
            self.path, self.name = src.path, src.name
            self.frame_count_hint = src.frame_count_hint

        def __iter__(self) -> Any:
            for f in self._src:
                decoded.append(time.perf_counter())
                yield f

        def describe(self) -> dict[str, Any]:
            return dict(self._src.describe())

    analyzer = build_analyzer(cfg)
    with open_source(video) as src:
        result = process_source(
            # a stand-in for the source: what process_source reads of it (path, name, the frame
            # count, describe(), the frames)
            cast(FrameSource, Timed(src)),
            out,
            cfg,
            analyzer=analyzer,
            progress=lambda name, total: Bar(),
        )
    n = min(len(decoded), len(written))
    lat = (np.asarray(written[:n]) - np.asarray(decoded[:n])) * 1000
    s = result.summary
    s["timings"]["latency_ms_p50"] = float(np.percentile(lat, 50)) if n else None
    s["timings"]["latency_ms_p99"] = float(np.percentile(lat, 99)) if n else None
    return s


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2:])))
        raise SystemExit(0)
    raise SystemExit("usage: eyeblink bench ... (python -m eyeblink.lab.bench is for internal use)")
