"""``eyeblink bench detector``: the paper's BlazeFace experiment on whatever device is present.

For each backend asked for (default: the preset's, e.g. ``litert`` on ``cpu``, ``tensorflow``
on ``gpu``, ``ipu`` on ``ipu-mk2``) it measures, with letterboxed real frames (scikit-image's
astronaut, jittered so no two images are identical):

* **batch-size sweep** — for each batch size: compile time (first call, i.e. trace + XLA/Poplar
  compile + one run; ~0 on LiteRT), run time for ``--images`` images after warm-up, throughput
  (images/s) and time per image. Batches go through the backend's streaming path when it has
  one (TensorFlow: ``tf.data`` with prefetch), else through ``detect`` in a loop.
* **low-latency sweep** — batch 1 to 16: median (and p90) latency of one synchronous
  ``detect`` call, and time per image.
* **energy efficiency** — images/s/W from the mean power during each throughput run:
  ``nvidia-smi`` on NVIDIA GPUs, ``gc-monitor`` on Graphcore IPUs, RAPL
  (``/sys/class/powercap/intel-rapl*/energy_uj``, CPU package energy) where readable; else "n/a".
  Power is the whole device's (the whole CPU package for RAPL), not this process's share.

Output: a Markdown report on stdout (or ``--markdown FILE``) and ``--json FILE``. Defaults are
short (``--quick``: few batch sizes, 256 images per point, one repeat) so the command is safe on
a shared machine; ``--full`` runs the paper's sweep (batch 1..512, 2048 images, 3 repeats).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

QUICK_SWEEP = (1, 8, 64)
FULL_SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
QUICK_LATENCY = (1, 4, 16)
FULL_LATENCY = tuple(range(1, 17))


# --------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``eyeblink bench detector`` (add to a (sub)parser)."""
    parser.add_argument("--pipeline", metavar="PRESET", default="cpu",
                        help="device preset whose detector settings are used (default: %(default)s)")
    parser.add_argument("--backends", metavar="NAMES", default=None,
                        help="comma-separated backends to compare, e.g. litert,tensorflow "
                             "(default: the preset's backend)")
    parser.add_argument("--batch-sizes", metavar="LIST", default=None,
                        help=f"batch sizes of the throughput sweep (quick: {','.join(map(str, QUICK_SWEEP))}; "
                             f"full: 1..512 in powers of two)")
    parser.add_argument("--latency-batches", metavar="LIST", default=None,
                        help="batch sizes of the low-latency sweep (quick: 1,4,16; full: 1..16); 'none' to skip")
    parser.add_argument("--images", type=int, default=None, metavar="N",
                        help="images per throughput point (quick: 256, full: 2048)")
    parser.add_argument("--repeats", type=int, default=None, metavar="R",
                        help="repeats per point, the median is reported (quick: 1, full: 3)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="CPU threads of the backend (default: the preset's)")
    parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=None,
                        help="compile with XLA (tensorflow, ipu backends); default: the preset's jit_compile")
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", dest="full", action="store_false", help="short sweep (default)")
    speed.add_argument("--full", dest="full", action="store_true", help="the paper's full sweep")
    parser.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")
    parser.add_argument("--markdown", metavar="FILE", default=None,
                        help="write the Markdown report here instead of stdout")
    parser.set_defaults(full=False)
    return parser


def _int_list(text: str | None, default: tuple[int, ...], what: str) -> tuple[int, ...]:
    from eyeblink.errors import ConfigError

    if text is None:
        return default
    if text.strip().lower() in ("none", ""):
        return ()
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"{what} must be comma-separated whole numbers, got {text!r}") from None
    if any(v < 1 for v in values):
        raise ConfigError(f"{what} must all be >= 1, got {text!r}")
    return values


# --------------------------------------------------------------------------- power


@dataclass
class PowerReading:
    source: str  # "nvidia-smi", "gc-monitor", "rapl" or "n/a"
    mean_w: float | None
    samples: int = 0


