"""Read a BlazeFace ``.tflite`` into a plain, framework-free description of its graph.

The accelerator backends (``tensorflow``, ``ipu``) rebuild the network in Keras with the weights
of the shipped ``.tflite``: there is one copy of the weights (``weights/``), never a second,
converted one. This module does the reading, with numpy only: it parses the flatbuffer with the
TFLite schema that ``ai_edge_litert`` ships (``ai_edge_litert.schema_py_generated``) and returns a
:class:`TFLiteGraph`: the operators in execution order with their options (strides, padding,
fused activation, pool size, target shape, axis), every constant tensor as a numpy array, and the
graph's input and named outputs.

Why the flatbuffer and not the interpreter: ``Interpreter._get_ops_details()`` lists operators and
tensor indices but not their *options* (stride, ``SAME``/``VALID``, fused activation), and those
decide the graph. The interpreter is still used by the tests as the reference for the outputs.

Weights in the short-range model are stored as float16 and widened by ``DEQUANTIZE`` operators at
run time; here those operators are folded away (float16 -> float32 is exact), so the consumers see
float32 constants. Supported operators are the ones BlazeFace-style detectors use:
``CONV_2D``, ``DEPTHWISE_CONV_2D``, ``ADD``, ``RELU``, ``RELU6``, ``PRELU``, ``MAX_POOL_2D``,
``PAD``, ``RESHAPE``, ``CONCATENATION`` (plus ``DEQUANTIZE`` of constants). Anything else raises
:class:`~eyeblink.errors.ModelFileError` naming the operator, so a different model fails at load,
not with wrong numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.errors import ModelFileError

__all__ = ["SUPPORTED_OPS", "GraphOp", "TFLiteGraph", "read_tflite_graph"]

#: Operators :func:`read_tflite_graph` understands (``DEQUANTIZE`` of a constant is folded away).
SUPPORTED_OPS = frozenset(
    {
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "ADD",
        "RELU",
        "RELU6",
        "PRELU",
        "MAX_POOL_2D",
        "PAD",
        "RESHAPE",
        "CONCATENATION",
    }
)

_ACTIVATIONS = {0: None, 1: "relu", 3: "relu6"}  # TFLite ActivationFunctionType -> name
_PADDINGS = {0: "same", 1: "valid"}  # TFLite Padding -> Keras padding
_NUMPY_TYPES = {
    0: np.float32,
    1: np.float16,
    2: np.int32,
    3: np.uint8,
    4: np.int64,
    9: np.int8,
    10: np.float64,
}


@dataclass(frozen=True)
class GraphOp:
    """One operator: its kind, the tensor indices it reads and writes, and its options.

    ``options`` keys by kind: convolutions ``strides`` (h, w), ``padding`` ('same'/'valid'),
    ``dilation`` (h, w), ``activation`` (None/'relu'/'relu6'), depthwise also
    ``depth_multiplier``; ``MAX_POOL_2D`` ``pool_size``, ``strides``, ``padding``, ``activation``;
    ``ADD``/``CONCATENATION`` ``activation`` (and ``axis``); ``RESHAPE`` ``new_shape``;
    ``PAD`` ``paddings`` ([rank, 2]).
    """

    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TFLiteGraph:
    """A single-subgraph TFLite model: operators in execution order, constants, shapes, names."""

    ops: tuple[GraphOp, ...]
    constants: dict[int, np.ndarray]  # tensor index -> value (float tensors as float32)
    shapes: dict[int, tuple[int, ...]]  # tensor index -> static shape (batch as stored, usually 1)
    names: dict[int, str]
    input: int  # the one input tensor
    outputs: dict[str, int]  # output name -> tensor index

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.ops:
            counts[op.kind] = counts.get(op.kind, 0) + 1
        return counts


def _schema() -> Any:
    try:
        from ai_edge_litert import schema_py_generated as schema
    except ImportError as exc:  # pragma: no cover - ai-edge-litert is a core dependency
        raise ModelFileError(
            "cannot read .tflite files: ai_edge_litert's flatbuffer schema is unavailable "
            f"({exc}); "
            'pip install "ai-edge-litert>=1.2"'
        ) from exc
    return schema


def _enum_names(enum_cls: Any) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def _buffer_array(model: Any, tensor: Any) -> np.ndarray | None:
    """The constant data of ``tensor``, or None for a run-time tensor."""
    buf = model.buffers[tensor.buffer] if 0 <= tensor.buffer < len(model.buffers) else None
    if buf is None or buf.data is None or len(buf.data) == 0:
        return None
    dtype = _NUMPY_TYPES.get(int(tensor.type))
    if dtype is None:
        raise ModelFileError(
            f"constant tensor {tensor.name!r} has unsupported TFLite type {tensor.type}"
        )
    shape = tuple(int(d) for d in (tensor.shape if tensor.shape is not None else ()))
    return (
        np.frombuffer(bytes(np.asarray(buf.data, dtype=np.uint8)), dtype=dtype)
        .reshape(shape)
        .copy()
    )


def _options(kind: str, opts: Any) -> dict[str, Any]:
    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        out: dict[str, Any] = {
            "strides": (int(opts.strideH), int(opts.strideW)),
            "padding": _PADDINGS[int(opts.padding)],
            "dilation": (int(opts.dilationHFactor), int(opts.dilationWFactor)),
            "activation": _activation(kind, opts.fusedActivationFunction),
        }
        if kind == "DEPTHWISE_CONV_2D":
            out["depth_multiplier"] = int(opts.depthMultiplier)
        return out
    if kind == "MAX_POOL_2D":
        return {
            "pool_size": (int(opts.filterHeight), int(opts.filterWidth)),
            "strides": (int(opts.strideH), int(opts.strideW)),
            "padding": _PADDINGS[int(opts.padding)],
            "activation": _activation(kind, opts.fusedActivationFunction),
        }
    if kind == "ADD":
        return {
            "activation": _activation(kind, opts.fusedActivationFunction if opts is not None else 0)
        }
    if kind == "CONCATENATION":
        return {
            "axis": int(opts.axis),
            "activation": _activation(kind, opts.fusedActivationFunction),
        }
    if kind == "RESHAPE" and opts is not None and opts.newShape is not None:
        return {"new_shape": tuple(int(d) for d in opts.newShape)}
    return {}


def _activation(kind: str, code: int) -> str | None:
    if int(code) not in _ACTIVATIONS:
        raise ModelFileError(
            f"{kind} has unsupported fused activation {code} (supported: NONE, RELU, RELU6)"
        )
    return _ACTIVATIONS[int(code)]


def read_tflite_graph(path: Path | str) -> TFLiteGraph:
    """Parse ``path`` (a ``.tflite`` flatbuffer) into a :class:`TFLiteGraph`.

    Raises :class:`ModelFileError` when the file is missing or not a TFLite model, has more than
    one subgraph or input, or uses an operator outside :data:`SUPPORTED_OPS`.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"model file {p} cannot be read: {exc.strerror or exc}") from exc
    schema = _schema()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ModelFileError(f"model file {p} is not a TFLite flatbuffer (no 'TFL3' identifier)")
    try:
        model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    except Exception as exc:  # flatbuffers raises assorted errors on corrupt input
        raise ModelFileError(
            f"model file {p} cannot be parsed as TFLite: {type(exc).__name__}: {exc}"
        ) from exc
    if not model.subgraphs or len(model.subgraphs) != 1:
        raise ModelFileError(
            f"model file {p} has {len(model.subgraphs or [])} subgraphs, expected 1"
        )
    g = model.subgraphs[0]
    if g.inputs is None or len(g.inputs) != 1:
        raise ModelFileError(
            f"model file {p} has {0 if g.inputs is None else len(g.inputs)} inputs, expected 1"
        )
    op_names = _enum_names(schema.BuiltinOperator)

    names = {
        i: (t.name.decode() if isinstance(t.name, bytes) else str(t.name))
        for i, t in enumerate(g.tensors)
    }
    shapes = {
        i: tuple(int(d) for d in (t.shape if t.shape is not None else ()))
        for i, t in enumerate(g.tensors)
    }
    constants: dict[int, np.ndarray] = {}
    for i, t in enumerate(g.tensors):
        arr = _buffer_array(model, t)
        if arr is not None:
            constants[i] = arr.astype(np.float32) if arr.dtype == np.float16 else arr

    ops: list[GraphOp] = []
    for op in g.operators or []:
        code = model.operatorCodes[op.opcodeIndex]
        kind = op_names.get(
            max(int(code.builtinCode), int(code.deprecatedBuiltinCode)), f"#{code.builtinCode}"
        )
        inputs = tuple(int(i) for i in op.inputs if i >= 0)
        outputs = tuple(int(i) for i in op.outputs)
        if kind == "DEQUANTIZE":
            if inputs[0] not in constants:
                raise ModelFileError(
                    f"model file {p}: DEQUANTIZE of a run-time tensor is not supported"
                )
            constants[outputs[0]] = constants[inputs[0]].astype(np.float32)
            continue
        if kind not in SUPPORTED_OPS:
            raise ModelFileError(
                f"model file {p} uses the operator {kind}, which the Keras rebuild does not "
                "support "
                f"(supported: {', '.join(sorted(SUPPORTED_OPS))}); use the litert backend for "
                "this model"
            )
        options = _options(kind, op.builtinOptions)
        if kind == "PAD":
            options["paddings"] = constants[inputs[1]].astype(np.int64).reshape(-1, 2)
        if kind == "RESHAPE" and "new_shape" not in options:
            if len(inputs) < 2 or inputs[1] not in constants:
                raise ModelFileError(f"model file {p}: RESHAPE without a constant target shape")
            options["new_shape"] = tuple(int(d) for d in constants[inputs[1]].reshape(-1))
        ops.append(GraphOp(kind, inputs, outputs, options))

    named_outputs = {names[int(i)]: int(i) for i in g.outputs}
    return TFLiteGraph(tuple(ops), constants, shapes, names, int(g.inputs[0]), named_outputs)
