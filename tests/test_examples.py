"""``Session.plot()`` and the notebook in ``examples/``, run as a user runs it (a real Jupyter
kernel)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from review_session import BLINKS, TRIALS, write_session

ROOT = Path(__file__).resolve().parents[1]


def test_session_plot_shows_traces_blinks_by_source_and_trials(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import eyeblink

    session = write_session(tmp_path / "out", "s1")
    (session.parent / "s1.corrections.json").write_text(
        json.dumps(
            {
                "format": "eyeblink.corrections",
                "format_version": 1,
                "stem": "s1",
                "blinks": [
                    {
                        "start_s": BLINKS[0][0],
                        "end_s": BLINKS[0][0] + BLINKS[0][1],
                        "decision": "reject",
                    },
                    {
                        "start_s": BLINKS[1][0],
                        "end_s": BLINKS[1][0] + BLINKS[1][1],
                        "decision": "accept",
                    },
                ],
                "added": [{"start_s": 8.5, "end_s": 8.7}],
                "excluded": [],
                "excluded_trials": [3],
            }
        )
    )
    s = eyeblink.load(session)
    fig = s.plot()
    axes = fig.get_axes()
    assert len(axes) == 2  # openness, closure
    assert [ln.get_label() for ln in axes[0].get_lines()[:2]] == ["left eye", "right eye"]
    spans = [p for p in axes[0].patches]
    assert len(spans) == len(s.blinks) == 4  # 3 kept + 1 added
    labels = {t.get_text() for t in axes[0].get_legend().get_texts()}
    assert {"blink (accepted)", "blink (added)", "blink"} <= labels
    vlines = [ln for ln in axes[1].get_lines() if len(set(ln.get_xdata())) == 1]
    assert len(vlines) == 2 * len(TRIALS)  # CS and US of each trial
    grey = [ln for ln in vlines if ln.get_color() == "#999999"]
    # trial 3: excluded
    assert sorted(ln.get_xdata()[0] for ln in grey) == [TRIALS[2], TRIALS[2] + 0.3]
    out = tmp_path / "s1.png"
    fig.savefig(out)
    assert out.stat().st_size > 10_000
    part = s.plot(start_s=2.5, end_s=4.5)
    assert len(part.get_axes()[0].patches) == 1 and part.get_axes()[0].get_xlim() == (2.5, 4.5)


@pytest.mark.slow
def test_the_example_notebook_runs(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    path = ROOT / "examples" / "review_and_agree.ipynb"
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # a stream's text as printed: the kernel may flush one print in two outputs ("1" and " rejected,
    # ...")
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "automatic against planted: precision 1.0, recall 1.0, F1 1.0" in text, text
    m = re.search(
        r"precision ([\d.]+) \(expected ([\d.]+)\), recall ([\d.]+) \(expected ([\d.]+)\)", text
    )
    assert m and m.group(1) == m.group(2) and m.group(3) == m.group(4) and float(m.group(1)) < 1, (
        text
    )
    assert "1 rejected, 1 added" in text, text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, "the notebook shows the session's plot"
    assert (tmp_path / "results" / "demo.corrections.json").is_file()
