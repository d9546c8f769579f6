"""Live frame sources: a camera, a network stream, a Basler/GenICam camera.

A live source is a :class:`~eyeblink.sources.files.FrameSource` whose frames arrive in real time.
Besides ``__iter__`` (``Frame`` records, as for files) it has :meth:`LiveSource.capture`, which
yields :class:`Captured` records ``(image, timestamp_s, arrival_s)``: ``arrival_s`` is
``time.perf_counter()`` (``CLOCK_MONOTONIC`` on Linux, one clock for every process) taken the moment
the frame was received and decoded; the live pipeline measures every latency from it.

``timestamp_s`` is the source's own clock when it has one (a stream's presentation timestamps, a
Basler camera's tick counter), else the arrival time; both are relative to the first frame.
``describe()["timestamps"]`` records which (``stream_pts``, ``camera_clock``, ``arrival_monotonic``)
and ``describe()["timestamps_from"]`` counts the frames that used each.

Source syntax (:func:`open_live_source`)::

    0, camera:0, /dev/video0          a V4L2 camera through OpenCV
    udp://…, tcp://…, rtsp://…, rtp://…, srt://…, http(s)://…
                                      a network stream FFmpeg can open (PyAV, low-latency options)
    basler:, basler:SERIAL            a Basler / GenICam camera through pypylon (extra ``basler``)

A stream that ends or fails, or a camera that disconnects, ends the capture: end of stream returns
normally (the run ends cleanly, with a message); a lost connection raises :class:`SourceLostError`
after ``reconnect`` attempts (streams only).
"""

from __future__ import annotations

import errno
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from eyeblink import host
from eyeblink.errors import ConfigError, EyeblinkError, MissingExtraError, VideoOpenError
from eyeblink.frames import Frame
from eyeblink.sources.clock import PROBE_FACTOR, ClockCheck, probe_verdict
from eyeblink.sources.files import FrameSource, luma, open_av

__all__ = [
    "STREAM_SCHEMES",
    "BaslerSource",
    "CameraSource",
    "Captured",
    "LiveSource",
    "PortInUseError",
    "SourceLostError",
    "StreamOptions",
    "StreamSource",
    "open_live_source",
]

log = logging.getLogger("eyeblink.live")

#: URL schemes handed to FFmpeg (PyAV) as network streams.
STREAM_SCHEMES: tuple[str, ...] = (
    "udp",
    "tcp",
    "rtsp",
    "rtsps",
    "rtp",
    "srt",
    "http",
    "https",
    "rtmp",
)

#: FFmpeg demuxer options of live mode: probe as little as possible before the first frame
#: (``probesize``/``analyzeduration``), and ask demuxers for their low-delay path. Not
#: ``fflags=nobuffer``: it discards the packets read while probing (the first frames are lost;
#: measured with rawvideo in NUT over TCP). A stream whose frame size is unknown after this short
#: probe is reopened once with FFmpeg's default probing.
LOW_LATENCY_OPTIONS: dict[str, str] = {
    "probesize": "32",
    "analyzeduration": "0",
    "flags": "low_delay",
}


class SourceLostError(EyeblinkError):
    """A live source failed part-way (connection lost, camera unplugged, read timeout)."""

    exit_code = 4


class PortInUseError(VideoOpenError):
    """A listening stream (``tcp://HOST:PORT?listen=1``, ``udp://@:PORT``) cannot bind: the port
    is taken."""


def _port_in_use(url: str) -> str:
    m = re.match(r"^[a-z0-9+.-]+://(?:[^@/]*@)?(\[[^\]]*\]|[^:/?#]*)?:(\d+)", url, re.IGNORECASE)
    port = m.group(2) if m else None
    where = f"port {port}" if port else "its port"
    show = f" (ss -ltnp 'sport = :{port}' shows it)" if port else ""
    return (
        f"cannot listen on {url}: {where} is already in use by another program (another eyeblink "
        "live, "
        "or a sender listening there itself); pick another port in the URL and point the sender "
        "at it, or "
        f"stop the other listener{show}"
    )


class Captured(NamedTuple):
    """One frame as a live source delivers it."""

    image: np.ndarray  # uint8 (H, W) gray
    timestamp_s: float  # the source's clock (or arrival), seconds since the first frame
    arrival_s: float  # time.perf_counter() when the frame was received and decoded


#: the rate assumed for a source whose rate is not known (the ring, the eye-model choice)
UNKNOWN_FPS = 500.0
#: frames read at connection to measure a stream's frame rate from its timestamps
#: (StreamSource._probe_rate)
RATE_PROBE_FRAMES = 16
#: ... or at most this long (a slow stream)
RATE_PROBE_S = 0.5
#: a stream whose timestamps disagree with its arrival times is read on until its frames span this
#: much arrival time (a burst of the sender's is no verdict) ...
RATE_PROBE_MIN_SPAN_S = 0.25
#: ... or this many frames
RATE_PROBE_MAX_FRAMES = 600


