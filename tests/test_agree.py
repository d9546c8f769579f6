"""``eyeblink agree``: automatic against corrected blinks, and two raters, on sessions whose
events are known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from review_session import BLINKS, write_session


def corrections(stem: str, **fields: Any) -> str:
    return json.dumps(
        {
            "format": "eyeblink.corrections",
            "format_version": 1,
            "stem": stem,
            "blinks": [],
            "added": [],
            "excluded": [],
            "excluded_trials": [],
            **fields,
        }
    )


def test_one_rejected_and_one_added_blink(tmp_path: Path) -> None:
    session = write_session(tmp_path / "out", "s1")
    (session.parent / "s1.corrections.json").write_text(
        corrections(
            "s1",
            blinks=[
                {
                    "start_s": BLINKS[1][0],
                    "end_s": BLINKS[1][0] + BLINKS[1][1],
                    "decision": "reject",
                },
                {
                    "start_s": BLINKS[2][0],
                    "end_s": BLINKS[2][0] + BLINKS[2][1],
                    "decision": "retime",
                    "new_start_s": BLINKS[2][0] + 0.02,
                    "new_end_s": BLINKS[2][0] + BLINKS[2][1],
                },
            ],
            added=[{"start_s": 2.4, "end_s": 2.6}],
        )
    )  # inside trial 1's window
    out = tmp_path / "agree.json"
    proc = run_cli("agree", session, "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert "precision 0.750, recall 0.750, F1 0.750" in proc.stdout
    r = json.loads(out.read_text())
    e = r["sessions"][0]["events"]
    # reference: 3 kept + 1 added; scored: the detector's 4; 3 pairs
    assert (e["reference_events"], e["scored_events"], e["hits"]) == (4, 4, 3)
    assert e["precision"] == e["recall"] == e["f1"] == 0.75
    # the retimed blink: the detector's onset 20 ms before the reviewer's, and 20 ms longer
    assert e["onset_diff_mean_ms"] == pytest.approx(-20 / 3, abs=0.5)
    assert e["duration_diff_mean_ms"] == pytest.approx(20 / 3, abs=0.5)
    trials = r["sessions"][0]["trials"]
    assert [t["trial"] for t in trials] == ["1", "2", "3"]
    assert (trials[0]["reference_events"], trials[0]["scored_events"], trials[0]["agree"]) == (
        1,
        0,
        False,
    )
    assert r["total"]["f1"] == 0.75


def test_two_raters_and_a_folder(tmp_path: Path) -> None:
    session = write_session(tmp_path / "out", "s1")
    reject = {"start_s": BLINKS[0][0], "end_s": BLINKS[0][0] + BLINKS[0][1], "decision": "reject"}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(corrections("s1", blinks=[reject]))
    b.write_text(corrections("s1"))  # rater B keeps all four
    proc = run_cli("agree", session, "--corrections", a, b)
    assert proc.returncode == 0, proc.stderr
    # B's 4 events against A's 3: 3 pairs, precision 3/4, recall 1
    assert "precision 0.750, recall 1.000, F1 0.857" in proc.stdout
    proc = run_cli("agree", session, "--corrections", a, a)
    assert "F1 1.000" in proc.stdout
    # a folder: the sessions that have corrections, pooled
    session2 = write_session(tmp_path / "out", "s2")
    (session.parent / "s1.corrections.json").write_text(corrections("s1", blinks=[reject]))
    (session2.parent / "s2.corrections.json").write_text(corrections("s2"))
    proc = run_cli("agree", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "all 2 sessions: precision 0.875, recall 1.000" in proc.stdout


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda d: None, "no corrections file"),
        (
            lambda d: (d / "s1.corrections.json").write_text("[]"),
            "is not an eyeblink corrections file",
        ),
    ],
)
def test_agree_without_usable_corrections_is_one_line(
    tmp_path: Path, make: Any, problem: str
) -> None:
    session = write_session(tmp_path / "out", "s1")
    make(session.parent)
    proc = run_cli("agree", session)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0], proc.stderr


@pytest.mark.slow
def test_agree_on_the_demo_with_the_planted_blinks_as_corrections(tmp_path: Path) -> None:
    """The demo's detections against its planted blinks written as a reviewer would: F1 1.0; then a
    copy with one blink rejected and one added gives the precision and recall that follow."""
    out = tmp_path / "demo"
    proc = run_cli("demo", "-o", out, "--duration", "4", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import csv

    with (out / "demo.blinks.csv").open(newline="") as fh:
        auto = list(csv.DictReader(fh))
    planted = json.loads((out / "demo.truth.json").read_text())["blinks"]
    n = len(auto)
    assert n >= 3
    # planted as corrections: every detection overlapping a planted blink accepted, any other
    # rejected, every planted blink no detection overlaps added
    decisions, added = [], []
    for r in auto:
        a, b = float(r["start_s"]), float(r["end_s"])
        hit = any(a <= p["end_s"] and p["onset_s"] <= b for p in planted)
        decisions.append({"start_s": a, "end_s": b, "decision": "accept" if hit else "reject"})
    for p in planted:
        if not any(
            float(r["start_s"]) <= p["end_s"] and p["onset_s"] <= float(r["end_s"]) for r in auto
        ):
            added.append({"start_s": p["onset_s"], "end_s": p["end_s"]})
    (out / "demo.corrections.json").write_text(corrections("demo", blinks=decisions, added=added))
    proc = run_cli("agree", out / "demo")
    assert proc.returncode == 0, proc.stderr
    assert "precision 1.000, recall 1.000, F1 1.000" in proc.stdout, proc.stdout
    # one blink rejected, one added (in a quiet second of the recording)
    times = sorted(float(r["start_s"]) for r in auto)
    quiet = next(t + 0.3 for t in [0.0, *times] if not any(t + 0.2 < s < t + 0.7 for s in times))
    decisions[0]["decision"] = "reject"
    (out / "demo.corrections.json").write_text(
        corrections(
            "demo", blinks=decisions, added=[*added, {"start_s": quiet, "end_s": quiet + 0.15}]
        )
    )
    proc = run_cli("agree", out / "demo", "--json", tmp_path / "a.json")
    e = json.loads((tmp_path / "a.json").read_text())["sessions"][0]["events"]
    assert (e["reference_events"], e["scored_events"], e["hits"]) == (n, n, n - 1)
    assert e["precision"] == pytest.approx((n - 1) / n) and e["recall"] == pytest.approx(
        (n - 1) / n
    )
