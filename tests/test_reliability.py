"""Issue 29: outputs never overwrite inputs, validate before work, damaged sessions, one-line
errors.

Every case runs the real CLI in a subprocess on a real encoded recording (the project's synth
renderer, MJPEG AVI) processed by the real pipeline; the page-side cases open the report in headless
Chromium (as tests/test_report.py does). See docs/explanation/reliability.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHROMIUM, needs_chromium, run_cli

from eyeblink.outputs.export import ResultWriter
from eyeblink.outputs.paths import OutputPlan, atomic_path, same_file
from eyeblink.signals.blinks import BlinkEvent


def one_error_line(proc: subprocess.CompletedProcess[str], *, code: int = 2) -> str:
    """The run failed with ``code`` and printed exactly one line ``eyeblink: error: ...`` (no
    traceback)."""
    lines = [
        ln
        for ln in proc.stderr.splitlines()
        if ln.strip() and not ln.startswith(("WARNING: All log", "I0000", "W0000"))
    ]
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "usage:" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("eyeblink: error: "), proc.stderr
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rec.avi (1 s at 500 FPS, one blink) processed with --report by the real CLI; returns the
    folder holding rec.avi and out/ (rec.frames.csv, .blinks.csv, .summary.json, .crops.npz,
    .report.html)."""
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    d = tmp_path_factory.mktemp("reliability")
    write_recording(
        d / "rec.avi",
        SynthConfig(
            duration_s=1.0,
            mjpeg_qscale=4,
            seed=1,
            blinks=(BlinkSpec(onset_s=0.5, closing_ms=70, closed_ms=30, opening_ms=140),),
        ),
    )
    proc = run_cli("process", "rec.avi", "-o", "out", "--report", "--workers", "1", cwd=d)
    assert proc.returncode == 0, proc.stderr
    for suffix in ("frames.csv", "blinks.csv", "summary.json", "crops.npz", "report.html"):
        assert (d / "out" / f"rec.{suffix}").is_file(), suffix
    return d


@pytest.fixture
def copy(session: Path, tmp_path: Path) -> Path:
    """A private copy of the session folder (rec.avi and out/) to damage."""
    dst = tmp_path / "s"
    shutil.copytree(session, dst)
    return dst


# ------------------------------------------------------------------------------ outputs never
# overwrite inputs


def test_overlay_onto_the_recording_is_refused(copy: Path) -> None:
    before = digest(copy / "rec.avi")
    (copy / "out" / "rec.report.html").unlink()
    line = one_error_line(run_cli("report", "out/rec", "--overlay", "rec.avi", cwd=copy))
    assert "--overlay rec.avi" in line and "recording" in line and "destroy" in line, line
    assert digest(copy / "rec.avi") == before
    assert not (copy / "out" / "rec.report.html").exists(), (
        "refused before any work: no report written"
    )


def test_overlay_onto_the_video_it_reads_is_refused(copy: Path) -> None:
    shutil.copy(copy / "rec.avi", copy / "x.avi")
    before = digest(copy / "x.avi")
    line = one_error_line(
        run_cli("report", "out/rec", "--overlay", "x.avi", "--video", "x.avi", cwd=copy)
    )
    assert "--video" in line and "x.avi" in line, line
    assert digest(copy / "x.avi") == before


def test_overlay_onto_a_link_to_the_recording_is_refused(copy: Path) -> None:
    (copy / "link.avi").symlink_to(copy / "rec.avi")  # another name, the same file
    before = digest(copy / "rec.avi")
    line = one_error_line(run_cli("report", "out/rec", "--overlay", "link.avi", cwd=copy))
    assert "same file" in line, line
    assert digest(copy / "rec.avi") == before


