"""Throughput of ``eyeblink batch`` on this machine (numbers for deploy/SCALING.md).

Renders N synthetic 640x480 500 FPS MJPG recordings (``eyeblink.lab.synth``), then processes them
with
(a) ``process_paths`` without Ray (1 and 2 workers) and (b) ``run_batch`` on a local Ray instance
    with
1 or 2 CPUs and 1 or 2 CPUs per task. Prints one JSON line per configuration with frames, wall
seconds, FPS and ``os.getloadavg()`` before and after (the machine may be shared). Usage: ``python
scripts/batch_scaling.py [--videos 4] [--seconds 6] [--workdir /tmp/eyeblink-scaling]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--workdir", default="/tmp/eyeblink-scaling")
    args = ap.parse_args()

    from eyeblink.config import RunConfig
    from eyeblink.lab.synth import SynthConfig, write_recording
    from eyeblink.runtime.batch.driver import BatchConfig, run_batch
    from eyeblink.runtime.runner import process_paths

    root = Path(args.workdir)
    vids = root / "videos"
    vids.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(args.videos):
        p = vids / f"rec{i}.avi"
        if not p.exists():
            write_recording(p, SynthConfig.demo(args.seconds, seed=i, mjpeg_qscale=4))
        paths.append(p)
    cfg = RunConfig()

    def out(name: str) -> Path:
        d = root / "out" / name
        shutil.rmtree(d, ignore_errors=True)
        return d

    def report(name: str, frames: int, wall: float, before: tuple[float, ...]) -> None:
        print(
            json.dumps(
                {
                    "config": name,
                    "frames": frames,
                    "wall_s": round(wall, 2),
                    "fps": round(frames / wall, 1),
                    "loadavg_before": [round(x, 2) for x in before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                }
            ),
            flush=True,
        )

    for workers in (1, 2):
        before = os.getloadavg()
        t0 = time.perf_counter()
        results, _ = process_paths(paths, out(f"process-w{workers}"), cfg, workers=workers)
        report(
            f"process --workers {workers} (no Ray)",
            sum(r.frames for r in results),
            time.perf_counter() - t0,
            before,
        )
    for local, per_task in ((1, 1), (2, 1), (2, 2)):
        before = os.getloadavg()
        rep = run_batch(
            [str(p) for p in paths],
            out(f"batch-{local}-{per_task}"),
            cfg,
            BatchConfig(local_cpus=local, cpus_per_task=per_task, chunk_s=0, progress=False),
        )
        report(
            f"batch, Ray {local} CPU(s), {per_task} CPU(s)/task ({local // per_task} task(s) at "
            "once)",
            rep.frames,
            rep.wall_s,
            before,
        )


if __name__ == "__main__":
    main()
