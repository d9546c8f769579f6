"""Sinks: the outputs of a live run, each a class of one small interface
(:class:`~eyeblink.runtime.live.sinks.base.Sink`: ``put(item)`` for the run's items in frame order,
``close(reason)`` at the end).

The tap (:class:`eyeblink.runtime.live.publish.LiveTap`) decides the eye's state and its freshness;
the sinks only hand on what it sees, each in its own module:

* :mod:`~eyeblink.runtime.live.sinks.gate` — the gate socket (``--gate-port``): JSON lines on
  127.0.0.1;
* :mod:`~eyeblink.runtime.live.sinks.lsl` — the Lab Streaming Layer outlets (``--lsl``);
* :mod:`~eyeblink.runtime.live.sinks.view` — the browser view (``--view``; the page and its server
  are :mod:`eyeblink.runtime.live.view`);
* :mod:`~eyeblink.runtime.live.sinks.queue` — the Python API's callbacks and iterator
  (:func:`eyeblink.live`).

Which sinks a run has is decided by its config: every module here is asked
(:func:`sinks_from_config`), so adding an output is adding one module with a :class:`Sink` subclass
whose ``from_config`` says when it is wanted.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from eyeblink.runtime.live.sinks.base import (
    ITEMS,
    Blink,
    Connected,
    Ended,
    GateLine,
    Item,
    Opened,
    Ready,
    Row,
    Sink,
    StateChanged,
)

__all__ = [
    "ITEMS",
    "Blink",
    "Connected",
    "Ended",
    "GateLine",
    "Item",
    "Opened",
    "Ready",
    "Row",
    "Sink",
    "StateChanged",
    "sink_classes",
    "sinks_from_config",
]


def sink_classes() -> list[type[Sink]]:
    """The :class:`Sink` subclasses defined in the modules of this package, in their
    :attr:`Sink.order`."""
    found: list[type[Sink]] = []
    for mod in pkgutil.iter_modules(__path__):
        if mod.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        found += [
            c
            for c in vars(module).values()
            if isinstance(c, type)
            and issubclass(c, Sink)
            and c is not Sink
            and c.__module__ == module.__name__
        ]
    return sorted(found, key=lambda c: (c.order, c.__module__, c.__name__))


def sinks_from_config(live: Any, *, announce: Callable[[str], None] | None = None) -> list[Sink]:
    """The sinks ``live`` (a :class:`~eyeblink.config.LiveConfig`) asks for, in order. Made before
    any model loads: a sink that cannot work raises here (a missing extra, a port taken), and the
    ones made before it are closed."""
    out: list[Sink] = []
    try:
        for cls in sink_classes():
            sink = cls.from_config(live, announce=announce)
            if sink is not None:
                out.append(sink)
    except BaseException:
        for sink in out:
            sink.close(None)
        raise
    return out
