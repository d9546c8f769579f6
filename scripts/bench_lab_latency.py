"""Latency of a live session to other programs: a frame's arrival -> its LSL sample, and -> its gate
message.

    python scripts/bench_lab_latency.py [--fps 500] [--duration 20] [--landmarks auto]
                                        [--eye-roi X,Y,W,H] [--json out.json]
                                        [--view [--browser]]

What runs (all real, all on this machine):

* the loopback sender (``python -m eyeblink.lab.loopback``): a paced synthetic 640x480 gray camera
  at ``--fps`` on tcp://127.0.0.1, 1 s loops with one 150 ms blink each (about four state changes a
  second);
* ``eyeblink.live(url, lsl=True, gate_port=0, lsl_wait_s=60, fps=FPS)`` in this process, with the
  default eye model and workers (one per physical core); ``on_frame`` records each row's
  ``arrival_time`` (the moment the capture thread received the frame, ``perf_counter``);
* a **consumer process** (``python -c``): a pylsl inlet resolved by name pulls every sample and
  notes its receipt on ``pylsl.local_clock()``; a thread of it is a TCP client of the gate and notes
  each line's receipt. ``local_clock`` and ``perf_counter`` are both ``CLOCK_MONOTONIC`` on Linux
  (one clock across processes).

Latency to LSL: receipt of sample ``frame`` in the consumer minus that frame's arrival in eyeblink.
Latency to the gate: receipt of a ``state`` line minus ``arrival_time`` in the line (the arrival of
the frame that changed the state). The first ``--warmup`` seconds are left out: the blink detector
learns the open-eye baseline over its first second and then publishes the warm-up's states late, by
design. Dropped frames are counted from ``frames.csv``.

The two shares: ``of_which_arrival_to_row_written`` is the pipeline's (arrival -> the sink wrote the
row; its ``on_frame`` runs right after the row's sample was pushed),
``of_which_row_written_to_lsl_sample`` what LSL adds after that (about 0 at the median: the inlet
often has the sample before ``on_frame`` ran), and ``of_which_gate_line_sent_to_received`` the
socket's.

Under overload (e.g. ``--fps 1000`` on 2 cores): ``dropped_share`` and ``frames_late`` (the gap
rows), ``adaptations`` (the steps down and up), ``rows_past_the_latency_bound`` (rows that reached
the sink more than ``--max-latency-ms`` after their frame arrived: written, but given no LSL sample
and no state, so they are not in the latencies above), and ``memory_mib``: the RSS of this process
(the sink, the API) and of the loader and the workers after the warm-up and at the end. This
process's share grows by the API's queue of rows that nobody reads (50,000 at most, ~26 MiB) and by
the bench's own record of each frame's arrival (~10 MiB a minute at 1,000 FPS).

``--view`` serves the browser view (``view=True``) and ``--browser`` keeps a headless system
Chromium on it for the whole session (the page drawing its trace and its images, as a user
watching): ``view`` then gives the view's own CPU, per thread role (the pump, the preview encoder,
the HTTP connections, the server), in seconds and as a share of one core over the session, the
images served and the frames the loader handed over; the CPU of the browser itself (all its
processes, since it started) is ``browser_cpu_s``. Compare the drops and the latencies with and
without. ``--browser-priority idle`` starts the browser in Linux's idle scheduling class (as ``chrt
--idle 0 chromium URL`` does). ``--reader`` puts a plain HTTP client on the page's stream instead of
a browser (it is sent the rows, the state and the images a tab gets, and draws nothing): the view's
own cost to the session, as when the page is watched from another machine.
``scripts/bench_view_browser.py`` measures the browser alone, per Chromium process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from eyeblink import host

CONSUMER = r"""
import json, socket, sys, threading
import pylsl
name, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
(info,) = pylsl.resolve_byprop("name", name, 1, 120)
inlet = pylsl.StreamInlet(info, 360, 1)  # max_chunklen 1: each sample as soon as it is sent
inlet.open_stream(30)
gate = []
def client():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        data = s.recv(65536)
        if not data:
            return
        t = pylsl.local_clock()
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            gate.append((t, json.loads(line)))
th = threading.Thread(target=client, daemon=True)
th.start()
frames, recv, stamps = [], [], []
idle = None
while True:
    sample, ts = inlet.pull_sample(timeout=0.5)
    if sample is None:
        if frames and idle is None:
            idle = pylsl.local_clock()
        if idle is not None and pylsl.local_clock() - idle > 3:
            break
        continue
    idle = None
    recv.append(pylsl.local_clock())
    frames.append(int(sample[4]))
    stamps.append(ts)
