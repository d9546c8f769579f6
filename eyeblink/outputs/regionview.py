"""``eyeblink region``: one frame of a recording as a PNG, a pixel scale along its edges and an eye region drawn.

The way to choose ``--eye-roi`` by eye for a recording of one eye: look at the first frame with its scale, draw a
candidate, look again. The region is checked against the frame as a run checks it (a region past the frame's
edge is the same one-line error).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eyeblink.errors import ConfigError, OutputWriteError

#: the scale's ticks every this many pixels (a longer tick and a number every 100)
TICK_PX = 20


def region_picture(gray: np.ndarray, roi: tuple[int, int, int, int] | None) -> np.ndarray:
    """The BGR picture: ``gray`` with the scale on its top and left edges and ``roi`` as a rectangle."""
    import cv2

    img = cv2.cvtColor(np.ascontiguousarray(gray), cv2.COLOR_GRAY2BGR)
    h, w = gray.shape[:2]
    tick = (0, 255, 255)
    for x in range(0, w, TICK_PX):
        cv2.line(img, (x, 0), (x, 12 if x % 100 == 0 else 5), tick, 1)
        if x % 100 == 0 and x:
            cv2.putText(img, str(x), (x + 2, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.35, tick, 1, cv2.LINE_AA)
    for y in range(0, h, TICK_PX):
        cv2.line(img, (0, y), (12 if y % 100 == 0 else 5, y), tick, 1)
        if y % 100 == 0 and y:
            cv2.putText(img, str(y), (14, y + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.35, tick, 1, cv2.LINE_AA)
    if roi is not None:
        x, y, rw, rh = roi
        cv2.rectangle(img, (x, y), (x + rw - 1, y + rh - 1), (0, 0, 255), 1)
        cv2.putText(img, f"{x},{y},{rw},{rh}", (x + 2, max(12, y - 4)), cv2.FONT_HERSHEY_SIMPLEX, 0.4,
                    (0, 0, 255), 1, cv2.LINE_AA)
    return img


def write_region_picture(path: Path, out: Path, roi: tuple[int, int, int, int] | None, *, frame: int = 0,
                         fps: float | None = None) -> tuple[int, int]:
    """Write frame ``frame`` of ``path`` with ``roi`` to the PNG ``out``; returns the frame's (width, height).
    A region past the frame's edge, or a frame the recording does not have, raises :class:`ConfigError`."""
    import cv2

    from eyeblink.landmarks.region import EyeRegion
    from eyeblink.sources.files import open_source

    if frame < 0:
        raise ConfigError(f"--frame must be >= 0, got {frame}")
    if out.suffix.lower() != ".png":
        raise ConfigError(f"the picture is a PNG: name it NAME.png, got {out}")
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
        EyeRegion.parse(roi).check_inside(w, h, f"the frames of {path.name}")
    ok = cv2.imwrite(str(out), region_picture(gray, roi))
    if not ok:
        raise OutputWriteError(f"could not write {out}; check that its folder exists and is writable")
    return w, h


__all__ = ["region_picture", "write_region_picture"]
