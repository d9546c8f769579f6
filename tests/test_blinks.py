"""The online blink detector: invariants of the state machine (hypothesis) and tables of cases.

Traces are synthetic EAR signals ``ear(t)`` sampled at a chosen frame rate, so the same blink can
be seen at 30 and at 500 FPS. No video, no dlib: these tests are fast.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eyeblink.config import BlinkConfig
from eyeblink.errors import ConfigError
from eyeblink.signals.blinks import (
    BLINK_COLUMNS,
    STATE_BUFFER,
    BlinkDetector,
    BlinkEvent,
    patch_dissimilarity,
    quadratic_onset,
)
from eyeblink.signals.state import EyeState, StateChange

OPEN = 0.30  # open-eye EAR of the synthetic subject


def closure(
    t: np.ndarray, blinks: Sequence[tuple[float, float, float, float, float]]
) -> np.ndarray:
    """Lid closure in [0, 1] at times ``t`` for blinks ``(onset_s, closing_ms, closed_ms,
    opening_ms, depth)``.

    Closing and opening are half cosines: the lid starts from rest, as real lids do.
    """
    c = np.zeros_like(t)
    for onset, closing, closed, opening, depth in blinks:
        a, b = onset + closing / 1000, onset + (closing + closed) / 1000
        e = b + opening / 1000
        x = np.where(
            t < onset,
            0.0,
            np.where(
                t < a,
                (t - onset) / (a - onset),
                np.where(t < b, 1.0, np.where(t < e, 1.0 - (t - b) / (e - b), 0.0)),
            ),
        )
        c = np.maximum(c, depth * (1 - np.cos(np.pi * x)) / 2)  # the lid starts and stops from rest
    return c


def run(
    ears: np.ndarray | Sequence[tuple[float, float]],
    fps: float,
    cfg: BlinkConfig | None = None,
    t: np.ndarray | None = None,
    patches: Callable[[int], np.ndarray | None] | None = None,
    rescan_per_frame: int | None = None,
) -> list[BlinkEvent]:
    """Feed ``(left, right)`` EAR samples at ``fps`` (or at times ``t``); all events, in order."""
    det = BlinkDetector(cfg, rescan_per_frame=rescan_per_frame)
    arr = np.asarray(ears, dtype=np.float64).reshape(-1, 2)
    times = np.arange(len(arr)) / fps if t is None else t
    out: list[BlinkEvent] = []
    for i, (el, er) in enumerate(arr):
        out += det.update(i, float(times[i]), float(el), float(er), patches(i) if patches else None)
    out += det.finish()
    return out


def trace(
    fps: float,
    duration_s: float,
    blinks: Sequence[tuple[float, float, float, float, float]],
    *,
    left: float = OPEN,
    right: float = OPEN,
) -> np.ndarray:
    t = np.arange(round(duration_s * fps)) / fps
    c = closure(t, blinks)
    return np.stack([left * (1 - c), right * (1 - c)], axis=1)


def check_invariants(events: Sequence[BlinkEvent], cfg: BlinkConfig, fps: float) -> None:
    for e in events:
        assert e.start_frame <= e.peak_frame <= e.end_frame
        assert e.start_s <= e.peak_s <= e.end_s
        # inclusive frames: the span plus one frame interval (a one-frame blink lasts one interval,
        # not 0 ms)
        assert e.duration_ms == pytest.approx((e.end_s - e.start_s) * 1000 + 1000 / fps)
        assert e.kind == ("prolonged_closure" if e.duration_ms > cfg.max_blink_ms else "blink")
        if e.complete:
            assert e.duration_ms >= cfg.min_duration_ms - 1e-9
        assert math.isnan(e.amplitude) or 0.0 <= e.amplitude <= 1.0
        for v in (e.closing_velocity, e.opening_velocity):
            assert math.isnan(v) or v >= 0.0
        assert e.cue in ("ear", "appearance", "both")
    for a, b in itertools.pairwise(events):
        assert a.end_frame < b.start_frame, "events overlap or are out of order"
        assert a.end_s < b.start_s
        assert b.blink == a.blink + 1


# ---------------------------------------------------------------------------------------------
# tables


def test_columns_are_appended_not_changed() -> None:
    first = (
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
    )
    assert BLINK_COLUMNS[: len(first)] == first
    assert {
        "start_s_left",
        "end_s_right",
        "closing_velocity",
        "opening_velocity",
        "partial",
        "cue",
    } <= set(BLINK_COLUMNS)
    ev = run(trace(500, 2.0, [(1.3, 60, 40, 120, 0.8)]), 500)[0]
    assert set(ev.as_row()) == set(BLINK_COLUMNS)


@pytest.mark.parametrize("fps", [30.0, 60.0, 250.0, 500.0])
@pytest.mark.parametrize(
    ("closing", "closed", "opening", "depth"),
    [
        (70, 30, 140, 1.0),
        (50, 0, 100, 0.7),
        (100, 200, 200, 0.9),
    ],
)
def test_one_blink_found_at_any_frame_rate(
    fps: float, closing: float, closed: float, opening: float, depth: float
) -> None:
    onset = 1.5
    events = run(trace(fps, 3.0, [(onset, closing, closed, opening, depth)]), fps)
    assert len(events) == 1
    e = events[0]
    assert e.complete
    # the span runs from / to where the ratio crosses onset_ratio (at 500 FPS the start is the
    # quadratic knee)
    x = math.acos(1 - 2 * (1 - BlinkConfig().onset_ratio) / depth) / math.pi
    crossing = onset + x * closing / 1000
    end = onset + (closing + closed + (1 - x) * opening) / 1000
    # knee (quadratic) or crossing
    assert onset - 1.5 / fps - 0.004 <= e.start_s <= crossing + 1.5 / fps
    if fps >= 250:
        assert abs(e.start_s - onset) <= 0.004 + 1e-9  # 2 frames at 500 FPS
    assert abs(e.end_s - end) <= 1.5 / fps
    assert e.amplitude == pytest.approx(depth, abs=0.05 + (0.5 if fps < 100 and closed == 0 else 0))
    assert e.closing_velocity > 0 and e.opening_velocity > 0


@pytest.mark.parametrize("fps", [7.5, 10.0])
def test_a_one_frame_dip_at_a_low_frame_rate_is_the_blink_and_its_peak(fps: float) -> None:
    """A slow camera sees a blink in one frame, after frames already a little below the open level
    (the lid starting down, exposure blending it): the event ends at that frame and peaks there, not
    at the dip's first frame (which missed the truth in the frame-rate ladder's exposed rungs)."""
    ratio = np.ones(round(5 * fps))
    ratio[20:23] = [0.91, 0.91, 0.55]  # below onset_ratio, below onset_ratio, one frame shut
    events = run(np.stack([OPEN * ratio, OPEN * ratio], axis=1), fps)
    assert [(e.start_frame, e.end_frame, e.peak_frame) for e in events] == [(20, 22, 22)]
    assert events[0].min_ear == pytest.approx(0.55 * OPEN)
    check_invariants(events, BlinkConfig(), fps)


@pytest.mark.parametrize(
    ("left_depth", "right_depth", "left_found", "right_found"),
    [
        (0.9, 0.9, True, True),
        (0.9, 0.0, True, False),
        (0.0, 0.9, False, True),
    ],
)
def test_per_eye_spans(
    left_depth: float, right_depth: float, left_found: bool, right_found: bool
) -> None:
    fps = 500.0
    t = np.arange(int(3 * fps)) / fps
    ears = np.stack(
        [
            OPEN * (1 - closure(t, [(1.5, 70, 30, 140, left_depth)])),
            OPEN * (1 - closure(t, [(1.5, 70, 30, 140, right_depth)])),
        ],
        axis=1,
    )
    (e,) = run(ears, fps)
    assert (e.start_frame_left is not None) == left_found
    assert (e.start_frame_right is not None) == right_found
    if left_found:
        assert e.start_s_left <= e.end_s_left
        assert abs(e.start_s_left - 1.5) <= 0.01
        assert e.amplitude_left == pytest.approx(0.9, abs=0.02)
    else:
        assert math.isnan(e.start_s_left) and e.amplitude_left == pytest.approx(0.0, abs=0.02)


def test_per_eye_normalisation_weights_eyes_equally() -> None:
    """An eye with twice the EAR does not dominate: the ratio is the mean of per-eye ratios."""
    fps = 500.0
    t = np.arange(int(3 * fps)) / fps
    c = closure(t, [(1.5, 70, 30, 140, 0.5)])
    ears = np.stack([0.4 * np.ones_like(t), 0.2 * (1 - c)], axis=1)  # only the small eye closes
    (e,) = run(ears, fps, BlinkConfig(close_ratio=0.8))
    assert e.amplitude == pytest.approx(0.25, abs=0.02)  # mean of ratios 1.0 and 0.5


def test_blink_in_the_first_frames_is_found_by_the_warm_up_rescan() -> None:
    fps = 30.0
    events = run(trace(fps, 4.0, [(0.05, 70, 100, 150, 0.9), (2.0, 70, 30, 140, 0.9)]), fps)
    assert [round(e.start_s, 1) for e in events] == [0.1, 2.0]


@pytest.mark.parametrize("step", [2, 25])
@pytest.mark.parametrize(
    ("duration_s", "blinks"),
    [
        # in, at, after the warm-up
        (4.0, [(0.3, 60, 40, 120, 0.9), (1.05, 60, 40, 120, 0.9), (2.0, 70, 30, 140, 0.9)]),
        # the input ends before the backlog is caught up: finish() drains it
        (1.2, [(0.5, 60, 40, 120, 0.9)]),
    ],
)
def test_warm_up_rescan_spread_over_later_frames_finds_the_same_blinks(
    step: int, duration_s: float, blinks: list[tuple[float, float, float, float, float]]
) -> None:
    fps = 500.0
    ears = trace(fps, duration_s, blinks)
    at_once = run(ears, fps)
    spread = run(ears, fps, rescan_per_frame=step)
    assert [e.as_row() for e in spread] == [e.as_row() for e in at_once]
    assert len(at_once) == len(blinks)


def test_warm_up_rescan_spread_catches_up_while_frames_arrive() -> None:
    fps, warm_frames = 500.0, 500
    det = BlinkDetector(rescan_per_frame=25)
    ears = trace(fps, 3.0, [])
    for i, (el, er) in enumerate(ears[: warm_frames + 60]):
        det.update(i, i / fps, float(el), float(er))
    # the warm-up's end takes ~20 frames (a piece each), then the backlog ~warm/(25-1) more: current
    # again
    assert det._starting is None and not det._backlog and det.judged_to_newest
    with pytest.raises(ValueError, match="rescan_per_frame"):
        BlinkDetector(rescan_per_frame=1)


def _patches_of(ears: np.ndarray) -> Callable[[int], np.ndarray | None]:
    """Eye patches that darken with the closure (the appearance cue), none where the EAR is NaN."""
    rng = np.random.default_rng(7)
    iris = rng.integers(30, 60, (2, 12, 24)).astype(np.float64)
    lid = rng.integers(150, 200, (2, 12, 24)).astype(np.float64)

    def patches(i: int) -> np.ndarray | None:
        el = ears[i, 0]
        if math.isnan(el):
            return None
        c = max(0.0, min(1.0, 1.0 - el / OPEN))
        return np.clip(iris + c * (lid - iris) + rng.normal(0, 3, iris.shape), 0, 255).astype(
            np.uint8
        )

    return patches


@pytest.mark.parametrize("step", [2, 25])
def test_warm_up_end_in_pieces_with_patches_and_gaps_changes_nothing(
    step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live mode ends the warm-up one piece a frame (its baseline, its ~500-patch template, its rows
    measured against them), the frames meanwhile waiting behind the warm-up's, face-lost frames
    among them: the blinks are those of a file, and the blinks and state changes those of the
    warm-up ended at once and re-scanned over the following frames."""
    fps = 500.0
    ears = trace(
        fps, 4.0, [(0.3, 60, 40, 120, 0.9), (1.02, 60, 40, 120, 0.9), (2.0, 70, 30, 140, 0.9)]
    )
    ears[505:512] = np.nan  # the face lost while the warm-up ends (1 s at 500 FPS)

    def states(rescan: int | None) -> tuple[list[dict[str, object]], list[tuple[int, str]], int]:
        det = BlinkDetector(rescan_per_frame=rescan)
        # the same patches for every run (its noise drawn in frame order)
        patches = _patches_of(ears)
        out, changes, pieces = [], [], 0
        for i, (el, er) in enumerate(ears):
            out += det.update(i, i / fps, float(el), float(er), patches(i))
            pieces += det._starting is not None
            changes += [(c.frame, c.state.value) for c in det.pop_state_changes()]
        out += det.finish()
        changes += [(c.frame, c.state.value) for c in det.pop_state_changes()]
        return [e.as_row() for e in out], changes, pieces

    rows_file, _, _ = states(None)
    rows_pieces, changes_pieces, pieces = states(step)
    assert pieces > 10  # in pieces, not at once

    # the warm-up's end at once, its re-scan spread
    def at_once(self: BlinkDetector) -> list[BlinkEvent]:
        for _ in self._start_steps():
            pass
        return self._drain(self._rescan_step)

    monkeypatch.setattr(BlinkDetector, "_start", at_once)
    rows_once, changes_once, pieces_once = states(step)
    assert pieces_once == 0
    assert len(rows_file) == 3
    assert rows_pieces == rows_once == rows_file
    assert changes_pieces == changes_once


