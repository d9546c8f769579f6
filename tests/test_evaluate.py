"""Event-level evaluation: ``.tag`` parsing, one-to-one matching, scores, and a run on real ZJU
clips."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import zju_subset

from eyeblink.errors import DatasetError
from eyeblink.lab.evaluate import Score, Span, find_pairs, group_of, match_events, read_tag, within

HEADER = """#This file was created using the Eyeblink annotation tool
#annotator: test
#video length: 00:00:05
#start
"""


def tag_text(rows: list[tuple[int, int]], *, header: str = HEADER, end: bool = True) -> str:
    """A .tag body: ``(frameID, blinkID)`` rows, the other 17 columns filled as the real files
    do."""
    lines = [f"{f}:{b}:X:X:X:X:X:100:60:140:140:120:100:130:100:160:100:170:100" for f, b in rows]
    return header + "\n".join(lines) + ("\n#end\n" if end else "\n")


def write_tag(
    tmp_path: Path, rows: list[tuple[int, int]], name: str = "clip.tag", **kw: object
) -> Path:
    p = tmp_path / name
    p.write_text(tag_text(rows, **kw), encoding="utf-8")  # type: ignore[arg-type]
    return p


# --------------------------------------------------------------------------------------------- .tag
# parsing


def test_read_tag_spans_and_header(tmp_path: Path) -> None:
    rows = (
        [(f, -1) for f in range(3, 10)]
        + [(f, 1) for f in range(10, 15)]
        + [(f, -1) for f in range(15, 30)]
        + [(f, 2) for f in range(30, 33)]
        + [(33, -1)]
    )
    tag = read_tag(write_tag(tmp_path, rows))
    assert tag.blinks == (Span(10, 14), Span(30, 32))
    assert tag.frame_ids[0] == 3 and tag.frame_ids[-1] == 33
    assert tag.annotated == Span(3, 33)
    assert tag.header["annotator"] == "test"


def test_read_tag_stops_at_end_and_ignores_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "c.tag"
    p.write_text(
        tag_text([(0, -1), (1, 5), (2, 5)], end=False) + "\n\n#end\n99:7:X\n", encoding="utf-8"
    )
    tag = read_tag(p)
    assert tag.blinks == (Span(1, 2),)
    assert 99 not in tag.frame_ids


def test_read_tag_blink_ids_need_not_be_contiguous_or_ordered(tmp_path: Path) -> None:
    rows = [(0, -1), (1, 7), (2, 7), (3, -1), (4, 3), (5, -1)]
    assert read_tag(write_tag(tmp_path, rows)).blinks == (Span(1, 2), Span(4, 4))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (HEADER + "#end\n", "no annotated frames"),
        (HEADER + "abc:def:X\n#end\n", "expected 'frameID : blinkID"),
        (HEADER + "12\n#end\n", "expected 'frameID : blinkID"),
        ("no start marker\n1:-1:X\n", "no annotated frames"),
    ],
)
def test_read_tag_errors(tmp_path: Path, body: str, message: str) -> None:
    p = tmp_path / "bad.tag"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        read_tag(p)


def test_read_tag_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read annotation"):
        read_tag(tmp_path / "nope.tag")


# ---------------------------------------------------------------------------------------------
# matching


def S(*pairs: tuple[int, int]) -> list[Span]:
    return [Span(a, b) for a, b in pairs]


@pytest.mark.parametrize(
    ("truth", "detected", "tp", "fp", "fn", "onsets"),
    [
        (S(), S(), 0, 0, 0, ()),
        (S((10, 20)), S(), 0, 0, 1, ()),
        (S(), S((10, 20)), 0, 1, 0, ()),
        (S((10, 20)), S((12, 18)), 1, 0, 0, (2,)),
        (S((10, 20)), S((21, 30)), 0, 1, 1, ()),  # touching is not overlapping
        (S((10, 20)), S((20, 30)), 1, 0, 0, (10,)),  # one shared frame is
        (S((10, 20)), S((5, 12), (15, 25)), 1, 1, 0, (5,)),  # one-to-one: the larger overlap wins
        # a merged double blink is one hit, one miss
        (S((10, 20), (21, 30)), S((10, 30)), 1, 0, 1, (0,)),
        (S((10, 20), (22, 30)), S((15, 24)), 1, 0, 1, (5,)),  # overlap 6 vs 3: the first truth
        (S((0, 5), (10, 15), (20, 25)), S((1, 4), (11, 14), (21, 24)), 3, 0, 0, (1, 1, 1)),
    ],
)
def test_match_events(
    truth: list[Span], detected: list[Span], tp: int, fp: int, fn: int, onsets: tuple[int, ...]
) -> None:
    sc = match_events(truth, detected)
    assert (sc.tp, sc.fp, sc.fn) == (tp, fp, fn)
    assert sorted(sc.onset_errors) == sorted(onsets)


def test_match_events_largest_overlap_first_not_greedy_in_order() -> None:
    # greedy in truth order would give truth 0 the detection 0 (overlap 2) and leave truth 1
    # unmatched
    truth = S((0, 10), (9, 30))
    detected = S((9, 25), (0, 8))
    sc = match_events(truth, detected)
    assert (sc.tp, sc.fp, sc.fn) == (2, 0, 0)


@pytest.mark.parametrize(
    ("tp", "fp", "fn", "p", "r", "f1"),
    [
        (10, 0, 0, 1.0, 1.0, 1.0),
        (8, 2, 2, 0.8, 0.8, 0.8),
        (1, 1, 0, 0.5, 1.0, 2 / 3),
        (0, 3, 0, 0.0, math.nan, 0.0),
        (0, 0, 3, math.nan, 0.0, 0.0),
        (0, 0, 0, math.nan, math.nan, 1.0),  # nothing to find, nothing found
    ],
)
def test_scores(tp: int, fp: int, fn: int, p: float, r: float, f1: float) -> None:
    sc = Score(tp, fp, fn, ())
    for got, want in ((sc.precision, p), (sc.recall, r), (sc.f1, f1)):
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)


def test_strict_counts_the_unscored_detections_as_false_positives() -> None:
    sc = Score(9, 1, 2, (0, 1))
    strict = sc.strict(2)
    assert (strict.tp, strict.fp, strict.fn) == (9, 3, 2) and strict.onset_errors == (0, 1)
    assert strict.precision == pytest.approx(0.75) and strict.f1 < sc.f1 and sc.strict(0) == sc


@pytest.mark.slow
def test_eval_reports_both_conventions_on_a_rendered_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording with two planted blinks whose ``.tag`` annotates only the frames of the first:
    the second detection is unscored (F1 1.0) in the default convention and a false positive in the
    strict one."""
    from eyeblink.config import load_preset
    from eyeblink.lab.evaluate import run_eval
    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording
    from eyeblink.presets import resolve_preset

    ds = tmp_path / "ds"
    ds.mkdir()
    truth = write_recording(
        ds / "000001M_FNN.avi",
        SynthConfig(duration_s=2.0, fps=100.0, blinks=(BlinkSpec(0.5), BlinkSpec(1.4)), seed=3),
    )
    planted = [(b.onset_frame, b.end_frame) for b in truth.blinks]
    first_end = planted[0][1]
    rows = [(f, 1 if planted[0][0] <= f <= first_end else -1) for f in range(0, first_end + 20)]
    write_tag(ds, rows, name="000001M_FNN.tag")
    report = tmp_path / "scores.json"
    assert (
        run_eval(ds, load_preset(resolve_preset("cpu")), outdir=tmp_path / "out", json_path=report)
        == 0
    )
    scores = json.loads(report.read_text())
    assert scores["unscored"] == 1
    assert (scores["overall"]["tp"], scores["overall"]["fp"], scores["overall"]["f1"]) == (
        1,
        0,
        1.0,
    )
    strict = scores["strict"]["overall"]
    assert (strict["tp"], strict["fp"], strict["fn"]) == (1, 1, 0) and strict[
        "f1"
    ] == pytest.approx(2 / 3)
    assert scores["strict"]["groups"]["FNN"]["fp"] == 1
    assert (
        "strict (the unscored detections counted as false positives): OVERALL P 0.500 R 1.000 F1 "
        "0.667" in capsys.readouterr().out
    )


