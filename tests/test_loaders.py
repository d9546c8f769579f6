"""Several loader processes on one input (``--loaders``, :mod:`eyeblink.sources.ranges`).

The rows must not depend on the number of loaders: each test runs the real multiprocess pipeline
with one and with three loaders and compares the CSV files byte for byte, on the real detector and
eye model over a rendered face, for intra (MJPG, FFV1) and long-GOP (H.264) files, a file with a
dropped-frame gap and an image folder. The range decoder itself is checked frame by frame against
the single pass (index, timestamp, pixels).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from eyeblink.config import DetectConfig, ParallelConfig, RunConfig
from eyeblink.sources import ranges
from eyeblink.sources.files import open_source
from eyeblink.sources.ranges import RangeReader, iter_range, plan_ranges

FRAMES = 360  # 0.72 s at 500 FPS
CHUNK = 16
SEGMENT = 64  # small ranges for short files: several ranges per loader


@pytest.fixture(autouse=True)
def _small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranges, "MIN_SEGMENT_FRAMES", SEGMENT)
    monkeypatch.setattr(ranges, "GOPS_PER_SEGMENT", 2)


@pytest.fixture(scope="module")
def face_frames_360(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    """A rendered 640x480 face recording with a blink (MJPG) and its decoded frames."""
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    path = tmp_path_factory.mktemp("loaders") / "face.avi"
    write_recording(
        path,
        SynthConfig(
            duration_s=FRAMES / 500,
            seed=3,
            blinks=(BlinkSpec(onset_s=0.3, closing_ms=60, closed_ms=30, opening_ms=120),),
        ),
    )
    with open_source(path) as src:
        return path, [f.image for f in src]


def _inputs(kind: str, face: tuple[Path, list[np.ndarray]], make_video, make_image_folder) -> Path:  # type: ignore[no-untyped-def]
    path, frames = face
    if kind == "mjpeg":
        return path
    if kind == "ffv1":
        return make_video(frames, codec="ffv1", pix_fmt="gray", container="mkv")
    if kind == "h264":
        return make_video(frames, codec="libx264", pix_fmt="yuv420p", container="mp4", gop=40)
    if kind == "gap":  # frames 100-102 and 250 dropped by the camera: zero-length AVI index entries
        pts = [i + (3 if i >= 100 else 0) + (1 if i >= 247 else 0) for i in range(len(frames))]
        return make_video(frames, codec="mjpeg", pix_fmt="yuvj420p", container="avi", pts=pts)
    assert kind == "folder"
    # 3 tracking segments
    return make_image_folder({f"f{i}.png": img for i, img in enumerate(frames[:300])})


def _run(video: Path, out: Path, loaders: int) -> dict:  # type: ignore[type-arg]
    from eyeblink.runtime.procs.parallel import ParallelPipeline

    pipe = ParallelPipeline(
        RunConfig(detect=DetectConfig(detect_every=10)),
        ParallelConfig(workers=2, loaders=loaders, chunk_frames=CHUNK, batch_frames=5),
    )
    out.mkdir(parents=True)
    with open_source(video, fps=500) as src:
        result = pipe.process_source(src, out)
    assert result.summary["status"] == "ok"
    return result.summary


@pytest.mark.parametrize("kind", ["mjpeg", "ffv1", "h264", "gap", "folder"])
def test_three_loaders_write_the_rows_of_one(
    kind: str,
    face_frames_360: tuple[Path, list[np.ndarray]],
    make_video,
    make_image_folder,
    tmp_path: Path,
) -> None:  # type: ignore[no-untyped-def]
    video = _inputs(kind, face_frames_360, make_video, make_image_folder)
    one = _run(video, tmp_path / "one", 1)
    three = _run(video, tmp_path / "three", 3)
    assert one["parallel"]["loaders"] == 1
    assert three["parallel"]["loaders"] == 3, three["parallel"]["split"]
    stem = video.stem if video.is_file() else video.name
    for suffix in ("frames.csv", "blinks.csv"):
        a = (tmp_path / "one" / f"{stem}.{suffix}").read_bytes()
        b = (tmp_path / "three" / f"{stem}.{suffix}").read_bytes()
        assert a == b, suffix
    rows = (tmp_path / "one" / f"{stem}.frames.csv").read_text().splitlines()
    assert len(rows) == 1 + (300 if kind == "folder" else FRAMES)
    if kind == "gap":
        assert rows[101].startswith("100,0.206,")  # the gap's timestamp (frame 100 is 3 slots late)


@pytest.mark.parametrize(
    ("codec", "pix_fmt", "container", "gop", "every_frame"),
    [
        ("mjpeg", "yuvj420p", "avi", None, True),
        ("rawvideo", "gray", "avi", None, True),
        (
            "ffv1",
            "gray",
            "mkv",
            None,
            False,
        ),  # FFmpeg's FFV1 writes a keyframe every 12 frames here
        ("libx264", "yuv420p", "mp4", 30, False),
        ("libx264", "yuv420p", "mkv", 50, False),
    ],
)
def test_each_range_decodes_the_frames_of_the_single_pass(
    make_video,
    codec: str,
    pix_fmt: str,  # type: ignore[no-untyped-def]
    container: str,
    gop: int | None,
    every_frame: bool,
) -> None:
    video = make_video(300, codec=codec, pix_fmt=pix_fmt, container=container, gop=gop)
    with open_source(video) as src:
        single = [(f.index, f.timestamp_s, f.image) for f in src]
        plan = plan_ranges(src, 3, chunk_frames=8)
        assert plan.loaders == 3, plan.reason
        assert plan.ranges[0].first == 0 and plan.ranges[-1].stop == len(single) == plan.frames
        assert all(a.stop == b.first for a, b in zip(plan.ranges, plan.ranges[1:], strict=False))
        assert all(r.first % 8 == 0 for r in plan.ranges)
        if every_frame:  # intra: no frame is decoded twice
            assert all(r.seek_frame == r.first for r in plan.ranges)
        else:
            assert any(r.seek_frame < r.first for r in plan.ranges)
        got = [
            (f.index, f.timestamp_s, f.image)
            for r in reversed(plan.ranges)
            for f in iter_range(src, plan, r)
        ]
        # one decoder for several ranges, as a loader reads its own: a range left after 3 frames,
        # then each loader's ranges in turn (forward seeks within a loader, back to the start for
        # the next one)
        with RangeReader(src, plan) as reader:
            part = [(f.index, f.image) for f in itertools.islice(reader.frames(plan.ranges[1]), 3)]
            shared = [
                (f.index, f.timestamp_s, f.image)
                for lid in range(3)
                for r in plan.ranges[lid::3]
                for f in reader.frames(r)
            ]
    for frames in (got, shared):
        frames.sort(key=lambda t: t[0])
        assert [g[:2] for g in frames] == [s[:2] for s in single]
        assert all(np.array_equal(g[2], s[2]) for g, s in zip(frames, single, strict=True))
    first = plan.ranges[1].first
    assert [p[0] for p in part] == [first, first + 1, first + 2]
    assert all(np.array_equal(p[1], single[p[0]][2]) for p in part)


def test_one_keyframe_or_unknown_codecs_keep_one_loader(make_video) -> None:  # type: ignore[no-untyped-def]
    video = make_video(120, codec="libx264", pix_fmt="yuv420p", container="mkv", gop=1000)
    with open_source(video) as src:
        plan = plan_ranges(src, 3, chunk_frames=8)
    keys = plan.reason
    # x264 may add a scene-cut keyframe
    assert plan.loaders == 1 or plan.ranges[1].seek_frame > 0, keys
    assert ranges.ONE_FRAME_PER_PACKET.isdisjoint({"indeo3", "indeo4", "indeo5", "cinepak"})


def test_a_truncated_file_keeps_the_single_pass_and_its_error(make_video, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    video = make_video(300, codec="mjpeg", pix_fmt="yuvj420p", container="avi")
    data = video.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with open_source(cut) as src:
        plan = plan_ranges(src, 3, chunk_frames=8)
    assert plan.loaders == 1 and plan.reason


def test_loaders_setting_is_validated() -> None:
    from eyeblink.errors import ConfigError
    from eyeblink.runtime.procs.parallel import choose_loaders

    with pytest.raises(ConfigError, match="loaders"):
        ParallelConfig(loaders=-1)
    par = ParallelConfig()
    assert choose_loaders(ParallelConfig(loaders=3), 2, None) == 3
    assert choose_loaders(par, 2, None, cores=2, decode_ms=0.7) == 1  # two cores: one loader
    assert choose_loaders(par, 12, None, cores=16, decode_ms=0.7, worker_ms=1.7) == 4
    assert choose_loaders(par, 15, None, cores=16, decode_ms=0.7, worker_ms=5.0) == 3
    # below four cores: a second loader when one would need a whole core (decoding against the eye
    # model's cost)
    assert choose_loaders(par, 2, None, cores=2, decode_ms=1.3, worker_ms=0.8) == 2  # lids on MJPG
    assert choose_loaders(par, 2, None, cores=2, decode_ms=1.3, worker_ms=2.1) == 1  # mesh on MJPG
    assert choose_loaders(par, 1, None, cores=2, decode_ms=1.3, worker_ms=0.8) == 1  # one worker
    assert choose_loaders(par, 2, None, cores=1, decode_ms=1.3, worker_ms=0.8) == 1  # one core


def test_two_cores_take_a_second_loader_for_the_default_on_a_fast_core() -> None:
    """The default placement on 2 cores from the registry's costs: a fast core's real MJPG decode
    (0.62-0.67 ms a frame measured, AVX-512 VM) gives the default eye model (``lids``, 500 FPS) a
    second loader, which measured 1,484-1,498 FPS against 1,272-1,308 with one (the cores 96% busy
    against 80%); ``mesh`` keeps one."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.procs.sizing import choose_loaders, worker_ms_per_frame

    par = ParallelConfig()
    cpu = load_preset(resolve_preset("cpu"))  # what `eyeblink process` runs by default
    lids = worker_ms_per_frame(cpu, 500.0)
    mesh = worker_ms_per_frame(cpu.with_overrides("landmarks", model="mesh"), 500.0)
    for decode_ms in (0.6, 0.65, 1.0, 1.3):
        assert choose_loaders(par, 2, None, cores=2, decode_ms=decode_ms, worker_ms=lids) == 2, (
            decode_ms,
            lids,
        )
        assert choose_loaders(par, 2, None, cores=2, decode_ms=decode_ms, worker_ms=mesh) == 1, (
            decode_ms,
            mesh,
        )