@pytest.mark.parametrize("fps", [30.0, 500.0])
def test_frames_dropped_during_the_warm_up_keep_the_blink_before_them(fps: float) -> None:
    """ZJU's 000003M_FBN: a blink at 0.25 s, then the camera drops 4 frames (133 ms > max_gap_ms) at
    0.57 s. The warm-up keeps the frames before the gap (it used to start over and never judge
    them)."""
    ears = trace(fps, 4.0, [(0.25, 70, 30, 100, 0.9), (2.0, 70, 30, 140, 0.9)])
    t = np.arange(len(ears)) / fps
    keep = (t < 0.57) | (t > 0.70)
    events = run(ears[keep], fps, t=t[keep])
    assert [e.start_s for e in events] == pytest.approx([0.25, 2.0], abs=0.05)
    assert all(e.complete for e in events)
    check_invariants(events, BlinkConfig(), fps)


def test_input_shorter_than_the_warm_up_is_still_judged() -> None:
    fps = 500.0
    events = run(trace(fps, 0.8, [(0.4, 60, 30, 120, 0.9)]), fps)
    assert len(events) == 1 and abs(events[0].start_s - 0.4) < 0.01


@pytest.mark.parametrize(
    ("gap_ms", "merged"), [(0.0, True), (10.0, True), (40.0, False), (200.0, False)]
)
def test_blinks_closer_than_merge_gap_are_one(gap_ms: float, merged: bool) -> None:
    """Two blinks whose eyes are open (ratio >= onset_ratio) for less than merge_gap_ms are one
    blink."""
    fps = 1000.0
    first_end = 1.5 + 0.03 + 0.02 + 0.05
    ears = trace(fps, 3.0, [(1.5, 30, 20, 50, 0.9), (first_end + gap_ms / 1000, 30, 20, 50, 0.9)])
    events = run(ears, fps, BlinkConfig(merge_gap_ms=30.0, onset_model="threshold"))
    assert len(events) == (1 if merged else 2)
    if len(events) == 2:
        assert (events[1].start_s - events[0].end_s) * 1000 >= 30.0
    else:
        assert events[0].end_s > first_end + gap_ms / 1000