th.join(5)
json.dump({"frames": frames, "recv": recv, "stamps": stamps, "gate": gate}, open(out, "w"))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_cpu_s(root: int, others: dict[int, str]) -> dict[str, float]:
    """CPU seconds (user + system, since each process started) of ``root`` and its descendants, by
    ``pid:name``, and of the ``others`` (the sender, the consumer: ``{pid: label}``) under their
    label."""
    out, todo = {}, [root, *others]
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        cpu = host.process_cpu_seconds(pid)
        name = others.get(pid) or f"{pid}:{host.process_name(pid)}"
        if cpu is None:
            continue
        out[name] = cpu
        if pid not in others:
            todo += host.children(pid)
    return out


def cores_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of all cores so far (:func:`eyeblink.host.cpu_busy_seconds`)."""
    got = host.cpu_busy_seconds()
    assert got is not None, "the cores' busy time cannot be read here"
    return got


def tree_rss_mib(root: int, leave_out: set[int]) -> dict[str, float]:
    """The RSS (MiB) of ``root`` and each of its descendants, but ``leave_out`` and theirs (the
    sender, the consumer), by ``pid:name``."""
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in leave_out:
            continue
        rss = host.rss_bytes(pid)
        if rss is None:
            continue
        out[f"{pid}:{host.process_name(pid)}"] = round(rss / 2**20, 1)
        todo += host.children(pid)
    return out


def memory_figures(
    memory: list[tuple[float, dict[str, float]]], warmup: float
) -> dict[str, object]:
    """The session's RSS after the warm-up and at the last sample while all its processes ran, in
    total and by process, and the total every 10 s."""
    if not memory:
        return {}
    n = max(len(m) for _, m in memory)
    # not the samples taken while the children exited
    full = [(t, m) for t, m in memory if len(m) == n]
    first = next(((t, m) for t, m in full if t >= warmup), full[0])
    last = full[-1]
    return {
        "after_warmup": {"t_s": first[0], "total": round(sum(first[1].values()), 1), **first[1]},
        "last": {"t_s": last[0], "total": round(sum(last[1].values()), 1), **last[1]},
        "total_every_10_s": [round(sum(m.values()), 1) for t, m in full if int(t) % 10 == 0],
    }


def open_browser(url: str, profile: Path, priority: str = "normal") -> subprocess.Popen[bytes]:
    """A headless system Chromium showing ``url`` (a process group of its own); ``priority``
    ``idle``: it and every process it starts in the idle scheduling class (``chrt --idle 0``: it
    runs only on a core nothing else wants; :func:`eyeblink.host.lower_to_idle`)."""
    import shutil

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("--browser needs the system Chromium (apt-get install chromium)")

    return subprocess.Popen(
        [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--window-size=1280,1000",
            url,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=host.lower_to_idle if priority == "idle" else None,
    )


#: ``--reader``: the page's stream read and thrown away (rows, state, and images at the rate a tab
#: gets by default)
READER = """
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1]) as r:
    while r.read(65536):
        pass
"""


def open_reader(url: str) -> subprocess.Popen[bytes]:
    """A plain HTTP client reading the view page's event stream (what a tab is sent) without drawing
    anything: the view's whole work for one tab, as a browser on another machine costs the session.
    """
    base, _, query = url.partition("?")  # a token, when the page is served beyond loopback
    events = base.rstrip("/") + "/events" + ("?" + query if query else "")
    return subprocess.Popen(
        [sys.executable, "-c", READER, events],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def close_browser(browser: subprocess.Popen[bytes]) -> float:
    """The browser's CPU seconds (all its processes), then it is killed."""
    import signal

    cpu = sum(tree_cpu_s(browser.pid, {}).values())
    with contextlib.suppress(ProcessLookupError):
        host.kill_process_group(browser.pid, signal.SIGKILL)
    browser.wait(10)
    return round(cpu, 2)


