"""The reference pipeline: one process, frame by frame, in order.

source -> face detection (keyframe policy) -> dlib eye fit + EAR -> blink detector -> writers. The
multiprocess pipeline reuses :class:`~eyeblink.frame.analyzer.FrameAnalyzer` (the per-frame core,
:mod:`eyeblink.frame`) and :class:`SessionSink` so both give byte-identical rows for the same boxes.
"""

from __future__ import annotations

import contextlib
import math
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink import stopping
from eyeblink.config import RunConfig
from eyeblink.errors import OutputError, warn
from eyeblink.frame.analyzer import FrameAnalyzer, FrameResult, StageClock
from eyeblink.frames import Frame
from eyeblink.outputs.crops import BlinkCrops, crops_path
from eyeblink.outputs.export import ResultWriter
from eyeblink.outputs.session import RunResult
from eyeblink.runtime.summary import (
    Outcome,
    finish_session,
    run_warnings,
    session_outcome,
    write_running_summary,
)
from eyeblink.signals.blinks import BlinkDetector, BlinkEvent
from eyeblink.signals.closure import OnlineClosure

if TYPE_CHECKING:
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.sources.files import FrameSource


def build_detector(config: RunConfig) -> FaceDetector:
    """The face detector of a run: backend, model, threads, accelerator options and thresholds."""
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector

    d = config.detect
    backend = create_detector(
        d.backend,
        model_path=Path(d.model_path) if d.model_path else None,
        num_threads=d.num_threads,
        batch_size=d.batch_size,
        accelerator=d.accelerator(),
    )
    for message in run_warnings(config):
        warn_once(message)
    return FaceDetector.from_detector(
        backend, batch_size=d.batch_size, score_threshold=d.score_threshold, iou_threshold=d.nms_iou
    )


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """``eyeblink: warning: message`` on stderr, once per process (not once per input)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warn(message)


class SessionSink:
    """The ordered sink for one input: blink detection, rows, summary. The only writer."""

    def __init__(
        self,
        writer: ResultWriter,
        config: RunConfig,
        clock: StageClock,
        *,
        rescan_per_frame: int | None = None,
    ) -> None:
        self.writer = writer
        self.cfg = config
        self.clock = clock
        self.blinks = BlinkDetector(config.blink_settings(), rescan_per_frame=rescan_per_frame)
        self.closure = OnlineClosure(config.closure)  # provisional FEC; finalised after the run
        self.events: list[BlinkEvent] = []
        self.frames = 0
        self.faces = 0
        self.detections = 0
        self.first_t = math.nan
        self.last_t = math.nan
        self._prev_t = math.nan
        # one frame interval per frame, for the summary's median and gaps: 8 bytes a frame (a list
        # of floats held 32, ~1 MB a minute at 500 FPS: the slow growth of a long run's memory)
        self._intervals = array("d")
        # the report's blink crops (--report): a new run of this stem replaces the old file, or
        # removes it
        self.crops_path = crops_path(writer.outdir, writer.stem)
        self.crops = BlinkCrops() if config.eye_crops else None
        self.crops_saved = False
        self.finished = False
        # the frame's cells (eyeblink.outputs.columns: the writer's header's table)
        self._row = writer.table.row
        with contextlib.suppress(OSError):
            self.crops_path.unlink()
        if config.points:  # <stem>.points.csv beside frames.csv (--points)
            writer.open_points()

    def use_config(self, config: RunConfig) -> None:
        """Take the run's config, resolved when a live source connected, before the first row
        (``--landmarks auto``: the blink settings the chosen eye model decides); the sink was made
        with the requested one. After a row it is a programming error: the rows would mix two
        configs."""
        if self.frames:
            raise RuntimeError("the sink takes the run's config before its first row, never after")
        self.cfg = config
        self.blinks.cfg = config.blink_settings()

    def add(self, r: FrameResult) -> None:
        with stopping.held():  # a frame's row, its blink and its counts, all or none
            self._add(r)

    def _add(self, r: FrameResult) -> None:
        t0 = time.perf_counter()
        if self.crops is not None:
            self.crops.add(r.index, r.eye_strip, r.strip_points)
        for ev in self.blinks.update(
            r.index, r.timestamp_s, r.ear_left, r.ear_right, r.eye_patches
        ):
            self._blink(ev)
        t1 = time.perf_counter()
        self.clock.add("blinks", t1 - t0)
        self.writer.write_frame(self._row(r, self.blinks.baseline, self.closure))
        if self.cfg.points:
            self.writer.write_points(r.index, r.timestamp_s, r.eye_points, r.pose, r.pose_frame)
        self.clock.add("write", time.perf_counter() - t1)
        self.frames += 1
        self.faces += r.face is not None
        self.detections += r.detected
        if math.isnan(self.first_t):
            self.first_t = r.timestamp_s
        if not math.isnan(self._prev_t):
            self._intervals.append(r.timestamp_s - self._prev_t)
        self._prev_t = self.last_t = r.timestamp_s

    def _blink(self, ev: BlinkEvent) -> None:
        self.events.append(ev)
        self.writer.write_blink(ev)
        if ev.complete:
            self.closure.add_response(ev.amplitude)
        if self.crops is not None:
            self.crops.blink(ev)

    def finish(self) -> None:
        """Close the open blink and save the crops (once: a second call does nothing)."""
        if self.finished:
            return
        self.finished = True
        for ev in self.blinks.finish():
            self._blink(ev)
        if self.crops is not None:
            try:
                self.crops.save(self.crops_path)
                self.crops_saved = True
            # the crops are an extra of the report: the rows and summary matter more
            except OutputError as exc:
                warn(f"{exc} (the report will show no eye crops)")

    def output_paths(self) -> dict[str, Path]:
        """Every file written for this input so far (``summary.json``'s ``outputs``; finalize
        adds its own)."""
        w = self.writer
        out = {"frames": w.frames_path, "blinks": w.blinks_path, "summary": w.summary_path}
        if w.points_path is not None:
            out["points"] = w.points_path
        if self.crops_saved:
            out["crops"] = self.crops_path
        return out

    def timing_summary(self) -> dict[str, Any]:
        if not self._intervals:
            return {
                "frame_interval_median_ms": None,
                "timestamp_gaps": 0,
                "duplicate_timestamps": 0,
            }
        iv = np.asarray(self._intervals)
        med = float(np.median(iv))
        return {
            "frame_interval_median_ms": med * 1000,
            "timestamp_gaps": int(np.sum(iv > 1.5 * med)) if med > 0 else 0,
            "duplicate_timestamps": int(np.sum(iv <= 0)),
        }


ProgressFactory = Callable[[str, int | None], Any]


def _timed(frames: Iterator[Frame], clock: StageClock) -> Iterator[Frame]:
    while True:
        t0 = time.perf_counter()
        try:
            f = next(frames)
        except StopIteration:
            return
        clock.add("decode", time.perf_counter() - t0)
        yield f


def progress_bar(
    stack: ExitStack,
    progress: ProgressFactory | None,
    source: FrameSource,
    max_frames: int | None = None,
) -> Any:
    """The run's progress bar (or None), closed with ``stack``: its total is the frames the run will
    read (the source's count, or ``max_frames`` when fewer), and it shows the final count before it
    closes."""
    total = source.frame_count_hint
    if max_frames is not None:
        total = min(total, max_frames) if total else max_frames
    bar = progress(source.name, total) if progress else None
    if bar is not None:
        stack.callback(bar.close)
        if hasattr(bar, "refresh"):
            stack.callback(bar.refresh)  # runs first: the last update may have been throttled
    return bar


def process_source(
    source: FrameSource,
    outdir: Path,
    config: RunConfig,
    *,
    analyzer: FrameAnalyzer,
    progress: ProgressFactory | None = None,
    view: Any = None,
) -> RunResult:
    """Run the reference pipeline on one opened source; writes the output contract into ``outdir``.

    On any failure (decode error, interrupt, worker error) the rows computed so far are flushed and
    the summary records the status and the error before the exception propagates. ``view``: the
    browser view (``process --view``, :mod:`eyeblink.runtime.live.view`).
    """
    clock = analyzer.clock
    preview = view.preview if view is not None else None
    started = time.perf_counter()
    # a stop once the files exist: raised in the try below
    with ExitStack() as stack, stopping.held() as hold:
        writer = stack.enter_context(
            ResultWriter(outdir, source.name) if view is None else view.file_writer(outdir, source)
        )
        sink = SessionSink(writer, config, clock)
        outcome = Outcome()
        try:
            with session_outcome(sink, source) as outcome:
                hold.release()
                with stopping.held():
                    write_running_summary(writer, source, config)
                bar = progress_bar(stack, progress, source, config.max_frames)
                for n, frame in enumerate(_timed(iter(source), clock)):
                    if config.max_frames is not None and n >= config.max_frames:
                        break
                    if preview is not None and preview.wanted():
                        preview.put(frame.index, frame.image)
                    result = analyzer.analyze(frame)
                    # the view's eye points,
                    if preview is not None and preview.points_wanted() == frame.index:
                        # before its row is written
                        preview.put_points(frame.index, analyzer.last_points)
                    sink.add(result)
                    if bar is not None:
                        bar.update(1)
                    stopping.check()  # a stop whose KeyboardInterrupt was swallowed on its way
        finally:
            summary = finish_session(
                writer, sink, source, config, clock, analyzer, started, outcome
            )
    return RunResult(
        source.name, sink.frames, sink.faces, sink.events, summary, sink.output_paths()
    )
