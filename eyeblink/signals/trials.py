"""Trials of an eyeblink-conditioning session: reading them, and scoring the eyelid on each.

Input: a trials file (``--trials trials.csv``)
-------------------------------------------------
A CSV (comma, tab or semicolon separated; ``#`` lines and blank lines are skipped) with one row per
trial, in time order. Column names are case-insensitive and carry their unit as a suffix: ``_s``
(seconds on the recording's clock, i.e. its ``timestamp_s``), ``_ms`` (milliseconds, same clock), or
``_frame`` (0-based frame index in decode order, mapped to that frame's recorded timestamp).

==================  ========  ==========================================================
column              required  meaning
==================  ========  ==========================================================
``cs_onset_*``      yes       conditioned stimulus (tone, light) onset
``us_onset_*``      no        unconditioned stimulus (air puff) onset; empty = CS-alone trial
``cs_duration_*``   no        CS duration (``_s``, ``_ms`` or ``_frame``)
``us_duration_*``   no        US duration
``trial``           no        trial number (default 1, 2, ...)
``trial_type``      no        free text (default ``paired`` / ``cs_alone``)
``cs_type``         no        free text, e.g. ``tone``
``us_type``         no        free text, e.g. ``puff``
==================  ========  ==========================================================

Other columns are ignored; a column that starts like one of these but names no unit (``cs_onset``)
is an error, not ignored. Example::

    trial,cs_onset_s,us_onset_s,cs_duration_ms,trial_type
    1,10.000,10.250,280,paired
    2,25.500,,280,cs_alone

Input: a sync CSV (``--trials sync.csv --sync-column CS_TTL [--us-sync-column US_TTL]``)
---------------------------------------------------------------------------------------
One row per sample of the acquisition system, with a time column (``timestamp_s``, ``time_s``,
``timestamp_ms``, ``time_ms`` or ``frame``) and TTL columns. Trials start at the rising edges of the
CS column (crossings of the midpoint between its lowest and highest value; a line already high at
the first sample is not an edge); CS duration runs to the next falling edge. Each trial's US onset
is the first rising edge of the US column at or after its CS onset and before the next CS onset (no
such edge: a CS-alone trial). US pulses before the first CS are not trials.

Scoring (:func:`score_trials`; windows and criteria in :class:`~eyeblink.config.TrialConfig`)
------------------------------------------------------------------------------------------
Times are relative to CS onset on the recording's timestamps; FEC is
:mod:`eyeblink.signals.closure`'s.

* ``baseline_fec``: mean FEC over ``baseline_ms`` before CS; ``baseline_valid`` when the eye was
  open (mean <= ``baseline_max_fec``), stable (SD <= ``baseline_max_sd``) and measured (>=
  ``min_valid_fraction`` of the frames have an EAR). Percent CR counts only trials with a valid
  baseline.
* ``startle``: FEC - baseline >= ``startle_threshold`` within ``[0, startle_end_ms]`` (alpha/startle
  response to the CS itself, too early to be a learned response).
* ``cr``: in the CR window ``[cr_start_ms, ISI]`` (ISI = US onset; CS-alone trials: the median ISI
  of the session's paired trials, else the CS duration), FEC - baseline stays >= ``cr_threshold``
  for at least ``cr_min_ms``. ``cr_onset_latency_ms``: where FEC - baseline last rose through
  ``onset_threshold`` before that (not earlier than ``cr_start_ms``). ``cr_peak_amplitude`` (FEC
  above baseline; reported for every scored trial, CR or not, so that averages over all trials are
  possible) and ``cr_peak_latency_ms`` (CR trials only); ``cr_area_fec_ms``: the integral of max(0,
  FEC - baseline) over the CR window (FEC x ms).
* ``fec_at_us``: FEC at the frame nearest US onset (absolute, not baseline-subtracted).
* ``ur_amplitude``: the largest FEC - baseline in ``[US, US + ur_window_ms]``;
  ``ur_peak_latency_ms``: its time after US (the peak, because with a CR already closing the lid the
  UR's onset is not defined).
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.config import TrialConfig
from eyeblink.errors import TrialFileError

UNITS = ("s", "ms", "frame")
QUANTITIES = ("cs_onset", "us_onset", "cs_duration", "us_duration")
TEXT_COLUMNS = ("trial_type", "cs_type", "us_type")
SYNC_TIME_COLUMNS = {
    "timestamp_s": "s",
    "time_s": "s",
    "timestamp_ms": "ms",
    "time_ms": "ms",
    "frame": "frame",
}

TRIAL_COLUMNS = (
    "trial",
    "block",
    "trial_type",
    "cs_type",
    "us_type",
    "cs_onset_s",
    "us_onset_s",
    "isi_ms",
    "cs_onset_frame",
    "us_onset_frame",
    "baseline_fec",
    "baseline_sd",
    "baseline_valid_fraction",
    "baseline_valid",
    "startle",
    "startle_amplitude",
    "cr",
    "cr_onset_latency_ms",
    "cr_peak_amplitude",
    "cr_peak_latency_ms",
    "cr_area_fec_ms",
    "fec_at_us",
    "ur_amplitude",
    "ur_peak_latency_ms",
)
TRACE_COLUMNS = (
    "trial",
    "time_from_cs_ms",
    "frame",
    "timestamp_s",
    "closure",
    "closure_from_baseline",
    "ear",
)

#: Unit and one-line meaning of every ``trials.csv`` column (the docs' column reference is generated
#: from this; a column without an entry fails the docs build). Latencies are from CS onset; FEC: 0
#: open, 1 fully closed.
TRIAL_COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "trial": ("index", "trial number as in the trials file (else its row, from 1)"),
    "block": ("index", "block of trials.block_size trials, from 1 (the plots' unit)"),
    "trial_type": ("text", "as given in the trials file (default paired / cs_alone)"),
    "cs_type": ("text", "as given in the trials file"),
    "us_type": ("text", "as given in the trials file"),
    "cs_onset_s": ("s", "CS onset on the recording's clock"),
    "us_onset_s": ("s", "US onset on the recording's clock (empty: CS-alone trial)"),
    "isi_ms": ("ms", "interstimulus interval, US onset - CS onset"),
    "cs_onset_frame": ("frame", "first frame at or after the CS onset"),
    "us_onset_frame": ("frame", "first frame at or after the US onset"),
    "baseline_fec": ("FEC", "mean closure over trials.baseline_ms before the CS"),
    "baseline_sd": ("FEC", "standard deviation of the closure in the baseline window"),
    "baseline_valid_fraction": (
        "fraction",
        "share of the baseline window's frames with a measured eye",
    ),
    "baseline_valid": (
        "0/1",
        "1 when the baseline was open, stable and measured: only these trials are scored",
    ),
    "startle": (
        "0/1",
        "1 when closure rose trials.startle_threshold above baseline within trials.startle_end_ms "
        "of the CS (alpha / startle response)",
    ),
    "startle_amplitude": ("FEC", "largest closure above baseline in the startle window"),
    "cr": (
        "0/1",
        "conditioned response: closure >= baseline + trials.cr_threshold for trials.cr_min_ms in "
        "the CR "
        "window (trials.cr_start_ms to US onset)",
    ),
    "cr_onset_latency_ms": (
        "ms",
        "CR onset: where closure last rose through baseline + trials.onset_threshold, "
        "from CS onset (CR trials only)",
    ),
    "cr_peak_amplitude": (
        "FEC",
        "largest closure above baseline in the CR window (every scored trial, CR or not)",
    ),
    "cr_peak_latency_ms": ("ms", "time of that peak from CS onset (CR trials only)"),
    "cr_area_fec_ms": ("FEC x ms", "integral of max(0, closure - baseline) over the CR window"),
    "fec_at_us": (
        "FEC",
        "closure at the frame nearest US onset (absolute, not baseline-subtracted)",
    ),
    "ur_amplitude": (
        "FEC",
        "unconditioned response: largest closure above baseline in [US, US + trials.ur_window_ms]",
    ),
    "ur_peak_latency_ms": ("ms", "time of the UR peak from US onset"),
}
#: Unit and one-line meaning of every ``traces.csv`` column (closure aligned to each trial's CS
#: onset).
TRACE_COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "trial": ("index", "the trial (as trials.csv)"),
    "time_from_cs_ms": (
        "ms",
        "frame time minus CS onset (trials.trace_pre_ms before to trials.trace_post_ms after)",
    ),
    "frame": ("frame", "the frames.csv frame"),
    "timestamp_s": ("s", "the frame's timestamp"),
    "closure": ("FEC", "the frame's closure"),
    "closure_from_baseline": ("FEC", "closure minus the trial's baseline_fec"),
    "ear": ("ratio", "the frame's mean openness"),
}


# ------------------------------------------------------------------------------------------ parsing


@dataclass(frozen=True, slots=True)
class TrialRow:
    """One trial as written in the file, in the file's units (NaN = not given)."""

    trial: int
    cs_onset: float
    us_onset: float = math.nan
    cs_duration: float = math.nan
    us_duration: float = math.nan
    trial_type: str = ""
    cs_type: str = ""
    us_type: str = ""


