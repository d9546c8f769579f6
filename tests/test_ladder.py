"""The frame-rate ladder (``eyeblink eval --ladder``, :mod:`eyeblink.lab.ladder`) and the rule
for defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eyeblink.errors import ConfigError
from eyeblink.lab.evaluate import Span
from eyeblink.lab.ladder import Rung, RungSource, no_worse, present, replaces_default, rungs_for
from tests.conftest import run_cli, zju_subset

FPS = 30


@pytest.fixture(scope="module")
def face30(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A rendered face at 30 FPS, lossless (FFV1: decoded frames are the rendered ones), 4 s, two
    blinks, frame 50 dropped by the "camera" (not written: a timestamp gap)."""
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    path = tmp_path_factory.mktemp("ladder") / "face30.mkv"
    cfg = SynthConfig(
        duration_s=4.0,
        fps=FPS,
        codec="ffv1",
        seed=3,
        dropped_frames=(50,),
        blinks=(
            BlinkSpec(onset_s=1.5, closing_ms=70, closed_ms=30, opening_ms=140),
            BlinkSpec(onset_s=3.0, closing_ms=70, closed_ms=60, opening_ms=160),
        ),
    )
    return path, write_recording(path, cfg)


def decoded(path: Path) -> tuple[list[np.ndarray], list[float], list[int]]:
    from eyeblink.sources.files import open_source

    with open_source(path) as src:
        frames = list(src)
        return (
            [f.image for f in frames],
            [f.timestamp_s for f in frames],
            [src.packet_index(f.index) for f in frames],
        )


