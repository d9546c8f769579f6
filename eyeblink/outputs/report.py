"""``eyeblink report OUTDIR/<stem>``: one self-contained HTML file to check a processed session by
eye.

It reads the output contract (``<stem>.frames.csv``, ``<stem>.blinks.csv``, ``<stem>.summary.json``
and, for conditioning sessions, ``<stem>.trials.csv``) and writes ``<stem>.report.html`` beside
them. The file needs no network and no server: the viewer (``report.js``, ``report.css`` beside this
module) is inlined, and so are the data.

How 600,000 frames stay small and fast
--------------------------------------
Each trace (``ear_left``, ``ear_right``, ``closure``) is quantized to uint16 over its own range
(``65535`` = no value: no face, eye not fitted), which is far finer than the EAR's own noise
(~1e-3). On top of the raw samples sits a pyramid of min/max envelopes, buckets of 16, 64, 256, ...
samples (x4 per level, up to a few thousand buckets), so the browser draws any zoom level from at
most a few buckets per pixel column instead of scanning every sample. The pyramid costs a sixth of
the raw level. Frame times are the float64 timestamps of frames.csv (a time the page saves is the
file's own), so dropped frames leave real gaps on the time axis; frame numbers travel as runs of
consecutive frames. Everything binary is base64 in one JSON block: a 600,000-frame session is about
12 MB (see the report guide).

Marked on the trace: blinks (``blinks.csv``), frames without a face (``face`` = 0), dropped or
damaged frames (timestamp gaps over 1.5 frame intervals, duplicate timestamps, and the ``dropped``
rows of live runs), and trials (CS and US onsets) when ``trials.csv`` exists.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, InputNotFoundError, one_line

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.outputs.paths import OutputPlan
    from eyeblink.outputs.session import SessionData

__all__ = [
    "ReportData",
    "load_report_data",
    "pyramid",
    "report_path",
    "report_plan",
    "write_report",
]

#: a uint16 code that means "no value" (NaN: no face, eye not fitted)
MISSING = 0xFFFF
#: bucket sizes of the envelope pyramid: MIN_BUCKET * FACTOR**k while a level has > MIN_BUCKETS
#: buckets
MIN_BUCKET = 16
FACTOR = 4
MIN_BUCKETS = 1000
#: suffixes a user may leave on the argument (``eyeblink report out/session.summary.json`` works
#: too)
_SUFFIXES = (".frames.csv", ".blinks.csv", ".summary.json", ".trials.csv", ".report.html")
_ASSETS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ReportData:
    """What the report shows: the session's frame arrays plus the per-row flags and the tables."""

    stem: str
    session: SessionData
    face: np.ndarray  # bool per frame row
    dropped: np.ndarray  # bool per frame row (live gap rows; all False for files)
    blinks: list[dict[str, str]]
    summary: dict[str, Any]
    trials: list[dict[str, str]] = field(default_factory=list)
    video: Path | None = None
    #: what the page must say is missing or left out (no rows, a cut last row, unreadable eye crops)
    notes: list[str] = field(default_factory=list)
    #: the review so far (``<stem>.corrections.json`` matched to ``blinks``, the detector's rows),
    #: for the viewer
    review: dict[str, Any] | None = None


def session_paths(session: str | Path, *suffixes: str) -> tuple[Path, str, list[Path]]:
    """(OUTDIR, stem, ``OUTDIR/<stem><suffix>`` for each suffix) of a processed session named as
    ``OUTDIR/<stem>`` or any of its files; a missing file is one line naming it."""
    outdir, stem = split_stem(session)
    paths = [outdir / f"{stem}{suffix}" for suffix in suffixes]
    for path in paths:
        if not path.is_file():
            raise InputNotFoundError(
                f"no session {stem!r} in {outdir}: {path.name} not found — give OUTDIR/<stem> "
                "of a processed session (or one of its files)"
            )
    return outdir, stem, paths


def split_stem(path: str | Path) -> tuple[Path, str]:
    """``OUTDIR/<stem>`` (or any of its output files) -> (OUTDIR, stem)."""
    p = Path(path)
    name = p.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return p.parent, name[: -len(suffix)]
    if p.is_dir():
        stems = sorted(f.name[: -len(".summary.json")] for f in p.glob("*.summary.json"))
        if len(stems) == 1:
            return p, stems[0]
        raise InputNotFoundError(
            f"{p} is a folder with {len(stems)} sessions ({', '.join(stems) or 'none'}); "
            "name one as OUTDIR/<stem>, e.g. " + str(p / (stems[0] if stems else "session"))
        )
    return p.parent, name


