"""Logging from every process of a run through one queue, one listener, one format.

:func:`setup_logging` (called by the CLI in the parent before any worker is forked) puts a
:class:`logging.handlers.QueueHandler` on the ``eyeblink`` logger that feeds a ``multiprocessing``
queue, and starts a :class:`logging.handlers.QueueListener` thread in the parent that writes the
records to stderr and, with ``--log-file``, to a file. Loader and worker processes get that handler
and its queue: a record logged anywhere comes out of the parent's listener, in one format naming the
process (a forked child inherits the handler; a spawned one is given the queue as it starts:
:mod:`eyeblink.runtime.procs.processes`)::

    2024-05-01 12:00:00,123 INFO  eyeblink-loader[4242] eyeblink.runtime.live.pipeline: capture …

``multiprocessing.Queue`` re-creates its lock and feeder thread in a forked child, so a child never
inherits a lock held by the parent's feeder. :meth:`LogSetup.close` stops the listener after the
last record is written (the CLI does it in ``finally``).
"""

from __future__ import annotations

import logging
import logging.handlers
import multiprocessing as mp
import sys
from pathlib import Path
from typing import Any

from eyeblink.closing import Closing
from eyeblink.errors import ConfigError, OutputError

__all__ = ["LOG_FORMAT", "LOG_LEVELS", "LogSetup", "setup_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)-5s %(processName)s[%(process)d] %(name)s: %(message)s"
LOG_LEVELS = ("debug", "info", "warning", "error")


class LogSetup(Closing):
    """The running listener; :meth:`close` flushes and detaches it (idempotent)."""

    def __init__(
        self,
        listener: logging.handlers.QueueListener,
        handler: logging.Handler,
        outputs: list[logging.Handler],
        queue: Any,
    ) -> None:
        self.listener = listener
        self.handler = handler
        self.outputs = outputs
        self.queue = queue
        self._closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        logger = logging.getLogger("eyeblink")
        logger.removeHandler(self.handler)
        self.listener.stop()  # writes what is still queued, then joins its thread
        for h in self.outputs:
            h.close()
        self.queue.close()


def setup_logging(level: str = "info", log_file: str | Path | None = None) -> LogSetup:
    """Route the ``eyeblink`` loggers of this process and of every child forked later (see the
    module doc)."""
    name = str(level).strip().lower()
    if name not in LOG_LEVELS:
        raise ConfigError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    fmt = logging.Formatter(LOG_FORMAT)
    outputs: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        try:
            outputs.append(logging.FileHandler(log_file, encoding="utf-8"))
        except OSError as exc:
            raise OutputError(
                f"cannot open log file {log_file} ({exc.strerror or exc}); choose another "
                "--log-file"
            ) from None
    for h in outputs:
        h.setFormatter(fmt)
    # a spawn context's queue: every start method's children can have it (a fork context's cannot be
    # handed to a spawned child), whichever the run uses
    queue = mp.get_context("spawn").Queue(-1)
    handler = logging.handlers.QueueHandler(queue)
    listener = logging.handlers.QueueListener(queue, *outputs, respect_handler_level=True)
    listener.start()
    logger = logging.getLogger("eyeblink")
    logger.setLevel(getattr(logging, name.upper()))
    logger.addHandler(handler)
    logger.propagate = False
    return LogSetup(listener, handler, outputs, queue)
