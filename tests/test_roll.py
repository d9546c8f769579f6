"""A camera mounted at any roll: faces upside down (a common lab mount) or turned are measured as
upright ones.

BlazeFace finds an upside-down face but labels it as if it were upright: its "eyes" land on the
mouth, and so did the eye crops (10 blinks for 3 real ones, status ok). :meth:`FaceDetector.track`
turns the network's input to the face's roll. These tests turn a real rendered recording (the
project's synth renderer, a real face photo) and run it through the real detector, eye model and
``eyeblink process``.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from eyeblink.lab.synth import SynthConfig, default_blinks, render_frame

#: 3.4 s at 500 FPS: the demo schedule's first three blinks (0.7, 2.0, 3.1 s).
DURATION_S = 3.4


def turn_image(image: np.ndarray, degrees: float) -> np.ndarray:
    """``image`` rotated by ``degrees`` (counter-clockwise as seen) about its centre, same size
    (180: exact flip)."""
    import cv2

    if degrees % 360 == 180:
        return np.ascontiguousarray(image[::-1, ::-1])
    h, w = image.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), degrees, 1.0)
    return cv2.warpAffine(image, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def turn_points(points: np.ndarray, degrees: float, shape: tuple[int, int]) -> np.ndarray:
    """Where ``points`` (x, y) go under :func:`turn_image`."""
    import cv2

    h, w = shape
    m = cv2.getRotationMatrix2D((w / 2, h / 2), degrees, 1.0)
    if degrees % 360 == 180:
        m = np.array([[-1.0, 0.0, w], [0.0, -1.0, h]])
    return np.asarray(points) @ m[:, :2].T + m[:, 2]


def write_turned(src_path: Path, dst_path: Path, degrees: float) -> int:
    """A lossless FFV1 copy of ``src_path`` with every decoded frame turned by ``degrees``, same
    timestamps."""
    import av

    from eyeblink.sources.files import open_source

    n = 0
    with open_source(src_path) as src, av.open(str(dst_path), mode="w") as out:
        rate = Fraction(src.nominal_fps).limit_denominator(1001000)
        stream = out.add_stream("ffv1", rate=rate)
        stream.pix_fmt = "gray"
        stream.time_base = 1 / rate
        for fr in src:
            img = turn_image(fr.gray, degrees)
            if n == 0:
                stream.height, stream.width = img.shape
            vf = av.VideoFrame.from_ndarray(img, format="gray")
            vf.pts, vf.time_base = round(fr.timestamp_s * rate), 1 / rate
            out.mux(stream.encode(vf))
            n += 1
        out.mux(stream.encode(None))
    return n


@pytest.fixture(scope="module")
def detector():
    from eyeblink.detect.blazeface import FaceDetector

    with FaceDetector("litert") as det:
        yield det


@pytest.fixture(scope="module")
def upright_frame() -> np.ndarray:
    return render_frame(
        0.0, 0.0, 0.0, np.random.default_rng(3), SynthConfig(duration_s=1.0, seed=3)
    )


@pytest.mark.parametrize("degrees", [0, 30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 330])
def test_the_eye_keypoints_are_the_eyes_at_any_roll(
    detector, upright_frame: np.ndarray, degrees: int
) -> None:
    """At every roll the subject's eye keypoints land on the subject's eyes, found afresh (no
    previous face) and tracked from the previous frame (one network run)."""
    from eyeblink.detect.blazeface import roll_deg

    upright = detector.track(upright_frame)
    assert upright is not None and abs(roll_deg(upright)) < 10
    eyes = turn_points(upright.keypoints[:2], degrees, upright_frame.shape)
    iod = float(np.linalg.norm(eyes[1] - eyes[0]))
    image = turn_image(upright_frame, degrees)
    fresh = detector.track(image)
    assert fresh is not None
    assert np.abs(fresh.keypoints[:2] - eyes).max() < 0.25 * iod, (fresh.keypoints[:2], eyes)
    # counter-clockwise as seen is a negative roll (y down)
    expected_roll = (-degrees + 180) % 360 - 180
    assert abs((roll_deg(fresh) - expected_roll + 180) % 360 - 180) < 15
    tracked = detector.track(image, fresh)
    assert tracked is not None and np.abs(tracked.keypoints[:2] - eyes).max() < 0.25 * iod


def test_an_upside_down_face_is_not_labelled_upright_by_the_plain_detector(
    detector, upright_frame
) -> None:
    """Why the turn is needed: BlazeFace alone, on the face upside down, puts its eye keypoints far
    from the eyes (if this stops holding, a model update made the turning unnecessary, not wrong).
    """
    upright = detector.track(upright_frame)
    eyes = turn_points(upright.keypoints[:2], 180, upright_frame.shape)
    plain = detector.detect(turn_image(upright_frame, 180))
    assert plain, "BlazeFace finds the upside-down face"
    iod = float(np.linalg.norm(eyes[1] - eyes[0]))
    assert np.abs(plain[0].keypoints[:2] - eyes).max() > 0.5 * iod


def test_batched_tracking_gives_the_faces_of_frame_by_frame_tracking(
    upright_frame: np.ndarray,
) -> None:
    """``track_many`` (the accelerator stage's detection) follows the same rule as ``track`` (the
    reference pipeline's): the same subject in every frame across a turn, a break in the chain and a
    batch boundary."""
    from eyeblink.detect.blazeface import FaceDetector

    frames = [turn_image(upright_frame, d) for d in (0, 0, 180, 180, 180, 90, 90, 0)]
    chained = [True, True, True, True, False, True, True, True]
    with FaceDetector("litert", batch_size=3) as det:
        many = det.track_many(frames, None, chained)
        one: list = []
        prev = None
        for img, ch in zip(frames, chained, strict=True):
            prev = det.track(img, prev if ch else None)
            one.append(prev)
    assert all(f is not None for f in many)
    for a, b in zip(many, one, strict=True):
        np.testing.assert_allclose(a.box, b.box, atol=0.05)
        np.testing.assert_allclose(a.keypoints, b.keypoints, atol=0.05)


def test_the_eye_crops_of_a_face_upside_down_are_its_eyes_the_right_way_up(
    detector, upright_frame
) -> None:
    """The face mesh's eye points and openness, and the report's eye strip, are those of the
    upright face."""
    from eyeblink.landmarks.eyes import eye_strip
    from eyeblink.landmarks.mesh import MeshFitter

    turned = turn_image(upright_frame, 180)
    with MeshFitter() as mesh:
        up = mesh.fit(upright_frame, detector.track(upright_frame))
        down = mesh.fit(turned, detector.track(turned))
    iod = up.inter_ocular
    np.testing.assert_allclose(
        down.points, turn_points(up.points, 180, upright_frame.shape), atol=0.1 * iod
    )
    assert down.ear_left == pytest.approx(up.ear_left, rel=0.15)
    assert down.ear_right == pytest.approx(up.ear_right, rel=0.15)
    strip_up, _ = eye_strip(upright_frame, up.points)
    strip_down, _ = eye_strip(turned, down.points)
    diff = np.abs(strip_up.astype(float) - strip_down.astype(float)).mean()
    flipped = np.abs(strip_up.astype(float) - strip_down[::-1, ::-1].astype(float)).mean()
    assert diff < 12 and diff < flipped / 2, (diff, flipped)


# ------------------------------------------------------------------------------------------ through
# the CLI


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def run_process(video: Path, out: Path, *extra: str) -> list[dict[str, str]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(out),
            "--no-progress",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_rows(out / f"{video.stem}.blinks.csv")


@pytest.fixture(scope="module")
def upright_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    from eyeblink.lab.synth import write_recording

    cfg = SynthConfig(
        duration_s=DURATION_S, blinks=default_blinks(DURATION_S), mjpeg_qscale=4, seed=5
    )
    path = tmp_path_factory.mktemp("roll") / "upright.avi"
    return path, write_recording(path, cfg)


@pytest.fixture(scope="module")
def upright_blinks(
    upright_recording, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, str]]:
    video, truth = upright_recording
    blinks = run_process(video, tmp_path_factory.mktemp("roll-up"))
    planted = [b for b in truth.blinks if b.counts]
    # the reference: every planted blink, nothing else
    assert len(blinks) == len(planted) == 3, blinks
    for got, b in zip(blinks, planted, strict=True):
        assert abs(float(got["start_s"]) - b.onset_s) < 0.02
    return blinks


@pytest.mark.slow
@pytest.mark.parametrize(
    ("degrees", "extra"),
    [
        (180, ()),
        pytest.param(
            135,
            (),
            marks=pytest.mark.xfail(
                strict=False,
                reason=(
                    "known, open: on an AVX2-only host the 135-degree copy's second blink starts "
                    "80 frames early (921 against "
                    "1001; it passed on an AVX-512 host): its open level sits 0.6% under the "
                    "baseline and the onset fit runs to "
                    "the edge of its window; the commit before the Windows work fails the same "
                    "way there"
                ),
            ),
        ),
        (180, ("--stage", "accelerator", "--workers", "2")),
    ],
    ids=["180", "135", "180-accelerator-stage"],
)
def test_a_turned_camera_counts_the_blinks_of_the_upright_one(
    upright_recording, upright_blinks, tmp_path: Path, degrees: int, extra: tuple[str, ...]
) -> None:
    """The same recording turned (an encoded file, through ``eyeblink process``): the same blinks,
    at the same times, as upright. Before the turn was decided, 180 degrees gave spurious blinks
    from the eye crops on the mouth."""
    video, _ = upright_recording
    turned = tmp_path / f"turned{degrees}.avi"
    assert write_turned(video, turned, degrees) > 0
    blinks = run_process(turned, tmp_path / "out", *extra)
    assert len(blinks) == len(upright_blinks), blinks
    for got, ref in zip(blinks, upright_blinks, strict=True):
        assert math.isclose(float(got["start_s"]), float(ref["start_s"]), abs_tol=0.012), (got, ref)
        assert math.isclose(float(got["end_s"]), float(ref["end_s"]), abs_tol=0.03), (got, ref)
        assert float(got["amplitude"]) > 0.5
    rows = read_rows(tmp_path / "out" / f"{turned.stem}.frames.csv")
    assert all(r["face"] == "1" for r in rows)
