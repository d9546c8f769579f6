"""Time that runs backwards or jumps (:func:`eyeblink.outputs.analysis.timeline`): a warning naming
where and by how much, a ``timeline`` entry in ``summary.json``, and ``duration_s`` and the rates
from the span covered."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import write_video

from eyeblink.outputs.analysis import timeline


def test_a_steady_clock_has_no_breaks_and_covers_last_minus_first() -> None:
    t = np.arange(100) / 100
    t[50:] += 0.05  # five dropped frames: a gap, not a jump
    line = timeline(np.arange(100), t)
    assert line["breaks"] == [] and line["backwards"] == 0 and line["jumps"] == 0
    assert line["covered_s"] == pytest.approx(t[-1] - t[0])


def test_steps_back_and_jumps_are_listed_with_where_and_by_how_much() -> None:
    t = np.concatenate([np.arange(300) / 100, np.arange(300) / 100, 100 + np.arange(100) / 100])
    t[10] = np.nan  # an empty timestamp cell is skipped, not a break
    line = timeline(np.arange(t.size), t)
    assert line["backwards"] == 1 and line["jumps"] == 1
    back, jump = line["breaks"]
    assert back == {
        "frame": 300,
        "kind": "backwards",
        "previous_s": pytest.approx(2.99),
        "timestamp_s": 0.0,
        "by_s": pytest.approx(-2.99),
    }
    assert (
        jump["frame"] == 600
        and jump["kind"] == "jump"
        and jump["by_s"] == pytest.approx(100 - 2.99)
    )
    assert line["covered_s"] == pytest.approx(2.99 + 0.01 + 2.99 + 0.01 + 0.99)


def test_two_mpeg_ts_files_joined_with_cat(
    face_frames: list[np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cat a.ts b.ts``: the clock restarts at 0 half-way; the summary says where, and its
    duration is 6 s."""
    from eyeblink.cli import main

    parts = [
        write_video(
            tmp_path / f"{n}.ts", face_frames[:300], codec="mpeg2video", pix_fmt="yuv420p", fps=100
        )
        for n in "ab"
    ]
    joined = tmp_path / "joined.ts"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    out = tmp_path / "out"
    assert (
        main(
            [
                "process",
                str(joined),
                "-o",
                str(out),
                "--landmarks",
                "mesh",
                "--workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    warnings = [w for w in err.splitlines() if "runs backwards" in w]
    assert len(warnings) == 1 and warnings[0].startswith(
        "eyeblink: warning: joined: the recording's time runs "
        "backwards 1 time(s) (first at frame 300: 2.990 s -> "
        "0.000 s, -2.990 s)"
    )
    summary = json.loads((out / "joined.summary.json").read_text())
    assert (
        summary["timeline"]["backwards"] == 1 and summary["timeline"]["breaks"][0]["frame"] == 300
    )
    assert summary["duration_s"] == pytest.approx(6.0, abs=0.02)
    # what duration_s said before
    assert summary["last_timestamp_s"] - summary["first_timestamp_s"] < 3.0
    assert any("runs backwards" in w for w in summary["warnings"])


def test_a_plain_recording_has_an_empty_timeline(
    face_frames: list[np.ndarray], make_video, tmp_path: Path
) -> None:
    from eyeblink.cli import main

    video = make_video(face_frames[:50], container="mkv", fps=100)
    assert (
        main(
            [
                "process",
                str(video),
                "-o",
                str(tmp_path / "o"),
                "--landmarks",
                "mesh",
                "--workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "o" / f"{video.stem}.summary.json").read_text())
    assert summary["timeline"] == {
        "covered_s": pytest.approx(0.49),
        "backwards": 0,
        "jumps": 0,
        "breaks": [],
    }
    assert summary["duration_s"] == pytest.approx(0.49)
