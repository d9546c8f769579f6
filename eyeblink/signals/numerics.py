"""The numerics the blink detector runs on its EAR traces: the onset fit, the eye patches'
dissimilarity, a window of samples dropped by time, medians cheaper than ``np.median`` (the same
floats), smoothing.

Pure numpy, no state of the detector: :mod:`eyeblink.signals.blinks` keeps that.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

# np.median imports numpy.ma at its first call (~20 ms): a live session's first blink would pay that
# in the sink, the rows waiting behind it; imported with this module instead
import numpy.ma

_NAN = math.nan


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


def patch_dissimilarity(patch: np.ndarray, template: np.ndarray) -> float:
    """``1 - NCC`` of two equally shaped patches (0 identical, up to 2); NaN for a flat patch."""
    a = np.asarray(patch, dtype=np.float64)
    b = np.asarray(template, dtype=np.float64)
    a = a - a.mean()
    b = b - b.mean()
    den = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    if den <= 1e-9:
        return _NAN
    return 1.0 - float((a * b).sum()) / den


class CenteredTemplate:
    """A template centred once for :func:`patch_dissimilarity` against many patches (same
    arithmetic)."""

    def __init__(self, template: np.ndarray) -> None:
        b = np.asarray(template, dtype=np.float64)
        self.b = [b[i] - b[i].mean() for i in range(len(b))]
        self.bb = [float((x * x).sum()) for x in self.b]
        self._stacked: np.ndarray | None = None  # b as one array, for pair()

    def pair(self, patches: np.ndarray) -> tuple[float, float]:
        """``(dissimilarity(0, patches[0]), dissimilarity(1, patches[1]))``, both eyes in one pass
        (the same sums: each eye's reductions run over its own 288 values, as one patch's do)."""
        if self._stacked is None:
            self._stacked = np.stack(self.b)
        a = np.asarray(patches, dtype=np.float64)
        if a.shape != self._stacked.shape:
            return self.dissimilarity(0, patches[0]), self.dissimilarity(1, patches[1])
        add = np.add.reduce  # what mean() and sum() call, without their Python wrappers
        a = a - (add(a, axis=(1, 2)) / (a.shape[1] * a.shape[2]))[:, None, None]
        aa = add(a * a, axis=(1, 2)).tolist()
        ab = add(a * self._stacked, axis=(1, 2)).tolist()
        out = []
        for i in (0, 1):
            den = math.sqrt(aa[i] * self.bb[i])
            out.append(_NAN if den <= 1e-9 else 1.0 - ab[i] / den)
        return out[0], out[1]

    def dissimilarity(self, i: int, patch: np.ndarray) -> float:
        a = np.asarray(patch, dtype=np.float64)
        a = a - a.mean()
        den = math.sqrt(float((a * a).sum()) * self.bb[i])
        if den <= 1e-9:
            return _NAN
        return 1.0 - float((a * self.b[i]).sum()) / den


def nanmean(vals: tuple[float, ...]) -> float:
    v = [x for x in vals if not math.isnan(x)]
    return sum(v) / len(v) if v else _NAN


def closure_amplitude(minimum: float, base: float) -> float:
    if math.isnan(minimum) or math.isnan(base) or base <= 0:
        return _NAN
    return min(1.0, max(0.0, 1.0 - minimum / base))


def smooth(y: np.ndarray, t: np.ndarray, window_ms: float) -> np.ndarray:
    """Centred moving average over ``window_ms`` (no smoothing when it spans fewer than 3
    samples)."""
    if len(y) < 3:
        return y
    dt = float(np.median(np.diff(t)))
    k = round(window_ms / 1000 / dt) if dt > 0 else 1
    if k < 3:
        return y
    k |= 1
    pad = np.pad(y, k // 2, mode="edge")
    return np.convolve(pad, np.ones(k) / k, mode="valid")


class TimeWindow:
    """Rows of floats in time order (column 0 = t), dropped from the front by time.

    A numpy buffer rather than a deque of tuples: the baseline medians read it as an array
    every 10 ms without converting 1,500 tuples each time (that conversion was most of the
    blink detector's cost per frame at 500 FPS).
    """

    def __init__(self, width: int, capacity: int = 1024) -> None:
        self._buf = np.empty((capacity, width))
        self._start = 0
        self._end = 0

    def __len__(self) -> int:
        return self._end - self._start

    def append(self, row: tuple[float, ...]) -> None:
        if self._end == len(self._buf):
            live = self._buf[self._start : self._end]
            if len(live) * 2 > len(self._buf):  # more than half full: grow
                grown = np.empty((len(self._buf) * 2, self._buf.shape[1]))
                grown[: len(live)] = live
                self._buf = grown
            else:  # compact
                self._buf[: len(live)] = live.copy()
            self._start, self._end = 0, len(live)
        self._buf[self._end] = row
        self._end += 1

    def drop_before(self, t: float) -> None:
        """Forget rows older than ``t`` (rows are in time order)."""
        times = self._buf[self._start : self._end, 0]
        self._start += int(np.searchsorted(times, t, side="left"))

    def view(self) -> np.ndarray:
        """The live rows (a view: valid until the next append)."""
        return self._buf[self._start : self._end]


def row_medians(rows: np.ndarray) -> np.ndarray:
    """``np.median(rows, axis=1)`` of a 2-D array without NaN, the same floats: the middle values of
    each sorted row, averaged as np.median averages them (a sort of a few thousand values is several
    times cheaper than np.median's partition, which also looks for NaN)."""
    n = rows.shape[1]
    if n == 0:
        return np.median(rows, axis=1)
    s = np.sort(rows, axis=1)
    h = n // 2
    return np.mean(s[:, h : h + 1] if n % 2 else s[:, h - 1 : h + 1], axis=1)


def median_of_few(values: Iterable[float]) -> float:
    """``np.median`` of a few finite values (the same float), without its per-call cost (~50 us: the
    live sink runs this on every frame)."""
    v = sorted(values)
    n = len(v)
    if not n:
        return _NAN
    return float(v[n // 2]) if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
