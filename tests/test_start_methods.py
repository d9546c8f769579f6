"""How a run's processes start (``eyeblink.runtime.procs.processes``): the choice per platform, the
option and the environment variable, and real runs under ``spawn``, ``forkserver`` and ``fork``
giving the same rows.

The proof that every role works under ``spawn`` (the only start method of Windows, macOS's default)
and under the rest of Windows' rules is
:func:`test_the_quick_tier_and_the_real_process_runs_pass_under_windows_rules`: the quick tier
again, and the real-process tests of ``process``, ``live`` on a loopback stream, the view and the
gate (marked ``spawn_proof``), all under ``../shared/tools/windows-like``.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from eyeblink.errors import ConfigError
from eyeblink.runtime.procs import processes
from eyeblink.runtime.procs.processes import START_METHOD_ENV, auto_method, resolve_start_method

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_asked_method(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(START_METHOD_ENV, raising=False)


@pytest.mark.parametrize(
    ("platform", "auto"), [("linux", "fork"), ("win32", "spawn"), ("darwin", "spawn")]
)
def test_auto_is_fork_on_linux_and_spawn_elsewhere(
    monkeypatch: pytest.MonkeyPatch, platform: str, auto: str
) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    assert auto_method() == auto
    assert resolve_start_method() == auto
    assert resolve_start_method("auto") == auto


@pytest.mark.skipif(
    "forkserver" not in mp.get_all_start_methods(),
    reason="needs forkserver (Windows has only spawn)",
)
def test_the_option_wins_over_the_environment_and_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    from eyeblink.config import ParallelConfig

    monkeypatch.setenv(START_METHOD_ENV, "forkserver")
    assert resolve_start_method() == "forkserver"
    assert resolve_start_method(ParallelConfig(start_method="spawn").start_method) == "spawn"
    # none asked: the environment's
    assert resolve_start_method(ParallelConfig().start_method) == "forkserver"


def test_the_start_method_travels_in_the_run_s_settings_not_a_module_global(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The asked method is the run's (``ParallelConfig.start_method``, which the CLI and the API
    fill): two pipelines of one process may start their children differently, and nothing is left
    behind."""
    from eyeblink.config import ParallelConfig, RunConfig
    from eyeblink.runtime.procs.parallel import ParallelPipeline

    # Windows: spawn only
    other = next((m for m in mp.get_all_start_methods() if m != "spawn"), "spawn")
    monkeypatch.setenv(START_METHOD_ENV, other)
    spawned = ParallelPipeline(RunConfig(), ParallelConfig(workers=2, start_method="spawn"))
    default = ParallelPipeline(RunConfig(), ParallelConfig(workers=2))
    assert (spawned.start_method, spawned._ctx.get_start_method()) == ("spawn", "spawn")
    # none asked: the environment's
    assert (default.start_method, default._ctx.get_start_method()) == (other, other)
    assert not [
        n
        for n, v in vars(processes).items()
        if n.startswith("_") and isinstance(v, str | type(None)) and not n.startswith("__")
    ], "no module-global start method"


@pytest.mark.parametrize(
    ("platform", "asked", "match"),
    [
        (
            "linux",
            "vfork",
            r"--start-method must be one of auto, spawn, forkserver, fork, got 'vfork'",
        ),
        (
            "win32",
            "fork",
            r"--start-method fork is not available on this platform \(win32\); choose one of "
            r"auto, spawn",
        ),
        ("win32", "forkserver", r"not available on this platform \(win32\)"),
    ],
)
def test_a_start_method_the_platform_lacks_is_one_line(
    monkeypatch: pytest.MonkeyPatch, platform: str, asked: str, match: str
) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(ConfigError, match=match):
        resolve_start_method(asked)


def test_a_bad_environment_variable_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(START_METHOD_ENV, "sometimes")
    with pytest.raises(ConfigError, match=rf"{START_METHOD_ENV} must be one of"):
        resolve_start_method()


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_no_needs_fork_error_on_windows_or_macos(
    monkeypatch: pytest.MonkeyPatch, platform: str
) -> None:
    """The multiprocess pipeline is built on a platform reported as Windows or macOS: it takes
    spawn, no error; and no module says the pipeline needs fork any more."""
    from eyeblink.config import ParallelConfig, RunConfig
    from eyeblink.runtime.procs.parallel import ParallelPipeline

    monkeypatch.setattr(sys, "platform", platform)
    pipe = ParallelPipeline(RunConfig(), ParallelConfig(workers=2))
    assert pipe.start_method == "spawn"
    assert pipe._ctx.get_start_method() == "spawn"
    for path in (REPO / "eyeblink").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "needs the 'fork'" not in text and "needs fork" not in text, path


