"""Every output path of a command, resolved and checked in one place before any work.

A command names what it reads (:meth:`OutputPlan.read`) and what it will write
(:meth:`OutputPlan.write`); :meth:`OutputPlan.check` then refuses, before the first frame or epoch:

* an output that *is* an input: the same file (``os.path.samefile``: the same device and inode, so a
  hard link or a symbolic link to the recording counts, whatever its name), or a path not written
  yet that resolves (``os.path.realpath``) to an input's path;
* two outputs of the same run that are the same file (``report -o X --overlay X``);
* a folder where a file is expected (``eval --json results/``);
* a location that cannot be written (a parent that is a file, a read-only or full disk): the folder
  is created as the command would create it, and a probe file is written and removed.

Every whole file is then written to a temporary name beside it and renamed over the target
(:func:`atomic_path`), so a failure (a crash, Ctrl-C, a full disk) never leaves half a file where a
good one was. The streamed CSVs (``frames.csv``, ``blinks.csv``) are the exception by design: their
rows go to disk as they are computed, whole rows only (:mod:`eyeblink.outputs.export`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eyeblink.errors import OutputError

__all__ = [
    "SESSION_SUFFIXES",
    "OutputPlan",
    "atomic_path",
    "check_writable",
    "file_key",
    "same_file",
    "session_outputs",
]

#: every file a processed session may have in its output folder, ``<stem>.<suffix>``
SESSION_SUFFIXES = (
    "frames.csv",
    "blinks.csv",
    "summary.json",
    "crops.npz",
    "report.html",
    "trials.csv",
    "traces.csv",
    "nwb",
    "trace.png",
    "heatmap.png",
    "cr_blocks.png",
    "blinks_auto.csv",
)


def session_outputs(outdir: str | Path, stem: str) -> list[Path]:
    """The paths ``process`` (and ``batch``, ``live``) may write for one input ``stem`` into
    ``outdir``."""
    return [Path(outdir) / f"{stem}.{s}" for s in SESSION_SUFFIXES]


def file_key(path: str | Path) -> tuple[object, ...]:
    """What identifies the file at ``path``: (device, inode) when it exists, else its real path."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("inode", st.st_dev, st.st_ino)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same (device, inode) when both exist, else the
    same real path."""
    ka, kb = file_key(a), file_key(b)
    # one exists, the other not: the same only if the new path resolves onto the old one
    if ka[0] != kb[0]:
        return os.path.realpath(a) == os.path.realpath(b)
    return ka == kb


def check_log_file(log_file: str | Path, arguments: dict[str, Any]) -> None:
    """Refuse a ``--log-file`` that is a file another argument of the command names (a recording, a
    trials file, an output): the log is appended to it, which would change that file; and one that
    is a session file the command writes into its output folder (``-o out --log-file
    out/rec.frames.csv``: the log would be replaced by the rows). Other arguments are compared only
    where their files exist."""
    outdir = arguments.get("output")
    if isinstance(outdir, (str, Path)) and str(outdir):
        log = Path(log_file)
        suffix = next((s for s in SESSION_SUFFIXES if log.name.endswith(f".{s}")), None)
        in_outdir = os.path.realpath(log.parent) == os.path.realpath(outdir)
        if in_outdir and (
            suffix is not None or (log.name.startswith(".") and log.name.endswith(".lock"))
        ):
            stem = log.name[: -len(suffix) - 1] if suffix else log.name[1:-5]
            raise OutputError(
                f"--log-file {log_file} is a file this command writes for session {stem!r} in -o "
                f"{outdir}: the log would be overwritten by it; choose another path for "
                "--log-file, "
                f"e.g. {Path(outdir) / (stem + '.log')}"
            )
    for name, value in arguments.items():
        if name == "log_file":
            continue
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if (
                isinstance(v, (str, Path))
                and str(v)
                and os.path.isfile(v)
                and same_file(v, log_file)
            ):
                which = (
                    "the input"
                    if name in ("inputs", "input", "video", "session", "source")
                    else f"the file given as {name.replace('_', '-')}"
                )
                raise OutputError(
                    f"--log-file {log_file} is {which} ({v}): appending the log would change it; "
                    "choose another path for --log-file"
                )


def check_writable(path: str | Path, option: str) -> Path:
    """Create ``path``'s folder if needed and prove a file can be written there; ``path`` must not
    be a folder.

    Raises :class:`OutputError` naming ``option`` (the flag that gave the path) and the fix.
    """
    p = Path(path)
    if p.is_dir():
        raise OutputError(
            f"{option} {p} is a folder; give a file path, e.g. {p / 'results.json'}"
            if p.suffix == ""
            else f"{option} {p} is a folder; give a file path"
        )
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=p.parent, prefix=".eyeblink-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(
            f"cannot write {p} ({exc.strerror or exc}); choose another {option}"
        ) from None
    return p


@dataclass
class OutputPlan:
    """The files one command reads and writes; :meth:`check` before any work (see the module
    docstring)."""

    inputs: list[tuple[Path, str]] = field(default_factory=list)
    outputs: list[tuple[Path, str, str]] = field(default_factory=list)
    #: outputs that are checked against inputs and each other but not probed (written later by name,
    #: e.g. a session's optional files), as (path, what)
    quiet: list[tuple[Path, str]] = field(default_factory=list)

    def read(self, path: str | Path | None, what: str) -> OutputPlan:
        """``path`` is read by this command (a recording, a session file); ``None`` is ignored."""
        if path is not None and Path(path).exists():
            self.inputs.append((Path(path), what))
        return self

    def write(self, path: str | Path | None, option: str, *, probe: bool = True) -> OutputPlan:
        """``path`` (given with ``option``, e.g. ``--json``) will be written; ``probe``: check it
        is writable."""
        if path is None:
            return self
        if probe:
            self.outputs.append((Path(path), option, option))
        else:
            self.quiet.append((Path(path), option))
        return self

    def check(self) -> None:
        """Refuse an output that is an input or another output, a folder, or an unwritable place."""
        # file key -> (path, what, is an input)
        seen: dict[tuple[object, ...], tuple[Path, str, bool]] = {}
        for src, src_what in self.inputs:
            seen.setdefault(file_key(src), (src, src_what, True))
            seen.setdefault(("path", os.path.realpath(src)), (src, src_what, True))
        for out, what in [(p, what) for p, what, _ in self.outputs] + self.quiet:
            keys = {file_key(out), ("path", os.path.realpath(out))}
            hit = next((seen[k] for k in keys if k in seen), None)
            if hit is not None:
                other, other_what, is_input = hit
                if is_input:
                    which = (
                        other_what
                        if os.path.abspath(out) == os.path.abspath(other)
                        else f"{other_what} {other} (the same file under another name)"
                    )
                    raise OutputError(
                        f"{what} {out} is {which}: writing it would destroy that input; choose "
                        f"another path for {what.split()[0]}"
                    )
                raise OutputError(
                    f"{other_what} and {what} are the same file ({out}); give them different paths"
                )
            for k in keys:
                seen[k] = (out, what, False)
        for out, _what, option in self.outputs:
            check_writable(out, option)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, temporary: Path | None = None) -> Iterator[Path]:
    """A temporary path beside ``path`` to write the whole file to; flushed to disk (fsync) and
    renamed over ``path`` when the block ends without an exception, removed otherwise (``path``
    keeps what it had). The one mechanism of every whole-file output
    (:func:`eyeblink.outputs.export.write_atomic` is built on it).

    The temporary name (``temporary``, by default ``.STEM.tmp-PID-THREAD.SUFFIX``: unique to the
    writer, so two threads of one process never rename each other's file) keeps ``path``'s suffix,
    for writers that pick the format from it (PyAV, NumPy, TensorFlow); a rename replaces a symbolic
    link itself, never the file it points to. A Ctrl-C or SIGTERM while the file is flushed and
    renamed is raised once it is in place (:func:`eyeblink.stopping.held`), never between the two;
    while the block writes, a stop is raised at once (a long overlay video stops when asked), and
    the temporary file is removed.
    """
    from eyeblink import stopping

    p = Path(path)
    tmp = (
        temporary
        if temporary is not None
        else p.with_name(f".{p.stem}.tmp-{os.getpid()}-{threading.get_ident()}{p.suffix}")
    )
    try:
        yield tmp
        with stopping.held():
            # on disk before the rename: a crash then leaves the old file or the new, whole
            if tmp.is_file():
                # opened for writing: Windows flushes (FlushFileBuffers) only a handle with write
                # access
                fd = os.open(tmp, os.O_RDWR | getattr(os, "O_BINARY", 0))
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text(path: str | Path, text: str, option: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all; an ``OSError`` becomes
    :class:`OutputError`."""
    try:
        with atomic_path(path) as tmp:
            # "\n" on every OS: the same bytes on Windows
            tmp.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise OutputError(
            f"cannot write {path} ({exc.strerror or exc}); choose another {option}"
        ) from None


def read_utf8(
    path: Path, damaged: Callable[[Path, str], Exception], unreadable: type[Exception]
) -> str:
    """The text of the input file ``path``: one that is not UTF-8 raises ``damaged(path, "is not
    UTF-8 text")``, one that cannot be read raises ``unreadable`` (its message names the file and
    the reason)."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise damaged(path, "is not UTF-8 text") from None
    except OSError as exc:
        raise unreadable(f"cannot read {path} ({exc.strerror or exc}); check the file") from None
