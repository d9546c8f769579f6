"""The networks rebuilt as Keras functional models from their ``.tflite`` graph and weights.

One model definition for every accelerator runtime: BlazeFace (the detector), MediaPipe's face mesh
and its iris network (the eye model's networks) are each read by
:func:`eyeblink.detect.tflite_graph.read_tflite_graph` and rebuilt here with Keras layers and
``keras.ops`` only, so the same code runs under Keras 3 with ``KERAS_BACKEND=tensorflow``
(:mod:`eyeblink.detect.tensorflow`, XLA) or ``KERAS_BACKEND=jax`` (:mod:`eyeblink.detect.jax`,
XLA via ``jax.jit``), and under Graphcore's TensorFlow 2 (tf.keras 2, :mod:`eyeblink.detect.ipu`).
Each TFLite operator becomes one Keras layer, in the same order, and the layer weights are the
``.tflite`` constants (float16 in the BlazeFace and mesh files, widened exactly to float32):

==================== =====================================================================
TFLite               Keras
==================== =====================================================================
CONV_2D              ``Conv2D``; kernel ``[O, KH, KW, I]`` -> ``[KH, KW, I, O]``
DEPTHWISE_CONV_2D    ``DepthwiseConv2D``; kernel ``[1, KH, KW, I*M]`` -> ``[KH, KW, I, M]``
ADD                  ``Add``
RELU / RELU6         ``ReLU`` / ``ReLU(max_value=6)`` (also for fused activations)
PRELU                ``PReLU``; per-channel alphas shared over H and W
MAX_POOL_2D          ``MaxPooling2D``
PAD                  :class:`TensorPad` (``keras.ops.pad``; these networks pad *channels* with
                     zeros so that a residual branch matches the wider main branch)
RESHAPE              ``Reshape`` of the per-image part; TFLite bakes the batch (1) into the
                     target shape, Keras keeps the batch dimension, so outputs come back in
                     canonical per-image order ``[B, ...]`` for any batch size (unlike
                     LiteRT with a resized input, which groups them per grid)
CONCATENATION        ``Concatenate`` on the same axis
==================== =====================================================================

Padding: TFLite's ``SAME`` is TensorFlow's and XLA's ``SAME`` (total padding
``max((out-1)*s + k - in, 0)``, the odd pixel at the bottom/right), so ``padding="same"`` maps one
to one on both Keras backends. Ports to frameworks that pad symmetrically (PyTorch) would need
explicit asymmetric pads at the stride-2 convolutions.

Keras is imported inside the builders, never at module import: which Keras backend a process runs
is fixed when Keras is first imported (``KERAS_BACKEND``), and the backend modules choose it first
(:func:`use_keras_backend`).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.detect import INPUT_SIZE, NUM_ANCHORS, NUM_COORDS, AcceleratorOptions, check_batch
from eyeblink.detect.tflite_graph import GraphOp, TFLiteGraph, read_tflite_graph
from eyeblink.errors import BackendUnavailableError, ModelFileError

__all__ = [
    "NETWORKS",
    "BucketedRunner",
    "KerasDetector",
    "NetworkSpec",
    "batch_buckets",
    "build_keras_blazeface",
    "build_keras_face_mesh",
    "build_keras_iris",
    "build_keras_network",
    "keras_backend_in_use",
    "use_keras_backend",
]


# --------------------------------------------------------------------------- which Keras backend


def keras_backend_in_use() -> str | None:
    """The backend of the Keras already imported in this process, or None when Keras is not
    imported yet."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    try:
        return str(keras.backend.backend())
    except AttributeError:  # a partially imported keras
        return None


