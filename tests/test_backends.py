"""Accelerator backends: the .tflite reader, the Keras/XLA rebuild vs LiteRT, IPU settings, presets,
bench.

The TensorFlow tests skip only when ``tensorflow`` cannot be imported (``pip install
"eyeblink[tf]"``). The IPU backend cannot run without Graphcore hardware and SDK; its settings,
``IPUConfig`` mapping and outfeed plumbing are tested here as plain Python.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from eyeblink.config import DetectConfig, load_preset
from eyeblink.detect import AcceleratorOptions, create_detector, first_installed_backend
from eyeblink.detect.blazeface import letterbox
from eyeblink.detect.ipu_settings import (
    IPUSettings,
    OutfeedDrainer,
    ResultRouter,
    apply_ipu_config,
    ipu_settings,
)
from eyeblink.detect.tflite_graph import read_tflite_graph
from eyeblink.errors import BackendUnavailableError, ConfigError, ModelFileError
from eyeblink.presets import resolve_preset
from eyeblink.weights import blazeface_path

# --------------------------------------------------------------------------- .tflite reader


def test_tflite_graph_reads_the_shipped_model() -> None:
    g = read_tflite_graph(blazeface_path())
    assert g.op_counts() == {
        "CONV_2D": 21,
        "RELU": 17,
        "DEPTHWISE_CONV_2D": 16,
        "ADD": 16,
        "PAD": 11,
        "MAX_POOL_2D": 3,
        "RESHAPE": 4,
        "CONCATENATION": 2,
    }
    assert set(g.outputs) == {"regressors", "classificators"}
    assert g.shapes[g.input] == (1, 128, 128, 3)
    first = g.ops[0]
    assert (
        first.kind == "CONV_2D"
        and first.options["strides"] == (2, 2)
        and first.options["padding"] == "same"
    )
    kernel = g.constants[first.inputs[1]]
    assert kernel.dtype == np.float32 and kernel.shape == (24, 5, 5, 3)
    # the float16 weights were widened exactly
    assert np.array_equal(kernel, kernel.astype(np.float16).astype(np.float32))
    pads = [op.options["paddings"] for op in g.ops if op.kind == "PAD"]
    # channel padding only
    assert all(p[:3].sum() == 0 and p[3, 0] == 0 and p[3, 1] > 0 for p in pads)


@pytest.mark.parametrize("content", [b"", b"not a model at all", b"\x00" * 64])
def test_tflite_graph_rejects_other_files(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(content)
    with pytest.raises(ModelFileError, match=r"bad\.tflite"):
        read_tflite_graph(bad)


def test_tflite_graph_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="cannot be read"):
        read_tflite_graph(tmp_path / "missing.tflite")


# --------------------------------------------------------------------------- options, config,
# presets


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, None),
        ({"io_tiles": 32}, None),
        ({"io_tiles": 192, "prefetch_depth": 255, "replicas": 4, "jit_compile": False}, None),
        ({"io_tiles": 30}, "io_tiles"),
        ({"io_tiles": 63}, "io_tiles"),
        ({"io_tiles": 194}, "io_tiles"),
        ({"prefetch_depth": 0}, "prefetch_depth"),
        ({"prefetch_depth": 256}, "prefetch_depth"),
        ({"replicas": 0}, "replicas"),
        ({"jit_compile": "yes"}, "jit_compile"),
    ],
)
def test_accelerator_options_validation(kwargs: dict, error: str | None) -> None:
    if error is None:
        AcceleratorOptions(**kwargs)
    else:
        with pytest.raises(ConfigError, match=error):
            AcceleratorOptions(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"backend": "ipu", "io_tiles": 64, "replicas": 2}, None),
        ({"backend": "tensorflow", "jit_compile": False, "prefetch_depth": 4}, None),
        ({"backend": "litert", "io_tiles": 64}, "IPU settings"),
        ({"backend": "tensorflow", "replicas": 2}, "IPU settings"),
        ({"backend": "ipu", "io_tiles": 10}, r"detect\.io_tiles"),
        ({"backend": "tensorflow", "prefetch_depth": 0}, r"detect\.prefetch_depth"),
    ],
)
def test_detect_config_accelerator_fields(kwargs: dict, error: str | None) -> None:
    if error is None:
        cfg = DetectConfig(**kwargs)
        assert cfg.accelerator() == AcceleratorOptions(
            **{
                k: v
                for k, v in kwargs.items()
                if k in ("jit_compile", "prefetch_depth", "io_tiles", "replicas")
            }
        )
    else:
        with pytest.raises(ConfigError, match=error):
            DetectConfig(**kwargs)


PRESETS = {
    # name: (backend, batch_size, jit_compile, prefetch_depth, io_tiles, replicas)
    "cpu": ("litert", 1, False, 2, 0, 1),
    "gpu": (first_installed_backend(["jax", "tensorflow"]), 512, True, 2, 0, 1),
    "ipu-mk1": ("ipu", 32, True, 2, 64, 1),
    "ipu-mk2": ("ipu", 64, True, 2, 64, 1),
    "low-latency": ("ipu", 16, True, 1, 32, 1),
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_device_presets(name: str) -> None:
    d = load_preset(resolve_preset(name)).detect
    assert (
        d.backend,
        d.batch_size,
        d.jit_compile,
        d.prefetch_depth,
        d.io_tiles,
        d.replicas,
    ) == PRESETS[name]
    if name == "low-latency":
        assert d.batch_size <= 16
    # the gpu preset runs detection and the eyelids in the accelerator stage; the IPU presets detect
    # in one process
    assert d.accelerator_stage is (name == "gpu")


@pytest.mark.parametrize(
    ("hidden", "expected"),
    [
        ((), "jax"),
        (("jax",), "tensorflow"),
        (("tensorflow",), "jax"),
        (("jax", "tensorflow"), "jax"),
    ],
)
def test_gpu_preset_picks_jax_then_tensorflow(
    monkeypatch: pytest.MonkeyPatch, hidden: tuple[str, ...], expected: str
) -> None:
    """``pipelines/gpu``: JAX where it is installed, else TensorFlow; with neither, jax (whose
    install command create_detector then names)."""
    for module in ("jax", "tensorflow"):
        if module not in hidden and importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed here")
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # find_spec raises: not importable
    assert load_preset(resolve_preset("gpu")).detect.backend == expected
    if hidden == ("jax", "tensorflow"):
        with pytest.raises(BackendUnavailableError, match=r'pip install "eyeblink\[jax\]"'):
            create_detector(load_preset(resolve_preset("gpu")).detect.backend)


def test_backend_list_rejects_unknown_names() -> None:
    with pytest.raises(ConfigError, match=r"detect\.backend: unknown detector backend 'cuda'"):
        DetectConfig(backend=["cuda", "jax"])  # type: ignore[arg-type]


def test_preset_with_invalid_io_tiles(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text('[detect]\nbackend = "ipu"\nio_tiles = 33\n')
    with pytest.raises(ConfigError, match="io_tiles"):
        load_preset(p)


# --------------------------------------------------------------------------- IPU settings (no SDK
# needed)


@pytest.mark.parametrize(
    ("preset", "fields"),
    [
        (
            "ipu-mk1",
            {
                "auto_select_ipus": 1,
                "io_tiles.num_io_tiles": 64,
                "io_tiles.place_ops_on_io_tiles": True,
                "io_tiles.available_memory_proportion": 0.9,
            },
        ),
        (
            "ipu-mk2",
            {
                "auto_select_ipus": 1,
                "io_tiles.num_io_tiles": 64,
                "io_tiles.place_ops_on_io_tiles": True,
                "io_tiles.available_memory_proportion": 0.9,
            },
        ),
        (
            "low-latency",
            {
                "auto_select_ipus": 1,
                "io_tiles.num_io_tiles": 32,
                "io_tiles.place_ops_on_io_tiles": True,
                "io_tiles.available_memory_proportion": 0.9,
            },
        ),
    ],
)
def test_ipu_settings_from_presets(preset: str, fields: dict) -> None:
    d = load_preset(resolve_preset(preset)).detect
    s = ipu_settings(batch_size=d.batch_size, accelerator=d.accelerator())
    assert s.ipu_config_fields() == fields
    assert s.batch_size == d.batch_size and s.prefetch_depth == d.prefetch_depth
    assert s.images_per_execution == d.batch_size


def test_ipu_settings_without_io_tiles_and_replicas() -> None:
    s = ipu_settings(
        batch_size=8, accelerator=AcceleratorOptions(replicas=4), steps_per_execution=3
    )
    assert s.ipu_config_fields() == {"auto_select_ipus": 4}
    assert not s.place_ops_on_io_tiles
    assert (s.images_per_step, s.images_per_execution) == (32, 96)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"steps_per_execution": 0}, "steps_per_execution"),
        ({"replicas": 17}, "replicas"),
        ({"num_io_tiles": 31}, "io_tiles"),
        ({"num_io_tiles": 0, "place_ops_on_io_tiles": True}, "place_ops_on_io_tiles"),
        ({"io_tiles_available_memory_proportion": 0.0}, "available_memory_proportion"),
        ({"prefetch_depth": 0}, "prefetch_depth"),
    ],
)
def test_ipu_settings_validation(change: dict, error: str) -> None:
    base = ipu_settings(batch_size=32, accelerator=AcceleratorOptions(io_tiles=64)).to_dict()
    with pytest.raises(ConfigError, match=error):
        IPUSettings(**{**base, **change})


def _fake_ipu_config() -> SimpleNamespace:
    """The attribute tree of Graphcore's IPUConfig that the backend touches."""
    return SimpleNamespace(
        auto_select_ipus=[],
        io_tiles=SimpleNamespace(
            num_io_tiles=0, place_ops_on_io_tiles=False, available_memory_proportion=0.9
        ),
    )


