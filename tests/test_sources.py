"""Tests for eyeblink.sources.files: real videos written with PyAV, image folders, error cases,
ZJU."""

from __future__ import annotations

import os
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eyeblink.errors import (
    ConfigError,
    EmptySourceError,
    EyeblinkError,
    InputNotFoundError,
    VideoDecodeError,
    VideoOpenError,
)
from eyeblink.frames import Frame
from eyeblink.sources.files import (
    IMAGE_EXTENSIONS,
    FrameSource,
    ImageFolderSource,
    VideoFileSource,
    natural_sort_key,
    open_source,
)

MakeVideo = Callable[..., Path]
MakeImageFolder = Callable[..., Path]
MakeFrames = Callable[..., list[np.ndarray]]
REPO_ROOT = Path(__file__).resolve().parent.parent


def read_all(source: FrameSource) -> list[Frame]:
    with source:
        return list(source)


# --------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("container", "codec", "pix_fmt"),
    [("mkv", "ffv1", "gray"), ("mp4", "libx264", "yuv420p"), ("avi", "ffv1", "gray")],
)
def test_irregular_pts_show_as_gaps(
    make_video: MakeVideo, container: str, codec: str, pix_fmt: str
) -> None:
    """A 500 fps recording with dropped frames: timestamps are the container's, gaps included."""
    pts = [0, 1, 2, 4, 5, 9, 10, 11, 20]
    path = make_video(
        len(pts),
        container=container,
        codec=codec,
        pix_fmt=pix_fmt,
        pts=pts,
        time_base=Fraction(1, 500),
    )
    frames = read_all(open_source(path))
    assert [f.index for f in frames] == list(range(len(pts)))
    assert [f.timestamp_s for f in frames] == pytest.approx([p / 500 for p in pts], abs=1e-9)


def test_duplicated_timestamps_are_kept(make_video: MakeVideo) -> None:
    """MKV allows two frames with one PTS (a camera repeat): both come out, same timestamp."""
    pts = [0, 1, 1, 2, 3]
    path = make_video(len(pts), container="mkv", pts=pts, time_base=Fraction(1, 500))
    frames = read_all(open_source(path))
    assert [f.timestamp_s for f in frames] == pytest.approx(
        [0, 0.002, 0.002, 0.004, 0.006], abs=1e-9
    )


def test_fps_does_not_override_container_timestamps(make_video: MakeVideo) -> None:
    pts = [0, 1, 3, 4]
    path = make_video(len(pts), container="mkv", pts=pts, time_base=Fraction(1, 500))
    frames = read_all(open_source(path, fps=30))
    assert [f.timestamp_s for f in frames] == pytest.approx([0, 0.002, 0.006, 0.008], abs=1e-9)


def test_stream_without_timestamps_falls_back_to_fps(make_video: MakeVideo) -> None:
    """A raw H.264 elementary stream has no PTS/DTS: ``fps`` spaces its frames."""
    path = make_video(6, container="h264", fmt="h264", codec="libx264", pix_fmt="yuv420p")
    source = open_source(path, fps=250)
    frames = read_all(source)
    assert [f.timestamp_s for f in frames] == pytest.approx([i / 250 for i in range(6)])
    assert source.describe()["timestamps_from"]["interpolated"] == 6


# --------------------------------------------------------------------------- codecs / containers

CODEC_TABLE = [
    # container, codec, pix_fmt, width, height, lossless
    ("avi", "mjpeg", "yuvj420p", 64, 48, False),
    ("avi", "mjpeg", "yuvj420p", 333, 251, False),
    ("mkv", "ffv1", "gray", 333, 251, True),
    ("mkv", "ffv1", "yuv420p", 64, 48, False),  # limited-range luma: +-1 after range expansion
    ("mp4", "libx264", "yuv420p", 334, 250, False),
    ("mp4", "mpeg4", "yuv420p", 64, 48, False),
    ("avi", "rawvideo", "gray", 333, 251, True),
]


