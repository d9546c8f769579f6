"""``eyeblink region``: one frame of a recording as a PNG, a pixel scale along its edges and an eye
region drawn.

A small frame (a rodent's eye, 140x140 or 262x97 pixels) is scaled up by a whole factor, each of its
pixels a square, so that its scale can be read without zooming; the scale counts the frame's own
pixels.

The way to choose ``--eye-roi`` by eye for a recording of one eye: look at the first frame with its
scale, draw a candidate, look again. The region is checked against the frame as a run checks it (a
region past the frame's edge is the same one-line error).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from eyeblink.errors import ConfigError, OutputWriteError

if TYPE_CHECKING:
    from eyeblink.landmarks.region import EyeRegion

#: the picture's longer side is scaled up (a whole factor, each frame pixel a square of pixels)
#: towards this
PICTURE_PX = 960
#: the dark bands along the top and left edges that hold the scale, in pixels of the picture
MARGIN_PX = 30
#: the labelled ticks' spacing, in frame pixels: the smallest of these whose ticks lie at least 60
#: picture pixels apart
LABEL_STEPS = (5, 10, 20, 50, 100, 200, 500, 1000)


def picture_scale(w: int, h: int) -> int:
    """The whole factor a ``w`` x ``h`` frame is drawn at: its longer side up to about
    :data:`PICTURE_PX` (1 for a frame that large already)."""
    return max(1, PICTURE_PX // max(w, h, 1))


def label_step(scale: int) -> int:
    """Frame pixels between two numbered ticks at ``scale``: numbers never crowd, however small
    the frame."""
    return next((s for s in LABEL_STEPS if s * scale >= 60), LABEL_STEPS[-1])


def region_picture(gray: np.ndarray, roi: EyeRegion | None) -> np.ndarray:
    """The BGR picture: ``gray`` scaled up by :func:`picture_scale` (nearest pixel), a scale in
    frame pixels in bands along its top and left edges, and ``roi`` as a rectangle around its frame
    pixels."""
    import cv2

    h, w = gray.shape[:2]
    k = picture_scale(w, h)
    m = MARGIN_PX
    frame = cv2.resize(np.ascontiguousarray(gray), (w * k, h * k), interpolation=cv2.INTER_NEAREST)
    img = np.full((h * k + m, w * k + m, 3), 40, dtype=np.uint8)
    img[m:, m:] = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
    step = label_step(k)
    minor = step // 5 if (step // 5) * k >= 8 else step // 2 if (step // 2) * k >= 8 else step
    tick = (0, 255, 255)
    font, size = cv2.FONT_HERSHEY_SIMPLEX, 0.45
    for x in range(0, w + 1, minor):
        px = m + x * k
        cv2.line(img, (px, m - (12 if x % step == 0 else 5)), (px, m - 1), tick, 1)
        if x % step == 0:
            (tw, _), _ = cv2.getTextSize(str(x), font, size, 1)
            cv2.putText(
                img,
                str(x),
                (min(px - tw // 2, img.shape[1] - tw - 1), 13),
                font,
                size,
                tick,
                1,
                cv2.LINE_AA,
            )
    for y in range(0, h + 1, minor):
        py = m + y * k
        cv2.line(img, (m - (8 if y % step == 0 else 4), py), (m - 1, py), tick, 1)
        if y % step == 0 and y:
            cv2.putText(
                img, str(y), (1, min(py + 5, img.shape[0] - 2)), font, 0.35, tick, 1, cv2.LINE_AA
            )
    if roi is not None:
        x, y, rw, rh = roi.x, roi.y, roi.w, roi.h
        cv2.rectangle(
            img,
            (m + x * k, m + y * k),
            (m + (x + rw) * k - 1, m + (y + rh) * k - 1),
            (0, 0, 255),
            max(1, k // 2),
        )
        cv2.putText(
            img,
            f"{x},{y},{rw},{rh}",
            (m + x * k + 2, max(m + 14, m + y * k - 5)),
            font,
            0.5,
            (0, 0, 255),
            1,
            cv2.LINE_AA,
        )
    return img


def write_region_picture(
    path: Path, out: Path, roi: EyeRegion | None, *, frame: int = 0, fps: float | None = None
) -> tuple[int, int]:
    """Write frame ``frame`` of ``path`` with ``roi`` to the PNG ``out``; returns the frame's
    (width, height). A region past the frame's edge, or a frame the recording does not have, raises
    :class:`ConfigError`."""
    import cv2

    from eyeblink.sources.files import open_source

    if frame < 0:
        raise ConfigError(f"--frame must be >= 0, got {frame}")
    if out.suffix.lower() != ".png":
        raise ConfigError(f"the picture is a PNG: name it NAME.png, got {out}")
    if fps is None and path.is_dir():
        # an image folder's frames need a rate only for their timestamps: one frame needs none
        fps = 1.0
    gray, seen = None, 0
    with open_source(path, fps=fps) as source:
        for f in source:
            if seen == frame:
                gray = f.gray
                break
            seen += 1
    if gray is None:
        raise ConfigError(f"{path} has no frame {frame} (it has {seen}); choose an earlier --frame")
    h, w = gray.shape[:2]
    if roi is not None:
        roi.check_inside(w, h, f"the frames of {path.name}")
    ok = cv2.imwrite(str(out), region_picture(gray, roi))
    if not ok:
        raise OutputWriteError(
            f"could not write {out}; check that its folder exists and is writable"
        )
    return w, h


__all__ = ["picture_scale", "region_picture", "write_region_picture"]
