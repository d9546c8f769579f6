"""A session's ``summary.json``: written with ``"status": "running"`` when an input starts, and
whole at its end, however it ended (:class:`Outcome`, :func:`session_outcome`), by every runtime
alike (the reference pipeline, the multiprocess one, a chunked recording's sink): the counts,
timings, versions, machine, settings and warnings.

The session's parts it reads (``sink``: :class:`~eyeblink.runtime.pipeline.SessionSink`, ``clock``:
its ``StageClock``, ``analyzer``: anything with ``redetections``) come from
:mod:`eyeblink.runtime.pipeline`, which imports this module: they are typed ``Any`` here so that the
import goes one way."""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink import stopping
from eyeblink.errors import EyeblinkError, NoFaceError
from eyeblink.outputs.export import ResultWriter, clean_json
from eyeblink.signals.plausibility import event_counts
from eyeblink.version import __version__

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.sources.files import FrameSource

__all__ = [
    "Outcome",
    "build_summary",
    "damage_warning",
    "eye_measure_of",
    "finish_session",
    "run_warnings",
    "session_outcome",
    "versions",
    "write_running_summary",
]


def run_warnings(config: RunConfig) -> list[str]:
    """What the settings will make of this machine that the user should hear about
    (``summary.json``'s ``warnings``; :func:`eyeblink.finalize` adds the input's own): today an
    accelerator preset without its accelerator (see :func:`eyeblink.detect.missing_accelerator`)."""
    from eyeblink.detect import missing_accelerator

    message = missing_accelerator(config.detect.backend)
    choice = getattr(config, "eye_measure", None)
    return ([message] if message else []) + (
        [choice.warning] if choice is not None and choice.warning else []
    )


def eye_measure_of(config: RunConfig) -> dict[str, Any] | None:
    """``summary.json``'s ``eye_measure``: how an eye region's measure came, and why (None in
    face mode)."""
    from dataclasses import asdict

    choice = getattr(config, "eye_measure", None)
    return asdict(choice) if choice is not None else None


def damage_warning(stem: str, damaged: list[dict[str, Any]]) -> str:
    """The warning for a recording whose damaged packets were skipped (see ``sources.files``)."""
    times = [d["timestamp_s"] for d in damaged if d.get("timestamp_s") is not None]
    where = f" between {min(times):.3f} and {max(times):.3f} s" if times else ""
    return (
        f"{stem}: {len(damaged)} damaged packet(s){where} could not be decoded and were skipped "
        "(a timestamp "
        "gap in frames.csv; the rows after the damage are complete); summary.json lists them under "
        "damaged_packets; re-copy the recording from its original if you have it"
    )


