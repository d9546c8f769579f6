"""Online blink detection over the EAR trace.

The detector sees one sample per frame, in order, and emits a blink as soon as
it has ended: it is what the sink of a live run uses, and what the offline
``process`` runs use too, so both give the same events.

Definition (first version; all times in milliseconds so it behaves the same at
30 and 500 FPS):

* The signal is the mean EAR of the eyes that were fitted in that frame.
* The subject's open-eye **baseline** is the median of the signal over the last
  ``baseline_window_ms`` of frames that were not inside a blink. A fixed EAR
  threshold (the common 0.2) fails across subjects, cameras and head pitch; a
  ratio to the subject's own baseline does not.
* A blink **starts** when signal/baseline falls below ``close_ratio`` and
  **ends** when it rises back above ``open_ratio`` and then reaches
  ``onset_ratio`` (hysteresis: noise around one level cannot split or start a
  blink). The reported span is widened to the frames where the ratio left and
  regained ``onset_ratio``, i.e. from the first closing frame to the last frame
  before the eye is open again; both ends are inclusive frames.
* With enough frames per closing phase (high-speed cameras) the onset is
  refined by fitting the eyelid's start from rest, ``baseline - a·(t - t0)²``,
  to the frames before confirmation (see :func:`quadratic_onset`): a threshold
  crossing is late by the time the lid needs to move past the noise (4-6 frames
  at 500 FPS), the knee of the fit is not.
* Shorter than ``min_duration_ms`` (end_s - start_s): discarded as noise.
* Timestamps, not frame counts, drive everything. A gap longer than
  ``max_gap_ms`` (dropped frames, face lost) inside a blink ends it as
  ``complete = False`` at the last frame seen, so an event never spans
  frames nobody saw.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from eyeblink.config import BlinkConfig

BLINK_COLUMNS = (
    "blink", "start_frame", "end_frame", "start_s", "end_s", "duration_ms", "peak_frame", "peak_s",
    "baseline_ear", "min_ear", "amplitude", "baseline_ear_left", "min_ear_left", "amplitude_left",
    "baseline_ear_right", "min_ear_right", "amplitude_right", "complete",
)


@dataclass(frozen=True, slots=True)
class BlinkEvent:
    """One blink. ``amplitude`` = 1 - min/baseline of the signal (0 open, 1 fully closed).

    Per-eye fields are NaN when that eye was never fitted during the blink.
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

    def __post_init__(self) -> None:
        if self.end_frame < self.start_frame:
            raise ValueError(f"BlinkEvent end_frame {self.end_frame} < start_frame {self.start_frame}")
        if self.end_s < self.start_s:
            raise ValueError(f"BlinkEvent end_s {self.end_s} < start_s {self.start_s}")

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def quadratic_onset(t: np.ndarray, y: np.ndarray, *, steps_per_frame: int = 4) -> float | None:
    """Time ``t0`` of the best fit of ``y = b - a·max(0, t - t0)²`` (a > 0), or None.

    ``t``/``y`` are the samples from before the lid moved up to the frame where
    the blink was confirmed. Every candidate ``t0`` on a grid of
    ``steps_per_frame`` per frame interval is solved in closed form (two-parameter
    least squares), all at once.
    """
    n = len(t)
    if n < 4:
        return None
    dt = float(np.median(np.diff(t))) if n > 1 else 0.0
    if dt <= 0:
        return None
    cands = np.arange(t[0], t[-2], dt / steps_per_frame)
    if len(cands) == 0:
        return None
    h = np.maximum(0.0, t[None, :] - cands[:, None]) ** 2  # (C, n)
    # least squares of y ~ b - a h for each candidate: closed-form 2x2 normal equations
    sh, shh = h.sum(1), (h * h).sum(1)
    sy, shy = y.sum(), (h * y[None, :]).sum(1)
    det = n * shh - sh * sh
    ok = det > 1e-18
    a = np.where(ok, -(n * shy - sh * sy) / np.where(ok, det, 1.0), 0.0)
    b = np.where(ok, (sy + a * sh) / n, sy / n)
    sse = ((b[:, None] - a[:, None] * h - y[None, :]) ** 2).sum(1)
    sse = np.where(ok & (a > 0), sse, np.inf)
    k = int(np.argmin(sse))
    return float(cands[k]) if np.isfinite(sse[k]) else None


