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
    parser.add_argument(
        "--pipeline",
        metavar="PRESET",
        default="cpu",
        help="device preset whose detector settings are used (default: %(default)s)",
    )
    parser.add_argument(
        "--backends",
        "--backend",
        dest="backends",
        metavar="NAMES",
        default=None,
        help="comma-separated backends to compare, e.g. litert,tensorflow,jax "
        "(default: the preset's backend); tensorflow and jax each run in a process "
        "of their own when both are asked for (Keras holds one backend per process)",
    )
    parser.add_argument(
        "--network",
        choices=("blazeface", "mesh", "iris"),
        default="blazeface",
        help="network to measure: BlazeFace (default), the face mesh or the iris network "
        "(mesh/iris: litert, tensorflow, jax backends; real crops of the eye model)",
    )
    parser.add_argument(
        "--batch-sizes",
        metavar="LIST",
        default=None,
        help=f"batch sizes of the throughput sweep (quick: {','.join(map(str, QUICK_SWEEP))}; "
        f"full: 1..512 in powers of two)",
    )
    parser.add_argument(
        "--latency-batches",
        metavar="LIST",
        default=None,
        help="batch sizes of the low-latency sweep (quick: 1,4,16; full: 1..16); 'none' to skip",
    )
    parser.add_argument(
        "--images",
        type=int,
        default=None,
        metavar="N",
        help="images per throughput point (quick: 256, full: 2048)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="R",
        help="repeats per point, the median is reported (quick: 1, full: 3)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads of the backend (default: the preset's)",
    )
    parser.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compile with XLA (tensorflow, ipu backends); default: the preset's jit_compile",
    )
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", dest="full", action="store_false", help="short sweep (default)")
    speed.add_argument("--full", dest="full", action="store_true", help="the paper's full sweep")
    parser.add_argument(
        "--json", metavar="FILE", default=None, help="also write the results as JSON"
    )
    parser.add_argument(
        "--markdown",
        metavar="FILE",
        default=None,
        help="write the Markdown report here instead of stdout",
    )
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
            rng = (
                _read_int(d / "max_energy_range_uj") if (d / "max_energy_range_uj").exists() else 0
            )
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
    text = _run_text(
        ["nvidia-smi", "--query-gpu=power.draw", "--format=csv,noheader,nounits", "--id=0"]
    )
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
    watts = [
        float(m.group(1))
        for line in text.splitlines()
        if "|" in line
        for m in _WATTS.finditer(line)
    ]
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
    """``n`` distinct letterboxed 128x128 frames (the astronaut photo with mild noise and
    shifts)."""
    from skimage import data

    from eyeblink.detect.blazeface import letterbox

    base, _ = letterbox(data.astronaut())
    rng = np.random.default_rng(seed)
    out = np.empty((n, *base.shape), np.float32)
    for i in range(n):
        shifted = np.roll(base, (int(rng.integers(-6, 7)), int(rng.integers(-6, 7))), axis=(0, 1))
        out[i] = np.clip(shifted + rng.normal(0.0, 0.02, base.shape), -1.0, 1.0)
    return out


