"""The one place that starts a run's processes: the start method, and what every child does before
its work.

A multiprocess run (loaders, workers, the accelerator stage, the file pool) starts its children
here, with the start method of the platform or the one asked for (``--start-method``,
``start_method=`` in the API: the run's ``ParallelConfig.start_method``, handed to the pipeline that
starts the processes, never kept in a module global; or the environment variable
:data:`START_METHOD_ENV`, which a test or CI uses to force one), resolved and checked by
:func:`resolve_start_method`:

* ``spawn``: a fresh interpreter per child, its work and settings handed over pickled. The only
  method on Windows, and macOS's default: forking a process that has started threads (LiteRT's
  thread pool, FFmpeg's decoder threads, the view's and the metrics' servers) is unsafe there.
* ``forkserver`` (Linux, macOS): children forked from a small server process started once, which has
  loaded the pipeline's modules (:data:`PRELOAD`) but started no threads.
* ``fork`` (Linux, macOS): a copy of the loaded parent; the quickest start, and the models' pages
  are shared.
* ``auto`` (the default): ``fork`` on Linux (see :func:`auto_method` for why), ``spawn`` everywhere
  else.

Whatever the method, a child starts the same way (:func:`_child_main`): SIGINT and SIGTERM are the
parent's to handle (ignored here before anything heavy is imported), its log records go to the
parent's log queue, OpenCV runs single-threaded (one process per core already), and a child whose
parent dies is killed at once where the OS can do it, else stops at its next queue poll
(:func:`eyeblink.host.parent_alive`). Under ``spawn`` and ``forkserver`` the target and its
arguments are pickled in the parent (``(function, args)``, a bound method pickles its object: see
``_Run.__getstate__``) and unpickled in the child after that set-up.
"""

from __future__ import annotations

import ast
import logging
import logging.handlers
import multiprocessing as mp
import os
import pickle
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

from eyeblink import host
from eyeblink.errors import ConfigError

__all__ = [
    "START_METHODS",
    "START_METHOD_ENV",
    "ChildTarget",
    "auto_method",
    "check_main_guard",
    "check_start_method",
    "context",
    "resolve_start_method",
    "start_children",
    "unguarded_main",
]

#: what ``--start-method`` accepts
START_METHODS = ("auto", "spawn", "forkserver", "fork")
#: the environment variable that sets the start method when no option does (``auto`` when unset)
START_METHOD_ENV = "EYEBLINK_START_METHOD"
#: the modules a forkserver loads once, so that each child it forks starts with them imported
PRELOAD = [
    "eyeblink.runtime.procs.parallel",
    "eyeblink.runtime.live.pipeline",
    "eyeblink.runtime.pipeline",
    "numpy",
    "av",
]

#: one target of :func:`start_children`: ``(function, args, process name)``
ChildTarget = tuple[Callable[..., Any], tuple[Any, ...], str]


def auto_method() -> str:
    """The start method ``auto`` means on this platform.

    Linux: ``fork``. Measured on a 2-core AMD EPYC (the speed page, "Start methods"): a run's first
    row comes ~0.5 s sooner than under ``spawn`` (each spawned child imports NumPy, PyAV and LiteRT
    and loads its models itself) and the forked workers share the loaded models' pages; the rows are
    identical and the frame rate after start-up the same. The threads a Linux parent has when it
    forks (the log listener, the view's and metrics' servers) are never touched in the children,
    which run only their role. Elsewhere ``spawn``: Windows has nothing else, and on macOS forking a
    threaded process is unsafe (its system libraries are not fork-safe).
    """
    return "fork" if host.is_linux() else "spawn"


def resolve_start_method(asked: str | None = None) -> str:
    """The start method a run uses, checked: ``asked`` (the run's ``ParallelConfig.start_method``:
    ``--start-method``, the API's ``start_method=``), else :data:`START_METHOD_ENV`, else ``auto``;
    ``auto`` resolved for this platform. The one check of a start method: a name not in
    :data:`START_METHODS`, or a method this platform lacks, is a one-line error."""
    source = "--start-method"
    if asked is None or asked == "":
        asked = os.environ.get(START_METHOD_ENV) or "auto"
        source = START_METHOD_ENV if os.environ.get(START_METHOD_ENV) else source
    method = check_start_method(asked, source)
    if method == "auto":
        return auto_method()
    available = host.start_methods_available()
    if method not in available:
        raise ConfigError(
            f"{source} {method} is not available on this platform ({host.platform_name()}); "
            f"choose one of {', '.join(('auto', *available))}"
        )
    return method


def check_start_method(asked: str, source: str = "--start-method") -> str:
    """``asked`` as one of :data:`START_METHODS` (case and spaces aside), else a one-line error
    naming ``source``; whether this platform offers it is :func:`resolve_start_method`'s check, made
    where the processes start (a batch task's node)."""
    method = str(asked).strip().lower()
    if method not in START_METHODS:
        raise ConfigError(f"{source} must be one of {', '.join(START_METHODS)}, got {asked!r}")
    return method


def context(method: str) -> Any:
    """The :mod:`multiprocessing` context of a resolved start method (a forkserver preloads
    :data:`PRELOAD`)."""
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _log_handoff() -> tuple[Any, int] | None:
    """The parent's log queue and the ``eyeblink`` logger's level
    (:func:`eyeblink.runtime.procs.logs.setup_logging`), for a child that does not inherit the
    parent's handlers; None when the parent logs without a queue."""
    logger = logging.getLogger("eyeblink")
    for handler in logger.handlers:
        if isinstance(handler, logging.handlers.QueueHandler):
            return handler.queue, logger.level
    return None


