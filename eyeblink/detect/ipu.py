"""Graphcore IPU backend: the Keras BlazeFace under ``IPUStrategy`` with infeed/outfeed queues.

Needs Graphcore's TensorFlow 2 wheel from the Poplar SDK (not on PyPI; the ``eyeblink[ipu]`` extra
is empty on purpose): install the SDK, ``source`` its ``enable.sh``, then
``pip install <sdk>/tensorflow-2.*+gc*.whl``. Elsewhere :func:`eyeblink.detect.create_detector`
reports the backend unavailable (``BackendUnavailableError`` with that hint) before this module
is imported.

How it runs (Graphcore's documented TF2 API):

1. :func:`eyeblink.detect.ipu_settings.ipu_settings` computes the settings and
   :func:`~eyeblink.detect.ipu_settings.apply_ipu_config` writes them into an ``IPUConfig``
   (``auto_select_ipus``, ``io_tiles.num_io_tiles``, ``io_tiles.place_ops_on_io_tiles``,
   ``io_tiles.available_memory_proportion``), then ``configure_ipu_system()``.
2. Under ``ipu.ipu_strategy.IPUStrategy().scope()`` the Keras model is built with a static batch
   (:func:`~eyeblink.detect.keras_graph.build_keras_blazeface`), and an
   ``IPUInfeedQueue(dataset, prefetch_depth=...)`` reads a ``tf.data`` dataset fed from a bounded
   host queue; results go to an ``IPUOutfeedQueue``.
3. The device program is ``ipu.loops.repeat(steps_per_execution, body, [], infeed)`` inside a
   ``tf.function`` compiled with XLA; ``body`` runs the model on one infeed batch and enqueues
   ``(regressors, scores)`` on the outfeed.
4. An :class:`~eyeblink.detect.ipu_settings.OutfeedDrainer` thread dequeues the outfeed
   continuously and routes results to the waiting requests, so the thread that feeds the device
   never blocks on device-to-host transfers.

This module cannot be exercised without IPUs; its configuration logic lives in
:mod:`eyeblink.detect.ipu_settings` and is tested there.
"""

from __future__ import annotations

import contextlib
import queue
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.detect import INPUT_SIZE, NUM_ANCHORS, NUM_COORDS, AcceleratorOptions
from eyeblink.detect._tf import tf, tf_ipu
from eyeblink.detect.ipu_settings import (
    IPUSettings,
    OutfeedDrainer,
    ResultRouter,
    apply_ipu_config,
    ipu_settings,
)
from eyeblink.detect.keras_graph import build_keras_blazeface, use_keras_backend
from eyeblink.weights import face_model

__all__ = ["IPUDetector"]

ipu = tf_ipu()  # Graphcore's TensorFlow only; the registry checked it is there

#: Seconds a request waits for its results (the first call includes the Poplar compile).
RESULT_TIMEOUT_S = 900.0


