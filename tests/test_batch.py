"""``eyeblink batch`` (:mod:`eyeblink.runtime.batch.driver`): planning, inputs, manifest, and real
runs on a local Ray cluster.

The Ray tests start one real local cluster (2 CPUs, no dashboard) for the session and process real
synthetic recordings (``eyeblink.lab.synth``: a face with planted blinks, MJPG) with the real
detector and landmark model. Recordings are 100 FPS to keep the suite short: the blink detector
works in milliseconds, so its warm-up and baseline window are the same seconds as at 500 FPS. Tests
that need Ray skip only when ``ray`` is not installed (extra ``eyeblink[ray]``).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import posix_stop_signals

from eyeblink.config import DetectConfig, RunConfig
from eyeblink.errors import ConfigError, InputNotFoundError
from eyeblink.runtime.batch.driver import (
    FAULT_ENV,
    MANIFEST_NAME,
    BatchConfig,
    Manifest,
    expand_inputs,
    run_batch,
    settings_hash,
)
from eyeblink.sources.chunking import ALIGN_FRAMES, ChunkSource, plan_chunks


def _default_config() -> RunConfig:
    """The settings ``eyeblink batch`` runs with when no option is given (the ``cpu`` preset:
    keyframes every 10th frame, the box hold, the mesh reused between keyframes)."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    return load_preset(resolve_preset("cpu"))


CFG = _default_config()


def test_chunk_borders_are_whole_tracking_segments() -> None:
    """Chunk borders are multiples of the tracking segment, so a chunk's local frame 0 is
    a segment start in the unsplit run too."""
    from eyeblink.frame.analyzer import SEGMENT_FRAMES

    assert ALIGN_FRAMES % SEGMENT_FRAMES == 0
    assert CFG.detect.detect_every > 1


# --------------------------------------------------------------------------- planning (no Ray)


@pytest.mark.parametrize(
    ("frames", "fps", "chunk_s", "expected"),
    [
        (None, 500.0, 300.0, [(0, None)]),  # unknown length: one task
        (1000, None, 300.0, [(0, None)]),  # unknown rate: one task
        (10**6, 500.0, 0.0, [(0, None)]),  # splitting off
        (2400, 100.0, 4.0, [(0, 512), (512, 1024), (1024, 1536), (1536, 2048), (2048, None)]),
        # the 188-frame tail joins the one chunk
        (700, 100.0, 4.0, [(0, None)]),
        # a short tail joins the last
        (2300, 100.0, 4.0, [(0, 512), (512, 1024), (1024, 1536), (1536, None)]),
        (
            1000,
            100.0,
            1.0,
            [
                (0, 128),
                (128, 256),
                (256, 384),
                (384, 512),
                (512, 640),
                (640, 768),
                (768, 896),
                # 1 s rounds up to one 128-frame segment
                (896, None),
            ],
        ),
    ],
)
def test_plan_chunks(
    frames: int | None, fps: float | None, chunk_s: float, expected: list[tuple[int, int | None]]
) -> None:
    plan = plan_chunks(frames, fps, chunk_s)
    assert plan == expected
    assert plan[0][0] == 0 and all(s % ALIGN_FRAMES == 0 for s, _ in plan)
    for (_, e), nxt in zip(plan, [*plan[1:], None], strict=True):
        # the chunks tile the video
        assert (e is None) == (nxt is None) and (nxt is None or e == nxt[0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpus_per_task": 0}, "--cpus-per-task must be >= 1, got 0"),
        ({"gpus_per_task": -1.0}, "--gpus-per-task must be >= 0"),
        ({"chunk_s": -3.0}, "--chunk-s must be >= 0 seconds"),
        ({"overlap_s": float("nan")}, "--overlap-s must be >= 0"),
        ({"max_retries": -1}, "--max-retries must be >= 0, got -1"),
        ({"local_cpus": 0}, "--local-cpus must be >= 1, got 0"),
    ],
)
def test_batch_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        BatchConfig(**kwargs)


