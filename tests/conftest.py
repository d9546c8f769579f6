"""Shared pytest fixtures: builders that write real test inputs (videos, image folders).

Builders write into ``tmp_path``, so tests never depend on files outside the repo. Third-party
data lives in ``EYEBLINK_DATA`` (default ``<repo>/../shared/data``) and is never copied here;
tests that need it use the ``data_dir`` fixture and skip when it is absent.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- isolation: signals, environment


def default_signals() -> None:
    """``preexec_fn`` for a child a test stops with SIGINT or SIGTERM: both at their defaults and unblocked.

    A suite started in the background from a script (``pytest ... &``, ``nohup``) runs with SIGINT ignored, and
    an ignored signal stays ignored across exec: without this, ``eyeblink`` would keep it ignored (the Unix
    convention for background jobs, see docs/explanation/reliability.md) and a test's Ctrl-C would do nothing.
    """
    from eyeblink.stopping import default_child_signals

    default_child_signals()


#: ``subprocess.Popen(..., **CHILD_SIGNALS)``: the child starts with SIGINT and SIGTERM at their defaults.
CHILD_SIGNALS: dict[str, object] = {"preexec_fn": default_signals}


@pytest.fixture(autouse=True)
def _isolated_process_state() -> Iterator[None]:
    """Each test leaves ``os.environ`` and the SIGINT/SIGTERM handlers as it found them (an in-process ``main``,
    ``ray.init``, a Keras backend choice must not reach later tests or their subprocesses)."""
    env = dict(os.environ)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


# --------------------------------------------------------------------------- synthetic pixels


def synthetic_frames(n: int, width: int = 64, height: int = 48, *, color: bool = False) -> list[np.ndarray]:
    """``n`` distinct uint8 frames: a moving bright bar on a level that changes per frame.

    Distinct, smooth content survives lossy codecs well enough to check ordering and values.
    """
    frames = []
    for i in range(n):
        img = np.full((height, width), (i * 37) % 200 + 20, dtype=np.uint8)
        img[:, (i * 3) % width] = 250
        if color:
            img = np.stack([img, np.roll(img, 5, axis=1), 255 - img], axis=-1)
        frames.append(img)
    return frames


@pytest.fixture
def make_frames() -> Callable[..., list[np.ndarray]]:
    """Builder: ``make_frames(n, width=64, height=48, *, color=False)`` -> :func:`synthetic_frames`."""
    return synthetic_frames


# --------------------------------------------------------------------------- video builder


def write_video(
    path: Path,
    frames: int | Sequence[np.ndarray],
    *,
    codec: str = "ffv1",
    pix_fmt: str = "gray",
    fps: int | Fraction = 500,
    pts: Sequence[int] | None = None,
    time_base: Fraction | None = None,
    fmt: str | None = None,
    width: int = 64,
    height: int = 48,
    options: dict[str, str] | None = None,
    gop: int | None = None,
) -> Path:
    """Write a real video with PyAV and return its path.

    ``frames`` is a count (synthetic frames of ``width`` x ``height``) or a list of uint8 gray
    ``(H, W)`` / RGB ``(H, W, 3)`` arrays. ``pts`` gives each frame's presentation timestamp in
    ``time_base`` units (default ``1/fps``), so gaps and repeats can be written on purpose.
    ``fmt`` forces the container format (e.g. ``"h264"`` for a raw elementary stream without
    timestamps); otherwise it follows the file suffix. ``options`` go to the encoder (e.g.
    ``{"g": "50"}``: a keyframe every 50 frames with libx264); ``gop`` sets the keyframe interval
    through the codec context (x264's scene-cut detection may add keyframes).
    """
    import av

    images = synthetic_frames(frames, width, height) if isinstance(frames, int) else list(frames)
    if pts is not None and len(pts) != len(images):
        raise ValueError(f"pts has {len(pts)} entries for {len(images)} frames")
    h, w = images[0].shape[:2] if images else (height, width)
    container = av.open(str(path), mode="w", format=fmt)
    stream = container.add_stream(codec, rate=fps, options=options or {})
    stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
    if gop is not None:
        stream.codec_context.gop_size = gop
    tb = time_base or (Fraction(1, fps) if isinstance(fps, int) else 1 / fps)
    if pts is not None:
        stream.time_base = tb
        stream.codec_context.time_base = tb
    if not images:
        container.start_encoding()  # header only: a video stream with zero frames
    for i, img in enumerate(images):
        src = av.VideoFrame.from_ndarray(img, format="gray" if img.ndim == 2 else "rgb24")
        frame = src.reformat(format=pix_fmt)
        if pts is not None:
            frame.pts = pts[i]
            frame.time_base = tb
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return path


MakeVideo = Callable[..., Path]


@pytest.fixture
def make_video(tmp_path: Path) -> MakeVideo:
    """Builder: ``make_video(frames, *, codec, container, pts=None, fps, pix_fmt, ...) -> Path``.

    ``container`` is the file suffix (``"avi"``, ``"mkv"``, ``"mp4"``, ``"h264"``); every other
    keyword goes to :func:`write_video`. Each call writes a new file under ``tmp_path``.
    """
    counter = iter(range(1_000_000))

    def build(frames: int | Sequence[np.ndarray], *, container: str = "mkv", **kwargs: object) -> Path:
        path = tmp_path / f"video{next(counter)}.{container}"
        return write_video(path, frames, **kwargs)  # type: ignore[arg-type]

    return build


# --------------------------------------------------------------------------- image-folder builder

MakeImageFolder = Callable[..., Path]


@pytest.fixture
def make_image_folder(tmp_path: Path) -> MakeImageFolder:
    """Builder: ``make_image_folder({"frame1.png": array_or_None, ...}, name="imgs") -> Path``.

    An array is saved with PIL in the format its suffix implies; ``None`` writes a text file
    (for "non-image files are ignored" cases). Returns the folder.
    """
    from PIL import Image

    def build(files: dict[str, np.ndarray | None], *, name: str = "imgs") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        for filename, img in files.items():
            if img is None:
                (folder / filename).write_text("not an image\n")
            else:
                Image.fromarray(img).save(folder / filename)
        return folder

    return build


# --------------------------------------------------------------------------- third-party data


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The research-only test data folder (``EYEBLINK_DATA`` or ``<repo>/../shared/data``)."""
    path = Path(os.environ.get("EYEBLINK_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.skip(f"test data not found at {path} (set EYEBLINK_DATA)")
    return path


# --------------------------------------------------------------------------- recordings with a face


@pytest.fixture(scope="session")
def face_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A real 640x480 gray 500 FPS MJPG recording of a face with one full blink (1.6 s, 800 frames).

    Rendered once per session by :mod:`eyeblink.lab.synth`; returns ``(path, SyntheticTruth)``.
    """
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    path = tmp_path_factory.mktemp("recordings") / "subject.avi"
    cfg = SynthConfig(duration_s=1.6, blinks=(BlinkSpec(onset_s=0.8, closing_ms=70, closed_ms=30, opening_ms=140),),
                      mjpeg_qscale=4, seed=1)
    return path, write_recording(path, cfg)


@pytest.fixture(scope="session")
def face_frames(face_recording: tuple[Path, object]) -> list[np.ndarray]:
    """The decoded gray frames of :func:`face_recording`."""
    from eyeblink.sources.files import open_source

    with open_source(face_recording[0]) as src:
        return [f.image for f in src]