def test_apply_ipu_config_sets_fields() -> None:
    s = ipu_settings(batch_size=64, accelerator=AcceleratorOptions(io_tiles=64, replicas=2))
    cfg = apply_ipu_config(s, _fake_ipu_config())
    assert cfg.auto_select_ipus == 2
    assert (cfg.io_tiles.num_io_tiles, cfg.io_tiles.place_ops_on_io_tiles) == (64, True)


def test_apply_ipu_config_old_sdk() -> None:
    s = ipu_settings(batch_size=64, accelerator=AcceleratorOptions(io_tiles=64))
    with pytest.raises(BackendUnavailableError, match=r"io_tiles\.num_io_tiles.*newer Poplar SDK"):
        apply_ipu_config(s, SimpleNamespace(auto_select_ipus=[]))


class FakeOutfeed:
    """Stands in for IPUOutfeedQueue: ``enqueue`` from the 'device', ``dequeue`` returns all
    since last."""

    def __init__(self) -> None:
        self._items: list[int] = []
        self._lock = threading.Lock()

    def enqueue(self, item: int) -> None:
        with self._lock:
            self._items.append(item)

    def dequeue(self) -> list[int]:
        with self._lock:
            items, self._items = self._items, []
        return items


def test_outfeed_drainer_routes_results_in_order() -> None:
    outfeed = FakeOutfeed()
    router = ResultRouter()
    drainer = OutfeedDrainer(outfeed.dequeue, router.deliver, poll_s=0.001).start()
    tickets = [router.expect(3), router.expect(1), router.expect(2)]

    def device() -> None:
        for i in range(6):
            time.sleep(0.002)
            outfeed.enqueue(i)

    threading.Thread(target=device).start()
    got = [router.wait(t, timeout_s=5, check=drainer.check) for t in tickets]
    drainer.stop()
    assert got == [[0, 1, 2], [3], [4, 5]]
    assert not drainer.alive


