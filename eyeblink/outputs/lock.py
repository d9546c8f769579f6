"""One writer per session: a lock on ``OUTDIR/<stem>`` held from before a run's first row to its
summary.

Two runs that write the same session (the same output folder and stem: the same recording twice, or
two recordings with the same name) would interleave their rows, rename each other's temporary files
away and leave a summary that names the wrong input. So every run that writes a session
(``process``, ``batch``, the Python API) first takes the session's lock, a file
``OUTDIR/.<stem>.lock``:

* it is opened and locked (exclusive, not waiting: :func:`eyeblink.host.lock_file`, ``flock`` on
  Linux and macOS, a byte-range lock on Windows). The OS holds that lock for the open file, so two
  threads of one process exclude each other too, and the lock ends with the process that held it,
  however it ended (a crash, ``kill -9``, a machine that rebooted);
* the holder writes who it is (PID, host, start time, command) into the file, so a second run is
  refused in one line naming that run and the fix (:class:`SessionBusyError`, exit status 2), before
  any work;
* a lock file whose lock nobody holds was left by a run that is gone: it is taken over, with a
  warning naming that run;
* releasing removes the file. A run that opened the file just before it was removed would lock a
  file no longer in the folder: after locking, the file's inode is compared with the path's, and the
  lock retried.

Where the filesystem cannot lock (some network mounts), the file's content decides: a lock of this
host whose process is alive, or of another host, is busy (the message names the file to remove if
that run is gone); one of this host whose process is gone is stale.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eyeblink import host  # the one module that knows the OS (the import contracts allow this one)
from eyeblink.errors import OutputError, warn

__all__ = ["SessionBusyError", "SessionLock", "lock_path", "lock_session", "session_locks"]


class SessionBusyError(OutputError):
    """Another run is writing the same session (output folder and stem)."""


def lock_path(outdir: str | Path, stem: str) -> Path:
    """The lock file of session ``stem`` in ``outdir``."""
    return Path(outdir) / f".{stem}.lock"


def _holder_text(info: dict[str, Any]) -> str:
    """``PID 123 on host lab-pc, started 2026-11-26T11:20:03+00:00, `eyeblink process rec.avi -o
    out```."""
    parts = [f"PID {info.get('pid', '?')} on host {info.get('host', '?')}"]
    if info.get("started"):
        parts.append(f"started {info['started']}")
    text = ", ".join(parts)
    if info.get("command"):
        text += f", `{info['command']}`"
    return text


def _read_info(path: Path, wait_s: float = 0.0) -> dict[str, Any]:
    """The holder's record in ``path`` ({} if none or unreadable); waits up to ``wait_s`` for a
    holder that has locked the file but not yet written it."""
    deadline = time.perf_counter() + wait_s
    while True:
        try:
            info = json.loads(path.read_text(encoding="utf-8") or "{}")
            if isinstance(info, dict) and info:
                return info
        except (OSError, ValueError):
            pass
        if time.perf_counter() >= deadline:
            return {}
        time.sleep(0.02)


def _pid_alive(pid: object) -> bool:
    return isinstance(pid, int) and pid > 0 and host.pid_alive(pid)


def _command() -> str:
    argv = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    text = " ".join(argv)
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass
class SessionLock:
    """A held session lock: :meth:`release` (or the ``with`` block of :func:`session_locks`) ends
    it."""

    path: Path
    fd: int
    stem: str

    def release(self) -> None:
        """Remove the lock file and unlock it (idempotent)."""
        if self.fd < 0:
            return
        host.release_lock_file(self.fd, self.path)  # closing the last descriptor ends the lock
        self.fd = -1


def _busy(
    outdir: Path, stem: str, path: Path, info: dict[str, Any], *, no_flock: bool = False
) -> SessionBusyError:
    who = _holder_text(info) if info else "a run that has not yet said who it is"
    fix = "wait for it to finish, or write this run to another output folder (-o)"
    if no_flock:
        fix += f"; if that run is gone, remove {path}"
    return SessionBusyError(
        f"session {stem!r} in {outdir} is being written by another run ({who}): {fix}"
    )


def lock_session(outdir: str | Path, stem: str) -> SessionLock:
    """Take the lock of session ``stem`` in ``outdir`` (the folder must exist); raises
    :class:`SessionBusyError` naming the other run if one holds it, and warns when it takes over a
    lock left by a run that is gone."""
    out = Path(outdir)
    path = lock_path(out, stem)
    for _attempt in range(50):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(
                f"cannot create the session lock {path} ({exc.strerror or exc}); choose another "
                "output folder"
            ) from None
        no_flock = False
        try:
            host.lock_file(fd)
        except BlockingIOError:
            os.close(fd)
            raise _busy(out, stem, path, _read_info(path, wait_s=1.0)) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                os.close(fd)
                raise OutputError(
                    f"cannot lock {path} ({exc.strerror or exc}); choose another output folder"
                ) from None
            no_flock = True
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the holder removed it as we opened it: lock the file now in the folder
            os.close(fd)
            continue
        previous = _read_info(path)
        if previous:
            mine = (
                previous.get("pid") == os.getpid() and previous.get("host") == socket.gethostname()
            )
            if no_flock and (
                previous.get("host") != socket.gethostname()
                or _pid_alive(previous.get("pid"))
                or mine
            ):
                os.close(fd)
                raise _busy(out, stem, path, previous, no_flock=True)
            warn(
                f"session {stem!r} in {out}: took over the lock left by a run that is no longer "
                "running "
                f"({_holder_text(previous)}); its files are rewritten by this run"
            )
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": _command(),
        }
        data = (json.dumps(info) + "\n").encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        return SessionLock(path, fd, stem)
    raise OutputError(f"cannot take the session lock {path}: it keeps being replaced; try again")


@contextlib.contextmanager
def session_locks(outdir: str | Path, stems: Iterable[str]) -> Iterator[list[SessionLock]]:
    """Hold the locks of every session in ``stems`` (in ``outdir``) for the block: all of them or
    none (a busy session releases those already taken and raises :class:`SessionBusyError`)."""
    held: list[SessionLock] = []
    try:
        for stem in dict.fromkeys(stems):
            held.append(lock_session(outdir, stem))
        yield held
    finally:
        for lock in reversed(held):
            lock.release()
