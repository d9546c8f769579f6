"""The lid network's blink recipe (``eyeblink train-lids --blink-oversample --exposure-aug``) and
its report of the per-frame error on mid-blink and long-exposure frames.

Real components: zju-dev clips (research data, skipped without it) decoded and labelled by the
teacher (BlazeFace, the face mesh, the iris network), Keras 3 on TensorFlow for the student, LiteRT
for the exported file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import zju_subset

#: two clips of two subjects, each with labelled blinks (one trains, the other is left out and
#: scored)
CLIPS = ("000001M_FNN", "000003M_FNN")


@pytest.fixture(scope="module")
def labelled(data_dir: Path) -> tuple[object, dict[int, str]]:
    """One real zju-dev clip labelled by the teacher (clean frames only), and its ``.tag``
    states."""
    from eyeblink.lab.lids_data import Teacher, label_path
    from eyeblink.lab.train_lids import tag_states

    video = data_dir / "zju-dev" / f"{CLIPS[0]}.avi"
    if not video.is_file():
        pytest.skip(f"{video} not found")
    teacher = Teacher()
    try:
        s = label_path(teacher, video, np.random.default_rng(0), frame_augment=0)
    finally:
        teacher.close()
    s.source = str(video)
    return s, tag_states(video.with_suffix(".tag"))


def test_mid_blink_frames_are_the_lid_between_open_and_shut_and_the_tag_blinks(labelled) -> None:
    """On a real clip: every frame inside a labelled blink and not fully closed is mid-blink; open
    frames whose teacher aperture stays near the open value are not; the dips hold the mid-blink and
    fully closed frames."""
    from eyeblink.lab.lids_data import MID_BLINK, blink_masks, open_value

    s, states = labelled
    mid, dip = blink_masks(s, states)
    st = np.array([states.get(int(f), "none") for f in s.frame_id])
    # the clip has blinks and open eye
    assert (st == "blink").sum() >= 5 and (st == "open").sum() > 50
    assert mid[st == "blink"].all() and dip[(st == "blink") | (st == "closed")].all()
    assert not (mid & ~dip).any()
    ratio = s.aperture / open_value(s.aperture)
    wide_open = (st == "open") & (ratio > MID_BLINK[1]).all(1)
    assert wide_open.sum() > 50 and not mid[wide_open].any()
    assert 0.03 < mid.mean() < 0.5
    # without the labels, the teacher's aperture alone finds the partly closed frames (it saw the
    # blinks)
    mid_t, _ = blink_masks(s, None)
    assert mid_t.sum() >= 2 and mid_t[st != "open"].any()
    assert (ratio[mid_t] <= MID_BLINK[1]).any(1).all() and (ratio[mid_t] >= MID_BLINK[0]).any(
        1
    ).all()


def test_long_exposures_are_the_mean_of_consecutive_frames_and_of_their_apertures(labelled) -> None:
    from eyeblink.lab.lids_data import (
        blink_masks,
        clean_runs,
        exposed_samples,
        random_windows,
        tiled_windows,
    )

    s, states = labelled
    runs = clean_runs(s)
    assert runs and sum(len(r) for r in runs) >= 0.9 * len(s)
    for r in runs:
        assert np.all(np.diff(s.frame_id[r]) >= 1) and np.all(np.diff(s.frame_id[r]) <= 2)
    tiles = tiled_windows(runs, 4)
    assert all(len(w) == 4 for w in tiles) and len(np.unique(np.concatenate(tiles))) == 4 * len(
        tiles
    )
    ctx, ap = exposed_samples(s.ctx, s.aperture, tiles[:3])
    assert ctx.shape == (3, *s.ctx.shape[1:]) and ctx.dtype == np.uint8
    np.testing.assert_allclose(
        ctx[1], np.rint(s.ctx[tiles[1]].astype(np.float32).mean(0)), atol=0.5
    )
    np.testing.assert_allclose(ap[1], s.aperture[tiles[1]].mean(0), rtol=1e-6)
    _, dip = blink_masks(s, states)
    rng = np.random.default_rng(5)
    windows = random_windows(runs, dip, 400, rng)
    assert len(windows) == 400 and {len(w) for w in windows} == {2, 3, 4, 5}
    assert all(np.all(np.diff(w) > 0) for w in windows)
    over = np.mean([dip[w].any() for w in windows])
    assert over >= 0.5 > dip.mean()  # half of them placed over a blink, more than chance would
    # an exposure over a blink reads lower than one of the open eye, as the ladder's exposed frames
    # do
    _, ap = exposed_samples(s.ctx, s.aperture, windows)
    blink = np.array([dip[w].any() for w in windows])
    assert ap[blink].mean() < ap[~blink].mean()
    # photos and rendered faces have no consecutive frames
    from dataclasses import replace

    assert (
        clean_runs(replace(s, source="face.jpg")) == []
        and clean_runs(replace(s, source="synthetic-0")) == []
    )


@pytest.mark.slow
def test_train_lids_with_the_blink_recipe_reports_mid_blink_and_exposed_errors(
    data_dir: Path, tmp_path: Path
) -> None:
    """``train-lids`` on two real clips, one subject left out: the blink recipe's epoch shows the
    extra copies and exposures, the report gives the error on mid-blink and exposed frames, and
    ``--score`` of the exported file gives the same numbers."""
    pytest.importorskip("tensorflow")
    ds = zju_subset(data_dir, tmp_path, CLIPS)
    model, report, scored = tmp_path / "v3.tflite", tmp_path / "r.json", tmp_path / "s.json"
    common = [
        sys.executable,
        "-m",
        "eyeblink",
        "train-lids",
        str(ds),
        "--cache",
        str(tmp_path / "cache"),
        "--frame-augment",
        "0",
        "--exclude-subjects",
        "000003",
    ]
    proc = subprocess.run(
        [
            *common,
            "-o",
            str(model),
            "--report",
            str(report),
            "--epochs",
            "1",
            "--blink-oversample",
            "3",
            "--exposure-aug",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("each epoch:"))
    n, copies, mids, exposures = (int(w) for w in line.replace(",", " ").split() if w.isdigit())
    assert copies == 2 * mids > 0 and exposures == round(0.5 * n), line
    assert "mid-blink" in proc.stdout and "exposed over a blink" in proc.stdout
    errors = json.loads(report.read_text())["scores"]["lid_errors"]
    assert errors["mid_blink"]["n"] > 0 and errors["open_frames"]["n"] > errors["mid_blink"]["n"]
    assert errors["frames"]["n"] == errors["mid_blink"]["n"] + errors["open_frames"]["n"]
    assert (
        set(errors["exposed_k"]) == {"2", "3", "4", "5"}
        and 0 < errors["exposed_over_blink"]["n"] < errors["exposed"]["n"]
    )
    assert all(
        0 < errors[k]["mae"] < 0.5 for k in ("frames", "mid_blink", "exposed", "exposed_over_blink")
    )

    proc = subprocess.run(
        [*common, "--score", str(model), "--report", str(scored)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    again = json.loads(scored.read_text())["scores"]["lid_errors"]
    for k in ("frames", "mid_blink", "exposed", "exposed_over_blink"):
        assert again[k]["n"] == errors[k]["n"] and again[k]["mae"] == pytest.approx(
            errors[k]["mae"], abs=2e-4
        )

    for bad, msg in (
        (["-o", str(model), "--blink-oversample", "0"], "--blink-oversample >= 1"),
        (["--score", str(tmp_path / "missing.tflite")], "missing.tflite"),
        ([], "give -o TFLITE"),
    ):
        proc = subprocess.run([*common, *bad], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and msg in proc.stderr and "Traceback" not in proc.stderr, (
            proc.stderr
        )


def test_the_contact_sheet_shows_the_largest_errors_blink_frames_first(
    data_dir: Path, tmp_path: Path
) -> None:
    """``train-lids --score ... --sheet``: the shipped network against its teacher on a left-out
    subject's real clips; the sheet holds the worst strips, those inside labelled blinks first, each
    with both apertures."""
    import cv2

    from eyeblink import weights
    from eyeblink.lab.train_lids import SHEET_COLUMNS, SHEET_TILES

    ds = zju_subset(data_dir, tmp_path, CLIPS)
    sheet, scored = tmp_path / "worst.png", tmp_path / "s.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "train-lids",
            str(ds),
            "--cache",
            str(tmp_path / "c"),
            "--frame-augment",
            "0",
            "--exclude-subjects",
            "000003",
            "--score",
            str(weights.WEIGHTS_DIR / weights.LIDS_FILENAME),
            "--report",
            str(scored),
            "--sheet",
            str(sheet),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(scored.read_text())["scores"]["sheet"]["strips"]
    assert 0 < len(rows) <= SHEET_TILES and all(r["source"].startswith("000003") for r in rows)
    flags = [r["in_blink"] for r in rows]
    assert any(flags) and flags == sorted(flags, reverse=True)  # the blink frames first
    for part in (r for r in (rows[: flags.count(True)], rows[flags.count(True) :]) if r):
        assert [x["error"] for x in part] == sorted((x["error"] for x in part), reverse=True)
    r0 = rows[0]
    assert r0["error"] == pytest.approx(
        max(abs(s - t) for s, t in zip(r0["student"], r0["teacher"], strict=True)), abs=2e-4
    )
    img = cv2.imread(str(sheet))
    # 40x120 strips at 2x, 30 px of text
    assert img.shape[1] == SHEET_COLUMNS * 240 and img.shape[0] % 110 == 0


def test_a_clip_and_its_copy_elsewhere_keep_their_own_tags() -> None:
    """Training inputs may hold a clip and a rendered copy of it (``scripts/webcam_ladder.py``) with
    the same stem in another folder, whose tags number other frames: each source finds the ``.tag``
    beside it, as the strips' cache tells sources apart (folder and name)."""
    from eyeblink.lab.train_lids import tag_key

    assert tag_key("/data/zju-dev/000001M_FNN.avi") != tag_key("/tmp/webcam/000001M_FNN.mkv")
    assert tag_key("/data/zju-dev/000001M_FNN.avi") == tag_key(
        Path("/data/zju-dev/000001M_FNN.tag")
    )
