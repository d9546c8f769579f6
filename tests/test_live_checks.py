"""A live run checks what it is told before it costs memory, frames or data.

Its numeric options (one validation for the CLI and the Python API), the memory its ring asks for
(from the rate measured as the first frames arrive, capped by a share of the memory), the stream's
own clock (against the arrival clock), its start-up (no frame of a slow stream dropped as late), its
files (``--record`` onto an existing file, counts that equal the rows on disk, the top-level
``status``) and a camera that is not there (one line). Streams come from the real loopback sender
(``python -m eyeblink.lab.loopback``) over TCP, read by the real CLI.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import CHILD_SIGNALS, free_port, live_to_end, posix_stop_signals, start_sender

from eyeblink.sources.clock import ClockCheck

REPO = Path(__file__).resolve().parent.parent
SHM = Path("/dev/shm")


def mem_available() -> int:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (0 where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def rings_of(pid: int) -> list[str]:
    """The shared-memory blocks process ``pid`` created and left behind (``eyeblink_<pid>_...``)."""
    return sorted(p.name for p in SHM.glob(f"eyeblink_{pid}_*")) if SHM.is_dir() else []


def assert_memory_as_before(before: int, pid: int) -> None:
    """No block of the run left in /dev/shm, and the memory available not down by what a ring of the
    old code took (GBs; other programs on the machine move it by less)."""
    assert rings_of(pid) == []
    if before:
        assert mem_available() > before - 2 * 2**30, (before, mem_available())


def live_cmd(url: str, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "eyeblink", "live", url, "-o", str(out), "--name", "cam", *args]


def summary(out: Path) -> dict:
    return json.loads((out / "cam.summary.json").read_text())


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "cam.frames.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


# ------------------------------------------------------------------------------------------ 1.
# numeric options


@pytest.mark.parametrize(
    ("args", "flag", "span"),
    [
        (["--fps", "inf"], "--fps", "(0, 100000]"),
        (["--fps", "1e6"], "--fps", "(0, 100000]"),
        (["--fps", "1e9"], "--fps", "(0, 100000]"),
        (["--fps", "-30"], "--fps", "(0, 100000]"),
        (["--fps", "0"], "--fps", "(0, 100000]"),
        (["--fps", "nan"], "--fps", "(0, 100000]"),
        (["--buffer", "inf"], "--buffer", "(0, 10]"),
        (["--buffer", "0"], "--buffer", "(0, 10]"),
        (["--chunk-frames", "1000000000"], "--chunk-frames", "1..256"),
        (["--batch-frames", "0"], "--batch-frames", "1..256"),
        (["--max-latency-ms", "1e300"], "--max-latency-ms", "(0, 60000]"),
        (["--max-age-ms", "-1"], "--max-age-ms", "(0, 60000]"),
        (["--stable-ms", "nan"], "--stable-ms", "(0, 3.6e+06]"),
        (["--settle-ms", "inf"], "--settle-ms", "[0, 60000]"),
        (["--duration", "inf"], "--duration", "(0, 2.592e+06]"),
        (["--lsl-wait", "-1"], "--lsl-wait", "[0, 3600]"),
        (["--read-timeout", "inf"], "--read-timeout", "(0, 3600]"),
        (["--reconnect", "-1"], "--reconnect", "0..10000"),
        (["--reconnect", "1000000000"], "--reconnect", "0..10000"),
        (["--gate-port", "70000"], "--gate-port", "0..65535"),
        (["--metrics-port", "99999"], "--metrics-port", "0..65535"),
        (["--workers", "100000"], "--workers", "out of range"),
    ],
)
def test_every_numeric_live_option_is_refused_in_one_line_naming_its_range(
    tmp_path: Path, args: list[str], flag: str, span: str
) -> None:
    before = mem_available()
    proc = subprocess.Popen(
        live_cmd(f"tcp://127.0.0.1:{free_port()}", tmp_path / "out", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    _, err = proc.communicate(timeout=120)
    lines = errors(err)
    assert proc.returncode == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"eyeblink: error: {flag} ") and span in lines[0], lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "cam.summary.json").exists()  # refused before the run began
    assert_memory_as_before(before, proc.pid)


def test_fps_1e6_is_refused_in_under_a_second_and_the_api_says_the_same(tmp_path: Path) -> None:
    """The CLI's refusal (timed in its process, the interpreter's start-up aside: the 64 s that
    filled /dev/shm are what it replaces) and the Python API's are the same line from the same
    check."""
    code = (
        "import sys, time\n"
        "from eyeblink.cli import build_parser, main\n"
        "build_parser()\n"  # the imports of the CLI, as at any start
        "t = time.perf_counter()\n"
        f"rc = main(['live', 'tcp://127.0.0.1:{free_port()}', '-o', sys.argv[1], '--fps', '1e6'])\n"
        "import os\n"
        "print(rc, time.perf_counter() - t, os.getpid())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    rc, took, pid = proc.stdout.split()
    assert int(rc) == 2 and float(took) < 1.0, (proc.stdout, proc.stderr)
    line = errors(proc.stderr)[0].removeprefix("eyeblink: error: ")
    assert rings_of(int(pid)) == []
    import eyeblink

    with pytest.raises(eyeblink.SettingsError) as exc:
        eyeblink.live(f"tcp://127.0.0.1:{free_port()}", tmp_path / "api", fps=1e6)
    assert str(exc.value) == line


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"buffer_s": math.inf}, r"--buffer must be a number in \(0, 10\]"),
        ({"chunk_frames": 10**9}, "--chunk-frames must be a whole number in 1..256"),
        ({"read_timeout_s": 1e9}, r"--read-timeout must be a number in \(0, 3600\]"),
        ({"reconnect": 10**9}, "--reconnect must be a whole number in 0..10000"),
        ({"gate_port": 70000}, "--gate-port must be a whole number in 0..65535"),
    ],
)
def test_the_api_refuses_the_same_values_with_the_same_line(kw: dict, match: str) -> None:
    import eyeblink

    with pytest.raises(eyeblink.SettingsError, match=match):
        eyeblink.live(f"tcp://127.0.0.1:{free_port()}", **kw)


# ------------------------------------------------------------------------------------------ 2. ring
# memory


def test_a_ring_past_the_memory_cap_is_refused_before_it_is_allocated(tmp_path: Path) -> None:
    """A real 500 FPS stream of frames so large that --buffer 10 of them passes the cap on this
    machine (a quarter of the memory available, half of /dev/shm's free space): one line naming the
    need, the cap and the --buffer that fits, after the first frames measured the rate; no ring was
    made, memory is as before."""
    from eyeblink.runtime.procs.shm import ring_cap_bytes

    cap, _ = ring_cap_bytes()
    if cap is None:
        pytest.skip("no /proc/meminfo nor /dev/shm here")
    sizes = [(1280, 960), (1600, 1200), (2048, 1536), (2560, 1920), (3200, 2400), (4000, 3000)]
    fitting = [(w, h) for w, h in sizes if 10 * 500 * w * h > 1.5 * cap]
    if not fitting:
        pytest.skip(
            f"this machine lets a ring take {cap / 2**30:.0f} GiB: more than 10 s of 4000x3000 at "
            "500 FPS"
        )
    w, h = fitting[0]
    before = mem_available()
    port = free_port()
    sender = start_sender(
        port, "--fps", "500", "--duration", "30", "--size", f"{w}x{h}", distinct=2
    )
    proc = subprocess.Popen(
        live_cmd(
            f"tcp://127.0.0.1:{port}",
            tmp_path,
            "--buffer",
            "10",
            "--workers",
            "1",
            "--landmarks",
            "lids",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
        sender.kill()
    lines = [ln for ln in errors(err) if ln.startswith("eyeblink: error:")]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert (
        f"--buffer 10 s of {w}x{h} frames at" in lines[0]
        and "more than a ring may take here" in lines[0]
    )
    assert re.search(
        r"\(\S+ MiB: \d+% of the [\d.]+ GiB (of memory available|free in \S+)\)", lines[0]
    )
    fits = float(re.search(r"lower --buffer to ([\d.e+-]+) s", lines[0]).group(1))
    assert 0 < fits < 10
    s = summary(tmp_path)
    assert s["status"] == "failed" and s["frames"] == 0
    assert_memory_as_before(before, proc.pid)


# ------------------------------------------------------------------------------------------ 3. the
# stream's clock


def scrape(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


@pytest.mark.parametrize(("step", "first"), [("1/64000", "later"), ("1/30", "at once")])
def test_a_sender_whose_timestamps_lie_is_run_on_the_arrival_clock(
    tmp_path: Path, step: str, first: str
) -> None:
    """500 frames a second for 5 s stamped 1/64,000 s (or 1/30 s) apart: one warning line, the
    metric, the summary's ``live.clock``. Timestamps ahead of the arrival clock (1/30) are refused
    at connection: every row's time, ``duration_s`` and the ring follow the arrival clock (~5 s, not
    167 s; a ring of ~500 slots, not 30). Timestamps behind it (1/64,000) are what late frames look
    like too: the run goes on the arrival clock once they fell 1 s behind it (``duration_s``
    seconds, not 0.04 s), and the ring was never sized for 64,000 FPS."""
    port, mport = free_port(), free_port()
    before = mem_available()
    sender = start_sender(port, "--fps", "500", "--duration", "5", "--timestamp-step", step)
    live = subprocess.Popen(
        live_cmd(
            f"tcp://127.0.0.1:{port}",
            tmp_path,
            "--workers",
            "2",
            "--landmarks",
            "lids",
            "--metrics-port",
            str(mport),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    believed = None
    deadline = time.monotonic() + 120
    while live.poll() is None and time.monotonic() < deadline:
        if (tmp_path / "cam.frames.csv").exists():
            believed = scrape(mport, "eyeblink_stream_clock_believed")
            if believed == 0.0:
                break
        time.sleep(0.1)
    err = live_to_end(live, sender, 120)
    assert believed == 0.0, err
    said = [ln for ln in err.splitlines() if "clock is not believable" in ln]
    assert (
        len(said) == 1 and said[0].startswith("eyeblink: warning: ") and "arrival clock" in said[0]
    ), err
    s = summary(tmp_path)
    clock = s["live"]["clock"]
    assert (
        clock["believed"] is False
        and clock["clock"] == "arrival"
        and clock["message"] in s["warnings"]
    )
    r = rows(tmp_path)
    assert len(r) == s["live"]["frames_in"] >= 1500
    ts = [float(x["timestamp_s"]) for x in r]
    assert all(b >= a for a, b in itertools.pairwise(ts)) and abs(ts[-1] - s["duration_s"]) < 1e-6
    # never sized for the claimed 64,000 FPS: at most 4x the rate the first frames arrived at, or
    # 500 FPS
    assert s["live"]["ring_slots"] <= max(4 * s["source"]["arrival_fps"], 500) + 1 < 6400
    if first == "at once":
        assert clock["from_frame"] == 0 and clock["mismatch"] == "probe"
        assert s["source"]["timestamps"] == "arrival_monotonic" and 4.0 < s["duration_s"] < 8.0
        assert s["live"]["ring_slots"] >= 400  # the arrival rate, not the claimed 30
    else:
        assert clock["mismatch"] == "behind" and 0 < clock["from_frame"] < len(r)
        assert 1.0 < s["duration_s"] < 8.0  # its own clock would say 0.04 s
    assert_memory_as_before(before, live.pid)


def test_an_honest_stream_keeps_its_own_clock(tmp_path: Path) -> None:
    from eyeblink.sources.live import StreamSource

    port = free_port()
    sender = start_sender(port, "--fps", "500", "--stop-after", "2500")
    try:
        src = StreamSource(f"tcp://127.0.0.1:{port}")
        ts = [c.timestamp_s for c in src.capture()]
        src.close()
    finally:
        sender.kill()
    assert src.clock.believed and src.clock.windows >= 2, src.clock.summary()
    assert ts == pytest.approx([i / 500 for i in range(2500)], abs=1e-9)


def test_a_clock_that_runs_slow_is_found_while_the_stream_runs() -> None:
    """Timestamps 1/600 s apart on a 500 FPS stream (0.83x) are found once they fell 1 s behind the
    arrival clock (its least-delayed frames); from that frame on the times follow the arrival clock.
    """
    from eyeblink.sources.live import StreamSource

    port = free_port()
    sender = start_sender(port, "--fps", "500", "--stop-after", "5000", "--timestamp-step", "1/600")
    try:
        src = StreamSource(f"tcp://127.0.0.1:{port}")
        assert src.clock.believed  # at connection: 600 FPS claimed, 500 arriving: within 2x
        caps = list(src.capture())
        src.close()
    finally:
        sender.kill()
    clock = src.clock.summary()
    assert clock["believed"] is False and clock["mismatch"] == "behind", clock
    first = clock["from_frame"]
    assert 1000 < first < 5000
    ts = [c.timestamp_s for c in caps]
    assert ts[:first] == pytest.approx([i / 600 for i in range(first)], abs=1e-9)
    after = [
        b.timestamp_s - a.timestamp_s - (b.arrival_s - a.arrival_s)
        for a, b in zip(caps[first:], caps[first + 1 :], strict=False)
    ]
    assert max(abs(x) for x in after) < 1e-9  # the arrival clock's steps
    assert src.describe()["timestamps_from"] == {
        "stream_pts": first,
        "arrival_monotonic": 5000 - first,
    }


def test_the_clock_check_rules() -> None:
    """The rules on exact sequences: a clock ahead (fast, or a jump), a clock behind (slow) and a
    step back; a capture that waited for a free slot, or a reader that never waited for data, is no
    evidence of a slow clock; delays that come and go are none either."""

    def feed(
        check: ClockCheck,
        n: int,
        ts_step: float,
        arr_step: float,
        t0: float = 0.0,
        a0: float = 100.0,
        *,
        wait_every: int = 0,
        read_wait: float = 0.5,
        delay: float = 0.0,
    ) -> None:
        for i in range(n):
            # a reader waiting half of each interval: not backed up
            check.note_read(arr_step * read_wait)
            if wait_every and i % wait_every == 0:
                check.note_wait()
            # every other second of frames late by ``delay``
            late = delay if (i // 500) % 2 else 0.0
            check.stamp(t0 + i * ts_step, a0 + i * arr_step + late)

    ok = ClockCheck("cam")
    feed(ok, 5000, 0.002, 0.002, delay=0.3)
    assert ok.believed and ok.windows >= 4
    fast = ClockCheck("cam")
    feed(fast, 5000, 0.0024, 0.002)  # 1.2x: 1 s ahead after ~5 s
    assert not fast.believed and fast.kind == "ahead" and 2500 < (fast.frame or 0) < 3500
    slow = ClockCheck("cam")
    feed(slow, 5000, 0.0016, 0.002)  # 0.8x: 1 s behind after ~5 s
    assert not slow.believed and slow.kind == "behind"
    # --on-overload block waited; a backed-up reader
    for kw in ({"wait_every": 100}, {"read_wait": 0.0}):
        blocked = ClockCheck("cam")
        feed(blocked, 5000, 0.0016, 0.002, **kw)
        assert blocked.believed, kw
    jump = ClockCheck("cam")
    feed(jump, 1000, 0.002, 0.002)
    # 8 s ahead in one step: the arrival clock from here
    assert jump.stamp(10.0, 102.0) == pytest.approx(2.0)
    assert not jump.believed and jump.kind == "ahead" and jump.frame == 1000
    assert jump.stamp(10.002, 102.002) == pytest.approx(2.002)
    back = ClockCheck("cam")
    feed(back, 1000, 0.002, 0.002)
    back.stamp(-0.5, 102.0)
    assert back.kind == "back" and "went back" in (back.text or "")


# ------------------------------------------------------------------------------------------ 4.
# start-up


def test_a_30_fps_stream_loses_no_frame_and_its_status_is_ok(tmp_path: Path) -> None:
    """The first frames of a slow stream (read at connection, 0.5 s of them at 30 FPS) and the
    workers' first frames are no reason to drop anything: every frame analysed, ``status`` ok at
    both levels."""
    port = free_port()
    sender = start_sender(port, "--fps", "30", "--duration", "4")
    err = live_to_end(
        subprocess.Popen(
            live_cmd(f"tcp://127.0.0.1:{port}", tmp_path, "--workers", "2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        ),
        sender,
        120,
    )
    s = summary(tmp_path)
    r = rows(tmp_path)
    assert len(r) == s["live"]["frames_in"] == 120 and [int(x["frame"]) for x in r] == list(
        range(120)
    )
    assert sum(x["dropped"] == "1" for x in r) == 0 and s["live"]["frames_dropped"] == 0, err
    assert s["live"]["status"] == "ok" and s["status"] == "ok", s["warnings"]
    assert s["live"]["startup_frames"] > 0 and s["live"]["clock"]["believed"] is True
    assert "were dropped" not in err and "more cores" not in err


# ------------------------------------------------------------------------------------------ 5.
# files


def test_record_onto_an_existing_file_is_refused_unless_overwrite(tmp_path: Path) -> None:
    old = tmp_path / "session.nut"
    old.write_bytes(b"a previous session's recording")
    proc = subprocess.run(
        live_cmd(f"tcp://127.0.0.1:{free_port()}", tmp_path / "out", "--record", str(old)),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    lines = errors(proc.stderr)
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--record {old} exists" in lines[0] and "--overwrite" in lines[0]
    assert old.read_bytes() == b"a previous session's recording"
    port = free_port()
    sender = start_sender(port, "--fps", "200", "--stop-after", "100")
    err = live_to_end(
        subprocess.Popen(
            live_cmd(
                f"tcp://127.0.0.1:{port}",
                tmp_path / "out",
                "--record",
                str(old),
                "--overwrite",
                "--workers",
                "1",
                "--landmarks",
                "lids",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        ),
        sender,
        120,
    )
    rec = summary(tmp_path / "out")["live"]["recording"]
    assert rec["frames"] + rec["dropped"] == 100, err
    assert old.stat().st_size > 100 * 640 * 480 * (rec["frames"] / 100) * 0.99


@posix_stop_signals
def test_counts_in_the_warnings_of_a_run_stopped_at_once_are_the_rows_on_disk(
    tmp_path: Path,
) -> None:
    """2,000 FPS into one worker with the gate on (a backlog of up to 1 s: --max-latency-ms 2000),
    then Ctrl-C twice while it drains: every "N of M rows" of the summary's warnings counts what
    frames.csv holds, as do ``frames_dropped`` and ``rows_written``; the frames captured but never
    written are said as such."""
    port = free_port()
    sender = start_sender(port, "--fps", "2000", "--duration", "60")
    live = subprocess.Popen(
        live_cmd(
            f"tcp://127.0.0.1:{port}",
            tmp_path,
            "--workers",
            "1",
            "--landmarks",
            "lids",
            "--gate-port",
            "0",
            "--max-latency-ms",
            "2000",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]
    try:
        path = tmp_path / "cam.frames.csv"
        deadline = time.monotonic() + 120
        while (
            not (path.exists() and path.read_text().count("\n") > 1500)
            and time.monotonic() < deadline
        ):
            assert live.poll() is None, live.communicate()
            time.sleep(0.05)
        live.send_signal(signal.SIGINT)  # drain ...
        time.sleep(0.05)
        live.send_signal(signal.SIGINT)  # ... no: stop at once
        _, err = live.communicate(timeout=60)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode in (0, 130) and "Traceback" not in err, err
    s = summary(tmp_path)
    r = rows(tmp_path)
    lv = s["live"]
    assert lv["rows_written"] == len(r) == s["frames"]
    assert lv["frames_dropped"] == sum(x["dropped"] == "1" for x in r)
    counted = [
        (int(a), int(b))
        for w in s["warnings"]
        for a, b in re.findall(r"(\d+) of (\d+) (?:rows|frames) \(", w)
    ]
    assert all(total == len(r) for _, total in counted), (counted, len(r))
    for w in s["warnings"]:
        m = re.search(r"(\d+) of the (\d+) frames captured were never written", w)
        if m:
            assert int(m.group(2)) == lv["frames_in"] and int(m.group(1)) == lv["frames_in"] - len(
                r
            )


def test_a_camera_that_is_not_there_is_one_line_without_opencv_s_warnings(tmp_path: Path) -> None:
    if Path("/dev/video97").exists():
        pytest.skip("a camera 97 exists here")
    proc = subprocess.run(
        live_cmd("97", tmp_path, "--workers", "1", "--landmarks", "lids"),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    lines = errors(proc.stderr)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert (
        lines[0].startswith("eyeblink: error: cannot open camera 97") and "WARN" not in proc.stderr
    )
