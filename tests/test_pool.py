"""Many short inputs in one ``process`` (:mod:`eyeblink.runtime.procs.pool`): long-lived file
workers.

Real rendered face recordings, the real detector and eye model, real forked processes and the real
CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHILD_SIGNALS, posix_stop_signals, stop_when


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Six short 'trial' recordings (0.1-0.4 s at 500 FPS, each its own face and blink) and one
    of 0.8 s."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    root = tmp_path_factory.mktemp("trials")
    out = []
    for i, seconds in enumerate((0.2, 0.1, 0.4, 0.3, 0.2, 0.3, 0.8)):
        path = root / f"trial{i:02d}.avi"
        write_recording(path, SynthConfig.demo(seconds, seed=10 + i))
        out.append(path)
    return out


def _cli(*args: object, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eyeblink", "process", *map(str, args), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_short_inputs_run_whole_on_the_pool_with_the_reference_rows(
    trials: list[Path], tmp_path: Path
) -> None:
    """Two file workers: every input's files are the single-process run's, byte for byte; one input
    that is not a video fails alone (one line) and the others are done; the lines come in input
    order."""
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"not a video\n" * 50)
    inputs = [*trials[:6], junk]
    ref = _cli(*trials[:6], "-o", tmp_path / "ref", "--workers", "1")
    assert ref.returncode == 0, ref.stderr
    pool = _cli(*inputs, "-o", tmp_path / "pool", "--workers", "2")
    assert pool.returncode != 0
    errors = [line for line in pool.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "junk.avi" in errors[0], pool.stderr
    assert "Traceback" not in pool.stderr
    done = [line.split(":")[0] for line in pool.stdout.splitlines() if "frames, face in" in line]
    assert done == [p.stem for p in trials[:6]]  # in input order, whichever worker finished first
    for p in trials[:6]:
        for kind in ("frames.csv", "blinks.csv"):
            assert (tmp_path / "pool" / f"{p.stem}.{kind}").read_bytes() == (
                tmp_path / "ref" / f"{p.stem}.{kind}"
            ).read_bytes(), (p.stem, kind)
        summary = json.loads((tmp_path / "pool" / f"{p.stem}.summary.json").read_text())
        assert summary["status"] == "ok" and "parallel" not in summary  # whole, in one process


def test_a_long_input_is_handed_to_the_multiprocess_pipeline(
    trials: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs over the pool's length run after the short ones through the multiprocess pipeline
    (every worker on one file), with the same rows; the results keep the input order."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.procs import pool
    from eyeblink.runtime.runner import process_paths

    monkeypatch.setattr(pool, "POOL_MAX_FRAMES", 300)  # trial06 (400 frames) is 'long' here
    cfg = load_preset(resolve_preset("cpu"))
    inputs = [trials[6], trials[0], trials[1]]
    results, failures = process_paths(inputs, tmp_path / "out", cfg, workers=2)
    assert failures == []
    assert [r.stem for r in results] == [p.stem for p in inputs]
    assert "parallel" in results[0].summary and "parallel" not in results[1].summary
    assert process_paths([trials[6]], tmp_path / "ref", cfg, workers=1)[1] == []
    for kind in ("frames.csv", "blinks.csv"):
        assert (tmp_path / "out" / f"trial06.{kind}").read_bytes() == (
            tmp_path / "ref" / f"trial06.{kind}"
        ).read_bytes()


@pytest.mark.slow
@posix_stop_signals
def test_sigterm_ends_the_inputs_in_hand_with_their_rows(
    trials: list[Path], tmp_path: Path
) -> None:
    """A stop while the pool runs: exit 130, one line; each input is either done, or interrupted
    with whole rows and an ``interrupted`` summary, or not started; no worker is left behind."""
    inputs = [trials[i % 6] for i in range(24)]
    links = []
    for i, p in enumerate(inputs):  # 24 distinct names for 6 recordings
        link = tmp_path / "in" / f"t{i:02d}.avi"
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(p)
        links.append(link)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            *map(str, links),
            "-o",
            str(out),
            "--workers",
            "2",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]
    stderr = stop_when(
        proc,
        lambda: len(list(out.glob("*.summary.json"))) >= 3,
        signal.SIGTERM,
        if_ended=lambda: pytest.skip("the run ended before the stop (a very fast machine)"),
    )
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    statuses = {}
    for s in out.glob("*.summary.json"):
        summary = json.loads(s.read_text())
        statuses[s.name] = summary["status"]
        rows = (out / s.name.replace("summary.json", "frames.csv")).read_text().splitlines()[1:]
        # whole rows, in order
        assert [int(r.split(",")[0]) for r in rows] == list(range(len(rows)))
        if summary["status"] == "ok":
            assert len(rows) == summary["frames"] > 0
    assert set(statuses.values()) <= {"ok", "interrupted"} and len(statuses) < len(links)
    children = subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
    ).stdout.split()
    assert children == []
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)
    assert os.path.isdir(out)


def test_bench_short_mode_cuts_clips_and_reports_the_per_file_overhead(
    trials: list[Path], tmp_path: Path
) -> None:
    """``eyeblink bench --modes default,short``: clips of 0.5-2 s cut from the input's real frames,
    one `process` over them, compared with the long file (numbers are the machine's; only their
    presence is checked)."""
    report = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "bench",
            "--input",
            str(trials[6]),
            "--modes",
            "default,short",
            "--short-files",
            "3",
            "--repeats",
            "1",
            "--workers",
            "2",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "per-file overhead" in proc.stdout
    short = json.loads(report.read_text())["modes"]["short"]
    clips = sorted((tmp_path / "cache" / "short-trial06-3").glob("*.avi"))
    assert [c.name for c in clips] == ["trial0000.avi", "trial0001.avi", "trial0002.avi"]
    # 0.5, 0.875, 1.25 s at 500 FPS
    assert short["files"] == 3 and short["frames"] == 250 + 438 + 625
    assert {"fraction_of_default", "overhead_ms_per_file", "overhead_cpu_ms_per_file"} <= set(short)
    bad = subprocess.run(
        [sys.executable, "-m", "eyeblink", "bench", "--modes", "short", "--short-files", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        bad.returncode != 0
        and "--short-files must be >= 2" in bad.stderr
        and "Traceback" not in bad.stderr
    )
