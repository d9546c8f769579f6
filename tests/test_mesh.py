"""The face-mesh eye models (``mesh``, ``mesh-ear``) and the eye-model seam.

Real networks on real pixels: golden points on a photo a package ships (scikit-image's astronaut),
the rendered recording's planted lid closures, a rolled face, and the files' checks.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_damaged_model_is_refused

from eyeblink import weights
from eyeblink.config import LandmarkConfig
from eyeblink.errors import ConfigError
from eyeblink.landmarks import EYE_MODELS, EyeModel, create_eye_model

#: The 12 eye points (dlib order: subject's right eye 36-41, then left eye 42-47) the face mesh
#: gives on skimage's astronaut with the shipped BlazeFace box (ai-edge-litert/XNNPACK, x86-64), and
#: each eye's openness: the mesh's six-point EAR (mesh-ear) and the iris network's lid aperture
#: (mesh).
GOLDEN_POINTS = [
    [193.9, 100.7],
    [198.2, 97.7],
    [205.8, 97.7],
    [213.3, 103.5],
    [207.3, 104.2],
    [199.9, 103.6],
    [236.8, 104.7],
    [245.0, 99.8],
    [252.7, 100.6],
    [256.7, 104.0],
    [250.4, 106.2],
    [242.9, 106.0],
]
GOLDEN_OPENNESS = {"mesh": (0.2579, 0.2762), "mesh-ear": (0.3187, 0.3271)}
#: ``mesh``'s 12 points are on the iris network's refined lid contour of the same frame
#: (CONTOUR_EYE_POINTS): within ~2 px of the mesh's own (the corners sit a little further in).
GOLDEN_CONTOUR_POINTS = [
    [195.3, 100.8],
    [199.1, 97.7],
    [206.0, 97.5],
    [213.3, 103.7],
    [207.2, 104.5],
    [200.6, 104.3],
    [236.4, 104.9],
    [244.3, 100.0],
    [251.3, 101.1],
    [254.8, 104.4],
    [249.0, 107.0],
    [242.2, 106.3],
]


@pytest.fixture(scope="module")
def astronaut() -> tuple[np.ndarray, object]:
    import cv2
    from skimage import data

    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector

    img = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    faces = FaceDetector.from_detector(create_detector("litert")).detect(img)
    assert len(faces) == 1
    return img, faces[0]


@pytest.mark.parametrize("name", ["mesh", "mesh-ear"])
def test_golden_points_on_a_shipped_photo(name: str, astronaut: tuple[np.ndarray, object]) -> None:
    img, face = astronaut
    model = create_eye_model(name)
    assert isinstance(model, EyeModel)
    fit = model.fit(img, face)  # type: ignore[arg-type]
    np.testing.assert_allclose(
        fit.points, GOLDEN_CONTOUR_POINTS if name == "mesh" else GOLDEN_POINTS, atol=1.0
    )
    np.testing.assert_allclose(fit.points, GOLDEN_POINTS, atol=2.5)
    np.testing.assert_allclose((fit.ear_left, fit.ear_right), GOLDEN_OPENNESS[name], atol=0.01)
    assert fit.presence > 0.99
    assert fit.patches is not None and fit.patches.shape == (2, 12, 24)
    model.close()
    with pytest.raises(RuntimeError, match="closed"):
        model.fit(img, face)  # type: ignore[arg-type]


def test_a_rolled_face_is_cropped_upright(astronaut: tuple[np.ndarray, object]) -> None:
    """The crop is rotated by BlazeFace's eye line: a face rolled by 20 degrees reads the same
    openness."""
    import cv2

    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector

    img, _ = astronaut
    h, w = img.shape
    rolled = cv2.warpAffine(img, cv2.getRotationMatrix2D((w / 2, h / 2), 20, 1.0), (w, h))
    face = FaceDetector.from_detector(create_detector("litert")).detect(rolled)[0]
    fit = create_eye_model("mesh").fit(rolled, face)
    np.testing.assert_allclose((fit.ear_left, fit.ear_right), GOLDEN_OPENNESS["mesh"], rtol=0.05)


def test_the_mesh_is_reused_for_its_window_and_a_new_box_gets_its_own(
    astronaut: tuple[np.ndarray, object],
) -> None:
    """``mesh_reuse_ms``: the face mesh runs once per window of a tracked box; the iris network
    every fit."""
    img, face = astronaut
    model = create_eye_model("mesh", mesh_reuse_ms=20.0)
    fits = []
    for i in range(25):  # 500 FPS: 2 ms apart
        model.set_time(i * 0.002)  # type: ignore[attr-defined]
        fits.append(model.fit(img, face))  # type: ignore[arg-type]
    assert model.mesh_runs == 3  # type: ignore[attr-defined]  # at 0, 20 and 40 ms
    assert all(f.ear_left == fits[0].ear_left and f.presence == fits[0].presence for f in fits)
    other = dataclasses.replace(face)  # type: ignore[type-var]  # a new detection, same box
    model.set_time(0.05)  # type: ignore[attr-defined]
    model.fit(img, other)  # type: ignore[arg-type]
    assert model.mesh_runs == 4  # type: ignore[attr-defined]
    plain = create_eye_model("mesh", mesh_reuse_ms=20.0)  # no set_time: the mesh on every fit
    for _ in range(3):
        plain.fit(img, face)  # type: ignore[arg-type]
    assert plain.mesh_runs == 3  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="mesh_reuse_ms"):
        LandmarkConfig(mesh_reuse_ms=-1.0)


@pytest.mark.parametrize(("shift", "refits"), [(2, False), (10, True)])
def test_an_eye_that_moves_in_its_crop_runs_the_mesh_again(
    shift: int, refits: bool, astronaut: tuple[np.ndarray, object]
) -> None:
    """Within the window, a head that moves (the eyes shift in their crops) gets a fresh mesh at
    once."""
    img, face = astronaut
    model = create_eye_model("mesh", mesh_reuse_ms=20.0)
    model.set_time(0.0)  # type: ignore[attr-defined]
    model.fit(img, face)  # type: ignore[arg-type]
    moved = np.roll(img, shift, axis=1)  # the eyes ~18 px wide here: 10 px is > 25% of that
    model.set_time(0.002)  # type: ignore[attr-defined]
    fit = model.fit(moved, face)  # type: ignore[arg-type]
    assert model.mesh_runs == (2 if refits else 1)  # type: ignore[attr-defined]
    fresh = create_eye_model("mesh").fit(moved, face)  # type: ignore[arg-type]
    np.testing.assert_allclose(fit.points, fresh.points, atol=0.05 if refits else 3.0)
    # the points follow the eye
    assert abs(fit.points[0, 0] - (GOLDEN_CONTOUR_POINTS[0][0] + shift)) < 1.5


def test_a_500_fps_recording_gives_the_same_blinks_with_the_mesh_reused(tmp_path: Path) -> None:
    """The real CLI on a rendered 500 FPS recording: reusing the mesh for 20 ms (the default) finds
    the same blinks as the mesh on every frame, and the openness stays within a few thousandths of
    it."""
    import csv

    from eyeblink.lab.synth import SynthConfig, write_recording

    video = tmp_path / "rec.avi"
    write_recording(video, SynthConfig.demo(3.0, seed=5))
    rows, blinks = {}, {}
    for reuse in ("20", "0"):
        out = tmp_path / reuse
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "process",
                str(video),
                "-o",
                str(out),
                "--workers",
                "1",
                "--no-progress",
                "--landmarks",
                "mesh",
                "--mesh-reuse-ms",
                reuse,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        with (out / "rec.frames.csv").open(newline="") as fh:
            rows[reuse] = [
                (float(r["ear_left"]), float(r["ear_right"])) for r in csv.DictReader(fh)
            ]
        with (out / "rec.blinks.csv").open(newline="") as fh:
            blinks[reuse] = [
                (int(r["start_frame"]), int(r["end_frame"])) for r in csv.DictReader(fh)
            ]
    a, b = np.array(rows["20"]), np.array(rows["0"])
    assert a.shape == b.shape and not np.array_equal(a, b)  # the setting changes what runs
    assert np.abs(a - b).mean() < 0.005, np.abs(a - b).mean()
    assert len(blinks["20"]) == len(blinks["0"]) >= 2
    for (s20, e20), (s0, e0) in zip(blinks["20"], blinks["0"], strict=True):
        assert abs(s20 - s0) <= 2 and abs(e20 - e0) <= 3


@pytest.mark.parametrize(("name", "closed_fraction"), [("mesh", 0.4), ("mesh-ear", 0.75)])
def test_openness_follows_the_planted_lid(name: str, closed_fraction: float) -> None:
    """On the rendered recording the openness falls monotonically as the lid closes (0 -> 1 in
    tenths)."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.lab.synth import SynthConfig, render_frame

    cfg = SynthConfig()
    detector = FaceDetector.from_detector(create_detector("litert"))
    face = detector.detect(render_frame(0.3, 0.0, 0.0, np.random.default_rng(0), cfg))[0]
    model = create_eye_model(name)
    values = np.array(
        [
            [
                model.fit(render_frame(0.3, c, c, np.random.default_rng(0), cfg), face).ear_left,
                model.fit(render_frame(0.3, c, c, np.random.default_rng(0), cfg), face).ear_right,
            ]
            for c in np.linspace(0.0, 1.0, 11)
        ]
    )
    for eye in range(2):
        trace = values[:, eye]
        assert np.all(np.diff(trace) <= 0.005), (
            f"{name} eye {eye}: not monotonic {np.round(trace, 3)}"
        )
        assert trace[-1] < closed_fraction * trace[0], (
            f"{name} eye {eye}: closed {trace[-1]:.3f}, open {trace[0]:.3f}"
        )


