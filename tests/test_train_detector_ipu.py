"""``eyeblink train-detector --device ipu`` without IPUs: a stand-in for Graphcore's SDK on the CPU.

Graphcore's ``tensorflow.python.ipu`` exists only in the Poplar SDK's TensorFlow build; here
:class:`FakeIPU` takes its place in ``sys.modules`` (as in ``tests/test_backends.py``) with real
TensorFlow and Keras underneath: the training really runs, on the CPU. What these tests check is
eyeblink's side (the settings given to ``IPUConfig``, the model built and compiled in the
strategy's scope, ``steps_per_execution``, the static-shape dataset, the loss, the export), not
Graphcore's runtime, which was not run.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from eyeblink.cli import main
from eyeblink.config import load_preset
from eyeblink.detect import AcceleratorOptions
from eyeblink.errors import ConfigError
from eyeblink.lab import train_detector as td
from eyeblink.lab.train_detector_ipu import plan_ipu_training
from eyeblink.presets import resolve_preset


class FakeIPU:
    """Stands in for ``tensorflow.python.ipu``: what :mod:`eyeblink.lab.train_detector_ipu` uses of
    it.

    ``config.IPUConfig`` records what ``configure_ipu_system`` was called with.
    ``ipu_strategy.IPUStrategy`` is a one-device (CPU) ``tf.distribute`` strategy. Graphcore's
    IPUStrategy gives the Keras models made in its scope IPU extensions and runs their ``compile``
    and ``fit`` on the IPU; the stand-in gives every Keras model
    ``set_gradient_accumulation_options`` and ``set_infeed_queue_options`` and records them, and the
    strategy in effect at ``compile`` and ``fit`` (which then run as usual, on the CPU: gradients
    are not accumulated).
    """

    def __init__(self, tf: Any, keras: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = self
        self.configured: list[Any] = []
        self.strategies: list[Any] = []
        self.calls: dict[str, list[dict[str, Any]]] = {}

        class IPUConfig:
            def __init__(self) -> None:
                self.auto_select_ipus: Any = []
                self.io_tiles = SimpleNamespace(
                    num_io_tiles=0, place_ops_on_io_tiles=False, available_memory_proportion=0.9
                )

            def configure_ipu_system(self) -> None:
                fake.configured.append(self)

        class IPUStrategy(tf.distribute.OneDeviceStrategy):
            def __init__(self) -> None:
                super().__init__("/cpu:0")
                fake.strategies.append(self)

        def record(name: str, **call: Any) -> None:
            fake.calls.setdefault(name, []).append(
                {**call, "strategy": tf.distribute.get_strategy()}
            )

        compile_, fit = keras.Model.compile, keras.Model.fit

        def compile_on_ipu(model: Any, *args: Any, **kwargs: Any) -> Any:
            record("compile", kwargs=kwargs)
            return compile_(model, *args, **kwargs)

        def fit_on_ipu(model: Any, x: Any = None, *args: Any, **kwargs: Any) -> Any:
            record("fit", element_spec=x.element_spec, kwargs=kwargs)
            return fit(model, x, *args, **kwargs)

        monkeypatch.setattr(keras.Model, "compile", compile_on_ipu)
        monkeypatch.setattr(keras.Model, "fit", fit_on_ipu)
        for name in ("set_gradient_accumulation_options", "set_infeed_queue_options"):
            monkeypatch.setattr(
                keras.Model, name, lambda model, _n=name, **kw: record(_n, kwargs=kw), raising=False
            )
        self.config = SimpleNamespace(IPUConfig=IPUConfig)
        self.ipu_strategy = SimpleNamespace(IPUStrategy=IPUStrategy)


@pytest.fixture
def fake_ipu(monkeypatch: pytest.MonkeyPatch) -> FakeIPU:
    tf = pytest.importorskip("tensorflow")
    fake = FakeIPU(tf, td.training_keras(), monkeypatch)
    monkeypatch.setitem(sys.modules, "tensorflow.python.ipu", fake)
    return fake


def _clip(path: Path, seed: int) -> Path:
    from eyeblink.lab.synth import SynthConfig, write_recording

    write_recording(path, SynthConfig(duration_s=0.08, fps=500.0, seed=seed))
    return path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> td.Dataset:
    """Teacher-labelled samples of a rendered clip: 5 frames and one augmented copy each."""
    pytest.importorskip("tensorflow")
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.landmarks.mesh import MeshFitter

    clip = _clip(tmp_path_factory.mktemp("ipu") / "train.avi", 0)
    with (
        FaceDetector("litert", num_threads=1) as stock,
        contextlib.closing(MeshFitter(refine=False)) as mesher,
    ):
        frames = td.label_frames([str(clip)], every=8, max_frames=5, detector=stock, mesher=mesher)
    teacher = td.fit_teacher(
        [f.mesh for f in frames], [f.stock_box for f in frames], [f.stock_keypoints for f in frames]
    )
    ds = td.build_dataset(frames, teacher, copies=1, seed=0)
    assert ds.images.shape[0] == 10
    return ds


# --------------------------------------------------------------------------- the plan (no
# TensorFlow needed)


@pytest.mark.parametrize("preset", ["ipu-mk1", "ipu-mk2", "low-latency"])
def test_plan_takes_the_preset_settings(preset: str) -> None:
    d = load_preset(resolve_preset(preset)).detect
    plan = plan_ipu_training(100, batch_size=8, accelerator=d.accelerator())
    s = plan.settings
    assert s.ipu_config_fields() == {
        "auto_select_ipus": d.replicas,
        "io_tiles.num_io_tiles": d.io_tiles,
        "io_tiles.place_ops_on_io_tiles": True,
        "io_tiles.available_memory_proportion": 0.9,
    }
    # the training batch, not the preset's
    assert (s.batch_size, s.prefetch_depth) == (8, d.prefetch_depth)
    assert (plan.steps_per_execution, plan.steps_per_epoch, plan.images_per_epoch) == (12, 12, 96)


def test_plan_with_replicas_and_gradient_accumulation() -> None:
    acc = AcceleratorOptions(io_tiles=64, replicas=2)
    plan = plan_ipu_training(100, batch_size=4, accelerator=acc, gradient_accumulation=3)
    # 25 batches; executions of a multiple of 2 x 3 steps: one of 24
    assert (plan.steps_per_execution, plan.steps_per_epoch, plan.images_per_update) == (24, 24, 24)
    assert plan.settings.steps_per_execution == 12 and plan.settings.images_per_execution == 96
    plan = plan_ipu_training(
        100, batch_size=4, accelerator=acc, steps_per_execution=6, gradient_accumulation=3
    )
    assert (plan.steps_per_execution, plan.steps_per_epoch) == (6, 24)
    with pytest.raises(
        ConfigError, match=r"multiple of replicas x gradient accumulation \(2 x 3 = 6\), got 4"
    ):
        plan_ipu_training(
            100, batch_size=4, accelerator=acc, steps_per_execution=4, gradient_accumulation=3
        )
    with pytest.raises(ConfigError, match="fewer than one IPU execution"):
        plan_ipu_training(20, batch_size=4, accelerator=acc, gradient_accumulation=3)
    with pytest.raises(ConfigError, match="replicas"):
        plan_ipu_training(100, batch_size=4, accelerator=AcceleratorOptions(replicas=17))


# --------------------------------------------------------------------------- loss and data


def test_keras_losses_are_the_cpu_steps_loss(rendered: td.Dataset) -> None:
    """compile's two losses, weighted by LOSS_WEIGHTS, give blazeface_loss on the same batch."""
    _, tgt, pos, neg = td.batch_targets(rendered, np.arange(6))
    rng = np.random.default_rng(0)
    reg = (tgt + rng.normal(0, 3, tgt.shape)).astype(np.float32)
    logits = rng.normal(0, 2, pos.shape).astype(np.float32)
    total, cls, regl = (float(v) for v in td.blazeface_loss(reg, logits, tgt, pos, neg))
    y_reg, y_cls = td.keras_targets(tgt, pos, neg)
    l_reg, l_cls = td.keras_losses(td.training_keras())
    k_reg, k_cls = float(l_reg(y_reg, reg)), float(l_cls(y_cls, logits))
    assert (k_reg, k_cls) == pytest.approx((regl, cls), rel=1e-6)
    assert td.LOSS_WEIGHTS[0] * k_reg + td.LOSS_WEIGHTS[1] * k_cls == pytest.approx(total, rel=1e-6)
    assert regl > 0 and cls > 0 and pos.any()


