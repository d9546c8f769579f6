"""The one module that knows the operating system (:mod:`eyeblink.host`).

* No other module of ``eyeblink/`` nor of ``scripts/`` names the kernel's files, a scheduling class,
  a fork or the OS's own interfaces (the source is searched, comments included), and ``host.py``
  imports nothing of eyeblink (so that ``config.py`` and ``outputs/lock.py``, below ``runtime/``,
  may read it).
* Each function on this machine (Linux), with real values: this process's memory and CPU time, a
  dead child, a lock another process holds, a child killed with its parent.
* The branches of Windows and macOS, run here with ``sys.platform`` patched: the portable ones
  (``psutil``) give sane values and none of them raises for not being Linux. What cannot run here is
  faked where the branch's own logic is the point (Windows' priority classes, ``msvcrt``'s
  byte-range lock) and said so.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

# imported before any test patches sys.platform (psutil picks its platform module at import)
import psutil
import pytest
from conftest import kill_tree, needs_fork

from eyeblink import host

REPO = Path(__file__).resolve().parent.parent
SYSTEM = REPO / "eyeblink" / "host.py"
LINUX = sys.platform.startswith("linux")
needs_linux = pytest.mark.skipif(
    not LINUX, reason="checks the Linux branch on a real Linux machine"
)

#: what only host.py may name: the kernel's places, its scheduling classes, a fork (comments and
#: docstrings too)
LINUX_PLACES = {
    "/proc": re.compile(r"/proc\b"),
    "/dev/shm": re.compile(r"/dev/shm"),
    "os.fork": re.compile(r"\bos\.fork"),
    "SCHED_": re.compile(r"SCHED_"),
    'get_context("fork")': re.compile(r"get_context\(\s*['\"]fork['\"]\s*\)"),
}
#: ... and the OS's own interfaces, which differ by OS (in code)
OS_INTERFACES = {
    "fcntl": re.compile(r"\bimport fcntl\b|\bfcntl\."),
    "msvcrt": re.compile(r"\bimport msvcrt\b|\bmsvcrt\."),
    "winreg": re.compile(r"\bimport winreg\b|\bwinreg\."),
    "resource (getrusage)": re.compile(r"\bimport resource\b|\bresource\.getrusage|\bRUSAGE_"),
    "os.sched_*": re.compile(r"\bos\.sched_"),
    "os.getpriority/setpriority": re.compile(r"\bos\.(get|set)priority\b"),
    "os.sysconf": re.compile(r"\bos\.sysconf\b"),
    "prctl": re.compile(r"\bprctl\b"),
    "os.killpg": re.compile(r"\bos\.killpg\b"),
    "os.wait4": re.compile(r"\bos\.wait4\b"),
}
#: ... and the platform itself: which OS this is, asked in one module (its named functions
#: elsewhere)
PLATFORM_CHECKS = {
    "sys.platform": re.compile(r"\bsys\.platform\b"),
    "os.name": re.compile(r"\bos\.name\b"),
}


def _sources() -> list[Path]:
    files = [*sorted((REPO / "eyeblink").rglob("*.py")), *sorted((REPO / "scripts").rglob("*.py"))]
    return [p for p in files if p.resolve() != SYSTEM.resolve() and "__pycache__" not in p.parts]


def _hits(patterns: dict[str, re.Pattern[str]]) -> list[str]:
    found = []
    for path in _sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name, rx in patterns.items():
                if rx.search(line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {name}: {line.strip()}")
    return found


# --------------------------------------------------------------------------- one module knows the
# OS


def test_no_module_but_system_names_the_linux_kernel_s_places_or_a_fork() -> None:
    """``/proc``, ``/dev/shm``, ``os.fork``, ``SCHED_``, ``get_context("fork")``: in host.py only (a
    comment that merely mentions one says "the kernel's process table" or names the host.py function
    instead)."""
    found = _hits(LINUX_PLACES)
    assert not found, "only eyeblink/host.py may name these:\n" + "\n".join(found)


def test_no_module_but_system_calls_the_os_s_own_interfaces() -> None:
    found = _hits(OS_INTERFACES)
    assert not found, "only eyeblink/host.py may call these:\n" + "\n".join(found)


def test_no_module_but_system_asks_which_platform_it_is() -> None:
    found = _hits(PLATFORM_CHECKS)
    assert not found, "only eyeblink/host.py may check the platform:\n" + "\n".join(found)


def test_the_search_finds_what_it_is_for() -> None:
    lines = [
        'open("/proc/stat")',
        "x = '/dev/shm/eyeblink_1_a'",
        "pid = os.fork()",
        "os.SCHED_RR",
        "mp.get_context('fork')",
        'mp.get_context( "fork" )',
    ]
    assert all(any(rx.search(line) for rx in LINUX_PLACES.values()) for line in lines)
    ok = [
        "report/process do",
        "mp.get_context(method)",
        "/processes.py",
        "multiprocessing.resource_tracker",
    ]
    assert not any(
        rx.search(line) for line in ok for rx in (*LINUX_PLACES.values(), *OS_INTERFACES.values())
    )


def test_system_imports_nothing_of_eyeblink() -> None:
    """A leaf: the import contracts let config.py and outputs/lock.py read it, which no circle
    may go through."""
    tree = ast.parse(SYSTEM.read_text(encoding="utf-8"))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [
        "." if n.level else n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    ]
    assert names and not [n for n in names if n == "." or n.split(".")[0] == "eyeblink"]


def test_the_platform_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    assert host._platform() == "win32" and host.shared_memory_dir() is None
    monkeypatch.setattr(sys, "platform", "linux")
    assert host.shared_memory_dir() == host.SHM_DIR


# --------------------------------------------------------------------------- helpers


def _burn(seconds: float) -> None:
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass


def _dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(proc.stdout)


def _tree() -> tuple[subprocess.Popen[str], int]:
    """A child in a session of its own that started a grandchild (both sleep); (the child, the
    grandchild's pid)."""
    code = (
        "import subprocess, sys, time; g = subprocess.Popen([sys.executable, '-c', 'import time; "
        "time.sleep(60)']); print(g.pid, flush=True); time.sleep(60)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert child.stdout is not None
    return child, int(child.stdout.readline())


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not host.pid_alive(pid):
            return True
        time.sleep(0.02)
    return False


def _end(child: subprocess.Popen[Any], *pids: int) -> None:
    for pid in (child.pid, *pids):
        kill_tree(pid)
    child.wait(timeout=30)


PLATFORMS = ["linux", "darwin", "win32"]


@pytest.fixture(params=PLATFORMS)
def platform_(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each platform's branch, run here: ``sys.platform`` patched (the real Linux one for
    ``linux``)."""
    if request.param == "linux" and not LINUX:
        pytest.skip("the Linux branch needs Linux")
    monkeypatch.setattr(sys, "platform", request.param)
    return str(request.param)


# --------------------------------------------------------------------------- the CPUs


def test_cpu_info_names_the_cpu_and_its_flags_in_the_kernel_s_spelling(
    platform_: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = host.cpu_info()
    assert isinstance(info["model name"], str) and isinstance(info["flags"], str)
    if platform_ != "linux" and LINUX and os.path.exists("/proc/cpuinfo"):
        monkeypatch.setattr(sys, "platform", "linux")
        linux = host.cpu_info()
        if "flags" in linux and "model name" in linux:  # x86: the kernel lists both
            flags = set(linux["flags"].split())
            # each flag NumPy found, by the kernel's own name
            assert set(info["flags"].split()) <= flags
            assert ("avx2" in info["flags"].split()) == ("avx2" in flags)


def test_the_cores_this_process_may_use(platform_: str) -> None:
    assert 1 <= host.physical_cores() <= host.usable_cpus() <= (os.cpu_count() or 1)


@needs_linux
def test_physical_cores_is_affinity_bounded_in_a_process_pinned_to_one_core() -> None:
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from eyeblink import host; print(host.physical_cores(), host.usable_cpus())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["1", "1"]


def test_the_machine_s_busy_cpu_time_grows_with_work(platform_: str) -> None:
    first = host.cpu_busy_seconds()
    assert first is not None and 0 < first[0] <= first[1]
    _burn(0.3)
    second = host.cpu_busy_seconds()
    assert second is not None and second[0] > first[0] and second[1] > first[1]
    # (of floats: ticks / rate)
    assert 0.0 < (second[0] - first[0]) / (second[1] - first[1]) <= 1.0 + 1e-6


# --------------------------------------------------------------------------- processes


def test_rss_of_this_process_and_none_for_a_dead_one(platform_: str) -> None:
    rss = host.rss_bytes(os.getpid())
    assert rss is not None and 10 * 2**20 < rss < 64 * 2**30
    assert abs(rss - psutil.Process().memory_info().rss) < 0.2 * rss
    assert host.rss_bytes(_dead_pid()) is None


@needs_linux
def test_pss_and_the_parts_of_the_resident_memory_on_linux() -> None:
    pss, parts = host.pss_bytes(os.getpid()), host.memory_parts(os.getpid())
    assert pss is not None and pss > 0
    assert (
        parts is not None and set(parts) == {"rss", "anon", "file", "shmem"} and parts["anon"] > 0
    )
    assert host.pss_bytes(_dead_pid()) is None and host.memory_parts(_dead_pid()) is None


@pytest.mark.parametrize("name", ["darwin", "win32"])
def test_no_pss_nor_memory_parts_where_the_os_keeps_none(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(sys, "platform", name)
    assert host.pss_bytes(os.getpid()) is None and host.memory_parts(os.getpid()) is None


def test_cpu_seconds_of_this_process_and_of_another_grow_with_work(platform_: str) -> None:
    before, user_before = host.process_cpu_seconds(), host.process_cpu_seconds(user_only=True)
    _burn(0.2)
    after, user_after = host.process_cpu_seconds(), host.process_cpu_seconds(user_only=True)
    assert before is not None and after is not None and after - before >= 0.15
    assert user_before is not None and user_after is not None and user_after > user_before
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\nprint(1, flush=True)\ntime.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "1"
        got = host.process_cpu_seconds(child.pid)
        assert got is not None and got >= 0.25
    finally:
        _end(child)
    assert host.process_cpu_seconds(_dead_pid()) is None


def test_cpu_seconds_of_the_children_that_ended(platform_: str) -> None:
    before = host.children_cpu_seconds()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass",
        ],
        check=True,
    )
    grown = host.children_cpu_seconds() - before
    if platform_ == "win32":
        assert grown == 0.0  # Windows keeps no such total (said in the docstring)
    else:
        assert grown >= 0.25


def test_wait_with_cpu_gives_the_status_and_the_cpu_time(platform_: str) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.4: pass\nsys.exit(3)",
        ]
    )
    status, cpu = host.wait_with_cpu(proc)
    assert status == 3 and proc.returncode == 3
    # Windows: sampled every 50 ms while it ran
    assert cpu >= (0.2 if platform_ == "win32" else 0.35)


def test_the_cpu_time_of_one_thread_by_its_native_id(platform_: str) -> None:
    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def work() -> None:
        tid.append(threading.get_native_id())
        _burn_thread(0.3)
        ready.set()
        done.wait(30)

    t = threading.Thread(target=work)
    t.start()
    try:
        assert ready.wait(30)
        got = host.thread_cpu_seconds(tid[0])
        if platform_ == "darwin":
            # psutil numbers a macOS process's threads, it does not give their native ids
            assert got is None
        else:
            assert got is not None and got >= 0.2
            mine = host.thread_cpu_seconds(threading.get_native_id())
            assert mine is not None and mine >= 0.0
    finally:
        done.set()
        t.join()
    assert host.thread_cpu_seconds(2**30 + 7) is None


def _burn_thread(seconds: float) -> None:
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass


def test_children_descendants_names_and_command_lines(platform_: str) -> None:
    child, grandchild = _tree()
    try:
        assert host.children(child.pid) == [grandchild]
        assert os.getpid() not in host.descendants(child.pid)
        assert child.pid in host.children(os.getpid()) and child.pid in host.descendants(
            os.getpid()
        )
        assert host.descendants(child.pid) == [grandchild]
        assert grandchild in host.descendants(os.getpid())
        assert (host.process_name(child.pid) or "").startswith("python")
        assert host.process_cmdline(grandchild)[-1] == "import time; time.sleep(60)"
    finally:
        _end(child, grandchild)
    dead = _dead_pid()
    assert host.children(dead) == [] and host.descendants(dead) == []
    assert host.process_name(dead) is None and host.process_cmdline(dead) == []


def test_pid_alive_this_process_a_zombie_and_a_dead_one(platform_: str) -> None:
    assert host.pid_alive(os.getpid())
    assert not host.pid_alive(_dead_pid())
    assert not host.pid_alive(0) and not host.pid_alive(-5) and not host.pid_alive(2**70)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while (
        psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline
    ):
        time.sleep(0.01)
    try:
        assert not host.pid_alive(zombie.pid)  # ended, not yet waited for: not running
    finally:
        zombie.wait()


def test_kill_process_group_ends_the_child_and_what_it_started(platform_: str) -> None:
    child, grandchild = _tree()
    try:
        host.kill_process_group(child.pid, signal.SIGTERM)
        child.wait(timeout=30)
        assert _gone(grandchild)
    finally:
        _end(child, grandchild)
    with pytest.raises(ProcessLookupError):
        host.kill_process_group(_dead_pid(), signal.SIGTERM)


def test_load_average(platform_: str) -> None:
    load = host.load_average()
    assert load is not None and len(load) == 3 and all(x >= 0.0 for x in load)


def test_memory_available_and_total(platform_: str) -> None:
    avail, total = host.memory_available_bytes(), host.memory_total_bytes()
    assert avail is not None and total is not None and 0 < avail <= total


def test_where_shared_memory_lives_and_its_free_space(platform_: str) -> None:
    got = host.shared_memory_free()
    assert got is not None and got[0] > 0
    if platform_ == "linux":
        assert host.shared_memory_dir() == got[1] == "/dev/shm"
    else:  # backed by memory and swap (macOS) or the page file (Windows)
        assert host.shared_memory_dir() is None and got[1] == "memory"


def test_the_ring_cap_on_every_platform(platform_: str) -> None:
    from eyeblink.runtime.procs.shm import RingSpec, ring_cap_bytes, ring_refusal

    cap, why = ring_cap_bytes()
    assert cap is not None and cap > 0 and "memory available" in why
    line = ring_refusal(RingSpec(4, (480, 640)), 500.0, 1.0, 1, why)
    assert "\n" not in line and ("/dev/shm" in line) == (platform_ == "linux")


def _ring_names(folder: Path) -> dict[str, Path]:
    own, dead = os.getpid(), _dead_pid()
    names = {
        "stale": f"eyeblink_{dead}_0badc0de",
        "own": f"eyeblink_{own}_0badc0de",
        "alive": f"eyeblink_{os.getppid()}_0badc0de",
        "malformed": "eyeblink_abc_0badc0de",
        "untagged": f"eyeblink_{dead}_",
        "other": f"other_{dead}_0badc0de",
    }
    for name in names.values():
        (folder / name).write_bytes(b"\0" * 4096)
    return {k: folder / v for k, v in names.items()}


def test_stale_shared_memory_is_swept_where_the_os_keeps_it(tmp_path: Path) -> None:
    paths = _ring_names(tmp_path)
    removed = host.remove_stale_shared_memory("eyeblink_", str(tmp_path))
    assert removed == [(str(paths["stale"]), 4096, int(paths["stale"].name.split("_")[1]))]
    assert {k for k, p in paths.items() if p.exists()} == {
        "own",
        "alive",
        "malformed",
        "untagged",
        "other",
    }


def test_remove_stale_rings_keeps_its_behaviour(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from eyeblink.runtime.procs.shm import remove_stale_rings

    paths = _ring_names(tmp_path)
    with caplog.at_level("INFO", logger="eyeblink.runtime.shm"):
        assert remove_stale_rings(str(tmp_path)) == [paths["stale"].name]
    assert str(paths["stale"]) in caplog.text and "no longer runs" in caplog.text
    assert remove_stale_rings(str(tmp_path / "missing")) == []


@pytest.mark.parametrize("name", ["darwin", "win32"])
def test_nothing_to_sweep_where_the_os_cannot_list_or_frees_itself(
    monkeypatch: pytest.MonkeyPatch, name: str, tmp_path: Path
) -> None:
    from eyeblink.runtime.procs.shm import remove_stale_rings

    paths = _ring_names(tmp_path)
    monkeypatch.setattr(sys, "platform", name)
    monkeypatch.setattr(host, "SHM_DIR", str(tmp_path))  # were it looked at, it would be swept
    assert host.remove_stale_shared_memory("eyeblink_") == [] and remove_stale_rings() == []
    assert all(p.exists() for p in paths.values())


# --------------------------------------------------------------------------- priority and CPU
# affinity

_PRIORITY_CHILD = """
import json, os, sys
from eyeblink import host
saved = host.current_priority()
refused = host.raise_priority(sys.argv[1], nice=-10, realtime=10)
during = host.current_priority()
host.restore_priority(saved)
print(json.dumps([refused, list(saved), list(during), list(host.current_priority())]))
"""


@needs_linux
@pytest.mark.parametrize("level", ["high", "realtime"])
def test_raise_and_restore_priority_on_linux(level: str) -> None:
    """In a child (the test process keeps its own priority): done, or refused in one line naming how
    to allow it; restored either way."""
    out = subprocess.run(
        [sys.executable, "-c", _PRIORITY_CHILD, level], capture_output=True, text=True, check=True
    )
    refused, saved, during, after = json.loads(out.stdout)
    assert after == saved
    if refused is None:
        if level == "high":
            assert during[1] == -10
        else:
            assert during[0] == os.SCHED_RR
    else:
        assert "\n" not in refused and "the OS refused" in refused and "CAP_SYS_NICE" in refused
        assert ("RLIMIT_RTPRIO" if level == "realtime" else "RLIMIT_NICE") in refused
    assert host.raise_priority("normal", nice=-10, realtime=10) is None


def test_macos_has_no_real_time_class_for_a_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    before = os.sched_getscheduler(0) if LINUX else None
    refused = host.raise_priority("realtime", nice=-10, realtime=10)
    assert refused is not None and "macOS" in refused and "\n" not in refused
    if LINUX:
        assert os.sched_getscheduler(0) == before  # nothing was asked of the OS


def test_macos_high_is_a_nice_value_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    monkeypatch.setattr(sys, "platform", "darwin")
    saved = host.current_priority()
    assert saved == host.Priority(0, nice)
    try:
        refused = host.raise_priority("high", nice=nice - 1, realtime=10)
        if refused is None:
            assert os.getpriority(os.PRIO_PROCESS, 0) == nice - 1
        else:
            assert (
                "the OS refused" in refused and "root" in refused and "CAP_SYS_NICE" not in refused
            )
        host.restore_priority(saved)
        assert os.getpriority(os.PRIO_PROCESS, 0) == nice
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, nice)


class _FakeWindowsProcess:
    """``psutil.Process()`` of a Windows process: its priority class, which Windows may downgrade
    (realtime asked by a user who is not an administrator gives the high class), and its CPU
    affinity."""

    priority = 0x20  # NORMAL_PRIORITY_CLASS
    admin = False
    affinity: ClassVar[list[int]] = [0, 1]

    def __init__(self, pid: int | None = None) -> None:
        pass

    def nice(self, value: int | None = None) -> int | None:
        if value is None:
            return type(self).priority
        type(self).priority = 0x80 if value == 0x100 and not type(self).admin else value
        return None

    def cpu_affinity(self, cpus: list[int] | None = None) -> list[int] | None:
        if cpus is None:
            return list(type(self).affinity)
        type(self).affinity = list(cpus)
        return None


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> type[_FakeWindowsProcess]:
    """``sys.platform`` "win32" and a psutil whose ``Process`` is :class:`_FakeWindowsProcess` (the
    real one would set Linux nice values here)."""
    fake = SimpleNamespace(**{k: getattr(psutil, k) for k in dir(psutil) if not k.startswith("__")})
    fake.Process = _FakeWindowsProcess
    monkeypatch.setattr(host, "_psutil", lambda: fake)
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(_FakeWindowsProcess, "priority", 0x20)
    monkeypatch.setattr(_FakeWindowsProcess, "admin", False)
    monkeypatch.setattr(_FakeWindowsProcess, "affinity", [0, 1])
    return _FakeWindowsProcess


def test_windows_priority_classes(windows: type[_FakeWindowsProcess]) -> None:
    saved = host.current_priority()
    assert saved == host.Priority(0, 0x20)
    # HIGH
    assert host.raise_priority("high", nice=-10, realtime=10) is None and windows.priority == 0x80
    # not an administrator: HIGH instead
    refused = host.raise_priority("realtime", nice=-10, realtime=10)
    assert (
        refused is not None and "administrator" in refused and "running at high priority" in refused
    )
    windows.admin = True
    assert (
        host.raise_priority("realtime", nice=-10, realtime=10) is None and windows.priority == 0x100
    )
    host.restore_priority(saved)
    assert windows.priority == 0x20
    host.lower_to_idle()
    assert windows.priority == 0x40  # IDLE_PRIORITY_CLASS


def test_windows_pins_to_one_core(windows: type[_FakeWindowsProcess]) -> None:
    assert host.pin_to_one_core() == {0, 1} and windows.affinity == [0]
    host.restore_cpus({0, 1})
    assert windows.affinity == [0, 1]
    assert host.usable_cpus() == 2


def test_the_priority_line_of_eyeblink_live(windows: type[_FakeWindowsProcess]) -> None:
    from eyeblink.runtime.live import priority

    line = priority.raise_priority("realtime")
    assert line is not None and line.startswith("--priority realtime: ") and "administrator" in line
    assert priority.raise_priority("normal") is None


@needs_linux
def test_lower_to_idle_and_pin_to_one_core_on_linux_and_macos() -> None:
    code = (
        "import os, sys, json; from eyeblink import host; before = host.pin_to_one_core(); "
        "pinned = sorted(os.sched_getaffinity(0)); host.restore_cpus(before); "
        "restored = sorted(os.sched_getaffinity(0)); host.lower_to_idle(); "
        "idle = os.sched_getscheduler(0) == os.SCHED_IDLE; sys.platform = 'darwin'; "
        "mac = host.pin_to_one_core(); host.lower_to_idle(); "
        "print(json.dumps([sorted(before), pinned, restored, idle, mac, "
        "os.getpriority(os.PRIO_PROCESS, 0)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    before, pinned, restored, idle, mac, nice = json.loads(out)
    assert pinned == [min(before)] and restored == before and idle
    assert mac is None and nice == 19  # macOS: no CPU affinity; idle is the lowest nice value


# --------------------------------------------------------------------------- a child and its parent

_FAMILY = """
import multiprocessing as mp, os, sys, time
from eyeblink import host


def child(path, bind):
    bound = host.bind_to_parent() if bind else False
    with open(path, "w") as f:
        f.write(f"{os.getpid()} {bound} {host.parent_alive()}\\n")
    if bind:
        time.sleep(120)  # no polls: only the OS can end it early
    while host.parent_alive():
        time.sleep(0.02)
    with open(path, "a") as f:
        f.write("orphaned\\n")


if __name__ == "__main__":
    print(host.bind_to_parent(), host.parent_alive(), flush=True)
    ctx = mp.get_context(sys.argv[3])
    ctx.Process(target=child, args=(sys.argv[1], sys.argv[2] == "1"), daemon=False).start()
    time.sleep(120)
"""


def _family(
    tmp_path: Path, bind: bool, method: str
) -> tuple[subprocess.Popen[str], int, list[str]]:
    """A parent process that started a child (``method``); (the parent, the child's pid, the
    child's first line)."""
    script, report = tmp_path / "family.py", tmp_path / f"child-{bind}-{method}.txt"
    script.write_text(_FAMILY, encoding="utf-8")
    parent = subprocess.Popen(
        [sys.executable, str(script), str(report), "1" if bind else "0", method],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    # the main process: not bound, no parent to lose
    assert parent.stdout.readline().split() == ["False", "True"]
    deadline = time.monotonic() + 60
    while (
        not (report.exists() and report.read_text().endswith("\n")) and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    pid, *first = report.read_text().split()
    return parent, int(pid), first


_THREADS_ASK = """
import multiprocessing as mp, sys, threading, time
from eyeblink import host


def child(q):
    errors = []

    def ask():
        end = time.perf_counter() + 1.0
        try:
            while time.perf_counter() < end:
                assert host.parent_alive()
        except BaseException as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put(errors)


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    print(q.get(timeout=60))
    p.join(timeout=60)
"""


@pytest.mark.parametrize("method", [pytest.param("fork", marks=needs_fork), "spawn"])
def test_threads_of_a_child_ask_for_its_parent_at_once(tmp_path: Path, method: str) -> None:
    """A child's threads ask at the same moment (a worker's queue and its stop watch, a live
    loader's capture and its feeder): every ask answers, none finds another's poll running."""
    script = tmp_path / "threads.py"
    script.write_text(_THREADS_ASK, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script), method], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


@needs_linux
@pytest.mark.parametrize("method", [pytest.param("fork", marks=needs_fork), "spawn"])
def test_a_bound_child_is_killed_with_its_parent(tmp_path: Path, method: str) -> None:
    parent, child, (bound, alive) = _family(tmp_path, True, method)
    try:
        assert bound == "True" and alive == "True"
        parent.kill()  # outright (SIGKILL; TerminateProcess on Windows)
        parent.wait(timeout=30)
        assert _gone(child, 5.0), "the child outlived its parent"  # it sleeps: only the OS ended it
    finally:
        _end(parent, child)


@pytest.mark.parametrize("name", ["darwin", "win32"])
def test_an_unbound_child_notices_its_parent_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """What a child does where the OS cannot bind it (and under forkserver): its polls see the
    parent gone."""
    parent, child, (bound, alive) = _family(tmp_path, False, "spawn")
    try:
        assert bound == "False" and alive == "True"
        parent.kill()  # outright (SIGKILL; TerminateProcess on Windows)
        parent.wait(timeout=30)
        assert _gone(child, 10.0)
        assert (tmp_path / "child-False-spawn.txt").read_text().endswith("orphaned\n")
    finally:
        _end(parent, child)
    # and the binding itself is a no-op there, even in a child of multiprocessing
    monkeypatch.setattr(sys, "platform", name)
    monkeypatch.setattr(
        host.multiprocessing, "parent_process", lambda: SimpleNamespace(pid=os.getppid())
    )
    assert host.bind_to_parent() is False


# --------------------------------------------------------------------------- the file lock


def _locked_by_another_process(path: Path) -> subprocess.Popen[str]:
    code = (
        "import os, sys, time; from eyeblink import host; fd = os.open(sys.argv[1], os.O_RDWR); "
        "host.lock_file(fd); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.parametrize("name", ["linux", "darwin"])
def test_the_lock_excludes_another_open_file_and_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    if not LINUX:
        pytest.skip("flock is checked on Linux")
    monkeypatch.setattr(sys, "platform", name)
    path = tmp_path / ".rec.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    host.lock_file(fd)
    other = os.open(path, os.O_RDWR)
    with pytest.raises(BlockingIOError):  # the same process, another open file
        host.lock_file(other)
    os.close(other)
    host.release_lock_file(fd, path)
    assert not path.exists()
    path.touch()
    holder = _locked_by_another_process(path)
    try:
        fd = os.open(path, os.O_RDWR)
        with pytest.raises(BlockingIOError):
            host.lock_file(fd)
    finally:
        holder.kill()
        holder.wait()
    host.lock_file(fd)  # the holder's lock ended with it
    host.release_lock_file(fd, path)


class _FakeMsvcrt:
    """``msvcrt``'s byte-range locks as Windows keeps them: per file and byte, for the handle that
    took them (another handle of the same process is refused too); ``locking`` locks at the
    descriptor's position. (The real module exists only on Windows: this checks the branch's use of
    it, not Windows.)"""

    LK_UNLCK, LK_NBLCK = 0, 2
    held: ClassVar[dict[tuple[int, int, int], int]] = {}  # (device, inode, offset) -> fd
    offsets: ClassVar[list[int]] = []

    @classmethod
    def locking(cls, fd: int, mode: int, nbytes: int) -> None:
        st, at = os.fstat(fd), os.lseek(fd, 0, os.SEEK_CUR)
        cls.offsets.append(at)
        key = (st.st_dev, st.st_ino, at)
        if mode == cls.LK_UNLCK:
            cls.held.pop(key, None)
        elif key in cls.held and cls.held[key] != fd:
            raise OSError(errno.EACCES, "Permission denied")
        else:
            cls.held[key] = fd


@pytest.fixture
def msvcrt(monkeypatch: pytest.MonkeyPatch) -> type[_FakeMsvcrt]:
    monkeypatch.setitem(sys.modules, "msvcrt", _FakeMsvcrt)
    monkeypatch.setattr(_FakeMsvcrt, "held", {})
    monkeypatch.setattr(_FakeMsvcrt, "offsets", [])
    monkeypatch.setattr(sys, "platform", "win32")
    return _FakeMsvcrt


def test_the_windows_lock_is_one_byte_far_past_the_record(
    tmp_path: Path, msvcrt: type[_FakeMsvcrt]
) -> None:
    path = tmp_path / ".rec.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b'{"pid": 1}\n')
    host.lock_file(fd)
    # position kept
    assert msvcrt.offsets == [host._LOCK_BYTE] and os.lseek(fd, 0, os.SEEK_CUR) == 11
    other = os.open(path, os.O_RDWR)
    with pytest.raises(BlockingIOError):
        host.lock_file(other)
    os.close(other)
    assert path.read_text() == '{"pid": 1}\n'  # the record stays readable
    host.release_lock_file(fd, path)
    assert not msvcrt.held and not path.exists()  # unlocked, closed, then removed


def test_the_session_lock_on_the_windows_branch(tmp_path: Path, msvcrt: type[_FakeMsvcrt]) -> None:
    from eyeblink.outputs.lock import SessionBusyError, lock_path, lock_session

    lock = lock_session(tmp_path, "rec")
    assert json.loads(lock_path(tmp_path, "rec").read_text())["pid"] == os.getpid()
    with pytest.raises(SessionBusyError, match=f"PID {os.getpid()} "):
        lock_session(tmp_path, "rec")
    lock.release()
    assert not lock_path(tmp_path, "rec").exists()
    lock_session(tmp_path, "rec").release()


def test_durations_in_the_package_are_timed_with_perf_counter() -> None:
    """Python <= 3.12 on Windows ticks ``time.time()`` and ``time.monotonic()`` every 15.6 ms (eight
    frames at 500 FPS): every duration, age, rate and deadline inside the package is timed with
    ``time.perf_counter()`` (or a frame's own timestamp); wall-clock dates come from ``datetime``.
    """
    found = []
    for path in sorted((REPO / "eyeblink").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "time"
                and node.attr in ("monotonic", "monotonic_ns", "time", "time_ns")
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: time.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "time":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: from time import ...")
    assert not found, found


def test_a_failed_write_names_the_fix_for_its_cause() -> None:
    """A full disk asks for space; a file that cannot be written (read-only, another program's) asks
    for another place, never blames the disk."""
    from eyeblink.outputs.export import write_failed

    full = str(
        write_failed(Path("out/s.frames.csv"), OSError(errno.ENOSPC, "No space left on device"))
    )
    assert full.startswith(
        "cannot write out/s.frames.csv (No space left on device); free space on that disk"
    )
    for err, text in ((errno.EACCES, "Permission denied"), (errno.EBADF, "Bad file descriptor")):
        line = str(write_failed(Path("out/s.summary.json"), OSError(err, text)))
        assert f"({text})" in line and "free space" not in line and "choose another -o" in line, (
            line
        )
