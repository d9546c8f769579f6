"""``eyeblink train-detector``: label encoding, the teacher's box fit, the export, and a tiny run
on rendered frames."""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from eyeblink.cli import main
from eyeblink.detect.anchors import blazeface_short_range_anchors
from eyeblink.detect.blazeface import decode
from eyeblink.lab import train_detector as td


def test_encode_is_the_inverse_of_decode_for_every_anchor() -> None:
    anchors = blazeface_short_range_anchors()
    rng = np.random.default_rng(3)
    for _ in range(5):
        x0, y0 = rng.uniform(0.05, 0.5, 2)
        box = np.array([x0, y0, x0 + rng.uniform(0.1, 0.45), y0 + rng.uniform(0.1, 0.45)])
        kps = rng.uniform(0.0, 1.0, (6, 2))
        reg = td.encode(box, kps, anchors)
        boxes, keypoints, scores = decode(reg, np.full(896, 5.0, np.float32), anchors)
        assert boxes.shape == (896, 4) and np.all(scores > 0.99)
        np.testing.assert_allclose(boxes, np.broadcast_to(box, (896, 4)), atol=2e-6)
        np.testing.assert_allclose(keypoints, np.broadcast_to(kps, (896, 6, 2)), atol=2e-6)


def test_matching_takes_overlapping_anchors_of_the_right_size() -> None:
    mboxes = td.matching_anchors()
    centres = blazeface_short_range_anchors()[:, :2]
    np.testing.assert_allclose((mboxes[:, :2] + mboxes[:, 2:]) / 2, centres, atol=1e-6)
    # a face 45 px wide in the 128 px input: the 8x8 grid's anchors
    box = np.array([0.3, 0.3, 0.65, 0.65])
    pos, neg = td.match(box, mboxes)
    assert 1 <= pos.sum() < 40 and not np.any(pos & neg)
    # 16x16 anchors (0.15 and 0.22 wide) are too small for it
    assert np.all(np.flatnonzero(pos) >= 512)
    c = centres[pos]
    assert np.all((c > 0.3) & (c < 0.65))
    # no anchor overlaps by 0.5: the best one is still a positive
    tiny = np.array([0.5, 0.5, 0.51, 0.51])
    assert td.match(tiny, mboxes)[0].sum() == 1


def test_teacher_fit_recovers_a_known_box_convention() -> None:
    """Boxes made from the mesh by known offsets and scales (plus noise) give those values back."""
    rng = np.random.default_rng(0)
    truth = td.TeacherFit(
        0.05, 0.2, 4.5, 4.1, tuple((float(a), float(b)) for a, b in rng.normal(0, 0.1, (6, 2)))
    )
    base = rng.normal(0, 1, (468, 2)) * (30, 36)
    meshes, boxes, kps = [], [], []
    for _ in range(40):
        ang = rng.uniform(-0.3, 0.3)
        rot = np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
        mesh = base @ rot.T * rng.uniform(0.5, 2.0) + rng.uniform(100, 300, 2)
        b, k = truth.label(mesh)
        meshes.append(mesh)
        boxes.append(b + rng.normal(0, 0.3, 4))
        kps.append(k)
    fit = td.fit_teacher(meshes, boxes, kps)
    assert fit.ox == pytest.approx(truth.ox, abs=0.02) and fit.oy == pytest.approx(
        truth.oy, abs=0.02
    )
    assert fit.kw == pytest.approx(truth.kw, rel=0.01) and fit.kh == pytest.approx(
        truth.kh, rel=0.01
    )
    np.testing.assert_allclose(fit.keypoint_offsets, truth.keypoint_offsets, atol=1e-6)


def test_the_box_convention_is_fitted_per_recording() -> None:
    """Two faces boxed differently by the stock detector keep their own convention; a short input
    the global one."""
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, (468, 2)) * (30, 36)
    conventions = {
        "a.avi": td.TeacherFit(0.0, 0.1, 4.2, 4.0),
        "b.avi": td.TeacherFit(0.1, 0.3, 4.8, 4.3),
    }
    frames = []
    for name, fit in conventions.items():
        for i in range(6):
            mesh = base * rng.uniform(0.8, 1.2) + rng.uniform(100, 300, 2)
            box, kp = fit.label(mesh)
            frames.append(td.Labelled(f"{name}#{i}", np.zeros((4, 4), np.uint8), mesh, box, kp))
    frames.append(
        td.Labelled(
            "c.avi#0",
            np.zeros((4, 4), np.uint8),
            base + 200,
            *conventions["a.avi"].label(base + 200),
        )
    )
    overall = td.TeacherFit(0.05, 0.2, 4.5, 4.1)
    fits = td.fits_per_input(frames, overall)
    for name, fit in conventions.items():
        assert (fits[name].ox, fits[name].oy, fits[name].kw, fits[name].kh) == pytest.approx(
            (fit.ox, fit.oy, fit.kw, fit.kh), abs=1e-9
        )
    assert fits["c.avi"] is overall


