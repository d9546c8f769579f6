"""Runtime: how frames flow through the stages — one process, many processes, live, or a Ray cluster.

* :mod:`eyeblink.runtime.pipeline` — the single-process reference: ``process_source``, ``SessionSink`` (the
  per-frame core they all run, ``FrameAnalyzer``, is :mod:`eyeblink.frame`, the floor below).
* :mod:`eyeblink.runtime.parallel` — the multiprocess pipeline (loaders, workers, ordered sink):
  ``ParallelPipeline``.
* :mod:`eyeblink.runtime.shm` — the shared-memory ring of frame slots: ``FrameRing``, ``RingSpec``.
* :mod:`eyeblink.runtime.live` — ``eyeblink live``: ``LivePipeline`` (:mod:`~eyeblink.runtime.capture`: before and
  after a capture; :mod:`~eyeblink.runtime.choose`: the eye model and the workers a live run settles).
* :mod:`eyeblink.runtime.batch` — ``eyeblink batch`` on Ray (imported only when a batch runs;
  :mod:`~eyeblink.runtime.raycluster`: joining Ray and its messages).
* :mod:`eyeblink.runtime.runner` — ``process_paths``: picks the pipeline per input and finalizes.
* :mod:`eyeblink.runtime.metrics` (Prometheus) and :mod:`eyeblink.runtime.logs` (one log queue).
* :mod:`eyeblink.runtime.publish` — what a live session tells other programs, through the outputs of
  :mod:`eyeblink.runtime.sinks` (the gate socket, LSL, the browser view of :mod:`eyeblink.runtime.view`, the API).
"""