def test_score_sum_and_onsets() -> None:
    a, b = Score(1, 0, 1, (2,)), Score(2, 1, 0, (-1, 0))
    s = a + b
    assert (s.tp, s.fp, s.fn) == (3, 1, 1)
    assert s.mean_onset == pytest.approx(1 / 3) and s.mean_abs_onset == pytest.approx(1.0)
    assert math.isnan(Score(0, 0, 0, ()).mean_onset)
    assert set(s.as_dict()) >= {"tp", "fp", "fn", "precision", "recall", "f1"}


@pytest.mark.parametrize(
    ("spans", "kept", "outside"),
    [
        (S((0, 5)), S(), 1),  # entirely before the first annotated frame
        (S((5, 12)), S((5, 12)), 0),  # reaches into the annotated range: scored
        (S((50, 60)), S((50, 60)), 0),
        (S((98, 99), (101, 120)), S((98, 99)), 1),
    ],
)
def test_within_annotated_range(spans: list[Span], kept: list[Span], outside: int) -> None:
    assert within(spans, Span(10, 100)) == (kept, outside)


@pytest.mark.parametrize(("a", "b"), [(5, 4), (0, -1)])
def test_span_rejects_reversed(a: int, b: int) -> None:
    with pytest.raises(ValueError, match="end"):
        Span(a, b)


