"""Fraction of eyelid closure (FEC), calibrated per session.

EAR is a geometric ratio whose value for an open and a closed eye differs between subjects, camera
angles and head pitch; conditioning papers report eyelid closure instead, as a fraction from the
subject's open eye (0) to a full closure (1). Here::

    amplitude(t) = 1 - EAR(t) / baseline_EAR(t)   # the blink detector's open-eye baseline
    FEC(t)       = amplitude(t) / A_full           # A_full: the session's full-closure amplitude

``amplitude`` is the same quantity as a blink's ``amplitude`` in ``blinks.csv`` (``1 -
min/baseline``), so a complete blink has ``FEC = amplitude / A_full`` at its peak. Using the running
baseline as the zero keeps FEC at 0 for an open eye when slow head movements drift the EAR.

``A_full`` comes from (in this order)

1. a **calibration segment** the user names (``--calibration START_S:END_S``: e.g. air puffs alone
   before training): the largest closure in it, after a ``smooth_ms`` running median so that one
   noisy frame cannot set the scale;
2. the session's **largest reflex closures**: the ``percentile``-th percentile of the amplitudes of
   its complete blinks and of its US-evoked responses (URs: the puff closes the eye fully) that
   reach ``min_amplitude``, once there are ``min_responses`` of them;
3. ``default_full_amplitude`` (0.7: dlib's 68-point eye at full closure reads ~0.7 below its open
   EAR), marked ``method = "default"`` in the summary so nobody mistakes it for a calibration.

FEC is not clipped: values slightly below 0 (eye wider than baseline) and above 1 (a closure deeper
than the calibration) are kept, so that means over trials stay unbiased.

How the ``closure`` column gets into ``frames.csv``: the sink writes rows as they are computed (a
crash must keep them), so it writes a *provisional* FEC from what is known at that frame
(:class:`OnlineClosure`: the running baseline and the calibration so far). When the input has been
processed, :func:`eyeblink.outputs.analysis.finalize` computes the session calibration from the
whole recording and rewrites ``frames.csv`` atomically (temporary file + rename) with the final
values; ``summary.json``'s ``closure`` section says which one is on disk (``provisional: true``
after a crash). The column means the same either way; only the calibration's certainty differs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from eyeblink.config import ClosureConfig
from eyeblink.errors import CalibrationError

Method = Literal["segment", "responses", "default"]


@dataclass(frozen=True, slots=True)
class ClosureCalibration:
    """The session's full-closure amplitude ``A_full`` and where it came from."""

    full_amplitude: float
    method: Method
    responses: int = 0
    provisional: bool = False
    segment_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.full_amplitude) and 0.0 < self.full_amplitude <= 1.0):
            raise CalibrationError(
                f"full-closure amplitude must be in (0, 1], got {self.full_amplitude}"
            )
        if self.method not in ("segment", "responses", "default"):
            raise CalibrationError(
                f"calibration method must be segment, responses or default, got {self.method!r}"
            )

    def fec(self, amplitude: Any) -> Any:
        """FEC from closure amplitude(s) ``1 - EAR/baseline`` (NaN stays NaN)."""
        return amplitude / self.full_amplitude

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["segment_s"] = list(self.segment_s) if self.segment_s else None
        return d


