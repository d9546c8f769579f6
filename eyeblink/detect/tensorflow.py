"""TensorFlow backend: BlazeFace as a Keras model compiled with XLA, fed by ``tf.data`` (the GPU path).

Install: ``pip install "eyeblink[tf]"`` (``tensorflow-cpu``, ~0.3 GB wheel, ~1.6 GB installed) on
CPU machines; on NVIDIA GPUs ``pip install "tensorflow[and-cuda]"`` instead (TensorFlow's own
CUDA/cuDNN wheels). The network is rebuilt layer by layer from the shipped ``.tflite``
(:mod:`eyeblink.detect.keras_blazeface`; weights read from the file at load time, never a second
copy) and its outputs match the ``litert`` backend to ~1e-4 (``tests/test_backends.py``).

Batching and compilation
------------------------
XLA compiles one program per input shape (seconds each on a CPU, more on a GPU). To keep that
bounded, a batch of ``b`` images runs at the smallest *bucket* ``>= b`` among the powers of two
below ``batch_size`` and ``batch_size`` itself (``1, 2, 4, ..., batch_size``), padded with zeros
that are dropped from the result; a batch larger than ``batch_size`` runs in chunks. So a
detector built with ``batch_size=512`` compiles at most 10 programs, each once, and a single
frame (the pipeline's keyframe path) costs a batch-1 program, not a padded batch of 512.
:attr:`TensorFlowDetector.compile_seconds` records the first-call time per bucket.

Feeding
-------
:meth:`TensorFlowDetector.detect` runs one batch synchronously (the :class:`Detector` protocol).
:meth:`TensorFlowDetector.detect_stream` takes an iterable of batches and runs them through a
``tf.data`` pipeline with ``prefetch(prefetch_depth)``, so the host prepares (and on a GPU copies)
the next batches while the device computes; results come back in order. ``eyeblink bench
detector`` measures both.

On a CPU this backend is slower than ``litert`` (XNNPACK is hand-tuned for exactly these small
depthwise convolutions); it is here for GPUs and as the base of the IPU backend.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.detect import INPUT_SIZE, AcceleratorOptions
from eyeblink.detect._tf import tf
from eyeblink.detect.keras_blazeface import build_keras_blazeface
from eyeblink.errors import ModelFileError
from eyeblink.weights import BLAZEFACE_SHA256, blazeface_path, verify_sha256

__all__ = ["TensorFlowDetector", "batch_buckets", "configure_threads"]


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


def configure_threads(num_threads: int) -> bool:
    """Ask TensorFlow for ``num_threads`` intra-op threads (XLA's CPU code uses the same pool).

    Only possible before TensorFlow's runtime starts; returns False (and changes nothing) when it
    already has, e.g. when a second detector is built in the same process.
    """
    try:
        tf.config.threading.set_intra_op_parallelism_threads(int(num_threads))
        tf.config.threading.set_inter_op_parallelism_threads(min(2, int(num_threads)))
    except RuntimeError:
        return False
    return True


def _enable_gpu_memory_growth() -> None:
    """Let TF take GPU memory as needed instead of all of it (the GPU may be shared)."""
    for gpu in tf.config.list_physical_devices("GPU"):
        with contextlib.suppress(RuntimeError):  # runtime already started: keep its setting
            tf.config.experimental.set_memory_growth(gpu, True)


def _disable_remapper() -> None:
    """Turn off Grappler's op-fusion pass ("remapping") for this process.

    With TensorFlow 2.21 on x86 CPUs (oneDNN on), graph-mode execution of this network without
    XLA dies with a segmentation fault inside a fused oneDNN kernel; eager mode, XLA, and graph
    mode with remapping off are fine and give the same numbers. The pass only fuses ops for
    speed; XLA (``jit_compile=True``, the GPU path) does its own fusion and is unaffected.
    """
    tf.config.optimizer.set_experimental_options({"remapping": False})


def _check_batch(batch: np.ndarray) -> None:
    if not isinstance(batch, np.ndarray) or batch.dtype != np.float32:
        got = batch.dtype if isinstance(batch, np.ndarray) else type(batch).__name__
        raise ValueError(f"batch must be a float32 ndarray, got {got}")
    if batch.ndim != 4 or batch.shape[1:] != (INPUT_SIZE, INPUT_SIZE, 3) or batch.shape[0] < 1:
        raise ValueError(f"batch must have shape [B>=1, {INPUT_SIZE}, {INPUT_SIZE}, 3], got {batch.shape}")


class TensorFlowDetector(Closing):
    """BlazeFace on TensorFlow (XLA). Implements :class:`eyeblink.detect.Detector`.

    ``batch_size`` is the largest batch compiled (see the module docstring for buckets);
    ``accelerator`` carries ``jit_compile`` and ``prefetch_depth`` (``io_tiles``/``replicas``
    are IPU settings and must be left at their defaults here). ``num_threads`` sets TF's CPU
    thread pool when this is the first TF user of the process. Runs on the first GPU when one is
    visible, else on the CPU (:attr:`device`). Not thread-safe.
    """

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        num_threads: int = 1,
        batch_size: int = 1,
        accelerator: AcceleratorOptions | None = None,
    ) -> None:
        opts = accelerator or AcceleratorOptions()
        path = Path(model_path) if model_path is not None else blazeface_path()
        if model_path is None:
            verify_sha256(path, BLAZEFACE_SHA256)
        elif not path.is_file():
            raise ModelFileError(f"face model not found: {path} — check --face-model")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.threads_configured = configure_threads(num_threads)
        _enable_gpu_memory_growth()
        _disable_remapper()
        gpus = tf.config.list_logical_devices("GPU")
        self.device: str = gpus[0].name if gpus else "/device:CPU:0"
        with tf.device(self.device):
            self._model: Any = build_keras_blazeface(path)
        self.model_path = path
        self.num_threads = int(num_threads)
        self.batch_size = int(batch_size)
        self.jit_compile = opts.jit_compile
        self.prefetch_depth = opts.prefetch_depth
        self.buckets = batch_buckets(self.batch_size)
        #: seconds of the first call per compiled batch shape (trace + XLA compile + one run)
        self.compile_seconds: dict[int, float] = {}
        model = self._model
        self._fn: Any = tf.function(lambda x: model(x, training=False), jit_compile=opts.jit_compile,
                                    reduce_retracing=False)
        self._closed = False

    # ------------------------------------------------------------------ helpers
    def _bucket(self, b: int) -> int:
        for size in self.buckets:
            if size >= b:
                return size
        return self.batch_size

    def _pad(self, chunk: np.ndarray) -> tuple[np.ndarray, int]:
        n = chunk.shape[0]
        size = self._bucket(n)
        if size == n:
            return np.ascontiguousarray(chunk), n
        padded = np.zeros((size, INPUT_SIZE, INPUT_SIZE, 3), np.float32)
        padded[:n] = chunk
        return padded, n

    def _chunks(self, batch: np.ndarray) -> Iterator[tuple[np.ndarray, int]]:
        for start in range(0, batch.shape[0], self.batch_size):
            yield self._pad(batch[start:start + self.batch_size])

    def _run(self, x: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
        size = int(x.shape[0])
        first = size not in self.compile_seconds
        t0 = time.perf_counter()
        with tf.device(self.device):
            regressors, scores = self._fn(x)
        r = regressors.numpy()[:n]
        s = scores.numpy()[:n]
        if first:
            self.compile_seconds[size] = time.perf_counter() - t0
        return r, s

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError("TensorFlowDetector is closed")

    # ------------------------------------------------------------------ API
    def warmup(self, sizes: Iterable[int] | None = None) -> dict[int, float]:
        """Compile the given batch shapes now (default: every bucket); returns seconds per shape."""
        self._require_open()
        for size in sizes if sizes is not None else self.buckets:
            bucket = self._bucket(int(size))
            if bucket not in self.compile_seconds:
                self._run(tf.zeros((bucket, INPUT_SIZE, INPUT_SIZE, 3), tf.float32), bucket)
        return dict(self.compile_seconds)

    def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run the network on float32 ``[B, 128, 128, 3]`` in [-1, 1].

        Returns ``(regressors [B, 896, 16], scores [B, 896])`` float32 logits in canonical
        anchor order (fresh arrays).
        """
        _check_batch(batch)
        self._require_open()
        parts = [self._run(tf.constant(x), n) for x, n in self._chunks(batch)]
        if len(parts) == 1:
            return parts[0]
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    def detect_stream(self, batches: Iterable[np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Results for each batch of ``batches``, in order, through a prefetching ``tf.data`` pipeline.

        The input iterable is consumed on a ``tf.data`` thread ``prefetch_depth`` batches ahead of
        the device; each batch is split/padded as in :meth:`detect`. Yields one
        ``(regressors, scores)`` pair per input batch.
        """
        self._require_open()
        spec = (tf.TensorSpec((None, INPUT_SIZE, INPUT_SIZE, 3), tf.float32), tf.TensorSpec((), tf.int32),
                tf.TensorSpec((), tf.bool))

        errors: list[BaseException] = []

        def chunks() -> Iterator[tuple[np.ndarray, np.int32, np.bool_]]:
            # runs on a tf.data thread: an exception here would reach the caller as an opaque
            # tf.errors.UnknownError, so it is kept and re-raised as itself below
            try:
                for batch in batches:
                    _check_batch(batch)
                    pieces = list(self._chunks(batch))
                    for i, (x, n) in enumerate(pieces):
                        yield x, np.int32(n), np.bool_(i == len(pieces) - 1)
            except Exception as exc:
                errors.append(exc)

        dataset = tf.data.Dataset.from_generator(chunks, output_signature=spec).prefetch(self.prefetch_depth)
        pending_r: list[np.ndarray] = []
        pending_s: list[np.ndarray] = []
        for x, n, last in dataset:
            r, s = self._run(x, int(n))
            pending_r.append(r)
            pending_s.append(s)
            if bool(last):
                if len(pending_r) == 1:
                    yield pending_r[0], pending_s[0]
                else:
                    yield np.concatenate(pending_r), np.concatenate(pending_s)
                pending_r, pending_s = [], []
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Drop the model and compiled functions; further calls raise ``RuntimeError``. Idempotent."""
        self._closed = True
        self._fn = None
        self._model = None


