"""The files of a live run: ``frames.csv`` with the ``dropped`` column, each row and blink handed to
the outputs.

:class:`LiveResultWriter` is the sink's writer in :mod:`eyeblink.runtime.live.pipeline`: the same
files as ``process``, one more column (:data:`LIVE_FRAME_COLUMNS`), and every row and blink passed
to the run's outputs (:class:`~eyeblink.runtime.live.publish.LiveTap`) right after it is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.outputs.export import FRAME_COLUMNS, ResultWriter

if TYPE_CHECKING:
    from eyeblink.runtime.live.publish import LiveTap
    from eyeblink.signals.blinks import BlinkEvent

__all__ = ["LIVE_FRAME_COLUMNS", "LIVE_FRAME_COLUMN_DOCS", "LiveResultWriter"]

#: frames.csv of a live run: the contract's columns, then ``dropped`` (1 = a gap row of the overload
#: policy).
LIVE_FRAME_COLUMNS = (*FRAME_COLUMNS, "dropped")
#: Unit and meaning of the columns a live frames.csv adds to the contract's (generated into the
#: docs).
LIVE_FRAME_COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "dropped": (
        "0/1",
        "live runs only: 1 for a gap row, a frame the overload policy dropped (--on-overload drop) "
        "or that never arrived; its measurement cells are empty",
    ),
}


class LiveResultWriter(ResultWriter):
    """frames.csv with the ``dropped`` column appended; set :attr:`dropped` before a gap row."""

    def __init__(
        self,
        outdir: str | Path,
        stem: str,
        *,
        flush_interval_s: float = 0.5,
        tap: LiveTap | None = None,
    ) -> None:
        super().__init__(outdir, stem, flush_interval_s=flush_interval_s)
        self.dropped = False
        # LSL, the gate socket, the API: each row and blink right after it is written
        self.tap = tap

    def frame_header(self) -> tuple[str, ...]:
        """The table's columns, then ``dropped`` (:data:`LIVE_FRAME_COLUMNS` with the default
        table)."""
        return (*self.table.names, *LIVE_FRAME_COLUMNS[len(FRAME_COLUMNS) :])

    def write_summary(self, summary: dict[str, Any]) -> None:
        """As :meth:`ResultWriter.write_summary`; a run that ended well but fell behind
        (``live.status`` ``overloaded``) says so in the top-level ``status`` too, which scripts read
        (the dict is updated in place: the run's result says the same)."""
        if (
            summary.get("status") == "ok"
            and (summary.get("live") or {}).get("status") == "overloaded"
        ):
            summary["status"] = "overloaded"
        super().write_summary(summary)

    def write_frame(self, row: Any) -> None:
        full = (*row, int(self.dropped))
        super().write_frame(full)
        if self.tap is not None:
            self.tap.row(full)

    def write_blink(self, ev: BlinkEvent) -> None:
        super().write_blink(ev)
        if self.tap is not None:
            self.tap.blink(ev)
