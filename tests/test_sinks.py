"""The outputs of a live run behind one interface (:mod:`eyeblink.runtime.live.sinks`): a new output is one new module,
found and fed by a real live run on the loopback sender; the tap calls only the hooks a sink has."""

from __future__ import annotations

import csv
import json
import math
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import free_port, start_sender

import eyeblink.runtime.live.sinks as sinks_pkg
from eyeblink.config import LiveConfig
from eyeblink.runtime.live.publish import LiveTap
from eyeblink.runtime.live.sinks import Sink, sink_classes, sinks_from_config
from eyeblink.runtime.live.sinks.gate import GateSink
from eyeblink.runtime.live.sinks.lsl import LslSink
from eyeblink.runtime.live.sinks.queue import QueueSink
from eyeblink.runtime.live.sinks.view import ViewOutput

#: the module a user adds beside the others: a file of its own with every row, the blinks and the gate's events
NEW_SINK = '''
"""A file of its own: each row's frame, capture time and left EAR, the blinks and the gate's events."""

import json
import os

from eyeblink.runtime.live.sinks.base import Sink


class RowFile(Sink):
    order = 60
    summary_key = "row_file"

    def __init__(self, path):
        self.path = path
        self.rows = []
        self.blinks = []
        self.events = []
        self.opened_with = None

    @classmethod
    def from_config(cls, live, *, announce=None):
        path = os.environ.get("EYEBLINK_TEST_ROW_FILE")
        return cls(path) if path else None

    def open(self, tap):
        self.opened_with = (tap.source, tap.stem)

    def row(self, r, published):
        self.rows.append((r.frame, r.timestamp_s, r.ear_left, published))

    def blink(self, ev):
        self.blinks.append(ev.start_frame)

    def event(self, ev, line):
        self.events.append(line["event"])

    def close(self, reason=None):
        if self.path is None:
            return
        with open(self.path, "w") as fh:
            json.dump({"opened_with": self.opened_with, "rows": self.rows, "blinks": self.blinks,
                       "events": self.events, "reason": reason}, fh)
        self.path = None

    def summary(self):
        return {"rows": len(self.rows)}
'''


def test_a_sink_added_as_one_module_sees_every_row_of_a_real_live_run(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """One new module in the sinks package (here a folder added to its path) and nothing else: a live session on
    the loopback sender hands it every row of frames.csv in order, every blink of blinks.csv, the gate's events,
    and its summary is in summary.json."""
    import eyeblink

    extra = tmp_path / "more_sinks"
    extra.mkdir()
    (extra / "row_file.py").write_text(textwrap.dedent(NEW_SINK))
    monkeypatch.setattr(sinks_pkg, "__path__", [*sinks_pkg.__path__, str(extra)])
    monkeypatch.delitem(sys.modules, "eyeblink.runtime.live.sinks.row_file", raising=False)
    got = tmp_path / "rows.json"
    monkeypatch.setenv("EYEBLINK_TEST_ROW_FILE", str(got))
    assert [c.__name__ for c in sink_classes()][-1] == "RowFile"
    port = free_port()
    sender = start_sender(port, "--fps", "100", "--stop-after", "400")
    try:
        with eyeblink.live(f"tcp://127.0.0.1:{port}", tmp_path / "out", name="cam", landmarks="lids",
                           overload="block", adapt=False) as s:
            assert [type(x).__name__ for x in s.tap.sinks] == ["QueueSink", "RowFile"]
            for _ in s:
                pass
    finally:
        sender.kill()
        sys.modules.pop("eyeblink.runtime.live.sinks.row_file", None)
    seen = json.loads(got.read_text())
    with (tmp_path / "out" / "cam.frames.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    with (tmp_path / "out" / "cam.blinks.csv").open(newline="") as fh:
        blinks = [int(b["start_frame"]) for b in csv.DictReader(fh)]
    assert len(rows) == 400 and [r[0] for r in seen["rows"]] == [int(r["frame"]) for r in rows]
    for (_, t, ear, published), row in zip(seen["rows"], rows, strict=True):
        assert published and t == pytest.approx(float(row["timestamp_s"]), abs=1e-6)
        assert (math.isnan(ear) if row["ear_left"] == "" else ear == pytest.approx(float(row["ear_left"]),
                                                                                   abs=1e-4))
    assert len(blinks) >= 2 and seen["blinks"] == blinks
    assert "state" in seen["events"] and "blink_start" in seen["events"]
    assert seen["opened_with"] == [f"tcp://127.0.0.1:{port}", "cam"] and seen["reason"]
    summary = json.loads((tmp_path / "out" / "cam.summary.json").read_text())
    assert summary["live"]["publish"]["row_file"] == {"rows": 400}


def test_unread_rows_cost_the_garbage_collector_nothing() -> None:
    """The API's queue keeps up to 50,000 rows nobody read as plain tuples, which the garbage collector stops
    tracking (a named tuple it tracks for ever: 30,000 of them made each full collection of the session's process
    20-50 ms longer, and a frame's row waited behind it); the iterator gives each back as the row it was."""
    import gc
    import time

    from eyeblink.runtime.live.publish import LiveRow

    queue = QueueSink()
    rows = [LiveRow(i, i / 500, 1, 0.28, 0.27, 0.275, 0.28, 0, 0.9, 100.0, 80.0, 300.0, 300.0, 0.0, 0,
                    time.perf_counter(), time.perf_counter()) for i in range(1000)]
    for r in rows:
        queue.row(r, True)
    gc.collect()
    assert len(queue.items) == 1000 and not any(gc.is_tracked(item) for item in queue.items)
    back = [tuple.__new__(LiveRow, item) for item in queue.items]
    assert back == rows and back[3].frame == 3 and back[3].age_ms == rows[3].age_ms


def test_the_config_chooses_the_sinks_and_the_tap_calls_only_their_own_hooks() -> None:
    """``--gate-port``, ``--lsl`` and ``--view`` each add their sink, in one order; a sink is handed only the
    items whose hook its class has (the gate no rows, the view no state changes)."""
    assert sinks_from_config(LiveConfig()) == []
    live = LiveConfig(gate_port=0, lsl=True, view=True)
    got = sinks_from_config(live)
    assert [type(s) for s in got] == [GateSink, LslSink, ViewOutput]
    tap = LiveTap(sinks=got)
    queue = QueueSink()
    tap.add(queue)
    assert [type(h.__self__) for h in tap._on_row] == [LslSink, ViewOutput, QueueSink]
    assert [type(h.__self__) for h in tap._on_state] == [QueueSink]
    assert [type(h.__self__) for h in tap._on_blink] == [GateSink, LslSink, ViewOutput, QueueSink]
    assert tap.preview is got[2].preview
    for s in got:
        s.close()
    assert LiveTap.from_config(LiveConfig(), 1000.0) is None  # nothing asked for: no tap (the CLI's case)
    assert not Sink().overrides("row") and queue.overrides("row")
