"""Builders for the report-review tests: a small session's output files written with numpy (no model
run), so that the browser tests know every blink, trial and label exactly."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from eyeblink.outputs.export import FRAME_COLUMNS
from eyeblink.signals.blinks import BLINK_COLUMNS

FPS = 100.0
#: (onset_s, duration_s) of the blinks in the trace and in blinks.csv
BLINKS = ((1.0, 0.2), (3.0, 0.2), (5.0, 0.25), (7.0, 0.2))
#: (onset_s, duration_s) of a closure in the trace the detector "missed" (not in blinks.csv)
MISSED = (8.5, 0.2)
#: CS onsets of the trials (US 0.3 s later)
TRIALS = (2.0, 4.0, 6.0)


def write_session(
    outdir: Path,
    stem: str = "s1",
    *,
    labels: dict[str, str] | None = None,
    summary_extra: dict[str, object] | None = None,
    duration_s: float = 10.0,
) -> Path:
    """``OUTDIR/<stem>``'s frames.csv, blinks.csv, summary.json and trials.csv; ``labels`` fills the
    trials' text columns (trial_type, cs_type, us_type); returns ``OUTDIR/<stem>``."""
    outdir.mkdir(parents=True, exist_ok=True)
    n = int(duration_s * FPS)
    t = np.arange(n) / FPS
    closure = np.zeros(n)
    for onset, dur in (*BLINKS, MISSED):
        half = dur / 2
        closure += np.clip(1 - np.abs(t - onset - half) / half, 0, None)
    base = np.full(n, 0.3)
    ear = base * (1 - 0.8 * closure)
    cols = {c: np.full(n, np.nan) for c in FRAME_COLUMNS}
    cols.update(
        frame=np.arange(n),
        timestamp_s=t,
        face=np.ones(n),
        detected=np.ones(n),
        ear_left=ear,
        ear_right=ear,
        ear=ear,
        baseline_ear=base,
        closure=closure,
    )
    with (outdir / f"{stem}.frames.csv").open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(FRAME_COLUMNS)
        for i in range(n):
            w.writerow(
                ["" if not np.isfinite(cols[c][i]) else f"{cols[c][i]:.9g}" for c in FRAME_COLUMNS]
            )
    with (outdir / f"{stem}.blinks.csv").open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(BLINK_COLUMNS)
        for k, (onset, dur) in enumerate(BLINKS):
            row = {
                "blink": k + 1,
                "start_frame": round(onset * FPS),
                "end_frame": round((onset + dur) * FPS),
                "start_s": onset,
                "end_s": onset + dur,
                "duration_ms": dur * 1000,
                "peak_s": onset + dur / 2,
                "peak_frame": round((onset + dur / 2) * FPS),
                "baseline_ear": 0.3,
                "min_ear": 0.06,
                "amplitude": 0.8,
                "complete": 1,
                "partial": 0,
                "cue": "both",
                "kind": "blink",
            }
            w.writerow([row.get(c, "") for c in BLINK_COLUMNS])
    lab = labels or {}
    with (outdir / f"{stem}.trials.csv").open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(
            [
                "trial",
                "block",
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
                "cr_peak_amplitude",
                "cr_peak_latency_ms",
                "fec_at_us",
                "ur_amplitude",
            ]
        )
        for k, cs in enumerate(TRIALS):
            w.writerow(
                [
                    k + 1,
                    1,
                    lab.get("trial_type", "paired"),
                    lab.get("cs_type", "tone"),
                    lab.get("us_type", "puff"),
                    cs,
                    cs + 0.3,
                    300,
                    1,
                    0,
                    int(k == 0),
                    100 if k == 0 else "",
                    0.5 if k == 0 else "",
                    200 if k == 0 else "",
                    0.2,
                    0.9,
                ]
            )
    summary = {
        "status": "ok",
        "input": f"/recordings/{stem}.avi",
        "stem": stem,
        "frames": n,
        "duration_s": float(t[-1]),
        "blinks": len(BLINKS),
        "complete_blinks": len(BLINKS),
        "blink_rate_per_min": len(BLINKS) / float(t[-1]) * 60,
        "frame_interval_median_ms": 10.0,
        "warnings": [],
        "settings": {"landmarks": {"model": "mesh"}},
        "trials": {"trials": 3, "scored_trials": 3, "cr_trials": 1, "percent_cr": 100 / 3},
        **(summary_extra or {}),
    }
    (outdir / f"{stem}.summary.json").write_text(json.dumps(summary, indent=2))
    return outdir / stem