def network_inputs(network: str, n: int = 64, seed: int = 0) -> np.ndarray:
    """``n`` distinct real inputs of ``network`` (:data:`eyeblink.detect.keras_graph.NETWORKS`).

    ``blazeface``: :func:`make_images`. ``mesh`` / ``iris``: the crops the eye model feeds them
    (``MeshFitter.face_roi`` / its eye-corner square, RGB in [0, 1]) from the astronaut photo, the
    astronaut rolled by 20 degrees and frames of the synthetic 500 FPS recording (open, half and
    fully closed lids), faces found by BlazeFace on LiteRT; cycled with mild gain changes so that
    no two repeat exactly.
    """
    if network == "blazeface":
        return make_images(n, seed)
    import math

    import cv2
    from skimage import data

    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.lab.synth import render_frame
    from eyeblink.landmarks.mesh import (
        EYE_ROI_SCALE,
        IRIS_INPUT,
        MESH_EYE_CORNERS,
        MESH_INPUT,
        MeshFitter,
        square_roi,
        warp,
    )

    gray = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    h, w = gray.shape
    frames = [gray, cv2.warpAffine(gray, cv2.getRotationMatrix2D((w / 2, h / 2), 20, 1.0), (w, h))]
    rng = np.random.default_rng(3)
    frames += [render_frame(t, c, c, rng) for t, c in [(0.0, 0.0), (0.31, 0.5), (0.77, 1.0)]]
    crops = []
    with (
        FaceDetector.from_detector(create_detector("litert")) as detector,
        MeshFitter(refine=False) as fitter,
    ):
        for frame in frames:
            faces = detector.detect(frame)
            if not faces:
                continue
            roi = fitter.face_roi(faces[0])
            if network == "mesh":
                crops.append(warp(frame, roi, MESH_INPUT)[0])
                continue
            mesh = fitter.mesh(frame, roi)
            for (a, b), mirror in zip(MESH_EYE_CORNERS, (False, True), strict=True):
                c0, c1 = mesh[a], mesh[b]
                d = c1 - c0
                m = square_roi(
                    float((c0[0] + c1[0]) / 2),
                    float((c0[1] + c1[1]) / 2),
                    float(np.hypot(*d)) * EYE_ROI_SCALE,
                    math.atan2(d[1], d[0]),
                    IRIS_INPUT,
                )
                crops.append(warp(frame, m, IRIS_INPUT, mirror=mirror)[0])
    if not crops:  # pragma: no cover - BlazeFace finds the astronaut (tests/test_mesh.py)
        raise RuntimeError("no face found in the reference images")
    base = np.stack(crops)
    idx = np.arange(n) % base.shape[0]
    gain = np.linspace(0.85, 1.0, n, dtype=np.float32)[:, None, None, None]
    return np.clip(base[idx] * gain, 0.0, 1.0).astype(np.float32)