def test_outfeed_drainer_failure_reaches_the_owner() -> None:
    def broken() -> list[int]:
        raise RuntimeError("device lost")

    router = ResultRouter()
    drainer = OutfeedDrainer(broken, router.deliver, poll_s=0.001).start()
    ticket = router.expect(1)
    with pytest.raises(RuntimeError, match="device lost"):
        router.wait(ticket, timeout_s=5, check=drainer.check)
    with pytest.raises(RuntimeError, match="device lost"):
        drainer.stop()


def test_result_router_unexpected_result() -> None:
    with pytest.raises(RuntimeError, match="nobody asked"):
        ResultRouter().deliver(1)


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is not None
    and importlib.util.find_spec("tensorflow.python.ipu") is not None,
    reason="Graphcore's TensorFlow is installed: the IPU backend is available here",
)
def test_ipu_backend_unavailable_names_the_sdk() -> None:
    with pytest.raises(BackendUnavailableError, match="Poplar SDK"):
        create_detector("ipu", batch_size=32, accelerator=AcceleratorOptions(io_tiles=64))


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is not None
    and importlib.util.find_spec("tensorflow.python.ipu") is not None,
    reason="Graphcore's TensorFlow is installed: the IPU backend is available here",
)
def test_cli_unavailable_backend_fails_before_reading_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from eyeblink.cli import main

    video = tmp_path / "not_a_video.avi"
    # a VideoOpenError would mean frames were read first
    video.write_bytes(b"garbage, never opened")
    code = main(
        [
            "process",
            str(video),
            "-o",
            str(tmp_path / "out"),
            "--pipeline",
            "ipu-mk2",
            "--workers",
            "1",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "'ipu'" in err and "Poplar SDK" in err


# --------------------------------------------------------------------------- TensorFlow vs LiteRT


def _real_frames() -> np.ndarray:
    """The astronaut letterboxed, and frames of the synthetic 500 FPS recording (gray -> RGB)."""
    from skimage import data

    from eyeblink.lab.synth import render_frame

    rng = np.random.default_rng(3)
    frames = [letterbox(data.astronaut())[0]]
    for t, closure in [(0.0, 0.0), (0.31, 0.5), (0.77, 1.0)]:
        frames.append(letterbox(render_frame(t, closure, closure, rng))[0])
    return np.stack(frames).astype(np.float32)


@pytest.fixture(scope="module")
def tf_detector_factory():
    pytest.importorskip("tensorflow")
    return lambda batch, jit=True: create_detector(
        "tensorflow",
        batch_size=batch,
        num_threads=1,
        accelerator=AcceleratorOptions(jit_compile=jit),
    )


def _batch(frames: np.ndarray, n: int) -> np.ndarray:
    """``n`` real frames, cycled, with mild per-image brightness changes so that none repeat
    exactly."""
    idx = np.arange(n) % frames.shape[0]
    gain = np.linspace(0.85, 1.0, n, dtype=np.float32)[:, None, None, None]
    return np.clip(frames[idx] * gain, -1.0, 1.0).astype(np.float32)


def assert_matches_litert(r1: np.ndarray, s1: np.ndarray, r0: np.ndarray, s0: np.ndarray) -> None:
    """The TF outputs agree with LiteRT's to float32 round-off of a 30-layer network.

    Box/keypoint regressors (pixels of the 128x128 input, up to ~160): 99.9% within 2e-4 (the
    "~1e-4" of the design), all within 1e-3. Score logits reach |150| on background anchors, so
    they are compared relative to 1 + |logit| (1e-4), and as face probabilities (1e-5). For scale:
    LiteRT's own two CPU kernels (XNNPACK vs the builtin reference kernels) differ by up to
    3.5e-4 (regressors) and 1.0e-3 (logits) on these frames.
    """
    d = np.abs(r1.astype(np.float64) - r0)
    assert np.percentile(d, 99.9) <= 2e-4, (
        f"regressors: 99.9th percentile of |diff| = {np.percentile(d, 99.9):.2e}"
    )
    assert d.max() <= 1e-3, f"regressors: max |diff| = {d.max():.2e}"
    rel = np.abs(s1.astype(np.float64) - s0) / (1.0 + np.abs(s0))
    assert rel.max() <= 1e-4, f"scores: max |diff| / (1 + |logit|) = {rel.max():.2e}"
    sigmoid = lambda v: 1.0 / (1.0 + np.exp(-np.clip(v.astype(np.float64), -80, 80)))  # noqa: E731
    assert np.abs(sigmoid(s1) - sigmoid(s0)).max() <= 1e-5
    assert np.array_equal(s1 > 0, s0 > 0)  # the same anchors see a face


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_tensorflow_matches_litert(tf_detector_factory, batch: int) -> None:
    x = _batch(_real_frames(), batch)
    with create_detector("litert", batch_size=batch) as ref:
        r0, s0 = ref.detect(x)
    with tf_detector_factory(batch) as det:
        r1, s1 = det.detect(x)
        assert det.compile_seconds  # the first call compiled a program
    assert r1.shape == (batch, 896, 16) and s1.shape == (batch, 896)
    assert r1.dtype == np.float32 and s1.dtype == np.float32
    assert_matches_litert(r1, s1, r0, s0)


def test_tensorflow_without_xla_streams_and_buckets(tf_detector_factory) -> None:
    x = _batch(_real_frames(), 11)
    with create_detector("litert", batch_size=11) as ref:
        r0, s0 = ref.detect(x)
    with tf_detector_factory(8, jit=False) as det:
        assert det.buckets == (1, 2, 4, 8)
        r1, s1 = det.detect(x)  # 8 + 3 (padded to the bucket of 4)
        assert set(det.compile_seconds) == {4, 8}
        outs = list(det.detect_stream([x, x[:1], x[:5]]))
    assert_matches_litert(r1, s1, r0, s0)
    assert [o[0].shape[0] for o in outs] == [11, 1, 5]
    np.testing.assert_array_equal(outs[0][0], r1)  # same program, same numbers
    np.testing.assert_array_equal(outs[2][1], s1[:5])


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((2, 128, 128, 3), np.float64),
        np.zeros((2, 64, 64, 3), np.float32),
        np.zeros((128, 128, 3), np.float32),
    ],
)
def test_tensorflow_rejects_bad_batches(tf_detector_factory, bad: np.ndarray) -> None:
    with tf_detector_factory(2, jit=False) as det, pytest.raises(ValueError, match="batch must"):
        det.detect(bad)
    with tf_detector_factory(2, jit=False) as det, pytest.raises(ValueError, match="batch must"):
        list(det.detect_stream([bad]))


