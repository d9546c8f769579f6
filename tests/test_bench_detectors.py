"""``eyeblink bench detectors`` and BlazeFace full range: real detectors on rendered and
photographed faces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from eyeblink.detect.anchors import blazeface_full_range_anchors
from eyeblink.detect.blazeface import FaceDetector
from eyeblink.detect.full_range import FullRangeFaceDetector
from eyeblink.lab import bench_detectors


def test_full_range_anchors_are_one_48x48_grid() -> None:
    anchors = blazeface_full_range_anchors()
    assert anchors.shape == (2304, 4)
    # row-major, x fastest
    assert np.allclose(anchors[:2, :2], [[0.5 / 48, 0.5 / 48], [1.5 / 48, 0.5 / 48]])
    assert np.allclose(anchors[-1, :2], [47.5 / 48, 47.5 / 48]) and np.all(anchors[:, 2:] == 1.0)


def test_full_range_box_agrees_with_short_range_on_a_photo_and_finds_a_small_face() -> None:
    """The decoding (anchors, scale 192) is right: the face in the astronaut photo lands where short
    range puts it, and the full-range model still finds it when it is too small for short range."""
    astronaut = pytest.importorskip("skimage.data").astronaut()
    with FullRangeFaceDetector() as full, FaceDetector() as short:
        for image in (astronaut, cv2.resize(astronaut, (640, 480))):
            f, s = full.detect(image), short.detect(image)
            assert len(f) == 1 and len(s) == 1
            assert f[0].iou(s[0]) > 0.6, (f[0].box, s[0].box)
            assert (
                np.linalg.norm(f[0].keypoints[:2] - s[0].keypoints[:2], axis=1).max()
                < 0.1 * s[0].width
            )
        small = np.pad(astronaut, ((400, 400), (600, 600), (0, 0)))  # the face ~110 px in 1712x1312
        found = full.detect(small)
        assert len(found) == 1 and found[0].score > 0.6
        x0, y0, x1, y1 = found[0].box
        assert 750 < x0 < x1 < 900 and 440 < y0 < y1 < 600
        assert short.detect(small) == []


def _rendered_inputs(tmp_path: Path) -> tuple[Path, Path, tuple[int, int, int, int]]:
    """A rendered demo video (one face in every frame) and a folder of rendered photos with an
    imglab XML."""
    from eyeblink.lab.synth import SynthConfig, face_box, render_frame, write_recording

    cfg = SynthConfig(duration_s=0.05, fps=500.0)
    video = tmp_path / "face.avi"
    write_recording(video, cfg)
    photos = tmp_path / "photos"
    photos.mkdir()
    box = face_box(cfg)
    entries = []
    for k in range(2):
        gray = render_frame(0.0, 0.0, 0.0, np.random.default_rng(k), cfg)
        cv2.imwrite(str(photos / f"face{k}.png"), gray)
        x0, y0, x1, y1 = box
        entries.append(
            f"<image file='face{k}.png'><box top='{y0}' left='{x0}' width='{x1 - x0}' "
            f"height='{y1 - y0}'/></image>"
        )
    (photos / "boxes.xml").write_text(f"<dataset><images>{''.join(entries)}</images></dataset>")
    return video, photos, box


def _available() -> set[str]:
    return {
        name for name in bench_detectors.DETECTORS if bench_detectors._install_hint(name) is None
    }


def test_bench_detectors_through_the_cli_on_rendered_faces(tmp_path: Path) -> None:
    video, photos, _box = _rendered_inputs(tmp_path)
    report = tmp_path / "detectors.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "bench",
            "detectors",
            "--photos",
            str(photos),
            "--videos",
            f"synth={video}",
            "--every",
            "5",
            "--max-pairs",
            "3",
            "--timing-frames",
            "3",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(report.read_text())
    assert "| detector | photos P | photos R | photos IoU | synth recall |" in proc.stdout
    results = data["detectors"]
    # every candidate has a row, installed or not
    assert list(results) == list(bench_detectors.DETECTORS)
    available = _available()
    assert {"blazeface-short", "blazeface-full"} <= available
    for name, r in results.items():
        row = next(line for line in proc.stdout.splitlines() if line.startswith(f"| {name} |"))
        # OpenCV 5: no downgrade of eyeblink's OpenCV suggested
        if name == "haar" and name not in available:
            assert r["status"].startswith("not available:") and "pip install" not in r["status"]
            assert r["status"] in row
            continue
        if name not in available:
            assert r["status"].startswith("not installed:") and "pip install" in r["status"]
            assert r["status"] in row
            continue
        assert r["status"] == "ok"
        v = r["videos"]["synth"]
        assert v["pairs"] == 3 and v["frames"] == 6
        # a large frontal face in every frame: every detector finds it nearly always, with no extra
        # boxes
        assert v["recall"] >= 5 / 6, (name, v)
        assert v["false_boxes_per_frame"] <= 1 / 6, (name, v)
        assert v["jitter_median"] is not None and 0.0 <= v["jitter_median"] < 0.2, (name, v)
        p = r["photos"]
        assert p["images"] == 2 and p["faces"] == 2 and p["detections"] >= 1
        t = r["timing"]
        assert t["frames"] == 3 and 0 < t["min_ms"] <= t["median_ms"] <= t["max_ms"]
        assert f"{t['median_ms']:.1f}" in row
    # the synthetic box is BlazeFace's own convention: short range matches it closely
    short = results["blazeface-short"]["photos"]
    assert short["recall"] == 1.0 and short["precision"] == 1.0 and short["mean_iou_matched"] > 0.8


def test_bench_detectors_user_errors_are_one_line(tmp_path: Path) -> None:
    for extra, message in (
        (["--detectors", "blazeface,haar"], "--detectors must be"),
        ([], "nothing to measure"),
        (["--videos", str(tmp_path / "missing")], "input not found"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "eyeblink", "bench", "detectors", *extra],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_matching_is_one_to_one_at_iou_half() -> None:
    truth = [(0.0, 0.0, 10.0, 10.0), (20.0, 0.0, 30.0, 10.0)]
    found = [(0.0, 0.0, 10.0, 10.0), (1.0, 1.0, 11.0, 11.0), (20.0, 0.0, 26.0, 10.0)]
    # the 2nd box is a duplicate
    assert sorted(bench_detectors.match(found, truth)) == pytest.approx([0.6, 1.0])
