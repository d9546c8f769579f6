"""The frames.csv columns are declared once (eyeblink.outputs.columns): a column added to the table
reaches the CSV header, its values, the docs' column reference, the workers' records and a live row,
with no other edit."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from eyeblink.outputs import columns
from eyeblink.outputs.columns import FRAME_TABLE, FrameColumn
from eyeblink.outputs.export import FRAME_COLUMN_DOCS, FRAME_COLUMNS, read_table

ROOT = Path(__file__).resolve().parents[1]


def _docs_hook():
    spec = importlib.util.spec_from_file_location(
        "eyeblink_docs_reference_columns", ROOT / "docs" / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _patch_mean(r) -> float | None:
    """A column only a worker can compute from its own data: the mean grey level of the eye
    patches."""
    return float(np.mean(r.eye_patches)) if r.eye_patches is not None else None


#: two new columns: one the sink computes from the frame result, one each worker computes and sends
#: in its record
EAR_GAP = FrameColumn(
    "ear_gap",
    "ratio",
    "left minus right eye openness (a test column)",
    float,
    value="r.ear_left - r.ear_right",
)
PATCH_MEAN = FrameColumn(
    "patch_mean", "grey level", "mean of the eye patches (a test column)", float, worker=_patch_mean
)


def test_the_default_table_is_the_contract() -> None:
    """FRAME_COLUMNS, their docs and the live row's fields are the table's, in file order."""
    from eyeblink.runtime.live.pipeline import LIVE_FRAME_COLUMNS
    from eyeblink.runtime.live.publish import LiveRow

    assert FRAME_TABLE.names == FRAME_COLUMNS
    assert FRAME_COLUMNS[:3] == ("frame", "timestamp_s", "face") and FRAME_COLUMNS[-1] == "closure"
    assert list(FRAME_COLUMN_DOCS) == list(FRAME_COLUMNS)
    assert LiveRow._fields == (*FRAME_COLUMNS, "dropped", "arrival_time", "sent_time")
    assert (*FRAME_COLUMNS, "dropped") == LIVE_FRAME_COLUMNS
    # no column is computed in the workers by default: the record is as before
    assert FRAME_TABLE.record_fields == []


def test_a_bad_column_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="exactly one of value"):
        FrameColumn("x", "u", "m", float)
    with pytest.raises(ValueError, match="named twice"):
        FRAME_TABLE.extended(FrameColumn("ear", "u", "m", float, value="ear"))
    with pytest.raises(ValueError, match="identifier"):
        FrameColumn("dropped", "u", "m", int, value="0")


@pytest.mark.slow
def test_a_column_added_to_the_table_reaches_header_docs_records_and_live_rows(
    tmp_path: Path, monkeypatch
) -> None:
    """A temporary table with two more columns, installed before the run: a real `process` of a
    synthetic recording writes them (the worker's through its record, with two workers and with one
    process alike), the docs' reference describes them and a live row carries them."""
    import eyeblink
    from eyeblink.lab.synth import SynthConfig, write_recording
    from eyeblink.runtime.live.publish import LiveTap

    video = tmp_path / "clip.avi"
    write_recording(video, SynthConfig.demo(1.0, mjpeg_qscale=4))
    table = FRAME_TABLE.extended(EAR_GAP, PATCH_MEAN)
    monkeypatch.setattr(columns, "FRAME_TABLE", table)

    got = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        eyeblink.process(video, out, workers=workers)
        header, rows = read_table(out / "clip.frames.csv")
        assert tuple(header) == (*FRAME_COLUMNS, "ear_gap", "patch_mean")
        got[workers] = (out / "clip.frames.csv").read_bytes()
        summary = json.loads((out / "clip.summary.json").read_text())
        # two: the multiprocess pipeline
        assert (summary.get("parallel") or {}).get("workers", 1) == workers
        cell = {name: k for k, name in enumerate(header)}
        measured = [
            r
            for r in rows
            if r[cell["face"]] == "1" and r[cell["ear_left"]] and r[cell["ear_right"]]
        ]
        assert len(measured) > len(rows) // 2
        for r in measured:
            assert float(r[cell["ear_gap"]]) == pytest.approx(
                float(r[cell["ear_left"]]) - float(r[cell["ear_right"]]), abs=1e-6
            )
            assert 0.0 < float(r[cell["patch_mean"]]) < 255.0
    # the worker column went through the records of the multiprocess pipeline: the same bytes as one
    # process
    assert got[1] == got[2]

    # the docs' column reference, generated from the table in use
    page = _docs_hook().GENERATORS["columns-frames"]()
    assert "| 15 | `ear_gap` | ratio | left minus right eye openness (a test column) |" in page
    assert "| 16 | `patch_mean` | grey level | mean of the eye patches (a test column) |" in page

    # a live row: the tap turns a written row (and its dropped cell) into the table's row type
    from eyeblink.runtime.live.sinks import Row, Sink

    seen = []

    class Rows(Sink):
        takes = (Row,)

        def put(self, item: Any) -> None:
            seen.append(item.row)

    tap = LiveTap()
    tap.add(Rows())
    first = rows[-1]
    tap.row(
        [
            *(
                int(v) if cell[name] in (0, 2, 7) else (float(v) if v else None)
                for name, v in zip(header, first, strict=True)
            ),
            0,
        ]
    )
    (live,) = seen
    assert live.ear_gap == pytest.approx(float(first[cell["ear_gap"]]))
    assert live.patch_mean == float(first[cell["patch_mean"]])
    assert live.frame == int(first[0]) and live.dropped == 0 and math.isnan(live.arrival_time)
    assert type(live).__name__ == "LiveRow" and type(live)._fields[-5:] == (
        "ear_gap",
        "patch_mean",
        "dropped",
        "arrival_time",
        "sent_time",
    )


