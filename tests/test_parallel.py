"""The multiprocess pipeline (:mod:`eyeblink.runtime.procs.parallel`) against the single-process
reference.

Real synthetic recordings (``eyeblink.lab.synth``), the real detector and dlib model, real
processes. Recordings are short (0.3-4 s at 500 FPS) and rendered once per session.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHILD_SIGNALS, needs_fork, posix_stop_signals, stop_when
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eyeblink.config import DetectConfig, RunConfig
from eyeblink.errors import ConfigError
from eyeblink.frame.analyzer import SEGMENT_FRAMES
from eyeblink.runtime.procs.parallel import FAULT_ENV, ParallelConfig, physical_cores

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Short 640x480 500 FPS MJPG recordings with planted blinks, rendered once."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    root = tmp_path_factory.mktemp("recordings")
    out = {}
    for name, duration in (("short", 0.3), ("medium", 0.6), ("long", 4.0)):
        path = root / f"{name}.avi"
        write_recording(path, SynthConfig.demo(duration, seed=1))
        out[name] = path
    return out


@pytest.fixture(scope="session")
def reference_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the single-process reference runs go, once per session (the same files whatever the
    test order)."""
    return tmp_path_factory.mktemp("reference")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _config(detect_every: int) -> RunConfig:
    """The default settings (the ``cpu`` preset: keyframes, box hold, mesh reuse), ``detect_every``
    0 kept as the preset's; the rows of every layout must equal the reference's byte for byte at
    these settings."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    cfg = load_preset(resolve_preset("cpu"))
    return cfg.with_overrides("detect", detect_every=detect_every) if detect_every else cfg


def _reference(video: Path, detect_every: int, root: Path) -> Path:
    """The single-process reference's output folder for ``video`` (computed once into the
    session's ``root``)."""
    out = root / f"{video.stem}-ref{detect_every}"
    if not (out / f"{video.stem}.summary.json").is_file():
        from eyeblink.runtime.runner import process_paths

        # one process: no fork
        (_, failures) = process_paths([video], out, _config(detect_every), workers=1)
        assert not failures
    return out


def _reference_rows(video: Path, detect_every: int, root: Path) -> list[dict[str, str]]:
    return _rows(_reference(video, detect_every, root) / f"{video.stem}.frames.csv")


_PARALLEL_RUN = """
import json, sys
from pathlib import Path
from eyeblink.config import load_preset
from eyeblink.presets import resolve_preset
from eyeblink.runtime.procs.parallel import ParallelConfig, ParallelPipeline
from eyeblink.sources.files import open_source
video, outdir, detect_every, par = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
cfg = load_preset(resolve_preset("cpu"))
cfg = cfg.with_overrides("detect", detect_every=detect_every) if detect_every else cfg
outdir.mkdir(parents=True, exist_ok=True)
with open_source(Path(video)) as src:
    result = ParallelPipeline(cfg, ParallelConfig(**par)).process_source(src, outdir)
print(result.summary["status"], result.summary["parallel"]["chunk_frames"])
"""


def _parallel(
    video: Path, outdir: Path, *, detect_every: int = 0, **par: int
) -> list[dict[str, str]]:
    """The multiprocess pipeline on ``video`` in a fresh interpreter: its workers are forked from a
    process that holds nothing else (not from pytest, which may hold TensorFlow, JAX or a Ray driver
    by then)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _PARALLEL_RUN,
            str(video),
            str(outdir),
            str(detect_every),
            json.dumps(par),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    status, chunk = proc.stdout.split()
    assert status == "ok"
    assert int(chunk) % SEGMENT_FRAMES == 0  # chunks are dealt in whole tracking segments
    return _rows(outdir / f"{video.stem}.frames.csv")


# --------------------------------------------------------------------------- equality


def test_default_settings_give_the_reference_rows_byte_for_byte(
    recordings: dict[str, Path], tmp_path: Path, reference_dir: Path
) -> None:
    """At the default settings (keyframes every 10th frame, the box hold, the mesh reused between
    keyframes) two workers write the reference's files exactly: frames.csv and blinks.csv."""
    video = recordings["medium"]
    ref = _reference_rows(video, 0, reference_dir)
    # the keyframe policy is on: boxes are carried between frames
    assert _config(0).detect.detect_every > 1
    assert sum(r["detected"] == "1" for r in ref) < len(ref) / 2
    par = _parallel(video, tmp_path / "par", workers=2, chunk_frames=40, batch_frames=7)
    assert par == ref  # byte-for-byte the same rows, boxes and blink baseline included
    ref_blinks = (_reference(video, 0, reference_dir) / "medium.blinks.csv").read_text()
    assert (tmp_path / "par" / "medium.blinks.csv").read_text() == ref_blinks


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    workers=st.integers(1, 5),
    chunk=st.integers(1, 300),
    batch=st.integers(1, 20),
    detect_every=st.sampled_from([0, 1, 4, 25]),
)
def test_any_layout_gives_the_reference_frames(
    recordings: dict[str, Path],
    tmp_path: Path,
    reference_dir: Path,
    workers: int,
    chunk: int,
    batch: int,
    detect_every: int,
) -> None:
    video = recordings["medium"]
    ref = _reference_rows(video, detect_every, reference_dir)
    out = tmp_path / f"p{workers}-{chunk}-{batch}-{detect_every}"
    par = _parallel(
        video,
        out,
        detect_every=detect_every,
        workers=workers,
        chunk_frames=chunk,
        batch_frames=batch,
    )
    assert par == ref
    # the tracking restarts with every segment, in the reference as in every layout: a detection on
    # its first frame
    starts = [r for r in ref if int(r["frame"]) % SEGMENT_FRAMES == 0]
    assert len(starts) >= 2 and all(r["detected"] == "1" for r in starts)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workers", -1),
        ("chunk_frames", 0),
        ("batch_frames", 0),
        ("ring_slots", -2),
        ("stall_timeout_s", 0.0),
    ],
)
def test_parallel_config_rejects(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field.split("_")[0]):
        ParallelConfig(**{field: value})  # type: ignore[arg-type]