def test_events_are_emitted_with_a_bounded_delay() -> None:
    """Online: a blink comes out at most merge_gap_ms (+ one frame) after its last frame."""
    cfg = BlinkConfig()
    fps = 500.0
    ears = trace(fps, 3.0, [(1.5, 70, 30, 140, 0.9)])
    det = BlinkDetector(cfg)
    for i, (el, er) in enumerate(ears):
        out = det.update(i, i / fps, float(el), float(er))
        if out:
            (e,) = out
            assert (i / fps - e.end_s) * 1000 <= cfg.merge_gap_ms + 1000 / fps + 1e-9
            break
    else:
        pytest.fail("the blink was only reported by finish()")


@pytest.mark.parametrize(("fps", "gap_at_s"), [(30.0, 1.56), (500.0, 1.56), (500.0, 1.53)])
def test_gap_inside_a_blink_ends_it_incomplete(fps: float, gap_at_s: float) -> None:
    ears = trace(fps, 3.0, [(1.5, 70, 100, 140, 0.9)])
    t = np.arange(len(ears)) / fps
    keep = (t < gap_at_s) | (t > gap_at_s + 0.3)  # 300 ms without frames > max_gap_ms
    events = run(ears[keep], fps, t=t[keep])
    assert events and not events[0].complete
    assert events[0].end_s < gap_at_s
    check_invariants(events, BlinkConfig(), fps)