class LiveSource(FrameSource):
    """A source whose frames arrive in real time (see the module docstring)."""

    kind: str = "live"
    spec: str

    def __init__(self, spec: str, name: str) -> None:
        self.spec = spec
        self.path = spec  # type: ignore[assignment]  # the summary's "input": the source as given
        self.name = name
        self.nominal_fps: float | None = None
        self.frame_count_hint = None
        self.width = 0
        self.height = 0
        self._ts_counts: dict[str, int] = {}
        self._t0_arrival: float | None = None
        #: the source's own clock (stream timestamps, a camera's ticks) checked against the arrival
        #: clock
        self.clock = ClockCheck(spec)
        #: the frame rate measured at connection (a stream's first frames; None: not measured),
        #: which sizes the ring
        self.measured_fps: float | None = None
        self.end_reason: str | None = None
        #: set by the live run: while it returns True, waiting for a sender stops (a signal arrived)
        self.cancelled: Any = None

    def start(self) -> None:
        """Connect a source opened with ``connect=False`` (a stream); a no-op for the others.

        Live runs call this once their workers are ready, just before the capture: a stream
        sends from the moment it is connected, and what it sends before the capture reads it
        waits in the socket and comes out late (cameras only start streaming in :meth:`capture`).
        """

    def capture(self) -> Iterator[Captured]:
        """Yield frames as they arrive, until the source ends (returns) or fails (raises)."""
        raise NotImplementedError

    #: a run's callbacks on the source (not handed to another process with it)
    CALLBACKS: tuple[str, ...] = ("cancelled", "on_packet")

    def connection_state(self) -> dict[str, Any]:
        """What :meth:`start` found (size, rates, the clock, what it read), without the open handles
        and the frames it holds: a live run's loader connects and hands this to the parent
        (:meth:`adopt`)."""
        state = self.__getstate__()
        for name in self.CALLBACKS:
            state.pop(name, None)
        return state

    def adopt(self, state: dict[str, Any]) -> None:
        """Take over the state another process's copy of this source found when it connected."""
        self.__dict__.update(state)

    def __iter__(self) -> Iterator[Frame]:
        for i, cap in enumerate(self.capture()):
            yield Frame(i, cap.timestamp_s, cap.image)

    def _arrival_ts(self, arrival: float) -> float:
        if self._t0_arrival is None:
            self._t0_arrival = arrival
        self._ts_counts["arrival_monotonic"] = self._ts_counts.get("arrival_monotonic", 0) + 1
        return arrival - self._t0_arrival

    def _gray(self, img: np.ndarray) -> np.ndarray:
        if img.ndim == 3:
            import cv2

            img = cv2.cvtColor(
                img, cv2.COLOR_BGR2GRAY if img.shape[2] == 3 else cv2.COLOR_BGRA2GRAY
            )
        if img.dtype != np.uint8:
            img = (img >> 8).astype(np.uint8) if img.dtype == np.uint16 else img.astype(np.uint8)
        if self.width and (img.shape[1], img.shape[0]) != (self.width, self.height):
            raise SourceLostError(
                f"{self.spec}: frame size changed from {self.width}x{self.height} to "
                f"{img.shape[1]}x{img.shape[0]} mid-run; restart the run with the new size"
            )
        return np.ascontiguousarray(img)

    def _own_clock(self, ts: float, arrival: float, kind: str) -> float:
        """A frame stamped ``ts`` by the source's own clock (``kind``): the timestamp to use, the
        arrival clock's once that clock is not believable
        (:class:`~eyeblink.sources.clock.ClockCheck`)."""
        out = self.clock.stamp(ts, arrival)
        kind = kind if self.clock.believed else "arrival_monotonic"
        self._ts_counts[kind] = self._ts_counts.get(kind, 0) + 1
        return out

    def _timestamps_kind(self) -> str:
        if not self._ts_counts:
            return "none"
        return max(self._ts_counts, key=lambda k: self._ts_counts[k])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.spec,
            "width": self.width,
            "height": self.height,
            "nominal_fps": self.nominal_fps,
            "output": "gray",
            "timestamps": self._timestamps_kind(),
            "timestamps_from": dict(self._ts_counts),
            "end_reason": self.end_reason,
            "measured_fps": self.measured_fps,
            "clock": self.clock.summary(),
        }


# --------------------------------------------------------------------------- network streams


