"""The roles of one multiprocess run (:class:`eyeblink.runtime.procs.parallel._Run`), a mixin class
each.

``_Run`` is one object handed to every process of the run (forked, or pickled when spawned:
``_Run.__getstate__``); each process plays one role, whose methods live in their own module here:
``base`` (what every child does: stop when asked, hand messages on, report a failure), ``loader``
(decode into the ring, one loader or several on ranges of the input), ``worker`` (detect, fit,
encode the rows; the accelerator stage's children) and ``sink`` (the parent: reorder, write, notice
failures). The parent's side of the run (the queues, the forks, the summary) stays in
:mod:`eyeblink.runtime.procs.parallel`, and a subclass (:mod:`eyeblink.runtime.live.pipeline`)
overrides the same method names whichever module holds them.
"""
