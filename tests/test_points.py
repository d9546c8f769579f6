"""``--points``: ``<stem>.points.csv``, each frame's eye points and the face mesh's head pose,
through the real CLI.

A rendered recording (:mod:`eyeblink.lab.synth`: a real face photo whose head rolls by up to 12
degrees) is processed with the real models: the points lie on the face box, the pose of the frontal
face is near 0 in yaw, steady in pitch and follows the rendered roll; ``frames.csv`` is the same
with and without ``--points``; one and two workers write the same bytes; dlib models give points
without a pose; the accelerator stage, batch and live write them too.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eyeblink.outputs.export import POINTS_COLUMNS

ROLL_DEG = 12.0


@pytest.fixture(scope="module")
def rolling_face(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A 0.6 s 500 FPS recording of the rendered face rolling its head (and its SynthConfig)."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    cfg = SynthConfig(
        duration_s=0.6, head_roll_deg=ROLL_DEG, head_motion_hz=1.5, seed=3, mjpeg_qscale=4
    )
    path = tmp_path_factory.mktemp("points") / "rolling.avi"
    write_recording(path, cfg)
    return path, cfg


def _process(video: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(out),
            "--no-progress",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module")
def mesh_runs(
    rolling_face: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """The recording processed with ``--landmarks mesh`` on one worker, with and without
    ``--points``."""
    video, _ = rolling_face
    with_points = tmp_path_factory.mktemp("with-points")
    without = tmp_path_factory.mktemp("without-points")
    for out, extra in ((with_points, ["--points"]), (without, [])):
        r = _process(video, out, "--landmarks", "mesh", "--workers", "1", *extra)
        assert r.returncode == 0, r.stderr
    return with_points, without


def test_points_lie_on_the_face_and_the_pose_follows_the_rendered_head(
    mesh_runs: tuple[Path, Path], rolling_face: tuple[Path, object]
) -> None:
    from eyeblink.lab.synth import eye_landmarks_at, head_pose_at

    out, _ = mesh_runs
    _, cfg = rolling_face
    header, rows = _rows(out / "rolling.points.csv")
    assert header == list(POINTS_COLUMNS)
    assert len(header) == 2 + 24 + 4
    _, frames = _rows(out / "rolling.frames.csv")
    assert [(r["frame"], r["timestamp_s"]) for r in rows] == [
        (f["frame"], f["timestamp_s"]) for f in frames
    ]
    assert all(f["face"] == "1" for f in frames)

    pose_frames = []
    rolls, expected, yaws, pitches = [], [], [], []
    # the photo's own eye line is not level: the rendered roll is added to it
    right, left = eye_landmarks_at(0.0, "right").mean(0), eye_landmarks_at(0.0, "left").mean(0)
    photo_roll = math.degrees(math.atan2(-(left[1] - right[1]), left[0] - right[0]))
    for r, f in zip(rows, frames, strict=True):
        xy = np.array([float(r[c]) for c in POINTS_COLUMNS[2:26]]).reshape(12, 2)
        x0, y0, x1, y1 = (float(f[c]) for c in ("face_x0", "face_y0", "face_x1", "face_y1"))
        assert ((xy[:, 0] > x0) & (xy[:, 0] < x1) & (xy[:, 1] > y0) & (xy[:, 1] < y1)).all(), r[
            "frame"
        ]
        assert xy[:6, 0].mean() < xy[6:, 0].mean()  # the subject's right eye is on the image's left
        pf = int(r["pose_frame"])
        # the mesh is reused for 20 ms: about 10 frames at 500 FPS
        assert 0 <= int(r["frame"]) - pf <= 10
        pose_frames.append(pf)
        yaws.append(float(r["yaw"]))
        pitches.append(float(r["pitch"]))
        rolls.append(float(r["roll"]))
        expected.append(photo_roll + head_pose_at(pf / cfg.fps, cfg)[2])
    assert len(set(pose_frames)) > 5 and pose_frames[0] == 0
    rolls_a, expected_a = np.array(rolls), np.array(expected)
    assert np.ptp(expected_a) > 8  # the rendered head did roll
    assert np.abs(rolls_a - expected_a).max() < 2.5, np.abs(rolls_a - expected_a).max()
    assert np.abs(yaws).max() < 6  # a frontal face
    assert np.std(pitches) < 1.5  # that does not nod


def test_without_points_nothing_changes(mesh_runs: tuple[Path, Path]) -> None:
    with_points, without = mesh_runs
    assert not (without / "rolling.points.csv").exists()
    for name in ("rolling.frames.csv", "rolling.blinks.csv"):
        assert (with_points / name).read_bytes() == (without / name).read_bytes(), name
    outputs = json.loads((with_points / "rolling.summary.json").read_text())["outputs"]
    assert outputs["points"] == str(with_points / "rolling.points.csv")
    assert "points" not in json.loads((without / "rolling.summary.json").read_text())["outputs"]


def test_one_and_two_workers_write_the_same_points(
    rolling_face: tuple[Path, object], tmp_path: Path
) -> None:
    """The multiprocess pipeline sends the points and the pose through its records: the same bytes
    as one worker (lids model; every frame detected, so that frames.csv itself is the same in both
    layouts)."""
    video, _ = rolling_face
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        r = _process(
            video,
            out,
            "--points",
            "--landmarks",
            "lids",
            "--detect-every",
            "1",
            "--workers",
            workers,
        )
        assert r.returncode == 0, r.stderr
        outs.append(out)
    one, two = ((o / "rolling.points.csv").read_bytes() for o in outs)
    assert one == two
    assert (outs[0] / "rolling.frames.csv").read_bytes() == (
        outs[1] / "rolling.frames.csv"
    ).read_bytes()
    _, rows = _rows(outs[0] / "rolling.points.csv")
    assert all(r["yaw"] != "" and r["p36_x"] != "" for r in rows)


def test_default_settings_two_workers_give_the_points_of_their_rows(
    mesh_runs: tuple[Path, Path], rolling_face: tuple[Path, object], tmp_path: Path
) -> None:
    """At default settings (keyframes, the mesh reused): every frame whose frames.csv row two
    workers write as one worker does has the same points.csv row too, pose_frame included."""
    video, _ = rolling_face
    one, _ = mesh_runs
    r = _process(video, tmp_path, "--points", "--landmarks", "mesh", "--workers", "2")
    assert r.returncode == 0, r.stderr
    frames1 = (one / "rolling.frames.csv").read_text().splitlines()
    frames2 = (tmp_path / "rolling.frames.csv").read_text().splitlines()
    points1 = (one / "rolling.points.csv").read_text().splitlines()
    points2 = (tmp_path / "rolling.points.csv").read_text().splitlines()
    assert len(frames1) == len(frames2) == len(points1) == len(points2)
    same = [k for k in range(len(frames1)) if frames1[k] == frames2[k]]
    assert len(same) > len(frames1) // 3  # the header and at least the first chunk
    assert [points1[k] for k in same] == [points2[k] for k in same]


def test_dlib_points_have_no_pose(rolling_face: tuple[Path, object], tmp_path: Path) -> None:
    pytest.importorskip("dlib")
    video, _ = rolling_face
    r = _process(
        video, tmp_path, "--points", "--landmarks", "eye12", "--max-frames", "30", "--workers", "1"
    )
    assert r.returncode == 0, r.stderr
    _, rows = _rows(tmp_path / "rolling.points.csv")
    assert len(rows) == 30
    for row in rows:
        assert all(row[c] != "" for c in POINTS_COLUMNS[2:26])
        assert all(row[c] == "" for c in ("yaw", "pitch", "roll", "pose_frame"))


def test_the_accelerator_stage_writes_the_fused_points(
    rolling_face: tuple[Path, object], tmp_path: Path
) -> None:
    """The accelerator stage (here on LiteRT, the CPU) writes the fused run's points.csv byte for
    byte, at the default keyframe policy and with every frame detected; ``mesh-ear`` runs the face
    mesh on every frame, so each pose is its own frame's."""
    video, _ = rolling_face
    common = ("--points", "--landmarks", "mesh-ear", "--max-frames", "120", "--workers", "2")
    outs = []
    for name, extra in (("stage", ("--stage", "accelerator")), ("fused", ("--stage", "fused"))):
        r = _process(video, tmp_path / name, *common, *extra)
        assert r.returncode == 0, r.stderr
        outs.append(tmp_path / name)
    stage, fused = ((o / "rolling.points.csv").read_bytes() for o in outs)
    assert stage == fused
    _, rows = _rows(outs[0] / "rolling.points.csv")
    assert len(rows) == 120 and all(r["pose_frame"] == r["frame"] for r in rows)


