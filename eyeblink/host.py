"""The one module that knows the operating system: everything eyeblink does differently on Linux,
macOS and Windows.

A lab's computer may run any of the three, and eyeblink runs on each as on Linux. So no other module
of the package (nor of ``scripts/``) reads the kernel's files, asks for a scheduling class, locks a
file or binds a child to its parent itself: it calls the function here that does it for the platform
it runs on.

* The portable path is ``psutil`` (wheels for all three). Linux keeps its own reads where a run
  takes them per sample and they are cheaper than ``psutil``'s (a process's resident memory from the
  kernel's ``statm`` file: ~20 µs against ~70 µs), or where they give what ``psutil`` does not (the
  physical cores of the CPUs this process may use, the CPU's flags).
* Where an OS has no such thing, the function says so in its docstring and returns ``None`` (or
  ``False``): nothing here raises because the platform is not Linux.
* The platform is read at call time (:func:`_platform`), so a test reports another one by patching
  ``sys.platform`` and runs that platform's branch here.

It is also the one place that asks which platform this is (``sys.platform``, ``os.name``): other
modules call its named checks (:func:`is_linux`, :func:`is_windows`, :func:`is_macos`,
:func:`platform_name`), the start methods the platform offers (:func:`start_methods_available`) and
its signal functions (:func:`ctrl_break_signal`, :func:`block_signals`).

Its only imports are the standard library and ``psutil`` (imported when first needed): it is the
package's ground floor, so every other floor may read it (``config.py``'s physical cores,
``outputs/lock.py``'s file lock, the sources' camera backend, the runtime's processes;
``pyproject.toml``'s import contracts and ``scripts/layers.py``).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import multiprocessing
import os
import platform
import select
import signal
import sys
import threading
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "SHM_DIR",
    "Priority",
    "bind_to_parent",
    "block_signals",
    "children",
    "children_cpu_seconds",
    "cpu_busy_seconds",
    "cpu_info",
    "ctrl_break_signal",
    "current_priority",
    "descendants",
    "is_linux",
    "is_macos",
    "is_windows",
    "kill_process_group",
    "load_average",
    "lock_file",
    "lower_to_idle",
    "memory_available_bytes",
    "memory_parts",
    "memory_total_bytes",
    "parent_alive",
    "physical_cores",
    "pid_alive",
    "pin_to_one_core",
    "platform_name",
    "process_cmdline",
    "process_cpu_seconds",
    "process_name",
    "pss_bytes",
    "raise_priority",
    "release_lock_file",
    "remove_stale_shared_memory",
    "restore_cpus",
    "restore_priority",
    "restore_signal_mask",
    "rss_bytes",
    "shared_memory_dir",
    "shared_memory_free",
    "start_methods_available",
    "start_shared_memory_tracker",
    "thread_cpu_seconds",
    "unblock_signals",
    "usable_cpus",
    "wait_with_cpu",
]

#: where Linux keeps POSIX shared memory, one file per block (a tmpfs)
SHM_DIR = "/dev/shm"
#: the kernel's process table on Linux (procfs)
_PROC = "/proc"
#: Windows: the byte a session lock locks, far past any record written at the file's start (a
#: byte-range lock there is mandatory: a locked byte cannot be read by another process, and the
#: refused run reads the record)
_LOCK_BYTE = 2**30
#: Windows' priority classes (``psutil``'s constants exist only on Windows)
_NORMAL_CLASS, _IDLE_CLASS, _HIGH_CLASS, _REALTIME_CLASS = 0x20, 0x40, 0x80, 0x100
#: the CPU flags NumPy detects at run time, by the Linux kernel's name for them (the spelling
#: :func:`cpu_info` gives on every OS); AMX is not among NumPy's, so ``amx_tile`` shows only on
#: Linux
_NUMPY_FLAGS = {
    "sse4_2": "SSE42",
    "avx": "AVX",
    "f16c": "F16C",
    "fma": "FMA3",
    "avx2": "AVX2",
    "avx512f": "AVX512F",
    "avx512cd": "AVX512CD",
    "avx512bw": "AVX512BW",
    "avx512dq": "AVX512DQ",
    "avx512vl": "AVX512VL",
    "avx512_vnni": "AVX512VNNI",
    "avx512_bf16": "AVX512BF16",
    "avx512_fp16": "AVX512FP16",
    "neon": "NEON",
    "asimd": "ASIMD",
    "asimddp": "ASIMDDP",
}


def _platform() -> str:
    """``sys.platform``, read at call time (a test reports another platform by patching it)."""
    return sys.platform


def platform_name() -> str:
    """This platform's name as Python spells it (``linux``, ``darwin``, ``win32``): for messages."""
    return _platform()


