"""``eyeblink report OUTDIR/<stem> --overlay out.mp4``: the recording re-encoded with what was
measured.

Each frame of the recording (or of ``--start``/``--end`` seconds of it) gets, from its
``frames.csv`` row: the face box used (green on a keyframe where the detector ran, yellow where the
box was carried over), the EAR of each eye as a bar and a number, the closure (FEC), the time and
frame, a "BLINK n" tag inside each blink of ``blinks.csv``, and a scrolling 1 s closure trace. The
eye points are not in the output files: with ``eye_points`` (the CLI passes the session's own eye
model, :func:`eyeblink.runtime.runner.eye_point_fitter`) each frame is fitted again and its 12 eye
points are drawn (~5 ms a frame with the mesh model). For talks, ``--fps 30`` plays a 500 FPS
recording in slow motion (every frame is kept; only the playback rate changes).

Frames are matched to rows by timestamp (the container's presentation time, as in
:mod:`eyeblink.sources.files`), so ``--start`` can seek instead of decoding from the beginning.
Encoding is H.264 (libx264, yuv420p, CRF 20) through PyAV.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, InputNotFoundError, OutputError, VideoOpenError
from eyeblink.outputs.paths import atomic_path

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.outputs.report import ReportData

__all__ = ["write_overlay"]

GREEN, YELLOW, RED, WHITE = (60, 200, 60), (230, 200, 40), (230, 60, 60), (255, 255, 255)
LEFT, RIGHT, ORANGE = (31, 119, 180), (214, 39, 40), (255, 160, 0)
EAR_MAX = 0.45  # the bars' full scale


def _row_arrays(data: ReportData, header_cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = data.session
    return {
        "t": s.t,
        "ear_left": s.ear_left,
        "ear_right": s.ear_right,
        "closure": s.closure,
        **header_cols,
    }


def _box_columns(path: Path) -> dict[str, np.ndarray]:
    from eyeblink.outputs.report import numbers, read_rows

    header, rows, _ = read_rows(path, ("frame",), "frames.csv")  # the rows the report's data holds
    return {
        c: numbers(path, header, rows, c)
        for c in ("detected", "face_x0", "face_y0", "face_x1", "face_y1")
        if c in header
    }


def _draw(
    img: np.ndarray,
    i: int,
    a: dict[str, np.ndarray],
    face: np.ndarray,
    blinks: list[tuple[float, float, str]],
    t_rel: float,
    frame_no: int,
) -> None:
    """Draw row ``i``'s measurements onto the RGB image in place."""
    import math

    import cv2
    import numpy as np

    h, w = img.shape[:2]
    font = cv2.FONT_HERSHEY_SIMPLEX
    if face[i] and all(
        k in a and math.isfinite(a[k][i]) for k in ("face_x0", "face_y0", "face_x1", "face_y1")
    ):
        p0 = (int(a["face_x0"][i]), int(a["face_y0"][i]))
        p1 = (int(a["face_x1"][i]), int(a["face_y1"][i]))
        key = bool(a.get("detected", np.zeros(1))[i]) if "detected" in a else False
        cv2.rectangle(img, p0, p1, GREEN if key else YELLOW, 2)
    else:
        cv2.putText(img, "no face", (12, h - 60), font, 0.8, RED, 2, cv2.LINE_AA)
    # EAR bars (right edge) and numbers
    for k, (name, color, label) in enumerate((("ear_left", LEFT, "L"), ("ear_right", RIGHT, "R"))):
        x0, y_top, y_bot = w - 60 + 26 * k, 40, 220
        cv2.rectangle(img, (x0, y_top), (x0 + 18, y_bot), (40, 40, 40), -1)
        v = a[name][i]
        if math.isfinite(v):
            y = int(y_bot - min(max(v / EAR_MAX, 0.0), 1.0) * (y_bot - y_top))
            cv2.rectangle(img, (x0, y), (x0 + 18, y_bot), color, -1)
        cv2.putText(img, label, (x0 + 3, y_bot + 18), font, 0.5, WHITE, 1, cv2.LINE_AA)

    def txt(v: float) -> str:
        return f"{v:.3f}" if math.isfinite(v) else "  -  "

    lines = [
        f"t {t_rel:8.3f} s  frame {frame_no}",
        f"EAR L {txt(a['ear_left'][i])}  R {txt(a['ear_right'][i])}",
        f"closure {txt(a['closure'][i])}",
    ]
    panel = img[4:84, 4:300]
    # a dark panel under the text (outlined text renders badly)
    panel[:] = (panel * 0.35).astype(panel.dtype)
    for n, line in enumerate(lines):
        cv2.putText(img, line, (12, 26 + 24 * n), font, 0.6, WHITE, 1, cv2.LINE_AA)
    t = a["t"][i]
    for b0, b1, name in blinks:
        if b0 <= t <= b1:
            cv2.putText(img, f"BLINK {name}", (w // 2 - 60, 32), font, 0.9, ORANGE, 2, cv2.LINE_AA)
            break
    # scrolling closure trace: the last second, 0..1 FEC over 50 px
    tt, cl = a["t"], a["closure"]
    j0 = int(np.searchsorted(tt, t - 1.0))
    seg_t, seg_c = tt[j0 : i + 1], cl[j0 : i + 1]
    ok = np.isfinite(seg_c)
    x = (w - 230 + (seg_t[ok] - (t - 1.0)) * 200).astype(np.int32)
    y = (h - 20 - np.clip(seg_c[ok], -0.2, 1.2) * 50).astype(np.int32)
    cv2.rectangle(img, (w - 232, h - 74), (w - 28, h - 8), (30, 30, 30), -1)
    cv2.line(img, (w - 230, h - 20), (w - 30, h - 20), (90, 90, 90), 1)
    cv2.line(img, (w - 230, h - 70), (w - 30, h - 70), (90, 90, 90), 1)
    if len(x) > 1:
        cv2.polylines(img, [np.stack([x, y], axis=1)], False, ORANGE, 1, cv2.LINE_AA)
    cv2.putText(
        img, "closure (FEC), last 1 s", (w - 228, h - 70 + 12), font, 0.4, WHITE, 1, cv2.LINE_AA
    )


def _draw_eyes(img: np.ndarray, pts: np.ndarray) -> None:
    import cv2
    import numpy as np

    for k, colour in ((0, RIGHT), (6, LEFT)):  # subject's right eye (36-41), left eye (42-47)
        eye = np.round(pts[k : k + 6] * 4).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(img, [eye], True, colour, 1, cv2.LINE_AA, shift=2)
        for x, y in eye[:, 0]:
            cv2.circle(img, (int(x), int(y)), 8, colour, -1, cv2.LINE_AA, shift=2)


def write_overlay(
    data: ReportData,
    frames_csv: Path,
    output: Path,
    *,
    video: Path | None = None,
    start_s: float | None = None,
    end_s: float | None = None,
    fps: float | None = None,
    progress: Callable[[int], Any] | None = None,
    eye_points: Callable[[np.ndarray], np.ndarray | None] | None = None,
) -> int:
    """Re-encode ``video`` (default: the summary's input) with the overlay; returns the frames
    written.

    ``start_s``/``end_s`` are seconds on the output files' clock (``timestamp_s``); ``fps`` the
    playback rate of the output (default: the recording's).
    """
    import av
    import numpy as np

    from eyeblink.sources.files import open_av

    src = video or data.video
    if src is None:
        raise InputNotFoundError(
            f"the recording of {data.stem} ({data.summary.get('input')}) is not there any more; "
            "give its path with --video"
        )
    if not Path(src).is_file():
        raise InputNotFoundError(
            f"recording not found: {src} — --overlay needs a video file (not an image folder)"
        )
    if start_s is not None and end_s is not None and end_s <= start_s:
        raise ConfigError(f"--end ({end_s}) must be after --start ({start_s})")
    a = _row_arrays(data, _box_columns(frames_csv))
    t = a["t"]
    if len(t) == 0:
        raise ConfigError(f"{frames_csv} has no rows; nothing to draw")
    interval = float(np.median(np.diff(t))) if len(t) > 1 else 0.002
    blinks = [
        (float(b["start_s"]), float(b["end_s"]), b.get("blink", ""))
        for b in data.blinks
        if b.get("start_s") and b.get("end_s")
    ]
    lo = float(t[0]) if start_s is None else start_s
    hi = float(t[-1]) if end_s is None else end_s
    try:
        inp = open_av(str(src))  # a title that is not UTF-8 must not stop it (as for processing)
    except av.FFmpegError as exc:
        raise VideoOpenError(
            f"cannot open {src} ({exc}); --overlay needs the recording of these outputs"
        ) from None
    try:
        stream = inp.streams.video[0]
        tb = stream.time_base or Fraction(1, 1000)
        t_start = stream.start_time or 0
        rate = fps or (float(stream.average_rate) if stream.average_rate else 1.0 / interval)
        if start_s is not None and start_s > 1.0:
            inp.seek(
                t_start + int((start_s - 1.0) / tb), stream=stream, backward=True, any_frame=False
            )
        _check_size(data, src, stream.codec_context.width, stream.codec_context.height)
        with atomic_path(output) as tmp:  # a failure leaves no half video where a good one was
            written = _encode(
                inp,
                stream,
                tmp,
                output,
                rate,
                tb,
                t_start,
                lo,
                hi,
                interval,
                t,
                a,
                data,
                blinks,
                eye_points,
                progress,
            )
            if written == 0:
                raise ConfigError(
                    f"no frame of {src} lies in {lo:.3f}–{hi:.3f} s; check --start/--end "
                    f"(the recording spans {t[0]:.3f}–{t[-1]:.3f} s)"
                )
    finally:
        inp.close()
    return written


def _check_size(data: ReportData, src: Path, width: int, height: int) -> None:
    """The video must be the recording the session measured: the frame size its summary records."""
    source = data.summary.get("source")
    w, h = (source.get("width"), source.get("height")) if isinstance(source, dict) else (None, None)
    if isinstance(w, int) and isinstance(h, int) and (w, h) != (width, height):
        raise ConfigError(
            f"{src} is {width}x{height} but {data.stem} was measured on a {w}x{h} recording "
            f"({data.summary.get('input')}); give that recording with --video"
        )


def _encode(
    inp: Any,
    stream: Any,
    tmp: Path,
    output: Path,
    rate: float,
    tb: Fraction,
    t_start: int,
    lo: float,
    hi: float,
    interval: float,
    t: np.ndarray,
    a: dict[str, np.ndarray],
    data: ReportData,
    blinks: list[tuple[float, float, str]],
    eye_points: Callable[[np.ndarray], np.ndarray | None] | None,
    progress: Callable[[int], Any] | None,
) -> int:
    import av
    import numpy as np

    written = 0
    try:
        out = av.open(str(tmp), "w")
    except (av.FFmpegError, OSError) as exc:
        raise OutputError(f"cannot write {output} ({exc}); choose another --overlay path") from None
    with out:
        enc = out.add_stream("libx264", rate=Fraction(rate).limit_denominator(1000))
        enc.width, enc.height, enc.pix_fmt = (
            stream.codec_context.width,
            stream.codec_context.height,
            "yuv420p",
        )
        enc.width -= enc.width % 2
        enc.height -= enc.height % 2
        enc.options = {"crf": "20", "preset": "veryfast"}
        for frame in inp.decode(stream):
            if frame.pts is None:
                continue
            ts = float((frame.pts - t_start) * tb)
            if ts < lo - interval / 2:
                continue
            if ts > hi + interval / 2:
                break
            i = int(np.clip(np.searchsorted(t, ts), 0, len(t) - 1))
            if i > 0 and abs(t[i - 1] - ts) < abs(t[i] - ts):
                i -= 1
            if abs(t[i] - ts) > interval / 2:
                continue  # a frame with no row (decode error at processing time): not drawn over
            img = np.ascontiguousarray(
                frame.to_ndarray(format="rgb24")[: enc.height, : enc.width], dtype=np.uint8
            )
            if eye_points is not None and data.face[i]:
                pts = eye_points(img)
                if pts is not None:
                    _draw_eyes(img, pts)
            _draw(img, i, a, data.face, blinks, float(t[i] - t[0]), int(data.session.frame[i]))
            for packet in enc.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
            written += 1
            if progress is not None:
                progress(written)
        for packet in enc.encode():
            out.mux(packet)
    return written