def closure_amplitude(ear: Any, baseline: Any) -> Any:
    """``1 - ear / baseline``; NaN where either is missing or the baseline is not positive."""
    ear_a = np.asarray(ear, dtype=np.float64)
    base = np.asarray(baseline, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(base > 0, 1.0 - ear_a / np.where(base > 0, base, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def running_median(values: np.ndarray, k: int) -> np.ndarray:
    """Centred running median over ``k`` samples (odd; NaNs ignored; edges use the samples there
    are)."""
    v = np.asarray(values, dtype=np.float64)
    if k <= 1 or len(v) == 0:
        return v.copy()
    h = k // 2
    padded = np.pad(v, h, constant_values=np.nan)
    win = np.lib.stride_tricks.sliding_window_view(padded, 2 * h + 1)
    out = np.full(len(v), np.nan)
    ok = np.isfinite(win).any(axis=1)
    if ok.any():
        out[ok] = np.nanmedian(win[ok], axis=1)
    return out


def smoothing_samples(t: np.ndarray, smooth_ms: float) -> int:
    """Odd number of samples spanning ``smooth_ms`` at the recording's median frame interval."""
    if len(t) < 2 or smooth_ms <= 0:
        return 1
    dt = float(np.median(np.diff(t)))
    if not dt > 0:
        return 1
    k = max(1, round(smooth_ms / 1000.0 / dt))
    return k if k % 2 else k + 1


def from_responses(
    config: ClosureConfig, amplitudes: Iterable[float], *, provisional: bool = False
) -> ClosureCalibration:
    """``A_full`` from reflex-closure amplitudes (blinks, URs), or the default when there are too
    few."""
    amps = np.asarray(
        [a for a in amplitudes if math.isfinite(a) and a >= config.min_amplitude], dtype=np.float64
    )
    if len(amps) < config.min_responses:
        return ClosureCalibration(config.default_full_amplitude, "default", len(amps), provisional)
    a_full = float(min(1.0, np.percentile(amps, config.percentile)))
    return ClosureCalibration(a_full, "responses", len(amps), provisional)


def from_segment(
    config: ClosureConfig, t: np.ndarray, amplitude: np.ndarray, *, provisional: bool = False
) -> ClosureCalibration:
    """``A_full`` from the largest (median-smoothed) closure inside ``config.calibration_s``.

    Raises :class:`CalibrationError` when the segment has no measured frame or no closure of at
    least ``min_amplitude`` (a segment without a full closure would inflate every FEC).
    """
    if config.calibration_s is None:
        raise CalibrationError("no calibration segment was given; pass --calibration START_S:END_S")
    start, end = config.calibration_s
    t = np.asarray(t, dtype=np.float64)
    smooth = running_median(
        np.asarray(amplitude, dtype=np.float64), smoothing_samples(t, config.smooth_ms)
    )
    inside = (t >= start) & (t <= end)
    if not np.isfinite(smooth[inside]).any():
        span = f"{t[0]:.3f}-{t[-1]:.3f} s" if len(t) else "empty"
        raise CalibrationError(
            f"calibration segment {start:g}:{end:g} s has no frame with a measured eye "
            f"(recording: {span}); "
            "name a segment inside the recording where the face is visible (--calibration "
            "START_S:END_S)"
        )
    a_full = float(np.nanmax(smooth[inside]))
    if a_full < config.min_amplitude:
        raise CalibrationError(
            f"the largest eyelid closure in calibration segment {start:g}:{end:g} s is "
            f"{a_full:.2f} "
            f"(1 - EAR/baseline), below closure.min_amplitude={config.min_amplitude}; name a "
            "segment "
            "with full closures (e.g. US-alone puffs) or leave out --calibration to calibrate on "
            "the session"
        )
    return ClosureCalibration(min(1.0, a_full), "segment", 1, provisional, (start, end))


class OnlineClosure:
    """The sink's provisional FEC: the running baseline and the calibration known so far.

    With a calibration segment, frames before its end use the default amplitude and every frame
    after it the segment's calibration; without one, the completed blinks so far are the
    responses (see :func:`from_responses`).
    """

    def __init__(self, config: ClosureConfig) -> None:
        self.cfg = config
        self._amps: list[float] = []
        self._cal = from_responses(config, (), provisional=True)
        self._seg_t: list[float] = []
        self._seg_a: list[float] = []
        self._seg_done = config.calibration_s is None

    @property
    def calibration(self) -> ClosureCalibration:
        return self._cal

    def update(self, t: float, ear: float, baseline: float) -> float:
        """Provisional FEC of one frame (NaN when the eye or the baseline is not measured)."""
        # scalar arithmetic: this runs once per frame in the sink (500+ times a second)
        amp = 1.0 - ear / baseline if baseline > 0 and not math.isnan(ear) else math.nan
        if not self._seg_done:
            start, end = self.cfg.calibration_s  # type: ignore[misc]
            if start <= t <= end:
                self._seg_t.append(t)
                self._seg_a.append(amp)
            elif t > end:
                self._end_segment()
        return float(amp / self._cal.full_amplitude)

    def add_response(self, amplitude: float) -> None:
        """A completed reflex closure (a blink's amplitude)."""
        self._amps.append(amplitude)
        if self.cfg.calibration_s is None:
            self._cal = from_responses(self.cfg, self._amps, provisional=True)

    def _end_segment(self) -> None:
        self._seg_done = True
        # provisional only: on a bad segment keep the default; the final pass reports the problem
        with contextlib.suppress(CalibrationError):
            self._cal = from_segment(
                self.cfg, np.asarray(self._seg_t), np.asarray(self._seg_a), provisional=True
            )