def test_expand_inputs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "s1.avi").write_bytes(b"x")
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "b.mp4").write_bytes(b"x")
    lst = tmp_path / "list.txt"
    lst.write_text("# archive\nb.mp4\n\na/s1.avi\n")
    assert expand_inputs([str(tmp_path / "**" / "*.avi")]) == [tmp_path / "a" / "s1.avi"]
    assert expand_inputs([str(tmp_path / "a")]) == [tmp_path / "a" / "s1.avi"]
    assert expand_inputs([f"@{lst}", str(tmp_path / "b.mp4")]) == [
        tmp_path / "b.mp4",
        tmp_path / "a" / "s1.avi",
    ]
    with pytest.raises(InputNotFoundError, match="matches no file"):
        expand_inputs([str(tmp_path / "*.mkv")])
    with pytest.raises(InputNotFoundError, match="list file not found"):
        expand_inputs([f"@{tmp_path / 'nope.txt'}"])
    with pytest.raises(InputNotFoundError, match="input not found"):
        expand_inputs([str(tmp_path / "missing.avi")])


def test_gpu_tasks_take_the_gpu_presets_backend() -> None:
    from eyeblink.detect import first_installed_backend
    from eyeblink.runtime.batch.driver import gpu_task_config

    want = first_installed_backend(["jax", "tensorflow"])
    # litert (the default) -> the gpu preset's choice
    assert gpu_task_config(CFG).detect.backend == want
    tf = CFG.with_overrides("detect", backend="tensorflow")
    # a GPU backend the user chose is kept
    assert gpu_task_config(tf).detect.backend == "tensorflow"


def test_settings_hash_changes_with_results_not_scheduling() -> None:
    assert settings_hash(CFG) == settings_hash(_default_config())
    assert settings_hash(CFG) != settings_hash(CFG.with_overrides("detect", detect_every=2))
    assert settings_hash(RunConfig()) != settings_hash(
        RunConfig(detect=DetectConfig(detect_every=2))
    )
    # --report: same rows, one more file
    assert settings_hash(CFG) == settings_hash(replace(CFG, eye_crops=True))


def test_manifest_ignores_torn_line_and_requires_outputs(tmp_path: Path) -> None:
    m = Manifest(tmp_path)
    m.append({"key": "k1", "stem": "v1", "status": "done"})
    m.append({"key": "k2", "stem": "v2", "status": "failed", "error": "bad"})
    with m.path.open("a") as fh:
        fh.write('{"key": "k3", "sta')  # a crash while writing
    assert [r["key"] for r in m.records()] == ["k1", "k2"]
    assert m.done_keys(tmp_path) == set()  # v1's files are missing: not done
    for kind in ("frames.csv", "blinks.csv", "summary.json"):
        (tmp_path / f"v1.{kind}").write_text("x")
    assert m.done_keys(tmp_path) == {"k1"}


def test_chunk_source_renumbers_and_stops(tmp_path: Path) -> None:
    from conftest import write_video

    from eyeblink.sources.files import open_source

    path = write_video(tmp_path / "v.mkv", 20)
    with open_source(path) as src:
        frames = list(ChunkSource(src, 5, 9))
    assert [f.index for f in frames] == [0, 1, 2, 3]
    assert [round(f.timestamp_s * 500) for f in frames] == [5, 6, 7, 8]
    with open_source(path) as src:
        assert len(list(ChunkSource(src, 16, None))) == 4
    with pytest.raises(ConfigError, match="frame range"):
        ChunkSource(open_source(path), 5, 5)


# --------------------------------------------------------------------------- real runs on a local
# Ray cluster


