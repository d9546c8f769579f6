"""Live mode: real senders on loopback, the real ``eyeblink live`` CLI, the real metrics endpoint.

The sender is ``python -m eyeblink.lab.loopback`` (PyAV muxing raw gray video in NUT to
``tcp://127.0.0.1:PORT?listen``): FFmpeg's own network code on both sides, no ``ffmpeg`` binary
needed, so these tests always run. One test streams with a real ``ffmpeg`` process (the static
binary of the ``imageio-ffmpeg`` wheel, in the ``test`` extra) from a recorded video. The Basler
test runs pylon's camera emulation (``PYLON_CAMEMU=1``) fed with rendered face frames; it skips
only when pypylon is not installed.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    CHILD_SIGNALS,
    free_port,
    kill_tree,
    live_to_end,
    posix_stop_signals,
    start_sender,
)

from eyeblink.errors import ConfigError, VideoOpenError
from eyeblink.runtime.choose import choose_landmarks
from eyeblink.runtime.live.pipeline import LIVE_FRAME_COLUMNS, LiveConfig
from eyeblink.sources.live import _stream_name, open_live_source

REPO = Path(__file__).resolve().parent.parent


def start_live(url: str, out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            url,
            "-o",
            str(out),
            "--name",
            "cam",
            "--log-level",
            "info",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]


def live_run(out: Path, sender_args: list[str], *live_args: str, timeout: float = 120) -> str:
    """Stream the loopback sender (``sender_args``) through ``eyeblink live`` to its end; the
    run's stderr."""
    port = free_port()
    sender = start_sender(port, *sender_args)
    live = start_live(f"tcp://127.0.0.1:{port}", out, *live_args)
    return live_to_end(live, sender, timeout)


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "cam.frames.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def summary(out: Path) -> dict:
    return json.loads((out / "cam.summary.json").read_text())