def test_tensorflow_closed(tf_detector_factory) -> None:
    det = tf_detector_factory(1, jit=False)
    det.close()
    det.close()
    with pytest.raises(RuntimeError, match="closed"):
        det.detect(np.zeros((1, 128, 128, 3), np.float32))


# --------------------------------------------------------------------------- bench detector


def test_bench_detector_litert(tmp_path: Path) -> None:
    from eyeblink.lab import bench_detector

    parser = bench_detector.add_arguments(argparse.ArgumentParser())
    out_json, out_md = tmp_path / "b.json", tmp_path / "b.md"
    args = parser.parse_args(
        [
            "--backends",
            "litert",
            "--batch-sizes",
            "1,4",
            "--latency-batches",
            "1,2",
            "--images",
            "8",
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
        ]
    )
    assert bench_detector.run(args) == 0
    data = json.loads(out_json.read_text())
    assert [p["batch_size"] for p in data["sweep"]] == [1, 4]
    assert all(p["images_per_s"] > 0 and p["ms_per_image"] > 0 for p in data["sweep"])
    assert [q["batch_size"] for q in data["latency"]] == [1, 2]
    md = out_md.read_text()
    assert "| litert | 4 |" in md and "images/s/W" in md


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("tensorflow") is None,
    reason="needs both JAX and TensorFlow",
)
def test_bench_detector_mesh_on_litert_tensorflow_and_jax(tmp_path: Path) -> None:
    """``--network mesh --backends litert,tensorflow,jax``: the second Keras backend runs in a
    process of its own."""
    out_json = tmp_path / "b.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.bench_detector",
            "--network",
            "mesh",
            "--backends",
            "litert,tensorflow,jax",
            "--batch-sizes",
            "2",
            "--latency-batches",
            "none",
            "--images",
            "4",
            "--json",
            str(out_json),
            "--markdown",
            str(tmp_path / "b.md"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out_json.read_text())
    assert data["settings"]["network"] == "mesh"
    assert [(p["backend"], p["batch_size"]) for p in data["sweep"]] == [
        ("litert", 2),
        ("tensorflow", 2),
        ("jax", 2),
    ]
    assert all(p["images_per_s"] > 0 for p in data["sweep"])
    assert (
        "jax_device" in data["device"]
        and "# Face mesh benchmark" in (tmp_path / "b.md").read_text()
    )