class IPUDetector(Closing):
    """BlazeFace on Graphcore IPUs. Implements :class:`eyeblink.detect.Detector`.

    ``batch_size`` is the static per-replica batch compiled for the device; a call with a
    different number of images is split into device steps and the last one zero-padded.
    ``accelerator`` carries ``io_tiles``, ``prefetch_depth``, ``replicas`` and ``jit_compile``.
    ``num_threads`` is unused (host work is the tf.data feed). Not thread-safe for callers;
    internally one drain thread runs while the detector is open.
    """

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        num_threads: int = 1,
        batch_size: int = 1,
        accelerator: AcceleratorOptions | None = None,
        steps_per_execution: int = 1,
    ) -> None:
        path = face_model(model_path)
        # tf.keras on Graphcore's TensorFlow
        use_keras_backend("tensorflow", eyeblink_backend="ipu")
        self.settings: IPUSettings = ipu_settings(
            batch_size=batch_size, accelerator=accelerator, steps_per_execution=steps_per_execution
        )
        s = self.settings
        self.model_path = path
        self.batch_size = s.batch_size
        cfg = apply_ipu_config(s, ipu.config.IPUConfig())
        cfg.configure_ipu_system()

        # host -> device: a bounded queue of per-replica batches behind a tf.data generator
        # room for one whole execution plus the prefetch, so queuing an execution never blocks
        self._host_queue: queue.Queue[np.ndarray | None] = queue.Queue(
            maxsize=s.steps_per_execution * s.replicas + 2 * s.prefetch_depth
        )
        spec = tf.TensorSpec((s.batch_size, INPUT_SIZE, INPUT_SIZE, 3), tf.float32)
        # the generator holds the queue, not the detector: TensorFlow's generator registry keeps
        # what it is given until the dataset goes, so a bound method would keep the detector and its
        # feed threads alive for good
        dataset = tf.data.Dataset.from_generator(
            _feeder(self._host_queue), output_signature=spec
        ).prefetch(s.prefetch_depth)

        self._strategy = ipu.ipu_strategy.IPUStrategy()
        with self._strategy.scope():
            self._model = build_keras_blazeface(path, batch_size=s.batch_size)
            self._infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
                dataset, prefetch_depth=s.prefetch_depth
            )
            self._outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        # In TF2 (eager) reading the initializer creates the infeed's dataset iterator.
        _ = self._infeed.initializer

        model, outfeed, infeed = self._model, self._outfeed, self._infeed

        def body(images: Any) -> Any:
            regressors, scores = model(images, training=False)
            return outfeed.enqueue((regressors, scores))

        def device_loop() -> Any:
            return ipu.loops.repeat(s.steps_per_execution, body, [], infeed)

        try:
            self._program = tf.function(device_loop, jit_compile=s.jit_compile)
        except TypeError:  # SDKs on TF 2.4 call it experimental_compile
            self._program = tf.function(device_loop, experimental_compile=s.jit_compile)

        self._router = ResultRouter()
        self._drainer = OutfeedDrainer(self._dequeue, self._router.deliver).start()
        self._closed = False

    # ------------------------------------------------------------------ plumbing
    def _dequeue(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Everything on the outfeed now, one ``(regressors, scores)`` per device step."""
        regressors, scores = self._outfeed.dequeue()
        r = np.asarray(regressors)
        sc = np.asarray(scores)
        if r.size == 0:
            return []
        # ALL mode: [steps, (replicas,) batch, 896, 16]; fold replicas into the batch
        r = r.reshape(r.shape[0], -1, NUM_ANCHORS, NUM_COORDS)
        sc = sc.reshape(sc.shape[0], -1, NUM_ANCHORS)
        return [(r[i], sc[i]) for i in range(r.shape[0])]

    # ------------------------------------------------------------------ API
    def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Run the network on float32 ``[B, 128, 128, 3]`` in [-1, 1]; canonical ``[B, 896,
        ...]`` out."""
        if self._closed:
            raise RuntimeError("IPUDetector is closed")
        if not isinstance(batch, np.ndarray) or batch.dtype != np.float32:
            got = batch.dtype if isinstance(batch, np.ndarray) else type(batch).__name__
            raise ValueError(f"batch must be a float32 ndarray, got {got}")
        if batch.ndim != 4 or batch.shape[1:] != (INPUT_SIZE, INPUT_SIZE, 3) or batch.shape[0] < 1:
            raise ValueError(
                f"batch must have shape [B>=1, {INPUT_SIZE}, {INPUT_SIZE}, 3], got {batch.shape}"
            )
        s = self.settings
        n = batch.shape[0]
        per_exec = s.images_per_execution
        executions = -(-n // per_exec)
        padded = np.zeros((executions * per_exec, INPUT_SIZE, INPUT_SIZE, 3), np.float32)
        padded[:n] = batch
        ticket = self._router.expect(executions * s.steps_per_execution)
        for start in range(0, padded.shape[0], s.batch_size):
            self._host_queue.put(padded[start : start + s.batch_size], timeout=RESULT_TIMEOUT_S)
            # one device execution per steps_per_execution * replicas batches queued
            if (start // s.batch_size + 1) % (s.steps_per_execution * s.replicas) == 0:
                self._strategy.run(self._program)
        results = self._router.wait(ticket, RESULT_TIMEOUT_S, check=self._drainer.check)
        regressors = np.concatenate([r for r, _ in results])[:n]
        scores = np.concatenate([sc for _, sc in results])[:n]
        return regressors, scores

    def close(self) -> None:
        """Stop the drain thread, end the infeed stream and free both queues. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._drainer.stop()
        finally:
            with contextlib.suppress(queue.Full):  # end the tf.data feed generator
                self._host_queue.put_nowait(None)
            self._release()

    def _release(self) -> None:
        """Free the feeds here and now (their dataset iterator and its threads go with them), not
        whenever the garbage collector finds them: the SDK's ``deleter`` of each queue, then this
        detector's references."""
        for feed in (self._infeed, self._outfeed):
            # an SDK without deleters: dropping the reference frees it
            with contextlib.suppress(Exception):
                getattr(feed, "deleter", None)
        self._program = self._infeed = self._outfeed = self._model = None


def _feeder(host_queue: queue.Queue[np.ndarray | None]) -> Any:
    """The tf.data generator function: per-replica batches from ``host_queue``; ``None`` ends the
    stream."""

    def feed() -> Any:
        while True:
            item = host_queue.get()
            if item is None:
                return
            yield item

    return feed
