"""The project's lid network (``--landmarks lids``): training, export, the eye model, the CLI.

Real components throughout: rendered faces (:mod:`eyeblink.lab.synth`) through BlazeFace, the face
mesh and the iris network (the teacher), Keras 3 on TensorFlow for the student, LiteRT for the
exported file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_damaged_model_is_refused

from eyeblink import weights
from eyeblink.landmarks import EYE_MODELS, create_eye_model
from eyeblink.landmarks.lids import (
    EYE_SHAPE,
    STRIP_SHAPE,
    LidNetwork,
    confidence_of,
    cut_strip,
    eye_inputs,
    strip_affine,
)


def _tensorflow() -> None:
    pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path, np.ndarray]:
    """A lid network trained for a few steps on a tiny rendered, teacher-labelled set, and its
    export."""
    _tensorflow()
    from eyeblink.lab.lids_data import Teacher, label_synthetic
    from eyeblink.lab.train_lids import crop_strips, export_tflite, train

    teacher = Teacher()
    try:
        data = label_synthetic(teacher, 12, seed=3)
    finally:
        teacher.close()
    assert len(data) >= 10 and data.ctx.dtype == np.uint8
    # the teacher's scale: ~0.3 open, ~0 closed
    assert np.all((data.aperture > -0.05) & (data.aperture < 0.6))
    model = train(data.ctx, data.aperture, epochs=2, batch_size=8, log=lambda _: None)
    path = tmp_path_factory.mktemp("lids") / "tiny.tflite"
    digest = export_tflite(model, path)
    assert len(digest) == 64 and path.stat().st_size > 1000
    return model, path, crop_strips(data.ctx, None)


def test_the_export_equals_the_keras_model_on_golden_inputs(
    tiny_model: tuple[object, Path, np.ndarray],
) -> None:
    """LiteRT (one thread) on the exported file gives the Keras model's outputs on real strips
    and on noise."""
    from eyeblink.lab.train_lids import predict

    model, path, strips = tiny_model
    rng = np.random.default_rng(0)
    golden = np.concatenate(
        [
            strips[:6],
            rng.integers(0, 256, (2, *STRIP_SHAPE), dtype=np.uint8),
            np.full((1, *STRIP_SHAPE), 128, np.uint8),
        ]
    )
    net = LidNetwork(path)
    try:
        for strip in golden:
            ap, ls = net.run(strip)
            kap, kls = predict(model, strip[None])
            np.testing.assert_allclose(ap, kap[0], atol=1e-4)
            np.testing.assert_allclose(ls, kls[0], atol=1e-3)
    finally:
        net.close()


def test_an_ensemble_is_the_members_mean_with_their_disagreement_in_its_error(
    tiny_model: tuple[object, Path, np.ndarray], tmp_path: Path
) -> None:
    """``train-lids --members N``: one file of the run-time interface whose aperture is the members'
    mean and whose expected error grows with their disagreement; LiteRT on the export gives the
    Keras ensemble's outputs."""
    from eyeblink.lab.train_lids import build_model, ensemble, export_tflite, predict

    trained, _, strips = tiny_model
    other = build_model(16, seed=5)  # an untrained member: it disagrees with the trained one
    both = ensemble([trained, other])
    assert ensemble([trained]) is trained
    (a0, l0), (a1, l1), (a, ls) = (
        predict(trained, strips),
        predict(other, strips),
        predict(both, strips),
    )
    np.testing.assert_allclose(a, (a0 + a1) / 2, atol=1e-5)
    var = ((a0 - a) ** 2 + (a1 - a) ** 2) / 2
    s2 = (np.exp(2 * np.clip(l0, -8, 2)) + np.exp(2 * np.clip(l1, -8, 2))) / 2
    np.testing.assert_allclose(ls, 0.5 * np.log(s2 + var), atol=1e-4)
    assert np.all(ls >= 0.5 * np.log(s2) - 1e-6)  # disagreement never makes it surer
    path = tmp_path / "ensemble.tflite"
    export_tflite(both, path)
    net = LidNetwork(path)
    try:
        for strip in strips[:4]:
            ap, lsig = net.run(strip)
            kap, kls = predict(both, strip[None])
            np.testing.assert_allclose(ap, kap[0], atol=1e-4)
            np.testing.assert_allclose(lsig, kls[0], atol=1e-3)
    finally:
        net.close()


