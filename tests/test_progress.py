"""The progress bar of a run cut short with ``max_frames``: its total is the frames the run reads,
and it ends showing that count (it ended at 593 of the file's 2000 frames), one process or several.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest


class Bar:
    """A progress bar as the runner drives it (tqdm's methods), recording what it was told."""

    def __init__(self, total: int | None) -> None:
        self.total, self.n, self.shown, self.closed = total, 0, None, False

    def update(self, k: int) -> None:
        self.n += k

    def refresh(self) -> None:
        self.shown = self.n

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_with_max_frames_ends_at_its_count(
    face_recording: tuple[Path, Any], tmp_path: Path, workers: int
) -> None:
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.runner import process_paths

    video, _ = face_recording
    cfg = dataclasses.replace(load_preset(resolve_preset("cpu")), max_frames=300)
    bars: list[Bar] = []

    def factory(name: str, total: int | None) -> Bar:
        bars.append(Bar(total))
        return bars[-1]

    results, failures = process_paths([video], tmp_path, cfg, progress=factory, workers=workers)
    assert not failures and results[0].frames == 300
    (bar,) = bars
    assert (bar.total, bar.n, bar.shown, bar.closed) == (300, 300, 300, True)