@dataclass(frozen=True)
class StreamOptions:
    """How a network stream is opened and read.

    ``options``: FFmpeg demuxer/protocol options added to :data:`LOW_LATENCY_OPTIONS`
    (``--stream-option KEY=VALUE``). ``open_timeout_s``: how long to wait for the sender (a refused
    TCP connection is retried until then; an RTSP handshake). ``read_timeout_s``: a stream silent
    for this long counts as lost. ``reconnect``: how many times a lost or ended stream is reopened
    before the run ends (``--reconnect N``), waiting ``reconnect_delay_s`` between tries.
    """

    options: dict[str, str] = field(default_factory=dict)
    open_timeout_s: float = 10.0
    read_timeout_s: float = 5.0
    reconnect: int = 0
    reconnect_delay_s: float = 1.0

    def __post_init__(self) -> None:
        from eyeblink.config import check_range

        for key in ("open_timeout_s", "read_timeout_s", "reconnect", "reconnect_delay_s"):
            # the live settings' one check (eyeblink.config.LIVE_RANGES)
            check_range(key, getattr(self, key))


class StreamSource(LiveSource):
    """A network stream opened by FFmpeg through PyAV (udp, tcp, rtsp, rtp, srt, http(s), rtmp).

    Timestamps are the stream's presentation timestamps (``stream_pts``) relative to its first
    frame; frames without one get their arrival time. After a reconnect the new segment's timestamps
    continue from the arrival time of its first frame, so they keep increasing. Opening checks that
    the sender is there and reads the frame size: it fails with
    :class:`~eyeblink.errors.VideoOpenError` (no retries at start-up: a wrong URL should say so at
    once). With ``connect=False`` that happens in :meth:`start` (live runs connect once their
    workers are ready); until then ``width``, ``height`` and ``nominal_fps`` are unknown (0, 0,
    None).
    """

    kind = "stream"
    #: the connection, and the frames of the rate probe: the connecting process's own
    HANDLES = ("_container", "_probed", "_probed_packets", "_packets")

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        options: StreamOptions | None = None,
        connect: bool = True,
    ) -> None:
        super().__init__(url, name or _stream_name(url))
        self.opts = options or StreamOptions()
        self.reconnects = 0
        self._container: Any = None
        self._info: dict[str, Any] = {}
        #: the frames read at connection to measure the rate (:meth:`_probe_rate`), handed out first
        #: by capture
        self._probed: list[tuple[Any, np.ndarray, float]] = []
        self._probed_packets: list[Any] = []  # and their packets (for on_packet)
        self._packets: Any = None  # the demuxer those frames came from (capture goes on with it)
        #: set by a live run that records a compressed stream: called with every demuxed packet, in
        #: order
        self.on_packet: Any = None
        if connect:
            self.start()

    def start(self) -> None:
        """Connect (see :meth:`LiveSource.start`). With ``reconnect`` > 0, a first connection that
        fails (a sender that sends no video, e.g. garbage, or closes at once; no sender within the
        open timeout) is tried again as a lost stream would be, counted in ``reconnects``; without
        it, it fails at once."""
        if self._container is not None or self.width:
            return
        while True:
            try:
                self._container = self._open()  # kept open: the first frames wait in its buffer
                self._probe_rate()
                return
            except PortInUseError:
                raise  # another program holds the port: trying again does not free it
            except VideoOpenError as exc:
                if self.reconnects >= self.opts.reconnect or (
                    self.cancelled is not None and self.cancelled()
                ):
                    if self.reconnects:
                        raise VideoOpenError(f"{exc} (after {self.reconnects} reconnects)") from exc
                    raise
                self.reconnects += 1
                log.warning(
                    "%s: %s; trying again (%d of %d)",
                    self.spec,
                    exc,
                    self.reconnects,
                    self.opts.reconnect,
                )
                time.sleep(self.opts.reconnect_delay_s)

    def _open(self) -> Any:
        import av

        opts = {**LOW_LATENCY_OPTIONS, **self.opts.options}
        deadline = time.perf_counter() + self.opts.open_timeout_s
        for attempt in (0, 1):
            try:
                # a sender that is starting up refuses connections for a moment: wait for it
                while True:
                    try:
                        # as for files: a title that is not UTF-8 (the ZJU AVIs' GBK titles,
                        # forwarded by an ffmpeg sender) must not stop the run
                        # (sources.files.open_av)
                        container = open_av(
                            self.spec,
                            mode="r",
                            options=opts,
                            timeout=(self.opts.open_timeout_s, self.opts.read_timeout_s),
                        )
                        break
                    except ConnectionRefusedError:
                        if time.perf_counter() > deadline or (
                            self.cancelled is not None and self.cancelled()
                        ):
                            raise
                        time.sleep(0.05)
            except (av.error.FFmpegError, OSError) as exc:
                if getattr(exc, "errno", None) == errno.EADDRINUSE:
                    raise PortInUseError(_port_in_use(self.spec)) from exc
                # our timeout stopped FFmpeg waiting for data
                if isinstance(exc, av.error.ExitError):
                    why = (
                        "a sender connected but sent no video within "
                        f"{self.opts.open_timeout_s:g} s"
                    )
                else:
                    why = getattr(exc, "strerror", None) or str(exc)
                raise VideoOpenError(
                    f"cannot open stream {self.spec} ({why}); "
                    "check that the sender is running and the URL (scheme, host, port)"
                ) from exc
            if not container.streams.video:
                container.close()
                raise VideoOpenError(f"stream {self.spec} has no video stream; send video")
            cc = container.streams.video[0].codec_context
            if cc.width > 0 and cc.height > 0:
                break
            container.close()
            if attempt:
                raise VideoOpenError(
                    f"stream {self.spec}: FFmpeg cannot tell the frame size; send a stream with "
                    "codec parameters in-band (e.g. rawvideo in NUT, or H.264 with SPS/PPS)"
                )
            opts = dict(self.opts.options)  # default probing on the second try
        stream = container.streams.video[0]
        w, h = int(stream.codec_context.width), int(stream.codec_context.height)
        if self.width and (w, h) != (self.width, self.height):
            container.close()
            raise SourceLostError(
                f"{self.spec}: the reconnected stream is {w}x{h}, not {self.width}x{self.height}"
            )
        self.width, self.height = w, h
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        self.nominal_fps = float(rate) if rate else None
        self._info = {
            "container": container.format.name,
            "codec": stream.codec_context.name,
            "pixel_format": stream.codec_context.pix_fmt,
            "time_base": str(stream.time_base),
        }
        return container

    def _probe_rate(self) -> None:
        """The stream's real frame rate, from its first frames (up to :data:`RATE_PROBE_FRAMES` or
        :data:`RATE_PROBE_S`): a container's declared rate can be its time base (NUT declares 64,000
        FPS for any stream), which would size the ring and the LSL rate 64 times too big. The rate
        the timestamps give is checked against the rate at which the frames arrived
        (:func:`~eyeblink.sources.clock.probe_verdict`); a stream whose timestamps are not
        believable is read on until :data:`RATE_PROBE_MIN_SPAN_S` of arrival time confirms it, and
        then runs on the arrival clock from its first frame, at the arrival rate. The frames are
        kept and are the capture's first. The declared rate stays where no two timestamps can be
        read."""
        import av

        container = self._container
        stream = container.streams.video[0]
        tb = stream.time_base
        declared = self.nominal_fps
        stream.thread_type = _thread_type(stream)
        self._packets = container.demux(stream)
        t0 = time.perf_counter()
        pts: list[int] = []
        arrivals: list[float] = []

        def rates() -> tuple[float | None, float | None]:
            ts_rate = arr_rate = None
            uniq = sorted(set(pts))
            if tb is not None and len(uniq) >= 2 and uniq[-1] > uniq[0]:
                ts_rate = float((len(uniq) - 1) / float((uniq[-1] - uniq[0]) * tb))
            if len(arrivals) >= 2 and arrivals[-1] > arrivals[0]:
                arr_rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
            return ts_rate, arr_rate

        def spans() -> tuple[float, float]:
            uniq = sorted(set(pts))
            ts_span = float((uniq[-1] - uniq[0]) * tb) if tb is not None and len(uniq) >= 2 else 0.0
            return ts_span, (arrivals[-1] - arrivals[0] if len(arrivals) >= 2 else 0.0)

        try:
            for packet in _timed(self._packets, self.clock.note_read):
                self._probed_packets.append(packet)
                for frame in packet.decode():
                    arrival = time.perf_counter()
                    self._probed.append((frame.pts, self._gray(luma(frame)), arrival))
                    arrivals.append(arrival)
                    if frame.pts is not None:
                        pts.append(int(frame.pts))
                waited = time.perf_counter() - t0
                if len(self._probed) >= RATE_PROBE_FRAMES or waited > RATE_PROBE_S:
                    span = arrivals[-1] - arrivals[0] if arrivals else 0.0
                    if (
                        probe_verdict(*rates(), *spans()) is None
                        or span >= RATE_PROBE_MIN_SPAN_S
                        or len(self._probed) >= RATE_PROBE_MAX_FRAMES
                        or waited > 2 * RATE_PROBE_S
                    ):
                        break
        except av.error.FFmpegError as exc:
            log.debug("%s: rate probe stopped (%s)", self.spec, exc)
        ts_rate, arr_rate = rates()
        self._info["declared_fps"] = declared
        self._info["arrival_fps"] = arr_rate
        why = probe_verdict(ts_rate, arr_rate, *spans())
        if (
            why is None
            and ts_rate is not None
            and arr_rate is not None
            and ts_rate > PROBE_FACTOR * arr_rate
        ):
            # timestamps closer than the frames came: a slow clock, or a sender (or reader) slow to
            # start; no verdict yet (the running check judges), and a ring for the claimed rate only
            # up to 4x the arrival rate (or the rate assumed when none is known): 1,000s of slots,
            # never the 64,000 a NUT time base claims
            self._info["fps_from"] = "timestamps"
            self._info["rate_confirmed"] = False
            self.nominal_fps = ts_rate
            self.measured_fps = min(ts_rate, max(PROBE_FACTOR**2 * arr_rate, UNKNOWN_FPS))
        elif why is not None and arr_rate is not None:
            # every frame, the probe's first, on the arrival clock
            self.clock.distrust("probe", why)
            self._info["fps_from"] = "arrival"
            self.nominal_fps = arr_rate
            # the ring: the first frames' arrival rate is a lower bound (a sender slow to start
            # catches up after), so at least the rate assumed when none is known
            self.measured_fps = max(arr_rate, UNKNOWN_FPS)
        elif ts_rate is not None:
            self._info["fps_from"] = "timestamps"
            self._info["rate_confirmed"] = arr_rate is not None
            if declared is None or abs(ts_rate / declared - 1) > 0.05:
                log.info(
                    "%s: %g FPS from the timestamps (the container declares %s)",
                    self.spec,
                    ts_rate,
                    f"{declared:g}" if declared else "none",
                )
            self.nominal_fps = self.measured_fps = ts_rate
        else:
            self._info["fps_from"] = "container"
            self.measured_fps = arr_rate

    @property
    def startup_frames(self) -> int:
        """Frames read at connection (the rate probe), before the capture starts: they wait for
        the ring."""
        # a copy without the frames (connection_state): the count the connection read
        return len(self._probed) or int(self.__dict__.get("_startup_count", 0))

    def connection_state(self) -> dict[str, Any]:
        return {**super().connection_state(), "_startup_count": len(self._probed)}

    @property
    def compressed(self) -> bool:
        """True when the stream's video is compressed (its packets can be recorded as they came)."""
        c = self._container
        return c is not None and c.streams.video[0].codec_context.name != "rawvideo"

    def video_stream(self) -> Any:
        """The connected stream's video stream (PyAV), e.g. the template of a recording."""
        return self._container.streams.video[0] if self._container is not None else None

    def close(self) -> None:
        self._packets = None
        if self._container is not None:
            self._container.close()
            self._container = None

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            **self._info,
            "reconnects": self.reconnects,
            "ffmpeg_options": {**LOW_LATENCY_OPTIONS, **self.opts.options},
        }

    def capture(self) -> Iterator[Captured]:
        import av

        segment_offset = 0.0  # seconds added to this segment's PTS (after a reconnect)
        last_ts = -1.0
        while True:
            container = self._container or self._open()
            self._container = container
            stream = container.streams.video[0]
            if self._packets is None:  # else the rate probe set it before its first decode
                stream.thread_type = _thread_type(stream)
            tb = stream.time_base
            first_pts: int | None = None
            failure: BaseException | None = None
            try:
                for frame_pts, image, arrival in self._frames(container, stream):
                    if self._t0_arrival is None:
                        self._t0_arrival = arrival
                    if frame_pts is not None and tb is not None:
                        if first_pts is None:
                            first_pts = frame_pts
                            if last_ts >= 0:  # a new segment continues on the arrival clock
                                segment_offset = arrival - self._t0_arrival
                                self.clock.new_segment()
                        ts = self._own_clock(
                            segment_offset + float((frame_pts - first_pts) * tb),
                            arrival,
                            "stream_pts",
                        )
                    else:
                        ts = self._arrival_ts(arrival)
                    last_ts = ts
                    yield Captured(image, ts, arrival)
                reason = "end of stream"
            except av.error.FFmpegError as exc:
                failure = exc
                reason = f"stream lost ({exc.strerror or exc})"
            finally:
                self.close()
            if self.reconnects >= self.opts.reconnect:
                self.end_reason = reason
                if failure is not None:
                    raise SourceLostError(
                        f"{self.spec}: {reason}"
                        f"{f' after {self.reconnects} reconnects' if self.reconnects else ''}; "
                        "rows so far are on disk (use --reconnect N to retry)"
                    ) from failure
                log.info("%s: %s; the live run ends", self.spec, reason)  # a normal end: no warning
                return
            # every one of the --reconnect N tries is used before giving up
            while self._container is None:
                self.reconnects += 1
                log.warning(
                    "%s: %s; reconnecting (%d of %d)",
                    self.spec,
                    reason,
                    self.reconnects,
                    self.opts.reconnect,
                )
                time.sleep(self.opts.reconnect_delay_s)
                if self.cancelled is not None and self.cancelled():
                    self.end_reason = f"{reason}; stopped while reconnecting"
                    return
                try:
                    self._container = self._open()  # waits up to the open timeout for the sender
                except VideoOpenError as exc:
                    if self.reconnects >= self.opts.reconnect:
                        self.end_reason = f"{reason}; {self.reconnects} reconnects failed"
                        raise SourceLostError(
                            f"{self.spec}: {reason}; reconnect {self.reconnects} of "
                            f"{self.opts.reconnect} failed ({exc}); rows so far are on disk"
                        ) from exc

    def _frames(self, container: Any, stream: Any) -> Iterator[tuple[Any, np.ndarray, float]]:
        """(pts, gray image, arrival) per decoded frame: the rate probe's frames first, then the
        stream's."""
        probed, self._probed = self._probed, []
        probed_packets, self._probed_packets = self._probed_packets, []
        if self.on_packet is not None:
            for packet in probed_packets:
                self.on_packet(packet)
        yield from probed
        packets, self._packets = self._packets, None
        for packet in _timed(
            packets if packets is not None else container.demux(stream), self.clock.note_read
        ):
            if self.on_packet is not None:
                self.on_packet(packet)
            for frame in packet.decode():
                arrival = time.perf_counter()
                yield frame.pts, self._gray(luma(frame)), arrival


