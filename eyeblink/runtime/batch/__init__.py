"""Batch mode: ``eyeblink batch`` on a Ray cluster (imported only when a batch runs).

:mod:`~eyeblink.runtime.batch.driver` is the driver (the inputs shared out as Ray tasks, each
running the same process as ``eyeblink process``); :mod:`~eyeblink.runtime.batch.raycluster` joins
Ray (the signal handlers ``ray.init`` would replace, Ray's messages as one line);
:mod:`~eyeblink.runtime.batch.chunks` measures one long recording over several tasks, one ordered
sink writing it.
"""
