"""Hours, not seconds: the blink detector's retained state stays bounded over 20 minutes at 500 FPS
(issue 26).

The detector runs in files and live alike, one sample per frame: whatever it keeps must not grow
with the session. Fed 600,000 samples directly (20 minutes at 500 FPS: blinks every 4 s, a gaze
step, a 30 s closure that is no blink, a 20 s face loss, eye patches on every frame), the size of
everything it holds, sampled each simulated minute, stays within a fixed bound after minute 2, and
it still finds the blinks after each disturbance. ``scripts/long_memory.py`` measures the whole
process (RSS of ``eyeblink process`` and ``live``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable

import numpy as np

from eyeblink.signals.blinks import BlinkConfig, BlinkDetector

FPS = 500.0
MINUTES = 20
N = int(MINUTES * 60 * FPS)
#: disturbances (seconds): a 30 s closure (not a blink), a 20 s face loss, a lasting gaze step down
#: at 600 s
CLOSURE = (300.0, 330.0)
FACE_LOST = (420.0, 440.0)
GAZE_STEP_S = 600.0
BLINK_EVERY_S = 4.0
BLINK_MS = 150.0


def retained(obj: object, seen: set[int] | None = None, depth: int = 0) -> int:
    """Bytes held by ``obj`` and what it refers to (containers, arrays, instance attributes),
    each object once."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 12:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes) + 112
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        return size + sum(
            retained(k, seen, depth + 1) + retained(v, seen, depth + 1) for k, v in obj.items()
        )
    if isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
        return size + sum(retained(v, seen, depth + 1) for v in obj)  # type: ignore[attr-defined]
    if isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return size
    # a builtin or bound method: not the detector's state
    if callable(obj) and not hasattr(obj, "__dict__"):
        return size
    attrs: Iterable[object] = ()
    if hasattr(obj, "__dict__"):
        attrs = vars(obj).values()
    slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
    attrs = [*attrs, *(getattr(obj, s) for s in slots if hasattr(obj, s))]
    return size + sum(retained(v, seen, depth + 1) for v in attrs)


def openness(t: float) -> float:
    """The rendered trace: open 0.30 (0.25 after the gaze step), a 150 ms blink every 4 s, the
    long closure."""
    if FACE_LOST[0] <= t < FACE_LOST[1]:
        return math.nan
    level = 0.30 if t < GAZE_STEP_S else 0.25
    if CLOSURE[0] <= t < CLOSURE[1]:
        return 0.04
    # ms from the blink's centre (blinks at 2, 6, 10 ... s)
    u = (t % BLINK_EVERY_S) * 1000.0 - 2000.0
    if abs(u) < BLINK_MS / 2:
        return level * (1.0 - 0.9 * math.cos(math.pi * u / BLINK_MS))
    return level


def test_the_blink_detector_state_stays_bounded_over_20_minutes_at_500_fps() -> None:
    det = BlinkDetector(BlinkConfig())
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.004, size=N)
    patches = rng.integers(90, 110, size=(2, 12, 24), dtype=np.uint8)
    sizes: dict[int, int] = {}  # at the end of each minute
    # within the long closure and the face loss, early and at their very end
    inside: dict[str, int] = {}
    probes = {
        round((CLOSURE[0] + 10) * FPS): "closure+10s",
        round(CLOSURE[1] * FPS) - 1: "closure end",
        round((FACE_LOST[0] + 5) * FPS): "lost+5s",
        round(FACE_LOST[1] * FPS) - 1: "lost end",
    }
    events = []
    for i in range(N):
        t = i / FPS
        e = openness(t)
        if not math.isnan(e):
            e += noise[i]
        events += det.update(i, t, e, e, None if math.isnan(e) else patches)
        if i % int(FPS) == 0:
            # as a live consumer does (unread, they are capped at STATE_BUFFER)
            det.pop_state_changes()
        if i in probes:
            inside[probes[i]] = retained(det)
        if i % int(60 * FPS) == int(60 * FPS) - 1:
            sizes[i // int(60 * FPS) + 1] = retained(det)
    events += det.finish()
    # bounded: after minute 2, never more than minute 2's size plus a fixed allowance (the windows
    # the detector keeps by time fill in the first minutes; what a 30 s closure or a face loss held
    # must have been let go)
    limit = 1.10 * sizes[2] + 256 * 1024
    assert max(sizes[m] for m in range(3, MINUTES + 1)) <= limit, sizes
    # while a closure or a face loss lasts, what the detector holds stops growing (its first and
    # last max_blink_ms + settle_ms of samples, 2 s by default: 20 s more of them would be ~3 MB
    # more)
    assert inside["closure end"] <= inside["closure+10s"] + 64 * 1024, inside
    assert inside["lost end"] <= inside["lost+5s"] + 64 * 1024, inside
    assert max(inside.values()) <= limit + 2 * 1024 * 1024, (inside, sizes)
    # and the detector is still working: blinks found after every disturbance, no event blocks what
    # follows
    blinks = [ev for ev in events if getattr(ev, "is_blink", True)]
    for after in (CLOSURE[1] + 10, FACE_LOST[1] + 10, GAZE_STEP_S + 30, MINUTES * 60 - 60):
        assert any(after <= ev.start_s < after + 30 for ev in blinks), (
            after,
            [ev.start_s for ev in blinks][-20:],
        )
    assert not any(ev.is_blink and ev.end_s - ev.start_s > 1.0 for ev in events)


def test_the_live_sinks_latency_record_stays_bounded_over_20_minutes_at_500_fps() -> None:
    """The sink records every written frame's latency for the summary's p50/p99/max (``process`` and
    ``live``).

    It kept them all before (8 bytes a frame plus an array per batch: ~0.5 MB a minute at 500 FPS).
    Fed 20 minutes of latencies in 16-frame batches, what it holds after minute 3 no longer grows,
    its percentiles stay within the histogram's resolution of the exact ones, and a short run's
    figures are exactly ``np.percentile``'s.
    """
    from eyeblink.runtime.procs.parallel import LatencyRecord

    rng = np.random.default_rng(26)
    rec = LatencyRecord()
    lat = rng.lognormal(math.log(0.02), 0.8, N)  # seconds: a 20 ms median, a long tail
    lat[N // 2] = 3.5  # one stall
    per_minute = int(60 * FPS)
    sizes = []
    for start in range(0, N, 16):
        rec.add(lat[start : start + 16])
        if (start + 16) % per_minute < 16:
            sizes.append(retained(rec))
    assert len(rec) == N
    # the first 65,536 latencies (2.2 minutes) are kept exact, then a fixed histogram: nothing grows
    # after that
    assert max(sizes[3:]) == sizes[2], sizes
    assert rec.nbytes() < 1_000_000
    for q in (50, 99):
        exact = float(np.percentile(lat * 1000.0, q))
        assert abs(rec.percentile_ms(q) - exact) <= 1e-3 * exact, (q, rec.percentile_ms(q), exact)
    assert rec.max_s == 3.5
    short = LatencyRecord()
    for start in range(0, 4992, 16):
        short.add(lat[start : start + 16])
    assert short.percentile_ms(99) == float(np.percentile(lat[:4992] * 1000.0, 99))
    assert short.percentile_ms(50) == float(np.percentile(lat[:4992] * 1000.0, 50))
    assert np.array_equal(short.exact_ms(), lat[:4992] * 1000.0)
