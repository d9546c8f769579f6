"""The measures of a settled blink event: its onset (the knee of the lid's start from rest at high
frame rates), peak, per-eye spans, amplitudes, velocities, and whether it was partial (see the
measures in :mod:`eyeblink.signals.blinks`). The detector's state machine decides when an event
starts and ends; these functions turn its record of the event (the kept samples) into a
:class:`~eyeblink.signals.events.BlinkEvent`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from eyeblink.config import BlinkConfig
from eyeblink.signals.events import BLINK, PROLONGED_CLOSURE, BlinkEvent
from eyeblink.signals.numerics import closure_amplitude, quadratic_onset, smooth

_NAN = math.nan

#: the sample layout of an event's traces (float64 columns; the detector builds its rows in this
#: order): frame, time, EAR ratio (mean of the eyes, left, right), detection level, EAR left, EAR
#: right
_F, _T, _R, _RL, _RR, _D, _EL, _ER = range(8)


def full_closure(cfg: BlinkConfig, amplitudes: Sequence[float]) -> float:
    """The subject's full-closure amplitude: the ``full_closure_quantile`` of the last blinks'
    ``amplitudes``, the prior ``full_closure_amplitude`` until ``full_closure_min_events`` were
    seen."""
    if len(amplitudes) >= cfg.full_closure_min_events:
        return float(np.quantile(amplitudes, cfg.full_closure_quantile))
    return cfg.full_closure_amplitude


def onset_fit(
    cfg: BlinkConfig, rows: np.ndarray, col: int, base: float, peak_t: float
) -> int | None:
    """Row index of the quadratic-fit onset over the closing phase up to half depth (None: too
    few)."""
    if cfg.onset_model != "quadratic" or len(rows) < cfg.onset_min_samples:
        return None
    y = rows[:, col]
    ok = np.isfinite(y)
    if ok.sum() < cfg.onset_min_samples:
        return None
    ymin = float(np.nanmin(y[rows[:, _T] <= peak_t])) if (rows[:, _T] <= peak_t).any() else math.nan
    if math.isnan(ymin):
        return None
    half = base - 0.5 * (base - ymin)
    below = np.nonzero(ok & (y <= half) & (rows[:, _T] <= peak_t))[0]
    stop = int(below[0]) + 1 if len(below) else len(rows)
    sel = np.nonzero(ok[:stop])[0]
    if len(sel) < cfg.onset_min_samples:
        return None
    t0 = quadratic_onset(rows[sel, _T], y[sel])
    if t0 is None:
        return None
    return int(sel[int(np.argmin(np.abs(rows[sel, _T] - t0)))])


def measure_event(
    cfg: BlinkConfig, ev: dict[str, Any], *, interval: float, amplitudes: deque[float], number: int
) -> BlinkEvent | None:
    """The measures of a settled event ``ev`` (the detector's record of it), as blink ``number``;
    None when it is not one (too short, or the eye patches changed while the lid never left the open
    range).

    ``interval`` is the frame interval (NaN: unknown); the blink's amplitude is appended to
    ``amplitudes``, the last blinks' amplitudes its partial/full judgement (:func:`full_closure`)
    reads.
    """
    inside = np.asarray(event_rows(ev), dtype=np.float64).reshape(-1, 8)
    pre = np.asarray(ev["pre"], dtype=np.float64).reshape(-1, 8)
    f1, t1 = ev["end"]
    inside = inside[inside[:, _T] <= t1]
    if len(inside) == 0:
        return None
    # peak: deepest combined EAR ratio (detection level where the EAR is missing)
    depth_sig = np.where(np.isfinite(inside[:, _R]), inside[:, _R], inside[:, _D])
    k_peak = int(np.nanargmin(depth_sig)) if np.isfinite(depth_sig).any() else 0
    peak_f, peak_t = int(inside[k_peak, _F]), float(inside[k_peak, _T])
    f0, t0 = ev["start"]
    trace = np.concatenate([pre, inside]) if len(pre) else inside
    k0 = onset_fit(cfg, trace[trace[:, _T] <= peak_t], _R, 1.0, peak_t)
    if k0 is not None and trace[k0, _T] <= t0:
        f0, t0 = int(trace[k0, _F]), float(trace[k0, _T])
    # frames are inclusive: a blink seen in one frame lasts one frame interval, not 0 ms
    interval = interval if interval == interval else 0.0
    duration_ms = (t1 - t0 + interval) * 1000
    if ev["complete"] and duration_ms < cfg.min_duration_ms:
        return None
    kind = PROLONGED_CLOSURE if duration_ms > cfg.max_blink_ms else BLINK
    bs, bl, br = ev["baseline"]
    with np.errstate(all="ignore"):
        min_ratio = float(np.nanmin(inside[:, _R])) if np.isfinite(inside[:, _R]).any() else _NAN
        min_l = float(np.nanmin(inside[:, _EL])) if np.isfinite(inside[:, _EL]).any() else _NAN
        min_r = float(np.nanmin(inside[:, _ER])) if np.isfinite(inside[:, _ER]).any() else _NAN
    cue = "both" if ev["cue_ear"] and ev["cue_app"] else ("appearance" if ev["cue_app"] else "ear")
    if cue == "appearance" and cfg.appearance_needs_lid and min_ratio >= cfg.open_ratio:
        return None  # the eye patch changed but the lid never left the open range: not a closure
    amplitude = closure_amplitude(min_ratio, 1.0)
    min_ear = bs * min_ratio if not math.isnan(min_ratio) else _NAN
    # per-eye spans: the run below onset_ratio around that eye's minimum (onset refined as above)
    eye: dict[str, Any] = {}
    for side, col in (("left", _RL), ("right", _RR)):
        span = eye_span(cfg, trace, col, float(trace[0, _T]), t1)
        for key, val in zip(("start_frame", "end_frame", "start_s", "end_s"), span, strict=True):
            eye[f"{key}_{side}"] = val
    # velocities of the smoothed ratio over onset..offset
    seg = trace[(trace[:, _T] >= t0) & (trace[:, _T] <= t1) & np.isfinite(trace[:, _R])]
    closing_v = opening_v = _NAN
    if len(seg) >= 2:
        ys = smooth(seg[:, _R], seg[:, _T], cfg.smooth_ms)
        v = np.gradient(ys, seg[:, _T]) if len(seg) >= 2 else np.zeros(1)
        before, after = seg[:, _T] <= peak_t, seg[:, _T] >= peak_t
        closing_v = float(max(0.0, -v[before].min())) if before.any() else _NAN
        opening_v = float(max(0.0, v[after].max())) if after.any() else _NAN
    end_ratio = float(inside[-1, _R]) if np.isfinite(inside[-1, _R]) else _NAN
    opening_amplitude = (
        (end_ratio - min_ratio) if not (math.isnan(end_ratio) or math.isnan(min_ratio)) else _NAN
    )
    # partial vs full: relative to the subject's full closure (a high quantile of this session's
    # amplitudes)
    if not math.isnan(amplitude) and kind == BLINK:
        amplitudes.append(amplitude)
    full = full_closure(cfg, amplitudes)
    partial = bool(math.isnan(amplitude) or amplitude < cfg.partial_fraction * full)
    return BlinkEvent(
        blink=number,
        start_frame=f0,
        end_frame=f1,
        start_s=t0,
        end_s=t1,
        duration_ms=duration_ms,
        peak_frame=min(max(peak_f, f0), f1),
        peak_s=min(max(peak_t, t0), t1),
        baseline_ear=bs,
        min_ear=min_ear,
        amplitude=amplitude,
        baseline_ear_left=bl,
        min_ear_left=min_l,
        amplitude_left=closure_amplitude(min_l, bl),
        baseline_ear_right=br,
        min_ear_right=min_r,
        amplitude_right=closure_amplitude(min_r, br),
        complete=bool(ev["complete"]) and f0 > ev.get("seg_first", -1),
        **eye,
        opening_amplitude=opening_amplitude,
        closing_velocity=closing_v,
        opening_velocity=opening_v,
        partial=partial,
        full_closure_amplitude=full,
        cue=cue,
        kind=kind,
    )


def inner_closures(
    cfg: BlinkConfig, ev: dict[str, Any], full: float, gap_s: float
) -> list[dict[str, Any]]:
    """The full closures inside a prolonged closure ``ev``, each as an event record of its own (a
    blink row beside the long event's row): a squint or a movement bout that deepens into a full
    blink and reopens slowly is one long event, and the blink inside it is still a blink.

    A full closure is a run of samples whose ratio is at most ``1 - partial_fraction * full`` (as
    deep as a full blink of this subject), the run no longer than ``max_blink_ms``. Its span is
    widened on each side for as long as the ratio keeps rising away from the run (the lid's closing
    and reopening; a repeated value continues a rise, a camera's doubled frames) while it stays
    below ``onset_ratio``, by at most half of what the run leaves of ``max_blink_ms`` on each side
    (the whole span at most ``max_blink_ms``); the row runs from the first sample below the level
    the lid left to the last before the level it regained, as a blink's row runs between its
    ``onset_ratio`` crossings. It counts only inside a long event that lasts at least ``max_blink_ms
    / 2`` beyond it: a long blink whose deep part fills the event stays one row. Samples further
    apart than ``gap_s`` end a run (a long event keeps its first and last seconds whole, not the
    middle of a closure longer than that).
    """
    rows = np.asarray(event_rows(ev), dtype=np.float64).reshape(-1, 8)
    rows = rows[rows[:, _T] <= ev["end"][1]]
    if len(rows) < 3:
        return []
    r, t = rows[:, _R], rows[:, _T]
    deep = np.isfinite(r) & (r <= 1.0 - cfg.partial_fraction * full)
    longest = cfg.max_blink_ms / 1000
    out: list[dict[str, Any]] = []
    i, n = 0, len(rows)
    while i < n:
        if not deep[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and deep[j + 1] and t[j + 1] - t[j] <= gap_s:
            j += 1
        reach = (longest - (t[j] - t[i])) / 2
        a = _widen(r, t, i, -1, gap_s, cfg.onset_ratio, reach)
        b = _widen(r, t, j, 1, gap_s, cfg.onset_ratio, reach)
        # the held level's own samples are not the blink's (as onset_ratio's)
        a, b = min(a + 1, i), max(b - 1, j)
        span = t[b] - t[a]
        if reach >= 0 and (t[-1] - t[0]) - span >= longest / 2:
            out.append(
                {
                    "start": (int(rows[a, _F]), float(t[a])),
                    "end": (int(rows[b, _F]), float(t[b])),
                    "baseline": ev["baseline"],
                    "samples": [tuple(x) for x in rows[a : b + 1]],
                    # as a blink's
                    "pre": [tuple(x) for x in rows[:a][t[:a] >= t[a] - cfg.onset_search_ms / 1000]],
                    "cue_ear": True,
                    "cue_app": False,
                    "complete": True,
                    "tail": deque(),
                    "peak": None,
                    "hole": False,
                    "seg_first": ev.get("seg_first", -1),
                }
            )
        i = j + 1
    return out


def _widen(
    r: np.ndarray, t: np.ndarray, k: int, step: int, gap_s: float, open_ratio: float, reach_s: float
) -> int:
    """From sample ``k`` of a deep run, the farthest sample in direction ``step`` (-1 back, 1 on)
    that the ratio rises to: each sample higher than the last (or equal: a repeated frame, committed
    only once the rise goes on), below ``open_ratio`` (an open eye is no longer the blink), no gap
    on the way, at most ``reach_s`` from sample ``k``."""
    best, last, j = k, r[k], k + step
    while (
        0 <= j < len(r)
        and np.isfinite(r[j])
        and abs(t[j] - t[j - step]) <= gap_s
        and last <= r[j] < open_ratio
        and abs(t[j] - t[k]) <= reach_s
    ):
        if r[j] > last:
            best, last = j, r[j]
        j += step
    return best


def event_rows(ev: dict[str, Any]) -> list[tuple[float, ...]]:
    """An event's kept samples in time order: the whole first part, its deepest sample, the last
    part."""
    rows = list(ev["samples"])
    if ev.get("peak") is not None:
        rows.append(ev["peak"])
    return rows + list(ev.get("tail", ()))


def eye_span(
    cfg: BlinkConfig, trace: np.ndarray, col: int, t_lo: float, t_hi: float
) -> tuple[int | None, int | None, float, float]:
    sel = trace[(trace[:, _T] >= t_lo) & (trace[:, _T] <= t_hi)]
    y = sel[:, col]
    if not np.isfinite(y).any():
        return None, None, _NAN, _NAN
    k = int(np.nanargmin(y))
    if not y[k] < cfg.onset_ratio:
        return None, None, _NAN, _NAN
    a = k
    while a > 0 and np.isfinite(y[a - 1]) and y[a - 1] < cfg.onset_ratio:
        a -= 1
    b = k
    while b + 1 < len(y) and np.isfinite(y[b + 1]) and y[b + 1] < cfg.onset_ratio:
        b += 1
    lo = sel[: k + 1]
    fit = onset_fit(cfg, sel[: k + 1], col, 1.0, float(sel[k, _T])) if len(lo) else None
    if fit is not None and fit <= a:
        a = fit
    return int(sel[a, _F]), int(sel[b, _F]), float(sel[a, _T]), float(sel[b, _T])
