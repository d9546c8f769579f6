"""The report as the place to check and correct a session by eye, driven in a real headless Chromium
(Playwright's Python package with the system ``chromium``): hostile text stays text, blinks are
accepted, rejected, retimed and added, spans and trials excluded, the corrections saved and read
back by ``eyeblink report``, ``process`` and the API."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CHROMIUM, WINDOWS_RULES, needs_chromium, run_cli
from review_session import BLINKS, MISSED, TRIALS, write_session


class Page:
    """A Playwright page with every dialog, console message and page error recorded."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(str(e)))


@contextlib.contextmanager
def browser_page(html: Path) -> Iterator[Page]:
    pw_api = pytest.importorskip("playwright.sync_api")
    with pw_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            ctx = browser.new_context(
                accept_downloads=True, viewport={"width": 1400, "height": 1000}
            )
            page = Page(ctx.new_page())
            page.page.goto(html.resolve().as_uri())
            page.page.wait_for_selector('#status[data-ok="1"]', state="attached", timeout=30_000)
            yield page
        finally:
            browser.close()


# ------------------------------------------------------------------------------------------ text
# stays text

HOSTILE = {
    "trial_type": "<img src=x onerror=alert(1)>",
    "cs_type": '"><script>alert(2)</script>',
    "us_type": "{{JS}}<svg onload=alert(3)>",
}
#: a stem a recording can have on every OS (Windows refuses <>:"|?* in a file name), and one only
#: POSIX allows
HOSTILE_STEMS = [
    "&lt;img src=x onerror=alert(4)&gt; & {{DATA}} 'x'",
    "<img src=x onerror=alert(4)> & {{DATA}}",
]


@needs_chromium
@pytest.mark.parametrize(
    "stem",
    [
        HOSTILE_STEMS[0],
        pytest.param(
            HOSTILE_STEMS[1],
            marks=pytest.mark.skipif(
                WINDOWS_RULES, reason="Windows refuses < and > in a file name"
            ),
        ),
    ],
    ids=["any OS", "POSIX"],
)
def test_hostile_labels_file_names_and_summary_text_are_shown_as_text(
    tmp_path: Path, stem: str
) -> None:
    session = write_session(
        tmp_path / "out",
        stem,
        labels=HOSTILE,
        summary_extra={
            "warnings": ["<b onmouseover=alert(5)>warned</b>"],
            "input": "</script><script>alert(6)</script>.avi",
            "settings": {"note": "<!-- <script>alert(7)</script>"},
            "blink_rate_per_min": "<img src=x onerror=alert(8)>",
        },
    )
    proc = run_cli("report", session)
    assert proc.returncode == 0, proc.stderr
    html = session.parent / f"{stem}.report.html"
    with browser_page(html) as p:
        page = p.page
        page.mouse.move(300, 300)  # hover events, if any markup had got through
        page.wait_for_timeout(300)
        assert p.dialogs == [] and p.errors == []
        assert [m for m in p.console if m.startswith("error")] == []
        # no element the files asked for: the only images are none (no crops), no injected script or
        # svg
        assert page.locator("img").count() == 0 and page.locator("svg").count() == 0
        assert page.locator("script").count() == 2  # the data block and the viewer
        rows = page.locator("#trial-table tbody tr")
        assert rows.count() == 3
        assert rows.nth(0).locator("td").nth(1).text_content() == HOSTILE["trial_type"]
        # the stem is the page's title and heading, as written
        assert page.title() == f"eyeblink report: {stem}"
        assert page.locator("h1 .stem").text_content() == stem
        assert "<b onmouseover=alert(5)>warned</b>" in page.locator("#warnings").text_content()
        assert "<img src=x onerror=alert(8)>" in page.locator(".cards").text_content()
        assert page.locator("#summary b").count() == 0
        # the data block reads back every label whole
        data = json.loads(page.locator("#report-data").text_content())
        assert data["stem"] == stem


# ------------------------------------------------------------------------------------------
# reviewing