def test_report_onto_the_sessions_own_csv_is_refused(copy: Path) -> None:
    frames = copy / "out" / "rec.frames.csv"
    before = digest(frames)
    line = one_error_line(run_cli("report", "out/rec", "-o", "out/rec.frames.csv", cwd=copy))
    assert "frames.csv" in line and "destroy" in line, line
    assert digest(frames) == before
    again = run_cli("report", "out/rec", cwd=copy)  # the session still reads
    assert again.returncode == 0, again.stderr


def test_report_and_overlay_to_one_file_is_refused(copy: Path) -> None:
    line = one_error_line(
        run_cli("report", "out/rec", "-o", "both.mp4", "--overlay", "both.mp4", cwd=copy)
    )
    assert "same file" in line, line
    assert not (copy / "both.mp4").exists()


@pytest.mark.parametrize(
    ("command", "link"), [("process", "hard"), ("process", "symbolic"), ("batch", "hard")]
)
def test_process_refuses_an_output_that_is_the_recording(
    copy: Path, command: str, link: str
) -> None:
    out = copy / "o2"
    out.mkdir()
    target = out / "rec.frames.csv"
    if link == "hard":
        target.hardlink_to(copy / "rec.avi")
    else:
        target.symlink_to(copy / "rec.avi")
    before = digest(copy / "rec.avi")
    extra = ["--workers", "1"] if command == "process" else ["--no-progress"]
    line = one_error_line(run_cli(command, "rec.avi", "-o", "o2", *extra, cwd=copy))
    assert "rec.frames.csv" in line and "rec.avi" in line and "destroy" in line, line
    assert digest(copy / "rec.avi") == before
    assert not (out / "rec.summary.json").exists(), "refused before the first frame"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["process", "rec.avi", "--workers", "1", "--log-file", "rec.avi"], "the input"),
        (["process", "rec.avi", "--workers", "1", "--log-file", "./link.avi"], "the input"),
        (["process", "rec.avi", "--trials", "trials.csv", "--log-file", "trials.csv"], "trials"),
        (["batch", "rec.avi", "--no-progress", "--log-file", "rec.avi"], "the input"),
        (
            ["process", "rec.avi", "--workers", "1", "--log-file", "o3/rec.frames.csv"],
            "writes for session 'rec'",
        ),
        (
            ["batch", "rec.avi", "--no-progress", "--log-file", "o3/./rec.summary.json"],
            "writes for session 'rec'",
        ),
    ],
    ids=["process", "process-link", "process-trials", "batch", "process-output", "batch-output"],
)
def test_a_log_file_that_is_an_input_is_refused(copy: Path, args: list[str], named: str) -> None:
    """``--log-file`` is appended to: naming the recording (or any file the command reads) would
    change it."""
    (copy / "link.avi").symlink_to(copy / "rec.avi")
    (copy / "trials.csv").write_text("trial,cs_onset_s\n1,0.5\n")
    before = digest(copy / "rec.avi"), digest(copy / "trials.csv")
    line = one_error_line(run_cli(*args, "-o", "o3", cwd=copy))
    assert (
        line.startswith("eyeblink: error: --log-file")
        and named in line
        and "choose another" in line
    ), line
    assert (digest(copy / "rec.avi"), digest(copy / "trials.csv")) == before
    assert not (copy / "o3").exists(), "refused before any work"


def test_same_file_is_by_inode_not_by_name(tmp_path: Path) -> None:
    a = tmp_path / "a.bin"
    a.write_bytes(b"x")
    (tmp_path / "h.bin").hardlink_to(a)
    (tmp_path / "d").mkdir()
    assert same_file(a, tmp_path / "h.bin")
    assert same_file(a, tmp_path / "d" / ".." / "a.bin")
    assert not same_file(a, tmp_path / "new.bin")
    (tmp_path / "copy.bin").write_bytes(b"x")
    assert not same_file(a, tmp_path / "copy.bin")  # same bytes, another file
    with pytest.raises(Exception, match="destroy"):
        OutputPlan().read(a, "the input").write(tmp_path / "h.bin", "-o").check()


