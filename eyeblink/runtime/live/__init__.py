"""Live mode: a live session and its outputs (``eyeblink live``, :func:`eyeblink.live`).

:mod:`~eyeblink.runtime.live.pipeline` runs a live source through the multiprocess pipeline
(``LivePipeline``: a live loader, gap rows for dropped frames, the frames.csv of
:mod:`~eyeblink.runtime.live.livewriter`); :mod:`~eyeblink.runtime.live.capture` is what comes
before and after a capture, for the CLI and the API alike; :mod:`~eyeblink.runtime.live.adapt` the
cost ladder a run steps down and up, :mod:`~eyeblink.runtime.live.hops` a frame's latency in hops,
:mod:`~eyeblink.runtime.live.priority` ``--priority``, :mod:`~eyeblink.runtime.live.record`
``--record``, :mod:`~eyeblink.runtime.live.memory` and :mod:`~eyeblink.runtime.live.metrics` the
long run watched; :mod:`~eyeblink.runtime.live.publish` hands each row, blink and state change to
the outputs of :mod:`~eyeblink.runtime.live.sinks` (the gate socket, LSL, the browser view of
:mod:`~eyeblink.runtime.live.view` with :mod:`~eyeblink.runtime.live.preview`'s frames, the Python
API's queue).
"""
