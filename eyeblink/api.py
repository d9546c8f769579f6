"""The Python API: :func:`process`, :func:`load` and :func:`live` (``import eyeblink``).

The command line is a thin layer over the same functions: ``eyeblink process`` calls :func:`run_process`, as
:func:`process` does, so the two write byte-identical files for the same settings; ``eyeblink live`` and
:func:`live` share :func:`eyeblink.runtime.live.prepare` and ``finish``.

Settings are keywords with the names of the presets (``pipelines/*.toml``) and the same checks: a key of one
section by its own name (``detect_every=4``, ``close_ratio=0.75``, ``mesh_reuse_ms=0``), a whole section as a
dict (``blinks={"smooth_ms": 5}``, needed for the names two sections share: ``model_path``, ``smooth_ms``), the
command line's names for the same things (``landmarks="mesh-ear"``, ``threads``, ``face_model``,
``landmark_model``, ``min_blink_ms``, ``calibration``), ``pipeline`` (a preset name or TOML path), ``fps``,
``max_frames`` and ``points`` (``True``: also ``<stem>.points.csv``, the eye points and head pose per frame, as
``--points``). A wrong one raises :class:`SettingsError` (a :class:`ValueError`) whose text is the line the CLI
prints after ``eyeblink: error:``, in Python's words for :func:`process` (:func:`python_words`: ``workers=2``
where the CLI says ``--workers 2``; the type given where it was wrong; a suggestion for every unknown keyword).

Results are :class:`Session` objects: ``frames``, ``blinks`` and ``trials`` as pandas DataFrames (the CSV
contract's columns, dtypes and units: ``df.attrs["units"]``), ``summary`` as a dict and the paths written.
pandas is the ``api`` extra (``pip install 'eyeblink[api]'``); the command line does not need it.

This module imports only the standard library and the light config at import time (``import eyeblink`` stays
light); pandas, PyAV, LiteRT and the runtime load inside the functions that use them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.config import (
    LIVE_RANGES,
    BlinkConfig,
    ClosureConfig,
    DetectConfig,
    LandmarkConfig,
    LiveConfig,
    RunConfig,
    TrialConfig,
)
from eyeblink.errors import ConfigError, EyeblinkError, InputNotFoundError, MissingExtraError, one_line
from eyeblink.runtime.publish import LiveRow  # stdlib only: what a live session yields
from eyeblink.signals.state import EyeState, StateChange  # the eye's state (one definition, the detector's)

if TYPE_CHECKING:
    import pandas as pd

    from eyeblink.outputs.analysis import AnalysisOptions
    from eyeblink.outputs.session import RunResult
    from eyeblink.runtime.live import LivePipeline, _LiveRun
    from eyeblink.runtime.publish import LiveTap
    from eyeblink.signals.blinks import BlinkEvent

__all__ = ["CorrectionsWarning", "EyeState", "LiveRow", "LiveSession", "Session", "SessionDamageWarning",
           "SettingsError", "StateChange",
           "check_workers", "live", "load", "process", "process_workers", "progress_factory", "run_process"]

#: the config sections a setting can name, as in the presets
SECTIONS: dict[str, type] = {"detect": DetectConfig, "landmarks": LandmarkConfig, "blinks": BlinkConfig,
                             "closure": ClosureConfig, "trials": TrialConfig}
#: the command line's names for preset keys
ALIASES: dict[str, tuple[str, str]] = {
    "landmarks": ("landmarks", "model"), "landmark_model": ("landmarks", "model_path"),
    "face_model": ("detect", "model_path"), "threads": ("detect", "num_threads"),
    "min_blink_ms": ("blinks", "min_duration_ms"), "calibration": ("closure", "calibration_s"),
}
#: settings of what to do after each input (``eyeblink process``'s conditioning options)
ANALYSIS = ("trials", "sync_column", "us_sync_column", "plots", "nwb")
#: settings of :func:`process` only
PROCESS_ONLY = ("workers", "loaders", "progress", "report", "view", "view_port", "view_host")
#: settings of :func:`live` only (besides :class:`~eyeblink.config.LiveConfig`'s fields)
LIVE_ONLY = ("name", "reconnect", "stream_options", "read_timeout_s", "report", "on_frame", "on_blink", "on_state")


class SettingsError(ConfigError, ValueError):
    """A wrong setting: the one line the CLI prints (``eyeblink: error: <this text>``)."""


# ------------------------------------------------------------------------------------------ results


@dataclass
class Session:
    """One processed input (or live session): its tables, summary and files.

    ``frames``, ``blinks`` and ``trials`` (empty without a trials file) are pandas DataFrames with the CSV
    contract's columns; integer columns are ``int64`` (``Int64`` where a cell can be empty), 0/1 flags of
    blinks (``complete``, ``partial``) ``bool``, everything else ``float64`` (NaN = an empty cell, "not
    measured") or text. ``df.attrs["units"]`` maps each column to its unit. ``paths`` holds the files
    written (empty when the run kept everything in memory, ``output=None``).
    """

    stem: str
    frames: pd.DataFrame
    blinks: pd.DataFrame
    trials: pd.DataFrame
    summary: dict[str, Any]
    paths: dict[str, Path] = field(default_factory=dict)
    #: damage :func:`load` left out (a cut last row, a missing file), one line each; empty for a whole session
    notes: list[str] = field(default_factory=list)

    def write_report(self, output: str | Path | None = None) -> Path:
        """Write the self-contained HTML report of this session (``eyeblink report OUTDIR/<stem>``): to
        ``<stem>.report.html`` beside its files, or to ``output``; returns its path. Needs the session's files
        (a session processed with ``output=None`` has none: process it into a folder)."""
        from eyeblink.outputs.report import write_report

        if "frames" not in self.paths:
            raise InputNotFoundError(f"session {self.stem!r} has no files (processed with output=None); process "
                                     "it with output=FOLDER to write its report")
        path = write_report(self.paths["frames"].parent / self.stem, output)
        self.paths["report"] = path
        return path

    def plot(self, start_s: float | None = None, end_s: float | None = None) -> Any:
        """The session in one matplotlib figure: each eye's openness and the closure (FEC) against time, the
        blinks shaded (in a corrected session by ``source``), each trial's CS and US marked (excluded trials
        grey). ``start_s``/``end_s``: the seconds to show (default: the whole session). Returns the
        :class:`matplotlib.figure.Figure` (``fig.savefig("session.png")``; a notebook with ``%matplotlib inline``
        shows it). Needs the ``plots`` extra (matplotlib)."""
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise MissingExtraError("Session.plot needs matplotlib, which is not installed; "
                                    "pip install 'eyeblink[plots]' (or pip install matplotlib)") from None
        from eyeblink.outputs.plots import session_figure

        f = self.frames

        def col(name: str) -> Any:
            import numpy as np

            return f[name].to_numpy(dtype="float64", na_value=np.nan) if name in f else np.full(len(f), np.nan)

        return session_figure(col("timestamp_s"), col("ear_left"), col("ear_right"), col("closure"),
                              self.blinks.to_dict("records"), self.trials.to_dict("records"),
                              f"{self.stem}: {len(self.blinks)} blinks"
                              + (f", {len(self.trials)} trials" if len(self.trials) else ""),
                              start_s=start_s, end_s=end_s)

    def __repr__(self) -> str:
        damage = f", {len(self.notes)} damage notes" if self.notes else ""
        return (f"Session({self.stem!r}: {len(self.frames)} frames, {len(self.blinks)} blinks, "
                f"{len(self.trials)} trials, status {self.summary.get('status')!r}{damage})")


#: whole-number columns, never empty: int64
_INT_COLUMNS = {"frame", "face", "detected", "dropped", "blink", "start_frame", "end_frame", "peak_frame", "trial",
                "block"}
#: whole-number columns that can be empty (an eye never measured, a trial without a US): pandas' Int64
_NULLABLE_INT_COLUMNS = {"start_frame_left", "end_frame_left", "start_frame_right", "end_frame_right",
                         "cs_onset_frame", "us_onset_frame"}
#: 0/1 flags: bool (``boolean`` where a cell can be empty)
_BOOL_COLUMNS = {"complete", "partial", "baseline_valid", "startle", "cr", "excluded"}
#: text columns: pandas strings
_TEXT_COLUMNS = {"cue", "kind", "trial_type", "cs_type", "us_type", "source"}
_UNITS = {"frame": "frame", "face": "0/1", "detected": "0/1", "dropped": "0/1", "blink": "count",
          "closure": "FEC (0 open .. 1 closed)", "face_score": "score (0..1)", "amplitude": "fraction",
          "cue": "text", "kind": "text"}


def _unit(col: str) -> str:
    if col in _UNITS:
        return _UNITS[col]
    if "frame" in col:
        return "frame"
    if col.endswith("_ms") or "_ms_" in col:
        return "ms"
    if col.endswith("_s") or "_s_" in col:
        return "s"
    if col.startswith("face_") and col[-2:] in ("x0", "y0", "x1", "y1"):
        return "px"
    if "ear" in col:  # the lid aperture of mesh/lids or the six-point EAR, by model: both a ratio
        return "ratio (eye openness)"
    if "velocity" in col:
        return "ratio/s"
    if "amplitude" in col:
        return "fraction"
    if "fec" in col or col.startswith("cr_") or col.startswith("ur_"):
        return "FEC"
    return ""


def _require_pandas() -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise MissingExtraError("the Python API's tables need pandas, which is not installed; "
                                "pip install 'eyeblink[api]' (or pip install pandas)") from None
    return pd


#: the columns a session file must have to be read (the output contract's "at least"); a renamed one is damage
_REQUIRED = {"frames": ("frame", "timestamp_s", "face", "ear_left", "ear_right"),
             "blinks": ("start_frame", "end_frame", "start_s", "end_s", "duration_ms"),
             "trials": ("trial",)}
_RERUN = "the file is damaged or not an eyeblink output: re-run `eyeblink process` on the recording to write it again"


class SessionDamageWarning(UserWarning):
    """A session was loaded with damage left out (a last row cut off mid-row, a missing file); the text says
    what, and :attr:`Session.notes` lists it."""


class CorrectionsWarning(UserWarning):
    """A session's ``<stem>.corrections.json`` holds decisions that match no detected blink any more (a rerun
    with other settings); they are kept in the file and listed in ``summary["corrections"]["unmatched"]``."""


def _bad_cell(path: Path, row: int, col: str, value: str, want: str) -> ConfigError:
    return ConfigError(f"{path}: row {row + 2}, column {col!r}: {value[:40]!r} is not {want}; {_RERUN}")


def _table(path: Path, kind: str, columns: Sequence[str] = (), text: str | None = None
           ) -> tuple[pd.DataFrame, list[str]]:
    """A CSV of the output contract (the file at ``path``, or ``text``: a table the session's corrections made from
    it) as a DataFrame with fixed dtypes per column (the same for every session,
    whatever its values) and the damage left out (notes); an absent file: an empty frame with ``columns``.

    Checked as ``eyeblink report`` checks it (:func:`eyeblink.outputs.report.read_rows`): the contract's columns
    are there, every row has its header's cells, a number column holds numbers (a 0/1 flag 0 or 1, a whole-number
    column whole numbers), else a :class:`~eyeblink.errors.ConfigError` naming the file, row and column. A last
    row cut off mid-row (a copy or a disk that ended there) is left out and named in the notes."""
    import numpy as np

    from eyeblink.outputs.report import read_rows

    pd = _require_pandas()
    if text is None and not path.is_file():
        df = pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})
        df.attrs["units"] = {c: _unit(c) for c in df.columns}
        return df, []
    if text is not None:
        import csv
        import io

        header, *body = list(csv.reader(io.StringIO(text)))
        notes: list[str] = []
    else:
        header, body, notes = read_rows(path, _REQUIRED.get(kind, ()), f"{kind}.csv")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise ConfigError(f"{path} has the column {twice[0]!r} twice; {_RERUN}")
    raw = pd.DataFrame(body, columns=header, dtype=object) if body else pd.DataFrame(
        {c: pd.Series(dtype=object) for c in header})
    df = pd.DataFrame(index=raw.index)
    for col in header:
        s = raw[col].astype(object)
        empty = (s == "").to_numpy(dtype=bool)
        if col in _TEXT_COLUMNS:
            df[col] = s.where(~empty, None).astype("string")
            continue
        num = pd.to_numeric(s.where(~empty, None), errors="coerce").to_numpy(dtype="float64")
        bad = ~empty & ~np.isfinite(num)
        if col in _BOOL_COLUMNS:
            bad |= ~empty & ~np.isin(num, (0.0, 1.0))
            want = "0 or 1"
        elif col in _INT_COLUMNS or col in _NULLABLE_INT_COLUMNS:
            bad |= ~empty & np.isfinite(num) & (num != np.round(num))
            want = "a whole number"
        else:
            want = "a number"
        if bad.any():
            i = int(bad.nonzero()[0][0])
            raise _bad_cell(path, i, col, str(s.iloc[i]), want)
        values = pd.Series(num, index=raw.index)
        if col in _BOOL_COLUMNS:
            df[col] = values.astype(bool) if not empty.any() else values.astype("boolean")
        elif col in _INT_COLUMNS:
            df[col] = values.astype("int64") if not empty.any() else values.astype("Int64")
        elif col in _NULLABLE_INT_COLUMNS:
            df[col] = values.astype("Int64")
        else:  # every measure is float64, also where this session's values happen to be whole numbers
            df[col] = values
    df.attrs["units"] = {c: _unit(c) for c in df.columns}
    return df, notes


def load(session: str | Path) -> Session:
    """Read a finished session back: ``load("results/session1")`` (``OUTDIR/<stem>``, or any of its files).

    The same object :func:`process` returns, from ``<stem>.frames.csv``, ``.blinks.csv``, ``.summary.json`` and
    ``.trials.csv`` (when the session has trials). Every file is checked as ``eyeblink report`` checks it: a
    damaged session raises :class:`~eyeblink.errors.ConfigError` in one line naming the file, the row and the
    column (a cell that is not a number, a renamed column, a row with too many cells, a summary that is not a
    JSON object); a last row cut off mid-row is left out, counted in :attr:`Session.notes` and warned about
    (:class:`SessionDamageWarning`), never read as a half row. A ``<stem>.corrections.json`` beside them (saved
    from the report) is applied as ``eyeblink report`` applies it, in memory (no file is written): ``blinks`` has
    the ``source`` column, ``trials`` the ``excluded`` one, ``summary["corrections"]`` the counts.
    """
    import json
    import warnings

    from eyeblink.outputs.export import FRAME_COLUMNS
    from eyeblink.outputs.report import split_stem
    from eyeblink.signals.blinks import BLINK_COLUMNS

    outdir, stem = split_stem(session)
    summary_path = outdir / f"{stem}.summary.json"
    if not summary_path.is_file():
        raise InputNotFoundError(f"no session {stem!r} in {outdir}: {summary_path.name} not found — give "
                                 "OUTDIR/<stem> of a processed session")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputNotFoundError(f"{summary_path} is not a readable summary ({one_line(exc)})") from None
    if not isinstance(summary, dict):
        raise ConfigError(f"{summary_path} holds a JSON {type(summary).__name__}, not the summary object; {_RERUN}")
    paths = {k: outdir / f"{stem}.{suffix}" for k, suffix in (
        ("frames", "frames.csv"), ("blinks", "blinks.csv"), ("summary", "summary.json"), ("trials", "trials.csv"),
        ("traces", "traces.csv"), ("nwb", "nwb"), ("report", "report.html"), ("points", "points.csv"))}
    paths = {k: p for k, p in paths.items() if p.is_file()}
    frames, n1 = _table(outdir / f"{stem}.frames.csv", "frames", FRAME_COLUMNS)
    blinks, n2 = _table(outdir / f"{stem}.blinks.csv", "blinks", BLINK_COLUMNS)
    trials, n3 = _table(outdir / f"{stem}.trials.csv", "trials")
    notes = [*n1, *n2, *n3]
    for kind in ("frames", "blinks"):
        if kind not in paths:
            notes.append(f"{stem}.{kind}.csv is missing: its table is empty")
    for note in notes:
        warnings.warn(f"eyeblink.load({str(outdir / stem)!r}): {note}", SessionDamageWarning, stacklevel=2)
    from eyeblink.outputs.corrections import apply_session, corrections_path, csv_text, unmatched_message

    applied = apply_session(outdir, stem, write=False)  # <stem>.corrections.json, applied as report/process do
    if applied is not None:
        paths["corrections"] = corrections_path(outdir, stem)
        unmatched = applied.summary["corrections"]["unmatched"]
        if unmatched:  # as report and process say it
            warnings.warn(f"eyeblink.load({str(outdir / stem)!r}): "
                          + unmatched_message(stem, paths["corrections"], unmatched), CorrectionsWarning, stacklevel=2)
        summary = applied.summary
        blinks, _ = _table(outdir / f"{stem}.blinks.csv", "blinks",
                           text=csv_text(applied.blink_header, applied.blinks))
        if applied.trial_header:
            trials, _ = _table(outdir / f"{stem}.trials.csv", "trials",
                               text=csv_text(applied.trial_header, applied.trials))
    return Session(stem, frames, blinks, trials, summary, paths, notes)


def agree(session: str | Path, corrections: Sequence[str | Path] = (), *, reference: str | Path | None = None,
          tier: str | None = None) -> dict[str, Any]:
    """Agreement of two scorings of a session's blinks, as ``eyeblink agree`` prints it: the detector against
    the session's ``<stem>.corrections.json`` (or the one file in ``corrections``), or the second of two
    raters' files against the first; a folder: every session with corrections, and ``total`` pooled. With
    ``reference`` (an ELAN ``.eaf``) and ``tier``: the detector (or the one corrections file) against that tier.

    Returns ``{"sessions": [{"events": {precision, recall, f1, onset_diff_mean_ms, ...}, "trials": [...]}],
    "total": {...}}`` (see :mod:`eyeblink.outputs.agreement`).
    """
    from eyeblink.outputs.agreement import agree_sessions

    return agree_sessions(session, corrections, reference=reference, tier=tier)


# ------------------------------------------------------------------------------------------ settings


def _is_number(value: Any) -> bool:
    """An int or a float (not a bool): a live setting whose range :func:`eyeblink.config.check_range` checks."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_ok(value: Any, default: Any) -> str | None:
    """What ``value`` should be, when it is not what the preset key ``default`` is (None: fine)."""
    if value is None:
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "a whole number"
    if isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else "a number"
    if isinstance(default, str):
        return None if isinstance(value, str) else "text"
    return None