def is_linux() -> bool:
    """Linux (any distribution)."""
    return _platform().startswith("linux")


def is_windows() -> bool:
    """Windows."""
    return _platform() == "win32"


def is_macos() -> bool:
    """macOS."""
    return _platform() == "darwin"


# --------------------------------------------------------------------------- starting processes,
# signals


def start_methods_available() -> tuple[str, ...]:
    """The :mod:`multiprocessing` start methods this platform offers: ``spawn`` alone on Windows,
    else those :func:`multiprocessing.get_all_start_methods` lists (``fork``, ``spawn``,
    ``forkserver`` on Linux and macOS)."""
    return ("spawn",) if is_windows() else tuple(multiprocessing.get_all_start_methods())


def ctrl_break_signal() -> int | None:
    """Windows' Ctrl-Break signal, ``SIGBREAK`` (a console sends it where Ctrl-C is taken); None
    where the platform has none. Read at call time, as the platform is."""
    return getattr(signal, "SIGBREAK", None)


def block_signals(signals: tuple[int, ...]) -> Any:
    """Block ``signals`` in this thread; returns the mask before (for :func:`restore_signal_mask`),
    or None where the platform has no signal mask (Windows, which has no fork either)."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, signals)


def restore_signal_mask(mask: Any) -> None:
    """Set this thread's signal mask back to ``mask`` (:func:`block_signals`'s; None: nothing to
    restore)."""
    if mask is not None and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def unblock_signals(signals: tuple[int, ...]) -> None:
    """Unblock ``signals`` in this thread, where the platform has a signal mask (not Windows)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


def _psutil() -> Any:
    """The ``psutil`` module, imported when first needed (``import eyeblink`` stays light); a
    test may hand a fake."""
    import psutil

    return psutil


def _ps_errors() -> tuple[type[BaseException], ...]:
    return (_psutil().Error, OSError, ValueError, AttributeError, OverflowError)


