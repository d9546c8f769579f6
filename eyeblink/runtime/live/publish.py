"""What a live session tells other programs while it runs: the eye's settled state, its freshness,
and the outputs it is handed to (Lab Streaming Layer outlets, the gate socket, the browser view, the
API).

The live sink (:class:`eyeblink.runtime.live.pipeline._LiveRun`) writes rows and blink events in
frame order; a :class:`LiveTap` sees each of them right after it is written and hands it on to the
run's sinks as items (:mod:`eyeblink.runtime.live.sinks.base`: the row, each settled state change,
each gate line, each blink, and the session's own moments: opened, ready, connected, ended), each
sink only the item types it takes, through its one method ``put(item)``, and ``close(reason)`` at
the end. The sinks, each a class of that interface in :mod:`eyeblink.runtime.live.sinks`, are
chosen by the config:

* :class:`~eyeblink.runtime.live.sinks.lsl.LslSink` (``--lsl``, extra ``lsl``): one per-frame sample
  stream and one marker stream, described as the XDF conventions ask (channel labels, units, types,
  the source, eyeblink's version), so LabRecorder records them as they are;
* :class:`~eyeblink.runtime.live.sinks.gate.GateSink` (``--gate-port``): JSON lines on a TCP socket
  on 127.0.0.1, one per state change (and per derived event), for programs in any language;
* :class:`~eyeblink.runtime.live.sinks.view.ViewOutput` (``--view``): the session's page in a
  browser;
* :class:`~eyeblink.runtime.live.sinks.queue.QueueSink`: the Python API's callbacks and iterator
  (:func:`eyeblink.live`).

The eye's state is **not** decided here. The blink detector owns the state machine
(:mod:`eyeblink.signals.state`, :attr:`BlinkDetector.state`); the tap reads it after every analysed
frame the detector has judged up to the newest (never while it re-judges its warm-up: those frames
are in the past), lets a :class:`~eyeblink.signals.state.StateDebouncer` settle it (a state counts
once it has lasted ``settle_ms``, ``no_face`` ``face_lost_ms``; a dropped frame is no evidence), and
:class:`GateTracker` adds the two timed facts a rig asks for: ``open_stable`` (``open`` held for
``stable_ms`` of capture time) and ``prolonged_closure`` (the eye has not been back to ``open`` for
``blinks.max_blink_ms`` since the event began: the detector's own line between a blink and a
prolonged closure, said as soon as it is crossed instead of when the event ends).

Freshness: every answer says how old it is (``age_ms``: now minus the arrival of the newest analysed
frame behind it). No ``open`` is ever reported about a frame older than ``max_age_ms``: when the
newest analysed frame is that old (a pipeline that lags, a camera that froze with its connection
open) the tap says ``stale`` at once (a watchdog thread checks every quarter of the bound), holds
``open_stable`` back and forgets the evidence it had; the first fresh frame again says ``fresh``,
and ``open`` must then be held ``stable_ms`` of fresh frames anew.

Latency bound (``--max-latency-ms`` with ``--on-overload drop``): a row that reaches the tap more
than the bound after its frame arrived (the sink held up under overload) is in ``frames.csv`` but
gets no LSL sample and is no evidence of the state, and no state line older than the bound is sent;
``late_rows`` counts those rows.

Clocks: a frame's capture time (``timestamp_s`` in ``frames.csv``, the source's own clock) is mapped
onto LSL's clock (:func:`pylsl.local_clock`, ``CLOCK_MONOTONIC`` on Linux, the clock
``time.perf_counter`` and ``time.monotonic`` read too) once, at the first frame: ``lsl_time =
timestamp_s + offset`` with ``offset`` = the first frame's arrival on that clock minus its capture
time. Every sample and marker then carries its frame's own capture time on LSL's clock, so the
samples are spaced exactly as in ``frames.csv``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from eyeblink.outputs import columns as _columns
from eyeblink.outputs.columns import FRAME_TABLE
from eyeblink.runtime.live.sinks import (
    ITEMS,
    Blink,
    Connected,
    Ended,
    GateLine,
    Opened,
    Ready,
    Row,
    Sink,
    StateChanged,
    sinks_from_config,
)
from eyeblink.runtime.live.sinks.gate import GATE_EVENTS, MAX_CLIENT_BACKLOG, GateServer, GateSink
from eyeblink.runtime.live.sinks.gate import finite as _finite
from eyeblink.runtime.live.sinks.lsl import LSL_CHANNELS, LslOutlets, LslSink
from eyeblink.signals.state import EyeState, StateChange, StateDebouncer

if TYPE_CHECKING:
    from eyeblink.signals.blinks import BlinkDetector, BlinkEvent

__all__ = [
    "GATE_EVENTS",
    "LSL_CHANNELS",
    "MAX_CLIENT_BACKLOG",
    "GateEvent",
    "GateServer",
    "GateTracker",
    "LiveRow",
    "LiveTap",
    "LslOutlets",
]

log = logging.getLogger("eyeblink.live")


#: One row of a live session as written to ``frames.csv`` (empty cells are NaN), plus ``dropped``,
#: its arrival time and when it was handed on (``age_ms``): derived from the frame columns' one
#: declaration (:data:`eyeblink.outputs.columns.FRAME_TABLE`), a field per column in file order.
LiveRow = FRAME_TABLE.live_row_type


@dataclass(frozen=True)
class GateEvent:
    """One line of the gate socket and one LSL marker: ``event`` at ``frame`` (capture time
    ``timestamp_s``)."""

    event: str
    frame: int
    timestamp_s: float
    state: EyeState
    previous: EyeState | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def marker(self) -> str:
        """The LSL marker string: ``state:<state>`` for a state change, else the event's name."""
        return f"state:{self.state.value}" if self.event == "state" else self.event