def _timed(it: Any, note: Any) -> Iterator[Any]:
    """``it``'s items, each after calling ``note(seconds)`` with the time spent waiting for it
    (reading the socket): a capture that never waits reads slower than the sender sends
    (ClockCheck)."""
    it = iter(it)
    while True:
        t = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            return
        note(time.perf_counter() - t)
        yield item


def _thread_type(stream: Any) -> str:
    """Decoder threading: whole frames in parallel for compressed video, slices for raw frames."""
    return "AUTO" if stream.codec_context.name != "rawvideo" else "SLICE"


def _stream_name(url: str) -> str:
    """A file stem for a stream URL: ``tcp://127.0.0.1:5000?listen`` -> ``tcp-127.0.0.1-5000``."""
    m = re.match(r"^([a-z0-9+.-]+)://([^/?#]*)(/[^?#]*)?", url, re.IGNORECASE)
    if not m:
        return "stream"
    parts = [m.group(1), *re.split(r"[:@]", m.group(2).rsplit("@", 1)[-1])]
    if m.group(3) and m.group(3).strip("/"):
        parts.append(m.group(3).strip("/"))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(p for p in parts if p)).strip("-") or "stream"


# --------------------------------------------------------------------------- V4L2 / OpenCV cameras


class CameraSource(LiveSource):
    """A camera through OpenCV's V4L2 backend (``0``, ``camera:0``, ``/dev/video0``).

    Frames are timestamped on arrival (``arrival_monotonic``): OpenCV does not expose the V4L2
    buffer timestamps portably. ``fps``/``width``/``height`` are requested from the driver when
    given (a high-speed camera needs its mode set); what the driver accepted is in the summary. A
    camera that stops delivering frames (unplugged) raises :class:`SourceLostError`.
    """

    kind = "camera"

    def __init__(
        self,
        device: int | str,
        *,
        name: str | None = None,
        fps: float | None = None,
        width: int | None = None,
        height: int | None = None,
    ) -> None:
        import cv2

        label = f"camera:{device}"
        super().__init__(
            label,
            name
            or (
                f"camera{device}"
                if isinstance(device, int)
                else re.sub(r"[^A-Za-z0-9._-]+", "-", str(device)).strip("-")
            ),
        )
        self.device = device
        self._asked = {
            cv2.CAP_PROP_FRAME_WIDTH: width,
            cv2.CAP_PROP_FRAME_HEIGHT: height,
            cv2.CAP_PROP_FPS: fps,
        }
        self._cap: Any = None
        cap = self._open()
        self.width = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self.nominal_fps = float(cap.get(cv2.CAP_PROP_FPS)) or None

    HANDLES = ("_cap",)

    def _open(self) -> Any:
        """Open the camera in its mode (the one asked for); the capture opens it again where it runs
        (a live run's loader): a camera handle belongs to one process, and most drivers give it to
        one at a time."""
        import cv2

        cap = _quiet_open(cv2, self.device)
        if not cap.isOpened():
            cap.release()
            raise VideoOpenError(
                f"cannot open camera {self.device!r} ({_camera_backend(cv2)[1]}): no such device "
                f"or it is busy (another program uses it); {_camera_hint()}"
            )
        for prop, value in self._asked.items():
            if value:
                cap.set(prop, float(value))
        self._cap = cap
        return cap

    def start(self) -> None:
        if self._cap is None:
            self._open()

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None

    def capture(self) -> Iterator[Captured]:
        n = 0
        if self._cap is None:
            self._open()
        try:
            while self._cap is not None:
                ok, img = self._cap.read()
                arrival = time.perf_counter()
                if not ok or img is None:
                    self.end_reason = "camera stopped delivering frames"
                    raise SourceLostError(
                        f"{self.spec}: the camera stopped delivering frames after {n} "
                        "(unplugged or claimed by another program); rows so far are on disk"
                    )
                n += 1
                yield Captured(self._gray(img), self._arrival_ts(arrival), arrival)
        finally:
            self.close()


