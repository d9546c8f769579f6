"""The browser view (``--view``) as an output of the run; the page, its server and the frame grab are
:mod:`eyeblink.runtime.live.view` (which ``process --view`` uses for a file too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eyeblink.runtime.live.sinks.base import Sink
from eyeblink.runtime.live.view import ViewSink

__all__ = ["ViewOutput"]


class ViewOutput(ViewSink, Sink):
    """:class:`~eyeblink.runtime.live.view.ViewSink` fed by the tap: its rows, blinks and gate events; the gate's state
    read from the tap for the page's status."""

    order = 30
    summary_key = "view"

    @classmethod
    def from_config(cls, live: Any, *, announce: Callable[[str], None] | None = None) -> ViewOutput | None:
        if not getattr(live, "view", False):
            return None
        return cls(port=live.view_port, host=live.view_host, announce=announce)

    def check(self) -> None:
        self.bind()  # the port, before any model loads

    def open(self, tap: Any) -> None:  # type: ignore[override]
        ViewSink.open(self, source=tap.source, stem=tap.stem, fps=tap.nominal_fps, eye_model=tap.eye_model, tap=tap)

    def connected(self, tap: Any) -> None:
        self.set_info(fps=tap.nominal_fps, eye_model=tap.eye_model)