def test_atomic_path_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    good = tmp_path / "model.tflite"
    good.write_bytes(b"good")
    with pytest.raises(RuntimeError), atomic_path(good) as tmp:
        assert tmp.suffix == ".tflite" and tmp.parent == tmp_path
        tmp.write_bytes(b"half")
        raise RuntimeError("killed mid-write")
    assert good.read_bytes() == b"good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.tflite"], "no temporary file left"


# ------------------------------------------------------------------------------ validate, then work


def _blocker(tmp_path: Path) -> Path:
    """A regular file: a path under it cannot be written (even by root)."""
    f = tmp_path / "afile"
    f.write_text("not a folder")
    return f


@pytest.mark.parametrize("where", ["folder", "under-a-file"])
@pytest.mark.parametrize(
    "command",
    [
        ["bench", "--frames", "50"],
        ["bench", "detector"],
        ["bench", "detectors"],
        ["bench", "landmarks"],
        ["eval-long", "--only", "none"],
    ],
)
def test_json_output_checked_before_any_measurement(
    tmp_path: Path, command: list[str], where: str
) -> None:
    target = tmp_path / "results" if where == "folder" else _blocker(tmp_path) / "x.json"
    if where == "folder":
        target.mkdir()
    line = one_error_line(run_cli(*command, "--json", target, cwd=tmp_path))
    assert "--json" in line and str(target) in line, line
    assert ("is a folder" in line) if where == "folder" else ("cannot write" in line), line


def test_eval_json_checked_before_the_first_video(session: Path, tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    shutil.copy(session / "rec.avi", data / "clip.avi")
    (data / "clip.tag").write_text("#start\n#end\n")
    proc = run_cli(
        "eval", data, "--json", _blocker(tmp_path) / "scores.json", "--no-progress", cwd=tmp_path
    )
    line = one_error_line(proc)
    assert "--json" in line and "cannot write" in line, line
    assert "clip" not in proc.stdout, "no video was processed"


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["train-detector", "IN", "--holdout", "HOLD", "-o"], "-o"),
        (["train-lids", "IN", "-o"], "-o"),
    ],
)
def test_training_output_checked_before_the_first_epoch(
    session: Path, tmp_path: Path, command: list[str], option: str
) -> None:
    args = [str(session / "rec.avi") if a in ("IN", "HOLD") else a for a in command]
    if "HOLD" in command:
        shutil.copy(session / "rec.avi", tmp_path / "hold.avi")
        args[args.index(str(session / "rec.avi"), 2)] = str(tmp_path / "hold.avi")
    proc = run_cli(*args, _blocker(tmp_path) / "model.tflite", cwd=tmp_path)
    line = one_error_line(proc)
    assert "cannot write" in line and option in line, line
    assert "training on" not in proc.stdout and "labelled" not in proc.stdout


def test_train_landmarks_output_checked_first(tmp_path: Path) -> None:
    import importlib.util

    # not imported here: an import would show in later in-process runs
    if importlib.util.find_spec("dlib") is None:
        pytest.skip("dlib is not installed (extra dlib)")
    line = one_error_line(
        run_cli(
            "train-landmarks", "--synthetic", "5", "-o", _blocker(tmp_path) / "m.dat", cwd=tmp_path
        )
    )
    assert "cannot write" in line, line


# ------------------------------------------------------------------------------ one-line option
# errors


@pytest.mark.parametrize(
    "argv",
    [
        ["process", "x.avi", "-o", "out", "--mesh-reuse-ms", "-1"],
        ["process", "x.avi", "-o", "out", "--stage", "gpu"],
        ["report", "out/x", "--fps", "0"],
        ["train-detector", "x.avi", "-o", "t.tflite"],
        ["bench", "detectors", "--every", "zero"],
        ["no-such-command"],
    ],
)
def test_option_errors_are_one_line(tmp_path: Path, argv: list[str]) -> None:
    line = one_error_line(run_cli(*argv, cwd=tmp_path))
    assert "--help" in line, line  # the fix: where the options are described


