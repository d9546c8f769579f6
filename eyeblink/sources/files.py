"""Frame sources: the first stage of the pipeline (video files and image folders -> ``Frame``).

A source turns one input into an ordered stream of :class:`~eyeblink.frames.Frame` records
``(index, timestamp_s, image)``:

- ``index`` is the decode order, 0..n-1, with no holes.
- ``timestamp_s`` is the container's presentation timestamp relative to the stream start
  (videos) or ``i / fps`` (image folders). It is never recomputed from ``index``, so frames the
  camera dropped or duplicated show up as gaps or repeats in the output instead of being hidden.
- ``image`` is ``uint8`` ``(H, W)`` grayscale by default (labs record grayscale and the detector
  and landmark stages only need luma), or ``(H, W, 3)`` RGB with ``color=True``.

Every failure is reported through :mod:`eyeblink.errors` with one line that names the file, what
is wrong and what to do; ``av.error.*`` never escapes as a traceback. PyAV is imported lazily so
that ``import eyeblink`` stays light.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from abc import ABC, abstractmethod
from array import array
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.closing import Closing
from eyeblink.errors import (
    ConfigError,
    EmptySourceError,
    InputNotFoundError,
    VideoDecodeError,
    VideoOpenError,
)
from eyeblink.frames import Frame

if TYPE_CHECKING:
    import av.container
    import av.video.frame
    import av.video.stream

__all__ = [
    "IMAGE_EXTENSIONS",
    "VIDEO_SUFFIXES",
    "FrameSource",
    "ImageFolderSource",
    "VideoFileSource",
    "natural_sort_key",
    "open_source",
]

#: Suffixes (lower case) an image folder may hold; matching is case-insensitive.
IMAGE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
#: Suffixes taken as video files where a folder is searched for videos (``batch``), and named when a
#: folder of videos is given where an image folder is expected.
VIDEO_SUFFIXES: tuple[str, ...] = (
    ".avi",
    ".mp4",
    ".mkv",
    ".mov",
    ".m4v",
    ".webm",
    ".mpg",
    ".mpeg",
    ".wmv",
    ".flv",
    ".mj2",
    ".nut",
)

#: Undecodable packets skipped in one file before it counts as unreadable (a file of garbage).
MAX_DAMAGED_PACKETS = 10_000

_REPAIR_HINT = (
    "the file is truncated or corrupt; re-export or repair it (e.g. ffmpeg -i in -c copy out.mkv)"
)

#: Slots a demuxed stream may fall short of its declared frame count without being called
#: truncated. AVI capture software writes a dropped frame as a zero-length index entry; FFmpeg
#: skips those (they only advance the PTS of the next packet), so a *trailing* one is invisible
#: in the packets. The ZJU clips end with at most one such entry.
_TRUNCATION_SLACK_SLOTS = 1


#: 8-bit pixel formats whose first plane is full-range luma (copied as is).
_FULL_RANGE_LUMA = frozenset({"gray", "yuvj420p", "yuvj422p", "yuvj444p", "yuvj440p", "yuvj411p"})
#: 8-bit planar YUV formats whose first plane is luma, limited range unless the frame says
#: otherwise.
_YUV_LUMA = frozenset(
    {"yuv420p", "yuv422p", "yuv444p", "yuv440p", "yuv411p", "yuv410p", "yuva420p", "nv12", "nv21"}
)
_AVCOL_RANGE_JPEG = 2
#: Limited-range (16..235) to full-range (0..255) luma, rounded and clipped like swscale.
_TV_TO_PC_LUMA = np.clip(np.round((np.arange(256) - 16) * 255.0 / 219.0), 0, 255).astype(np.uint8)


def luma(frame: Any, *, copy: bool = True) -> np.ndarray:
    """A decoded frame's luma as (H, W) uint8: the Y plane as is (full range) or stretched (TV
    range).

    Reading the Y plane costs ~0.01 ms for 640x480 where ``to_ndarray(format="gray")`` (a swscale
    pass) costs ~0.3 ms, as much as decoding an MJPG frame. Limited-range ("TV", 16..235) luma is
    stretched to 0..255 with a lookup table, as swscale would. ``copy=False``: a view of the plane
    where its rows are contiguous (it keeps the frame's buffer alive; the file loader copies it into
    the ring at once).
    """
    fmt = frame.format.name
    if fmt in _FULL_RANGE_LUMA or fmt in _YUV_LUMA:
        import cv2

        plane = frame.planes[0]
        rows = np.frombuffer(memoryview(plane), dtype=np.uint8).reshape(-1, plane.line_size)
        y = rows[: frame.height, : frame.width]
        if fmt in _FULL_RANGE_LUMA or frame.color_range == _AVCOL_RANGE_JPEG:
            return np.array(y) if copy else np.ascontiguousarray(y)
        return cv2.LUT(np.ascontiguousarray(y), _TV_TO_PC_LUMA)
    return np.asarray(frame.to_ndarray(format="gray"))


def natural_sort_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders embedded numbers numerically (``frame2.png`` before ``frame10.png``).

    ``re.split`` with a capturing group alternates text and digits starting with text, so the
    key's element types line up position by position and tuples always compare.
    """
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts))