def wait_rows(out: Path, n: int, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    path = out / "cam.frames.csv"
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\n") > n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"no {n} rows in {path} after {timeout} s")


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


# ------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("url", "stem"),
    [
        ("tcp://127.0.0.1:5000", "tcp-127.0.0.1-5000"),
        ("tcp://127.0.0.1:5000?listen=1", "tcp-127.0.0.1-5000"),
        ("rtsp://user:pw@cam.lab:554/stream1", "rtsp-cam.lab-554-stream1"),
        ("udp://@:1234", "udp-1234"),
    ],
)
def test_stream_names(url: str, stem: str) -> None:
    assert _stream_name(url) == stem


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ("ftp://host/x", ConfigError, "unknown live source"),
        ("video.avi", ConfigError, "eyeblink process"),
        ("camera:front", ConfigError, "camera:INDEX"),
        ("camera:97", VideoOpenError, "cannot open camera 97"),
        ("/dev/video97", VideoOpenError, "cannot open camera"),
    ],
)
def test_bad_sources(spec: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        open_live_source(spec)


def test_stream_not_there_fails_at_open() -> None:
    from eyeblink.sources.live import StreamOptions

    t0 = time.monotonic()
    with pytest.raises(VideoOpenError, match="check that the sender is running"):
        open_live_source(f"tcp://127.0.0.1:{free_port()}", stream=StreamOptions(open_timeout_s=0.5))
    # it gives up (open_timeout_s), it does not hang: no tighter timing
    assert time.monotonic() - t0 < 60


def test_stream_not_there_fails_in_one_line_after_loading(tmp_path: Path) -> None:
    """The CLI connects once its workers are ready: a wrong URL still ends in one line, exit 2,
    no traceback."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{free_port()}",
            "-o",
            str(tmp_path),
            "--name",
            "cam",
            "--landmarks",
            "auto",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == VideoOpenError.exit_code, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("eyeblink: error:")]
    assert len(lines) == 1 and "check that the sender is running" in lines[0]
    assert "Traceback" not in proc.stderr
    assert summary(tmp_path)["status"] == "failed"


def test_a_sender_that_connects_and_sends_nothing_is_said_in_words() -> None:
    """A peer that accepts the connection and stays silent: the error says so, not FFmpeg's
    "Immediate exit requested" (its text for our own open timeout)."""
    import threading

    from eyeblink.sources.live import StreamOptions

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()
    try:
        src = open_live_source(
            f"tcp://127.0.0.1:{port}", connect=False, stream=StreamOptions(open_timeout_s=0.5)
        )
        with pytest.raises(
            VideoOpenError, match=r"a sender connected but sent no video within 0\.5 s"
        ) as err:
            src.start()
        assert "Immediate exit" not in str(err.value)
    finally:
        for c in held:
            c.close()
        server.close()


def test_reconnect_n_uses_every_one_of_its_tries(caplog: pytest.LogCaptureFixture) -> None:
    """``--reconnect 3`` after the sender is gone for good: three tries, each waiting the open
    timeout, then the stream is lost, naming the count; never fewer tries than asked for."""
    import logging

    from eyeblink.sources.live import SourceLostError, StreamOptions

    port = free_port()
    sender = start_sender(port, "--fps", "500", "--stop-after", "20")
    src = open_live_source(
        f"tcp://127.0.0.1:{port}",
        connect=False,
        stream=StreamOptions(open_timeout_s=0.5, reconnect=3, reconnect_delay_s=0.05),
    )
    try:
        src.start()
        frames = 0
        with (
            caplog.at_level(logging.WARNING, logger="eyeblink"),
            pytest.raises(SourceLostError, match="reconnect 3 of 3 failed"),
        ):
            for _ in src.capture():
                frames += 1
                if frames == 20:
                    # it has sent its frames and closed: nobody will answer again
                    sender.wait(timeout=30)
        assert frames == 20
        tries = [r.getMessage() for r in caplog.records if "reconnecting" in r.getMessage()]
        assert [t.rsplit("(", 1)[1] for t in tries] == ["1 of 3)", "2 of 3)", "3 of 3)"], tries
        assert src.reconnects == 3
    finally:
        src.close()
        sender.kill()


def test_stream_connects_on_start_when_deferred() -> None:
    from eyeblink.sources.live import StreamOptions

    port = free_port()
    src = open_live_source(
        f"tcp://127.0.0.1:{port}", stream=StreamOptions(open_timeout_s=0.5), connect=False
    )
    # nothing opened yet: no error either
    assert (src.width, src.height, src.nominal_fps) == (0, 0, None)
    with pytest.raises(VideoOpenError, match="check that the sender is running"):
        src.start()
    sender = start_sender(port, "--fps", "500", "--stop-after", "20")
    try:
        src = open_live_source(f"tcp://127.0.0.1:{port}", connect=False)
        src.start()
        assert (src.width, src.height, src.nominal_fps) == (640, 480, 500.0)
        assert sum(1 for _ in src.capture()) == 20
    finally:
        src.close()
        sender.kill()


@pytest.mark.parametrize(
    ("fps", "cores", "reuse_ms", "model", "holds"),
    [
        # lids first: it holds the camera's rate on any lab PC (the registry's constants: the
        # fallback costs)
        (500.0, 2, 20.0, "lids", True),
        (500.0, 16, 20.0, "lids", True),
        (None, 2, 20.0, "lids", True),
        (30.0, 1, 20.0, "lids", True),
        (500.0, 1, 20.0, "lids", True),
        (1000.0, 2, 20.0, "lids", True),
        # nothing holds the rate: the cheaper of the two, said in the reason
        (1000.0, 1, 20.0, "lids", False),
        # the face mesh on every frame (--mesh-reuse-ms 0): the mesh's own EAR is then the cheaper
        # one
        (2000.0, 1, 0.0, "mesh-ear", False),
    ],
)
def test_auto_landmarks_fit_the_rate_to_the_cores(
    fps: float | None, cores: int, reuse_ms: float, model: str, holds: bool
) -> None:
    chosen, reason, ok = choose_landmarks(fps, cores, reuse_ms)
    assert (chosen, ok) == (model, holds) and reason.startswith(model)
    assert ("CANNOT hold" in reason) == (not holds)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"landmarks": "face5"},
            "live landmarks must be one of auto, mesh, mesh-ear, lids, face68, eye12",
        ),
        ({"overload": "skip"}, "--on-overload must be one of drop, block"),
        ({"buffer_s": 0}, r"--buffer must be a number in \(0, 10\] seconds"),
        ({"chunk_frames": 0}, "--chunk-frames must be a whole number in 1..256"),
        ({"duration_s": -1.0}, r"--duration must be a number in \(0, "),
    ],
)
def test_live_config_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        LiveConfig(**kwargs)


# ------------------------------------------------------------------------------------------ end to
# end


def test_stream_end_to_end_with_metrics(tmp_path: Path) -> None:
    """1,000 frames at 500 FPS over TCP: one row per frame, stream timestamps, metrics scraped
    mid-run."""
    port, mport = free_port(), free_port()
    sender = start_sender(port, "--fps", "500", "--stop-after", "1000")
    live = start_live(
        f"tcp://127.0.0.1:{port}",
        tmp_path,
        "--on-overload",
        "block",
        "--metrics-port",
        str(mport),
        "--log-file",
        str(tmp_path / "live.log"),
    )
    try:
        wait_rows(tmp_path, 50, live)
        m = scrape(mport)
        for name in (
            "eyeblink_frames_in_total",
            "eyeblink_frames_processed_total",
            "eyeblink_frames_dropped_total",
            'eyeblink_fps{direction="in"}',
            'eyeblink_queue_depth{queue="ring"}',
            'eyeblink_stage_latency_seconds_count{stage="total"}',
            "eyeblink_face_lost_ratio",
            "eyeblink_blinks_total",
            'eyeblink_ear{eye="left"}',
            "eyeblink_worker_restarts_total",
            "eyeblink_rows_unpublished_total",
        ):
            assert name in m, name
        # lids holds 500 FPS on this machine's cores
        assert m['eyeblink_landmark_model{model="lids"}'] == 1
        assert (
            m["eyeblink_adapt_level"] >= 0 and 'eyeblink_adapt_steps_total{direction="down"}' in m
        )
        assert m["eyeblink_frames_processed_total"] > 0
        assert m['eyeblink_stage_latency_seconds_count{stage="analyze"}'] > 0
        # each process's resident memory, read from /proc at scrape time: the sink, the loader, the
        # workers
        for role in ("sink", "loader", "worker-0"):
            assert 20 * 2**20 < m[f'eyeblink_memory_rss_bytes{{process="{role}"}}'] < 8 * 2**30, (
                role
            )
        _, err = live.communicate(timeout=60)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 0, err
    assert "end of stream" in err
    r = rows(tmp_path)
    assert list(r[0]) == list(LIVE_FRAME_COLUMNS)
    assert len(r) == 1000
    assert [int(x["frame"]) for x in r] == list(range(1000))
    assert all(x["dropped"] == "0" for x in r)
    # the stream's PTS, not the arrival time
    assert abs(float(r[999]["timestamp_s"]) - 999 / 500) < 1e-6
    assert sum(x["face"] == "1" for x in r) > 950
    s = summary(tmp_path)
    assert s["status"] == "ok"
    assert s["source"]["timestamps"] == "stream_pts"
    assert s["live"]["frames_in"] == 1000 and s["live"]["frames_dropped"] == 0
    assert s["live"]["stop_reason"] == "end of stream"
    # sampled from the first written rows on; a 2 s run has no minute-2 reference
    mem = s["live"]["memory"]
    assert mem["samples"] >= 1 and mem["rss_mib_reference"] is None and mem["growth_ratio"] is None
    assert {"sink", "loader", "worker-0"} <= set(mem["rss_mib_by_process"])
    assert 50 < mem["rss_mib_last"] <= mem["rss_mib_max"]
    assert not any("memory grew" in w for w in s["warnings"])
    # --landmarks auto: the model this machine runs at 500 FPS (its costs measured here), in the
    # summary and stderr
    reason = s["live"]["landmarks_choice"]
    assert s["live"]["landmarks_model"] == s["settings"]["landmarks"]["model"] == "lids"
    assert reason.startswith("lids: 500 FPS needs") and "measured on" in reason
    assert f"eyeblink: eye model {reason}" in err
    assert s["live"]["host_costs"]["measured"] and s["live"]["host_costs"]["fit_ms"]["lids"] > 0
    log = (tmp_path / "live.log").read_text()
    assert "MainProcess[" in log and "eyeblink-loader[" in log and "capture stopped" in log


@pytest.mark.parametrize(
    "metadata", [[], [b"-metadata", b"title=\xca\xc7 GBK, not UTF-8"]], ids=["plain", "non-utf8"]
)
def test_real_ffmpeg_process_streams_a_recording_to_loopback(
    tmp_path: Path, make_video, metadata: list[bytes]
) -> None:
    """``ffmpeg -re -i rec.mkv -f nut tcp://...?listen=1`` -> ``eyeblink live``: every frame, on the
    stream's clock.

    ``non-utf8``: a title that is not UTF-8 (the ZJU AVIs carry GBK titles) is carried into the
    stream; live reads it as ``process`` does (``metadata_errors="replace"``) instead of failing."""
    ffmpeg = pytest.importorskip("imageio_ffmpeg").get_ffmpeg_exe()
    from eyeblink.lab.loopback import render_loop_frames

    n = 300
    video = make_video(render_loop_frames(n, fps=500.0), container="mkv", codec="ffv1", fps=500)
    port = free_port()
    sender = subprocess.Popen(
        [
            ffmpeg,
            "-hide_banner",
            "-loglevel",
            "error",
            "-re",
            "-i",
            str(video),
            *metadata,
            "-c:v",
            "rawvideo",
            "-pix_fmt",
            "gray",
            "-f",
            "nut",
            f"tcp://127.0.0.1:{port}?listen=1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = tmp_path / "out"
    # waits for ffmpeg to listen
    live = start_live(f"tcp://127.0.0.1:{port}", out, "--on-overload", "block")
    try:
        _, err = live.communicate(timeout=120)
        sender.wait(timeout=30)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 0, err
    assert sender.returncode == 0, sender.stderr.read() if sender.stderr else ""
    r = rows(out)
    assert [int(x["frame"]) for x in r] == list(range(n))
    assert abs(float(r[-1]["timestamp_s"]) - (n - 1) / 500) < 1e-6
    assert sum(x["face"] == "1" for x in r) > 0.95 * n
    s = summary(out)
    assert s["status"] == "ok" and s["source"]["timestamps"] == "stream_pts"
    assert s["live"]["stop_reason"] == "end of stream"


#: NUT's syncpoint start code ('N', 'K', then FFmpeg's 48-bit constant)
NUT_SYNCPOINT = bytes.fromhex("4e4be4adeeca4569")


def received_bytes(port: int, timeout: float = 30.0) -> bytes:
    """Everything the sender on ``port`` sends, read by a plain TCP client until it closes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, "the sender never listened"
            time.sleep(0.05)
    chunks = []
    with conn:
        while chunk := conn.recv(1 << 20):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("args", "low", "high"),
    [([], 0, 1), (["--syncpoints"], 190, 200)],
    ids=["default", "syncpoints"],
)
def test_the_loopback_sender_writes_nut_without_syncpoints(
    args: list[str], low: int, high: int
) -> None:
    """The project's sender muxes NUT in pipe mode: FFmpeg's NUT demuxer keeps every syncpoint it
    reads until the stream ends (~6 MiB a minute at 500 FPS 640x480; see
    eyeblink.runtime.live.memory), so a sender for a long run writes none; ``--syncpoints`` writes
    one a frame, as a default ``ffmpeg -f nut`` sender does."""
    port = free_port()
    sender = start_sender(port, "--fps", "1000", "--stop-after", "200", *args)
    try:
        data = received_bytes(port)
        sender.communicate(timeout=30)
    finally:
        sender.kill()
    assert len(data) > 200 * 640 * 480  # every frame arrived
    assert low <= data.count(NUT_SYNCPOINT) <= high


