"""The eyes' video beside the report: ``<stem>.eyes.webm``, every frame of the recording cut to the
band of both eyes, so the report can show the frame under its trace cursor.

``eyeblink report --eyes-video`` (and ``--report`` while processing) decodes the recording again, in
the order the run did (frame ``k`` of ``frames.csv`` is decoded frame ``k``), cuts from each frame
the band of the face box where the eyes are (from :data:`BAND_TOP` to :data:`BAND_BOTTOM` of the
box's width below its top, the box's full width), steadied over time (the box's centre is a running
median over :data:`STEADY_S`; its size the session's median), scaled to :data:`WIDTH` pixels wide,
and encodes it as VP9 in WebM with PyAV (a codec Chromium and Firefox play). Frame ``k`` is shown
from ``k / fps`` to ``(k + 1) / fps`` at the recording's rate, whatever its real timestamps: the
page seeks by frame number.

Rows without a face take the nearest box there is; a session without any face has no eyes' video (an
error naming why). A recording of one eye (``--eye-roi``) shows its whole eye region.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, InputNotFoundError, one_line

if TYPE_CHECKING:
    import numpy as np

__all__ = ["WIDTH", "eye_boxes", "write_eyes_video"]

#: the video's width in pixels (its height follows the band's shape)
WIDTH = 256
#: the eye band: from this fraction of the face box's width below the box's top ...
BAND_TOP = 0.12
#: ... to this one (BlazeFace's box: the eyes sit about a quarter of its width below its top)
BAND_BOTTOM = 0.46
#: the box's centre is steadied by a running median over this long (seconds)
STEADY_S = 0.2
#: VP9 quality (constant quality: lower is better and larger) and a keyframe at least every this
#: many frames
CRF = 32
GOP = 250


def _running_median(x: np.ndarray, k: int) -> np.ndarray:
    import numpy as np

    if k <= 1 or len(x) < 3:
        return x
    half = k // 2
    pad = np.pad(x, (half, half), mode="edge")
    win = np.lib.stride_tricks.sliding_window_view(pad, 2 * half + 1)
    return np.median(win, axis=1)


def eye_boxes(box: np.ndarray, fps: float, *, region: bool = False) -> tuple[np.ndarray, int, int]:
    """Per frame row the crop (x0, y0) of the eye band, and its width and height in source pixels,
    from the face boxes ``box`` (rows of x0, y0, x1, y1; NaN without a face). ``region``: the boxes
    are a recording's eye region (``--eye-roi``), shown whole."""
    import numpy as np

    ok = np.isfinite(box).all(axis=1)
    if not ok.any():
        raise ConfigError("no frame of this session has a face box: there are no eyes to show")
    if region:
        first = box[np.argmax(ok)]
        w, h = max(8, round(first[2] - first[0])), max(4, round(first[3] - first[1]))
        return np.tile(first[:2], (len(box), 1)), w, h
    idx = np.arange(len(box))
    filled = np.empty_like(box)
    for c in range(4):  # rows without a face: the nearest box there is
        filled[:, c] = np.interp(idx, idx[ok], box[ok, c])
    w = float(np.median(filled[ok, 2] - filled[ok, 0]))
    cx = _running_median((filled[:, 0] + filled[:, 2]) / 2, max(1, round(STEADY_S * fps)))
    top = _running_median(filled[:, 1], max(1, round(STEADY_S * fps)))
    crop_w = max(8, round(w))
    crop_h = max(4, round(w * (BAND_BOTTOM - BAND_TOP)))
    origin = np.stack([cx - crop_w / 2, top + BAND_TOP * w], axis=1)
    return origin, crop_w, crop_h


def _crop(
    gray: np.ndarray, x0: float, y0: float, w: int, h: int, out_w: int, out_h: int
) -> np.ndarray:
    """The band [x0, x0 + w) x [y0, y0 + h) of ``gray`` (edge pixels repeated past the frame),
    scaled."""
    import cv2
    import numpy as np

    xi, yi = round(x0), round(y0)
    H, W = gray.shape[:2]
    pad = max(0, -xi, -yi, xi + w - W, yi + h - H)
    src = np.pad(gray, pad, mode="edge") if pad else gray
    band = src[yi + pad : yi + pad + h, xi + pad : xi + pad + w]
    return cv2.resize(band, (out_w, out_h), interpolation=cv2.INTER_AREA)