def test_physical_cores_is_positive() -> None:
    assert 1 <= physical_cores() <= (os.cpu_count() or 1)


# --------------------------------------------------------------------------- failures through the
# real CLI


def _cli(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eyeblink", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "frame", "what"),
    [
        # worker 1's first chunk, mid-batch
        ("raise", 150, "RuntimeError: injected failure at frame 150"),
        # worker 0 (its first chunk is frames 0-127), at a batch boundary: the first frame of its
        # second batch (a crash loses the batch it is in; the batches before it are written)
        ("exit", ParallelConfig().batch_frames, "died without a report (exited with status 70)"),
    ],
)
def test_a_failing_worker_stops_the_run_with_rows_on_disk(
    recordings: dict[str, Path], tmp_path: Path, fault: str, frame: int, what: str
) -> None:
    out = tmp_path / "out"
    proc = _cli(
        ["process", str(recordings["medium"]), "-o", str(out), "--workers", "2", "--no-progress"],
        env={FAULT_ENV: f"{fault}@{frame}"},
    )
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("eyeblink: error:")]
    assert len(errors) == 1, proc.stderr
    assert "landmark worker" in errors[0] and what in errors[0]
    assert "Traceback" not in proc.stderr
    rows = _rows(out / "medium.frames.csv")
    assert [int(r["frame"]) for r in rows] == list(range(frame))  # every row before the failure
    summary = json.loads((out / "medium.summary.json").read_text())
    assert summary["status"] == "failed" and what in summary["error"]
    if fault == "raise":
        assert "Traceback" in summary["error_traceback"]
    ring = summary["parallel"]["ring_name"]
    assert ring and not (Path("/dev/shm") / ring.lstrip("/")).exists()  # the ring was unlinked