@dataclass(frozen=True, slots=True)
class Trial:
    """One trial on the recording's clock (seconds; durations in ms; NaN = none)."""

    trial: int
    cs_onset_s: float
    us_onset_s: float = math.nan
    cs_duration_ms: float = math.nan
    us_duration_ms: float = math.nan
    trial_type: str = ""
    cs_type: str = ""
    us_type: str = ""

    def __post_init__(self) -> None:
        if not math.isfinite(self.cs_onset_s):
            raise TrialFileError(
                f"trial {self.trial}: CS onset must be a finite time, got {self.cs_onset_s}"
            )
        if self.us_onset_s < self.cs_onset_s:
            raise TrialFileError(
                f"trial {self.trial}: US onset {self.us_onset_s:.4f} s is before CS onset "
                f"{self.cs_onset_s:.4f} s; check that the CS and US columns are not swapped"
            )

    @property
    def paired(self) -> bool:
        return math.isfinite(self.us_onset_s)

    @property
    def isi_ms(self) -> float:
        return (self.us_onset_s - self.cs_onset_s) * 1000.0


@dataclass(frozen=True)
class TrialFile:
    """A parsed trials file or sync CSV: rows in the file's units, resolved per recording."""

    path: Path
    units: dict[str, str]  # quantity -> "s" | "ms" | "frame"
    rows: tuple[TrialRow, ...]
    columns: dict[str, str] = field(default_factory=dict)  # quantity -> column name as written

    def resolve(
        self, frame_times: np.ndarray | None = None, fps: float | None = None
    ) -> tuple[Trial, ...]:
        """The trials in seconds on the recording's clock.

        ``_frame`` values map to ``frame_times[frame]`` (the recorded timestamps); without them, to
        ``frame / fps``. Durations in frames use the median frame interval (or ``1 / fps``).
        """
        needs_frames = "frame" in self.units.values()
        if needs_frames and frame_times is None and fps is None:
            cols = ", ".join(self.columns[q] for q, u in self.units.items() if u == "frame")
            raise TrialFileError(
                f"{self.path} gives times in frames ({cols}) but no frame timestamps or frame "
                "rate are known; give times in seconds (e.g. cs_onset_s) or pass --fps"
            )
        frame_dt = math.nan
        if frame_times is not None and len(frame_times) > 1:
            frame_dt = float(np.median(np.diff(frame_times)))
        elif fps is not None:
            frame_dt = 1.0 / fps

        def when(q: str, v: float, row: TrialRow) -> float:
            if math.isnan(v):
                return math.nan
            unit = self.units[q]
            if unit == "s":
                return v
            if unit == "ms":
                return v / 1000.0
            if frame_times is not None:
                if not 0 <= v < len(frame_times):
                    raise TrialFileError(
                        f"{self.path} trial {row.trial}: {self.columns[q]} = {v:g} is outside the "
                        f"recording (frames 0-{len(frame_times) - 1}); check the file belongs "
                        "to this recording"
                    )
                return float(frame_times[int(v)])
            return v / fps  # type: ignore[operator]

        def length_ms(q: str, v: float) -> float:
            if math.isnan(v):
                return math.nan
            unit = self.units[q]
            return v * 1000.0 if unit == "s" else v if unit == "ms" else v * frame_dt * 1000.0

        out: list[Trial] = []
        for row in self.rows:
            us = when("us_onset", row.us_onset, row) if "us_onset" in self.units else math.nan
            out.append(
                Trial(
                    trial=row.trial,
                    cs_onset_s=when("cs_onset", row.cs_onset, row),
                    us_onset_s=us,
                    cs_duration_ms=length_ms("cs_duration", row.cs_duration)
                    if "cs_duration" in self.units
                    else math.nan,
                    us_duration_ms=length_ms("us_duration", row.us_duration)
                    if "us_duration" in self.units
                    else math.nan,
                    trial_type=row.trial_type or ("paired" if math.isfinite(us) else "cs_alone"),
                    cs_type=row.cs_type,
                    us_type=row.us_type,
                )
            )
        for prev, nxt in itertools.pairwise(out):
            if nxt.cs_onset_s <= prev.cs_onset_s:
                raise TrialFileError(
                    f"{self.path}: trial {nxt.trial}'s CS onset ({nxt.cs_onset_s:.4f} s) is not "
                    "after "
                    f"trial {prev.trial}'s ({prev.cs_onset_s:.4f} s); sort the trials by time"
                )
        return tuple(out)