def write_eyes_video(
    session: str | Path,
    recording: str | Path | None = None,
    output: str | Path | None = None,
    *,
    progress: Any = None,
) -> Path:
    """Write ``OUTDIR/<stem>.eyes.webm`` (or ``output``) for a processed session; ``recording``: the
    video when it is no longer at the path in ``summary.json``. Returns the path written."""
    import json

    import av
    import numpy as np

    from eyeblink.config import moved_to_place
    from eyeblink.outputs.paths import OutputPlan, atomic_path
    from eyeblink.outputs.report import eyes_video_path, numbers, read_rows, session_paths
    from eyeblink.sources.files import open_source

    outdir, stem, (frames_csv, summary_path) = session_paths(
        session, ".frames.csv", ".summary.json"
    )
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{summary_path} cannot be read ({one_line(exc)}); re-run `eyeblink process`"
        ) from None
    video = (
        Path(recording)
        if recording is not None
        else (
            Path(summary["input"])
            if isinstance(summary, dict) and isinstance(summary.get("input"), str)
            else None
        )
    )
    if video is None or not video.exists():
        raise InputNotFoundError(
            f"the recording of {stem} is not at {video}; give it with --video VIDEO"
        )
    out = Path(output) if output is not None else eyes_video_path(outdir, stem)
    OutputPlan().read(video, "the recording").read(frames_csv, "the session's frames.csv").write(
        out, "the eyes' video"
    ).check()
    header, rows, _ = read_rows(
        frames_csv, ("frame", "face_x0", "face_y0", "face_x1", "face_y1"), "frames.csv"
    )
    frame_no = numbers(frames_csv, header, rows, "frame").astype(np.int64)
    box = np.stack(
        [
            numbers(frames_csv, header, rows, c)
            for c in ("face_x0", "face_y0", "face_x1", "face_y1")
        ],
        axis=1,
    )
    interval = summary.get("frame_interval_median_ms") if isinstance(summary, dict) else None
    step_fps = 1000 / interval if isinstance(interval, (int, float)) and interval > 0 else 30.0
    # fps: an image folder's rate (a video's own wins)
    with open_source(video, fps=step_fps) as src:
        fps = float(src.nominal_fps or step_fps)
        settings = summary.get("settings") if isinstance(summary, dict) else None
        # the region, where summary.json keeps it (an older summary's in [detect] too)
        eye = moved_to_place(settings).get("eye") if isinstance(settings, dict) else None
        region = isinstance(eye, dict) and eye.get("roi") is not None
        origin, cw, ch = eye_boxes(box, fps, region=region)
        out_w = WIDTH
        out_h = max(2, 2 * round(WIDTH * ch / cw / 2))
        row_of = {int(f): i for i, f in enumerate(frame_no)}
        rate = Fraction(fps).limit_denominator(1001)
        with atomic_path(out) as tmp:
            container = av.open(str(tmp), "w", format="webm")
            try:
                stream = container.add_stream("libvpx-vp9", rate=rate)
                stream.width, stream.height, stream.pix_fmt = out_w, out_h, "yuv420p"
                stream.codec_context.time_base = Fraction(1) / rate
                stream.codec_context.gop_size = GOP
                stream.codec_context.options = {
                    "crf": str(CRF),
                    "b": "0",
                    "deadline": "realtime",
                    "cpu-used": "8",
                    "row-mt": "1",
                }
                written = 0
                bar = progress(f"{stem} eyes video", len(rows)) if progress else None
                for frame in src:
                    if frame.index > frame_no[-1]:
                        break  # past the last frame the run wrote (max_frames)
                    i = row_of.get(frame.index)
                    if i is None:
                        continue  # a frame the run never wrote (past max_frames)
                    gray = (
                        frame.image
                        if frame.image.ndim == 2
                        else frame.image.mean(axis=2).astype(np.uint8)
                    )
                    img = _crop(gray, origin[i, 0], origin[i, 1], cw, ch, out_w, out_h)
                    vf = av.VideoFrame.from_ndarray(
                        np.ascontiguousarray(img), format="gray"
                    ).reformat(format="yuv420p")
                    vf.pts = int(frame.index)
                    vf.time_base = Fraction(1) / rate
                    for packet in stream.encode(vf):
                        container.mux(packet)
                    written += 1
                    if bar is not None:
                        bar.update(1)
                for packet in stream.encode():
                    container.mux(packet)
                if bar is not None:
                    bar.close()
            finally:
                container.close()
            if not written:  # the temporary file is removed
                raise ConfigError(
                    f"{video} gave none of the session's frames: is it the recording of {stem}?"
                )
    return out
