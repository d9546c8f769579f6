"""What a live session tells other programs while it runs: Lab Streaming Layer outlets, the gate socket, the API.

The live sink (:class:`eyeblink.runtime.live._LiveRun`) writes rows and blink events in frame order; a
:class:`LiveTap` sees each of them right after it is written and hands it on:

* :class:`LslOutlets` (``--lsl``, extra ``lsl``): one per-frame sample stream and one marker stream,
  described as the XDF conventions ask (channel labels, units, types, the source, eyeblink's version), so
  LabRecorder records them as they are;
* :class:`GateServer` (``--gate-port``): JSON lines on a TCP socket on 127.0.0.1, one per state change
  (and per derived event), for programs in any language;
* the Python API (:func:`eyeblink.live`): callbacks and an iterator, through :attr:`LiveTap.listeners`.

The eye's state is **not** decided here. The blink detector owns the state machine
(:mod:`eyeblink.signals.state`, :attr:`BlinkDetector.state`); the tap reads it after every analysed frame the
detector has judged up to the newest (never while it re-judges its warm-up: those frames are in the past), lets
a :class:`~eyeblink.signals.state.StateDebouncer` settle it (a state counts once it has lasted ``settle_ms``,
``no_face`` ``face_lost_ms``; a dropped frame is no evidence), and :class:`GateTracker` adds the two timed facts
a rig asks for: ``open_stable`` (``open`` held for ``stable_ms`` of
capture time) and ``prolonged_closure`` (the eye has not been back to ``open`` for ``blinks.max_blink_ms`` since
the event began: the detector's own line between a blink and a prolonged closure, said as soon as it is crossed
instead of when the event ends).

Freshness: every answer says how old it is (``age_ms``: now minus the arrival of the newest analysed frame behind
it). No ``open`` is ever reported about a frame older than ``max_age_ms``: when the newest analysed frame is that
old (a pipeline that lags, a camera that froze with its connection open) the tap says ``stale`` at once (a
watchdog thread checks every quarter of the bound), holds ``open_stable`` back and forgets the evidence it had;
the first fresh frame again says ``fresh``, and ``open`` must then be held ``stable_ms`` of fresh frames anew.

Latency bound (``--max-latency-ms`` with ``--on-overload drop``): a row that reaches the tap more than the bound
after its frame arrived (the sink held up under overload) is in ``frames.csv`` but gets no LSL sample and is no
evidence of the state, and no state line older than the bound is sent; ``late_rows`` counts those rows.

Clocks: a frame's capture time (``timestamp_s`` in ``frames.csv``, the source's own clock) is mapped onto
LSL's clock (:func:`pylsl.local_clock`, ``CLOCK_MONOTONIC`` on Linux, the clock ``time.perf_counter`` and
``time.monotonic`` read too) once, at the first frame: ``lsl_time = timestamp_s + offset`` with ``offset`` =
the first frame's arrival on that clock minus its capture time. Every sample and marker then carries its
frame's own capture time on LSL's clock, so the samples are spaced exactly as in ``frames.csv``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import select
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, MissingExtraError, warn
from eyeblink.outputs import columns as _columns
from eyeblink.outputs.columns import FRAME_TABLE
from eyeblink.signals.state import EyeState, StateChange, StateDebouncer
from eyeblink.version import __version__

if TYPE_CHECKING:
    from eyeblink.signals.blinks import BlinkDetector, BlinkEvent

__all__ = ["GATE_EVENTS", "LSL_CHANNELS", "GateEvent", "GateServer", "GateTracker", "LiveRow", "LiveTap",
           "LslOutlets"]

log = logging.getLogger("eyeblink.live")

#: The events of the marker stream and the gate socket (a state change is ``state``; see the guide).
GATE_EVENTS = ("state", "blink_start", "blink_end", "open_stable", "prolonged_closure", "face_lost", "face_found",
               "stale", "fresh", "blink")
#: The per-frame LSL sample: (label, unit, type) per channel, in order.
LSL_CHANNELS: tuple[tuple[str, str, str], ...] = (
    ("openness_left", "ratio", "EAR"),  # the subject's left eye aspect ratio (frames.csv ear_left)
    ("openness_right", "ratio", "EAR"),  # the right eye (ear_right)
    ("closure", "normalized", "FEC"),  # online fraction of eyelid closure, 0 open .. 1 closed (closure)
    ("face", "boolean", "Presence"),  # 1 when a face was measured in the frame (face)
    ("frame", "count", "Index"),  # the row's frame number in frames.csv (frame)
    ("age", "ms", "Latency"),  # how long ago the frame was received when the sample was sent
)
#: a client whose unread lines exceed this is dropped (it stopped reading; the sink never waits for it)
MAX_CLIENT_BACKLOG = 1 << 20


#: One row of a live session as written to ``frames.csv`` (empty cells are NaN), plus ``dropped``, its arrival time
#: and when it was handed on (``age_ms``): derived from the frame columns' one declaration
#: (:data:`eyeblink.outputs.columns.FRAME_TABLE`), a field per column in file order.
LiveRow = FRAME_TABLE.live_row_type


@dataclass(frozen=True)
class GateEvent:
    """One line of the gate socket and one LSL marker: ``event`` at ``frame`` (capture time ``timestamp_s``)."""

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
    """The current eye state (from the detector's :class:`StateChange` records) and the events it implies.

    Not a state machine of its own: :meth:`change` takes the detector's changes as they are; :meth:`tick`
    only measures time on the capture clock: ``open_stable`` once ``open`` has been held for ``stable_ms``
    (once per stay), ``prolonged_closure`` once an event (from leaving ``open`` for ``closing`` or ``closed``
    until ``open`` again) has lasted ``max_blink_ms``, the detector's own bound of a blink (once per event).
    """

    def __init__(self, stable_ms: float = 200.0, max_blink_ms: float = 1000.0) -> None:
        self.stable_s = stable_ms / 1000.0
        self.max_blink_s = max_blink_ms / 1000.0
        self.state = EyeState.NO_FACE
        self.since_frame = 0
        self.since_s = math.nan  # capture time the current state began (NaN: before the first change)
        self.event_s = math.nan  # capture time the current event (closing .. open) began (NaN: none)
        self.last_frame = -1
        self.last_s = math.nan
        self._stable_sent = False
        self._prolonged_sent = False

    def change(self, ch: StateChange) -> list[GateEvent]:
        """The events of one detector state change (``state`` first, then the named ones)."""
        self.state, self.since_frame, self.since_s, self._stable_sent = ch.state, ch.frame, ch.timestamp_s, False
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
        """Frame ``frame`` (capture time ``t``) was written: ``open_stable`` / ``prolonged_closure`` when due."""
        self.last_frame, self.last_s = frame, t
        out: list[GateEvent] = []
        if (self.state == EyeState.OPEN and not self._stable_sent
                and t - self.since_s >= self.stable_s - 1e-9):
            self._stable_sent = True
            out.append(GateEvent("open_stable", frame, t, self.state, None,
                                 {"since_s": self.since_s, "held_ms": (t - self.since_s) * 1000.0}))
        if (self.state in (EyeState.CLOSING, EyeState.CLOSED, EyeState.REOPENING) and not self._prolonged_sent
                and t - self.event_s >= self.max_blink_s - 1e-9):
            self._prolonged_sent = True
            out.append(GateEvent("prolonged_closure", frame, t, self.state, None,
                                 {"since_s": self.event_s, "held_ms": (t - self.event_s) * 1000.0}))
        return out

    def restart(self, frame: int, t: float) -> None:
        """Fresh frames again after a stall: ``open`` must be held ``stable_ms`` of them anew (open_stable again)."""
        self.since_frame, self.since_s, self._stable_sent = frame, t, False
        self.last_frame, self.last_s = frame, t

    def held_s(self) -> float:
        """How long (capture time) the current state has been held at the last written frame (0 if unknown)."""
        d = self.last_s - self.since_s
        return d if d >= 0 else 0.0

    def is_open_for(self, stable_ms: float) -> bool:
        return self.state == EyeState.OPEN and self.held_s() >= stable_ms / 1000.0 - 1e-9


#: liblsl's own log (its INFO lines on stderr: "Loaded default config", its git build, ...) kept to errors: the
#: session's outlets are announced by eyeblink in one line. A user's own ``LSLAPICFG`` is left alone.
_LSL_QUIET_CFG = "[log]\nlevel = -2\n"


def _quiet_liblsl() -> None:
    """Point liblsl at a configuration that logs errors only, before pylsl loads it (once per process)."""
    import os
    import tempfile

    if "LSLAPICFG" in os.environ or "pylsl" in sys.modules:
        return
    fd, path = tempfile.mkstemp(prefix="eyeblink-lsl-", suffix=".cfg")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(_LSL_QUIET_CFG)
    os.environ["LSLAPICFG"] = path


def _same_name_streams(pylsl: Any, name: str) -> list[Any]:
    """LSL streams named ``name`` already on this network (0.2 s to ask): a second session by one name makes an
    inlet that resolves by name pick either."""
    try:
        return list(pylsl.resolve_byprop("name", name, minimum=1, timeout=0.2))
    except Exception:  # resolving is an aid to the warning: a network that does not answer is no error here
        return []


class LslOutlets:
    """The two LSL outlets of a live session: ``<name>`` (per-frame samples) and ``<name>-markers``."""

    def __init__(self, name: str, *, source: str, stem: str, nominal_fps: float | None, eye_model: str,
                 timestamps: str | None = None) -> None:
        _quiet_liblsl()
        try:
            import pylsl
        except ImportError:
            raise MissingExtraError("--lsl needs pylsl, which is not installed; pip install 'eyeblink[lsl]' "
                                    "(or pip install pylsl)") from None
        except (OSError, RuntimeError) as exc:  # pylsl installed but liblsl missing
            raise MissingExtraError(f"--lsl: pylsl cannot load liblsl ({exc}); pip install 'eyeblink[lsl]'") from None
        self._pylsl = pylsl
        rate = float(nominal_fps) if nominal_fps and nominal_fps > 0 else pylsl.IRREGULAR_RATE
        self.nominal_fps = rate
        source_id = f"eyeblink:{source}:{stem}"
        info = pylsl.StreamInfo(name, "Eyeblink", len(LSL_CHANNELS), rate, pylsl.cf_double64, source_id)
        self._describe(info, source=source, stem=stem, eye_model=eye_model, timestamps=timestamps, channels=True)
        minfo = pylsl.StreamInfo(f"{name}-markers", "Markers", 1, pylsl.IRREGULAR_RATE, pylsl.cf_string,
                                 f"{source_id}:markers")
        self._describe(minfo, source=source, stem=stem, eye_model=eye_model, timestamps=timestamps, channels=False)
        self.local_clock: Callable[[], float] = pylsl.local_clock
        others = _same_name_streams(pylsl, name)
        self.name_taken_by = [o.source_id() for o in others]
        if others:
            warn(f"--lsl: another LSL stream named {name!r} is already published on this network (source "
                 f"{others[0].source_id()!r} on {others[0].hostname()!r}); an inlet that resolves by name may get "
                 f"either: give this session its own name with --lsl-name")
        self.samples = pylsl.StreamOutlet(info, 1, 360)  # chunk of 1 sample: sent at once
        self.markers = pylsl.StreamOutlet(minfo, 1, 360)
        self.name = name

    @staticmethod
    def _describe(info: Any, *, source: str, stem: str, eye_model: str, timestamps: str | None,
                  channels: bool) -> None:
        desc = info.desc()
        if channels:
            chans = desc.append_child("channels")
            for label, unit, kind in LSL_CHANNELS:
                ch = chans.append_child("channel")
                ch.append_child_value("label", label)
                ch.append_child_value("unit", unit)
                ch.append_child_value("type", kind)
        else:
            ch = desc.append_child("channels").append_child("channel")
            ch.append_child_value("label", "event")
            ch.append_child_value("type", "Marker")
            desc.append_child_value("events", ", ".join(GATE_EVENTS) + " (state:<state>; blink:<kind> for a "
                                              "settled event that is not a blink)")
        acq = desc.append_child("acquisition")
        acq.append_child_value("manufacturer", "eyeblink")
        acq.append_child_value("model", f"eyeblink {eye_model}")
        acq.append_child_value("software_version", __version__)
        eb = desc.append_child("eyeblink")
        eb.append_child_value("version", __version__)
        eb.append_child_value("source", source)
        eb.append_child_value("stem", stem)
        eb.append_child_value("eye_model", eye_model)
        eb.append_child_value("timestamps", "frame capture time (the source's clock) mapped onto local_clock at "
                                            f"the first frame ({timestamps or 'source clock'})")

    def have_consumers(self) -> bool:
        return bool(self.samples.have_consumers())

    def wait_for_consumers(self, timeout_s: float, cancelled: Callable[[], bool] | None = None) -> bool:
        """Wait up to ``timeout_s`` for an inlet on the sample stream (a recorder that should get every sample)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.samples.have_consumers():
                return True
            if cancelled is not None and cancelled():
                return False
            time.sleep(0.01)
        return bool(self.samples.have_consumers())

    def push(self, row: Any, lsl_time: float) -> None:
        self.samples.push_sample([row.ear_left, row.ear_right, row.closure, float(row.face), float(row.frame),
                                  row.age_ms], lsl_time)

    def marker(self, text: str, lsl_time: float) -> None:
        self.markers.push_sample([text], lsl_time)

    def close(self) -> None:
        for name in ("samples", "markers"):
            outlet = getattr(self, name, None)
            if outlet is not None:
                with contextlib.suppress(Exception):
                    del outlet
                setattr(self, name, None)


class GateServer:
    """JSON lines on a TCP socket on 127.0.0.1: a ``hello`` line on connect, then one line per event.

    One-way: what a client sends is ignored. A client that stops reading is dropped once
    :data:`MAX_CLIENT_BACKLOG` bytes wait for it; the sink never blocks on a client.
    """

    def __init__(self, port: int, hello: Callable[[], dict[str, Any]]) -> None:
        try:
            self.sock = socket.create_server(("127.0.0.1", port))
        except OSError as exc:
            raise ConfigError(f"--gate-port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); "
                              "choose another port or 0 for any free one") from None
        self.port = int(self.sock.getsockname()[1])
        self.sock.settimeout(0.1)
        self._hello = hello
        self._clients: dict[socket.socket, bytearray] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="eyeblink-gate", daemon=True)
        self._thread.start()

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._clients)

    def _accept(self) -> None:
        """Accept clients until closed. Out of file descriptors (EMFILE, ENFILE, ...) the thread logs it once per
        episode, closes the clients that hung up and tries again: a connection waiting meanwhile gets its
        ``hello`` as soon as a descriptor is free; the accept thread never dies of it."""
        exhausted = False
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                self._reap()
                continue
            except OSError as exc:
                if self._closed:
                    return
                if not exhausted:
                    log.warning("gate: cannot accept a client (%s; %d clients connected); clients that hung up "
                                "are closed and the gate keeps trying (raise the limit with ulimit -n)",
                                exc.strerror or exc, self.clients)
                exhausted = True
                self._reap()
                time.sleep(0.05)
                continue
            if exhausted:
                log.warning("gate: accepting clients again (%d connected)", self.clients + 1)
                exhausted = False
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)
            with self._lock:
                self._clients[conn] = bytearray()
                self._send_to(conn, _line(self._hello()))

    def _reap(self) -> None:
        """Close clients that hung up (a readable socket with nothing to read); their input is ignored."""
        with self._lock:
            conns = list(self._clients)
        if not conns:
            return
        with contextlib.suppress(OSError, ValueError):
            poller = select.poll()  # not select(): a descriptor past 1023 is fine
            by_fd = {}
            for c in conns:
                with contextlib.suppress(OSError, ValueError):
                    by_fd[c.fileno()] = c
                    poller.register(c, select.POLLIN | select.POLLHUP | select.POLLERR)
            readable = [by_fd[fd] for fd, _ in poller.poll(0) if fd in by_fd]
            for c in readable:
                try:
                    data = c.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    with self._lock:
                        self._drop(c)

    def _drop(self, conn: socket.socket) -> None:
        self._clients.pop(conn, None)
        with contextlib.suppress(OSError):
            conn.close()

    def _send_to(self, conn: socket.socket, data: bytes) -> None:
        buf = self._clients.get(conn)
        if buf is None:
            return
        buf += data
        try:
            sent = conn.send(buf)
            del buf[:sent]
        except BlockingIOError:
            pass
        except OSError:
            self._drop(conn)
            return
        if len(buf) > MAX_CLIENT_BACKLOG:
            log.warning("gate: a client stopped reading (%d bytes waiting); dropped", len(buf))
            self._drop(conn)

    def send(self, message: dict[str, Any]) -> None:
        if not self._clients:
            return
        data = _line(message)
        with self._lock:
            for conn in list(self._clients):
                self._send_to(conn, data)

    def close(self, last: dict[str, Any] | None = None) -> None:
        if last is not None:
            self.send(last)
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.close()
        self._thread.join(timeout=1.0)
        with self._lock:
            for conn, buf in list(self._clients.items()):
                with contextlib.suppress(OSError):
                    conn.setblocking(True)
                    conn.settimeout(0.5)
                    if buf:
                        conn.sendall(bytes(buf))
                    conn.shutdown(socket.SHUT_RDWR)
                self._drop(conn)


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, allow_nan=False, default=_json_default) + "\n").encode()


