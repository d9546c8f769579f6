"""Keyframe work beside the stream (``eyeblink.frame.keyframes``): on a real 500 FPS recording of a
face, through the real networks.

* the rows are the same whether the work runs inline (``process``) or in the worker's thread
  (``live``);
* below 1000 / ``keyframe_lag_ms`` FPS nothing changes: the rows are those of ``keyframe_lag_ms =
  0``;
* a fast camera's keyframes are ``detect_min_ms`` of capture time apart, not ``detect_every``
  frames; at 100 FPS and below (10 frames are 100 ms or more) the rows are those of ``detect_min_ms
  = 0``;
* the result of the work asked for on frame k is used from the first frame ``keyframe_lag_ms``
  later;
* a deliberately slow detector holds up no frame in the thread, while inline it holds every
  keyframe; a frame that waits for work that outlasted its lag is counted.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pytest

from eyeblink.config import RunConfig
from eyeblink.frame.analyzer import FrameAnalyzer, build_fitter
from eyeblink.frame.keyframes import BesideKeyframes
from eyeblink.frames import Frame
from eyeblink.runtime.pipeline import build_detector


def _config(lag_ms: float = 20.0, detect_every: int = 10, min_ms: float = 0.0) -> RunConfig:
    cfg = RunConfig()
    assert cfg.landmarks.model == "lids"  # the default eye model is the one that lags
    return dataclasses.replace(
        cfg,
        detect=dataclasses.replace(
            cfg.detect, detect_every=detect_every, keyframe_lag_ms=lag_ms, detect_min_ms=min_ms
        ),
    )


def _analyzer(cfg: RunConfig, *, beside: bool = False, detector: Any = None) -> FrameAnalyzer:
    a = FrameAnalyzer(cfg, build_detector(cfg), build_fitter(cfg))
    a.segment_frames = None  # as a live worker: one track over the whole stream
    if beside:
        a.keyframes = BesideKeyframes(detector or build_detector(cfg), a.fitter.new_mesher())
    return a


def _rows(a: FrameAnalyzer, frames: list[Frame]) -> list[tuple[Any, ...]]:
    out = []
    for f in frames:
        r = a.analyze(f)
        out.append(
            (
                r.index,
                r.face.box if r.face is not None else None,
                r.detected,
                r.ear_left,
                r.ear_right,
            )
        )
    if a.keyframes is not None:
        a.keyframes.close()
    return out


@pytest.fixture(scope="module")
def frames(face_frames: list[np.ndarray]) -> list[Frame]:
    return [Frame(i, i / 500.0, img) for i, img in enumerate(face_frames)]


def test_the_thread_gives_the_rows_of_inline_work(frames: list[Frame]) -> None:
    cfg = _config()
    inline = _analyzer(cfg)
    a = _rows(inline, frames)
    b = _rows(_analyzer(cfg, beside=True), frames)
    assert a == b
    # and the work was lagged: the rows differ from working on the frame itself, with the face found
    # throughout
    assert a != _rows(_analyzer(_config(lag_ms=0.0)), frames)
    assert all(r[1] is not None for r in a)
    # the placement was renewed along the way (every mesh_reuse_ms)
    assert inline.fitter.mesh_runs > 20


def test_slow_frame_rates_are_unchanged(frames: list[Frame]) -> None:
    at30 = [Frame(f.index, f.index / 30.0, f.image) for f in frames[:120]]
    assert _rows(_analyzer(_config()), at30) == _rows(_analyzer(_config(lag_ms=0.0)), at30)


class _Recording:
    """The real BlazeFace, noting the frames it saw (by their pixels' identity) and, optionally,
    slow."""

    def __init__(self, cfg: RunConfig, sleep_s: float = 0.0) -> None:
        self.inner = build_detector(cfg)
        self.sleep_s = sleep_s
        self.seen: list[float] = []

    def track(self, image: np.ndarray, previous: Any = None) -> Any:
        self.seen.append(float(image[0, :8].sum()) + float(image[240, 100:140].sum()))
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.inner.track(image, previous)

    def detect(self, image: np.ndarray) -> Any:
        return self.inner.detect(image)

    def close(self) -> None:
        self.inner.close()


def test_the_result_is_used_from_the_first_frame_a_lag_later(frames: list[Frame]) -> None:
    """With a keyframe every 10 frames at 500 FPS (2 ms apart) and a 7 ms lag, the keyframes are
    frames 0, 10, 20, ... (frame 0 starts the track: worked on itself); each is used from 4 frames
    later (8 ms >= 7 ms). No box is held (``hold_iou`` 0), so each detection's box is a new one."""
    cfg = _config(lag_ms=7.0)
    cfg = dataclasses.replace(cfg, detect=dataclasses.replace(cfg.detect, hold_iou=0.0))
    a = _analyzer(cfg)
    det = _Recording(cfg)
    a.detector = det  # type: ignore[assignment]
    boxes = []
    for f in frames[:60]:
        r = a.analyze(f)
        boxes.append(r.face.box)
        assert r.detected == (f.index % 10 == 0), f.index
    assert len(det.seen) == 6
    # the box in use changes only on frames 4 after a keyframe (when the new detection was not held)
    changes = [i for i in range(1, 60) if boxes[i] != boxes[i - 1]]
    assert len(changes) >= 3 and all(i % 10 == 4 for i in changes), changes


def test_a_slow_detector_holds_up_no_frame_beside_the_stream(frames: list[Frame]) -> None:
    """The detector sleeps 15 ms per keyframe (over seven frame times at 500 FPS); frames fed at 500
    FPS, the lag 60 ms (so that a loaded test machine finishes the work before its frame). In the
    worker's thread no frame waits for it (a little slack for a busy machine preempting the test);
    inline every keyframe does."""
    cfg = _config(lag_ms=60.0)

    def paced(a: FrameAnalyzer) -> np.ndarray:
        a.analyze(frames[0])  # the first frame starts the track on itself
        took = []
        t0 = time.perf_counter()
        for i, f in enumerate(frames[1:200], start=1):
            wait = t0 + i * 0.002 - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            s = time.perf_counter()
            a.analyze(f)
            took.append(time.perf_counter() - s)
        if a.keyframes is not None:
            a.keyframes.close()
        return np.array(took) * 1000

    slow = _Recording(cfg, sleep_s=0.015)
    beside = paced(_analyzer(cfg, beside=True, detector=slow))
    slow_inline = _analyzer(cfg)
    slow_inline.detector = _Recording(cfg, sleep_s=0.015)  # type: ignore[assignment]
    inline = paced(slow_inline)
    # a keyframe every 10 frames, or when the last work is used (every 30 frames: one piece in
    # flight at a time) (the same frames in both: inline, the first frame's search is the slow
    # detector's too)
    assert len(slow.seen) >= 6 and slow_inline.detector.seen[1:] == slow.seen  # type: ignore[attr-defined]
    assert np.sum(inline >= 15.0) >= len(slow.seen)  # inline, each keyframe held its frame
    assert np.sum(beside >= 15.0) <= 2, np.sort(beside)[-5:]  # beside the stream, none


def test_a_frame_that_waits_for_work_that_outlasted_its_lag_is_counted(frames: list[Frame]) -> None:
    """The detector sleeps 15 ms per keyframe, twice the 7 ms lag, frames fed as fast as they are
    analysed: each detection's frame-to-use waits for it, and the stage clock counts those waits
    (the summary's ``timings.keyframe_waits``); inline nothing waits (the work is done on its
    frame)."""
    cfg = _config(lag_ms=7.0)
    slow = _Recording(cfg, sleep_s=0.015)
    beside = _analyzer(cfg, beside=True, detector=slow)
    _rows(beside, frames[:120])
    waits = beside.clock.waits()
    assert waits is not None and waits["count"] >= len(slow.seen) - 2, (waits, len(slow.seen))
    assert (
        len(slow.seen) >= 6 and waits["mean_ms"] > 5.0 and waits["total_ms"] >= waits["count"] * 5.0
    ), waits
    assert "keyframe_wait" not in beside.clock.ms_per_frame(120)  # a wait, not a stage of the work
    inline = _analyzer(cfg)
    inline.detector = _Recording(cfg, sleep_s=0.015)  # type: ignore[assignment]
    _rows(inline, frames[:120])
    assert inline.clock.waits() is None


def test_a_fast_cameras_keyframes_are_spaced_in_capture_time(frames: list[Frame]) -> None:
    """``detect_min_ms`` 30 at 500 FPS: a keyframe every 15 frames (30 ms), not every 10th; each
    still used a lag later; the face mesh still places the eyes every ``mesh_reuse_ms`` between
    them."""
    cfg = _config(lag_ms=7.0, min_ms=30.0)
    assert cfg.detect.keyframe_frames(500.0) == 15 and cfg.detect.keyframe_frames(30.0) == 10
    a = _analyzer(cfg)
    det = _Recording(cfg)
    a.detector = det  # type: ignore[assignment]
    for f in frames[:60]:
        r = a.analyze(f)
        assert r.face is not None
        assert r.detected == (f.index % 15 == 0), f.index
    assert len(det.seen) == 4  # frames 0, 15, 30, 45: no drift on this recording
    assert a.fitter.mesh_runs >= 5  # placed every 20 ms (10 frames) whatever the keyframes' spacing
    # --detect-every 1 is every frame whatever detect_min_ms says
    every = dataclasses.replace(cfg, detect=dataclasses.replace(cfg.detect, detect_every=1))
    assert every.detect.keyframe_frames(500.0) == 1
    b = _analyzer(every)
    assert all(b.analyze(f).detected for f in frames[:12])


@pytest.mark.parametrize("fps", [100.0, 30.0, 7.5])
def test_detect_min_ms_changes_nothing_at_100_fps_and_below(
    frames: list[Frame], fps: float
) -> None:
    """10 frames are 100 ms or more from 100 FPS down: the keyframes of ``detect_min_ms = 100``
    are those of 0."""
    slow = [Frame(f.index, f.index / fps, f.image) for f in frames[:60]]
    rows = _rows(_analyzer(_config(min_ms=100.0)), slow)
    assert rows == _rows(_analyzer(_config()), slow)
    assert sum(r[2] for r in rows) == 6


@pytest.mark.parametrize("min_ms", [0.0, 50.0])
def test_a_face_that_leaves_is_let_go_within_a_placement_and_a_lag(
    frames: list[Frame], min_ms: float
) -> None:
    """The ``cpu`` preset's keyframe policy at 500 FPS: a face that leaves the picture (frames
    without it from frame 40) is let go within 28 ms, under the shortest blink (30 ms), with
    keyframes 10 frames apart or 50 ms apart: the face mesh's next placement (every 20 ms) no longer
    sees a face and detects again at once."""
    cfg = _config(lag_ms=10.0, min_ms=min_ms)
    blank = np.full_like(frames[0].image, 96)
    seq = frames[:40] + [Frame(i, i / 500.0, blank) for i in range(40, 80)]
    a = _analyzer(cfg)
    rows = [a.analyze(f) for f in seq]
    assert all(r.face is not None for r in rows[:40])
    gone = next(i for i, r in enumerate(rows) if r.face is None)
    assert all(r.face is None for r in rows[gone:])
    # 28 ms at most: 45 with keyframes 10 frames apart, 51 with 50 ms
    assert 40 < gone <= 40 + 14, gone


def test_a_given_detect_every_is_every_nth_frame_at_any_rate() -> None:
    """``--detect-every N`` (the API's ``detect_every=N``) drops the preset's floor in time: N
    frames, as asked; without it the preset's keyframes (every 10th frame, at most every 50 ms)."""
    from pathlib import Path

    from eyeblink.config import load_preset

    cpu = load_preset(Path(__file__).resolve().parent.parent / "pipelines" / "cpu.toml")
    assert (cpu.detect.detect_every, cpu.detect.detect_min_ms) == (10, 50.0)
    assert cpu.detect.keyframe_frames(500.0) == 25 and cpu.detect.keyframe_frames(200.0) == 10
    for n in (2, 10):
        given = cpu.with_overrides("detect", detect_every=n)
        assert given.detect.detect_min_ms == 0.0 and given.detect.keyframe_frames(500.0) == n
    both = cpu.with_overrides("detect", detect_every=4, detect_min_ms=20.0)
    assert both.detect.keyframe_frames(500.0) == 10
    assert cpu.with_overrides("detect", detect_every=None).detect.detect_min_ms == 50.0


@pytest.mark.parametrize("bad", [-1.0, 20000.0, "50"])
def test_a_bad_detect_min_ms_is_one_line(bad: Any) -> None:
    from eyeblink.config import DetectConfig
    from eyeblink.errors import ConfigError

    with pytest.raises(ConfigError, match=r"detect\.detect_min_ms must be in \[0, 10000\] ms, got"):
        DetectConfig(detect_every=10, detect_min_ms=bad)


def test_a_timestamp_that_goes_back_does_not_stop_the_keyframes(frames: list[Frame]) -> None:
    """Frames whose timestamps jump back 2 s (a clock reset) at frame 30: the next keyframe is the
    10th frame after the last (35), not 2 s later; then 50 ms apart again (60). The floor in time
    counts only while time moves on."""
    cfg = _config(lag_ms=0.0, min_ms=50.0)
    seq = [
        Frame(i, (i if i < 30 else i - 1000) / 500.0, f.image) for i, f in enumerate(frames[:70])
    ]
    a = _analyzer(cfg)
    detected = [a.analyze(f).detected for f in seq]
    assert [i for i, d in enumerate(detected) if d] == [0, 25, 35, 60]