def report_path(path: str | Path) -> Path:
    outdir, stem = split_stem(path)
    return outdir / f"{stem}.report.html"


_RERUN = "re-run `eyeblink process` on the recording to write it again"


def _damaged(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"{path} {problem}; the file is damaged or not an eyeblink output: {_RERUN}")


def read_rows(
    path: Path, required: tuple[str, ...], what: str
) -> tuple[list[str], list[list[str]], list[str]]:
    """A session CSV -> (header, rows, notes), checked: its header has ``required``; a last row cut
    off mid-row (no end of line, or too few cells) is left out and named in ``notes``; any other
    short or long row, a file that is not UTF-8 text or has no header is an error
    (:class:`ConfigError`) naming the file and the fix."""
    import csv
    import io

    from eyeblink.outputs.paths import read_utf8

    text = read_utf8(path, _damaged, InputNotFoundError)
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise _damaged(path, f"is not a CSV file ({exc})") from None
    if not rows:
        raise _damaged(path, "is empty (not even its header)")
    header, body = rows[0], rows[1:]
    missing = [c for c in required if c not in header]
    if missing:
        shown = ",".join(header[:8]) + (",..." if len(header) > 8 else "")
        raise _damaged(
            path,
            f"has no {', '.join(repr(c) for c in missing)} column (its header is {shown!r}, "
            f"not that of an eyeblink {what})",
        )
    notes: list[str] = []
    if body and (not text.endswith(("\n", "\r")) or len(body[-1]) < len(header)):
        body = body[:-1]
        notes.append(
            f"{path.name}: its last row was cut off mid-row (the copy or the disk ended there); "
            "that row is left out"
        )
    for i, r in enumerate(body):
        if len(r) != len(header):
            raise _damaged(path, f"row {i + 2} has {len(r)} cells, its header {len(header)}")
    return header, body, notes


def numbers(path: Path, header: list[str], rows: list[list[str]], name: str) -> np.ndarray:
    """Column ``name`` as float64 (an empty cell: NaN); a cell that is not a number is a
    :class:`ConfigError`."""
    import numpy as np

    k = header.index(name)
    out = np.empty(len(rows), dtype=np.float64)
    for i, r in enumerate(rows):
        v = r[k]
        if v == "":
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except ValueError:
            raise _damaged(
                path, f"row {i + 2}, column {name!r}: {v[:40]!r} is not a number"
            ) from None
    return out