def _auto(video: Path, out: Path, model: str, monkeypatch: pytest.MonkeyPatch) -> dict:  # type: ignore[type-arg]
    from eyeblink.config import LandmarkConfig
    from eyeblink.runtime.procs import parallel
    from eyeblink.runtime.procs.parallel import ParallelPipeline

    # the two-core PC, whatever runs the test
    monkeypatch.setattr(parallel, "physical_cores", lambda: 2)
    # decoding as costly as a real 640x480 MJPG frame (the rendered face decodes faster on a fast
    # core)
    monkeypatch.setattr(parallel, "_probe_decode_ms", lambda source: 1.3)
    pipe = ParallelPipeline(
        RunConfig(detect=DetectConfig(detect_every=10), landmarks=LandmarkConfig(model=model)),
        ParallelConfig(workers=2, chunk_frames=CHUNK, batch_frames=5),
    )
    out.mkdir(parents=True)
    with open_source(video, fps=500) as src:
        result = pipe.process_source(src, out)
    assert result.summary["status"] == "ok"
    return result.summary["parallel"]


def test_two_cores_take_a_second_loader_for_the_cheap_eye_model(
    face_frames_360: tuple[Path, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default eye model on an MJPG file splits decoding over two loaders on two cores, with the
    rows of one; ``mesh`` (the workers are the costly stage) keeps one loader and says why in the
    summary."""
    video = face_frames_360[0]
    lids = _auto(video, tmp_path / "lids", "lids", monkeypatch)
    assert lids["loaders"] == 2 and lids["split"]["loaders"] == 2, lids["split"]
    assert _run(video, tmp_path / "one", 1)["parallel"]["loaders"] == 1
    for suffix in ("frames.csv", "blinks.csv"):
        assert (tmp_path / "lids" / f"face.{suffix}").read_bytes() == (
            tmp_path / "one" / f"face.{suffix}"
        ).read_bytes()
    mesh = _auto(video, tmp_path / "mesh", "mesh", monkeypatch)
    assert (
        mesh["loaders"] == 1 and "one loader keeps the cores busy" in mesh["split"]["single_reason"]
    ), mesh["split"]
    assert mesh["placement"]["decode_ms"] == lids["placement"]["decode_ms"] == 1.3
    assert mesh["placement"]["loader_share"] < 1.0 <= lids["placement"]["loader_share"]
