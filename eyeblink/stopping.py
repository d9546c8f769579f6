"""Stops: SIGINT (Ctrl-C) and SIGTERM (``timeout``, Slurm, ``docker stop``) end a command in order,
whenever they arrive.

:func:`install` is the first thing :func:`eyeblink.cli.main` does. From then on a stop signal is

* **recorded** (:func:`received`), so that it can never be lost: where Python discards an exception
  raised by a signal handler (an at-fork hook such as logging's lock release, a ``__del__``, a
  weakref callback such as an import's module lock), the next check point (:func:`check`: every
  frame, every poll of the sink, after every fork, at the end of ``main``) raises it again. Python
  says nothing of that discarded stop (:func:`_quiet_unraisable`): it is not an error, and the
  command's one line says it was stopped;
* **raised** as :class:`Stopped` (a :class:`KeyboardInterrupt`) at once, except inside :func:`held`
  blocks (a session's output files being created, its summary being written: raised when the block
  ends) and after ``main`` has returned (the process is exiting anyway; its outputs are complete).

Forks happen with both signals blocked (:func:`blocked`): a signal that arrives meanwhile waits
until the parent unblocks them, then it stops the parent; the child starts with them blocked and
ignores them before unblocking (:func:`child_ignores_stops`), so it never runs the parent's handler.

Conventions: SIGTERM is always handled. A SIGINT that the process inherited as *ignored* (a job
started in the background by a non-interactive shell, ``cmd &`` in a script, or under ``nohup``)
stays ignored, as Unix shells do for background jobs: such a run is stopped with SIGTERM. Exit
status 130 for both signals.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from eyeblink import host

#: SIGINT (Ctrl-C), SIGTERM, and on Windows SIGBREAK (Ctrl-Break, which a console sends where Ctrl-C
#: is taken)
STOP_SIGNALS: tuple[int, ...] = (
    signal.SIGINT,
    signal.SIGTERM,
    *(() if host.ctrl_break_signal() is None else (host.ctrl_break_signal(),)),
)

#: The exit status of a stopped command (128 + SIGINT), for SIGINT and SIGTERM alike.
STOPPED_EXIT = 130

_received: int | None = None  # the first stop signal since install()
_hold = 0  # depth of held() blocks
_raising = False  # True between install() and the end of main: the handler raises Stopped
_raised = False  # a Stopped was raised: the handler raises no second one (check points still do)


class Stopped(KeyboardInterrupt):
    """A stop asked by a signal: caught wherever Ctrl-C's :class:`KeyboardInterrupt` is."""

    def __init__(self, signum: int) -> None:
        super().__init__(reason(signum))
        self.signum = signum


def reason(signum: int | BaseException | None = None) -> str:
    """The summary's ``error`` for a stop: ``stopped by SIGTERM``, ``interrupted by Ctrl-C
    (SIGINT)``.

    ``signum``: a signal number, an exception (a :class:`Stopped` names its signal; any other
    :class:`KeyboardInterrupt` is Ctrl-C), or ``None`` (the signal recorded, else Ctrl-C)."""
    if isinstance(signum, BaseException):
        signum = getattr(signum, "signum", None)
    if signum is None:
        signum = _received
    if signum == signal.SIGTERM:
        return "stopped by SIGTERM"
    if signum is not None and signum == host.ctrl_break_signal():
        return "interrupted by Ctrl-Break (SIGBREAK)"
    return "interrupted by Ctrl-C (SIGINT)"


def message(exc: BaseException | None = None) -> str:
    """The stderr line's text for a stop: ``interrupted (SIGTERM); ...``."""
    signum = getattr(exc, "signum", None) or _received
    name = (
        "SIGTERM"
        if signum == signal.SIGTERM
        else "Ctrl-Break, SIGBREAK"
        if signum is not None and signum == host.ctrl_break_signal()
        else "Ctrl-C, SIGINT"
    )
    return f"interrupted ({name}); rows computed so far are on disk"


def on_signal(signum: int, frame: FrameType | None) -> None:
    """The stop handler itself, for a handler of its own that hands a signal on (a live run's second
    Ctrl-C): recorded, raised at once outside :class:`held` blocks, else when the block ends."""
    _on_signal(signum, frame)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    global _received, _raised
    if _received is None:
        _received = signum
    if _raising and not _hold and not _raised:  # once: a second signal never interrupts the drain
        _raised = True
        raise Stopped(_received)


