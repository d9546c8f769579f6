"""LiteRT (TensorFlow Lite) backend: BlazeFace short-range on the CPU with XNNPACK.

This is the default backend. ``ai_edge_litert`` applies the XNNPACK delegate automatically
(``Interpreter(model_path=..., num_threads=n)``). Measured on a 2-core x86 VM: 0.68 ms per
128x128 frame with one thread, 0.48 ms with two. Batching does not speed up the CPU path
(0.75, 0.82 and 0.98 ms/frame for batches of 4, 16 and 64: the work is compute-bound and larger
batches fall out of cache) but it is supported so that the pipeline can use the same batched code
path as the accelerator backends. On a CPU-only machine prefer batch 1 and one thread per worker.

Batch > 1 and anchor order
--------------------------
The graph ends with one ``RESHAPE`` per head (``[B, 16, 16, 32] -> [1, -1, 16]`` etc.: the leading
dimension is baked into the op as 1) followed by a ``CONCATENATION`` on axis 1. After
``resize_tensor_input`` to ``[B, 128, 128, 3]`` the outputs therefore come back as
``[1, B*896, 16]`` and ``[1, B*896, 1]`` grouped **per grid, not per image**: first the 16x16
head for all images (``B*512`` rows, image-major), then the 8x8 head for all images
(``B*384`` rows). :meth:`LiteRTDetector.detect` regroups them into canonical ``[B, 896, ...]``
order; the result is bit-identical to running the images one by one
(verified in ``tests/test_detect.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from eyeblink.closing import Closing
from eyeblink.detect import INPUT_SIZE, NUM_ANCHORS, NUM_COORDS, check_batch
from eyeblink.errors import ModelFileError
from eyeblink.weights import face_model

__all__ = ["LiteRTDetector", "native_info_silenced"]

#: Rows of the first (16x16 grid, 2 anchors per cell) head; the 8x8 head has the remaining 384.
_FIRST_GRID_ROWS = 16 * 16 * 2


class LiteRTDetector(Closing):
    """BlazeFace short-range on ai-edge-litert (XNNPACK). Implements
    :class:`eyeblink.detect.Detector`.

    Not thread-safe (one interpreter holds one set of tensors): use one instance per thread or
    process. ``batch_size`` is allocated at construction; a batch of another size re-allocates the
    tensors once (a few ms) and keeps that size for the following calls.
    """

    def __init__(
        self, *, model_path: Path | None = None, num_threads: int = 1, batch_size: int = 1
    ) -> None:
        # the shipped model is checked against its sha256; a user's own model (--face-model) cannot
        # be, so it is checked by loading it and by its inputs and outputs below
        path = face_model(model_path)
        try:
            interpreter = Interpreter(model_path=str(path), num_threads=int(num_threads))
            input_details = interpreter.get_input_details()
            output_details = interpreter.get_output_details()
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"model file {path} cannot be loaded by LiteRT: {exc}") from exc
        if len(input_details) != 1 or len(output_details) != 2:
            raise ModelFileError(
                f"model file {path} has {len(input_details)} inputs and {len(output_details)} "
                "outputs, "
                "expected 1 input and 2 outputs (regressors, classificators)"
            )
        by_name = {d["name"]: d["index"] for d in output_details}
        if set(by_name) != {"regressors", "classificators"}:
            raise ModelFileError(
                f"model file {path} has outputs {sorted(by_name)}, expected ['classificators', "
                "'regressors']"
            )
        self._interpreter: Interpreter | None = interpreter
        self._input_index: int = input_details[0]["index"]
        self._regressors_index: int = by_name["regressors"]
        self._scores_index: int = by_name["classificators"]
        self._batch = 0
        self.model_path = path
        self.num_threads = int(num_threads)
        with native_info_silenced():  # the delegate is created when the tensors are first allocated
            self._allocate(int(batch_size))

    def _allocate(self, batch: int) -> None:
        """(Re)size the input to ``[batch, 128, 128, 3]`` and allocate all tensors."""
        interpreter = self._require_open()
        if batch != 1 or self._batch not in (0, 1):
            interpreter.resize_tensor_input(
                self._input_index, [batch, INPUT_SIZE, INPUT_SIZE, 3], strict=False
            )
        interpreter.allocate_tensors()
        self._batch = batch

    def _require_open(self) -> Interpreter:
        if self._interpreter is None:
            raise RuntimeError("LiteRTDetector is closed")
        return self._interpreter

    def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run the network on float32 ``[B, 128, 128, 3]`` in [-1, 1].

        Returns ``(regressors [B, 896, 16], scores [B, 896])`` float32 in canonical anchor order
        (fresh arrays, safe to keep).
        """
        check_batch(batch)
        interpreter = self._require_open()
        b = batch.shape[0]
        if b != self._batch:
            self._allocate(b)
        interpreter.set_tensor(self._input_index, np.ascontiguousarray(batch))
        interpreter.invoke()
        regressors = interpreter.get_tensor(self._regressors_index).reshape(-1, NUM_COORDS)
        scores = interpreter.get_tensor(self._scores_index).reshape(-1)
        if regressors.shape[0] != b * NUM_ANCHORS or scores.shape[0] != b * NUM_ANCHORS:
            raise RuntimeError(
                f"LiteRT returned {regressors.shape[0]} regressor rows and {scores.shape[0]} "
                "scores "
                f"for a batch of {b}, expected {b * NUM_ANCHORS}"
            )
        if b == 1:
            return regressors.reshape(1, NUM_ANCHORS, NUM_COORDS), scores.reshape(1, NUM_ANCHORS)
        # Outputs are grouped per grid: [16x16 head for all images][8x8 head for all images].
        split = b * _FIRST_GRID_ROWS
        regressors = np.concatenate(
            [
                regressors[:split].reshape(b, _FIRST_GRID_ROWS, NUM_COORDS),
                regressors[split:].reshape(b, NUM_ANCHORS - _FIRST_GRID_ROWS, NUM_COORDS),
            ],
            axis=1,
        )
        scores = np.concatenate(
            [
                scores[:split].reshape(b, _FIRST_GRID_ROWS),
                scores[split:].reshape(b, NUM_ANCHORS - _FIRST_GRID_ROWS),
            ],
            axis=1,
        )
        return regressors, scores

    def close(self) -> None:
        """Release the interpreter; further ``detect`` calls raise ``RuntimeError``. Idempotent."""
        self._interpreter = None


#: What the TFLite runtime prints to fd 2 (C++, once per process) when it creates its CPU delegate.
_NATIVE_INFO = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU."


@contextlib.contextmanager
def native_info_silenced() -> Iterator[None]:
    """Keep the TFLite runtime's INFO line off stderr below ``--log-level info`` (the ``eyeblink``
    logger's level), so that a user error stays one line.

    The line is written by C++ straight to file descriptor 2, past Python's ``sys.stderr`` and
    unaffected by ``TF_CPP_MIN_LOG_LEVEL`` (checked with ai-edge-litert 1.2), once per process, when
    the first interpreter allocates its tensors; fd 2 is pointed at a temporary file around the
    detector's first allocation and the eye model's creation (``frame.analyzer.build_fitter``: the
    face mesh runs on LiteRT too), and everything else written there meanwhile is passed on.
    """
    if logging.getLogger("eyeblink").getEffectiveLevel() <= logging.INFO:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        capture = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    except (OSError, ValueError):
        yield
        return
    try:
        os.dup2(capture.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        capture.seek(0)
        rest = b"".join(
            ln for ln in capture.read().splitlines(keepends=True) if not ln.startswith(_NATIVE_INFO)
        )
        capture.close()
        if rest:
            os.write(2, rest)