def _clock_tick() -> int:
    return int(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100


def _page_size() -> int:
    return int(os.sysconf("SC_PAGE_SIZE")) if hasattr(os, "sysconf") else 4096


# -------------------------------------------------------------------------------------------------
# the CPUs


def cpu_info() -> dict[str, str]:
    """The first processor's description: at least ``model name`` (the CPU's brand, empty where
    unknown) and ``flags`` (its extensions, space-separated, in the Linux kernel's spelling: ``avx2
    avx512f ...``).

    Linux: every field of the kernel's ``cpuinfo`` file. Windows: the brand from the registry;
    macOS: from ``sysctl machdep.cpu.brand_string``; there the flags are those NumPy detects at run
    time (the vector extensions :mod:`eyeblink.runtime.costs` classes a machine by)."""
    out: dict[str, str] = {}
    if is_linux():
        try:
            with open(f"{_PROC}/cpuinfo", encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        if out:
                            break
                        continue
                    key, _, value = line.partition(":")
                    out.setdefault(key.strip(), value.strip())
        except OSError:
            pass
    if not out.get("model name"):
        out["model name"] = _cpu_brand()
    if "flags" not in out:
        out["flags"] = " ".join(_numpy_flags())
    return out


def _cpu_brand() -> str:
    """The CPU's brand on Windows (registry) and macOS (``sysctl``); ``platform.processor()``
    elsewhere."""
    if is_windows():
        with contextlib.suppress(Exception):
            winreg: Any = importlib.import_module("winreg")
            with winreg.OpenKey(
                winreg.HKEY_LOCAL_MACHINE, r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"
            ) as key:
                return str(winreg.QueryValueEx(key, "ProcessorNameString")[0]).strip()
    elif _platform() == "darwin":
        import subprocess

        with contextlib.suppress(Exception):
            got = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
            )
            if got.returncode == 0 and got.stdout.strip():
                return got.stdout.strip()
    return platform.processor() or ""


def _numpy_flags() -> list[str]:
    """The CPU extensions NumPy found at start-up, by the kernel's names (empty where NumPy does
    not say)."""
    features: dict[str, bool] = {}
    for where in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        with contextlib.suppress(Exception):
            features = dict(importlib.import_module(where).__cpu_features__)
            break
    return [flag for flag, name in _NUMPY_FLAGS.items() if features.get(name)]


def usable_cpus() -> int:
    """The logical CPUs this process may run on: its affinity (Linux, Windows); all of them on
    macOS, which has no affinity for a process."""
    try:
        if is_linux():
            return max(1, len(os.sched_getaffinity(0)))
        if is_windows():
            return max(1, len(_psutil().Process().cpu_affinity()))
    except _ps_errors():
        pass
    return os.cpu_count() or 1


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads do not help a cache-bound fit).

    Linux: the distinct (socket, core) pairs of the kernel's ``cpuinfo``; elsewhere (and where that
    file has none, e.g. ARM) ``psutil``'s count of physical cores; at most the CPUs of
    :func:`usable_cpus`."""
    allowed = usable_cpus()
    cores: set[tuple[str, str]] = set()
    if is_linux():
        try:
            phys = ""
            with open(f"{_PROC}/cpuinfo", encoding="utf-8") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    key = key.strip()
                    if key == "physical id":
                        phys = value.strip()
                    elif key == "core id":
                        cores.add((phys, value.strip()))
        except OSError:
            pass
    n = len(cores)
    if not n:
        try:
            n = int(_psutil().cpu_count(logical=False) or 0)
        except _ps_errors():
            n = 0
    n = n or os.cpu_count() or 1
    return max(1, min(n, allowed))


def cpu_busy_seconds() -> tuple[float, float] | None:
    """(busy, all) CPU seconds of all the machine's cores since boot; busy is all but idle and I/O
    wait (guest time is inside user). The share busy over a span is the ratio of two readings'
    differences. None where it cannot be read.

    Linux: the first line of the kernel's ``stat`` file (a plain read; a view reads it every 2 s).
    Elsewhere ``psutil.cpu_times()``."""
    if is_linux():
        try:
            with open(f"{_PROC}/stat", "rb") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        if len(fields) < 5:
            return None
        tick = _clock_tick()
        total = sum(fields[:8])  # user nice system idle iowait irq softirq steal
        return (total - fields[3] - fields[4]) / tick, total / tick
    try:
        times = _psutil().cpu_times()._asdict()
    except _ps_errors():
        return None
    # guest time is inside user
    total = sum(v for k, v in times.items() if not k.startswith("guest"))
    return total - times.get("idle", 0.0) - times.get("iowait", 0.0), total


# -------------------------------------------------------------------------------------------------
# processes


def rss_bytes(pid: int) -> int | None:
    """The resident memory of process ``pid`` in bytes; None if it cannot be read (gone, another
    user's).

    Linux: the kernel's ``statm`` file of the process (a few microseconds, no page-table walk: read
    every sample of a long run). Elsewhere ``psutil`` (Windows: the working set)."""
    if is_linux():
        try:
            with open(f"{_PROC}/{pid}/statm", "rb") as fh:
                return int(fh.read().split()[1]) * _page_size()
        except (OSError, ValueError, IndexError):
            return None
    try:
        return int(_psutil().Process(pid).memory_info().rss)
    except _ps_errors():
        return None


def pss_bytes(pid: int) -> int | None:
    """The proportional set of process ``pid`` in bytes: its resident pages, each shared page
    divided among the processes that share it (so the forked workers' shared model pages count once
    in a sum). Linux only (the process's ``smaps_rollup``); None elsewhere, where the OS keeps no
    such figure, and for a process gone."""
    if not is_linux():
        return None
    try:
        with open(f"{_PROC}/{pid}/smaps_rollup", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_parts(pid: int) -> dict[str, int] | None:
    """The resident memory of process ``pid`` in bytes, in all (``rss``) and by kind: ``anon`` (its
    own heap), ``file`` (mapped files), ``shmem`` (shared memory it has touched: the frame ring).
    Linux only (the process's ``status`` file); None elsewhere and for a process gone."""
    if not is_linux():
        return None
    try:
        with open(f"{_PROC}/{pid}/status", encoding="utf-8") as fh:
            parts = {
                k: int(v.split()[0]) * 1024
                for k, _, v in (ln.partition(":") for ln in fh)
                if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem")
            }
        return {
            "rss": parts["VmRSS"],
            "anon": parts["RssAnon"],
            "file": parts["RssFile"],
            "shmem": parts["RssShmem"],
        }
    except (OSError, ValueError, IndexError, KeyError):
        return None


def process_cpu_seconds(pid: int | None = None, *, user_only: bool = False) -> float | None:
    """CPU seconds (user + system, or user alone) process ``pid`` has used (None: this process, with
    its threads); None for a process that cannot be read.

    This process: ``getrusage`` (microseconds) on Linux and macOS, ``psutil`` on Windows. Another
    process: ``psutil`` (the clock's ticks)."""
    if pid is None or pid == os.getpid():
        if not is_windows():
            import resource

            ru = resource.getrusage(resource.RUSAGE_SELF)
            return ru.ru_utime if user_only else ru.ru_utime + ru.ru_stime
        pid = os.getpid()
    try:
        t = _psutil().Process(pid).cpu_times()
    except _ps_errors():
        return None
    return float(t.user if user_only else t.user + t.system)


def children_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's children that have ended and been waited for
    (the shell's ``time`` of a command). Linux, macOS: ``getrusage(RUSAGE_CHILDREN)``; Windows keeps
    no such total: 0.0."""
    if is_windows():
        return 0.0
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def thread_cpu_seconds(native_id: int) -> float | None:
    """CPU seconds (user + system) of the thread of this process whose native id is ``native_id``
    (:func:`threading.get_native_id`); None where it cannot be read.

    Linux: the thread's ``stat`` file in the kernel's process table. Windows:
    ``psutil.Process().threads()``, whose ids are the native ones. macOS: None (``psutil`` numbers a
    process's threads there, it does not give their native ids); a thread can still read its own
    time with :func:`time.thread_time`."""
    if is_linux():
        try:
            stat = Path(f"{_PROC}/self/task/{native_id}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _clock_tick()
        except (OSError, ValueError, IndexError):
            return None
    if _platform() == "darwin":
        return None
    try:
        for t in _psutil().Process().threads():
            if t.id == native_id:
                return float(t.user_time + t.system_time)
    except _ps_errors():
        return None
    return None


def children(pid: int) -> list[int]:
    """The pids of process ``pid``'s children now ([] for a process gone).

    Linux: the ``children`` files of its threads in the kernel's process table (no walk over every
    process); elsewhere, and on a kernel without those files, ``psutil``."""
    if is_linux():
        try:
            out: list[int] = []
            for task in os.listdir(f"{_PROC}/{pid}/task"):
                with open(f"{_PROC}/{pid}/task/{task}/children", encoding="utf-8") as fh:
                    out.extend(int(c) for c in fh.read().split())
            return out
        except FileNotFoundError:
            if not os.path.isdir(f"{_PROC}/{pid}"):
                return []
        except (OSError, ValueError):
            return []
    try:
        return [c.pid for c in _psutil().Process(pid).children()]
    except _ps_errors():
        return []


def descendants(pid: int) -> list[int]:
    """The pids of process ``pid``'s children, their children, and so on (not ``pid`` itself)."""
    out: list[int] = []
    seen = {pid}
    todo = [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                out.append(child)
                todo.append(child)
    return out


def process_name(pid: int) -> str | None:
    """The short name of process ``pid`` (Linux: its ``comm``); None for a process gone."""
    try:
        return str(_psutil().Process(pid).name())
    except _ps_errors():
        return None


def process_cmdline(pid: int) -> list[str]:
    """The command line of process ``pid`` ([] for a process gone or one the OS will not show)."""
    try:
        return [str(a) for a in _psutil().Process(pid).cmdline()]
    except _ps_errors():
        return []


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a zombie, ended but not yet waited for, does
    not).

    Linux, macOS: ``kill(pid, 0)`` (another user's process runs), then its state (Linux: the
    kernel's ``stat`` file; macOS: ``psutil``). Windows: ``psutil`` (``os.kill(pid, 0)`` there would
    send CTRL_C_EVENT)."""
    if pid <= 0:
        return False
    if not is_windows():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # another user's process
        except (OSError, OverflowError):  # (a pid past the OS's range: a record's garbage)
            return False
        if is_linux():
            try:
                with open(f"{_PROC}/{pid}/stat", "rb") as fh:
                    return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
            except (OSError, IndexError):
                return True  # no process table to read: trust kill()
    ps = _psutil()
    try:
        if not ps.pid_exists(pid):
            return False
        return bool(ps.Process(pid).status() != ps.STATUS_ZOMBIE)
    except ps.AccessDenied:
        return True
    except _ps_errors():
        return False


def wait_with_cpu(proc: Any) -> tuple[int, float]:
    """Wait for the child ``proc`` (a :class:`subprocess.Popen`) to end; (its exit status, as
    ``returncode`` has it after, and the CPU seconds, user + system, that it and the descendants it
    waited for used).

    Linux, macOS: ``wait4``'s resource usage, exact. Windows keeps no such figure for a process that
    has ended: the process tree's CPU time sampled every 50 ms while it runs, its largest sum (what
    ended in the last 50 ms, and a descendant that ended earlier, is missing)."""
    if not is_windows():
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return int(proc.returncode), usage.ru_utime + usage.ru_stime
    import time

    cpu = 0.0
    while proc.poll() is None:
        pids = [proc.pid, *descendants(proc.pid)]
        cpu = max(cpu, sum(process_cpu_seconds(p) or 0.0 for p in pids))
        time.sleep(0.05)
    return int(proc.returncode), cpu


def kill_process_group(pid: int, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to the process group led by ``pid`` (a child started with
    ``start_new_session=True``) and so to everything it started. Windows has no such groups: ``pid``
    and its descendants are terminated (``sig`` aside). Raises :class:`ProcessLookupError` when
    ``pid`` is gone."""
    if not is_windows():
        os.killpg(pid, sig)
        return
    ps = _psutil()
    try:
        root = ps.Process(pid)
        procs = [*root.children(recursive=True), root]
    except ps.NoSuchProcess:
        raise ProcessLookupError(errno.ESRCH, f"no process {pid}") from None
    for p in procs:
        with contextlib.suppress(ps.Error):
            p.kill()


# -------------------------------------------------------------------------------------------------
# memory


def load_average() -> tuple[float, float, float] | None:
    """The machine's load over the last 1, 5 and 15 minutes (runnable processes); Windows has none
    of its own: ``psutil``'s estimate, zeros for its first 5 seconds. None where it cannot be read.
    """
    try:
        if is_windows():
            one, five, fifteen = _psutil().getloadavg()
        else:
            one, five, fifteen = os.getloadavg()
    except _ps_errors():
        return None
    return float(one), float(five), float(fifteen)


def memory_available_bytes() -> int | None:
    """The memory a new allocation can take without swapping (Linux: ``MemAvailable``); None if
    unknown."""
    try:
        return int(_psutil().virtual_memory().available)
    except _ps_errors():
        return None


def memory_total_bytes() -> int | None:
    """The machine's physical memory in bytes; None if unknown."""
    try:
        return int(_psutil().virtual_memory().total)
    except _ps_errors():
        return None


def shared_memory_dir() -> str | None:
    """Where the OS keeps POSIX shared-memory blocks as files that can be listed: :data:`SHM_DIR` on
    Linux; None on macOS (its shared-memory objects cannot be listed) and Windows (a block is a
    mapping of the page file)."""
    return SHM_DIR if is_linux() else None


def shared_memory_free(shm_dir: str | None = None) -> tuple[int, str] | None:
    """(bytes free, where) for new shared memory: Linux, the free space of ``shm_dir`` (default
    :data:`SHM_DIR`, a tmpfs with a size of its own); macOS and Windows back shared memory with
    memory and swap or the page file: the memory available (:func:`memory_available_bytes`). None
    where neither can be read."""
    where = shm_dir or shared_memory_dir()
    if where is not None:
        try:
            st = os.statvfs(where)
            return st.f_bavail * st.f_frsize, where
        except (OSError, AttributeError):
            return None
    avail = memory_available_bytes()
    return None if avail is None else (avail, "memory")


def start_shared_memory_tracker() -> bool:
    """Start this process's shared-memory tracker before any child starts, so that the children a
    run starts share it (:mod:`eyeblink.runtime.procs.shm`); returns whether one runs. POSIX only:
    Python on Windows tracks no shared memory (a block is a mapping of the page file, freed with its
    last handle), and has no tracker to start (it needs ``_posixsubprocess``)."""
    if is_windows():
        return False
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    return True


def remove_stale_shared_memory(
    prefix: str, shm_dir: str | None = None
) -> list[tuple[str, int, int]]:
    """Unlink the shared-memory blocks named ``<prefix><pid>_<tag>`` whose creating process
    ``<pid>`` no longer runs here (:func:`pid_alive`; never this process's); returns ``(path, bytes,
    pid)`` of each one removed.

    Linux keeps the blocks of a process killed outright (SIGKILL, the OOM killer) in :data:`SHM_DIR`
    until reboot, and lists them there: that is where this sweeps (or in ``shm_dir``). macOS keeps
    them too, but its POSIX shared-memory objects cannot be listed, so nothing is swept there (a
    name is freed only by one who knows it); Windows frees a block with its last handle, so none is
    ever left. A block another user owns, or one removed meanwhile by someone else, is left alone.
    """
    where = shm_dir or shared_memory_dir()
    if where is None:
        return []
    try:
        names = os.listdir(where)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text, _, tag = name[len(prefix) :].partition("_")
        if (
            not (pid_text.isdigit() and tag)
            or int(pid_text) == os.getpid()
            or pid_alive(int(pid_text))
        ):
            continue
        path = os.path.join(where, name)
        try:
            size = os.stat(path).st_size
            os.unlink(path)
        except OSError:
            continue
        removed.append((path, size, int(pid_text)))
    return removed


# -------------------------------------------------------------------------------------------------
# priority


class Priority(NamedTuple):
    """What :func:`current_priority` read and :func:`restore_priority` puts back: the scheduling
    policy (Linux; 0 elsewhere) and the nice value (Windows: the priority class)."""

    policy: int
    nice: int


def current_priority() -> Priority:
    """This process's scheduling policy and nice value (Windows: its priority class)."""
    if is_windows():
        return Priority(0, int(_psutil().Process().nice()))
    policy = os.sched_getscheduler(0) if is_linux() else 0
    return Priority(policy, os.getpriority(os.PRIO_PROCESS, 0))


def raise_priority(level: str, *, nice: int, realtime: int) -> str | None:
    """Run this process (its calling thread and every thread it starts next) ahead of other
    programs: ``high`` or ``realtime``. None when done, else what the OS refused, how the run goes
    on and how to allow it (one line, after ``--priority LEVEL: ``).

    * Linux: ``high`` is nice value ``nice``; ``realtime`` the round-robin real-time class at
      priority ``realtime`` (the kernel keeps 5% of each second for the rest). Both need root,
      ``CAP_SYS_NICE`` or a ulimit.
    * macOS: ``high`` is nice value ``nice`` (root); a process has no real-time class there:
      refused.
    * Windows: the ``HIGH`` priority class, and the ``REALTIME`` class (an administrator's: Windows
      gives others the ``HIGH`` class instead, which is said).
    """
    if level not in ("high", "realtime"):
        return None
    if is_windows():
        return _raise_windows(level)
    if level == "realtime" and not is_linux():
        return (
            "macOS gives a program no real-time class; running at normal priority (--priority "
            "high lowers "
            "the nice value instead, as root)"
        )
    try:
        if level == "realtime":
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(realtime))
        else:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    except (PermissionError, OSError, AttributeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        if is_linux():
            how = "ulimit -r (RLIMIT_RTPRIO)" if level == "realtime" else "ulimit -e (RLIMIT_NICE)"
            allow = f"root, CAP_SYS_NICE or {how}"
        else:
            allow = "root"
        return f"the OS refused ({why}); running at normal priority (allow it with {allow})"
    return None


def _raise_windows(level: str) -> str | None:
    ps = _psutil()
    wanted = getattr(
        ps,
        "REALTIME_PRIORITY_CLASS" if level == "realtime" else "HIGH_PRIORITY_CLASS",
        _REALTIME_CLASS if level == "realtime" else _HIGH_CLASS,
    )
    try:
        proc = ps.Process()
        proc.nice(wanted)
        got = proc.nice()
    except _ps_errors() as exc:
        return (
            f"the OS refused ({type(exc).__name__}); running at normal priority (allow it by "
            "running as an "
            f"administrator)"
        )
    if level == "realtime" and got != wanted:
        return (
            "Windows gave the high priority class instead of the real-time one, which is an "
            "administrator's; "
            "running at high priority (run as an administrator for realtime)"
        )
    return None


def restore_priority(saved: Priority) -> None:
    """Put back what :func:`current_priority` returned (an API caller keeps its own priority
    after a run)."""
    try:
        if is_windows():
            _psutil().Process().nice(saved.nice)
            return
        if is_linux() and os.sched_getscheduler(0) != saved.policy:
            os.sched_setscheduler(0, saved.policy, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, 0, saved.nice)
    except _ps_errors():
        # going back to a lower priority is always allowed; a failure leaves it favoured, not broken
        pass


def lower_to_idle() -> None:
    """Run this process only on a core nothing else wants: Linux's idle scheduling class; the lowest
    nice value on macOS; Windows' idle priority class. Quietly nothing where the OS refuses (a
    bench's background load)."""
    with contextlib.suppress(*_ps_errors()):
        if is_windows():
            _psutil().Process().nice(getattr(_psutil(), "IDLE_PRIORITY_CLASS", _IDLE_CLASS))
        elif is_linux():
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        else:
            os.setpriority(os.PRIO_PROCESS, 0, 19)


def pin_to_one_core() -> set[int] | None:
    """Run this process on one core from now on (the lowest it may use), as one pipeline worker
    does; returns the CPUs it could run on before (for :func:`restore_cpus`), or None where it
    cannot be pinned: macOS has no CPU affinity for a process (a benchmark there runs on whatever
    core the OS picks), or the OS refused."""
    try:
        if is_linux():
            before = set(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {min(before)})
            return before
        if is_windows():
            proc = _psutil().Process()
            before = set(proc.cpu_affinity())
            proc.cpu_affinity([min(before)])
            return before
    except _ps_errors():
        return None
    return None


def restore_cpus(cpus: set[int]) -> None:
    """Let this process run on ``cpus`` again (what :func:`pin_to_one_core` returned)."""
    with contextlib.suppress(*_ps_errors()):
        if is_linux():
            os.sched_setaffinity(0, cpus)
        elif is_windows():
            _psutil().Process().cpu_affinity(sorted(cpus))


# ------------------------------------------------------------------------------------------ a child
# and its parent


def bind_to_parent() -> bool:
    """In a child started by :mod:`multiprocessing` (any start method): have the OS kill it
    (SIGKILL) as soon as the process that started it dies, whatever killed that one (``kill -9``
    included), so that no loader keeps the camera and the ring and no worker spins. True when the OS
    does it.

    Linux only: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, when the OS parent is the process that started
    this one (``fork``, ``spawn``; not under ``forkserver``, whose children's OS parent is the
    server); the parent may have died before that took effect, so its pid is checked after, and this
    process exits at once if it did. Elsewhere, and in a process not started by
    :mod:`multiprocessing`: False, nothing done; such a child notices its parent gone at its next
    queue poll (:func:`parent_alive`)."""
    parent = multiprocessing.parent_process()
    if parent is None or not is_linux() or parent.pid != os.getppid():
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG = 1
            return False
    except (OSError, AttributeError):
        return False
    # the parent died before the binding took: this child was reparented
    if os.getppid() != parent.pid:
        os._exit(1)
    return True


#: each thread's poll of its parent's sentinel, made at its first ask: a poll object serves one
#: thread at a time (two threads polling one at once: ``RuntimeError: concurrent poll()
#: invocation``), and a child's threads ask together (a worker's queue and its stop watch)
_parent_polls = threading.local()


def _forget_parent_polls() -> None:
    """In a forked child: the polls it inherited watch its parent's parent."""
    global _parent_polls
    _parent_polls = threading.local()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forget_parent_polls)


def parent_alive() -> bool:
    """Whether the process that started this one (:func:`multiprocessing.parent_process`, under
    ``fork``, ``spawn`` and ``forkserver`` alike) still runs; True in a process not started by
    :mod:`multiprocessing`. Cheap: a child's queue polls ask it. Linux, macOS: one ``poll`` of the
    parent's sentinel (a pipe that ends with the parent), the poll object made once per thread,
    where ``Process.is_alive`` makes, registers and closes a selector at each ask. Windows:
    ``is_alive``, a ``WaitForMultipleObjects`` with no wait."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return True
    if not hasattr(select, "poll"):
        return parent.is_alive()
    poll = getattr(_parent_polls, "poll", None)
    if poll is None:
        poll = _parent_polls.poll = select.poll()
        poll.register(parent.sentinel, select.POLLIN)
    return not poll.poll(0)


# -------------------------------------------------------------------------------------------------
# file locks


def lock_file(fd: int) -> None:
    """Lock the open file ``fd`` exclusively, without waiting, for as long as ``fd`` stays open (the
    OS ends the lock with the process, however it ends). Another open file of the same file, in this
    process or another, cannot take it meanwhile.

    Raises :class:`BlockingIOError` when another open file holds the lock, and :class:`OSError` with
    errno ``ENOLCK``, ``EOPNOTSUPP``, ``ENOSYS`` or ``EINVAL`` where the filesystem cannot lock
    (some network mounts). Linux, macOS: ``flock``. Windows: ``msvcrt.locking`` of one byte far past
    the file's end (a lock there is mandatory: the bytes a lock covers cannot be read, and the
    record at the file's start stays readable)."""
    if not is_windows():
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    msvcrt: Any = importlib.import_module("msvcrt")
    here = os.lseek(fd, 0, os.SEEK_CUR)
    os.lseek(fd, _LOCK_BYTE, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EDEADLK, getattr(errno, "EDEADLOCK", errno.EDEADLK)):
            raise BlockingIOError(errno.EAGAIN, "the file is locked by another open file") from None
        raise
    finally:
        os.lseek(fd, here, os.SEEK_SET)


def release_lock_file(fd: int, path: str | Path) -> None:
    """Remove the lock file ``path`` (when it is still the file ``fd`` has open) and close ``fd``,
    which ends :func:`lock_file`'s lock.

    Linux, macOS: removed first, then closed: a run that opened the file just before finds, once it
    has the lock, that the file in the folder is another (its inode), and locks that one. Windows
    cannot remove an open file: the record is cleared, the lock released and the file closed, then
    removed (left, empty, while another run has it open: that run takes it as a free lock)."""
    try:
        same = os.path.exists(path) and os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        same = False
    if not is_windows():
        if same:
            with contextlib.suppress(OSError):
                os.unlink(path)
        with contextlib.suppress(OSError):
            os.close(fd)
        return
    with contextlib.suppress(OSError):
        if same:
            os.ftruncate(fd, 0)
    with contextlib.suppress(OSError, ImportError):
        msvcrt: Any = importlib.import_module("msvcrt")
        os.lseek(fd, _LOCK_BYTE, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    with contextlib.suppress(OSError):
        os.close(fd)
    if same:
        with contextlib.suppress(OSError):
            os.unlink(path)