def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    if not path.is_file():
        raise TrialFileError(f"trials file not found: {path} — check the path given to --trials")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrialFileError(f"cannot read trials file {path} ({exc}); give a UTF-8 CSV") from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise TrialFileError(
            f"trials file {path} is empty; it needs a header row and one row per trial"
        )
    header = lines[0]
    delim = max(",\t;", key=header.count) if any(c in header for c in ",\t;") else ","
    rows = list(csv.reader(lines, delimiter=delim))
    names = [h.strip().lower() for h in rows[0]]
    dup = sorted({n for n in names if n and names.count(n) > 1})
    if dup:
        raise TrialFileError(f"trials file {path} has duplicate columns {dup}; keep one of each")
    return names, rows[1:]


def _number(path: Path, line: int, column: str, cell: str) -> float:
    cell = cell.strip()
    if not cell:
        return math.nan
    try:
        v = float(cell)
    except ValueError:
        raise TrialFileError(
            f"{path} row {line} column {column}: {cell!r} is not a number"
        ) from None
    if math.isinf(v):
        raise TrialFileError(f"{path} row {line} column {column}: {cell!r} is not a finite number")
    return v


def read_trials(path: str | Path) -> TrialFile:
    """Parse a trials file (see the module docstring); raises :class:`TrialFileError` naming row
    and column."""
    p = Path(path)
    names, body = _read_table(p)
    columns: dict[str, str] = {}
    units: dict[str, str] = {}
    for q in QUANTITIES:
        found = [(n, u) for u in UNITS for n in (f"{q}_{u}", f"{q}_{u}s") if n in names]
        if len(found) > 1:
            raise TrialFileError(
                f"{p} has {len(found)} columns for {q} ({', '.join(n for n, _ in found)}); keep one"
            )
        if found:
            columns[q], units[q] = found[0]
        elif any(n == q or (n.startswith(q + "_") and n not in columns.values()) for n in names):
            bad = next(n for n in names if n == q or n.startswith(q + "_"))
            raise TrialFileError(
                f"{p}: column {bad!r} does not name its unit; call it {q}_s, {q}_ms or {q}_frame"
            )
    if "cs_onset" not in columns:
        raise TrialFileError(
            f"{p} has no CS onset column; name one cs_onset_s, cs_onset_ms or cs_onset_frame "
            f"(found columns: {', '.join(n for n in names if n) or 'none'})"
        )
    if not body:
        raise TrialFileError(f"trials file {p} has a header but no trials")
    idx = {n: i for i, n in enumerate(names)}
    rows: list[TrialRow] = []
    seen: set[int] = set()
    for k, cells in enumerate(body):
        line = k + 2  # 1-based, after the header
        cells = cells + [""] * (len(names) - len(cells))

        def cell(name: str, cells: list[str] = cells) -> str:
            return cells[idx[name]] if name in idx else ""

        vals: dict[str, float] = {}
        for q, col in columns.items():
            v = _number(p, line, col, cell(col))
            if not math.isnan(v):
                if v < 0:
                    raise TrialFileError(
                        f"{p} row {line} column {col}: {v:g} is negative; times are >= 0"
                    )
                if units[q] == "frame" and v != int(v):
                    raise TrialFileError(
                        f"{p} row {line} column {col}: {v:g} is not a whole frame number"
                    )
            vals[q] = v
        if math.isnan(vals["cs_onset"]):
            raise TrialFileError(
                f"{p} row {line}: {columns['cs_onset']} is empty; every trial needs a CS onset"
            )
        if (
            "us_onset" in vals
            and units["us_onset"] == units["cs_onset"]
            and vals["us_onset"] < vals["cs_onset"]
        ):
            raise TrialFileError(
                f"{p} row {line}: US onset {vals['us_onset']:g} is before CS onset "
                f"{vals['cs_onset']:g} ({units['cs_onset']}); check that the columns are not "
                "swapped"
            )
        tcell = cell("trial").strip()
        if tcell:
            tv = _number(p, line, "trial", tcell)
            if tv != int(tv):
                raise TrialFileError(
                    f"{p} row {line} column trial: {tcell!r} is not a whole number"
                )
            trial = int(tv)
        else:
            trial = len(rows) + 1
        if trial in seen:
            raise TrialFileError(
                f"{p} row {line}: trial number {trial} appears twice; number trials uniquely"
            )
        seen.add(trial)
        rows.append(
            TrialRow(
                trial,
                vals["cs_onset"],
                vals.get("us_onset", math.nan),
                vals.get("cs_duration", math.nan),
                vals.get("us_duration", math.nan),
                *(cell(c).strip() for c in TEXT_COLUMNS),
            )
        )
    tf = TrialFile(p, units, tuple(rows), columns)
    if "frame" not in units.values():
        tf.resolve()  # seconds already: check the order of trials before any frame is processed
    return tf


