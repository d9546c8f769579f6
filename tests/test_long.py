"""Long recordings: the blink detector cannot lock up (issue 26).

Each case is checked twice: on the detector alone (an EAR trace fed to ``BlinkDetector.update`` as a
session's frames are) and through ``eyeblink process`` on a real encoded video rendered by
:class:`eyeblink.lab.synth.FaceRenderer` (the project's animated face photo, MJPEG AVI) with the
same disturbance: the open level lowered for good or for a while (a partial lid closure held: gaze
lowered, a droopy lid), eyes shut for 3 s, the face gone for 5 s, a one-frame blink at 6 FPS.

Before the detector could end an event whatever happened (commit 163778a), the lowered-level cases
found 6 of 15 blinks and reported one "blink" of ~40 s; the 3 s closure was a 3 s blink; a one-frame
blink lasted 0 ms.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eyeblink.config import BlinkConfig
from eyeblink.signals.blinks import BlinkDetector, BlinkEvent

CFG = BlinkConfig()


# ---------------------------------------------------------------------------------------------
# traces
def lid(
    t: np.ndarray, onsets: Sequence[float], dur_s: float = 0.15, depth: float = 0.95
) -> np.ndarray:
    """Closure in [0, 1] of blinks lasting ``dur_s`` (raised cosine: the lid starts and stops
    from rest)."""
    c = np.zeros_like(t)
    for o in onsets:
        x = (t - o) / dur_s
        m = (x >= 0) & (x < 1)
        c[m] = np.maximum(c[m], depth * (1 - np.cos(2 * np.pi * x[m])) / 2)
    return c


def feed(ears: np.ndarray, t: np.ndarray, cfg: BlinkConfig = CFG) -> list[BlinkEvent]:
    """Every event of the detector over ``(n, 2)`` EARs at times ``t``, as a session feeds it."""
    det = BlinkDetector(cfg)
    out: list[BlinkEvent] = []
    for i in range(len(t)):
        out += det.update(i, float(t[i]), float(ears[i, 0]), float(ears[i, 1]))
    return out + det.finish()


def found(
    events: Sequence[BlinkEvent], onsets: Sequence[float], dur_s: float, slack: float
) -> list[bool]:
    """Per planted blink: one blink event (kind blink, no longer than max_blink_ms) of its own
    overlaps it."""
    used: set[int] = set()
    out = []
    for o in onsets:
        hit = next(
            (
                k
                for k, e in enumerate(events)
                if k not in used
                and e.kind == "blink"
                and e.duration_ms <= CFG.max_blink_ms
                and e.start_s <= o + dur_s + slack
                and o - slack <= e.end_s
            ),
            None,
        )
        out.append(hit is not None)
        if hit is not None:
            used.add(hit)
    return out


def assert_all_found(
    events: Sequence[BlinkEvent],
    onsets: Sequence[float],
    dur_s: float,
    fps: float,
    closures: Sequence[tuple[float, float]] = (),
) -> None:
    slack = 2.0 / fps
    hits = found(events, onsets, dur_s, slack)
    assert all(hits), (
        f"missed the blinks at {[o for o, h in zip(onsets, hits, strict=True) if not h]} s; "
        f"events: {[(round(e.start_s, 2), round(e.duration_ms), e.kind) for e in events]}"
    )
    planted = [(o, o + dur_s) for o in onsets] + list(closures)
    stray = [
        e
        for e in events
        if not any(e.start_s <= b + slack and a - slack <= e.end_s for a, b in planted)
    ]
    assert not stray, (
        f"events where nothing was planted: {[(e.start_s, e.duration_ms) for e in stray]}"
    )
    long = [
        e
        for e in events
        if e.duration_ms > CFG.max_blink_ms
        and not any(e.start_s <= b + slack and a - slack <= e.end_s for a, b in closures)
    ]
    assert not long, (
        f"events past max_blink_ms: {[(e.start_s, e.duration_ms, e.kind) for e in long]}"
    )


EVERY_4S = [2.0 + 4.0 * k for k in range(15)]  # 15 blinks in 60 s


def level(t: np.ndarray, steps: Sequence[tuple[float, float]], base: float = 0.30) -> np.ndarray:
    """Open EAR: ``base``, set to each ``(from_s, value)`` from that time on (a step, held)."""
    e = np.full_like(t, base)
    for at, v in steps:
        e[t >= at] = v
    return e


# ---------------------------------------------------------------------------------------------
# detector alone
def test_open_level_lowered_for_good_does_not_lock_up_the_detector() -> None:
    """The issue's case: 500 FPS, 60 s, open EAR 0.30 -> 0.22 for good at 20 s, a 150 ms blink
    every 4 s."""
    fps = 500.0
    t = np.arange(round(60 * fps)) / fps
    e = level(t, [(20.0, 0.22)]) * (1 - lid(t, EVERY_4S))
    events = feed(np.stack([e, e], axis=1), t)
    assert len(events) == 15
    assert_all_found(events, EVERY_4S, 0.15, fps)
    assert max(ev.duration_ms for ev in events) <= CFG.max_blink_ms


@pytest.mark.parametrize("fps", [30.0, 500.0])
def test_a_lasting_step_of_minus_10_percent_is_learnt(fps: float) -> None:
    """-10% held: inside the old hysteresis band (0.87 then 0.92 of a frozen baseline): once an
    event forever."""
    t = np.arange(round(60 * fps)) / fps
    rng = np.random.default_rng(1)
    e = level(t, [(20.0, 0.27)]) * (1 - lid(t, EVERY_4S)) + rng.normal(0, 0.002, (2, len(t)))
    events = feed(e.T, t)
    assert_all_found(events, EVERY_4S, 0.15, fps)


@pytest.mark.parametrize("fps", [30.0, 500.0])
def test_gaze_step_down_and_back(fps: float) -> None:
    """Gaze lowered to a screen at 20 s (open EAR -27%), raised again at 40 s: every blink
    before, during, after."""
    t = np.arange(round(60 * fps)) / fps
    e = level(t, [(20.0, 0.22), (40.0, 0.30)]) * (1 - lid(t, EVERY_4S))
    events = feed(np.stack([e, e * 0.95], axis=1), t)
    assert_all_found(events, EVERY_4S, 0.15, fps)


@pytest.mark.parametrize("fps", [30.0, 500.0])
def test_a_3_s_closure_is_a_prolonged_closure_and_blocks_nothing(fps: float) -> None:
    t = np.arange(round(40 * fps)) / fps
    # 24.0: 1 s after the eyes open again
    onsets = [2.0, 6.0, 10.0, 14.0, 18.0, 24.0, 25.0, 28.0, 32.0, 36.0]
    hold = np.clip(np.minimum((t - 20.0) / 0.15, (23.0 - t) / 0.25), 0, 1) * 0.95
    c = np.maximum(lid(t, onsets), hold)
    e = 0.30 * (1 - c)
    events = feed(np.stack([e, e], axis=1), t)
    assert_all_found(events, onsets, 0.15, fps, closures=[(20.0, 23.0)])
    long = [ev for ev in events if ev.kind == "prolonged_closure"]
    assert len(long) == 1
    assert long[0].start_s == pytest.approx(20.0, abs=0.1) and long[0].end_s == pytest.approx(
        23.0, abs=0.1
    )
    assert long[0].duration_ms > CFG.max_blink_ms and long[0].amplitude > 0.8


@pytest.mark.parametrize("fps", [30.0, 500.0])
def test_face_lost_for_5_s(fps: float) -> None:
    t = np.arange(round(40 * fps)) / fps
    # 26.0: 1 s after the face is back
    onsets = [2.0, 6.0, 10.0, 14.0, 18.0, 26.0, 27.0, 30.0, 34.0]
    e = 0.30 * (1 - lid(t, onsets))
    e[(t >= 20.0) & (t < 25.0)] = np.nan
    events = feed(np.stack([e, e], axis=1), t)
    assert_all_found(events, onsets, 0.15, fps)


def test_one_frame_blink_at_6_fps_lasts_one_frame_interval() -> None:
    fps = 6.0
    t = np.arange(round(30 * fps)) / fps
    e = np.full(len(t), 0.30)
    frames = [20, 50, 80, 110, 140]
    e[frames] = 0.05  # the lid seen closed in one frame each
    events = feed(np.stack([e, e], axis=1), t)
    assert [ev.start_frame for ev in events] == frames
    assert all(ev.start_frame == ev.end_frame for ev in events)
    assert [ev.duration_ms for ev in events] == pytest.approx([1000 / fps] * len(frames))


# ---------------------------------------------------------------------------------------------
# properties derandomize: CI runs the same examples every time; the two below are what a random
# search found on 2026-11-25 (a -30% step at 30 FPS within ~0.4 s before a blink, or at its onset):
# a known limit of the detector, kept visible here (they fail today) until the level re-learning
# handles a blink that interrupts the settling
_KNOWN = dict(
    fps=30.0,
    open_ear=0.25,
    gain=0.7,
    ramp_s=0.0,
    gaps=[3.0, 3.0, 3.0],
    durs=[0.25] * 10,
    depths=[1.0] * 10,
    noise=0.0,
    seed=0,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@example(step_at=13.603751435809226, **_KNOWN).xfail(
    reason="a -30% step 0.4 s before a blink reads as a blink", raises=AssertionError
)
@example(step_at=8.0, **_KNOWN).xfail(
    reason="a -30% step at a blink's onset hides that blink", raises=AssertionError
)
@given(
    fps=st.sampled_from([30.0, 120.0, 500.0]),
    open_ear=st.floats(0.18, 0.40),
    gain=st.floats(0.70, 1.15),
    step_at=st.floats(8.0, 30.0),
    ramp_s=st.floats(0.0, 3.0),
    gaps=st.lists(st.floats(2.5, 6.0), min_size=3, max_size=10),
    durs=st.lists(st.floats(0.15, 0.40), min_size=10, max_size=10),
    depths=st.lists(st.floats(0.8, 1.0), min_size=10, max_size=10),
    noise=st.floats(0.0, 0.004),
    seed=st.integers(0, 2**16),
)
def test_every_planted_blink_is_found_across_a_lasting_level_change(
    fps: float,
    open_ear: float,
    gain: float,
    step_at: float,
    ramp_s: float,
    gaps: list[float],
    durs: list[float],
    depths: list[float],
    noise: float,
    seed: int,
) -> None:
    """A detector must find what is planted, once each, and nothing else; no blink past
    max_blink_ms, whatever lasting change of the open level (x0.70..1.15, a step or a ramp up to 3
    s) happens in between.

    The blinks close 80-100% (their sampled depth at 30 FPS >= ~0.7): a held level is learnt as a
    new open level when it is shallower than ``partial_fraction`` (0.6) of the subject's full
    closure; a level as deep as the subject's own blinks is a closure (see
    docs/explanation/long-recordings.md)."""
    onsets = list(np.cumsum([2.0, *gaps]))
    dur_total = onsets[-1] + 3.0
    t = np.arange(round(dur_total * fps)) / fps
    g = 1 + (gain - 1) * np.clip((t - step_at) / max(ramp_s, 1e-9), 0, 1)
    c = np.zeros_like(t)
    for o, d, depth in zip(onsets, durs, depths, strict=False):
        c = np.maximum(c, lid(t, [o], d, depth))
    rng = np.random.default_rng(seed)
    e = open_ear * g * (1 - c)
    ears = np.abs(np.stack([e, e], axis=1) + rng.normal(0, noise, (len(t), 2)))
    events = feed(ears, t)
    slack = 2.0 / fps
    for o, d, hit in zip(onsets, durs, found(events, onsets, max(durs), slack), strict=False):
        assert hit, f"planted blink at {o:.2f} s ({d * 1000:.0f} ms) not found"
    planted = [(o, o + d) for o, d in zip(onsets, durs, strict=False)]
    stray = [
        ev
        for ev in events
        if not any(ev.start_s <= b + slack and a - slack <= ev.end_s for a, b in planted)
    ]
    assert not stray, (
        f"events where nothing was planted: {[(ev.start_s, ev.duration_ms) for ev in stray]}"
    )
    assert all(ev.kind == "blink" and ev.duration_ms <= CFG.max_blink_ms for ev in events)


@settings(max_examples=25, deadline=None)
@given(
    fps=st.sampled_from([6.0, 8.0, 15.0, 30.0, 500.0]),
    hold_s=st.floats(1.2, 8.0),
    after_s=st.floats(1.0, 3.0),
)
def test_a_closure_of_any_length_past_max_blink_ms_is_one_prolonged_closure(
    fps: float, hold_s: float, after_s: float
) -> None:
    """Eyes shut for ``hold_s``: one prolonged_closure spanning it, and the blink ``after_s``
    later is found."""
    closed_at = 5.0
    reopen = closed_at + hold_s
    nxt = reopen + after_s
    t = np.arange(round((nxt + 3.0) * fps)) / fps
    c = np.maximum(np.where((t >= closed_at) & (t < reopen), 0.95, 0.0), lid(t, [2.0, nxt], 0.3))
    e = 0.30 * (1 - c)
    events = feed(np.stack([e, e], axis=1), t)
    long = [ev for ev in events if ev.kind == "prolonged_closure"]
    assert len(long) == 1, [(ev.start_s, ev.duration_ms, ev.kind) for ev in events]
    assert (
        abs(long[0].start_s - closed_at) <= 1.5 / fps and abs(long[0].end_s - reopen) <= 1.5 / fps
    )
    assert all(found(events, [2.0, nxt], 0.3, 2.0 / fps))


# ---------------------------------------------------------------------------------------------
# warnings
def test_warnings_name_a_prolonged_closure_a_silent_stretch_and_a_moved_baseline() -> None:
    """One line each (summary.json ``warnings``): an event past max_blink_ms, a blink rate outside
    the physiological range over a rate window, the baseline moving by more than
    max_baseline_change."""
    from eyeblink.signals.plausibility import session_warnings

    fps = 30.0
    t = np.arange(round(400 * fps)) / fps
    onsets = [2.0 + 4.0 * k for k in range(30)]  # 15/min for 2 min, then nothing for 280 s
    hold = np.clip(np.minimum((t - 200.0) / 0.15, (203.0 - t) / 0.25), 0, 1) * 0.95
    e = level(t, [(300.0, 0.20)]) * (1 - np.maximum(lid(t, onsets), hold))
    det = BlinkDetector(CFG)
    events: list[BlinkEvent] = []
    baseline = np.empty(len(t))
    for i in range(len(t)):
        events += det.update(i, float(t[i]), float(e[i]), float(e[i]))
        baseline[i] = det.baseline
    events += det.finish()
    lines = session_warnings(events, t, baseline, np.ones(len(t), bool), CFG, "s")
    assert len(lines) == 3, lines
    assert "1 event(s) longer than max_blink_ms" in lines[0] and "200.0-203.0 s" in lines[0]
    assert "blink rate 0.0/min" in lines[1]
    assert "baseline EAR moved by 33%" in lines[2]
    # the blinks alone, at 15/min, level still: no warning
    quiet = [ev for ev in events if ev.start_s < 120]
    assert (
        session_warnings(quiet, t[: round(120 * fps)], baseline[: round(120 * fps)], None, CFG, "s")
        == []
    )


# --------------------------------------------------------------------------------------------- real
# video, real CLI
def render(
    path: Path,
    fps: float,
    duration_s: float,
    closure: Callable[[float], float],
    no_face: Callable[[float], bool] = lambda t: False,
) -> Path:
    """An MJPEG AVI of the synthetic face (320x240) with lid ``closure(t)`` (both eyes); frames
    where ``no_face(t)`` show no face (a flat gray field with sensor noise)."""
    import av

    from eyeblink.lab.synth import FaceRenderer, SynthConfig

    w, h = 320, 240
    cfg = SynthConfig(duration_s=duration_s, fps=fps, width=w, height=h, face_scale=160.0)
    renderer = FaceRenderer(cfg)
    rate = Fraction(fps).limit_denominator(1000)
    container = av.open(str(path), mode="w")
    try:
        stream = container.add_stream("mjpeg", rate=rate, options={"qmin": "3", "qmax": "3"})
        stream.pix_fmt = "yuvj420p"
        stream.width, stream.height = w, h
        stream.time_base = 1 / rate
        planes = np.full((h * 3 // 2, w), 128, dtype=np.uint8)
        for i in range(round(duration_s * fps)):
            t = i / fps
            rng = np.random.default_rng([7, i])
            if no_face(t):
                planes[:h] = np.clip(100 + 2 * rng.standard_normal((h, w)), 0, 255).astype(np.uint8)
            else:
                c = float(closure(t))
                planes[:h] = renderer.render(t, c, c, rng)
            frame = av.VideoFrame.from_ndarray(planes, format="yuvj420p")
            frame.pts = i
            frame.time_base = 1 / rate
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    finally:
        container.close()
    return path


def process(
    video: Path, outdir: Path, *args: str
) -> tuple[list[dict[str, str]], dict[str, object]]:
    """``eyeblink process`` (the real CLI, defaults unless ``args``) -> blinks.csv rows,
    summary.json."""
    proc = subprocess.run(
        [sys.executable, "-m", "eyeblink", "process", str(video), "-o", str(outdir), *args],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with (outdir / f"{video.stem}.blinks.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return rows, json.loads((outdir / f"{video.stem}.summary.json").read_text(encoding="utf-8"))


def closure_with(
    onsets: Sequence[float], held: Callable[[float], float] = lambda t: 0.0, dur_s: float = 0.15
) -> Callable[[float], float]:
    """Lid closure of the rendered face: a held partial closure ``held(t)`` (the open level lowered)
    plus blinks closing the rest of the way."""

    def c(t: float) -> float:
        b = float(lid(np.array([t]), onsets, dur_s)[0])
        h = held(t)
        return min(1.0, h + b * (1 - h))

    return c


def check_rows(
    rows: Sequence[dict[str, str]],
    onsets: Sequence[float],
    dur_s: float,
    fps: float,
    closures: Sequence[tuple[float, float]] = (),
) -> None:
    """The CLI's blinks.csv: every planted blink one blink row, nothing else, nothing past
    max_blink_ms."""
    slack = 2.0 / fps + 0.02
    blinks = [r for r in rows if r["kind"] == "blink"]
    used: set[int] = set()
    for o in onsets:
        hit = next(
            (
                k
                for k, r in enumerate(blinks)
                if k not in used
                and float(r["duration_ms"]) <= CFG.max_blink_ms
                and float(r["start_s"]) <= o + dur_s + slack
                and o - slack <= float(r["end_s"])
            ),
            None,
        )
        assert hit is not None, (
            f"planted blink at {o} s not in blinks.csv: "
            f"{[(r['start_s'], r['duration_ms'], r['kind']) for r in rows]}"
        )
        used.add(hit)
    assert len(blinks) == len(onsets), [(r["start_s"], r["duration_ms"]) for r in blinks]
    for r in rows:
        if float(r["duration_ms"]) > CFG.max_blink_ms:
            assert r["kind"] == "prolonged_closure"
            assert any(
                float(r["start_s"]) <= b + slack and a - slack <= float(r["end_s"])
                for a, b in closures
            )
    assert sum(r["kind"] == "prolonged_closure" for r in rows) == len(closures)


@pytest.mark.slow
def test_process_open_level_lowered_for_good_at_500_fps(tmp_path: Path) -> None:
    """The issue's lock-up case as a recording: 500 FPS, 60 s, the lid lowered for good at 20 s (a
    held partial closure of 52%: the rendered face's openness drops 26%, as 0.30 -> 0.22), a 150 ms
    blink every 4 s."""
    fps = 500.0
    video = render(
        tmp_path / "lowered.avi",
        fps,
        60.0,
        closure_with(EVERY_4S, lambda t: 0.52 if t >= 20 else 0.0),
    )
    rows, summary = process(video, tmp_path / "out")
    check_rows(rows, EVERY_4S, 0.15, fps)
    assert summary["blinks"] == 15


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["step -10%", "gaze down and back", "3 s closure", "face lost 5 s"]
)
def test_process_disturbance_at_30_fps(tmp_path: Path, case: str) -> None:
    fps = 30.0
    onsets, closures = list(EVERY_4S), []
    no_face: Callable[[float], bool] = lambda t: False  # noqa: E731
    if case == "step -10%":
        held: Callable[[float], float] = lambda t: 0.21 if t >= 20 else 0.0  # noqa: E731  (openness -10%)
    elif case == "gaze down and back":
        held = lambda t: 0.52 if 20 <= t < 40 else 0.0  # noqa: E731  (openness -26%)
    elif case == "3 s closure":
        # one 1.5 s after the eyes open
        onsets = [o for o in EVERY_4S if not 29.0 < o < 34.0] + [34.5]
        closures = [(30.0, 33.0)]
        held = lambda t: 0.95 * float(np.clip(min((t - 30.0) / 0.15, (33.0 - t) / 0.25), 0, 1))  # noqa: E731
    else:
        onsets = [o for o in EVERY_4S if not 19.0 < o < 26.0]  # 26.0 is 1 s after the face is back
        held = lambda t: 0.0  # noqa: E731
        no_face = lambda t: 20.0 <= t < 25.0  # noqa: E731
    video = render(tmp_path / "clip.avi", fps, 60.0, closure_with(sorted(onsets), held), no_face)
    rows, summary = process(video, tmp_path / "out")
    check_rows(rows, sorted(onsets), 0.15, fps, closures)
    if closures:
        assert summary["prolonged_closures"] == 1
        assert any("max_blink_ms" in w or "prolonged" in w for w in summary["warnings"]), summary[
            "warnings"
        ]


@pytest.mark.slow
def test_process_one_frame_blink_at_6_fps_lasts_one_frame_interval(tmp_path: Path) -> None:
    fps = 6.0
    frames = [20, 50, 80, 110, 140]
    video = render(
        tmp_path / "six.avi", fps, 30.0, lambda t: 0.95 if round(t * fps) in frames else 0.0
    )
    # the one-frame event measurement, with the eye model whose eye patches stay put across
    # keyframes: with `lids` (the face mesh's own eye points) a keyframe's new box shifts the
    # patches, and at 6 FPS (below the 15 FPS floor the docs give) such a shift two frames before a
    # blink is an appearance event that swallows it
    rows, _ = process(video, tmp_path / "out", "--landmarks", "mesh")
    assert [int(r["start_frame"]) for r in rows] == frames
    assert [int(r["end_frame"]) for r in rows] == frames
    assert [float(r["duration_ms"]) for r in rows] == pytest.approx(
        [1000 / fps] * len(frames), abs=1.0
    )
    assert all(not math.isnan(float(r["amplitude"])) for r in rows)
