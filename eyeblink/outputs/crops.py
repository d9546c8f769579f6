"""Eye crops at each blink's onset, peak and offset: kept while processing, shown by the report.

A researcher checks a detected blink by looking at the eye. The report must show it without the
recording (a live stream is gone; an archive's video may be elsewhere), so the crops are taken while
the frames pass through the pipeline:

* the workers cut a small upright image of both eyes from every frame
  (:func:`eyeblink.landmarks.eyes.eye_strip`, 40x120 pixels, 20-40 µs) and send it with the frame's
  row, with the 12 fitted eye points in its pixels; only runs with ``eye_crops`` on (``--report``)
  do this;
* the sink (:class:`BlinkCrops`) keeps the last few seconds of them and, when the blink detector
  reports a blink, keeps the strips of its onset, peak and offset frames (the nearest frame with a
  face within a few frames, when the exact one has none);
* at the end of the session they are written to ``<stem>.crops.npz`` (``frames``, ``strips``,
  ``points``; written whole or not at all), which :mod:`eyeblink.outputs.report` reads: each blink
  of ``blinks.csv`` gets three JPEG images with the eye points drawn, inlined in the page.

Memory: a 3,000-frame window (6 s at 500 FPS) is ~15 MB; a 20-minute session with 300 blinks keeps
~900 strips (~4 MB before compression).
"""

from __future__ import annotations

import base64
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from eyeblink.signals.blinks import BlinkEvent

__all__ = [
    "BlinkCrops",
    "crops_path",
    "load_crops",
    "nearest_frame",
    "read_crops",
    "render_blink_crops",
]

#: frames the sink remembers: a blink is reported a little after its offset; 3,000 frames cover
#: blinks up to ~5 s at 500 FPS (and ~100 s at 30 FPS)
WINDOW_FRAMES = 3000
#: how far (frames) to look for a frame with a face when the exact onset/peak/offset frame has none
NEAREST = 5
#: at most this many blinks get crops (the first ones; ~12 KB of page each: 600 blinks, 40 min of
#: blinking at 15/min, add ~7 MB, which keeps a 20-minute 500 FPS report under ~20 MB)
MAX_BLINKS = 600
#: drawn crops: this many times the strip's size, JPEG at this quality
SCALE = 2
JPEG_QUALITY = 80


def crops_path(outdir: Path, stem: str) -> Path:
    return outdir / f"{stem}.crops.npz"


class BlinkCrops:
    """The sink's keeper of eye strips: a rolling window, and the frames blinks asked for."""

    def __init__(self, window: int = WINDOW_FRAMES) -> None:
        self._window: deque[int] = deque()
        self._recent: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._size = window
        self.blinks = 0

    def add(self, index: int, strip: np.ndarray | None, points: np.ndarray | None) -> None:
        """One frame's strip (``None``: no face or no fit in that frame)."""
        if strip is None or points is None:
            return
        self._window.append(index)
        self._recent[index] = (strip, points)
        while len(self._window) > self._size:
            self._recent.pop(self._window.popleft(), None)

    def blink(self, ev: BlinkEvent) -> None:
        """Keep the strips of ``ev``'s onset, peak and offset (if they are still in the window)."""
        if self.blinks >= MAX_BLINKS:
            return
        self.blinks += 1
        for f in (ev.start_frame, ev.peak_frame, ev.end_frame):
            hit = nearest_frame(self._recent, f)
            if hit is not None:
                self._kept[hit] = self._recent[hit]

    def keep(self, index: int, strip: np.ndarray, points: np.ndarray) -> None:
        """Keep one frame's strip directly (merging the crops of several chunks)."""
        self._kept[index] = (strip, points)

    def __len__(self) -> int:
        return len(self._kept)

    def save(self, path: Path) -> Path | None:
        """Write the kept strips to ``path`` (whole or not at all); ``None`` when there is
        nothing to keep."""
        from eyeblink.outputs.export import write_atomic

        if not self._kept:
            return None
        frames = np.array(sorted(self._kept), dtype=np.int64)
        strips = np.stack([self._kept[int(f)][0] for f in frames])
        points = np.stack([self._kept[int(f)][1] for f in frames]).astype(np.float32)
        write_atomic(
            path, lambda fh: np.savez_compressed(fh, frames=frames, strips=strips, points=points)
        )
        return path


def load_crops(path: Path) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``<stem>.crops.npz`` -> frame -> (strip, points); ``{}`` when the file is missing or
    unreadable."""
    return read_crops(path)[0]


def read_crops(path: Path) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], str | None]:
    """:func:`load_crops` and, when the file exists but cannot be used (truncated, not an ``.npz``
    of crops), a one-line reason naming it and the fix (``None`` when the file is missing or read).
    """
    import pickle
    import zipfile

    if not path.is_file():
        return {}, None
    why = None
    try:
        with np.load(path) as z:
            frames, strips, points = z["frames"], z["strips"], z["points"]
    except (zipfile.BadZipFile, EOFError, pickle.UnpicklingError) as exc:
        why = f"it is truncated or not a zip archive ({exc})"
    except KeyError as exc:
        why = f"it has no {exc} array"
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        why = f"it is not an eyeblink crops file ({exc})"
    else:
        if (
            (len(frames) == len(strips) == len(points))
            and strips.ndim == 3
            and points.shape[1:] == (12, 2)
        ):
            return {int(f): (s, p) for f, s, p in zip(frames, strips, points, strict=True)}, None
        why = "its arrays do not have the shapes of eye crops"
    return {}, (
        f"{path} cannot be read: {' '.join(why.split())}; the eye crops are not shown (re-run "
        "`eyeblink process --report` to keep them again)"
    )


def _draw(strip: np.ndarray, points: np.ndarray) -> str:
    """One strip, enlarged, with the eye points drawn: a JPEG data URI."""
    import cv2

    img = cv2.resize(
        strip, (strip.shape[1] * SCALE, strip.shape[0] * SCALE), interpolation=cv2.INTER_CUBIC
    )
    img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    # the report's trace colours (BGR): subject's right eye (points 0-5, image left) red, left eye
    # (6-11) blue
    for k, colour in ((0, (40, 39, 214)), (6, (180, 119, 31))):
        eye = np.round(points[k : k + 6] * SCALE).astype(np.int32)
        cv2.polylines(img, [eye.reshape(-1, 1, 2)], True, colour, 1, cv2.LINE_AA)
        for x, y in eye:
            cv2.circle(img, (int(x), int(y)), 2, colour, -1, cv2.LINE_AA)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def nearest_frame(crops: dict[int, Any], frame: int) -> int | None:
    """``frame`` if it has a crop, else the nearest one within ``NEAREST`` frames (the earlier on
    a tie)."""
    for d in range(NEAREST + 1):
        for g in (frame - d, frame + d):
            if g in crops:
                return g
    return None


def render_blink_crops(
    crops: dict[int, tuple[np.ndarray, np.ndarray]], blinks: list[dict[str, str]]
) -> dict[int, list[str]]:
    """Blink number -> [onset, peak, offset] data URIs, for the blinks of ``blinks.csv`` that
    have crops."""
    out: dict[int, list[str]] = {}
    if not crops:
        return out
    for b in blinks:
        try:
            n = int(b["blink"])
            frames = [int(b[k]) for k in ("start_frame", "peak_frame", "end_frame")]
        except (KeyError, TypeError, ValueError):
            continue
        uris = []
        for f in frames:
            g = nearest_frame(crops, f)
            if g is not None:
                uris.append(_draw(*crops[g]))
        if uris:
            out[n] = uris
    return out