@pytest.fixture(scope="session")
def ray_cluster() -> Any:
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        env = dict(os.environ)
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
        os.environ.clear()  # ray.init's RAY_* variables would reach every later test's subprocesses
        os.environ.update(env)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def archive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three 2.5 s recordings, a truncated one, a non-video, and a 20 s one (100 FPS, 640x480
    MJPG)."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    root = tmp_path_factory.mktemp("archive")
    vids = root / "videos"
    vids.mkdir()
    out: dict[str, Path] = {}
    for i in range(3):
        p = vids / f"s{i}.avi"
        write_recording(p, SynthConfig.demo(2.5, fps=100.0, seed=i, mjpeg_qscale=4))
        out[f"s{i}"] = p
    cut = vids / "truncated.avi"
    cut.write_bytes(out["s0"].read_bytes()[: out["s0"].stat().st_size // 2])
    out["truncated"] = cut
    junk = vids / "junk.avi"
    junk.write_bytes(b"this is not a video\n" * 100)
    out["junk"] = junk
    long = root / "long" / "long.avi"
    long.parent.mkdir()
    write_recording(long, SynthConfig.demo(20.0, fps=100.0, seed=3, mjpeg_qscale=4))
    out["long"] = long
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_batch_runs_archive_reports_corrupt_and_resumes(
    ray_cluster: Any, archive: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    seen: list[dict[str, Any]] = []
    pattern = str(archive["s0"].parent / "*.avi")
    rep = run_batch(
        [pattern], out, CFG, BatchConfig(cpus_per_task=1, progress=False), on_video=seen.append
    )

    assert sorted(r["stem"] for r in rep.done) == ["s0", "s1", "s2"]
    failed = {r["stem"]: r["error"] for r in rep.failed}
    assert sorted(failed) == ["junk", "truncated"]
    assert "truncated.avi" in failed["truncated"] and "truncated or corrupt" in failed["truncated"]
    assert "junk.avi" in failed["junk"]
    assert all("\n" not in e for e in failed.values())
    assert len(seen) == 5 and rep.frames == 3 * 250

    # exactly the files `process` writes (same rows; the summary differs only in timings)
    from eyeblink.runtime.runner import process_paths

    ref = tmp_path / "ref"
    process_paths([archive["s1"]], ref, CFG, workers=1)
    for kind in ("frames.csv", "blinks.csv"):
        assert (out / f"s1.{kind}").read_bytes() == (ref / f"s1.{kind}").read_bytes(), kind
    # ... and what the multiprocess pipeline writes (a task of one CPU runs the single-process
    # reference)
    par = tmp_path / "par"
    process_paths([archive["s1"]], par, CFG, workers=2)
    for kind in ("frames.csv", "blinks.csv"):
        assert (out / f"s1.{kind}").read_bytes() == (par / f"s1.{kind}").read_bytes(), kind
    s_batch = json.loads((out / "s1.summary.json").read_text())
    s_ref = json.loads((ref / "s1.summary.json").read_text())
    assert set(s_batch) == set(s_ref)
    assert {k: s_batch[k] for k in ("frames", "blinks", "closure", "settings", "status")} == {
        k: s_ref[k] for k in ("frames", "blinks", "closure", "settings", "status")
    }
    assert s_batch["blinks"] >= 1

    # manifest: one line per video, the identity fields
    lines = [json.loads(x) for x in (out / MANIFEST_NAME).read_text().splitlines()]
    assert len(lines) == 5
    for rec in lines:
        assert {
            "key",
            "input",
            "size",
            "mtime_ns",
            "settings",
            "stem",
            "status",
            "finished",
        } <= set(rec)
        assert Path(rec["input"]).is_absolute()

    # rerun: the done ones are skipped, the failed ones tried again (and fail again)
    rep2 = run_batch([pattern], out, CFG, BatchConfig(cpus_per_task=1, progress=False))
    assert sorted(p.stem for p in rep2.skipped) == ["s0", "s1", "s2"]
    assert rep2.done == [] and sorted(r["stem"] for r in rep2.failed) == ["junk", "truncated"]
    # ... and the manifest keeps one line per input: the rerun's failures replace the first run's
    lines = [json.loads(x) for x in (out / MANIFEST_NAME).read_text().splitlines()]
    assert sorted(r["stem"] for r in lines) == ["junk", "s0", "s1", "s2", "truncated"]
    assert {r["stem"]: r["finished"] for r in lines if r["status"] == "failed"} == {
        r["stem"]: r["finished"] for r in rep2.failed
    }

    # a changed input (new mtime) or changed settings: processed again
    os.utime(
        archive["s2"],
        ns=(archive["s2"].stat().st_atime_ns, archive["s2"].stat().st_mtime_ns + 10**9),
    )
    rep3 = run_batch(
        [str(archive["s2"]), str(archive["s0"])],
        out,
        CFG,
        BatchConfig(cpus_per_task=1, progress=False),
    )
    assert [r["stem"] for r in rep3.done] == ["s2"] and [p.stem for p in rep3.skipped] == ["s0"]


def test_batch_retries_a_crashed_task(
    ray_cluster: Any, archive: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "crashed-once"
    monkeypatch.setenv(FAULT_ENV, f"crash-once:s1:{marker}")
    rep = run_batch(
        [str(archive["s1"])],
        tmp_path / "out",
        CFG,
        BatchConfig(cpus_per_task=1, max_retries=1, progress=False),
    )
    assert marker.exists(), "the first attempt did not crash"
    assert [r["stem"] for r in rep.done] == ["s1"] and rep.failed == []

    monkeypatch.setenv(FAULT_ENV, f"crash-once:s0:{tmp_path / 'again'}")
    rep = run_batch(
        [str(archive["s0"])],
        tmp_path / "out0",
        CFG,
        BatchConfig(cpus_per_task=1, max_retries=0, progress=False),
    )
    assert rep.done == [] and len(rep.failed) == 1
    assert "after 0 retries" in rep.failed[0]["error"]


@pytest.mark.parametrize(("chunk_s", "cpus", "chunks"), [(4.0, 2, 4), (1.3, 1, 8)])
def test_chunked_video_equals_unsplit_run(
    ray_cluster: Any,
    archive: dict[str, Path],
    tmp_path: Path,
    chunk_s: float,
    cpus: int,
    chunks: int,
) -> None:
    """20 s split into 4 chunks of 512 frames or 8 of 256 (2 workers a task, or the single-process
    stage) == one unsplit `process` run, byte for byte: the rows, the blinks and the report's eye
    crops."""
    from eyeblink.runtime.runner import process_paths

    cfg = replace(CFG, eye_crops=True)  # and the report's blink crops, kept by the one sink
    out = tmp_path / "chunked"
    rep = run_batch(
        [str(archive["long"])],
        out,
        cfg,
        BatchConfig(cpus_per_task=cpus, chunk_s=chunk_s, progress=False),
    )
    assert [r["chunks"] for r in rep.done] == [chunks], rep.failed
    assert not (out / ".eyeblink-batch").exists()
    ref = tmp_path / "ref"
    process_paths([archive["long"]], ref, cfg, workers=2)

    for kind in ("frames.csv", "blinks.csv"):
        assert (out / f"long.{kind}").read_bytes() == (ref / f"long.{kind}").read_bytes(), kind
    assert len(_rows(ref / "long.blinks.csv")) >= 10 and len(_rows(ref / "long.frames.csv")) == 2000
    with np.load(out / "long.crops.npz") as got_c, np.load(ref / "long.crops.npz") as want_c:
        assert sorted(got_c.files) == sorted(want_c.files)
        for name in want_c.files:
            assert np.array_equal(got_c[name], want_c[name]), name

    summary = json.loads((out / "long.summary.json").read_text())
    want = json.loads((ref / "long.summary.json").read_text())
    assert (
        summary["frames"] == 2000
        and summary["blinks"] == want["blinks"]
        and summary["status"] == "ok"
    )
    assert (
        summary["closure"] == want["closure"] and summary["detector_runs"] == want["detector_runs"]
    )
    assert [(c["start"], c["end"]) for c in summary["batch"]["chunks"]] == plan_chunks(
        2000, 100.0, chunk_s
    )
    assert set(summary) - {"batch"} == set(want) - {"parallel"}


def test_chunked_real_recording_equals_process(
    ray_cluster: Any, data_dir: Path, tmp_path: Path
) -> None:
    """Real faces: every third ZJU clip (research-only data; skipped without it), their decoded
    frames one after the other in one lossless 30 FPS recording (~1,500 frames, 14 faces, their
    blinks), split into 10 s or 5 s chunks with two CPUs or one a task: frames.csv and blinks.csv
    byte-identical to the default `process` at the defaults."""
    from conftest import write_video

    from eyeblink.runtime.runner import process_paths
    from eyeblink.sources.files import open_source

    clips = sorted((data_dir / "zju-dev").glob("*.avi"))[::3]
    if not clips:
        pytest.skip(f"no zju-dev clips in {data_dir}")
    images: list[np.ndarray] = []
    for clip in clips:
        with open_source(clip) as src:
            images += [f.gray.copy() for f in src]
    # AVI: the frame count that plans the chunks
    video = write_video(tmp_path / "zju.avi", images, fps=30)
    ref = tmp_path / "ref"
    assert process_paths([video], ref, CFG, workers=2)[1] == []
    # as summary.json counts them
    blinks = sum(r["kind"] == "blink" for r in _rows(ref / "zju.blinks.csv"))
    assert blinks >= 10 and len(_rows(ref / "zju.frames.csv")) == len(images) > 1200
    for chunk_s, cpus in ((10.0, 2), (5.0, 1)):
        chunks = len(plan_chunks(len(images), 30.0, chunk_s))
        assert chunks >= 3
        out = tmp_path / f"chunks{chunks}"
        rep = run_batch(
            [str(video)], out, CFG, BatchConfig(cpus_per_task=cpus, chunk_s=chunk_s, progress=False)
        )
        assert [(r["chunks"], r["blinks"]) for r in rep.done] == [(chunks, blinks)], rep.failed
        for kind in ("frames.csv", "blinks.csv"):
            assert (out / f"zju.{kind}").read_bytes() == (ref / f"zju.{kind}").read_bytes(), (
                chunks,
                kind,
            )


def test_cli_batch(
    ray_cluster: Any, archive: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eyeblink.cli import main

    lst = tmp_path / "videos.txt"
    lst.write_text(f"{archive['s0']}\n{archive['junk']}\n")
    rc = main(
        [
            "batch",
            f"@{lst}",
            "-o",
            str(tmp_path / "out"),
            "--cpus-per-task",
            "1",
            "--no-progress",
            "--report",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 2
    assert "s0: done" in cap.out and "1 done, 1 failed" in cap.out
    # --report: one page per video done
    assert f"s0: report {tmp_path / 'out' / 's0.report.html'}" in cap.out
    s0 = json.loads((tmp_path / "out" / "s0.summary.json").read_text())
    # every file it wrote
    assert s0["exit_status"] == 0 and {"report", "crops"} <= set(s0["outputs"])
    assert cap.err.startswith("eyeblink: error: junk: ") and len(cap.err.strip().splitlines()) == 1
    rc = main(["batch", str(archive["s0"]), "-o", str(tmp_path / "out"), "--no-progress"])
    assert rc == 0 and "1 skipped" in capsys.readouterr().out


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here")
def test_batch_removes_a_stale_ring_and_leaves_none(
    ray_cluster: Any, archive: dict[str, Path], tmp_path: Path
) -> None:
    """A ring left by a killed earlier run (its creator's pid no longer runs) is removed by the
    batch; the batch's own rings (the pipeline runs in the Ray workers) are gone when it returns."""
    import subprocess

    pid = int(
        subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    stale = Path("/dev/shm") / f"eyeblink_{pid}_0badc0de"
    stale.write_bytes(b"\0" * 4096)
    before = set(Path("/dev/shm").glob("eyeblink_*"))
    try:
        rep = run_batch(
            [archive["s1"]], tmp_path / "out", CFG, BatchConfig(cpus_per_task=2, progress=False)
        )
        assert [r["stem"] for r in rep.done] == ["s1"]
        assert not stale.exists()
        assert set(Path("/dev/shm").glob("eyeblink_*")) <= before - {stale}
    finally:
        stale.unlink(missing_ok=True)


def _damaged_h264(source: Path, dest: Path) -> Path:
    """``source`` re-encoded in H.264 (keyframe every 50 frames), with 5% of its bytes
    overwritten in the middle."""
    import numpy as np
    from conftest import write_video

    from eyeblink.sources.files import open_source

    with open_source(source) as src:
        frames = [f.image for f in src]
    video = write_video(
        dest,
        frames,
        codec="libx264",
        pix_fmt="yuv420p",
        fps=100,
        options={"g": "50", "keyint_min": "50"},
    )
    data = bytearray(video.read_bytes())
    mid, n = len(data) // 2, len(data) // 20
    data[mid : mid + n] = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8).tobytes()
    video.write_bytes(bytes(data))
    return video


def test_cli_batch_exits_5_when_every_video_is_done_but_one_was_damaged(
    ray_cluster: Any, archive: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``process``: exit 5 ("completed, input damaged") when packets were skipped, the count in
    the manifest, one warning line; 2 still wins when a video failed."""
    from eyeblink.cli import main

    damaged = _damaged_h264(archive["s2"], tmp_path / "dmg.mp4")
    out = tmp_path / "out"
    rc = main(
        [
            "batch",
            str(archive["s0"]),
            str(damaged),
            "-o",
            str(out),
            "--cpus-per-task",
            "1",
            "--no-progress",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 5, cap.err
    assert "2 done, 0 failed" in cap.out
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert (
        len(lines) == 1
        and lines[0].startswith("eyeblink: warning: dmg: ")
        and "damaged packet" in lines[0]
    )
    recs = {r["stem"]: r for r in Manifest(out).records()}
    assert recs["dmg"]["damaged_packets"] > 0 and recs["s0"]["damaged_packets"] == 0
    summary = json.loads((out / "dmg.summary.json").read_text())
    assert (
        summary["status"] == "ok"
        and summary["damaged_packets"]["count"] == recs["dmg"]["damaged_packets"]
    )
    rc = main(
        [
            "batch",
            str(damaged),
            str(archive["junk"]),
            "-o",
            str(tmp_path / "out2"),
            "--cpus-per-task",
            "1",
            "--no-progress",
        ]
    )
    assert rc == 2


@pytest.mark.skipif(
    not __import__("importlib").util.find_spec("ray"), reason="needs ray (extra eyeblink[ray])"
)
def test_batch_user_error_is_one_line_without_ray_notices(tmp_path: Path) -> None:
    """A real ``eyeblink batch`` process starting its own local Ray: Ray's notices (the
    token-authentication line) stay off stderr below --log-level info, so the error is the one line;
    --log-level info shows them."""
    import subprocess

    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"this is not a video\n" * 100)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    cmd = [
        sys.executable,
        "-m",
        "eyeblink",
        "batch",
        str(junk),
        "-o",
        str(tmp_path / "out"),
        "--local-cpus",
        "1",
        "--cpus-per-task",
        "1",
        "--no-progress",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("eyeblink: error: junk: ")
    loud = subprocess.run(
        [*cmd, "--log-level", "info"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert (
        loud.returncode == 2 and len([ln for ln in loud.stderr.splitlines() if ln.strip()]) > 1
    ), loud.stderr


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here")
@posix_stop_signals
def test_sigterm_stops_a_batch_like_ctrl_c(archive: dict[str, Path], tmp_path: Path) -> None:
    """SIGTERM (Slurm, ``timeout``, ``docker stop``) to a real ``eyeblink batch``: exit 130 and one
    line, not Ray's stack dump and exit 1; the video in flight keeps its whole rows, its summary
    says ``interrupted`` (not ``running``), the manifest does not call it done, and no shared-memory
    ring is left."""
    import signal
    import subprocess
    import time

    out = tmp_path / "out"
    before = set(Path("/dev/shm").glob("eyeblink_*"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "batch",
            str(archive["long"]),
            "-o",
            str(out),
            "--local-cpus",
            "2",
            "--cpus-per-task",
            "2",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    frames = out / "long.frames.csv"
    deadline = time.monotonic() + 240
    try:
        while not (frames.is_file() and frames.read_text().count("\n") > 50):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no rows after 240 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == ["eyeblink: interrupted (SIGTERM); rows computed so far are on disk"]
    text = frames.read_text()
    assert text.endswith("\n") and 50 < text.count("\n") < 2001
    summary = json.loads((out / "long.summary.json").read_text())
    assert summary["status"] == "interrupted" and "run it again" in summary["error"]
    manifest = out / "eyeblink-batch.jsonl"
    assert not manifest.exists() or '"done"' not in manifest.read_text()
    assert set(Path("/dev/shm").glob("eyeblink_*")) <= before  # the Ray workers' rings are gone too


def test_short_videos_share_a_task_that_keeps_its_processes(
    archive: dict[str, Path], tmp_path: Path
) -> None:
    """Short whole videos are grouped into one task (up to GROUP_FILES and GROUP_FRAMES); the task
    runs them on a pool of two long-lived processes (models loaded once) and writes what `process
    --workers 1` writes; a video that fails does so alone."""
    from eyeblink.runtime.batch.driver import GROUP_FILES, ChunkTask, _groups, _Video, run_group
    from eyeblink.runtime.runner import process_paths

    def video(name: str, frames: int | None, chunks: int = 1) -> _Video:
        tasks = [
            ChunkTask(name, name, str(tmp_path), i, chunks, 0, None, CFG, 2) for i in range(chunks)
        ]
        return _Video(Path(name), name, {}, tasks, frames=frames)

    vs = [video(f"v{i}", 250) for i in range(GROUP_FILES + 2)] + [
        video("long", 5000),
        video("split", 400, 2),
    ]
    groups = _groups([*vs, video("unknown", None)], gpu=False)
    assert [len(g) for g in groups] == [GROUP_FILES, 1, 1, 1, 2]  # long, split, unknown alone
    assert _groups(vs[:3], gpu=True) == [[v] for v in vs[:3]]  # GPU tasks: one video each

    names = ["s0", "s1", "truncated", "s2"]
    tasks = [
        ChunkTask(str(archive[n]), n, str(tmp_path / "out"), 0, 1, 0, None, CFG, 2) for n in names
    ]
    outcomes = run_group(tasks)
    assert [o["status"] for o in outcomes] == ["done", "done", "failed", "done"]
    assert "truncated or corrupt" in outcomes[2]["error"] and [
        o["frames"] for o in outcomes if "frames" in o
    ] == [250, 250, 250]
    assert (
        process_paths([archive[n] for n in ("s0", "s1", "s2")], tmp_path / "ref", CFG, workers=1)[1]
        == []
    )
    for n in ("s0", "s1", "s2"):
        for kind in ("frames.csv", "blinks.csv"):
            assert (tmp_path / "out" / f"{n}.{kind}").read_bytes() == (
                tmp_path / "ref" / f"{n}.{kind}"
            ).read_bytes()


def test_rays_failure_messages_become_one_line_each() -> None:
    """What Ray's driver printed (dozens of lines) when a worker node's raylet was SIGKILLed during
    a batch: one line for the lost node (once, however often Ray repeats it), one per retried task,
    nothing for the dump."""
    from eyeblink.runtime.batch.raycluster import RayMessages

    node = "f1eb36146c3a78d1508fc1db6909bd7a16f41d5c5a598e152861dd7d"
    dump = (
        "Raylet is terminated. Termination is unexpected. Possible reasons include: (1) SIGKILL "
        "by the user "
        "or system OOM killer ... Last 20 lines of the Raylet logs:\n    [state-dump] NodeManager "
        "... " * 3
    )
    retry = (
        "Task run_chunk failed. There are 2 retries remaining, so the task will be retried. "
        "Error: Task failed "
        "because the node it was running on is dead or unavailable. Node IP: 192.0.2.2, node ID: "
        f"{node}."
    )
    dead = (
        f"The node with node id: {node} and address: 192.0.2.2 and node name: 192.0.2.2 has been "
        "marked dead "
        "because the detector has missed too many heartbeats from it."
    )
    m = RayMessages()
    try:
        lines = [
            m.line(text)
            for text in (dump, retry, dead, dump, dead, "Something else\nand its details")
        ]
    finally:
        m.close()
    assert lines == [
        None,
        "a task was lost with its node (f1eb3614); retrying it (2 retries left)",
        "node 192.0.2.2 (f1eb3614) lost; its tasks are retried on the other nodes (details in the "
        "--log-file)",
        None,
        None,
        "Something else",
    ]


# --------------------------------------------------------------------------- recordings of one eye


def test_batch_chooses_each_eye_recordings_measure_on_its_own(
    ray_cluster: Any, data_dir: Path, tmp_path: Path
) -> None:
    """``--eye-roi`` with no ``--landmarks``: each recording gets the measure ``process`` would
    choose on it, from its own first seconds (the same region is ``contour``'s in ``rat_crush2`` and
    ``area``'s in ``rat_march8``), said in its summary.json; a video split into chunks gets one
    choice for all of them, and its rows are the unsplit run's."""
    crush, march = (data_dir / "eye-only" / f"{n}.mp4" for n in ("rat_crush2", "rat_march8"))
    if not crush.exists() or not march.exists():
        pytest.skip("eye-only recordings not found")
    cfg = replace(RunConfig().with_overrides("eye", roi=(60, 38, 45, 45)), max_frames=300)
    out = tmp_path / "out"
    rep = run_batch([crush, march], out, cfg, BatchConfig(cpus_per_task=1, progress=False))
    assert sorted(r["stem"] for r in rep.done) == ["rat_crush2", "rat_march8"], rep.failed
    measures = {
        n: json.loads((out / f"{n}.summary.json").read_text())["eye_measure"]
        for n in ("rat_crush2", "rat_march8")
    }
    assert {n: (m["model"], m["how"]) for n, m in measures.items()} == {
        "rat_crush2": ("contour", "chosen"),
        "rat_march8": ("area", "chosen"),
    }
    from eyeblink.runtime.runner import process_paths

    ref = tmp_path / "ref"
    process_paths([crush], ref, cfg, workers=1)
    assert (
        json.loads((ref / "rat_crush2.summary.json").read_text())["eye_measure"]
        == measures["rat_crush2"]
    )
    # 300 frames at 30 FPS in chunks of 128 frames (the short tail joins the last)
    split = tmp_path / "split"
    rep = run_batch([crush], split, cfg, BatchConfig(cpus_per_task=1, progress=False, chunk_s=4.0))
    assert [r["chunks"] for r in rep.done] == [2], rep.failed
    assert (
        json.loads((split / "rat_crush2.summary.json").read_text())["eye_measure"]
        == measures["rat_crush2"]
    )
    for kind in ("frames.csv", "blinks.csv"):
        assert (split / f"rat_crush2.{kind}").read_bytes() == (
            ref / f"rat_crush2.{kind}"
        ).read_bytes(), kind
