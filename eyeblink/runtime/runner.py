"""Running the reference pipeline over several inputs.

Everything that can be checked before the first frame is checked first
(inputs exist, output names do not collide, the output directory is writable,
the backend and models load), so a bad option never costs a half-processed run.
An input that fails part-way (truncated, no face, not a video) is reported and
the others still run; the exit status is non-zero if any failed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.config import RunConfig
from eyeblink.errors import (
    BackendUnavailableError,
    ConfigError,
    EyeblinkError,
    InputNotFoundError,
    ModelFileError,
    OutputError,
    OutputWriteError,
)
from eyeblink.frame.analyzer import FrameAnalyzer, StageClock, build_fitter
from eyeblink.frame.locate import FixedRegion, locator_for
from eyeblink.outputs.analysis import AnalysisOptions, finalize
from eyeblink.outputs.export import ensure_output_dir
from eyeblink.outputs.lock import session_locks
from eyeblink.outputs.paths import OutputPlan, session_outputs
from eyeblink.runtime.pipeline import ProgressFactory, RunResult, build_detector, process_source

if TYPE_CHECKING:
    from eyeblink.sources.files import FrameSource

log = logging.getLogger(__name__)

# errors that concern the whole run, not one input: stop at once
FATAL = (ConfigError, ModelFileError, BackendUnavailableError, OutputError)


def stem_of(path: Path) -> str:
    """The session name an input writes: a folder's name, a file's name without its suffix."""
    from eyeblink.sources.files import input_stem

    return input_stem(path)


def check_inputs(paths: Sequence[Path]) -> None:
    """Fail early on missing inputs and on two inputs that would write the same ``<stem>.*``
    files."""
    seen: dict[str, Path] = {}
    for p in paths:
        if not p.exists():
            raise InputNotFoundError(f"input not found: {p} — check the path")
        stem = stem_of(p)
        if stem in seen:
            raise ConfigError(
                f"inputs {seen[stem]} and {p} would both write {stem}.*; "
                "rename one or process them into different -o directories"
            )
        seen[stem] = p


def check_region(paths: Sequence[Path], config: RunConfig) -> None:
    """With an eye region (``--eye-roi``): every input's frames hold it, checked before any work
    (each input's size read from its container, or its first image)."""
    locator = locator_for(config)
    if not isinstance(locator, FixedRegion):
        return
    from eyeblink.sources.files import open_source

    for p in paths:
        with open_source(p, fps=config.fps) as source:
            w, h = int(getattr(source, "width", 0) or 0), int(getattr(source, "height", 0) or 0)
        if w and h:
            locator.check_frame(w, h, f"the frames of {p.name}")


def settle_eye_measure(paths: Sequence[Path], config: RunConfig) -> RunConfig:
    """With an eye region: the run's measure and, for ``contour``, the eye's axis, settled once
    before any work (:func:`eyeblink.landmarks.region.choose_measure`), so that every process of the
    run measures alike: on the first input's first :data:`~eyeblink.landmarks.region.SURVEY_S`
    seconds, at most :data:`~eyeblink.landmarks.region.SURVEY_FRAMES` frames (a named measure: its
    first :data:`~eyeblink.landmarks.region.NAMED_SURVEY_FRAMES`); said in one log line and in
    ``summary.json``'s ``eye_measure``. A config already settled, or without a region, is returned
    as it is."""
    lm = config.landmarks
    locator = locator_for(config)
    if not isinstance(locator, FixedRegion) or config.eye_measure is not None or not paths:
        return config
    from eyeblink.landmarks.region import NAMED_SURVEY_FRAMES, SURVEY_FRAMES, SURVEY_S
    from eyeblink.sources.files import open_source

    grays: list[np.ndarray] = []
    first = last = None
    most = SURVEY_FRAMES if lm.region_auto else NAMED_SURVEY_FRAMES
    with open_source(paths[0], fps=config.fps) as source:
        for frame in source:
            first = frame.timestamp_s if first is None else first
            if frame.timestamp_s - first >= SURVEY_S or len(grays) >= most:
                break
            last = frame.timestamp_s
            grays.append(frame.gray.copy())
    seconds = (last - first) if first is not None and last is not None else 0.0
    return settle_from_frames(grays, seconds, config, paths[0].name)


def settle_from_frames(
    grays: Sequence[np.ndarray], seconds: float, config: RunConfig, name: str
) -> RunConfig:
    """:func:`settle_eye_measure` on frames already read: ``grays``, the first ``seconds`` of the
    input ``name`` (``eyeblink live``: the stream's first frames, held by the loader and analysed
    after). One log line says the measure and why; a trace unlike an eye's, one warning line."""
    from dataclasses import replace

    from eyeblink.config import replace_section
    from eyeblink.landmarks import region_models
    from eyeblink.landmarks.region import choose_measure

    lm = config.landmarks
    locator = locator_for(config)
    assert isinstance(locator, FixedRegion)  # a recording of one eye
    options = {m: lm.options(m) for m in region_models()}
    choice = choose_measure(
        list(grays),
        seconds,
        locator.region,
        named=None if lm.region_auto else lm.model,
        eye_angle=lm.setting("eye_angle"),
        options=options,
        model_path=lm.model_path,
    )
    log.info("%s: eye measure %s", name, choice.why)
    if choice.warning:
        log.warning("%s: %s", name, choice.warning)
    angle = choice.eye_angle if choice.model == "contour" else lm.setting("eye_angle")
    path = lm.model_path if choice.how == "named" else None
    landmarks = replace_section(lm, {"model": choice.model, "model_path": path, "eye_angle": angle})
    return replace(config, landmarks=landmarks, eye_measure=choice)


def output_plan(
    paths: Sequence[Path], outdir: Path, opts: AnalysisOptions | None = None
) -> OutputPlan:
    """What a run over ``paths`` into ``outdir`` reads and may write (see
    :mod:`eyeblink.outputs.paths`)."""
    plan = OutputPlan()
    for p in paths:
        stem = stem_of(p)
        plan.read(p, "the input")
        if opts is not None:
            plan.read(opts.trials_path(stem), "the --trials file")
        for out in session_outputs(outdir, stem):
            plan.write(out, "-o", probe=False)
    return plan


def build_analyzer(config: RunConfig) -> FrameAnalyzer:
    """Load the detector backend and the landmark model once for the whole run."""
    return FrameAnalyzer(config, build_detector(config), build_fitter(config), StageClock())


def process_paths(
    paths: Sequence[Path],
    outdir: Path,
    config: RunConfig,
    *,
    progress: ProgressFactory | None = None,
    analyzer: FrameAnalyzer | None = None,
    workers: int = 1,
    loaders: int = 0,
    analysis: AnalysisOptions | None = None,
    then: Callable[[list[RunResult]], None] | None = None,
    view: Any = None,
    start_method: str | None = None,
) -> tuple[list[RunResult], list[tuple[Path, EyeblinkError]]]:
    """Process every input into ``outdir``; returns the results and the per-input failures.

    Each session (``outdir`` and an input's stem) is locked for the whole run, before any model
    loads (:mod:`eyeblink.outputs.lock`): a second run writing one of them is refused. ``then`` is
    called with the results while the sessions are still locked (``--report`` writes the reports
    there). ``view``: the browser view (``--view``, :class:`eyeblink.runtime.live.view.ViewSink`,
    opened): each input is shown as it is processed.

    ``workers`` > 1 runs the multiprocess pipeline (:mod:`eyeblink.runtime.procs.parallel`) with
    that many landmark workers (and ``loaders`` decoder processes per input, 0 = auto: see
    :func:`eyeblink.runtime.procs.sizing.choose_loaders`), its processes started by ``start_method``
    (``--start-method``; None: the environment's, else auto:
    :func:`eyeblink.runtime.procs.processes.resolve_start_method`); 0 or 1 runs the single-process
    reference. After each input, :func:`eyeblink.outputs.analysis.finalize` calibrates its FEC
    column and writes trials, plots and NWB as ``analysis`` asks (checked before the first frame).
    """
    # a missing input is that input's failure, reported with the others' (the rest still run)
    missing = [
        (p, InputNotFoundError(f"input not found: {p} — check the path"))
        for p in paths
        if not p.exists()
    ]
    paths = [p for p in paths if p.exists()]
    if not paths:
        raise missing[0][1] if missing else ConfigError("no inputs given")
    check_inputs(paths)
    check_region(paths, config)
    config = settle_eye_measure(paths, config)
    opts = analysis or AnalysisOptions()
    opts.check(paths)
    ensure_output_dir(outdir)
    # no output is an input (a link to the recording, the trials file)
    output_plan(paths, outdir, opts).check()
    # one writer per session, before any work
    with session_locks(outdir, [stem_of(p) for p in paths]):
        results, failures = _process_existing(
            paths,
            outdir,
            config,
            progress=progress,
            analyzer=analyzer,
            workers=workers,
            loaders=loaders,
            opts=opts,
            view=view,
            start_method=start_method,
        )
        if then is not None:
            then(results)
    return results, [*missing, *failures]


def _process_existing(
    paths: Sequence[Path],
    outdir: Path,
    config: RunConfig,
    *,
    progress: ProgressFactory | None,
    analyzer: FrameAnalyzer | None,
    workers: int,
    loaders: int,
    opts: AnalysisOptions,
    view: Any = None,
    start_method: str | None = None,
) -> tuple[list[RunResult], list[tuple[Path, EyeblinkError]]]:
    from eyeblink.runtime.procs.parallel import ParallelConfig, ParallelPipeline, supports

    if workers > 1 and analyzer is None and supports(config):
        pipe = ParallelPipeline(
            config, ParallelConfig(workers=workers, loaders=loaders, start_method=start_method)
        )
        # --view: the rows in this process, the frames from the loader
        pipe.view = view  # type: ignore[attr-defined]
        if len(paths) > 1 and not config.detect.accelerator_stage and view is None:
            return _pooled(paths, outdir, config, pipe, progress=progress, opts=opts)
        return _run_each(
            paths,
            config,
            lambda src: _finalize(
                pipe.process_source(src, outdir, progress=progress), config, opts
            ),
        )
    ref = analyzer or build_analyzer(config)

    def one(source: FrameSource) -> RunResult:
        ref.reset()
        return _finalize(
            process_source(source, outdir, config, analyzer=ref, progress=progress, view=view),
            config,
            opts,
        )

    return _run_each(paths, config, one)


def _pooled(
    paths: Sequence[Path],
    outdir: Path,
    config: RunConfig,
    pipe: Any,
    *,
    progress: ProgressFactory | None,
    opts: AnalysisOptions,
) -> tuple[list[RunResult], list[tuple[Path, EyeblinkError]]]:
    """Several inputs: the short ones whole on a pool of long-lived processes
    (:mod:`eyeblink.runtime.procs.pool`: the models loaded once, no start per input), the long ones
    after them through the multiprocess pipeline ``pipe``; results and failures in input order."""
    from eyeblink.runtime.procs.pool import FilePool

    run_one = _PooledInput(outdir, config, opts)
    bar = progress(f"{len(paths)} inputs", None) if progress else None
    try:
        pool = FilePool(
            config, pipe.par.n_workers, pipe.fitter, run_one, FATAL, start_method=pipe.start_method
        )
        done = pool.run(
            paths, on_done=lambda _i, r: bar.update(r.frames) if bar is not None else None
        )
    finally:
        if bar is not None:
            bar.close()
    results = dict(done.results)
    failures = {i: (paths[i], exc) for i, exc in done.failures.items()}
    for i in done.handed_back:  # long (or of unknown length): every core on one input at a time
        one, failed = _run_each(
            [paths[i]],
            config,
            lambda src: _finalize(
                pipe.process_source(src, outdir, progress=progress), config, opts
            ),
        )
        if one:
            results[i] = one[0]
        if failed:
            failures[i] = failed[0]
    return [results[i] for i in sorted(results)], [failures[i] for i in sorted(failures)]


class _PooledInput:
    """What a pool worker does with one input: the reference run, then its finalize (a class, not a
    closure: a spawned worker gets it pickled)."""

    def __init__(self, outdir: Path, config: RunConfig, opts: AnalysisOptions) -> None:
        self.outdir, self.config, self.opts = outdir, config, opts

    def __call__(self, source: FrameSource, analyzer: FrameAnalyzer) -> RunResult:
        return _finalize(
            process_source(source, self.outdir, self.config, analyzer=analyzer),
            self.config,
            self.opts,
        )


def _finalize(result: RunResult, config: RunConfig, opts: AnalysisOptions) -> RunResult:
    """:func:`finalize`; if it fails, the summary says so too (``failed`` and the error), so that
    the exit status and ``summary.json`` never disagree."""
    try:
        return finalize(result, config, opts)
    except EyeblinkError as exc:
        record_failure(result, exc)
        raise


def record_failure(result: RunResult, exc: EyeblinkError) -> None:
    """Rewrite ``result``'s summary with ``status: failed``, the error and its exit status (best
    effort: the error itself is what the user is told; a summary that cannot be written is left as
    it was)."""
    _rewrite_summary(
        result,
        {**result.summary, "status": "failed", "exit_status": exc.exit_code, "error": str(exc)},
    )


def record_output(result: RunResult, key: str, path: Path) -> None:
    """A file written for ``result`` after its summary (``--report``'s HTML): added to
    ``result.outputs`` and to the summary's ``outputs`` (best effort, as :func:`record_failure`)."""
    result.outputs[key] = path
    outputs = {**(result.summary.get("outputs") or {}), key: str(path)}
    result.summary["outputs"] = outputs
    _rewrite_summary(result, result.summary)


def report_writer(outdir: Path) -> Callable[[list[RunResult]], None]:
    """What ``--report`` runs after the inputs (``process_paths``' ``then``): each session's
    ``<stem>.eyes.webm`` (:mod:`eyeblink.outputs.eyevideo`) and ``<stem>.report.html``, named in its
    summary's ``outputs``."""

    def write_reports(results: list[RunResult]) -> None:
        from eyeblink.errors import warn
        from eyeblink.outputs.eyevideo import write_eyes_video
        from eyeblink.outputs.report import write_report

        for r in results:
            try:  # the eyes' video first: the page links it when it is there
                record_output(r, "eyes_video", write_eyes_video(outdir / r.stem))
            except (InputNotFoundError, ConfigError) as exc:
                warn(f"{r.stem}: no eyes' video beside the report ({exc})")
            record_output(r, "report", write_report(outdir / r.stem))

    return write_reports


def add_output(summary_path: Path, key: str, path: Path) -> None:
    """Name ``path`` in the ``outputs`` of the summary at ``summary_path`` (best effort, as
    :func:`record_output`)."""
    import json

    from eyeblink.outputs.export import write_text_atomic

    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    summary["outputs"] = {**(summary.get("outputs") or {}), key: str(path)}
    with contextlib.suppress(OutputError):
        write_text_atomic(summary_path, json.dumps(summary, indent=2, allow_nan=False) + "\n")


def _rewrite_summary(result: RunResult, summary: dict[str, Any]) -> None:
    import json

    from eyeblink.outputs.export import clean_json, write_text_atomic

    path = result.outputs.get("summary")
    if path is None:
        return
    try:
        write_text_atomic(
            Path(path),
            json.dumps(clean_json(summary), indent=2, default=str, allow_nan=False) + "\n",
        )
    except OutputError:
        from eyeblink.outputs.export import write_summary_in_place

        write_summary_in_place(Path(path), clean_json(summary))


def _run_each(
    paths: Sequence[Path], config: RunConfig, run: Callable[[FrameSource], RunResult]
) -> tuple[list[RunResult], list[tuple[Path, EyeblinkError]]]:
    from eyeblink.sources.files import open_source

    results: list[RunResult] = []
    failures: list[tuple[Path, EyeblinkError]] = []
    for path in paths:
        try:
            with open_source(path, fps=config.fps) as source:
                results.append(run(source))
        # this input's files (disk full, read-only file): try the others
        except OutputWriteError as exc:
            failures.append((path, exc))
        except FATAL:
            raise
        except EyeblinkError as exc:
            failures.append((path, exc))
    return results, failures


def eye_point_fitter(summary: dict[str, Any]) -> Callable[[np.ndarray], np.ndarray | None]:
    """The session's eye model as a function frame -> the 12 eye points (``None``: no face), for the
    overlay.

    The model and its file come from ``summary.json``'s settings; each frame is detected afresh (the
    box of the run's keyframe policy is not kept with its keypoints), so the points are what the
    model sees in that frame.
    """
    import cv2

    lm = (summary.get("settings") or {}).get("landmarks") or {}
    cfg = RunConfig().with_overrides(
        "landmarks", model=lm.get("model"), model_path=lm.get("model_path")
    )
    detector, fitter = build_detector(cfg), build_fitter(cfg)

    def points(image: np.ndarray) -> np.ndarray | None:
        face = detector.track(image)  # the subject at any roll
        if face is None:
            return None
        gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        pts = fitter.fit(gray, face).points
        return pts if np.isfinite(pts).all() else None

    return points
