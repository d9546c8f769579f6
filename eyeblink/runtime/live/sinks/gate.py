"""The gate socket (``--gate-port``): JSON lines on a TCP socket on 127.0.0.1, for programs in any
language.

A ``hello`` line on connect (the state as of now), then one line per gate event (a state change and
the events it implies, ``stale``/``fresh``), one per blink the detector settles, and an ``end`` line
when the run ends. What the lines say is decided by the tap
(:class:`eyeblink.runtime.live.publish.LiveTap`); this module only sends them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from eyeblink.errors import ConfigError
from eyeblink.runtime.live.sinks.base import Blink, Ended, GateLine, Item, Opened, Sink
from eyeblink.signals.state import EyeState
from eyeblink.version import __version__

__all__ = ["GATE_EVENTS", "MAX_CLIENT_BACKLOG", "GateServer", "GateSink", "finite"]

log = logging.getLogger("eyeblink.live")

#: The events of the marker stream and the gate socket (a state change is ``state``; see the guide).
GATE_EVENTS = (
    "state",
    "blink_start",
    "blink_end",
    "open_stable",
    "prolonged_closure",
    "face_lost",
    "face_found",
    "stale",
    "fresh",
    "blink",
)
#: a client whose unread lines exceed this is dropped (it stopped reading; the sink never waits for
#: it)
MAX_CLIENT_BACKLOG = 1 << 20
#: out of file descriptors again this soon after the last warning: the same episode, not logged
#: twice
EXHAUSTED_QUIET_S = 5.0


def finite(x: float) -> float | None:
    """``x``, or None (JSON null) when it is NaN or infinite."""
    return x if math.isfinite(x) else None


class GateServer:
    """JSON lines on a TCP socket on 127.0.0.1: a ``hello`` line on connect, then one line per
    event.

    One-way: what a client sends is ignored. A client that stops reading is dropped once
    :data:`MAX_CLIENT_BACKLOG` bytes wait for it; the sink never blocks on a client.
    """

    def __init__(self, port: int, hello: Callable[[], dict[str, Any]]) -> None:
        try:
            self.sock = socket.create_server(("127.0.0.1", port))
        except OSError as exc:
            raise ConfigError(
                f"--gate-port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); "
                "choose another port or 0 for any free one"
            ) from None
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
        """Accept clients until closed. Out of file descriptors (EMFILE, ENFILE, ...) the thread
        logs it once per episode, closes the clients that hung up and tries again: a connection
        waiting meanwhile gets its ``hello`` as soon as a descriptor is free; the accept thread
        never dies of it. An episode that starts within :data:`EXHAUSTED_QUIET_S` of the last one's
        warning (the hung-up clients are closed a few at a time, and the waiting ones take the freed
        descriptors again) is the same episode: not logged again."""
        exhausted = False
        warned_at = -math.inf
        quiet = False
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
                    quiet = time.perf_counter() - warned_at < EXHAUSTED_QUIET_S
                    if not quiet:
                        warned_at = time.perf_counter()
                        log.warning(
                            "gate: cannot accept a client (%s; %d clients connected); clients "
                            "that hung up "
                            "are closed and the gate keeps trying (raise the limit with ulimit -n)",
                            exc.strerror or exc,
                            self.clients,
                        )
                exhausted = True
                self._reap()
                time.sleep(0.05)
                continue
            if exhausted:
                if not quiet:
                    log.warning("gate: accepting clients again (%d connected)", self.clients + 1)
                exhausted = False
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)
            with self._lock:
                self._clients[conn] = bytearray()
                self._send_to(conn, _line(self._hello()))

    def _reap(self) -> None:
        """Close clients that hung up (a readable socket with nothing to read); their input is
        ignored."""
        with self._lock:
            conns = list(self._clients)
        if not conns:
            return
        # poll() where the platform has it (Linux, macOS): no descriptor of its own, so it works
        # while the process is out of them, and one past 1023 is fine; Windows has none: select(),
        # which takes sockets, all the gate has
        with contextlib.suppress(OSError, ValueError):
            if hasattr(select, "poll"):
                poller = select.poll()
                by_fd = {}
                for c in conns:
                    with contextlib.suppress(OSError, ValueError):
                        by_fd[c.fileno()] = c
                        poller.register(c, select.POLLIN | select.POLLHUP | select.POLLERR)
                readable = [by_fd[fd] for fd, _ in poller.poll(0) if fd in by_fd]
            else:
                readable = select.select(conns, [], [], 0)[0]
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


class GateSink(Sink):
    """The gate socket as an output of the run: listening from :class:`Opened` (before the source
    connects) until :class:`Ended`, whose ``end`` line is its last."""

    order = 10
    summary_key = "gate_port"
    takes = (Opened, GateLine, Blink, Ended)

    def __init__(self, port: int) -> None:
        self.port_asked = port
        self.server: GateServer | None = None
        self.port: int | None = None  # once listening (port 0: the one chosen)
        self.tap: Any = None

    @classmethod
    def from_config(
        cls, live: Any, *, announce: Callable[[str], None] | None = None
    ) -> GateSink | None:
        return cls(live.gate_port) if live.gate_port is not None else None

    def put(self, item: Item) -> None:
        match item:
            case GateLine(line=line):
                if self.server is not None:
                    self.server.send(line)
            case Blink(event=ev):
                self._blink(ev)
            case Opened(tap=tap):
                self.tap = tap
                if self.server is None:
                    self.server = GateServer(self.port_asked, self._hello)
                    self.port = self.server.port
                    tap.say(f"gate: JSON lines on tcp://127.0.0.1:{self.port}")
            case Ended(reason=reason):
                self._end(reason)

    def _hello(self) -> dict[str, Any]:
        # no tap lock here: the gate's accept thread holds the gate's lock, which the sink takes
        # under the tap's
        tap = self.tap
        tr = tap.tracker
        age = tap.age_s()
        return {
            "event": "hello",
            "version": __version__,
            "source": tap.source,
            "stem": tap.stem,
            "state": tr.state.value,
            "since_frame": tr.since_frame,
            "since_s": finite(tr.since_s),
            "frame": tr.last_frame,
            "timestamp_s": finite(tr.last_s),
            "stable_ms": tr.stable_s * 1000.0,
            "max_blink_ms": tr.max_blink_s * 1000.0,
            "max_age_ms": tap.max_age_s * 1000.0,
            "settle_ms": tap.debouncer.settle_s * 1000.0,
            "face_lost_ms": tap.debouncer.face_lost_s * 1000.0,
            "latest_frame": tap.fresh_frame,
            "latest_s": finite(tap.fresh_s),
            "age_ms": finite(age * 1000.0),
            "stale": tap.stale_now(),
            "sent_time": time.perf_counter(),
        }

    def _blink(self, ev: Any) -> None:
        if self.server is None:
            return
        tap = self.tap
        self.server.send(
            {
                "event": "blink",
                "blink": ev.blink,
                "start_frame": ev.start_frame,
                "end_frame": ev.end_frame,
                "start_s": ev.start_s,
                "end_s": ev.end_s,
                "duration_ms": ev.duration_ms,
                "amplitude": finite(ev.amplitude),
                "complete": bool(ev.complete),
                "kind": getattr(ev, "kind", "blink"),
                "lsl_time": tap.lsl_time(ev.start_s),
                "latest_frame": tap.fresh_frame,
                "latest_s": finite(tap.fresh_s),
                "age_ms": finite(tap.age_s() * 1000.0),
                "sent_time": time.perf_counter(),
            }
        )

    def _end(self, reason: str | None) -> None:
        """The answers end: the ``end`` line, then the socket closes (before the run's files are
        written)."""
        if self.server is not None:
            tr = self.tap.tracker
            self.server.close(
                {
                    "event": "end",
                    "reason": reason,
                    "frame": tr.last_frame,
                    "timestamp_s": finite(tr.last_s),
                    "sent_time": time.perf_counter(),
                }
            )
            self.server = None

    def summary(self) -> int | None:
        return self.port