def _csv(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _x_of(page: Any, t: float) -> float:
    """The page x (CSS px) of time ``t`` (seconds from the first frame) in the trace's current
    view."""
    t0, t1, left, width = map(float, page.get_attribute("#status", "data-view").split(","))
    box = page.locator("#trace").bounding_box()
    return box["x"] + left + (t - t0) / (t1 - t0) * width


def _select_span(page: Any, a: float, b: float) -> None:
    """Shift + drag over [a, b] seconds on the trace."""
    box = page.locator("#trace").bounding_box()
    y = box["y"] + box["height"] / 2
    page.keyboard.down("Shift")
    page.mouse.move(_x_of(page, a), y)
    page.mouse.down()
    page.mouse.move(_x_of(page, (a + b) / 2), y, steps=3)
    page.mouse.move(_x_of(page, b), y, steps=3)
    page.mouse.up()
    page.keyboard.up("Shift")


def _save(page: Any, into: Path) -> Path:
    with page.expect_download() as dl:
        page.keyboard.press("s")
    d = dl.value
    target = into / d.suggested_filename
    d.save_as(target)
    return target


def _report(tmp_path: Path) -> tuple[Path, Path]:
    """The review session ``s1`` (written under ``tmp_path/out``) and its report, made by
    ``eyeblink report``."""
    session = write_session(tmp_path / "out", "s1")
    assert run_cli("report", session).returncode == 0
    return session, session.parent / "s1.report.html"


@needs_chromium
def test_keyboard_only_review_then_report_rereads_the_corrections(tmp_path: Path) -> None:
    session, html = _report(tmp_path)
    with browser_page(html) as p:
        page = p.page
        page.locator("body").click(position={"x": 5, "y": 5})
        # blinks 1..4: accept, reject, accept, accept
        keys = ["n", "a", "n", "r", "n", "a", "n", "a"]
        for k in keys:
            page.keyboard.press(k)
        st = page.locator("#status")
        assert st.get_attribute("data-reviewed") == "4" and st.get_attribute("data-kept") == "3"
        assert st.get_attribute("data-dirty") == "1"
        assert page.locator("#blink-count").text_content() == "3"
        # 3 blinks in 9.99 s: the cards follow
        assert page.locator("#blink-rate").text_content() == "18/min"
        assert page.locator("#blink-table tbody tr.review-reject").count() == 1
        page.locator("#reviewer").fill("A. Rater")
        page.locator("body").click(position={"x": 5, "y": 5})
        saved = _save(page, tmp_path)
        assert (
            st.get_attribute("data-dirty") == "0" and st.get_attribute("data-saved") == "download"
        )
        assert (
            p.errors == []
            and p.dialogs == []
            and [m for m in p.console if m.startswith("error")] == []
        )
    assert saved.name == "s1.corrections.json"
    doc = json.loads(saved.read_text())
    assert (
        doc["format"] == "eyeblink.corrections"
        and doc["stem"] == "s1"
        and doc["reviewer"] == "A. Rater"
    )
    assert doc["eyeblink_version"] and doc["saved_at"]
    assert [(d["start_s"], d["decision"]) for d in doc["blinks"]] == [
        (BLINKS[0][0], "accept"),
        (BLINKS[1][0], "reject"),
        (BLINKS[2][0], "accept"),
        (BLINKS[3][0], "accept"),
    ]
    # the download goes beside the session; the report reads it back and the tables follow
    shutil.move(saved, session.parent / saved.name)
    proc = run_cli("report", session)
    assert proc.returncode == 0, proc.stderr
    rows = _csv(session.parent / "s1.blinks.csv")
    assert [r["source"] for r in rows] == ["accepted"] * 3
    assert [float(r["start_s"]) for r in rows] == [BLINKS[0][0], BLINKS[2][0], BLINKS[3][0]]
    assert [r["blink"] for r in rows] == ["1", "2", "3"]
    assert len(_csv(session.parent / "s1.blinks_auto.csv")) == 4  # the detector's rows, kept
    summary = json.loads((session.parent / "s1.summary.json").read_text())
    assert summary["blinks"] == 3 and summary["corrections"]["rejected"] == 1
    assert (
        summary["corrections"]["accepted"] == 3 and summary["corrections"]["reviewer"] == "A. Rater"
    )
    # reviewing again starts from the saved decisions
    with browser_page(html) as p:
        assert p.page.locator("#status").get_attribute("data-reviewed") == "4"
        assert p.page.locator("#blink-count").text_content() == "3"


@needs_chromium
def test_reject_add_exclude_retime_and_a_trial_in_the_browser(tmp_path: Path) -> None:
    session, html = _report(tmp_path)
    with browser_page(html) as p:
        page = p.page
        page.keyboard.press("0")
        # reject blink 1: click its row, press r
        page.locator('#blink-table tbody tr[data-row="0"]').click()
        page.keyboard.press("r")
        # add the missed closure: select its span on the whole-session view, press b
        page.keyboard.press("0")
        _select_span(page, MISSED[0], MISSED[0] + MISSED[1])
        page.keyboard.press("b")
        # exclude a span around blink 4 (someone in view)
        _select_span(page, BLINKS[3][0] - 0.1, BLINKS[3][0] + 0.4)
        page.keyboard.press("e")
        # retime blink 3: select it (the view zooms on it), drag its end 50 ms later
        page.locator('#blink-table tbody tr[data-row="2"]').click()
        box = page.locator("#trace").bounding_box()
        y = box["y"] + box["height"] / 2
        end = BLINKS[2][0] + BLINKS[2][1]
        page.mouse.move(_x_of(page, end), y)
        page.mouse.down()
        page.mouse.move(_x_of(page, end + 0.05), y, steps=4)
        page.mouse.up()
        # exclude trial 2: click its row, press t
        page.locator('#trial-table tbody tr[data-row="1"]').click()
        page.keyboard.press("t")
        assert page.locator("#trial-table tbody tr.review-excluded").count() == 1
        st = page.locator("#status")
        assert st.get_attribute("data-kept") == "3"  # blinks 2, 3 (retimed) and the added one
        saved = _save(page, tmp_path)
        assert (
            p.errors == []
            and p.dialogs == []
            and [m for m in p.console if m.startswith("error")] == []
        )
    doc = json.loads(saved.read_text())
    decisions = {d["start_s"]: d for d in doc["blinks"]}
    assert decisions[BLINKS[0][0]]["decision"] == "reject"
    retimed = decisions[BLINKS[2][0]]
    assert retimed["decision"] == "retime" and retimed["new_start_s"] == BLINKS[2][0]
    assert abs(retimed["new_end_s"] - (end + 0.05)) < 0.02  # a few pixels at this zoom
    assert len(doc["added"]) == 1 and abs(doc["added"][0]["start_s"] - MISSED[0]) < 0.05
    assert doc["added"][0]["kind"] == "blink"
    assert len(doc["excluded"]) == 1 and doc["excluded_trials"] == [2]

    shutil.move(saved, session.parent / saved.name)
    assert run_cli("report", session).returncode == 0
    rows = _csv(session.parent / "s1.blinks.csv")
    assert [r["source"] for r in rows] == ["auto", "corrected", "added"]
    assert abs(float(rows[1]["end_s"]) - (end + 0.05)) < 0.02
    trials = _csv(session.parent / "s1.trials.csv")
    assert [r["excluded"] for r in trials] == ["0", "1", "0"]
    summary = json.loads((session.parent / "s1.summary.json").read_text())
    c = summary["corrections"]
    assert (
        c["rejected"],
        c["corrected"],
        c["added"],
        c["excluded_blinks"],
        c["corrected_total"],
    ) == (1, 1, 1, 1, 3)
    assert summary["blinks"] == 3 and summary["trials"]["excluded_trials"] == 1
    assert summary["trials"]["scored_trials"] == len(TRIALS) - 1
    # the rate leaves out the excluded time: 3 blinks in (9.99 s - the span)
    span = doc["excluded"][0]["end_s"] - doc["excluded"][0]["start_s"]
    assert 0.4 < span < 0.6 and summary["corrections"]["excluded_s"] == pytest.approx(
        span, abs=1e-5
    )
    assert summary["blink_rate_per_min"] == pytest.approx(3 / (9.99 - span) * 60, rel=1e-4)
    # the page says how many were corrected
    text = (session.parent / "s1.report.html").read_text()
    assert "checked by eye" in text and "3 corrected" in text


# ------------------------------------------------------------------------------------------
# corrections are data


def _corrections(stem: str, **fields: Any) -> dict[str, Any]:
    return {
        "format": "eyeblink.corrections",
        "format_version": 1,
        "stem": stem,
        "reviewer": "test",
        "saved_at": "2026-11-26T12:00:00Z",
        "eyeblink_version": "test",
        "blinks": [],
        "added": [],
        "excluded": [],
        "excluded_trials": [],
        **fields,
    }


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "is not valid JSON"),
        (json.dumps({"format": "jefapato", "blinks": []}), "is not an eyeblink corrections file"),
        (json.dumps([1, 2]), "is not an eyeblink corrections file"),
        (json.dumps(_corrections("other")), "holds corrections of session 'other', not of 's1'"),
        (json.dumps(_corrections("s1", format_version=7)), "has format_version 7"),
        (
            json.dumps(
                _corrections("s1", blinks=[{"start_s": 1.0, "end_s": 1.2, "decision": "maybe"}])
            ),
            "blinks[0].decision = 'maybe'",
        ),
        (
            json.dumps(_corrections("s1", added=[{"start_s": "soon", "end_s": 1.2}])),
            "added[0].start_s = 'soon'",
        ),
        (
            json.dumps(_corrections("s1", excluded=[{"start_s": 2.0, "end_s": 1.0}])),
            "excluded[0] ending",
        ),
        (json.dumps(_corrections("s1", excluded_trials=["two"])), "excluded_trials[0] = 'two'"),
    ],
)
def test_a_malformed_or_foreign_corrections_file_is_one_line(
    tmp_path: Path, content: str, problem: str
) -> None:
    session = write_session(tmp_path / "out", "s1")
    before = (session.parent / "s1.blinks.csv").read_bytes()
    (session.parent / "s1.corrections.json").write_text(content)
    proc = run_cli("report", session)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eyeblink: error: ") and problem in lines[0], (
        proc.stderr
    )
    assert "s1.corrections.json" in lines[0] and "save the corrections again" in lines[0]
    assert (session.parent / "s1.blinks.csv").read_bytes() == before  # nothing written
    assert not (session.parent / "s1.report.html").exists()


