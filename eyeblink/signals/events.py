"""A settled blink event (``BlinkEvent``) and the columns of ``blinks.csv`` it is written as.

The blink detector (:mod:`eyeblink.signals.blinks`) measures each event; every consumer (the CSV
writer, the report, NWB, the live outputs, the Python API) reads this record. ``BLINK_COLUMNS`` is
the output contract: columns never change meaning, new ones go at the end; ``BLINK_COLUMN_DOCS``
gives each its unit and meaning (the docs' column reference is generated from it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

BLINK_COLUMNS = (
    "blink",
    "start_frame",
    "end_frame",
    "start_s",
    "end_s",
    "duration_ms",
    "peak_frame",
    "peak_s",
    "baseline_ear",
    "min_ear",
    "amplitude",
    "baseline_ear_left",
    "min_ear_left",
    "amplitude_left",
    "baseline_ear_right",
    "min_ear_right",
    "amplitude_right",
    "complete",
    # appended in 0.2 (columns never change meaning; new ones go at the end)
    "start_frame_left",
    "end_frame_left",
    "start_s_left",
    "end_s_left",
    "start_frame_right",
    "end_frame_right",
    "start_s_right",
    "end_s_right",
    "opening_amplitude",
    "closing_velocity",
    "opening_velocity",
    "partial",
    "full_closure_amplitude",
    "cue",
    # appended in 0.3
    "kind",
)

#: the kinds of event (``BlinkEvent.kind``): a blink, or a closure longer than ``max_blink_ms`` (not
#: a blink)
BLINK = "blink"
PROLONGED_CLOSURE = "prolonged_closure"
EVENT_KINDS = (BLINK, PROLONGED_CLOSURE)

_NAN = math.nan


@dataclass(frozen=True, slots=True)
class BlinkEvent:
    """One blink. ``amplitude`` = 1 - min/baseline of the combined EAR ratio (0 open, 1 fully
    closed).

    Per-eye fields are NaN (frames: None) when that eye was never fitted, or never went below
    ``onset_ratio``, during the blink. Velocities are in EAR-ratio units per second.
    """

    blink: int
    start_frame: int
    end_frame: int
    start_s: float
    end_s: float
    duration_ms: float
    peak_frame: int
    peak_s: float
    baseline_ear: float
    min_ear: float
    amplitude: float
    baseline_ear_left: float
    min_ear_left: float
    amplitude_left: float
    baseline_ear_right: float
    min_ear_right: float
    amplitude_right: float
    complete: bool
    start_frame_left: int | None = None
    end_frame_left: int | None = None
    start_s_left: float = _NAN
    end_s_left: float = _NAN
    start_frame_right: int | None = None
    end_frame_right: int | None = None
    start_s_right: float = _NAN
    end_s_right: float = _NAN
    opening_amplitude: float = _NAN
    closing_velocity: float = _NAN
    opening_velocity: float = _NAN
    partial: bool = False
    full_closure_amplitude: float = _NAN
    cue: str = "ear"
    kind: str = BLINK

    def __post_init__(self) -> None:
        if self.end_frame < self.start_frame:
            raise ValueError(
                f"BlinkEvent end_frame {self.end_frame} < start_frame {self.start_frame}"
            )
        if self.end_s < self.start_s:
            raise ValueError(f"BlinkEvent end_s {self.end_s} < start_s {self.start_s}")
        if not (self.start_frame <= self.peak_frame <= self.end_frame):
            raise ValueError(
                f"BlinkEvent peak_frame {self.peak_frame} outside [{self.start_frame}, "
                f"{self.end_frame}]"
            )
        if self.cue not in ("ear", "appearance", "both"):
            raise ValueError(
                f"BlinkEvent cue must be 'ear', 'appearance' or 'both', got {self.cue!r}"
            )
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"BlinkEvent kind must be one of {EVENT_KINDS}, got {self.kind!r}")

    @property
    def is_blink(self) -> bool:
        """True for a blink, False for a prolonged closure (``kind``)."""
        return self.kind == BLINK

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


#: Unit and one-line meaning of every ``blinks.csv`` column (the docs' column reference is generated
#: from this; a column without an entry fails the docs build). "ratio" is EAR divided by the eye's
#: open-eye baseline.
BLINK_COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "blink": ("index", "blink number in the recording, from 1"),
    "start_frame": (
        "frame",
        "onset frame (the knee of the start-from-rest fit at high frame rates, else the "
        "threshold crossing)",
    ),
    "end_frame": ("frame", "last frame of the blink (the eye back above the open threshold)"),
    "start_s": ("s", "timestamp of the onset frame"),
    "end_s": ("s", "timestamp of the end frame"),
    "duration_ms": (
        "ms",
        "end_s - start_s + one frame interval (frames are inclusive: a one-frame blink lasts "
        "one frame interval)",
    ),
    "peak_frame": ("frame", "frame of the deepest closure (lowest openness)"),
    "peak_s": ("s", "timestamp of the peak frame"),
    "baseline_ear": ("ratio", "open-eye baseline openness (mean of the eyes) at the onset"),
    "min_ear": ("ratio", "lowest openness (mean of the eyes) in the blink"),
    "amplitude": ("fraction", "1 - min_ear / baseline_ear: 0 = no closure, 1 = fully closed"),
    "baseline_ear_left": ("ratio", "the subject's left eye: baseline openness at the onset"),
    "min_ear_left": ("ratio", "the subject's left eye: lowest openness"),
    "amplitude_left": ("fraction", "the subject's left eye: 1 - min / baseline"),
    "baseline_ear_right": ("ratio", "the subject's right eye: baseline openness at the onset"),
    "min_ear_right": ("ratio", "the subject's right eye: lowest openness"),
    "amplitude_right": ("fraction", "the subject's right eye: 1 - min / baseline"),
    "complete": (
        "0/1",
        "1 when the blink started and ended inside the recording (0: cut by its start or end, "
        "or by a gap)",
    ),
    "start_frame_left": (
        "frame",
        "onset frame of the left eye alone (empty: that eye did not close)",
    ),
    "end_frame_left": ("frame", "end frame of the left eye alone"),
    "start_s_left": ("s", "onset time of the left eye alone"),
    "end_s_left": ("s", "end time of the left eye alone"),
    "start_frame_right": (
        "frame",
        "onset frame of the right eye alone (empty: that eye did not close)",
    ),
    "end_frame_right": ("frame", "end frame of the right eye alone"),
    "start_s_right": ("s", "onset time of the right eye alone"),
    "end_s_right": ("s", "end time of the right eye alone"),
    "opening_amplitude": ("fraction", "openness ratio regained from the minimum to the end"),
    "closing_velocity": (
        "ratio/s",
        "peak closing speed of the openness ratio, smoothed over blinks.smooth_ms (positive)",
    ),
    "opening_velocity": ("ratio/s", "peak opening speed of the openness ratio (positive)"),
    "partial": (
        "0/1",
        "1 when the amplitude is below blinks.partial_fraction of the subject's full closure",
    ),
    "full_closure_amplitude": (
        "fraction",
        "the subject's full-closure amplitude this blink was judged against",
    ),
    "cue": (
        "text",
        "which signal crossed the threshold: ear, appearance (the eye patches) or both",
    ),
    "kind": (
        "text",
        "blink, or prolonged_closure: a closure longer than blinks.max_blink_ms (not a blink; "
        "not counted in the blink figures; a full blink inside it is a blink row of its own)",
    ),
}
