"""``eyeblink live --record FILE``: the frames as received, with their timestamps, kept beside the
session.

The live loader hands every frame it receives (those the pipeline then drops included) to a
:class:`Recorder` right after placing it in the ring; a thread of the loader writes them, so the
capture never waits for the disk. A compressed stream's packets are recorded as they came (stream
copy: :meth:`Recorder.put_packet`, called by the source for every demuxed packet). Otherwise the
recording is the frames eyeblink analysed, as it saw them: gray, full resolution, lossless
(``rawvideo``: no encoder CPU, ~0.3 MB a 640x480 frame, ~150 MB/s at 500 FPS; a lossless encoder
such as FFV1 costs more than a core at that rate), in NUT with each frame's capture time as its
presentation timestamp on a microsecond clock. So ``eyeblink process FILE`` reads the live session's
timestamps back exactly. The frames go to the muxer as they are (raw packets: no encoder, no copy
besides the packet's), ~0.25 ms of CPU a 640x480 frame.

The writer may fall behind by :data:`QUEUE_BYTES` of frames: a disk that stalls for a while, or the
burst after a live survey (its held frames, then the stream that backed up meanwhile), is absorbed
(~1.7 s of a 640x480 camera at 500 FPS, minutes of a small eye crop at 100 FPS). A frame that finds
that queue full (the disk is too slow for the stream) is counted (``dropped``), never waited for.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.errors import ConfigError, OutputError

__all__ = ["RECORD_SUFFIX", "Recorder", "check_record_path"]

log = logging.getLogger("eyeblink.live")

#: the recording's container (its suffix): NUT carries exact timestamps and raw gray frames
RECORD_SUFFIX = ".nut"
#: the recording's timestamps are kept to the microsecond
_TIME_BASE = Fraction(1, 1_000_000)
#: the bytes of frames (or packets) the writer may fall behind by before frames are dropped from
#: the recording: the queue is memory of the loader, counted as the frames' own sizes (a compressed
#: stream's packets as they came, not as the stream says they are)
QUEUE_BYTES = 256 * 2**20
#: how long a frame the survey held waits for room in the queue before it counts as dropped
HELD_WAIT_S = 2.0


def check_record_path(path: str | Path, *, overwrite: bool = False) -> Path:
    """``--record FILE`` before anything starts: a ``.nut`` file in a folder that exists, not an
    existing file unless ``overwrite`` (``--overwrite``: a previous session's recording is never
    replaced without a word)."""
    p = Path(path)
    if p.suffix.lower() != RECORD_SUFFIX:
        raise ConfigError(
            f"--record {path}: the recording is raw gray video in NUT; give a file ending in "
            f"{RECORD_SUFFIX}, e.g. --record session{RECORD_SUFFIX}"
        )
    if p.is_dir():
        raise ConfigError(
            f"--record {path} is a folder; give a file name ending in {RECORD_SUFFIX}"
        )
    if not p.parent.is_dir():
        raise ConfigError(f"--record {path}: the folder {p.parent} does not exist; create it first")
    if (p.exists() or p.is_symlink()) and not overwrite:
        raise OutputError(
            f"--record {path} exists (a previous recording?); give another file name, or add "
            "--overwrite (overwrite=True in the Python API) to replace it"
        )
    return p


class Recorder:
    """Writes frames to ``path`` (raw gray NUT, capture times as timestamps) from a thread of its
    own."""

    def __init__(
        self, path: str | Path, width: int, height: int, fps: float | None, *, template: Any = None
    ) -> None:
        """``template``: the PyAV stream of a compressed source, whose packets are then recorded as
        they came (:meth:`put_packet`: stream copy, no decoding, no encoding); else raw gray frames
        (:meth:`put`)."""
        import av

        self.path = Path(path)
        self.frames = 0
        self.dropped = 0
        self.error: str | None = None
        self.copy = template is not None
        self._container = av.open(str(self.path), "w", format="nut")
        rate = Fraction(round(fps)) if fps and fps >= 1 else Fraction(500)
        if self.copy:
            self._stream = self._container.add_stream_from_template(template)
            self._in_tb = template.time_base
            self._first: int | None = None
            self.codec = template.codec_context.name
        else:
            self._stream = self._container.add_stream("rawvideo", rate=rate)
            self._stream.width, self._stream.height = int(width), int(height)
            self._stream.pix_fmt = "gray"
            self._stream.codec_context.time_base = _TIME_BASE
            self._stream.time_base = _TIME_BASE
            self.codec = "rawvideo"
        # what the writer has not written yet, and its bytes (at most QUEUE_BYTES; one frame at
        # least, whatever its size)
        self._q: queue.Queue[tuple[Any, float, int] | None] = queue.Queue()
        self._queued = 0
        self._room = threading.Condition()
        self._last_pts = -1
        self._thread = threading.Thread(target=self._write, name="eyeblink-record", daemon=True)
        self._thread.start()

    def put(self, image: np.ndarray, timestamp_s: float, wait: bool = False) -> None:
        """One received frame (never waits unless ``wait``: a full queue counts the frame as dropped
        from the recording). ``wait``: frames held before the recording started (a live survey's),
        handed over at once."""
        self._enqueue(image, timestamp_s, image.nbytes, wait)

    def put_packet(self, packet: Any, wait: bool = False) -> None:
        """One packet of a compressed source as it came (never waits unless ``wait``, as
        :meth:`put`; a full queue counts it as dropped)."""
        import av

        if packet.size == 0:
            return  # the demuxer's flush packet: nothing to keep
        # a copy: the capture thread decodes the source's packet meanwhile, and the writer changes
        # what it muxes
        own = av.Packet(bytes(packet))
        own.pts, own.dts, own.is_keyframe = packet.pts, packet.dts, packet.is_keyframe
        self._enqueue(own, math.nan, own.size, wait)

    def _enqueue(self, item: Any, timestamp_s: float, nbytes: int, wait: bool) -> None:
        """Queue one frame or packet for the writer if its bytes fit (:data:`QUEUE_BYTES`; waiting
        up to :data:`HELD_WAIT_S` when ``wait``), else count it as dropped."""
        with self._room:

            def fits() -> bool:
                return self._queued == 0 or self._queued + nbytes <= QUEUE_BYTES

            if not (fits() or (wait and self._room.wait_for(fits, timeout=HELD_WAIT_S))):
                self.dropped += 1
                return
            self._queued += nbytes
        self._q.put((item, timestamp_s, nbytes))

    def _write(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            image, ts, nbytes = item
            try:
                self._write_one(image, ts)
            finally:
                with self._room:
                    self._queued -= nbytes
                    self._room.notify_all()

    def _write_one(self, image: Any, ts: float) -> None:
        import av

        if self.error is not None:
            self._drop()
            return
        if self.copy:
            self._copy(image)
            return
        try:
            # a rawvideo packet is the frame's bytes (PyAV takes any buffer, without a copy; its
            # stub says bytes only)
            packet = av.Packet(np.ascontiguousarray(image))  # type: ignore[arg-type]
            # strictly increasing, as the muxer wants
            pts = max(round(ts * 1_000_000), self._last_pts + 1)
            packet.stream = self._stream
            packet.pts = packet.dts = pts
            packet.time_base = _TIME_BASE
            self._last_pts = pts
            self._container.mux(packet)
            self.frames += 1
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            self._failed(exc)

    def _copy(self, packet: Any) -> None:
        """Mux one source packet as it came, its timestamps shifted so that the first is 0 (as
        the session's)."""
        import av

        try:
            if self._first is None:
                self._first = packet.pts if packet.pts is not None else (packet.dts or 0)
            if packet.pts is not None:
                packet.pts -= self._first
            if packet.dts is not None:
                packet.dts -= self._first
            packet.time_base = self._in_tb
            packet.stream = self._stream
            self._container.mux(packet)
            self.frames += 1
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            self._failed(exc)

    def _drop(self) -> None:
        """One more frame missing from the recording (the capture's thread and the writer's both
        count)."""
        with self._room:
            self.dropped += 1

    def _failed(self, exc: Exception) -> None:
        """A frame the file could not take: counted, and said once in the log with the cause."""
        self.error = f"{type(exc).__name__}: {exc}"
        self._drop()
        log.error(
            "--record %s: cannot write (%s); the recording stops, the session goes on",
            self.path,
            self.error,
        )

    def close(self) -> dict[str, Any]:
        """Write what is queued, close the file; the summary's ``live.recording``."""
        self._q.put(None)
        self._thread.join()
        try:
            self._container.close()
        except Exception as exc:  # a recording that cannot be closed is reported, not fatal
            self.error = self.error or f"{type(exc).__name__}: {exc}"
        return {
            "path": str(self.path),
            "frames": self.frames,
            "dropped": self.dropped,
            "codec": self.codec,
            "copy": self.copy,
            "pixel_format": None if self.copy else "gray",
            "container": "nut",
            "error": self.error,
        }
