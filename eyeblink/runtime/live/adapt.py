"""Live mode's cost ladder: step down when the pipeline falls behind, back up when headroom returns.

``eyeblink live`` picks its eye model from costs measured on the machine before the capture
(:mod:`eyeblink.runtime.costs`). A machine's load changes during a session (another program, thermal
throttling, a face that needs more re-detections), so the sink watches two signs of falling behind —
frames dropped by the overload policy, and a backlog whose newest written row is older than
:data:`BEHIND_AGE_S` and growing — and steps down one rung of a ladder of cheaper settings:

1. the face mesh reused for longer (``mesh_reuse_ms`` x2, then x4: the lid measure still runs every
   frame),
2. fewer BlazeFace keyframes (``detect_every`` x2),
3. a cheaper eye model, where one is cheaper at the source's rate.

After :data:`UP_AFTER_S` without a sign (and each bounce doubles that hold, up to
:data:`UP_AFTER_MAX_S`) it steps back up. Every step is one warning line, a metric
(``eyeblink_adapt_steps_total{direction}``, ``eyeblink_adapt_level``) and an entry of
``summary.json`` ``live.adaptations`` (time, frame, from, to, why).

Only live runs adapt: a file's rows never depend on the machine that processed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BEHIND_AGE_S", "Rung", "StepController", "ladder"]

#: the newest written row older than this (arrival -> row), and the backlog growing: the pipeline is
#: behind
BEHIND_AGE_S = 0.25
#: how often the sink judges (s), and the shortest time between two steps down
WINDOW_S = 0.5
#: time without a sign of falling behind before stepping back up; doubled at each bounce, up to the
#: max
UP_AFTER_S = 10.0
UP_AFTER_MAX_S = 120.0
#: a window is calm (counts towards stepping up) when its newest row is younger than this
CALM_AGE_S = 0.05
#: the first rows are not judged: a stream's sender bursts what queued while the capture connected
GRACE_S = 1.0


@dataclass(frozen=True)
class Rung:
    """One setting of the ladder: the eye model, its mesh reuse and the keyframe interval."""

    model: str
    mesh_reuse_ms: float
    detect_every: int

    def label(self) -> str:
        return (
            f"{self.model} (mesh reuse {self.mesh_reuse_ms:g} ms, keyframe every "
            f"{self.detect_every})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "mesh_reuse_ms": self.mesh_reuse_ms,
            "detect_every": self.detect_every,
        }


def ladder(
    start: Rung, fps: float, costs: Any, models: tuple[str, ...] | list[str], *, detect: Any = None
) -> list[Rung]:
    """The rungs from ``start`` down, each strictly cheaper at ``fps`` than the one above (by
    ``costs``, a :class:`~eyeblink.runtime.costs.HostCosts`); ``models``: the eye models loaded (a
    cheaper one may end it). ``detect``: the run's :class:`~eyeblink.config.DetectConfig` (its
    ``detect_min_ms`` spaces a fast camera's keyframes further than ``detect_every``: the keyframe
    rung halves what is spent, not the frame count)."""

    def frames(every: int) -> int:
        return detect.keyframe_frames(fps, every) if detect is not None else every

    def cost(r: Rung) -> float:
        return float(
            costs.frame_ms(
                r.model, fps, mesh_reuse_ms=r.mesh_reuse_ms, detect_every=frames(r.detect_every)
            )
        )

    cands = [start]
    reuse = start.mesh_reuse_ms if start.mesh_reuse_ms > 0 else 0.0
    if reuse > 0:
        cands += [
            Rung(start.model, reuse * 2, start.detect_every),
            Rung(start.model, reuse * 4, start.detect_every),
        ]
    last = cands[-1]
    cands.append(Rung(last.model, last.mesh_reuse_ms, frames(last.detect_every) * 2))
    last = cands[-1]
    for m in models:
        if m != start.model and m in costs.fit_ms:
            cands.append(Rung(m, last.mesh_reuse_ms, last.detect_every))
    out = [start]
    for r in cands[1:]:
        if cost(r) < cost(out[-1]) * 0.97:  # a rung must save something worth a step
            out.append(r)
    return out


class StepController:
    """Decides the rung from what the sink sees; pure logic (times in seconds, any monotonic
    clock)."""

    def __init__(self, rungs: list[Rung]) -> None:
        self.rungs = rungs
        self.level = 0
        self.steps: list[dict[str, Any]] = []
        self._t_window: float | None = None
        self._dropped0 = 0
        self._backlog0 = 0
        self._calm_since: float | None = None
        self._last_step = -1e18
        self._hold = UP_AFTER_S

    @property
    def rung(self) -> Rung:
        return self.rungs[self.level]

    def observe(
        self, now: float, *, dropped: int, backlog: int, age_s: float, frame: int, t_s: float
    ) -> dict[str, Any] | None:
        """Feed the counters (``dropped``: total so far; ``backlog``: frames received, not yet
        written; ``age_s``: arrival -> now of the newest written row). Returns the step taken (a
        summary entry) or None."""
        if self._t_window is None:
            self._t_window = now + GRACE_S
            return None
        if now < self._t_window:  # the grace period: counters taken at its end
            self._dropped0, self._backlog0, self._calm_since = dropped, backlog, now
            return None
        if now - self._t_window < WINDOW_S:
            return None
        new_drops = dropped - self._dropped0
        growing = backlog > self._backlog0
        self._t_window, self._dropped0, self._backlog0 = now, dropped, backlog
        why = None
        if new_drops > 0:
            why = f"{new_drops} frames dropped in the last {WINDOW_S:g} s"
        elif age_s > BEHIND_AGE_S and growing:
            why = (
                f"rows {age_s * 1000:.0f} ms behind the camera and the backlog growing "
                f"({backlog} frames)"
            )
        if why is not None:
            self._calm_since = None
            if self.level + 1 < len(self.rungs) and now - self._last_step >= WINDOW_S:
                # a bounce: wait longer before the next try
                if self.steps and self.steps[-1]["direction"] == "up":
                    self._hold = min(UP_AFTER_MAX_S, self._hold * 2)
                return self._step(+1, now, frame, t_s, why)
            return None
        if age_s > CALM_AGE_S:
            self._calm_since = None
            return None
        if self._calm_since is None:
            self._calm_since = now
        if (
            self.level > 0
            and now - self._calm_since >= self._hold
            and now - self._last_step >= self._hold
        ):
            return self._step(
                -1,
                now,
                frame,
                t_s,
                f"no drop and rows within {CALM_AGE_S * 1000:.0f} ms for {self._hold:g} s",
            )
        return None

    def _step(self, delta: int, now: float, frame: int, t_s: float, why: str) -> dict[str, Any]:
        before = self.rung
        self.level += delta
        self._last_step = now
        self._calm_since = now
        entry = {
            "t_s": round(t_s, 3),
            "frame": frame,
            "direction": "down" if delta > 0 else "up",
            "from": before.as_dict(),
            "to": self.rung.as_dict(),
            "why": why,
        }
        self.steps.append(entry)
        return entry