def use_keras_backend(backend: str, *, eyeblink_backend: str) -> Any:
    """Import Keras with ``backend`` (``"tensorflow"`` or ``"jax"``) and return the module.

    Keras fixes its backend when it is first imported in a process (from ``KERAS_BACKEND``), and a
    process can hold only one. Before that first import this sets ``KERAS_BACKEND`` for the
    process (the detector backend the user chose wins over a ``KERAS_BACKEND`` in the environment);
    afterwards a different backend is a :class:`~eyeblink.errors.BackendUnavailableError` naming the
    fix. ``eyeblink_backend`` is the detector backend asking, for that message.
    """
    current = keras_backend_in_use()
    if current is None:
        os.environ["KERAS_BACKEND"] = backend
        current = str(_keras().backend.backend())
    if current != backend:
        raise BackendUnavailableError(
            f"detector backend {eyeblink_backend!r} needs Keras on {backend}, but this process "
            "already imported "
            f"Keras on {current} (Keras holds one backend per process); run the "
            f"{eyeblink_backend!r} backend in "
            f"its own process, or start it with KERAS_BACKEND={backend}"
        )
    return _keras()


def _keras() -> Any:
    """The Keras module: Keras 3 (``import keras``), or tf.keras where only TensorFlow's own copy
    exists (older Graphcore TensorFlow 2 builds ship no standalone ``keras`` package)."""
    try:
        import keras
    except ImportError:  # pragma: no cover - Graphcore's TensorFlow 2 without the keras package
        from tensorflow import keras
    return keras


# --------------------------------------------------------------------------- the layer for PAD


@functools.cache
def _pad_layer_class() -> Any:
    """:class:`TensorPad`, created on first use (it subclasses the Keras imported then)."""
    keras = _keras()

    ops = getattr(keras, "ops", None)
    if ops is not None:  # Keras 3, any backend
        pad = ops.pad
    else:  # pragma: no cover - tf.keras 2 (Graphcore's TensorFlow 2), which has no keras.ops
        import tensorflow as tf

        pad = tf.pad

    class TensorPad(keras.layers.Layer):  # type: ignore[name-defined]
        """Constant zero padding over the non-batch axes (TFLite ``PAD``)."""

        def __init__(self, paddings: list[list[int]], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.paddings = [[int(a), int(b)] for a, b in paddings]
            if self.paddings[0] != [0, 0]:
                raise ValueError(f"padding the batch axis is not supported, got {self.paddings[0]}")

        def call(self, inputs: Any) -> Any:
            return pad(inputs, self.paddings)

        def compute_output_shape(self, input_shape: Any) -> tuple[int | None, ...]:
            dims = list(input_shape)
            return tuple(
                d if d is None else d + a + b for d, (a, b) in zip(dims, self.paddings, strict=True)
            )

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "paddings": self.paddings}

    return TensorPad


# --------------------------------------------------------------------------- the builder