def open_av(target: str, **kwargs: Any) -> Any:
    """``av.open(target, **kwargs)`` with metadata that is not UTF-8 readable (the ZJU AVIs carry
    GBK-encoded titles; an ffmpeg sender forwards them): PyAV < 19 takes
    ``metadata_errors="replace"`` (its default ``strict`` fails the open), PyAV 19 dropped the
    option and decodes metadata with ``surrogateescape``."""
    import av

    if _METADATA_ERRORS:
        try:
            return av.open(target, metadata_errors="replace", **kwargs)
        except TypeError as exc:
            if "metadata_errors" not in str(exc):
                raise
            _METADATA_ERRORS.clear()
    return av.open(target, **kwargs)


_METADATA_ERRORS = [True]  # emptied once this PyAV turns out not to take the option


class FrameSource(ABC, Closing):
    """An input that yields :class:`Frame` records in decode order.

    Use it as a context manager so the underlying file handles are closed even when the consumer
    stops early. Attributes are known after construction (no frame has to be decoded):

    - ``path``: the input path; ``name``: the stem used for output files (``<stem>.frames.csv``).
    - ``nominal_fps``: the declared frame rate (container or ``--fps``), ``None`` when unknown.
      Informational only: timestamps never derive from it while real timestamps exist.
    - ``frame_count_hint``: the declared frame count, ``None`` when the container does not say.
      Videos may decode fewer frames (null "repeat" packets, dropped frames).
    - ``width``, ``height``: frame size in pixels.
    """

    path: Path
    name: str
    nominal_fps: float | None
    frame_count_hint: int | None
    width: int
    height: int

    @abstractmethod
    def __iter__(self) -> Iterator[Frame]:
        """Yield the frames in decode order; raise an :class:`EyeblinkError` on failure."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Facts about the input for the run summary (codec, pixel format, container, rates)."""

    def close(self) -> None:
        """Release file handles held by an unfinished iteration (idempotent)."""

    #: attributes that hold an open handle (a container, a camera): not pickled; a process that gets
    #: the source (a spawned loader) opens its own
    HANDLES: tuple[str, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in self.HANDLES:
            if name in state:
                state[name] = [] if isinstance(state[name], list) else None
        return state


def _validate_fps(fps: float | None, what: str) -> float | None:
    """Return ``fps`` as float, or raise ConfigError when it is not a positive finite number."""
    if fps is None:
        return None
    value = float(fps)
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(
            f"--fps must be a positive number of frames per second for {what}, got {fps!r}"
        )
    return value


class VideoFileSource(FrameSource):
    """Decode a video file (AVI/MP4/MKV/..., any codec FFmpeg decodes) with PyAV.

    Timestamps are the container's: ``(frame.pts - stream.start_time) * stream.time_base``. A frame
    without PTS falls back to its DTS (FFmpeg's best-effort source), then to ``previous + 1/fps``;
    ``describe()["timestamps_from"]`` counts how many frames used each rule. The ``fps`` argument
    therefore overrides nothing while the container has timestamps; it is only the step of that
    last fallback (default: the container's nominal rate).

    ``threads=True`` lets FFmpeg decode with its own threads (``thread_type = "AUTO"``: frame +
    slice threading; frames still come out in order). It pays off for heavy streams on many
    cores; on a 2-core machine 640x480 MJPG/H.264 decode at ~3500 fps either way (measured), so
    the Python side, not the decoder, is the limit there.

    Gray output is the Y plane for gray and planar YUV input (limited-range "TV" luma stretched
    to 0..255, identical to swscale's gray, so gray equals the luma of the RGB output); no chroma
    is touched, which makes it ~2x faster end to end than ``color=True`` for 640x480 MJPG.

    Damage in the middle (a few bytes overwritten, a bad sector): a packet the decoder rejects is
    skipped and decoding goes on with the next one (the codec resynchronises, at the latest at the
    next keyframe). The frames lost show up as a timestamp gap, as dropped frames do, and
    ``describe()["damaged_packets"]`` lists each skipped packet (position, byte offset, timestamp,
    FFmpeg's message). A file that simply ends early still fails as truncated.

    Truncation is detected twice: an FFmpeg error while demuxing/decoding, and a stream that ends
    quietly before its declared length. The latter counts demuxed *packets* (plus the slots that
    AVI zero-length index entries skip, visible as PTS jumps), not decoded frames, because codecs
    such as Indeo store "repeat previous frame" as 2-byte packets that decode to nothing. When the
    container declares no frame count (MKV), a single-stream file's declared duration is used.

    ``packet_index(i)`` maps decode index ``i`` to its 0-based demuxed packet index (null packets
    count): annotation tools that number AVI packets (the ZJU/blinkingmatters ``.tag`` files) use
    that number, which differs from both the decode index and ``round(timestamp_s * fps)``.
    """

    HANDLES = ("_container",)

    def __init__(
        self,
        path: str | Path,
        *,
        fps: float | None = None,
        color: bool = False,
        threads: bool = True,
    ) -> None:
        self.path = Path(path)
        self.name = self.path.stem
        self.color = color
        self.threads = threads
        self._fallback_fps_arg = _validate_fps(fps, f"video {self.path}")
        self._container: av.container.InputContainer | None = None
        self._packet_index = array("q")
        self._ts_counts: dict[str, int] = {"pts": 0, "dts": 0, "interpolated": 0}
        self._packets_seen = 0
        self._damaged: list[dict[str, Any]] = []

        container = self._open()
        try:
            stream = container.streams.video[0]
            cc = stream.codec_context
            self.width = int(cc.width)
            self.height = int(cc.height)
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            self.nominal_fps = float(rate) if rate else None
            self.frame_count_hint = (
                int(stream.frames) if stream.frames and stream.frames > 0 else None
            )
            self._time_base: Fraction | None = stream.time_base
            self._start_time: int = stream.start_time or 0
            self._info: dict[str, Any] = {
                "kind": "video",
                "container": container.format.name,
                "codec": cc.name,
                "pixel_format": cc.pix_fmt,
                "width": self.width,
                "height": self.height,
                "nominal_fps": self.nominal_fps,
                "time_base": str(stream.time_base) if stream.time_base is not None else None,
                "start_time": stream.start_time,
                "declared_frames": self.frame_count_hint,
                "output": "rgb24" if color else "gray",
            }
            if self.width <= 0 or self.height <= 0:
                raise VideoOpenError(
                    f"{self.path}: video stream has no frame size ({self.width}x{self.height}); "
                    "FFmpeg cannot decode it — re-export the recording"
                )
            # Peek at one packet: a stream with none is empty, and it is better to say so at open.
            first = next(iter(container.demux(stream)), None)
            if first is None or first.size == 0:
                raise EmptySourceError(
                    f"{self.path} has a video stream but no frames — re-export or re-record the "
                    "video"
                )
        except self._av_errors() as exc:
            raise VideoOpenError(
                f"{self.path}: cannot read the video stream ({exc}); {_REPAIR_HINT}"
            ) from exc
        finally:
            container.close()

    @staticmethod
    def _av_errors() -> tuple[type[BaseException], ...]:
        import av

        return (av.error.FFmpegError, UnicodeDecodeError)

    def _open(self) -> av.container.InputContainer:
        """Open the container, mapping every PyAV failure to VideoOpenError."""
        import av

        try:
            container = open_av(str(self.path), mode="r")
        except av.error.FFmpegError as exc:
            raise VideoOpenError(
                f"{self.path} is not a video FFmpeg can open ({exc.strerror or exc}); "
                "check that it is a video file and not truncated (an MP4 cut short loses its index)"
            ) from exc
        if not container.streams.video:
            container.close()
            raise VideoOpenError(
                f"{self.path} has no video stream (container {container.format.name}); "
                "give a video file or a folder of images"
            )
        return container

    @property
    def fallback_fps(self) -> float | None:
        """Step used only for frames with neither PTS nor DTS: ``--fps`` if given, else nominal."""
        return self._fallback_fps_arg or self.nominal_fps

    def packet_index(self, frame_index: int) -> int | None:
        """0-based demuxed packet index of decoded frame ``frame_index`` (after iterating it).

        ``None`` when the frame had no PTS to match its packet by.
        """
        value = self._packet_index[frame_index]
        return None if value < 0 else int(value)

    def describe(self) -> dict[str, Any]:
        info = dict(self._info)
        info["fallback_fps"] = self.fallback_fps
        info["timestamps_from"] = dict(self._ts_counts)
        info["packets_demuxed"] = self._packets_seen
        info["damaged_packets"] = list(self._damaged)
        return info

    @staticmethod
    def _damage(
        packet: Any, position: int, start: int, time_base: Fraction, exc: Exception
    ) -> dict[str, Any]:
        """What ``summary.json``'s ``damaged_packets`` says of one undecodable packet."""
        ts = packet.pts if packet.pts is not None else packet.dts
        return {
            "packet": position,
            "byte_offset": packet.pos if packet.pos is not None and packet.pos >= 0 else None,
            "timestamp_s": float((ts - start) * time_base) if ts is not None else None,
            "error": str(getattr(exc, "strerror", None) or exc),
        }

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None

    def _image(self, frame: av.video.frame.VideoFrame) -> np.ndarray:
        """The frame's pixels: RGB, or gray (:func:`luma`)."""
        return frame.to_ndarray(format="rgb24") if self.color else luma(frame, copy=False)

    def __iter__(self) -> Iterator[Frame]:
        import av

        self.close()
        container = self._open()
        self._container = container
        self._packet_index = array("q")
        self._ts_counts = {"pts": 0, "dts": 0, "interpolated": 0}
        self._damaged = []
        stream = container.streams.video[0]
        if self.threads:
            stream.thread_type = "AUTO"
        time_base = stream.time_base or Fraction(1, 1)
        # a timestamp as (ticks * num) / den: Python's int division rounds correctly, so it is
        # float(ticks * time_base) to the last bit, without a Fraction per frame
        tb_num, tb_den = time_base.numerator, time_base.denominator
        start = stream.start_time or 0
        fallback = self.fallback_fps
        # Read now: a closed container no longer reports them.
        # AV_TIME_BASE
        declared_duration_s = container.duration / 1_000_000 if container.duration else None
        single_stream = len(container.streams) == 1

        index = 0
        # non-empty packets (2-byte null packets count; the final flush packet does not)
        packets = 0
        skipped_slots = 0  # AVI zero-length index entries, seen as DTS jumps between packets
        prev_dts: int | None = None
        prev_duration = 0
        end_pts = 0  # max(pts + duration) over packets, in time_base units relative to start
        pending: dict[int, int] = {}  # packet pts -> packet index, until its frame comes out
        prev_ts: float | None = None

        def emit(frame: av.video.frame.VideoFrame) -> Frame:
            nonlocal index, prev_ts
            if frame.pts is not None:
                ts = (frame.pts - start) * tb_num / tb_den
                self._ts_counts["pts"] += 1
            elif frame.dts is not None:
                ts = (frame.dts - start) * tb_num / tb_den
                self._ts_counts["dts"] += 1
            else:
                if prev_ts is None:
                    ts = 0.0
                elif fallback:
                    ts = prev_ts + 1.0 / fallback
                else:
                    raise ConfigError(
                        f"{self.path} has no timestamps and no frame rate; give --fps to time its "
                        "frames"
                    )
                self._ts_counts["interpolated"] += 1
            key = frame.pts if frame.pts is not None else None
            self._packet_index.append(pending.pop(key, -1) if key is not None else -1)
            if len(pending) > 256 and key is not None:  # null packets never produce a frame
                for stale in [p for p in pending if p < key]:
                    del pending[stale]
            out = Frame(index=index, timestamp_s=ts, image=self._image(frame))
            index += 1
            prev_ts = ts
            return out

        try:
            for packet in container.demux(stream):
                if packet.size > 0:
                    if packet.pts is not None:
                        pending[packet.pts] = packets
                        if packet.duration:
                            end_pts = max(end_pts, packet.pts - start + packet.duration)
                    dts = packet.dts
                    if dts is not None:
                        if prev_dts is None:
                            ref, step = start, packet.duration
                        else:
                            ref, step = prev_dts, prev_duration
                        if step and dts > ref:
                            skipped_slots += max(
                                0, round((dts - ref) / step) - (prev_dts is not None)
                            )
                        prev_dts, prev_duration = dts, packet.duration or 0
                    packets += 1
                    self._packets_seen = packets
                try:
                    decoded = packet.decode()
                # a damaged packet: skip it, decoding resumes after it
                except av.error.FFmpegError as exc:
                    if packet.size == 0:
                        raise  # the flush at the end: nothing follows to resume with
                    self._damaged.append(self._damage(packet, packets - 1, start, time_base, exc))
                    if len(self._damaged) > MAX_DAMAGED_PACKETS:
                        raise
                    continue
                for frame in decoded:
                    yield emit(frame)
        except av.error.FFmpegError as exc:
            # Frames already inside the decoder's threads were decoded before the problem: drain
            # them. A second error while draining adds nothing: the first one is raised just below.
            drained: list[Frame] = []
            with contextlib.suppress(av.error.FFmpegError):
                drained = [emit(f) for f in stream.codec_context.decode(None)]
            yield from drained
            self.close()
            raise VideoDecodeError(
                f"{self.path}: decoding failed at frame {index} (packet {packets}): "
                f"{exc.strerror or exc}; "
                f"{_REPAIR_HINT}"
            ) from exc
        finally:
            self.close()

        self._check_complete(
            index,
            packets,
            skipped_slots,
            float(end_pts * time_base),
            declared_duration_s if single_stream else None,
        )

    def _check_complete(
        self,
        decoded: int,
        packets: int,
        skipped_slots: int,
        seen_s: float,
        declared_s: float | None,
    ) -> None:
        """Raise if the stream ended quietly before its declared length, or had no frames.

        ``seen_s`` is where the last demuxed packet ends; ``declared_s`` the container's declared
        duration, only passed for single-stream files (another stream may be longer).
        """
        if packets == 0 and decoded == 0:
            raise EmptySourceError(
                f"{self.path} has a video stream but no frames — re-export or re-record it"
            )
        declared = self.frame_count_hint
        if declared is not None:
            accounted = packets + skipped_slots
            if accounted < declared - _TRUNCATION_SLACK_SLOTS:
                raise VideoDecodeError(
                    f"{self.path}: stream ended at frame {decoded} after {packets} of {declared} "
                    "declared "
                    f"packets; {_REPAIR_HINT}"
                )
        elif (
            declared_s
            and self.nominal_fps
            and 0 < seen_s < declared_s - 1.0 / self.nominal_fps - 1e-3
        ):
            raise VideoDecodeError(
                f"{self.path}: stream ended at frame {decoded} ({seen_s:.3f} s of "
                f"{declared_s:.3f} s "
                f"declared); {_REPAIR_HINT}"
            )
        if decoded == 0:
            raise VideoDecodeError(
                f"{self.path}: {packets} packets but no decodable frame; {_REPAIR_HINT}"
            )


class ImageFolderSource(FrameSource):
    """A folder of still images (PNG/JPEG/TIFF/BMP, any case) played as a video.

    Files are taken in natural order (``frame2.png`` before ``frame10.png``); other files are
    ignored. Images carry no time, so ``fps`` is required and ``timestamp_s = i / fps``. All
    images must share the first image's size. 16-bit images (scientific TIFFs) are reduced to
    8 bits by dropping the low byte.
    """

    def __init__(self, path: str | Path, *, fps: float | None, color: bool = False) -> None:
        self.path = Path(path)
        self.name = input_stem(self.path)
        self.color = color
        self.files: list[Path] = sorted(
            (
                p
                for p in self.path.iterdir()
                if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
            ),
            key=lambda p: natural_sort_key(p.name),
        )
        if not self.files:
            raise EmptySourceError(_no_images(self.path))
        if fps is None:
            raise ConfigError(f"image folder {self.path} needs --fps to give frames timestamps")
        self.fps = _validate_fps(fps, f"image folder {self.path}")
        self.nominal_fps = self.fps
        self.frame_count_hint = len(self.files)
        first = self.files[0]
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(first) as img:
                self.width, self.height = img.size
                self._mode = img.mode
        except (OSError, UnidentifiedImageError) as exc:
            raise VideoDecodeError(
                f"{first}: cannot read image ({exc}); replace or remove the file"
            ) from exc

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "image_folder",
            "container": "image folder",
            "codec": sorted({p.suffix.lower().lstrip(".") for p in self.files}),
            "pixel_format": self._mode,
            "width": self.width,
            "height": self.height,
            "nominal_fps": self.fps,
            "time_base": f"1/{self.fps:g} s (frame index / fps)",
            "declared_frames": len(self.files),
            "output": "rgb24" if self.color else "gray",
        }

    def _load(self, path: Path) -> np.ndarray:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(path) as img:
                img.load()
                if img.size != (self.width, self.height):
                    raise VideoDecodeError(
                        f"{path}: image is {img.size[0]}x{img.size[1]} but the folder's first "
                        "image is "
                        f"{self.width}x{self.height}; all images must have one size — resize or "
                        "remove it"
                    )
                eight_bit: Image.Image = img
                if img.mode.startswith("I;16") or img.mode == "I":
                    wide = np.clip(np.asarray(img), 0, 65535).astype(np.uint32)
                    eight_bit = Image.fromarray((wide >> 8).astype(np.uint8))
                return np.asarray(eight_bit.convert("RGB" if self.color else "L"))
        except (OSError, UnidentifiedImageError, ValueError) as exc:
            raise VideoDecodeError(
                f"{path}: cannot decode image ({exc}); replace or remove the file"
            ) from exc

    def __iter__(self) -> Iterator[Frame]:
        assert self.fps is not None
        for i, path in enumerate(self.files):
            yield Frame(index=i, timestamp_s=i / self.fps, image=self._load(path))


