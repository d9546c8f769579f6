"""Neurodata Without Borders export (the ``nwb`` extra: pynwb; ``eyeblink process --nwb``).

``<stem>.nwb`` holds, in the ``behavior`` processing module:

* ``EyelidTraces`` (BehavioralTimeSeries): ``ear_left``, ``ear_right``, ``ear`` (dimensionless eye
  aspect ratios), ``baseline_ear`` (the running open-eye baseline) and ``closure`` (FEC, 0 = open
  baseline, 1 = full closure), all on the frames' recorded timestamps (``ear_left`` holds them; the
  others link to them), NaN where no eye was measured. One series per frames.csv column declared
  with an NWB presence (:attr:`eyeblink.outputs.columns.FrameColumn.nwb`: its unit and description),
  in file order;
* ``blinks`` (TimeIntervals): one row per blink, ``start_time``/``stop_time`` in seconds plus
  ``peak_time``, ``duration_ms``, ``amplitude`` (1 - min/baseline EAR), ``peak_closure`` (FEC) and
  ``complete``;

and the file's ``trials`` table: one row per trial, ``start_time``/``stop_time`` the trace window
(``trials.trace_pre_ms`` before to ``trials.trace_post_ms`` after CS), ``cs_time``/``us_time``
(NaN = CS alone) and every metric of ``<stem>.trials.csv`` (booleans as bool, "not measured" as NaN;
``cr_scored`` says whether ``cr`` could be decided).

``session_start_time`` is the input file's modification time (cameras rarely store the start time
in a way FFmpeg exposes); the file's ``notes`` record the FEC calibration and the settings.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.errors import OutputError
from eyeblink.outputs import columns as _columns
from eyeblink.version import __version__

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.outputs.session import SessionData
    from eyeblink.signals.blinks import BlinkEvent

TRIAL_DESCRIPTIONS = {
    "trial_number": "trial number from the trials file",
    "block": "block of trials.block_size consecutive trials (1-based)",
    "trial_type": "trial type (paired, cs_alone, or as the trials file says)",
    "cs_type": "CS type from the trials file",
    "us_type": "US type from the trials file",
    "cs_time": "CS onset (s, recording clock)",
    "us_time": "US onset (s, recording clock); NaN for CS-alone trials",
    "isi_ms": "interstimulus interval, US onset - CS onset (ms)",
    "baseline_fec": "mean FEC in the pre-CS baseline window",
    "baseline_sd": "SD of FEC in the pre-CS baseline window",
    "baseline_valid_fraction": "fraction of baseline frames with a measured eye",
    "baseline_valid": "baseline eye open, stable and measured (trial counts for percent CR)",
    "startle": "FEC rose >= startle_threshold above baseline within startle_end_ms after CS "
    "(alpha/startle)",
    "startle_amplitude": "largest FEC above baseline in the startle window",
    "cr_scored": "whether the CR window had enough measured frames to decide cr",
    "cr": "conditioned response: FEC >= baseline + cr_threshold for >= cr_min_ms in the CR window",
    "cr_onset_latency_ms": "CR onset after CS (ms); NaN without a CR",
    "cr_peak_amplitude": "largest FEC above baseline in the CR window",
    "cr_peak_latency_ms": "time of the CR peak after CS (ms); NaN without a CR",
    "cr_area_fec_ms": "integral of max(0, FEC - baseline) over the CR window (FEC x ms)",
    "fec_at_us": "FEC at the frame nearest US onset",
    "ur_amplitude": "largest FEC above baseline in the UR window after US",
    "ur_peak_latency_ms": "time of the UR peak after US (ms)",
}


def _f(v: Any) -> float:
    return float("nan") if v is None else float(v)


def write_nwb(
    data: SessionData,
    blinks: Sequence[BlinkEvent],
    config: RunConfig,
    path: Path,
    summary: dict[str, Any],
) -> Path:
    """Write ``path`` (see the module docstring); returns it."""
    from pynwb import NWBHDF5IO, NWBFile, TimeSeries
    from pynwb.behavior import BehavioralTimeSeries
    from pynwb.epoch import TimeIntervals

    source = Path(str(summary.get("input", path)))
    try:
        start = datetime.fromtimestamp(source.stat().st_mtime, tz=timezone.utc).astimezone()
    except OSError:
        start = datetime.now(timezone.utc).astimezone()
    ident = uuid.uuid5(uuid.NAMESPACE_URL, f"eyeblink:{source.resolve()}:{start.isoformat()}")
    nwb = NWBFile(
        session_description=f"eyelid (EAR, FEC) and blinks of {source.name}, measured by eyeblink "
        f"{__version__}",
        identifier=str(ident),
        session_start_time=start,
        source_script=f"eyeblink {__version__}",
        source_script_file_name="eyeblink",
        notes=json.dumps(
            {"closure_calibration": summary.get("closure"), "settings": summary.get("settings")}
        ),
    )
    mod = nwb.create_processing_module("behavior", "eyelid traces and blinks from the face video")
    t = np.asarray(data.t, dtype=np.float64)
    series: list[Any] = []
    # the columns declared with an NWB series
    for name, decl, data_name in _columns.FRAME_TABLE.nwb_series:
        # the first series holds the timestamps, the others link to them
        series.append(
            TimeSeries(
                name=name,
                data=np.asarray(data.series(data_name), dtype=np.float64),
                timestamps=series[0] if series else t,
                unit=decl.unit,
                description=decl.describe(data.calibration),
            )
        )
    mod.add(BehavioralTimeSeries(time_series=series, name="EyelidTraces"))

    table = TimeIntervals(
        name="blinks", description="blinks detected online (eyeblink.signals.blinks)"
    )
    for name, desc, dtype in (
        ("peak_time", "time of the deepest closure (s)", np.float64),
        ("duration_ms", "end - start (ms)", np.float64),
        ("amplitude", "1 - min/baseline EAR", np.float64),
        ("peak_closure", "FEC at the peak", np.float64),
        ("complete", "False when the blink was cut by a gap or the end of the input", np.bool_),
    ):
        # a session without a blink still gets its (empty) table: the columns' types are said, as
        # hdmf cannot infer them from no value
        table.add_column(
            name=name, description=desc, **({} if blinks else {"data": np.empty(0, dtype)})
        )
    for ev in blinks:
        table.add_row(
            start_time=float(ev.start_s),
            stop_time=float(ev.end_s),
            peak_time=float(ev.peak_s),
            duration_ms=float(ev.duration_ms),
            amplitude=_f(ev.amplitude),
            peak_closure=float(data.calibration.fec(_f(ev.amplitude))),
            complete=bool(ev.complete),
        )
    mod.add(table)

    if data.trials:
        for name, desc in TRIAL_DESCRIPTIONS.items():
            nwb.add_trial_column(name=name, description=desc)
        cfg = config.trials
        for tr, r in zip(data.trials, data.results, strict=True):
            nwb.add_trial(
                start_time=tr.cs_onset_s - cfg.trace_pre_ms / 1000.0,
                stop_time=tr.cs_onset_s + cfg.trace_post_ms / 1000.0,
                trial_number=int(tr.trial),
                block=int(r.block),
                trial_type=r.trial_type,
                cs_type=r.cs_type,
                us_type=r.us_type,
                cs_time=float(tr.cs_onset_s),
                us_time=float(tr.us_onset_s),
                isi_ms=_f(r.isi_ms),
                baseline_fec=_f(r.baseline_fec),
                baseline_sd=_f(r.baseline_sd),
                baseline_valid_fraction=_f(r.baseline_valid_fraction),
                baseline_valid=bool(r.baseline_valid),
                startle=bool(r.startle),
                startle_amplitude=_f(r.startle_amplitude),
                cr_scored=r.cr is not None,
                cr=bool(r.cr),
                cr_onset_latency_ms=_f(r.cr_onset_latency_ms),
                cr_peak_amplitude=_f(r.cr_peak_amplitude),
                cr_peak_latency_ms=_f(r.cr_peak_latency_ms),
                cr_area_fec_ms=_f(r.cr_area_fec_ms),
                fec_at_us=_f(r.fec_at_us),
                ur_amplitude=_f(r.ur_amplitude),
                ur_peak_latency_ms=_f(r.ur_peak_latency_ms),
            )
    tmp = path.with_name(f"{path.stem}.partial.nwb")  # renamed into place when complete
    try:
        with NWBHDF5IO(str(tmp), mode="w") as io:
            io.write(nwb)
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({exc}); choose another -o") from None
    tmp.replace(path)
    return path