def load_report_data(path: str | Path) -> ReportData:
    """Read ``OUTDIR/<stem>``'s output files, checked (see :func:`read_rows`): a damaged file is one
    :class:`ConfigError` naming it; what is merely missing (no rows, a cut last row) is in
    ``notes``."""
    import numpy as np

    from eyeblink.outputs.analysis import _filled
    from eyeblink.outputs.session import SessionData
    from eyeblink.signals.closure import ClosureCalibration, closure_amplitude

    outdir, stem = split_stem(path)
    files = {k: outdir / f"{stem}.{k}" for k in ("frames.csv", "blinks.csv", "summary.json")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise InputNotFoundError(
            f"no eyeblink outputs for {outdir / stem}: missing {', '.join(missing)}; "
            "give OUTDIR/<stem> of a folder written by `eyeblink process`"
        )
    try:
        summary = json.loads(files["summary.json"].read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{files['summary.json']} is not valid JSON ({one_line(exc)}); was the run interrupted "
            f"while writing it? {_RERUN}"
        ) from None
    if not isinstance(summary, dict):
        raise _damaged(
            files["summary.json"], f"holds a JSON {type(summary).__name__}, not the summary object"
        )
    header, rows, notes = read_rows(
        files["frames.csv"], ("frame", "timestamp_s", "face", "ear_left", "ear_right"), "frames.csv"
    )
    if not rows:
        notes.append(
            f"{files['frames.csv'].name} has no rows: the run ended before its first frame (status "
            f"{summary.get('status', 'unknown')}); there is no trace to draw"
        )

    def col(name: str) -> np.ndarray:
        return (
            numbers(files["frames.csv"], header, rows, name)
            if name in header
            else np.full(len(rows), np.nan)
        )

    t = col("timestamp_s")
    if len(t) > 1 and not np.isfinite(t).all():
        raise _damaged(
            files["frames.csv"], f"has {int((~np.isfinite(t)).sum())} rows without a timestamp_s"
        )
    ear, ear_l, ear_r = col("ear"), col("ear_left"), col("ear_right")
    baseline = _filled(col("baseline_ear"))
    cal_d = _dict(summary.get("closure"))
    try:
        cal = ClosureCalibration(
            float(cal_d.get("full_amplitude") or 1.0),
            cal_d.get("method") or "default",
            int(cal_d.get("responses") or 0),
            bool(cal_d.get("provisional")),
        )
    except (ValueError, TypeError):
        cal = ClosureCalibration(1.0, "default")
    amplitude = closure_amplitude(ear, baseline)
    closure = col("closure") if "closure" in header else cal.fec(amplitude)
    from eyeblink.outputs.session import shown_columns

    session = SessionData(
        col("frame").astype(np.int64),
        t,
        ear,
        ear_l,
        ear_r,
        baseline,
        amplitude,
        closure,
        cal,
        columns={c: col(c) for c in shown_columns()},
    )
    face = col("face") == 1
    dropped = col("dropped") == 1 if "dropped" in header else np.zeros(len(rows), dtype=bool)
    bh, brows, bnotes = read_rows(files["blinks.csv"], ("blink", "start_s", "end_s"), "blinks.csv")
    for name in ("blink", "start_s", "end_s"):
        # a blink the trace cannot place is a damaged file
        numbers(files["blinks.csv"], bh, brows, name)
    notes += bnotes
    blinks = [dict(zip(bh, r, strict=True)) for r in brows]
    review = _review(outdir, stem, bh, blinks)
    if review is not None:
        blinks = review.pop("auto")
    trials_path = outdir / f"{stem}.trials.csv"
    trials: list[dict[str, str]] = []
    if trials_path.is_file():
        th, trows, tnotes = read_rows(trials_path, ("trial",), "trials.csv")
        notes += tnotes
        trials = [dict(zip(th, r, strict=True)) for r in trows]
    video = Path(summary["input"]) if isinstance(summary.get("input"), str) else None
    return ReportData(
        stem,
        session,
        face,
        dropped,
        blinks,
        summary,
        trials,
        video if video is not None and video.is_file() else None,
        notes,
        review,
    )


def _review(
    outdir: Path, stem: str, header: list[str], blinks: list[dict[str, str]]
) -> dict[str, Any] | None:
    """What the viewer needs to go on with a review: the detector's rows (``auto``: the page reviews
    those, not the corrected table) and each one's decision, the added events, excluded spans and
    trials, and the decisions that match no detected blink (kept when the page saves again).
    ``None``: no corrections and blinks.csv is the detector's own."""
    import dataclasses

    from eyeblink.outputs.corrections import (
        as_json,
        auto_rows,
        corrections_path,
        match_decisions,
        read_corrections,
    )

    cpath = corrections_path(outdir, stem)
    corrected = "source" in header and any(b.get("source") not in ("", "auto") for b in blinks)
    if not cpath.is_file() and not corrected:
        return None
    _, auto = auto_rows(outdir, stem) if corrected else (header, blinks)
    if not cpath.is_file():
        return {
            "auto": auto,
            "decisions": [None] * len(auto),
            "added": [],
            "excluded": [],
            "excludedTrials": [],
            "reviewer": "",
            "savedAt": "",
            "unmatched": [],
        }
    c = read_corrections(cpath, stem)
    matched, unmatched = match_decisions(auto, c.decisions)
    doc = as_json(c)
    decisions: list[dict[str, Any] | None] = [None] * len(auto)
    for i, d in matched.items():
        decisions[i] = {
            "decision": d.decision,
            "new_start_s": d.new_start_s,
            "new_end_s": d.new_end_s,
            "new_start_frame": d.new_start_frame,
            "new_end_frame": d.new_end_frame,
        }
    return {
        "auto": auto,
        "decisions": decisions,
        "added": doc["added"],
        "excluded": doc["excluded"],
        "excludedTrials": doc["excluded_trials"],
        "reviewer": c.reviewer,
        "savedAt": c.saved_at,
        # kept as the file has them (frames included) when the page saves again
        "unmatched": as_json(dataclasses.replace(c, decisions=tuple(unmatched)))["blinks"],
    }


# ------------------------------------------------------------------------------------------
# encoding


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).decode(
        "ascii"
    )