def test_missing_eye_samples_are_gaps_not_blinks() -> None:
    fps = 500.0
    ears = trace(fps, 3.0, []).copy()
    ears[700:720] = np.nan  # face lost for 40 ms: shorter than max_gap_ms
    assert run(ears, fps) == []


@pytest.mark.parametrize(
    ("amplitudes", "partial"),
    [
        ([0.9, 0.9, 0.9, 0.3], [False, False, False, True]),
        ([0.9, 0.9, 0.9, 0.9], [False, False, False, False]),
        ([0.25], [True]),  # prior full closure 0.5, fraction 0.6: 0.25 < 0.30
        ([0.4], [False]),
    ],
)
def test_partial_relative_to_the_subjects_full_closure(
    amplitudes: list[float], partial: list[bool]
) -> None:
    fps = 500.0
    blinks = [(1.2 + 0.8 * i, 70, 30, 140, a) for i, a in enumerate(amplitudes)]
    events = run(
        trace(fps, 1.5 + 0.8 * len(amplitudes), blinks), fps, BlinkConfig(close_ratio=0.85)
    )
    assert [e.partial for e in events] == partial


def test_appearance_cue_finds_a_blink_the_ear_misses() -> None:
    """EAR flat, eye patch changes (dlib on glasses): the appearance cue alone reports it."""
    fps = 30.0
    n = 150
    rng = np.random.default_rng(0)
    open_patch = np.zeros((12, 24), np.uint8)
    open_patch[3:9, 8:16] = 200  # the iris
    closed_patch = np.zeros((12, 24), np.uint8)
    closed_patch[6:8, :] = 200  # the lash line

    def patches(i: int) -> np.ndarray:
        p = (closed_patch if 80 <= i < 86 else open_patch).astype(np.int16)
        p = np.clip(p + rng.integers(-8, 9, size=p.shape) + 20, 0, 255).astype(np.uint8)
        return np.stack([p, p])

    ears = np.full((n, 2), OPEN) + rng.normal(0, 0.003, size=(n, 2))
    events = run(ears, fps, patches=patches)
    assert len(events) == 1 and events[0].cue == "appearance"
    assert 79 <= events[0].start_frame <= 80 and 85 <= events[0].end_frame <= 86
    assert run(ears, fps, BlinkConfig(appearance=False), patches=patches) == []
    # the eye model's lid measure may have to confirm it: the patch changed, the lid never moved ->
    # no blink
    assert run(ears, fps, BlinkConfig(appearance_needs_lid=True), patches=patches) == []
    shallow = ears.copy()
    # the lid moved (below open_ratio 0.87), not enough for the EAR cue (close_ratio 0.80)
    shallow[80:86] *= 0.84
    events = run(shallow, fps, BlinkConfig(appearance_needs_lid=True), patches=patches)
    assert len(events) == 1 and events[0].cue == "appearance" and 0.1 < events[0].amplitude < 0.25


