"""What every child process of a multiprocess run does: notice a stop, hand messages on, report its
failure.

``_ChildRole`` is the base of the roles (:mod:`eyeblink.runtime.procs.roles`); its methods run in
the loaders, the workers and the accelerator stage, each started from the parent with the run's
state (:mod:`eyeblink.runtime.procs.processes`).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eyeblink import host
from eyeblink.errors import EyeblinkError
from eyeblink.runtime.procs.queues import POLL_S, get_until_stopped, put_until_stopped

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.config import ParallelConfig, RunConfig
    from eyeblink.runtime.procs.shm import FrameRing, RingSpec
    from eyeblink.sources.files import FrameSource

_POLL_S = POLL_S  # how often a blocked get/put wakes up to check the stop event and its peers


class _Stop(Exception):
    """Raised inside a child when the run is being stopped (or the parent vanished)."""


class _RunState:
    """The run's state the roles read, as :class:`eyeblink.runtime.procs.parallel._Run` sets it
    (declarations for the type checker: the values are the run's own)."""

    pipe: Any
    cfg: RunConfig
    requested: RunConfig
    par: ParallelConfig
    source: FrameSource
    W: int
    dealt: int
    C: int
    B: int
    fault: tuple[str, int] | None
    spec: RingSpec | None
    parent_pid: int
    ring: FrameRing | None
    preview: Any
    work_qs: list[Any]
    post_qs: list[Any]
    free_q: Any
    free_qs: list[Any]
    out_q: Any
    stop: Any
    procs: list[Any]
    loader: Any
    loaders: list[Any]
    workers: list[Any]
    accel_procs: list[Any]
    accel_infos: list[dict[str, Any]]
    accelerated: bool
    n_stage: int
    n_done: int
    n_loaders: int
    plan: Any
    window: int
    written: Any
    late_s: float | None
    latencies: Any
    _reported: set[int]
    _parts: dict[int, tuple[Any, ...]]
    _capture: Callable[[np.ndarray], None] | None
    # the run's methods one role calls in another's module
    late_from: Callable[[], int]
    _dest: Callable[[int], Any]
    _end_of_input: Callable[[], None]
    _release: Callable[[np.ndarray], None]
    _first_owned_from: Callable[[int, int], int]
    _loader_pid: Callable[[int], int | None]
    _merge_part: Callable[[tuple[Any, ...]], tuple[Any, ...] | None]


class _ChildRole(_RunState):
    """The child side every role shares (a mixin of
    :class:`eyeblink.runtime.procs.parallel._Run`)."""

    def _child_setup(self) -> None:
        """A role's own set-up as its child starts (live mode: the switch interval, the
        priority)."""
        # SIGINT and SIGTERM to the whole group (Ctrl-C, Slurm) are the parent's to handle (it
        # drains): every child ignores them from its start (eyeblink.runtime.procs.processes); a
        # child that does not stop when asked is killed by _shutdown; one whose parent died stops at
        # its next queue poll (or at once, where the OS kills it)

    def _stopping(self) -> bool:
        """Whether this child should stop: the run's stop event is set, or the parent is gone."""
        return self.stop.is_set() or not host.parent_alive()

    def _get(self, q: Any) -> Any:
        return get_until_stopped(q, self._stopping, _Stop)

    def _put(self, q: Any, item: Any) -> None:
        put_until_stopped(q, item, self._stopping, _Stop)

    def _report(self, role: str, wid: int, frame: int, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        line = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        user_error = exc if isinstance(exc, EyeblinkError) else None
        with contextlib.suppress(_Stop):
            self._put(self.out_q, ("error", role, wid, frame, line, tb, user_error))

    def _check_stop(self) -> None:
        """Raise :class:`_Stop` in a child when the run is being stopped or the parent is gone."""
        if self._stopping():
            raise _Stop

    def _queues(self) -> tuple[Any, ...]:
        return (*self.work_qs, *self.post_qs, self.free_q, self.out_q)

    def _quit(self) -> None:
        if self._stopping():
            for q in self._queues():
                if q is not None:
                    q.cancel_join_thread()
