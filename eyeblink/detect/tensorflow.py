"""TensorFlow backend: BlazeFace as a Keras model compiled with XLA, fed by ``tf.data`` (the GPU
path).

Install: ``pip install "eyeblink[tf]"`` (``tensorflow-cpu``, ~0.3 GB wheel, ~1.6 GB installed) on
CPU machines; on NVIDIA GPUs ``pip install "tensorflow[and-cuda]"`` instead (TensorFlow's own
CUDA/cuDNN wheels). The network is rebuilt layer by layer from the shipped ``.tflite``
(:mod:`eyeblink.detect.keras_graph`; weights read from the file at load time, never a second
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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.detect import INPUT_SIZE, AcceleratorOptions
from eyeblink.detect._tf import tf
from eyeblink.detect.keras_graph import (
    NETWORKS,
    BucketedRunner,
    KerasDetector,
    batch_buckets,
    use_keras_backend,
)

__all__ = [
    "TensorFlowDetector",
    "TensorFlowNetwork",
    "batch_buckets",
    "configure_threads",
    "keras_network",
]


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


def disable_remapper() -> None:
    """Turn off Grappler's op-fusion pass ("remapping") for this process.

    With TensorFlow 2.21 on x86 CPUs (oneDNN on), graph-mode execution of this network without
    XLA dies with a segmentation fault inside a fused oneDNN kernel; eager mode, XLA, and graph
    mode with remapping off are fine and give the same numbers. The pass only fuses ops for
    speed; XLA (``jit_compile=True``, the GPU path) does its own fusion and is unaffected.
    """
    tf.config.optimizer.set_experimental_options({"remapping": False})


class TensorFlowNetwork(BucketedRunner):
    """A Keras model (TensorFlow backend) behind one ``tf.function`` per batch bucket, on
    ``device``.

    ``jit_compile`` compiles each program with XLA. Outputs come back as float32 numpy arrays.
    """

    def __init__(self, model: Any, *, batch_size: int, jit_compile: bool, device: str) -> None:
        super().__init__(tuple(int(d) for d in model.inputs[0].shape[1:]), batch_size)
        self.model = model
        self.device = device
        self._fn: Any = tf.function(
            lambda x: model(x, training=False), jit_compile=jit_compile, reduce_retracing=False
        )

    def _execute(self, x: Any) -> tuple[np.ndarray, ...]:
        with tf.device(self.device):
            outs = self._fn(x)
        return tuple(o.numpy() for o in outs)


def keras_network(
    name: str, *, model_path: Path | None = None, batch_size: int = 1, jit_compile: bool = True
) -> TensorFlowNetwork:
    """A network of :data:`~eyeblink.detect.keras_graph.NETWORKS` (``blazeface``, ``mesh``,
    ``iris``) on TensorFlow: on the first GPU when one is visible, else on the CPU."""
    use_keras_backend("tensorflow", eyeblink_backend="tensorflow")
    _enable_gpu_memory_growth()
    disable_remapper()
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/device:CPU:0"
    with tf.device(device):
        model = NETWORKS[name].build(model_path)
    return TensorFlowNetwork(model, batch_size=batch_size, jit_compile=jit_compile, device=device)


class TensorFlowDetector(KerasDetector):
    """BlazeFace on TensorFlow (XLA). Implements :class:`eyeblink.detect.Detector`.

    ``batch_size`` is the largest batch compiled (see the module docstring for buckets);
    ``accelerator`` carries ``jit_compile`` and ``prefetch_depth`` (``io_tiles``/``replicas``
    are IPU settings and must be left at their defaults here). ``num_threads`` sets TF's CPU
    thread pool when this is the first TF user of the process. Runs on the first GPU when one is
    visible, else on the CPU (:attr:`device`). Not thread-safe.
    """

    def _network(self, path: Path, opts: AcceleratorOptions) -> TensorFlowNetwork:
        self.threads_configured = configure_threads(self.num_threads)
        return keras_network(
            "blazeface", model_path=path, batch_size=self.batch_size, jit_compile=opts.jit_compile
        )

    def detect_stream(
        self, batches: Iterable[np.ndarray]
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Results for each batch of ``batches``, in order, through a prefetching ``tf.data``
        pipeline.

        The input iterable is consumed on a ``tf.data`` thread ``prefetch_depth`` batches ahead of
        the device; each batch is split/padded as in :meth:`detect`. Yields one
        ``(regressors, scores)`` pair per input batch.
        """
        net = self._require_open()
        spec = (
            tf.TensorSpec((None, INPUT_SIZE, INPUT_SIZE, 3), tf.float32),
            tf.TensorSpec((), tf.int32),
            tf.TensorSpec((), tf.bool),
        )

        errors: list[BaseException] = []

        def chunks() -> Iterator[tuple[np.ndarray, np.int32, np.bool_]]:
            # runs on a tf.data thread: an exception here would reach the caller as an opaque
            # tf.errors.UnknownError, so it is kept and re-raised as itself below
            try:
                for batch in batches:
                    net.check(batch)
                    pieces = net.chunks(batch)
                    for i, (x, n) in enumerate(pieces):
                        yield x, np.int32(n), np.bool_(i == len(pieces) - 1)
            except Exception as exc:
                errors.append(exc)

        dataset = tf.data.Dataset.from_generator(chunks, output_signature=spec).prefetch(
            self.prefetch_depth
        )
        pending_r: list[np.ndarray] = []
        pending_s: list[np.ndarray] = []
        for x, n, last in dataset:
            r, s = net.run_chunk(x, int(n))
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