def _camera_backend(cv2: Any) -> tuple[int, str]:
    """OpenCV's camera backend of this platform: V4L2 on Linux, DirectShow on Windows (it opens
    high-speed modes that Media Foundation does not offer), AVFoundation on macOS."""
    if host.is_windows():
        return cv2.CAP_DSHOW, "DirectShow"
    if host.is_macos():
        return cv2.CAP_AVFOUNDATION, "AVFoundation"
    return cv2.CAP_V4L2, "V4L2"


def _camera_hint() -> str:
    if host.is_windows():
        return "give its index (0 for the first camera) and close the camera maker's viewer"
    if host.is_macos():
        return (
            "give its index (0 for the first camera) and allow camera access for the terminal "
            "in System Settings"
        )
    return "list cameras with `v4l2-ctl --list-devices` and give its index or /dev/videoN"


def _quiet_open(cv2: Any, device: int | str) -> Any:
    """``cv2.VideoCapture(device, backend)`` without OpenCV's own ``[ WARN …]`` lines for a camera
    that is not there (our one-line error says it): OpenCV logs errors only while it opens."""
    backend = _camera_backend(cv2)[0]
    logging_ = getattr(getattr(cv2, "utils", None), "logging", None)
    if logging_ is None:
        return cv2.VideoCapture(device, backend)
    old = logging_.getLogLevel()
    logging_.setLogLevel(logging_.LOG_LEVEL_ERROR)
    try:
        return cv2.VideoCapture(device, backend)
    finally:
        logging_.setLogLevel(old)