def quantize(x: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(lo, step, codes): ``x ≈ lo + codes * step``; NaN -> :data:`MISSING`."""
    import numpy as np

    ok = np.isfinite(x)
    lo = float(np.min(x[ok])) if ok.any() else 0.0
    hi = float(np.max(x[ok])) if ok.any() else 1.0
    step = (hi - lo) / (MISSING - 1) if hi > lo else 1.0
    codes = np.full(x.shape, MISSING, dtype=np.uint16)
    codes[ok] = np.rint((x[ok] - lo) / step).astype(np.uint16)
    return lo, step, codes


def pyramid(codes: np.ndarray) -> list[dict[str, Any]]:
    """Min/max envelopes of uint16 codes over buckets of 16, 64, 256, ... samples (MISSING
    ignored)."""
    import numpy as np

    levels: list[dict[str, Any]] = []
    n = len(codes)
    # min: MISSING is already the largest
    lo = np.where(codes == MISSING, MISSING, codes).astype(np.uint16)
    hi = np.where(codes == MISSING, 0, codes).astype(np.uint16)
    empty = codes == MISSING
    bucket, size = 1, MIN_BUCKET
    while n // size >= MIN_BUCKETS // FACTOR or not levels:
        k = size // bucket  # reduce the previous level by this factor
        m = math.ceil(len(lo) / k)
        pad = m * k - len(lo)
        lo = np.pad(lo, (0, pad), constant_values=MISSING).reshape(m, k).min(axis=1)
        hi = np.pad(hi, (0, pad), constant_values=0).reshape(m, k).max(axis=1)
        empty = np.pad(empty, (0, pad), constant_values=True).reshape(m, k).all(axis=1)
        hi_out = np.where(empty, MISSING, hi).astype(np.uint16)
        levels.append({"bucket": size, "min": _b64(lo), "max": _b64(hi_out)})
        bucket, size = size, size * FACTOR
        if m <= 1:
            break
    return levels


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) row index runs where ``mask`` is True."""
    import numpy as np

    d = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def _intervals(t: np.ndarray, mask: np.ndarray, merge_s: float) -> list[list[float]]:
    """Time intervals [t_start, t_end] of the runs of ``mask``, runs closer than ``merge_s``
    merged."""
    out: list[list[float]] = []
    for a, b in _runs(mask):
        t0, t1 = float(t[a]), float(t[min(b, len(t) - 1)])
        if out and t0 - out[-1][1] <= merge_s:
            out[-1][1] = t1
        else:
            out.append([t0, t1])
    return out


def _gaps(t: np.ndarray, dropped: np.ndarray) -> list[list[float]]:
    """Dropped or damaged frames: [t_before, t_after, frames missing] per timestamp gap or
    dropped run."""
    import numpy as np

    out: list[list[float]] = []
    if len(t) > 1:
        iv = np.diff(t)
        med = float(np.median(iv))
        if med > 0:
            for i in np.flatnonzero((iv > 1.5 * med) | (iv <= 0)).tolist():
                # -1: duplicate or backwards timestamp
                missing = round(iv[i] / med) - 1 if iv[i] > 0 else -1
                out.append([float(t[i]), float(t[i + 1]), float(missing)])
    for a, b in _runs(dropped):
        out.append([float(t[a]), float(t[b - 1]), float(b - a)])
    return sorted(out)


# ------------------------------------------------------------------------------------------ the
# page


def frame_runs(frame: np.ndarray) -> list[list[int]]:
    """[row, frame] where each run of consecutive frame numbers starts (one run for a file
    without drops)."""
    import numpy as np

    if not len(frame):
        return []
    starts = np.concatenate(([0], np.flatnonzero(np.diff(frame) != 1) + 1))
    return [[int(i), int(frame[i])] for i in starts]


def _number(v: str) -> float | str | None:
    if v == "":
        return None
    try:
        f = float(v)
    except ValueError:
        return v
    return f if math.isfinite(f) else None


def payload(data: ReportData) -> dict[str, Any]:
    """Everything the viewer draws, as one JSON-able dict (binary arrays base64 little-endian)."""
    import numpy as np

    s = data.session
    t = s.t
    t0 = float(t[0]) if len(t) else 0.0
    from eyeblink.outputs import columns as _columns

    series = []
    # the columns declared with a trace
    for name, trace, data_name in _columns.FRAME_TABLE.report_traces:
        values = s.series(data_name)
        if not np.isfinite(values).any():
            continue
        lo, step, codes = quantize(values)
        series.append(
            {
                "name": name,
                "label": trace.label,
                "panel": trace.panel,
                "lo": lo,
                "step": step,
                "raw": _b64(codes),
                "levels": pyramid(codes),
            }
        )
    interval = float(np.median(np.diff(t))) if len(t) > 1 else 0.002
    blink_cols = (
        "blink",
        "start_s",
        "end_s",
        "peak_s",
        "duration_ms",
        "amplitude",
        "min_ear",
        "baseline_ear",
        "start_frame",
        "end_frame",
        "amplitude_left",
        "amplitude_right",
        "complete",
        "partial",
        "cue",
        "kind",
    )
    trial_cols = (
        "trial",
        "trial_type",
        "cs_type",
        "us_type",
        "cs_onset_s",
        "us_onset_s",
        "isi_ms",
        "baseline_valid",
        "startle",
        "cr",
        "cr_onset_latency_ms",
        "cr_peak_latency_ms",
        "cr_peak_amplitude",
        "fec_at_us",
        "ur_amplitude",
        "ur_peak_latency_ms",
    )
    cs_ms = [_number(r.get("cs_duration_ms", "")) for r in data.trials]
    from eyeblink.version import __version__

    review = (
        dict(data.review)
        if data.review is not None
        else {
            "decisions": [None] * len(data.blinks),
            "added": [],
            "excluded": [],
            "excludedTrials": [],
            "reviewer": "",
            "savedAt": "",
            "unmatched": [],
        }
    )
    return {
        "stem": data.stem,
        "version": __version__,
        "review": review,
        "frames": len(t),
        "t0": t0,
        "interval": interval,
        "t": _b64(t.astype(np.float64)),
        "frameRuns": frame_runs(s.frame),
        "series": series,
        "blinkColumns": blink_cols,
        "blinks": [[_number(b.get(c, "")) for c in blink_cols] for b in data.blinks],
        "trialColumns": trial_cols,
        "trials": [[_number(r.get(c, "")) for c in trial_cols] for r in data.trials],
        "csDurationMs": cs_ms,
        "noFace": _intervals(t - t0, ~data.face & ~data.dropped, 2.5 * interval),
        "gaps": [[a - t0, b - t0, n] for a, b, n in _gaps(t, data.dropped)],
    }


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script type="application/json">``: ``<``, ``>`` and
    ``&`` are written as ``\\u003c`` etc., so no text read from a file (a trial label, a file name,
    a warning) can end the block or open a comment or a tag; ``JSON.parse`` reads the same strings
    back."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fmt(v: Any, unit: str = "", digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}{unit}" if abs(v) < 1e5 else f"{v:,.0f}{unit}"
    if isinstance(v, int):
        return f"{v:,}{unit}"
    return f"{v}{unit}"


def _dict(v: Any) -> dict[str, Any]:
    """A summary field that should be an object (a damaged summary may hold anything)."""
    return v if isinstance(v, dict) else {}


def _shown_blinks(data: ReportData) -> int:
    """Rows of blinks.csv: the detector's, or after corrections the summary's counts of what
    stays."""
    if data.review is None:
        return len(data.blinks)
    s = data.summary
    return int(s.get("blinks") or 0) + int(s.get("prolonged_closures") or 0)


def _summary_html(data: ReportData, notes: tuple[str, ...] = ()) -> str:
    """The summary cards and tables, rendered here so they read without JavaScript too."""
    s = data.summary
    tim = _dict(s.get("timings"))
    tr = _dict(s.get("trials"))
    dur = s.get("duration_s")
    gaps = _gaps(data.session.t, data.dropped)
    no_face = int((~data.face & ~data.dropped).sum())
    interval_ms = s.get("frame_interval_median_ms")
    fps = 1000 / interval_ms if interval_ms else None
    cards = [
        (
            "blinks",
            str(_shown_blinks(data)),
            f"{_fmt(s.get('complete_blinks'))} complete"
            + (
                f", {_fmt(s.get('prolonged_closures'))} prolonged closures"
                if s.get("prolonged_closures")
                else ""
            ),
        ),
        (
            "blink rate",
            _fmt(s.get("blink_rate_per_min"), "/min"),
            f"mean {_fmt(s.get('mean_blink_duration_ms'), ' ms')}, amplitude "
            f"{_fmt(s.get('mean_blink_amplitude'))}",
        ),
        ("duration", _fmt(dur, " s", 4), f"{_fmt(s.get('frames'))} frames, {_fmt(fps, ' FPS', 4)}"),
        (
            "no face",
            f"{_fmt(no_face)} frames",
            f"{_fmt(100 * no_face / max(1, len(data.face)), ' %', 2)} of the session",
        ),
        (
            "dropped / damaged",
            f"{len(gaps)} gap{'' if len(gaps) == 1 else 's'}",
            f"{_fmt(int(sum(g[2] for g in gaps if g[2] > 0)))} frames missing, "
            f"{_fmt(s.get('duplicate_timestamps'))} duplicate timestamps",
        ),
    ]
    corr = _dict(s.get("corrections"))
    if corr:
        auto_n = _dict(corr.get("automatic")).get("blinks")
        cards.append(
            (
                "checked by eye",
                f"{_fmt(corr.get('corrected_total'))} corrected",
                f"{_fmt(corr.get('rejected'))} rejected, {_fmt(corr.get('corrected'))} retimed, "
                f"{_fmt(corr.get('added'))} added, {_fmt(corr.get('accepted'))} accepted; "
                f"{_fmt(corr.get('excluded_spans'))} spans ({_fmt(corr.get('excluded_s'), ' s')}) "
                "and "
                f"{len(corr.get('excluded_trials') or [])} trials excluded; detector: "
                f"{_fmt(auto_n)} blinks",
            )
        )
    if tr:
        cards.append(
            (
                "CR",
                _fmt(tr.get("percent_cr"), " %", 3),
                f"{_fmt(tr.get('cr_trials'))} of {_fmt(tr.get('scored_trials'))} scored trials",
            )
        )
    cards.append(
        ("processing", _fmt(tim.get("fps"), " FPS", 4), f"wall {_fmt(tim.get('wall_s'), ' s', 3)}")
    )
    # every value is text (a damaged or hostile summary may hold markup anywhere); the count and the
    # rate have an id: the page updates them as the review goes
    ids = {"blinks": "blink-count", "blink rate": "blink-rate"}
    card_html = "".join(
        f'<div class="card"><div class="k">{html.escape(k)}</div><div class="v">'
        + (f'<span id="{ids[k]}">{html.escape(v)}</span>' if k in ids else html.escape(v))
        + f'</div><div class="d">{html.escape(d)}</div></div>'
        for k, v, d in cards
    )
    status = s.get("status", "?")
    status_html = (
        f'<span class="badge {"ok" if status == "ok" else "bad"}">{html.escape(str(status))}</span>'
        + (
            f' <span class="err">{html.escape(str(s.get("error")))}</span>'
            if s.get("error")
            else ""
        )
    )
    closure = _dict(s.get("closure"))
    facts = [
        ("input", html.escape(str(s.get("input", "?")))),
        ("status", status_html),
        (
            "source",
            html.escape(
                ", ".join(
                    f"{k} {v}"
                    for k, v in _dict(s.get("source")).items()
                    if k in ("container", "codec", "width", "height", "nominal_fps")
                )
            ),
        ),
        (
            "FEC calibration",
            html.escape(
                f"full closure = amplitude {_fmt(closure.get('full_amplitude'))} "
                f"({closure.get('method', '?')}, {closure.get('responses', 0)} responses)"
            ),
        ),
        (
            "time per frame",
            html.escape(
                ", ".join(
                    f"{k} {v:.2f} ms"
                    for k, v in _dict(tim.get("ms_per_frame")).items()
                    if isinstance(v, (int, float))
                )
            ),
        ),
        (
            "versions",
            html.escape(", ".join(f"{k} {v}" for k, v in _dict(s.get("versions")).items())),
        ),
    ]
    if corr:
        who = f" by {corr.get('reviewer')}" if corr.get("reviewer") else ""
        facts.append(
            (
                "corrections",
                html.escape(
                    f"{corr.get('file')}{who}, saved {corr.get('saved_at') or '?'} "
                    f"(eyeblink {corr.get('eyeblink_version') or '?'})"
                ),
            )
        )
    facts_html = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
    settings = html.escape(json.dumps(s.get("settings") or {}, indent=2))
    whole = html.escape(json.dumps(s, indent=2))
    warnings = s.get("warnings")
    warns = [str(w) for w in warnings] if isinstance(warnings, list) else []
    items = [
        f'<li class="err missing">missing: {html.escape(n)}</li>' for n in (*data.notes, *notes)
    ]
    items += [f'<li class="err">warning: {html.escape(w)}</li>' for w in warns]
    listed = corr.get("unmatched")
    unmatched: list[Any] = listed if isinstance(listed, list) else []
    items += [
        '<li class="err unmatched">correction no longer matched: '
        f"{html.escape(str(_dict(u).get('decision')))}"
        f" of the blink at {html.escape(_fmt(_dict(u).get('start_s'), ' s', 6))} (no detected "
        "blink there now; "
        "kept in the corrections file)</li>"
        for u in unmatched
    ]
    warn_html = f'<ul class="warnings" id="warnings">{"".join(items)}</ul>' if items else ""
    return (
        f'{warn_html}<div class="cards">{card_html}</div><table class="facts">{facts_html}</table>'
        f"<details><summary>settings</summary><pre>{settings}</pre></details>"
        f"<details><summary>the whole summary.json</summary><pre>{whole}</pre></details>"
    )


def render_html(
    data: ReportData,
    *,
    crops: dict[int, list[str]] | None = None,
    crops_problem: str | None = None,
    eyes: dict[str, Any] | None = None,
) -> str:
    """The report page: template + inlined CSS/JS + the data as one JSON block.

    ``crops`` (blink number -> image data URIs: onset, peak, offset) fills the blink table's crop
    column (:func:`eyeblink.outputs.crops.render_blink_crops` of the session's
    ``<stem>.crops.npz``); ``crops_problem``: why that file exists but shows no crops (said on the
    page).
    """
    from eyeblink.version import __version__

    page = payload(data)
    page["crops"] = {str(k): v for k, v in (crops or {}).items()}
    # {"src": path relative to the page, "url": its link, "fps": its frame rate} or None
    page["eyesVideo"] = eyes
    blob = script_json(page)
    template = (_ASSETS / "report.html").read_text(encoding="utf-8")
    trials_note = "" if data.trials else "hidden"
    if crops:
        missing = len(data.blinks) - len(crops)
        none = (
            f"; {missing} blinks have none (no face at those frames, or past the first 600)"
            if missing > 0
            else ""
        )
        crops_note = (
            "Eye crops (both eyes, the fitted eye points drawn) at each blink's onset, "
            f"peak and offset{none}."
        )

    elif crops_problem:
        crops_note = f"No eye crops: {crops_problem}."
    else:
        crops_note = (
            "No eye crops: they are kept while processing with --report (eyeblink "
            "process/batch/live "
            "--report). To look at a blink, make an annotated video of its seconds with "
            "eyeblink report --overlay OUT.mp4 --start S --end S."
        )
    fill = {
        "TITLE": html.escape(f"eyeblink report: {data.stem}"),
        "STEM": html.escape(data.stem),
        "GENERATED": html.escape(f"eyeblink {__version__}, {time.strftime('%Y-%m-%d %H:%M')}"),
        "SUMMARY": _summary_html(data, (crops_problem,) if crops_problem else ()),
        "TRIALS_HIDDEN": trials_note,
        "CROPS_NOTE": crops_note,
        "CSS": (_ASSETS / "report.css").read_text(encoding="utf-8"),
        "JS": (_ASSETS / "report.js").read_text(encoding="utf-8"),
        "DATA": blob,
    }
    fill["CROPS_NOTE"] = html.escape(crops_note)
    # one pass: a value that happens to hold "{{JS}}" (a file name, a label) stays text, never a
    # slot
    return re.sub(r"\{\{([A-Z_]+)\}\}", lambda m: fill.get(m.group(1), m.group(0)), template)


def eyes_video_path(outdir: str | Path, stem: str) -> Path:
    """``OUTDIR/<stem>.eyes.webm``: the eyes' video (:mod:`eyeblink.outputs.eyevideo`), where the
    page finds it."""
    return Path(outdir) / f"{stem}.eyes.webm"


def eyes_video_for(outdir: Path, stem: str, page: Path) -> dict[str, Any] | None:
    """What the page needs of ``<stem>.eyes.webm`` when it is beside the session: its path relative
    to the page and its frame rate; ``None`` without one (the page then has no video panel)."""
    import os
    import urllib.parse

    path = eyes_video_path(outdir, stem)
    if not path.is_file():
        return None
    import av

    try:
        with av.open(str(path)) as c:
            rate = c.streams.video[0].average_rate
    except (av.FFmpegError, IndexError):
        return None
    if not rate:
        return None
    # a link the browser follows on every OS: the relative path with "/" (never a Windows "\\"),
    # each name URL-quoted (spaces, "#", "é", a ":" that would read as a scheme); a page on another
    # Windows drive than the session has no relative path to it: a file:// URL then
    try:
        src = Path(os.path.relpath(path.resolve(), page.resolve().parent)).as_posix()
    except ValueError:
        return {
            "src": path.resolve().as_posix(),
            "url": path.resolve().as_uri(),
            "fps": float(rate),
        }
    return {"src": src, "url": urllib.parse.quote(src), "fps": float(rate)}


def report_plan(
    session: str | Path,
    output: str | Path | None = None,
    *,
    overlay: str | Path | None = None,
    video: str | Path | None = None,
    data: ReportData | None = None,
) -> OutputPlan:
    """What ``eyeblink report`` reads (the session's files, the recording) and writes (the page,
    ``--overlay``)."""
    from eyeblink.outputs.crops import crops_path
    from eyeblink.outputs.paths import OutputPlan

    outdir, stem = split_stem(session)
    plan = OutputPlan()
    for suffix in (
        "frames.csv",
        "blinks.csv",
        "summary.json",
        "trials.csv",
        "traces.csv",
        "nwb",
        "corrections.json",
        "blinks_auto.csv",
    ):
        plan.read(outdir / f"{stem}.{suffix}", f"the session's {suffix}")
    plan.read(crops_path(outdir, stem), "the session's crops.npz")
    plan.read(video, "the --video recording")
    plan.read(data.video if data is not None else None, "the session's recording")
    plan.write(Path(output) if output is not None else report_path(session), "-o")
    plan.write(overlay, "--overlay")
    return plan


def write_report(
    path: str | Path, output: str | Path | None = None, *, data: ReportData | None = None
) -> Path:
    """Write ``<stem>.report.html`` for ``OUTDIR/<stem>`` (or to ``output``); returns its path.

    Refuses (:class:`~eyeblink.errors.OutputError`, before writing) an ``output`` that is one of the
    session's own files; the page is written to a temporary name and renamed, whole or not at all.
    """
    from eyeblink.outputs.corrections import apply_session
    from eyeblink.outputs.crops import crops_path, read_crops, render_blink_crops
    from eyeblink.outputs.paths import write_text

    outdir, stem = split_stem(path)
    applied = None
    if (outdir / f"{stem}.summary.json").is_file():
        # <stem>.corrections.json: blinks.csv, trials and counts follow it
        applied = apply_session(outdir, stem)
    if data is None:
        data = load_report_data(path)
    # the frames are as read; the blinks, the review and the summary are the corrected ones
    elif applied is not None:
        import dataclasses

        review = _review(outdir, stem, applied.blink_header, applied.blinks)
        data = dataclasses.replace(
            data,
            summary=applied.summary,
            review=review,
            blinks=review.pop("auto") if review is not None else data.blinks,
        )
    out = Path(output) if output is not None else report_path(path)
    report_plan(path, out, data=data).check()
    crops, problem = read_crops(crops_path(outdir, stem))
    text = render_html(
        data,
        crops=render_blink_crops(crops, data.blinks),
        crops_problem=problem,
        eyes=eyes_video_for(outdir, stem, out),
    )
    write_text(out, text, "-o")
    return out