def _json_default(o: Any) -> Any:
    if isinstance(o, EyeState):
        return o.value
    raise TypeError(f"not JSON serialisable: {o!r}")


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


Listener = Callable[[str, Any], None]


class LiveTap:
    """Sees every written row, blink event and state change of a live session, in frame order, and
    publishes them (LSL, the gate socket, the API's listeners), each with its age; refuses stale answers.

    Lifecycle: :meth:`open` before the source connects (outlets and socket exist before the first frame),
    :meth:`arrivals` per batch of rows, :meth:`row` and :meth:`blink` from the writer, :meth:`close` at the end.
    """

    def __init__(self, *, lsl: bool = False, lsl_name: str = "eyeblink", lsl_wait_s: float = 0.0,
                 gate_port: int | None = None, stable_ms: float = 200.0, max_blink_ms: float = 1000.0,
                 max_age_ms: float = 50.0, settle_ms: float = 10.0, face_lost_ms: float = 200.0,
                 max_latency_ms: float | None = None, announce: Callable[[str], None] | None = None) -> None:
        self.lsl_enabled = lsl
        self.lsl_name = lsl_name
        self.lsl_wait_s = lsl_wait_s
        self.gate_port = gate_port
        self.bound_port: int | None = None  # the gate's port once listening (gate_port 0: the one chosen)
        self.tracker = GateTracker(stable_ms, max_blink_ms)
        self.debouncer = StateDebouncer(settle_ms, face_lost_ms)
        self.max_age_s = max_age_ms / 1000.0
        # the latency bound (--max-latency-ms with --on-overload drop; None: none): a row written later than this
        # after its frame arrived is not published (no LSL sample, no evidence of the state); counted
        self.max_latency_s = max_latency_ms / 1000.0 if max_latency_ms is not None else None
        self.late_rows = 0
        #: rows of the frames received before the capture started (a stream's rate probe): past the bound as
        #: they are written, not published either, but counted apart: the run did not fall behind for them
        self.startup_frames = 0
        self.startup_rows = 0
        self.announce = announce
        self.listeners: list[Listener] = []
        self.detector: BlinkDetector | None = None
        self.lsl: LslOutlets | None = None
        self.gate: GateServer | None = None
        self.source = ""
        self.stem = ""
        self._arrival: OrderedDict[int, float] = OrderedDict()
        self._live_row = _columns.FRAME_TABLE.live_row  # the rows' cells as a LiveRow (the table of this run)
        self._offset: float | None = None  # lsl_time - capture time (set at the first frame)
        self._eye_model = ""
        self._pc_to_lsl = 0.0  # LSL's clock minus perf_counter (set with the outlets)
        self._timestamps: str | None = None
        self.frames = 0
        self.events = 0
        self.stale_events = 0
        self.newest_frame = -1  # the newest row written (a gap row included) and its capture time
        self.newest_s = math.nan
        # the newest analysed (not dropped) frame: what every answer is about, and how fresh it is
        self.fresh_frame = -1
        self.fresh_s = math.nan
        self.fresh_arrival = math.nan
        self.stale = False
        self._lock = threading.RLock()  # the sink's rows and the watchdog's stale lines, one at a time, in order
        self._watch: threading.Thread | None = None
        self._closing = threading.Event()
        self.opened = threading.Event()  # set once the outlets and the socket exist (before the source connects)
        #: other outputs of the run (the browser view, eyeblink.runtime.view): opened with the tap, fed through
        #: :attr:`listeners`, closed with it; ``preview`` is the frame grab the loader serves (None: no view)
        self.sinks: list[Any] = []
        self.preview: Any = None

    @classmethod
    def from_config(cls, live: Any, max_blink_ms: float,
                    announce: Callable[[str], None] | None = None, *, always: bool = False) -> LiveTap | None:
        """The tap a :class:`~eyeblink.config.LiveConfig` asks for (None: no LSL and no gate socket, unless
        ``always``: the API's); ``max_blink_ms``: the blink detector's (``blinks.max_blink_ms``), the line of
        ``prolonged_closure``."""
        view = getattr(live, "view", False)
        if not live.lsl and live.gate_port is None and not always and not view:
            return None
        tap = cls(lsl=live.lsl, lsl_name=live.lsl_name, lsl_wait_s=live.lsl_wait_s, gate_port=live.gate_port,
                  stable_ms=live.stable_ms, max_blink_ms=max_blink_ms, max_age_ms=live.max_age_ms,
                  settle_ms=live.settle_ms, face_lost_ms=live.face_lost_ms,
                  max_latency_ms=live.max_latency_ms if live.overload == "drop" else None, announce=announce)
        if view:  # the browser view (--view): a sink of its own beside LSL and the gate
            from eyeblink.runtime.view import ViewSink

            sink = ViewSink(port=live.view_port, host=live.view_host, announce=announce)
            tap.sinks.append(sink)
            tap.listeners.append(sink.on_item)
            tap.preview = sink.preview
        return tap

    # ------------------------------------------------------------------ lifecycle

    def check(self) -> None:
        """Before any model loads: the ``lsl`` extra is there when asked for; the view's port is taken."""
        for sink in self.sinks:
            sink.bind()
        if self.lsl_enabled:
            import importlib.util

            try:
                spec = importlib.util.find_spec("pylsl")
            except (ImportError, ValueError):  # a broken install, or blocked in sys.modules
                spec = None
            if spec is None:
                raise MissingExtraError("--lsl needs pylsl, which is not installed; pip install 'eyeblink[lsl]' "
                                        "(or pip install pylsl)")

    def open(self, *, source: str, stem: str, nominal_fps: float | None, eye_model: str,
             timestamps: str | None = None, cancelled: Callable[[], bool] | None = None) -> None:
        """Before the source connects: the gate socket, and the LSL outlets when their rate is known now
        (``nominal_fps``: ``--fps`` or a camera's) or an inlet is to be waited for (``lsl_wait_s``); otherwise
        the outlets wait for :meth:`connected`, when a network stream's own rate is known. Starts the watchdog
        that says ``stale`` when no fresh frame comes."""
        self.source, self.stem = source, stem
        self._eye_model, self._timestamps = eye_model, timestamps
        if self.gate_port is not None and self.gate is None:
            self.gate = GateServer(self.gate_port, self._hello)
            self.bound_port = self.gate.port
            self._say(f"gate: JSON lines on tcp://127.0.0.1:{self.gate.port}")
        if nominal_fps or self.lsl_wait_s > 0:
            self._open_lsl(nominal_fps)
        for sink in self.sinks:
            sink.open(source=source, stem=stem, fps=nominal_fps, eye_model=eye_model, tap=self)
        if self._watch is None:
            self._watch = threading.Thread(target=self._watchdog, name="eyeblink-stale-watch", daemon=True)
            self._watch.start()
        self.opened.set()
        if self.lsl is not None and self.lsl_wait_s > 0:
            ok = self.lsl.wait_for_consumers(self.lsl_wait_s, cancelled)
            self._say("lsl: an inlet is connected" if ok else
                      f"lsl: no inlet after {self.lsl_wait_s:g} s; starting anyway")

    def connected(self, nominal_fps: float | None, eye_model: str | None = None) -> None:
        """The source is connected (its rate known), the capture not started: the outlets, if not made yet."""
        if eye_model:
            self._eye_model = eye_model
        for sink in self.sinks:
            sink.set_info(fps=nominal_fps, eye_model=eye_model)
        self._open_lsl(nominal_fps)

    def _open_lsl(self, nominal_fps: float | None) -> None:
        if not self.lsl_enabled or self.lsl is not None:
            return
        self.lsl = LslOutlets(self.lsl_name, source=self.source, stem=self.stem, nominal_fps=nominal_fps,
                              eye_model=self._eye_model, timestamps=self._timestamps)
        clock = self.lsl.local_clock  # perf_counter -> LSL's clock (the same clock on Linux; not everywhere)
        self._pc_to_lsl = min((clock() - time.perf_counter() for _ in range(5)), key=abs)
        rate = "irregular rate (declare --fps)" if not self.lsl.nominal_fps else f"{self.lsl.nominal_fps:g} Hz"
        self._say(f"lsl: streams {self.lsl_name!r} (samples, {rate}) and {self.lsl_name + '-markers'!r}")

    def _say(self, text: str) -> None:
        log.info("%s", text)
        if self.announce is not None:
            self.announce(text)

    def age_s(self, now: float | None = None) -> float:
        """How long ago the newest analysed frame was received (inf before the first)."""
        a = self.fresh_arrival
        if not math.isfinite(a):
            return math.inf
        return (time.perf_counter() if now is None else now) - a

    def _hello(self) -> dict[str, Any]:
        # no tap lock here: the gate's accept thread holds the gate's lock, which the sink takes under the tap's
        tr = self.tracker
        age = self.age_s()
        return {"event": "hello", "version": __version__, "source": self.source, "stem": self.stem,
                "state": tr.state.value, "since_frame": tr.since_frame, "since_s": _finite(tr.since_s),
                "frame": tr.last_frame, "timestamp_s": _finite(tr.last_s), "stable_ms": tr.stable_s * 1000.0,
                "max_blink_ms": tr.max_blink_s * 1000.0, "max_age_ms": self.max_age_s * 1000.0,
                "settle_ms": self.debouncer.settle_s * 1000.0, "face_lost_ms": self.debouncer.face_lost_s * 1000.0,
                "latest_frame": self.fresh_frame, "latest_s": _finite(self.fresh_s),
                "age_ms": _finite(age * 1000.0), "stale": bool(self.stale or age > self.max_age_s),
                "sent_time": time.perf_counter()}

    def close(self, reason: str | None = None) -> None:
        self._closing.set()
        if self._watch is not None:
            self._watch.join(timeout=1.0)
        with self._lock:
            if self.gate is not None:
                self.gate.close({"event": "end", "reason": reason, "frame": self.tracker.last_frame,
                                 "timestamp_s": _finite(self.tracker.last_s), "sent_time": time.perf_counter()})
                self.gate = None
            if self.lsl is not None:
                self.lsl.close()
                self.lsl = None
        for sink in self.sinks:
            sink.close(reason)

    # ------------------------------------------------------------------ freshness

    def _watchdog(self) -> None:
        """Every quarter of the bound: no analysed frame for ``max_age_ms`` (a frozen camera, a lagging
        pipeline) is ``stale`` now, not when the next row comes."""
        period = min(max(self.max_age_s / 4.0, 0.002), 0.05)
        while not self._closing.wait(period):
            if self.stale or not math.isfinite(self.fresh_arrival):
                continue
            with self._lock:
                age = self.age_s()
                if not self.stale and age > self.max_age_s:
                    self._go_stale(age)

    def _go_stale(self, age: float) -> None:
        """Say ``stale`` about the newest analysed frame; the evidence pending for a new state is forgotten."""
        self.stale = True
        self.stale_events += 1
        self.debouncer.forget()
        self._publish(GateEvent("stale", max(self.fresh_frame, 0), self.fresh_s, self.tracker.state, None,
                                {"age_ms": age * 1000.0, "max_age_ms": self.max_age_s * 1000.0}),
                      self.fresh_frame, self.fresh_s, self.fresh_arrival)

    # ------------------------------------------------------------------ the sink's hooks

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
        """One row as written (``LIVE_FRAME_COLUMNS``), then the settled state and the events it implies."""
        frame = int(values[0])  # the contract's first two columns: frame, timestamp_s
        t = float(values[1])
        arrival = self._arrival.get(frame, math.nan)
        if self._offset is None:
            self._offset = (arrival if math.isfinite(arrival) else time.perf_counter()) + self._pc_to_lsl - t
        r = self._live_row(values, arrival, time.perf_counter())
        dropped = r.dropped
        self.frames += 1
        self.newest_frame, self.newest_s = frame, t
        # past the latency bound (the sink held up under overload): in frames.csv, but no answer is made of it
        late = self._past_latency(r.sent_time - arrival)
        if late and frame < self.startup_frames:
            self.startup_rows += 1
        elif late:
            self.late_rows += 1
        elif self.lsl is not None:
            self.lsl.push(r, t + self._offset)
        for listener in self.listeners:
            listener("row", r)
        det = self.detector
        if det is not None:
            det.pop_state_changes()  # the detector's own records: the settled state below is what is published
        if dropped or late:
            return  # not analysed, or too late: no evidence of the eye now, and not fresh
        with self._lock:
            self.fresh_frame, self.fresh_s = frame, t
            if math.isfinite(arrival):
                self.fresh_arrival = arrival
            age = self.age_s()
            events: list[GateEvent] = []
            if age > self.max_age_s:
                if not self.stale:
                    self._go_stale(age)
                return  # too old to be evidence of the eye now
            if self.stale:
                self.stale = False
                self.tracker.restart(frame, t)
                events.append(GateEvent("fresh", frame, t, self.tracker.state, None,
                                        {"age_ms": age * 1000.0, "max_age_ms": self.max_age_s * 1000.0}))
            if det is not None and det.judged_to_newest:
                ch = self.debouncer.update(frame, t, det.state)
                if ch is not None:
                    now = time.perf_counter()
                    ch = replace(ch, arrival_time=arrival, sent_time=now)
                    if now - arrival > self.max_age_s or self._past_latency(now - arrival):
                        # held up since the check above: the state follows the evidence, nothing is said of it
                        self.tracker.change(ch)  # ("fresh" says the state once fresh frames come again)
                        if events:  # the "fresh" of this row was not said: still stale, no second line
                            self.stale = True
                        elif not self.stale:
                            self._go_stale(now - arrival)
                        return
                    for listener in self.listeners:
                        listener("state", ch)
                    events.extend(self.tracker.change(ch))
            if self.debouncer.pending is None:  # no timed event while the eye may be changing
                events.extend(self.tracker.tick(frame, t))
            else:
                self.tracker.last_frame, self.tracker.last_s = frame, t
            for ev in events:
                self._publish(ev, frame, t, arrival)

    def blink(self, ev: BlinkEvent) -> None:
        """A blink event the detector settled (one row of blinks.csv): a ``blink`` line on the gate socket and a
        ``blink`` marker (``blink:<kind>`` for a prolonged closure)."""
        with self._lock:
            kind = getattr(ev, "kind", "blink")
            if self.lsl is not None:
                self.lsl.marker("blink" if kind == "blink" else f"blink:{kind}", self.lsl_time(ev.start_s))
            if self.gate is not None:
                self.gate.send({"event": "blink", "blink": ev.blink, "start_frame": ev.start_frame,
                                "end_frame": ev.end_frame, "start_s": ev.start_s, "end_s": ev.end_s,
                                "duration_ms": ev.duration_ms, "amplitude": _finite(ev.amplitude),
                                "complete": bool(ev.complete), "kind": kind,
                                "lsl_time": self.lsl_time(ev.start_s), "latest_frame": self.fresh_frame,
                                "latest_s": _finite(self.fresh_s), "age_ms": _finite(self.age_s() * 1000.0),
                                "sent_time": time.perf_counter()})
        for listener in self.listeners:
            listener("blink", ev)

    def _publish(self, ev: GateEvent, latest_frame: int, latest_s: float, arrival: float) -> None:
        says_open = ev.state == EyeState.OPEN and ev.event in ("state", "open_stable", "blink_end", "face_found")
        lsl_t = self.lsl_time(ev.timestamp_s)
        msg: dict[str, Any] = {"event": ev.event, "state": ev.state.value,
                               "previous": ev.previous.value if ev.previous is not None else None,
                               "frame": ev.frame, "timestamp_s": _finite(ev.timestamp_s),
                               "lsl_time": _finite(lsl_t), "latest_frame": latest_frame,
                               "latest_s": _finite(latest_s), "arrival_time": _finite(arrival), **ev.extra}
        now = time.perf_counter()  # the line's sent_time and age: checked against the bounds at this moment
        age = now - arrival
        if (says_open and age > self.max_age_s) or (ev.event != "stale" and self._past_latency(age)):
            if not self.stale:  # the thread was held up between the check and now: never an old "open" (nor any
                self._go_stale(age)  # state past the latency bound); "fresh" says the state again later
            return
        self.events += 1
        if self.gate is not None:
            msg["sent_time"] = now
            msg.setdefault("age_ms", _finite(age * 1000.0))
            self.gate.send(msg)
        if self.lsl is not None:
            self.lsl.marker(ev.marker, lsl_t)
        for listener in self.listeners:
            listener("event", ev)

    def _past_latency(self, age_s: float) -> bool:
        """True when an answer ``age_s`` old is past the latency bound (``--max-latency-ms``; never without one)."""
        return self.max_latency_s is not None and age_s > self.max_latency_s

    def open_now(self, stable_ms: float, max_age_ms: float | None = None) -> tuple[bool, str]:
        """Is the eye open, settled, held ``stable_ms`` of capture time, on a frame received at most ``max_age_ms``
        ago (default: the session's bound) now? (True, "") or (False, why not).

        No tap lock: the API calls this under its condition, which the tap's listeners take under the lock. The
        age is read again last, so a True is about a frame at most the bound old at the moment it is given.
        """
        bound = self.max_age_s if max_age_ms is None else max_age_ms / 1000.0
        tr = self.tracker
        for last in (False, True):
            age = self.age_s()
            if not math.isfinite(age):
                return False, "no frame analysed yet"
            if age > bound or (max_age_ms is None and self.stale):
                return False, (f"stale: the newest analysed frame ({self.fresh_frame}) was received "
                               f"{age * 1000.0:.0f} ms ago, more than the {bound * 1000.0:g} ms bound")
            if last:
                break
            if tr.state != EyeState.OPEN:
                return False, f"the eye is {tr.state.value} (since frame {tr.since_frame})"
            pending = self.debouncer.pending
            if pending is not None:
                return False, f"the eye may be {pending.value} (not settled yet)"
            if not tr.is_open_for(stable_ms):
                return False, f"open for {tr.held_s() * 1000.0:.0f} ms of the {stable_ms:g} ms asked"
        return True, ""

    def summary(self) -> dict[str, Any]:
        """The ``live.publish`` section of ``summary.json``."""
        return {"lsl": {"samples": self.lsl_name, "markers": f"{self.lsl_name}-markers"} if self.lsl_enabled else None,
                "gate_port": self.bound_port,
                "stable_ms": self.tracker.stable_s * 1000.0, "max_blink_ms": self.tracker.max_blink_s * 1000.0,
                "max_age_ms": self.max_age_s * 1000.0, "settle_ms": self.debouncer.settle_s * 1000.0,
                "face_lost_ms": self.debouncer.face_lost_s * 1000.0, "stale_events": self.stale_events,
                "max_latency_ms": self.max_latency_s * 1000.0 if self.max_latency_s is not None else None,
                "late_rows": self.late_rows, "startup_rows": self.startup_rows,
                "lsl_offset_s": self._offset, "events": self.events,
                "view": self.sinks[0].summary() if self.sinks else None}
