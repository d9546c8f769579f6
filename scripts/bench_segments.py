"""What the tracking segments cost: the single-process reference with and without them, alternated.

Every frame whose index is a multiple of ``SEGMENT_FRAMES`` restarts the keyframe policy's tracking
(a detection, a fresh face mesh), so that the rows do not depend on how frames are dealt to
processes. The multiprocess pipeline already restarted on its chunks' first frames (the same frames
at the default ``chunk_frames`` of 128), so its work is unchanged; the reference gains one detection
per segment. This script runs the reference on one recording with segments on and off, alternating,
and prints wall and CPU seconds of each run (CPU time is the fairer figure on a shared machine).

    python scripts/bench_segments.py RECORDING [--repeats 3] [--landmarks lids]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

_RUN = """
import json, resource, sys, time
from pathlib import Path
from eyeblink.config import load_preset
from eyeblink.presets import resolve_preset
from eyeblink.runtime.runner import build_analyzer, process_paths
video, out, landmarks, segments = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "on"
cfg = load_preset(resolve_preset("cpu")).with_overrides("landmarks", model=landmarks)
analyzer = build_analyzer(cfg)
if not segments:
    analyzer.segment_frames = None
t0, c0 = time.perf_counter(), time.process_time()
(results, failures) = process_paths([Path(video)], out, cfg, analyzer=analyzer)
assert not failures, failures
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "frames": results[0].frames, "detections": results[0].summary["detector_runs"]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recording")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--landmarks", default="lids")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for mode in ("off", "on") if r % 2 else ("on", "off"):
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        _RUN,
                        args.recording,
                        f"{tmp}/{mode}{r}",
                        args.landmarks,
                        mode,
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(mode, runs[mode][-1], flush=True)
    for mode, rs in runs.items():
        fps = [x["frames"] / x["wall_s"] for x in rs]
        cpu_ms = [x["cpu_s"] * 1000 / x["frames"] for x in rs]
        print(
            f"segments {mode}: {statistics.median(fps):.0f} FPS [{min(fps):.0f}-{max(fps):.0f}], "
            f"CPU {statistics.median(cpu_ms):.3f} ms/frame [{min(cpu_ms):.3f}-{max(cpu_ms):.3f}], "
            f"detections {rs[0]['detections']} of {rs[0]['frames']} frames"
        )


if __name__ == "__main__":
    main()