def test_augment_carries_the_labels_with_the_frame() -> None:
    """A bright dot at a mesh point stays under the moved point through every random geometry."""
    rng = np.random.default_rng(1)
    gray = np.full((240, 320), 60, np.uint8)
    mesh = rng.uniform(120, 200, (468, 2))
    mesh[0] = (160.0, 120.0)
    gray[118:123, 158:163] = 255
    for _ in range(10):
        img, pts = td.augment(gray, mesh, rng)
        x, y = np.round(pts[0]).astype(int)
        if 3 <= x < 317 and 3 <= y < 237:
            patch = img[y - 1 : y + 2, x - 1 : x + 2].astype(float)
            assert patch.mean() > img.astype(float).mean() + 25


def test_export_keeps_the_stock_interface_and_outputs(tmp_path: Path) -> None:
    """The untrained Keras rebuild exported gives the stock file's outputs, also for a batch
    (per-grid order)."""
    pytest.importorskip("tensorflow")
    from eyeblink.detect.litert import LiteRTDetector

    path = tmp_path / "same.tflite"
    digest = td.export_tflite(td.build_trainable_blazeface(), path)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (tmp_path / "same.tflite.sha256").read_text().split() == [digest, "same.tflite"]
    x = np.random.default_rng(0).uniform(-1, 1, (3, 128, 128, 3)).astype(np.float32)
    with LiteRTDetector(model_path=path) as mine, LiteRTDetector() as stock:
        for b in (1, 3):
            r1, s1 = mine.detect(x[:b])
            r0, s0 = stock.detect(x[:b])
            np.testing.assert_allclose(r1, r0, atol=1e-3)
            np.testing.assert_allclose(s1, s0, atol=1e-3)


def _clip(path: Path, seed: int) -> Path:
    from eyeblink.lab.synth import SynthConfig, write_recording

    write_recording(path, SynthConfig(duration_s=0.08, fps=500.0, seed=seed))
    return path


def test_train_detector_end_to_end_on_rendered_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorflow")
    train, held = _clip(tmp_path / "train.avi", 0), _clip(tmp_path / "held.avi", 1)
    model, report = tmp_path / "tuned.tflite", tmp_path / "report.json"
    rc = main(
        [
            "train-detector",
            str(train),
            "--holdout",
            str(held),
            "-o",
            str(model),
            "--every",
            "8",
            "--max-frames",
            "5",
            "--augment",
            "1",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--max-pairs",
            "4",
            "--timing-frames",
            "2",
            "--json",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert digest in out and (tmp_path / "tuned.tflite.sha256").read_text().startswith(digest)
    r = json.loads(report.read_text())
    assert set(r["rows"]) == {"stock", "teacher", "tuned"} and r["holdout_pairs"] == 4
    assert (
        r["training_frames"] == 5
        and r["training_samples"] == 10
        and r["history"][0]["images_per_s"] > 0
    )
    for row in r["rows"].values():
        assert row["frames"] == 8 and 0.0 <= row["recall"] <= 1.0 and row["timing"]["frames"] == 2
    assert r["rows"]["stock"]["recall"] == 1.0 and r["rows"]["teacher"]["recall"] == 1.0
    assert set(r["rows_augmented"]) == {"stock", "tuned"} and r["augmented_pairs"] == 4
    assert (
        r["rows_augmented"]["stock"]["frames"] == 8
        and "recall_not_lower" in r["verdict"]["augmented"]
    )
    assert "| tuned |" in out and "| stock |" in out
    # the tuned file runs the product's pipeline
    outdir = tmp_path / "out"
    assert (
        main(
            [
                "process",
                str(held),
                "-o",
                str(outdir),
                "--face-model",
                str(model),
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    with open(outdir / "held.frames.csv", newline="") as f:
        rows = [row for row in csv.DictReader(line for line in f if not line.startswith("#"))]
    assert rows and sum(row["face"] == "1" for row in rows) >= 0.9 * len(rows)


def test_missing_tensorflow_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = _clip(tmp_path / "c.avi", 0)
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # `import tensorflow` raises ImportError
    rc = main(
        [
            "train-detector",
            str(clip),
            "--holdout",
            str(clip.with_name("missing.avi")),
            "-o",
            "x.tflite",
        ]
    )
    assert rc != 0 and "input not found" in capsys.readouterr().err
    held = _clip(tmp_path / "h.avi", 1)
    rc = main(
        ["train-detector", str(clip), "--holdout", str(held), "-o", str(tmp_path / "x.tflite")]
    )
    err = capsys.readouterr().err.strip()
    assert rc != 0 and err.count("\n") == 0
    assert err.startswith("eyeblink: error:") and 'pip install "eyeblink[tf]"' in err