def test_help_is_unchanged(tmp_path: Path) -> None:
    proc = run_cli("report", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: eyeblink report")
    assert "--overlay" in proc.stdout


def test_overlay_options_without_overlay_are_an_error(copy: Path) -> None:
    line = one_error_line(run_cli("report", "out/rec", "--start", "0.2", "--end", "0.5", cwd=copy))
    assert "--start/--end" in line and "--overlay" in line, line


# ------------------------------------------------------------------------------ damaged sessions


def _report_page(copy: Path) -> str:
    proc = run_cli("report", "out/rec", cwd=copy)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return (copy / "out" / "rec.report.html").read_text(encoding="utf-8")


def test_frames_csv_cut_mid_row(copy: Path) -> None:
    frames = copy / "out" / "rec.frames.csv"
    data = frames.read_bytes()
    frames.write_bytes(data[: len(data) - 25])  # the last row loses its tail
    rows = data.count(b"\n") - 1
    page = _report_page(copy)
    assert "last row was cut off" in page
    m = re.search(r'"frames":(\d+)', page)
    assert m and int(m.group(1)) == rows - 1, "the cut row is left out, every whole row kept"


def test_frames_csv_with_a_non_number(copy: Path) -> None:
    frames = copy / "out" / "rec.frames.csv"
    lines = frames.read_text().splitlines(keepends=True)
    cells = lines[10].split(",")
    cells[3] = "abc"  # ear_left
    lines[10] = ",".join(cells)
    frames.write_text("".join(lines))
    line = one_error_line(run_cli("report", "out/rec", cwd=copy))
    assert "rec.frames.csv" in line and "row 11" in line and "'abc' is not a number" in line, line
    assert "re-run" in line


def test_summary_that_is_a_list(copy: Path) -> None:
    (copy / "out" / "rec.summary.json").write_text("[1, 2]\n")
    line = one_error_line(run_cli("report", "out/rec", cwd=copy))
    assert "rec.summary.json" in line and "list" in line, line


@pytest.mark.parametrize("damage", ["truncated", "text"])
def test_unreadable_crops_are_named_on_the_page(copy: Path, damage: str) -> None:
    crops = copy / "out" / "rec.crops.npz"
    if damage == "truncated":
        crops.write_bytes(crops.read_bytes()[:300])
    else:
        crops.write_text("these are not eye crops\n")
    page = _report_page(copy)
    assert "rec.crops.npz cannot be read" in page


def test_blinks_csv_with_another_header(copy: Path) -> None:
    blinks = copy / "out" / "rec.blinks.csv"
    lines = blinks.read_text().splitlines(keepends=True)
    lines[0] = "a,b,c\n"
    blinks.write_text("".join(lines))
    line = one_error_line(run_cli("report", "out/rec", cwd=copy))
    assert "rec.blinks.csv" in line and "'blink'" in line, line


def test_blinks_csv_with_a_half_last_row(copy: Path) -> None:
    blinks = copy / "out" / "rec.blinks.csv"
    text = blinks.read_text()
    assert text.count("\n") == 2, "the fixture has one blink"
    blinks.write_text(text[: text.index("\n") + 1] + text.split("\n")[1][:12])
    page = _report_page(copy)
    assert "last row was cut off" in page
    assert '<span id="blink-count">0</span>' in page, "the half row is not shown as a blink"


def test_overlay_on_a_video_of_another_size(copy: Path) -> None:
    from eyeblink.lab.synth import SynthConfig, write_recording

    write_recording(
        copy / "small.avi",
        SynthConfig(
            duration_s=0.1, width=320, height=240, face_scale=150.0, mjpeg_qscale=4, seed=2
        ),
    )
    line = one_error_line(
        run_cli("report", "out/rec", "--overlay", "o.mp4", "--video", "small.avi", cwd=copy)
    )
    assert "320x240" in line and "640x480" in line and "--video" in line, line
    assert not (copy / "o.mp4").exists()


def _no_frames(copy: Path) -> Path:
    out = copy / "out"
    for name in ("frames.csv", "blinks.csv"):
        p = out / f"rec.{name}"
        p.write_text(p.read_text().split("\n", 1)[0] + "\n")
    (out / "rec.crops.npz").unlink()
    s = json.loads((out / "rec.summary.json").read_text())
    s.update(status="interrupted", frames=0)
    (out / "rec.summary.json").write_text(json.dumps(s))
    return out / "rec.report.html"


def test_session_without_frames_says_so(copy: Path) -> None:
    html = _no_frames(copy)
    page = _report_page(copy)
    assert html.is_file() and "has no rows" in page


@needs_chromium
@pytest.mark.parametrize("case", ["no-frames", "cut-row"])
def test_damaged_session_pages_draw_without_errors_in_chromium(copy: Path, case: str) -> None:
    if case == "no-frames":
        html = _no_frames(copy)
    else:
        frames = copy / "out" / "rec.frames.csv"
        frames.write_bytes(frames.read_bytes()[:-7])
        html = copy / "out" / "rec.report.html"
    assert run_cli("report", "out/rec", cwd=copy).returncode == 0
    assert CHROMIUM is not None
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--dump-dom",
            html.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    errors = [
        ln
        for ln in proc.stderr.splitlines()
        if ("CONSOLE" in ln and html.name in ln) or "Uncaught" in ln
    ]
    assert errors == [], errors
    m = re.search(r'<div id="status"([^>]*)>', proc.stdout)
    assert m and 'data-ok="1"' in m.group(1), proc.stdout[:2000]
    assert ("has no rows" if case == "no-frames" else "cut off") in proc.stdout


# ------------------------------------------------------------------------------ blinks never past
# the frames


def _event(n: int, start: int, end: int) -> BlinkEvent:
    nan = float("nan")
    return BlinkEvent(
        n,
        start,
        end,
        start / 500,
        end / 500,
        (end - start) * 2.0,
        (start + end) // 2,
        (start + end) / 1000,
        0.3,
        0.1,
        0.6,
        nan,
        nan,
        nan,
        nan,
        nan,
        nan,
        True,
    )


def _on_disk(path: Path) -> list[list[str]]:
    return [ln.split(",") for ln in path.read_text().splitlines()[1:]]


@pytest.mark.parametrize("interval", [0.0, 0.5])
def test_blink_rows_reach_disk_after_the_frame_rows_they_cover(
    tmp_path: Path, interval: float
) -> None:
    """After every write, what a SIGKILL would leave: no blink in blinks.csv ends past frames.csv's
    last row.

    As the sink does, a blink is reported while its last frame is processed, before that frame's
    row."""
    w = ResultWriter(tmp_path, "s", flush_interval_s=interval)
    ends = {40: 30, 41: 41, 90: 90, 150: 149}  # frame at which a blink is reported -> its end frame

    def killed_now_ok(i: int) -> None:
        frames, blinks = _on_disk(w.frames_path), _on_disk(w.blinks_path)
        last = int(frames[-1][0]) if frames else -1
        assert all(int(b[2]) <= last for b in blinks), (i, last, [b[2] for b in blinks])

    for i in range(200):
        if i in ends:
            w.write_blink(_event(len([k for k in ends if k < i]) + 1, ends[i] - 10, ends[i]))
            killed_now_ok(i)
        w.write_frame((i, i / 500, 1, 0.3, 0.3, 0.3, 0.3, 1, 0.9, 0, 0, 10, 10, 0.0))
        killed_now_ok(i)
    w.close()
    assert len(_on_disk(w.blinks_path)) == 4 and len(_on_disk(w.frames_path)) == 200


# ------------------------------------------------------------------------------ smaller ones (issue
# 29, item 9)


def test_loaders_out_of_range_is_an_error_like_workers(session: Path) -> None:
    for option in ("--loaders", "--workers"):
        line = one_error_line(run_cli("process", "rec.avi", "-o", "o9", option, "999", cwd=session))
        assert "out of range" in line and "4 x the" in line, line
    assert not (session / "o9").exists()


def test_stage_accelerator_with_one_worker_is_an_error(session: Path, tmp_path: Path) -> None:
    for workers in ("0", "1"):
        line = one_error_line(
            run_cli(
                "process",
                session / "rec.avi",
                "-o",
                tmp_path / "out",
                "--stage",
                "accelerator",
                "--workers",
                workers,
                cwd=tmp_path,
            )
        )
        assert (
            "--stage accelerator needs --workers 2 or more" in line and "--stage fused" in line
        ), line
    assert not (tmp_path / "out").exists()


def test_accelerator_summary_says_the_batches_it_ran(session: Path, tmp_path: Path) -> None:
    """The cpu preset's batch_size 1 with the accelerator stage: a loader message (many frames) is
    never split, so the summary shows the setting and the largest batch run, never a mean above
    both."""
    preset = tmp_path / "acc.toml"
    preset.write_text('[detect]\nbackend = "litert"\nstage = "accelerator"\n')
    proc = run_cli(
        "process",
        session / "rec.avi",
        "-o",
        tmp_path / "out",
        "--workers",
        "2",
        "--pipeline",
        preset,
        "--max-frames",
        "200",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    s = json.loads((tmp_path / "out" / "rec.summary.json").read_text())
    acc = s["parallel"]["accelerator"]
    assert s["frames"] == 200 and acc["batch_size"] == 1, acc
    assert acc["mean_batch"] <= acc["largest_batch"] and acc["largest_batch"] > 1, acc


def test_model_errors_show_plain_numbers(session: Path, tmp_path: Path) -> None:
    from eyeblink.weights import WEIGHTS_DIR

    proc = run_cli(
        "process",
        session / "rec.avi",
        "-o",
        tmp_path / "out",
        "--workers",
        "1",
        "--landmark-model",
        # an iris network given as the face mesh
        WEIGHTS_DIR / "iris_landmark.tflite",
        cwd=tmp_path,
    )
    line = one_error_line(proc)
    assert "(1, 64, 64, 3)" in line and "np." not in line, line


def test_mesh_with_damaged_weights_is_a_model_error(session: Path, tmp_path: Path) -> None:
    """The file's structure is intact (it loads), its largest weight buffer is overwritten (NaN
    bytes)."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (its flatbuffer tools rewrite the model)")
    from eyeblink.weights import WEIGHTS_DIR

    bad = tmp_path / "damaged_mesh.tflite"
    corrupt = (
        "import sys, numpy as np\n"
        "from tensorflow.lite.tools import flatbuffer_utils\n"
        "m = flatbuffer_utils.read_model(sys.argv[1])\n"
        "sizes = [len(b.data) if b.data is not None else 0 for b in m.buffers]\n"
        "big = sizes.index(max(sizes))\n"
        "m.buffers[big].data = np.full(sizes[big], 0xFF, np.uint8)\n"
        "flatbuffer_utils.write_model(m, sys.argv[2])\n"
    )
    # in a child process: TensorFlow loaded in the test process would be forked into later
    # in-process runs
    subprocess.run(
        [sys.executable, "-c", corrupt, str(WEIGHTS_DIR / "face_landmark.tflite"), str(bad)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    proc = run_cli(
        "process",
        session / "rec.avi",
        "-o",
        tmp_path / "out",
        "--workers",
        "1",
        "--landmarks",
        "mesh",
        "--landmark-model",
        bad,
        "--max-frames",
        "20",
        cwd=tmp_path,
    )
    line = one_error_line(proc)
    assert "damaged_mesh.tflite" in line and "weights are damaged" in line, line
    assert not (tmp_path / "out" / "rec.frames.csv").exists(), "refused before the first frame"


def test_haar_row_never_suggests_downgrading_opencv() -> None:
    import cv2

    from eyeblink.lab.bench_detectors import _install_hint

    hint = _install_hint("haar")
    if hasattr(cv2, "CascadeClassifier"):
        assert hint is None
        return
    assert hint is not None and "<5" not in hint and "pip install" not in hint, hint
    assert cv2.__version__ in hint


def test_sigkill_never_leaves_a_blink_past_the_last_frame_row(tmp_path: Path) -> None:
    """The real pipeline killed outright (SIGKILL) the moment a blink row reaches disk: blinks.csv's
    blinks all end within frames.csv's rows. (A race by nature: the deterministic check of the rule
    is test_blink_rows_reach_disk_after_the_frame_rows_they_cover; this one runs it through the real
    process.)"""
    import time

    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    video = tmp_path / "blinks.avi"
    write_recording(
        video,
        SynthConfig(
            duration_s=3.0,
            mjpeg_qscale=4,
            seed=3,
            blinks=tuple(
                BlinkSpec(onset_s=t, closing_ms=60, closed_ms=30, opening_ms=120)
                for t in (0.6, 1.2, 1.8, 2.4)
            ),
        ),
    )
    for k in (1,):  # kill when the k-th blink row appears
        out = tmp_path / f"out{k}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "process",
                str(video),
                "-o",
                str(out),
                "--workers",
                "1",
                "--no-progress",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        blinks = out / "blinks.blinks.csv"
        deadline = time.monotonic() + 300
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if blinks.is_file() and len(_on_disk(blinks)) >= k:
                    proc.kill()  # outright: SIGKILL (TerminateProcess on Windows)
                    break
                time.sleep(0.002)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        frames = _on_disk(out / "blinks.frames.csv")
        rows = _on_disk(blinks)
        assert rows, "a blink was written before the run ended"
        last = int(frames[-1][0]) if frames else -1
        assert all(int(b[2]) <= last for b in rows), (k, last, [b[2] for b in rows])


def test_rows_formatted_without_the_csv_writer_are_its_bytes() -> None:
    """A row of plain numbers (export._plain_line) and a table of unquoted strings
    (analysis._plain_csv) are joined by hand; the bytes are the csv writer's, and anything the
    writer would quote goes to the writer."""
    import csv
    import io
    import math
    import random

    from eyeblink.outputs.analysis import _plain_csv
    from eyeblink.outputs.export import _cell, _plain_line

    def written(*rows: list) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([_cell(v) for v in r] for r in rows)
        return buf.getvalue()

    rnd = random.Random(1)
    numbers = [
        lambda: rnd.random() * 10 ** rnd.randint(-12, 12),
        lambda: -rnd.random(),
        lambda: math.nan,
        lambda: math.inf,
        lambda: -0.0,
        lambda: rnd.randint(-(10**9), 10**9),
        lambda: None,
        lambda: True,
        lambda: 5e-324,
    ]
    for _ in range(3000):
        row = [rnd.choice(numbers)() for _ in range(rnd.randint(2, 16))]
        assert _plain_line(row) == written(row).encode()
    assert _plain_line([1.5]) is None and _plain_line(["a", 1]) is None
    cells = ["1", "0.25", "", "-3e-05", "a b", "é"]
    for _ in range(3000):
        header = [rnd.choice(cells) for _ in range(3)]
        rows = [[rnd.choice(cells) for _ in range(3)] for _ in range(rnd.randint(0, 4))]
        assert _plain_csv(header, rows) == written(header, *rows)
    for odd in ([["a,b", "1"]], [['say "x"', "1"]], [["two\nlines", "1"]], [["1"]], [[1.5, "1"]]):
        assert _plain_csv(["h", "k"], odd) is None