def test_the_report_never_writes_over_the_corrections(tmp_path: Path) -> None:
    session = write_session(tmp_path / "out", "s1")
    cpath = session.parent / "s1.corrections.json"
    cpath.write_text(json.dumps(_corrections("s1")))
    before = cpath.read_bytes()
    proc = run_cli("report", session, "-o", cpath)
    assert (
        proc.returncode != 0
        and "Traceback" not in proc.stderr
        and len(proc.stderr.strip().splitlines()) == 1
    )
    assert "corrections.json" in proc.stderr
    assert cpath.read_bytes() == before


@pytest.mark.slow
def test_process_rerun_and_the_api_keep_the_decisions(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """A real recording (one blink at 0.8 s) processed, corrected, processed again with other
    settings."""
    import eyeblink

    video = face_recording[0]
    out = tmp_path / "out"
    args = ("--workers", "1", "--no-progress", "--landmarks", "mesh")
    proc = run_cli("process", video, "-o", out, *args)
    assert proc.returncode == 0, proc.stderr
    auto = _csv(out / "subject.blinks.csv")
    assert len(auto) == 1 and "source" not in auto[0]
    a, b = float(auto[0]["start_s"]), float(auto[0]["end_s"])
    cpath = out / "subject.corrections.json"
    cpath.write_text(
        json.dumps(
            _corrections(
                "subject",
                blinks=[
                    {"start_s": a, "end_s": b, "decision": "reject"},
                    # no blink there: unmatched
                    {"start_s": 0.2, "end_s": 0.3, "decision": "accept"},
                ],
                added=[{"start_s": 0.3, "end_s": 0.45, "kind": "blink"}],
                excluded=[{"start_s": 1.3, "end_s": 1.5}],
            )
        )
    )
    before = cpath.read_bytes()
    # the rerun with another setting: the blink is detected again, the decision still holds
    proc = run_cli("process", video, "-o", out, *args, "--detect-every", "2")
    assert proc.returncode == 0, proc.stderr
    assert cpath.read_bytes() == before  # never lost, never rewritten
    rows = _csv(out / "subject.blinks.csv")
    assert [r["source"] for r in rows] == ["added"]
    assert float(rows[0]["start_s"]) == pytest.approx(0.3, abs=0.003) and rows[0]["blink"] == "1"
    assert len(_csv(out / "subject.blinks_auto.csv")) == 1
    summary = json.loads((out / "subject.summary.json").read_text())
    c = summary["corrections"]
    assert (c["rejected"], c["added"], c["accepted"]) == (1, 1, 0) and summary["blinks"] == 1
    assert [u["start_s"] for u in c["unmatched"]] == [
        0.2
    ] and "match no detected blink" in proc.stderr
    assert c["automatic"]["blinks"] == 1
    # the API reads the same
    s = eyeblink.load(out / "subject")
    assert list(s.blinks["source"]) == ["added"] and s.summary["corrections"]["rejected"] == 1
    assert s.paths["corrections"] == cpath


def test_process_stops_before_any_frame_on_a_malformed_corrections_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_session(out, "clip")
    (out / "clip.corrections.json").write_text(
        '{"format": "eyeblink.corrections", "format_version": 1, '
        '"stem": "clip", "blinks": "all of them"}'
    )
    before = (out / "clip.frames.csv").read_bytes()
    video = tmp_path / "clip.avi"
    video.write_bytes(b"")  # never opened: the corrections are checked first
    proc = run_cli("process", video, "-o", out, "--no-progress", "--workers", "1")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "clip.corrections.json has blinks = 'all of them', not a list" in lines[0]
    ), proc.stderr
    assert (out / "clip.frames.csv").read_bytes() == before


