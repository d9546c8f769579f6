"""Recordings of one eye (``--eye-roi``): the real CLI on real video, no face detector.

The region is found the way a user finds it: the eye's points of a face-mode run (``--points``) on
the synthetic face recording, a box around the subject's right eye; then only that region is
measured, by ``area`` and by ``contour``. The research recordings of one eye (``eye-only/``) run
when the data is there.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import CHILD_SIGNALS, free_port, run_cli, start_sender

from eyeblink.outputs.regionview import MARGIN_PX


@pytest.fixture(scope="module")
def eye_roi(face_recording: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory) -> str:
    """``X,Y,W,H`` around the subject's right eye of :func:`face_recording`, from a face-mode
    run's points."""
    out = tmp_path_factory.mktemp("face")
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        out,
        "--points",
        "--max-frames",
        "20",
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    with (out / "subject.points.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    xs = np.array([[float(r[f"p{i}_x"]) for i in range(36, 42)] for r in rows])
    ys = np.array([[float(r[f"p{i}_y"]) for i in range(36, 42)] for r in rows])
    x0, x1, cy = np.median(xs.min(1)), np.median(xs.max(1)), np.median(ys.mean(1))
    w = (x1 - x0) * 1.4
    h = w * 2 / 3
    return f"{round((x0 + x1) / 2 - w / 2)},{round(cy - h / 2)},{round(w)},{round(h)}"


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _blinks(out: Path, stem: str = "subject") -> list[dict[str, str]]:
    with (out / f"{stem}.blinks.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("model", ["area", "contour"])
def test_one_eye_in_a_region_finds_the_blink_with_no_face(
    face_recording: tuple[Path, object], eye_roi: str, tmp_path: Path, model: str
) -> None:
    path, truth = face_recording
    onset = truth.blinks[0].onset_s  # type: ignore[attr-defined]
    # FEC normalised on a calibration segment: the planted full closure
    proc = run_cli(
        "process",
        path,
        "-o",
        tmp_path,
        "--eye-roi",
        eye_roi,
        "--landmarks",
        model,
        "--workers",
        "1",
        "--calibration",
        f"{onset - 0.1:g}:{onset + 0.4:g}",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    rows = read_rows(tmp_path / "subject.frames.csv")
    x, y, w, h = (float(v) for v in eye_roi.split(","))
    assert all(r["face"] == "1" and r["ear_right"] == "" and r["detected"] == "0" for r in rows)
    assert {
        (float(r["face_x0"]), float(r["face_y0"]), float(r["face_x1"]), float(r["face_y1"]))
        for r in rows
    } == {(x, y, x + w, y + h)}  # the face box columns hold the region
    blinks = _blinks(tmp_path)
    assert len(blinks) == 1, blinks
    assert abs(float(blinks[0]["start_s"]) - onset) < 0.05
    closure = np.array([float(r["closure"]) for r in rows])
    t = np.array([float(r["timestamp_s"]) for r in rows])
    # the full closure reads as one
    assert np.nanmax(closure[(t > onset) & (t < onset + 0.2)]) > 0.9
    assert np.nanmax(np.abs(closure[t < onset - 0.1])) < 0.2  # the open eye, before it
    summary = json.loads((tmp_path / "subject.summary.json").read_text())
    assert summary["settings"]["eye"]["roi"] == [int(v) for v in eye_roi.split(",")]
    assert "eye_roi" not in summary["settings"]["detect"]  # where the eye is, not a detector's
    assert summary["settings"]["landmarks"]["model"] == model


def test_an_eye_region_gives_the_same_rows_with_one_or_two_workers(
    face_recording: tuple[Path, object], eye_roi: str, tmp_path: Path
) -> None:
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        proc = run_cli(
            "process",
            face_recording[0],
            "-o",
            out,
            "--eye-roi",
            eye_roi,
            "--landmarks",
            "contour",
            "--workers",
            workers,
            "--no-progress",
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    for name in ("subject.frames.csv", "subject.blinks.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("--eye-roi", "600,400,100,100"),
            "reaches past the frames of subject.avi (640x480 pixels",
        ),
        (("--eye-roi", "10,10,0,40"), "is 0x40 pixels, too small to measure"),
        (
            ("--eye-roi", "-5,10,40,40"),
            "expected one argument",
        ),  # argparse reads -5,... as an option
        (("--eye-roi", "10,10,40"), "must be X,Y,W,H in whole pixels"),
        (
            ("--eye-roi", "10,10,40,40", "--landmarks", "lids"),
            "--landmarks lids measures a face, not an eye region",
        ),
        (
            ("--landmarks", "area"),
            "--landmarks area measures an eye region; give it with --eye-roi",
        ),
        (
            ("--eye-roi", "10,10,40,40", "--landmarks", "contour", "--eye-threshold", "0.5"),
            "--eye-threshold set the area measure of an eye region; with --landmarks contour "
            "leave it out",
        ),
        (
            ("--eye-polarity", "bright"),
            "--eye-polarity set the area measure of an eye region; with --landmarks lids",
        ),
        (
            ("--eye-roi", "10,10,40,40", "--eye-threshold", "1.5"),
            "landmarks.area_threshold must be in (0, 1), got 1.5",
        ),
        (
            ("--eye-roi", "10,10,40,40", "--landmarks", "area", "--eye-angle", "30"),
            "--eye-angle sets the contour measure of an eye region; with --landmarks area leave "
            "it out",
        ),
        (
            ("--eye-roi", "10,10,40,40", "--landmarks", "contour", "--eye-angle", "120"),
            "landmarks.eye_angle must be in (-90, 90] degrees, got 120.0",
        ),
    ],
)
def test_a_bad_region_is_one_line_and_exit_2_before_any_work(
    face_recording: tuple[Path, object], tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    out = tmp_path / "out"
    proc = run_cli("process", face_recording[0], "-o", out, *args, "--no-progress")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eyeblink: error: ") and says in lines[0], (
        proc.stderr
    )
    assert not out.exists() or not any(out.iterdir())  # nothing written


def test_a_live_stream_refuses_a_region_past_its_frames_in_one_line(tmp_path: Path) -> None:
    """Live: the stream's frame size is known when it connects; a region past it stops the run there
    (exit 2, one line), before any frame is measured."""
    import subprocess
    import sys

    port = free_port()
    sender = start_sender(port, "--fps", "100", "--stop-after", "300")
    live = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{port}",
            "-o",
            str(tmp_path),
            "--name",
            "cam",
            "--eye-roi",
            "600,400,100,100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]
    try:
        _, stderr = live.communicate(timeout=120)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 2, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("eyeblink: error:")]
    assert len(errors) == 1 and "reaches past the frames of cam (640x480 pixels" in errors[0], (
        stderr
    )
    assert read_rows(tmp_path / "cam.frames.csv") == []  # no frame measured


def test_a_live_stream_of_one_eye_chooses_its_measure_from_its_first_frames(
    data_dir: Path, tmp_path: Path
) -> None:
    """Live, an eye region and no ``--landmarks``: the loader holds the stream's first frames, the
    run chooses the measure on them as ``process`` does (one line; summary.json's ``eye_measure``),
    and every frame is a row, in order, the held ones measured (not dropped) with the chosen
    measure; ``--record`` keeps every frame."""
    import subprocess
    import sys

    from eyeblink.runtime.live.pipeline import LIVE_SURVEY_FRAMES

    video = data_dir / "eye-only" / "rat_crush2.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    port = free_port()
    sender = start_sender(
        port, "--fps", "100", "--stop-after", "700", "--input", str(video), distinct=300
    )
    live = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{port}",
            "-o",
            str(tmp_path),
            "--name",
            "rat",
            "--eye-roi",
            "60,38,45,45",
            "--record",
            str(tmp_path / "rat.nut"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **CHILD_SIGNALS,
    )  # type: ignore[call-overload]
    try:
        _, stderr = live.communicate(timeout=180)
    finally:
        live.kill()
        sender.kill()
    assert live.returncode == 0, stderr
    said = [line for line in stderr.splitlines() if line.startswith("eyeblink: eye measure ")]
    measure = json.loads((tmp_path / "rat.summary.json").read_text())["eye_measure"]
    assert measure["how"] == "chosen" and measure["model"] in ("area", "contour")
    assert said == [f"eyeblink: eye measure {measure['why']}"], stderr
    rows = read_rows(tmp_path / "rat.frames.csv")
    assert [int(r["frame"]) for r in rows] == list(range(700))
    held = rows[:LIVE_SURVEY_FRAMES]
    assert all(r["dropped"] == "0" and r["face"] == "1" and r["ear_left"] != "" for r in held)
    import av

    # --record: every frame received, the held ones too (the burst after the survey included)
    recording = json.loads((tmp_path / "rat.summary.json").read_text())["live"]["recording"]
    with av.open(str(tmp_path / "rat.nut")) as c:
        assert sum(1 for _ in c.decode(video=0)) == 700, (recording, stderr)
    assert recording["frames"] == 700 and recording["dropped"] == 0, recording


def test_the_region_command_draws_the_region_on_the_first_frame(
    face_recording: tuple[Path, object], eye_roi: str, tmp_path: Path
) -> None:
    import cv2

    png = tmp_path / "pick.png"
    proc = run_cli("region", face_recording[0], "--eye-roi", eye_roi, "-o", png)
    assert proc.returncode == 0, proc.stderr
    img = cv2.imread(str(png))
    m = MARGIN_PX  # the scale's bands along the top and left edges
    assert img.shape == (480 + m, 640 + m, 3)  # a 640x480 frame is large enough: drawn 1:1
    img = img[m:, m:]
    x, y, w, h = (int(v) for v in eye_roi.split(","))
    red = (img[:, :, 2] > 200) & (img[:, :, 1] < 60) & (img[:, :, 0] < 60)
    assert (
        red[y, x + w // 2]
        and red[y + h - 1, x + w // 2]
        and red[y + h // 2, x]
        and red[y + h // 2, x + w - 1]
    )
    assert not red[y + h // 2, x + w // 2]  # a rectangle, the eye inside it untouched
    bad = run_cli(
        "region", face_recording[0], "--eye-roi", "600,10,100,40", "-o", tmp_path / "bad.png"
    )
    assert (
        bad.returncode == 2
        and "reaches past the frames" in bad.stderr
        and not (tmp_path / "bad.png").exists()
    )


def test_the_python_api_takes_an_eye_region(
    face_recording: tuple[Path, object], eye_roi: str, tmp_path: Path
) -> None:
    import eyeblink

    session = eyeblink.process(
        face_recording[0],
        tmp_path,
        eye_roi=[int(v) for v in eye_roi.split(",")],
        workers=1,
        progress=False,
    )
    assert len(session.blinks) == 1
    assert len(_blinks(tmp_path)) == 1


# --------------------------------------------------------------------------- the research
# recordings of one eye


def test_a_stream_whose_last_packet_decodes_to_nothing_gives_the_same_rows_with_two_loaders(
    data_dir: Path, tmp_path: Path
) -> None:
    """``h_f.mp4`` (H.264) has one packet more than its decoder gives frames: the loader of the
    file's last range reaches the end of the stream early, where the single pass ends too. A cheap
    eye model makes two loaders the automatic choice there."""
    video = data_dir / "eye-only" / "h_f.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    outs = []
    for loaders in ("1", "2"):
        out = tmp_path / loaders
        proc = run_cli(
            "process",
            video,
            "-o",
            out,
            "--eye-roi",
            "0,0,640,480",
            "--workers",
            "2",
            "--loaders",
            loaders,
            "--no-progress",
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    summary = json.loads((outs[1] / "h_f.summary.json").read_text())
    assert summary["frames"] == 816 and summary["parallel"]["loaders"] == 2
    for name in ("h_f.frames.csv", "h_f.blinks.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


def test_a_mouse_eye_with_no_blink_gives_no_blink(data_dir: Path, tmp_path: Path) -> None:
    """``2p_mouse.mp4``: a head-fixed mouse's eye under a two-photon microscope, no blink in its 40
    s; the measure the run chooses (no ``--landmarks``) sees none."""
    video = data_dir / "eye-only" / "2p_mouse.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    proc = run_cli(
        "process", video, "-o", tmp_path, "--eye-roi", MOUSE_ROI, "--workers", "1", "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr
    assert _blinks(tmp_path, "2p_mouse") == []
    assert (
        json.loads((tmp_path / "2p_mouse.summary.json").read_text())["eye_measure"]["how"]
        == "chosen"
    )


#: the mouse's eye in ``2p_mouse.mp4`` (446x334), chosen with ``eyeblink region``
MOUSE_ROI = "85,95,130,105"


def test_the_report_of_an_eye_region_shows_the_region(
    face_recording: tuple[Path, object], eye_roi: str, tmp_path: Path
) -> None:
    """``--report``: the page and the eyes' video, which shows the whole region (its shape,
    scaled)."""
    import av

    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path,
        "--eye-roi",
        eye_roi,
        "--report",
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "subject.report.html").is_file()
    with av.open(str(tmp_path / "subject.eyes.webm")) as c:
        s = c.streams.video[0]
        width, height = s.codec_context.width, s.codec_context.height
        frames = sum(1 for _ in c.decode(s))
    _, _, w, h = (int(v) for v in eye_roi.split(","))
    assert abs(width / height - w / h) < 0.05 and frames == 800


#: the full closures of ``h_f.mp4`` (a human eye close-up filling the frame: 816 frames at 20 FPS,
#: every frame shown twice), labelled by eye from contact sheets of every frame: (first closed
#: frame, last frame before the eye is open again)
HF_CLOSURES = (
    (46, 49),
    (72, 75),
    (108, 111),
    (306, 317),
    (408, 411),
    (482, 485),
    (600, 603),
    (784, 785),
    (794, 797),
)
#: ... and what else moves the lids there: half blinks (the lid to the pupil's centre or two thirds
#: down) and a squint while the eye looks down-left
HF_HALF_BLINKS_AND_SQUINT = ((294, 297), (550, 553), (666, 667), (270, 279))


@pytest.mark.parametrize(
    "named",
    [
        pytest.param(("--landmarks", "contour"), id="contour"),
        pytest.param((), id="default", marks=pytest.mark.slow),
    ],
)
def test_a_human_eye_close_up_finds_every_full_closure(
    data_dir: Path, tmp_path: Path, named: tuple[str, ...]
) -> None:
    """``h_f.mp4`` with ``contour``, and with no ``--landmarks`` (the run chooses), on the whole
    frame (the eye fills it): every labelled full closure found; the other events are the half
    blinks and the squint, no event where the lids stay open."""
    video = data_dir / "eye-only" / "h_f.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    proc = run_cli(
        "process",
        video,
        "-o",
        tmp_path,
        "--eye-roi",
        "0,0,640,480",
        *named,
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    events = [(int(b["start_frame"]), int(b["end_frame"])) for b in _blinks(tmp_path, "h_f")]

    assert all(any(_overlaps(c, e) for e in events) for c in HF_CLOSURES), events
    others = [e for e in events if not any(_overlaps(c, e) for c in HF_CLOSURES)]
    assert all(any(_overlaps(h, e) for h in HF_HALF_BLINKS_AND_SQUINT) for e in others), others
    measure = json.loads((tmp_path / "h_f.summary.json").read_text())["eye_measure"]
    assert measure["how"] == ("named" if named else "chosen")


#: the rat's right eye (the frame's right one) in ``rat_march8.mp4`` (262x97), chosen with
#: ``eyeblink region``
RAT_ROI = "170,15,50,50"


def test_a_rat_session_gives_no_blink_rate_warning_unless_held_to_human_norms(
    data_dir: Path, tmp_path: Path
) -> None:
    """``rat_march8.mp4`` (200 s): a rat blinks a few times in it, far below a human's rate. With an
    eye region the warnings take an animal's norms (no rate is too low); named ``--species human``
    the same run warns, and the Python API's ``species`` does what the flag does."""
    import eyeblink

    video = data_dir / "eye-only" / "rat_march8.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    proc = run_cli(
        "process",
        video,
        "-o",
        tmp_path / "auto",
        "--eye-roi",
        RAT_ROI,
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "auto" / "rat_march8.summary.json").read_text())
    assert summary["settings"]["blinks"]["species"] == "auto"
    # a rat's few blinks: the check below is one a human rate would fail
    assert 0 < summary["blinks"] < 10
    assert not [w for w in summary["warnings"] if "blink rate" in w], summary["warnings"]
    assert "blink rate" not in proc.stderr
    human = eyeblink.process(
        video,
        tmp_path / "human",
        eye_roi=[int(v) for v in RAT_ROI.split(",")],
        species="human",
        workers=1,
        progress=False,
    )
    rate = [w for w in human.summary["warnings"] if "blink rate" in w]
    assert len(rate) == 1 and "1-60/min of species human" in rate[0], human.summary["warnings"]
    bad = run_cli(
        "process", video, "-o", tmp_path / "bad", "--eye-roi", RAT_ROI, "--species", "cat"
    )
    assert (
        bad.returncode == 2
        and len(bad.stderr.strip().splitlines()) == 1
        and "--species" in bad.stderr
    )


def test_the_region_picture_of_a_small_frame_is_scaled_up_and_an_image_folder_needs_no_rate(
    data_dir: Path, tmp_path: Path
) -> None:
    """``rat_march8.mp4``'s 262x97 frames: the picture is drawn 3x (each frame pixel a 3x3 square,
    the region's rectangle around the frame pixels it names); the same frames as an image folder
    need no ``--fps`` for one picture, and its default name and a run's outputs are the folder's
    name, also when it is given as ``.``."""
    import av
    import cv2

    video = data_dir / "eye-only" / "rat_march8.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    folder = tmp_path / "rat_day1"
    folder.mkdir()
    with av.open(str(video)) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i == 40:
                break
            cv2.imwrite(str(folder / f"{i:04d}.png"), f.to_ndarray(format="bgr24"))
    first = cv2.cvtColor(cv2.imread(str(folder / "0000.png")), cv2.COLOR_BGR2GRAY)
    proc = run_cli("region", folder, "--eye-roi", RAT_ROI, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(262x97, drawn 3x" in proc.stdout
    img = cv2.imread(str(tmp_path / "rat_day1.region.png"))
    m, k = MARGIN_PX, 3
    assert img.shape == (97 * k + m, 262 * k + m, 3)
    pic = cv2.cvtColor(img[m:, m:], cv2.COLOR_BGR2GRAY)
    # the frame, scaled
    assert np.array_equal(pic[k * 80 : k * 90 : k, k * 100 : k * 110 : k], first[80:90, 100:110])
    x, y, w, h = (int(v) for v in RAT_ROI.split(","))
    red = (img[m:, m:, 2] > 200) & (img[m:, m:, 1] < 60) & (img[m:, m:, 0] < 60)
    assert red[k * (y + h // 2), k * x] and red[k * (y + h) - 1, k * (x + w // 2)]
    assert not red[k * (y + h // 2), k * (x + w // 2)]
    # the scale's band holds its ticks and numbers: bright marks on the dark band
    band = img[:m, m:]
    assert (band.max(axis=2) > 200).mean() > 0.01
    run = run_cli(
        "process",
        ".",
        "--fps",
        "30",
        "--eye-roi",
        RAT_ROI,
        "-o",
        tmp_path / "out",
        "--workers",
        "1",
        "--no-progress",
        cwd=folder,
    )
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in (tmp_path / "out").glob("*.csv")) == [
        "rat_day1.blinks.csv",
        "rat_day1.frames.csv",
    ]


def _hf_folder(data_dir: Path, folder: Path, sequence: list[int]) -> Path:
    """An image folder of ``h_f.mp4``'s real frames in the order ``sequence`` (20 FPS with
    ``--fps 20``)."""
    import av
    import cv2

    video = data_dir / "eye-only" / "h_f.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    with av.open(str(video)) as c:
        frames = [f.to_ndarray(format="gray") for f in c.decode(video=0)]
    folder.mkdir()
    for i, k in enumerate(sequence):
        cv2.imwrite(str(folder / f"{i:04d}.png"), frames[k])
    return folder


#: ``h_f.mp4``'s frames of a squint that deepens into a full blink and reopens slowly: 7 s open
#: (120-259), the lid two thirds down (288-291, ratio ~0.75) for 0.7 s, the full closure (306-315,
#: 0.5 s), the lid held part-open (316-317, ~0.82) for 0.6 s, open again (318-399). Folder frames:
#: the squint 140-153, the closure 154-163.
SQUINT_BOUT = [
    *range(120, 260),
    *[288, 289, 290, 291] * 3,
    288,
    289,
    *range(306, 316),
    *[316, 317] * 6,
    *range(318, 400),
]


def test_a_full_blink_inside_a_long_partial_closure_is_a_blink_row_of_its_own(
    data_dir: Path, tmp_path: Path
) -> None:
    """The squint bout is one event longer than max_blink_ms (a prolonged_closure row from the
    squint on, as before); the full closure inside it is a blink row of its own, the closure's
    frames, and the run's line says the counts summary.json says. A closure held shut longer than
    max_blink_ms (the closed frames for 1.5 s) stays one prolonged closure: no blink row is made of
    its own inside."""
    folder = _hf_folder(data_dir, tmp_path / "bout", SQUINT_BOUT)
    proc = run_cli(
        "process",
        folder,
        "--fps",
        "20",
        "--eye-roi",
        "0,0,640,480",
        "--landmarks",
        "contour",
        "--species",
        "human",
        "-o",
        tmp_path / "out",
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    rows = _blinks(tmp_path / "out", "bout")
    long = [r for r in rows if r["kind"] == "prolonged_closure"]
    blinks = [r for r in rows if r["kind"] == "blink"]
    assert len(long) == 1 and len(blinks) == 1, rows
    assert int(long[0]["start_frame"]) <= 141 and int(long[0]["end_frame"]) >= 170
    b = blinks[0]
    assert 153 <= int(b["start_frame"]) <= 155 and 162 <= int(b["end_frame"]) <= 166, b
    assert b["complete"] == "1" and b["partial"] == "0" and float(b["duration_ms"]) <= 1000
    assert (
        int(long[0]["start_frame"])
        < int(b["start_frame"])
        <= int(b["end_frame"])
        < int(long[0]["end_frame"])
    )
    summary = json.loads((tmp_path / "out" / "bout.summary.json").read_text())
    assert summary["blinks"] == 1 and summary["prolonged_closures"] == 1
    assert "bout: 258 frames, face in 258, 1 blink, 1 prolonged closure," in proc.stdout

    shut = _hf_folder(
        data_dir,
        tmp_path / "shut",
        [*range(120, 260), *list(range(306, 316)) * 3, *range(318, 400)],
    )
    proc = run_cli(
        "process",
        shut,
        "--fps",
        "20",
        "--eye-roi",
        "0,0,640,480",
        "--landmarks",
        "contour",
        # a human's eye
        "--species",
        "human",
        "-o",
        tmp_path / "out",
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["kind"] for r in _blinks(tmp_path / "out", "shut")] == ["prolonged_closure"]


def test_an_animals_blink_may_last_longer_than_a_humans(data_dir: Path, tmp_path: Path) -> None:
    """The longest blink is the species' (``blinks.max_blink_ms`` not set): a closure held shut 1.25
    s (h_f's full closure, its closed frames two and a half times) is a blink with an eye region's
    default species (an animal: up to 1.5 s), and a prolonged closure with its warning when held to
    a human's norms (up to 1 s)."""
    from eyeblink.config import SPECIES_MAX_BLINK_MS, BlinkConfig

    assert BlinkConfig(species="rat").max_blink_ms == SPECIES_MAX_BLINK_MS["rat"] == 1500.0
    # a preset's own value wins
    assert BlinkConfig(species="rat", max_blink_ms=800.0).max_blink_ms == 800.0
    folder = _hf_folder(
        data_dir,
        tmp_path / "held",
        [*range(120, 260), *list(range(306, 316)) * 2, *range(311, 316), *range(318, 400)],
    )
    kinds, warned = {}, {}
    for species in ("auto", "human"):
        out = tmp_path / species
        proc = run_cli(
            "process",
            folder,
            "--fps",
            "20",
            "--eye-roi",
            "0,0,640,480",
            "--landmarks",
            "contour",
            "--species",
            species,
            "-o",
            out,
            "--workers",
            "1",
            "--no-progress",
        )
        assert proc.returncode == 0, proc.stderr
        kinds[species] = [(r["kind"], float(r["duration_ms"])) for r in _blinks(out, "held")]
        summary = json.loads((out / "held.summary.json").read_text())
        warned[species] = [w for w in summary["warnings"] if "longer than max_blink_ms" in w]
    ((auto_kind, auto_ms),) = kinds["auto"]
    assert auto_kind == "blink" and 1000.0 < auto_ms <= 1500.0 and warned["auto"] == [], kinds
    assert [k for k, _ in kinds["human"]] == ["prolonged_closure"], kinds
    assert len(warned["human"]) == 1 and "(1000 ms)" in warned["human"][0]


# --------------------------------------------------------------------------- the measure chosen,
# the eye's axis


def test_contour_finds_the_axis_of_a_tilted_eye(
    face_frames: list[np.ndarray], eye_roi: str
) -> None:
    """The eye turned in the frame about the region's centre: the axis ``contour`` finds on the
    first frames turns with it (the synthetic face's own eye is a few degrees from level, so the
    turn is compared, not the angle)."""
    import cv2

    from eyeblink.landmarks.region import ContourFitter, EyeRegion, find_eye_axis

    region = EyeRegion.parse(eye_roi)
    centre = (region.x + region.w / 2, region.y + region.h / 2)
    fitter = ContourFitter()
    found = {}
    for turn in (0, 30, -35):
        m = cv2.getRotationMatrix2D(centre, -turn, 1.0)  # clockwise in the image by `turn` degrees
        frames = [
            cv2.warpAffine(f, m, (f.shape[1], f.shape[0]), borderMode=cv2.BORDER_REPLICATE)
            for f in face_frames[:200]
        ]
        found[turn] = find_eye_axis(fitter, frames, region)
    assert abs(found[0]) < 15, found
    assert abs(found[30] - found[0] - 30) < 6 and abs(found[-35] - found[0] + 35) < 6, found


def test_corners_on_a_tilted_axis_stay_in_the_region() -> None:
    from eyeblink.landmarks.region import CORNER_INSET, corners_at

    c0, c1 = corners_at(0, 0, 100, 60, 0.0)
    assert np.allclose(c0, [100 * CORNER_INSET, 30]) and np.allclose(
        c1, [100 * (1 - CORNER_INSET), 30]
    )
    # an upright eye: the corners on the vertical centre line
    c0, c1 = corners_at(0, 0, 100, 60, 90.0)
    assert np.allclose(c0, [50, 60 * CORNER_INSET]) and np.allclose(
        c1, [50, 60 * (1 - CORNER_INSET)]
    )
    c0, c1 = corners_at(0, 0, 100, 60, 45.0)
    d = c1 - c0
    assert (
        abs(np.degrees(np.arctan2(d[1], d[0])) - 45) < 1e-6
        and c0.min() > 0
        and c1[1] < 60
        and c1[0] < 100
    )


def test_a_named_measure_wins_and_the_summary_says_so(
    face_recording: tuple[Path, object], eye_roi: str, tmp_path: Path
) -> None:
    proc = run_cli(
        "process",
        face_recording[0],
        "-o",
        tmp_path,
        "--eye-roi",
        eye_roi,
        "--landmarks",
        "area",
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    measure = json.loads((tmp_path / "subject.summary.json").read_text())["eye_measure"]
    assert (
        measure["model"] == "area"
        and measure["how"] == "named"
        and "named with --landmarks" in measure["why"]
    )
    assert "subject: eye measure area: named with --landmarks" in proc.stdout


def test_a_region_with_no_eye_in_it_is_a_warning(tmp_path: Path) -> None:
    """Noise as large as a blink on every frame, no open level (a dark patch of a random size, as a
    shadow or fur flickering through the region): the run says so, with what to try."""
    import cv2

    video = tmp_path / "noise.avi"
    out = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (64, 48))
    rng = np.random.default_rng(0)
    for _ in range(90):
        frame = np.full((48, 64), 200, np.uint8)
        frame[12:36, 14 : 14 + int(rng.integers(4, 36))] = 30
        out.write(cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR))
    out.release()
    proc = run_cli(
        "process",
        video,
        "-o",
        tmp_path / "out",
        "--eye-roi",
        "8,6,48,36",
        "--landmarks",
        "area",
        "--workers",
        "1",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "noise.summary.json").read_text())
    said = [w for w in summary["warnings"] if "looks unlike an eye's" in w]
    assert len(said) == 1 and "eyeblink region" in said[0] and "--landmarks contour" in said[0], (
        summary["warnings"]
    )
    assert summary["eye_measure"]["warning"] == said[0]
    assert any("looks unlike an eye's" in line for line in proc.stderr.splitlines()), proc.stderr


#: the blinks of the rat recordings, labelled by eye for these tests (no labels come with them): one
#: eye of each, the eye to the left of the image, in the region given; candidate windows (a dip of
#: either measure, or the DeepLabCut points drawn on the eye's lids coming together) looked at frame
#: by frame on contact sheets, the blink marked from the first frame the lids visibly close to the
#: last before the eye is open again
RAT_BLINKS: dict[str, tuple[str, tuple[tuple[int, int], ...]]] = {
    "rat_crush2": ("60,38,45,45", ((760, 767), (4042, 4049))),
    "rat_march8": ("50,20,45,45", ((785, 793),)),
}


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(RAT_BLINKS))
def test_the_default_measure_finds_every_labelled_blink_of_a_rat(
    data_dir: Path, tmp_path: Path, stem: str
) -> None:
    """A head-fixed rat's tilted eye, about 20 pixels wide, with whiskers and DeepLabCut's points
    drawn on it, and no ``--landmarks``: the run chooses its measure from the first seconds; every
    labelled blink found, at most one event elsewhere."""
    video = data_dir / "eye-only" / f"{stem}.mp4"
    if not video.exists():
        pytest.skip(f"{video} not found")
    roi, labelled = RAT_BLINKS[stem]
    proc = run_cli(
        "process", video, "-o", tmp_path, "--eye-roi", roi, "--workers", "2", "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr
    events = [(int(b["start_frame"]), int(b["end_frame"])) for b in _blinks(tmp_path, stem)]
    assert all(any(_overlaps(b, e) for e in events) for b in labelled), events
    assert len([e for e in events if not any(_overlaps(b, e) for b in labelled)]) <= 1, events
    measure = json.loads((tmp_path / f"{stem}.summary.json").read_text())["eye_measure"]
    assert measure["how"] == "chosen" and measure["why"].startswith(
        f"{measure['model']}: chosen from the first"
    )


# --------------------------------------------------------------------------- where the eye is; a
# measure's settings


def test_the_locator_is_chosen_once_from_the_settings_and_carries_the_region_value() -> None:
    """``X,Y,W,H`` is read once (the config's), the run's locator holds the region value; no
    region: faces."""
    from eyeblink.config import RunConfig
    from eyeblink.frame.locate import FaceFinder, FixedRegion, locator_for
    from eyeblink.landmarks.region import EyeRegion

    cfg = RunConfig().with_overrides("eye", roi="10, 20,40,30")
    assert cfg.eye.roi == (10, 20, 40, 30)  # the user's numbers, as TOML and JSON keep them
    assert locator_for(cfg) == FixedRegion(EyeRegion(10, 20, 40, 30)) == FixedRegion(cfg.eye.region)
    assert isinstance(locator_for(RunConfig()), FaceFinder) and RunConfig().eye.region is None
    assert not locator_for(cfg).needs_detector and locator_for(RunConfig()).needs_detector


def test_each_region_measure_s_own_settings_reach_the_config_cli_and_api_from_its_declaration() -> (
    None
):
    """A region measure's settings are declared on its registry entry: the config checks them from
    there, the command line has their flags and the API their keywords."""
    from eyeblink.api.settings import aliases
    from eyeblink.cli.options import eye_region_flags
    from eyeblink.config import LandmarkConfig
    from eyeblink.errors import ConfigError
    from eyeblink.landmarks import EYE_MODELS, region_models, tunables

    assert (
        region_models()
        == [name for name, spec in EYE_MODELS.items() if spec.region]
        == ["area", "contour"]
    )
    flags = [flag for flag, _, _ in eye_region_flags()]  # process, eval, live and batch add these
    for name, (owner, setting) in tunables().items():
        assert EYE_MODELS[owner].region and name in EYE_MODELS[owner].settings
        assert setting.flag in flags
        assert aliases().get(setting.keyword, ("landmarks", setting.keyword)) == ("landmarks", name)
        with pytest.raises(
            ConfigError, match=re.escape(f"landmarks.{name} must be {setting.expected()}, got")
        ):
            LandmarkConfig(model_settings={name: "x" if setting.choices is None else "neither"})


def test_the_region_is_kept_in_the_eye_section_and_an_older_detect_eye_roi_still_reads(
    tmp_path: Path,
) -> None:
    """Where the eye is has its own section, ``[eye] roi`` (``--eye-roi``, the API's ``eye_roi=``);
    a preset, an API section dict or a saved summary that still says ``[detect] eye_roi`` is read
    into it, never refused."""
    from eyeblink.api.settings import _run_config
    from eyeblink.config import load_preset, moved_to_place
    from eyeblink.presets import resolve_preset

    roi = [60, 38, 45, 45]
    new = tmp_path / "new.toml"
    new.write_text(f'[eye]\nroi = {roi}\n[landmarks]\nmodel = "area"\n', encoding="utf-8")
    old = tmp_path / "old.toml"
    old.write_text(f'[detect]\neye_roi = {roi}\n[landmarks]\nmodel = "area"\n', encoding="utf-8")
    assert load_preset(old) == load_preset(new) and load_preset(new).eye.roi == tuple(roi)
    settings = load_preset(old).to_dict()
    assert settings["eye"] == {"roi": tuple(roi)} and "eye_roi" not in settings["detect"]
    # the API: the keyword, the new section's dict and the old one's give the same config
    api = [
        _run_config(s, ())[0]
        for s in (
            {"eye_roi": "60,38,45,45"},
            {"eye": {"roi": roi}},
            {"detect": {"eye_roi": roi, "detect_every": 2}},
        )
    ]
    cpu = load_preset(resolve_preset("cpu"))  # the API's preset
    assert api[0] == api[1] == cpu.with_overrides("eye", roi=tuple(roi))
    assert (api[2].eye, api[2].landmarks) == (api[0].eye, api[0].landmarks)
    assert api[2].detect.detect_every == 2
    assert cpu.with_overrides("detect", eye_roi="60,38,45,45") == api[0]  # the old spelling in code
    # a summary.json written before
    assert moved_to_place({"detect": {"eye_roi": [1, 2, 30, 40], "backend": "litert"}}) == {
        "detect": {"backend": "litert"},
        "eye": {"roi": [1, 2, 30, 40]},
    }
    # the text of a region is read in one place: the config's section and the command line's flag
    root = Path(__file__).resolve().parent.parent / "eyeblink"
    readers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "EyeRegion.parse(" in p.read_text(encoding="utf-8")
    )
    assert readers == ["cli/options.py", "config.py"], readers


#: a region measure's settings as presets, the API, the command line and summary.json spell them
#: (pinned: a change here is a change users see)
REGION_SETTINGS = {  # [landmarks] key: (flag, API keyword, default)
    "area_polarity": ("--eye-polarity", "eye_polarity", "dark"),
    "area_threshold": ("--eye-threshold", "eye_threshold", 0.7),
    "eye_angle": ("--eye-angle", "eye_angle", None),
}


def test_the_region_measures_settings_keep_their_names_everywhere(tmp_path: Path) -> None:
    from eyeblink.api.settings import _run_config
    from eyeblink.cli import build_parser
    from eyeblink.cli.options import run_config_from_args
    from eyeblink.config import RunConfig, config_from_dict
    from eyeblink.landmarks import tunables

    declared = {k: (s.flag, s.keyword, s.default) for k, (_, s) in tunables().items()}
    assert declared == REGION_SETTINGS
    # summary.json's settings: the keys, in their order, and the values
    landmarks = RunConfig().to_dict()["landmarks"]
    assert list(landmarks) == [
        "model",
        "model_path",
        "derotate",
        "min_face_px",
        "min_presence",
        "mesh_reuse_ms",
        "area_polarity",
        "area_threshold",
        "eye_angle",
        "region_auto",
    ]
    defaults = {k: v[2] for k, v in REGION_SETTINGS.items()}
    assert {k: landmarks[k] for k in REGION_SETTINGS} == defaults
    toml = config_from_dict(
        {
            "eye": {"roi": [60, 38, 45, 45]},
            "landmarks": {"model": "area", "area_threshold": 0.6, "area_polarity": "bright"},
        }
    )
    args = build_parser().parse_args(
        [
            "process",
            "in.mp4",
            "-o",
            str(tmp_path),
            "--eye-roi",
            "60,38,45,45",
            "--landmarks",
            "area",
            "--eye-threshold",
            "0.6",
            "--eye-polarity",
            "bright",
        ]
    )
    api, _ = _run_config(
        {
            "eye_roi": [60, 38, 45, 45],
            "landmarks": "area",
            "eye_threshold": 0.6,
            "eye_polarity": "bright",
        },
        (),
    )
    cli = run_config_from_args(args)
    assert (toml.eye, toml.landmarks) == (cli.eye, cli.landmarks) == (api.eye, api.landmarks)
    # the class's keywords
    assert toml.landmarks.options() == {"area_polarity": "bright", "area_threshold": 0.6}
    assert toml.to_dict()["landmarks"]["area_threshold"] == 0.6
    contour = config_from_dict(
        {"eye": {"roi": [60, 38, 45, 45]}, "landmarks": {"model": "contour", "eye_angle": 30.0}}
    )
    assert contour.landmarks.options() == {"eye_angle": 30.0}
    assert contour.landmarks.setting("eye_angle") == 30.0


class _EdgeMeasure:
    """A region measure of the test below, with one setting of its own (``edge_gain``): it only
    records it."""

    def __init__(self, model_path: object = None, *, edge_gain: float = 2.0) -> None:
        self.edge_gain = edge_gain

    def close(self) -> None:
        pass


def test_a_region_measure_with_one_setting_is_its_class_and_its_registry_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A new region measure's setting, declared only on its registry entry, is a key of
    ``[landmarks]`` (checked, defaulted), a flag of the command line, a keyword of the API, a key of
    summary.json's settings, a line of the preset reference, and what the measure's class is built
    with; gone with the entry."""
    import importlib.util

    from eyeblink import config
    from eyeblink.api.settings import SettingsError, _run_config, _settings_errors
    from eyeblink.cli import build_parser
    from eyeblink.cli.options import run_config_from_args
    from eyeblink.config import LandmarkConfig, RunConfig, config_from_dict
    from eyeblink.errors import ConfigError
    from eyeblink.frame.analyzer import build_fitter
    from eyeblink.landmarks import EYE_MODELS, EyeModelSpec, Setting

    gain = Setting(
        "edge_gain",
        "--edge-gain",
        low=0.0,
        high=10.0,
        default=2.0,
        metavar="G",
        help="--landmarks edge: the gain of the edges",
        doc="edge: the gain of its edges (--edge-gain)",
    )
    spec = EyeModelSpec(__name__, "_EdgeMeasure", region=True, tunables=(gain,))
    monkeypatch.setitem(EYE_MODELS, "edge", spec)
    roi = {"eye": {"roi": [60, 38, 45, 45]}}
    too_much = r"^landmarks\.edge_gain must be in \(0, 10\), got 11$"
    # the config: a [landmarks] key with its default, checked as declared (one line naming the key)
    assert LandmarkConfig().setting("edge_gain") == 2.0
    cfg = config_from_dict({**roi, "landmarks": {"model": "edge", "edge_gain": 4.5}})
    assert cfg.landmarks.options() == {"edge_gain": 4.5}
    with pytest.raises(ConfigError, match=too_much):
        config_from_dict({**roi, "landmarks": {"model": "edge", "edge_gain": 11}})
    # summary.json's settings and the class the run builds
    assert cfg.to_dict()["landmarks"]["edge_gain"] == 4.5
    fitter = build_fitter(cfg)
    assert isinstance(fitter, _EdgeMeasure) and fitter.edge_gain == 4.5
    # the command line: its flag, into the same config (a measure chosen by the run takes it too)
    parser = build_parser()
    assert "--edge-gain G" in _process_help(parser)
    args = parser.parse_args(
        ["process", "in.mp4", "-o", str(tmp_path), "--eye-roi", "60,38,45,45", "--edge-gain", "4.5"]
    )
    assert run_config_from_args(args).landmarks.setting("edge_gain") == 4.5
    # the API: its keyword, and a section dict with its key
    api, _ = _run_config({"eye_roi": [60, 38, 45, 45], "landmarks": "edge", "edge_gain": 4.5}, ())
    section, _ = _run_config({**roi, "landmarks": {"model": "edge", "edge_gain": 4.5}}, ())
    assert api.landmarks == cfg.landmarks == section.landmarks
    with pytest.raises(SettingsError, match=too_much), _settings_errors(python=True):
        _run_config({"eye_roi": [60, 38, 45, 45], "landmarks": "edge", "edge_gain": 11}, ())
    with pytest.raises(ConfigError, match=r"^landmarks\.edge_gain must be a number, got str 'x'$"):
        _run_config({"eye_roi": [60, 38, 45, 45], "edge_gain": "x"}, ())
    # the preset reference: its row, from the declaration
    path = Path(__file__).resolve().parent.parent / "docs" / "hooks" / "reference.py"
    loader = importlib.util.spec_from_file_location("eyeblink_docs_reference", path)
    assert loader is not None and loader.loader is not None
    hook = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(hook)
    table = hook.preset_markdown(
        {"landmarks": LandmarkConfig}, {"landmarks": config.PRESET_KEY_DOCS["landmarks"]}
    )
    row = (
        "| `edge_gain` | `2.0` | float | must be in (0, 10) "
        "| edge: the gain of its edges (--edge-gain) |"
    )
    assert row in table
    monkeypatch.undo()  # the entry gone: so is its setting
    assert "edge_gain" not in RunConfig().to_dict()["landmarks"]
    with pytest.raises(ConfigError, match="unknown key"):
        config_from_dict({"landmarks": {"edge_gain": 4.5}})


def _process_help(parser: object) -> str:
    """``eyeblink process --help``'s text."""
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["process"].format_help()