class PowerMeter:
    """Mean device power over a measurement; see the module docstring for the sources."""

    def __init__(self, device_kind: str) -> None:
        self.device_kind = device_kind
        self.source = "n/a"
        self._rapl: list[tuple[Path, int]] = []
        if device_kind == "gpu" and shutil.which("nvidia-smi"):
            self.source = "nvidia-smi"
        elif device_kind == "ipu" and shutil.which("gc-monitor"):
            self.source = "gc-monitor"
        elif device_kind == "cpu":
            self._rapl = _rapl_domains()
            if self._rapl:
                self.source = "rapl"

    @contextlib.contextmanager
    def measure(self) -> Iterator[PowerReading]:
        reading = PowerReading(self.source, None)
        if self.source == "rapl":
            start = [(_read_int(p), rng) for p, rng in self._rapl]
            t0 = time.perf_counter()
            yield reading
            dt = time.perf_counter() - t0
            joules = 0.0
            for (p, rng), (e0, _) in zip(self._rapl, start, strict=True):
                e1 = _read_int(p)
                joules += ((e1 - e0) % rng if rng else e1 - e0) / 1e6
            reading.mean_w = joules / dt if dt > 0 else None
            reading.samples = 2
            return
        if self.source in ("nvidia-smi", "gc-monitor"):
            samples: list[float] = []
            stop = threading.Event()
            poll = _nvidia_power if self.source == "nvidia-smi" else _gc_monitor_power

            def loop() -> None:
                while not stop.is_set():
                    w = poll()
                    if w is not None:
                        samples.append(w)
                    stop.wait(0.1)

            thread = threading.Thread(target=loop, daemon=True)
            thread.start()
            try:
                yield reading
            finally:
                stop.set()
                thread.join(5)
            reading.samples = len(samples)
            reading.mean_w = statistics.fmean(samples) if samples else None
            return
        yield reading


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def _rapl_domains() -> list[tuple[Path, int]]:
    """Top-level RAPL package domains whose counters this user can read."""
    out = []
    for d in sorted(Path("/sys/class/powercap").glob("intel-rapl:*")):
        if d.name.count(":") != 1:  # sub-domains (core, uncore, dram) are inside the package
            continue
        energy = d / "energy_uj"
        try:
            _read_int(energy)
            rng = _read_int(d / "max_energy_range_uj") if (d / "max_energy_range_uj").exists() else 0
        except (OSError, ValueError):
            continue
        out.append((energy, rng))
    return out


def _run_text(cmd: list[str]) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _nvidia_power() -> float | None:
    text = _run_text(["nvidia-smi", "--query-gpu=power.draw", "--format=csv,noheader,nounits", "--id=0"])
    try:
        return float(text.strip().splitlines()[0]) if text else None
    except (ValueError, IndexError):
        return None


_WATTS = re.compile(r"(\d+(?:\.\d+)?)\s?W\b")


def _gc_monitor_power() -> float | None:
    """Sum of the per-IPU power column of ``gc-monitor`` (best effort: the table format varies)."""
    text = _run_text(["gc-monitor"])
    if not text:
        return None
    watts = [float(m.group(1)) for line in text.splitlines() if "|" in line for m in _WATTS.finditer(line)]
    return sum(watts) if watts else None


# --------------------------------------------------------------------------- measurement


@dataclass
class SweepPoint:
    backend: str
    batch_size: int
    images: int
    compile_s: float
    run_s: float
    images_per_s: float
    ms_per_image: float
    power_source: str
    mean_power_w: float | None
    images_per_s_per_w: float | None


@dataclass
class LatencyPoint:
    backend: str
    batch_size: int
    calls: int
    latency_ms_p50: float
    latency_ms_p90: float
    ms_per_image: float