class LiteRTNetwork:
    """A ``.tflite`` network on LiteRT (XNNPACK) with its input resized to the batch: the CPU
    reference the Keras rebuilds are measured (and tested) against. ``detect(x)`` returns every
    output, ordered like the Keras model's (by values per image, largest first)."""

    def __init__(self, path: Path, batch_size: int, num_threads: int = 1) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self._it = Interpreter(model_path=str(path), num_threads=num_threads)
        inp = self._it.get_input_details()[0]
        self._in = inp["index"]
        self.batch_size = batch_size
        self._it.resize_tensor_input(self._in, [batch_size, *inp["shape"][1:]])
        self._it.allocate_tensors()
        outs = self._it.get_output_details()
        self._outs = [d["index"] for d in sorted(outs, key=lambda d: -int(np.prod(d["shape"][1:])))]
        self.device = "cpu (LiteRT)"

    def detect(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        results = []
        for start in range(0, x.shape[0], self.batch_size):
            chunk = x[start : start + self.batch_size]
            n = chunk.shape[0]
            if n < self.batch_size:
                chunk = np.concatenate(
                    [chunk, np.zeros((self.batch_size - n, *chunk.shape[1:]), np.float32)]
                )
            self._it.set_tensor(self._in, np.ascontiguousarray(chunk))
            self._it.invoke()
            results.append(
                [self._it.get_tensor(i).reshape(self.batch_size, -1)[:n].copy() for i in self._outs]
            )
        return tuple(np.concatenate([r[k] for r in results]) for k in range(len(self._outs)))

    def close(self) -> None:
        self._it = None


class _Network:
    """A compiled Keras network (:class:`~eyeblink.detect.keras_graph.BucketedRunner`) as the
    bench runs it."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.device = runner.device

    def detect(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        return self.runner.run(x)

    def close(self) -> None:
        self.runner = None


def network_factory(
    network: str, backend: str, *, threads: int, accelerator: Any
) -> Callable[[int], Any]:
    """``batch size -> object with detect(x)/close()/device`` running ``network`` on ``backend``."""
    from eyeblink.detect import BackendName, create_detector
    from eyeblink.errors import ConfigError

    if network == "blazeface":
        return lambda batch: create_detector(
            backend, num_threads=threads, batch_size=batch, accelerator=accelerator
        )
    from eyeblink.detect.keras_graph import NETWORKS

    spec = NETWORKS[network]
    name = BackendName(backend) if backend in {b.value for b in BackendName} else None
    if name is BackendName.LITERT:
        path = spec.default_path()
        return lambda batch: LiteRTNetwork(path, batch, threads)
    if name is BackendName.TENSORFLOW:
        from eyeblink.detect import backend_installed

        if not backend_installed(name):
            # raises the registry's BackendUnavailableError naming the install
            create_detector(name)
        from eyeblink.detect.tensorflow import configure_threads, keras_network

        configure_threads(threads)
        return lambda batch: _Network(
            keras_network(network, batch_size=batch, jit_compile=accelerator.jit_compile)
        )
    if name is BackendName.JAX:
        from eyeblink.detect import backend_installed

        if not backend_installed(name):
            create_detector(name)
        from eyeblink.detect.jax import jax_network

        return lambda batch: _Network(jax_network(network, batch_size=batch))
    raise ConfigError(f"--network {network} runs on litert, tensorflow or jax, not {backend!r}")


def _batches(pool: np.ndarray, batch_size: int, count: int) -> Iterator[np.ndarray]:
    n = pool.shape[0]
    for k in range(count):
        idx = (np.arange(batch_size) + k * batch_size) % n
        yield pool[idx]


def _device_kind(backend: str, detector: Any) -> str:
    if backend == "ipu":
        return "ipu"
    device = str(getattr(detector, "device", "")).upper()
    return "gpu" if "GPU" in device or "CUDA" in device else "cpu"


def _sweep_point(
    name: str,
    factory: Callable[[int], Any],
    pool: np.ndarray,
    batch: int,
    images: int,
    repeats: int,
    meters: dict[str, PowerMeter],
) -> SweepPoint:
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
    return SweepPoint(
        name,
        batch,
        n_images,
        round(compile_s, 4),
        round(dt, 4),
        round(ips, 1),
        round(1000 * dt / n_images, 4),
        power.source,
        None if power.mean_w is None else round(power.mean_w, 2),
        None if eff is None else round(eff, 3),
    )


def _latency_point(
    name: str, detector: Any, pool: np.ndarray, batch: int, calls: int
) -> LatencyPoint:
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


#: Detector backends that run Keras: a process holds one of them (``KERAS_BACKEND``).
KERAS_BACKENDS = ("tensorflow", "jax")


def _run_in_child(
    args: argparse.Namespace,
    backend: str,
    sweep: tuple[int, ...],
    lat: tuple[int, ...],
    images: int,
    repeats: int,
    threads: int,
    jit: bool,
) -> dict[str, Any]:
    """The same benchmark for ``backend`` alone, in a fresh Python process; its JSON report."""
    import sys
    import tempfile

    from eyeblink.errors import BackendUnavailableError

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "child.json"
        argv = [
            sys.executable,
            "-m",
            "eyeblink.lab.bench_detector",
            "--pipeline",
            args.pipeline,
            "--network",
            getattr(args, "network", "blazeface"),
            "--backends",
            backend,
            "--batch-sizes",
            ",".join(map(str, sweep)) or "none",
            "--latency-batches",
            ",".join(map(str, lat)) or "none",
            "--images",
            str(images),
            "--repeats",
            str(repeats),
            "--threads",
            str(threads),
            "--jit" if jit else "--no-jit",
            "--json",
            str(out),
            "--markdown",
            str(Path(tmp) / "child.md"),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0 or not out.is_file():
            lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("eyeblink: error:")]
            why = (
                lines[-1].removeprefix("eyeblink: error:").strip()
                if lines
                else f"exit status {proc.returncode}"
            )
            raise BackendUnavailableError(f"the {backend} benchmark process failed: {why}")
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def _merge(report: Report, child: dict[str, Any]) -> None:
    report.sweep += [SweepPoint(**p) for p in child.get("sweep", [])]
    report.latency += [LatencyPoint(**q) for q in child.get("latency", [])]
    report.device.update(
        {k: v for k, v in child.get("device", {}).items() if k.endswith("_device")}
    )


def run_benchmark(
    args: argparse.Namespace, progress: Callable[[str], None] | None = None
) -> Report:
    """Run the sweeps described by ``args`` (see :func:`add_arguments`) and return the report."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    cfg = load_preset(resolve_preset(args.pipeline)).detect
    backends = [b.strip().lower() for b in (args.backends or cfg.backend).split(",") if b.strip()]
    network = getattr(args, "network", "blazeface")
    sweep = _int_list(args.batch_sizes, FULL_SWEEP if args.full else QUICK_SWEEP, "--batch-sizes")
    lat = _int_list(
        args.latency_batches, FULL_LATENCY if args.full else QUICK_LATENCY, "--latency-batches"
    )
    images = args.images or (2048 if args.full else 256)
    repeats = args.repeats or (3 if args.full else 1)
    threads = args.threads or cfg.num_threads
    accel = cfg.accelerator()
    if args.jit is not None:
        from dataclasses import replace

        accel = replace(accel, jit_compile=bool(args.jit))
    say = progress or (lambda _msg: None)

    report = Report(
        device={
            "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.platform(),
        },
        settings={
            "pipeline": args.pipeline,
            "network": network,
            "backends": backends,
            "batch_sizes": list(sweep),
            "latency_batches": list(lat),
            "images_per_point": images,
            "repeats": repeats,
            "threads": threads,
            "jit_compile": accel.jit_compile,
            "prefetch_depth": accel.prefetch_depth,
            "io_tiles": accel.io_tiles,
            "replicas": accel.replicas,
        },
    )
    pool = network_inputs(network)
    meters: dict[str, PowerMeter] = {}
    keras_backends = [b for b in backends if b in KERAS_BACKENDS]
    for name in backends:
        if name in KERAS_BACKENDS and name != keras_backends[0]:
            say(f"{name}: in a process of its own ...")
            _merge(
                report,
                _run_in_child(args, name, sweep, lat, images, repeats, threads, accel.jit_compile),
            )
            continue
        factory = network_factory(network, name, threads=threads, accelerator=accel)
        # fails early, with the registry's message, if the backend is unavailable
        probe = factory(1)
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
                    report.latency.append(
                        _latency_point(name, detector, pool, batch, calls=20 if args.full else 10)
                    )
            finally:
                detector.close()
    for kind, meter in meters.items():
        if meter.source == "n/a":
            report.notes.append(
                f"energy efficiency on {kind}: n/a (no readable power source: nvidia-smi for "
                "NVIDIA GPUs, gc-monitor for IPUs, /sys/class/powercap/intel-rapl*/energy_uj for "
                "CPUs)"
            )
        elif meter.source == "rapl":
            report.notes.append(
                "CPU power is the RAPL package energy over the run: the whole package, "
                "including other processes"
            )
    return report


# --------------------------------------------------------------------------- output


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def to_markdown(report: Report) -> str:
    title = {"blazeface": "BlazeFace detector", "mesh": "Face mesh", "iris": "Iris network"}
    lines = [f"# {title.get(report.settings.get('network', 'blazeface'), 'Network')} benchmark", ""]
    dev = ", ".join(f"{k}: {v}" for k, v in report.device.items())
    lines += [
        f"Device: {dev}",
        "",
        "Settings: " + ", ".join(f"{k}={v}" for k, v in report.settings.items()),
        "",
    ]
    if report.sweep:
        lines += [
            "## Batch-size sweep (throughput)",
            "",
            "| backend | batch | images | compile (s) | run (s) | images/s | ms/image | power (W) "
            "| images/s/W |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in report.sweep:
            power = "n/a" if p.mean_power_w is None else f"{p.mean_power_w:.1f} ({p.power_source})"
            lines.append(
                f"| {p.backend} | {p.batch_size} | {p.images} | {_fmt(p.compile_s)} | "
                f"{_fmt(p.run_s)} | "
                f"{_fmt(p.images_per_s)} | {_fmt(p.ms_per_image)} | {power} | "
                f"{_fmt(p.images_per_s_per_w)} |"
            )
        lines.append("")
    if report.latency:
        lines += [
            "## Low-latency sweep (one synchronous call)",
            "",
            "| backend | batch | latency p50 (ms) | latency p90 (ms) | ms/image |",
            "|---|---:|---:|---:|---:|",
        ]
        for q in report.latency:
            lines.append(
                f"| {q.backend} | {q.batch_size} | {_fmt(q.latency_ms_p50)} | "
                f"{_fmt(q.latency_ms_p90)} | "
                f"{_fmt(q.ms_per_image)} |"
            )
        lines.append("")
    for note in report.notes:
        lines.append(f"- {note}")
    return "\n".join(lines).rstrip() + "\n"


def run(args: argparse.Namespace) -> int:
    """Entry point of ``eyeblink bench detector``; returns the exit status."""
    import sys

    report = run_benchmark(args, progress=lambda m: print(m, file=sys.stderr, flush=True))
    from eyeblink.outputs.paths import write_text

    text = to_markdown(report)
    if args.markdown:
        write_text(args.markdown, text, "--markdown")
    else:
        sys.stdout.write(text)
    if args.json:
        write_text(args.json, json.dumps(asdict(report), indent=2) + "\n", "--json")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m eyeblink.lab.bench_detector`` (until it is wired as ``eyeblink bench
    detector``)."""
    from eyeblink.errors import EyeblinkError

    parser = add_arguments(
        argparse.ArgumentParser(
            prog="eyeblink bench detector",
            description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    args = parser.parse_args(argv)
    try:
        return run(args)
    except EyeblinkError as exc:
        import sys

        print(f"eyeblink: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