def test_live_session_is_finalised_like_process(tmp_path: Path) -> None:
    """When the capture ends: FEC calibrated (frames.csv rewritten), trials and traces written,
    as `process` does."""
    trials = tmp_path / "trials.csv"
    trials.write_text("trial,cs_onset_s,us_onset_s\n1,0.4,0.65\n2,1.2,1.45\n", encoding="utf-8")
    out = tmp_path / "out"
    err = live_run(
        out,
        ["--fps", "500", "--stop-after", "1000", "--distinct", "500"],
        "--on-overload",
        "block",
        "--trials",
        str(trials),
        "--report",
    )
    s = summary(out)
    # --report: the page at the end, with the eye crops the workers kept during the capture
    assert (out / "cam.report.html").is_file() and "cam: report " in err
    assert s["blinks"] >= 1
    with np.load(out / "cam.crops.npz") as z:
        assert z["strips"].shape[1:] == (40, 120) and len(z["frames"]) >= 2
    # inlined in the page's data
    assert '"data:image/jpeg;base64,' in (out / "cam.report.html").read_text()
    assert s["closure"]["provisional"] is False and s["closure"]["method"] in (
        "responses",
        "default",
    )
    assert s["trials"]["trials"] == 2
    with (out / "cam.trials.csv").open(newline="") as fh:
        assert [r["trial"] for r in csv.DictReader(fh)] == ["1", "2"]
    assert (out / "cam.traces.csv").stat().st_size > 0
    r = rows(out)
    assert len(r) == 1000 and list(r[0]) == list(LIVE_FRAME_COLUMNS)
    assert sum(x["closure"] != "" for x in r) > 900


