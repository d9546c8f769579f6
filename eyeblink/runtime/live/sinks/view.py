"""The browser view (``--view``) as an output of the run; the page, its server and the frame grab
are :mod:`eyeblink.runtime.live.view` (which ``process --view`` uses for a file too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eyeblink.runtime.live.sinks.base import Blink, Connected, GateLine, Item, Opened, Row, Sink
from eyeblink.runtime.live.view import ViewSink

__all__ = ["ViewOutput"]


class ViewOutput(ViewSink, Sink):
    """:class:`~eyeblink.runtime.live.view.ViewSink` fed by the tap: its rows, blinks and gate
    events; the gate's state read from the tap for the page's status. It takes its port when made,
    before any model loads (one line naming the fix when the port is taken)."""

    order = 30
    summary_key = "view"
    takes = (Opened, Connected, Row, GateLine, Blink)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        try:
            self.bind()  # the port, before any model loads
        except BaseException:
            self.preview.close()
            raise

    @classmethod
    def from_config(
        cls, live: Any, *, announce: Callable[[str], None] | None = None
    ) -> ViewOutput | None:
        if not getattr(live, "view", False):
            return None
        return cls(port=live.view_port, host=live.view_host, announce=announce)

    def put(self, item: Item) -> None:
        match item:
            case Row(row=r, published=published):
                self.row(r, published)
            case GateLine(event=ev):
                self.event(ev)
            case Blink(event=ev):
                self.blink(ev)
            case Opened(tap=tap):
                self.open(
                    source=item.source,
                    stem=item.stem,
                    fps=item.nominal_fps,
                    eye_model=item.eye_model,
                    tap=tap,
                )
            case Connected():
                self.set_info(fps=item.nominal_fps, eye_model=item.eye_model)
