"""A processed session back as pandas tables: :class:`Session`, :func:`load`, :func:`agree`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, InputNotFoundError, MissingExtraError, one_line

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Session:
    """One processed input (or live session): its tables, summary and files.

    ``frames``, ``blinks`` and ``trials`` (empty without a trials file) are pandas DataFrames with
    the CSV contract's columns; integer columns are ``int64`` (``Int64`` where a cell can be empty),
    0/1 flags of blinks (``complete``, ``partial``) ``bool``, everything else ``float64`` (NaN = an
    empty cell, "not measured") or text. ``df.attrs["units"]`` maps each column to its unit.
    ``paths`` holds the files written (empty when the run kept everything in memory,
    ``output=None``).
    """

    stem: str
    frames: pd.DataFrame
    blinks: pd.DataFrame
    trials: pd.DataFrame
    summary: dict[str, Any]
    paths: dict[str, Path] = field(default_factory=dict)
    #: damage :func:`load` left out (a cut last row, a missing file), one line each; empty for a
    #: whole session
    notes: list[str] = field(default_factory=list)

    def write_report(self, output: str | Path | None = None) -> Path:
        """Write the self-contained HTML report of this session (``eyeblink report OUTDIR/<stem>``):
        to ``<stem>.report.html`` beside its files, or to ``output``; returns its path. Needs the
        session's files (a session processed with ``output=None`` has none: process it into a
        folder)."""
        from eyeblink.outputs.report import write_report

        if "frames" not in self.paths:
            raise InputNotFoundError(
                f"session {self.stem!r} has no files (processed with output=None); process "
                "it with output=FOLDER to write its report"
            )
        path = write_report(self.paths["frames"].parent / self.stem, output)
        self.paths["report"] = path
        return path

    def plot(self, start_s: float | None = None, end_s: float | None = None) -> Any:
        """The session in one matplotlib figure: each eye's openness and the closure (FEC) against
        time, the blinks shaded (in a corrected session by ``source``), each trial's CS and US
        marked (excluded trials grey). ``start_s``/``end_s``: the seconds to show (default: the
        whole session). Returns the :class:`matplotlib.figure.Figure`
        (``fig.savefig("session.png")``; a notebook with ``%matplotlib inline`` shows it). Needs the
        ``plots`` extra (matplotlib)."""
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise MissingExtraError(
                "Session.plot needs matplotlib, which is not installed; "
                "pip install 'eyeblink[plots]' (or pip install matplotlib)"
            ) from None
        from eyeblink.outputs.plots import session_figure

        f = self.frames

        def col(name: str) -> Any:
            import numpy as np

            return (
                f[name].to_numpy(dtype="float64", na_value=np.nan)
                if name in f
                else np.full(len(f), np.nan)
            )

        return session_figure(
            col("timestamp_s"),
            col("ear_left"),
            col("ear_right"),
            col("closure"),
            self.blinks.to_dict("records"),
            self.trials.to_dict("records"),
            f"{self.stem}: {self._counts()}"
            + (f", {len(self.trials)} trials" if len(self.trials) else ""),
            start_s=start_s,
            end_s=end_s,
        )

    def _counts(self) -> str:
        """``14 blinks, 1 prolonged closure``: the rows of ``blinks`` by kind, in the words of
        ``summary.json``."""
        from eyeblink.signals.plausibility import count_words

        # a blinks.csv written before the kind column: every row a blink
        if "kind" not in self.blinks:
            return count_words(len(self.blinks))
        blinks = int((self.blinks["kind"] == "blink").sum())
        return count_words(blinks, len(self.blinks) - blinks)

    def __repr__(self) -> str:
        damage = f", {len(self.notes)} damage notes" if self.notes else ""
        return (
            f"Session({self.stem!r}: {len(self.frames)} frames, {self._counts()}, "
            f"{len(self.trials)} trials, status {self.summary.get('status')!r}{damage})"
        )


#: whole-number columns, never empty: int64
_INT_COLUMNS = {
    "frame",
    "face",
    "detected",
    "dropped",
    "blink",
    "start_frame",
    "end_frame",
    "peak_frame",
    "trial",
    "block",
}
#: whole-number columns that can be empty (an eye never measured, a trial without a US): pandas'
#: Int64
_NULLABLE_INT_COLUMNS = {
    "start_frame_left",
    "end_frame_left",
    "start_frame_right",
    "end_frame_right",
    "cs_onset_frame",
    "us_onset_frame",
}
#: 0/1 flags: bool (``boolean`` where a cell can be empty)
_BOOL_COLUMNS = {"complete", "partial", "baseline_valid", "startle", "cr", "excluded"}
#: text columns: pandas strings
_TEXT_COLUMNS = {"cue", "kind", "trial_type", "cs_type", "us_type", "source"}
_UNITS = {
    "frame": "frame",
    "face": "0/1",
    "detected": "0/1",
    "dropped": "0/1",
    "blink": "count",
    "closure": "FEC (0 open .. 1 closed)",
    "face_score": "score (0..1)",
    "amplitude": "fraction",
    "cue": "text",
    "kind": "text",
}


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
        raise MissingExtraError(
            "the Python API's tables need pandas, which is not installed; "
            "pip install 'eyeblink[api]' (or pip install pandas)"
        ) from None
    return pd


#: the columns a session file must have to be read (the output contract's "at least"); a renamed one
#: is damage
_REQUIRED = {
    "frames": ("frame", "timestamp_s", "face", "ear_left", "ear_right"),
    "blinks": ("start_frame", "end_frame", "start_s", "end_s", "duration_ms"),
    "trials": ("trial",),
}
_RERUN = (
    "the file is damaged or not an eyeblink output: re-run `eyeblink process` on the "
    "recording to write it again"
)


class SessionDamageWarning(UserWarning):
    """A session was loaded with damage left out (a last row cut off mid-row, a missing file); the
    text says what, and :attr:`Session.notes` lists it."""


class CorrectionsWarning(UserWarning):
    """A session's ``<stem>.corrections.json`` holds decisions that match no detected blink any more
    (a rerun with other settings); they are kept in the file and listed in
    ``summary["corrections"]["unmatched"]``."""


def _bad_cell(path: Path, row: int, col: str, value: str, want: str) -> ConfigError:
    return ConfigError(
        f"{path}: row {row + 2}, column {col!r}: {value[:40]!r} is not {want}; {_RERUN}"
    )


def _table(
    path: Path, kind: str, columns: Sequence[str] = (), text: str | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """A CSV of the output contract (the file at ``path``, or ``text``: a table the session's
    corrections made from it) as a DataFrame with fixed dtypes per column (the same for every
    session, whatever its values) and the damage left out (notes); an absent file: an empty frame
    with ``columns``.

    Checked as ``eyeblink report`` checks it (:func:`eyeblink.outputs.report.read_rows`): the
    contract's columns are there, every row has its header's cells, a number column holds numbers (a
    0/1 flag 0 or 1, a whole-number column whole numbers), else a
    :class:`~eyeblink.errors.ConfigError` naming the file, row and column. A last row cut off
    mid-row (a copy or a disk that ended there) is left out and named in the notes."""
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
    raw = (
        pd.DataFrame(body, columns=header, dtype=object)
        if body
        else pd.DataFrame({c: pd.Series(dtype=object) for c in header})
    )
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
        # every measure is float64, also where this session's values happen to be whole numbers
        else:
            df[col] = values
    df.attrs["units"] = {c: _unit(c) for c in df.columns}
    return df, notes


def load(session: str | Path) -> Session:
    """Read a finished session back: ``load("results/session1")`` (``OUTDIR/<stem>``, or any of its
    files).

    The same object :func:`process` returns, from ``<stem>.frames.csv``, ``.blinks.csv``,
    ``.summary.json`` and ``.trials.csv`` (when the session has trials). Every file is checked as
    ``eyeblink report`` checks it: a damaged session raises :class:`~eyeblink.errors.ConfigError` in
    one line naming the file, the row and the column (a cell that is not a number, a renamed column,
    a row with too many cells, a summary that is not a JSON object); a last row cut off mid-row is
    left out, counted in :attr:`Session.notes` and warned about (:class:`SessionDamageWarning`),
    never read as a half row. A ``<stem>.corrections.json`` beside them (saved from the report) is
    applied as ``eyeblink report`` applies it, in memory (no file is written): ``blinks`` has the
    ``source`` column, ``trials`` the ``excluded`` one, ``summary["corrections"]`` the counts.
    """
    import json
    import warnings

    from eyeblink.outputs.export import FRAME_COLUMNS
    from eyeblink.outputs.report import split_stem
    from eyeblink.signals.blinks import BLINK_COLUMNS

    outdir, stem = split_stem(session)
    summary_path = outdir / f"{stem}.summary.json"
    if not summary_path.is_file():
        raise InputNotFoundError(
            f"no session {stem!r} in {outdir}: {summary_path.name} not found — give "
            "OUTDIR/<stem> of a processed session"
        )
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputNotFoundError(
            f"{summary_path} is not a readable summary ({one_line(exc)})"
        ) from None
    if not isinstance(summary, dict):
        raise ConfigError(
            f"{summary_path} holds a JSON {type(summary).__name__}, not the summary object; "
            f"{_RERUN}"
        )
    paths = {
        k: outdir / f"{stem}.{suffix}"
        for k, suffix in (
            ("frames", "frames.csv"),
            ("blinks", "blinks.csv"),
            ("summary", "summary.json"),
            ("trials", "trials.csv"),
            ("traces", "traces.csv"),
            ("nwb", "nwb"),
            ("report", "report.html"),
            ("points", "points.csv"),
        )
    }
    paths = {k: p for k, p in paths.items() if p.is_file()}
    frames, n1 = _table(outdir / f"{stem}.frames.csv", "frames", FRAME_COLUMNS)
    blinks, n2 = _table(outdir / f"{stem}.blinks.csv", "blinks", BLINK_COLUMNS)
    trials, n3 = _table(outdir / f"{stem}.trials.csv", "trials")
    notes = [*n1, *n2, *n3]
    for kind in ("frames", "blinks"):
        if kind not in paths:
            notes.append(f"{stem}.{kind}.csv is missing: its table is empty")
    for note in notes:
        warnings.warn(
            f"eyeblink.load({str(outdir / stem)!r}): {note}", SessionDamageWarning, stacklevel=2
        )
    from eyeblink.outputs.corrections import (
        apply_session,
        corrections_path,
        csv_text,
        unmatched_message,
    )

    # <stem>.corrections.json, applied as report/process do
    applied = apply_session(outdir, stem, write=False)
    if applied is not None:
        paths["corrections"] = corrections_path(outdir, stem)
        unmatched = applied.summary["corrections"]["unmatched"]
        if unmatched:  # as report and process say it
            warnings.warn(
                f"eyeblink.load({str(outdir / stem)!r}): "
                + unmatched_message(stem, paths["corrections"], unmatched),
                CorrectionsWarning,
                stacklevel=2,
            )
        summary = applied.summary
        blinks, _ = _table(
            outdir / f"{stem}.blinks.csv",
            "blinks",
            text=csv_text(applied.blink_header, applied.blinks),
        )
        if applied.trial_header:
            trials, _ = _table(
                outdir / f"{stem}.trials.csv",
                "trials",
                text=csv_text(applied.trial_header, applied.trials),
            )
    return Session(stem, frames, blinks, trials, summary, paths, notes)


def agree(
    session: str | Path,
    corrections: Sequence[str | Path] = (),
    *,
    reference: str | Path | None = None,
    tier: str | None = None,
) -> dict[str, Any]:
    """Agreement of two scorings of a session's blinks, as ``eyeblink agree`` prints it: the
    detector against the session's ``<stem>.corrections.json`` (or the one file in ``corrections``),
    or the second of two raters' files against the first; a folder: every session with corrections,
    and ``total`` pooled. With ``reference`` (an ELAN ``.eaf``) and ``tier``: the detector (or the
    one corrections file) against that tier.

    Returns ``{"sessions": [{"events": {precision, recall, f1, onset_diff_mean_ms, ...}, "trials":
    [...]}], "total": {...}}`` (see :mod:`eyeblink.outputs.agreement`).
    """
    from eyeblink.outputs.agreement import agree_sessions

    return agree_sessions(session, corrections, reference=reference, tier=tier)