def test_the_shape_warp_scales_the_eye_and_its_label_alike() -> None:
    """An eye-shape change squashes a box by ``sy`` and widens it by ``sx`` (the keystone narrows
    the top row only), and the training label is multiplied by ``sy / sx``: the aperture's vertical
    over horizontal."""
    import cv2

    from eyeblink.lab.train_lids import crop_strips, jittered_strips, shape_warp

    h, w = STRIP_SHAPE
    box = np.zeros((h, w), np.float32)
    box[10:30, 40:80] = 1  # 20 rows, 40 columns about the centre
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    out = cv2.warpPerspective(box, shape_warp(1.1, 0.8, 0.0, (h, w)), (w, h), flags=flags)
    rows, cols = np.nonzero(out > 0.5)
    assert rows.max() - rows.min() + 1 == 16 and cols.max() - cols.min() + 1 == 44
    out = cv2.warpPerspective(box, shape_warp(1.0, 1.0, 0.1, (h, w)), (w, h), flags=flags)
    top, mid = np.nonzero(out[11] > 0.5)[0], np.nonzero(out[20] > 0.5)[0]
    assert len(top) < len(mid) == 40  # the top narrower, the eyes' row as it was
    rng = np.random.default_rng(0)
    ctx = rng.integers(0, 256, (40, STRIP_SHAPE[0] + 24, STRIP_SHAPE[1] + 40), dtype=np.uint8)
    strips, factor = jittered_strips(ctx, rng, shape_range=0.2)
    assert strips.shape == (40, *STRIP_SHAPE) and 0.1 < float(np.mean(factor == 1.0)) < 0.5
    # sy / sx within exp(±0.2 ±0.1)
    assert np.all((factor > np.exp(-0.31)) & (factor < np.exp(0.31)))
    # no rng: the centre crop, labels unchanged
    plain, one = jittered_strips(ctx, None, shape_range=0.2)
    assert np.all(one == 1.0) and np.array_equal(plain, crop_strips(ctx, None))


def test_the_training_batch_with_lenses_and_shapes() -> None:
    """The new augmentations keep the batch's shapes and the labels on the teacher's scale; a lens
    keeps a strip's size and range."""
    from eyeblink.lab.train_lids import lens_effects, training_batch

    rng = np.random.default_rng(1)
    ctx = rng.integers(0, 256, (16, STRIP_SHAPE[0] + 24, STRIP_SHAPE[1] + 40), dtype=np.uint8)
    x, y = training_batch(
        ctx, np.full((16, 2), 0.25, np.float32), rng, shape_range=0.2, lenses=True
    )
    assert x.shape == (32, *EYE_SHAPE, 1) and y.shape == (32, 1)
    assert np.all((y > 0.25 * np.exp(-0.31)) & (y < 0.25 * np.exp(0.31)))
    lens = lens_effects(np.full(STRIP_SHAPE, 100.0, np.float32), rng)
    assert lens.shape == STRIP_SHAPE and lens.min() >= 60 and np.isfinite(lens).all()


def test_agreement_measures_the_open_eye_offset_and_the_relative_dip() -> None:
    """A student reading a clip 10 % low everywhere has a 0.1 open-eye offset but dips exactly as
    deep relative to its own open eye (``rel_mae`` 0)."""
    from eyeblink.lab.train_lids import agreement

    t = np.stack([np.r_[np.full(20, 0.25), np.linspace(0.25, 0.05, 5)]] * 2, axis=1)
    a = agreement([(t, 0.9 * t)])
    assert a["open_offset"] == pytest.approx(0.1) and a["rel_mae"] == pytest.approx(0.0, abs=1e-9)
    assert a["mae"] == pytest.approx(float(np.mean(0.1 * t)))


def test_eye_inputs_are_the_two_halves_the_left_eye_mirrored() -> None:
    strip = np.arange(STRIP_SHAPE[0] * STRIP_SHAPE[1], dtype=np.uint32).reshape(STRIP_SHAPE) % 251
    x = eye_inputs(strip.astype(np.uint8))
    assert x.shape == (2, *EYE_SHAPE, 1) and x.dtype == np.float32
    half = STRIP_SHAPE[1] // 2
    np.testing.assert_array_equal(np.round(x[0, :, :, 0] * 255), strip[:, :half].astype(np.float32))
    np.testing.assert_array_equal(
        np.round(x[1, :, :, 0] * 255), strip[:, half:][:, ::-1].astype(np.float32)
    )
    assert confidence_of(np.log(0.01)) == pytest.approx(1.0) and confidence_of(
        np.log(0.02)
    ) == pytest.approx(0.5)


