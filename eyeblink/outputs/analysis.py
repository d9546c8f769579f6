"""After a recording is processed: the session's FEC calibration, trials, plots and NWB.

:func:`finalize` runs once per input when the pipeline has written every frame row:

1. reads ``<stem>.frames.csv`` back, calibrates FEC on the whole session
   (:mod:`eyeblink.signals.closure`) and rewrites the file's ``closure`` column atomically
   (temporary file + rename: a crash during the rewrite leaves the provisional file, never a
   half-written one);
2. with trials (``--trials``): scores them (:mod:`eyeblink.signals.trials`) into
   ``<stem>.trials.csv`` and ``<stem>.traces.csv``;
3. adds ``closure``, ``timeline`` and ``trials`` sections to ``<stem>.summary.json`` (where the
   recording's time runs backwards or jumps: a warning, and ``duration_s`` and the rates from the
   span its frames cover: :func:`timeline`);
4. ``--plots``: ``<stem>.trace.png``, ``<stem>.heatmap.png``, ``<stem>.cr_blocks.png``
   (:mod:`eyeblink.outputs.plots`);
5. ``--nwb``: ``<stem>.nwb`` (:mod:`eyeblink.outputs.nwb`).

Everything that can be checked before the first frame (trials files parse, the extras import) is
checked by :meth:`AnalysisOptions.check` first. Only the standard library is imported at module
level (the command line imports this module for :class:`AnalysisOptions`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, MissingExtraError, TrialFileError
from eyeblink.outputs.session import RunResult, SessionData

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.config import RunConfig
    from eyeblink.signals.closure import ClosureCalibration
    from eyeblink.signals.trials import Trial, TrialFile, TrialResult

EXTRAS = {"plots": ("matplotlib", "--plots"), "nwb": ("pynwb", "--nwb")}


def require_extra(extra: str) -> None:
    """Raise :class:`MissingExtraError` naming the pip command when ``extra``'s package is
    missing."""
    import importlib.util

    module, flag = EXTRAS[extra]
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(
            f"{flag} needs {module}, which is not installed; "
            f"pip install 'eyeblink[{extra}]' (or pip install {module})"
        )


@dataclass(frozen=True)
class AnalysisOptions:
    """What to do after each input beyond the frame/blink files (the per-session inputs and
    outputs).

    ``trials``: a trials file or sync CSV used for every input, or a folder holding ``<stem>.csv``
    per input. ``sync_column`` / ``us_sync_column``: read ``trials`` as a sync CSV (TTL rising
    edges).
    """

    trials: Path | None = None
    sync_column: str | None = None
    us_sync_column: str | None = None
    plots: bool = False
    nwb: bool = False

    def __post_init__(self) -> None:
        if self.sync_column is not None and self.trials is None:
            raise ConfigError(
                "--sync-column needs --trials SYNC.csv (the CSV that holds the column)"
            )
        if self.us_sync_column is not None and self.sync_column is None:
            raise ConfigError("--us-sync-column needs --sync-column (the CS line) as well")

    def trials_path(self, stem: str) -> Path | None:
        if self.trials is None:
            return None
        if self.trials.is_dir():
            return self.trials / f"{stem}.csv"
        return self.trials

    def load_trials(self, stem: str) -> TrialFile | None:
        from eyeblink.signals.trials import read_sync, read_trials

        path = self.trials_path(stem)
        if path is None:
            return None
        if self.trials is not None and self.trials.is_dir() and not path.is_file():
            raise TrialFileError(
                f"no trials file for input {stem!r}: expected {path} in the --trials folder"
            )
        if self.sync_column is not None:
            return read_sync(path, self.sync_column, self.us_sync_column)
        return read_trials(path)

    def check(self, inputs: Sequence[Path]) -> None:
        """Fail before any frame is processed: extras installed, trials files present and well
        formed."""
        from eyeblink.sources.files import input_stem

        self.check_stems([input_stem(p) for p in inputs])

    def check_stems(self, stems: Sequence[str]) -> None:
        """:meth:`check` for inputs known by their output stems (a live source)."""
        if self.plots:
            require_extra("plots")
        if self.nwb:
            require_extra("nwb")
        if self.trials is None:
            return
        if not self.trials.exists():
            raise TrialFileError(
                f"trials file not found: {self.trials} — check the path given to --trials"
            )
        if self.trials.is_file() and len(stems) > 1:
            raise TrialFileError(
                f"one trials file ({self.trials}) for {len(stems)} inputs; give a folder with "
                "<stem>.csv per input to --trials, or process the inputs one at a time"
            )
        for stem in stems:
            self.load_trials(stem)


# ------------------------------------------------------------------------------------------ session
# data


def read_frames(path: Path) -> tuple[list[str], list[list[str]]]:
    from eyeblink.outputs.export import read_table

    header, rows = read_table(path)
    if not header:
        raise ConfigError(
            f"{path} is empty; it should start with the header {path.name} was written with"
        )
    return header, rows


def _column(header: list[str], rows: list[list[str]], name: str) -> np.ndarray:
    import numpy as np

    k = header.index(name)
    return np.array([float(r[k]) if r[k] != "" else np.nan for r in rows], dtype=np.float64)


def _filled(baseline: np.ndarray) -> np.ndarray:
    """The running baseline with its warm-up (leading NaNs) and any later holes filled by the
    nearest value."""
    import numpy as np

    b = baseline.copy()
    ok = np.isfinite(b)
    if not ok.any():
        return b
    idx = np.where(ok, np.arange(len(b)), 0)
    np.maximum.accumulate(idx, out=idx)
    b = b[idx]
    first = int(np.argmax(ok))
    b[:first] = b[first]
    return b


def calibrate_session(
    cfg: RunConfig,
    t: np.ndarray,
    amplitude: np.ndarray,
    blink_amplitudes: Sequence[float],
    trials: Sequence[Trial],
) -> ClosureCalibration:
    """The final calibration: the named segment, else the blinks' and URs' amplitudes (see
    eyeblink.signals.closure)."""
    import numpy as np

    from eyeblink.signals.closure import (
        from_responses,
        from_segment,
        running_median,
        smoothing_samples,
    )

    if cfg.closure.calibration_s is not None:
        return from_segment(cfg.closure, t, amplitude)
    smooth = running_median(amplitude, smoothing_samples(t, cfg.closure.smooth_ms))
    urs = []
    for tr in trials:
        if tr.paired:
            m = (t >= tr.us_onset_s) & (t <= tr.us_onset_s + cfg.trials.ur_window_ms / 1000.0)
            if np.isfinite(smooth[m]).any():
                urs.append(float(np.nanmax(smooth[m])))
    return from_responses(cfg.closure, [*blink_amplitudes, *urs])


def _write_csv_atomic(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Replace ``path`` whole or not at all (a failed write keeps the old file and names the
    fix)."""
    import io

    from eyeblink.outputs.export import _cell, write_text_atomic

    text = _plain_csv(header, rows)
    if text is None:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows([_cell(v) for v in r] for r in rows)
        text = buf.getvalue()
    write_text_atomic(path, text)


