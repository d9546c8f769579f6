"""Session-level counts of the detector's events, and warnings where the output is implausible.

A silently wrong 20-minute session is the worst output this tool can give: numbers that look fine
over a science that is wrong. After a run (``process``, ``live``, ``batch`` alike:
:func:`eyeblink.outputs.analysis.finalize`) the session is checked, and each finding is one line in
``summary.json`` ``warnings`` (shown in the report):

* **prolonged closures**: events longer than ``max_blink_ms`` (kind ``prolonged_closure``, not
  counted as blinks) — real (a voluntary or drowsy closure) or a disturbance the detector took for a
  closure;
* **blink rate**: in any window of ``rate_window_s`` (sessions at least that long, windows with a
  face in at least half their frames) the blink rate is outside the species' range (``species``,
  :meth:`~eyeblink.config.BlinkConfig.rate_range`: a human blinks ~4-30 times a minute, and none for
  minutes is most often a detector that stopped; a mouse or a rat can go minutes without a blink);
* **baseline**: the open-eye baseline EAR moved by more than ``max_baseline_change`` of its median
  (gaze, posture, glasses, light, or a fit that changed): blinks are measured against the new level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eyeblink.config import BlinkConfig


def event_counts(events: Sequence[Any], duration_s: float) -> dict[str, Any]:
    """Summary fields of the events: blinks (kind ``blink``) apart from prolonged closures."""
    blinks = [e for e in events if getattr(e, "kind", "blink") == "blink"]
    closures = [e for e in events if getattr(e, "kind", "blink") != "blink"]
    complete = [e for e in blinks if e.complete]
    return {
        "blinks": len(blinks),
        "complete_blinks": len(complete),
        "blink_rate_per_min": len(complete) / duration_s * 60 if duration_s > 0 else None,
        "mean_blink_duration_ms": float(np.mean([e.duration_ms for e in complete]))
        if complete
        else None,
        "mean_blink_amplitude": float(np.mean([e.amplitude for e in complete]))
        if complete
        else None,
        "prolonged_closures": len(closures),
        "prolonged_closure_s": float(sum(e.duration_ms for e in closures) / 1000),
    }


def kind_counts(events: Sequence[Any]) -> tuple[int, int]:
    """(blinks, prolonged closures) among ``events``: what ``summary.json``'s ``blinks`` and
    ``prolonged_closures`` count."""
    blinks = sum(1 for e in events if getattr(e, "kind", "blink") == "blink")
    return blinks, len(events) - blinks


def count_words(blinks: int | None, closures: int | None = 0) -> str:
    """The counts as every line of a run says them: ``14 blinks, 1 prolonged closure`` (the closures
    left out when there are none), in the words of ``summary.json``."""
    text = f"{'?' if blinks is None else blinks} blink{'' if blinks == 1 else 's'}"
    if closures:
        text += f", {closures} prolonged closure{'' if closures == 1 else 's'}"
    return text


def session_warnings(
    events: Sequence[Any],
    t: np.ndarray,
    baseline: np.ndarray,
    face: np.ndarray | None,
    cfg: BlinkConfig,
    stem: str,
) -> list[str]:
    """The implausible-output lines (module docstring); empty when the session looks
    physiological."""
    out: list[str] = []
    closures = [e for e in events if getattr(e, "kind", "blink") != "blink"]
    if closures:
        first = ", ".join(f"{e.start_s:.1f}-{e.end_s:.1f} s" for e in closures[:5])
        more = f" and {len(closures) - 5} more" if len(closures) > 5 else ""
        out.append(
            f"{stem}: {len(closures)} event(s) longer than max_blink_ms ({cfg.max_blink_ms:g} "
            "ms), reported "
            f"as prolonged closures, not blinks: {first}{more}; check them in the report"
        )
    t = np.asarray(t, dtype=np.float64)
    ok = np.isfinite(t)
    if ok.sum() >= 2:
        t0, t1 = float(t[ok][0]), float(t[ok][-1])
        win = cfg.rate_window_s
        lo_rate, hi_rate = cfg.rate_range()
        if t1 - t0 >= win:
            starts = [e.start_s for e in events if getattr(e, "kind", "blink") == "blink"]
            has_face = (
                np.asarray(face, dtype=bool) if face is not None else np.ones(len(t), dtype=bool)
            )
            bad: list[tuple[float, float]] = []
            step = win / 2
            a = t0
            while a + win <= t1 + 1e-9:
                sel = ok & (t >= a) & (t < a + win)
                if sel.any() and has_face[sel].mean() >= 0.5:
                    rate = sum(a <= s < a + win for s in starts) * 60 / win
                    if not lo_rate <= rate <= hi_rate:
                        bad.append((a, rate))
                a += step
            if bad:
                lo = min(bad, key=lambda x: x[1])
                hi = max(bad, key=lambda x: x[1])
                worst = lo if lo[1] < lo_rate else hi
                span = f"{worst[0] - t0:.0f}-{worst[0] - t0 + win:.0f} s"
                species = "human" if cfg.species == "auto" else cfg.species
                out.append(
                    f"{stem}: blink rate {worst[1]:.1f}/min over {span} "
                    f"(and {len(bad) - 1} other {win:g} s window(s)) is outside the physiological "
                    f"{lo_rate:g}-{hi_rate:g}/min of species {species} (--species): check the "
                    "report's trace "
                    "(eyes off camera, a detector that stopped, or a tic)"
                )
    b = np.asarray(baseline, dtype=np.float64)
    fin = np.isfinite(b) & ok if len(b) == len(t) else np.isfinite(b)
    if fin.sum() >= 2:
        med = float(np.median(b[fin]))
        lo_i = int(np.argmin(np.where(fin, b, np.inf)))
        hi_i = int(np.argmax(np.where(fin, b, -np.inf)))
        change = (b[hi_i] - b[lo_i]) / med if med > 0 else 0.0
        if change > cfg.max_baseline_change:
            at = (lambda i: f" at {t[i]:.1f} s") if len(b) == len(t) else (lambda i: "")
            out.append(
                f"{stem}: the open-eye baseline EAR moved by {100 * change:.0f}% of its median "
                f"(from {b[lo_i]:.3f}{at(lo_i)} to {b[hi_i]:.3f}{at(hi_i)}; limit "
                f"{100 * cfg.max_baseline_change:.0f}%): the open eye changed (gaze, posture, "
                "glasses, light "
                "or the fit); blinks are measured against each new level, check the report"
            )
    return out
