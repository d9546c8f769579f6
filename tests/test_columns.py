"""The frames.csv columns are declared once (eyeblink.outputs.columns): a column added to the table reaches the CSV
header, its values, the docs' column reference, the workers' records and a live row, with no other edit."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eyeblink.outputs import columns
from eyeblink.outputs.columns import FRAME_TABLE, FrameColumn
from eyeblink.outputs.export import FRAME_COLUMN_DOCS, FRAME_COLUMNS, read_table

ROOT = Path(__file__).resolve().parents[1]


def _docs_hook():
    spec = importlib.util.spec_from_file_location("eyeblink_docs_reference_columns",
                                                  ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _patch_mean(r) -> float | None:
    """A column only a worker can compute from its own data: the mean grey level of the eye patches."""
    return float(np.mean(r.eye_patches)) if r.eye_patches is not None else None


#: two new columns: one the sink computes from the frame result, one each worker computes and sends in its record
EAR_GAP = FrameColumn("ear_gap", "ratio", "left minus right eye openness (a test column)", float,
                      value="r.ear_left - r.ear_right")
PATCH_MEAN = FrameColumn("patch_mean", "grey level", "mean of the eye patches (a test column)", float,
                         worker=_patch_mean)


def test_the_default_table_is_the_contract() -> None:
    """FRAME_COLUMNS, their docs and the live row's fields are the table's, in file order."""
    from eyeblink.runtime.live.pipeline import LIVE_FRAME_COLUMNS
    from eyeblink.runtime.live.publish import LiveRow

    assert FRAME_TABLE.names == FRAME_COLUMNS
    assert FRAME_COLUMNS[:3] == ("frame", "timestamp_s", "face") and FRAME_COLUMNS[-1] == "closure"
    assert list(FRAME_COLUMN_DOCS) == list(FRAME_COLUMNS)
    assert LiveRow._fields == (*FRAME_COLUMNS, "dropped", "arrival_time", "sent_time")
    assert (*FRAME_COLUMNS, "dropped") == LIVE_FRAME_COLUMNS
    assert FRAME_TABLE.record_fields == []  # no column is computed in the workers by default: the record is as before


def test_a_bad_column_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="exactly one of value"):
        FrameColumn("x", "u", "m", float)
    with pytest.raises(ValueError, match="named twice"):
        FRAME_TABLE.extended(FrameColumn("ear", "u", "m", float, value="ear"))
    with pytest.raises(ValueError, match="identifier"):
        FrameColumn("dropped", "u", "m", int, value="0")


@pytest.mark.slow
def test_a_column_added_to_the_table_reaches_header_docs_records_and_live_rows(tmp_path: Path, monkeypatch) -> None:
    """A temporary table with two more columns, installed before the run: a real `process` of a synthetic
    recording writes them (the worker's through its record, with two workers and with one process alike), the docs'
    reference describes them and a live row carries them."""
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
        assert (summary.get("parallel") or {}).get("workers", 1) == workers  # two: the multiprocess pipeline
        cell = {name: k for k, name in enumerate(header)}
        measured = [r for r in rows if r[cell["face"]] == "1" and r[cell["ear_left"]] and r[cell["ear_right"]]]
        assert len(measured) > len(rows) // 2
        for r in measured:
            assert float(r[cell["ear_gap"]]) == pytest.approx(float(r[cell["ear_left"]]) - float(r[cell["ear_right"]]),
                                                              abs=1e-6)
            assert 0.0 < float(r[cell["patch_mean"]]) < 255.0
    # the worker column went through the records of the multiprocess pipeline: the same bytes as one process
    assert got[1] == got[2]

    # the docs' column reference, generated from the table in use
    page = _docs_hook().GENERATORS["columns-frames"]()
    assert "| 15 | `ear_gap` | ratio | left minus right eye openness (a test column) |" in page
    assert "| 16 | `patch_mean` | grey level | mean of the eye patches (a test column) |" in page

    # a live row: the tap turns a written row (and its dropped cell) into the table's row type
    from eyeblink.runtime.live.sinks import Sink

    seen = []

    class Rows(Sink):
        def row(self, r: Any, published: bool) -> None:
            seen.append(r)

    tap = LiveTap()
    tap.add(Rows())
    first = rows[-1]
    tap.row([*(int(v) if cell[name] in (0, 2, 7) else (float(v) if v else None) for name, v in zip(header, first,
                                                                                                     strict=True)), 0])
    (live,) = seen
    assert live.ear_gap == pytest.approx(float(first[cell["ear_gap"]]))
    assert live.patch_mean == float(first[cell["patch_mean"]])
    assert live.frame == int(first[0]) and live.dropped == 0 and math.isnan(live.arrival_time)
    assert type(live).__name__ == "LiveRow" and type(live)._fields[-5:] == ("ear_gap", "patch_mean", "dropped",
                                                                           "arrival_time", "sent_time")