def test_appearance_template_that_no_longer_matches_is_learnt_afresh() -> None:
    """The eye's look changes for good at 10.5 s (glasses, light) while the lid stays open: the
    patches alone must not hold an event open. Every blink is found, ends where the lid reopened,
    and comes out within 0.15 s of its end (merge_gap_ms and a frame or two; with the template
    frozen, one came out 0.33 s late)."""
    fps = 30.0
    n = int(24 * fps)
    rng = np.random.default_rng(3)
    open_patch = np.zeros((12, 24), np.uint8)
    open_patch[3:9, 8:16] = 200  # the iris
    glasses = open_patch.copy()
    glasses[0:2, :] = 120  # a rim across the top
    glasses[3:9, 2:6] = 90  # a reflection

    def patches(i: int) -> np.ndarray:
        p = (glasses if i >= int(10.5 * fps) else open_patch).astype(np.int16)
        p = np.clip(p + rng.integers(-8, 9, size=p.shape) + 20, 0, 255).astype(np.uint8)
        return np.stack([p, p])

    onsets = [2.0, 5.0, 8.0, 11.0, 14.0, 17.0, 20.0]
    ears = trace(fps, 24.0, [(o, 70, 30, 140, 1.0) for o in onsets])
    # as for the default eye model (mesh)
    det = BlinkDetector(BlinkConfig(appearance_needs_lid=True))
    got: list[tuple[BlinkEvent, float]] = []
    for i, (el, er) in enumerate(ears):
        got += [(e, i / fps) for e in det.update(i, i / fps, float(el), float(er), patches(i))]
    got += [(e, n / fps) for e in det.finish()]
    assert [round(e.start_s) for e, _ in got] == [round(o) for o in onsets], [
        (e.start_s, e.duration_ms) for e, _ in got
    ]
    for e, emitted in got:
        assert e.kind == "blink" and e.duration_ms < 320
        assert emitted - e.end_s <= 0.15, (
            f"blink at {e.start_s:.2f} s emitted {emitted - e.end_s:.2f} s after its end"
        )


