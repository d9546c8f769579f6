"""Blocking queue hand-offs that notice a stopped run: the one polling loop of the runtime's
processes.

A child process (a loader, a worker, a file worker of the pool) never blocks on a queue for good: it
waits :data:`POLL_S` at a time and, between waits, asks ``stopped()`` (the run's stop event set, or
the parent gone); when it is, the wait ends with ``stop_error``.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

__all__ = ["POLL_S", "get_until_stopped", "put_until_stopped"]

#: how often a blocked get/put wakes up to check the stop event and its peers, s
POLL_S = 0.05


def get_until_stopped(q: Any, stopped: Callable[[], bool], stop_error: type[BaseException]) -> Any:
    """The next item of ``q``; raises ``stop_error`` once ``stopped()`` while none comes."""
    while True:
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            if stopped():
                raise stop_error from None


def put_until_stopped(
    q: Any, item: Any, stopped: Callable[[], bool], stop_error: type[BaseException]
) -> None:
    """Put ``item`` on ``q``; raises ``stop_error`` once ``stopped()`` while ``q`` stays full."""
    while True:
        try:
            q.put(item, timeout=POLL_S)
            return
        except queue.Full:
            if stopped():
                raise stop_error from None