_PROTOTYPES = (("bool", False), ("int", 0), ("float", 0.0), ("str", ""))


def _field_defaults(cls: type) -> dict[str, Any]:
    """Each field of a config dataclass -> a value of its type (for a ``None`` default: one of the annotation's
    first type, ``float | None`` -> 0.0), which :func:`_type_ok` compares a setting with."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        if out.get(f.name) is None:
            kind = str(f.type).split("|")[0].strip()
            out[f.name] = next((v for name, v in _PROTOTYPES if kind == name), None)
    return out


def _flat_keys() -> tuple[dict[str, str], set[str]]:
    """Each preset key -> its section, and the keys more than one section has (they need the section's dict)."""
    owner: dict[str, str] = {}
    shared: set[str] = set()
    for section, cls in SECTIONS.items():
        for name in (f.name for f in dataclasses.fields(cls)):
            if name in owner:
                shared.add(name)
            owner[name] = section
    for name in shared:
        owner.pop(name, None)
    return owner, shared


def _unknown(key: str, known: Sequence[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]}=?" if close else "use a preset key (e.g. detect_every, close_ratio) " \
                                                       "or a section dict (e.g. blinks={...})"
    return ConfigError(f"unknown setting {key!r}: {hint}")


def _run_config(settings: dict[str, Any], allowed: Sequence[str]) -> tuple[RunConfig, dict[str, Any]]:
    """The :class:`RunConfig` of ``settings`` (the preset, then the keys that override it, as the CLI applies
    its flags) and the settings that are not config keys (only names in ``allowed``)."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    settings = dict(settings)
    cfg = load_preset(resolve_preset(str(settings.pop("pipeline", "cpu"))))
    owner, shared = _flat_keys()
    overrides: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    top: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in settings.items():
        if key in SECTIONS and isinstance(value, dict):
            valid = _field_defaults(SECTIONS[key])
            for k, v in value.items():
                if k not in valid:
                    raise _unknown(f"{key}.{k}", [f"{key}.{n}" for n in valid])
                overrides[key][k] = v
        elif key in SECTIONS and key not in ALIASES:
            raise ConfigError(f"{key} must be a dict of [{key}] settings (e.g. {key}={{...}}), got "
                              f"{type(value).__name__} {value!r}")
        elif key in ALIASES and not isinstance(value, dict):
            alias_section, name = ALIASES[key]
            overrides[alias_section][name] = str(value) if name == "model_path" and isinstance(value, Path) else value
        elif key in owner and key not in allowed:
            overrides[owner[key]][key] = value
        elif key in ("fps", "max_frames", "points"):
            top[key] = value
        elif key in allowed:
            rest[key] = value
        elif key in shared:
            sections = [s for s, c in SECTIONS.items() if key in _field_defaults(c)]
            raise ConfigError(f"setting {key!r} is ambiguous: it is a key of {' and '.join(sections)}; give it "
                              f"in its section, e.g. {sections[0]}={{{key!r}: ...}}")
        else:
            raise _unknown(key, [*owner, *SECTIONS, *ALIASES, "fps", "max_frames", "points", "pipeline", "output",
                                 *allowed])
    for section, values in overrides.items():
        defaults = _field_defaults(SECTIONS[section])
        for k, v in values.items():
            want = _type_ok(v, defaults[k])
            if want is not None:
                raise ConfigError(f"{section}.{k} must be {want}, got {type(v).__name__} {v!r}")
        if section == "closure" and values.get("calibration_s") is not None:
            values["calibration_s"] = tuple(values["calibration_s"])
        try:
            cfg = cfg.with_overrides(section, **values)
        except TypeError as exc:
            raise ConfigError(f"[{section}] {exc}") from None
    for k, v in top.items():
        if k in LIVE_RANGES and _is_number(v):
            continue  # its range, infinity included: the check the CLI's --fps goes through (config.check_range)
        want = _type_ok(v, {"fps": 1.0, "points": False}.get(k, 1))
        if want is not None:
            raise ConfigError(f"{k} must be {want}, got {type(v).__name__} {v!r}")
    cfg = dataclasses.replace(cfg, fps=top.get("fps"), max_frames=top.get("max_frames"),
                              points=bool(top.get("points", False)))
    return cfg, rest


def _analysis(rest: dict[str, Any]) -> AnalysisOptions:
    from eyeblink.outputs.analysis import AnalysisOptions

    trials = rest.pop("trials", None)
    sync, us_sync = rest.pop("sync_column", None), rest.pop("us_sync_column", None)
    return AnalysisOptions(trials=Path(trials) if trials else None, sync_column=sync, us_sync_column=us_sync,
                           plots=bool(rest.pop("plots", False)), nwb=bool(rest.pop("nwb", False)))


#: a command-line flag in an error's text, with its value when one follows (a number, a path, a quoted text)
_FLAG = re.compile(r"(?<![\w-])(--?)([a-z][a-z0-9-]*)(?: ([-\w./:]*[\d./][-\w./:]*|'[^']*'))?")
#: flags whose keyword of :func:`process` is not the flag's name with underscores
_FLAG_KEYWORDS = {"o": "output", "no-progress": "progress"}


def _process_keywords() -> set[str]:
    """Every keyword :func:`process` takes (its settings, the analysis and process-only ones, ``output``)."""
    owner, _shared = _flat_keys()
    return {*owner, *SECTIONS, *ALIASES, *ANALYSIS, *PROCESS_ONLY, "fps", "max_frames", "pipeline", "output"}


def python_words(text: str) -> str:
    """``text`` (an error of the command line's checks) in the words of :func:`process`: each flag that is a
    keyword becomes the keyword (``--workers 2`` -> ``workers=2``, ``give --fps`` -> ``give fps=...``,
    ``-o`` -> ``output=...``); other words are kept. The CLI prints the flags, the API names its keywords."""
    known = _process_keywords()

    def keyword(m: re.Match[str]) -> str:
        dashes, flag, value = m.groups()
        if dashes == "-" and flag != "o":
            return m.group(0)
        name = _FLAG_KEYWORDS.get(flag, flag.replace("-", "_"))
        if name not in known:
            return m.group(0)
        if flag == "no-progress":
            return "progress=False"
        if value is not None:
            return f"{name}={value}"
        return name if m.string.startswith(" must", m.end()) else f"{name}=..."

    # a command quoted in backticks (the run that holds a session) is kept as it was typed
    return "`".join(part if i % 2 else _FLAG.sub(keyword, part) for i, part in enumerate(text.split("`")))


@contextlib.contextmanager
def _settings_errors(python: bool = False) -> Iterator[None]:
    """A :class:`ConfigError` of the settings -> :class:`SettingsError` with the CLI's one-line text, or, with
    ``python``, that text in keyword words (:func:`python_words`)."""
    try:
        yield
    except SettingsError as exc:
        if not python:
            raise
        raise SettingsError(python_words(str(exc))) from None
    except ConfigError as exc:
        raise SettingsError(python_words(one_line(exc)) if python else one_line(exc)) from None


@contextlib.contextmanager
def _python_errors() -> Iterator[None]:
    """An :class:`~eyeblink.errors.EyeblinkError` of a run, its text in keyword words (same class, same exit
    status); one that cannot be rebuilt from its text is raised as it is."""
    try:
        yield
    except EyeblinkError as exc:
        text = python_words(str(exc))
        if text == str(exc):
            raise
        try:
            again = type(exc)(text)
        except TypeError:
            raise exc from None
        again.__dict__.update(exc.__dict__)
        raise again from None


#: the types of :func:`process`'s own keywords (the config keys are checked by :func:`_type_ok`), by name
_KEYWORD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "workers": ((int, type(None)), "an int or None"),
    "loaders": ((int,), "an int"),
    "progress": ((bool,), "a bool"),
    "report": ((bool,), "a bool"),
    "view": ((bool,), "a bool"),
    "view_port": ((int,), "an int (0: any free port)"),
    "view_host": ((str,), "a str (an IP address of this machine)"),
    "plots": ((bool,), "a bool"),
    "nwb": ((bool,), "a bool"),
    "trials": ((str, Path, type(None)), "a str or pathlib.Path (a file or a folder) or None"),
    "sync_column": ((str, type(None)), "a str (a column name) or None"),
    "us_sync_column": ((str, type(None)), "a str (a column name) or None"),
    "pipeline": ((str, Path), "a str (a preset name) or a pathlib.Path (a TOML file)"),
}


def _check_keyword_types(settings: dict[str, Any]) -> None:
    """Refuse a keyword of :func:`process` whose value has the wrong type, naming the keyword, the type wanted
    and the type given (``workers="2"``: ``workers must be an int or None, got str '2'``)."""
    for name, value in settings.items():
        if name not in _KEYWORD_TYPES:
            continue
        types, want = _KEYWORD_TYPES[name]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise SettingsError(f"{name} must be {want}, got {type(value).__name__} {value!r}")


# ------------------------------------------------------------------------------------------ process


def check_workers(requested: int | None) -> None:
    """``--workers`` within 0..4 x the CPUs (:func:`eyeblink.config.check_worker_count`, which live settings use
    too)."""
    from eyeblink.config import check_worker_count

    check_worker_count(requested)


def process_workers(requested: int | None, cfg: RunConfig, physical_cores: Callable[[], int]) -> int:
    """Worker processes for ``process``: physical cores by default; 1 with an accelerator backend that does
    not run in the accelerator stage.

    The TensorFlow, JAX and Poplar runtimes are not fork-safe (a worker forked after the parent has loaded
    the backend hangs), and on an accelerator the networks are meant to run in one batching process, not
    one copy per worker. With ``detect.stage`` = ``accelerator`` (``auto`` for ``jax`` and ``tensorflow``)
    that process is the accelerator stage of the multiprocess pipeline and the workers post-process; the
    ``ipu`` backend, and a Keras backend with ``--stage fused``, run in one process.
    """
    from eyeblink.detect import BackendName

    check_workers(requested)
    accelerated = str(cfg.detect.backend).strip().lower() in (
        BackendName.TENSORFLOW.value, BackendName.JAX.value, BackendName.IPU.value)
    if not accelerated or cfg.detect.accelerator_stage:
        return int(physical_cores()) if requested is None else requested
    if requested is not None and requested > 1:
        raise ConfigError(f"--workers {requested} is not supported with the {cfg.detect.backend!r} backend and "
                          f"--stage {cfg.detect.stage} (its runtime is not fork-safe); use --workers 1, "
                          "--stage accelerator (jax, tensorflow) or the litert backend")
    return 1


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (a notebook, JupyterLab, VS Code's or Colab's): IPython is loaded
    and its shell has a kernel. There stderr is no terminal, yet the cell shows a progress bar."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except AttributeError:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_factory(show: bool) -> Any:
    """A tqdm progress bar per input when ``show`` and stderr is a terminal or this runs in a notebook (a
    widget where ipywidgets is installed, else text in the cell), else None."""
    notebook = show and in_notebook()
    if not show or not (notebook or sys.stderr.isatty()):
        return None
    if notebook:
        import importlib.util

        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.notebook import tqdm
        else:
            from tqdm import tqdm
    else:
        from tqdm import tqdm

    def make(name: str, total: int | None) -> Any:
        return tqdm(total=total, desc=name, unit="frame", dynamic_ncols=True, leave=False)

    return make


def run_process(paths: Sequence[Path], outdir: Path, cfg: RunConfig, *, workers: int | None = None,
                loaders: int = 0, analysis: AnalysisOptions | None = None, progress: Any = None,
                report: bool = False, view: Any = None) -> tuple[list[RunResult], list[tuple[Path, EyeblinkError]]]:
    """What ``eyeblink process`` and :func:`process` both run: every input into ``outdir``, finalized (FEC,
    trials, plots, NWB as ``analysis`` asks), with ``<stem>.report.html`` when ``report``; returns the results
    and the per-input failures (the other inputs still run)."""
    from eyeblink.runtime.parallel import physical_cores
    from eyeblink.runtime.runner import process_paths, report_writer

    if report:  # keep the eye crops of each blink for the report's table
        cfg = dataclasses.replace(cfg, eye_crops=True)
    from eyeblink.outputs.corrections import corrections_path, read_corrections

    for p in paths:  # a rerun applies the reviewer's corrections: a file it cannot read stops it before any frame
        stem = p.name if p.is_dir() else p.stem
        if corrections_path(outdir, stem).is_file():
            read_corrections(corrections_path(outdir, stem), stem)

    results, failures = process_paths(list(paths), outdir, cfg, progress=progress,
                                      workers=process_workers(workers, cfg, physical_cores), loaders=loaders,
                                      analysis=analysis, then=report_writer(outdir) if report else None, view=view)
    return results, failures


@contextlib.contextmanager
def _output_dir(output: str | Path | None) -> Iterator[Path]:
    if output is not None:
        yield Path(output)
        return
    with tempfile.TemporaryDirectory(prefix="eyeblink-") as tmp:
        yield Path(tmp)


def _input_paths(path_or_paths: Any) -> list[Path]:
    """The inputs of :func:`process` as paths; anything but a path or a list of paths is a :class:`SettingsError`
    naming the argument and the type given."""
    if isinstance(path_or_paths, (str, Path)):
        return [Path(path_or_paths)]
    items = list(path_or_paths) if isinstance(path_or_paths, (list, tuple)) else None
    if items is None or not items or not all(isinstance(p, (str, Path)) for p in items):
        shown = next((p for p in items or () if not isinstance(p, (str, Path))), path_or_paths)
        raise SettingsError(f"path_or_paths must be a str or pathlib.Path, or a non-empty list of them, got "
                            f"{type(shown).__name__} {shown!r}")
    return [Path(p) for p in items]


@contextlib.contextmanager
def _file_view(rest: dict[str, Any]) -> Iterator[Any]:
    """``view=True`` (or ``view_port`` / ``view_host``) of :func:`process`: the page served for the whole call,
    its address said on stderr as the CLI does; None without."""
    if not (rest.get("view") or "view_port" in rest or "view_host" in rest):
        yield None
        return
    from eyeblink.runtime.view import serving

    with serving(port=rest.get("view_port", 0), host=rest.get("view_host", "127.0.0.1"),
                 announce=lambda text: print(f"eyeblink: {text}", file=sys.stderr, flush=True)) as view:
        yield view


def process(path_or_paths: str | Path | Sequence[str | Path], output: str | Path | None = None,
            **settings: Any) -> Session | list[Session]:
    """Process recordings (or image folders) as ``eyeblink process`` does; a :class:`Session` per input.

    ``output``: the folder to write ``<stem>.frames.csv``, ``.blinks.csv``, ``.summary.json`` (and what the
    settings ask for) into, byte for byte what the CLI writes with the same settings; ``None`` keeps
    everything in memory (the files go to a temporary folder that is removed). One path gives one
    :class:`Session`, a list gives a list. ``settings``: see the module docstring; besides the preset keys,
    ``workers`` (default: physical cores), ``loaders``, ``progress`` (a bar on a terminal or in a notebook),
    ``report``,
    ``trials``, ``sync_column``, ``us_sync_column``, ``plots``, ``nwb``; ``view=True`` serves the page of
    ``eyeblink process --view`` while the inputs are processed (its address printed on stderr; ``view_port``,
    ``view_host`` as ``--view-port``, ``--view-host``, either implying ``view``).

    Raises :class:`SettingsError` (a ValueError) for a wrong setting, before any frame is read, and the
    first input's :class:`~eyeblink.errors.EyeblinkError` if an input fails (the others are processed first).
    """
    _require_pandas()
    single = isinstance(path_or_paths, (str, Path))
    paths = _input_paths(path_or_paths)
    if output is not None and not isinstance(output, (str, Path)):
        raise SettingsError(f"output must be a str or pathlib.Path (a folder) or None, got {type(output).__name__} "
                            f"{output!r}")
    with _settings_errors(python=True):
        _check_keyword_types(settings)
        cfg, rest = _run_config(settings, (*ANALYSIS, *PROCESS_ONLY))
        analysis = _analysis(rest)
        workers = rest.get("workers")
        check_workers(workers)
        loaders = rest.get("loaders", 0)
        if loaders < 0:
            raise ConfigError(f"loaders must be >= 0, got {loaders!r}")
    with _output_dir(output) as outdir, _python_errors(), _file_view(rest) as view:
        results, failures = run_process(paths, outdir, cfg, workers=workers, loaders=loaders, analysis=analysis,
                                        progress=progress_factory(bool(rest.get("progress"))),
                                        report=bool(rest.get("report")), view=view)
        if failures:
            raise failures[0][1]
        sessions = [load(outdir / r.stem) for r in results]
        if output is None:
            for s in sessions:
                s.paths = {}
    return sessions[0] if single else sessions


# ------------------------------------------------------------------------------------------ live


_END = object()


class LiveSession:
    """A live session (:func:`live`): a context manager; iterate it for rows and blink events as they come.

    ``with eyeblink.live("tcp://127.0.0.1:5000", lsl=True) as s:`` loads the models, connects the source and
    runs the pipeline in a background thread of this process (its workers are child processes). In the block:

    * ``for item in s:`` yields :class:`~eyeblink.runtime.publish.LiveRow` (one per written row, frame order)
      and :class:`~eyeblink.signals.blinks.BlinkEvent` (as the detector settles them) until the source ends or
      :meth:`stop`; up to :attr:`QUEUE_ITEMS` unread items are kept (older ones are dropped: ``missed``);
    * ``s.state`` (the detector's :class:`~eyeblink.signals.state.EyeState`), ``s.wait_until_open(...)``;
    * callbacks ``on_frame(row)``, ``on_blink(event)``, ``on_state(change)`` run in the session's thread, in
      order, as each is written: keep them short.

    Leaving the block (or Ctrl-C in it, or the source ending) stops the capture, analyses every frame already
    captured, flushes the files and finalizes the session as ``eyeblink live`` does; Ctrl-C is then swallowed
    (the block ends normally; ``summary["live"]["stop_reason"]`` says ``stopped by SIGINT``). Afterwards
    :attr:`result` is the :class:`Session`.
    """

    #: unread items kept for iteration (~100 s of rows at 500 FPS)
    QUEUE_ITEMS = 50_000

    def __init__(self, source: str | int, output: str | Path | None, settings: dict[str, Any]) -> None:
        from eyeblink.runtime.publish import LiveTap
        from eyeblink.runtime.sinks.queue import QueueSink

        _require_pandas()
        settings = dict(settings)
        landmarks = settings.get("landmarks")
        if landmarks == "auto":  # live's default: the model this machine runs at the source's rate
            del settings["landmarks"]
        with _settings_errors():
            cfg, rest = _run_config(settings, (*ANALYSIS, *LIVE_ONLY,
                                               *(f.name for f in dataclasses.fields(LiveConfig))))
            self._callbacks = {k: rest.pop(k, None) for k in ("on_frame", "on_blink", "on_state")}
            for k, cb in self._callbacks.items():
                if cb is not None and not callable(cb):
                    raise ConfigError(f"{k} must be a function, got {cb!r}")
            self._analysis = _analysis(rest)
            self._name = rest.pop("name", None)
            self._report = bool(rest.pop("report", False))
            stream: dict[str, Any] = {k: rest.pop(k) for k in ("reconnect", "stream_options", "read_timeout_s")
                                      if k in rest}
            auto = landmarks in (None, "auto") and cfg.landmarks.model_path is None
            live_defaults = _field_defaults(LiveConfig)
            if isinstance(rest.get("record"), os.PathLike):  # a path, as ``output`` takes
                rest["record"] = os.fspath(rest["record"])
            if "workers" in rest and rest["workers"] is None:  # None: the default (one per physical core), as process
                del rest["workers"]
            for k, v in rest.items():
                if k in LIVE_RANGES and _is_number(v):
                    continue  # its range: LiveConfig's check, the CLI's (config.check_range)
                want = _type_ok(v, live_defaults[k])
                if want is not None:
                    raise ConfigError(f"live {k} must be {want}, got {v!r}")
            for k in ("reconnect", "read_timeout_s"):  # their ranges: StreamOptions (config.check_range)
                if k in stream and not _is_number(stream[k]):
                    raise ConfigError(f"{k} must be a number, got {stream[k]!r}")
            self.live_config = LiveConfig(**{**rest, "landmarks": "auto" if auto else cfg.landmarks.model})
            from eyeblink.sources.live import StreamOptions

            opts = stream.get("stream_options") or {}
            if not isinstance(opts, dict):
                raise ConfigError(f"stream_options must be a dict of FFmpeg options, got {opts!r}")
            self._stream = StreamOptions(options={str(k): str(v) for k, v in opts.items()},
                                         read_timeout_s=stream.get("read_timeout_s", 5.0),
                                         reconnect=stream.get("reconnect", 0))
        if isinstance(source, int) and not isinstance(source, bool):
            source = str(source)  # live(0) is live("0"): camera 0
        if not isinstance(source, str):
            raise SettingsError(f"live source must be a camera index (0), a stream URL or basler:[SERIAL], "
                                f"got {source!r}")
        self.cfg = cfg
        self.source_spec = source
        self.output = output
        tap = LiveTap.from_config(self.live_config, cfg.blinks.max_blink_ms, always=True)
        assert tap is not None
        self.tap: LiveTap = tap
        #: why the last :meth:`wait_until_open` returned False ("" after True)
        self.wait_reason = ""
        # the session's own output: the callbacks and the queue the iterator reads (eyeblink.runtime.sinks.queue)
        self._queue = QueueSink(**self._callbacks, max_items=self.QUEUE_ITEMS, failed=self._callback_failed)
        self.tap.add(self._queue)
        self.result: Session | None = None
        self._items: deque[Any] = self._queue.items
        self._cond = self._queue.cond
        self._ended = False
        self._error: BaseException | None = None
        self._run: _LiveRun | None = None
        self._stop_reason: str | None = None
        self._thread: threading.Thread | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._outdir: Path | None = None
        self._run_result: RunResult | None = None
        self._pipe: LivePipeline | None = None

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> EyeState:
        """The eye's state as of the last row written (``no_face`` before the detector has a baseline)."""
        return self.tap.tracker.state

    @property
    def time_s(self) -> float:
        """Capture time (``timestamp_s``, the source's clock) of the newest row written; NaN before the first."""
        return self.tap.newest_s

    @property
    def frame(self) -> int:
        """The newest row written (-1 before the first)."""
        return self.tap.newest_frame

    @property
    def age_ms(self) -> float:
        """How long ago (ms) the newest analysed frame was received: the age of :attr:`state` now (inf before the
        first frame)."""
        return self.tap.age_s() * 1000.0

    @property
    def stale(self) -> bool:
        """True when the newest analysed frame is older than the session's ``max_age_ms``: :attr:`state` is then
        about the past (a stalled camera or a pipeline that lags), and :meth:`wait_until_open` waits."""
        return self.tap.stale or self.tap.age_s() > self.tap.max_age_s

    @property
    def gate_port(self) -> int | None:
        """The gate socket's port on 127.0.0.1 once listening (``gate_port=0`` picks a free one)."""
        return self.tap.bound_port

    @property
    def view_url(self) -> str | None:
        """The browser view's address once the session has started (``view=True``; None without a view)."""
        return next((s.url for s in self.tap.sinks if getattr(s, "url", "")), None)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._ended

    # ------------------------------------------------------------------ the session's thread

    @property
    def missed(self) -> int:
        """Rows and blinks dropped from the iterator's queue unread (more than :attr:`QUEUE_ITEMS` waited)."""
        return self._queue.missed

    def _callback_failed(self, exc: BaseException, cb: Any) -> None:
        """A callback raised (in the session's thread): the session stops; ``__exit__`` re-raises it."""
        if self._error is None:
            self._error = exc
        self.stop(f"a callback ({cb!r}) failed")

    def _started(self, run: _LiveRun) -> None:
        self._run = run
        if self._stop_reason is not None:
            run.request_stop(self._stop_reason)

    def _main(self, source: Any) -> None:
        from eyeblink.outputs.lock import session_locks
        from eyeblink.runtime.live import finish

        try:
            assert self._pipe is not None and self._outdir is not None
            with session_locks(self._outdir, [source.name]):  # one writer per session, before the capture
                with source:
                    result, _ = self._pipe.run(source, self._outdir, tap=self.tap, signals=False,
                                               started=self._started)
                self._run_result = finish(result, self.cfg, self._analysis, report=self._report)
        except BaseException as exc:
            if self._error is None:
                self._error = exc
        finally:
            with self._cond:
                self._ended = True
                self._items.append(_END)
                self._cond.notify_all()

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> LiveSession:
        from eyeblink.outputs.export import ensure_output_dir
        from eyeblink.runtime.live import prepare

        if self.output is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="eyeblink-live-")
            self._outdir = Path(self._tmp.name)
        else:
            self._outdir = ensure_output_dir(Path(self.output))
        try:
            self._pipe, source, self.cfg = prepare(self.source_spec, self.cfg, self.live_config, name=self._name,
                                                   stream=self._stream, report=self._report,
                                                   analysis=self._analysis, tap=self.tap)
        except BaseException:
            self._cleanup()
            raise
        self._thread = threading.Thread(target=self._main, args=(source,), name="eyeblink-live", daemon=True)
        self._thread.start()
        try:  # the models loaded, the outlets and the socket up (gate_port known), the source about to connect
            while not self.tap.opened.wait(0.1):
                if self._ended:
                    break
        except BaseException:  # Ctrl-C while the models load
            self.__exit__(*sys.exc_info())
            raise
        if self._ended and self._error is not None:
            self._join()
            self._cleanup()
            raise self._error
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        # while the session ends, Ctrl-C (any number of times) stops it at once instead of escaping: the files are
        # closed, the children stopped and the ring unlinked whatever the user presses
        restore = self._catch_sigint()
        try:
            self.stop("stopped by SIGINT" if interrupted else "stopped by the program")
            self._join()
            stem = (self._run_result.stem if self._run_result is not None
                    else getattr(getattr(self._run, "source", None), "name", None))
            if stem is not None and self._outdir is not None and (self._outdir / f"{stem}.summary.json").exists():
                with contextlib.suppress(EyeblinkError, OSError, ValueError):
                    self.result = load(self._outdir / stem)
                    if self.output is None:
                        self.result.paths = {}
        finally:
            self._cleanup()
            restore()
        aborted = isinstance(self._error, KeyboardInterrupt)
        if aborted:
            interrupted = True  # a second Ctrl-C: the session ended interrupted, its files whole
        elif self._error is not None and (exc_type is None or interrupted):
            raise self._error
        return interrupted  # Ctrl-C in the block stopped the session: every row is on disk, the block ends

    def _catch_sigint(self) -> Callable[[], None]:
        """In the main thread: SIGINT aborts the session (see :meth:`_abort`) until the returned function runs."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        try:
            old = signal.signal(signal.SIGINT, lambda _s, _f: self._abort())
        except (ValueError, OSError):
            return lambda: None
        return lambda: signal.signal(signal.SIGINT, old)

    def _abort(self) -> None:
        """A Ctrl-C while the session ends: stop at once (no more draining)."""
        self._stop_reason = self._stop_reason or "stopped by SIGINT"
        if self._run is not None:
            self._run.abort()

    def _join(self) -> None:
        if self._thread is None:
            return
        while self._thread.is_alive():
            try:
                self._thread.join(0.1)
            except KeyboardInterrupt:  # outside the main thread's handler (another thread's session)
                self._abort()

    def _cleanup(self) -> None:
        for sink in self.tap.sinks:  # the view's port, taken before the models loaded (closed already after a run)
            sink.close(None)
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.cleanup()
            self._tmp = None

    # ------------------------------------------------------------------ in the block

    def stop(self, reason: str = "stopped by the program") -> None:
        """Stop the capture (frames already captured are still analysed); the iteration then ends."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self._run is not None:
            self._run.request_stop(reason)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the source ends (or :meth:`stop`); False after ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while not self._ended:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.1 if left is None else min(left, 0.1))
        return True

    def __iter__(self) -> Iterator[LiveRow | BlinkEvent]:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait(0.1)
                item = self._items.popleft()
            if item is _END:
                with self._cond:
                    self._items.appendleft(_END)  # a second loop ends at once too
                if self._error is not None:
                    raise self._error
                return
            yield item

    def wait_until_open(self, stable_ms: float = 200.0, timeout_s: float | None = None,
                        max_age_ms: float | None = None) -> bool:
        """Block until the eye is ``open``, settled, has stayed open for ``stable_ms`` of capture time (the state
        the ``open_stable`` marker and gate line report) **and** the newest analysed frame was received at most
        ``max_age_ms`` ago (default: the session's ``max_age_ms``); True then, checked at the moment it returns.
        A stale answer is never True: it keeps waiting. False after ``timeout_s`` seconds or when the session
        ended first, with the reason in :attr:`wait_reason`. Returns at once when it already holds."""
        if not (isinstance(stable_ms, (int, float)) and math.isfinite(stable_ms) and stable_ms >= 0):
            raise SettingsError(f"stable_ms must be a finite number >= 0, got {stable_ms!r}")
        if max_age_ms is not None and not (isinstance(max_age_ms, (int, float)) and math.isfinite(max_age_ms)
                                           and max_age_ms > 0):
            raise SettingsError(f"max_age_ms must be a finite number > 0, got {max_age_ms!r}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while True:
                ok, why = self.tap.open_now(stable_ms, max_age_ms)
                if ok:
                    self.wait_reason = ""
                    return True
                if self._ended:
                    self.wait_reason = f"the session ended ({why})"
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self.wait_reason = f"timed out after {timeout_s:g} s: {why}"
                    return False
                # the tap notifies on every event; a frozen stream sends none, so poll within the bound too
                self._cond.wait(min(0.005, self.tap.max_age_s / 4) if left is None else
                                min(left, 0.005, self.tap.max_age_s / 4))

    def __repr__(self) -> str:
        return f"LiveSession({self.source_spec!r}, state={self.state.value}, running={self.running})"


def live(source: str | int, output: str | Path | None = None, **settings: Any) -> LiveSession:
    """A live session on a camera or stream (``source`` as for ``eyeblink live``: ``0``, ``tcp://...``,
    ``basler:``), as a context manager (:class:`LiveSession`).

    ``output``: where ``<stem>.frames.csv`` (with ``dropped``), ``.blinks.csv`` and ``.summary.json`` are
    written as the frames arrive (``None``: a temporary folder, removed at the end; the tables stay in
    :attr:`LiveSession.result`). ``settings``: the preset keys as for :func:`process`, the live ones of
    :class:`~eyeblink.config.LiveConfig` (``lsl``, ``lsl_name``, ``lsl_wait_s``, ``gate_port``,
    ``stable_ms``, ``duration_s``, ``overload``, ``workers``, ``buffer_s``, ...), ``name``,
    ``reconnect``, ``stream_options`` (a dict of FFmpeg options), ``read_timeout_s``, ``report``, the
    conditioning options and the callbacks ``on_frame``, ``on_blink``, ``on_state``. A wrong setting raises
    :class:`SettingsError` at once, before any model loads.
    """
    return LiveSession(source, output, settings)

