"""The Python API (eyeblink.process / load / live), LSL outlets and the gate socket, with real
components.

Real encoded recordings (MJPG AVI from :mod:`eyeblink.lab.synth`), the real pipeline, the loopback
sender (``python -m eyeblink.lab.loopback``) and a real ``ffmpeg`` process as live sources, a real
``pylsl`` inlet in this process while ``eyeblink live --lsl`` runs in another, real TCP clients of
the gate on 127.0.0.1.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import GateClient, free_port, run_with_sender
from conftest import start_sender as loopback_sender

from eyeblink.runtime.live.publish import GateTracker
from eyeblink.signals.state import EyeState, StateChange

REPO = Path(__file__).resolve().parent.parent


def start_sender(port: int, *args: str) -> subprocess.Popen[str]:
    """The loopback sender with 1 s loops of 500 distinct frames (one 150 ms blink each); returns
    once listening."""
    return loopback_sender(port, *args, distinct=500)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def cli(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eyeblink", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


# ------------------------------------------------------------------------------------------ the
# gate's events


def test_gate_tracker_reads_the_detectors_changes_and_times_the_held_states() -> None:
    """``state`` per change plus blink_start/blink_end/face_lost/face_found; open_stable once
    ``open`` has been held stable_ms of capture time (once per stay); prolonged_closure once an
    event has lasted max_blink_ms, the detector's own bound of a blink (once per event, whether the
    eye is closed or reopening by then)."""
    tr = GateTracker(stable_ms=200, max_blink_ms=300)
    ev = tr.change(StateChange(0, 0.0, EyeState.OPEN, EyeState.NO_FACE))
    assert [e.event for e in ev] == ["state", "face_found"] and ev[0].marker == "state:open"
    assert tr.tick(50, 0.1) == [] and not tr.is_open_for(200)
    (stable,) = tr.tick(100, 0.2)
    assert (
        stable.event == "open_stable"
        and stable.frame == 100
        and stable.extra["held_ms"] == pytest.approx(200)
    )
    assert tr.is_open_for(200) and tr.tick(101, 0.202) == []  # once per stay
    assert [
        e.event for e in tr.change(StateChange(110, 0.22, EyeState.CLOSING, EyeState.OPEN))
    ] == ["state", "blink_start"]
    assert not tr.is_open_for(0)
    tr.change(StateChange(112, 0.224, EyeState.CLOSED, EyeState.CLOSING))
    assert tr.tick(200, 0.4) == []
    tr.change(StateChange(230, 0.46, EyeState.REOPENING, EyeState.CLOSED))
    (prolonged,) = tr.tick(260, 0.52)  # 300 ms after the event began at 0.22 s
    assert prolonged.event == "prolonged_closure" and prolonged.extra["since_s"] == pytest.approx(
        0.22
    )
    assert tr.tick(261, 0.522) == []  # once per event
    assert [
        e.event for e in tr.change(StateChange(304, 0.608, EyeState.OPEN, EyeState.REOPENING))
    ] == ["state", "blink_end"]
    tr.change(StateChange(310, 0.62, EyeState.CLOSING, EyeState.OPEN))
    tr.change(StateChange(320, 0.64, EyeState.OPEN, EyeState.CLOSING))
    # a short event: no prolonged_closure
    assert [e.event for e in tr.tick(500, 1.0)] == ["open_stable"]
    assert [e.event for e in tr.change(StateChange(600, 1.2, EyeState.NO_FACE, EyeState.OPEN))] == [
        "state",
        "face_lost",
    ]
    assert tr.tick(900, 1.8) == []  # no_face is not timed


def test_a_live_row_has_the_columns_of_a_live_frames_csv_and_the_package_exports_the_api() -> None:
    import eyeblink
    from eyeblink.runtime.live.pipeline import LIVE_FRAME_COLUMNS

    assert eyeblink.LiveRow._fields == (*LIVE_FRAME_COLUMNS, "arrival_time", "sent_time")
    assert {"process", "load", "live", "Session", "LiveSession", "EyeState", "StateChange"} <= set(
        eyeblink.__all__
    )
    assert eyeblink.EyeState is EyeState and eyeblink.StateChange is StateChange


def test_gate_server_drops_a_client_that_stops_reading_and_never_blocks() -> None:
    """Real sockets on 127.0.0.1: a client that never reads is dropped once 1 MB waits for it; a
    reading client gets hello and every line, in order; the server's send never waits for either."""
    from eyeblink.runtime.live.publish import MAX_CLIENT_BACKLOG, GateServer

    server = GateServer(0, lambda: {"event": "hello"})
    try:
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: no autotuning
        stuck.connect(("127.0.0.1", server.port))
        reader = GateClient(server.port)
        deadline = time.monotonic() + 10
        while server.clients < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.clients == 2
        pad = "x" * 1000
        # past the kernel's send buffer (<= 4 MB) and the 1 MB backlog
        n = 8 * MAX_CLIENT_BACKLOG // 1000
        t0 = time.perf_counter()
        for i in range(n):
            server.send({"event": "state", "i": i, "pad": pad})
        assert time.perf_counter() - t0 < 10  # no send waited on the stuck client (~8 MB in all)
        while server.clients > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.clients == 1  # the stuck one is gone, the reader stays
    finally:
        server.close({"event": "end"})
    lines = reader.join()
    assert lines[0] == {"event": "hello"} and lines[-1] == {"event": "end"}
    assert [m["i"] for m in lines[1:-1]] == list(range(n))
    stuck.close()


