"""The session's page in a browser while it runs: ``eyeblink live SOURCE --view`` (and ``process
--view``).

A :class:`ViewSink` is an output of the run beside LSL and the gate: it is fed what the run already
publishes (each row as written, each blink settled, each gate event), and serves one self-contained
page (``view.html``, ``view.css`` and ``view.js`` beside this module, inlined; no external script,
font or style) from a stdlib HTTP server thread on ``127.0.0.1``:

* ``/`` the page; ``/events`` a Server-Sent Events stream (a snapshot of the last minute on connect,
  then the rows, blinks, events and the status about 10 times a second, and the newest preview
  image, its JPEG inline, as often as the tab asked for: ``/want?tab=N&hz=H``, 0 while it is hidden
  or paused); ``/frame.jpg`` the newest preview image on its own.

What it costs the frames: in the sink, one list append per row and per event (the listener);
everything else runs in the view's own threads:

* the **pump** (:meth:`ViewSink._pump`, 10 Hz, and at once for a new image) turns the rows into JSON
  once for every tab, keeps the last minute for a tab that connects, and works out the status (rate,
  drops, latency, face lost, stalled);
* the **preview** (:meth:`ViewSink._preview`, at most ``max_image_hz``, only while a tab asks for
  images) asks the loader for its newest frame through :class:`PreviewGrab` (the loader copies one
  frame when asked, at most that often: a shared flag it reads per frame, otherwise nothing),
  downscales it, encodes a JPEG and publishes it once the row of that frame is written (the face box
  drawn on it is that frame's own);
* one thread per open tab writes its stream. A tab that falls a whole backlog behind is disconnected
  (its browser reconnects and gets a fresh snapshot); images are never queued: a tab gets the newest
  one when it asked for one and the last was written, so a slow tab just gets fewer of them.

One connection carries everything, so a watching browser does no request per image (each cost it ~5
ms of CPU across its processes); the page draws what came in one animation frame (see ``view.js``).

A closed tab or a killed browser is a socket that fails: its thread ends, nothing else changes.

Safety: the server listens on ``127.0.0.1`` (requests whose ``Host`` is not a loopback name are
refused, so a web page elsewhere cannot read it through DNS rebinding). ``--view-host ADDR`` listens
on ``ADDR`` and then every request must carry the random token of the printed URL (``?token=...``).
"""

from __future__ import annotations

import base64
import contextlib
import html
import ipaddress
import json
import logging
import math
import re
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

import numpy as np

from eyeblink.errors import ConfigError
from eyeblink.runtime.costs import CoresBusy
from eyeblink.runtime.live.preview import PreviewGrab

__all__ = ["PreviewGrab", "ViewSink", "check_view_host", "serving"]

log = logging.getLogger("eyeblink.view")

_ASSETS = Path(__file__).resolve().parent
#: the longest side of a preview image on the page, at most (a frame is reduced by a whole factor:
#: 640x480 gives 320x240, an average of 2x2 pixels, ~0.05 ms, where a reduction to 480 wide costs
#: ~0.7 ms)
IMAGE_SIDE = 400
#: the page's status (rate, drops, latency, banners, the gate's state), times a second (each change
#: of the page's text costs the browser a frame: ~1.2 s of CPU a minute at 5 Hz on a 2-core machine)
STATUS_HZ = 2.0
#: seconds of rows, blinks and events the page can scroll back over (and a new tab gets at once)
HISTORY_S = 60.0
#: how often the pump sends what came (Hz; the page draws the trace 10 times a second; a new image
#: is sent at once)
PUMP_HZ = 10.0
#: a tab more than this many messages behind is disconnected (its browser reconnects with a fresh
#: snapshot)
MAX_BACKLOG = 2000
#: no row written for this long (wall clock) while the run goes on: the page says the stream stalled
STALL_S = 0.5
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
#: rows waiting for the pump at most (~100 s at 1,000 FPS); it takes them 10 times a second
MAX_PENDING = 100_000
#: the preview images, at most this many a second (each one costs a browser ~9 ms of CPU to decode
#: and draw in software: a tenth of a core at 10 a second, a quarter at 30)
MAX_IMAGE_HZ = 10.0
#: while the run falls behind (a frame dropped, a row past the latency bound, in the last BUSY_S
#: seconds) or the machine is busy (its cores more than BUSY_CORES busy over the last seconds, the
#: browser's share included), the preview images are made at most this often (Hz; the page then
#: draws its trace as often, in the same browser frames)
BUSY_IMAGE_HZ = 5.0
BUSY_CORES = 0.7
BUSY_S = 5.0
#: an image no tab got (a tab that asked for none, a slow browser) is replaced by the next one only
#: after this long
UNFETCHED_S = 1.0
#: rows of a new tab's snapshot encoded per call: the session's thread gets the GIL between two (one
#: call of a minute at 500 FPS held it for tens of milliseconds)
SNAPSHOT_CHUNK = 500


