"""Stops are never lost (docs/explanation/reliability.md, "Stops and signals").

SIGINT and SIGTERM sent to ``eyeblink process``'s process group at many instants of its start-up (a
sweep, not one sleep: ``scripts/stop_sweep.py``, which runs the 200-instant version), the rules of
:mod:`eyeblink.stopping` in-process, an inherited ignored SIGINT, and what the summary records (exit
status, every output).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from conftest import CHILD_SIGNALS, needs_fork

from eyeblink import stopping
from eyeblink.cli import main
from eyeblink.runtime.procs.parallel import FAULT_ENV

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    sys.platform == "win32",
    reason="sends SIGINT and SIGTERM to process groups (os.killpg) and blocks them "
    "around a fork: Windows has no process-group signals and no fork",
)


def _sweep_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stop_sweep", REPO / "scripts" / "stop_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stop_sweep"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def long_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 640x480 500 FPS recording long enough (4 s, 2,000 frames) that no run ends within the
    sweep's span."""
    from eyeblink.lab.synth import SynthConfig, write_recording

    path = tmp_path_factory.mktemp("sweep") / "long.avi"
    write_recording(path, SynthConfig.demo(4.0, seed=3))
    return path


# --------------------------------------------------------------------------- the start-up sweep


@pytest.mark.slow
def test_a_stop_at_any_instant_of_start_up_is_never_lost(long_recording: Path) -> None:
    """36 instants, SIGTERM and SIGINT alternately, from the moment the process starts to a quarter
    past the first rows: every run that reached eyeblink's main exits 130 with a complete summary
    (``interrupted``, ``exit_status`` 130, the signal named, every file listed, whole rows) and no
    traceback."""
    sweep = _sweep_module()
    res = sweep.sweep(long_recording, 36, workers=2)
    assert res["problems"] == 0, json.dumps(res["failed_tries"], indent=1)
    assert res["lost"] == 0 and res["tracebacks"] == 0 and res["missing_summary"] == 0
    # the sweep reached every phase: before main (Python's defaults), main before any file, a
    # running session (how many land before main depends on the machine's load: interpreter start-up
    # takes longer on a busy one)
    assert res["stopped_in_main"] >= 24 and res["with_summary"] >= 5, {
        k: res[k] for k in res if k != "all"
    }


def test_the_sweep_catches_what_it_is_for(tmp_path: Path) -> None:
    """The sweep's own check flags a lost stop, a traceback, a lone temporary summary and a summary
    that says ``running`` (so a passing sweep means something)."""
    sweep = _sweep_module()
    out = tmp_path / "out"
    out.mkdir()
    (out / "v.frames.csv").write_text("frame,ear\n0,0.3\n1,0.3\n")
    (out / "v.summary.json.tmp").write_text("{")
    t = sweep.check_run(signal.SIGTERM, 0.3, 0, "", out, "v")
    assert any("lost" in p for p in t.problems) and any("temporary" in p for p in t.problems)
    assert any("no summary.json" in p for p in t.problems)
    (out / "v.summary.json.tmp").unlink()
    (out / "v.summary.json").write_text(
        json.dumps({"status": "running", "exit_status": None, "frames": 2})
    )
    t = sweep.check_run(
        signal.SIGINT,
        0.3,
        130,
        "Traceback (most recent call last):\n  ...\nKeyboardInterrupt\n",
        out,
        "v",
    )
    assert any(p.startswith("traceback") for p in t.problems)
    assert any("status 'running'" in p for p in t.problems)
    assert not sweep.check_run(
        signal.SIGTERM, 0.0, -signal.SIGTERM, "", tmp_path / "none", "v"
    ).problems


# --------------------------------------------------------------------------- ignored SIGINT,
# SIGTERM recorded


def _ignore_sigint() -> None:
    """preexec_fn: what a non-interactive shell gives a background job (``cmd &``): SIGINT
    ignored."""
    CHILD_SIGNALS["preexec_fn"]()  # type: ignore[operator]
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_DISCARDED_STOP = """
import gc, signal, sys, weakref
from eyeblink import stopping

class Thing:
    pass

def stop_inside_a_callback(_ref):
    # the handler runs here, inside a weakref callback, as inside an import's module lock
    signal.raise_signal(signal.SIGTERM)
    sum(range(1000))

def complain(_ref):
    raise ValueError("a real error in a callback")

restore = stopping.install()
thing = Thing()
ref = weakref.ref(thing, stop_inside_a_callback)
del thing
gc.collect()
print("went on", flush=True)
other = Thing()
ref2 = weakref.ref(other, complain)
del other
gc.collect()
try:
    stopping.check()
except stopping.Stopped as exc:
    print("check point:", stopping.message(exc), flush=True)
restore()
print("hook restored:", sys.unraisablehook is sys.__unraisablehook__, flush=True)
"""


def test_a_stop_that_python_discards_in_a_callback_is_silent_and_raised_at_the_next_check_point(
    tmp_path: Path,
) -> None:
    """A SIGTERM whose handler runs inside a weakref callback (where an import's module lock, a
    ``__del__`` or an at-fork hook run: Python discards what they raise) prints no
    ``Exception ignored ... Traceback``; the run goes on to its next check point, which raises the
    stop; any other exception a callback raises is still reported as Python reports it; the hook
    is put back afterwards."""
    script = tmp_path / "discarded.py"
    script.write_text(_DISCARDED_STOP)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "went on",
        "check point: interrupted (SIGTERM); rows computed so far are on disk",
        "hook restored: True",
    ], done.stdout + done.stderr
    assert "Stopped" not in done.stderr, done.stderr
    assert "ValueError: a real error in a callback" in done.stderr  # others: as Python says them
    assert done.stderr.count("Exception ignored") == 1, done.stderr