@posix_stop_signals
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_keeps_the_rows(
    recordings: dict[str, Path], tmp_path: Path, sig: signal.Signals
) -> None:
    """Independent of timing: a worker stalls at frame 1000 (test hook), so the run is still going
    whatever the machine's load when the signal arrives, once rows are on disk."""
    out = tmp_path / "out"
    frames_csv = out / "long.frames.csv"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(recordings["long"]),
            "-o",
            str(out),
            "--workers",
            "2",
            "--no-progress",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, FAULT_ENV: "stall@1000"},
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]  # SIGINT default even under nohup
    stderr = stop_when(
        proc, lambda: frames_csv.is_file() and frames_csv.read_text().count("\n") > 20, sig
    )
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    rows = _rows(frames_csv)
    assert len(rows) > 0 and [int(r["frame"]) for r in rows] == list(range(len(rows)))
    assert len(rows) <= 1000
    summary = json.loads((out / "long.summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["frames"] == len(rows)
    assert summary["exit_status"] == 130
    assert summary["error"] == (
        "stopped by SIGTERM" if sig == signal.SIGTERM else "interrupted by Ctrl-C (SIGINT)"
    )
    assert sorted(Path(p).name for p in summary["outputs"].values()) == sorted(
        p.name for p in out.iterdir()
    )


@pytest.mark.parametrize(
    ("backend", "stage", "runs", "accelerated"),
    [
        ("litert", "auto", True, False),
        ("LiteRT", "auto", True, False),
        ("litert", "accelerator", True, True),
        ("tensorflow", "auto", True, True),
        ("jax", "auto", True, True),
        ("tensorflow", "fused", False, False),
        ("ipu", "auto", False, False),
    ],
)
def test_the_multiprocess_pipeline_fuses_the_cpu_backend_and_stages_the_accelerators(
    backend: str, stage: str, runs: bool, accelerated: bool
) -> None:
    """LiteRT is fused into forked workers; the Keras backends run in the accelerator stage (one
    process owns the device); the IPU backend, and a Keras backend kept out of the stage, run in one
    process."""
    from eyeblink.runtime.procs.parallel import supports

    cfg = RunConfig(detect=DetectConfig(backend=backend, stage=stage))
    assert supports(cfg) is runs
    assert cfg.detect.accelerator_stage is accelerated


@needs_fork
def test_frame_ring_reserved_before_its_geometry_and_attached_by_name_in_a_child() -> None:
    """Live mode's ring: reserved (faulted in) before the frame size is known, laid out later,
    attached by name in a child forked before it existed, and unlinked by its creator only."""
    import multiprocessing as mp
    from multiprocessing import resource_tracker, shared_memory

    import numpy as np

    from eyeblink.runtime.procs.shm import FrameRing, RingSpec

    resource_tracker.ensure_running()
    ctx = mp.get_context("fork")
    names, sums = ctx.Queue(), ctx.Queue()

    def child() -> None:
        name, spec = names.get(timeout=30)
        ring = FrameRing.attach(name, spec)
        ring.prefault()
        sums.put([int(ring[i].sum()) for i in range(len(ring))])
        ring.unlink()  # not the creator: a no-op
        ring.close()

    proc = ctx.Process(target=child)
    proc.start()
    block = FrameRing.reserve(4 * 48 * 64)
    with pytest.raises(ValueError, match="fewer than"):
        FrameRing(RingSpec(5, (48, 64)), block=block)
    ring = FrameRing(RingSpec(4, (48, 64)), block=block)
    for i in range(4):
        ring.put(i, np.full((48, 64), i + 1, np.uint8))
    names.put((ring.name, ring.spec))
    assert sums.get(timeout=30) == [(i + 1) * 48 * 64 for i in range(4)]
    proc.join(timeout=30)
    assert proc.exitcode == 0
    name = ring.name
    shared_memory.SharedMemory(name=name).close()  # still there after the child's unlink
    ring.unlink()
    ring.close()
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(name=name)


def test_a_batch_encoded_at_once_is_the_records_encoded_one_by_one() -> None:
    """encode_results (a worker's batch, a column at a time) writes the bytes encode_result writes
    row by row, and decode_rows gives every value back, one FaceDetection shared by the rows of one
    face."""
    import numpy as np

    from eyeblink.detect.blazeface import FaceDetection
    from eyeblink.frame.analyzer import FrameResult
    from eyeblink.runtime.procs.results import (
        decode_rows,
        encode_result,
        encode_results,
        record_dtype,
    )

    rng = np.random.default_rng(3)

    def face() -> FaceDetection:
        x0, y0 = rng.random(2) * 300
        return FaceDetection(
            (x0, y0, x0 + 90.5, y0 + 101.25),
            float(rng.random()),
            rng.random((6, 2)).astype(np.float32) * 500,
        )

    for _ in range(50):
        n = int(rng.integers(1, 17))
        tracked = face()
        results = []
        for i in range(n):
            if rng.random() < 0.3:
                tracked = face()
            patches = (
                rng.integers(0, 256, (2, 12, 24), dtype=np.uint8) if rng.random() < 0.8 else None
            )
            left = float(rng.random()) if rng.random() < 0.9 else math.nan
            results.append(
                FrameResult(
                    100 + i,
                    i * 0.002,
                    None if rng.random() < 0.2 else tracked,
                    bool(rng.random() < 0.5),
                    left,
                    float(rng.random()),
                    patches,
                )
            )
        one, batch = (
            np.zeros(n + 2, record_dtype(RunConfig())),
            np.zeros(n + 2, record_dtype(RunConfig())),
        )
        at = sorted(rng.choice(n + 2, n, replace=False).tolist())
        for j, r in zip(at, results, strict=True):
            encode_result(one[j], r)
        encode_results(batch, at, results)
        assert one.tobytes() == batch.tobytes()
        back = [d for d in decode_rows(batch[at], shift=5)]
        for r, d in zip(results, back, strict=True):
            assert (d.index, d.timestamp_s, d.detected, d.ear_right) == (
                r.index + 5,
                r.timestamp_s,
                r.detected,
                r.ear_right,
            )
            assert d.ear_left == r.ear_left or (math.isnan(d.ear_left) and math.isnan(r.ear_left))
            assert (d.face is None) == (r.face is None)
            if r.face is not None:
                assert d.face.box == r.face.box and d.face.score == r.face.score
                assert np.array_equal(d.face.keypoints, r.face.keypoints)
            assert (d.eye_patches is None and r.eye_patches is None) or np.array_equal(
                d.eye_patches, r.eye_patches
            )
        for a, b, d0, d1 in zip(results, results[1:], back, back[1:], strict=False):
            if a.face is not None and a.face is b.face:
                assert d0.face is d1.face  # a box reused between detections: one object in the sink