@pytest.mark.parametrize(
    ("container", "codec", "pix_fmt", "width", "height", "lossless"), CODEC_TABLE
)
def test_codecs_gray(
    make_frames: MakeFrames,
    make_video: MakeVideo,
    container: str,
    codec: str,
    pix_fmt: str,
    width: int,
    height: int,
    lossless: bool,
) -> None:
    n = 12
    src = make_frames(n, width, height)
    path = make_video(src, container=container, codec=codec, pix_fmt=pix_fmt, fps=500)
    source = open_source(path)
    assert (source.width, source.height) == (width, height)
    assert source.nominal_fps == pytest.approx(500)
    frames = read_all(source)
    assert [f.index for f in frames] == list(range(n))
    assert [f.timestamp_s for f in frames] == pytest.approx([i / 500 for i in range(n)], abs=1e-9)
    for f, ref in zip(frames, src, strict=True):
        assert f.image.shape == (height, width) and f.image.dtype == np.uint8
        err = np.abs(f.image.astype(int) - ref).mean()
        assert err == 0 if lossless else err < 8, f"frame {f.index}: mean abs error {err}"
    info = source.describe()
    assert info["codec"] == {"libx264": "h264"}.get(codec, codec)  # decoder name, not encoder
    assert info["pixel_format"] == pix_fmt and info["output"] == "gray"


@pytest.mark.parametrize(
    ("container", "codec", "pix_fmt", "tolerance"),
    [("mkv", "ffv1", "bgr0", 0), ("avi", "mjpeg", "yuvj444p", 8), ("mp4", "libx264", "yuv444p", 8)],
)
def test_codecs_color(
    make_frames: MakeFrames,
    make_video: MakeVideo,
    container: str,
    codec: str,
    pix_fmt: str,
    tolerance: int,
) -> None:
    src = make_frames(8, 96, 64, color=True)
    path = make_video(src, container=container, codec=codec, pix_fmt=pix_fmt)
    frames = read_all(open_source(path, color=True))
    assert len(frames) == 8
    for f, ref in zip(frames, src, strict=True):
        assert f.image.shape == (64, 96, 3)
        assert np.abs(f.image.astype(int) - ref).mean() <= tolerance
    # the default gray output of the same file is its luma
    gray = read_all(open_source(path))
    assert np.abs(gray[3].image.astype(int) - frames[3].gray).mean() < 3


# --------------------------------------------------------------------------- image folders


def test_image_folder_natural_sort_mixed_extensions(
    make_frames: MakeFrames, make_image_folder: MakeImageFolder
) -> None:
    imgs = make_frames(5, 40, 30)
    names = ["frame10.PNG", "frame2.jpg", "frame1.tif", "frame3.bmp", "frame100.jpeg"]
    folder = make_image_folder(
        {**dict(zip(names, imgs, strict=True)), "notes.txt": None, "frame0.csv": None}
    )
    source = open_source(folder, fps=500)
    assert isinstance(source, ImageFolderSource)
    assert source.name == "imgs" and source.frame_count_hint == 5
    assert [p.name for p in source.files] == [
        "frame1.tif",
        "frame2.jpg",
        "frame3.bmp",
        "frame10.PNG",
        "frame100.jpeg",
    ]
    frames = read_all(source)
    assert [f.timestamp_s for f in frames] == pytest.approx([0, 0.002, 0.004, 0.006, 0.008])
    assert frames[0].image.shape == (30, 40)
    np.testing.assert_array_equal(frames[0].image, imgs[2])  # frame1.tif is lossless
    assert read_all(open_source(folder, fps=500, color=True))[0].image.shape == (30, 40, 3)


def test_image_folder_size_mismatch_names_file(
    make_frames: MakeFrames, make_image_folder: MakeImageFolder
) -> None:
    a, b = make_frames(1, 40, 30)[0], make_frames(1, 41, 30)[0]
    folder = make_image_folder({"f1.png": a, "f2.png": a, "f3.png": b})
    source = open_source(folder, fps=100)
    got: list[Frame] = []
    with pytest.raises(VideoDecodeError, match=r"f3\.png.*41x30.*40x30"), source:
        got.extend(source)
    assert [f.index for f in got] == [0, 1]


