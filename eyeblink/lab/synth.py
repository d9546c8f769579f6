"""Synthetic high-speed recordings with blinks at known times.

The demo (``eyeblink demo``) and the test-suite need a recording that looks like
the real thing -- one face, 640x480 grayscale at 500 FPS, a subject ~1 m from
the camera -- and whose blinks are known to the frame. This module animates a
real face photo (``skimage.data.astronaut()``) rather than drawing a cartoon,
because the point is to exercise the *real* detector and the *real* eye
models (the face mesh, dlib's predictors).

The face and how its eyelids are rendered: :mod:`eyeblink.lab.synth_face`; the blinks planted, the
recording's settings and the truth of each frame: :mod:`eyeblink.lab.synth_spec`. This module writes
the recording (:func:`write_recording`), and every name of both can be imported from here.

Conventions
-----------
* ``left`` / ``right`` are the *subject's* eyes, as in the output columns
  ``ear_left`` / ``ear_right``: ``right`` = dlib points 36-41 (the eye on the
  image's left), ``left`` = dlib points 42-47 (the image's right).
* Frame ``i`` is the instant ``t = i / fps``; its PTS is ``i`` in a time base of
  ``1 / fps``. Dropped frames are simply not written, so the decoded PTS show
  gaps exactly as a camera that drops frames does.
* A blink counts as a blink (``PlantedBlink.counts``) when its amplitude is at
  least :data:`FULL_BLINK_AMPLITUDE` (0.8). Partial blinks (e.g. amplitude 0.5,
  an "incomplete blink" in the blink literature) are planted on purpose as
  *don't care* events: a detector may or may not report them; a detection
  overlapping one is neither a hit nor a false positive. The demo asserts that
  every counted blink is detected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eyeblink.errors import ConfigError, OutputError
from eyeblink.lab.synth_face import (
    FACE_WIDTH_POINTS,
    LEFT_EYE_POINTS,
    RIGHT_EYE_POINTS,
    FaceRenderer,
    expected_ear,
    eye_landmarks_at,
    face_box,
    head_pose_at,
    render_frame,
)
from eyeblink.lab.synth_spec import (
    FULL_BLINK_AMPLITUDE,
    BlinkSpec,
    Codec,
    Eye,
    EyesSpec,
    PlantedBlink,
    SynthConfig,
    SyntheticTruth,
    closure_at,
    default_blinks,
    planned_truth,
)

__all__ = [
    "FACE_WIDTH_POINTS",
    "FULL_BLINK_AMPLITUDE",
    "LEFT_EYE_POINTS",
    "RIGHT_EYE_POINTS",
    "VIDEO_SUFFIXES",
    "BlinkSpec",
    "Codec",
    "Eye",
    "EyesSpec",
    "FaceRenderer",
    "PlantedBlink",
    "SynthConfig",
    "SyntheticTruth",
    "closure_at",
    "default_blinks",
    "expected_ear",
    "eye_landmarks_at",
    "face_box",
    "head_pose_at",
    "planned_truth",
    "render_frame",
    "write_recording",
]

#: Container suffixes accepted by :func:`write_recording` (``.avi`` is the usual one for
#: mjpeg/rawvideo, ``.mkv`` for ffv1).
VIDEO_SUFFIXES: tuple[str, ...] = (".avi", ".mkv")


def write_recording(path: str | Path, config: SynthConfig) -> SyntheticTruth:
    """Render ``config`` and write it to ``path`` (``.avi`` or ``.mkv``) with PyAV.

    Frame ``i`` is rendered at ``t = i / fps`` with a generator seeded by
    ``(seed, i)``, so a frame's pixels do not depend on which other frames are
    dropped. PTS are frame indices in a time base of ``1 / fps``; dropped frames
    leave gaps. MJPEG is written as ``yuvj420p`` (full range, so the Y plane is
    the gray image; neutral chroma), ffv1 and rawvideo as ``gray``. 10 s at
    500 FPS (5,000 frames) takes ~10-15 s on one core.

    AVI keeps the ``1 / fps`` time base, so decoded PTS equal frame indices.
    Matroska (``.mkv``) stores PTS in its own 1 ms time base: the decoded
    *times* are exact at 500 FPS (2 ms per frame), but at frame rates whose period
    is not a whole number of ms they are rounded to the millisecond.
    """
    import av

    out_path = Path(path)
    if out_path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ConfigError(
            f"output suffix must be one of {VIDEO_SUFFIXES} (e.g. {config.suffix} for "
            f"{config.codec}), "
            f"got {out_path.name!r}"
        )
    if not out_path.parent.is_dir():
        raise OutputError(f"output directory {out_path.parent} does not exist; create it first")
    truth = planned_truth(config)
    renderer = FaceRenderer(config)
    h, w = config.height, config.width
    try:
        container = av.open(str(out_path), mode="w")
    except OSError as exc:
        raise OutputError(f"cannot write {out_path}: {exc}") from exc
    try:
        if config.codec == "mjpeg":
            q = str(config.mjpeg_qscale)
            stream = container.add_stream(
                "mjpeg", rate=config.frame_rate, options={"qmin": q, "qmax": q}
            )
            stream.pix_fmt = "yuvj420p"
            planes = np.full((h * 3 // 2, w), 128, dtype=np.uint8)
        else:
            stream = container.add_stream(config.codec, rate=config.frame_rate)
            stream.pix_fmt = "gray"
            planes = np.empty((h, w), dtype=np.uint8)
        stream.width, stream.height = w, h
        stream.time_base = config.time_base
        fmt = "yuvj420p" if config.codec == "mjpeg" else "gray"
        for i, t, cl, cr in zip(
            truth.frame_index.tolist(),
            truth.timestamps_s.tolist(),
            truth.closure_left.tolist(),
            truth.closure_right.tolist(),
            strict=True,
        ):
            rng = np.random.default_rng([config.seed, i])
            planes[:h] = renderer.render(t, cl, cr, rng)
            frame = av.VideoFrame.from_ndarray(planes, format=fmt)
            frame.pts = i
            frame.time_base = config.time_base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    finally:
        container.close()
    return truth