def test_api_points(rolling_face: tuple[Path, object], tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import eyeblink

    video, _ = rolling_face
    session = eyeblink.process(
        video, tmp_path, points=True, landmarks="mesh-ear", max_frames=20, workers=1
    )
    assert isinstance(session, eyeblink.Session)
    header, rows = _rows(session.paths["points"])
    assert header == list(POINTS_COLUMNS) and len(rows) == 20
    # mesh-ear runs the face mesh on every frame: each pose is its own frame's
    assert [r["pose_frame"] for r in rows] == [r["frame"] for r in rows]
    with pytest.raises(eyeblink.SettingsError, match="points must be true or false"):
        eyeblink.process(video, tmp_path / "bad", points="yes")


def test_batch_merges_the_chunks_points(tmp_path: Path) -> None:
    """``eyeblink batch`` splits a video into chunks on Ray: their points.csv rows are merged with
    the frames and pose frames made the video's own, the rows of the single-process run."""
    ray = pytest.importorskip("ray")
    from dataclasses import replace

    from eyeblink.config import BlinkConfig, RunConfig
    from eyeblink.lab.synth import SynthConfig, write_recording
    from eyeblink.runtime.batch.driver import BatchConfig, run_batch
    from eyeblink.runtime.runner import process_paths

    video = tmp_path / "long.avi"
    write_recording(video, SynthConfig.demo(12.0, fps=50.0, seed=2, mjpeg_qscale=4))
    cfg = RunConfig(blinks=BlinkConfig(min_baseline_ms=500.0, baseline_window_ms=2000.0))
    cfg = replace(cfg.with_overrides("landmarks", model="mesh-ear"), points=True)
    if not ray.is_initialized():
        env = dict(os.environ)
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
        os.environ.clear()  # ray.init's RAY_* variables would reach later tests' subprocesses
        os.environ.update(env)
    out = tmp_path / "batch"
    rep = run_batch(
        [str(video)], out, cfg, BatchConfig(cpus_per_task=1, chunk_s=2.56, progress=False)
    )
    assert [r["chunks"] for r in rep.done] == [5], rep.failed
    ref = tmp_path / "ref"
    process_paths([video], ref, cfg, workers=1)
    header, got = _rows(out / "long.points.csv")
    _, want = _rows(ref / "long.points.csv")
    assert header == list(POINTS_COLUMNS)
    assert [r["frame"] for r in got] == [str(i) for i in range(600)]
    # mesh-ear: every frame's own mesh
    assert all(r["pose_frame"] == r["frame"] for r in got if r["yaw"])
    assert got == want
    for kind in ("frames.csv", "blinks.csv", "points.csv"):
        assert (out / f"long.{kind}").read_bytes() == (ref / f"long.{kind}").read_bytes(), kind
    summary = json.loads((out / "long.summary.json").read_text())
    assert summary["outputs"]["points"] == str(out / "long.points.csv")


def test_live_writes_points(tmp_path: Path) -> None:
    """``eyeblink live --points`` over a real TCP stream (the loopback sender): one points.csv row
    per frames.csv row, points and pose where a face was measured."""
    from test_live import live_run

    live_run(
        tmp_path,
        ["--fps", "100", "--stop-after", "150"],
        "--points",
        "--landmarks",
        "lids",
        "--on-overload",
        "block",
        "--workers",
        "1",
    )
    _, frames = _rows(tmp_path / "cam.frames.csv")
    header, rows = _rows(tmp_path / "cam.points.csv")
    assert header == list(POINTS_COLUMNS) and len(rows) == len(frames) == 150
    assert [r["frame"] for r in rows] == [f["frame"] for f in frames]
    for r, f in zip(rows, frames, strict=True):
        assert (r["p36_x"] != "") == (f["face"] == "1") == (r["yaw"] != "")
    assert sum(f["face"] == "1" for f in frames) > 140


def _rotation(axis: tuple[float, float, float], deg: float) -> np.ndarray:
    """Rodrigues: the rotation by ``deg`` about ``axis`` (camera axes: x right, y down, z away)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    t = math.radians(deg)
    return np.eye(3) + math.sin(t) * k + (1 - math.cos(t)) * (k @ k)


@pytest.mark.parametrize(
    ("axis", "angle", "expected"),
    [
        ((0, 1, 0), -25.0, (25.0, 0.0, 0.0)),  # the face turns towards the image's right: yaw > 0
        ((0, 1, 0), 10.0, (-10.0, 0.0, 0.0)),
        ((1, 0, 0), -30.0, (0.0, 30.0, 0.0)),  # the face turns up: pitch > 0
        ((0, 0, 1), -15.0, (0.0, 0.0, 15.0)),  # counter-clockwise as the image is shown: roll > 0
        ((0, 0, 1), 170.0, (0.0, 0.0, -170.0)),  # upside down, nearly
    ],
)
def test_head_pose_axes_and_signs(
    axis: tuple[float, float, float], angle: float, expected: tuple[float, float, float]
) -> None:
    """:func:`eyeblink.landmarks.mesh.head_pose` on a symmetric face rotated by a known angle,
    moved and scaled."""
    from eyeblink.landmarks.mesh import POSE_BOTTOM, POSE_PAIRS, POSE_TOP, head_pose

    face = np.full((468, 3), np.nan)
    for (a, b), (x, y, z) in zip(
        POSE_PAIRS, ((45, -10, 8), (15, -10, 4), (25, 35, 2), (70, 10, 20)), strict=True
    ):
        face[a], face[b] = (-x, y, z), (x, y, z)  # the subject's right point on the image's left
    face[POSE_TOP], face[POSE_BOTTOM] = (0, -60, 6), (0, 70, 6)
    assert head_pose(face) == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)
    moved = face @ _rotation(axis, angle).T * 1.7 + np.array([320.0, 240.0, 5.0])
    assert head_pose(moved) == pytest.approx(expected, abs=1e-6)
    assert all(math.isnan(v) for v in head_pose(np.zeros((468, 3))))  # a degenerate mesh: no pose