def test_image_folder_16bit_tiff(make_image_folder: MakeImageFolder) -> None:
    from PIL import Image

    folder = make_image_folder({})
    Image.fromarray(np.full((8, 8), 0x8040, dtype=np.uint16)).save(folder / "a.tif")
    (frame,) = read_all(open_source(folder, fps=10))
    assert frame.image.dtype == np.uint8 and int(frame.image[0, 0]) == 0x80


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=30, unique=True))
def test_natural_sort_orders_numbers(numbers: list[int]) -> None:
    names = [f"frame{n}.png" for n in numbers]
    assert sorted(names, key=natural_sort_key) == [f"frame{n}.png" for n in sorted(numbers)]


# --------------------------------------------------------------------------- error cases


def _missing(tmp_path: Path) -> tuple[Path, dict]:
    return tmp_path / "nope.avi", {}


def _text_as_avi(tmp_path: Path) -> tuple[Path, dict]:
    path = tmp_path / "notes.avi"
    path.write_text("this is not a video\n" * 50)
    return path, {}


def _empty_folder(tmp_path: Path) -> tuple[Path, dict]:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "readme.txt").write_text("no images here")
    return folder, {"fps": 500}


def _folder_without_fps(tmp_path: Path) -> tuple[Path, dict]:
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.fromarray(np.zeros((8, 8), dtype=np.uint8)).save(folder / "a.png")
    return folder, {}


def _bad_fps(tmp_path: Path) -> tuple[Path, dict]:
    return _folder_without_fps(tmp_path)[0], {"fps": 0}


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (_missing, InputNotFoundError, r"input not found: .*nope\.avi — check the path"),
        (_text_as_avi, VideoOpenError, r"notes\.avi is not a video FFmpeg can open"),
        (_empty_folder, EmptySourceError, r"no images in folder .*empty.*\.png, \.jpg"),
        (_folder_without_fps, ConfigError, r"image folder .*imgs needs --fps"),
        (_bad_fps, ConfigError, r"--fps must be a positive number"),
    ],
)
def test_open_errors(tmp_path: Path, build, error: type[EyeblinkError], message: str) -> None:
    path, kwargs = build(tmp_path)
    with pytest.raises(error, match=message) as info:
        open_source(path, **kwargs)
    assert "\n" not in str(info.value)


def test_zero_frame_video_is_empty(make_video: MakeVideo) -> None:
    path = make_video([], container="avi", codec="mjpeg", pix_fmt="yuvj420p")
    with pytest.raises(EmptySourceError, match=r"video0\.avi has a video stream but no frames"):
        open_source(path)