# ---------------------------------------------------------------- LSL, NWB and the report read the
# same declaration

#: the LSL sample's channels as consumers know them (labels, units, types, order): never to change
TODAYS_LSL_CHANNELS = (
    ("openness_left", "ratio", "EAR"),
    ("openness_right", "ratio", "EAR"),
    ("closure", "normalized", "FEC"),
    ("face", "boolean", "Presence"),
    ("frame", "count", "Index"),
    ("age", "ms", "Latency"),
)

#: a column declared in LSL and NWB as well as frames.csv (a test column)
EAR_SUM = FrameColumn(
    "ear_sum",
    "ratio",
    "left plus right eye openness (a test column)",
    float,
    value="r.ear_left + r.ear_right",
    lsl=columns.LslChannel("openness_sum", "ratio", "EAR"),
    nwb=columns.NwbSeries(
        "dimensionless",
        "sum of the eyes' EAR, A_full "
        "{calibration.full_amplitude:.3g} ({calibration.method}) {{braces}}",
    ),
)


def test_lsl_nwb_and_report_lists_are_todays() -> None:
    """The lists derived from FRAME_TABLE are the ones LSL consumers, NWB readers and the report
    had before."""
    from eyeblink.runtime.live.sinks.lsl import LSL_CHANNELS
    from eyeblink.signals.closure import ClosureCalibration

    assert LSL_CHANNELS == TODAYS_LSL_CHANNELS
    assert FRAME_TABLE.lsl_fields == ("ear_left", "ear_right", "closure", "face", "frame", "age_ms")
    cal = ClosureCalibration(0.715976, "responses")
    assert [(n, d.unit, d.describe(cal), s) for n, d, s in FRAME_TABLE.nwb_series] == [
        (
            "ear_left",
            "dimensionless",
            "subject's left eye aspect ratio (dlib points 42-47); NaN: not measured",
            "ear_left",
        ),
        (
            "ear_right",
            "dimensionless",
            "subject's right eye aspect ratio (dlib points 36-41)",
            "ear_right",
        ),
        ("ear", "dimensionless", "mean EAR of the eyes measured", "ear"),
        (
            "baseline_ear",
            "dimensionless",
            "running open-eye baseline EAR (warm-up back-filled)",
            "baseline",
        ),
        (
            "closure",
            "fraction",
            "fraction of eyelid closure (FEC): (1 - EAR/baseline) / 0.715976; 0 = open baseline, "
            "1 = full closure (calibration: responses)",
            "closure",
        ),
    ]
    assert [(n, t.label, t.panel) for n, t, _ in FRAME_TABLE.report_traces] == [
        ("ear_left", "openness left eye", "ear"),
        ("ear_right", "openness right eye", "ear"),
        ("closure", "closure (FEC)", "closure"),
    ]
    # a new LSL channel goes after today's (their positions hold)
    assert FRAME_TABLE.extended(EAR_SUM).lsl_channels == (
        *TODAYS_LSL_CHANNELS,
        ("openness_sum", "ratio", "EAR"),
    )