@pytest.mark.parametrize(("text", "error"), [("1,x", "whole numbers"), ("0,2", ">= 1")])
def test_bench_detector_bad_lists(text: str, error: str) -> None:
    from eyeblink.lab import bench_detector

    parser = bench_detector.add_arguments(argparse.ArgumentParser())
    with pytest.raises(ConfigError, match=error):
        bench_detector.run_benchmark(parser.parse_args(["--batch-sizes", text]))


# --------------------------------------------------------------------------- IPU host plumbing on a
# fake SDK


class _FakeIPU:
    """A stand-in for ``tensorflow.python.ipu`` that runs eagerly on the CPU.

    It has only what :mod:`eyeblink.detect.ipu` uses (IPUConfig, IPUStrategy, IPUInfeedQueue,
    IPUOutfeedQueue, loops.repeat) and records the configuration it was given. It checks the
    host side of the backend (settings applied, feeding, outfeed draining on the callback thread,
    padding and reassembly), not Graphcore's runtime.
    """

    def __init__(self, tf) -> None:
        import contextlib

        fake = self
        self.configured: list = []
        self.executions = 0
        self.deleted: list[str] = []

        class IPUConfig:
            def __init__(self) -> None:
                self.auto_select_ipus = []
                self.io_tiles = SimpleNamespace(
                    num_io_tiles=0, place_ops_on_io_tiles=False, available_memory_proportion=0.9
                )

            def configure_ipu_system(self) -> None:
                fake.configured.append(self)

        class IPUStrategy:
            def scope(self):
                return contextlib.nullcontext()

            def run(self, fn):
                fake.executions += 1
                return fn()

        class IPUInfeedQueue:
            def __init__(self, dataset, prefetch_depth=None) -> None:
                self.prefetch_depth = prefetch_depth
                self._dataset = dataset
                self._it = None

            @property
            def initializer(self):
                self._it = iter(self._dataset)

            def __next__(self):
                return next(self._it)

            @property
            # in TF2 the SDK's deleter runs when read: the iterator and its threads go
            def deleter(self):
                fake.deleted.append("infeed")
                self._it = None

        class IPUOutfeedQueue:
            def __init__(self) -> None:
                self._items: list = []
                self._lock = threading.Lock()

            def enqueue(self, tensors):
                with self._lock:
                    self._items.append(tuple(np.asarray(t) for t in tensors))

            def dequeue(self):
                with self._lock:
                    items, self._items = self._items, []
                if not items:
                    return np.zeros((0, 1, 896, 16), np.float32), np.zeros((0, 1, 896), np.float32)
                return np.stack([r for r, _ in items]), np.stack([s for _, s in items])

            @property
            def deleter(self):
                fake.deleted.append("outfeed")

        def repeat(n, body, inputs, infeed_queue):
            for _ in range(n):
                body(next(infeed_queue))

        self.config = SimpleNamespace(IPUConfig=IPUConfig)
        self.ipu_strategy = SimpleNamespace(IPUStrategy=IPUStrategy)
        self.ipu_infeed_queue = SimpleNamespace(IPUInfeedQueue=IPUInfeedQueue)
        self.ipu_outfeed_queue = SimpleNamespace(IPUOutfeedQueue=IPUOutfeedQueue)
        self.loops = SimpleNamespace(repeat=repeat)


