"""Splitting one file or image folder into frame ranges that several loader processes decode.

The multiprocess pipeline (:mod:`eyeblink.runtime.procs.parallel`) may run several loaders on one
input (``--loaders N``). Each loader decodes whole *ranges*: contiguous frame intervals ``[first,
stop)`` of ``segment`` frames, dealt round-robin (range ``k`` to loader ``k % N``), so that every
loader works near the sink's write position and the sink's reorder buffer stays bounded.

A range must reproduce exactly what :class:`~eyeblink.sources.files.VideoFileSource` yields for
its frames in a single pass: the same frame index, the same timestamp, the same pixels. So the
plan is made from a **demux-only pass** (packets, no decoding; ~1-2 % of a decode for MJPG):

* every non-empty packet must carry a unique PTS, and the codec must be one where each packet
  decodes to exactly one frame (:data:`ONE_FRAME_PER_PACKET`); frame ``i`` is then the packet with
  the ``i``-th smallest PTS (decoders output in presentation order), and its timestamp is that
  PTS, as in the single pass;
* a range is decoded from the last keyframe at or before its first frame (``packet.is_keyframe``;
  intra codecs such as MJPG, raw video and PNG flag every packet, so they split anywhere) after a
  seek; frames before ``first`` are decoded and dropped;
* anything unusual falls back to one loader, which keeps every check of the single pass: a demux
  error, a packet without PTS, repeated PTS, codecs that write 2-byte "repeat" null packets
  (Indeo, ...), a stream shorter than declared (truncated), or too few keyframes to split.

A loader checks as it goes that each decoded frame is the planned one (its PTS) and stops with a
:class:`~eyeblink.errors.VideoDecodeError` otherwise (never silently shifted rows).

Image folders split their file list: any frame is a range start.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from eyeblink.errors import VideoDecodeError
from eyeblink.frames import Frame
from eyeblink.sources.chunking import round_up
from eyeblink.sources.files import FrameSource, ImageFolderSource, VideoFileSource

__all__ = [
    "ONE_FRAME_PER_PACKET",
    "FrameRange",
    "RangePlan",
    "RangeReader",
    "iter_range",
    "plan_ranges",
    "round_up",
    "single_plan",
]

#: Codecs where every non-empty packet decodes to exactly one frame (no null "repeat" packets, no
#: packed frames): the plan can number frames from packets without decoding.
ONE_FRAME_PER_PACKET = frozenset(
    {
        "mjpeg",
        "rawvideo",
        "ffv1",
        "png",
        "jpegls",
        "ljpeg",
        "huffyuv",
        "ffvhuff",
        "utvideo",
        "prores",
        "dnxhd",
        "h264",
        "hevc",
        "mpeg2video",
        "mpeg4",
        "vp8",
        "vp9",
        "av1",
        "tiff",
        "bmp",
        "qtrle",
    }
)

#: A range spans at least this many frames (rounded up to whole chunks): a seek and a loader's
#: start-up cost ~1 ms, against ~0.5-1 ms of decoding per 640x480 frame.
MIN_SEGMENT_FRAMES = 256
#: Long-GOP codecs: a range is at least this many GOPs long, so that the frames decoded and dropped
#: before a range's first frame (half a GOP on average) cost at most ~12 % extra decoding.
GOPS_PER_SEGMENT = 4


@dataclass(frozen=True)
class FrameRange:
    """Frames ``[first, stop)``; decoding starts at ``seek_pts`` (a keyframe's PTS; None: the
    start)."""

    first: int
    stop: int
    seek_pts: int | None = None
    seek_frame: int = 0  # the frame index of that keyframe (frames seek_frame..first-1 are dropped)


@dataclass
class RangePlan:
    """How one input is split: ``ranges`` in frame order, or one range and ``reason`` why not."""

    frames: int
    ranges: list[FrameRange]
    loaders: int
    reason: str = ""
    pts: list[int] = field(default_factory=list)  # video: the PTS of frame i (sorted)
    # the single pass's describe() for a clean file
    info: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        decoded = sum(r.stop - r.seek_frame for r in self.ranges)
        return {
            "loaders": self.loaders,
            "ranges": len(self.ranges),
            "single_reason": self.reason or None,
            "extra_decoded_frames": decoded - self.frames,
        }


def _segments(frames: int, segment: int) -> list[tuple[int, int]]:
    return [(a, min(a + segment, frames)) for a in range(0, frames, segment)]


def single_plan(frames: int, reason: str) -> RangePlan:
    """One range, one loader, and ``reason`` why the input is not split."""
    return RangePlan(frames, [FrameRange(0, frames)], 1, reason)


def plan_ranges(
    source: FrameSource, loaders: int, *, chunk_frames: int, max_frames: int | None = None
) -> RangePlan:
    """Split ``source`` for ``loaders`` processes; ranges are whole multiples of ``chunk_frames``.

    Ranges start on chunk boundaries because a landmark worker owns whole chunks (its keyframe
    policy restarts on each chunk's first frame): the rows then do not depend on the split.
    """
    if isinstance(source, ImageFolderSource):
        n = len(source.files) if max_frames is None else min(len(source.files), max_frames)
        return _plan_uniform(n, loaders, chunk_frames, [], None)
    if not isinstance(source, VideoFileSource):
        return single_plan(0, f"{type(source).__name__} is one stream")
    if loaders <= 1:
        return single_plan(0, "one loader asked for")
    return _plan_video(source, loaders, chunk_frames, max_frames)


def _plan_uniform(
    n: int, loaders: int, chunk: int, key_frames: list[int], pts: list[int] | None, gop: float = 1.0
) -> RangePlan:
    """Ranges over ``n`` frames; ``key_frames`` (sorted frame indices of keyframes, empty: every
    frame)."""
    if loaders <= 1 or n <= 0:
        return single_plan(n, "one loader asked for" if loaders <= 1 else "no frames")
    segment = round_up(max(MIN_SEGMENT_FRAMES, GOPS_PER_SEGMENT * gop), chunk)
    spans = _segments(n, segment)
    if len(spans) < 2:
        return single_plan(n, f"{n} frames fit in one range of {segment}")
    ranges = []
    for a, b in spans:
        if not key_frames:
            ranges.append(FrameRange(a, b, None if pts is None else pts[a], a))
        else:
            k = key_frames[bisect.bisect_right(key_frames, a) - 1]
            ranges.append(FrameRange(a, b, None if pts is None else pts[k], k))
    return RangePlan(n, ranges, min(loaders, len(spans)), "", pts or [])


def _demux_packets(
    source: VideoFileSource,
) -> tuple[list[tuple[int | None, bool, int | None, int]], dict[str, Any]]:
    """Every packet's ``(pts, keyframe, dts, duration)`` (non-empty packets only), without
    decoding."""
    container = source._open()
    try:
        stream = container.streams.video[0]
        meta = {
            "codec": stream.codec_context.name,
            "start": stream.start_time or 0,
            "time_base": stream.time_base or Fraction(1, 1),
            "duration_s": container.duration / 1_000_000 if container.duration else None,
            "single_stream": len(container.streams) == 1,
        }
        packets = [
            (p.pts, bool(p.is_keyframe), p.dts, int(p.duration or 0))
            for p in container.demux(stream)
            if p.size > 0
        ]
        return packets, meta
    finally:
        container.close()


def _plan_video(
    source: VideoFileSource, loaders: int, chunk: int, max_frames: int | None
) -> RangePlan:
    try:
        packets, meta = _demux_packets(source)
    except source._av_errors() as exc:
        return single_plan(0, f"demuxing failed ({exc}): the single pass reports it")
    n = len(packets)
    if meta["codec"] not in ONE_FRAME_PER_PACKET:
        return single_plan(n, f"codec {meta['codec']} may have packets without a frame")
    if any(p[0] is None for p in packets):
        return single_plan(n, "a packet has no PTS")
    order = sorted(range(n), key=lambda i: packets[i][0])  # type: ignore[arg-type,return-value]
    pts = [packets[i][0] for i in order]
    if len(set(pts)) != n:
        return single_plan(n, "repeated PTS")
    if not _complete(source, packets, meta):
        return single_plan(n, "the stream is shorter than declared: the single pass reports it")
    rank = {p: i for i, p in enumerate(pts)}
    key_frames = sorted(rank[p[0]] for p in packets if p[1])
    if not key_frames or key_frames[0] != 0:
        return single_plan(n, "the first frame is not a keyframe")
    total = n if max_frames is None else min(n, max_frames)
    every = len(key_frames) == n
    gop = 1.0 if every else n / len(key_frames)
    if not every and len(key_frames) < 2:
        return single_plan(n, "one keyframe: no range can start later")
    keys = [] if every else key_frames
    plan = _plan_uniform(total, loaders, chunk, keys, pts, gop)  # type: ignore[arg-type]
    plan.info = dict(
        source._info,
        fallback_fps=source.fallback_fps,
        timestamps_from={"pts": total, "dts": 0, "interpolated": 0},
        packets_demuxed=n,
    )
    return plan


def _complete(
    source: VideoFileSource, packets: list[tuple[Any, bool, Any, int]], meta: dict[str, Any]
) -> bool:
    """The single pass's end-of-stream check (:meth:`VideoFileSource._check_complete`) from
    packets."""
    start = meta["start"]
    skipped, prev_dts, prev_dur, end_pts = 0, None, 0, 0
    for pts, _key, dts, dur in packets:
        if pts is not None and dur:
            end_pts = max(end_pts, pts - start + dur)
        if dts is not None:
            ref, step = (start, dur) if prev_dts is None else (prev_dts, prev_dur)
            if step and dts > ref:
                skipped += max(0, round((dts - ref) / step) - (prev_dts is not None))
            prev_dts, prev_dur = dts, dur
    try:
        source._check_complete(
            len(packets),
            len(packets),
            skipped,
            float(end_pts * meta["time_base"]),
            meta["duration_s"] if meta["single_stream"] else None,
        )
    except VideoDecodeError:
        return False
    return True


def iter_range(source: FrameSource, plan: RangePlan, rng: FrameRange) -> Iterator[Frame]:
    """The frames ``rng.first .. rng.stop - 1`` of ``source``, as its single pass yields them."""
    with RangeReader(source, plan) as reader:
        yield from reader.frames(rng)


class RangeReader:
    """One process's reader of several ranges of one input (a loader's, ``--loaders N``):
    :meth:`frames` of each.

    A video's container and decoder are opened once and seek from range to range (the seek flushes
    what the decoder held). A fresh container for each range pays the open (~2 ms of CPU for a
    20,000-frame AVI: its index) and FFmpeg's decoder start-up again: ~0.02 ms more CPU a frame over
    256-frame ranges of real 640x480 MJPG."""

    def __init__(self, source: FrameSource, plan: RangePlan) -> None:
        self.source, self.plan = source, plan
        self._container: Any = None  # open once a range was read: the next range seeks in it

    def frames(self, rng: FrameRange) -> Iterator[Frame]:
        """The frames ``rng.first .. rng.stop - 1``, as the single pass yields them."""
        source = self.source
        if isinstance(source, ImageFolderSource):
            assert source.fps is not None
            for i in range(rng.first, rng.stop):
                yield Frame(
                    index=i, timestamp_s=i / source.fps, image=source._load(source.files[i])
                )
            return
        assert isinstance(source, VideoFileSource)
        if rng.seek_pts is None:  # nowhere to seek back to: a fresh container
            self.close()
        fresh = self._container is None
        if fresh:
            self._container = source._open()
            if source.threads:
                self._container.streams.video[0].thread_type = "AUTO"
        seek = rng.seek_pts is not None and (rng.seek_frame > 0 or not fresh)
        yield from _iter_video_range(source, self.plan, rng, self._container, seek)

    def close(self) -> None:
        """Close the container (idempotent); a later :meth:`frames` opens a new one."""
        container, self._container = self._container, None
        if container is not None:
            with contextlib.suppress(Exception):
                container.close()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _iter_video_range(
    source: VideoFileSource, plan: RangePlan, rng: FrameRange, container: Any, seek: bool
) -> Iterator[Frame]:
    import av

    stream = container.streams.video[0]
    time_base = stream.time_base or Fraction(1, 1)
    start = stream.start_time or 0
    rank = {p: i for i, p in enumerate(plan.pts[rng.seek_frame : rng.stop], rng.seek_frame)}
    if seek:
        container.seek(rng.seek_pts, stream=stream, backward=True, any_frame=False)
    expect = rng.first
    try:
        for packet in container.demux(stream):
            for frame in packet.decode():
                index = rank.get(frame.pts) if frame.pts is not None else None
                if index is None:
                    if frame.pts is not None and frame.pts < plan.pts[rng.seek_frame]:
                        continue  # the seek landed before the keyframe: decoded on the way
                    raise _mismatch(source, expect, f"a frame with PTS {frame.pts}")
                if index < expect:
                    continue  # between the keyframe and the range's first frame
                if index != expect:
                    raise _mismatch(source, expect, f"frame {index}")
                yield Frame(
                    index=index,
                    timestamp_s=float((plan.pts[index] - start) * time_base),
                    image=source._image(frame),
                )
                expect += 1
                if expect >= rng.stop:
                    return
    except av.error.FFmpegError as exc:
        raise VideoDecodeError(
            f"{source.path}: decoding failed at frame {expect}: {exc.strerror or exc}; "
            "the file is truncated or corrupt; re-export or repair it"
        ) from exc
    if rng.stop >= plan.frames and expect > rng.first:
        # the file's last range: its decoder gave fewer frames than it has packets (an H.264 stream
        # whose last packets decode to nothing), so the stream ends here, as the single pass's does:
        # no row is shifted
        return
    raise _mismatch(source, expect, "the end of the stream")


def _mismatch(source: VideoFileSource, expect: int, got: str) -> VideoDecodeError:
    return VideoDecodeError(
        f"{source.path}: parallel decoding expected frame {expect} but got {got}; "
        "this file does not split cleanly, run it with --loaders 1"
    )