@pytest.mark.parametrize(
    ("stem", "group"), [("000001M_FBN", "FBN"), ("000019F_UNN", "UNN"), ("clip", "all")]
)
def test_group_of(stem: str, group: str) -> None:
    assert group_of(Path(f"/x/{stem}.avi")) == group


def test_find_pairs(tmp_path: Path) -> None:
    (tmp_path / "a.avi").write_bytes(b"")
    write_tag(tmp_path, [(0, -1)], name="a.tag")
    write_tag(tmp_path, [(0, -1)], name="orphan.tag")
    assert find_pairs(tmp_path) == [(tmp_path / "a.avi", tmp_path / "a.tag")]
    with pytest.raises(DatasetError, match="dataset folder not found"):
        find_pairs(tmp_path / "a.avi")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match=r"no <video> \+ <video>\.tag pairs"):
        find_pairs(empty)


# --------------------------------------------------------------------------------------------- real
# data

# plain, looking up (appearance cue), blink at frame 0
ZJU_CLIPS = ("000001M_FBN", "000007M_UNN", "000011M_FTN")


def test_eval_on_zju_clips(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``eyeblink eval`` on three real ZJU clips (symlinked, never copied), with the CLI's
    default preset."""
    from eyeblink.config import load_preset
    from eyeblink.lab.evaluate import run_eval
    from eyeblink.presets import resolve_preset

    ds = zju_subset(data_dir, tmp_path, ZJU_CLIPS)
    report = tmp_path / "scores.json"
    assert (
        run_eval(ds, load_preset(resolve_preset("cpu")), outdir=tmp_path / "out", json_path=report)
        == 0
    )
    scores = json.loads(report.read_text())
    overall = scores["overall"]
    truth = sum(read_tag(ds / f"{c}.tag").blinks.__len__() for c in ZJU_CLIPS)
    assert overall["tp"] + overall["fn"] == truth == 10
    # 8/10 found, none false, with the cpu preset (face mesh + iris lids): the two misses are the
    # shallow blinks (~15% closure) of the looking-up clip 000007M_UNN, which dlib's 68 points found
    assert overall["recall"] >= 0.8 and overall["precision"] >= 0.9
    assert abs(overall["onset_error_mean_abs_frames"]) <= 1.0
    assert "OVERALL" in capsys.readouterr().out
    assert (tmp_path / "out" / "000007M_UNN.blinks.csv").is_file()