def cpu_figures(
    cpu: list[tuple[float, dict[str, float], tuple[int, int]]], warmup: float, fps: float
) -> dict[str, object]:
    """CPU ms a frame of each process between the first sample after the warm-up and the last with
    every process alive (the sender's frames at ``fps``), their total over eyeblink's own processes,
    and the cores' use."""
    if len(cpu) < 2:
        return {}
    n = max(len(c) for _, c, _ in cpu)
    full = [s for s in cpu if len(s[1]) == n]
    first = next((s for s in full if s[0] >= warmup), full[0])
    last = full[-1]
    span = last[0] - first[0]
    if span <= 0:
        return {}
    frames = span * fps
    per = {k: round((last[1][k] - first[1].get(k, 0.0)) * 1000.0 / frames, 3) for k in last[1]}
    own = round(sum(v for k, v in per.items() if not k.startswith("bench-")), 3)
    busy = (last[2][0] - first[2][0]) / max(1e-9, last[2][1] - first[2][1])
    # the floor: what the processes of the bench alone used of the cores over the same span. The
    # kernel's busy time of a virtual machine has read less than that (a reading the processes' own
    # clocks contradict): said, not hidden
    floor = sum(per.values()) * fps / 1000.0 / max(1, os.cpu_count() or 1)
    out: dict[str, object] = {
        "cpu_ms_per_frame": per,
        "cpu_ms_per_frame_eyeblink": own,
        "cores_busy": round(busy, 3),
        "cores_busy_by_the_processes": round(floor, 3),
        "cpu_span_s": span,
    }
    if busy < floor - 0.02:
        out["cores_busy_note"] = (
            "the kernel's busy time read less than the bench's own processes used: a faulty reading"
        )
    return out