def _quiet_unraisable(previous: Callable[[Any], object]) -> Callable[[Any], object]:
    """An unraisable-exception hook (:data:`sys.unraisablehook`) that says nothing of a discarded
    :class:`Stopped` (it was recorded, and the next check point raises it) and hands every other
    exception to ``previous``."""

    def hook(unraisable: Any) -> object:
        if isinstance(unraisable.exc_value, Stopped):
            return None
        return previous(unraisable)

    return hook


def install() -> Callable[[], None]:
    """Handle SIGTERM, and SIGINT unless it was inherited ignored (see the module docstring);
    returns a function that puts the previous handlers back (for ``main`` called inside another
    program, tests)."""
    global _received, _raising, _raised
    _received = None
    _raised = False
    # only the main thread may set handlers
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    saved: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        old = signal.getsignal(sig)
        if sig == signal.SIGINT and old == signal.SIG_IGN:
            continue  # a background job's ignored Ctrl-C stays ignored
        saved[sig] = old
        signal.signal(sig, _on_signal)
    previous_hook = sys.unraisablehook
    quiet = _quiet_unraisable(previous_hook)
    sys.unraisablehook = quiet
    _raising = True

    def restore() -> None:
        global _raising, _received
        # a later run in this process (the Python API) starts afresh
        _raising, _received = False, None
        for sig, old in saved.items():
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        if sys.unraisablehook is quiet:
            sys.unraisablehook = previous_hook

    return restore


def finished() -> None:
    """``main`` has returned: from now on a stop signal is only recorded (the outputs are complete
    and the process exits with the status it has)."""
    global _raising
    _raising = False


def received() -> int | None:
    """The stop signal received since :func:`install`, while ``main`` runs (``None``: none, or no
    ``main``)."""
    return _received if _raising else None


def check() -> None:
    """Raise :class:`Stopped` if a stop signal was received (outside :func:`held` blocks); a
    check point."""
    global _raised
    if _received is not None and _raising and not _hold:
        _raised = True
        raise Stopped(_received)


class held:
    """A stop that arrives inside the block is recorded and raised when the block ends, or at
    :meth:`release` (an output file being created, its summary written: whole or not at all). When
    the block ends with an exception, that one goes on (the stop is raised at the next check point).
    """

    def __init__(self) -> None:
        global _hold
        # signal handlers run in the main thread: a hold elsewhere (a live session's thread) changes
        # nothing
        self._on = threading.current_thread() is threading.main_thread()
        if self._on:
            _hold += 1

    def release(self, *, raise_stop: bool = True) -> None:
        """End the hold early (idempotent): a stop that arrived meanwhile is raised now."""
        global _hold
        if self._on:
            self._on = False
            _hold -= 1
            if raise_stop:
                check()

    def __enter__(self) -> held:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.release(raise_stop=exc_type is None)


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """SIGINT and SIGTERM blocked in this thread and held (:class:`held`) for the block: a fork (the
    child inherits the mask and unblocks it in :func:`child_ignores_stops`). A signal that arrives
    meanwhile (another thread of this process may take it: a queue's feeder, the log listener) is
    raised when the block ends."""
    with held():
        old = host.block_signals(STOP_SIGNALS)  # None on Windows: no signal mask (and no fork)
        try:
            yield
        finally:
            host.restore_signal_mask(old)


def child_ignores_stops() -> None:
    """In a forked child: ignore SIGINT and SIGTERM (the parent decides how to stop), then unblock
    them (a signal pending since the fork is discarded, not run with the parent's handler)."""
    global _raising
    _raising = False
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    host.unblock_signals(STOP_SIGNALS)


def default_child_signals() -> None:
    """``preexec_fn`` for a child program that must start with SIGINT and SIGTERM at their defaults
    and unblocked, whatever this process inherited (e.g. a test suite started in the background)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    host.unblock_signals(STOP_SIGNALS)


__all__ = [
    "STOPPED_EXIT",
    "STOP_SIGNALS",
    "Stopped",
    "blocked",
    "check",
    "child_ignores_stops",
    "default_child_signals",
    "finished",
    "held",
    "install",
    "message",
    "on_signal",
    "reason",
    "received",
]
