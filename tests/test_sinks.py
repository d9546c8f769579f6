"""The outputs of a live run behind one interface (:mod:`eyeblink.runtime.live.sinks`): a new
output is one method that receives the run's items in frame order and ``close`` at the end; one new
module is found and fed by a real live run on the loopback sender; the tap hands a sink only the
items it takes."""

from __future__ import annotations

import csv
import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port, start_sender

import eyeblink.runtime.live.sinks as sinks_pkg
from eyeblink.config import LiveConfig
from eyeblink.runtime.live.publish import LiveTap
from eyeblink.runtime.live.sinks import (
    ITEMS,
    Blink,
    Connected,
    Ended,
    GateLine,
    Opened,
    Ready,
    Row,
    Sink,
    StateChanged,
    sink_classes,
    sinks_from_config,
)
from eyeblink.runtime.live.sinks.gate import GateSink
from eyeblink.runtime.live.sinks.lsl import LslSink
from eyeblink.runtime.live.sinks.queue import QueueSink
from eyeblink.runtime.live.sinks.view import ViewOutput

#: the module a user adds beside the others: a file of its own with every row, the blinks and the
#: gate's events
NEW_SINK = '''
"""A file of its own: each row's frame, capture time and left EAR, the blinks and the gate's events."""

import json
import os

from eyeblink.runtime.live.sinks.base import Blink, GateLine, Opened, Row, Sink


class RowFile(Sink):
    order = 60
    summary_key = "row_file"
    takes = (Opened, Row, Blink, GateLine)

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

    def put(self, item):
        if isinstance(item, Row):
            r = item.row
            self.rows.append((r.frame, r.timestamp_s, r.ear_left, item.published))
        elif isinstance(item, Blink):
            self.blinks.append(item.event.start_frame)
        elif isinstance(item, GateLine):
            self.events.append(item.line["event"])
        elif isinstance(item, Opened):
            self.opened_with = (item.source, item.stem)

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


def test_a_new_output_is_one_method_and_close_and_sees_a_real_live_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two new outputs on one live session on the loopback sender, each nothing but its own code:

    * a class defined here with only ``put`` and ``close``, added to the session's tap: it is
      handed every item of the run in order (opened, ready, connected; every row of frames.csv in
      frame order, each gate line after the row it is about, every blink of blinks.csv; ended
      last), then ``close`` once, with the run's stop reason;
    * one new module in the sinks package (here a folder added to its path) and nothing else: found,
      handed the items it takes, its summary in summary.json."""
    import eyeblink

    items: list[Any] = []
    closes: list[str | None] = []

    class Everything(Sink):
        def put(self, item: Any) -> None:
            items.append(item)

        def close(self, reason: str | None = None) -> None:
            closes.append(reason)

    extra = tmp_path / "more_sinks"
    extra.mkdir()
    (extra / "row_file.py").write_text(textwrap.dedent(NEW_SINK))
    monkeypatch.setattr(sinks_pkg, "__path__", [*sinks_pkg.__path__, str(extra)])
    monkeypatch.delitem(sys.modules, "eyeblink.runtime.live.sinks.row_file", raising=False)
    got = tmp_path / "rows.json"
    monkeypatch.setenv("EYEBLINK_TEST_ROW_FILE", str(got))
    assert [c.__name__ for c in sink_classes()][-1] == "RowFile"
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    sender = start_sender(port, "--fps", "100", "--stop-after", "400")
    try:
        session = eyeblink.live(
            url, tmp_path / "out", name="cam", landmarks="lids", overload="block", adapt=False
        )
        session.tap.add(Everything())
        with session as s:
            assert [type(x).__name__ for x in s.tap.sinks] == ["QueueSink", "Everything", "RowFile"]
            for _ in s:
                pass
    finally:
        sender.kill()
        sys.modules.pop("eyeblink.runtime.live.sinks.row_file", None)
    with (tmp_path / "out" / "cam.frames.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    with (tmp_path / "out" / "cam.blinks.csv").open(newline="") as fh:
        blinks = [int(b["start_frame"]) for b in csv.DictReader(fh)]
    summary = json.loads((tmp_path / "out" / "cam.summary.json").read_text())
    assert len(rows) == 400 and len(blinks) >= 2

    # the class of two methods: every item, in order, then close once
    opened, ready, connected = items[:3]
    assert isinstance(opened, Opened) and (opened.source, opened.stem) == (url, "cam")
    assert opened.tap is session.tap
    assert isinstance(ready, Ready) and callable(ready.cancelled)
    assert isinstance(connected, Connected)
    assert connected.nominal_fps == pytest.approx(100, rel=0.05)
    assert isinstance(items[-1], Ended) and items[-1].reason == summary["live"]["stop_reason"]
    assert closes == [items[-1].reason] and closes[0]
    news = items[3:-1]
    assert {type(i) for i in news} == {Row, StateChanged, GateLine, Blink}
    seen = [i.row for i in news if isinstance(i, Row)]
    assert [r.frame for r in seen] == [int(r["frame"]) for r in rows]
    assert all(i.published for i in news if isinstance(i, Row))
    for r, row in zip(seen, rows, strict=True):
        assert r.timestamp_s == pytest.approx(float(row["timestamp_s"]), abs=1e-6)
    assert [i.event.start_frame for i in news if isinstance(i, Blink)] == blinks
    newest = -1
    for i in news:  # frame order: a line is about the newest row handed on before it
        if isinstance(i, Row):
            newest = i.row.frame
        elif isinstance(i, GateLine):
            line = i.line
            assert (
                line["latest_frame"] == newest
                if line["event"] != "stale"
                else line["latest_frame"] <= newest
            ), (line, newest)
        elif isinstance(i, Blink):
            assert i.event.start_frame <= newest
    events = [i.line["event"] for i in news if isinstance(i, GateLine)]
    assert "state" in events and "blink_start" in events
    assert summary["live"]["publish"]["events"] == len(events)

    # the module: found, handed what it takes
    mod = json.loads(got.read_text())
    assert [r[0] for r in mod["rows"]] == [int(r["frame"]) for r in rows]
    for (_, t, ear, published), row in zip(mod["rows"], rows, strict=True):
        assert published and t == pytest.approx(float(row["timestamp_s"]), abs=1e-6)
        assert (
            math.isnan(ear)
            if row["ear_left"] == ""
            else ear == pytest.approx(float(row["ear_left"]), abs=1e-4)
        )
    assert mod["blinks"] == blinks and mod["events"] == events
    assert mod["opened_with"] == [url, "cam"] and mod["reason"] == closes[0]
    assert summary["live"]["publish"]["row_file"] == {"rows": 400}


def test_unread_rows_cost_the_garbage_collector_nothing() -> None:
    """The API's queue keeps up to 50,000 rows nobody read as plain tuples, which the garbage
    collector stops tracking (a named tuple it tracks for ever: 30,000 of them made each full
    collection of the session's process 20-50 ms longer, and a frame's row waited behind it); the
    iterator gives each back as the row it was."""
    import gc
    import time

    from eyeblink.runtime.live.publish import LiveRow

    queue = QueueSink()
    rows = [
        LiveRow(
            i,
            i / 500,
            1,
            0.28,
            0.27,
            0.275,
            0.28,
            0,
            0.9,
            100.0,
            80.0,
            300.0,
            300.0,
            0.0,
            0,
            time.perf_counter(),
            time.perf_counter(),
        )
        for i in range(1000)
    ]
    for r in rows:
        queue.put(Row(r, True))
    gc.collect()
    assert len(queue.items) == 1000 and not any(gc.is_tracked(item) for item in queue.items)
    back = [tuple.__new__(LiveRow, item) for item in queue.items]
    assert back == rows and back[3].frame == 3 and back[3].age_ms == rows[3].age_ms


def test_the_config_chooses_the_sinks_and_the_tap_hands_each_only_what_it_takes() -> None:
    """``--gate-port``, ``--lsl`` and ``--view`` each add their sink, in one order; a sink is handed
    only the item types it takes (the gate no rows, the view no state changes), so a sink that takes
    no row costs nothing per frame; a sink that says nothing takes every item; a type that is no
    item is refused."""
    assert sinks_from_config(LiveConfig()) == []
    live = LiveConfig(gate_port=0, lsl=True, view=True)
    got = sinks_from_config(live)
    assert [type(s) for s in got] == [GateSink, LslSink, ViewOutput]
    tap = LiveTap(sinks=got)
    queue = QueueSink()
    tap.add(queue)

    def takers(kind: type) -> list[type]:
        return [type(put.__self__) for put in tap._routes[kind]]

    assert takers(Row) == [LslSink, ViewOutput, QueueSink]
    assert takers(StateChanged) == [QueueSink]
    assert takers(GateLine) == takers(Blink) == [GateSink, LslSink, ViewOutput, QueueSink]
    assert takers(Opened) == [GateSink, LslSink, ViewOutput]
    assert takers(Ready) == [LslSink] and takers(Ended) == [GateSink]
    assert tap.preview is got[2].preview
    for s in got:
        s.close()
    # nothing asked for: no tap (the CLI's case)
    assert LiveTap.from_config(LiveConfig(), 1000.0) is None
    gate_only = LiveTap(gate_port=0)
    assert gate_only._on_row == [] and gate_only._routes[GateLine]
    assert Sink.takes == ITEMS

    class Wrong(Sink):
        takes = (Row, dict)

    with pytest.raises(TypeError, match=r"Wrong\.takes"):
        tap.add(Wrong())