def pct(x: np.ndarray) -> dict[str, float | int | None]:
    if not len(x):
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "n": len(x),
        "p50_ms": round(float(np.percentile(x, 50)) * 1e3, 2),
        "p99_ms": round(float(np.percentile(x, 99)) * 1e3, 2),
        "max_ms": round(float(x.max()) * 1e3, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fps", type=float, default=500.0, help="sender rate (default: %(default)s)")
    ap.add_argument(
        "--duration", type=float, default=20.0, help="seconds streamed (default: %(default)s)"
    )
    ap.add_argument(
        "--warmup", type=float, default=2.0, help="first seconds left out (default: %(default)s)"
    )
    ap.add_argument(
        "--landmarks",
        default="auto",
        help="the eye model (default: auto, the model live mode picks for this machine at --fps)",
    )
    ap.add_argument(
        "--eye-roi",
        default=None,
        metavar="X,Y,W,H",
        help="a recording of one eye: the session measures this region of the sender's frames (the "
        "rendered face's eye) with the region's eye model (--landmarks area or contour)",
    )
    ap.add_argument(
        "--max-age-ms",
        type=float,
        default=50.0,
        help="the session's freshness bound (default: %(default)s): a loaded machine whose rows "
        "come "
        "later than this sends stale instead of open",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes (default: the session's, one per physical core)",
    )
    ap.add_argument(
        "--priority",
        default="normal",
        choices=("normal", "high", "realtime"),
        help="the session's --priority (default: %(default)s)",
    )
    ap.add_argument(
        "--batch-frames",
        type=int,
        default=None,
        help="the session's frames per queue message (default: the session's)",
    )
    ap.add_argument("--json", default=None, help="also write the result here")
    ap.add_argument(
        "--frames-npz",
        default=None,
        help="also write each frame's times here (frame, arrival, row written, LSL sample "
        "received; "
        "perf_counter seconds): to find when the slow frames came",
    )
    ap.add_argument("--view", action="store_true", help="serve the browser view during the session")
    ap.add_argument(
        "--browser",
        action="store_true",
        help="with --view: a headless Chromium (the system's) shows the page for the whole session",
    )
    ap.add_argument(
        "--reader",
        action="store_true",
        help="with --view: instead of a browser, a plain HTTP client reads the page's stream "
        "(rows, "
        "state, images) and draws nothing: what the view costs the session when the page is "
        "watched from another machine",
    )
    ap.add_argument(
        "--browser-priority",
        default="normal",
        choices=("normal", "idle"),
        help="with --browser: idle starts it in Linux's idle scheduling class, as `chrt --idle 0 "
        "chromium URL` does (default: %(default)s)",
    )
    args = ap.parse_args()

    import eyeblink

    repo = Path(__file__).resolve().parent.parent
    port = free_port()
    name = f"eyeblink-bench-{os.getpid()}"
    sender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.loopback",
            "--port",
            str(port),
            "--fps",
            str(args.fps),
            "--duration",
            str(args.duration),
            "--distinct",
            str(int(args.fps)),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
    )
    assert sender.stdout is not None and sender.stdout.readline().strip() == "listening"
    arrivals: dict[int, float] = {}
    # (s since the session started, MiB of each process)
    memory: list[tuple[float, dict[str, float]]] = []
    leave_out = {sender.pid}
    labels = {sender.pid: "bench-sender"}
    done = threading.Event()
    # (s, CPU s of each process, cores' jiffies)
    cpu: list[tuple[float, dict[str, float], tuple[int, int]]] = []

    def watch_memory() -> None:
        t0 = time.monotonic()
        while not done.wait(1.0):
            t = round(time.monotonic() - t0, 1)
            memory.append((t, tree_rss_mib(os.getpid(), leave_out)))
            cpu.append((t, tree_cpu_s(os.getpid(), labels), cores_busy()))

    browser: subprocess.Popen[bytes] | None = None
    browser_cpu: float | None = None
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "consumer.json"
        try:
            with eyeblink.live(
                f"tcp://127.0.0.1:{port}",
                Path(tmp) / "live",
                name="bench",
                lsl=True,
                lsl_name=name,
                lsl_wait_s=120,
                gate_port=0,
                fps=args.fps,
                landmarks=args.landmarks,
                max_age_ms=args.max_age_ms,
                workers=args.workers,
                view=args.view,
                priority=args.priority,
                **({"batch_frames": args.batch_frames} if args.batch_frames else {}),
                **({"eye_roi": [int(v) for v in args.eye_roi.split(",")]} if args.eye_roi else {}),
                on_frame=lambda r: arrivals.__setitem__(
                    r.frame, (r.arrival_time, time.perf_counter())
                ),
            ) as s:
                consumer = subprocess.Popen(
                    [sys.executable, "-c", CONSUMER, name, str(s.gate_port), str(out)]
                )
                leave_out.add(consumer.pid)
                labels[consumer.pid] = "bench-consumer"
                if (args.browser or args.reader) and s.view_url:
                    browser = (
                        open_reader(s.view_url)
                        if args.reader
                        else open_browser(s.view_url, Path(tmp) / "profile", args.browser_priority)
                    )
                    leave_out.add(browser.pid)
                    # its CPU is browser_cpu_s, not eyeblink's
                    labels[browser.pid] = "bench-browser"
                watcher = threading.Thread(target=watch_memory, daemon=True)
                watcher.start()
                s.wait()
                done.set()
                if browser is not None:
                    browser_cpu = close_browser(browser)
            consumer.wait(timeout=120)
        finally:
            sender.kill()
        data = json.loads(out.read_text())
        result = s.result
    assert result is not None
    fps = args.fps
    skip = int(args.warmup * fps)
    frames = np.array(data["frames"])
    recv = np.array(data["recv"])
    keep = frames >= skip
    arr = np.array([arrivals.get(int(f), (np.nan, np.nan)) for f in frames]).reshape(-1, 2)
    lsl_lat = (recv - arr[:, 0])[keep]
    # the row written (on_frame) -> the sample received: LSL's own share
    publish = (recv - arr[:, 1])[keep]
    pipeline = (arr[:, 1] - arr[:, 0])[keep]  # arrival -> the row written by the sink
    if args.frames_npz:
        np.savez_compressed(
            args.frames_npz,
            frame=frames,
            arrival=arr[:, 0],
            row_written=arr[:, 1],
            lsl_received=recv,
        )
    gate = [(t, m) for t, m in data["gate"] if m.get("event") == "state" and m["frame"] >= skip]
    gate_lat = np.array(
        [t - m["arrival_time"] for t, m in gate if m.get("arrival_time") is not None]
    )
    # the line sent -> received by the client
    gate_transport = np.array([t - m["sent_time"] for t, m in gate])
    rows = result.frames
    from eyeblink.runtime.costs import host_info

    res = {
        "machine": {
            **host_info(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "fps": fps,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "eye_model": result.summary["live"]["landmarks_model"],
        "workers": result.summary["parallel"]["workers"],
        "workers_dealt": result.summary["live"].get("workers_dealt"),
        "frames": len(rows),
        "dropped": int(rows["dropped"].sum()),
        "lsl_samples_received": len(frames),
        "lsl_in_order": bool(np.all(np.diff(frames) > 0)) if len(frames) > 1 else None,
        "lsl_every_sample": bool(len(frames) == len(rows) and list(frames) == list(rows["frame"])),
        "arrival_to_lsl_sample": pct(lsl_lat[np.isfinite(lsl_lat)]),
        "arrival_to_gate_state_line": pct(gate_lat),
        "of_which_arrival_to_row_written": pct(pipeline[np.isfinite(pipeline)]),
        "of_which_row_written_to_lsl_sample": pct(publish[np.isfinite(publish)]),
        "of_which_gate_line_sent_to_received": pct(gate_transport),
        "pipeline_latency_ms_p99": result.summary["timings"].get("latency_ms_p99"),
        # the sink's per-hop breakdown of arrival -> row written (eyeblink.runtime.live.hops), the
        # whole run
        "hops_ms": result.summary["live"].get("hops_ms"),
        # frames that waited for the keyframe work beside the stream (it outlasted keyframe_lag_ms):
        # in `analysis`
        "keyframe_waits": result.summary["timings"].get("keyframe_waits"),
        # CPU ms a frame of each process after the warm-up, and the cores' use over the same span
        **cpu_figures(cpu, args.warmup, fps),
        "priority": result.summary["live"].get("priority"),
        "stale_events": result.summary["live"]["publish"]["stale_events"],
        # the start-up: the first answer (a state line about a fresh frame, after the detector's
        # warm-up) and how long after the first frame arrived; the rows before it too old to be
        # evidence (no stale line: nothing had been answered to be stale) and when the last of them
        # was written (the start-up's backlog caught up)
        "first_answer_frame": result.summary["live"]["publish"].get("first_answer_frame"),
        "first_answer_ms": result.summary["live"]["publish"].get("first_answer_ms"),
        "startup_old_rows": result.summary["live"]["publish"].get("startup_old_rows"),
        "startup_caught_up_ms": result.summary["live"]["publish"].get("startup_caught_up_ms"),
        # the gate's stale lines about frames after the warm-up and before the last frame: the
        # pipeline fell behind mid-stream (a line about the last frame would be the stream ending;
        # the end line now comes first)
        "stale_lines_mid_stream": sum(
            1
            for _, m in data["gate"]
            if m.get("event") == "stale" and skip <= m.get("latest_frame", -1) < len(rows) - 1
        ),
        "max_age_ms": args.max_age_ms,
        "dropped_share": round(int(rows["dropped"].sum()) / max(1, len(rows)), 4),
        "frames_late": result.summary["live"]["frames_late"],
        "adaptations": [
            (a["t_s"], a["direction"], a["to"]) for a in result.summary["live"]["adaptations"]
        ],
        # rows that reached the sink past --max-latency-ms: written, not published (no LSL sample,
        # no state)
        "rows_past_the_latency_bound": result.summary["live"]["publish"].get("late_rows"),
        "max_latency_ms": result.summary["live"]["publish"].get("max_latency_ms"),
        # the RSS of the session's processes (this one, the loader, the workers), each second of the
        # capture
        "memory_mib": memory_figures(memory, args.warmup),
    }
    view = result.summary["live"]["publish"].get("view") if args.view else None
    if view is not None:
        span = result.summary["timings"].get("wall_s") or args.duration
        res["view"] = {
            **view,
            "wall_s": span,
            "cpu_share_of_one_core": {
                k: round(v / span, 4)
                for k, v in {**view["cpu_s"], "all": sum(view["cpu_s"].values())}.items()
            },
        }
        res["browser_cpu_s"] = browser_cpu
        res["browser_priority"] = args.browser_priority
        res["reader"] = bool(args.reader)
    text = json.dumps(res, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