# ------------------------------------------------------------------------------------------
# settings


@pytest.mark.parametrize(
    ("settings", "flags"),
    [
        ({"close_ratio": 0.95}, ["--close-ratio", "0.95"]),
        ({"score_threshold": 1.5}, ["--score-threshold", "1.5"]),
        ({"mesh_reuse_ms": 5000.0}, ["--mesh-reuse-ms", "5000"]),
        ({"workers": 99}, ["--workers", "99"]),
        ({"pipeline": "no-such-preset"}, ["--pipeline", "no-such-preset"]),
        ({"calibration": (5.0, 1.0)}, ["--calibration", "0:5", "--trials", "no-such-trials.csv"]),
    ],
)
def test_a_wrong_setting_is_the_clis_one_line_message_as_a_value_error(
    settings: dict, flags: list[str], tmp_path: Path
) -> None:
    import eyeblink

    video = tmp_path / "missing.avi"
    proc = cli("process", video, "-o", tmp_path / "out", *flags)
    assert proc.returncode != 0
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("eyeblink: error: ")
    # the CLI's --calibration is checked by argparse: compare the config's text
    if "calibration" in settings:
        with pytest.raises(ValueError, match="calibration must satisfy 0 <= START_S < END_S"):
            eyeblink.process(video, **settings)
        return
    with pytest.raises(ValueError) as err:
        eyeblink.process(video, **settings)
    # the same check and text, in Python's words: the flags are the keywords
    assert str(err.value) == eyeblink.api.python_words(line.removeprefix("eyeblink: error: "))
    assert "--" not in str(err.value)
    assert isinstance(err.value, eyeblink.SettingsError)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"close_ratoi": 0.7}, "unknown setting 'close_ratoi': did you mean close_ratio=?"),
        ({"detect_every": "4"}, "detect.detect_every must be a whole number, got str '4'"),
        ({"smooth_ms": 5}, "setting 'smooth_ms' is ambiguous: it is a key of blinks and closure"),
        ({"blinks": {"smooth": 5}}, "unknown setting 'blinks.smooth'"),
        ({"gate_port": 70000}, "--gate-port must be a whole number in 0..65535"),
        ({"stable_ms": 0}, r"--stable-ms must be a number in \(0, 3.6e\+06\] ms"),
        ({"on_blink": 3}, "on_blink must be a function"),
    ],
)
def test_live_settings_are_checked_before_anything_loads(settings: dict, match: str) -> None:
    import eyeblink

    with pytest.raises(eyeblink.SettingsError, match=match):
        eyeblink.live("tcp://127.0.0.1:1", **settings)


def test_a_wrong_live_flag_is_the_same_text(tmp_path: Path) -> None:
    import eyeblink

    proc = cli("live", "tcp://127.0.0.1:1", "-o", tmp_path, "--gate-port", "70000")
    assert proc.returncode == 2
    with pytest.raises(ValueError) as err:
        eyeblink.live("tcp://127.0.0.1:1", gate_port=70000)
    assert proc.stderr.strip().splitlines()[-1] == f"eyeblink: error: {err.value}"


