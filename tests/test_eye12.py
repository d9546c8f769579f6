"""The 12-point eye model (``--landmarks eye12``): shipped file, fit quality, CLI, and the
training code path."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eyeblink import weights
from eyeblink.config import LandmarkConfig, RunConfig
from eyeblink.errors import ConfigError, ModelFileError


@pytest.fixture(scope="module")
def fitters() -> dict[str, object]:
    from eyeblink.frame.analyzer import build_fitter

    return {
        m: build_fitter(RunConfig(landmarks=LandmarkConfig(model=m))) for m in ("face68", "eye12")
    }


@pytest.fixture(scope="module")
def detector():  # type: ignore[no-untyped-def]
    from eyeblink.detect.blazeface import FaceDetector

    with FaceDetector() as d:
        yield d


def test_shipped_model_verifies_and_is_small() -> None:
    path = weights.eye12_path()
    assert path.parent == weights.WEIGHTS_DIR and path.name == weights.EYE12_FILENAME
    weights.verify_sha256(path, weights.EYE12_SHA256)
    assert 0.5e6 < path.stat().st_size < 10e6
    sums = dict(
        reversed(line.split())
        for line in (weights.WEIGHTS_DIR / "SHA256SUMS").read_text().splitlines()
        if line.strip()
    )
    assert sums[weights.EYE12_FILENAME] == weights.EYE12_SHA256


def test_a_corrupt_copy_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / weights.EYE12_FILENAME
    bad.write_bytes(weights.eye12_path().read_bytes()[:-10])
    monkeypatch.setattr(weights, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(ModelFileError, match="sha256"):
        weights.eye12_path()


@pytest.mark.parametrize(
    ("model", "ok"), [("face68", True), ("eye12", True), ("eye6", False), ("", False)]
)
def test_landmark_model_names(model: str, ok: bool) -> None:
    if ok:
        assert LandmarkConfig(model=model).model == model
    else:
        with pytest.raises(ConfigError, match="eye12"):
            LandmarkConfig(model=model)


def test_the_fitter_reads_the_eye_points_of_either_model() -> None:
    from eyeblink.landmarks.dlib import LandmarkFitter

    assert LandmarkFitter(weights.eye12_path()).eye_indices == tuple(range(12))
    assert LandmarkFitter().eye_indices == tuple(range(36, 48))


def _synth_frame(closure: float, t: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    from eyeblink.lab.synth import SynthConfig, eye_landmarks_at, render_frame

    cfg = SynthConfig()
    img = render_frame(t, closure, closure, np.random.default_rng(0), cfg)
    pts = np.vstack(
        [eye_landmarks_at(closure, "right", cfg, t), eye_landmarks_at(closure, "left", cfg, t)]
    )
    return img, pts


def test_eye12_fits_a_synthetic_face_like_face68(fitters: dict[str, object], detector) -> None:  # type: ignore[no-untyped-def]
    from eyeblink.detect.blazeface import select_subject
    from eyeblink.lab.train import eye_error

    ears: dict[str, dict[float, float]] = {"face68": {}, "eye12": {}}
    for closure in (0.0, 1.0):
        img, truth = _synth_frame(closure)
        face = select_subject(detector.detect(img))
        assert face is not None
        for name, fitter in fitters.items():
            fit = fitter.fit(img, face)  # type: ignore[attr-defined]
            assert fit.points.shape == (12, 2) and np.isfinite(fit.points).all()
            ears[name][closure] = (fit.ear_left + fit.ear_right) / 2
            # the same points in the same order (right eye 36-41, then left 42-47)
            if closure == 0.0:
                assert eye_error(fit.points, truth) < 0.06, name
    assert abs(ears["eye12"][0.0] - ears["face68"][0.0]) < 0.05, ears
    # closed eyes: EAR drops like face68's (at least as deep, relative to the open eye)
    for name in ears:
        assert ears[name][1.0] < 0.6 * ears[name][0.0], ears
    assert (
        ears["eye12"][1.0] / ears["eye12"][0.0] <= ears["face68"][1.0] / ears["face68"][0.0] + 0.1
    ), ears


@pytest.mark.slow
def test_cli_landmarks_eye12_finds_the_planted_blink(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    video, truth = face_recording
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(out),
            "--landmarks",
            "eye12",
            "--workers",
            "1",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    with (out / "subject.blinks.csv").open(newline="") as fh:
        blinks = list(csv.DictReader(fh))
    assert len(blinks) == 1, blinks
    planted = truth.blinks[0]  # type: ignore[attr-defined]
    assert abs(float(blinks[0]["start_s"]) - planted.onset_s) <= 4 / 500 + 1e-9
    import json

    summary = json.loads((out / "subject.summary.json").read_text())
    assert summary["settings"]["landmarks"]["model"] == "eye12"


def test_training_runs_on_a_tiny_synthetic_set(detector, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The code path of ``eyeblink train-landmarks`` end to end, with tiny options (seconds)."""
    from eyeblink.lab.train import (
        TrainOptions,
        build_samples,
        compare,
        synthetic_frames,
        train_model,
    )
    from eyeblink.landmarks.dlib import LandmarkFitter

    frames = synthetic_frames(8, seed=3)
    assert len(frames) == 8 and {f.kind for f in frames} == {"synthetic"}
    samples = build_samples(frames, detector, augment_copies=1, rng=np.random.default_rng(0))
    assert len(samples) >= 12
    opts = TrainOptions(
        cascade_depth=2,
        num_trees_per_cascade_level=8,
        tree_depth=2,
        oversampling_amount=2,
        feature_pool_size=50,
        num_test_splits=5,
        synthetic=0,
    )
    out = tmp_path / "tiny.dat"
    stats = train_model(samples, out, opts, fitter=LandmarkFitter(), workdir=tmp_path / "set")
    assert stats["samples"] == len(samples) and out.stat().st_size == stats["bytes"]
    xml = (tmp_path / "set" / "eye12.xml").read_text()
    assert xml.count("<image ") == len(samples) and xml.count("<part ") == 12 * len(samples)
    student = LandmarkFitter(out)
    table = compare(samples[:4], {"tiny": student})
    assert table["tiny"]["all"]["n"] == 4 and np.isfinite(table["tiny"]["all"]["err_mean"])


@pytest.mark.parametrize(
    ("field", "value"), [("tree_depth", 0), ("tree_depth", 9), ("nu", 0.0), ("augment", -1)]
)
def test_train_options_are_validated(field: str, value: float) -> None:
    from eyeblink.lab.train import TrainOptions

    with pytest.raises(ConfigError, match=field):
        TrainOptions(**{field: value})  # type: ignore[arg-type]


@pytest.mark.slow
def test_train_landmarks_cli(tmp_path: Path) -> None:
    out = tmp_path / "m.dat"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "train-landmarks",
            "-o",
            str(out),
            "--synthetic",
            "6",
            "--augment",
            "1",
            "--cascade-depth",
            "1",
            "--num-trees-per-cascade-level",
            "4",
            "--tree-depth",
            "2",
            "--oversampling-amount",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and "trained in" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "eyeblink", "train-landmarks", "-o", str(out), "--synthetic", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0 and "nothing to train on" in proc.stderr
