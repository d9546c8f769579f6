"""One Keras model definition on TensorFlow and JAX: BlazeFace, the face mesh and the iris network
rebuilt from their ``.tflite`` files (:mod:`eyeblink.detect.keras_graph`) give LiteRT's outputs.

Inputs are real: BlazeFace sees the letterboxed astronaut and synthetic 500 FPS frames; the mesh and
iris networks see the crops the eye model cuts from them (:func:`eyeblink.lab.bench_detector
.network_inputs`). The tolerances are the TensorFlow test's
(:func:`test_backends.assert_matches_litert`): points/regressors 99.9% within 2e-4 and all within
1e-3 (pixels), logits within 1e-4 relative to 1 + |logit|. Keras holds one backend per process, so
the JAX side runs in a subprocess (with ``KERAS_BACKEND`` unset: the backend module chooses it) and
the TensorFlow side in this one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_backends import assert_matches_litert

from eyeblink.detect import create_detector
from eyeblink.lab.bench_detector import LiteRTNetwork, network_inputs
from eyeblink.weights import face_mesh_path, iris_path

needs_jax = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None or importlib.util.find_spec("keras") is None,
    reason='JAX is not installed (pip install "eyeblink[jax]")',
)


def assert_points_match(p1: np.ndarray, p0: np.ndarray) -> None:
    """Landmark outputs (crop pixels) to the regressor tolerances of the TensorFlow test."""
    d = np.abs(p1.astype(np.float64) - p0)
    assert np.percentile(d, 99.9) <= 2e-4, (
        f"points: 99.9th percentile of |diff| = {np.percentile(d, 99.9):.2e}"
    )
    assert d.max() <= 1e-3, f"points: max |diff| = {d.max():.2e}"


def assert_logits_match(s1: np.ndarray, s0: np.ndarray) -> None:
    rel = np.abs(s1.astype(np.float64) - s0) / (1.0 + np.abs(s0))
    assert rel.max() <= 1e-4, f"logits: max |diff| / (1 + |logit|) = {rel.max():.2e}"
    assert np.array_equal(s1 > 0, s0 > 0)


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    """Real inputs per network: 7 letterboxed frames, 5 face crops, 6 eye crops (batches > 1,
    partial buckets)."""
    return {
        "blazeface": network_inputs("blazeface", 7),
        "mesh": network_inputs("mesh", 5),
        "iris": network_inputs("iris", 6),
    }


@pytest.fixture(scope="module")
def litert(inputs: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, ...]]:
    """LiteRT's outputs, one image per call (as the eye model runs them)."""
    with create_detector("litert", batch_size=7) as det:
        out: dict[str, tuple[np.ndarray, ...]] = {"blazeface": det.detect(inputs["blazeface"])}
    for name, path in (("mesh", face_mesh_path()), ("iris", iris_path())):
        net = LiteRTNetwork(path, 1)
        out[name] = net.detect(inputs[name])
        net.close()
    return out


def check_all(
    outputs: dict[str, tuple[np.ndarray, ...]],
    inputs: dict[str, np.ndarray],
    litert: dict[str, tuple[np.ndarray, ...]],
) -> None:
    r, s = outputs["blazeface"]
    assert r.shape == (7, 896, 16) and s.shape == (7, 896)
    assert_matches_litert(r, s, *litert["blazeface"])
    points, logit = outputs["mesh"]
    assert points.shape == (5, 1404) and logit.shape == (5, 1)
    # every crop holds a face: the check compares real landmarks, not noise
    assert logit.min() > 2.0
    assert_points_match(points, litert["mesh"][0])
    assert_logits_match(logit, litert["mesh"][1])
    contour, iris = outputs["iris"]
    assert contour.shape == (6, 213) and iris.shape == (6, 15)
    assert_points_match(contour, litert["iris"][0])
    assert_points_match(iris, litert["iris"][1])


def test_tensorflow_matches_litert_on_all_three_networks(inputs, litert) -> None:
    pytest.importorskip("tensorflow")
    from eyeblink.detect.tensorflow import keras_network

    outputs = {}
    for name, batch in (("blazeface", 8), ("mesh", 4), ("iris", 4)):
        net = keras_network(name, batch_size=batch)  # 7 -> bucket 8; 5 -> 4 + 1; 6 -> 4 + 2
        outputs[name] = net.run(inputs[name])
    assert set(net.compile_seconds) == {2, 4}
    check_all(outputs, inputs, litert)


JAX_SCRIPT = """
import json, sys
import numpy as np
from eyeblink.detect import create_detector
from eyeblink.detect.jax import jax_network
x = np.load(sys.argv[1])
out = {}
with create_detector("jax", batch_size=8) as det:
    out["blazeface_0"], out["blazeface_1"] = det.detect(x["blazeface"])
    compiled = sorted(det.compile_seconds)
for name in ("mesh", "iris"):
    net = jax_network(name, batch_size=8)  # one padded program each (TF covers chunking)
    for i, o in enumerate(net.run(x[name])):
        out[f"{name}_{i}"] = o
np.savez(sys.argv[2], **out)
import keras
print(json.dumps({"keras_backend": keras.backend.backend(), "compiled": compiled,
                  "options": net.compiler_options, "device": det.device}))
"""


def _python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**base, **(env or {})},
    )


@needs_jax
def test_jax_matches_litert_on_all_three_networks(inputs, litert, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", **inputs)
    proc = _python(JAX_SCRIPT, str(tmp_path / "in.npz"), str(tmp_path / "out.npz"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["keras_backend"] == "jax"  # chosen by the backend, KERAS_BACKEND unset
    assert info["compiled"] == [8]  # 7 images ran as one padded batch of 8
    got = np.load(tmp_path / "out.npz")
    outputs = {
        name: tuple(got[f"{name}_{i}"] for i in range(2)) for name in ("blazeface", "mesh", "iris")
    }
    check_all(outputs, inputs, litert)


@needs_jax
def test_jax_after_keras_on_tensorflow_is_one_line_naming_the_fix() -> None:
    code = (
        "import keras\nfrom eyeblink.detect import create_detector\nfrom eyeblink.errors import "
        "EyeblinkError\n"
        "try:\n    create_detector('jax')\nexcept EyeblinkError as exc:\n    "
        "print(type(exc).__name__, exc)\n"
    )
    proc = _python(code, env={"KERAS_BACKEND": "tensorflow"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.strip()
    assert out.startswith("BackendUnavailableError")
    assert (
        "already imported Keras on tensorflow" in out
        and "its own process" in out
        and "KERAS_BACKEND=jax" in out
    )


def test_keras_graph_imports_no_keras() -> None:
    """The model definition picks no Keras backend at import: the backend module does, first."""
    proc = _python("import sys, eyeblink.detect.keras_graph; print('keras' in sys.modules)")
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]