def test_lsl_without_pylsl_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """No pylsl: ``--lsl`` fails at once, before any model loads, with the pip command (exit status
    of a missing extra), for the CLI and the API alike."""
    code = (
        "import sys; sys.modules['pylsl'] = None; from eyeblink.cli import main; "
        f"sys.exit(main(['live', 'tcp://127.0.0.1:1', '-o', {str(tmp_path)!r}, '--lsl']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert proc.returncode not in (0, 1) and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "eyeblink: error: --lsl needs pylsl, which is not installed; "
        "pip install 'eyeblink[lsl]' (or pip install pylsl)"
    )
    code = (
        "import sys; sys.modules['pylsl'] = None; import eyeblink\n"
        "try:\n    eyeblink.live('tcp://127.0.0.1:1', lsl=True).__enter__()\n"
        "except eyeblink.api.MissingExtraError as e:\n    print(e)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert "pip install 'eyeblink[lsl]'" in proc.stdout, proc.stderr


# ------------------------------------------------------------------------------------------ process
# / load


@pytest.mark.slow
def test_api_and_cli_write_identical_files_and_tables(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """Same settings -> byte-identical frames.csv and blinks.csv, the same summary but for timings;
    the in-memory result equals the files read back with load(); dtypes and units as in the CSV
    contract."""
    import numpy as np

    import eyeblink

    video, _ = face_recording
    proc = cli(
        "process",
        video,
        "-o",
        tmp_path / "cli",
        "--detect-every",
        "2",
        "--close-ratio",
        "0.78",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    api = eyeblink.process(video, output=tmp_path / "api", detect_every=2, close_ratio=0.78)
    assert isinstance(api, eyeblink.Session)
    for suffix in ("frames.csv", "blinks.csv"):
        api_bytes = (tmp_path / "api" / f"subject.{suffix}").read_bytes()
        assert api_bytes == (tmp_path / "cli" / f"subject.{suffix}").read_bytes()

    def comparable(s: dict) -> dict:
        s = {k: v for k, v in s.items() if k not in ("timings", "outputs")}
        s["parallel"] = {
            k: v
            for k, v in (s.get("parallel") or {}).items()
            if k not in ("ring_name", "placement")
        }
        return s

    cli_summary = json.loads((tmp_path / "cli" / "subject.summary.json").read_text())
    assert comparable(api.summary) == comparable(cli_summary)
    assert api.paths["frames"] == tmp_path / "api" / "subject.frames.csv"

    # output=None: nothing left on disk
    mem = eyeblink.process([video], detect_every=2, close_ratio=0.78)
    assert isinstance(mem, list) and len(mem) == 1 and mem[0].paths == {}
    back = eyeblink.load(tmp_path / "cli" / "subject")
    for got in (mem[0], back):
        assert got.frames.equals(api.frames) and got.blinks.equals(api.blinks)
    f, b = api.frames, api.blinks
    assert len(f) == 800 and list(f["frame"]) == list(range(800))
    assert (
        f["frame"].dtype == np.int64
        and f["face"].dtype == np.int64
        and f["ear_left"].dtype == np.float64
    )
    assert f.attrs["units"]["timestamp_s"] == "s" and f.attrs["units"]["closure"].startswith("FEC")
    assert len(b) == 1 and b["complete"].dtype == bool and b["start_frame"].dtype == np.int64
    assert b.attrs["units"]["duration_ms"] == "ms"
    assert 0.75 < b["start_s"][0] < 0.85 and b["kind"][0] == "blink"
    assert api.trials.empty and back.summary["status"] == "ok"
    report = api.write_report()  # `eyeblink report OUTDIR/<stem>`
    assert report == tmp_path / "api" / "subject.report.html" and api.paths["report"] == report
    assert report.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    with pytest.raises(eyeblink.api.InputNotFoundError, match="no files"):
        mem[0].write_report()
    assert (f["ear_left"].isna() == (f["face"] == 0)).all()


def test_load_names_a_missing_session(tmp_path: Path) -> None:
    import eyeblink
    from eyeblink.errors import InputNotFoundError

    with pytest.raises(InputNotFoundError, match="no session 'nothing'"):
        eyeblink.load(tmp_path / "nothing")


# ------------------------------------------------------------------------------------------ live


@pytest.mark.slow
def test_live_api_on_a_loopback_stream_rows_blinks_states_and_the_gate_socket(
    tmp_path: Path,
) -> None:
    """eyeblink.live on a real stream: the iterator yields every row written (frame order) and the
    blinks; callbacks see the same; wait_until_open returns once open held 200 ms; a real socket
    client gets hello, one line per state change (the same changes on_state saw), the timed events,
    the blinks and end."""
    import eyeblink
    from eyeblink.runtime.live.publish import LiveRow

    pylsl = pytest.importorskip("pylsl")
    lsl_name = f"eyeblink-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    sender = start_sender(port, "--fps", "500", "--duration", "3")
    seen: dict[str, list] = {"frame": [], "blink": [], "state": []}
    items: list = []
    try:
        # a loaded test machine lags seconds behind (then every answer is stale): freshness is
        # tested elsewhere
        with eyeblink.live(
            f"tcp://127.0.0.1:{port}",
            tmp_path,
            name="cam",
            gate_port=0,
            workers=2,
            lsl=True,
            lsl_name=lsl_name,
            on_frame=seen["frame"].append,
            on_blink=seen["blink"].append,
            on_state=seen["state"].append,
            max_age_ms=30_000,
        ) as s:
            assert s.gate_port and s.gate_port > 0
            client = GateClient(s.gate_port)
            assert s.wait_until_open(stable_ms=200, timeout_s=60)
            assert s.state == EyeState.OPEN and s.time_s >= 0.2
            # no fps given: the outlets were made once the stream was connected, at the stream's own
            # rate
            (info,) = pylsl.resolve_byprop("name", lsl_name, 1, 30)
            assert info.nominal_srate() == 500
            items.extend(s)  # until the stream ends (3 s)
    finally:
        sender.kill()
    lines = client.join()
    rows = csv_rows(tmp_path / "cam.frames.csv")
    got_rows = [i for i in items if isinstance(i, LiveRow)]
    blinks = [i for i in items if not isinstance(i, LiveRow)]
    assert len(rows) == 1500 and s.result is not None and len(s.result.frames) == 1500
    # the iterator started after wait_until_open: it holds every row from then on, in order, as
    # written
    first = got_rows[0].frame
    assert [r.frame for r in got_rows] == list(range(first, 1500))
    assert [r.frame for r in seen["frame"]] == list(range(1500))
    for r in got_rows[::97]:
        row = rows[r.frame]
        assert float(row["timestamp_s"]) == pytest.approx(r.timestamp_s, abs=1e-9)
        assert (row["ear_left"] == "") == math.isnan(r.ear_left)
        if row["ear_left"]:
            assert float(row["ear_left"]) == pytest.approx(r.ear_left, rel=1e-8)
        assert r.arrival_time > 0 and r.sent_time >= r.arrival_time and r.age_ms >= 0
    assert len(seen["blink"]) == len(s.result.blinks) >= 2 and len(blinks) >= 1
    # the socket: hello, then one line per state change, in order, equal to what on_state saw
    assert lines[0]["event"] == "hello" and lines[-1]["event"] == "end"
    assert lines[-1]["reason"] == "end of stream"
    states = [m for m in lines if m["event"] == "state"]
    assert [(m["frame"], m["state"], m["previous"]) for m in states] == [
        (c.frame, c.state.value, c.previous.value) for c in seen["state"]
    ]
    # settled states only (settle_ms 10): a 150 ms blink's few-ms closing and reopening phases may
    # not last each change says when the frame that settled it arrived and how old it was when
    # handed on
    assert all(
        c.latest_frame >= c.frame and c.sent_time >= c.arrival_time and c.age_ms >= 0
        for c in seen["state"]
    )
    assert all(
        m["latest_frame"] == c.latest_frame for m, c in zip(states, seen["state"], strict=True)
    )
    assert (
        {"open", "closed"}
        <= {m["state"] for m in states}
        <= {"open", "closing", "closed", "reopening"}
    )
    names = [m["event"] for m in lines]
    assert (
        names.count("blink_start") >= 2 and names.count("blink_end") >= 2 and "open_stable" in names
    )
    assert names.count("blink") == len(s.result.blinks)
    for m in states:
        assert m["timestamp_s"] == pytest.approx(float(rows[m["frame"]]["timestamp_s"]), abs=1e-9)
        assert m["sent_time"] >= m["arrival_time"]
    publish = s.result.summary["live"]["publish"]
    assert publish["gate_port"] == s.gate_port and publish["events"] == len(
        lines
    ) - 2 - names.count("blink")


@pytest.mark.slow
def test_lsl_inlet_in_another_process_receives_every_sample_on_the_frames_clock(
    tmp_path: Path,
) -> None:
    """``eyeblink live --lsl`` in a child process; a real pylsl inlet here resolves both streams by
    name, pulls every sample (one per row of frames.csv, in order, timestamps monotonic and spaced
    exactly as timestamp_s) and the markers; the stream's XDF metadata carries channel labels,
    units, the source and the version."""
    pylsl = pytest.importorskip("pylsl")
    name = f"eyeblink-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    sender = start_sender(port, "--fps", "500", "--duration", "2")
    live = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{port}",
            "-o",
            str(tmp_path),
            "--name",
            "cam",
            "--lsl",
            "--lsl-name",
            name,
            "--lsl-wait",
            "60",
            "--fps",
            "500",
            # every sample is asked for: no bound a loaded test host could pass (a
            # row past --max-latency-ms gets no sample: test_live_state)
            "--workers",
            "2",
            "--max-age-ms",
            "30000",
            "--max-latency-ms",
            "30000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        (info,) = pylsl.resolve_byprop("name", name, 1, 60)
        (minfo,) = pylsl.resolve_byprop("name", f"{name}-markers", 1, 60)
        inlet, markers = pylsl.StreamInlet(info, 360), pylsl.StreamInlet(minfo, 360)
        # eyeblink waits for this consumer before it connects the source (--lsl-wait)
        inlet.open_stream(10)
        markers.open_stream(10)
        samples: list[list[float]] = []
        stamps: list[float] = []
        marks: list[tuple[str, float]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            chunk, ts = inlet.pull_chunk(timeout=0.2)
            samples.extend(chunk)
            stamps.extend(ts)
            mchunk, mts = markers.pull_chunk(timeout=0.0)
            marks.extend((m[0], t) for m, t in zip(mchunk, mts, strict=True))
            if live.poll() is not None and not chunk:
                break
        _, err = live.communicate(timeout=60)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 0, err
    full = inlet.info(5)
    assert full.nominal_srate() == 500 and full.type() == "Eyeblink" and full.channel_count() == 6
    ch = full.desc().child("channels").child("channel")
    labels, units = [], []
    while not ch.empty():
        labels.append(ch.child_value("label"))
        units.append(ch.child_value("unit"))
        ch = ch.next_sibling()
    assert labels == ["openness_left", "openness_right", "closure", "face", "frame", "age"]
    assert units == ["ratio", "ratio", "normalized", "boolean", "count", "ms"]
    import eyeblink

    assert full.desc().child("eyeblink").child_value("version") == eyeblink.__version__
    assert full.desc().child("eyeblink").child_value("source") == f"tcp://127.0.0.1:{port}"
    rows = csv_rows(tmp_path / "cam.frames.csv")
    assert len(rows) == 1000 and len(samples) == len(rows)
    assert [int(s[4]) for s in samples] == [int(r["frame"]) for r in rows]
    assert all(b > a for a, b in itertools.pairwise(stamps))
    t0, ts0 = float(rows[0]["timestamp_s"]), stamps[0]
    for s, t, r in zip(samples, stamps, rows, strict=True):
        assert t - ts0 == pytest.approx(float(r["timestamp_s"]) - t0, abs=1e-6)
        assert int(s[3]) == int(r["face"])
        assert (r["ear_left"] == "") == math.isnan(s[0])
        if r["ear_left"]:
            assert s[0] == pytest.approx(float(r["ear_left"]), rel=1e-8)
    offset = ts0 - t0  # capture time on LSL's clock: close to when the frame arrived here
    assert abs(offset - pylsl.local_clock()) < 300
    names = [m for m, _ in marks]
    assert next(n for n in names if n.startswith("state:")) == "state:open"
    assert "blink_start" in names and "blink_end" in names and "open_stable" in names
    # one blink marker per row of blinks.csv (a blink in the warm-up is settled before the first
    # state)
    assert names.count("blink") == len(csv_rows(tmp_path / "cam.blinks.csv")) >= 1
    for m, t in marks:
        assert math.isfinite(t) and ts0 - 1e-6 <= t <= stamps[-1] + 1e-6, m
    summary = json.loads((tmp_path / "cam.summary.json").read_text())
    assert summary["live"]["publish"]["lsl"] == {"samples": name, "markers": f"{name}-markers"}
    assert f"lsl: streams {name!r}" in err


CTRL_C_SCRIPT = """
import json, os, signal, sys
import eyeblink
n = 0
with eyeblink.live(sys.argv[1], sys.argv[2], name="cam", workers=2) as s:
    for item in s:
        if isinstance(item, tuple) and item.frame == 400:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C inside the block
        n += 1
print(json.dumps({"frames": s.result.summary["frames"], "stop": s.result.summary["live"]["stop_reason"],
                  "status": s.result.summary["status"], "rows": len(s.result.frames)}))
"""


@pytest.mark.slow
def test_ctrl_c_inside_the_context_manager_stops_cleanly_and_keeps_every_row(
    tmp_path: Path,
) -> None:
    proc = run_with_sender(
        CTRL_C_SCRIPT, tmp_path, "--fps", "500", "--duration", "20", distinct=500, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["stop"] == "stopped by SIGINT" and out["status"] == "ok"
    rows = csv_rows(tmp_path / "cam.frames.csv")
    assert 400 < len(rows) < 10_000 and [int(r["frame"]) for r in rows] == list(range(len(rows)))
    assert out["frames"] == out["rows"] == len(rows)
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------
# examples


@pytest.mark.slow
def test_example_process_and_plot(face_recording: tuple[Path, object], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    video, _ = face_recording
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "process_and_plot.py"),
            str(video),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Session('subject': 800 frames, 1 blink," in proc.stdout
    png = tmp_path / "subject.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_example_rig_gates_trials_on_a_real_ffmpeg_stream(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """``ffmpeg -re`` streams a real recording to loopback; the rig script starts each trial once
    the eye is open and stable and writes the CS onsets on the session's clock."""
    ffmpeg = pytest.importorskip("imageio_ffmpeg").get_ffmpeg_exe()
    video, _ = face_recording
    port = free_port()
    sender = subprocess.Popen(
        [
            ffmpeg,
            "-hide_banner",
            "-loglevel",
            "quiet",
            "-re",
            "-i",
            str(video),
            "-c:v",
            "rawvideo",
            "-pix_fmt",
            "gray",
            "-f",
            "nut",
            f"tcp://127.0.0.1:{port}?listen=1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        proc = subprocess.run(
            [
                sys.executable,
                str(REPO / "examples" / "rig_gate.py"),
                f"tcp://127.0.0.1:{port}",
                "--trials",
                "2",
                "--iti",
                "0.2",
                "--out",
                str(tmp_path),
                # a loaded test host lags; freshness: test_live_state
                "--max-age-ms",
                "30000",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
    finally:
        sender.kill()
    assert proc.returncode == 0, proc.stderr
    assert (
        "gate socket on 127.0.0.1:" in proc.stdout
        and "trial 1: eye open for >= 200 ms" in proc.stdout
    )
    trials = csv_rows(tmp_path / "rig.trials.csv")
    assert 1 <= len(trials) <= 2
    onsets = [float(t["cs_onset_s"]) for t in trials]
    assert onsets[0] >= 0.2 and onsets == sorted(onsets)
    frames = csv_rows(tmp_path / "rig.frames.csv")
    assert len(frames) > 400 and float(frames[-1]["timestamp_s"]) >= onsets[-1]
    assert os.path.getsize(tmp_path / "rig.summary.json") > 0


# ------------------------------------------------------------------------------------------ load:
# damage


@pytest.fixture(scope="module")
def whole_session(
    face_recording: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A real processed session (``OUTDIR/subject``), to be copied and damaged by each test."""
    import eyeblink

    out = tmp_path_factory.mktemp("whole")
    # the first 1.2 s (600 frames) hold the recording's blink: a session with a blinks.csv row
    eyeblink.process(face_recording[0], output=out, landmarks="mesh", workers=1, max_frames=600)
    return out / "subject"


def _damaged_copy(whole: Path, tmp_path: Path) -> Path:
    import shutil

    for f in whole.parent.glob(f"{whole.name}.*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / whole.name


def _set_cell(path: Path, row: int, column: str, value: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[row].rstrip("\n").split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells) + "\n"
    path.write_text("".join(lines))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda s: _set_cell(s.with_suffix(".frames.csv"), 5, "ear_left", "abc"),
            r"subject\.frames\.csv: row 6, column 'ear_left': 'abc' is not a number",
        ),
        (
            lambda s: _set_cell(s.with_suffix(".blinks.csv"), 1, "complete", "maybe"),
            r"subject\.blinks\.csv: row 2, column 'complete': 'maybe' is not 0 or 1",
        ),
        (
            lambda s: _set_cell(s.with_suffix(".frames.csv"), 3, "frame", "2.5"),
            r"row 4, column 'frame': '2.5' is not a whole number",
        ),
        (
            lambda s: _set_cell(s.with_suffix(".frames.csv"), 3, "timestamp_s", "nan"),
            r"row 4, column 'timestamp_s': 'nan' is not a number",
        ),
        (
            lambda s: s.with_suffix(".frames.csv").write_text(
                s.with_suffix(".frames.csv").read_text().replace("ear_left", "earL", 1)
            ),
            r"subject\.frames\.csv has no 'ear_left' column",
        ),
        (
            lambda s: _set_cell(s.with_suffix(".frames.csv"), 9, "face", "1,1"),
            r"row 10 has \d+ cells, its header",
        ),
        (
            lambda s: s.with_suffix(".summary.json").write_text("[1, 2]"),
            r"holds a JSON list, not the summary object",
        ),
        (
            lambda s: s.with_suffix(".blinks.csv").write_bytes(
                b"\xff\xfe" + s.with_suffix(".blinks.csv").read_bytes()
            ),
            r"subject\.blinks\.csv is not UTF-8 text",
        ),
    ],
    ids=["abc", "maybe", "half-frame", "nan", "renamed", "extra-cell", "summary-list", "not-utf8"],
)
def test_load_refuses_a_damaged_session_naming_file_row_and_column(
    whole_session: Path, tmp_path: Path, damage, message: str
) -> None:
    import eyeblink
    from eyeblink.errors import ConfigError

    session = _damaged_copy(whole_session, tmp_path)
    damage(session)
    with pytest.raises(ConfigError, match=message) as exc:
        eyeblink.load(session)
    assert "\n" not in str(exc.value) and "re-run `eyeblink process`" in str(exc.value)


def test_load_drops_a_cut_last_row_and_says_so(whole_session: Path, tmp_path: Path) -> None:
    import eyeblink
    from eyeblink.api import SessionDamageWarning

    whole = eyeblink.load(whole_session)
    assert whole.notes == [] and "damage" not in repr(whole)
    session = _damaged_copy(whole_session, tmp_path)
    frames = session.with_suffix(".frames.csv")
    frames.write_bytes(frames.read_bytes()[:-4])  # the last row cut mid-number, no end of line
    with pytest.warns(SessionDamageWarning, match="last row was cut off"):
        cut = eyeblink.load(session)
    assert len(cut.frames) == len(whole.frames) - 1
    assert cut.frames.equals(whole.frames.iloc[:-1])
    assert len(cut.notes) == 1 and "frames.csv" in cut.notes[0]
    assert "1 damage notes" in repr(cut)
    # not "EAR": mesh measures an aperture
    assert cut.frames.attrs["units"]["ear_left"] == "ratio (eye openness)"


# ------------------------------------------------------------------------------------------
# Python's words


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        ((), {"workers": "2"}, "workers must be an int or None, got str '2'"),
        ((), {"loaders": 1.5}, "loaders must be an int, got float 1.5"),
        ((), {"progress": "yes"}, "progress must be a bool, got str 'yes'"),
        (
            (),
            {"trials": 3},
            "trials must be a str or pathlib.Path (a file or a folder) or None, got int 3",
        ),
        ((), {"out": "results"}, "unknown setting 'out': did you mean output=?"),
        ((), {"min_blink": 30}, "unknown setting 'min_blink': did you mean min_blink_ms=?"),
        (
            (),
            {"blinks": 3},
            "blinks must be a dict of [blinks] settings (e.g. blinks={...}), got int 3",
        ),
        ((), {"fps": "500"}, "fps must be a number, got str '500'"),
        ((), {"workers": 10_000}, "workers=10000 is out of range"),
        ((), {"loaders": -1}, "loaders must be >= 0, got -1"),
        ((), {"sync_column": "cs"}, "sync_column=... needs trials=SYNC.csv"),
        (
            (42,),
            {},
            "path_or_paths must be a str or pathlib.Path, or a non-empty list of them, got int 42",
        ),
        (("x.avi", 7), {}, "output must be a str or pathlib.Path (a folder) or None, got int 7"),
    ],
)
def test_api_errors_name_keywords_and_types(
    tmp_path: Path, args: tuple, settings: dict, message: str
) -> None:
    import eyeblink

    with pytest.raises(eyeblink.SettingsError) as err:
        eyeblink.process(*(args or (tmp_path / "x.avi",)), **settings)
    assert str(err.value).startswith(message), str(err.value)
    assert "--" not in str(err.value) and "\n" not in str(err.value)


def test_every_keyword_typo_gets_a_did_you_mean(tmp_path: Path) -> None:
    import eyeblink
    from eyeblink.api import _process_keywords

    for key in sorted(k for k in _process_keywords() if len(k) >= 5):
        with pytest.raises(
            eyeblink.SettingsError, match=r"unknown setting .*: did you mean \w+=\?"
        ):
            eyeblink.process(tmp_path / "x.avi", **{key[:-1] + "_": 1})


def test_a_run_error_names_the_keyword_not_the_flag(make_image_folder, tmp_path: Path) -> None:
    """An image folder without a frame rate: the run's own check, in the API's words (``fps=``)."""
    import numpy as np

    import eyeblink
    from eyeblink.errors import ConfigError

    folder = make_image_folder(
        {"f1.png": np.zeros((48, 64), np.uint8), "f2.png": np.zeros((48, 64), np.uint8)}
    )
    with pytest.raises(ConfigError) as err:
        eyeblink.process(folder, output=tmp_path / "out", landmarks="mesh", workers=1)
    assert "needs fps=... to give frames timestamps" in str(err.value) and "--fps" not in str(
        err.value
    )


@pytest.mark.slow
def test_a_progress_bar_in_a_notebook(face_recording: tuple[Path, object], tmp_path: Path) -> None:
    """In a real Jupyter kernel (stderr is no terminal there) ``progress=True`` shows a bar in the
    cell's output; ``progress=False`` shows none."""
    pytest.importorskip("ipykernel")
    from jupyter_client.manager import start_new_kernel

    video, _ = face_recording
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:

        def run(progress: bool, out: str) -> tuple[list[str], list[str]]:
            err: list[str] = []
            stdout: list[str] = []

            def hook(msg: dict) -> None:
                if msg["msg_type"] == "stream":
                    (err if msg["content"]["name"] == "stderr" else stdout).append(
                        msg["content"]["text"]
                    )
                elif msg["msg_type"] == "error":
                    err.append("\n".join(msg["content"]["traceback"]))

            code = (
                f"import eyeblink\ns = eyeblink.process({str(video)!r}, output={out!r}, "
                "landmarks='mesh', "
                f"workers=1, max_frames=150, progress={progress})\nprint('rows', len(s.frames))"
            )
            reply = kc.execute_interactive(code, timeout=600, output_hook=hook)
            assert reply["content"]["status"] == "ok", err
            return err, stdout

        err, stdout = run(True, str(tmp_path / "a"))
        assert "rows 150\n" in "".join(stdout)
        bar = "".join(err)
        import re

        # the tqdm bar: name, share, count
        assert re.search(r"subject: +\d+%\|.*\| \d+/\d+ \[", bar), bar
        err, _ = run(False, str(tmp_path / "b"))
        assert not re.search(r"subject: +\d+%", "".join(err))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_live_takes_workers_none_as_process_does() -> None:
    """``workers=None`` (the keyword's documented default, one worker per physical core) is a valid
    live setting, not a TypeError from deep inside; a negative count is still one line."""
    import eyeblink

    # settings are checked here; nothing starts
    session = eyeblink.live("tcp://127.0.0.1:9", workers=None)
    assert session.live_config.workers == 0
    with pytest.raises(eyeblink.SettingsError, match="workers"):
        eyeblink.live("tcp://127.0.0.1:9", workers=-1)
