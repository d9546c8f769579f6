"""Corrections made by eye in the report: ``<stem>.corrections.json``, and what they change in a
session.

A researcher reviews a session in its report (``eyeblink report``): accepts, rejects or retimes each
automatic blink, adds the ones the detector missed (or a prolonged closure), excludes spans (face
turned away, an experimenter in view) and, in conditioning sessions, whole trials. The page saves
these decisions as ``<stem>.corrections.json`` (a download the user puts beside the session, or
written there through the browser's folder picker): the only file the browser writes, under a name
no run writes.

Corrections are data. ``eyeblink report``, ``eyeblink process`` (a rerun) and :func:`eyeblink.load`
read the file and apply it (:func:`apply_session`):

* ``<stem>.blinks.csv`` keeps the automatic rows that were not rejected, retimes the corrected ones
  and adds the added ones, numbered again in time order; its ``source`` column says which is which
  (``auto``: not reviewed, ``accepted``, ``corrected``: retimed, ``added``). Rejected blinks and
  every event that overlaps an excluded span leave the file, the counts and the rates (a rate's
  minutes leave out the excluded time).
* The detector's own rows are kept in ``<stem>.blinks_auto.csv`` (corrections are always applied to
  them, so applying twice changes nothing); ``eyeblink agree`` compares the two.
* ``<stem>.trials.csv`` gains an ``excluded`` column (1: excluded by hand, or the trial's CS-US
  interval overlaps an excluded span); the summary's trial figures (percent CR, ...) count the
  others only.
* ``<stem>.summary.json`` gets a ``corrections`` section: who and when, how many blinks were
  accepted, rejected, corrected and added, and the decisions that no longer match a detected blink.

A decision is tied to the automatic blink it was made on by that blink's frames (``start_frame``,
``end_frame``; its times are saved too, for readers), not its number: a rerun with other settings
keeps each decision whose blink is still detected (the new blink overlaps the old one by at least
:data:`MATCH_IOU` of their union) and lists the others in ``unmatched`` (they are kept in the file).
A retimed or added event names its first and last frame (``new_start_frame``/``new_end_frame``,
``start_frame``/``end_frame``): applying it puts exactly those frames in ``blinks.csv``. Files
without frame numbers (written by hand, or by an older report) are placed by their times, each on
the nearest frame. Every row's ``duration_ms`` follows one rule: end - start + one frame interval
(frames are inclusive), the detector's rows and the reviewer's alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, one_line
from eyeblink.outputs.paths import read_utf8

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FORMAT",
    "MATCH_IOU",
    "SOURCES",
    "Applied",
    "Corrections",
    "apply_blinks",
    "apply_session",
    "auto_blinks_path",
    "corrections_path",
    "csv_text",
    "read_corrections",
]

#: the ``format`` field that marks a corrections file
FORMAT = "eyeblink.corrections"
#: the version of that format this eyeblink reads and the report writes
FORMAT_VERSION = 1
#: the ``source`` column of a corrected blinks.csv
SOURCES = ("auto", "accepted", "corrected", "added")
#: a decision stays with a detected blink that overlaps its own blink by this fraction of their
#: union
MATCH_IOU = 0.3
_DECISIONS = ("accept", "reject", "retime")
_KINDS = ("blink", "prolonged_closure")


class CorrectionsError(ConfigError):
    """A corrections file that cannot be read or does not belong to the session."""


@dataclass(frozen=True)
class Decision:
    """What the reviewer decided about one automatic blink, which is known by its frames and times
    (``start_frame``/``end_frame``, ``start_s``/``end_s``: the automatic blink's, seconds on the
    session's clock); ``retime``: the new first and last frame (and their times)."""

    start_s: float
    end_s: float
    decision: str
    new_start_s: float | None = None
    new_end_s: float | None = None
    start_frame: int | None = None
    end_frame: int | None = None
    new_start_frame: int | None = None
    new_end_frame: int | None = None


@dataclass(frozen=True)
class Span:
    """An added event (``kind`` blink or prolonged_closure) or an excluded span (``reason``), in
    seconds; an added event also by its first and last frame when the file names them."""

    start_s: float
    end_s: float
    kind: str = "blink"
    reason: str = ""
    start_frame: int | None = None
    end_frame: int | None = None


@dataclass(frozen=True)
class Corrections:
    """One ``<stem>.corrections.json``, checked (see :func:`read_corrections`)."""

    stem: str
    decisions: tuple[Decision, ...] = ()
    added: tuple[Span, ...] = ()
    excluded: tuple[Span, ...] = ()
    excluded_trials: tuple[int, ...] = ()
    reviewer: str = ""
    saved_at: str = ""
    eyeblink_version: str = ""
    path: Path | None = None


def corrections_path(outdir: str | Path, stem: str) -> Path:
    """Where a session's corrections live: ``OUTDIR/<stem>.corrections.json``."""
    return Path(outdir) / f"{stem}.corrections.json"


def auto_blinks_path(outdir: str | Path, stem: str) -> Path:
    """The detector's own blink rows, kept once corrections are applied:
    ``OUTDIR/<stem>.blinks_auto.csv``."""
    return Path(outdir) / f"{stem}.blinks_auto.csv"


# ------------------------------------------------------------------------------------------ reading


def _bad(path: Path, problem: str) -> CorrectionsError:
    return CorrectionsError(
        f"{path} {problem}; save the corrections again from the session's report "
        "(eyeblink report OUTDIR/<stem>), or move the file away"
    )


def _time(path: Path, where: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _bad(path, f"has {where} = {str(v)[:40]!r}, not a time in seconds")
    return float(v)


def _frame(path: Path, where: str, v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
        raise _bad(path, f"has {where} = {str(v)[:40]!r}, not a frame number")
    return int(v)


def _frames(
    path: Path, where: str, item: dict[str, Any], a: str, b: str
) -> tuple[int | None, int | None]:
    """The pair of frame numbers ``item[a]``, ``item[b]`` (both or neither), checked."""
    fa, fb = _frame(path, f"{where}.{a}", item.get(a)), _frame(path, f"{where}.{b}", item.get(b))
    if (fa is None) != (fb is None):
        raise _bad(
            path,
            f"has {where} with {a if fa is not None else b} but not {b if fa is not None else a}",
        )
    if fa is not None and fb is not None and fb < fa:
        raise _bad(path, f"has {where} ending at frame {fb}, before its first frame {fa}")
    return fa, fb


def _span(path: Path, where: str, item: Any, *, kinds: Sequence[str] = ()) -> Span:
    if not isinstance(item, dict):
        raise _bad(path, f"has {where} = {str(item)[:40]!r}, not an object with start_s and end_s")
    a, b = (
        _time(path, f"{where}.start_s", item.get("start_s")),
        _time(path, f"{where}.end_s", item.get("end_s")),
    )
    if b < a:
        raise _bad(path, f"has {where} ending ({b:g} s) before it starts ({a:g} s)")
    kind = item.get("kind", "blink")
    if kinds and kind not in kinds:
        raise _bad(path, f"has {where}.kind = {str(kind)[:40]!r}, not one of {', '.join(kinds)}")
    reason = item.get("reason", "")
    fa, fb = _frames(path, where, item, "start_frame", "end_frame")
    return Span(a, b, str(kind), str(reason) if reason is not None else "", fa, fb)


def _list(path: Path, data: dict[str, Any], key: str) -> list[Any]:
    v = data.get(key, [])
    if not isinstance(v, list):
        raise _bad(path, f"has {key} = {str(v)[:40]!r}, not a list")
    return v


def parse_corrections(data: Any, path: Path, stem: str | None = None) -> Corrections:
    """A corrections object (as JSON-decoded) -> :class:`Corrections`, every field checked;
    ``stem``: the session it must belong to. Raises :class:`CorrectionsError` (one line naming the
    file and the fix)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise _bad(
            path,
            f"is not an eyeblink corrections file (its format is {str(found)[:40]!r}, "
            f"not {FORMAT!r})",
        )
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise _bad(
            path,
            f"has format_version {version!r}; this eyeblink reads version {FORMAT_VERSION}: "
            "update eyeblink or save again",
        )
    file_stem = data.get("stem")
    if stem is not None and file_stem != stem:
        raise _bad(path, f"holds corrections of session {str(file_stem)[:60]!r}, not of {stem!r}")
    decisions = []
    for i, d in enumerate(_list(path, data, "blinks")):
        where = f"blinks[{i}]"
        span = _span(path, where, d)
        if d.get("decision") not in _DECISIONS:
            raise _bad(
                path,
                f"has {where}.decision = {str(d.get('decision'))[:40]!r}, not one of "
                f"{', '.join(_DECISIONS)}",
            )
        new_a = new_b = None
        new_fa = new_fb = None
        if d["decision"] == "retime":
            new_a = _time(path, f"{where}.new_start_s", d.get("new_start_s"))
            new_b = _time(path, f"{where}.new_end_s", d.get("new_end_s"))
            if new_b < new_a:
                raise _bad(
                    path, f"has {where} retimed to end ({new_b:g} s) before it starts ({new_a:g} s)"
                )
            new_fa, new_fb = _frames(path, where, d, "new_start_frame", "new_end_frame")
        decisions.append(
            Decision(
                span.start_s,
                span.end_s,
                d["decision"],
                new_a,
                new_b,
                span.start_frame,
                span.end_frame,
                new_fa,
                new_fb,
            )
        )
    added = tuple(
        _span(path, f"added[{i}]", s, kinds=_KINDS)
        for i, s in enumerate(_list(path, data, "added"))
    )
    excluded = tuple(
        _span(path, f"excluded[{i}]", s) for i, s in enumerate(_list(path, data, "excluded"))
    )
    trials = []
    for i, k in enumerate(_list(path, data, "excluded_trials")):
        if isinstance(k, bool) or not isinstance(k, int):
            raise _bad(path, f"has excluded_trials[{i}] = {str(k)[:40]!r}, not a trial number")
        trials.append(k)
    return Corrections(
        str(file_stem),
        tuple(decisions),
        added,
        excluded,
        tuple(sorted(set(trials))),
        str(data.get("reviewer") or ""),
        str(data.get("saved_at") or ""),
        str(data.get("eyeblink_version") or ""),
        path,
    )


def read_corrections(path: str | Path, stem: str | None = None) -> Corrections:
    """Read and check ``<stem>.corrections.json``: a file that is not JSON, not a corrections file,
    of another session or with a malformed entry is one :class:`CorrectionsError` line naming it and
    the fix."""
    p = Path(path)
    text = read_utf8(p, _bad, CorrectionsError)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _bad(p, f"is not valid JSON ({one_line(exc)})") from None
    return parse_corrections(data, p, stem)


def as_json(c: Corrections) -> dict[str, Any]:
    """The file's content for ``c`` (what the report saves)."""

    def frames(**kw: int | None) -> dict[str, int]:
        return {k: v for k, v in kw.items() if v is not None}

    def span(s: Span, extra: str) -> dict[str, Any]:
        return {
            "start_s": s.start_s,
            "end_s": s.end_s,
            **frames(start_frame=s.start_frame, end_frame=s.end_frame),
            extra: s.kind if extra == "kind" else s.reason,
        }

    blinks = []
    for d in c.decisions:
        item: dict[str, Any] = {
            "start_s": d.start_s,
            "end_s": d.end_s,
            **frames(start_frame=d.start_frame, end_frame=d.end_frame),
            "decision": d.decision,
        }
        if d.decision == "retime":
            item.update(
                new_start_s=d.new_start_s,
                new_end_s=d.new_end_s,
                **frames(new_start_frame=d.new_start_frame, new_end_frame=d.new_end_frame),
            )
        blinks.append(item)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "stem": c.stem,
        "reviewer": c.reviewer,
        "saved_at": c.saved_at,
        "eyeblink_version": c.eyeblink_version,
        "blinks": blinks,
        "added": [span(s, "kind") for s in c.added],
        "excluded": [span(s, "reason") for s in c.excluded],
        "excluded_trials": list(c.excluded_trials),
    }


# ------------------------------------------------------------------------------------------
# applying


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _iou(a0: float, a1: float, b0: float, b1: float) -> float:
    inter = min(a1, b1) - max(a0, b0)
    union = max(a1, b1) - min(a0, b0)
    if union <= 0:  # two zero-length events at one time
        return 1.0 if a0 == b0 else 0.0
    return max(0.0, inter) / union


def _overlaps(a0: float, a1: float, b0: float, b1: float) -> bool:
    return a0 <= b1 and b0 <= a1


def _row_frames(r: dict[str, Any]) -> tuple[float, float]:
    return _f(r.get("start_frame")), _f(r.get("end_frame"))


def _overlap(d: Decision, r: dict[str, Any]) -> float:
    """How much a decision's blink and a detected row overlap (of their union): by frames
    (inclusive) when both name them, else by times."""
    fa, fb = _row_frames(r)
    if (
        d.start_frame is not None
        and d.end_frame is not None
        and math.isfinite(fa)
        and math.isfinite(fb)
    ):
        inter = min(d.end_frame, fb) - max(d.start_frame, fa) + 1
        return max(0.0, inter) / (max(d.end_frame, fb) - min(d.start_frame, fa) + 1)
    return _iou(d.start_s, d.end_s, _f(r.get("start_s")), _f(r.get("end_s")))


def match_decisions(
    auto: Sequence[dict[str, str]], decisions: Sequence[Decision]
) -> tuple[dict[int, Decision], list[Decision]]:
    """Each decision to the automatic row (index) it still belongs to (greedy by overlap, each row
    once), and the decisions no detected blink matches any more."""
    pairs = []
    for j, d in enumerate(decisions):
        for i, r in enumerate(auto):
            iou = _overlap(d, r)
            if iou >= MATCH_IOU:
                pairs.append((-iou, j, i))
    out: dict[int, Decision] = {}
    used: set[int] = set()
    for _, j, i in sorted(pairs):
        if j in used or i in out:
            continue
        out[i] = decisions[j]
        used.add(j)
    return out, [d for j, d in enumerate(decisions) if j not in used]


@dataclass(frozen=True)
class Frames:
    """What measuring a retimed or added event needs of frames.csv."""

    frame: np.ndarray
    t: np.ndarray
    ear: np.ndarray
    baseline: np.ndarray

    @cached_property
    def interval(self) -> float:
        return frame_interval(self.t)


def frame_interval(t: np.ndarray) -> float:
    """The session's frame interval: the median step of its timestamps (NaN with fewer than two)."""
    import numpy as np

    t = t[np.isfinite(t)]
    return float(np.median(np.diff(t))) if len(t) > 1 else math.nan


def _rows_of(
    fr: Frames, a: float, b: float, fa: int | None, fb: int | None
) -> tuple[int, int] | None:
    """The frames.csv rows of an event's first and last frame: by frame number when the decision
    names them, else by time, each on the nearest frame (half a frame interval either way)."""
    import numpy as np

    if fa is not None and fb is not None:
        i0 = int(np.searchsorted(fr.frame, fa))
        i1 = int(np.searchsorted(fr.frame, fb, side="right")) - 1
        ok = 0 <= i0 <= i1 < len(fr.frame)
        return (i0, i1) if ok else None
    half = 0.5 * fr.interval if math.isfinite(fr.interval) else 1e-9
    idx = np.flatnonzero((fr.t >= a - half) & (fr.t <= b + half))
    if not idx.size:
        return None
    return int(idx[0]), int(idx[-1])


def _measure(
    row: dict[str, Any],
    fr: Frames | None,
    a: float,
    b: float,
    fa: int | None = None,
    fb: int | None = None,
) -> dict[str, Any]:
    """``row`` with the frames, times and measures of the event [a, b] (first and last frame ``fa``,
    ``fb`` when known) recomputed; the measures this cannot recompute (per-eye onsets, velocities)
    left empty. The duration follows the detector's rule: end - start + one frame interval."""
    import numpy as np

    from eyeblink.signals.blinks import BLINK_COLUMNS

    keep = {"blink", "kind", "cue"}
    out: dict[str, Any] = {c: row.get(c, "") if c in keep else "" for c in BLINK_COLUMNS}
    out.update(start_s=a, end_s=b, duration_ms=(b - a) * 1000, complete=1, partial=0)
    if fa is not None and fb is not None:
        out.update(start_frame=fa, end_frame=fb)
    rows = _rows_of(fr, a, b, fa, fb) if fr is not None and len(fr.t) else None
    if fr is not None and rows is not None:
        i0, i1 = rows
        step = fr.interval if math.isfinite(fr.interval) else 0.0
        out.update(
            start_frame=int(fr.frame[i0]),
            end_frame=int(fr.frame[i1]),
            start_s=float(fr.t[i0]),
            end_s=float(fr.t[i1]),
            duration_ms=(float(fr.t[i1] - fr.t[i0]) + step) * 1000,
        )
        e = fr.ear[i0 : i1 + 1]
        if np.isfinite(e).any():
            k = i0 + int(np.nanargmin(e))
            base = _baseline_at(fr.baseline, i0)
            out.update(peak_frame=int(fr.frame[k]), peak_s=float(fr.t[k]), min_ear=float(fr.ear[k]))
            if math.isfinite(base) and base > 0:
                out.update(baseline_ear=base, amplitude=1 - float(fr.ear[k]) / base)
        else:
            out["complete"] = 0
    return out


@dataclass(frozen=True)
class Applied:
    """Corrections applied to a session's automatic blink rows."""

    # blinks.csv rows (BLINK_COLUMNS + source), in time order, numbered 1..n
    rows: list[dict[str, Any]]
    counts: dict[str, int]  # accepted, rejected, corrected, added, excluded_blinks, unreviewed, ...
    unmatched: list[Decision]
    excluded: tuple[Span, ...]
    excluded_trials: tuple[int, ...]


def apply_blinks(
    auto: Sequence[dict[str, Any]], c: Corrections, frames: Frames | None = None
) -> Applied:
    """The corrected blink rows of ``auto`` (the detector's rows, as read from blinks.csv) under
    ``c``."""
    matched, unmatched = match_decisions(auto, c.decisions)
    counts = dict.fromkeys(
        (
            "accepted",
            "rejected",
            "corrected",
            "added",
            "unreviewed",
            "excluded_blinks",
            "replaced_by_added",
        ),
        0,
    )
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(auto):
        d = matched.get(i)
        a, b = _f(r.get("start_s")), _f(r.get("end_s"))
        if any(_overlaps(a, b, s.start_s, s.end_s) for s in c.added):
            counts["replaced_by_added"] += 1
            continue
        if d is not None and d.decision == "reject":
            counts["rejected"] += 1
            continue
        if d is not None and d.decision == "retime":
            assert d.new_start_s is not None and d.new_end_s is not None
            row = _measure(
                r, frames, d.new_start_s, d.new_end_s, d.new_start_frame, d.new_end_frame
            )
            source = "corrected"
        else:
            row, source = dict(r), "accepted" if d is not None else "auto"
        rows.append({**row, "source": source})
    for s in c.added:
        rows.append(
            {
                **_measure(
                    {"kind": s.kind, "cue": ""},
                    frames,
                    s.start_s,
                    s.end_s,
                    s.start_frame,
                    s.end_frame,
                ),
                "source": "added",
            }
        )
    kept = []
    for r in rows:
        a, b = _f(r["start_s"]), _f(r["end_s"])
        if any(_overlaps(a, b, s.start_s, s.end_s) for s in c.excluded):
            counts["excluded_blinks"] += 1
            continue
        kept.append(r)
    kept.sort(key=lambda r: _f(r["start_s"]))
    for k, r in enumerate(kept):
        r["blink"] = k + 1
        counts[
            {
                "auto": "unreviewed",
                "accepted": "accepted",
                "corrected": "corrected",
                "added": "added",
            }[r["source"]]
        ] += 1
    return Applied(kept, counts, unmatched, c.excluded, c.excluded_trials)


def excluded_time(spans: Sequence[Span], t0: float, t1: float) -> float:
    """Seconds of [t0, t1] inside the union of ``spans``."""
    total, end = 0.0, -math.inf
    for s in sorted(spans, key=lambda s: s.start_s):
        a, b = max(s.start_s, t0, end), min(s.end_s, t1)
        if b > a:
            total += b - a
        end = max(end, min(s.end_s, t1))
    return total


def trial_excluded(row: dict[str, Any], applied: Applied) -> bool:
    """A trial leaves the scores when excluded by hand or when its CS-US interval overlaps an
    excluded span."""
    try:
        number = int(float(row.get("trial", "")))
    except ValueError:
        number = None
    if number is not None and number in applied.excluded_trials:
        return True
    cs, us = _f(row.get("cs_onset_s")), _f(row.get("us_onset_s"))
    if not math.isfinite(cs):
        return False
    end = us if math.isfinite(us) else cs
    return any(_overlaps(cs, end, s.start_s, s.end_s) for s in applied.excluded)


# ------------------------------------------------------------------------------------------ a
# session's files


@dataclass
class AppliedSession:
    """A session's tables after its corrections: what :func:`apply_session` wrote (or would
    write)."""

    blink_header: list[str]
    blinks: list[dict[str, Any]]
    trial_header: list[str]
    trials: list[dict[str, Any]]
    summary: dict[str, Any]
    auto_blinks: list[dict[str, str]] = field(default_factory=list)
    applied: Applied | None = None


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    import csv

    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        rows = list(reader)
    if not rows:
        return [], []
    header = rows[0]
    return header, [dict(zip(header, r, strict=False)) for r in rows[1:] if len(r) == len(header)]


def csv_text(header: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    import csv
    import io

    from eyeblink.outputs.export import _cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(
            [_cell(v) if not isinstance(v, str) else v for v in (r.get(c, "") for c in header)]
        )
    return buf.getvalue()


def read_frames(path: Path) -> Frames:
    """frame, timestamp_s, ear and baseline_ear of frames.csv (an empty cell: NaN); a file that
    lacks them or holds a cell that is not a number is a :class:`CorrectionsError` naming it."""
    import numpy as np

    from eyeblink.outputs.export import read_table

    try:
        header, rows = read_table(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise CorrectionsError(
            f"cannot read {path} ({one_line(exc)}); re-run `eyeblink process` on the recording"
        ) from None
    if "frame" not in header or "timestamp_s" not in header:
        raise CorrectionsError(
            f"{path} has no frame/timestamp_s columns: not an eyeblink frames.csv"
        )

    def col(name: str) -> np.ndarray:
        if name not in header:
            return np.full(len(rows), np.nan)
        k = header.index(name)
        cells = np.array([r[k] if k < len(r) else "" for r in rows], dtype=object)
        cells[cells == ""] = "nan"
        try:
            return cells.astype(np.float64) if len(cells) else np.zeros(0)
        except ValueError:
            raise CorrectionsError(
                f"{path}: column {name!r} holds a cell that is not a number; the file is "
                "damaged: re-run `eyeblink process` on the recording"
            ) from None

    return Frames(
        col("frame").astype(np.int64), col("timestamp_s"), col("ear"), col("baseline_ear")
    )


def _baseline_at(baseline: np.ndarray, i: int) -> float:
    """The open-eye baseline at row ``i``: its own value, else the nearest one before it, else after
    it (the baseline is empty during the run's warm-up)."""
    import numpy as np

    if math.isfinite(baseline[i]):
        return float(baseline[i])
    before = np.flatnonzero(np.isfinite(baseline[:i]))
    if before.size:
        return float(baseline[before[-1]])
    after = np.flatnonzero(np.isfinite(baseline[i:]))
    return float(baseline[i + after[0]]) if after.size else math.nan


def auto_rows(outdir: Path, stem: str) -> tuple[list[str], list[dict[str, str]]]:
    """The detector's blink rows: ``blinks.csv`` as written by the run, or, once corrections rewrote
    it, ``blinks_auto.csv``."""
    blinks = outdir / f"{stem}.blinks.csv"
    header, rows = read_csv(blinks)
    if "source" in header and any(r.get("source") not in ("", "auto") for r in rows):
        auto = auto_blinks_path(outdir, stem)
        if not auto.is_file():
            raise CorrectionsError(
                f"{blinks} holds corrected blinks but the detector's rows ({auto.name}) are "
                "gone; re-run `eyeblink process` on the recording to detect them again"
            )
        header, rows = read_csv(auto)
    return [c for c in header if c != "source"], [
        {k: v for k, v in r.items() if k != "source"} for r in rows
    ]


def apply_session(outdir: str | Path, stem: str, *, write: bool = True) -> AppliedSession | None:
    """Apply ``<stem>.corrections.json`` to the session's files (module docstring); ``None`` without
    one. ``write=False`` computes the corrected tables without touching a file (what
    :func:`eyeblink.load` does)."""
    from eyeblink.errors import warn
    from eyeblink.outputs.export import write_text_atomic
    from eyeblink.signals.plausibility import event_counts
    from eyeblink.signals.trials import session_summary

    outdir = Path(outdir)
    cpath = corrections_path(outdir, stem)
    if not cpath.is_file():
        return None
    c = read_corrections(cpath, stem)
    header, auto = auto_rows(outdir, stem)
    frames = read_frames(outdir / f"{stem}.frames.csv")
    applied = apply_blinks(auto, c, frames)
    bheader = [*header, "source"]

    summary_path = outdir / f"{stem}.summary.json"
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorrectionsError(
            f"{summary_path} cannot be read ({one_line(exc)}); re-run `eyeblink process` on the "
            "recording to write it again"
        ) from None
    if not isinstance(summary, dict):
        raise CorrectionsError(
            f"{summary_path} is not an eyeblink summary; re-run `eyeblink process` on the "
            "recording to write it again"
        )
    import numpy as np

    t = frames.t[np.isfinite(frames.t)]
    t0, t1 = (float(t[0]), float(t[-1])) if t.size else (0.0, 0.0)
    kept_s = (t1 - t0) - excluded_time(c.excluded, t0, t1)
    events = [_Event(r) for r in applied.rows]
    auto_counts = (
        summary.get("corrections", {}).get("automatic")
        if isinstance(summary.get("corrections"), dict)
        else None
    )
    if auto_counts is None:
        auto_counts = {
            k: summary.get(k)
            for k in ("blinks", "complete_blinks", "blink_rate_per_min", "prolonged_closures")
        }
    summary.update(event_counts(events, kept_s))
    unmatched = [
        {"start_s": d.start_s, "end_s": d.end_s, "decision": d.decision} for d in applied.unmatched
    ]
    corrected = applied.counts["rejected"] + applied.counts["corrected"] + applied.counts["added"]
    summary["corrections"] = {
        "file": str(cpath.resolve()),
        "reviewer": c.reviewer,
        "saved_at": c.saved_at,
        "eyeblink_version": c.eyeblink_version,
        **applied.counts,
        "corrected_total": corrected,
        "excluded_spans": len(c.excluded),
        "excluded_s": round((t1 - t0) - kept_s, 6),
        "excluded_trials": list(c.excluded_trials),
        "unmatched": unmatched,
        "automatic": auto_counts,
    }
    trial_path = outdir / f"{stem}.trials.csv"
    theader: list[str] = []
    trials: list[dict[str, Any]] = []
    if trial_path.is_file():
        theader, trial_rows = read_csv(trial_path)
        trials = [dict(r) for r in trial_rows]
        theader = [*[h for h in theader if h != "excluded"], "excluded"]
        for r in trials:
            r["excluded"] = int(trial_excluded(r, applied))
        if isinstance(summary.get("trials"), dict):
            # read as session_summary reads
            kept: list[Any] = [_Trial(r) for r in trials if not r["excluded"]]
            summary["trials"] = {
                **summary["trials"],
                **session_summary(kept),
                "trials": len(trials),
                "excluded_trials": sum(r["excluded"] for r in trials),
            }
    if write and unmatched:
        warn(unmatched_message(stem, cpath, unmatched))
    if write:
        auto_path = auto_blinks_path(outdir, stem)
        write_text_atomic(auto_path, csv_text(header, auto))
        write_text_atomic(outdir / f"{stem}.blinks.csv", csv_text(bheader, applied.rows))
        if trials:
            write_text_atomic(trial_path, csv_text(theader, trials))
        from eyeblink.outputs.export import clean_json

        outputs = summary.get("outputs")
        if isinstance(outputs, dict):
            outputs["blinks_auto"] = str(auto_path.resolve())
        write_text_atomic(
            summary_path, json.dumps(clean_json(summary), indent=2, allow_nan=False) + "\n"
        )
    return AppliedSession(bheader, applied.rows, theader, trials, summary, auto, applied)


def unmatched_message(stem: str, cpath: Path, unmatched: Sequence[dict[str, Any]]) -> str:
    """What ``report``, ``process`` and :func:`eyeblink.load` say of decisions that match no
    detected blink."""
    return (
        f"{stem}: {len(unmatched)} decision(s) of {cpath.name} match no detected blink any more "
        "(first at "
        f"{unmatched[0]['start_s']:.3f} s); they are kept in the file and listed in the summary"
    )


class _Event:
    """A blinks.csv row as :func:`eyeblink.signals.plausibility.event_counts` reads an event."""

    def __init__(self, r: dict[str, Any]) -> None:
        self.kind = str(r.get("kind") or "blink")
        self.complete = _f(r.get("complete")) == 1
        self.duration_ms = _f(r.get("duration_ms"))
        self.amplitude = _f(r.get("amplitude"))
        self.start_s, self.end_s = _f(r.get("start_s")), _f(r.get("end_s"))


class _Trial:
    """A trials.csv row as :func:`eyeblink.signals.trials.session_summary` reads a trial result."""

    def __init__(self, r: dict[str, Any]) -> None:
        def flag(k: str) -> bool | None:
            v = r.get(k, "")
            return None if v in ("", None) else _f(v) == 1

        self.baseline_valid = bool(flag("baseline_valid"))
        self.cr = flag("cr")
        self.startle = bool(flag("startle"))
        for k in (
            "us_onset_s",
            "cr_peak_amplitude",
            "cr_onset_latency_ms",
            "cr_peak_latency_ms",
            "fec_at_us",
            "ur_amplitude",
        ):
            setattr(self, k, _f(r.get(k)))


def calibration_amplitudes(
    outdir: Path, stem: str, auto: Sequence[dict[str, Any]], frames: Frames
) -> list[float] | None:
    """The blink amplitudes FEC is calibrated on once ``<stem>.corrections.json`` applies (``None``
    without one): the complete events that stay (unreviewed, accepted, corrected, added), as the run
    calibrates on its complete events, never a rejected or an excluded one."""
    cpath = corrections_path(outdir, stem)
    if not cpath.is_file():
        return None
    applied = apply_blinks(auto, read_corrections(cpath, stem), frames)
    return [
        a
        for r in applied.rows
        if _f(r.get("complete")) == 1 and math.isfinite(a := _f(r.get("amplitude")))
    ]
