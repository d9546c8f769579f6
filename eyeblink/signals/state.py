"""The eye's state: one definition shared by the blink events, the report and every live consumer.

The blink detector (:mod:`eyeblink.signals.blinks`) is the only thing that decides the state; a live
session's gate (trial control, LSL markers, the local socket) only reads the changes it publishes.
No consumer keeps a second copy of the rules.

States (``EyeState``):

* ``open`` — a face is fitted, no event is in progress and the openness is at the subject's open
  level. "Open and stable for ``stable_ms``" is ``open`` held since the last change for that long.
* ``closing`` — the openness has left the open level and is falling (an event has started).
* ``closed`` — the openness is below the closed threshold.
* ``reopening`` — the openness has risen back above the closed threshold but not yet to the open
  level.
* ``no_face`` — no face (or no eye) was fitted; also the state before the first fitted frame.

A live session reports the detector's state through a :class:`StateDebouncer`: a new state counts
only once it has lasted ``settle_ms`` of capture time (``face_lost_ms`` for ``no_face``), so a
single-frame flicker of the openness, or a frame without a fit, is no change at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

__all__ = ["EyeState", "StateChange", "StateDebouncer"]


class EyeState(str, Enum):
    """The eye's state in one frame (values are the strings written to files, markers and
    sockets)."""

    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"
    REOPENING = "reopening"
    NO_FACE = "no_face"


@dataclass(frozen=True, slots=True)
class StateChange:
    """The eye entered ``state`` at ``frame`` (capture time ``timestamp_s``), leaving ``previous``.

    A live session's changes (the API's ``on_state``, the gate's ``state`` lines) also say how fresh
    they are: ``latest_frame`` / ``latest_s`` is the newest frame the change was judged on (the
    frame that settled it), ``arrival_time`` when that frame was received and ``sent_time`` when the
    change was handed on, both ``time.perf_counter()`` (``CLOCK_MONOTONIC``); :attr:`age_ms` is
    their difference. NaN / -1 where unknown (the detector's own records).
    """

    frame: int
    timestamp_s: float
    state: EyeState
    previous: EyeState
    latest_frame: int = -1
    latest_s: float = math.nan
    arrival_time: float = math.nan
    sent_time: float = math.nan

    @property
    def age_ms(self) -> float:
        """How old the newest frame behind this change was when it was handed on (NaN where
        unknown)."""
        return (self.sent_time - self.arrival_time) * 1000.0

    def __post_init__(self) -> None:
        if not isinstance(self.state, EyeState) or not isinstance(self.previous, EyeState):
            raise TypeError(
                f"StateChange states must be EyeState, got {self.state!r} and {self.previous!r}"
            )
        if self.frame < 0:
            raise ValueError(f"StateChange frame must be >= 0, got {self.frame}")


class StateDebouncer:
    """The settled eye state: a new state of the detector counts once it has lasted, so nothing
    flickers.

    Fed once per analysed frame with the detector's state after that frame (:meth:`update`); a
    different state becomes a *candidate* at the frame it first appears and is settled once it still
    holds at a frame ``settle_ms`` (``face_lost_ms`` for ``no_face``) of capture time later. A
    candidate replaced by another state, or interrupted by the settled one, starts over. So a
    one-frame ``closing`` between two ``open`` frames, or one frame without a fit, changes nothing;
    a real blink (tens of ms below the open level) is reported ``settle_ms`` after it began, stamped
    with the frame where it began. Frames that carry no evidence (a dropped frame, one the detector
    has not judged yet) are simply not fed.
    """

    def __init__(self, settle_ms: float = 10.0, face_lost_ms: float = 200.0) -> None:
        if not (math.isfinite(settle_ms) and settle_ms >= 0):
            raise ValueError(f"settle_ms must be a finite number >= 0, got {settle_ms!r}")
        if not (math.isfinite(face_lost_ms) and face_lost_ms >= 0):
            raise ValueError(f"face_lost_ms must be a finite number >= 0, got {face_lost_ms!r}")
        self.settle_s = settle_ms / 1000.0
        self.face_lost_s = face_lost_ms / 1000.0
        self.state = EyeState.NO_FACE
        self._cand: tuple[EyeState, int, float] | None = None

    @property
    def pending(self) -> EyeState | None:
        """The state that has appeared but not lasted yet (None: the detector agrees with
        :attr:`state`)."""
        return self._cand[0] if self._cand is not None else None

    @property
    def pending_since_s(self) -> float:
        """Capture time the pending state appeared (NaN: none)."""
        return self._cand[2] if self._cand is not None else math.nan

    def forget(self) -> None:
        """Drop the pending evidence (the frames behind it are too old to count: a stall)."""
        self._cand = None

    def update(self, frame: int, t: float, raw: EyeState) -> StateChange | None:
        """The detector says ``raw`` after ``frame`` (capture time ``t``): the settled change, if
        one is due."""
        if raw is self.state:
            self._cand = None
            return None
        if self._cand is None or self._cand[0] is not raw:
            self._cand = (raw, int(frame), float(t))
        hold = self.face_lost_s if raw is EyeState.NO_FACE else self.settle_s
        _, f0, t0 = self._cand
        if t - t0 < hold - 1e-9:
            return None
        change = StateChange(
            frame=f0,
            timestamp_s=t0,
            state=raw,
            previous=self.state,
            latest_frame=int(frame),
            latest_s=float(t),
        )
        self.state = raw
        self._cand = None
        return change