class GateTracker:
    """The current eye state (from the detector's :class:`StateChange` records) and the events it
    implies.

    Not a state machine of its own: :meth:`change` takes the detector's changes as they are;
    :meth:`tick` only measures time on the capture clock: ``open_stable`` once ``open`` has been
    held for ``stable_ms`` (once per stay), ``prolonged_closure`` once an event (from leaving
    ``open`` for ``closing`` or ``closed`` until ``open`` again) has lasted ``max_blink_ms``, the
    detector's own bound of a blink (once per event).
    """

    def __init__(self, stable_ms: float = 200.0, max_blink_ms: float = 1000.0) -> None:
        self.stable_s = stable_ms / 1000.0
        self.max_blink_s = max_blink_ms / 1000.0
        self.state = EyeState.NO_FACE
        self.since_frame = 0
        # capture time the current state began (NaN: before the first change)
        self.since_s = math.nan
        # capture time the current event (closing .. open) began (NaN: none)
        self.event_s = math.nan
        self.last_frame = -1
        self.last_s = math.nan
        self._stable_sent = False
        self._prolonged_sent = False

    def change(self, ch: StateChange) -> list[GateEvent]:
        """The events of one detector state change (``state`` first, then the named ones)."""
        self.state, self.since_frame, self.since_s, self._stable_sent = (
            ch.state,
            ch.frame,
            ch.timestamp_s,
            False,
        )
        ev = [GateEvent("state", ch.frame, ch.timestamp_s, ch.state, ch.previous)]
        closing = (EyeState.CLOSING, EyeState.CLOSED)
        if ch.previous == EyeState.OPEN and ch.state in closing:
            self.event_s, self._prolonged_sent = ch.timestamp_s, False
            ev.append(GateEvent("blink_start", ch.frame, ch.timestamp_s, ch.state, ch.previous))
        elif ch.state == EyeState.OPEN and ch.previous in (*closing, EyeState.REOPENING):
            self.event_s = math.nan
            ev.append(GateEvent("blink_end", ch.frame, ch.timestamp_s, ch.state, ch.previous))
        if ch.state == EyeState.NO_FACE and ch.previous != EyeState.NO_FACE:
            self.event_s = math.nan  # the event is no longer measured
            ev.append(GateEvent("face_lost", ch.frame, ch.timestamp_s, ch.state, ch.previous))
        elif ch.previous == EyeState.NO_FACE and ch.state != EyeState.NO_FACE:
            ev.append(GateEvent("face_found", ch.frame, ch.timestamp_s, ch.state, ch.previous))
        return ev

    def tick(self, frame: int, t: float) -> list[GateEvent]:
        """Frame ``frame`` (capture time ``t``) was written: ``open_stable`` /
        ``prolonged_closure`` when due."""
        self.last_frame, self.last_s = frame, t
        out: list[GateEvent] = []
        if (
            self.state == EyeState.OPEN
            and not self._stable_sent
            and t - self.since_s >= self.stable_s - 1e-9
        ):
            self._stable_sent = True
            out.append(
                GateEvent(
                    "open_stable",
                    frame,
                    t,
                    self.state,
                    None,
                    {"since_s": self.since_s, "held_ms": (t - self.since_s) * 1000.0},
                )
            )
        if (
            self.state in (EyeState.CLOSING, EyeState.CLOSED, EyeState.REOPENING)
            and not self._prolonged_sent
            and t - self.event_s >= self.max_blink_s - 1e-9
        ):
            self._prolonged_sent = True
            out.append(
                GateEvent(
                    "prolonged_closure",
                    frame,
                    t,
                    self.state,
                    None,
                    {"since_s": self.event_s, "held_ms": (t - self.event_s) * 1000.0},
                )
            )
        return out

    def restart(self, frame: int, t: float) -> None:
        """Fresh frames again after a stall: ``open`` must be held ``stable_ms`` of them anew
        (open_stable again)."""
        self.since_frame, self.since_s, self._stable_sent = frame, t, False
        self.last_frame, self.last_s = frame, t

    def held_s(self) -> float:
        """How long (capture time) the current state has been held at the last written frame (0
        if unknown)."""
        d = self.last_s - self.since_s
        return d if d >= 0 else 0.0

    def is_open_for(self, stable_ms: float) -> bool:
        return self.state == EyeState.OPEN and self.held_s() >= stable_ms / 1000.0 - 1e-9


