"""One long video as time chunks, each a task of ``eyeblink batch``
(:mod:`eyeblink.runtime.batch.driver`) on its own node.

:func:`plan_chunks` cuts a video into chunks of about ``--chunk-s`` seconds whose borders are
multiples of the tracking segment (:data:`ALIGN_FRAMES`), where every runtime restarts the keyframe
policy, so that a chunk's per-frame rows are those of an unsplit run. :class:`ChunkSource` is one
chunk as a frame source: the frames ``[lo, hi)`` of the video, numbered from 0. (The loaders' ranges
of one process, decoded side by side on one machine, are :mod:`eyeblink.sources.ranges`.) Only the
standard library is imported: the batch driver stays light.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from eyeblink.closing import Closing
from eyeblink.errors import ConfigError

if TYPE_CHECKING:
    from eyeblink.frames import Frame
    from eyeblink.sources.files import FrameSource

__all__ = ["ALIGN_FRAMES", "ChunkSource", "plan_chunks", "round_up"]

#: The tracking segment (:data:`eyeblink.frame.analyzer.SEGMENT_FRAMES`, a floor above: not
#: imported): chunk borders are multiples of it so per-frame rows are identical to an unsplit run.
ALIGN_FRAMES = 128


def round_up(value: float, step: int) -> int:
    """``value`` rounded up to a whole number of ``step`` (at least one ``step``); the loaders'
    ranges use it too."""
    return max(step, math.ceil(value / step) * step)


def plan_chunks(
    frames: int | None, fps: float | None, chunk_s: float
) -> list[tuple[int, int | None]]:
    """Chunks of a video as ``(start, end)``: frames ``[start, end)``, ``end`` None meaning "to the
    end of the video".

    One chunk ``(0, None)`` when the length or rate is unknown, splitting is off (``chunk_s == 0``)
    or the video is not longer than one and a half chunks. Borders are multiples of
    :data:`ALIGN_FRAMES` (whole tracking segments); a remainder shorter than half a chunk joins the
    previous chunk.
    """
    if not frames or not fps or chunk_s <= 0:
        return [(0, None)]
    size = round_up(max(1, round(chunk_s * fps)), ALIGN_FRAMES)
    starts = list(range(0, frames, size))
    if len(starts) > 1 and frames - starts[-1] < size / 2:
        starts.pop()
    return [(s, starts[i + 1] if i + 1 < len(starts) else None) for i, s in enumerate(starts)]


class ChunkSource(Closing):
    """Frames ``[lo, hi)`` of another source, renumbered from 0 (the merge shifts them back by
    ``lo``): one batch task's chunk of a long video, a :class:`~eyeblink.sources.files.FrameSource`
    itself.

    Frames before ``lo`` are decoded and dropped (decode order defines the frame number, so a seek
    could not tell which frame it landed on); iteration stops at ``hi`` and closes the inner source.
    Timestamps are the container's, unchanged. ``hi = None``: to the end of the video (the last
    chunk; the inner source's truncation check then runs as in ``process``).
    """

    def __init__(self, inner: FrameSource, lo: int, hi: int | None) -> None:
        if lo < 0 or (hi is not None and hi <= lo):
            raise ConfigError(
                f"frame range [{lo}, {hi}) is empty or negative; lo must be >= 0 and < hi"
            )
        self.inner, self.lo, self.hi = inner, lo, hi
        self.path, self.name = inner.path, inner.name
        self.nominal_fps = inner.nominal_fps
        hint = inner.frame_count_hint
        end = hi if hi is not None else hint
        self.frame_count_hint = None if end is None else max(0, end - lo)
        self.width, self.height = inner.width, inner.height

    def __iter__(self) -> Iterator[Frame]:
        from eyeblink.frames import Frame

        it = iter(self.inner)
        with contextlib.closing(it):  # type: ignore[type-var]
            for f in it:
                if f.index < self.lo:
                    continue
                if self.hi is not None and f.index >= self.hi:
                    break
                yield Frame(f.index - self.lo, f.timestamp_s, f.image)

    def describe(self) -> dict[str, Any]:
        info = dict(self.inner.describe())
        info["frame_range"] = [self.lo, self.hi]
        return info

    def close(self) -> None:
        self.inner.close()