def _nanmin(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return min(a, b)


def _amp(minimum: float, base: float) -> float:
    if math.isnan(minimum) or math.isnan(base) or base <= 0:
        return float("nan")
    return 1.0 - minimum / base


class BlinkDetector:
    """Feed ``update(frame, t, ear_left, ear_right)`` per frame; collect finished blinks.

    ``ear_left``/``ear_right`` may be NaN (eye or face not found). Call
    ``finish()`` at the end of the input to close a blink still open.
    """

    _OPEN, _CLOSED, _REOPENING = 0, 1, 2

    def __init__(self, config: BlinkConfig | None = None) -> None:
        self.cfg = config or BlinkConfig()
        self._base: deque[tuple[float, float, float, float]] = deque()  # (t, signal, left, right)
        self._baseline = (math.nan, math.nan, math.nan)
        self._baseline_t = -math.inf
        self._state = self._OPEN
        self._count = 0
        self._last: tuple[int, float] | None = None  # last valid (frame, t)
        # the run of frames below onset_ratio before the blink was confirmed
        self._dip_start: tuple[int, float] | None = None
        self._ev: dict[str, Any] = {}
        # recent valid samples (frame, t, signal) for the onset fit
        self._recent: deque[tuple[int, float, float]] = deque()

    # -- baseline ---------------------------------------------------------------------------------------
    @property
    def baseline(self) -> float:
        """Current open-eye baseline of the signal (NaN while warming up)."""
        return self._baseline[0] if self._ready() else math.nan

    def _ready(self) -> bool:
        return len(self._base) >= 3 and (self._base[-1][0] - self._base[0][0]) * 1000 >= self.cfg.min_baseline_ms

    def _add_baseline(self, t: float, sig: float, left: float, right: float) -> None:
        self._base.append((t, sig, left, right))
        horizon = t - self.cfg.baseline_window_ms / 1000
        while self._base and self._base[0][0] < horizon:
            self._base.popleft()
        # recompute the medians at most every 10 ms: a 3 s window at 500 FPS is 1,500 samples
        if t - self._baseline_t >= 0.01 or not self._ready():
            arr = np.asarray(self._base, dtype=np.float64)
            with np.errstate(all="ignore"):
                cols = [float(np.nanmedian(arr[:, k])) if np.isfinite(arr[:, k]).any() else math.nan
                        for k in (1, 2, 3)]
            self._baseline = (cols[0], cols[1], cols[2])
            self._baseline_t = t

    # -- state machine ----------------------------------------------------------------------------------
    def update(self, frame: int, t: float, ear_left: float, ear_right: float) -> list[BlinkEvent]:
        """Process one frame; returns the blinks that ended with it (usually none)."""
        out: list[BlinkEvent] = []
        valid = [e for e in (ear_left, ear_right) if not math.isnan(e)]
        if not valid:
            return out  # face or eyes not found: a gap, judged when the next valid sample arrives
        sig = sum(valid) / len(valid)
        gap = self._last is not None and (t - self._last[1]) * 1000 > self.cfg.max_gap_ms
        if gap:
            if self._state != self._OPEN:
                ev = self._close(complete=False)
                if ev is not None:
                    out.append(ev)
            self._dip_start = None
            self._recent.clear()
        base = self.baseline
        ratio = sig / base if base > 0 else math.nan
        if self.cfg.onset_model == "quadratic":
            self._recent.append((frame, t, sig))
            horizon = t - self.cfg.onset_search_ms / 1000
            while self._recent[0][1] < horizon:
                self._recent.popleft()

        if self._state == self._OPEN:
            if math.isnan(ratio) or ratio >= self.cfg.onset_ratio:
                self._dip_start = None
                self._add_baseline(t, sig, ear_left, ear_right)
            else:
                if self._dip_start is None:
                    self._dip_start = (frame, t)
                if ratio < self.cfg.close_ratio:
                    self._begin(frame, t)
        if self._state in (self._CLOSED, self._REOPENING):
            self._track(frame, t, sig, ratio, ear_left, ear_right)
            if self._state == self._CLOSED and ratio >= self.cfg.open_ratio:
                self._state = self._REOPENING
            elif self._state == self._REOPENING and ratio < self.cfg.close_ratio:
                self._state = self._CLOSED
            if self._state == self._REOPENING and ratio >= self.cfg.onset_ratio:
                ev = self._close(complete=True)
                if ev is not None:
                    out.append(ev)
                self._add_baseline(t, sig, ear_left, ear_right)
        self._last = (frame, t)
        return out

    def finish(self) -> list[BlinkEvent]:
        """End of input: a blink still open is reported as incomplete."""
        if self._state == self._OPEN:
            return []
        ev = self._close(complete=False)
        return [ev] if ev is not None else []

    def _begin(self, frame: int, t: float) -> None:
        start = self._dip_start or (frame, t)
        bs, bl, br = self._baseline
        self._ev = {
            "start": start, "end": start, "baseline": (bs, bl, br),
            "min": math.inf, "peak": start, "min_left": math.nan, "min_right": math.nan,
            # the frames before confirmation and during the blink, for the onset fit at the end
            "samples": list(self._recent) if self.cfg.onset_model == "quadratic" else None,
        }
        self._state = self._CLOSED

    def _refined_onset(self, ev: dict[str, Any]) -> tuple[int, float] | None:
        """Onset from the quadratic fit over the closing phase up to half depth (None: too few frames)."""
        samples = ev["samples"]
        if not samples or len(samples) < self.cfg.onset_min_samples:
            return None
        rec = np.asarray(samples, dtype=np.float64)
        base = ev["baseline"][0]
        peak_t = ev["peak"][1]
        half = base - 0.5 * (base - ev["min"])
        # up to the first frame at or below half depth, on the way down to the peak
        below = np.nonzero((rec[:, 2] <= half) & (rec[:, 1] <= peak_t))[0]
        stop = int(below[0]) + 1 if len(below) else len(rec)
        if stop < self.cfg.onset_min_samples:
            return None
        t0 = quadratic_onset(rec[:stop, 1], rec[:stop, 2])
        if t0 is None:
            return None
        k = int(np.argmin(np.abs(rec[:stop, 1] - t0)))  # the frame nearest the knee
        return int(rec[k, 0]), float(rec[k, 1])

    def _track(self, frame: int, t: float, sig: float, ratio: float, left: float, right: float) -> None:
        ev = self._ev
        if ratio < self.cfg.onset_ratio:
            ev["end"] = (frame, t)  # last frame still below the open level
        if sig < ev["min"]:
            ev["min"] = sig
            ev["peak"] = (frame, t)
        if ev["samples"] is not None:
            ev["samples"].append((frame, t, sig))
        ev["min_left"] = _nanmin(ev["min_left"], left)
        ev["min_right"] = _nanmin(ev["min_right"], right)

    def _close(self, *, complete: bool) -> BlinkEvent | None:
        ev = self._ev
        self._state = self._OPEN
        self._dip_start = None
        self._ev = {}
        (f0, t0), (f1, t1) = self._refined_onset(ev) or ev["start"], ev["end"]
        if not complete and self._last is not None and self._last[0] > f1:
            f1, t1 = self._last  # incomplete: up to the last frame seen
        duration_ms = (t1 - t0) * 1000
        if complete and duration_ms < self.cfg.min_duration_ms:
            return None
        bs, bl, br = ev["baseline"]
        self._count += 1
        return BlinkEvent(
            blink=self._count, start_frame=f0, end_frame=f1, start_s=t0, end_s=t1,
            duration_ms=duration_ms, peak_frame=ev["peak"][0], peak_s=ev["peak"][1],
            baseline_ear=bs, min_ear=ev["min"], amplitude=_amp(ev["min"], bs),
            baseline_ear_left=bl, min_ear_left=ev["min_left"], amplitude_left=_amp(ev["min_left"], bl),
            baseline_ear_right=br, min_ear_right=ev["min_right"], amplitude_right=_amp(ev["min_right"], br),
            complete=complete,
        )