@pytest.mark.slow
@needs_chromium
def test_keyboard_only_review_of_the_demo(tmp_path: Path) -> None:
    """``eyeblink demo``'s recording reviewed with the keys alone: every blink but the last
    accepted, the last rejected, saved; the report then holds the accepted ones."""
    out = tmp_path / "demo"
    proc = run_cli("demo", "-o", out, "--duration", "4", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert run_cli("report", out / "demo").returncode == 0
    n = len(_csv(out / "demo.blinks.csv"))
    assert n >= 3
    with browser_page(out / "demo.report.html") as p:
        page = p.page
        page.locator("body").click(position={"x": 5, "y": 5})
        for k in range(n):
            page.keyboard.press("n")
            page.keyboard.press("r" if k == n - 1 else "a")
        st = page.locator("#status")
        assert st.get_attribute("data-reviewed") == str(n) and st.get_attribute("data-kept") == str(
            n - 1
        )
        # the last blink is selected, its row marked: rejected, it has no number in blinks.csv any
        # more
        cells = page.locator("#blink-table tbody tr.selected td")
        assert cells.nth(0).text_content() == "–" and cells.nth(1).text_content() == "rejected"
        saved = _save(page, tmp_path)
        assert (
            p.errors == []
            and p.dialogs == []
            and [m for m in p.console if m.startswith("error")] == []
        )
    shutil.move(saved, out / saved.name)
    assert run_cli("report", out / "demo").returncode == 0
    rows = _csv(out / "demo.blinks.csv")
    assert [r["source"] for r in rows] == ["accepted"] * (n - 1)
    summary = json.loads((out / "demo.summary.json").read_text())
    assert summary["corrections"]["accepted"] == n - 1 and summary["corrections"]["rejected"] == 1


def _page_rows(page: Any) -> list[tuple[str, str, str]]:
    """The blink table's (number, review, frames) per row, as shown."""
    out = []
    for tr in page.locator("#blink-table tbody tr").all():
        cells = tr.locator("td")
        out.append(
            (cells.nth(0).text_content(), cells.nth(1).text_content(), cells.last.text_content())
        )
    return out


@pytest.mark.slow
@needs_chromium
def test_the_demo_reviewed_to_the_frame(tmp_path: Path) -> None:
    """``eyeblink demo`` writes its report; in it blink 3 is retimed two frames earlier with ``[``
    and a missed blink added: after ``eyeblink report`` blink 3's start_frame is exactly 2 less,
    every row keeps the one duration rule, the added blink is in the table and reached with ``n``,
    the page numbers rows as blinks.csv does, and ``n`` starts at the first blink not yet reviewed.
    """
    out = tmp_path / "demo"
    proc = run_cli("demo", "-o", out, "--duration", "4", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = out / "demo.report.html"
    assert html.is_file() and "demo.report.html" in proc.stdout  # the demo writes its report
    auto = _csv(out / "demo.blinks.csv")
    assert len(auto) >= 3
    b1, b2, b3 = auto[0], auto[1], auto[2]
    f3 = int(b3["start_frame"])
    gap = (float(b1["end_s"]) + float(b2["start_s"])) / 2  # quiet eyes between blinks 1 and 2
    frames_csv = _csv(out / "demo.frames.csv")
    t0 = float(frames_csv[0]["timestamp_s"])  # the trace's times are from the first frame
    t_last = float(frames_csv[-1]["timestamp_s"])
    with browser_page(html) as p:
        page = p.page
        st = page.locator("#status")
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("n")
        page.keyboard.press("a")  # blink 1 accepted
        page.keyboard.press("n")
        page.keyboard.press("n")
        assert st.get_attribute("data-selected") == "3"
        page.keyboard.press("[")
        page.keyboard.press("[")
        assert st.get_attribute("data-selected-frames") == f"{f3 - 2}-{b3['end_frame']}"
        # the trace is drawn at the next animation frame: a callback asked for after it runs after
        # it
        page.evaluate("new Promise(r => requestAnimationFrame(() => r()))")
        labels = json.loads(st.get_attribute("data-labels"))
        assert labels and all(
            a[1] <= b[0] or b[1] <= a[0] or a[2] != b[2]
            # none over another
            for i, a in enumerate(labels)
            for b in labels[i + 1 :]
        )
        # a missed blink added between blinks 1 and 2: in the table, numbered as blinks.csv will
        # number it
        page.keyboard.press("0")
        v0, v1 = map(float, st.get_attribute("data-view").split(",")[:2])
        # the whole run, read at once (the drawing comes a frame later)
        assert v0 <= 0 and v1 >= t_last - t0
        _select_span(page, gap - t0 - 0.03, gap - t0 + 0.03)
        page.keyboard.press("b")
        rows = _page_rows(page)
        assert [r[1] for r in rows][:4] == ["accepted", "added", "–", "retimed"]
        assert [r[0] for r in rows][:4] == ["1", "2", "3", "4"]
        assert page.locator("#blink-count").text_content() == str(len(auto) + 1)
        # n from blink 1 reaches the added blink
        page.locator('#blink-table tbody tr[data-row="0"]').click()
        page.keyboard.press("n")
        assert st.get_attribute("data-selected") == "2"
        assert page.locator("#blink-table tbody tr.selected td").nth(1).text_content() == "added"
        saved = _save(page, tmp_path)
        assert p.errors == [] and [m for m in p.console if m.startswith("error")] == []
    doc = json.loads(saved.read_text())
    retime = next(d for d in doc["blinks"] if d["decision"] == "retime")
    assert retime["new_start_frame"] == f3 - 2 and retime["start_frame"] == f3
    shutil.move(saved, out / saved.name)
    assert run_cli("report", out / "demo").returncode == 0
    rows = _csv(out / "demo.blinks.csv")
    frames = {int(r["frame"]): float(r["timestamp_s"]) for r in _csv(out / "demo.frames.csv")}
    assert [r["source"] for r in rows][:4] == ["accepted", "added", "auto", "corrected"]
    corrected = rows[3]
    assert int(corrected["start_frame"]) == f3 - 2 and corrected["end_frame"] == b3["end_frame"]
    # the frame's own timestamp, no float32 on the way
    assert float(corrected["start_s"]) == frames[f3 - 2]
    for r in rows:  # one duration rule: end - start + one frame (2 ms at 500 FPS)
        assert float(r["duration_ms"]) == pytest.approx(
            (float(r["end_s"]) - float(r["start_s"])) * 1000 + 2, abs=1e-3
        ), r
    # the page after applying: blinks.csv's numbers and frames, and n starts at the first one not
    # yet reviewed
    with browser_page(html) as p:
        page = p.page
        shown = _page_rows(page)
        assert [(r[0], r[2]) for r in shown] == [
            (r["blink"], f"{r['start_frame']}–{r['end_frame']}") for r in rows
        ]
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("n")
        # detector's blink 2: not reviewed
        assert page.locator("#status").get_attribute("data-selected") == "3"


def test_applying_corrections_twice_changes_nothing(tmp_path: Path) -> None:
    from eyeblink.outputs.corrections import apply_session

    session = write_session(tmp_path / "out", "s1")
    (session.parent / "s1.corrections.json").write_text(
        json.dumps(
            _corrections(
                "s1",
                blinks=[
                    {
                        "start_s": BLINKS[0][0],
                        "end_s": BLINKS[0][0] + BLINKS[0][1],
                        "decision": "reject",
                    }
                ],
                added=[{"start_s": MISSED[0], "end_s": MISSED[0] + MISSED[1]}],
                excluded_trials=[1],
            )
        )
    )
    names = ("s1.blinks.csv", "s1.trials.csv", "s1.summary.json", "s1.blinks_auto.csv")
    apply_session(session.parent, "s1")
    first = {n: (session.parent / n).read_bytes() for n in names}
    apply_session(session.parent, "s1")
    assert {n: (session.parent / n).read_bytes() for n in names} == first
    summary = json.loads(first["s1.summary.json"])
    # the detector's, not the corrected count
    assert summary["corrections"]["automatic"]["blinks"] == len(BLINKS)


@needs_chromium
def test_saving_again_keeps_decisions_that_match_no_blink(tmp_path: Path) -> None:
    session = write_session(tmp_path / "out", "s1")
    stale = {"start_s": 9.5, "end_s": 9.6, "decision": "accept"}  # no blink there (any more)
    (session.parent / "s1.corrections.json").write_text(
        json.dumps(_corrections("s1", blinks=[stale]))
    )
    assert run_cli("report", session).returncode == 0
    html = session.parent / "s1.report.html"
    assert "correction no longer matched" in html.read_text()
    with browser_page(html) as p:
        p.page.locator("body").click(position={"x": 5, "y": 5})
        p.page.keyboard.press("n")
        p.page.keyboard.press("a")
        saved = _save(p.page, tmp_path)
    doc = json.loads(saved.read_text())
    assert stale in doc["blinks"] and len(doc["blinks"]) == 2


def test_load_warns_of_decisions_that_match_no_blink_and_the_summary_paths_are_absolute(
    tmp_path: Path,
) -> None:
    import eyeblink

    session = write_session(tmp_path / "out", "s1", summary_extra={"outputs": {}})
    stale = {"start_s": 9.5, "end_s": 9.6, "decision": "accept"}  # no blink there (any more)
    (session.parent / "s1.corrections.json").write_text(
        json.dumps(_corrections("s1", blinks=[stale]))
    )
    with pytest.warns(eyeblink.CorrectionsWarning, match="1 decision.*match no detected blink"):
        s = eyeblink.load(session)
    assert s.summary["corrections"]["unmatched"] == [stale]
    # a relative path: the summary names files absolutely
    proc = run_cli("report", "out/s1", cwd=tmp_path)
    assert proc.returncode == 0 and "match no detected blink" in proc.stderr
    summary = json.loads((session.parent / "s1.summary.json").read_text())
    assert Path(summary["corrections"]["file"]).is_absolute()
    assert Path(summary["outputs"]["blinks_auto"]).is_absolute()


def test_a_retime_lands_on_its_frames_whatever_the_times_say(tmp_path: Path) -> None:
    """A decision that names frames gets exactly them; one with times only (a file written by hand,
    or by an older report that passed times through float32: 5.0100000001 s) gets the nearest frame,
    never the next; every row keeps the detector's duration rule (end - start + one frame)."""
    from eyeblink.outputs.corrections import apply_session

    session = write_session(tmp_path / "out", "s1")
    (start, dur), (start4, dur4) = BLINKS[2], BLINKS[3]
    retimes = [
        {
            "start_s": start,
            "end_s": start + dur,
            "start_frame": 500,
            "end_frame": 525,
            "decision": "retime",
            "new_start_s": 4.98,
            "new_end_s": start + dur,
            "new_start_frame": 498,
            "new_end_frame": 525,
        },
        {
            "start_s": start4,
            "end_s": start4 + dur4,
            "decision": "retime",
            "new_start_s": 7.0100000001,
            "new_end_s": 7.2099999999,
        },
    ]
    (session.parent / "s1.corrections.json").write_text(
        json.dumps(
            _corrections("s1", blinks=retimes, added=[{"start_s": 8.4999999, "end_s": 8.70000001}])
        )
    )
    rows = apply_session(session.parent, "s1").blinks
    got = {r["source"]: [] for r in rows}
    for r in rows:
        got[r["source"]].append((r["start_frame"], r["end_frame"], r["duration_ms"]))
    assert got["corrected"] == [(498, 525, pytest.approx(280)), (701, 721, pytest.approx(210))]
    assert got["added"] == [(850, 870, pytest.approx(210))]


def test_fec_is_calibrated_on_the_blinks_the_reviewer_kept(tmp_path: Path) -> None:
    """process (finalize) calibrates FEC on these amplitudes: the rejected blink's is gone, the
    added one's is measured on the trace."""
    from eyeblink.outputs.corrections import auto_rows, calibration_amplitudes, read_frames

    session = write_session(tmp_path / "out", "s1")
    _, auto = auto_rows(session.parent, "s1")
    auto[0]["amplitude"] = "0.99"  # an artefact the reviewer rejects
    frames = read_frames(session.parent / "s1.frames.csv")
    # no corrections: the run's own
    assert calibration_amplitudes(session.parent, "s1", auto, frames) is None
    (session.parent / "s1.corrections.json").write_text(
        json.dumps(
            _corrections(
                "s1",
                blinks=[
                    {
                        "start_s": BLINKS[0][0],
                        "end_s": BLINKS[0][0] + BLINKS[0][1],
                        "decision": "reject",
                    }
                ],
                added=[{"start_s": MISSED[0], "end_s": MISSED[0] + MISSED[1]}],
            )
        )
    )
    amps = calibration_amplitudes(session.parent, "s1", auto, frames)
    assert amps is not None and 0.99 not in amps and len(amps) == len(BLINKS)
    # the added closure, measured: 1 - min EAR / baseline
    assert amps[-1] == pytest.approx(0.8, abs=0.01)


@needs_chromium
def test_retime_with_the_keys_a_frame_at_a_time(tmp_path: Path) -> None:
    session = write_session(tmp_path / "out", "s1")
    assert run_cli("report", session).returncode == 0
    with browser_page(session.parent / "s1.report.html") as p:
        page = p.page
        page.locator("body").click(position={"x": 5, "y": 5})
        # blink 3: onset +2 -1 frames, end +1 -2 frames
        for k in ("n", "n", "n", "]", "]", "}", "[", "{", "{"):
            page.keyboard.press(k)
        saved = _save(page, tmp_path)
        assert p.errors == []
    (d,) = json.loads(saved.read_text())["blinks"]
    start, dur = BLINKS[2]
    assert d["decision"] == "retime" and d["start_s"] == start
    assert d["new_start_s"] == pytest.approx(start + 0.01, abs=1e-4)  # frames are 10 ms apart
    assert d["new_end_s"] == pytest.approx(start + dur - 0.01, abs=1e-4)