def _layer_name(graph: TFLiteGraph, op: GraphOp, seen: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", graph.names[op.outputs[0]]).strip("_") or op.kind.lower()
    name, n = base, 1
    while name in seen:
        n += 1
        name = f"{base}_{n}"
    seen.add(name)
    return name


def build_keras_network(
    graph: TFLiteGraph, *, batch_size: int | None = None, input_name: str = "input"
) -> tuple[Any, dict[str, Any], list[tuple[Any, list[np.ndarray]]]]:
    """The layers of ``graph`` applied to a new Keras input: ``(input, {output name: tensor},
    weights)``.

    The input keeps the graph's per-image shape with batch ``batch_size`` (``None``: dynamic).
    ``weights`` pairs each weighted layer with its arrays; set them (``layer.set_weights``) once the
    model around these tensors is built (:func:`_finish`).
    """
    keras = _keras()

    layers = keras.layers
    in_shape = graph.shapes[graph.input]
    inp = keras.Input(
        shape=tuple(in_shape[1:]), batch_size=batch_size, dtype="float32", name=input_name
    )
    values: dict[int, Any] = {graph.input: inp}
    weights: list[tuple[Any, list[np.ndarray]]] = []
    seen: set[str] = set()

    def tensor(index: int) -> Any:
        if index not in values:
            raise ModelFileError(
                f"tensor {graph.names.get(index, index)!r} is used before it is computed "
                "(or is a constant where a run-time tensor is expected)"
            )
        return values[index]

    def activation(kind: str | None, name: str) -> Any:
        if kind == "relu":
            return layers.ReLU(name=name)
        if kind == "relu6":
            return layers.ReLU(max_value=6.0, name=name)
        raise ModelFileError(f"unsupported activation {kind!r}")

    for op in graph.ops:
        name = _layer_name(graph, op, seen)
        o = op.options
        act = None
        if op.kind == "CONV_2D":
            kernel = graph.constants[op.inputs[1]]  # [O, KH, KW, I]
            bias = graph.constants.get(op.inputs[2]) if len(op.inputs) > 2 else None
            layer = layers.Conv2D(
                kernel.shape[0],
                kernel.shape[1:3],
                strides=o["strides"],
                padding=o["padding"],
                dilation_rate=o["dilation"],
                use_bias=bias is not None,
                name=name,
            )
            out = layer(tensor(op.inputs[0]))
            weights.append(
                (layer, [kernel.transpose(1, 2, 3, 0)] + ([bias] if bias is not None else []))
            )
            act = o["activation"]
        elif op.kind == "DEPTHWISE_CONV_2D":
            kernel = graph.constants[op.inputs[1]]  # [1, KH, KW, I*M]
            bias = graph.constants.get(op.inputs[2]) if len(op.inputs) > 2 else None
            m = o["depth_multiplier"]
            cin = graph.shapes[op.inputs[0]][-1]
            if kernel.shape[-1] != cin * m:
                raise ModelFileError(
                    f"{name}: depthwise kernel has {kernel.shape[-1]} channels, expected {cin}x{m}"
                )
            layer = layers.DepthwiseConv2D(
                kernel.shape[1:3],
                strides=o["strides"],
                padding=o["padding"],
                depth_multiplier=m,
                dilation_rate=o["dilation"],
                use_bias=bias is not None,
                name=name,
            )
            out = layer(tensor(op.inputs[0]))
            w = [kernel.reshape(kernel.shape[1], kernel.shape[2], cin, m)] + (
                [bias] if bias is not None else []
            )
            weights.append((layer, w))
            act = o["activation"]
        elif op.kind == "ADD":
            out = layers.Add(name=name)([tensor(op.inputs[0]), tensor(op.inputs[1])])
            act = o["activation"]
        elif op.kind == "RELU":
            out = layers.ReLU(name=name)(tensor(op.inputs[0]))
        elif op.kind == "RELU6":
            out = layers.ReLU(max_value=6.0, name=name)(tensor(op.inputs[0]))
        elif op.kind == "PRELU":
            alpha = graph.constants[op.inputs[1]]
            x_shape = graph.shapes[op.inputs[0]]
            channels = x_shape[-1]
            if alpha.size == channels:
                layer = layers.PReLU(shared_axes=[1, 2], name=name)
                w_alpha = alpha.reshape(1, 1, channels)
            else:
                layer = layers.PReLU(name=name)
                w_alpha = np.broadcast_to(alpha, x_shape[1:]).copy()
            out = layer(tensor(op.inputs[0]))
            weights.append((layer, [w_alpha.astype(np.float32)]))
        elif op.kind == "MAX_POOL_2D":
            out = layers.MaxPooling2D(
                o["pool_size"], strides=o["strides"], padding=o["padding"], name=name
            )(tensor(op.inputs[0]))
            act = o["activation"]
        elif op.kind == "PAD":
            paddings = o["paddings"].tolist()
            if np.any(o["paddings"] < 0):
                raise ModelFileError(f"{name}: negative paddings {paddings}")
            out = _pad_layer_class()(paddings, name=name)(tensor(op.inputs[0]))
        elif op.kind == "RESHAPE":
            new_shape = o["new_shape"]
            if not new_shape or new_shape[0] != 1:
                raise ModelFileError(
                    f"{name}: RESHAPE to {list(new_shape)} does not keep a leading batch of 1"
                )
            out = layers.Reshape(tuple(new_shape[1:]), name=name)(tensor(op.inputs[0]))
        elif op.kind == "CONCATENATION":
            out = layers.Concatenate(axis=o["axis"], name=name)([tensor(i) for i in op.inputs])
            act = o["activation"]
        else:  # pragma: no cover - read_tflite_graph rejects these
            raise ModelFileError(f"unsupported operator {op.kind}")
        if act is not None:
            out = activation(act, f"{name}_{act}")(out)
        values[op.outputs[0]] = out
    return inp, {key: tensor(index) for key, index in graph.outputs.items()}, weights


def _finish(
    inp: Any, outputs: list[Any], weights: list[tuple[Any, list[np.ndarray]]], name: str
) -> Any:
    keras = _keras()

    model = keras.Model(inputs=inp, outputs=outputs, name=name)
    for layer, w in weights:
        layer.set_weights([np.ascontiguousarray(a, dtype=np.float32) for a in w])
    return model


def _graph(model_path: Path | str | None, graph: TFLiteGraph | None, default: str) -> TFLiteGraph:
    if graph is not None:
        return graph
    if model_path is None:
        from eyeblink import weights

        model_path = getattr(weights, default)()
    return read_tflite_graph(model_path)


def _check_input(graph: TFLiteGraph, size: int, what: str) -> None:
    in_shape = graph.shapes[graph.input]
    if tuple(in_shape[1:]) != (size, size, 3):
        raise ModelFileError(
            f"{what} model input has shape {list(in_shape)}, expected [1, {size}, {size}, 3]"
        )


def _outputs_by_size(graph: TFLiteGraph, sizes: tuple[int, ...], what: str) -> list[str]:
    """The graph's output names ordered as ``sizes`` (values per image), which must match one to
    one."""
    per_image = {key: int(np.prod(graph.shapes[index][1:])) for key, index in graph.outputs.items()}
    names = []
    for size in sizes:
        match = [k for k, v in per_image.items() if v == size]
        if len(match) != 1:
            raise ModelFileError(
                f"{what} model outputs {sorted(per_image.values())} values per image, "
                f"expected {sorted(sizes)}"
            )
        names.append(match[0])
    return names


# --------------------------------------------------------------------------- the three networks


def build_keras_blazeface(
    model_path: Path | str | None = None,
    *,
    graph: TFLiteGraph | None = None,
    batch_size: int | None = None,
) -> Any:
    """The BlazeFace network of ``model_path`` (default: the shipped short-range model) in Keras.

    Returns a Keras model mapping float32 ``[B, 128, 128, 3]`` in [-1, 1] to
    ``(regressors [B, 896, 16], scores [B, 896])`` (logits), canonical anchor order.
    ``batch_size`` fixes the batch dimension of the input (the IPU needs static shapes);
    ``None`` leaves it dynamic. The caller verifies the model file's sha256.
    """
    keras = _keras()
    graph = _graph(model_path, graph, "blazeface_path")
    _check_input(graph, INPUT_SIZE, "face")
    if set(graph.outputs) != {"regressors", "classificators"}:
        raise ModelFileError(
            f"model outputs are {sorted(graph.outputs)}, expected ['classificators', 'regressors']"
        )
    inp, outs, weights = build_keras_network(graph, batch_size=batch_size)
    scores = keras.layers.Reshape((NUM_ANCHORS,), name="scores")(outs["classificators"])
    model = _finish(inp, [outs["regressors"], scores], weights, "blazeface")
    out_shape = tuple(model.outputs[0].shape[1:])
    if out_shape != (NUM_ANCHORS, NUM_COORDS):
        raise ModelFileError(
            f"rebuilt model gives regressors of shape {out_shape}, expected ({NUM_ANCHORS}, "
            f"{NUM_COORDS})"
        )
    return model


def build_keras_face_mesh(
    model_path: Path | str | None = None,
    *,
    graph: TFLiteGraph | None = None,
    batch_size: int | None = None,
) -> Any:
    """MediaPipe's face mesh (default: the shipped ``face_landmark.tflite``) in Keras.

    float32 ``[B, 192, 192, 3]`` RGB in [0, 1] -> ``(landmarks [B, 1404], face logit [B, 1])``:
    468 (x, y, z) points in crop pixels and the face-presence logit, as LiteRT's two outputs.
    """
    keras = _keras()

    graph = _graph(model_path, graph, "face_mesh_path")
    _check_input(graph, 192, "face mesh")
    points, logit = _outputs_by_size(graph, (1404, 1), "face mesh")
    inp, outs, weights = build_keras_network(graph, batch_size=batch_size)
    flat = [
        keras.layers.Reshape((n,), name=f"{key}_flat")(outs[key])
        for key, n in ((points, 1404), (logit, 1))
    ]
    return _finish(inp, flat, weights, "face_mesh")


def build_keras_iris(
    model_path: Path | str | None = None,
    *,
    graph: TFLiteGraph | None = None,
    batch_size: int | None = None,
) -> Any:
    """MediaPipe's iris network (default: the shipped ``iris_landmark.tflite``) in Keras.

    float32 ``[B, 64, 64, 3]`` RGB in [0, 1] -> ``(eye contour and brows [B, 213], iris [B, 15])``:
    71 and 5 (x, y, z) points in crop pixels, as LiteRT's two outputs.
    """
    graph = _graph(model_path, graph, "iris_path")
    _check_input(graph, 64, "iris")
    contour, iris = _outputs_by_size(graph, (213, 15), "iris")
    inp, outs, weights = build_keras_network(graph, batch_size=batch_size)
    return _finish(inp, [outs[contour], outs[iris]], weights, "iris")


@dataclass(frozen=True)
class NetworkSpec:
    """A network rebuilt here: its input side and value range, the weights function giving its
    shipped (sha256-verified) file, and its builder."""

    name: str
    input_size: int
    value_range: tuple[float, float]
    path_attr: str  # the function of eyeblink.weights that gives the shipped file
    builder: Any

    def default_path(self) -> Path:
        """The shipped file, its sha256 verified."""
        from eyeblink import weights

        path = Path(getattr(weights, self.path_attr)())
        if self.name == "blazeface":  # blazeface_path() leaves the check to the backends
            weights.verify_sha256(path, weights.BLAZEFACE_SHA256)
        return path

    def build(self, model_path: Path | str | None = None, *, batch_size: int | None = None) -> Any:
        return self.builder(
            model_path if model_path is not None else self.default_path(), batch_size=batch_size
        )


#: The networks rebuilt from ``weights/`` by name (``eyeblink bench detector --network``).
NETWORKS: dict[str, NetworkSpec] = {
    "blazeface": NetworkSpec(
        "blazeface", 128, (-1.0, 1.0), "blazeface_path", build_keras_blazeface
    ),
    "mesh": NetworkSpec("mesh", 192, (0.0, 1.0), "face_mesh_path", build_keras_face_mesh),
    "iris": NetworkSpec("iris", 64, (0.0, 1.0), "iris_path", build_keras_iris),
}


# --------------------------------------------------------------------------- running at fixed batch
# sizes


def batch_buckets(batch_size: int) -> tuple[int, ...]:
    """The batch shapes compiled for ``batch_size``: powers of two below it, and itself."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out = []
    b = 1
    while b < batch_size:
        out.append(b)
        b *= 2
    out.append(batch_size)
    return tuple(out)


class BucketedRunner:
    """Runs a network on batches of any size through programs compiled for fixed batch shapes.

    XLA compiles one program per input shape (seconds each on a CPU). A batch of ``b`` images runs
    at the smallest *bucket* ``>= b`` among :func:`batch_buckets` of ``batch_size``, zero-padded,
    the padding dropped from the result; a batch larger than ``batch_size`` runs in chunks. So at
    most ``log2(batch_size) + 1`` programs are compiled, each once, and a single image costs a
    batch-1 program, not a padded full batch. Subclasses implement :meth:`_execute` (one padded
    chunk in, one float32 numpy array per output back). :attr:`compile_seconds` records the
    first-call time per bucket.
    """

    def __init__(self, input_shape: tuple[int, ...], batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.input_shape = tuple(int(d) for d in input_shape)
        self.batch_size = int(batch_size)
        self.buckets = batch_buckets(self.batch_size)
        #: seconds of the first call per compiled batch shape (trace + XLA compile + one run)
        self.compile_seconds: dict[int, float] = {}

    def _execute(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        raise NotImplementedError

    def check(self, batch: np.ndarray) -> None:
        """``ValueError`` unless ``batch`` is float32 ``[B >= 1, *input_shape]``."""
        check_batch(batch, self.input_shape)

    def bucket(self, b: int) -> int:
        for size in self.buckets:
            if size >= b:
                return size
        return self.batch_size

    def chunks(self, batch: np.ndarray) -> list[tuple[np.ndarray, int]]:
        """``batch`` as padded chunks ``(x [bucket, ...], valid rows)``."""
        out = []
        for start in range(0, batch.shape[0], self.batch_size):
            chunk = batch[start : start + self.batch_size]
            n = chunk.shape[0]
            size = self.bucket(n)
            if size == n:
                out.append((np.ascontiguousarray(chunk), n))
            else:
                padded = np.zeros((size, *self.input_shape), np.float32)
                padded[:n] = chunk
                out.append((padded, n))
        return out

    def run_chunk(self, x: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
        """One padded chunk through its program; the first ``n`` rows of each output."""
        size = int(x.shape[0])
        first = size not in self.compile_seconds
        t0 = time.perf_counter()
        outs = tuple(o[:n] for o in self._execute(x))
        if first:
            self.compile_seconds[size] = time.perf_counter() - t0
        return outs

    def run(self, batch: np.ndarray) -> tuple[np.ndarray, ...]:
        """Every output of the network for ``batch`` (checked, chunked and padded as above)."""
        self.check(batch)
        parts = [self.run_chunk(x, n) for x, n in self.chunks(batch)]
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))

    def warmup(self, sizes: Any = None) -> dict[int, float]:
        """Compile the given batch shapes now (default: every bucket); returns seconds per shape."""
        for size in sizes if sizes is not None else self.buckets:
            bucket = self.bucket(int(size))
            if bucket not in self.compile_seconds:
                self.run_chunk(np.zeros((bucket, *self.input_shape), np.float32), bucket)
        return dict(self.compile_seconds)


class KerasDetector(Closing):
    """What the Keras backends' BlazeFace detectors share
    (:class:`~eyeblink.detect.jax.JaxDetector`,
    :class:`~eyeblink.detect.tensorflow.TensorFlowDetector`): the model file check, the bucketed
    network (:meth:`_network`, the backend's part), and the :class:`~eyeblink.detect.Detector` API
    on it. Implements :class:`eyeblink.detect.Detector`. Not thread-safe.
    """

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        num_threads: int = 1,
        batch_size: int = 1,
        accelerator: AcceleratorOptions | None = None,
    ) -> None:
        from eyeblink.weights import face_model

        opts = accelerator or AcceleratorOptions()
        path = face_model(model_path)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_path = path
        self.num_threads = int(num_threads)
        self.batch_size = int(batch_size)
        self.jit_compile = opts.jit_compile
        self.prefetch_depth = opts.prefetch_depth
        self._net: Any = self._network(path, opts)
        self.device: str = self._net.device
        self.buckets = self._net.buckets
        #: seconds of the first call per compiled batch shape (trace + XLA compile + one run)
        self.compile_seconds: dict[int, float] = self._net.compile_seconds

    def _network(self, path: Path, opts: AcceleratorOptions) -> Any:
        """The backend's :class:`BucketedRunner` of BlazeFace (``self.batch_size`` is its largest
        batch)."""
        raise NotImplementedError

    def _require_open(self) -> Any:
        if self._net is None:
            raise RuntimeError(f"{type(self).__name__} is closed")
        return self._net

    def warmup(self, sizes: Iterable[int] | None = None) -> dict[int, float]:
        """Compile the given batch shapes now (default: every bucket); returns seconds per shape."""
        return dict(self._require_open().warmup(sizes))

    def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run the network on float32 ``[B, 128, 128, 3]`` in [-1, 1].

        Returns ``(regressors [B, 896, 16], scores [B, 896])`` float32 logits in canonical anchor
        order (fresh arrays).
        """
        regressors, scores = self._require_open().run(batch)
        return regressors, scores

    def close(self) -> None:
        """Drop the model and compiled functions; further calls raise ``RuntimeError``.
        Idempotent."""
        self._net = None