def test_shared_memory_names_fit_macos(tmp_path: Path) -> None:
    """POSIX shared-memory names are at most 31 characters on macOS (with the leading slash)."""
    from eyeblink.runtime.live.preview import PreviewGrab
    from eyeblink.runtime.procs.shm import FrameRing, RingSpec

    with FrameRing(RingSpec(2, (4, 4))) as ring:
        assert len("/" + ring.name) <= 31
        name = ring.name
    grab = PreviewGrab(side=8)
    try:
        assert len("/" + grab._shm.name) <= 31
    finally:
        grab.close()
    assert name


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_process_rows_are_the_same_under_every_start_method(
    face_recording: tuple[Path, object], tmp_path: Path, method: str
) -> None:
    """The real CLI on a real 500 FPS face recording, three workers and two loaders: ``method``'s
    rows are fork's, byte for byte, and the summary names the start method."""
    import json

    video = face_recording[0]
    got = {}
    for m in ("fork", method):
        out = tmp_path / m
        done = run_cli(
            "process",
            video,
            "-o",
            out,
            "--workers",
            "3",
            "--loaders",
            "2",
            "--start-method",
            m,
            "--no-progress",
        )
        assert done.returncode == 0, done.stderr
        got[m] = (_sha1(out / f"{video.stem}.frames.csv"), _sha1(out / f"{video.stem}.blinks.csv"))
        summary = json.loads((out / f"{video.stem}.summary.json").read_text(encoding="utf-8"))
        assert summary["parallel"]["start_method"] == m
    assert got[method] == got["fork"]


@pytest.mark.slow
def test_spawned_children_end_when_their_parent_is_killed(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """``kill -9`` of a spawned run's parent: no loader or worker stays behind (a child polls its
    parent, and on Linux the kernel kills it at once)."""
    import time

    video = face_recording[0]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(tmp_path / "o"),
            "--workers",
            "2",
            "--start-method",
            "spawn",
            "--no-progress",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    children: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(children) < 2:
        children = _children(proc.pid)
        time.sleep(0.05)
    assert len(children) >= 2, "the run's children did not start"
    proc.kill()  # the parent alone, outright: its children must notice
    proc.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(c) for c in children):
        time.sleep(0.05)
    assert not [c for c in children if _alive(c)]


def _children(pid: int) -> list[int]:
    from eyeblink import host

    return [c for c in host.descendants(pid) if c != pid]


def _alive(pid: int) -> bool:
    from eyeblink import host

    return host.pid_alive(pid)


#: the stand-in for a Windows PC with CPython 3.11/3.12 on this host
#: (``../shared/tools/windows-like``, see its header): spawn only, fsync of a read-only descriptor
#: refused, 15.6 ms clocks, and for the package's own calls outside its host module
#: (:data:`HOST_MODULE`) no POSIX-only module, function, signal or path
WINDOWS_LIKE = Path(
    os.environ.get("EYEBLINK_WINDOWS_LIKE", REPO.parent / "shared" / "tools" / "windows-like")
)
#: the package's one host module, the only one the stand-in lets call what Windows lacks (its
#: ``--host``)
HOST_MODULE = "eyeblink.host"


@pytest.mark.slow
def test_the_quick_tier_and_the_real_process_runs_pass_under_windows_rules(tmp_path: Path) -> None:
    """Every role the portable way, under Windows' rules: the quick tier again, and the tests marked
    ``spawn_proof`` (``process`` through the real CLI, ``live`` from a real ffmpeg stream on
    loopback with its stops, the view in a real browser, the gate), in a child pytest under
    ``windows-like`` (which starts every process with ``spawn``, Windows' only start method, and
    takes away what a Windows PC does not have)."""
    if os.environ.get("WINDOWS_LIKE_PACKAGE") is not None or "windows_like_site" in os.environ.get(
        "PYTHONPATH", ""
    ):
        pytest.skip("already running under windows-like")
    if not os.access(WINDOWS_LIKE, os.X_OK):
        pytest.skip(f"the Windows stand-in is not at {WINDOWS_LIKE} (set EYEBLINK_WINDOWS_LIKE)")
    env = {k: v for k, v in os.environ.items() if k != START_METHOD_ENV}
    done = subprocess.run(
        [
            str(WINDOWS_LIKE),
            "--host",
            HOST_MODULE,
            "--",
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow or spawn_proof",
            "--deselect",
            "tests/test_start_methods.py::"
            "test_the_quick_tier_and_the_real_process_runs_pass_under_windows_rules",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        stdin=subprocess.DEVNULL,
    )
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-60:])
    assert done.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail and " error" not in tail, tail