@pytest.mark.parametrize(
    ("model", "setting", "needs_lid"),
    [
        ("mesh", None, True),
        ("mesh-ear", None, False),
        ("face68", None, True),
        ("mesh", False, False),
        ("mesh-ear", True, True),
    ],
)
def test_the_eye_model_decides_whether_its_lid_confirms_the_appearance_cue(
    model: str, setting: bool | None, needs_lid: bool
) -> None:
    from eyeblink.config import LandmarkConfig, RunConfig

    cfg = RunConfig(
        landmarks=LandmarkConfig(model=model), blinks=BlinkConfig(appearance_needs_lid=setting)
    )
    assert cfg.blink_settings().appearance_needs_lid is needs_lid


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (np.eye(4), np.eye(4), 0.0),
        (np.eye(4), 1 - np.eye(4), 2.0),
        (np.eye(4), 3 * np.eye(4) + 7, 0.0),  # brightness and contrast do not matter
    ],
)
def test_patch_dissimilarity(a: np.ndarray, b: np.ndarray, expected: float) -> None:
    assert patch_dissimilarity(a, b) == pytest.approx(expected, abs=1e-9)


def test_patch_dissimilarity_of_a_flat_patch_is_nan() -> None:
    assert math.isnan(patch_dissimilarity(np.ones((4, 4)), np.eye(4)))


