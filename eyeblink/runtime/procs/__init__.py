"""Process plumbing: how a run's processes start, share frames and hand results on.

:mod:`~eyeblink.runtime.procs.processes` is the one place that starts a run's processes (the start
method, what every child does first); :mod:`~eyeblink.runtime.procs.parallel` is the multiprocess
pipeline's parent side (``ParallelPipeline``: the queues, the forks, the summary), each child's role
a mixin in :mod:`~eyeblink.runtime.procs.roles`; :mod:`~eyeblink.runtime.procs.shm` the
shared-memory ring of frame slots, :mod:`~eyeblink.runtime.procs.results` the per-frame record a
worker sends the sink, :mod:`~eyeblink.runtime.procs.queues` the blocking hand-offs that notice a
stopped run, :mod:`~eyeblink.runtime.procs.sizing` how many loaders feed the workers,
:mod:`~eyeblink.runtime.procs.accelerator` the accelerator stage,
:mod:`~eyeblink.runtime.procs.pool` short files whole on long-lived processes,
:mod:`~eyeblink.runtime.procs.logs` one log queue for every process and
:mod:`~eyeblink.runtime.procs.profiling` a cProfile switch for each of them. Live and batch runs
build on these; nothing here knows a live session or Ray.
"""
