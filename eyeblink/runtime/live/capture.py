"""Before and after a live capture, for ``eyeblink live`` and the Python API's :func:`eyeblink.live`
alike.

:func:`prepare` runs every check that can fail before a frame arrives and loads the models (before a
stream is connected: see :mod:`eyeblink.runtime.live.pipeline`); :func:`finish` runs what
``process`` runs after an input once the capture has ended normally: the FEC calibration, trials,
plots, NWB and the report.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError, EyeblinkError
from eyeblink.outputs.analysis import AnalysisOptions

if TYPE_CHECKING:
    from eyeblink.config import LiveConfig, RunConfig
    from eyeblink.runtime.live.pipeline import LivePipeline
    from eyeblink.runtime.pipeline import RunResult
    from eyeblink.sources.live import LiveSource

__all__ = ["finish", "prepare"]


def prepare(
    spec: str,
    cfg: RunConfig,
    live: LiveConfig,
    *,
    name: str | None = None,
    stream: Any = None,
    report: bool = False,
    analysis: AnalysisOptions | None = None,
    start_method: str | None = None,
) -> tuple[LivePipeline, LiveSource, RunConfig]:
    """Everything before the capture, for the CLI and the Python API alike: the checks, the models
    (loaded before a stream is connected), the source (not yet connected). Returns the pipeline, the
    source and the run's config. ``start_method``: how the pipeline's processes start (None: the
    environment's, else auto). The run's outputs (its
    :class:`~eyeblink.runtime.live.publish.LiveTap` and sinks) are made before this is called: a
    missing extra or a port taken is refused before any model loads."""
    from eyeblink.runtime.live.pipeline import LivePipeline
    from eyeblink.sources.live import open_live_source

    if live.record is not None:
        from eyeblink.runtime.live.record import check_record_path

        check_record_path(live.record, overwrite=live.overwrite)
    if report:  # the workers keep each blink's eye crops: a stream cannot be read again for them
        cfg = replace(cfg, eye_crops=True)
    from eyeblink.runtime.procs.parallel import supports

    if not supports(cfg):
        raise ConfigError(
            f"live mode runs the multiprocess pipeline, which needs the litert backend or the "
            f"accelerator stage (--stage accelerator with jax or tensorflow); got "
            f"{cfg.detect.backend!r} with --stage {cfg.detect.stage}"
        )
    # models first: a stream is connected only once the workers are ready
    pipe = LivePipeline(cfg, live, start_method=start_method)
    source = open_live_source(spec, name=name, fps=cfg.fps, connect=False, stream=stream)
    # before the capture: extras, trials file
    (analysis or AnalysisOptions()).check_stems([source.name])
    return pipe, source, cfg


def finish(
    result: RunResult, cfg: RunConfig, analysis: AnalysisOptions | None, *, report: bool = False
) -> RunResult:
    """After the capture ended normally (end of stream, ``--duration``, a signal, the API's stop):
    calibrate the session's FEC column and write trials, traces, plots and NWB as ``process`` does,
    then the report."""
    from eyeblink.outputs.analysis import finalize
    from eyeblink.runtime.runner import record_failure

    try:
        result = finalize(result, cfg, analysis or AnalysisOptions())
    # e.g. a full disk: the summary says failed, as the exit status does
    except EyeblinkError as exc:
        record_failure(result, exc)
        raise
    if report:
        from eyeblink.outputs.report import write_report
        from eyeblink.runtime.runner import record_output

        record_output(result, "report", write_report(result.outputs["frames"].parent / result.stem))
    return result