# --------------------------------------------------------------------------- Basler / GenICam


class BaslerSource(LiveSource):
    """A Basler (or other GenICam) camera through pypylon (``basler:`` or ``basler:SERIAL``).

    The camera is set to ``Mono8`` and grabbed one buffer at a time (``GrabStrategy_OneByOne``, a
    ring of ``buffers`` driver buffers), so a slow consumer makes the camera skip frames, which its
    frame counter reveals: ``describe()["camera_skipped_frames"]``. Timestamps are the camera's tick
    counter (``camera_clock``; ``tick_hz`` ticks per second: 1 GHz on USB3 cameras and the emulator,
    ``GevTimestampTickFrequency`` on GigE). ``PYLON_CAMEMU=N`` makes pylon offer N emulated cameras.
    ``features`` are set as is before grabbing (``Width``, ``AcquisitionFrameRate``, ...).
    """

    kind = "basler"
    #: the camera handle and pypylon's module: the capturing process's own (imported, opened there)
    HANDLES = ("_cam", "_pylon_module")

    @property
    def _pylon(self) -> Any:
        if self.__dict__.get("_pylon_module") is None:
            from pypylon import pylon

            self._pylon_module = pylon
        return self._pylon_module

    def __init__(
        self,
        serial: str | None = None,
        *,
        name: str | None = None,
        buffers: int = 64,
        features: dict[str, Any] | None = None,
        grab_timeout_s: float = 5.0,
    ) -> None:
        try:
            from pypylon import pylon
        except ImportError as exc:
            raise MissingExtraError(
                "a Basler camera needs pypylon: pip install 'eyeblink[basler]'"
            ) from exc
        super().__init__(f"basler:{serial or ''}", name or f"basler-{serial or 'camera'}")
        self._pylon_module = pylon
        tl = pylon.TlFactory.GetInstance()
        devices = tl.EnumerateDevices()
        if serial:
            devices = [d for d in devices if d.GetSerialNumber() == serial]
        if not devices:
            raise VideoOpenError(
                f"no Basler camera {'with serial ' + serial if serial else 'found'}; check the "
                "cable and pylon Viewer (PYLON_CAMEMU=1 offers an emulated camera)"
            )
        dev = devices[0]
        self.serial = dev.GetSerialNumber()
        self.model = dev.GetModelName()
        self.features = {"PixelFormat": "Mono8", **(features or {})}
        self.buffers = buffers
        self._cam: Any = None
        cam = self._open()
        self.width = int(cam.Width.GetValue())
        self.height = int(cam.Height.GetValue())
        self.nominal_fps = _feature(
            cam,
            "ResultingFrameRate",
            "ResultingFrameRateAbs",
            "AcquisitionFrameRate",
            "AcquisitionFrameRateAbs",
        )
        self.tick_hz = _feature(cam, "GevTimestampTickFrequency") or 1e9
        self.grab_timeout_ms = int(grab_timeout_s * 1000)
        self.skipped = 0
        # closed again: the capture (in the live loader, a forked process) opens its own handle
        self.close()

    def _open(self) -> Any:
        pylon = self._pylon
        tl = pylon.TlFactory.GetInstance()
        devices = [d for d in tl.EnumerateDevices() if d.GetSerialNumber() == self.serial]
        if not devices:
            raise SourceLostError(f"{self.spec}: Basler camera {self.serial} is gone")
        try:
            cam = pylon.InstantCamera(tl.CreateDevice(devices[0]))
            cam.Open()
            for key, value in self.features.items():
                getattr(cam, key).SetValue(value)
            cam.MaxNumBuffer.SetValue(self.buffers)
        except Exception as exc:  # pylon raises its own GenICam exception types
            raise VideoOpenError(
                f"cannot configure Basler camera {self.serial}: {exc}".strip()
            ) from exc
        self._cam = cam
        return cam

    def close(self) -> None:
        cam, self._cam = getattr(self, "_cam", None), None
        if cam is not None:
            if cam.IsGrabbing():
                cam.StopGrabbing()
            cam.Close()
            cam.DestroyDevice()

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "serial": self.serial,
            "model": self.model,
            "tick_hz": self.tick_hz,
            "camera_skipped_frames": self.skipped,
        }

    def capture(self) -> Iterator[Captured]:
        pylon = self._pylon
        cam = self._cam or self._open()
        cam.StartGrabbing(pylon.GrabStrategy_OneByOne)
        t0_ticks: int | None = None
        last_id: int | None = None
        try:
            while cam.IsGrabbing():
                try:
                    waited = time.perf_counter()
                    res = cam.RetrieveResult(self.grab_timeout_ms, pylon.TimeoutHandling_Return)
                    # a grab that never waits is backed up
                    self.clock.note_read(time.perf_counter() - waited)
                except Exception as exc:  # pylon's RuntimeException: the device is gone
                    self.end_reason = "camera disconnected"
                    raise SourceLostError(
                        f"{self.spec}: camera {self.serial} disconnected ({exc}); rows so far are "
                        "on disk"
                    ) from exc
                if res is None or not res.IsValid():
                    if cam.IsCameraDeviceRemoved():
                        self.end_reason = "camera disconnected"
                        raise SourceLostError(
                            f"{self.spec}: camera {self.serial} was removed; rows so far are on "
                            "disk"
                        )
                    self.end_reason = "grab timeout"
                    raise SourceLostError(
                        f"{self.spec}: no frame for {self.grab_timeout_ms / 1000:g} s (is the "
                        "camera waiting for a hardware trigger?)"
                    )
                try:
                    arrival = time.perf_counter()
                    if not res.GrabSucceeded():
                        log.warning(
                            "%s: grab failed (%s); frame skipped",
                            self.spec,
                            res.GetErrorDescription(),
                        )
                        self.skipped += 1
                        continue
                    image = self._gray(np.array(res.Array, copy=True))
                    ticks = int(res.TimeStamp)
                    block = int(res.BlockID) if hasattr(res, "BlockID") else None
                finally:
                    res.Release()
                if block is not None and last_id is not None and block > last_id + 1:
                    self.skipped += block - last_id - 1
                last_id = block
                if ticks > 0:
                    if t0_ticks is None:
                        t0_ticks = ticks
                        self._t0_arrival = arrival
                    ts = self._own_clock((ticks - t0_ticks) / self.tick_hz, arrival, "camera_clock")
                else:
                    ts = self._arrival_ts(arrival)
                yield Captured(image, ts, arrival)
        finally:
            self.close()


