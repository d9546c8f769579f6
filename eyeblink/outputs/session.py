"""The result types the outputs stage hands around: one input's :class:`RunResult` and its :class:`SessionData`.

They sit below their users (the runtimes build a :class:`RunResult`; :mod:`eyeblink.outputs.analysis`
finalizes it and hands :class:`SessionData` to :mod:`eyeblink.outputs.nwb` and :mod:`eyeblink.outputs.plots`),
so none of those modules imports another in a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
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