def _no_images(folder: Path) -> str:
    """Why ``folder`` is no image folder; a folder of videos is named as such, with the commands
    that take it."""
    videos = sorted(
        (p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES),
        key=lambda p: natural_sort_key(p.name),
    )
    if not videos:
        return (
            f"no images in folder {folder}: expected files ending in "
            f"{', '.join(IMAGE_EXTENSIONS)} (any case)"
        )
    shown = ", ".join(p.name for p in videos[:3]) + (", ..." if len(videos) > 3 else "")
    suffixes = sorted({p.suffix for p in videos})
    pattern = f"{folder}/*{suffixes[0]}" if len(suffixes) == 1 else f"{folder}/*"
    return (
        f"no images in folder {folder}, but {len(videos)} video{'s' if len(videos) > 1 else ''} "
        f"({shown}); "
        "a folder is read as an image sequence: pass the videos themselves (eyeblink process "
        f"{pattern}) "
        f"or the folder to eyeblink batch {folder}"
    )


def input_stem(path: str | Path) -> str:
    """The name an input's outputs take (``<stem>.frames.csv``): a video's file name without its
    suffix, an image folder's own name, also when it is given as ``.`` or ``..`` (the folder they
    are: never a hidden ``.frames.csv``)."""
    p = Path(path)
    if p.is_dir():
        return Path(os.path.abspath(p)).name or "frames"  # the file system's root has no name
    return p.stem


def open_source(path: str | Path, *, fps: float | None = None, color: bool = False) -> FrameSource:
    """Open ``path`` as a frame source: a directory -> images, a file -> video.

    ``fps`` is required for image folders; for videos it is only the fallback step for frames
    without any container timestamp (container PTS always wins). ``color=True`` yields RGB.
    """
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"input not found: {p} — check the path")
    if p.is_dir():
        return ImageFolderSource(p, fps=fps, color=color)
    return VideoFileSource(p, fps=fps, color=color)