@pytest.mark.filterwarnings("ignore:Even though the:UserWarning")
@pytest.mark.parametrize(("batch_size", "steps", "n"), [(4, 1, 10), (4, 2, 3), (2, 1, 2)])
def test_ipu_backend_host_side_on_a_fake_sdk(
    monkeypatch: pytest.MonkeyPatch, batch_size: int, steps: int, n: int
) -> None:
    tf = pytest.importorskip("tensorflow")
    import importlib
    import sys

    fake = _FakeIPU(tf)
    monkeypatch.setitem(sys.modules, "tensorflow.python.ipu", fake)
    monkeypatch.delitem(sys.modules, "eyeblink.detect.ipu", raising=False)
    ipu_backend = importlib.import_module("eyeblink.detect.ipu")
    tf.config.run_functions_eagerly(True)  # the fake's Python-side queues need eager execution
    try:
        x = _batch(_real_frames(), n)
        with create_detector("litert", batch_size=n) as ref:
            r0, s0 = ref.detect(x)
        det = ipu_backend.IPUDetector(
            batch_size=batch_size,
            steps_per_execution=steps,
            accelerator=AcceleratorOptions(io_tiles=64, prefetch_depth=2, jit_compile=False),
        )
        with det:
            cfg = fake.configured[-1]
            io = cfg.io_tiles
            assert (cfg.auto_select_ipus, io.num_io_tiles, io.place_ops_on_io_tiles) == (
                1,
                64,
                True,
            )
            assert det._infeed.prefetch_depth == 2
            r1, s1 = det.detect(x)
            r2, _ = det.detect(x[:1])
        per_exec = batch_size * steps
        assert fake.executions == -(-n // per_exec) + 1
        assert r1.shape == (n, 896, 16) and s1.shape == (n, 896)
        assert_matches_litert(r1, s1, r0, s0)
        np.testing.assert_allclose(r2[0], r1[0], atol=1e-5)
        # closed: both queues deleted, and nothing (TensorFlow's generator registry) keeps the
        # detector alive
        assert fake.deleted == ["infeed", "outfeed"]
        gone = weakref.ref(det)
        del det
        gc.collect()
        assert gone() is None
    finally:
        tf.config.run_functions_eagerly(False)


@pytest.mark.parametrize(
    ("preset", "stage", "requested", "expected"),
    [
        ("cpu", None, None, 2),
        ("cpu", None, 3, 3),
        ("gpu", None, None, 2),
        ("gpu", None, 1, 1),
        ("gpu", None, 3, 3),
        ("gpu", "fused", None, 1),
        ("gpu", "fused", 2, ConfigError),
        ("ipu-mk2", None, None, 1),
        ("ipu-mk2", None, 4, ConfigError),
    ],
)
def test_process_workers_with_accelerator_backends(
    preset: str, stage: str | None, requested: int | None, expected
) -> None:
    """The gpu preset runs the accelerator stage with CPU workers beside it; an accelerator backend
    outside the stage (the IPU, or ``--stage fused``) runs in one process."""
    from eyeblink.cli import _process_workers

    cfg = load_preset(resolve_preset(preset)).with_overrides("detect", stage=stage)
    if expected is ConfigError:
        with pytest.raises(ConfigError, match="not fork-safe"):
            _process_workers(requested, cfg, lambda: 2)
    else:
        assert _process_workers(requested, cfg, lambda: 2) == expected