def test_live_checks_its_trials_file_before_the_capture(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{free_port()}",
            "-o",
            str(tmp_path),
            "--trials",
            str(tmp_path / "missing.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "trials file not found" in proc.stderr and "missing.csv" in proc.stderr


@posix_stop_signals
def test_sigterm_drains_and_exits_0(tmp_path: Path) -> None:
    port = free_port()
    sender = start_sender(port, "--fps", "500", "--duration", "60")
    live = start_live(f"tcp://127.0.0.1:{port}", tmp_path)
    try:
        wait_rows(tmp_path, 200, live)
        live.send_signal(signal.SIGTERM)
        _, err = live.communicate(timeout=30)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 0, err
    assert "stopped by SIGTERM" in err
    s = summary(tmp_path)
    r = rows(tmp_path)
    assert s["status"] == "ok" and s["live"]["stop_reason"] == "stopped by SIGTERM"
    # every captured frame has its row
    assert len(r) == s["frames"] == s["live"]["frames_in"] >= 200
    assert [int(x["frame"]) for x in r] == list(range(len(r)))


def test_sender_dies_mid_stream(tmp_path: Path) -> None:
    """The sender is killed (SIGKILL) mid-stream: the run ends by itself, rows and summary on
    disk."""
    port = free_port()
    sender = start_sender(port, "--fps", "500", "--duration", "60")
    live = start_live(f"tcp://127.0.0.1:{port}", tmp_path, "--read-timeout", "2")
    try:
        wait_rows(tmp_path, 200, live)
        sender.kill()
        _, err = live.communicate(timeout=30)
    finally:
        live.kill()
    assert live.returncode in (0, 4), err
    assert ("end of stream" in err) or ("stream lost" in err), err
    s = summary(tmp_path)
    assert len(rows(tmp_path)) == s["frames"] >= 200


def test_drop_policy_writes_gap_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one worker pauses 2 s at frame 200 (test hook: on any machine, however fast) while the
    sender goes on at 1,500 FPS into a 0.02 s buffer: drops become gap rows."""
    from eyeblink.runtime.procs.parallel import FAULT_ENV

    monkeypatch.setenv(FAULT_ENV, "pause@200")  # the live child inherits it
    live_run(
        tmp_path,
        ["--fps", "1500", "--stop-after", "1500"],
        "--workers",
        "1",
        "--detect-every",
        "1",
        "--landmarks",
        "face68",
        "--buffer",
        "0.02",
        "--metrics-port",
        str(free_port()),
        timeout=60,
    )
    r = rows(tmp_path)
    s = summary(tmp_path)
    dropped = [x for x in r if x["dropped"] == "1"]
    assert len(r) == 1500 and [int(x["frame"]) for x in r] == list(range(1500))
    assert dropped and len(dropped) == s["live"]["frames_dropped"]
    assert all(x["face"] == "0" and x["ear"] == "" and x["timestamp_s"] != "" for x in dropped)
    assert any(x["face"] == "1" for x in r)
    # what a script reads says so too
    assert s["live"]["status"] == "overloaded" and s["status"] == "overloaded"


def test_basler_emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pylon's camera emulation replays rendered face frames through the live pipeline."""
    pytest.importorskip("pypylon")
    import cv2

    from eyeblink.config import RunConfig
    from eyeblink.lab.loopback import render_loop_frames
    from eyeblink.runtime.live.pipeline import LivePipeline
    from eyeblink.sources.live import BaslerSource

    monkeypatch.setenv("PYLON_CAMEMU", "1")
    images = tmp_path / "images"
    images.mkdir()
    frames = render_loop_frames(8)
    for i, f in enumerate(frames):
        cv2.imwrite(str(images / f"f{i:03d}.png"), f)
    source = BaslerSource(
        None,
        name="cam",
        features={
            "Width": 640,
            "Height": 480,
            "ImageFilename": str(images),
            "ImageFileMode": "On",
            "TestImageSelector": "Off",
            "AcquisitionFrameRateAbs": 500.0,
        },
    )
    assert (source.width, source.height) == (640, 480)
    cfg = RunConfig(max_frames=60)
    with source:
        result, _ = LivePipeline(cfg, LiveConfig(workers=1, overload="block")).run(
            source, tmp_path / "out"
        )
    s = result.summary
    assert s["status"] == "ok" and s["frames"] == 60
    assert s["source"]["kind"] == "basler" and s["source"]["model"] == "Emulation"
    assert s["live"]["stop_reason"] == "--max-frames 60 reached"
    assert result.faces == 60


@posix_stop_signals
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_waiting_for_the_sender_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    """No sender yet: Ctrl-C or SIGTERM ends the wait as it ends a capture (exit 0, files written),
    not as "cannot open stream"."""
    live = start_live(f"tcp://127.0.0.1:{free_port()}", tmp_path)
    try:
        assert live.stderr is not None
        seen = []
        for line in live.stderr:  # the run logs when it starts waiting (workers loaded)
            seen.append(line)
            if "waiting for tcp://" in line:
                break
        else:
            pytest.fail("".join(seen))
        live.send_signal(sig)
        _, err = live.communicate(timeout=60)
    finally:
        live.kill()
    err = "".join(seen) + err
    assert live.returncode == 0, err
    assert "Traceback" not in err and "cannot open stream" not in err
    s = summary(tmp_path)
    assert s["frames"] == 0 and s["status"] == "ok"
    assert f"stopped by {sig.name}" in s["live"]["stop_reason"]


def test_reconnect_retries_a_sender_that_sent_garbage_at_connect(tmp_path: Path) -> None:
    """With ``--reconnect``, a first connection that brings no video (here: text, then the sender
    hangs up) is tried again like a lost stream; the real sender that listens next is processed to
    its end (exit 0)."""
    port = free_port()
    with socket.socket() as srv:
        # the real sender binds the port next
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen()
        live = start_live(
            f"tcp://127.0.0.1:{port}", tmp_path, "--reconnect", "1", "--on-overload", "block"
        )
        try:
            srv.settimeout(120)
            conn, _ = srv.accept()  # the live run connects once its workers are ready
            with conn:
                conn.sendall(b"this is not a video stream\n" * 2000)
        except BaseException:
            live.kill()
            raise
    # on the same port, as a restarted sender
    sender = start_sender(port, "--fps", "500", "--stop-after", "300")
    err = live_to_end(live, sender, 120)
    assert "trying again (1 of 1)" in err and "Traceback" not in err
    r = rows(tmp_path)
    assert [int(x["frame"]) for x in r] == list(range(300))
    s = summary(tmp_path)
    assert (
        s["status"] == "ok"
        and s["source"]["reconnects"] == 1
        and s["live"]["stop_reason"] == "end of stream"
    )


def test_a_listen_port_taken_by_another_program_says_so(tmp_path: Path) -> None:
    """``live tcp://HOST:PORT?listen=1`` (eyeblink listens, the sender connects) on a port another
    program holds: one line naming the port and the fix, not "check that the sender is running"."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "live",
                f"tcp://127.0.0.1:{port}?listen=1",
                "-o",
                str(tmp_path),
                "--name",
                "cam",
                "--reconnect",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == VideoOpenError.exit_code and len(lines) == 1, proc.stderr
    assert lines[0].startswith("eyeblink: error: ") and f"port {port} is already in use" in lines[0]
    assert "pick another port" in lines[0] and "stop the other listener" in lines[0]
    assert "check that the sender is running" not in lines[0]


def test_a_live_run_killed_outright_leaves_headers_and_a_running_summary(tmp_path: Path) -> None:
    """``eyeblink live`` and its children killed outright mid-stream (nothing can flush): blinks.csv
    has its header although no blink ended yet, frames.csv whole rows, and summary.json says
    ``running`` (written when the run started)."""

    port = free_port()
    sender = start_sender(port, "--fps", "500", "--duration", "60")
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
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        wait_rows(tmp_path, 100, live)
    finally:
        kill_tree(live)
        live.wait()
        sender.kill()
    assert (tmp_path / "cam.blinks.csv").read_text().startswith("blink,start_frame,")
    r = rows(tmp_path)
    assert len(r) >= 100 and [int(x["frame"]) for x in r] == list(range(len(r)))
    s = summary(tmp_path)
    assert (
        s["status"] == "running"
        and s["input"] == f"tcp://127.0.0.1:{port}"
        and s["pid"] == live.pid
    )


def test_a_normal_end_of_stream_is_no_warning(tmp_path: Path) -> None:
    """The sender sends its frames and hangs up: the run ends as asked, with no WARNING line
    about it."""
    err = live_run(tmp_path, ["--fps", "500", "--stop-after", "200"], "--landmarks", "lids")
    assert "end of stream" in err
    assert not [ln for ln in err.splitlines() if "WARNING" in ln and "end of stream" in ln], err


def test_lsl_outlets_say_when_their_name_is_taken_and_liblsl_stays_quiet() -> None:
    """Two sessions publishing one LSL name: the second warns in one line naming the fix
    (--lsl-name); liblsl's own INFO lines ("Loaded default config", its build) do not reach the
    terminal."""
    pytest.importorskip("pylsl")
    code = (
        "import os\n"
        "from eyeblink.runtime.live.publish import LslOutlets\n"
        f"name = 'eyeblink-test-{os.getpid()}'\n"
        "a = LslOutlets(name, source='cam', stem='a', nominal_fps=500.0, eye_model='lids')\n"
        "b = LslOutlets(name, source='cam2', stem='b', nominal_fps=500.0, eye_model='lids')\n"
        "print(len(a.name_taken_by), len(b.name_taken_by))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1"], (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "eyeblink: warning: --lsl: another LSL stream named"
    ), lines
    assert "--lsl-name" in lines[0] and "INFO" not in proc.stderr


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real 200 KB filesystem (tmpfs), to fill: root's ``mount``; skipped where mounting is not
    allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip() or r.returncode})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_mid_session_leaves_a_failed_summary_not_running(small_disk: Path) -> None:
    """The disk fills while a live session writes its rows: exit 2 in one error line, the rows
    written before it are whole, and summary.json says ``failed`` with the error (written over its
    own bytes: no room for a new file), never ``running``."""
    port = free_port()
    sender = start_sender(port, "--fps", "500", "--stop-after", "3000")
    out = small_disk / "out"
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "live",
                f"tcp://127.0.0.1:{port}",
                "-o",
                str(out),
                "--name",
                "cam",
                "--landmarks",
                "lids",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=REPO,
        )
    finally:
        sender.kill()
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("eyeblink: error:")]
    assert (
        len(errors) == 1
        and "No space left on device" in errors[0]
        and "Traceback" not in proc.stderr
    )
    s = json.loads((out / "cam.summary.json").read_text())
    assert s["status"] == "failed" and s["exit_status"] == 2 and "No space left" in s["error"]
    text = (out / "cam.frames.csv").read_text()
    body = text.splitlines()
    assert len(body) > 100 and text.endswith("\n")  # whole rows only
    assert {len(line.split(",")) for line in body} == {len(body[0].split(","))}
