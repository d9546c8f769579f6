"""Same recording, same rows: real annotated clips through the real CLI at its default settings.

A session's rows are a function of the recording and the settings only, never of how its frames were
dealt to processes. Each test runs ``eyeblink process`` on real ZJU clips (30 FPS faces with blinks,
Indeo 5) with one worker (the single-process reference) and with several, and compares
``frames.csv`` and ``blinks.csv`` byte for byte. The clips are research-only test data: the tests
skip without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eyeblink.frame.analyzer import SEGMENT_FRAMES

pytestmark = [pytest.mark.slow]

#: Every tenth clip of the 40: four subjects and conditions (105-145 frames each: in the longer ones
#: a second tracking segment starts mid-clip).
EVERY = 10

#: The multiprocess pipeline on each clip in turn (one input at a time: ``process`` of several short
#: inputs runs them whole on its pool of file workers instead), at the CLI's default settings.
_LAYOUT_RUN = """
import sys
from pathlib import Path
from eyeblink.config import ParallelConfig, load_preset
from eyeblink.outputs.analysis import finalize
from eyeblink.presets import resolve_preset
from eyeblink.runtime.procs.parallel import ParallelPipeline
from eyeblink.sources.files import open_source
out, landmarks, workers, loaders, stage, *clips = sys.argv[1:]
cfg = load_preset(resolve_preset("cpu")).with_overrides("landmarks", model=landmarks)
cfg = cfg.with_overrides("detect", stage=stage)
pipe = ParallelPipeline(cfg, ParallelConfig(workers=int(workers), loaders=int(loaders)))
Path(out).mkdir(parents=True)
for clip in clips:
    with open_source(Path(clip)) as src:
        result = pipe.process_source(src, Path(out))
    assert finalize(result, cfg).summary["status"] == "ok"  # the session's closure calibration, as `process`
"""


def _clips(data_dir: Path) -> list[Path]:
    clips = sorted((data_dir / "zju-dev").glob("*.avi"))
    if not clips:
        pytest.skip(f"no zju-dev clips in {data_dir}")
    return clips[::EVERY]


def _run(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("landmarks", ["lids", "mesh"])
def test_zju_rows_do_not_depend_on_how_frames_are_dealt(
    data_dir: Path, tmp_path: Path, landmarks: str
) -> None:
    """One process, two and three workers on each clip, the pool of two file workers, and the
    accelerator stage on the CPU (LiteRT: the networks in one process, two post-processing workers):
    the same files."""
    clips = [str(c) for c in _clips(data_dir)]
    cli = ["-m", "eyeblink", "process", *clips, "--landmarks", landmarks, "--no-progress", "-o"]
    _run([*cli, str(tmp_path / "w1"), "--workers", "1"])  # the single-process reference
    # several short inputs: the pool of file workers
    _run([*cli, str(tmp_path / "pool"), "--workers", "2"])
    for workers in (2, 3):
        _run(
            [
                "-c",
                _LAYOUT_RUN,
                str(tmp_path / f"w{workers}"),
                landmarks,
                str(workers),
                "0",
                "fused",
                *clips,
            ]
        )
    _run(["-c", _LAYOUT_RUN, str(tmp_path / "stage"), landmarks, "2", "0", "accelerator", *clips])
    differ = []
    detected = frames = 0
    lengths = []
    for clip in map(Path, clips):
        for kind in ("frames.csv", "blinks.csv"):
            ref = (tmp_path / "w1" / f"{clip.stem}.{kind}").read_bytes()
            differ += [
                f"{name}/{clip.stem}.{kind}"
                for name in ("pool", "w2", "w3", "stage")
                if (tmp_path / name / f"{clip.stem}.{kind}").read_bytes() != ref
            ]
        rows = (tmp_path / "w1" / f"{clip.stem}.frames.csv").read_text().splitlines()[1:]
        frames += len(rows)
        lengths.append(len(rows))
        detected += sum(r.split(",")[7] == "1" for r in rows)
    assert differ == []
    stage = json.loads((tmp_path / "stage" / f"{Path(clips[0]).stem}.summary.json").read_text())
    assert stage["parallel"]["detector"] == "accelerator stage"
    # the default keyframe policy is on (boxes carried between keyframes): not the every-frame mode
    assert detected < frames / 2
    assert max(lengths) > SEGMENT_FRAMES  # a tracking segment starts mid-clip
