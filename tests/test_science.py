"""From EAR to science: FEC calibration, trials files, CR metrics, plots and NWB.

Unit tests work on constructed traces with known answers; the end-to-end test runs the real CLI on a
rendered 500 FPS recording with three trials (a full blink as CR in two, none in the third).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from eyeblink.config import ClosureConfig, TrialConfig, config_from_dict
from eyeblink.errors import CalibrationError, ConfigError, MissingExtraError, TrialFileError
from eyeblink.outputs.analysis import AnalysisOptions, _filled, require_extra
from eyeblink.signals.closure import (
    ClosureCalibration,
    OnlineClosure,
    closure_amplitude,
    from_responses,
    from_segment,
    running_median,
)
from eyeblink.signals.trials import (
    TRACE_COLUMNS,
    TRIAL_COLUMNS,
    Trial,
    read_sync,
    read_trials,
    rising_edges,
    score_trials,
    session_summary,
    trial_traces,
)

FPS = 500.0


def ramp(
    t: np.ndarray,
    onset: float,
    rise_ms: float,
    amp: float,
    end: float = math.inf,
    fall_ms: float = 50.0,
) -> np.ndarray:
    """Closure 0 -> ``amp`` linearly over ``rise_ms`` from ``onset``, held, back to 0 over
    ``fall_ms`` from ``end``."""
    up = np.clip((t - onset) * 1000.0 / rise_ms, 0.0, 1.0)
    down = np.clip(1.0 - (t - end) * 1000.0 / fall_ms, 0.0, 1.0) if math.isfinite(end) else 1.0
    return amp * np.minimum(up, down)


def clock(duration_s: float = 3.0) -> np.ndarray:
    return np.arange(round(duration_s * FPS)) / FPS


# ------------------------------------------------------------------------------------------ FEC


def test_closure_amplitude_and_nan() -> None:
    amp = closure_amplitude(np.array([0.3, 0.15, np.nan, 0.3]), np.array([0.3, 0.3, 0.3, np.nan]))
    assert amp[0] == pytest.approx(0.0) and amp[1] == pytest.approx(0.5)
    assert np.isnan(amp[2]) and np.isnan(amp[3])
    assert math.isnan(closure_amplitude(0.2, 0.0))


@given(
    base=st.floats(0.15, 0.45),
    a_full=st.floats(0.4, 0.95),
    scale=st.floats(0.5, 2.0),
    peak=st.floats(0.0, 1.0),
)
@settings(max_examples=60, deadline=None)
def test_fec_is_closure_fraction_whatever_the_subject(
    base: float, a_full: float, scale: float, peak: float
) -> None:
    """EAR = baseline * (1 - A_full * c) gives FEC = c, and scaling EAR and baseline together
    changes nothing."""
    c = np.array([0.0, 0.25, peak, 1.0])
    ear = base * (1.0 - a_full * c)
    cal = ClosureCalibration(a_full, "responses", 3)
    np.testing.assert_allclose(cal.fec(closure_amplitude(ear, base)), c, atol=1e-9)
    np.testing.assert_allclose(cal.fec(closure_amplitude(ear * scale, base * scale)), c, atol=1e-9)


@given(
    base=st.floats(0.2, 0.4),
    a_full=st.floats(0.4, 0.95),
    noise=st.floats(0.0, 0.01),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=30, deadline=None)
def test_segment_calibration_recovers_full_closure(
    base: float, a_full: float, noise: float, seed: int
) -> None:
    """A calibration segment with full closures (30 ms plateaus) gives A_full within the noise,
    despite spikes."""
    rng = np.random.default_rng(seed)
    t = clock(2.0)
    c = ramp(t, 0.5, 40, 1.0, end=0.57) + ramp(t, 1.2, 40, 1.0, end=1.27)
    ear = base * (1.0 - a_full * c) + rng.normal(0, noise * base, len(t))
    ear[100] = 0.0  # one absurd frame (a failed fit) must not set the scale
    cfg = ClosureConfig(calibration_s=(0.0, 2.0))
    cal = from_segment(cfg, t, closure_amplitude(ear, base))
    assert cal.method == "segment" and cal.segment_s == (0.0, 2.0)
    assert cal.full_amplitude == pytest.approx(a_full, abs=3 * noise + 0.01)


def test_response_calibration_percentile_and_default() -> None:
    cfg = ClosureConfig(
        percentile=90, min_responses=3, min_amplitude=0.3, default_full_amplitude=0.7
    )
    few = from_responses(cfg, [0.72, 0.1, math.nan])  # one real response: not enough
    assert few.method == "default" and few.full_amplitude == 0.7 and few.responses == 1
    amps = [0.5, 0.6, 0.7, 0.72, 0.74, 0.2]  # 0.2 is a partial blink: not a reflex closure
    cal = from_responses(cfg, amps)
    assert cal.method == "responses" and cal.responses == 5
    assert cal.full_amplitude == pytest.approx(np.percentile([0.5, 0.6, 0.7, 0.72, 0.74], 90))


@pytest.mark.parametrize(
    ("segment", "ear_fn", "needle"),
    [
        ((5.0, 6.0), lambda t: np.full_like(t, 0.3), "no frame with a measured eye"),
        ((0.0, 1.0), lambda t: np.full_like(t, 0.3), "below closure.min_amplitude"),
    ],
)
def test_segment_calibration_errors(segment: tuple[float, float], ear_fn, needle: str) -> None:  # type: ignore[no-untyped-def]
    t = clock(2.0)
    with pytest.raises(CalibrationError, match=needle):
        from_segment(ClosureConfig(calibration_s=segment), t, closure_amplitude(ear_fn(t), 0.3))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"percentile": 0}, "closure.percentile"),
        ({"min_responses": 0}, "closure.min_responses"),
        ({"default_full_amplitude": 1.5}, "default_full_amplitude"),
        ({"calibration_s": (3.0, 1.0)}, "START_S < END_S"),
        ({"calibration_s": (1.0,)}, "START_S:END_S"),
        ({"calibration_s": 4.0}, "START_S:END_S"),
    ],
)
def test_closure_config_errors(kwargs: dict, needle: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=needle):
        ClosureConfig(**kwargs)


def test_online_closure_is_provisional_then_calibrated() -> None:
    on = OnlineClosure(ClosureConfig(min_responses=2, default_full_amplitude=0.5))
    assert on.calibration.provisional and on.calibration.method == "default"
    assert on.update(0.0, 0.15, 0.3) == pytest.approx(1.0)  # 0.5 amplitude / 0.5 default
    assert math.isnan(on.update(0.0, math.nan, 0.3)) and math.isnan(on.update(0.0, 0.2, math.nan))
    on.add_response(0.8)
    on.add_response(0.8)
    assert on.calibration.method == "responses" and on.update(0.1, 0.06, 0.3) == pytest.approx(1.0)

    seg = OnlineClosure(ClosureConfig(calibration_s=(0.0, 0.1), smooth_ms=0))
    for i, tt in enumerate(np.arange(0, 0.1, 0.002)):
        # amplitude 0.6 in the segment
        seg.update(float(tt), 0.3 * (0.4 if 20 <= i < 30 else 1.0), 0.3)
    assert seg.calibration.method == "default"  # the segment has not ended yet
    seg.update(0.2, 0.3, 0.3)
    assert seg.calibration.method == "segment" and seg.calibration.full_amplitude == pytest.approx(
        0.6
    )


def test_running_median_and_baseline_fill() -> None:
    x = np.array([0, 0, 9, 0, 0, np.nan, 1, 1, 1], dtype=float)
    np.testing.assert_allclose(running_median(x, 3)[:5], [0, 0, 0, 0, 0])
    b = _filled(np.array([np.nan, np.nan, 0.3, np.nan, 0.32]))
    np.testing.assert_allclose(b, [0.3, 0.3, 0.3, 0.3, 0.32])


# ------------------------------------------------------------------------------------------ trials
# files


def write(tmp_path: Path, text: str, name: str = "trials.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_trials_file_in_seconds(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "# session 1\nTrial,CS_Onset_s,US_Onset_s,cs_duration_ms,cs_type,notes\n"
        "1,0.4,0.65,280,tone,x\n\n2,1.4,,280,tone,y\n",
    )
    tf = read_trials(p)
    trials = tf.resolve()
    assert [tr.trial for tr in trials] == [1, 2]
    assert trials[0].isi_ms == pytest.approx(250) and trials[0].cs_duration_ms == 280
    assert (
        trials[0].trial_type == "paired"
        and trials[1].trial_type == "cs_alone"
        and not trials[1].paired
    )
    assert trials[0].cs_type == "tone"


def test_trials_file_in_ms_tabs_and_frames(tmp_path: Path) -> None:
    p = write(
        tmp_path, "cs_onset_ms\tus_onset_ms\ttrial_type\n400\t650\tpaired\n1400\t1650\tpaired\n"
    )
    assert [tr.us_onset_s for tr in read_trials(p).resolve()] == pytest.approx([0.65, 1.65])
    p = write(tmp_path, "cs_onset_frame,us_onset_frame,us_duration_frame\n200,325,10\n", "f.csv")
    tf = read_trials(p)
    times = np.arange(400) / 500.0 + 0.001  # recorded timestamps, not frame/fps
    (tr,) = tf.resolve(frame_times=times)
    assert tr.cs_onset_s == pytest.approx(0.401) and tr.us_onset_s == pytest.approx(0.651)
    assert tr.us_duration_ms == pytest.approx(20.0)
    (tr,) = tf.resolve(fps=250.0)
    assert tr.cs_onset_s == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "is empty"),
        ("cs_onset_s,us_onset_s\n", "has a header but no trials"),
        ("trial,us_onset_s\n1,0.5\n", "no CS onset column"),
        ("cs_onset,us_onset_s\n0.4,0.6\n", "does not name its unit"),
        ("cs_onset_s,cs_onset_frame\n0.4,200\n", "keep one"),
        ("cs_onset_s,us_onset_s\n0.4,abc\n", "row 2 column us_onset_s: 'abc' is not a number"),
        ("cs_onset_s,us_onset_s\n-0.4,0.1\n", "negative"),
        ("cs_onset_s,us_onset_s\n0.4,0.3\n", "US onset 0.3 is before CS onset 0.4"),
        ("cs_onset_ms,us_onset_s\n400,0.3\n", "US onset 0.3000 s is before CS onset 0.4000 s"),
        ("cs_onset_s,us_onset_s\n1.4,1.6\n0.4,0.6\n", "sort the trials by time"),
        ("trial,cs_onset_s\n1,0.4\n1,1.4\n", "appears twice"),
        ("cs_onset_s,us_onset_s\n,0.6\n", "every trial needs a CS onset"),
        ("cs_onset_frame\n20.5\n", "not a whole frame number"),
        ("cs_onset_s,cs_onset_s\n1,2\n", "duplicate columns"),
    ],
)
def test_trials_file_errors(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(TrialFileError, match=needle) as info:
        read_trials(write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_trials_file_errors_needing_the_recording(tmp_path: Path) -> None:
    with pytest.raises(TrialFileError, match="trials file not found"):
        read_trials(tmp_path / "nope.csv")
    tf = read_trials(write(tmp_path, "cs_onset_frame,us_onset_frame\n200,325\n"))
    with pytest.raises(
        TrialFileError, match=r"no frame timestamps or frame rate are known.*pass --fps"
    ):
        tf.resolve()
    with pytest.raises(TrialFileError, match="outside the recording"):
        tf.resolve(frame_times=np.arange(300) / 500.0)
    with pytest.raises(TrialFileError, match="before CS onset"):
        Trial(1, cs_onset_s=1.0, us_onset_s=0.5)


def test_sync_csv_rising_edges(tmp_path: Path) -> None:
    t = np.arange(2000) / 1000.0  # a 1 kHz acquisition system
    cs = ((t >= 0.4) & (t < 0.68)) | ((t >= 1.4) & (t < 1.68))
    us = (t >= 0.65) & (t < 0.67)  # trial 2 is CS alone
    lines = ["time_ms,cs_ttl,us_ttl"] + [
        f"{x * 1000:.0f},{5.0 * a:.1f},{int(b)}" for x, a, b in zip(t, cs, us, strict=True)
    ]
    p = write(tmp_path, "\n".join(lines) + "\n", "sync.csv")
    trials = read_sync(p, "CS_TTL", "us_ttl").resolve()
    assert [tr.cs_onset_s for tr in trials] == pytest.approx([0.4, 1.4])
    assert trials[0].us_onset_s == pytest.approx(0.65) and not trials[1].paired
    assert trials[0].cs_duration_ms == pytest.approx(280)
    rise, fall, thr = rising_edges(np.array([1.0, 0, 0, 1, 1, 0]))
    # high at the start is not an edge
    assert list(rise) == [3] and list(fall) == [1, 5] and thr == 0.5


@pytest.mark.parametrize(
    ("text", "cols", "needle"),
    [
        ("t,cs\n0,0\n1,1\n", ("cs", None), "no time column"),
        ("time_s,cs\n0,0\n1,1\n", ("ttl", None), "sync column 'ttl' not in"),
        ("time_s,cs\n0,1\n1,1\n", ("cs", None), "constant"),
        ("time_s,cs\n0,0\n0,1\n", ("cs", None), "does not increase"),
        ("time_s,cs\n0,1\n1,0\n", ("cs", None), "no rising edge"),
    ],
)
def test_sync_csv_errors(
    tmp_path: Path, text: str, cols: tuple[str, str | None], needle: str
) -> None:
    with pytest.raises(TrialFileError, match=needle):
        read_sync(write(tmp_path, text, "sync.csv"), *cols)


def test_analysis_options_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="--sync-column needs --trials"):
        AnalysisOptions(sync_column="ttl")
    with pytest.raises(ConfigError, match="needs --sync-column"):
        AnalysisOptions(trials=tmp_path, us_sync_column="us")
    one = write(tmp_path, "cs_onset_s\n1\n")
    with pytest.raises(TrialFileError, match="one trials file"):
        AnalysisOptions(trials=one).check([tmp_path / "a.avi", tmp_path / "b.avi"])
    folder = tmp_path / "trials"
    folder.mkdir()
    write(folder, "cs_onset_s\n1\n", "a.csv")
    with pytest.raises(TrialFileError, match=r"no trials file for input 'b'"):
        AnalysisOptions(trials=folder).check([tmp_path / "a.avi", tmp_path / "b.avi"])
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pynwb" else real(name, *a)
    )
    with pytest.raises(MissingExtraError, match=r"pip install 'eyeblink\[nwb\]'"):
        require_extra("nwb")


# ------------------------------------------------------------------------------------------ CR
# metrics

CS, US = 1.0, 1.25  # ISI 250 ms


def score(fec: np.ndarray, trials: tuple[Trial, ...] = (Trial(1, CS, US),), **cfg: float):  # type: ignore[no-untyped-def]
    return score_trials(trials, clock(), fec, TrialConfig(**cfg))  # type: ignore[arg-type]


def test_cr_at_150_ms_with_amplitude_0_6() -> None:
    t = clock()
    fec = ramp(t, CS + 0.150, 50, 0.6, end=US + 0.1)
    (r,) = score(fec)
    assert r.baseline_valid and r.baseline_fec == pytest.approx(0.0) and not r.startle
    assert r.cr is True
    # linear rise 0 -> 0.6 over 50 ms from 150 ms: FEC passes the 0.05 onset threshold 4.2 ms later
    assert r.cr_onset_latency_ms == pytest.approx(150 + 50 * 0.05 / 0.6, abs=2.0)
    assert r.cr_peak_amplitude == pytest.approx(0.6) and 199 <= r.cr_peak_latency_ms <= 250
    assert r.fec_at_us == pytest.approx(0.6)
    # area of max(0, FEC) over [60, 250] ms: the rise's triangle + the plateau
    assert r.cr_area_fec_ms == pytest.approx(0.6 * 50 / 2 + 0.6 * 50, rel=0.02)
    assert r.ur_amplitude == pytest.approx(0.6) and r.isi_ms == pytest.approx(250)
    assert r.cs_onset_frame == 500 and r.us_onset_frame == 625


def test_no_cr_and_a_ur() -> None:
    t = clock()
    (r,) = score(ramp(t, US + 0.010, 20, 1.0, end=US + 0.060))
    assert r.cr is False and math.isnan(r.cr_onset_latency_ms) and math.isnan(r.cr_peak_latency_ms)
    assert r.cr_peak_amplitude == pytest.approx(0.0) and r.cr_area_fec_ms == pytest.approx(0.0)
    assert r.ur_amplitude == pytest.approx(1.0) and 30 <= r.ur_peak_latency_ms <= 60


def test_startle_is_not_a_cr() -> None:
    t = clock()
    (r,) = score(ramp(t, CS + 0.015, 10, 0.35, end=CS + 0.035, fall_ms=10))
    assert r.startle and r.startle_amplitude == pytest.approx(0.35)
    assert r.cr is False


def test_baseline_validity_and_offset() -> None:
    t = clock()
    blink_in_baseline = ramp(t, CS - 0.15, 20, 1.0, end=CS - 0.1)
    (r,) = score(blink_in_baseline)
    assert not r.baseline_valid and r.baseline_sd > 0.05
    half_closed = np.full(len(t), 0.5)
    (r,) = score(half_closed)
    assert not r.baseline_valid and r.baseline_fec == pytest.approx(0.5) and r.cr is False
    gaps = np.where(t < CS - 0.05, np.nan, 0.0)  # face lost for 150 of the 200 ms
    (r,) = score(gaps)
    assert not r.baseline_valid and r.baseline_valid_fraction == pytest.approx(0.25)


def test_short_crossing_is_not_a_cr() -> None:
    t = clock()
    fec = np.zeros(len(t))
    fec[550:552] = 0.5  # 2 frames (100-102 ms after CS) = 4 ms < cr_min_ms
    (r,) = score(fec)
    assert r.cr is False
    (r,) = score(fec, cr_min_ms=4.0)
    assert r.cr is True


@given(offset=st.floats(-0.2, 0.2), onset_ms=st.floats(70, 200), amp=st.floats(0.15, 1.0))
@settings(max_examples=40, deadline=None)
def test_cr_metrics_are_relative_to_baseline(offset: float, onset_ms: float, amp: float) -> None:
    """Adding a constant to FEC (a mis-set open level) changes no CR decision, latency or
    amplitude."""
    t = clock()
    fec = ramp(t, CS + onset_ms / 1000, 30, amp, end=US + 0.05)
    (a,) = score(fec)
    (b,) = score(fec + offset, baseline_max_fec=1.0)
    assert a.cr is True and b.cr is True
    # a frame: rounding at the threshold
    assert a.cr_onset_latency_ms == pytest.approx(b.cr_onset_latency_ms, abs=2.0)
    assert a.cr_peak_amplitude == pytest.approx(b.cr_peak_amplitude)
    assert onset_ms <= a.cr_onset_latency_ms <= onset_ms + 30 * 0.05 / amp + 2.1


def test_cs_alone_uses_the_session_isi_and_summary() -> None:
    t = clock(6.0)
    trials = (Trial(1, 1.0, 1.25), Trial(2, 3.0), Trial(3, 5.0, 5.25))
    fec = ramp(t, 3.15, 30, 0.5, end=3.3) + ramp(t, 1.15, 30, 0.8, end=1.3)
    rs = score_trials(trials, t, fec, TrialConfig(block_size=2))
    assert [r.cr for r in rs] == [True, True, False]
    assert [r.block for r in rs] == [1, 1, 2]
    assert math.isnan(rs[1].isi_ms) and math.isnan(rs[1].ur_amplitude)
    s = session_summary(rs)
    assert s["percent_cr"] == pytest.approx(200 / 3) and s["cr_trials"] == 2
    assert s["mean_cr_amplitude"] == pytest.approx(0.65)
    rows = trial_traces(trials, rs, t, fec, np.full(len(t), 0.3), TrialConfig())
    assert len(rows[0]) == len(TRACE_COLUMNS)
    first = [r for r in rows if r[0] == 1]
    assert first[0][1] == pytest.approx(-250) and first[-1][1] == pytest.approx(750)
    assert len(first) == 501


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"baseline_ms": 0}, "trials.baseline_ms"),
        ({"cr_threshold": 0}, "trials.cr_threshold"),
        ({"onset_threshold": 0.2}, "must be <= cr_threshold"),
        ({"block_size": 0}, "--block-size"),
        ({"min_valid_fraction": 1.5}, "min_valid_fraction"),
    ],
)
def test_trial_config_errors(kwargs: dict, needle: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=needle):
        TrialConfig(**kwargs)


def test_presets_carry_the_sections() -> None:
    cfg = config_from_dict(
        {"trials": {"cr_threshold": 0.2, "block_size": 5}, "closure": {"calibration_s": [1, 2]}}
    )
    assert cfg.trials.cr_threshold == 0.2 and cfg.closure.calibration_s == (1.0, 2.0)
    with pytest.raises(ConfigError, match="unknown key"):
        config_from_dict({"trials": {"cr_treshold": 0.2}})
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    assert load_preset(resolve_preset("cpu")).trials == TrialConfig()


# ------------------------------------------------------------------------------------------ end to
# end

CS_TIMES = (0.4, 1.4, 2.4)
ISI_S = 0.25


@pytest.fixture(scope="module")
def conditioning_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """3 s at 500 FPS, 3 trials: a full blink starting 100 ms before the US in trials 1-2 (CRs), and
    in trial 3 only the reflex to the puff (a UR 20 ms after the US)."""
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    d = tmp_path_factory.mktemp("conditioning")
    blinks = (
        BlinkSpec(CS_TIMES[0] + ISI_S - 0.1, 80, 40, 150),
        BlinkSpec(CS_TIMES[1] + ISI_S - 0.1, 80, 40, 150),
        BlinkSpec(CS_TIMES[2] + ISI_S + 0.02, 50, 30, 120),
    )
    video = d / "session.avi"
    write_recording(video, SynthConfig(duration_s=3.0, blinks=blinks, mjpeg_qscale=4, seed=2))
    trials = d / "trials.csv"
    trials.write_text(
        "trial,cs_onset_s,us_onset_s,cs_duration_ms,cs_type,us_type\n"
        + "".join(f"{k + 1},{cs},{cs + ISI_S},280,tone,puff\n" for k, cs in enumerate(CS_TIMES))
    )
    return video, trials


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_a_session_without_a_blink_still_writes_its_nwb_file(tmp_path: Path) -> None:
    """A recording where the eye never closes: ``--nwb`` writes the file with an empty blinks table
    (each column typed), no traceback, no partial file left."""
    pytest.importorskip("pynwb")
    from pynwb import NWBHDF5IO

    from eyeblink.lab.synth import SynthConfig, write_recording

    video = tmp_path / "open.avi"
    write_recording(video, SynthConfig(duration_s=1.0, blinks=(), mjpeg_qscale=4, seed=3))
    out = tmp_path / "out"
    proc = run_cli("process", video, "-o", out, "--workers", "1", "--no-progress", "--nwb")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(rows(out / "open.blinks.csv")) == 0
    assert not list(out.glob("*.partial.nwb"))
    with NWBHDF5IO(str(out / "open.nwb"), mode="r") as io:
        nwb = io.read()
        blinks = nwb.processing["behavior"]["blinks"]
        assert len(blinks) == 0
        assert {"peak_time", "duration_ms", "amplitude", "peak_closure", "complete"} <= set(
            blinks.colnames
        )
        assert blinks["complete"].data.dtype == np.bool_
        assert len(nwb.processing["behavior"]["EyelidTraces"]["ear"].data) == len(
            rows(out / "open.frames.csv")
        )


@pytest.mark.slow
def test_cli_conditioning_session(
    conditioning_recording: tuple[Path, Path], tmp_path: Path
) -> None:
    video, trials_csv = conditioning_recording
    out = tmp_path / "out"
    proc = run_cli(
        "process",
        video,
        "-o",
        out,
        "--workers",
        "1",
        "--no-progress",
        "--trials",
        trials_csv,
        "--plots",
        "--nwb",
        "--block-size",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 trials, 3 with a valid baseline, CR in 2 (67%)" in proc.stdout

    # frames.csv: the closure column, calibrated on the session (FEC ~0 open, ~1 at full closure)
    frames = rows(out / "session.frames.csv")
    assert len(frames) == 1500 and list(frames[0])[-1] == "closure"
    fec = np.array([float(r["closure"]) for r in frames])
    assert np.isfinite(fec).all()
    assert abs(np.median(fec[:250])) < 0.05 and np.std(fec[:250]) < 0.06
    for cs in CS_TIMES:
        peak = fec[round((cs + ISI_S) * 500) - 40 : round((cs + ISI_S) * 500) + 120].max()
        assert 0.85 < peak < 1.25
    summary = json.loads((out / "session.summary.json").read_text())
    assert summary["closure"]["method"] == "responses" and not summary["closure"]["provisional"]
    assert 0.6 < summary["closure"]["full_amplitude"] < 0.85
    assert summary["trials"]["percent_cr"] == pytest.approx(200 / 3)
    assert 0.8 < summary["trials"]["mean_cr_amplitude"] < 1.3
    assert summary["settings"]["trials"]["block_size"] == 1

    # trials.csv: CR in trials 1 and 2 with onset ~150 ms after CS (the blink starts 100 ms before
    # the US)
    tr = rows(out / "session.trials.csv")
    assert list(tr[0]) == list(TRIAL_COLUMNS)
    assert [r["cr"] for r in tr] == ["1", "1", "0"] and all(r["baseline_valid"] == "1" for r in tr)
    for r in tr[:2]:
        assert 145 <= float(r["cr_onset_latency_ms"]) <= 185
        assert float(r["cr_peak_amplitude"]) > 0.8 and float(r["fec_at_us"]) > 0.7
    assert tr[2]["cr_onset_latency_ms"] == "" and float(tr[2]["cr_peak_amplitude"]) < 0.2
    assert float(tr[2]["fec_at_us"]) < 0.15 and float(tr[2]["ur_amplitude"]) > 0.8
    assert [r["block"] for r in tr] == ["1", "2", "3"]

    # traces.csv: long format aligned to CS onset
    traces = rows(out / "session.traces.csv")
    assert list(traces[0]) == list(TRACE_COLUMNS)
    t1 = [r for r in traces if r["trial"] == "1"]
    assert float(t1[0]["time_from_cs_ms"]) == pytest.approx(-250, abs=2)
    assert float(t1[-1]["time_from_cs_ms"]) == pytest.approx(750, abs=2)
    at_cs = next(r for r in t1 if abs(float(r["time_from_cs_ms"])) < 1)
    assert int(at_cs["frame"]) == 200 and at_cs["closure"] == frames[200]["closure"]

    # plots: real PNGs of a sensible size
    for name in ("trace", "heatmap", "cr_blocks"):
        png = out / f"session.{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000

    # NWB: read back with pynwb
    from pynwb import NWBHDF5IO

    with NWBHDF5IO(str(out / "session.nwb"), mode="r") as io:
        nwb = io.read()
        traces_nwb = nwb.processing["behavior"]["EyelidTraces"]
        closure = traces_nwb["closure"]
        ts = np.asarray(closure.timestamps[:])
        np.testing.assert_allclose(ts, [float(r["timestamp_s"]) for r in frames], atol=1e-9)
        np.testing.assert_allclose(closure.data[:], fec, atol=1e-6)
        np.testing.assert_allclose(
            traces_nwb["ear_left"].data[:], [float(r["ear_left"]) for r in frames], atol=1e-6
        )
        blinks = nwb.processing["behavior"]["blinks"].to_dataframe()
        assert len(blinks) == len(rows(out / "session.blinks.csv")) == 3
        trials = nwb.trials.to_dataframe()
        assert list(trials["cr"]) == [True, True, False]
        np.testing.assert_allclose(trials["cs_time"], CS_TIMES)
        np.testing.assert_allclose(
            trials["cr_onset_latency_ms"][:2], [float(r["cr_onset_latency_ms"]) for r in tr[:2]]
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--trials", "MISSING"), "trials file not found"),
        (("--trials", "BAD"), "is before CS onset"),
        (("--sync-column", "ttl"), "--sync-column needs --trials"),
        (("--calibration", "5:1"), "START_S < END_S"),
    ],
)
def test_cli_rejects_bad_conditioning_options(
    conditioning_recording: tuple[Path, Path], tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    video, _ = conditioning_recording
    bad = tmp_path / "bad.csv"
    bad.write_text("cs_onset_s,us_onset_s\n1.0,0.5\n")
    args = tuple(
        str(bad) if a == "BAD" else str(tmp_path / "none.csv") if a == "MISSING" else a
        for a in args
    )
    proc = run_cli(
        "process", video, "-o", tmp_path / "out", "--workers", "1", "--no-progress", *args
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("INFO:")]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert needle in lines[-1], proc.stderr
    # argparse's own errors come with the usage
    assert len(lines) == 1 or lines[0].startswith("usage:")
    assert not (tmp_path / "out" / "session.frames.csv").exists()  # checked before the first frame
