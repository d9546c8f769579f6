"""The eye's state: one definition shared by the blink events, the report and every live consumer.

The blink detector (:mod:`eyeblink.signals.blinks`) is the only thing that decides the state; a live
session's gate (trial control, LSL markers, the local socket) only reads the changes it publishes. No
consumer keeps a second copy of the rules.

States (``EyeState``):

* ``open`` — a face is fitted, no event is in progress and the openness is at the subject's open level.
  "Open and stable for ``stable_ms``" is ``open`` held since the last change for that long.
* ``closing`` — the openness has left the open level and is falling (an event has started).
* ``closed`` — the openness is below the closed threshold.
* ``reopening`` — the openness has risen back above the closed threshold but not yet to the open level.
* ``no_face`` — no face (or no eye) was fitted; also the state before the first fitted frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["EyeState", "StateChange"]


class EyeState(str, Enum):
    """The eye's state in one frame (values are the strings written to files, markers and sockets)."""

    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"
    REOPENING = "reopening"
    NO_FACE = "no_face"


@dataclass(frozen=True, slots=True)
class StateChange:
    """The eye entered ``state`` at ``frame`` (capture time ``timestamp_s``), leaving ``previous``."""

    frame: int
    timestamp_s: float
    state: EyeState
    previous: EyeState

    def __post_init__(self) -> None:
        if not isinstance(self.state, EyeState) or not isinstance(self.previous, EyeState):
            raise TypeError(f"StateChange states must be EyeState, got {self.state!r} and {self.previous!r}")
        if self.frame < 0:
            raise ValueError(f"StateChange frame must be >= 0, got {self.frame}")
