"""BlazeFace rebuilt as a Keras functional model from the ``.tflite`` graph and weights.

Shared by the ``tensorflow`` (CPU/GPU, XLA) and ``ipu`` (Graphcore) backends. Each TFLite operator
read by :func:`eyeblink.detect.tflite_graph.read_tflite_graph` becomes one Keras layer, in the
same order, and the layer weights are the ``.tflite`` constants (float16 in the file, widened
exactly to float32):

==================== =====================================================================
TFLite               Keras
==================== =====================================================================
CONV_2D              ``Conv2D``; kernel ``[O, KH, KW, I]`` -> ``[KH, KW, I, O]``
DEPTHWISE_CONV_2D    ``DepthwiseConv2D``; kernel ``[1, KH, KW, I*M]`` -> ``[KH, KW, I, M]``
ADD                  ``Add``
RELU / RELU6         ``ReLU`` / ``ReLU(max_value=6)`` (also for fused activations)
PRELU                ``PReLU``; per-channel alphas shared over H and W
MAX_POOL_2D          ``MaxPooling2D``
PAD                  :class:`TensorPad` (``tf.pad``; BlazeFace pads *channels* with zeros so
                     that a residual branch matches the wider main branch)
RESHAPE              ``Reshape`` of the per-image part; TFLite bakes the batch (1) into the
                     target shape, Keras keeps the batch dimension, so outputs come back in
                     canonical per-image order ``[B, 896, ...]`` for any batch size (unlike
                     LiteRT with a resized input, which groups them per grid)
CONCATENATION        ``Concatenate`` on the same axis
==================== =====================================================================

Padding: TFLite's ``SAME`` is TensorFlow's ``SAME`` (total padding ``max((out-1)*s + k - in, 0)``,
the odd pixel at the bottom/right), so ``padding="same"`` maps one to one; the stride-2
convolutions of BlazeFace (128 -> 64 etc.) pad only at the bottom/right. Ports to other
frameworks (PyTorch pads symmetrically) need explicit asymmetric pads there; TF does not.

The model uses only ``tf.keras`` layers plus one small custom layer, so it builds both on
TensorFlow 2.x with Keras 3 and on Graphcore's TensorFlow 2 (tf.keras 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.detect import INPUT_SIZE, NUM_ANCHORS, NUM_COORDS
from eyeblink.detect._tf import tf
from eyeblink.detect.tflite_graph import GraphOp, TFLiteGraph, read_tflite_graph
from eyeblink.errors import ModelFileError

__all__ = ["TensorPad", "build_keras_blazeface"]

keras = tf.keras


class TensorPad(keras.layers.Layer):  # type: ignore[name-defined]
    """``tf.pad`` with constant zeros over the non-batch axes (TFLite ``PAD``)."""

    def __init__(self, paddings: list[list[int]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.paddings = [[int(a), int(b)] for a, b in paddings]
        if self.paddings[0] != [0, 0]:
            raise ValueError(f"padding the batch axis is not supported, got {self.paddings[0]}")

    def call(self, inputs: Any) -> Any:
        return tf.pad(inputs, self.paddings)

    def compute_output_shape(self, input_shape: Any) -> tuple[int | None, ...]:
        dims = list(input_shape)
        return tuple(d if d is None else d + a + b for d, (a, b) in zip(dims, self.paddings, strict=True))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "paddings": self.paddings}


def _layer_name(graph: TFLiteGraph, op: GraphOp, seen: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", graph.names[op.outputs[0]]).strip("_") or op.kind.lower()
    name, n = base, 1
    while name in seen:
        n += 1
        name = f"{base}_{n}"
    seen.add(name)
    return name


def _activation_layer(activation: str | None, name: str) -> Any:
    if activation is None:
        return None
    if activation == "relu":
        return keras.layers.ReLU(name=name)
    if activation == "relu6":
        return keras.layers.ReLU(max_value=6.0, name=name)
    raise ModelFileError(f"unsupported activation {activation!r}")


def build_keras_blazeface(
    model_path: Path | str | None = None, *, graph: TFLiteGraph | None = None, batch_size: int | None = None
) -> Any:
    """The BlazeFace network of ``model_path`` (default: the shipped short-range model) in Keras.

    Returns a ``tf.keras.Model`` mapping float32 ``[B, 128, 128, 3]`` in [-1, 1] to
    ``(regressors [B, 896, 16], scores [B, 896])`` (logits), canonical anchor order.
    ``batch_size`` fixes the batch dimension of the input (the IPU needs static shapes);
    ``None`` leaves it dynamic. The caller verifies the model file's sha256.
    """
    if graph is None:
        if model_path is None:
            from eyeblink.weights import blazeface_path

            model_path = blazeface_path()
        graph = read_tflite_graph(model_path)
    in_shape = graph.shapes[graph.input]
    if in_shape[1:] != (INPUT_SIZE, INPUT_SIZE, 3):
        raise ModelFileError(f"model input has shape {list(in_shape)}, expected [1, {INPUT_SIZE}, {INPUT_SIZE}, 3]")
    if set(graph.outputs) != {"regressors", "classificators"}:
        raise ModelFileError(f"model outputs are {sorted(graph.outputs)}, expected ['classificators', 'regressors']")

    inp = keras.Input(shape=(INPUT_SIZE, INPUT_SIZE, 3), batch_size=batch_size, dtype="float32", name="input")
    values: dict[int, Any] = {graph.input: inp}
    weights: list[tuple[Any, list[np.ndarray]]] = []
    seen: set[str] = set()

    def tensor(index: int) -> Any:
        if index not in values:
            raise ModelFileError(f"tensor {graph.names.get(index, index)!r} is used before it is computed "
                                 "(or is a constant where a run-time tensor is expected)")
        return values[index]

    for op in graph.ops:
        name = _layer_name(graph, op, seen)
        o = op.options
        act = None
        if op.kind == "CONV_2D":
            kernel = graph.constants[op.inputs[1]]  # [O, KH, KW, I]
            bias = graph.constants.get(op.inputs[2]) if len(op.inputs) > 2 else None
            layer = keras.layers.Conv2D(kernel.shape[0], kernel.shape[1:3], strides=o["strides"], padding=o["padding"],
                                        dilation_rate=o["dilation"], use_bias=bias is not None, name=name)
            out = layer(tensor(op.inputs[0]))
            w = [kernel.transpose(1, 2, 3, 0)] + ([bias] if bias is not None else [])
            weights.append((layer, w))
            act = o["activation"]
        elif op.kind == "DEPTHWISE_CONV_2D":
            kernel = graph.constants[op.inputs[1]]  # [1, KH, KW, I*M]
            bias = graph.constants.get(op.inputs[2]) if len(op.inputs) > 2 else None
            m = o["depth_multiplier"]
            cin = graph.shapes[op.inputs[0]][-1]
            if kernel.shape[-1] != cin * m:
                raise ModelFileError(f"{name}: depthwise kernel has {kernel.shape[-1]} channels, expected {cin}x{m}")
            layer = keras.layers.DepthwiseConv2D(kernel.shape[1:3], strides=o["strides"], padding=o["padding"],
                                                 depth_multiplier=m, dilation_rate=o["dilation"],
                                                 use_bias=bias is not None, name=name)
            out = layer(tensor(op.inputs[0]))
            w = [kernel.reshape(kernel.shape[1], kernel.shape[2], cin, m)] + ([bias] if bias is not None else [])
            weights.append((layer, w))
            act = o["activation"]
        elif op.kind == "ADD":
            out = keras.layers.Add(name=name)([tensor(op.inputs[0]), tensor(op.inputs[1])])
            act = o["activation"]
        elif op.kind == "RELU":
            out = keras.layers.ReLU(name=name)(tensor(op.inputs[0]))
        elif op.kind == "RELU6":
            out = keras.layers.ReLU(max_value=6.0, name=name)(tensor(op.inputs[0]))
        elif op.kind == "PRELU":
            alpha = graph.constants[op.inputs[1]]
            x_shape = graph.shapes[op.inputs[0]]
            channels = x_shape[-1]
            if alpha.size == channels:
                layer = keras.layers.PReLU(shared_axes=[1, 2], name=name)
                w_alpha = alpha.reshape(1, 1, channels)
            else:
                layer = keras.layers.PReLU(name=name)
                w_alpha = np.broadcast_to(alpha, x_shape[1:]).copy()
            out = layer(tensor(op.inputs[0]))
            weights.append((layer, [w_alpha.astype(np.float32)]))
        elif op.kind == "MAX_POOL_2D":
            out = keras.layers.MaxPooling2D(o["pool_size"], strides=o["strides"], padding=o["padding"],
                                            name=name)(tensor(op.inputs[0]))
            act = o["activation"]
        elif op.kind == "PAD":
            paddings = o["paddings"].tolist()
            if np.any(o["paddings"] < 0):
                raise ModelFileError(f"{name}: negative paddings {paddings}")
            out = TensorPad(paddings, name=name)(tensor(op.inputs[0]))
        elif op.kind == "RESHAPE":
            new_shape = o["new_shape"]
            if not new_shape or new_shape[0] != 1:
                raise ModelFileError(f"{name}: RESHAPE to {list(new_shape)} does not keep a leading batch of 1")
            out = keras.layers.Reshape(tuple(new_shape[1:]), name=name)(tensor(op.inputs[0]))
        elif op.kind == "CONCATENATION":
            out = keras.layers.Concatenate(axis=o["axis"], name=name)([tensor(i) for i in op.inputs])
            act = o["activation"]
        else:  # pragma: no cover - read_tflite_graph rejects these
            raise ModelFileError(f"unsupported operator {op.kind}")
        if act is not None:
            out = _activation_layer(act, f"{name}_{act}")(out)
        values[op.outputs[0]] = out

    regressors = tensor(graph.outputs["regressors"])
    scores = keras.layers.Reshape((NUM_ANCHORS,), name="scores")(tensor(graph.outputs["classificators"]))
    model = keras.Model(inputs=inp, outputs=[regressors, scores], name="blazeface")
    for layer, w in weights:
        layer.set_weights([np.ascontiguousarray(a, dtype=np.float32) for a in w])
    out_shape = tuple(model.outputs[0].shape[1:])
    if out_shape != (NUM_ANCHORS, NUM_COORDS):
        raise ModelFileError(
            f"rebuilt model gives regressors of shape {out_shape}, expected ({NUM_ANCHORS}, {NUM_COORDS})"
        )
    return model
