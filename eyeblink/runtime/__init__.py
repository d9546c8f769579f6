"""Runtime: how frames flow through the stages — one process, many processes, live, or a Ray
cluster.

What every runtime shares lives here; each other job has a sub-package of its own.

* :mod:`eyeblink.runtime.pipeline` — the single-process reference: ``process_source``,
  ``SessionSink`` (the per-frame core they all run, ``FrameAnalyzer``, is :mod:`eyeblink.frame`, the
  floor below).
* :mod:`eyeblink.runtime.runner` — ``process_paths``: picks the pipeline per input and finalizes.
* :mod:`eyeblink.runtime.summary` — a session's ``summary.json``, every runtime's;
  :mod:`eyeblink.runtime.costs`: what each network costs on this machine;
  :mod:`eyeblink.runtime.choose`: the eye model and the workers a run settles before its first
  frame.
* :mod:`eyeblink.runtime.procs` — process plumbing: the multiprocess pipeline (``ParallelPipeline``,
  its roles in :mod:`~eyeblink.runtime.procs.roles`), the shared-memory ring, the start of every
  process, the file pool, the accelerator stage, one log queue.
* :mod:`eyeblink.runtime.live` — ``eyeblink live``: ``LivePipeline``, before and after a capture,
  and what a live session tells other programs (:mod:`eyeblink.runtime.live.publish`, through the
  outputs of :mod:`eyeblink.runtime.live.sinks`: the gate socket, LSL, the browser view, the API).
* :mod:`eyeblink.runtime.batch` — ``eyeblink batch`` on Ray (imported only when a batch runs).
"""