@pytest.mark.parametrize("name", ["eye6", "", "mesh68"])
def test_the_registry_rejects_an_unknown_model_naming_the_valid_ones(name: str) -> None:
    with pytest.raises(ConfigError, match="valid choices: mesh, mesh-ear, lids, face68, eye12"):
        create_eye_model(name)
    with pytest.raises(ConfigError, match="mesh, mesh-ear, lids, face68, eye12"):
        LandmarkConfig(model=name)


def test_the_default_is_the_lid_network_and_mesh_stays_registered() -> None:
    from eyeblink.config import RunConfig
    from eyeblink.presets import resolve_preset

    assert LandmarkConfig().model == "lids"
    assert RunConfig().landmarks.model == "lids"
    # every shipped preset's eye model
    for preset in ("cpu", "gpu", "low-latency", "ipu-mk1", "ipu-mk2"):
        from eyeblink.config import load_preset

        assert load_preset(resolve_preset(preset)).landmarks.model == "lids", preset
    assert list(EYE_MODELS)[:3] == ["mesh", "mesh-ear", "lids"]


@pytest.mark.parametrize(
    ("filename", "digest"),
    [
        (weights.FACE_MESH_FILENAME, weights.FACE_MESH_SHA256),
        (weights.IRIS_FILENAME, weights.IRIS_SHA256),
    ],
)
def test_the_shipped_files_match_their_checksums(
    filename: str, digest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sums = dict(
        reversed(line.split())
        for line in (weights.WEIGHTS_DIR / "SHA256SUMS").read_text().splitlines()
        if line.strip()
    )
    assert sums[filename] == digest
    weights.verify_sha256(weights.WEIGHTS_DIR / filename, digest)
    # a damaged copy is refused by its digest, naming the file
    assert_damaged_model_is_refused("mesh", filename, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "face mesh model not found: "),
        (b"not a flatbuffer" * 100, "cannot be loaded by LiteRT"),
    ],
)
def test_a_missing_or_corrupt_mesh_file_is_one_line(
    content: bytes | None, message: str, tmp_path: Path, make_video
) -> None:  # type: ignore[no-untyped-def]
    video = make_video(5)
    model = tmp_path / "mine.tflite"
    if content is not None:
        model.write_bytes(content)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(tmp_path / "out"),
            "--landmarks",
            "mesh",
            "--landmark-model",
            str(model),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("eyeblink: error:")]
    assert len(errors) == 1 and message in errors[0] and str(model) in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_bench_landmarks_times_every_model_on_real_decoded_frames(tmp_path: Path) -> None:
    """``eyeblink bench landmarks`` through the CLI on a rendered recording: one row per model, a
    JSON report."""
    import json

    from eyeblink.lab.synth import SynthConfig, write_recording

    video = tmp_path / "face.avi"
    write_recording(video, SynthConfig(duration_s=0.1))
    report = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "bench",
            "landmarks",
            "--input",
            str(video),
            "--frames",
            "30",
            "--warmup",
            "2",
            "--models",
            "mesh,mesh-ear",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for row in ("| mesh | 30 |", "| mesh, reuse 0 | 30 |", "| mesh-ear | 30 |"):
        assert row in proc.stdout
    models = json.loads(report.read_text())["models"]
    assert set(models) == {"mesh", "mesh, reuse 0", "mesh-ear"}
    # as in the pipeline: boxes held for 10 frames, the face mesh reused for 20 ms (10 frames at 500
    # FPS)
    assert (
        models["mesh"]["settings"] == {"mesh_reuse_ms": 20.0}
        and 2 <= models["mesh"]["mesh_runs"] <= 8
    )
    # + the warm-up
    assert models["mesh, reuse 0"]["mesh_runs"] == 30 + 2 == models["mesh-ear"]["mesh_runs"]
    for r in models.values():
        assert 0 < r["p10_ms"] <= r["median_ms"] <= r["p90_ms"] <= r["p99_ms"]
    bad = subprocess.run(
        [sys.executable, "-m", "eyeblink", "bench", "landmarks", "--models", "mesh,eye6"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        bad.returncode != 0
        and "unknown eye model 'eye6'" in bad.stderr
        and "Traceback" not in bad.stderr
    )