@pytest.mark.parametrize(
    ("container", "codec", "pix_fmt"),
    [("avi", "mjpeg", "yuvj420p"), ("avi", "rawvideo", "gray"), ("mkv", "ffv1", "gray")],
)
def test_truncated_video_yields_prefix_then_raises(
    make_video: MakeVideo, container: str, codec: str, pix_fmt: str
) -> None:
    n = 200
    path = make_video(n, container=container, codec=codec, pix_fmt=pix_fmt, width=160, height=120)
    full = read_all(open_source(path))
    assert len(full) == n
    data = path.read_bytes()
    cut = path.with_name("cut." + container)
    cut.write_bytes(data[: len(data) // 2])

    got: list[Frame] = []
    with pytest.raises(
        VideoDecodeError, match=r"cut\.\w+: .*frame \d+.*truncated or corrupt; re-export"
    ) as info:
        got.extend(open_source(cut))
    assert "\n" not in str(info.value)
    assert 0 < len(got) < n
    assert [f.index for f in got] == list(range(len(got)))
    assert [f.timestamp_s for f in got] == [f.timestamp_s for f in full[: len(got)]]


def test_source_is_reiterable_and_describes_itself(make_video: MakeVideo) -> None:
    path = make_video(5, container="avi", codec="mjpeg", pix_fmt="yuvj420p")
    source = open_source(path)
    assert isinstance(source, VideoFileSource)
    assert source.name == "video0" and source.frame_count_hint == 5
    assert len(list(source)) == len(list(source)) == 5
    info = source.describe()
    assert info["container"] == "avi" and info["time_base"] == "1/500"
    assert info["timestamps_from"] == {"pts": 5, "dts": 0, "interpolated": 0}
    assert set(IMAGE_EXTENSIONS) >= {".png", ".jpg", ".tif", ".bmp"}


# --------------------------------------------------------------------------- ZJU (third-party data)


def _zju_clips() -> list[Path]:
    root = Path(os.environ.get("EYEBLINK_DATA", REPO_ROOT.parent / "shared" / "data")) / "zju-dev"
    return sorted(root.glob("*.avi")) if root.is_dir() else []


def _read_tsv(path: Path) -> list[dict[str, int]]:
    """Rows of ``<video>.packet_to_decoded_frame.tsv`` keyed by the header's first word per
    column."""
    lines = path.read_text().splitlines()
    header = [h.split("(")[0].lstrip("# ").strip() for h in lines[0].split("\t")]
    return [
        dict(zip(header, map(int, line.split("\t")), strict=True)) for line in lines[1:] if line
    ]


@pytest.mark.parametrize("clip", _zju_clips() or [None], ids=lambda p: p.name if p else "absent")
def test_zju_alignment(clip: Path | None) -> None:
    """Each decoded ZJU frame's container timestamp and packet index match the helper tsv.

    The tsv's column 1 (tag frameID) is the 0-based demuxed packet index; its ``packet_pts``
    column is the container PTS. They differ on these clips because the AVIs contain
    zero-length index entries (frames the capture dropped) that advance the PTS but are not
    packets. Timestamps follow PTS (``round(timestamp_s * fps) == packet_pts``) and
    ``packet_index`` gives the tag frameID.
    """
    if clip is None:
        pytest.skip("ZJU data not found (set EYEBLINK_DATA)")
    rows = [
        r
        for r in _read_tsv(clip.with_suffix(".packet_to_decoded_frame.tsv"))
        if r["is_null_packet"] == 0
    ]
    by_decode = {r["decoded_frame_index"]: r for r in rows}
    source = open_source(clip)
    assert isinstance(source, VideoFileSource)
    fps = source.nominal_fps
    assert fps is not None
    frames = read_all(source)  # no VideoDecodeError: dropped-frame slots are not truncation
    assert len(frames) == len(rows)
    for f in frames:
        row = by_decode[f.index]
        assert round(f.timestamp_s * fps) == row["packet_pts"], f"{clip.name} frame {f.index}"
        assert source.packet_index(f.index) == row["tag_frame_number"], (
            f"{clip.name} frame {f.index}"
        )
        assert f.image.shape == (240, 320)


def test_open_av_reads_a_non_utf8_title_on_every_pyav(
    make_video: MakeVideo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container whose title is not UTF-8 (the ZJU AVIs' GBK titles) opens with PyAV before 19
    (which takes ``metadata_errors="replace"``) and with PyAV 19 (which dropped the option:
    simulated here by an ``av.open`` that refuses it, as 19's does) alike."""
    import av

    from eyeblink.sources import files

    video = make_video([np.full((48, 64), 100, np.uint8)] * 3, fps=25)
    titled = tmp_path / "gbk.mkv"
    with av.open(str(video)) as src, av.open(str(titled), "w") as dst:
        # written as UTF-8; the byte patch below makes it GBK-like
        dst.metadata["title"] = "\u5b9e\u9a8c"
        stream = dst.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                dst.mux(packet)
    data = titled.read_bytes()
    utf8 = "\u5b9e\u9a8c".encode()
    assert utf8 in data
    # same length, not UTF-8
    titled.write_bytes(data.replace(utf8, "\u5b9e\u9a8c".encode("gbk") + b"\xff\xfe"))

    real_open = av.open
    calls: list[dict] = []

    def pyav19_open(target: str, *args: object, **kwargs: object) -> object:
        calls.append(dict(kwargs))
        if "metadata_errors" in kwargs:
            raise TypeError("open() got an unexpected keyword argument 'metadata_errors'")
        # what 19 decodes with
        return real_open(target, *args, metadata_errors="surrogateescape", **kwargs)

    for fake in (False, True):
        monkeypatch.setattr(files, "_METADATA_ERRORS", [True])
        if fake:
            monkeypatch.setattr(av, "open", pyav19_open)
        with files.open_source(titled) as src:
            assert len(list(src)) == 3
    # the option tried once, then never again (the source opens the container more than once)
    assert len(calls) >= 2 and "metadata_errors" in calls[0]
    assert not any("metadata_errors" in c for c in calls[1:])
