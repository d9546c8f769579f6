"""``eyeblink agree``: how well two scorings of the same session's blinks agree, the figure a
methods section reports.

The two scorings are event lists of one session: the detector's (``<stem>.blinks_auto.csv``, or
``blinks.csv`` of a session never corrected) against the corrected one (``<stem>.corrections.json``
applied), or two raters' corrections files applied to the same automatic rows. The first is the
reference (the corrected or rater A's), the second is scored against it:

* events are paired one to one, greedily by overlap (the pair whose overlap is the largest share of
  their union first); any overlap pairs, so a retimed blink is a hit with an onset difference;
* precision = pairs / events of the scored list, recall = pairs / events of the reference, F1 their
  harmonic mean; onset and duration differences (scored minus reference, ms) over the pairs;
* per trial (a session with ``trials.csv``): the events whose onset lies in the trial's window, from
  :data:`TRIAL_PRE_S` before the CS to :data:`TRIAL_POST_S` after the US (or the CS without a US),
  scored the same way; an excluded trial says so.

Excluded spans (of either scoring) leave both lists: nothing there is scored.

A human rater's ELAN tier can be the reference instead (``--reference FILE.eaf --tier NAME``): its
annotations placed on the session's frames (:func:`eyeblink.outputs.elan.tier_spans`), the detector
(or, with one corrections file, the corrected blinks) scored against them. Events that share a frame
overlap, so this is the convention of ``eyeblink eval`` (frame spans that overlap pair, one to one),
strict: every scored event counts.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eyeblink.errors import InputNotFoundError

__all__ = ["Agreement", "agree_session", "agree_sessions", "match", "score"]

#: a trial's window starts this long before its CS onset
TRIAL_PRE_S = 0.5
#: and ends this long after its US onset (or its CS onset without a US)
TRIAL_POST_S = 0.5

Event = tuple[float, float]  # (start_s, end_s)


def match(ref: Sequence[Event], test: Sequence[Event]) -> list[tuple[int, int]]:
    """One-to-one pairs (ref index, test index) of overlapping events, the largest overlap share
    first."""
    cand = []
    for i, (a0, a1) in enumerate(ref):
        for j, (b0, b1) in enumerate(test):
            inter = min(a1, b1) - max(a0, b0)
            if inter >= 0:
                union = max(a1, b1) - min(a0, b0)
                cand.append((-(inter / union if union > 0 else 1.0), i, j))
    used_i: set[int] = set()
    used_j: set[int] = set()
    pairs = []
    for _, i, j in sorted(cand):
        if i not in used_i and j not in used_j:
            pairs.append((i, j))
            used_i.add(i)
            used_j.add(j)
    return sorted(pairs)


@dataclass(frozen=True)
class Agreement:
    """Event agreement of a scored list against a reference."""

    reference: int
    scored: int
    hits: int
    onset_diff_ms: tuple[float, ...] = ()
    duration_diff_ms: tuple[float, ...] = ()

    @property
    def precision(self) -> float | None:
        return self.hits / self.scored if self.scored else None

    @property
    def recall(self) -> float | None:
        return self.hits / self.reference if self.reference else None

    @property
    def f1(self) -> float | None:
        if not self.reference and not self.scored:
            return None
        return 2 * self.hits / (self.reference + self.scored)

    def __add__(self, other: Agreement) -> Agreement:
        return Agreement(
            self.reference + other.reference,
            self.scored + other.scored,
            self.hits + other.hits,
            self.onset_diff_ms + other.onset_diff_ms,
            self.duration_diff_ms + other.duration_diff_ms,
        )

    def as_dict(self) -> dict[str, Any]:
        def stats(v: tuple[float, ...], name: str) -> dict[str, Any]:
            return {
                f"{name}_mean_ms": statistics.fmean(v) if v else None,
                f"{name}_mean_abs_ms": statistics.fmean(abs(x) for x in v) if v else None,
                f"{name}_median_abs_ms": statistics.median(abs(x) for x in v) if v else None,
            }

        return {
            "reference_events": self.reference,
            "scored_events": self.scored,
            "hits": self.hits,
            "false": self.scored - self.hits,
            "missed": self.reference - self.hits,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            **stats(self.onset_diff_ms, "onset_diff"),
            **stats(self.duration_diff_ms, "duration_diff"),
        }


def score(ref: Sequence[Event], test: Sequence[Event]) -> Agreement:
    """:class:`Agreement` of ``test`` against ``ref``."""
    pairs = match(ref, test)
    return Agreement(
        len(ref),
        len(test),
        len(pairs),
        tuple((test[j][0] - ref[i][0]) * 1000 for i, j in pairs),
        tuple(((test[j][1] - test[j][0]) - (ref[i][1] - ref[i][0])) * 1000 for i, j in pairs),
    )


def _events(rows: Sequence[dict[str, Any]]) -> list[Event]:
    out = []
    for r in rows:
        try:
            a, b = float(r["start_s"]), float(r["end_s"])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(a) and math.isfinite(b):
            out.append((a, b))
    return sorted(out)


def agree_session(
    session: str | Path,
    corrections: Sequence[str | Path] = (),
    *,
    reference: str | Path | None = None,
    tier: str | None = None,
) -> dict[str, Any]:
    """Agreement for one processed session ``OUTDIR/<stem>``: no ``corrections``: the detector
    against the session's own ``<stem>.corrections.json``; one file: the detector against it; two
    files: the second rater against the first. With ``reference`` (an ELAN file) and ``tier``: the
    detector, or the one corrections file applied, against that tier. Returns a JSON-able dict
    (``events`` overall, ``trials`` per trial)."""
    from eyeblink.outputs.corrections import (
        apply_blinks,
        auto_rows,
        corrections_path,
        read_corrections,
        read_frames,
    )
    from eyeblink.outputs.report import session_paths

    outdir, stem, _ = session_paths(session, ".blinks.csv")
    if reference is not None:
        return _against_tier(outdir, stem, Path(reference), tier, [Path(c) for c in corrections])
    files = [Path(c) for c in corrections] or [corrections_path(outdir, stem)]
    if len(files) > 2:
        raise InputNotFoundError(
            f"agree compares two scorings; {len(files)} corrections files were given"
        )
    for f in files:
        if not f.is_file():
            raise InputNotFoundError(
                f"no corrections file {f}: save one from the session's report "
                f"(eyeblink report {outdir / stem}), or name it with --corrections"
            )
    _, auto = auto_rows(outdir, stem)
    frames = read_frames(outdir / f"{stem}.frames.csv")
    applied = [apply_blinks(auto, read_corrections(f, stem), frames) for f in files]
    if len(applied) == 1:
        names = ("corrected", "automatic")
        ref_rows, test_rows = applied[0].rows, [dict(r) for r in auto]
        spans = applied[0].excluded
        excluded_trials = set(applied[0].excluded_trials)
    else:
        names = (str(files[0]), str(files[1]))
        ref_rows, test_rows = applied[0].rows, applied[1].rows
        spans = (*applied[0].excluded, *applied[1].excluded)
        excluded_trials = set(applied[0].excluded_trials) | set(applied[1].excluded_trials)

    return _result(
        outdir, stem, names, _events(ref_rows), _events(test_rows), spans, excluded_trials
    )


def _against_tier(
    outdir: Path, stem: str, reference: Path, tier: str | None, files: list[Path]
) -> dict[str, Any]:
    from eyeblink.outputs.corrections import apply_blinks, auto_rows, read_corrections, read_frames
    from eyeblink.outputs.elan import tier_spans

    if not tier:
        raise InputNotFoundError(f"name the tier of {reference} to score against with --tier NAME")
    if len(files) > 1:
        raise InputNotFoundError(
            "with --reference, give at most one corrections file (the scoring to compare)"
        )
    for f in files:
        if not f.is_file():
            raise InputNotFoundError(f"no corrections file {f}: save one from the session's report")
    frames = read_frames(outdir / f"{stem}.frames.csv")
    ref = [(s.start_s, s.end_s) for s in tier_spans(reference, tier, frames)]
    _, auto = auto_rows(outdir, stem)
    if files:
        applied = apply_blinks(auto, read_corrections(files[0], stem), frames)
        test, spans, excluded = (
            _events(applied.rows),
            applied.excluded,
            set(applied.excluded_trials),
        )
        scored = str(files[0])
    else:
        test, spans, excluded, scored = _events(auto), (), set(), "automatic"
    return _result(
        outdir, stem, (f"{reference} tier {tier}", scored), sorted(ref), test, spans, excluded
    )


def _result(
    outdir: Path,
    stem: str,
    names: tuple[str, str],
    ref_events: list[Event],
    test_events: list[Event],
    spans: Sequence[Any],
    excluded_trials: set[int],
) -> dict[str, Any]:
    from eyeblink.outputs.corrections import read_csv

    def keep(evs: list[Event]) -> list[Event]:
        return [e for e in evs if not any(e[0] <= s.end_s and s.start_s <= e[1] for s in spans)]

    ref, test = keep(ref_events), keep(test_events)
    overall = score(ref, test)
    trials_out = []
    tpath = outdir / f"{stem}.trials.csv"
    if tpath.is_file():
        _, trows = read_csv(tpath)
        for r in trows:
            try:
                cs = float(r.get("cs_onset_s", ""))
            except ValueError:
                continue
            try:
                us = float(r.get("us_onset_s", ""))
            except ValueError:
                us = math.nan
            lo, hi = cs - TRIAL_PRE_S, (us if math.isfinite(us) else cs) + TRIAL_POST_S
            number = r.get("trial", "")
            try:
                excluded = int(float(number)) in excluded_trials
            except ValueError:
                excluded = False

            def inside(evs: list[Event], lo: float = lo, hi: float = hi) -> list[Event]:
                return [e for e in evs if lo <= e[0] <= hi]

            a = score(inside(ref), inside(test))
            trials_out.append(
                {
                    "trial": number,
                    "excluded": excluded,
                    "reference_events": a.reference,
                    "scored_events": a.scored,
                    "hits": a.hits,
                    "agree": a.hits == a.reference == a.scored,
                }
            )
    return {
        "session": str(outdir / stem),
        "reference": names[0],
        "scored": names[1],
        "events": overall.as_dict(),
        "trials": trials_out,
        "_agreement": overall,
    }


def agree_sessions(
    path: str | Path,
    corrections: Sequence[str | Path] = (),
    *,
    reference: str | Path | None = None,
    tier: str | None = None,
) -> dict[str, Any]:
    """:func:`agree_session` for ``OUTDIR/<stem>``, or for every session of a folder that has a
    ``<stem>.corrections.json``, with the events of all of them pooled (``total``)."""
    p = Path(path)
    if reference is not None:
        sessions = [agree_session(p, corrections, reference=reference, tier=tier)]
    elif p.is_dir() and not corrections:
        stems = sorted(f.name[: -len(".corrections.json")] for f in p.glob("*.corrections.json"))
        if not stems:
            raise InputNotFoundError(
                f"{p} has no <stem>.corrections.json: save corrections from a session's "
                "report first (eyeblink report OUTDIR/<stem>)"
            )
        sessions = [agree_session(p / s) for s in stems]
    else:
        sessions = [agree_session(p, corrections)]
    total = sessions[0].pop("_agreement")
    for s in sessions[1:]:
        total = total + s.pop("_agreement")
    return {"sessions": sessions, "total": total.as_dict()}


def format_text(result: dict[str, Any]) -> str:
    """The agreement as the lines ``eyeblink agree`` prints."""

    def pct(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"

    def ms(v: float | None) -> str:
        return "–" if v is None else f"{v:+.1f} ms"

    lines = []
    for s in result["sessions"]:
        e = s["events"]
        lines.append(
            f"{s['session']}: {s['scored']} against {s['reference']}: precision "
            f"{pct(e['precision'])}, "
            f"recall {pct(e['recall'])}, F1 {pct(e['f1'])} ({e['hits']} paired, {e['false']} not "
            "in the "
            f"reference, {e['missed']} missed); onset {ms(e['onset_diff_mean_ms'])} mean, "
            f"{ms(e['onset_diff_median_abs_ms'])} median |diff|; duration "
            f"{ms(e['duration_diff_mean_ms'])}"
            " mean"
        )
        for t in s["trials"]:
            lines.append(
                f"  trial {t['trial']}: {t['hits']} paired of {t['reference_events']} reference, "
                f"{t['scored_events']} scored"
                + (" (excluded)" if t["excluded"] else "")
                + ("" if t["agree"] else " - differs")
            )
    if len(result["sessions"]) > 1:
        e = result["total"]
        lines.append(
            f"all {len(result['sessions'])} sessions: precision {pct(e['precision'])}, recall "
            f"{pct(e['recall'])}, F1 {pct(e['f1'])} ({e['hits']} paired of {e['reference_events']} "
            f"reference and {e['scored_events']} scored events)"
        )
    return "\n".join(lines)


def write_json(result: dict[str, Any], path: Path) -> None:
    from eyeblink.outputs.export import write_text_atomic

    write_text_atomic(path, json.dumps(result, indent=2) + "\n")