def _plain_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str | None:
    """The text the csv writer gives a table whose cells are all strings needing no quotes
    (frames.csv as read back, its closure column replaced), joined without the writer; None for any
    other table (a cell that is not a string, or holds a comma, a quote or a line break; a row of
    one cell), which the writer then writes."""
    try:
        # TypeError: a cell that is not a string
        lines = [",".join(header), *(",".join(r) for r in rows)]
    except TypeError:
        return None
    cells = len(header)
    for r in rows:
        if len(r) < 2:
            return None
        cells += len(r)
    if len(header) < 2:
        return None
    text = "\n".join(lines) + "\n"
    # no cell holds a separator: the commas and line ends are exactly those the join put there
    if (
        '"' in text
        or "\r" in text
        or text.count(",") != cells - len(lines)
        or text.count("\n") != len(lines)
    ):
        return None
    return text


def _trial_warnings(trials: Sequence[Trial], t: np.ndarray, stem: str) -> list[str]:
    """A warning (see :func:`eyeblink.errors.warn`) when CS onsets lie after the recording's last
    frame: those trials can only have empty rows, which is most often a trials file of another
    session."""
    import numpy as np

    from eyeblink.errors import warn

    finite = t[np.isfinite(t)]
    end = float(finite[-1]) if finite.size else 0.0
    beyond = [tr for tr in trials if tr.cs_onset_s > end]
    if not beyond:
        return []
    start = float(finite[0]) if finite.size else 0.0
    return [
        warn(
            f"{len(beyond)} of {len(trials)} trials have their CS onset after the end of {stem}'s "
            "recording "
            f"({start:.3f}-{end:.3f} s, {end - start:.2f} s long; first such onset at "
            f"{beyond[0].cs_onset_s:.3f} s): their rows are empty; check that --trials belongs to "
            "this "
            "recording and uses its clock (seconds from its first frame)"
        )
    ]


