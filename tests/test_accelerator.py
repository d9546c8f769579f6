"""The accelerator stage (``--stage accelerator``): one process runs detection and the face-mesh
eyelids on batches of frames, the CPU workers post-process
(:mod:`eyeblink.runtime.procs.accelerator`, :mod:`eyeblink.landmarks.batched`).

Real recordings (rendered by :mod:`eyeblink.lab.synth`), the real CLI in a subprocess, the real
networks: LiteRT (the CPU reference, byte-equal rows) and JAX's CPU build (the Keras rebuild a GPU
runs, to its tolerance). A GPU itself is not here; what runs on one is the same code with JAX's CUDA
build.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_cli import assert_user_error, read_rows, run_cli
from test_live import live_run
from test_live import summary as live_summary

from eyeblink.runtime.procs.accelerator import FIT_DTYPE, BatchGatherer, Tracker


def _preset(tmp: Path, name: str, **detect: object) -> Path:
    lines = ["[detect]"] + [f"{k} = {json.dumps(v)}" for k, v in detect.items()]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cpu_preset(tmp: Path, name: str, **detect: object) -> Path:
    """The default preset (``pipelines/cpu.toml``: the keyframe policy) with ``detect`` settings
    changed."""
    import tomllib

    from eyeblink.presets import resolve_preset

    data = tomllib.loads(resolve_preset("cpu").read_text())
    data["detect"].update(detect)
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for table, values in data.items():
        if isinstance(values, dict):
            lines += [f"[{table}]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _summary(out: Path, stem: str = "subject") -> dict:
    return json.loads((out / f"{stem}.summary.json").read_text())


@pytest.fixture(scope="module")
def reference(
    face_recording: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The single-process reference with a detection on every frame (what the stage computes)."""
    out = tmp_path_factory.mktemp("reference")
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        out,
        "--workers",
        "1",
        "--detect-every",
        "1",
        "--no-progress",
        "--report",
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def keyframe_reference(
    face_recording: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The single-process reference at the default settings (the keyframe policy), with crops and
    points."""
    out = tmp_path_factory.mktemp("keyframe-reference")
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        out,
        "--workers",
        "1",
        "--no-progress",
        "--report",
        "--points",
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _same_outputs(got: Path, want: Path, names: tuple[str, ...]) -> None:
    for name in names:
        assert (got / name).read_bytes() == (want / name).read_bytes(), name
    with np.load(got / "subject.crops.npz") as g, np.load(want / "subject.crops.npz") as w:
        assert sorted(g.files) == sorted(w.files)
        for key in w.files:
            np.testing.assert_array_equal(g[key], w[key])


# ------------------------------------------------------------------------------------------
# batching rule


def _msg(first: int, n: int) -> tuple:
    return (0, first, np.arange(first, first + n, dtype=np.int32), np.zeros(n), np.zeros(n))


def test_batches_fill_up_to_the_batch_size_and_a_partial_one_waits_at_most_flush_ms() -> None:
    g = BatchGatherer(8, flush_s=0.005)
    assert g.add(_msg(0, 3), now=0.000) is None
    assert g.add(_msg(3, 3), now=0.001) is None
    assert g.wait_s(0.003, poll_s=0.05) == pytest.approx(0.002)  # the oldest frame is due at 5 ms
    assert not g.due(0.0049) and g.due(0.005)
    ready = g.add(_msg(6, 3), now=0.002)  # 9 > 8 frames: the two waiting messages go first
    assert ready is not None and [m[1] for m in ready] == [0, 3]
    # the clock restarts at the new oldest
    assert g.frames == 3 and not g.due(0.006) and g.due(0.007)
    assert g.add(_msg(9, 5), now=0.003) is None and g.full()
    assert [m[1] for m in g.take()] == [6, 9] and g.frames == 0 and not g.due(1.0)
    assert g.wait_s(1.0, poll_s=0.05) == 0.05  # nothing waiting: just poll
    with pytest.raises(ValueError):
        BatchGatherer(0, 0.005)


def test_the_subject_is_tracked_only_across_consecutive_frames() -> None:
    t = Tracker()
    prev, chained = t.chain([0, 1, 2, 4])
    assert prev is None and chained == [False, True, True, False]
    t.advance(4, "face")  # type: ignore[arg-type]
    assert t.chain([5, 6]) == ("face", [True, True])
    assert t.chain([7]) == (None, [False])
    assert FIT_DTYPE.itemsize < 400  # no pixels travel back from the device


# ------------------------------------------------------------------------------------------ end to
# end


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "processes"),
    [(["--workers", "2", "--loaders", "1"], 1), (["--workers", "2", "--loaders", "2"], 2)],
    ids=["1-loader", "2-loaders-2-stage-processes"],
)
def test_accelerator_stage_rows_equal_the_every_frame_reference(
    face_recording: tuple[Path, object],
    reference: Path,
    tmp_path: Path,
    layout: list[str],
    processes: int,
) -> None:
    """With the LiteRT networks and a detection on every frame (the GPU preset's policy) the stage
    computes exactly what the reference computes frame by frame, however many loaders feed it and
    stage processes share the device."""
    preset = _cpu_preset(
        tmp_path, "stage", stage="accelerator", stage_processes=processes, detect_every=1
    )
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path,
        "--pipeline",
        preset,
        *layout,
        "--no-progress",
        "--report",
    )
    assert proc.returncode == 0, proc.stderr
    _same_outputs(tmp_path, reference, ("subject.frames.csv", "subject.blinks.csv"))
    assert len(read_rows(tmp_path / "subject.blinks.csv")) == 1
    s = _summary(tmp_path)
    par = s["parallel"]
    assert s["status"] == "ok" and par["detector"] == "accelerator stage" and par["workers"] == 2
    acc = par["accelerator"]
    assert acc["backend"] == "litert" and acc["batches"] >= 1 and acc["warnings"] == []
    assert acc["processes"] == processes and acc["host_ms_per_frame"] > 0
    assert acc["ms_per_frame"]["detect"] > 0 and acc["ms_per_frame"]["landmarks"] > 0
    assert par["loaders"] == int(layout[layout.index("--loaders") + 1])
    assert s["detector_runs"] == s["frames"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "processes"),
    [
        (["--workers", "2", "--loaders", "1"], 1),
        (["--workers", "2", "--loaders", "2"], 1),
        (["--workers", "3", "--loaders", "2"], 2),
    ],
    ids=["1-loader", "2-loaders", "2-loaders-2-stage-processes"],
)
def test_accelerator_stage_on_the_cpu_gives_the_default_rows(
    face_recording: tuple[Path, object],
    keyframe_reference: Path,
    tmp_path: Path,
    layout: list[str],
    processes: int,
) -> None:
    """At the default settings (a detection every 10th frame, the face mesh reused, drift checks)
    the stage on LiteRT writes the rows, blinks, report crops and points of one process, byte for
    byte: the detections, the redetections and the head pose's frame included, whatever the loaders
    and stage processes."""
    preset = _cpu_preset(tmp_path, "keyframes", stage="accelerator", stage_processes=processes)
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path,
        "--pipeline",
        preset,
        *layout,
        "--no-progress",
        "--report",
        "--points",
    )
    assert proc.returncode == 0, proc.stderr
    _same_outputs(
        tmp_path,
        keyframe_reference,
        ("subject.frames.csv", "subject.blinks.csv", "subject.points.csv"),
    )
    s, want = _summary(tmp_path), _summary(keyframe_reference)
    assert (
        s["parallel"]["detector"] == "accelerator stage"
        and s["parallel"]["accelerator"]["processes"] == processes
    )
    assert s["parallel"]["loaders"] == int(layout[layout.index("--loaders") + 1])
    assert s["settings"]["detect"]["detect_every"] == 10 and s["warnings"] == []
    # the keyframe policy, not every frame
    assert s["detector_runs"] == want["detector_runs"] < s["frames"] / 5
    assert s["redetections_on_drift"] == want["redetections_on_drift"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_accelerator_stage_on_keras_backends_matches_litert(
    face_recording: tuple[Path, object], reference: Path, tmp_path: Path, backend: str
) -> None:
    """The Keras rebuild of the three networks on JAX or TensorFlow (their CPU builds here, the GPU
    path elsewhere), batched, gives the LiteRT reference's boxes and openness to the backends'
    tolerance."""
    pytest.importorskip(backend)
    pytest.importorskip("keras")
    # TensorFlow: graph mode without XLA (XLA's CPU code is ~10x slower here; the GPU preset
    # compiles)
    preset = _preset(
        tmp_path,
        "keras8",
        backend=backend,
        batch_size=8,
        detect_every=1,
        jit_compile=backend == "jax",
    )
    n = 40 if backend == "jax" else 24
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path / "out",
        "--pipeline",
        preset,
        "--workers",
        "2",
        "--max-frames",
        str(n),
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    got = read_rows(tmp_path / "out" / "subject.frames.csv")
    want = read_rows(reference / "subject.frames.csv")[:n]
    assert len(got) == n
    for g, w in zip(got, want, strict=True):
        assert (
            g["frame"] == w["frame"]
            and g["timestamp_s"] == w["timestamp_s"]
            and g["face"] == w["face"] == "1"
        )
        for col in ("face_x0", "face_y0", "face_x1", "face_y1"):
            assert float(g[col]) == pytest.approx(float(w[col]), abs=0.01)
        for col in ("ear_left", "ear_right"):
            assert float(g[col]) == pytest.approx(float(w[col]), abs=1e-3)
    s = _summary(tmp_path / "out")
    acc = s["parallel"]["accelerator"]
    assert s["parallel"]["detector"] == "accelerator stage"
    assert (
        acc["backend"] == backend
        and acc["batch_size"] == 8
        and acc["mean_batch"] <= acc["largest_batch"]
    )
    if acc["device"].lower().startswith("cpu"):  # no GPU: said once, in the summary and on stderr
        assert any("found no GPU" in w for w in s["warnings"])


@pytest.mark.slow
def test_a_keras_backend_says_it_detects_every_frame_and_the_summary_records_it(
    face_recording: tuple[Path, object], reference: Path, tmp_path: Path
) -> None:
    """The Keras backends (a GPU's) run the stage in batches with a detection on every frame: with
    the default keyframe setting the user hears it once, and ``summary.json`` records the settings
    the rows were made with."""
    pytest.importorskip("jax")
    pytest.importorskip("keras")
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path,
        "--backend",
        "jax",
        "--workers",
        "2",
        "--max-frames",
        "12",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    assert sum("detects the face on every frame" in ln for ln in proc.stderr.splitlines()) == 1
    s = _summary(tmp_path)
    assert (
        s["parallel"]["detector"] == "accelerator stage"
        and s["settings"]["detect"]["detect_every"] == 1
    )
    assert any("--detect-every 10 does not apply" in w for w in s["warnings"])
    assert s["detector_runs"] == s["frames"] == 12
    for g, w in zip(
        read_rows(tmp_path / "subject.frames.csv"),
        read_rows(reference / "subject.frames.csv"),
        strict=False,
    ):
        assert float(g["ear_left"]) == pytest.approx(float(w["ear_left"]), abs=1e-3)


@pytest.mark.slow
def test_a_face_that_leaves_and_returns_gives_the_reference_rows(
    face_frames: list[np.ndarray], tmp_path: Path
) -> None:
    """Frames without a face in the middle of a batch: empty openness, no patches, and the subject
    found again afterwards, exactly as the reference does it (tracking restarts from the largest
    face)."""
    from conftest import write_video

    frames = [f.copy() for f in face_frames[:240]]
    background = int(np.median(frames[0][:20, :20]))
    for f in frames[90:130]:
        f[:] = background
    video = write_video(tmp_path / "away.avi", frames, codec="mjpeg", pix_fmt="yuvj420p")
    ref, acc = tmp_path / "ref", tmp_path / "acc"
    proc = run_cli("process", video, "-o", ref, "--workers", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(
        "process", video, "-o", acc, "--workers", "2", "--stage", "accelerator", "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr
    assert (acc / "away.frames.csv").read_bytes() == (ref / "away.frames.csv").read_bytes()
    face = "".join(r["face"] for r in read_rows(acc / "away.frames.csv"))
    # at 500 FPS a keyframe's work is used 20 ms (10 frames) after its frame
    # (eyeblink.frame.keyframes): the face is let go within that lag plus one keyframe interval (10
    # frames) after it left, and found again within that
    assert face[110:130] == "0" * 20 and set(face[:90] + face[150:]) == {"1"}, face


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "needles"),
    [
        ("raise@400", ["accelerator stage", "failed at frame", "injected failure"]),
        ("exit@400", ["accelerator stage", "died without a report", "status 70"]),
    ],
    ids=["raises", "dies"],
)
def test_accelerator_stage_failure_keeps_every_row_before_it(
    face_recording: tuple[Path, object], tmp_path: Path, fault: str, needles: list[str]
) -> None:
    """The stage raising (its traceback reaches the sink) or dying outright (the sink sees its exit
    code): one line, exit 3, and every row before the failing batch on disk. One loader: the frames
    reach the stage in order (two loaders decode two ranges at once: see the next test)."""
    _stage_failure(face_recording[0], tmp_path, fault, needles, loaders=1)


def test_a_stage_failure_says_which_rows_are_on_disk_when_two_loaders_feed_it(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """Two loaders decode two ranges at once: the stage may meet the failing batch (frame 400, in
    the second range) before it analysed every frame of the first, and those are never analysed.
    The rows on disk are the frames from 0 on, and the line says where they stop."""
    rows, error = _stage_failure(
        face_recording[0],
        tmp_path,
        "raise@400",
        ["accelerator stage", "failed at frame", "injected failure"],
        loaders=2,
        some_rows=False,
    )
    failed_at = int(error.split("failed at frame ")[1].split(":")[0])
    if len(rows) == failed_at:
        assert "; rows before it are in subject.frames.csv" in error
    else:
        assert len(rows) < failed_at
        assert f"; only the rows before frame {len(rows)} (those analysed before it)" in error


def _stage_failure(
    video: Path,
    tmp_path: Path,
    fault: str,
    needles: list[str],
    *,
    loaders: int,
    some_rows: bool = True,
) -> tuple[list[dict[str, str]], str]:
    """``process`` with the stage's fault ``fault``: exit 3, one line, the rows from frame 0 on in
    order (at least one with ``some_rows``), the summary failed; (the rows, the summary's error)."""
    env = dict(os.environ, EYEBLINK_TEST_WORKER_FAULT=fault)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(tmp_path),
            "--stage",
            "accelerator",
            "--workers",
            "2",
            "--loaders",
            str(loaders),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 3, proc.stderr
    assert_user_error(proc, *needles)
    rows = read_rows(tmp_path / "subject.frames.csv")
    assert (len(rows) > 0 or not some_rows) and len(rows) <= 400
    assert [int(r["frame"]) for r in rows] == list(range(len(rows)))
    s = _summary(tmp_path)
    assert s["status"] == "failed" and needles[-1] in s["error"] and s["frames"] == len(rows)
    return rows, s["error"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["--stage", "accelerator", "--landmarks", "face68"],
            ["accelerator stage", "--landmarks mesh", "--stage fused"],
        ),
        (
            ["--stage", "accelerator", "--backend", "ipu"],
            ["accelerator stage", "'ipu'", "--stage fused"],
        ),
        (
            ["--backend", "jax", "--stage", "fused", "--workers", "2"],
            ["--workers 2", "--stage accelerator"],
        ),
    ],
)
def test_what_the_stage_cannot_run_is_one_line(
    face_recording: tuple[Path, object], tmp_path: Path, args: list[str], needles: list[str]
) -> None:
    proc = run_cli("process", face_recording[0], "-o", tmp_path, "--no-progress", *args)
    assert proc.returncode == 2
    assert_user_error(proc, *needles)
    assert not (tmp_path / "subject.frames.csv").exists()


# (--landmark-model names the default eye model's file: the lid network of lids)
@pytest.mark.parametrize(
    ("flag", "needle"), [("--face-model", "model file"), ("--landmark-model", "lid network")]
)
def test_a_corrupt_model_for_the_stage_is_one_line_before_any_frame(
    face_recording: tuple[Path, object], tmp_path: Path, flag: str, needle: str
) -> None:
    """The stage builds its networks in its own process; the parent checks the model files first, so
    a bad file is the usual user error (exit 2), not a failed stage (exit 3)."""
    from eyeblink.weights import blazeface_path

    bad = tmp_path / "bad.tflite"
    bad.write_bytes(Path(blazeface_path()).read_bytes()[:5000])  # a truncated copy
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path / "out",
        "--stage",
        "accelerator",
        "--workers",
        "2",
        flag,
        bad,
        "--no-progress",
    )
    assert proc.returncode == 2, proc.stderr
    assert_user_error(proc, needle, "bad.tflite")
    assert not (tmp_path / "out" / "subject.frames.csv").exists()


def _live_stage(tmp_path: Path, preset: Path, landmarks: str) -> tuple[dict, list[dict[str, str]]]:
    """300 frames at 100 FPS from the loopback sender through the stage (``preset``), two workers:
    the summary and the rows, after checking that every frame has its row with the face."""
    out = tmp_path / "out"
    live_run(
        out,
        ["--fps", "100", "--stop-after", "300"],
        "--pipeline",
        str(preset),
        "--workers",
        "2",
        "--landmarks",
        landmarks,
        "--on-overload",
        "block",
    )
    with (out / "cam.frames.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 300 and all(r["face"] == "1" for r in rows)
    return live_summary(out), rows


@pytest.mark.slow
def test_live_accelerator_stage_flushes_partial_batches_after_the_deadline(tmp_path: Path) -> None:
    """A live stream at 100 FPS through a stage whose batch is 64 frames: every frame gets its row,
    in batches that the 5 ms deadline flushed long before they were full (a full batch would hold a
    frame 640 ms): more batches than full ones could make, whatever the machine's load."""
    preset = _preset(
        tmp_path, "live64", backend="litert", stage="accelerator", batch_size=64, flush_ms=5.0
    )
    s, _ = _live_stage(tmp_path, preset, "mesh")
    acc = s["parallel"]["accelerator"]
    assert s["parallel"]["detector"] == "accelerator stage" and acc["batch_size"] == 64
    # a stage without the deadline runs ceil(300 / 64) = 5 batches (four full, one at the end of the
    # stream); every batch beyond that was flushed partial. On an idle machine most batches hold 1-3
    # frames; on a loaded one the frames queue up while a batch runs, so the bound is the one that
    # holds on either.
    assert acc["batches"] >= 6 and acc["mean_batch"] < 64


@pytest.mark.slow
def test_live_keyframe_stage_tracks_the_face_across_its_chunks(tmp_path: Path) -> None:
    """Live through the stage on LiteRT at the default keyframe policy: every frame gets its row,
    the face is tracked across the stream's small chunks (keyframes, not a detection on every
    frame)."""
    s, rows = _live_stage(
        tmp_path, _cpu_preset(tmp_path, "live-keyframes", stage="accelerator"), "lids"
    )
    assert (
        s["parallel"]["detector"] == "accelerator stage"
        and s["settings"]["detect"]["detect_every"] == 10
    )
    detected = sum(r["detected"] == "1" for r in rows)
    # the keyframe policy: every 10th frame (drift checks may add a few; at 500 FPS a keyframe waits
    # while the last piece of keyframe work is in flight, eyeblink.frame.keyframes, which may take a
    # few away)
    assert 300 / 12 <= detected < 300 / 4, detected


@pytest.mark.slow
def test_only_the_stage_process_starts_jax(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """The parent forks the workers of every input: it must never import JAX (or Keras) itself, or a
    forked child inherits a started runtime (on a GPU: a CUDA context, which hangs). Two inputs, one
    warning."""
    pytest.importorskip("jax")
    pytest.importorskip("keras")
    preset = _preset(tmp_path, "jax4", backend="jax", batch_size=4, detect_every=1)
    second = tmp_path / "second.avi"
    second.symlink_to(face_recording[0])
    code = f"""
import sys
from dataclasses import replace
from pathlib import Path
from eyeblink.config import load_preset
from eyeblink.runtime.runner import process_paths
cfg = replace(load_preset(Path({str(preset)!r})), max_frames=8)
videos = [Path({str(face_recording[0])!r}), Path({str(second)!r})]
results, failures = process_paths(videos, Path({str(tmp_path / "out")!r}), cfg, workers=2)
assert not failures and [r.frames for r in results] == [8, 8], (results, failures)
print("parent imported:", sorted(m for m in ("jax", "jaxlib", "keras", "tensorflow") if m in sys.modules))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "parent imported: []"
    # once, not once per input
    assert sum("found no GPU" in ln for ln in proc.stderr.splitlines()) == 1


# ------------------------------------------------------------------------ compiling is not stalling

_STAGE_RUN = """
import json, sys
from dataclasses import replace
from pathlib import Path
from eyeblink.config import DetectConfig, RunConfig
from eyeblink.errors import EyeblinkError
from eyeblink.runtime.procs.parallel import ParallelConfig, ParallelPipeline
from eyeblink.sources.files import open_source
video, outdir, detect, par = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
cfg = RunConfig(detect=DetectConfig(stage="accelerator", detect_every=1, **detect), max_frames=120)
outdir.mkdir(parents=True, exist_ok=True)
try:
    with open_source(Path(video)) as src:
        result = ParallelPipeline(cfg, ParallelConfig(workers=2, **par)).process_source(src, outdir)
except EyeblinkError as exc:
    print("error:", exc)
    sys.exit(3)
print(result.summary["status"])
"""


def _stage_run(
    video: Path, out: Path, par: dict[str, float], fault: str | None = None, **detect: object
) -> subprocess.CompletedProcess[str]:
    """The accelerator stage through the Python API (``[parallel]`` timeouts are no preset keys) in
    a fresh interpreter (its children fork from a process that holds no JAX), with the test hook
    ``fault``."""
    env = dict(os.environ)
    env.pop("EYEBLINK_TEST_WORKER_FAULT", None)
    if fault:
        env["EYEBLINK_TEST_WORKER_FAULT"] = fault
    return subprocess.run(
        [
            sys.executable,
            "-c",
            _STAGE_RUN,
            str(video),
            str(out),
            json.dumps(detect),
            json.dumps(par),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_a_warm_up_longer_than_the_stall_timeout_is_no_stall(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """The stage's warm-up takes 4 stall timeouts (test hook ``slowstart``: a slow compile); its
    heartbeat keeps the run alive and every row comes."""
    proc = _stage_run(
        face_recording[0],
        tmp_path,
        {"stall_timeout_s": 2.0},
        "slowstart@8",
        backend="litert",
        batch_size=8,
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["ok"], proc.stdout + proc.stderr
    assert [int(r["frame"]) for r in read_rows(tmp_path / "subject.frames.csv")] == list(range(120))
    assert _summary(tmp_path)["parallel"]["accelerator"]["warm_up_s"] >= 8


def test_a_compile_past_its_bound_is_still_reported(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """A warm-up longer than ``parallel.compile_timeout_s`` is a hung compile: its heartbeat stops,
    and the stall check reports it one stall timeout later (not before the bound: the heartbeat ran
    until then)."""
    import time

    t0 = time.monotonic()
    proc = _stage_run(
        face_recording[0],
        tmp_path,
        {"stall_timeout_s": 2.0, "compile_timeout_s": 6.0},
        "slowstart@60",
        backend="litert",
        batch_size=8,
    )
    # the heartbeat kept the run alive past three stall timeouts, up to its bound (its last tick
    # comes up to one tick interval, 0.5 s, before the bound; the stall check fires one stall
    # timeout after that tick)
    assert time.monotonic() - t0 >= 6.0
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no progress for 2 s (stuck at frame 0)" in proc.stdout, proc.stdout + proc.stderr


def test_a_stall_outside_a_compile_is_still_reported(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """The stage stuck on a batch (test hook ``stall``; its programs compiled long before): no
    heartbeat, so the stall check stops the run, with the rows before it on disk."""
    proc = _stage_run(
        face_recording[0],
        tmp_path,
        {"stall_timeout_s": 2.0},
        "stall@64",
        backend="litert",
        batch_size=8,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no progress for 2 s (stuck at frame 64)" in proc.stdout, proc.stdout + proc.stderr
    # which process went quiet
    assert "accelerator 0 pid " in proc.stdout and " running" in proc.stdout
    assert [int(r["frame"]) for r in read_rows(tmp_path / "subject.frames.csv")] == list(range(64))


@pytest.mark.slow
def test_a_real_xla_compile_longer_than_the_stall_timeout_is_no_stall(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """JAX's CPU build builds and compiles the three networks (before the first frame, and for each
    new batch size on first use: tens of seconds on a loaded host) while the stall timeout is 5 s; a
    batch of 4 frames runs well within it. The heartbeat keeps the run alive (without it this run
    failed with 'no progress for 5 s (stuck at frame 0)' on the 2-core development VM)."""
    pytest.importorskip("jax")
    pytest.importorskip("keras")
    proc = _stage_run(
        face_recording[0],
        tmp_path,
        {"stall_timeout_s": 5.0, "batch_frames": 4},
        None,
        backend="jax",
        batch_size=4,
    )
    assert proc.returncode == 0 and proc.stdout.split()[-1:] == ["ok"], proc.stdout + proc.stderr
    assert [int(r["frame"]) for r in read_rows(tmp_path / "subject.frames.csv")] == list(range(120))
