"""Long recordings with known truth: rendered disturbances, and zju-dev clips joined and looped.

``eyeblink eval-long`` (see :func:`add_parser`) measures what the short clips cannot: whether the
blink detector keeps finding blinks for tens of minutes while the subject's open eye moves.

* **Rendered disturbances** (:func:`scenarios`): EAR traces of a subject blinking every ~4 s at 30
  and 500 FPS, each with one disturbance whose truth is known: a gaze step down and back, a slow lid
  droop over 20 minutes, a lighting ramp and a sudden light change (a small gain and noise change of
  the fitted EAR), the head turned away for 5 s (both eyes foreshortened, noisier), the face lost
  for 5 s, a 3 s voluntary closure, a burst of blinks. They go through
  :class:`~eyeblink.signals.blinks.BlinkDetector` exactly as a session's frames do. Scored
  (:func:`score`): planted blinks found, events that are not planted, events longer than
  ``max_blink_ms`` other than the planted closure (which must come out as a ``prolonged_closure``),
  and the **recovery time** after each change: a probe blink is planted at every 0.1 s after the
  change (one at a time, on a copy of the detector at the change), and the recovery is the delay
  after which every probe is found as a blink.
* **zju-dev joined** (:func:`build_joined`, :func:`score_joined`): all clips of one subject (no
  glasses, thin, black glasses, looking up: the open level moves between them) decoded and written
  one after the other into one lossless video with its ``.tag`` (frame ids offset), processed by the
  real pipeline; its EAR rows are then looped to at least ``--minutes`` and fed to the detector, and
  scored against the looped truth with the same strict convention as ``eyeblink eval``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.config import BlinkConfig
from eyeblink.lab import add_command

OPEN_EAR = (0.31, 0.29)  # open-eye EAR of the rendered subject (left, right)
BLINK_EVERY_S = 4.0
PROBE_STEP_S = 0.1
PROBE_SPAN_S = 5.0


@dataclass
class Scenario:
    """A rendered trace with its truth. ``changes``: times after which detection must resume."""

    name: str
    fps: float
    t: np.ndarray
    ears: np.ndarray  # (n, 2): left, right; NaN where no face
    blinks: list[tuple[float, float]]  # planted blinks (start_s, end_s)
    closures: list[tuple[float, float]] = field(default_factory=list)  # planted long closures
    changes: list[float] = field(default_factory=list)
    describe: str = ""
    #: rebuild the trace with different blinks (the recovery probes): blinks -> (ears)
    render: Callable[[list[tuple[float, float, float]]], np.ndarray] | None = None


def _lid(t: np.ndarray, onset: float, duration: float, depth: float) -> np.ndarray:
    """Closure of one blink: closing in 40% of it, opening in 60%, from rest (half cosines)."""
    x = (t - onset) / duration
    c = np.zeros_like(t)
    a = (x >= 0) & (x < 0.4)
    b = (x >= 0.4) & (x < 1.0)
    c[a] = (1 - np.cos(np.pi * x[a] / 0.4)) / 2
    c[b] = (1 + np.cos(np.pi * (x[b] - 0.4) / 0.6)) / 2
    return depth * c


def _closure(
    t: np.ndarray,
    blinks: Sequence[tuple[float, float, float]],
    holds: Sequence[tuple[float, float, float]] = (),
) -> np.ndarray:
    """Lid closure in [0, 1]: ``blinks`` (onset, duration_s, depth); ``holds`` (onset, duration,
    depth) closures that close in 150 ms, hold, and open in 250 ms."""
    c = np.zeros_like(t)
    for onset, dur, depth in blinks:
        m = (t >= onset) & (t < onset + dur)
        c[m] = np.maximum(c[m], _lid(t[m], onset, dur, depth))
    for onset, dur, depth in holds:
        m = (t >= onset) & (t < onset + dur)
        x = t[m] - onset
        up = np.clip(x / 0.15, 0, 1)
        down = np.clip((onset + dur - t[m]) / 0.25, 0, 1)
        c[m] = np.maximum(c[m], depth * (1 - np.cos(np.pi * np.minimum(up, down))) / 2)
    return c


def _schedule(
    duration_s: float,
    rng: np.random.Generator,
    *,
    avoid: Sequence[tuple[float, float]] = (),
    start: float = 2.0,
) -> list[tuple[float, float, float]]:
    """Blinks every ~4 s (jittered), 100-300 ms, 70-95% closure, none inside ``avoid`` windows
    (+-0.6 s)."""
    out = []
    t = start
    while t < duration_s - 1.0:
        onset = t + float(rng.uniform(-0.5, 0.5))
        dur = float(rng.uniform(0.10, 0.30))
        if not any(a - 0.6 < onset + dur and onset < b + 0.6 for a, b in avoid):
            out.append((onset, dur, float(rng.uniform(0.7, 0.95))))
        t += BLINK_EVERY_S
    return out


def _spans(blinks: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    return [(o, o + d) for o, d, _ in blinks]


def scenarios(fps: float, *, seed: int = 0, droop_minutes: float = 20.0) -> list[Scenario]:
    """The rendered disturbance suite at ``fps`` (see the module docstring)."""
    out = []
    for k, builder in enumerate(_BUILDERS):
        rng = np.random.default_rng([seed, k, int(fps)])
        out.append(builder(fps, rng, droop_minutes))
    return out


def _make(
    name: str,
    fps: float,
    duration_s: float,
    rng: np.random.Generator,
    *,
    gain: Callable[[np.ndarray], np.ndarray] | None = None,
    noise: Callable[[np.ndarray], np.ndarray] | None = None,
    lost: Sequence[tuple[float, float]] = (),
    avoid: Sequence[tuple[float, float]] = (),
    holds: Sequence[tuple[float, float, float]] = (),
    extra: Sequence[tuple[float, float, float]] = (),
    changes: Sequence[float] = (),
    describe: str = "",
) -> Scenario:
    """A scenario: open EAR x ``gain(t)`` (per eye: (n, 2)) x (1 - closure) + noise x
    ``noise(t)``."""
    t = np.arange(round(duration_s * fps)) / fps
    blinks = sorted(
        _schedule(duration_s, rng, avoid=[*avoid, *lost, *((o, o + d) for o, d, _ in holds)])
        + list(extra)
    )
    # the fit's frame-to-frame noise
    base_noise = 0.004 * math.sqrt(min(fps, 500.0) / 500.0) + 0.002
    g = gain(t) if gain is not None else np.ones((len(t), 2))
    s = noise(t) if noise is not None else np.ones(len(t))
    eps = np.random.default_rng(rng.integers(1 << 31)).standard_normal((len(t), 2))

    def render(bl: list[tuple[float, float, float]]) -> np.ndarray:
        c = _closure(t, bl, holds)
        e = np.asarray(OPEN_EAR)[None, :] * g * (1 - c[:, None]) + base_noise * s[:, None] * eps
        e = np.maximum(e, 0.0)
        for a, b in lost:
            e[(t >= a) & (t < b)] = np.nan
        return e

    return Scenario(
        name,
        fps,
        t,
        render(blinks),
        _spans(blinks),
        [(o, o + d) for o, d, _ in holds],
        list(changes),
        describe,
        render=lambda bl: render(sorted([*_without(blinks, bl), *bl])),
    )


def _without(
    blinks: list[tuple[float, float, float]], probes: list[tuple[float, float, float]]
) -> list[tuple[float, float, float]]:
    """The planted blinks that leave 1.5 s free around each probe (a probe is judged alone)."""
    return [b for b in blinks if not any(abs(b[0] - p[0]) < 1.5 for p in probes)]


def _step(
    t: np.ndarray, at: float, to: float, back: float | None = None, ramp_s: float = 0.2
) -> np.ndarray:
    """Gain 1 -> ``to`` over ``ramp_s`` at ``at`` (and back to 1 at ``back``), for both eyes."""
    g = 1 + (to - 1) * np.clip((t - at) / ramp_s, 0, 1)
    if back is not None:
        g = g + (1 - to) * np.clip((t - back) / ramp_s, 0, 1)
    return np.repeat(g[:, None], 2, axis=1)


def _gaze(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    return _make(
        "gaze step",
        fps,
        90.0,
        rng,
        gain=lambda t: _step(t, 20.0, 0.75, 55.0),
        changes=[20.2, 55.2],
        describe="open EAR x0.75 at 20 s (gaze lowered to a screen), back at 55 s",
    )


def _small_step(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    return _make(
        "step -10%",
        fps,
        60.0,
        rng,
        gain=lambda t: _step(t, 20.0, 0.90),
        changes=[20.2],
        describe="open EAR x0.90 for good at 20 s (inside the old hysteresis band)",
    )


def _droop(fps: float, rng: np.random.Generator, minutes: float) -> Scenario:
    dur = minutes * 60.0
    return _make(
        "lid droop",
        fps,
        dur,
        rng,
        gain=lambda t: np.repeat((1 - 0.2 * t / dur)[:, None], 2, axis=1),
        describe=f"open EAR falls by 20% linearly over {minutes:g} min (fatigue)",
    )


def _light_ramp(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    return _make(
        "lighting ramp",
        fps,
        60.0,
        rng,
        gain=lambda t: np.repeat((1 - 0.08 * np.clip((t - 20) / 10, 0, 1))[:, None], 2, axis=1),
        noise=lambda t: 1 + 1.5 * np.clip((t - 20) / 10, 0, 1),
        changes=[30.0],
        describe="20-30 s: the fit's EAR drifts -8% and its noise x2.5 as the light dims",
    )


def _light_step(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    return _make(
        "light change",
        fps,
        60.0,
        rng,
        gain=lambda t: _step(t, 30.0, 0.88, ramp_s=1 / fps),
        noise=lambda t: np.where(t >= 30, 2.0, 1.0),
        changes=[30.0],
        describe="at 30 s a light switched off: the fit's EAR -12% at once, noise x2",
    )


def _head_turn(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    def gain(t: np.ndarray) -> np.ndarray:
        w = np.clip((t - 20) / 0.4, 0, 1) * np.clip((25.4 - t) / 0.4, 0, 1)
        return np.stack([1 - 0.45 * w, 1 - 0.2 * w], axis=1)

    return _make(
        "head turned 5 s",
        fps,
        60.0,
        rng,
        gain=gain,
        noise=lambda t: np.where((t > 20) & (t < 25.4), 3, 1),
        avoid=[(20.0, 25.4)],
        changes=[20.4, 25.4],
        describe="20-25.4 s: head turned away: left EAR x0.55, right x0.8, noise x3, then back",
    )


def _face_lost(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    return _make(
        "face lost 5 s",
        fps,
        60.0,
        rng,
        lost=[(20.0, 25.0)],
        changes=[25.0],
        describe="20-25 s: no face fitted (NaN EAR), back at the same level",
    )


def _long_closure(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    return _make(
        "3 s closure",
        fps,
        60.0,
        rng,
        holds=[(30.0, 3.0, 0.95)],
        changes=[33.0],
        describe="30-33 s: eyes shut on purpose (95%), the one event that may exceed max_blink_ms",
    )


def _burst(fps: float, rng: np.random.Generator, _m: float) -> Scenario:
    burst = [(30.0 + 0.4 * k, 0.15, 0.9) for k in range(5)]
    return _make(
        "blink burst",
        fps,
        60.0,
        rng,
        avoid=[(30.0, 32.0)],
        extra=burst,
        describe="30-32 s: five 150 ms blinks 400 ms apart",
    )


_BUILDERS = (
    _gaze,
    _small_step,
    _droop,
    _light_ramp,
    _light_step,
    _head_turn,
    _face_lost,
    _long_closure,
    _burst,
)


# -- scoring
# ---------------------------------------------------------------------------------------------
def _feed(
    det: Any, t: np.ndarray, ears: np.ndarray, lo: int, hi: int, delays: list[float] | None = None
) -> list[Any]:
    """Feed frames ``lo..hi``; ``delays`` collects, per event, the seconds from its end to its
    emission."""
    out = []
    for i in range(lo, hi):
        got = det.update(i, float(t[i]), float(ears[i, 0]), float(ears[i, 1]))
        if got:
            out += got
            if delays is not None:
                delays += [float(t[i]) - e.end_s for e in got]
    return out


def _overlaps(ev: Any, span: tuple[float, float], pad: float) -> bool:
    return ev.start_s <= span[1] + pad and span[0] - pad <= ev.end_s


def score(sc: Scenario, cfg: BlinkConfig | None = None, *, probes: bool = True) -> dict[str, Any]:
    """Run the detector over ``sc`` and score it (see the module docstring)."""
    from eyeblink.signals.blinks import PROLONGED_CLOSURE, BlinkDetector

    cfg = cfg or BlinkConfig()
    det = BlinkDetector(cfg)
    pad = 1.5 / sc.fps
    delays: list[float] = []
    events = _feed(det, sc.t, sc.ears, 0, len(sc.t), delays) + det.finish()
    # one to one: each planted blink needs its own event, a blink (kind, and no longer than a blink
    # can be)
    used: set[int] = set()
    found = []
    for b in sc.blinks:
        hit = next(
            (
                k
                for k, e in enumerate(events)
                if k not in used
                and e.kind == "blink"
                and e.duration_ms <= cfg.max_blink_ms
                and _overlaps(e, b, pad)
            ),
            None,
        )
        found.append(hit is not None)
        if hit is not None:
            used.add(hit)
    planted = [*sc.blinks, *sc.closures]
    false = [e for e in events if not any(_overlaps(e, b, pad) for b in planted)]
    long_events = [e for e in events if e.duration_ms > cfg.max_blink_ms]
    closures_ok = [
        any(_overlaps(e, c, pad) and e.kind == PROLONGED_CLOSURE for e in events)
        for c in sc.closures
    ]
    stray_long = [e for e in long_events if not any(_overlaps(e, c, pad) for c in sc.closures)]
    result: dict[str, Any] = {
        "scenario": sc.name,
        "fps": sc.fps,
        "duration_s": float(sc.t[-1] + 1 / sc.fps),
        "describe": sc.describe,
        "planted": len(sc.blinks),
        "found": int(sum(found)),
        "missed_s": [round(b[0], 3) for b, f in zip(sc.blinks, found, strict=True) if not f],
        "false": len(false),
        "false_s": [round(e.start_s, 3) for e in false],
        "max_event_ms": max((e.duration_ms for e in events), default=0.0),
        "long_events_not_planted": len(stray_long),
        "closures_planted": len(sc.closures),
        "closures_as_prolonged": int(sum(closures_ok)),
        "level_shifts": len(det.level_shifts),
        "max_emit_delay_s": max(delays, default=0.0),
    }
    if probes:
        result["recovery_s"] = [recovery(sc, c, cfg) for c in sc.changes]
    return result


def recovery(sc: Scenario, change_s: float, cfg: BlinkConfig) -> float | None:
    """Seconds after ``change_s`` from which a probe blink planted alone at any later 0.1 s step is
    found.

    The detector runs once up to the change; each probe runs on a copy of it over the trace
    re-rendered with that probe. None: some probe up to ``PROBE_SPAN_S`` was missed after the last
    one found.
    """
    from eyeblink.signals.blinks import BlinkDetector

    assert sc.render is not None
    det = BlinkDetector(cfg)
    lo = int(np.searchsorted(sc.t, change_s - 1.6))  # before the first probe's own 1.5 s of room
    # any probe: frames before lo are the same for all
    probe_ears = sc.render([(change_s + 0.5, 0.15, 0.9)])
    _feed(det, sc.t, probe_ears, 0, lo)
    delays = np.round(np.arange(PROBE_STEP_S, PROBE_SPAN_S + 1e-9, PROBE_STEP_S), 3)
    ok = []
    for d in delays:
        onset = change_s + float(d)
        ears = sc.render([(onset, 0.15, 0.9)])
        probe = copy.deepcopy(det)
        hi = min(
            len(sc.t),
            int(np.searchsorted(sc.t, onset + 1.2 + (cfg.max_blink_ms + cfg.settle_ms) / 1000)),
        )
        events = _feed(probe, sc.t, ears, lo, hi) + probe.finish()
        ok.append(
            any(
                e.kind == "blink" and abs(e.start_s - onset) < 0.1 and e.duration_ms <= 400
                for e in events
            )
        )
    if all(ok):
        return 0.0
    missed = [d for d, f in zip(delays, ok, strict=True) if not f]
    last_miss = float(max(missed))
    return None if last_miss >= delays[-1] else round(last_miss + PROBE_STEP_S, 3)


def run_rendered(
    fps_list: Sequence[float],
    cfg: BlinkConfig | None = None,
    *,
    droop_minutes: float = 20.0,
    only: Sequence[str] = (),
    seed: int = 0,
) -> list[dict[str, Any]]:
    rows = []
    for fps in fps_list:
        for sc in scenarios(fps, seed=seed, droop_minutes=droop_minutes):
            if only and not any(o.lower() in sc.name.lower() for o in only):
                continue
            rows.append(score(sc, cfg, probes=bool(sc.changes)))
            _print_row(rows[-1])
    return rows


def _print_row(r: dict[str, Any]) -> None:
    rec = ", ".join("-" if v is None else f"{v:.1f}" for v in r.get("recovery_s", [])) or "n/a"
    print(
        f"{r['scenario']:<16} {r['fps']:>5g} {r['duration_s'] / 60:>6.1f} "
        f"{r['found']:>4}/{r['planted']:<4} "
        f"{r['false']:>5} {r['long_events_not_planted']:>5} "
        f"{r['closures_as_prolonged']}/{r['closures_planted']}"
        f"{r['max_event_ms']:>9.0f} {r['max_emit_delay_s']:>6.2f}  {rec}",
        flush=True,
    )


# -- zju-dev, joined and looped
# ----------------------------------------------------------------------------
def subject_clips(dataset: Path) -> dict[str, list[Path]]:
    """zju-dev videos by subject (``000001M_FBN.avi`` -> ``000001M``), in name order."""
    from eyeblink.lab.evaluate import find_pairs

    by: dict[str, list[Path]] = {}
    for video, _tag in find_pairs(dataset):
        m = re.match(r"(.+?)_[A-Z]{3}$", video.stem)
        by.setdefault(m.group(1) if m else video.stem, []).append(video)
    return by


def build_joined(
    dataset: Path, outdir: Path, subject: str, clips: Sequence[Path]
) -> tuple[Path, list[Any]]:
    """Decode ``clips`` and write them one after the other into ``outdir/<subject>.mkv`` (FFV1,
    lossless, gray, 1 ms time base at the clips' frame rate) and the truth spans in the joined frame
    numbering.

    A decoded frame's ``.tag`` frame id is its packet index (zju-dev's null packets decode to
    nothing); the joined file numbers decoded frames 0..n-1, so each truth blink maps through the
    clip's decoded frames.
    """
    import av

    from eyeblink.lab.evaluate import Span, read_tag
    from eyeblink.sources.files import open_source

    path = outdir / f"{subject}.mkv"
    spans: list[Any] = []
    annotated: list[Any] = []
    frame_no = 0
    fps = None
    container = av.open(str(path), mode="w")
    stream = None
    try:
        for clip in clips:
            tag = read_tag(clip.with_suffix(".tag"))
            ids: list[int] = []
            with open_source(clip) as src:
                fps = fps or src.nominal_fps or 30.0
                if stream is None:
                    stream = container.add_stream("ffv1", rate=round(fps))
                    stream.pix_fmt = "gray"
                for fr in src:
                    img = fr.image
                    if img.ndim == 3:
                        import cv2

                        img = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
                    if stream.width != img.shape[1]:
                        stream.width, stream.height = img.shape[1], img.shape[0]
                    vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="gray")
                    vf.pts = frame_no + len(ids)
                    container.mux(stream.encode(vf))
                    p = src.packet_index(fr.index) if hasattr(src, "packet_index") else None
                    ids.append(int(p) if p is not None else round(fr.timestamp_s * fps))
            arr = np.asarray(ids)
            for b in tag.blinks:
                inside = np.nonzero((arr >= b.start) & (arr <= b.end))[0]
                if len(inside):
                    spans.append(Span(frame_no + int(inside[0]), frame_no + int(inside[-1])))
            inside = np.nonzero((arr >= tag.annotated.start) & (arr <= tag.annotated.end))[0]
            if len(inside):
                annotated.append(Span(frame_no + int(inside[0]), frame_no + int(inside[-1])))
            frame_no += len(ids)
        if stream is not None:
            container.mux(stream.encode(None))
    finally:
        container.close()
    (outdir / f"{subject}.truth.json").write_text(
        json.dumps(
            {
                "fps": fps,
                "frames": frame_no,
                "blinks": [[s.start, s.end] for s in spans],
                "annotated": [[s.start, s.end] for s in annotated],
            }
        ),
        encoding="utf-8",
        newline="\n",
    )
    return path, spans


def score_joined(
    frames_csv: Path, truth_json: Path, minutes: float, cfg: BlinkConfig | None = None
) -> dict[str, Any]:
    """Loop the joined recording's EAR rows to >= ``minutes`` and score the detector on the looped
    truth.

    Strict convention (as ``eyeblink eval``): an event overlapping no annotated frame range of any
    clip is not scored (counted apart); one overlapping an annotated range but no blink is a false
    positive.
    """
    from eyeblink.lab.evaluate import Span, match_events
    from eyeblink.outputs.export import read_table
    from eyeblink.signals.blinks import BlinkDetector

    cfg = cfg or BlinkConfig()
    truth = json.loads(truth_json.read_text(encoding="utf-8"))
    header, rows = read_table(frames_csv)
    k_t, k_l, k_r = (header.index(c) for c in ("timestamp_s", "ear_left", "ear_right"))

    def num(x: str) -> float:
        return float(x) if x not in ("", "nan") else math.nan

    t = np.array([num(r[k_t]) for r in rows])
    ears = np.array([[num(r[k_l]), num(r[k_r])] for r in rows])
    n = len(rows)
    period = float(t[-1] - t[0]) + float(np.median(np.diff(t)))
    loops = max(1, math.ceil(minutes * 60 / period))
    det = BlinkDetector(cfg)
    events = []
    for k in range(loops):
        for i in range(n):
            events += det.update(
                k * n + i, float(t[i] + k * period), float(ears[i, 0]), float(ears[i, 1])
            )
    events += det.finish()
    blinks = [Span(a + k * n, b + k * n) for k in range(loops) for a, b in truth["blinks"]]
    annotated = [Span(a + k * n, b + k * n) for k in range(loops) for a, b in truth["annotated"]]
    det_spans = [Span(e.start_frame, e.end_frame) for e in events]
    scored = [s for s in det_spans if any(s.overlap(a) for a in annotated)]
    sc = match_events(blinks, scored)
    strict = sc.strict(len(det_spans) - len(scored))
    return {
        "loops": loops,
        "minutes": loops * period / 60,
        "truth": len(blinks),
        "detected": len(events),
        "tp": sc.tp,
        "fp": sc.fp,
        "fn": sc.fn,
        "unscored": len(det_spans) - len(scored),
        "f1": sc.f1,
        "strict_f1": strict.f1,
        "prolonged_closures": sum(e.kind != "blink" for e in events),
        "longest_blink_ms": max((e.duration_ms for e in events if e.kind == "blink"), default=0.0),
        "level_shifts": len(det.level_shifts),
    }


def score_clips(outdir: Path, dataset: Path, cfg: BlinkConfig | None = None) -> dict[str, Any]:
    """The same detector on each clip's own EAR rows (``eyeblink eval -o`` outputs), one by one: the
    reference the joined figure is compared with (same strict convention)."""
    from eyeblink.lab.evaluate import (
        EMPTY,
        Span,
        detected_spans,
        find_pairs,
        match_events,
        read_tag,
        within,
    )
    from eyeblink.outputs.export import read_table
    from eyeblink.signals.blinks import BlinkDetector
    from eyeblink.sources.files import open_source

    total, unscored = EMPTY, 0
    for video, tag_path in find_pairs(dataset):
        header, rows = read_table(outdir / f"{video.stem}.frames.csv")
        k_f, k_t, k_l, k_r = (
            header.index(c) for c in ("frame", "timestamp_s", "ear_left", "ear_right")
        )
        det = BlinkDetector(cfg or BlinkConfig())
        events = []
        for r in rows:
            el, er = (float(r[k]) if r[k] not in ("", "nan") else math.nan for k in (k_l, k_r))
            events += det.update(int(r[k_f]), float(r[k_t]), el, er)
        events += det.finish()
        tag = read_tag(tag_path)
        with open_source(video) as src:
            for _ in src:  # the packet index of each decoded frame is known once it was decoded
                pass
            spans, outside = within(
                detected_spans(events, src, src.nominal_fps or 30.0), tag.annotated
            )
        total = total + match_events(tag.blinks, [Span(s.start, s.end) for s in spans])
        unscored += outside
    return {
        "tp": total.tp,
        "fp": total.fp,
        "fn": total.fn,
        "unscored": unscored,
        "f1": total.f1,
        "strict_f1": total.strict(unscored).f1,
    }


# -- CLI
# -------------------------------------------------------------------------------------------------
def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        "eval-long",
        __doc__,
        help="score the blink detector on long recordings: rendered disturbances, zju-dev joined",
    )
    p.add_argument(
        "--fps",
        default="30,500",
        metavar="FPS[,FPS]",
        help="frame rates of the rendered suite, comma-separated (default: %(default)s)",
    )
    p.add_argument(
        "--only",
        default="",
        metavar="NAME[,NAME]",
        help="run only the rendered scenarios whose name contains one of these (default: all)",
    )
    p.add_argument(
        "--droop-minutes",
        type=float,
        default=20.0,
        metavar="MIN",
        help="length of the slow lid droop scenario (default: %(default)s)",
    )
    p.add_argument(
        "--zju",
        metavar="DATASET_DIR",
        default=None,
        help="also join each zju-dev subject's clips, process them and score them looped",
    )
    p.add_argument(
        "--work",
        metavar="DIR",
        default=None,
        help="where the joined recordings and their outputs go (default: a temporary folder; never "
        "inside the project)",
    )
    p.add_argument(
        "--clips",
        metavar="EVAL_OUTDIR",
        default=None,
        help="outputs of `eyeblink eval DATASET -o EVAL_OUTDIR`: also score the detector clip by "
        "clip "
        "on their EAR rows, as the reference for the joined figure",
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=10.0,
        metavar="MIN",
        help="loop each joined subject to at least this long (default: %(default)s)",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write every figure as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    """``eyeblink eval-long``."""
    import tempfile

    from eyeblink.errors import ConfigError

    try:
        fps_list = [float(x) for x in str(args.fps).split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--fps must be numbers separated by commas, got {args.fps!r}") from None
    if not fps_list or any(f <= 0 for f in fps_list):
        raise ConfigError(f"--fps must be positive frame rates, got {args.fps!r}")
    from eyeblink.outputs.paths import OutputPlan

    OutputPlan().write(args.json, "--json").check()  # before hours of rendering and processing
    report: dict[str, Any] = {}
    print(
        f"{'scenario':<16} {'fps':>5} {'min':>6} {'found':>9} {'false':>5} {'long':>5} closure"
        f"{'max ms':>9} {'delay':>6}  recovery s"
    )
    report["rendered"] = run_rendered(
        fps_list,
        droop_minutes=args.droop_minutes,
        only=[o for o in str(args.only).split(",") if o],
        seed=0,
    )
    if args.zju:
        tmp = tempfile.TemporaryDirectory(prefix="eyeblink-long-") if args.work is None else None
        work = Path(tmp.name if tmp is not None else args.work)
        try:
            report["zju_joined"] = run_zju(Path(args.zju), work, args.minutes)
        finally:
            if tmp is not None:
                tmp.cleanup()
        if args.clips:
            report["zju_clips"] = score_clips(Path(args.clips), Path(args.zju))
            c = report["zju_clips"]
            print(
                f"zju-dev clip by clip (same detector, EAR rows of {args.clips}): TP {c['tp']} FP "
                f"{c['fp']} "
                f"FN {c['fn']} unscored {c['unscored']}  F1 {c['f1']:.3f}  strict F1 "
                f"{c['strict_f1']:.3f}"
            )
    if args.json:
        from eyeblink.outputs.export import clean_json
        from eyeblink.outputs.paths import write_text

        write_text(args.json, json.dumps(clean_json(report), indent=2) + "\n", "--json")
    return 0


def run_zju(dataset: Path, work: Path, minutes: float) -> dict[str, Any]:
    """Join, process (the real pipeline, default settings) and score every subject looped to
    ``minutes``."""
    from eyeblink.config import RunConfig
    from eyeblink.runtime.pipeline import process_source
    from eyeblink.runtime.runner import build_analyzer
    from eyeblink.sources.files import open_source

    work.mkdir(parents=True, exist_ok=True)
    config = RunConfig()
    analyzer = build_analyzer(config)
    rows = {}
    tot = {"tp": 0, "fp": 0, "fn": 0, "unscored": 0}
    print(
        f"\n{'zju-dev subject':<16} {'min':>5} {'truth':>6} {'TP':>5} {'FP':>4} {'FN':>4} "
        f"{'unsc':>5} "
        f"{'F1':>6} {'strict':>6} {'longest ms':>10} {'prolonged':>9}"
    )
    for subject, clips in sorted(subject_clips(dataset).items()):
        video, _ = build_joined(dataset, work, subject, clips)
        with open_source(video) as src:
            analyzer.reset()
            process_source(src, work, config, analyzer=analyzer)
        r = score_joined(
            work / f"{subject}.frames.csv",
            work / f"{subject}.truth.json",
            minutes,
            config.blink_settings(),
        )
        rows[subject] = r
        for k in tot:
            tot[k] += r[k]
        print(
            f"{subject:<16} {r['minutes']:>5.1f} {r['truth']:>6} {r['tp']:>5} {r['fp']:>4} "
            f"{r['fn']:>4} "
            f"{r['unscored']:>5} {r['f1']:>6.3f} {r['strict_f1']:>6.3f} "
            f"{r['longest_blink_ms']:>10.0f} "
            f"{r['prolonged_closures']:>9}",
            flush=True,
        )
    p = tot["tp"] / max(1, tot["tp"] + tot["fp"])
    rec = tot["tp"] / max(1, tot["tp"] + tot["fn"])
    ps = tot["tp"] / max(1, tot["tp"] + tot["fp"] + tot["unscored"])
    f1 = 2 * p * rec / (p + rec) if p + rec else 0.0
    sf1 = 2 * ps * rec / (ps + rec) if ps + rec else 0.0
    print(
        f"{'ALL':<16} {'':>5} {tot['tp'] + tot['fn']:>6} {tot['tp']:>5} {tot['fp']:>4} "
        f"{tot['fn']:>4} "
        f"{tot['unscored']:>5} {f1:>6.3f} {sf1:>6.3f}"
    )
    return {"subjects": rows, "total": {**tot, "f1": f1, "strict_f1": sf1}}