#: a forward step in time longer than this many median frame intervals, and than :data:`JUMP_MIN_S`,
#: is a jump (a recording paused, files joined), not dropped frames (those are ``timestamp_gaps``)
JUMP_INTERVALS = 25
JUMP_MIN_S = 1.0
#: at most this many breaks in time are listed one by one in ``summary.json`` (all are counted)
MAX_LISTED_BREAKS = 20


def timeline(frame: np.ndarray, t: np.ndarray) -> dict[str, Any]:
    """Where a session's time runs backwards or jumps, and the span its frames actually cover.

    Two MPEG-TS files joined with ``cat`` restart their clock: the timestamps run 0..3 s, then 0..3
    s again; last minus first then says 3 s for a 6 s recording. Each step back (and each forward
    jump, see :data:`JUMP_INTERVALS`) is a *break*, listed with its frame, the times either side and
    the step; the covered span adds the ordinary steps and one median frame interval per break.
    Returns the summary's ``timeline`` entry: ``covered_s``, ``backwards``, ``jumps``, ``breaks``
    (the first :data:`MAX_LISTED_BREAKS`).
    """
    import numpy as np

    ok = np.isfinite(t)
    tt, ff = t[ok], frame[ok]
    if tt.size < 2:
        return {"covered_s": 0.0, "backwards": 0, "jumps": 0, "breaks": []}
    d = np.diff(tt)
    forward = d[d > 0]
    med = float(np.median(forward)) if forward.size else 0.0
    back = d < 0
    jump = d > max(JUMP_MIN_S, JUMP_INTERVALS * med)
    brk = back | jump
    covered = float(d[~brk].sum() + med * int(brk.sum()))
    breaks = [
        {
            "frame": int(ff[i + 1]),
            "kind": "backwards" if back[i] else "jump",
            "previous_s": float(tt[i]),
            "timestamp_s": float(tt[i + 1]),
            "by_s": float(d[i]),
        }
        for i in np.nonzero(brk)[0][:MAX_LISTED_BREAKS]
    ]
    return {
        "covered_s": covered,
        "backwards": int(back.sum()),
        "jumps": int(jump.sum()),
        "breaks": breaks,
    }


def _timeline_warning(stem: str, line: dict[str, Any], span_s: float) -> str:
    """The one line of :func:`eyeblink.errors.warn` for a session whose time runs backwards or
    jumps."""
    what = [
        f"runs backwards {line['backwards']} time(s)" if line["backwards"] else "",
        f"jumps forward {line['jumps']} time(s)" if line["jumps"] else "",
    ]
    first = line["breaks"][0]
    return (
        f"{stem}: the recording's time {' and '.join(w for w in what if w)} (first at frame "
        f"{first['frame']}: "
        f"{first['previous_s']:.3f} s -> {first['timestamp_s']:.3f} s, {first['by_s']:+.3f} s); "
        "duration_s "
        f"and the rates use the {line['covered_s']:.3f} s its frames cover, not last minus first "
        f"({span_s:.3f} s); a file joined from several (cat a.ts b.ts) restarts its clock: "
        "process the "
        "parts one by one, or join them with ffmpeg's concat demuxer, which keeps time running "
        "forward"
    )


def _signal_warnings(
    result: RunResult,
    config: RunConfig,
    header: list[str],
    rows: list[list[str]],
    t: np.ndarray,
    baseline: np.ndarray,
) -> list[str]:
    """The implausible-output warnings of :mod:`eyeblink.signals.plausibility`, each also
    printed."""
    from eyeblink.errors import warn
    from eyeblink.signals.plausibility import session_warnings

    face = _column(header, rows, "face") == 1 if "face" in header else None
    return [
        warn(w)
        for w in session_warnings(
            result.blinks, t, baseline, face, config.blink_settings(), result.stem
        )
    ]


