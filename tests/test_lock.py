"""One writer per session (:mod:`eyeblink.outputs.lock`): two runs on the same ``OUTDIR/<stem>`` at
once, in threads and in processes, through ``process``, ``batch`` and the Python API.

The second run is refused in one line naming the first (its PID, host and start time) and the fix,
exit status 2, before any work; the first run's files are whole (contiguous rows, an ``ok`` summary
naming its own input). A lock left by a run that is gone is taken over with a warning.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eyeblink.outputs.lock import SessionBusyError, lock_path, lock_session, session_locks

REPO = Path(__file__).resolve().parent.parent
EYEBLINK = [sys.executable, "-m", "eyeblink"]


def _wait_for_holder(path: Path, timeout_s: float = 120.0) -> dict:
    """The record of the run that holds the lock at ``path``, once it has written it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            info = json.loads(path.read_text(encoding="utf-8") or "{}")
            if info:
                return info
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    raise AssertionError(f"no run took the lock {path} within {timeout_s} s")


def _assert_whole_session(outdir: Path, stem: str, video: Path) -> None:
    """Contiguous frame rows, every row complete, an ``ok`` summary naming ``video``."""
    with open(outdir / f"{stem}.frames.csv", newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    assert all(len(r) == len(header) for r in body), "a malformed row"
    frames = [int(r[header.index("frame")]) for r in body]
    assert frames == list(range(len(frames))) and frames, "rows are not contiguous"
    summary = json.loads((outdir / f"{stem}.summary.json").read_text())
    assert summary["status"] == "ok"
    assert Path(summary["input"]).resolve() == video.resolve()
    assert summary["frames"] == len(frames)


def test_a_held_lock_refuses_a_second_holder_naming_it_and_ends_with_release(
    tmp_path: Path,
) -> None:
    lock = lock_session(tmp_path, "rec")
    info = json.loads(lock_path(tmp_path, "rec").read_text())
    assert info["pid"] == os.getpid() and info["host"] == socket.gethostname() and info["started"]
    with pytest.raises(SessionBusyError) as exc:  # the same process, another open file: refused too
        lock_session(tmp_path, "rec")
    msg = str(exc.value)
    assert f"PID {os.getpid()} on host {socket.gethostname()}" in msg and "started" in msg
    assert "another output folder" in msg and "\n" not in msg
    assert exc.value.exit_code == 2
    other = lock_session(tmp_path, "other")  # another stem of the same folder is another session
    lock.release()
    other.release()
    assert not lock_path(tmp_path, "rec").exists()
    lock_session(tmp_path, "rec").release()  # free again


def test_session_locks_takes_all_or_none(tmp_path: Path) -> None:
    held = lock_session(tmp_path, "b")
    with pytest.raises(SessionBusyError), session_locks(tmp_path, ["a", "b"]):
        pass
    assert not lock_path(tmp_path, "a").exists()  # "a" was released when "b" was refused
    held.release()


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_warning(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code = (
        "import sys, time; from eyeblink.outputs.lock import lock_session; "
        "lock_session(sys.argv[1], 'rec'); print('held', flush=True); time.sleep(600)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(SessionBusyError, match=f"PID {child.pid} "):
            lock_session(tmp_path, "rec")
    finally:
        child.kill()  # gone without releasing: its lock file stays behind
        child.wait(timeout=30)
    assert lock_path(tmp_path, "rec").exists()
    lock = lock_session(tmp_path, "rec")
    err = capfd.readouterr().err
    assert "took over the lock" in err and f"PID {child.pid}" in err
    assert json.loads(lock_path(tmp_path, "rec").read_text())["pid"] == os.getpid()
    lock.release()


@pytest.mark.slow
def test_two_api_runs_on_one_session_in_threads(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """Two threads of one notebook process the same recording into one folder: the second is
    refused."""
    import eyeblink

    video, _ = face_recording
    out = tmp_path / "mix"
    first: dict[str, object] = {}

    def run() -> None:
        try:
            first["session"] = eyeblink.process(video, output=out, landmarks="mesh", workers=1)
        except BaseException as exc:  # handed to the main thread's asserts
            first["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    try:
        _wait_for_holder(lock_path(out, video.stem))
        with pytest.raises(SessionBusyError) as exc:
            eyeblink.process(video, output=out, landmarks="mesh", workers=1)
        assert f"PID {os.getpid()} " in str(exc.value)
    finally:
        t.join(timeout=600)
    assert "error" not in first, first.get("error")
    _assert_whole_session(out, video.stem, video)
    assert not lock_path(out, video.stem).exists()


@pytest.mark.slow
def test_two_cli_runs_of_different_recordings_with_one_name_in_processes(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """``process A/rec.avi -o mix`` and ``process B/rec.avi -o mix`` at once: the second exits 2 in
    one line naming the first, before any work; the first writes a whole session of its own input.
    """
    video, _ = face_recording
    a, b = tmp_path / "a" / "rec.avi", tmp_path / "b" / "rec.avi"
    for p in (a, b):
        p.parent.mkdir()
        p.symlink_to(video)
    out = tmp_path / "mix"
    cmd = [
        *EYEBLINK,
        "process",
        "-o",
        str(out),
        "--landmarks",
        "mesh",
        "--workers",
        "1",
        "--no-progress",
    ]
    first = subprocess.Popen(
        [*cmd, str(a)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        holder = _wait_for_holder(lock_path(out, "rec"))
        assert holder["pid"] == first.pid
        t0 = time.monotonic()
        second = subprocess.run(
            [*cmd, str(b)], capture_output=True, text=True, cwd=REPO, timeout=300
        )
        assert first.poll() is None, (
            "the first run ended before the second was checked: the test proves nothing"
        )
    finally:
        _stdout, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert lines[0].startswith("eyeblink: error: session 'rec' in ")
    assert (
        f"PID {first.pid} on host {socket.gethostname()}, started {holder['started']}" in lines[0]
    )
    assert "another output folder" in lines[0]
    assert time.monotonic() - t0 < 120  # refused before any frame, not after a whole run
    _assert_whole_session(out, "rec", a)
    assert not lock_path(out, "rec").exists()


def test_batch_refuses_a_session_another_run_holds_before_ray_starts(
    make_video, tmp_path: Path
) -> None:
    video = make_video(5)
    out = tmp_path / "out"
    out.mkdir()
    lock = lock_session(out, video.stem)
    try:
        r = subprocess.run(
            [*EYEBLINK, "batch", str(video), "-o", str(out), "--no-progress"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
        )
    finally:
        lock.release()
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "Traceback" not in r.stderr
    assert f"being written by another run (PID {os.getpid()} on host" in r.stderr
    assert not (out / f"{video.stem}.frames.csv").exists()
    assert not (out / ".eyeblink-batch").exists()


def test_live_refuses_a_session_another_run_holds_before_it_connects(tmp_path: Path) -> None:
    """``eyeblink live`` takes the same lock: a second writer of ``cam`` is one line, exit 2,
    nothing written, and no connection is tried (nothing listens on the port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    out.mkdir()
    lock = lock_session(out, "cam")
    try:
        r = subprocess.run(
            [*EYEBLINK, "live", f"tcp://127.0.0.1:{port}", "-o", str(out), "--name", "cam"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
        )
    finally:
        lock.release()
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr.strip().splitlines()[-1].startswith("eyeblink: error:")
        and "Traceback" not in r.stderr
    )
    assert f"being written by another run (PID {os.getpid()} on host" in r.stderr
    assert not (out / "cam.frames.csv").exists()


def test_the_live_api_refuses_a_session_another_run_holds(tmp_path: Path) -> None:
    import eyeblink

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lock = lock_session(tmp_path, "cam")
    try:
        with (
            pytest.raises(SessionBusyError, match="being written by another run"),
            eyeblink.live(f"tcp://127.0.0.1:{port}", output=tmp_path, name="cam"),
        ):
            pass
    finally:
        lock.release()
    assert not (tmp_path / "cam.frames.csv").exists()