def check_view_host(host: str) -> str:
    """``--view-host``: an address of this machine to listen on (one line naming the fix
    otherwise)."""
    host = str(host).strip()
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ConfigError(
                "--view-host must be an IP address of this machine (e.g. 0.0.0.0 or "
                "192.168.1.20), "
                f"got {host!r}"
            ) from None
    return host


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def _r(x: float, nd: int) -> float | None:
    return round(x, nd) if x == x and not math.isinf(x) else None


def _row_item(r: Any) -> tuple[Any, ...]:
    """A row as the page gets it: frame, t, ear left, ear right, baseline, closure, face, dropped,
    age ms, box.

    A tuple of numbers: the garbage collector stops tracking it at its first collection, so the
    minute of history (30,000 rows at 500 FPS) adds nothing to the full collections of the session's
    process (as lists they made one of 25-30 ms every few seconds once the history was full, and a
    frame's row waited behind it)."""
    return (
        r.frame,
        _r(r.timestamp_s, 5),
        _r(r.ear_left, 4),
        _r(r.ear_right, 4),
        _r(r.baseline_ear, 4),
        _r(r.closure, 3),
        r.face,
        r.dropped,
        _r(r.age_ms, 1),
        *(None if v != v else int(v) for v in (r.face_x0, r.face_y0, r.face_x1, r.face_y1)),
    )


def _thread_cpu_s(tid: int) -> float:
    """CPU seconds (user + system) of thread ``tid`` (native id) of this process; 0 where the OS
    does not say (:func:`eyeblink.host.thread_cpu_seconds`: macOS)."""
    from eyeblink.host import thread_cpu_seconds

    return thread_cpu_seconds(tid) or 0.0


class _FileRow(NamedTuple):
    """A frames.csv row of ``process`` with what the page reads of a live run's
    :class:`~eyeblink.runtime.live.publish.LiveRow` (no arrival: a file has no latency)."""

    frame: int
    timestamp_s: float
    face: int
    ear_left: float
    ear_right: float
    baseline_ear: float
    face_x0: float
    face_y0: float
    face_x1: float
    face_y1: float
    closure: float
    dropped: int = 0
    age_ms: float = math.nan


def _file_row(row: Any) -> _FileRow:
    """``FRAME_COLUMNS`` values as the page's row."""
    f = [math.nan if v is None else float(v) for v in row[3:14]]
    return _FileRow(
        int(row[0]), float(row[1]), int(row[2]), f[0], f[1], f[3], f[6], f[7], f[8], f[9], f[10]
    )


def _blink_item(ev: Any) -> dict[str, Any]:
    return {
        "blink": ev.blink,
        "kind": getattr(ev, "kind", "blink"),
        "start_frame": ev.start_frame,
        "end_frame": ev.end_frame,
        "start_s": _r(ev.start_s, 5),
        "end_s": _r(ev.end_s, 5),
        "duration_ms": _r(ev.duration_ms, 1),
        "amplitude": _r(ev.amplitude, 3),
        "complete": bool(ev.complete),
    }