def versions() -> dict[str, str]:
    out = {"eyeblink": __version__, "python": platform.python_version(), "numpy": np.__version__}
    for mod in ("av", "cv2", "dlib", "ai_edge_litert"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = str(getattr(m, "__version__", "unknown"))
    return out


def write_running_summary(writer: ResultWriter, source: FrameSource, config: RunConfig) -> None:
    """``<stem>.summary.json`` with ``"status": "running"`` as an input starts (written atomically,
    replaced atomically by the final summary), so that a run killed outright (SIGKILL, the OOM
    killer, a lost node) leaves a summary that says it never finished: which input, since when, by
    which process."""
    import os
    import socket
    from datetime import datetime, timezone

    settings = config.to_dict()
    eye_measure = eye_measure_of(config)
    writer.write_summary(
        clean_json(
            {
                "status": "running",
                "exit_status": None,
                "error": None,
                "input": str(source.path),
                "stem": source.name,
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "versions": versions(),
                "settings": settings,
                "eye_measure": eye_measure,
            }
        )
    )


@dataclass
class Outcome:
    """How a session ended, for its summary: ``ok``, ``failed`` or ``interrupted``, and the exit
    status."""

    status: str = "ok"
    error: str | None = None
    traceback: str | None = None
    exit_status: int = 0

    def stopped_at_the_end(self) -> None:
        """A stop signal that arrived once every frame was written (or swallowed on its way): the
        session says ``interrupted`` as the exit status will (the rows are all there)."""
        if self.status == "ok" and stopping.received() is not None:
            self.status, self.error, self.exit_status = (
                "interrupted",
                stopping.reason(),
                stopping.STOPPED_EXIT,
            )


@contextmanager
def session_outcome(sink: Any, source: FrameSource) -> Iterator[Outcome]:
    """Run a session's body; record how it ended, close its blinks, and re-raise any failure.

    Shared by the reference and the multiprocess pipelines so both end a session the same way:
    the open blink is closed (``finish``) on success, failure and Ctrl-C alike, and a session in
    which no frame had a face fails with :class:`NoFaceError` after its rows are written.
    """
    out = Outcome()
    try:
        yield out
        with stopping.held():
            sink.finish()
        if sink.frames > 0 and sink.faces == 0:
            raise NoFaceError(
                f"no face found in any of the {sink.frames} frames of {source.path}; check that "
                "the "
                "face is in view, lit and at least ~60 px wide (rows written with face=0)"
            )
    except EyeblinkError as exc:
        out.status, out.error, out.exit_status = "failed", str(exc), exc.exit_code
        out.traceback = getattr(exc, "traceback_text", None)
        with stopping.held():  # the open blink's row, whole
            sink.finish()
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (eyeblink.stopping)
        out.status, out.error, out.exit_status = (
            "interrupted",
            stopping.reason(exc),
            stopping.STOPPED_EXIT,
        )
        with stopping.held():
            sink.finish()
        raise
    except Exception as exc:  # a bug: record it in the summary, then let it surface
        # a stop's KeyboardInterrupt turned into another error on its way
        if stopping.received() is not None:
            out.status, out.error, out.exit_status = (
                "interrupted",
                stopping.reason(),
                stopping.STOPPED_EXIT,
            )
        else:
            out.status, out.error, out.exit_status = (
                "failed",
                f"internal error: {type(exc).__name__}: {exc}",
                1,
            )
        raise


def finish_session(
    writer: ResultWriter,
    sink: Any,
    source: FrameSource,
    config: RunConfig,
    clock: Any,
    analyzer: Any,
    started: float,
    outcome: Outcome,
    *,
    warnings: list[str] | None = None,
    extend: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The end of every session, however it ended (the reference and the multiprocess pipelines):
    its summary (:func:`build_summary`, wall time since ``started``), ``extend(summary)`` adding a
    pipeline's own sections, a failed worker's traceback, then the CSVs closed and the summary
    written, whole whatever arrives meanwhile."""
    with stopping.held():
        outcome.stopped_at_the_end()
        wall = time.perf_counter() - started
        summary = build_summary(
            source,
            config,
            sink,
            clock,
            analyzer,
            wall,
            outcome.status,
            outcome.error,
            warnings=warnings,
            exit_status=outcome.exit_status,
        )
        if extend is not None:
            extend(summary)
        if outcome.traceback:
            summary["error_traceback"] = outcome.traceback
        writer.finish(summary)
    return summary


def build_summary(
    source: FrameSource,
    config: RunConfig,
    sink: Any,
    clock: Any,
    analyzer: Any,
    wall_s: float,
    status: str,
    error: str | None,
    *,
    warnings: list[str] | None = None,
    exit_status: int = 0,
) -> dict[str, Any]:
    """The summary of one input; ``warnings``: the run's own (default :func:`run_warnings` of
    ``config``); ``exit_status``: the input's (0 becomes :data:`~eyeblink.errors.INPUT_DAMAGED_EXIT`
    for damaged packets)."""
    from eyeblink.errors import INPUT_DAMAGED_EXIT
    from eyeblink.runtime.costs import host_info

    dur = sink.last_t - sink.first_t if sink.frames > 1 else 0.0
    described = source.describe()
    damaged = list(described.get("damaged_packets") or [])
    warnings = list(warnings) if warnings is not None else run_warnings(config)
    if damaged:
        warnings.append(damage_warning(source.name, damaged))
    if exit_status == 0 and damaged:
        exit_status = INPUT_DAMAGED_EXIT
    settings = config.to_dict()
    eye_measure = eye_measure_of(config)
    summary: dict[str, Any] = {
        "status": status,
        "exit_status": exit_status,
        "error": error,
        "input": str(source.path),
        "stem": source.name,
        "source": described,
        "frames": sink.frames,
        "frames_with_face": sink.faces,
        "frames_without_face": sink.frames - sink.faces,
        "face_lost_ratio": (sink.frames - sink.faces) / sink.frames if sink.frames else None,
        "detector_runs": sink.detections,
        "redetections_on_drift": analyzer.redetections,
        "first_timestamp_s": sink.first_t,
        "last_timestamp_s": sink.last_t,
        "duration_s": dur,
        **sink.timing_summary(),
        **event_counts(sink.events, dur),  # blinks apart from prolonged closures
        # replaced by the session calibration after the run
        "closure": sink.closure.calibration.as_dict(),
        "timings": {
            "wall_s": wall_s,
            "fps": sink.frames / wall_s if wall_s > 0 else None,
            "ms_per_frame": clock.ms_per_frame(sink.frames),
            "keyframe_waits": clock.waits(),
        },
        "versions": versions(),
        # the CPU class the timings were measured on (vector extensions decide the cost)
        "machine": host_info(),
        "settings": settings,
        "eye_measure": eye_measure,
        "damaged_packets": {"count": len(damaged), "packets": damaged},
        "warnings": warnings,
        "outputs": {k: str(v) for k, v in sink.output_paths().items()},
    }
    return clean_json(summary)
