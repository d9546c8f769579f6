"""The result types the outputs stage hands around: one input's :class:`RunResult` and its
:class:`SessionData`.

They sit below their users (the runtimes build a :class:`RunResult`;
:mod:`eyeblink.outputs.analysis` finalizes it and hands :class:`SessionData` to
:mod:`eyeblink.outputs.nwb` and :mod:`eyeblink.outputs.plots`), so none of those modules imports
another in a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.signals.blinks import BlinkEvent
    from eyeblink.signals.closure import ClosureCalibration
    from eyeblink.signals.trials import Trial, TrialResult

__all__ = ["RunResult", "SessionData"]


@dataclass
class RunResult:
    """The outcome of one input."""

    stem: str
    frames: int
    faces: int
    blinks: list[BlinkEvent]
    summary: dict[str, Any]
    outputs: dict[str, Path]


@dataclass(frozen=True)
class SessionData:
    """The frame rows of one processed input, as arrays, plus its calibration and trials."""

    frame: np.ndarray
    t: np.ndarray
    ear: np.ndarray
    ear_left: np.ndarray
    ear_right: np.ndarray
    baseline: np.ndarray  # the running baseline, warm-up back-filled
    amplitude: np.ndarray  # 1 - ear / baseline
    closure: np.ndarray  # FEC
    calibration: ClosureCalibration
    trials: tuple[Trial, ...] = ()
    results: tuple[TrialResult, ...] = ()
    #: the other frames.csv columns NWB or the report show
    #: (:attr:`eyeblink.outputs.columns.FrameTable.nwb_series`, ``report_traces``), by name, as read
    #: (empty cells NaN)
    columns: Mapping[str, np.ndarray] = field(default_factory=dict)

    def series(self, name: str) -> np.ndarray:
        """The array ``name``: a field of this session (``baseline``, ``closure``, ...), else a
        frames.csv column of :attr:`columns`."""
        if name in _FIELDS:
            return getattr(self, name)
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(
                f"session data has no array {name!r} (no field, no frames.csv column read)"
            ) from None


_FIELDS = frozenset(f.name for f in fields(SessionData)) - {
    "calibration",
    "trials",
    "results",
    "columns",
}


def shown_columns() -> tuple[str, ...]:
    """The frames.csv columns NWB or the report show that are no :class:`SessionData` field (read
    into :attr:`SessionData.columns`; none by default)."""
    from eyeblink.outputs import columns as _columns

    table = _columns.FRAME_TABLE
    wanted = [d for _, _, d in table.nwb_series] + [d for _, _, d in table.report_traces]
    return tuple(dict.fromkeys(d for d in wanted if d not in _FIELDS))