def _child_main(method: str, name: str, payload: Any, logs: tuple[Any, int] | None) -> None:
    """What every child runs: the common set-up, then its target (unpickled here unless forked)."""
    from eyeblink import stopping

    # first: a Ctrl-C to the whole group (or the console, on Windows) while this child imports is
    # the parent's
    stopping.child_ignores_stops()

    host.bind_to_parent()
    if not host.parent_alive():  # it died before this child could ask to die with it
        os._exit(1)
    if method != "fork":
        if logs is not None:
            queue, level = logs
            logger = logging.getLogger("eyeblink")
            logger.handlers[:] = [logging.handlers.QueueHandler(queue)]
            logger.setLevel(level)
            logger.propagate = False
        # the pipeline's modules are imported here, after the set-up above
        fn, args = pickle.loads(payload)
    else:
        fn, args = payload
    cv2 = sys.modules.get("cv2")
    if cv2 is None and method != "fork":
        import cv2  # the roles use it: single-threaded from the start (one process per core)
    if cv2 is not None:
        cv2.setNumThreads(1)
    from eyeblink.runtime.procs.profiling import profiled

    profiled(fn, name)(*args)


class _Pickled:
    """A child's target and arguments, pickled as bytes while the child starts (when multiprocessing
    lets its queues, events and shared values be pickled) and unpickled by the child only after its
    set-up."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing.reduction import ForkingPickler

        return bytes, (bytes(ForkingPickler.dumps(self.obj, pickle.HIGHEST_PROTOCOL)),)


@contextmanager
def _cv2_single_threaded() -> Iterator[None]:
    """OpenCV's thread pool does not survive a fork (a child that touches it deadlocks): fork with
    the pool torn down, so the children run cv2 single-threaded; restored in the parent afterwards.
    """
    cv2 = sys.modules.get("cv2")
    threads = cv2.getNumThreads() if cv2 is not None else None
    if cv2 is not None:
        cv2.setNumThreads(1)
    try:
        yield
    finally:
        if cv2 is not None and threads is not None:
            cv2.setNumThreads(threads)


def _is_main_test(test: ast.expr) -> bool:
    """Whether an ``if`` tests ``__name__ == "__main__"`` (either way round)."""
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
    ):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
    )


def unguarded_main(method: str = "spawn") -> str | None:
    """The one-line error for a script that starts a run's processes from its top level outside an
    ``if __name__ == "__main__":`` block, else None.

    ``spawn`` and ``forkserver`` start each child by running the main script again (as
    ``__mp_main__``; :mod:`multiprocessing.spawn`): a call made at the script's top level would run
    again in every child, which Python stops there, and the child dies before it can say why.
    Checked as the standard library decides what it runs again: nothing for ``python -m package`` (a
    ``__main__`` module), an interactive session or a notebook (no file); a script's file otherwise.
    The call is found on this thread's stack (the frame of the script's top level) and its line is
    looked up in the script's own ``if __name__ == "__main__":`` blocks."""
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if spec_name is not None:
        if spec_name == "__main__" or spec_name.endswith(".__main__"):
            return None
    elif not path or os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"
    ):
        frame = frame.f_back
    if frame is None or not path:
        # not called from the script's top level (a thread, a callback): nothing runs again
        return None
    line = frame.f_lineno
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and _is_main_test(node.test)
            and node.end_lineno is not None
            and node.body[0].lineno <= line <= node.end_lineno
        ):
            return None
    return (
        f"{os.path.basename(path)} line {line} starts eyeblink's worker processes from the "
        "script's top level; "
        f"with the '{method}' start method each worker runs the script again, so put the "
        'script\'s work under `if __name__ == "__main__":`'
    )


def check_main_guard(method: str) -> None:
    """Raise :func:`unguarded_main`'s error (a :class:`~eyeblink.errors.ConfigError`) where
    ``method`` runs the main script again in each child and the script's call is not guarded; the
    API checks it before it writes anything, :func:`start_children` before every start."""
    if method != "fork":
        problem = unguarded_main(method)
        if problem is not None:
            raise ConfigError(problem)


def start_children(
    ctx: Any, targets: Sequence[ChildTarget], started: list[Any] | None = None
) -> list[Any]:
    """Start one daemon child per ``(function, args, name)`` in ``ctx`` (:func:`context`); each is
    appended to ``started`` as soon as it runs (so that a failure midway leaves no child untracked).
    SIGINT and SIGTERM are blocked meanwhile: a stop then is handled after the start by the parent
    alone (never inside an at-fork hook, where Python discards it, nor by a child before its
    set-up)."""
    from eyeblink import stopping

    method = ctx.get_start_method()
    check_main_guard(method)
    logs = None if method == "fork" else _log_handoff()
    procs = []
    for fn, args, name in targets:
        payload: Any = (fn, args) if method == "fork" else _Pickled((fn, args))
        procs.append(
            ctx.Process(
                target=_child_main, args=(method, name, payload, logs), name=name, daemon=True
            )
        )
    with _cv2_single_threaded(), stopping.blocked():
        for p in procs:
            p.start()
            if started is not None:
                started.append(p)
    return procs