@dataclass
class Report:
    device: dict[str, Any]
    settings: dict[str, Any]
    sweep: list[SweepPoint] = field(default_factory=list)
    latency: list[LatencyPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def make_images(n: int = 64, seed: int = 0) -> np.ndarray:
    """``n`` distinct letterboxed 128x128 frames (the astronaut photo with mild noise and shifts)."""
    from skimage import data

    from eyeblink.detect.blazeface import letterbox

    base, _ = letterbox(data.astronaut())
    rng = np.random.default_rng(seed)
    out = np.empty((n, *base.shape), np.float32)
    for i in range(n):
        shifted = np.roll(base, (int(rng.integers(-6, 7)), int(rng.integers(-6, 7))), axis=(0, 1))
        out[i] = np.clip(shifted + rng.normal(0.0, 0.02, base.shape), -1.0, 1.0)
    return out


def _batches(pool: np.ndarray, batch_size: int, count: int) -> Iterator[np.ndarray]:
    n = pool.shape[0]
    for k in range(count):
        idx = (np.arange(batch_size) + k * batch_size) % n
        yield pool[idx]


def _device_kind(backend: str, detector: Any) -> str:
    if backend == "ipu":
        return "ipu"
    device = str(getattr(detector, "device", "")).upper()
    return "gpu" if "GPU" in device else "cpu"


def _sweep_point(name: str, factory: Callable[[int], Any], pool: np.ndarray, batch: int, images: int,
                 repeats: int, meters: dict[str, PowerMeter]) -> SweepPoint:
    detector = factory(batch)
    try:
        t0 = time.perf_counter()
        detector.detect(pool[np.arange(batch) % pool.shape[0]])
        compile_s = time.perf_counter() - t0
        detector.detect(pool[np.arange(batch) % pool.shape[0]])  # steady state
        kind = _device_kind(name, detector)
        meter = meters.setdefault(kind, PowerMeter(kind))
        count = max(1, -(-images // batch))
        runs: list[tuple[float, PowerReading]] = []
        for _ in range(repeats):
            stream = getattr(detector, "detect_stream", None)
            with meter.measure() as power:
                t0 = time.perf_counter()
                if stream is not None:
                    for _out in stream(_batches(pool, batch, count)):
                        pass
                else:
                    for x in _batches(pool, batch, count):
                        detector.detect(x)
                dt = time.perf_counter() - t0
            runs.append((dt, power))
        runs.sort(key=lambda r: r[0])
        dt, power = runs[len(runs) // 2]
    finally:
        detector.close()
    n_images = count * batch
    ips = n_images / dt
    eff = ips / power.mean_w if power.mean_w else None
    return SweepPoint(name, batch, n_images, round(compile_s, 4), round(dt, 4), round(ips, 1),
                      round(1000 * dt / n_images, 4), power.source, None if power.mean_w is None
                      else round(power.mean_w, 2), None if eff is None else round(eff, 3))


def _latency_point(name: str, detector: Any, pool: np.ndarray, batch: int, calls: int) -> LatencyPoint:
    x = pool[np.arange(batch) % pool.shape[0]]
    detector.detect(x)  # compile this shape
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        detector.detect(x)
        times.append(time.perf_counter() - t0)
    p50 = float(np.percentile(times, 50)) * 1000
    p90 = float(np.percentile(times, 90)) * 1000
    return LatencyPoint(name, batch, calls, round(p50, 4), round(p90, 4), round(p50 / batch, 4))


def run_benchmark(args: argparse.Namespace, progress: Callable[[str], None] | None = None) -> Report:
    """Run the sweeps described by ``args`` (see :func:`add_arguments`) and return the report."""
    from eyeblink.config import load_preset
    from eyeblink.detect import create_detector
    from eyeblink.presets import resolve_preset

    cfg = load_preset(resolve_preset(args.pipeline)).detect
    backends = [b.strip() for b in (args.backends or cfg.backend).split(",") if b.strip()]
    sweep = _int_list(args.batch_sizes, FULL_SWEEP if args.full else QUICK_SWEEP, "--batch-sizes")
    lat = _int_list(args.latency_batches, FULL_LATENCY if args.full else QUICK_LATENCY, "--latency-batches")
    images = args.images or (2048 if args.full else 256)
    repeats = args.repeats or (3 if args.full else 1)
    threads = args.threads or cfg.num_threads
    accel = cfg.accelerator()
    if args.jit is not None:
        from dataclasses import replace

        accel = replace(accel, jit_compile=bool(args.jit))
    say = progress or (lambda _msg: None)

    report = Report(
        device={"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
        settings={"pipeline": args.pipeline, "backends": backends, "batch_sizes": list(sweep),
                  "latency_batches": list(lat), "images_per_point": images, "repeats": repeats,
                  "threads": threads, "jit_compile": accel.jit_compile, "prefetch_depth": accel.prefetch_depth,
                  "io_tiles": accel.io_tiles, "replicas": accel.replicas},
    )
    pool = make_images()
    meters: dict[str, PowerMeter] = {}
    for name in backends:
        def factory(batch: int, name: str = name) -> Any:
            return create_detector(name, num_threads=threads, batch_size=batch, accelerator=accel)

        probe = factory(1)  # fails early, with the registry's message, if the backend is unavailable
        kind = _device_kind(name, probe)
        report.device[f"{name}_device"] = str(getattr(probe, "device", kind))
        probe.close()
        for batch in sweep:
            say(f"{name}: batch {batch} ...")
            report.sweep.append(_sweep_point(name, factory, pool, batch, images, repeats, meters))
        if lat:
            detector = factory(max(lat))
            try:
                for batch in lat:
                    say(f"{name}: latency, batch {batch} ...")
                    report.latency.append(_latency_point(name, detector, pool, batch, calls=20 if args.full else 10))
            finally:
                detector.close()
    for kind, meter in meters.items():
        if meter.source == "n/a":
            report.notes.append(f"energy efficiency on {kind}: n/a (no readable power source: nvidia-smi for "
                                "NVIDIA GPUs, gc-monitor for IPUs, /sys/class/powercap/intel-rapl*/energy_uj for CPUs)")
        elif meter.source == "rapl":
            report.notes.append("CPU power is the RAPL package energy over the run: the whole package, "
                                "including other processes")
    return report


# --------------------------------------------------------------------------- output


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def to_markdown(report: Report) -> str:
    lines = ["# BlazeFace detector benchmark", ""]
    dev = ", ".join(f"{k}: {v}" for k, v in report.device.items())
    lines += [f"Device: {dev}", "",
              "Settings: " + ", ".join(f"{k}={v}" for k, v in report.settings.items()), ""]
    if report.sweep:
        lines += ["## Batch-size sweep (throughput)", "",
                  "| backend | batch | images | compile (s) | run (s) | images/s | ms/image | power (W) | images/s/W |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for p in report.sweep:
            power = "n/a" if p.mean_power_w is None else f"{p.mean_power_w:.1f} ({p.power_source})"
            lines.append(f"| {p.backend} | {p.batch_size} | {p.images} | {_fmt(p.compile_s)} | {_fmt(p.run_s)} | "
                         f"{_fmt(p.images_per_s)} | {_fmt(p.ms_per_image)} | {power} | {_fmt(p.images_per_s_per_w)} |")
        lines.append("")
    if report.latency:
        lines += ["## Low-latency sweep (one synchronous call)", "",
                  "| backend | batch | latency p50 (ms) | latency p90 (ms) | ms/image |",
                  "|---|---:|---:|---:|---:|"]
        for q in report.latency:
            lines.append(f"| {q.backend} | {q.batch_size} | {_fmt(q.latency_ms_p50)} | {_fmt(q.latency_ms_p90)} | "
                         f"{_fmt(q.ms_per_image)} |")
        lines.append("")
    for note in report.notes:
        lines.append(f"- {note}")
    return "\n".join(lines).rstrip() + "\n"


def run(args: argparse.Namespace) -> int:
    """Entry point of ``eyeblink bench detector``; returns the exit status."""
    import sys

    report = run_benchmark(args, progress=lambda m: print(m, file=sys.stderr, flush=True))
    text = to_markdown(report)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m eyeblink.lab.bench_detector`` (until it is wired as ``eyeblink bench detector``)."""
    from eyeblink.errors import EyeblinkError

    parser = add_arguments(argparse.ArgumentParser(prog="eyeblink bench detector", description=__doc__,
                                                   formatter_class=argparse.RawDescriptionHelpFormatter))
    args = parser.parse_args(argv)
    try:
        return run(args)
    except EyeblinkError as exc:
        import sys

        print(f"eyeblink: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