def _feature(cam: Any, *names: str) -> float | None:
    for n in names:
        try:
            node = getattr(cam, n)
            return float(node.GetValue())
        except Exception:  # an absent GenICam feature raises a pylon exception; try the next name
            continue
    return None


# --------------------------------------------------------------------------- parsing


def open_live_source(
    spec: str | int,
    *,
    name: str | None = None,
    stream: StreamOptions | None = None,
    fps: float | None = None,
    basler_features: dict[str, Any] | None = None,
    connect: bool = True,
) -> LiveSource:
    """Open a live source from its command-line spelling (see the module docstring).

    ``connect=False`` defers connecting a stream to :meth:`LiveSource.start` (cameras open at once).
    """
    # live(0): the camera index the docs give
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = str(spec)
    if not isinstance(spec, str):
        raise ConfigError(
            f"live source must be a camera index (0), a stream URL or basler:[SERIAL], got {spec!r}"
        )
    text = spec.strip()
    if re.fullmatch(r"\d+", text):
        return CameraSource(int(text), name=name, fps=fps)
    low = text.lower()
    if low.startswith("camera:"):
        rest = text.split(":", 1)[1]
        if not re.fullmatch(r"\d+|/dev/\S+", rest):
            raise ConfigError(
                f"camera source {spec!r}: expected camera:INDEX (camera:0) or camera:/dev/videoN"
            )
        return CameraSource(int(rest) if rest.isdigit() else rest, name=name, fps=fps)
    if text.startswith("/dev/"):
        return CameraSource(text, name=name, fps=fps)
    if low == "basler" or low.startswith("basler:"):
        serial = text.split(":", 1)[1] if ":" in text else ""
        return BaslerSource(serial or None, name=name, features=basler_features)
    scheme = low.split("://", 1)[0] if "://" in low else None
    if scheme in STREAM_SCHEMES:
        return StreamSource(text, name=name, options=stream, connect=connect)
    raise ConfigError(
        f"unknown live source {spec!r}; give a camera (0, camera:0, /dev/video0), a stream URL "
        f"({', '.join(s + '://' for s in STREAM_SCHEMES)}) or basler:[SERIAL]; "
        "for a recorded file use `eyeblink process`"
    )
