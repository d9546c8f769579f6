"""The Python API's output (:func:`eyeblink.live`): its callbacks, and the queue its iterator
reads."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from eyeblink.runtime.live.sinks.base import Blink, GateLine, Item, Row, Sink, StateChanged

__all__ = ["QueueSink"]


class QueueSink(Sink):
    """Calls ``on_frame(row)``, ``on_blink(event)`` and ``on_state(change)`` in the session's thread
    as each is written, and keeps rows (as plain tuples) and blinks in :attr:`items` for an iterator
    (at most ``max_items``: the oldest unread one is dropped and counted in :attr:`missed`). A
    callback that raises is handed to ``failed(exc, callback)``.

    Made by the API for its session (:meth:`from_config` asks for none)."""

    order = 40
    takes = (Row, StateChanged, GateLine, Blink)

    def __init__(
        self,
        *,
        on_frame: Callable[[Any], Any] | None = None,
        on_blink: Callable[[Any], Any] | None = None,
        on_state: Callable[[Any], Any] | None = None,
        max_items: int = 50_000,
        failed: Callable[[BaseException, Any], None] | None = None,
    ) -> None:
        self.on_frame, self.on_blink, self.on_state = on_frame, on_blink, on_state
        self.max_items = max_items
        self.failed = failed
        self.items: deque[Any] = deque()
        self.cond = threading.Condition()  # notified on every row, blink and gate event
        self.missed = 0

    def _call(self, cb: Callable[[Any], Any], item: Any) -> None:
        try:
            cb(item)
        except BaseException as exc:  # a failing callback stops the session (the API re-raises it)
            if self.failed is None:
                raise
            self.failed(exc, cb)

    def _put(self, item: Any) -> None:
        with self.cond:
            if len(self.items) >= self.max_items:
                self.items.popleft()
                self.missed += 1
            self.items.append(item)
            self.cond.notify_all()

    def put(self, item: Item) -> None:
        match item:
            case Row(row=r):
                if self.on_frame is not None:
                    self._call(self.on_frame, r)
                # kept as a plain tuple of its cells (the API's iterator makes it a LiveRow again
                # as it is read): the garbage collector stops tracking a plain tuple of numbers at
                # its first collection, and a named tuple never, so 50,000 unread rows would make
                # each full collection of the session's process 20-50 ms longer, a pause that every
                # frame's row waits behind
                self._put(tuple(r))
            case Blink(event=ev):
                if self.on_blink is not None:
                    self._call(self.on_blink, ev)
                self._put(ev)
            case StateChanged(change=ch):
                if self.on_state is not None:
                    self._call(self.on_state, ch)
            case GateLine():
                with self.cond:
                    self.cond.notify_all()