class _Stream:
    """The messages every tab gets, numbered; a tab's thread sends those past its cursor."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.items: deque[tuple[int, bytes]] = deque(maxlen=MAX_BACKLOG)
        self.seq = 0
        self.closed = False
        # the newest image's (seq, message): only the newest is sent
        self.image: tuple[int, bytes] | None = None

    def put(self, event: str, data: Any) -> None:
        self.put_all([(event, data)])

    def put_all(
        self, messages: list[tuple[str, Any]], image: tuple[int, dict[str, Any]] | None = None
    ) -> None:
        """Messages sent together (one wake-up and one write per tab), and the newest image (seq,
        message): a tab that wants one gets it after these messages (the row of its frame is among
        them or before)."""
        if not messages and image is None:
            return
        blob = b"".join(
            f"event: {event}\ndata: "
            f"{json.dumps(data, separators=(',', ':'), allow_nan=False)}\n\n".encode()
            for event, data in messages
        )
        img = (
            None
            if image is None
            else (
                image[0],
                b"event: image\ndata: "
                + json.dumps(image[1], separators=(",", ":"), allow_nan=False).encode()
                + b"\n\n",
            )
        )
        with self.cond:
            if blob:
                self.seq += 1
                self.items.append((self.seq, blob))
            if img is not None:
                self.image = img
            self.cond.notify_all()

    def after(
        self, cursor: int, timeout: float, image: int = -1
    ) -> tuple[int, list[bytes], int] | None:
        """(new cursor, messages past ``cursor`` and the newest image when newer than ``image``, the
        image the tab then has); None when the tab fell off the backlog. ``image`` -1: the tab wants
        no image now."""
        with self.cond:
            newer = image >= 0 and self.image is not None and self.image[0] > image
            if self.seq == cursor and not self.closed and not newer:
                self.cond.wait(timeout)
            img = (
                self.image
                if image >= 0 and self.image is not None and self.image[0] > image
                else None
            )
            if not self.items or self.seq == cursor:
                return cursor, [] if img is None else [img[1]], img[0] if img else image
            first = self.items[0][0]
            if cursor + 1 < first:
                return None
            return (
                self.seq,
                [b for s, b in self.items if s > cursor] + ([] if img is None else [img[1]]),
                img[0] if img else image,
            )

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


@contextlib.contextmanager
def serving(
    *, port: int = 0, host: str = "127.0.0.1", announce: Callable[[str], None] | None = None
) -> Iterator[ViewSink]:
    """``process --view`` (and :func:`eyeblink.process` with ``view=True``): the page open while the
    inputs are processed (each shown through :meth:`ViewSink.file_writer`), closed at the end."""
    view = ViewSink(port=port, host=host, announce=announce)
    view.open(mode="file")
    try:
        yield view
    finally:
        view.close("all inputs processed")


class ViewSink:
    """The browser view of a run: an output fed rows, blinks and events; serves the page in its own
    threads.

    Interface (what a run calls): :meth:`open` once before the first frame, :meth:`row`,
    :meth:`blink` and :meth:`event` as they are written, :meth:`close` at the end; :attr:`preview`
    is handed to the loader. A live run feeds it as a sink of its tap
    (:class:`eyeblink.runtime.live.sinks.view.ViewOutput`), ``process --view`` through the writer of
    each input (:meth:`file_writer`).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        history_s: float = HISTORY_S,
        max_image_hz: float = MAX_IMAGE_HZ,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.host = check_view_host(host)
        self.port_asked = int(port)
        if not 0 <= self.port_asked <= 65535:
            raise ConfigError(
                f"--view-port must be a port number 0..65535 (0: any free port), got {port}"
            )
        self.loopback = _is_loopback(self.host)
        self.token = None if self.loopback else secrets.token_urlsafe(18)
        self.history_s = float(history_s)
        self.image_period_s = 1.0 / max(0.5, float(max_image_hz))
        self.announce = announce
        self.preview = PreviewGrab()
        self.url = ""
        self.port: int | None = None
        self.info: dict[str, Any] = {
            "source": "",
            "stem": "",
            "mode": "live",
            "fps": None,
            "eye_model": "",
        }
        self.tap: Any = None  # the live run's LiveTap (the gate's state); None for a file
        self.face_lost_s = 0.2
        self._lock = threading.Lock()
        self._rows: list[Any] = []
        self._blinks: list[Any] = []
        self._events: list[Any] = []
        self._stream = _Stream()
        self._history: deque[tuple[Any, ...]] = deque()
        self._blink_history: deque[dict[str, Any]] = deque(maxlen=2000)
        self._event_history: deque[dict[str, Any]] = deque(maxlen=2000)
        # (wall time, dropped, age_ms, t) last 1 s
        self._recent: deque[tuple[float, int, float, float]] = deque()
        #: (seq, frame, jpeg, width, height, the frame's own width and height, its eye points or
        #: None)
        self._image: tuple[int, int, bytes, int, int, int, int, Any] | None = None
        self._image_seq = 0
        self._ready: tuple[int, dict[str, Any]] | None = None  # an image for the pump to send
        # the newest image a tab got: the next is made once one did (the tabs' own pace)
        self._fetched = 0
        # images a second each open tab asked for (0: none, hidden or paused)
        self._tab_hz: dict[int, float] = {}
        # (monotonic) until then the run is taken as falling behind: fewer images
        self._busy_until = 0.0
        self._late_seen = 0
        self._cores = CoresBusy()
        self._clients = 0
        self._tabs_total = 0
        self._new_input: dict[str, Any] | None = None
        self._pump_failed = False
        self._stop = threading.Event()
        # the pump's: a new image (an input, the end) is sent at once
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: ThreadingHTTPServer | None = None
        self._page: bytes | None = None
        self.rows_in = 0
        self.dropped_total = 0
        self.newest_frame = -1
        self.newest_s = math.nan
        self._last_row_wall = math.nan
        # capture time of the first face-less analysed row of the run
        self._noface_since: float | None = None
        self._noface_frame = -1
        self.ended: str | None = None
        self.images_sent = 0
        self.cpu_s: dict[str, float] = {}  # CPU seconds of the view's threads that ended, by role
        # native thread id -> role, of the view's threads running now
        self._alive: dict[int, str] = {}

    # ------------------------------------------------------------------ the run's calls

    def open(
        self,
        *,
        source: str = "",
        stem: str = "",
        mode: str = "live",
        fps: float | None = None,
        eye_model: str = "",
        tap: Any = None,
    ) -> None:
        """Listen (:meth:`bind`, if not yet) and start the threads."""
        self.info.update(source=source, stem=stem, mode=mode, fps=fps, eye_model=eye_model)
        self.tap = tap
        if tap is not None:
            self.face_lost_s = tap.debouncer.face_lost_s
        if self._threads:
            return
        self.bind()
        assert self._server is not None
        self._page = self._render_page()
        for name, target in (
            ("serve", self._server.serve_forever),
            ("pump", self._pump),
            ("preview", self._preview),
        ):
            t = threading.Thread(
                target=self._timed(name, target), name=f"eyeblink-view-{name}", daemon=True
            )
            t.start()
            self._threads.append(t)
        log.info("view: %s", self.url)
        if self.announce is not None:
            self.announce(f"view: {self.url}")

    def bind(self) -> None:
        """Take the port now, before any model loads (one line naming the fix when it cannot be
        had)."""
        if self._server is not None:
            return
        handler = _handler(self)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        server_cls = type(
            "ViewServer",
            (ThreadingHTTPServer,),
            {"address_family": family, "daemon_threads": True, "allow_reuse_address": True},
        )
        try:
            self._server = server_cls((self.host, self.port_asked), handler)
        except OSError as exc:
            raise ConfigError(
                f"--view-port {self.port_asked}: cannot listen on {self.host}:{self.port_asked} "
                f"({exc.strerror or exc}); choose another port or 0 for any free one"
            ) from None
        self.port = int(self._server.server_address[1])
        shown = f"[{self.host}]" if ":" in self.host else self.host
        if self.host in ("0.0.0.0", "::"):
            shown = socket.gethostname()
        self.url = f"http://{shown}:{self.port}/" + (f"?token={self.token}" if self.token else "")

    def set_info(self, **info: Any) -> None:
        self.info.update({k: v for k, v in info.items() if v is not None})

    def row(self, r: Any, published: bool = True) -> None:
        """A row as written (in the sink's thread: one append)."""
        with self._lock:
            self._rows.append(r)
            # the pump is gone (a bug): the view goes stale, the run goes on
            if len(self._rows) > MAX_PENDING:
                del self._rows[: len(self._rows) // 2]

    def blink(self, ev: Any) -> None:
        with self._lock:
            self._blinks.append(ev)

    def event(self, ev: Any, line: Any = None) -> None:
        with self._lock:
            self._events.append(ev)

    def close(self, reason: str | None = None) -> None:
        """The run ended: the tabs are told (the page says so), the threads end, the port is
        freed."""
        if self._server is None:
            return
        if not self._threads:  # bound, never opened (the run stopped before its source connected)
            self._server.server_close()
            self._server = None
            self.preview.close()
            return
        self.ended = reason or "ended"
        self._stop.set()
        self._wake.set()
        for t in self._threads[1:]:
            t.join(timeout=2.0)
        self._stream.close()
        self._server.shutdown()
        self._server.server_close()
        self._threads[0].join(timeout=2.0)
        self._server = None
        self.preview.close()

    def file_writer(self, outdir: Path, source: Any) -> Any:
        """``process --view``: the writer of one input, whose rows and blinks the page shows (a new
        input starts a new page: the history is cleared)."""
        from eyeblink.outputs.export import ResultWriter

        view = self

        class ViewedWriter(ResultWriter):
            def write_frame(self, row: Any) -> None:
                super().write_frame(row)
                view.row(_file_row(row))

            def write_blink(self, ev: Any) -> None:
                super().write_blink(ev)
                view.blink(ev)

        writer = ViewedWriter(outdir, source.name)
        with self._lock:
            self._rows, self._blinks, self._events = [], [], []
            self._new_input = {
                "source": str(getattr(source, "path", "") or source.name),
                "stem": source.name,
                "fps": getattr(source, "fps", None),
            }
        self._wake.set()
        return writer

    def summary(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "host": self.host,
            "port": self.port,
            "token": self.token is not None,
            "tabs": self._tabs_total,
            "images": self.images_sent,
            "frames_grabbed": self.preview.grabs,
            "cpu_s": {k: round(v, 3) for k, v in self.cpu_now().items()},
        }

    # ------------------------------------------------------------------ threads

    def _timed(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        """``target`` with its thread's CPU time counted under ``name`` (``cpu_s`` in the
        summary)."""

        def run() -> None:
            tid = threading.get_native_id()
            with self._lock:
                self._alive[tid] = name
            try:
                target()
            finally:
                with self._lock:
                    self._alive.pop(tid, None)
                    self.cpu_s[name] = self.cpu_s.get(name, 0.0) + time.thread_time()

        return run

    def cpu_now(self) -> dict[str, float]:
        """CPU seconds of the view's threads so far, by role (the threads still running asked of
        the OS)."""
        with self._lock:
            out = dict(self.cpu_s)
            alive = dict(self._alive)
        for tid, name in alive.items():
            out[name] = out.get(name, 0.0) + _thread_cpu_s(tid)
        return out

    def _take(self) -> tuple[list[Any], list[Any], list[Any]]:
        with self._lock:
            new, self._new_input = self._new_input, None
            if new is not None:  # process --view: the next input; every tab starts a new page
                self.info.update(new)
                self._history.clear()
                self._blink_history.clear()
                self._event_history.clear()
                self._recent.clear()
                self.rows_in = self.dropped_total = 0
                self._noface_since = None
                self._image = None
                self._stream.put("reset", self._hello())
            rows, self._rows = self._rows, []
            blinks, self._blinks = self._blinks, []
            events, self._events = self._events, []
        return rows, blinks, events

    def _pump(self) -> None:
        period = 1.0 / PUMP_HZ
        status_period = 1.0 / STATUS_HZ
        next_status = time.perf_counter()
        while True:
            stopping = self._stop.is_set()
            out: list[tuple[str, Any]] = []  # one message of this cycle's news to every tab
            try:
                rows, blinks, events = self._take()
                now = time.perf_counter()
                if rows:
                    items = [_row_item(r) for r in rows]
                    self._last_row_wall = now
                    self._account(rows, now)
                    hist = self._history
                    hist.extend(items)
                    newest = items[-1][1]
                    keep = self.history_s
                    while (
                        hist
                        and newest is not None
                        and hist[0][1] is not None
                        and newest - hist[0][1] > keep
                    ):
                        hist.popleft()
                    out.append(("rows", items))
                for ev in blinks:
                    item = _blink_item(ev)
                    self._blink_history.append(item)
                    out.append(("blink", item))
                for ev in events:
                    item = {
                        "event": ev.event,
                        "frame": ev.frame,
                        "t": _r(ev.timestamp_s, 5),
                        "state": ev.state.value,
                    }
                    self._event_history.append(item)
                    out.append(("event", item))
                if stopping or time.perf_counter() >= next_status:
                    out.append(("status", self._status(now)))
                    next_status = max(next_status + status_period, time.perf_counter())
            # a bug of the view: said once; it goes on with the next rows, the run never sees it
            except Exception:
                if not self._pump_failed:
                    log.exception("view: the page's data could not be made")
                self._pump_failed = True
            if stopping:
                out.append(("end", {"reason": self.ended}))
            ready, self._ready = self._ready, None
            self._stream.put_all(out, ready)
            if stopping:
                return
            self._wake.wait(period)  # a new image wakes the pump at once
            self._wake.clear()

    def _account(self, rows: list[Any], now: float) -> None:
        """Counts and the face-lost run of the rows just taken (in the pump)."""
        recent = self._recent
        for r in rows:
            recent.append((now, r.dropped, r.age_ms, r.timestamp_s))
            if r.dropped:
                self.dropped_total += 1
                self._busy_until = time.perf_counter() + BUSY_S
                continue
            if r.face:
                self._noface_since = None
            elif self._noface_since is None:
                self._noface_since, self._noface_frame = r.timestamp_s, r.frame
        last = rows[-1]
        self.rows_in += len(rows)
        self.newest_frame, self.newest_s = last.frame, last.timestamp_s
        while recent and now - recent[0][0] > 1.0:
            recent.popleft()

    def _status(self, now: float) -> dict[str, Any]:
        recent = self._recent
        while recent and now - recent[0][0] > 1.0:
            recent.popleft()
        ages = sorted(a for _, d, a, _ in recent if not d and a == a)
        ts = [t for *_, t in recent]
        span = ts[-1] - ts[0] if len(ts) > 1 else 0.0
        noface_s = (self.newest_s - self._noface_since) if self._noface_since is not None else 0.0
        st: dict[str, Any] = {
            "frame": self.newest_frame,
            "t": _r(self.newest_s, 5),
            "rows": self.rows_in,
            "rows_per_s": len(recent),
            "source_fps": _r((len(ts) - 1) / span, 1) if span > 0 else None,
            "dropped": self.dropped_total,
            "dropped_1s": sum(d for _, d, _, _ in recent),
            "latency_ms_p50": _r(ages[len(ages) // 2], 1) if ages else None,
            "latency_ms_max": _r(ages[-1], 1) if ages else None,
            "face_lost": bool(self.rows_in and noface_s >= self.face_lost_s),
            "face_lost_frame": self._noface_frame if noface_s >= self.face_lost_s else None,
            "stalled_s": _r(now - self._last_row_wall, 2)
            if (
                self.info["mode"] == "live" and self.rows_in and now - self._last_row_wall > STALL_S
            )
            else None,
            "tabs": self._clients,
            "image_frame": self._image[1] if self._image else None,
            "images_hz": round(1.0 / self._image_period(), 1),
            "busy": self._busy(),
        }
        tap = self.tap
        if tap is not None:
            tr = tap.tracker
            st.update(
                state=tr.state.value,
                since_frame=tr.since_frame,
                held_ms=_r(tr.held_s() * 1000.0, 0),
                open_stable=bool(tr.is_open_for(tr.stable_s * 1000.0)),
                pending=tap.debouncer.pending.value if tap.debouncer.pending is not None else None,
                stale=tap.frames > 0 and tap.stale_now(),
                stale_events=tap.stale_events,
                late_rows=tap.late_rows,
            )
        return st

    def _busy(self) -> bool:
        """The run is falling behind (a frame dropped or a row late in the last :data:`BUSY_S` s) or
        the machine is busy (its cores more than :data:`BUSY_CORES` busy over the last seconds;
        where that cannot be read, a load above its cores): the view then makes fewer images
        (:data:`BUSY_IMAGE_HZ`)."""
        import os

        now = time.perf_counter()
        tap = self.tap
        if tap is not None and tap.late_rows != self._late_seen:
            self._late_seen = tap.late_rows
            self._busy_until = now + BUSY_S
        if now < self._busy_until:
            return True
        share = self._cores.share(now)  # None at its first reading: nothing known yet
        if share is not None and share > BUSY_CORES:
            self._busy_until = now + BUSY_S
            return True
        if self._cores.readable:
            return False
        from eyeblink.host import load_average

        load = load_average()
        return load is not None and load[0] > (os.cpu_count() or 1)

    def _image_period(self) -> float:
        return (
            max(self.image_period_s, 1.0 / BUSY_IMAGE_HZ) if self._busy() else self.image_period_s
        )

    def _preview(self) -> None:
        """While a tab is open: the loader's newest frame, as a JPEG, once its row is written; at
        most ``max_image_hz`` (:data:`BUSY_IMAGE_HZ` while the machine is busy), and the next one
        only once a tab got the last (or :data:`UNFETCHED_S` later), at most as often as the most
        eager tab asked (``/want``): a hidden or paused tab asks for none, a slow browser gets
        fewer."""
        import cv2

        grab = self.preview
        asked = 0.0
        last = 0.0  # when the last image was published
        wait = 0.005
        period = self.image_period_s
        checked = 0.0
        while not self._stop.wait(wait):
            now = time.perf_counter()
            wait = 0.005  # a frame asked for is taken within 5 ms of the loader's putting it
            # one copy (tabs come and go meanwhile)
            wanted = max(tuple(self._tab_hz.values()), default=0.0)
            if not wanted:
                wait = 0.1
                continue
            if now - checked > 0.5:  # the machine's business, twice a second
                period, checked = self._image_period(), now
            period = max(period, 1.0 / wanted)
            if now - last < period:
                wait = max(0.001, last + period - now)
                continue
            shown = self._image
            if (
                not asked
                and shown is not None
                and self._fetched < shown[0]
                and now - last < UNFETCHED_S
            ):
                continue  # no tab has got the last one yet
            if not asked:
                grab.request()
                asked = now
                continue
            got = grab.take(IMAGE_SIDE)
            if got is None:
                if now - asked > 1.0:
                    asked = 0.0  # no frame came (a stalled stream, the end of a file): ask again
                continue
            asked = 0.0
            last = now
            frame, img, (fh, fw) = got
            deadline = time.perf_counter() + 1.0
            while (
                self.newest_frame < frame
                and self._rows_written_frame() < frame
                and time.perf_counter() < deadline
            ):
                if self._stop.wait(0.005):
                    return
            ok, jpg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 75])
            if not ok:
                continue
            self._image_seq += 1
            # the box drawn on it is in frame pixels: the page scales by the frame's own size
            # the eye model's 12 points of this frame (put before its row was written)
            pts = grab.points(frame)
            points = (
                [[round(float(x), 1), round(float(y), 1)] for x, y in pts]
                if pts is not None and np.isfinite(pts).all()
                else None
            )
            made = (
                self._image_seq,
                frame,
                jpg.tobytes(),
                img.shape[1],
                img.shape[0],
                fw,
                fh,
                points,
            )
            self._image = made
            self.images_sent += 1
            self._ready = (
                made[0],
                {
                    "seq": made[0],
                    "frame": frame,
                    "width": made[3],
                    "height": made[4],
                    "frame_width": fw,
                    "frame_height": fh,
                    "points": points,
                    "jpeg": base64.b64encode(made[2]).decode("ascii"),
                },
            )
            self._wake.set()  # the pump sends it at once, after the rows up to its frame

    def _rows_written_frame(self) -> int:
        with self._lock:
            return self._rows[-1].frame if self._rows else -1

    # ------------------------------------------------------------------ serving

    def _render_page(self) -> bytes:
        template = (_ASSETS / "view.html").read_text(encoding="utf-8")
        fill = {
            "CSS": (_ASSETS / "view.css").read_text(encoding="utf-8"),
            "JS": (_ASSETS / "view.js").read_text(encoding="utf-8"),
            "TITLE": html.escape(f"eyeblink view: {self.info['stem'] or self.info['source']}"),
        }
        return re.sub(
            r"\{\{([A-Z_]+)\}\}", lambda m: fill.get(m.group(1), m.group(0)), template
        ).encode()

    def _hello(self) -> dict[str, Any]:
        return {
            **self.info,
            "history_s": self.history_s,
            "face_lost_ms": self.face_lost_s * 1000.0,
            "max_image_hz": round(1.0 / self.image_period_s, 1),
            "columns": [
                "frame",
                "t",
                "ear_left",
                "ear_right",
                "baseline",
                "closure",
                "face",
                "dropped",
                "age_ms",
                "x0",
                "y0",
                "x1",
                "y1",
            ],
            "stable_ms": self.tap.tracker.stable_s * 1000.0 if self.tap is not None else None,
        }

    def _serve_events(self, h: BaseHTTPRequestHandler) -> None:
        # the snapshot and the cursor at one moment: nothing missed, nothing twice
        with self._stream.cond:
            cursor = self._stream.seq
            snap: dict[str, Any] = {
                "hello": self._hello(),
                "rows": list(self._history),
                "blinks": list(self._blink_history),
                "events": list(self._event_history),
                "ended": self.ended,
            }
        rows = snap.pop("rows")
        head = json.dumps(snap, separators=(",", ":"), allow_nan=False)
        parts = [
            json.dumps(rows[i : i + SNAPSHOT_CHUNK], separators=(",", ":"), allow_nan=False)[1:-1]
            for i in range(0, len(rows), SNAPSHOT_CHUNK)
        ]
        body = head[:-1] + ',"rows":[' + ",".join(p for p in parts if p) + "]}"
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-store")
        h.send_header("X-Content-Type-Options", "nosniff")
        h.end_headers()
        with self._lock:
            self._clients += 1
            self._tabs_total += 1
            tab = self._tabs_total
            self._tab_hz[tab] = 1.0 / self.image_period_s  # until the page says otherwise
        try:
            h.wfile.write(
                b"retry: 1000\nevent: snapshot\ndata: "
                + body[:-1].encode()
                + b',"tab":'
                + str(tab).encode()
                + b"}\n\n"
            )
            h.wfile.flush()
            # the tab's newest image, when it and anything was written
            has, sent, wrote = 0, 0.0, time.perf_counter()
            while True:
                hz = self._tab_hz.get(tab, 0.0)
                # > 0: no image before then
                due = sent + 1.0 / hz - time.perf_counter() if hz > 0 else 1.0
                got = self._stream.after(
                    cursor, min(1.0, max(0.001, due)) if due > 0 else 1.0, has if due <= 0 else -1
                )
                if got is None:
                    return  # too far behind: the browser reconnects and gets a fresh snapshot
                cursor, blobs, got_image = got
                if got_image > has:
                    has, sent = got_image, time.perf_counter()
                    self._fetched = max(self._fetched, got_image)
                now = time.perf_counter()
                if blobs:
                    h.wfile.write(b"".join(blobs))
                    h.wfile.flush()
                    wrote = now
                elif self._stream.closed:
                    return
                elif now - wrote >= 1.0:
                    h.wfile.write(b": keep-alive\n\n")
                    h.wfile.flush()
                    wrote = now
        except OSError:  # the tab was closed or the browser killed: nothing else changes
            return
        finally:
            with self._lock:
                self._clients -= 1
                self._tab_hz.pop(tab, None)


def _handler(view: ViewSink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "eyeblink-view"
        protocol_version = "HTTP/1.1"

        # one connection (a tab's stream, or its image requests): its CPU counted
        def handle(self) -> None:
            view._timed("http", super().handle)()

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("view: " + format, *args)

        def _refuse(self, code: int, text: str) -> None:
            body = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _send(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header(
                "Content-Security-Policy",
                "default-src 'none'; img-src 'self'; connect-src 'self'; "
                "style-src 'unsafe-inline'; script-src 'unsafe-inline'",
            )
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if view.token is not None:
                if not secrets.compare_digest(
                    parse_qs(url.query).get("token", [""])[0], view.token
                ):
                    self._refuse(
                        403, "eyeblink view: this page needs the token of the URL the run printed\n"
                    )
                    return
            else:
                host = (
                    (self.headers.get("Host") or "").rsplit(":", 1)[0]
                    if "]" not in (self.headers.get("Host") or "")
                    else (self.headers.get("Host") or "").rsplit("]", 1)[0] + "]"
                )
                if host not in _LOOPBACK_NAMES:
                    self._refuse(
                        403,
                        "eyeblink view: served to this machine only (open the URL the run "
                        "printed)\n",
                    )
                    return
            try:
                if url.path == "/":
                    self._send(view._page or b"", "text/html; charset=utf-8")
                elif url.path == "/events":
                    self.close_connection = True
                    view._serve_events(self)
                # a tab's images a second (0: none while it is hidden or paused)
                elif url.path == "/want":
                    q = parse_qs(url.query)
                    try:
                        tab, hz = int(q.get("tab", ["0"])[0]), float(q.get("hz", ["0"])[0])
                    except ValueError:
                        self._refuse(400, "want?tab=N&hz=H\n")
                        return
                    with view._lock:
                        if tab in view._tab_hz:
                            view._tab_hz[tab] = max(0.0, min(hz, 1.0 / view.image_period_s))
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif url.path == "/favicon.ico":
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif url.path == "/frame.jpg":
                    img = view._image
                    if img is None:
                        self._refuse(404, "no image yet\n")
                    else:
                        view._fetched = max(view._fetched, img[0])
                        self._send(img[2], "image/jpeg")
                else:
                    self._refuse(404, "not found\n")
            except OSError:
                self.close_connection = True

    return Handler
