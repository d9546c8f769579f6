"""The interface of a live output: :class:`Sink`, what the tap (:class:`eyeblink.runtime.live.publish.LiveTap`) calls.

A sink overrides the hooks it needs; the tap hands each row only to the sinks whose class overrides :meth:`row`
(likewise for the other per-item hooks), so a hook left out costs nothing per frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["HOOKS", "Sink"]

#: the per-item hooks the tap calls only on the sinks that override them
HOOKS = ("row", "state", "event", "blink")


class Sink:
    """One output of a live run: it sees every row, state change, gate event and blink, in frame order.

    Lifecycle, all in the session's process:

    * :meth:`from_config` (a class method): the sink a :class:`~eyeblink.config.LiveConfig` asks for, or None.
      Every module of :mod:`eyeblink.runtime.live.sinks` is asked, so an output is one new module there;
    * :meth:`check`: before any model loads (a missing extra, a port taken: one line naming the fix);
    * :meth:`open`: before the source connects; the tap's ``source``, ``stem``, ``eye_model`` and
      ``nominal_fps`` are known (``nominal_fps`` may be None until :meth:`connected`);
    * :meth:`connected`: the source is connected, its rate known, the capture not started;
    * :meth:`started`: after every sink is open, before the capture starts (a sink may wait for its consumer
      here; ``cancelled()`` says the run is being stopped);
    * per item, in the sink's thread (the watchdog's for a ``stale`` event), in frame order:
      :meth:`row` for every row written to ``frames.csv`` (``published`` False for a row past the latency bound,
      which is in the file but is no answer), :meth:`state` for each settled state change, :meth:`event` for
      each gate event (``line``: the line the gate socket sends, as a dict: a sink must not change it), and
      :meth:`blink` for each blink the detector settles. :meth:`row` runs outside the tap's lock, the others
      under it. A per-item hook is on the latency path: keep it to an append or a push, no I/O that can block;
    * :meth:`end`: the stream's last row is written (or the run stopped): the answers end, before the run's
      files are written;
    * :meth:`close`: at the end, after :meth:`end` (also when the run never started; twice is harmless).

    :attr:`summary_key`: the key of :meth:`summary` in the summary's ``live.publish`` (None: not there).
    :attr:`order`: sinks are called in ascending order.
    """

    order: int = 50
    summary_key: str | None = None
    #: a frame grab the loader serves (:class:`eyeblink.runtime.live.view.PreviewGrab`), for a sink that shows frames
    preview: Any = None

    @classmethod
    def from_config(cls, live: Any, *, announce: Callable[[str], None] | None = None) -> Sink | None:
        """The sink ``live`` (a :class:`~eyeblink.config.LiveConfig`) asks for; None: not asked for."""
        return None

    def check(self) -> None:
        """Before any model loads."""

    def open(self, tap: Any) -> None:
        """Before the source connects."""

    def connected(self, tap: Any) -> None:
        """The source is connected (``tap.nominal_fps`` is its rate)."""

    def started(self, cancelled: Callable[[], bool] | None = None) -> None:
        """Every sink is open; the capture starts once this returns."""

    def row(self, r: Any, published: bool) -> None:
        """One row as written (a :class:`~eyeblink.runtime.live.publish.LiveRow`)."""

    def state(self, ch: Any) -> None:
        """A settled state change (:class:`~eyeblink.signals.state.StateChange`)."""

    def event(self, ev: Any, line: dict[str, Any]) -> None:
        """A gate event (:class:`~eyeblink.runtime.live.publish.GateEvent`) and its line."""

    def blink(self, ev: Any) -> None:
        """A blink event the detector settled (:class:`~eyeblink.signals.blinks.BlinkEvent`)."""

    def end(self, reason: str | None = None) -> None:
        """The answers end (``reason``: the run's stop reason); :meth:`close` follows once the run is over."""

    def close(self, reason: str | None = None) -> None:
        """The run ended (``reason``: its stop reason)."""

    def summary(self) -> Any:
        """What goes under :attr:`summary_key` in ``summary.json``."""
        return None

    def overrides(self, hook: str) -> bool:
        """Whether this sink's class has its own ``hook`` (the tap skips it otherwise)."""
        return getattr(type(self), hook) is not getattr(Sink, hook)
