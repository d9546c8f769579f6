"""``eyeblink batch --address`` on a real multi-node Ray cluster on this machine that loses a node
mid-run.

Ray's own ``cluster_utils.Cluster`` starts a head (no CPUs for tasks: it only schedules) and two
worker nodes, each with its own raylet and object store, as ``ray start`` does on separate hosts.
The real CLI runs the batch as a driver that joins with ``--address``; once some videos are done,
one worker node is killed outright (its raylet and workers SIGKILLed, no graceful drain). Checked:
every video done, rows byte-identical to ``process --workers 1``, one manifest line per video, a
rerun skipping everything, and a quiet terminal (a line per lost node and per retried task, none of
Ray's state dumps).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Twelve 1.2 s recordings at 100 FPS with blinks (real MJPG files): short videos share a task
    (up to 8), so two tasks, one on each worker node."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    root = tmp_path_factory.mktemp("cluster-videos")
    out = []
    for i in range(12):
        path = root / f"v{i}.avi"
        write_recording(path, SynthConfig.demo(1.2, fps=100.0, seed=20 + i, mjpeg_qscale=4))
        out.append(path)
    return out


def test_batch_survives_a_lost_worker_node(videos: list[Path], tmp_path: Path) -> None:
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    try:
        doomed = cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1)
        out = tmp_path / "out"
        cmd = [
            sys.executable,
            "-m",
            "eyeblink",
            "batch",
            *map(str, videos),
            "-o",
            str(out),
            "--address",
            cluster.address,
            "--cpus-per-task",
            "1",
            "--no-progress",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed = threading.Event()

        def kill_when_started() -> None:
            while proc.poll() is None and len(list(out.glob("*.summary.json"))) < 2:
                time.sleep(0.05)
            if proc.poll() is None:
                # SIGKILL: raylet, object store, workers
                cluster.remove_node(doomed, allow_graceful=False)
                killed.set()

        threading.Thread(target=kill_when_started, daemon=True).start()
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr
        if not killed.is_set():
            pytest.skip("the batch ended before the node could be killed (a very fast machine)")

        # every video done once, and the files `process` writes
        assert "batch: 12 done, 0 failed, 0 skipped" in stdout, stdout
        manifest = [
            json.loads(line) for line in (out / "eyeblink-batch.jsonl").read_text().splitlines()
        ]
        assert sorted(r["stem"] for r in manifest) == sorted(v.stem for v in videos)
        assert {r["status"] for r in manifest} == {"done"}
        ref = subprocess.run(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "process",
                *map(str, videos),
                "-o",
                str(tmp_path / "ref"),
                "--workers",
                "1",
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert ref.returncode == 0, ref.stderr
        for v in videos:
            for kind in ("frames.csv", "blinks.csv"):
                assert (out / f"{v.stem}.{kind}").read_bytes() == (
                    tmp_path / "ref" / f"{v.stem}.{kind}"
                ).read_bytes()

        # the terminal: Ray's internal dumps stay out; a few lines for the lost node
        terminal = (stdout + stderr).splitlines()
        assert not [line for line in terminal if "state-dump" in line or "(raylet)" in line]
        ray_lines = [line for line in terminal if line.startswith("eyeblink: batch:")]
        assert len(ray_lines) <= 5, terminal
        assert sum(" lost; " in line for line in ray_lines) <= 1
        # the user hears of the node (or its task)
        assert any(" lost" in line for line in ray_lines), terminal
        (tmp_path / "terminal.txt").write_text("\n".join(terminal))
        print("\n".join(ray_lines))

        again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert "batch: 0 done, 0 failed, 12 skipped" in again.stdout, again.stdout
    finally:
        cluster.shutdown()
