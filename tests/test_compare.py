"""``eyeblink compare A B`` (:mod:`eyeblink.outputs.compare`) on sessions the real CLI wrote.

Session A is a real run on a rendered recording with blinks; the B sessions are the same run with
the worker count changed (identical), with its openness moved in the last digits (what another CPU
gives), with one blink missing, and the same recording through another eye model (a real
difference).
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eyeblink.outputs.compare import DEFAULT_TOLERANCE, compare_sessions


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eyeblink", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``a/rec``: 2 s at 500 FPS with the demo's blinks, ``--landmarks lids``; ``w2/rec``: the same
    with two workers; ``mesh/rec``: the same recording with the face mesh's openness."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    root = tmp_path_factory.mktemp("compare")
    video = root / "rec.avi"
    write_recording(video, SynthConfig.demo(2.0, seed=4))
    for name, args in (
        ("a", ("--workers", "1", "--landmarks", "lids")),
        ("w2", ("--workers", "2", "--landmarks", "lids")),
        ("mesh", ("--workers", "1", "--landmarks", "mesh")),
    ):
        proc = _cli("process", video, "-o", root / name, "--no-progress", *args)
        assert proc.returncode == 0, proc.stderr
    return root


def _rewrite(src: Path, dst: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Copy session ``src`` (OUTDIR/<stem>) to ``dst`` with ``edit(kind, header, rows)`` applied
    to its CSVs."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("frames.csv", "blinks.csv", "summary.json"):
        shutil.copy(f"{src}.{suffix}", f"{dst}.{suffix}")
    for kind in ("frames", "blinks"):
        with open(f"{dst}.{kind}.csv", newline="", encoding="utf-8") as fh:
            header, *rows = list(csv.reader(fh))
        rows = edit(kind, header, rows)
        with open(f"{dst}.{kind}.csv", "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh, lineterminator="\n").writerows([header, *rows])


def test_the_same_run_on_two_workers_is_identical(sessions: Path) -> None:
    proc = _cli("compare", sessions / "a" / "rec", sessions / "w2" / "rec.frames.csv")
    assert proc.returncode == 0, proc.stderr
    assert "byte-identical: frames.csv, blinks.csv" in proc.stdout
    assert proc.stdout.strip().endswith("verdict: identical (openness tolerance 0.001)")


def test_last_digit_differences_are_within_the_tolerance(sessions: Path, tmp_path: Path) -> None:
    def nudge(kind: str, header: list[str], rows: list[list[str]]) -> list[list[str]]:
        if kind == "frames":
            col = header.index("ear_left")
            for r in rows[::7]:
                if r[col]:
                    r[col] = repr(float(r[col]) + 4e-4)
        return rows

    _rewrite(sessions / "a" / "rec", tmp_path / "b" / "rec", nudge)
    c = compare_sessions(sessions / "a" / "rec", tmp_path / "b" / "rec")
    assert c.verdict == "within tolerance" and c.identical == {
        "frames.csv": False,
        "blinks.csv": True,
    }
    assert (
        c.max_diff["ear_left"][0] == pytest.approx(4e-4, rel=1e-3)
        and c.max_diff["ear_left"][1] % 7 == 0
    )
    assert c.max_diff["ear_right"] == (0.0, 0) and len(c.matched) == c.blinks_a == c.blinks_b >= 1
    tight = _cli("compare", sessions / "a" / "rec", tmp_path / "b" / "rec", "--tolerance", "1e-4")
    assert tight.returncode == 1 and "verdict: different" in tight.stdout


def test_a_missing_blink_is_listed_and_the_json_says_so(sessions: Path, tmp_path: Path) -> None:
    def drop_first(kind: str, header: list[str], rows: list[list[str]]) -> list[list[str]]:
        return [r for r in rows if kind != "blinks" or r[0] != "1"]

    _rewrite(sessions / "a" / "rec", tmp_path / "b" / "rec", drop_first)
    out = tmp_path / "cmp.json"
    proc = _cli("compare", sessions / "a" / "rec", tmp_path / "b" / "rec", "--json", out)
    assert proc.returncode == 1, proc.stderr
    assert "only in A: blink 1, frames " in proc.stdout and "verdict: different" in proc.stdout
    report = json.loads(out.read_text())
    assert report["verdict"] == "different" and report["max_openness_diff"] == 0.0
    assert [e["blink"] for e in report["blinks"]["unmatched_a"]] == ["1"] and report["blinks"][
        "unmatched_b"
    ] == []
    assert report["blinks"]["matched"] == report["blinks"]["a"] - 1


def test_another_eye_model_is_a_real_difference(sessions: Path) -> None:
    c = compare_sessions(sessions / "a" / "rec", sessions / "mesh" / "rec")
    assert c.verdict == "different" and c.max_openness_diff > 10 * DEFAULT_TOLERANCE
    # the same face boxes but for a few frames: lids uses a keyframe's new box 10 ms
    # (keyframe_lag_ms) after the face mesh model does, which works on the frame itself; the
    # openness differs by much more than the box
    assert c.frames_common == c.frames_a == c.frames_b and c.max_diff["face_x0"][0] < 5.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{a}/nothing", "{a}/rec"], "no session 'nothing'"),
        (
            ["{a}/rec", "{a}/rec", "--json", "{a}/rec.frames.csv"],
            "writing it would destroy that input",
        ),
        (["{a}/rec", "{a}/rec", "--tolerance", "-1"], "--tolerance"),
    ],
)
def test_user_errors_are_one_line(sessions: Path, args: list[str], message: str) -> None:
    proc = _cli("compare", *[a.format(a=sessions / "a") for a in args])
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    # argparse's usage line, then its one error line
    assert len(proc.stderr.strip().splitlines()) <= 2