def test_the_strip_is_upright_and_centred_between_the_eyes() -> None:
    """A rolled eye line gives the same strip as an upright one rotated: the strip's x axis is
    the eye line."""
    gray = np.zeros((200, 300), np.uint8)
    gray[95:105, 95:105] = 255  # subject's right eye (image left)
    gray[95:105, 195:205] = 255
    m = strip_affine(np.array([100.0, 100.0]), np.array([200.0, 100.0]))
    strip = cut_strip(gray, m)
    ys, xs = np.nonzero(strip > 128)
    assert (
        abs(ys.mean() - (STRIP_SHAPE[0] - 1) / 2) < 1.0
        and abs(xs.mean() - (STRIP_SHAPE[1] - 1) / 2) < 1.0
    )
    left_blob, right_blob = xs[xs < STRIP_SHAPE[1] / 2].mean(), xs[xs >= STRIP_SHAPE[1] / 2].mean()
    # STRIP_SPAN inter-ocular distances
    assert right_blob - left_blob == pytest.approx(STRIP_SHAPE[1] / 1.6, abs=1.5)


def test_the_shipped_lid_network_follows_a_rendered_closure() -> None:
    """Real rendered frames through BlazeFace, the face mesh and the shipped student: the aperture
    falls monotonically as both lids close (0 -> 1 in tenths) and ends well below the open value."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.lab.synth import SynthConfig, render_frame

    cfg = SynthConfig()
    detector = FaceDetector.from_detector(create_detector("litert"))
    face = detector.detect(render_frame(0.3, 0.0, 0.0, np.random.default_rng(0), cfg))[0]
    model = create_eye_model("lids")
    fits = [
        model.fit(render_frame(0.3, c, c, np.random.default_rng(0), cfg), face)
        for c in np.linspace(0, 1, 11)
    ]
    values = np.array([[f.ear_left, f.ear_right] for f in fits])
    for eye in range(2):
        trace = values[:, eye]
        assert np.all(np.diff(trace) <= 0.01), f"eye {eye}: not monotonic {np.round(trace, 3)}"
        assert trace[-1] < 0.4 * trace[0], f"eye {eye}: closed {trace[-1]:.3f}, open {trace[0]:.3f}"
    assert all(0.0 <= c <= 1.0 for c in model.confidence)  # type: ignore[attr-defined]
    assert fits[0].patches is not None and fits[0].presence > 0.5
    model.close()


def test_the_registry_and_the_shipped_file() -> None:
    spec = EYE_MODELS["lids"]
    assert spec.module == "eyeblink.landmarks.lids" and "mesh_reuse_ms" in spec.settings
    assert spec.cost_ms(500.0, 20.0) < EYE_MODELS["mesh"].cost_ms(500.0, 20.0) / 3
    sums = {
        name: digest
        for digest, name in (
            line.split()
            for line in (weights.WEIGHTS_DIR / "SHA256SUMS").read_text().splitlines()
            if line.strip()
        )
    }
    assert sums[weights.LIDS_FILENAME] == weights.LIDS_SHA256
    weights.verify_sha256(weights.lids_path(), weights.LIDS_SHA256)


def test_a_damaged_shipped_file_is_refused_by_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_damaged_model_is_refused("lids", weights.LIDS_FILENAME, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "lid network not found: "),
        (b"not a flatbuffer" * 100, "cannot be loaded by LiteRT"),
        ("iris", "expected one input (2, 40, 60, 1)"),
    ],
)
def test_a_missing_corrupt_or_wrong_student_file_is_one_line(
    content: bytes | str | None, message: str, tmp_path: Path, make_video
) -> None:
    video = make_video(5)
    model = tmp_path / "mine.tflite"
    if content == "iris":
        model.write_bytes(weights.iris_path().read_bytes())
    elif isinstance(content, bytes):
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
            "lids",
            "--landmark-model",
            str(model),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("eyeblink: error:")]
    assert len(errors) == 1 and message in errors[0] and str(model) in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_process_with_the_lid_network_writes_rows_and_finds_the_blink(
    face_recording, tmp_path: Path
) -> None:
    """``process --landmarks lids`` on a real MJPG recording (800 frames, one planted blink)."""
    import csv

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
            "lids",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    with open(out / f"{video.stem}.frames.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 800
    ears = np.array([float(r["ear_left"]) for r in rows if r["ear_left"] not in ("", "nan")])
    assert len(ears) > 700 and 0.15 < np.median(ears) < 0.45
    with open(out / f"{video.stem}.blinks.csv", newline="") as fh:
        blinks = list(csv.DictReader(fh))
    assert len(blinks) == 1, blinks
    onset = float(blinks[0]["start_s"])
    assert abs(onset - truth.blinks[0].onset_s) < 0.05, (onset, truth.blinks)


@pytest.mark.slow
def test_train_lids_through_the_cli_then_process_with_the_result(tmp_path: Path) -> None:
    """``eyeblink train-lids`` on a rendered recording (a few steps), then ``process`` with its
    file."""
    _tensorflow()
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    video = tmp_path / "000021M_FNN.avi"  # a ZJU-style name: the subject id is 000021
    write_recording(
        video,
        SynthConfig(
            duration_s=0.1,
            blinks=(BlinkSpec(onset_s=0.01, closing_ms=20, closed_ms=10, opening_ms=20),),
        ),
    )
    model, report = tmp_path / "mine.tflite", tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "train-lids",
            str(video),
            "-o",
            str(model),
            "--cache",
            str(tmp_path / "cache"),
            "--epochs",
            "1",
            "--frame-augment",
            "0",
            "--members",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "strips from 1 sources" in proc.stdout and model.is_file(), proc.stdout
    assert "member 2 of 2 (seed 1)" in proc.stdout, proc.stdout
    assert list((tmp_path / "cache").glob("*.npz"))
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
            "lids",
            "--landmark-model",
            str(model),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # every subject excluded: nothing to train on is the one-line error, exit 2
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "train-lids",
            str(video),
            "-o",
            str(model),
            "--cache",
            str(tmp_path / "cache"),
            "--exclude-subjects",
            "000021",
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "no labelled strips to train on" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
def test_the_accelerator_stage_runs_the_lid_network_as_the_reference_does(
    face_recording, tmp_path: Path
) -> None:
    """``--landmarks lids`` in the accelerator stage (LiteRT backend: the CPU reference numerics)
    writes the rows of the single-process reference detecting on every frame, byte for byte."""
    import json

    video = face_recording[0]
    ref, got = tmp_path / "ref", tmp_path / "stage"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(ref),
            "--workers",
            "1",
            "--detect-every",
            "1",
            "--landmarks",
            "lids",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    preset = tmp_path / "stage.toml"
    preset.write_text('[detect]\nbackend = "litert"\nstage = "accelerator"\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(got),
            "--pipeline",
            str(preset),
            "--workers",
            "2",
            "--landmarks",
            "lids",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("subject.frames.csv", "subject.blinks.csv"):
        assert (got / name).read_bytes() == (ref / name).read_bytes(), name
    summary = json.loads((got / "subject.summary.json").read_text())
    assert summary["parallel"]["detector"] == "accelerator stage"
    assert summary["parallel"]["accelerator"]["ms_per_frame"]["network"] > 0


def test_the_networks_inputs_written_in_place_equal_set_tensor_on_real_frames(
    data_dir: Path,
) -> None:
    """The lid network, the face mesh and the iris network fill their LiteRT inputs in place (no
    ``set_tensor`` copy): on every frame of five real Eyeblink8 clips (a blink each), through
    BlazeFace and the face mesh's placement, the inputs and the outputs are bit for bit those of the
    copies made the old way (``eye_inputs``, ``warp``)."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.landmarks.mesh import (
        IRIS_INPUT,
        MESH_INPUT,
        MeshFitter,
        eye_roi,
        mesh_eye_corners,
        warp,
    )
    from eyeblink.sources.files import open_source

    clips = sorted((data_dir / "eyeblink8-blink-clips" / "clips" / "EyeBlink8_0").glob("*.mp4"))[:5]
    if not clips:
        pytest.skip(f"no Eyeblink8 clips under {data_dir}")
    detector = FaceDetector.from_detector(create_detector("litert"))
    fitter = create_eye_model("lids")
    lids = fitter._lids  # type: ignore[attr-defined]
    mesher = MeshFitter(refine=True)
    it, frames = lids._it, 0
    for frame in (f for clip in clips for f in open_source(clip)):
        gray = frame.gray
        face = detector.track(gray)
        assert face is not None
        mesh = mesher.mesh(gray, mesher.face_roi(face))
        inplace_mesh = mesher._mesh.get_tensor(mesher._mesh_in)
        np.testing.assert_array_equal(inplace_mesh, warp(gray, mesher.face_roi(face), MESH_INPUT))
        (r0, r1), _ = mesh_eye_corners(mesh)
        mesher.lid_contour(gray, r0, r1, mirror=True)
        np.testing.assert_array_equal(
            mesher._iris.get_tensor(mesher._iris_in),
            warp(gray, eye_roi(r0, r1), IRIS_INPUT, mirror=True),
        )
        strip, _ = fitter.strip(gray, mesh)  # type: ignore[attr-defined]
        ap, ls = lids.run(strip)
        np.testing.assert_array_equal(it.get_tensor(lids._in), eye_inputs(strip))
        it.set_tensor(lids._in, eye_inputs(strip))
        it.invoke()
        out = it.get_tensor(lids._out)
        np.testing.assert_array_equal(ap, out[:, 0].astype(np.float64))
        np.testing.assert_array_equal(ls, out[:, 1].astype(np.float64))
        frames += 1
    assert frames >= 5 * 5
    fitter.close()
    mesher.close()