def _never() -> bool:
    """Never cancelled (a :class:`~eyeblink.runtime.live.sinks.base.Ready` without a run's own)."""
    return False


class LiveTap:
    """Sees every written row, blink event and state change of a live session, in frame order,
    decides the eye's settled state and its freshness, and hands each on to its sinks
    (:mod:`eyeblink.runtime.live.sinks`: the gate socket, the LSL outlets, the browser view, the
    API), each with its age; refuses stale answers.

    Lifecycle: made with its sinks before any model loads (a sink that cannot work raises then),
    :meth:`open` before the source connects (outlets and socket exist before the first frame; the
    sinks' :class:`~eyeblink.runtime.live.sinks.base.Opened` and ``Ready``), :meth:`connected` once
    its rate is known, :meth:`arrivals` per batch of rows, :meth:`row` and :meth:`blink` from the
    writer, :meth:`end` as the answers end, :meth:`close` at the end.
    """

    def __init__(
        self,
        *,
        lsl: bool = False,
        lsl_name: str = "eyeblink",
        lsl_wait_s: float = 0.0,
        gate_port: int | None = None,
        stable_ms: float = 200.0,
        max_blink_ms: float = 1000.0,
        max_age_ms: float = 50.0,
        settle_ms: float = 10.0,
        face_lost_ms: float = 200.0,
        max_latency_ms: float | None = None,
        announce: Callable[[str], None] | None = None,
        sinks: Sequence[Sink] = (),
    ) -> None:
        self.tracker = GateTracker(stable_ms, max_blink_ms)
        self.debouncer = StateDebouncer(settle_ms, face_lost_ms)
        self.max_age_s = max_age_ms / 1000.0
        # the latency bound (--max-latency-ms with --on-overload drop; None: none): a row written
        # later than this after its frame arrived is not published (no LSL sample, no evidence of
        # the state); counted
        self.max_latency_s = max_latency_ms / 1000.0 if max_latency_ms is not None else None
        self.late_rows = 0
        #: rows of the frames received before the capture started (a stream's rate probe): past the
        #: bound as they are written, not published either, but counted apart: the run did not fall
        #: behind for them
        self.startup_frames = 0
        self.startup_rows = 0
        self.announce = announce
        self.detector: BlinkDetector | None = None
        self.source = ""
        self.stem = ""
        self.eye_model = ""
        self.nominal_fps: float | None = None  # --fps or the source's rate, once known
        self.timestamps: str | None = None
        self._arrival: OrderedDict[int, float] = OrderedDict()
        # the rows' cells as a LiveRow (the table of this run)
        self._live_row = _columns.FRAME_TABLE.live_row
        self._offset: float | None = None  # lsl_time - capture time (set at the first frame)
        # LSL's clock minus perf_counter (set by the LSL sink with its outlets)
        self._pc_to_lsl = 0.0
        self.frames = 0
        self.events = 0
        self.stale_events = 0
        #: the first answer (an event about a fresh frame, after the detector's warm-up: see
        #: :attr:`answering`) and when it was sent after the first row's frame arrived
        self.first_answer_frame: int | None = None
        self.first_answer_ms = math.nan
        self._first_arrival = math.nan
        #: rows too old to be evidence before the first answer (the start-up's backlog), and when
        #: the last of them was written after the first frame arrived (the start-up caught up then)
        self.startup_old_rows = 0
        self.startup_caught_up_ms = math.nan
        self.newest_frame = -1  # the newest row written (a gap row included) and its capture time
        self.newest_s = math.nan
        # the newest analysed (not dropped) frame: what every answer is about, and how fresh it is
        self.fresh_frame = -1
        self.fresh_s = math.nan
        self.fresh_arrival = math.nan
        self.stale = False
        # the sink's rows and the watchdog's stale lines, one at a time, in order
        self._lock = threading.RLock()
        self._watch: threading.Thread | None = None
        self._ended = threading.Event()
        self._closed = False
        # set once the outlets and the socket exist (before the source connects)
        self.opened = threading.Event()
        #: the outputs of the run (:class:`~eyeblink.runtime.live.sinks.base.Sink`), in order; see
        #: :meth:`add`
        self.sinks: list[Sink] = []
        #: per item type, the ``put`` of each sink that takes it, in order (bound once, in
        #: :meth:`add`): a sink is handed no other item, so one that takes no row costs nothing per
        #: frame
        self._routes: dict[type, list[Callable[[Any], None]]] = {t: [] for t in ITEMS}
        self._on_row = self._routes[Row]
        self._on_state = self._routes[StateChanged]
        self._on_event = self._routes[GateLine]
        self._on_blink = self._routes[Blink]
        for sink in (
            ((GateSink(gate_port),) if gate_port is not None else ())
            + ((LslSink(lsl_name, lsl_wait_s),) if lsl else ())
            + tuple(sinks)
        ):
            self.add(sink)

    @classmethod
    def from_config(
        cls,
        live: Any,
        max_blink_ms: float,
        announce: Callable[[str], None] | None = None,
        *,
        always: bool = False,
    ) -> LiveTap | None:
        """The tap a :class:`~eyeblink.config.LiveConfig` asks for, with the sinks it asks for
        (:func:`~eyeblink.runtime.live.sinks.sinks_from_config`); None when it asks for none, unless
        ``always`` (the API's, which adds its own). ``max_blink_ms``: the blink detector's
        (``blinks.max_blink_ms``), the line of ``prolonged_closure``."""
        sinks = sinks_from_config(live, announce=announce)
        if not sinks and not always:
            return None
        return cls(
            stable_ms=live.stable_ms,
            max_blink_ms=max_blink_ms,
            max_age_ms=live.max_age_ms,
            settle_ms=live.settle_ms,
            face_lost_ms=live.face_lost_ms,
            max_latency_ms=live.max_latency_ms if live.overload == "drop" else None,
            announce=announce,
            sinks=sinks,
        )

    def add(self, sink: Sink) -> None:
        """One more output (before :meth:`open`); the sinks are kept in their ``order``."""
        unknown = [t for t in sink.takes if t not in self._routes]
        if unknown:
            raise TypeError(
                f"{type(sink).__name__}.takes: {unknown!r} are not items of a live run "
                f"(eyeblink.runtime.live.sinks.base.ITEMS)"
            )
        self.sinks.append(sink)
        self.sinks.sort(key=lambda s: s.order)  # stable: one order's sinks stay as they came
        for kind, puts in self._routes.items():
            puts[:] = [s.put for s in self.sinks if kind in s.takes]

    @property
    def preview(self) -> Any:
        """The frame grab the loader serves for a sink that shows frames (the browser view);
        None: no such sink."""
        return next((s.preview for s in self.sinks if s.preview is not None), None)

    @property
    def bound_port(self) -> int | None:
        """The gate socket's port once listening (``gate_port`` 0: the one chosen); None without
        a gate."""
        return next((s.port for s in self.sinks if isinstance(s, GateSink)), None)

    # ------------------------------------------------------------------ lifecycle

    def open(
        self,
        *,
        source: str,
        stem: str,
        nominal_fps: float | None,
        eye_model: str,
        timestamps: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        """Before the source connects: every sink is handed
        :class:`~eyeblink.runtime.live.sinks.base.Opened` (the gate socket; the LSL outlets when
        their rate is known now, ``nominal_fps``: ``--fps`` or a camera's, or an inlet is to be
        waited for; otherwise at :meth:`connected`); the watchdog that says ``stale`` when no fresh
        frame comes starts; then every sink is handed
        :class:`~eyeblink.runtime.live.sinks.base.Ready` (``--lsl-wait`` waits there for an inlet)
        and the capture starts once it returns."""
        self.source, self.stem = source, stem
        self.eye_model, self.timestamps, self.nominal_fps = eye_model, timestamps, nominal_fps
        self._hand(Opened(source, stem, eye_model, nominal_fps, timestamps, self))
        if self._watch is None:
            self._watch = threading.Thread(
                target=self._watchdog, name="eyeblink-stale-watch", daemon=True
            )
            self._watch.start()
        self.opened.set()
        self._hand(Ready(cancelled if cancelled is not None else _never))

    def connected(self, nominal_fps: float | None, eye_model: str | None = None) -> None:
        """The source is connected (its rate known), the capture not started: the sinks are handed
        :class:`~eyeblink.runtime.live.sinks.base.Connected`."""
        if eye_model:
            self.eye_model = eye_model
        self.nominal_fps = nominal_fps
        self._hand(Connected(nominal_fps, self.eye_model))

    def _hand(self, item: Any) -> None:
        """``item`` to each sink that takes it, in order."""
        for put in self._routes[type(item)]:
            put(item)

    def set_clock(self, pc_to_lsl: float) -> None:
        """LSL's clock minus ``perf_counter`` (the LSL sink measures it with its outlets, before
        the first frame)."""
        self._pc_to_lsl = pc_to_lsl

    def say(self, text: str) -> None:
        """One line of the session's start (the log, and the CLI's stderr)."""
        log.info("%s", text)
        if self.announce is not None:
            self.announce(text)

    def age_s(self, now: float | None = None) -> float:
        """How long ago the newest analysed frame was received (inf before the first)."""
        a = self.fresh_arrival
        if not math.isfinite(a):
            return math.inf
        return (time.perf_counter() if now is None else now) - a

    @property
    def answering(self) -> bool:
        """The answers have begun. ``stale`` says that the answers given are about the past; before
        the first there is none to be stale (the gate's ``hello`` says ``stale``): a row too old to
        be evidence then says nothing."""
        return self.first_answer_frame is not None

    def stale_now(self) -> bool:
        """Said stale, or the newest analysed frame older than the bound by now (the gate's
        ``hello``, the API's ``session.stale``, the view); True before the first analysed frame."""
        return self.stale or self.age_s() > self.max_age_s

    @property
    def ended(self) -> bool:
        """The run's answers have ended (:meth:`end`)."""
        return self._ended.is_set()

    def end(self, reason: str | None = None) -> None:
        """The run's answers end, as the stream's last row is written: the watchdog stops and the
        sinks are handed :class:`~eyeblink.runtime.live.sinks.base.Ended` (the gate's ``end``
        line); once."""
        if self._ended.is_set():
            return
        self._ended.set()
        if self._watch is not None:
            self._watch.join(timeout=1.0)
        with self._lock:
            self._hand(Ended(reason))

    @property
    def closed(self) -> bool:
        """The sinks are closed (:meth:`close`)."""
        return self._closed

    def close(self, reason: str | None = None) -> None:
        """The run is over (its files written): :meth:`end` if not yet, then each sink's ``close``
        (the LSL outlets, the view, their sockets: a consumer still reading gets the last samples
        first); once."""
        self.end(reason)
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for sink in self.sinks:
                sink.close(reason)

    # ------------------------------------------------------------------ freshness

    def _watchdog(self) -> None:
        """Every quarter of the bound: no analysed frame for ``max_age_ms`` (a frozen camera, a
        lagging pipeline) is ``stale`` now, not when the next row comes."""
        period = min(max(self.max_age_s / 4.0, 0.002), 0.05)
        while not self._ended.wait(period):
            if self.stale or not math.isfinite(self.fresh_arrival) or not self.answering:
                continue
            with self._lock:
                age = self.age_s()
                if not self.stale and age > self.max_age_s:
                    self._go_stale(age)

    def _go_stale(self, age: float) -> None:
        """Say ``stale`` about the newest analysed frame; the evidence pending for a new state is
        forgotten."""
        self.stale = True
        self.stale_events += 1
        self.debouncer.forget()
        self._publish(
            GateEvent(
                "stale",
                max(self.fresh_frame, 0),
                self.fresh_s,
                self.tracker.state,
                None,
                {"age_ms": age * 1000.0, "max_age_ms": self.max_age_s * 1000.0},
            ),
            self.fresh_frame,
            self.fresh_s,
            self.fresh_arrival,
        )

    # ------------------------------------------------------------------ what the writer calls

    def arrivals(self, index: Sequence[int], t_arrival: Sequence[float]) -> None:
        """The arrival times (``perf_counter``) of a batch of rows about to be written."""
        arr = self._arrival
        for i, t in zip(index, t_arrival, strict=True):
            arr[int(i)] = float(t)
        while len(arr) > 8192:  # state changes may name a frame a little behind the one written
            arr.popitem(last=False)

    def lsl_time(self, t: float) -> float:
        """Capture time ``t`` on LSL's clock (the mapping is fixed at the first frame)."""
        return t + (self._offset or 0.0)

    def row(self, values: Sequence[Any]) -> None:
        """One row as written (``LIVE_FRAME_COLUMNS``), then the settled state and the events it
        implies."""
        frame = int(values[0])  # the contract's first two columns: frame, timestamp_s
        t = float(values[1])
        arrival = self._arrival.get(frame, math.nan)
        if self._offset is None:
            self._offset = (
                (arrival if math.isfinite(arrival) else time.perf_counter()) + self._pc_to_lsl - t
            )
        r = self._live_row(values, arrival, time.perf_counter())
        if self.frames == 0:
            self._first_arrival = arrival
        dropped = r.dropped
        self.frames += 1
        self.newest_frame, self.newest_s = frame, t
        # past the latency bound (the sink held up under overload): in frames.csv, but no answer is
        # made of it
        late = self._past_latency(r.sent_time - arrival)
        if late and frame < self.startup_frames:
            self.startup_rows += 1
        elif late:
            self.late_rows += 1
        if self._on_row:  # every row written; a late one is not published (no LSL sample)
            item = Row(r, not late)
            for put in self._on_row:
                put(item)
        det = self.detector
        if det is not None:
            # the detector's own records: the settled state below is what is published
            det.pop_state_changes()
        if dropped or late:
            return  # not analysed, or too late: no evidence of the eye now, and not fresh
        with self._lock:
            self.fresh_frame, self.fresh_s = frame, t
            if math.isfinite(arrival):
                self.fresh_arrival = arrival
            age = self.age_s()
            events: list[GateEvent] = []
            if age > self.max_age_s:
                if not self.answering:
                    self.startup_old_rows += 1
                    self.startup_caught_up_ms = (time.perf_counter() - self._first_arrival) * 1000.0
                elif not self.stale:
                    self._go_stale(age)
                return  # too old to be evidence of the eye now
            if self.stale:
                self.stale = False
                self.tracker.restart(frame, t)
                events.append(
                    GateEvent(
                        "fresh",
                        frame,
                        t,
                        self.tracker.state,
                        None,
                        {"age_ms": age * 1000.0, "max_age_ms": self.max_age_s * 1000.0},
                    )
                )
            if det is not None and det.judged_to_newest:
                ch = self.debouncer.update(frame, t, det.state)
                if ch is not None:
                    now = time.perf_counter()
                    ch = replace(ch, arrival_time=arrival, sent_time=now)
                    if now - arrival > self.max_age_s or self._past_latency(now - arrival):
                        # held up since the check above: the state follows the evidence, nothing is
                        # said of it
                        # ("fresh" says the state once fresh frames come again)
                        self.tracker.change(ch)
                        # the "fresh" of this row was not said: still stale, no second line
                        if events:
                            self.stale = True
                        elif not self.stale:
                            self._go_stale(now - arrival)
                        return
                    if self._on_state:
                        changed = StateChanged(ch)
                        for put in self._on_state:
                            put(changed)
                    events.extend(self.tracker.change(ch))
            if self.debouncer.pending is None:  # no timed event while the eye may be changing
                events.extend(self.tracker.tick(frame, t))
            else:
                self.tracker.last_frame, self.tracker.last_s = frame, t
            for ev in events:
                self._publish(ev, frame, t, arrival)

    def blink(self, ev: BlinkEvent) -> None:
        """A blink event the detector settled (one row of blinks.csv): a ``blink`` line on the gate
        socket and a ``blink`` marker (``blink:<kind>`` for a prolonged closure), the view's marker,
        the API's item."""
        with self._lock:
            if self._on_blink:
                item = Blink(ev)
                for put in self._on_blink:
                    put(item)

    def _publish(self, ev: GateEvent, latest_frame: int, latest_s: float, arrival: float) -> None:
        says_open = ev.state == EyeState.OPEN and ev.event in (
            "state",
            "open_stable",
            "blink_end",
            "face_found",
        )
        lsl_t = self.lsl_time(ev.timestamp_s)
        msg: dict[str, Any] = {
            "event": ev.event,
            "state": ev.state.value,
            "previous": ev.previous.value if ev.previous is not None else None,
            "frame": ev.frame,
            "timestamp_s": _finite(ev.timestamp_s),
            "lsl_time": _finite(lsl_t),
            "latest_frame": latest_frame,
            "latest_s": _finite(latest_s),
            "arrival_time": _finite(arrival),
            **ev.extra,
        }
        # the line's sent_time and age: checked against the bounds at this moment
        now = time.perf_counter()
        age = now - arrival
        if (says_open and age > self.max_age_s) or (
            ev.event != "stale" and self._past_latency(age)
        ):
            # the thread was held up between the check and now: never an old "open" (nor any
            if not self.stale:
                # state past the latency bound); "fresh" says the state again later
                self._go_stale(age)
            return
        self.events += 1
        if not self.answering and ev.event != "stale":
            self.first_answer_frame = ev.frame
            self.first_answer_ms = (now - self._first_arrival) * 1000.0
        msg["sent_time"] = now
        msg.setdefault("age_ms", _finite(age * 1000.0))
        if self._on_event:  # the gate's line, the LSL marker, ...
            item = GateLine(ev, msg)
            for put in self._on_event:
                put(item)

    def _past_latency(self, age_s: float) -> bool:
        """True when an answer ``age_s`` old is past the latency bound (``--max-latency-ms``;
        never without one)."""
        return self.max_latency_s is not None and age_s > self.max_latency_s

    def open_now(self, stable_ms: float, max_age_ms: float | None = None) -> tuple[bool, str]:
        """Is the eye open, settled, held ``stable_ms`` of capture time, on a frame received at most
        ``max_age_ms`` ago (default: the session's bound) now? (True, "") or (False, why not).

        No tap lock: the API calls this under its condition, which its sink takes under the tap's
        lock. The age is read again last, so a True is about a frame at most the bound old at the
        moment it is given.
        """
        bound = self.max_age_s if max_age_ms is None else max_age_ms / 1000.0
        tr = self.tracker
        for last in (False, True):
            age = self.age_s()
            if not math.isfinite(age):
                return False, "no frame analysed yet"
            if age > bound or (max_age_ms is None and self.stale):
                return False, (
                    f"stale: the newest analysed frame ({self.fresh_frame}) was received "
                    f"{age * 1000.0:.0f} ms ago, more than the {bound * 1000.0:g} ms bound"
                )
            if last:
                break
            if tr.state != EyeState.OPEN:
                return False, f"the eye is {tr.state.value} (since frame {tr.since_frame})"
            pending = self.debouncer.pending
            if pending is not None:
                return False, f"the eye may be {pending.value} (not settled yet)"
            if not tr.is_open_for(stable_ms):
                return (
                    False,
                    f"open for {tr.held_s() * 1000.0:.0f} ms of the {stable_ms:g} ms asked",
                )
        return True, ""

    def summary(self) -> dict[str, Any]:
        """The ``live.publish`` section of ``summary.json``."""
        out: dict[str, Any] = {
            "lsl": None,
            "gate_port": None,
            "stable_ms": self.tracker.stable_s * 1000.0,
            "max_blink_ms": self.tracker.max_blink_s * 1000.0,
            "max_age_ms": self.max_age_s * 1000.0,
            "settle_ms": self.debouncer.settle_s * 1000.0,
            "face_lost_ms": self.debouncer.face_lost_s * 1000.0,
            "stale_events": self.stale_events,
            "first_answer_frame": self.first_answer_frame,
            "first_answer_ms": _finite(self.first_answer_ms),
            "startup_old_rows": self.startup_old_rows,
            "startup_caught_up_ms": _finite(self.startup_caught_up_ms),
            "max_latency_ms": self.max_latency_s * 1000.0
            if self.max_latency_s is not None
            else None,
            "late_rows": self.late_rows,
            "startup_rows": self.startup_rows,
            "lsl_offset_s": self._offset,
            "events": self.events,
            "view": None,
        }
        for sink in self.sinks:  # each sink's own part, under its key (lsl, gate_port, view, ...)
            if sink.summary_key is not None:
                out[sink.summary_key] = sink.summary()
        return out