def test_the_api_checks_its_start_method_before_anything_runs(make_video, tmp_path: Path) -> None:
    import eyeblink

    video = make_video(4)
    with pytest.raises(
        eyeblink.SettingsError, match=r"^start_method must be one of auto, spawn, forkserver, fork"
    ):
        eyeblink.process(video, tmp_path / "out", start_method="vfork")
    with pytest.raises(eyeblink.SettingsError, match=r"start_method must be a str"):
        eyeblink.process(video, tmp_path / "out", start_method=2)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_api_runs_its_workers_with_the_start_method_it_is_given(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    import json

    import eyeblink

    video = face_recording[0]
    eyeblink.process(video, tmp_path / "spawn", workers=2, start_method="spawn")
    eyeblink.process(video, tmp_path / "fork", workers=2, start_method="fork")
    for m in ("spawn", "fork"):
        summary = json.loads(
            (tmp_path / m / f"{video.stem}.summary.json").read_text(encoding="utf-8")
        )
        assert summary["parallel"]["start_method"] == m
    rows = [_sha1(tmp_path / m / f"{video.stem}.frames.csv") for m in ("spawn", "fork")]
    assert rows[0] == rows[1]
    # nothing of the call's method is left in this process
    assert resolve_start_method() == auto_method()


def test_ctrl_break_is_a_stop_with_its_own_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' console sends SIGBREAK for Ctrl-Break: a stop like Ctrl-C, said as such (the signal
    does not exist here: its number is given to ``signal`` as Windows has it)."""
    import signal

    from eyeblink import stopping

    monkeypatch.setattr(signal, "SIGBREAK", 21, raising=False)
    assert stopping.reason(21) == "interrupted by Ctrl-Break (SIGBREAK)"
    assert stopping.message(stopping.Stopped(21)).startswith("interrupted (Ctrl-Break, SIGBREAK)")
    assert stopping.reason(signal.SIGINT) == "interrupted by Ctrl-C (SIGINT)"


def test_a_stop_with_no_signal_recorded_is_ctrl_c_where_there_is_no_sigbreak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KeyboardInterrupt with no signal recorded (Python's own Ctrl-C) is Ctrl-C; on a platform
    without SIGBREAK "no signal" must not match "no SIGBREAK" (both None)."""
    import signal

    from eyeblink import stopping

    monkeypatch.delattr(signal, "SIGBREAK", raising=False)
    monkeypatch.setattr(stopping, "_received", None)
    assert stopping.reason() == "interrupted by Ctrl-C (SIGINT)"
    assert stopping.reason(KeyboardInterrupt()) == "interrupted by Ctrl-C (SIGINT)"
    assert stopping.message(KeyboardInterrupt()).startswith("interrupted (Ctrl-C, SIGINT)")


UNGUARDED = """import sys
import eyeblink

eyeblink.process(sys.argv[1], sys.argv[2], workers=2, start_method=sys.argv[3])
"""
GUARDED = """import sys
import eyeblink


def main():
    eyeblink.process(sys.argv[1], sys.argv[2], workers=2, start_method=sys.argv[3])


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_script_without_the_main_guard_is_one_line_naming_the_fix(
    make_video, tmp_path: Path, method: str
) -> None:
    """Under spawn (Windows, macOS) each worker runs the script again: an unguarded call stops at
    once with the script's file, line and the guard to add, before any child starts; nothing is
    written."""
    if method not in mp.get_all_start_methods():
        pytest.skip(f"{method} is not available here")
    video = make_video(8)
    script = tmp_path / "my_analysis.py"
    script.write_text(UNGUARDED, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(video), str(tmp_path / "out"), method],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert (
        "my_analysis.py line 4" in last and 'if __name__ == "__main__":' in last and method in last
    ), done.stderr
    assert not (tmp_path / "out" / f"{video.stem}.frames.csv").exists()


@pytest.mark.slow
def test_a_guarded_script_runs_under_spawn_and_an_unguarded_one_under_fork(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    """The guard is all a spawned run needs; under fork nothing runs the script again, so no
    guard is asked for."""
    video = face_recording[0]
    runs = [(GUARDED, "spawn")] + (
        [(UNGUARDED, "fork")] if "fork" in mp.get_all_start_methods() else []
    )
    for k, (code, method) in enumerate(runs):
        script = tmp_path / f"script{k}.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script), str(video), str(tmp_path / f"out{k}"), method],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"out{k}" / f"{video.stem}.frames.csv").is_file()
