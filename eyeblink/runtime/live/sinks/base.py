"""The interface of a live output: :class:`Sink`, and the items the tap
(:class:`eyeblink.runtime.live.publish.LiveTap`) hands it.

A live output is one method, :meth:`Sink.put`, that receives the run's items in frame order, and
:meth:`Sink.close` at the end. The items are immutable values, one type per kind of news:

* :class:`Opened` -- the session opens, before its source connects (the source, the stem, the eye
  model, the rate if known, and the tap, whose live state a sink may read from a thread of its own);
* :class:`Ready` -- every output has taken :class:`Opened`; the capture starts once every output has
  taken this one (a sink may wait here for its consumer, until ``cancelled()`` says the run stops);
* :class:`Connected` -- the source is connected, its rate known, the capture not started;
* :class:`Row` -- every row written to ``frames.csv``, as it is written (``published`` False for a
  row past the latency bound: it is in the file but is no answer);
* :class:`StateChanged` -- each settled change of the eye's state;
* :class:`GateLine` -- each line of the gate socket (a state change and the events it implies,
  ``stale``, ``fresh``) with the line itself;
* :class:`Blink` -- each blink the detector settles (a row of ``blinks.csv``);
* :class:`Ended` -- the answers end (the stream's last row is written, or the run stopped), before
  the run's files are written; :meth:`Sink.close` follows once the run is over.

A sink says which item types it takes (:attr:`Sink.takes`; every one unless it says otherwise); the
tap hands it no other, so a sink that takes no :class:`Row` costs nothing per frame.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eyeblink.signals.blinks import BlinkEvent
    from eyeblink.signals.state import StateChange

__all__ = [
    "ITEMS",
    "Blink",
    "Connected",
    "Ended",
    "GateLine",
    "Item",
    "Opened",
    "Ready",
    "Row",
    "Sink",
    "StateChanged",
]


@dataclass(frozen=True, slots=True)
class Opened:
    """The session opens, before its source connects: the first item of a sink that takes it."""

    source: str  #: the source as given (a camera, a stream URL)
    stem: str  #: the session's name (its files' stem)
    eye_model: str  #: the eye model asked for (``auto``: the one chosen, in :class:`Connected`)
    nominal_fps: float | None  #: ``--fps`` or a camera's rate; None until :class:`Connected`
    timestamps: str | None  #: where the capture times come from (None: the source's clock)
    #: the :class:`~eyeblink.runtime.live.publish.LiveTap`: its live state (the eye's state, its
    #: freshness), ``lsl_time``, ``say``; a sink may keep it and read it from a thread of its own
    tap: Any


@dataclass(frozen=True, slots=True)
class Ready:
    """Every output has taken :class:`Opened`; the capture starts once every one has taken this."""

    cancelled: Callable[[], bool]  #: True once the run is being stopped (a sink waiting gives up)


@dataclass(frozen=True, slots=True)
class Connected:
    """The source is connected, its rate known; the capture has not started."""

    nominal_fps: float | None  #: the run's rate (``--fps`` or the source's)
    eye_model: str  #: the eye model the run uses


@dataclass(frozen=True, slots=True)
class Row:
    """One row as written to ``frames.csv``, in the sink's thread, outside the tap's lock."""

    row: Any  #: the :class:`~eyeblink.runtime.live.publish.LiveRow`
    published: bool  #: False past the latency bound (in the file, but no answer: no LSL sample)


@dataclass(frozen=True, slots=True)
class StateChanged:
    """A settled change of the eye's state."""

    change: StateChange


@dataclass(frozen=True, slots=True)
class GateLine:
    """One gate event (:class:`~eyeblink.runtime.live.publish.GateEvent`) and its line."""

    event: Any  #: the :class:`~eyeblink.runtime.live.publish.GateEvent`
    line: dict[str, Any]  #: the line the gate socket sends, as a dict: a sink must not change it


@dataclass(frozen=True, slots=True)
class Blink:
    """A blink the detector settled (one row of ``blinks.csv``)."""

    event: BlinkEvent


@dataclass(frozen=True, slots=True)
class Ended:
    """The answers end, before the run's files are written; :meth:`Sink.close` comes after them."""

    reason: str | None  #: the run's stop reason


#: one item of a live run
Item = Opened | Ready | Connected | Row | StateChanged | GateLine | Blink | Ended
#: every item type, in the order a run's first ones come
ITEMS: tuple[type, ...] = (Opened, Ready, Connected, Row, StateChanged, GateLine, Blink, Ended)


class Sink:
    """One output of a live run: :meth:`put` receives the run's items in frame order, :meth:`close`
    comes once at the end.

    * :meth:`from_config` (a class method) makes the sink a :class:`~eyeblink.config.LiveConfig`
      asks for, or None. Every module of :mod:`eyeblink.runtime.live.sinks` is asked, so an output
      is one new module there. It is called before any model loads: a sink that cannot work (a
      missing extra, a port taken) raises there, one line naming the fix;
    * :meth:`put` is called in the session's thread (the watchdog's for a ``stale`` line) with each
      item of the types in :attr:`takes`, in order: :class:`Opened`, :class:`Ready`,
      :class:`Connected`, then :class:`Row`, :class:`StateChanged`, :class:`GateLine` and
      :class:`Blink` in frame order, then :class:`Ended`. A :class:`Row` comes outside the tap's
      lock; :class:`StateChanged`, :class:`GateLine`, :class:`Blink` and :class:`Ended` under it.
      Rows, state changes, lines and blinks are on the latency path: keep their handling to an
      append or a push, and leave anything that can block (a disk, a network peer) to a thread of
      the sink's own;
    * :meth:`close` comes once the run is over, its files written (also when it never started).

    Declarations, not calls: :attr:`takes` (the item types the sink is handed), :attr:`order`
    (sinks are handed each item in ascending order), :attr:`summary_key` (the key of
    :meth:`summary` in ``summary.json``'s ``live.publish``; None: not there), :attr:`preview` (a
    frame grab the loader serves, for a sink that shows frames).
    """

    #: the item types this sink is handed (the tap hands it no other)
    takes: tuple[type, ...] = ITEMS
    order: int = 50
    summary_key: str | None = None
    #: a frame grab the loader serves (:class:`eyeblink.runtime.live.view.PreviewGrab`), for a sink
    #: that shows frames
    preview: Any = None

    @classmethod
    def from_config(
        cls, live: Any, *, announce: Callable[[str], None] | None = None
    ) -> Sink | None:
        """The sink ``live`` (a :class:`~eyeblink.config.LiveConfig`) asks for; None: not asked."""
        return None

    def put(self, item: Item) -> None:
        """One item of the run (one of the types in :attr:`takes`), in order."""
        raise NotImplementedError(f"{type(self).__name__}.put")

    def close(self, reason: str | None = None) -> None:
        """The run is over (``reason``: its stop reason); twice is harmless."""

    def summary(self) -> Any:
        """What goes under :attr:`summary_key` in ``summary.json``."""
        return None