def test_quadratic_onset_recovers_the_knee() -> None:
    t = np.arange(0, 0.06, 0.002)
    y = 0.3 - 40.0 * np.maximum(0.0, t - 0.02) ** 2
    assert quadratic_onset(t, y) == pytest.approx(0.02, abs=0.001)
    assert quadratic_onset(t[:3], y[:3]) is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("close_ratio", 0.9, "close_ratio < open_ratio"),
        ("onset_model", "cubic", "onset_model"),
        ("noise_k", -1.0, "noise_k"),
        ("merge_gap_ms", -5.0, "merge_gap_ms"),
        ("appearance_z", 0.0, "appearance_z"),
        ("partial_fraction", 1.5, "partial_fraction"),
        ("full_closure_quantile", 0.0, "full_closure_quantile"),
        ("full_closure_min_events", 0, "full_closure_min_events"),
        ("min_baseline_ms", 5000.0, "min_baseline_ms"),
        ("onset_min_samples", 2, "onset_min_samples"),
    ],
)
def test_config_rejects_bad_values(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        replace(BlinkConfig(), **{field: value})


# ---------------------------------------------------------------------------------------------
# hypothesis

blink_st = st.tuples(
    st.floats(0.0, 1.0),  # onset offset inside its slot
    st.floats(40.0, 120.0),  # closing ms
    st.floats(0.0, 150.0),  # closed ms
    st.floats(60.0, 250.0),  # opening ms
    st.floats(0.05, 1.0),  # depth
)


def _plan(
    slots: list[tuple[float, float, float, float, float]], start: float = 1.2, slot_s: float = 1.0
) -> list[tuple[float, float, float, float, float]]:
    return [
        (start + i * slot_s + off * 0.3, c, d, o, depth)
        for i, (off, c, d, o, depth) in enumerate(slots)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    slots=st.lists(blink_st, max_size=5),
    fps=st.sampled_from([30.0, 120.0, 500.0]),
    noise=st.floats(0.0, 0.02),
    seed=st.integers(0, 2**16),
    nan_frac=st.floats(0.0, 0.3),
    left=st.floats(0.15, 0.4),
    right=st.floats(0.15, 0.4),
)
def test_state_machine_invariants(
    slots: list[tuple[float, float, float, float, float]],
    fps: float,
    noise: float,
    seed: int,
    nan_frac: float,
    left: float,
    right: float,
) -> None:
    """No overlap, in order, start <= peak <= end, durations >= min, amplitude in [0, 1]; NaNs
    never crash."""
    cfg = BlinkConfig()
    rng = np.random.default_rng(seed)
    ears = trace(fps, 1.5 + len(slots), _plan(slots), left=left, right=right)
    ears = np.abs(ears + rng.normal(0, noise, size=ears.shape))  # non-negative signal
    ears[rng.random(ears.shape) < nan_frac] = np.nan
    check_invariants(run(ears, fps, cfg), cfg, fps)


@settings(max_examples=40, deadline=None)
@given(
    raw=st.lists(
        st.one_of(st.floats(min_value=-1, max_value=2), st.just(math.nan)), min_size=0, max_size=400
    ),
    fps=st.sampled_from([30.0, 500.0]),
)
def test_arbitrary_samples_never_crash(raw: list[float], fps: float) -> None:
    cfg = BlinkConfig()
    pairs = [(raw[i], raw[(i * 7 + 3) % len(raw)]) for i in range(len(raw))]
    events = run(pairs, fps, cfg) if pairs else run(np.empty((0, 2)), fps, cfg)
    for e in events:
        assert e.start_frame <= e.peak_frame <= e.end_frame


@settings(max_examples=40, deadline=None)
@given(
    slots=st.lists(
        st.tuples(
            st.floats(0.0, 1.0),
            st.floats(50.0, 120.0),
            st.floats(40.0, 150.0),
            st.floats(80.0, 250.0),
            st.floats(0.45, 1.0),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_same_blinks_at_30_and_500_fps(
    slots: list[tuple[float, float, float, float, float]],
) -> None:
    """The same trace sampled at 30 and 500 FPS gives the same blinks to within a 30 FPS frame
    period."""
    cfg = BlinkConfig(onset_model="threshold")
    plan = _plan(slots)
    dur = 1.5 + len(slots)
    slow, fast = run(trace(30.0, dur, plan), 30.0, cfg), run(trace(500.0, dur, plan), 500.0, cfg)
    assert len(slow) == len(fast) == len(plan)
    period = 1 / 30 + 1 / 500 + 1e-9
    for a, b in zip(slow, fast, strict=True):
        assert abs(a.start_s - b.start_s) <= period
        assert abs(a.end_s - b.end_s) <= period
        assert a.complete == b.complete


# -- the eye's state (STATE-API): the detector is the one place that decides it
# --------------------------


def _states(
    ears: np.ndarray, fps: float, rescan_per_frame: int | None = None, pop_every: int = 1
) -> tuple[BlinkDetector, list[StateChange]]:
    det = BlinkDetector(rescan_per_frame=rescan_per_frame)
    changes: list[StateChange] = []
    for i, (el, er) in enumerate(ears):
        det.update(i, i / fps, float(el), float(er))
        if i % pop_every == 0:
            changes += det.pop_state_changes()
    det.finish()
    changes += det.pop_state_changes()
    return det, changes


@pytest.mark.parametrize("rescan_per_frame", [None, 25])
def test_state_goes_open_closing_closed_reopening_open_through_a_blink(
    rescan_per_frame: int | None,
) -> None:
    fps = 500.0
    ears = trace(fps, 4.0, [(2.0, 80, 60, 150, 0.9)])
    det, changes = _states(ears, fps, rescan_per_frame, pop_every=7)
    seq = [c.state for c in changes]
    assert seq == [
        EyeState.OPEN,
        EyeState.CLOSING,
        EyeState.CLOSED,
        EyeState.REOPENING,
        EyeState.OPEN,
    ], seq
    assert changes[0].previous is EyeState.NO_FACE
    assert all(a.state is b.previous for a, b in itertools.pairwise(changes))
    assert [c.frame for c in changes] == sorted(c.frame for c in changes)
    for c in changes:
        assert c.timestamp_s == pytest.approx(c.frame / fps)
    # the changes bracket the planted blink: closing at its onset, closed past 20% closure, open at
    # its end
    closing, closed, reopening, opened = changes[1:]
    assert 2.0 <= closing.timestamp_s < closed.timestamp_s < 2.08 + 0.06
    assert 2.08 + 0.06 < reopening.timestamp_s < opened.timestamp_s <= 2.0 + 0.29 + 0.002
    assert det.state is EyeState.OPEN
    assert det.pop_state_changes() == []


def test_state_is_no_face_without_a_fitted_eye_and_before_the_baseline() -> None:
    fps = 500.0
    ears = trace(fps, 4.0, [])
    ears[1500:1600] = np.nan  # face lost for 200 ms
    det = BlinkDetector()
    assert det.state is EyeState.NO_FACE
    det.update(0, 0.0, OPEN, OPEN)
    assert det.state is EyeState.NO_FACE  # no baseline yet: open cannot be told from closed
    seen = []
    for i in range(1, len(ears)):
        det.update(i, i / fps, float(ears[i, 0]), float(ears[i, 1]))
        seen += det.pop_state_changes()
        if 1500 <= i < 1600:
            assert det.state is EyeState.NO_FACE
    assert [(c.frame, c.state) for c in seen] == [
        (seen[0].frame, EyeState.OPEN),
        (1500, EyeState.NO_FACE),
        (1600, EyeState.OPEN),
    ]
    # the warm-up frames are judged once the baseline exists, from the first
    assert seen[0].frame == 0


def test_state_changes_are_a_bounded_buffer() -> None:
    fps = 500.0
    rng = np.random.default_rng(0)
    ears = np.repeat(np.where(rng.random(20000) < 0.5, OPEN, np.nan)[:, None], 2, axis=1)
    ears[:600] = OPEN
    det = BlinkDetector()
    for i, (el, er) in enumerate(ears):
        det.update(i, i / fps, float(el), float(er))
    changes = det.pop_state_changes()
    assert len(changes) == STATE_BUFFER  # the newest kept, in order
    assert changes[-1].frame == max(
        i for i in range(len(ears)) if np.isnan(ears[i, 0]) != np.isnan(ears[i - 1, 0])
    )


@pytest.mark.parametrize("onset_s", [-0.05, 0.0, 0.002])
def test_a_blink_at_the_first_frame_is_cut_by_its_start(onset_s: float) -> None:
    """A recording that starts with the lid closing or closed: the blink may have begun before the
    first frame, so it is ``complete = 0`` (the column's 0: cut by its start) and left out of the
    rate and mean duration."""
    from eyeblink.signals.plausibility import event_counts

    fps = 500.0
    events = run(trace(fps, 3.0, [(onset_s, 70, 60, 140, 0.9), (1.5, 70, 30, 140, 0.9)]), fps)
    assert [(e.start_frame, e.complete) for e in events] == [(0, False), (749, True)]
    counts = event_counts(events, 3.0)
    assert counts["blinks"] == 2 and counts["complete_blinks"] == 1
    assert counts["mean_blink_duration_ms"] == pytest.approx(events[1].duration_ms)


def test_a_blink_at_the_first_frame_after_a_gap_is_cut_by_its_start() -> None:
    fps = 500.0
    ears = trace(fps, 3.0, [(1.4, 70, 60, 140, 0.9)])
    t = np.arange(len(ears)) / fps
    # 400 ms without frames (> max_gap_ms), then the lid is already closing
    keep = (t < 1.0) | (t >= 1.4)
    events = run(ears[keep], fps, t=t[keep])
    assert len(events) == 1 and events[0].start_s == pytest.approx(1.4) and not events[0].complete
    events = run(ears, fps)  # the same blink without the gap: complete
    assert len(events) == 1 and events[0].complete


def test_the_baselines_faster_medians_are_np_medians_floats() -> None:
    """row_medians (a sort per row) and CenteredTemplate.pair (both eyes at once) give the floats
    np.median and dissimilarity give, to the last bit: the rows written must not change with the way
    they are computed."""
    from eyeblink.signals.numerics import CenteredTemplate, row_medians

    rng = np.random.default_rng(0)
    for i in range(300):
        n = int(rng.integers(1, 1600))
        rows = rng.random((6, n)) if i % 2 else np.round(rng.normal(0.3, 0.05, (6, n)), 3)
        assert np.array_equal(row_medians(rows), np.median(rows, axis=1))
        stack = rng.integers(0, 256, (int(rng.integers(1, 130)), 40)).astype(np.float32)
        assert np.array_equal(row_medians(np.ascontiguousarray(stack.T)), np.median(stack, axis=0))
    template = CenteredTemplate(
        np.median(rng.integers(0, 256, (9, 2, 12, 24)).astype(np.float32), axis=0)
    )
    for _ in range(300):
        patches = rng.integers(0, 256, (2, 12, 24), dtype=np.uint8)
        assert template.pair(patches) == (
            template.dissimilarity(0, patches[0]),
            template.dissimilarity(1, patches[1]),
        )