def test_training_dataset_has_static_batches(rendered: td.Dataset) -> None:
    data = td.training_dataset(rendered, batch_size=4, seed=3)
    x_spec, (reg_spec, cls_spec) = data.element_spec
    assert [tuple(s.shape) for s in (x_spec, reg_spec, cls_spec)] == [
        (4, 128, 128, 3),
        (4, 896, 17),
        (4, 896, 2),
    ]
    # 10 samples: 2 full batches per pass, the other 2 samples left out
    batches = list(data.take(4))
    order = np.random.default_rng([3, 0]).permutation(10)
    x, tgt, pos, neg = td.batch_targets(rendered, order[:4])
    np.testing.assert_array_equal(batches[0][0].numpy(), x)
    np.testing.assert_array_equal(batches[0][1][0].numpy(), td.keras_targets(tgt, pos, neg)[0])
    second_pass = np.random.default_rng([3, 1]).permutation(10)
    np.testing.assert_array_equal(
        batches[2][0].numpy(), td.batch_targets(rendered, second_pass[:4])[0]
    )


# --------------------------------------------------------------------------- training on the
# stand-in


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_train_ipu_on_a_fake_sdk(fake_ipu: FakeIPU, rendered: td.Dataset, tmp_path: Path) -> None:
    from eyeblink.detect.litert import LiteRTDetector

    acc = load_preset(resolve_preset("ipu-mk2")).detect.accelerator()
    x, tgt, pos, neg = td.batch_targets(rendered, np.arange(10))

    def loss_of(model: Any) -> float:
        return float(td.blazeface_loss(*model(x, training=False), tgt, pos, neg)[0])

    before = loss_of(td.build_trainable_blazeface())
    out = td.train_ipu(
        rendered,
        epochs=5,
        batch_size=5,
        learning_rate=3e-4,
        seed=0,
        accelerator=acc,
        log=lambda *a, **k: None,
    )
    cfg = fake_ipu.configured[-1]
    assert (
        cfg.auto_select_ipus,
        cfg.io_tiles.num_io_tiles,
        cfg.io_tiles.place_ops_on_io_tiles,
    ) == (1, 64, True)
    strategy = fake_ipu.strategies[-1]
    assert out.device_model.distribute_strategy is strategy  # built in the scope
    (compiled,) = fake_ipu.calls["compile"]
    assert compiled["strategy"] is strategy and compiled["kwargs"]["steps_per_execution"] == 2
    assert compiled["kwargs"]["loss_weights"] == list(td.LOSS_WEIGHTS)
    (fitted,) = fake_ipu.calls["fit"]
    assert fitted["strategy"] is strategy and fitted["kwargs"]["steps_per_epoch"] == 2
    assert [tuple(s.shape) for s in (fitted["element_spec"][0], *fitted["element_spec"][1])] == [
        (5, 128, 128, 3),
        (5, 896, 17),
        (5, 896, 2),
    ]
    assert tuple(out.device_model.inputs[0].shape) == (5, 128, 128, 3)
    assert fake_ipu.calls["set_infeed_queue_options"][0]["kwargs"] == {"prefetch_depth": 2}
    assert "set_gradient_accumulation_options" not in fake_ipu.calls
    assert int(out.device_model.optimizer.iterations.numpy()) == 5 * 2
    assert len(out.history) == 5 and all(math.isfinite(h["loss"]) for h in out.history)
    # BlazeFace's loss on the 10 samples: stock 0.41, trained 0.26
    assert loss_of(out.model) < 0.8 * before
    assert out.history[0]["includes_compile"] and all(h["images_per_s"] > 0 for h in out.history)
    # the stand-in has no file
    assert out.report["steps_per_epoch"] == 2 and out.report["sdk_module"] is None
    # the export: the trained weights in the free-batch model, as a .tflite with the stock interface
    for a, b in zip(out.model.get_weights(), out.device_model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    keras_reg, keras_scores = (np.asarray(v) for v in out.device_model(x[:5], training=False))
    path = tmp_path / "tuned.tflite"
    td.export_tflite(out.model, path)
    with LiteRTDetector(model_path=path) as tuned, LiteRTDetector() as stock:
        reg, scores = tuned.detect(x[:1])
        # float32 logits of -100 and below differ in their last bits: a relative tolerance too
        np.testing.assert_allclose(reg[0], keras_reg[0], atol=2e-3, rtol=1e-4)
        np.testing.assert_allclose(scores[0], keras_scores[0], atol=2e-3, rtol=1e-4)
        # trained: not the stock model
        assert not np.allclose(scores, stock.detect(x[:1])[1], atol=1e-3)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cli_device_ipu_on_a_fake_sdk(
    fake_ipu: FakeIPU, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, held = _clip(tmp_path / "train.avi", 0), _clip(tmp_path / "held.avi", 1)
    model, report = tmp_path / "tuned.tflite", tmp_path / "report.json"
    rc = main(
        [
            "train-detector",
            str(train),
            "--holdout",
            str(held),
            "-o",
            str(model),
            "--every",
            "8",
            "--max-frames",
            "5",
            "--augment",
            "1",
            "--epochs",
            "2",
            "--batch-size",
            "2",
            "--max-pairs",
            "2",
            "--timing-frames",
            "1",
            "--json",
            str(report),
            "--device",
            "ipu",
            "--pipeline",
            "low-latency",
            "--steps-per-execution",
            "2",
            "--gradient-accumulation",
            "2",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and model.is_file()
    cfg = fake_ipu.configured[-1]
    # low-latency's 32 I/O tiles
    assert (cfg.auto_select_ipus, cfg.io_tiles.num_io_tiles) == (1, 32)
    assert fake_ipu.calls["set_gradient_accumulation_options"][0]["kwargs"] == {
        "gradient_accumulation_steps_per_replica": 2
    }
    r = json.loads(report.read_text())
    ipu = r["ipu"]
    assert r["device"] == "ipu" and ipu["ran"].startswith(
        "the training steps through tensorflow.python.ipu"
    )
    assert (ipu["steps_per_execution"], ipu["steps_per_epoch"], ipu["images_per_update"]) == (
        2,
        4,
        4,
    )
    assert ipu["ipu_config"]["io_tiles.num_io_tiles"] == 32
    assert len(r["history"]) == 2 and all(math.isfinite(h["loss"]) for h in r["history"])
    assert set(r["rows"]) == {"stock", "teacher", "tuned"} and "| tuned |" in out
    assert "training through tensorflow.python.ipu" in out


# --------------------------------------------------------------------------- without the SDK, and
# bad options


def test_cli_without_the_sdk_is_one_line_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorflow")
    # as where Graphcore's TensorFlow is absent
    monkeypatch.setitem(sys.modules, "tensorflow.python.ipu", None)
    train, held = _clip(tmp_path / "train.avi", 0), _clip(tmp_path / "held.avi", 1)
    rc = main(
        [
            "train-detector",
            str(train),
            "--holdout",
            str(held),
            "-o",
            str(tmp_path / "x.tflite"),
            "--device",
            "ipu",
        ]
    )
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert rc == 2 and err.count("\n") == 0 and err.startswith("eyeblink: error:")
    assert "'tensorflow.python.ipu'" in err and "Poplar SDK" in err and "--device cpu" in err
    assert "teacher:" not in captured.out and not (tmp_path / "x.tflite").exists()


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--pipeline", "ipu-mk1"], "--pipeline applies to --device ipu only"),
        (["--gradient-accumulation", "2"], "--gradient-accumulation applies to --device ipu only"),
        (["--device", "ipu", "--pipeline", "cpu"], "not an IPU preset"),
        (["--device", "ipu", "--replicas", "2", "--steps-per-execution", "3"], "2 x 1 = 2), got 3"),
        (["--device", "ipu", "--replicas", "17"], "replicas must be in"),
        (
            ["--device", "ipu", "--gradient-accumulation", "0"],
            "--gradient-accumulation must be >= 1",
        ),
    ],
)
def test_cli_ipu_options_are_checked_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    a, b = tmp_path / "a.avi", tmp_path / "b.avi"
    a.touch()
    b.touch()
    rc = main(
        ["train-detector", str(a), "--holdout", str(b), "-o", str(tmp_path / "x.tflite"), *extra]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and error in err, err