def rising_edges(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Indices of rising and falling crossings of the midpoint between the lowest and highest
    value."""
    v = np.asarray(values, dtype=np.float64)
    lo, hi = float(np.nanmin(v)), float(np.nanmax(v))
    thr = (lo + hi) / 2.0
    high = v >= thr
    rise = np.nonzero(~high[:-1] & high[1:])[0] + 1
    fall = np.nonzero(high[:-1] & ~high[1:])[0] + 1
    return rise, fall, thr


def read_sync(path: str | Path, cs_column: str, us_column: str | None = None) -> TrialFile:
    """Trials from TTL columns of a per-sample CSV (see the module docstring)."""
    p = Path(path)
    names, body = _read_table(p)
    tcol = next((n for n in SYNC_TIME_COLUMNS if n in names), None)
    if tcol is None:
        raise TrialFileError(
            f"sync file {p} has no time column; name one of {', '.join(SYNC_TIME_COLUMNS)} "
            f"(found: {', '.join(names)})"
        )
    wanted = [c.strip().lower() for c in (cs_column, us_column) if c]
    for c in wanted:
        if c not in names:
            raise TrialFileError(
                f"sync column {c!r} not in {p}; its columns are {', '.join(n for n in names if n)}"
            )
    if not body:
        raise TrialFileError(f"sync file {p} has a header but no samples")
    idx = {n: i for i, n in enumerate(names)}
    data = {
        c: np.array(
            [_number(p, k + 2, c, r[idx[c]] if idx[c] < len(r) else "") for k, r in enumerate(body)]
        )
        for c in (tcol, *wanted)
    }
    t = data[tcol]
    if np.isnan(t).any():
        bad = int(np.nonzero(np.isnan(t))[0][0]) + 2
        raise TrialFileError(f"{p} row {bad}: the time column {tcol} is empty")
    if np.any(np.diff(t) <= 0):
        bad = int(np.nonzero(np.diff(t) <= 0)[0][0]) + 3
        raise TrialFileError(f"{p} row {bad}: {tcol} does not increase; sort the samples by time")
    unit = SYNC_TIME_COLUMNS[tcol]
    cs = data[wanted[0]]
    if np.isnan(cs).any() or np.nanmin(cs) == np.nanmax(cs):
        raise TrialFileError(
            f"sync column {wanted[0]!r} in {p} is constant or has empty cells; "
            "no rising edges to take CS onsets from — check --sync-column"
        )
    rise, fall, _ = rising_edges(cs)
    if len(rise) == 0:
        raise TrialFileError(
            f"sync column {wanted[0]!r} in {p} has no rising edge; check --sync-column"
        )
    us_rise = (
        rising_edges(data[wanted[1]])[0]
        if len(wanted) > 1 and np.nanmin(data[wanted[1]]) < np.nanmax(data[wanted[1]])
        else np.array([], dtype=int)
    )
    rows: list[TrialRow] = []
    for k, i in enumerate(rise):
        nxt = rise[k + 1] if k + 1 < len(rise) else len(t)
        off = fall[(fall > i)]
        us = us_rise[(us_rise >= i) & (us_rise < nxt)]
        rows.append(
            TrialRow(
                trial=k + 1,
                cs_onset=float(t[i]),
                us_onset=float(t[us[0]]) if len(us) else math.nan,
                cs_duration=float(t[off[0]] - t[i]) if len(off) else math.nan,
            )
        )
    units = {"cs_onset": unit, "us_onset": unit, "cs_duration": unit}
    columns = {
        "cs_onset": f"{wanted[0]} ({tcol})",
        "us_onset": f"{wanted[-1]} ({tcol})",
        "cs_duration": f"{wanted[0]} ({tcol})",
    }
    return TrialFile(p, units, tuple(rows), columns)


# ------------------------------------------------------------------------------------------ scoring


@dataclass(frozen=True, slots=True)
class TrialResult:
    """The metrics of one trial (see the module docstring). NaN = could not be measured."""

    trial: int
    block: int
    trial_type: str
    cs_type: str
    us_type: str
    cs_onset_s: float
    us_onset_s: float
    isi_ms: float
    cs_onset_frame: int | None
    us_onset_frame: int | None
    baseline_fec: float
    baseline_sd: float
    baseline_valid_fraction: float
    baseline_valid: bool
    startle: bool
    startle_amplitude: float
    cr: bool | None
    cr_onset_latency_ms: float
    cr_peak_amplitude: float
    cr_peak_latency_ms: float
    cr_area_fec_ms: float
    fec_at_us: float
    ur_amplitude: float
    ur_peak_latency_ms: float

    def as_row(self) -> list[Any]:
        return [getattr(self, c) for c in TRIAL_COLUMNS]


def _nanmax_at(x: np.ndarray, rel: np.ndarray) -> tuple[float, float]:
    if len(x) == 0 or not np.isfinite(x).any():
        return math.nan, math.nan
    k = int(np.nanargmax(x))
    return float(x[k]), float(rel[k])


def _nearest(t: np.ndarray, when: float) -> int | None:
    if not math.isfinite(when) or len(t) == 0:
        return None
    k = int(np.searchsorted(t, when))
    cands = [i for i in (k - 1, k) if 0 <= i < len(t)]
    return min(cands, key=lambda i: abs(t[i] - when))


def _cr_onset(d: np.ndarray, rel: np.ndarray, dt_ms: float, cfg: TrialConfig) -> int | None:
    """Index (into the CR window) of the CR's onset, or None when no CR."""
    above = np.isfinite(d) & (d >= cfg.cr_threshold)
    need = max(1, math.ceil(cfg.cr_min_ms / dt_ms - 1e-9)) if dt_ms > 0 else 1
    run = 0
    for i, a in enumerate(above):
        run = run + 1 if a else 0
        if run >= need:
            first = i - run + 1
            j = first
            while j > 0 and np.isfinite(d[j - 1]) and d[j - 1] >= cfg.onset_threshold:
                j -= 1
            return j
    return None


def score_trials(
    trials: Sequence[Trial],
    t: np.ndarray,
    fec: np.ndarray,
    cfg: TrialConfig,
    frames: np.ndarray | None = None,
) -> list[TrialResult]:
    """Score every trial on the session's FEC trace (``t`` ascending seconds; ``fec`` NaN = not
    measured)."""
    t = np.asarray(t, dtype=np.float64)
    fec = np.asarray(fec, dtype=np.float64)
    frames = np.arange(len(t)) if frames is None else np.asarray(frames)
    dt_ms = float(np.median(np.diff(t))) * 1000.0 if len(t) > 1 else math.nan
    isis = [tr.isi_ms for tr in trials if tr.paired]
    session_isi = float(np.median(isis)) if isis else math.nan
    out: list[TrialResult] = []
    for n, tr in enumerate(trials):
        rel = (t - tr.cs_onset_s) * 1000.0
        isi = (
            tr.isi_ms
            if tr.paired
            else (session_isi if math.isfinite(session_isi) else tr.cs_duration_ms)
        )
        # baseline
        bmask = (rel >= -cfg.baseline_ms) & (rel < 0)
        bvals = fec[bmask]
        nb = int(bmask.sum())
        expected = cfg.baseline_ms / dt_ms if dt_ms > 0 else math.nan
        frac = float(np.isfinite(bvals).sum() / max(nb, expected)) if nb else 0.0
        if np.isfinite(bvals).any():
            base, sd = float(np.nanmean(bvals)), float(np.nanstd(bvals))
        else:
            base, sd = math.nan, math.nan
        valid = bool(
            frac >= cfg.min_valid_fraction
            and base <= cfg.baseline_max_fec
            and sd <= cfg.baseline_max_sd
        )
        d = fec - base
        # startle / alpha
        smask = (rel >= 0) & (rel <= cfg.startle_end_ms)
        s_amp, _ = _nanmax_at(d[smask], rel[smask])
        # CR window
        cr: bool | None = None
        onset_lat = peak_amp = peak_lat = area = math.nan
        if math.isfinite(isi) and math.isfinite(base) and isi > cfg.cr_start_ms:
            cmask = (rel >= cfg.cr_start_ms) & (rel <= isi)
            dc, rc = d[cmask], rel[cmask]
            if len(dc) and np.isfinite(dc).sum() >= cfg.min_valid_fraction * len(dc):
                peak_amp, lat = _nanmax_at(dc, rc)
                k = _cr_onset(dc, rc, dt_ms, cfg)
                cr = k is not None
                if cr:
                    onset_lat, peak_lat = float(rc[k]), lat
                pos = np.where(np.isfinite(dc), np.maximum(dc, 0.0), 0.0)
                area = (
                    float(np.sum((pos[1:] + pos[:-1]) * np.diff(rc)) / 2.0) if len(dc) > 1 else 0.0
                )
        # US and UR
        us_idx = _nearest(t, tr.us_onset_s)
        if us_idx is not None and abs(t[us_idx] - tr.us_onset_s) * 1000.0 > 1.5 * dt_ms:
            us_idx = None  # no frame near the US (outside the recording or in a gap)
        fec_us = float(fec[us_idx]) if us_idx is not None else math.nan
        ur_amp = ur_lat = math.nan
        if tr.paired:
            umask = (t >= tr.us_onset_s) & (t <= tr.us_onset_s + cfg.ur_window_ms / 1000.0)
            ur_amp, ur_at = _nanmax_at(d[umask], rel[umask])
            ur_lat = ur_at - tr.isi_ms if math.isfinite(ur_at) else math.nan
        cs_idx = _nearest(t, tr.cs_onset_s)
        if cs_idx is not None and abs(t[cs_idx] - tr.cs_onset_s) * 1000.0 > 1.5 * dt_ms:
            cs_idx = None
        out.append(
            TrialResult(
                trial=tr.trial,
                block=n // cfg.block_size + 1,
                trial_type=tr.trial_type,
                cs_type=tr.cs_type,
                us_type=tr.us_type,
                cs_onset_s=tr.cs_onset_s,
                us_onset_s=tr.us_onset_s,
                isi_ms=tr.isi_ms if tr.paired else math.nan,
                cs_onset_frame=int(frames[cs_idx]) if cs_idx is not None else None,
                us_onset_frame=int(frames[us_idx]) if us_idx is not None else None,
                baseline_fec=base,
                baseline_sd=sd,
                baseline_valid_fraction=frac,
                baseline_valid=valid,
                startle=bool(math.isfinite(s_amp) and s_amp >= cfg.startle_threshold),
                startle_amplitude=s_amp,
                cr=cr,
                cr_onset_latency_ms=onset_lat,
                cr_peak_amplitude=peak_amp,
                cr_peak_latency_ms=peak_lat,
                cr_area_fec_ms=area,
                fec_at_us=fec_us,
                ur_amplitude=ur_amp,
                ur_peak_latency_ms=ur_lat,
            )
        )
    return out


def trial_traces(
    trials: Sequence[Trial],
    results: Sequence[TrialResult],
    t: np.ndarray,
    fec: np.ndarray,
    ear: np.ndarray,
    cfg: TrialConfig,
    frames: np.ndarray | None = None,
) -> list[list[Any]]:
    """Rows of ``traces.csv`` (TRACE_COLUMNS): each frame from ``trace_pre_ms`` before to
    ``trace_post_ms`` after CS."""
    t = np.asarray(t, dtype=np.float64)
    frames = np.arange(len(t)) if frames is None else np.asarray(frames)
    rows: list[list[Any]] = []
    for tr, res in zip(trials, results, strict=True):
        lo = np.searchsorted(t, tr.cs_onset_s - cfg.trace_pre_ms / 1000.0, side="left")
        hi = np.searchsorted(t, tr.cs_onset_s + cfg.trace_post_ms / 1000.0, side="right")
        for i in range(lo, hi):
            rel = (t[i] - tr.cs_onset_s) * 1000.0
            rows.append(
                [
                    tr.trial,
                    rel,
                    int(frames[i]),
                    float(t[i]),
                    float(fec[i]),
                    float(fec[i] - res.baseline_fec),
                    float(ear[i]),
                ]
            )
    return rows


def session_summary(results: Sequence[TrialResult]) -> dict[str, Any]:
    """Percent CR and mean CR measures over the trials with a valid baseline (summary.json
    ``trials``)."""
    scored = [r for r in results if r.baseline_valid and r.cr is not None]
    crs = [r for r in scored if r.cr]

    def mean(vals: Sequence[float]) -> float | None:
        v = [x for x in vals if math.isfinite(x)]
        return float(np.mean(v)) if v else None

    return {
        "trials": len(results),
        "paired_trials": sum(math.isfinite(r.us_onset_s) for r in results),
        "baseline_valid_trials": sum(r.baseline_valid for r in results),
        "scored_trials": len(scored),
        "cr_trials": len(crs),
        "percent_cr": 100.0 * len(crs) / len(scored) if scored else None,
        "mean_cr_amplitude": mean([r.cr_peak_amplitude for r in crs]),
        "mean_cr_onset_latency_ms": mean([r.cr_onset_latency_ms for r in crs]),
        "mean_cr_peak_latency_ms": mean([r.cr_peak_latency_ms for r in crs]),
        "mean_fec_at_us": mean([r.fec_at_us for r in scored]),
        "mean_ur_amplitude": mean([r.ur_amplitude for r in results]),
        "startle_trials": sum(r.startle for r in results),
    }