@pytest.mark.parametrize("k", [2, 3, 4])
def test_rungs_decimate_and_expose_real_frames_keeping_their_timestamps(
    face30: tuple[Path, object], k: int
) -> None:
    """Decimated: the first frame of each frame time, exactly; exposed: the time-weighted mean of
    the frames shown during it (the frame before the dropped one stays on screen twice as long);
    both keep the first frame's container timestamp, and the packet spans cover the rung's frames.
    """
    from eyeblink.sources.files import open_source

    path, _truth = face30
    images, times, packets = decoded(path)
    # the dropped frame
    assert len(images) == 4 * FPS - 1 and times[50] - times[49] == pytest.approx(2 / FPS, abs=1e-3)
    windows: dict[int, list[int]] = {}
    for i, t in enumerate(times):
        windows.setdefault(round((t - times[0]) * FPS) // k, []).append(i)
    for way in ("decimated", "exposed"):
        with open_source(path) as inner:
            src = RungSource(inner, Rung(way, k, FPS / k))
            out = list(src)
        assert src.nominal_fps == pytest.approx(FPS / k)
        assert len(out) == len(windows) and [f.index for f in out] == list(range(len(out)))
        for f, (w, members) in zip(out, sorted(windows.items()), strict=True):
            assert f.timestamp_s == times[members[0]]  # container timestamps kept
            if way == "decimated":
                assert np.array_equal(f.image, images[members[0]])
                assert src.spans[f.index] == (packets[members[0]], packets[members[0]])
                continue
            # each picture weighs the native frame times it stays on screen inside this output frame
            # time
            slots = [round((t - times[0]) * FPS) for t in times]
            shown = [
                images[max(i for i in range(len(slots)) if slots[i] <= n)]
                for n in range(w * k, (w + 1) * k)
                if n <= slots[-1]
            ]
            assert len(shown) == k or w == max(windows)
            assert np.abs(f.image.astype(int) - np.rint(np.mean(shown, 0))).max() <= 1
            if len(members) == k:  # k frames, none missing: their plain mean
                assert (
                    np.abs(
                        f.image.astype(int) - np.rint(np.mean([images[i] for i in members], 0))
                    ).max()
                    <= 1
                )
            # the dropped frame's time: the picture before it stays on screen
            elif w != max(windows):
                assert len(members) == k - 1 and any(x is images[49] for x in shown)
            last = packets[windows[w + 1][0]] - 1 if w + 1 in windows else packets[members[-1]]
            assert src.spans[f.index] == (packets[members[0]], last)


def test_a_blink_counts_at_a_rung_when_one_of_its_frames_falls_in_it() -> None:
    decimated = [(0, 0), (4, 4), (8, 8)]
    exposed = [(0, 3), (4, 7), (8, 11)]
    one_frame, two_frames, sampled = Span(2, 2), Span(5, 6), Span(3, 4)
    assert present([one_frame, two_frames, sampled], decimated) == [sampled]
    assert present([one_frame, two_frames, sampled], exposed) == [one_frame, two_frames, sampled]
    assert present([Span(12, 13)], exposed) == []
    assert [r.key for r in rungs_for(30.0)] == [
        "native",
        "decimated 15",
        "exposed 15",
        "decimated 10",
        "exposed 10",
        "decimated 7.5",
        "exposed 7.5",
    ]
    assert [r.k for r in rungs_for(30.0)] == [1, 2, 2, 3, 3, 4, 4]
    # 15 and 10: not slower
    assert [r.key for r in rungs_for(12.0)] == ["native", "decimated 7.5", "exposed 7.5"]


def write_tag(path: Path, n_frames: int, blinks: list[tuple[int, int]]) -> None:
    lines = ["#start"]
    for f in range(n_frames):
        bid = next((i for i, (s, e) in enumerate(blinks) if s <= f <= e), -1)
        lines.append(f"{f}:{bid}:X:N:X:N:X:0:0:0:0:0:0:0:0:0:0:0:0")
    path.write_text("\n".join([*lines, "#end"]) + "\n")


def test_eval_ladder_runs_a_rendered_clip_through_the_pipeline(
    face30: tuple[Path, object], tmp_path: Path
) -> None:
    """``eyeblink eval --ladder`` on a rendered 30 FPS clip with its planted blinks as a ``.tag``:
    every rung through the real decoder and pipeline, the table printed and written, the rule
    against itself passing."""
    path, truth = face30
    data = tmp_path / "set"
    data.mkdir()
    (data / "face30.mkv").symlink_to(path)
    _, _, packets = decoded(path)
    # written frames: packet = position
    pts_to_packet = {int(p): i for i, p in enumerate(truth.frame_index)}
    spans = [(pts_to_packet[b.onset_frame], pts_to_packet[b.end_frame]) for b in truth.blinks]
    assert packets == list(range(len(packets)))
    write_tag(data / "face30.tag", len(packets), spans)
    report = tmp_path / "ladder.json"
    res = run_cli("eval", data, "--ladder", "--json", report, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "exposed 7.5" in res.stdout and "strict" in res.stdout
    rep = json.loads(report.read_text())
    tab = rep["table"]
    assert list(tab) == [r.key for r in rungs_for(FPS)]
    assert tab["native"]["overall"]["tp"] == 2 and tab["native"]["overall"]["fp"] == 0
    for key, cells in tab.items():
        # each blink lasts 240+ ms: a frame of it at every rung
        assert cells["overall"]["truth"] == 2, key
        frames = rep["clips"][0]["rungs"][key]["frames"]
        k = 1 if key == "native" else round(FPS / float(key.split()[1]))
        assert abs(frames - len(packets) / k) <= 1.5, key
    assert tab["exposed 15"]["overall"]["tp"] == 2
    again = run_cli(
        "eval",
        data,
        "--ladder",
        "--json",
        tmp_path / "again.json",
        "--against",
        report,
        "--no-progress",
    )
    assert again.returncode == 0 and "NO WORSE" in again.stdout, again.stdout + again.stderr
    bad = run_cli("eval", data, "--against", report)
    assert bad.returncode == 2 and "add --ladder" in bad.stderr and "Traceback" not in bad.stderr


def test_the_rule_fails_a_candidate_that_loses_blinks_beyond_the_noise() -> None:
    """The paired bootstrap: a candidate losing a blink on every clip fails; one differing on one
    clip of many by one blink is within the noise; a fixed margin replaces the bootstrap."""

    def report(tps: list[int]) -> dict[str, object]:
        return {
            "clips": [
                {
                    "video": f"c{i}",
                    "group": "G" if i % 2 else "H",
                    "rungs": {"native": {"tp": tp, "fp": 0, "fn": 4 - tp, "unscored": 0}},
                }
                for i, tp in enumerate(tps)
            ]
        }

    ref = report([4] * 20)
    worse = no_worse(report([3] * 20), ref)
    assert not worse["passes"] and {c["convention"] for c in worse["cells"] if not c["passes"]} == {
        "unscored",
        "strict",
    }
    assert no_worse(report([4] * 19 + [3]), ref)["passes"]
    assert not no_worse(report([4] * 19 + [3]), ref, margin=0.0)["passes"]
    same = no_worse(ref, ref)
    assert same["passes"] and all(c["margin"] == 0 for c in same["cells"])


def test_a_new_default_must_be_no_worse_on_every_ladder() -> None:
    """The rule for a default over two kinds of recording: better on one ladder and worse beyond the
    noise on the other keeps the current default; no worse on both replaces it; one ladder alone
    decides nothing."""

    def report(tps: list[int]) -> dict[str, object]:
        return {
            "clips": [
                {
                    "video": f"c{i}",
                    "group": "G",
                    "rungs": {"native": {"tp": tp, "fp": 0, "fn": 4 - tp, "unscored": 0}},
                }
                for i, tp in enumerate(tps)
            ]
        }

    current = {"zju": report([3] * 20), "webcam": report([4] * 20)}
    better_on_zju_worse_on_webcams = {"zju": report([4] * 20), "webcam": report([3] * 20)}
    verdict = replaces_default(
        {k: (better_on_zju_worse_on_webcams[k], current[k]) for k in current}
    )
    assert not verdict["replaces"]
    assert verdict["ladders"]["zju"]["passes"] and not verdict["ladders"]["webcam"]["passes"]
    assert replaces_default({k: (current[k], current[k]) for k in current})["replaces"]
    with pytest.raises(ConfigError, match="at least two ladders"):
        replaces_default({"zju": (current["zju"], current["zju"])})


ZJU_SUBSET = ("000011M_FNN", "000011M_UNN", "000017F_FTN", "000019F_FBN")


def test_the_rule_for_defaults_on_real_clips(data_dir: Path, tmp_path: Path) -> None:
    """On four real zju-dev clips (one per condition), two rates: the default eye model (``lids``
    with its default network, the ``cpu`` preset as ``eyeblink eval`` runs it) holds against the lid
    network it replaced as the default (``lids_v1``), and a detector that needs a much deeper
    closure (``close_ratio`` 0.3: the default network reads closures deep enough that 0.5 still
    finds them all here) is worse beyond the bootstrap's noise on some rung."""
    ds = zju_subset(data_dir, tmp_path, ZJU_SUBSET)
    from dataclasses import replace

    from eyeblink import weights
    from eyeblink.config import load_preset
    from eyeblink.lab.ladder import run_ladder
    from eyeblink.presets import resolve_preset

    cfg = load_preset(resolve_preset("cpu"))
    assert cfg.landmarks.model == "lids" and cfg.landmarks.model_path is None
    default = run_ladder(ds, cfg, rates=(15.0, 7.5))
    assert list(default["table"]) == [
        "native",
        "decimated 15",
        "exposed 15",
        "decimated 7.5",
        "exposed 7.5",
    ]
    assert default["table"]["native"]["overall"]["truth"] == sum(
        c["rungs"]["native"]["truth"] for c in default["clips"]
    )
    same = no_worse(default, default)
    assert same["passes"] and all(c["margin"] == 0 and c["loss"] == 0 for c in same["cells"])
    other = run_ladder(
        ds,
        replace(
            cfg,
            landmarks=replace(
                cfg.landmarks, model_path=str(weights.WEIGHTS_DIR / weights.LIDS_V1_FILENAME)
            ),
        ),
        rates=(15.0, 7.5),
    )
    verdict = no_worse(default, other)
    assert verdict["passes"], verdict["cells"][:3]
    shallow = run_ladder(
        ds,
        replace(cfg, blinks=replace(cfg.blinks, close_ratio=0.3, open_ratio=0.4, onset_ratio=0.5)),
        rates=(15.0, 7.5),
    )
    worse = no_worse(shallow, default)
    assert not worse["passes"], worse["cells"][:3]


def test_bad_ladder_options_are_one_line(tmp_path: Path) -> None:
    """A rate that is not a number, and an --against file that is no ladder report: one line,
    exit 2."""
    data = tmp_path / "set"
    data.mkdir()
    not_a_ladder = tmp_path / "scores.json"
    not_a_ladder.write_text('{"overall": {}}')
    for args, message in (
        (("--rates", "15,fast"), "--rates '15,fast'"),
        (("--rates", "0"), "positive"),
        (("--against", not_a_ladder), "is not a ladder report"),
        (("--against", tmp_path / "missing.json"), "cannot read the ladder report"),
    ):
        res = run_cli("eval", data, "--ladder", *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and message in lines[0] and "Traceback" not in res.stderr, res.stderr


def _script(name: str) -> object:
    import importlib.util
    import sys

    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    sys.path.insert(0, str(path.parent))  # the scripts import their siblings
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_webcam_like_copy_keeps_frames_times_rate_and_labels(
    data_dir: Path, tmp_path: Path
) -> None:
    """``scripts/webcam_ladder.py`` on a real zju-dev clip with null packets: 640x480, as many
    frames at the same times (to the millisecond) and the same nominal rate, the gain drifting, and
    the tags renumbered so that ``eval`` finds the same labelled blinks in the copy as in the
    original."""
    from eyeblink.lab.evaluate import read_tag
    from eyeblink.sources.files import open_source

    ds = zju_subset(data_dir, tmp_path, ("000001M_FNN",))
    out = tmp_path / "webcam"
    assert _script("webcam_ladder").main([str(ds), str(out)]) == 0  # type: ignore[attr-defined]
    with open_source(ds / "000001M_FNN.avi") as a, open_source(out / "000001M_FNN.mkv") as b:
        fa, fb = list(a), list(b)
        assert b.nominal_fps == pytest.approx(a.nominal_fps, rel=1e-3)
    assert len(fa) == len(fb) and fb[0].image.shape == (480, 640)
    assert max(abs(x.timestamp_s - y.timestamp_s) for x, y in zip(fa, fb, strict=True)) <= 0.0015
    means = [float(f.image.mean()) for f in fb]
    assert max(means) - min(means) > 5  # the exposure drifts
    decoded_of = _script("zju_turned").packets_of(ds / "000001M_FNN.avi")  # type: ignore[attr-defined]
    orig, copy = read_tag(ds / "000001M_FNN.tag"), read_tag(out / "000001M_FNN.tag")
    assert len(copy.blinks) == len(orig.blinks) > 0
    # the same blink, in the copy's decoded frames
    for a, b in zip(orig.blinks, copy.blinks, strict=True):
        assert (b.start, b.end) == (decoded_of[a.start], decoded_of[a.end])


def test_a_dim_room_copy_is_a_slower_rolling_exposure_with_every_labelled_blink(
    data_dir: Path, tmp_path: Path
) -> None:
    """``webcam_ladder.py --dim 2`` on a real zju-dev clip with null packets: half the rate, every
    frame a rolling exposure of two frame times (rows read out later lower down) in little light,
    and every labelled blink of the original in the copy's ``.tag`` at its time."""
    from eyeblink.lab.evaluate import read_tag
    from eyeblink.sources.files import open_source

    mod = _script("webcam_ladder")
    ramp = [np.full((100, 4), 10.0 * s) for s in range(6)]  # slot s shows grey 10 s
    frame = mod.rolling_exposure(ramp, 2, 2)  # type: ignore[attr-defined]
    assert frame[0, 0] == pytest.approx(25.0)  # the top row: slots 2 and 3
    assert frame[-1, 0] == pytest.approx(25.0 + 10.0 * mod.READOUT * 2 * 99 / 100)  # type: ignore[attr-defined]
    assert np.all(np.diff(frame[:, 0]) >= 0)  # lower rows later
    grey = np.full((200, 200), 100.0)
    rng = np.random.default_rng(0)
    per_level, read = mod.ELECTRONS, mod.READ_NOISE  # type: ignore[attr-defined]
    for light in (0.25, 0.5, 1.0):  # photon and read noise of grey 100, amplified back by 1 / light
        got = mod.low_light(grey, light, rng)  # type: ignore[attr-defined]
        assert got.mean() == pytest.approx(100.0, abs=0.3)
        caught = light * per_level
        assert got.std() == pytest.approx(np.sqrt(100 / caught + (read / caught) ** 2), rel=0.05)

    ds = zju_subset(data_dir, tmp_path, ("000001M_FNN",))
    dim = tmp_path / "dim"
    assert mod.main([str(ds), str(dim), "--dim", "2"]) == 0  # type: ignore[attr-defined]
    with open_source(ds / "000001M_FNN.avi") as a, open_source(dim / "000001M_FNN.mkv") as b:
        fa, fb = list(a), list(b)
        assert b.nominal_fps == pytest.approx(a.nominal_fps / 2, rel=1e-3)
    assert fb[0].image.shape == (480, 640)
    slots = round((fa[-1].timestamp_s - fa[0].timestamp_s) * a.nominal_fps) + 1
    assert len(fb) == slots // 2
    assert fb[5].timestamp_s - fb[4].timestamp_s == pytest.approx(2 / a.nominal_fps, abs=0.0015)
    orig, copy = read_tag(ds / "000001M_FNN.tag"), read_tag(dim / "000001M_FNN.tag")
    assert len(copy.blinks) == len(orig.blinks) > 0
    t_orig = {f.index: f.timestamp_s for f in fa}
    decoded_of = _script("zju_turned").packets_of(ds / "000001M_FNN.avi")  # type: ignore[attr-defined]
    for a_, b_ in zip(orig.blinks, copy.blinks, strict=True):  # the same blink, at the same time
        start, end = t_orig[decoded_of[a_.start]], t_orig[decoded_of[a_.end]]
        assert (
            fb[b_.start].timestamp_s <= start + 0.002
            and fb[b_.end].timestamp_s >= end - 3 / a.nominal_fps
        )
    bad = subprocess.run(
        [sys.executable, str(Path(mod.__file__)), str(ds), str(tmp_path / "x"), "--dim", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--dim 1" in bad.stderr and "Traceback" not in bad.stderr


def test_the_rule_script_keeps_the_default_unless_every_ladder_agrees(tmp_path: Path) -> None:
    def report(tps: list[int]) -> dict[str, object]:
        return {
            "clips": [
                {
                    "video": f"c{i}",
                    "group": "G",
                    "rungs": {"native": {"tp": tp, "fp": 0, "fn": 4 - tp, "unscored": 0}},
                }
                for i, tp in enumerate(tps)
            ]
        }

    files = {}
    for name, tps in (("good", [4] * 20), ("bad", [2] * 20)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(report(tps)))
    rule = _script("default_rule").main  # type: ignore[attr-defined]
    good, bad = str(files["good"]), str(files["bad"])
    assert rule(["--ladder", "zju", good, good, "--ladder", "webcam", good, good]) == 0
    assert rule(["--ladder", "zju", good, good, "--ladder", "webcam", bad, good]) == 1
    assert rule(["--ladder", "zju", good, good]) == 2  # one ladder decides nothing
    assert (
        rule(
            ["--ladder", "zju", good, good, "--ladder", "webcam", good, str(tmp_path / "none.json")]
        )
        == 2
    )