@pytest.mark.slow
def test_an_inherited_ignored_sigint_stays_ignored_and_sigterm_still_stops(
    long_recording: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    frames = out / "long.frames.csv"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(long_recording),
            "-o",
            str(out),
            "--workers",
            "2",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, FAULT_ENV: "stall@1000"},
        preexec_fn=_ignore_sigint,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (frames.is_file() and frames.read_text().count("\n") > 20):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no rows"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None  # ignored, as the shell meant: the run goes on
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [
        "eyeblink: interrupted (SIGTERM); rows computed so far are on disk"
    ]
    s = json.loads((out / "long.summary.json").read_text())
    assert (s["status"], s["exit_status"], s["error"]) == ("interrupted", 130, "stopped by SIGTERM")


# --------------------------------------------------------------------------- eyeblink.stopping
# in-process


@pytest.fixture
def installed() -> object:
    restore = stopping.install()
    yield
    restore()


def test_a_stop_swallowed_on_its_way_is_raised_at_the_next_check_point(installed: object) -> None:
    """Python discards an exception raised in an at-fork hook or a ``__del__`` ("Exception
    ignored"): the stop is recorded, and the next check point raises it."""
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
    except KeyboardInterrupt as exc:  # swallowed, as a logging at-fork hook would
        assert isinstance(exc, stopping.Stopped) and exc.signum == signal.SIGTERM
    assert stopping.received() == signal.SIGTERM
    with pytest.raises(stopping.Stopped, match="stopped by SIGTERM"):
        stopping.check()


def test_a_stop_inside_a_hold_or_a_fork_waits_for_its_end(installed: object) -> None:
    with pytest.raises(stopping.Stopped):
        with stopping.held():
            # SIGINT may be ignored here: a suite started in the background
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            reached = True  # not interrupted inside the block
        pytest.fail("not raised at the end of the block")
    assert reached


def test_a_whole_file_is_in_place_or_absent_whatever_the_stop_hits(
    installed: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`eyeblink.outputs.paths.atomic_path`, every whole-file output's mechanism: a stop while
    the file is written removes the temporary file and leaves the old one; a stop while it is
    flushed and renamed is raised once the new file is in place (fsynced first)."""
    from eyeblink.outputs import paths

    target = tmp_path / "report.html"
    target.write_text("old")
    with pytest.raises(stopping.Stopped), paths.atomic_path(target) as tmp:  # a stop while writing
        tmp.write_text("half")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
    assert target.read_text() == "old" and sorted(x.name for x in tmp_path.iterdir()) == [
        "report.html"
    ]
    stopping.finished()
    restore = stopping.install()
    synced: list[int] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    def replace(a: object, b: object) -> None:  # the stop arrives between the fsync and the rename
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        real_replace(a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    try:
        with pytest.raises(stopping.Stopped), paths.atomic_path(target) as tmp:
            tmp.write_text("new, whole")
    finally:
        restore()
    assert target.read_text() == "new, whole" and synced
    assert sorted(x.name for x in tmp_path.iterdir()) == ["report.html"]


@needs_fork
def test_signals_are_blocked_around_a_fork(installed: object) -> None:
    """In a forked child the stop signals start blocked (never the parent's handler), and are
    ignored once unblocked; the parent raises the stop that arrived during the fork once it is done.
    """
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    seen = ctx.Queue()

    def child() -> None:
        seen.put(
            sorted(
                int(s)
                for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])
                if s in stopping.STOP_SIGNALS
            )
        )
        stopping.child_ignores_stops()
        os.kill(os.getpid(), signal.SIGTERM)  # ignored now
        seen.put(signal.getsignal(signal.SIGTERM) == signal.SIG_IGN)

    proc = ctx.Process(target=child)
    with pytest.raises(stopping.Stopped, match="SIGTERM"):
        with stopping.blocked():
            proc.start()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            reached = True
        pytest.fail("not raised once unblocked")
    assert reached
    assert seen.get(timeout=30) == sorted(int(s) for s in stopping.STOP_SIGNALS)
    assert seen.get(timeout=30) is True
    proc.join(timeout=30)
    assert proc.exitcode == 0


def test_main_called_in_process_puts_the_handlers_back(tmp_path: Path) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    assert main(["process", str(tmp_path / "missing.avi"), "-o", str(tmp_path / "out")]) != 0
    assert {sig: signal.getsignal(sig) for sig in before} == before


# --------------------------------------------------------------------------- the summary's exit
# status, outputs


def test_the_summary_records_its_exit_status_and_every_file(
    face_recording: tuple[Path, object], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(face_recording[0]),
            "-o",
            str(out),
            "--workers",
            "1",
            "--no-progress",
            "--report",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    s = json.loads((out / "subject.summary.json").read_text())
    assert s["status"] == "ok" and s["exit_status"] == 0
    files = sorted(p.name for p in out.iterdir())
    assert "subject.report.html" in files and "subject.crops.npz" in files
    assert sorted(Path(p).name for p in s["outputs"].values()) == files