def finalize(
    result: RunResult, config: RunConfig, options: AnalysisOptions | None = None
) -> RunResult:
    """The post-run pass over one processed input (see the module docstring); returns the result
    with the new outputs and summary."""
    import numpy as np

    from eyeblink.outputs.export import _cell, clean_json
    from eyeblink.signals.closure import closure_amplitude
    from eyeblink.signals.trials import (
        TRACE_COLUMNS,
        TRIAL_COLUMNS,
        score_trials,
        session_summary,
        trial_traces,
    )

    options = options or AnalysisOptions()
    frames_path = result.outputs["frames"]
    header, rows = read_frames(frames_path)
    if "closure" not in header:
        raise ConfigError(
            f"{frames_path} has no closure column; it was written by another eyeblink version"
        )
    frame = _column(header, rows, "frame").astype(np.int64)
    t = _column(header, rows, "timestamp_s")
    ear, ear_l, ear_r = (_column(header, rows, c) for c in ("ear", "ear_left", "ear_right"))
    baseline = _filled(_column(header, rows, "baseline_ear"))
    amplitude = closure_amplitude(ear, baseline)

    tf = options.load_trials(result.stem)
    trials = tf.resolve(frame_times=t, fps=config.fps) if tf is not None else ()
    blink_amps = [e.amplitude for e in result.blinks if e.complete]
    from eyeblink.outputs.corrections import Frames, apply_session, calibration_amplitudes

    corrected = calibration_amplitudes(
        frames_path.parent,
        result.stem,
        [e.as_row() for e in result.blinks],
        Frames(frame, t, ear, baseline),
    )
    # <stem>.corrections.json: FEC follows the blinks the reviewer kept and added
    if corrected is not None:
        blink_amps = corrected
    cal = calibrate_session(config, t, amplitude, blink_amps, trials)
    fec = cal.fec(amplitude)

    k = header.index("closure")
    for r, v in zip(rows, fec, strict=True):
        r[k] = _cell(float(v))
    _write_csv_atomic(frames_path, header, rows)

    outputs = dict(result.outputs)
    summary = dict(result.summary)
    summary["closure"] = cal.as_dict()
    summary["warnings"] = [
        *summary.get("warnings", []),
        *_trial_warnings(trials, t, result.stem),
        *_signal_warnings(result, config, header, rows, t, baseline),
    ]
    line = timeline(frame, t)
    summary["timeline"] = line
    if line["breaks"]:  # time ran backwards or jumped: durations and rates from the span covered
        from eyeblink.errors import warn
        from eyeblink.signals.plausibility import event_counts

        span = float(summary.get("duration_s") or 0.0)
        summary["duration_s"] = line["covered_s"]
        summary.update(event_counts(result.blinks, line["covered_s"]))
        summary["warnings"].append(warn(_timeline_warning(result.stem, line, span)))
    results: list[TrialResult] = []
    if trials:
        results = score_trials(trials, t, fec, config.trials, frames=frame)
        stem = result.stem
        outdir = frames_path.parent
        outputs["trials"] = outdir / f"{stem}.trials.csv"
        outputs["traces"] = outdir / f"{stem}.traces.csv"
        _write_csv_atomic(outputs["trials"], TRIAL_COLUMNS, [r.as_row() for r in results])
        _write_csv_atomic(
            outputs["traces"],
            TRACE_COLUMNS,
            trial_traces(trials, results, t, fec, ear, config.trials, frames=frame),
        )
        summary["trials"] = {
            "source": str(tf.path) if tf is not None else None,
            **session_summary(results),
        }
    from eyeblink.outputs.session import shown_columns

    # NWB's, the report's (none yet)
    shown = {c: _column(header, rows, c) for c in shown_columns() if c in header}
    data = SessionData(
        frame,
        t,
        ear,
        ear_l,
        ear_r,
        baseline,
        amplitude,
        fec,
        cal,
        tuple(trials),
        tuple(results),
        shown,
    )
    if options.plots:
        from eyeblink.outputs.plots import write_plots

        outputs.update(write_plots(data, result.blinks, config, frames_path.parent, result.stem))
    if options.nwb:
        from eyeblink.outputs.nwb import write_nwb

        outputs["nwb"] = write_nwb(
            data, result.blinks, config, frames_path.parent / f"{result.stem}.nwb", summary
        )
    summary["outputs"] = {k: str(v) for k, v in outputs.items()}
    summary = clean_json(summary)
    spath = outputs["summary"]
    from eyeblink.outputs.export import write_text_atomic

    write_text_atomic(spath, json.dumps(summary, indent=2, allow_nan=False) + "\n")
    # the reviewer's corrections, when the session has
    applied = apply_session(frames_path.parent, result.stem)
    if applied is not None:
        from eyeblink.outputs.corrections import auto_blinks_path

        outputs["blinks_auto"] = auto_blinks_path(frames_path.parent, result.stem)
        summary = applied.summary
    return replace(result, summary=summary, outputs=outputs)