def test_a_column_declared_for_lsl_reaches_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real pylsl outlet of a table with one more column: the channel is described and its
    value is sent."""
    pylsl = pytest.importorskip("pylsl")
    import os
    import time

    from eyeblink.runtime.live.sinks.lsl import LslOutlets

    table = FRAME_TABLE.extended(EAR_SUM)
    monkeypatch.setattr(columns, "FRAME_TABLE", table)
    name = f"eyeblink-columns-test-{os.getpid()}"
    outlets = LslOutlets(name, source="cam", stem="s", nominal_fps=500.0, eye_model="lids")
    try:
        (info,) = pylsl.resolve_byprop("source_id", "eyeblink:cam:s", 1, 30)
        inlet = pylsl.StreamInlet(info, 360)
        full = inlet.info(10)
        assert full.channel_count() == 7
        ch, described = full.desc().child("channels").child("channel"), []
        while not ch.empty():
            described.append(
                (ch.child_value("label"), ch.child_value("unit"), ch.child_value("type"))
            )
            ch = ch.next_sibling()
        assert described == [*TODAYS_LSL_CHANNELS, ("openness_sum", "ratio", "EAR")]
        inlet.open_stream(10)
        # a live row of this table: the columns, then dropped
        values = [7, 1.5, 1, 0.25, 0.5, 0.375, 0.3, 1, 0.9, 1.0, 2.0, 3.0, 4.0, 0.1, 0.75, 0]
        assert len(values) == len(table.names) + 1
        now = time.perf_counter()
        row = table.live_row(values, now - 0.002, now)
        deadline = time.monotonic() + 10
        sample = None
        while sample is None and time.monotonic() < deadline:
            outlets.push(row, pylsl.local_clock())
            sample, _ = inlet.pull_sample(timeout=0.2)
        assert sample is not None
        assert sample[:5] == [0.25, 0.5, 0.1, 1.0, 7.0] and sample[6] == 0.75
        assert sample[5] == pytest.approx(2.0, abs=1e-6)  # age, ms
        inlet.close_stream()
    finally:
        outlets.close()


def test_a_column_declared_for_nwb_reaches_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real pynwb file of a table with one more column: its series has the declared unit and
    description (formatted with the session's calibration) and the frames.csv column's values."""
    pytest.importorskip("pynwb")
    from pynwb import NWBHDF5IO

    from eyeblink.config import RunConfig
    from eyeblink.outputs.nwb import write_nwb
    from eyeblink.outputs.session import SessionData, shown_columns
    from eyeblink.signals.closure import ClosureCalibration

    monkeypatch.setattr(columns, "FRAME_TABLE", FRAME_TABLE.extended(EAR_SUM))
    # read from frames.csv for NWB: no SessionData field of that name
    assert shown_columns() == ("ear_sum",)
    n = 5
    t = np.arange(n) / 100.0
    ear = np.full(n, 0.3)
    cal = ClosureCalibration(0.5, "default")
    data = SessionData(
        np.arange(n),
        t,
        ear,
        ear,
        ear,
        ear,
        np.zeros(n),
        np.zeros(n),
        cal,
        columns={"ear_sum": np.array([0.6, 0.6, np.nan, 0.5, 0.4])},
    )
    blink = SimpleNamespace(
        start_s=0.01, end_s=0.03, peak_s=0.02, duration_ms=20.0, amplitude=0.4, complete=True
    )
    path = write_nwb(
        data,
        [blink],
        RunConfig(),
        tmp_path / "s.nwb",  # type: ignore[list-item]
        {"input": str(tmp_path / "s.avi")},
    )
    with NWBHDF5IO(str(path), mode="r") as io:
        traces = io.read().processing["behavior"]["EyelidTraces"]
        assert list(traces.time_series) == [
            "baseline_ear",
            "closure",
            "ear",
            "ear_left",
            "ear_right",
            "ear_sum",
        ]
        s = traces["ear_sum"]
        assert s.unit == "dimensionless"
        assert s.description == "sum of the eyes' EAR, A_full 0.5 (default) {braces}"
        np.testing.assert_array_equal(s.data[:], [0.6, 0.6, np.nan, 0.5, 0.4])
        np.testing.assert_array_equal(s.timestamps[:], t)


def test_the_lab_programs_guide_lists_the_lsl_channels() -> None:
    """The LSL channel table of the lab-programs guide is LSL_CHANNELS (labels, units, types, in
    order)."""
    from eyeblink.runtime.live.sinks.lsl import LSL_CHANNELS

    text = (ROOT / "docs" / "guides" / "lab-programs.md").read_text(encoding="utf-8")
    table = text[text.index("| Channel | Unit | Type |") :].split("\n\n")[0].splitlines()[2:]
    rows = [tuple(c.strip().strip("`") for c in line.strip("|").split("|")[:3]) for line in table]
    assert tuple(rows) == LSL_CHANNELS
