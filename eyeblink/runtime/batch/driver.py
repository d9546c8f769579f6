"""``eyeblink batch``: a lab's whole archive on a Ray cluster (or on this machine's cores).

::

    driver (this process)                                 Ray cluster (one task per video or chunk)
    ─────────────────────                                 ─────────────────────────────────────────
    expand patterns / @lists ─► probe each video          run_chunk(task) on a node, num_cpus=N:
    (frames, fps) ─► skip what the manifest says is       the multiprocess pipeline (loader -> N
    done ─► plan chunks ─► submit ─► as tasks finish:     detect+landmark workers -> ordered sink)
    merge chunks, FEC calibration, manifest line,         on that node's cores; num_gpus > 0: a GPU
    progress bar                                          backend (jax / tensorflow) in one process

**Outputs** are exactly what ``eyeblink process`` writes, per video, in ``OUTDIR``:
``<stem>.frames.csv``, ``<stem>.blinks.csv``, ``<stem>.summary.json`` (the summary gains a ``batch``
section). Inputs and ``OUTDIR`` must be on a filesystem every node sees (NFS, Lustre, a bind mount):
tasks read the videos and write their files there directly; nothing large goes through Ray's
object store.

**Chunks.** A video longer than ``chunk_s`` is split into time chunks so one recording can use many
nodes. Chunk ``k`` is frames ``[start_k, end_k)``; borders are multiples of the tracking segment
(:data:`~eyeblink.sources.chunking.ALIGN_FRAMES` = :data:`~eyeblink.frame.analyzer.SEGMENT_FRAMES`;
the plan and a chunk's frame source are :mod:`eyeblink.sources.chunking`), where every runtime
restarts the keyframe policy, so a chunk's per-frame measurements (face box, eye points, openness,
the eye patches) are those of an unsplit run. A chunk task runs only that per-frame stage and leaves
its records in the staging folder (:mod:`eyeblink.runtime.batch.chunks`); once every chunk of the
video is measured, the driver runs the session's sink (blink detector, closure, writers, summary)
over all of them in frame order, exactly as ``process`` does: the rows and blinks are byte-identical
to ``process``'s for any ``--chunk-s`` and ``--cpus-per-task``. The summary gains a ``batch``
section (the chunks, their nodes and times). A chunk decodes (and drops) the frames before its
start: for intra-only codecs (MJPG) that is ~0.5 ms per skipped frame, a few percent of the 3-4 ms
per frame of analysis per core; very long recordings in long-GOP codecs would profit from a seek,
which frame numbering by decode order makes unsafe in general.

**Short videos** (whole, up to :data:`SHORT_FRAMES`) go in groups (:func:`_groups`) to
:class:`ShortFiles` actors, one CPU each, which load the models once and keep them for every group
they run.

**Manifest.** ``OUTDIR/eyeblink-batch.jsonl``, one JSON object per input (done or failed; its latest
run), appended and fsynced by the driver only, and compacted to one line per input when a batch
starts and ends (see :class:`~eyeblink.outputs.manifest.Manifest`). A rerun skips a video when a
``done`` line has the same key (absolute input path, size, mtime in ns, settings hash) and its three
output files exist; failed videos are tried again (a changed file has a new key anyway).

**Failures.** A user error in a task (:class:`~eyeblink.errors.EyeblinkError`: corrupt or truncated
video, no face, ...) is *returned*, not raised: the video is reported failed with the one-line
message and never retried. System failures are retried up to ``max_retries`` times by Ray: a task
whose process dies (OOM killer, node lost) and a pipeline :class:`~eyeblink.errors.WorkerError`
(a worker process of the multiprocess pipeline died), raised here as :class:`RetryableTaskError`.

Test hook (documented, used by ``tests/test_batch.py``):
``EYEBLINK_TEST_BATCH_FAULT=crash-once:STEM:MARKER``, read by the driver when it submits, makes the
first task of video ``STEM`` kill its Ray worker process (``os._exit``) unless the file ``MARKER``
exists (it creates it first), so a real system failure and Ray's retry are exercised; nothing else
reads it.

``ray`` is imported only inside :func:`run_batch` (extra ``eyeblink[ray]``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink import stopping
from eyeblink.closing import Closing
from eyeblink.config import RunConfig
from eyeblink.errors import ConfigError, EyeblinkError, WorkerError
from eyeblink.outputs.manifest import MANIFEST_NAME, Manifest, input_key, settings_hash
from eyeblink.runtime.batch import raycluster
from eyeblink.runtime.procs.processes import check_start_method, resolve_start_method
from eyeblink.signals.plausibility import kind_counts
from eyeblink.sources.chunking import ALIGN_FRAMES, ChunkSource, plan_chunks
from eyeblink.sources.files import input_stem
from eyeblink.sources.inputs import expand_inputs
from eyeblink.version import __version__

if TYPE_CHECKING:
    from eyeblink.frame.analyzer import FrameAnalyzer
    from eyeblink.runtime.pipeline import RunResult

__all__ = [
    "FAULT_ENV",
    "MANIFEST_NAME",
    "BatchConfig",
    "BatchReport",
    "ChunkTask",
    "Manifest",
    "RetryableTaskError",
    "expand_inputs",
    "run_batch",
    "run_chunk",
    "settings_hash",
]

#: Environment variable of the fault-injection test hook (see the module docstring).
FAULT_ENV = "EYEBLINK_TEST_BATCH_FAULT"
#: Staging folder (inside OUTDIR) for chunk outputs until their video is merged.
STAGING_NAME = ".eyeblink-batch"


class RetryableTaskError(EyeblinkError):
    """A system failure inside a task (a pipeline worker process died): Ray retries the task."""

    exit_code = 3


@dataclass(frozen=True)
class BatchConfig:
    """How ``batch`` spreads the work. Validated on construction (ConfigError names field and fix).

    ``cpus_per_task``: Ray CPUs one task asks for; the task runs the multiprocess pipeline with that
    many detect+landmark workers (1: the single-process pipeline). ``gpus_per_task`` > 0: tasks ask
    Ray for that many GPUs and use a GPU backend (:func:`gpu_task_config`: JAX or TensorFlow, in one
    process; their runtimes are not fork-safe). ``chunk_s``: videos longer than this are split into
    chunks of about this length (0: never split). ``overlap_s``: accepted for old command lines and
    ignored (chunks no longer overlap: one sink runs over the whole recording,
    :mod:`eyeblink.runtime.batch.chunks`). ``local_cpus``: CPUs of the local Ray instance started
    when no ``address`` is given (None: all).
    """

    cpus_per_task: int = 2
    gpus_per_task: float = 0.0
    chunk_s: float = 300.0
    overlap_s: float | None = None
    max_retries: int = 2
    address: str | None = None
    local_cpus: int | None = None
    progress: bool = True
    #: how a task's processes start on its node (``--start-method``); None: the node's
    #: ``EYEBLINK_START_METHOD``, else auto (:mod:`eyeblink.runtime.procs.processes`)
    start_method: str | None = None

    def __post_init__(self) -> None:
        if self.start_method is not None:  # the name here; whether the node offers it, on the node
            check_start_method(self.start_method)
        if self.cpus_per_task < 1:
            raise ConfigError(f"--cpus-per-task must be >= 1, got {self.cpus_per_task}")
        if not (self.gpus_per_task >= 0 and math.isfinite(self.gpus_per_task)):
            raise ConfigError(f"--gpus-per-task must be >= 0, got {self.gpus_per_task}")
        if not (self.chunk_s >= 0 and math.isfinite(self.chunk_s)):
            raise ConfigError(
                f"--chunk-s must be >= 0 seconds (0 = never split), got {self.chunk_s}"
            )
        if self.overlap_s is not None and not (
            self.overlap_s >= 0 and math.isfinite(self.overlap_s)
        ):
            raise ConfigError(f"--overlap-s must be >= 0 seconds, got {self.overlap_s}")
        if self.max_retries < 0:
            raise ConfigError(f"--max-retries must be >= 0, got {self.max_retries}")
        if self.local_cpus is not None and self.local_cpus < 1:
            raise ConfigError(f"--local-cpus must be >= 1, got {self.local_cpus}")


# ----------------------------------------------------------------------------------------- chunks


def gpu_task_config(config: RunConfig) -> RunConfig:
    """The run config of a GPU task (``--gpus-per-task`` > 0): a GPU backend the config names is
    kept; otherwise the ``gpu`` preset's choice, the first of JAX and TensorFlow installed here (the
    nodes run this environment)."""
    from eyeblink.detect import GPU_BACKENDS, first_installed_backend

    if config.detect.backend in {b.value for b in GPU_BACKENDS}:
        return config
    return config.with_overrides(
        "detect", backend=first_installed_backend([b.value for b in GPU_BACKENDS])
    )


@dataclass(frozen=True)
class ChunkTask:
    """One unit of work: a whole video (``whole``) or one chunk of it. Travels to a Ray worker."""

    path: str
    stem: str
    outdir: str
    index: int
    count: int
    start: int
    end: int | None
    config: RunConfig
    workers: int
    fault: str | None = None
    #: how the task's processes start on its node (``--start-method``; None: the node's environment,
    #: else auto)
    start_method: str | None = None

    @property
    def whole(self) -> bool:
        return self.count == 1

    @property
    def staging(self) -> Path:
        return Path(self.outdir) / STAGING_NAME / f"{self.stem}.chunk{self.index:04d}"


def _inject_fault(task: ChunkTask) -> None:
    if not task.fault:
        return
    kind, _, rest = task.fault.partition(":")
    stem, _, marker = rest.partition(":")
    if kind != "crash-once" or not stem or not marker:
        raise ConfigError(f"{FAULT_ENV} must be 'crash-once:STEM:MARKER', got {task.fault!r}")
    if stem == task.stem and task.index == 0 and not Path(marker).exists():
        Path(marker).write_text(f"crashed pid {os.getpid()}\n", encoding="utf-8", newline="\n")
        os._exit(71)


def run_chunk(task: ChunkTask) -> dict[str, Any]:
    """Process one task on this node (the body of the Ray task; callable without Ray too).

    Returns ``{"status": "done", ...}`` or ``{"status": "failed", "error": one line}`` for user
    errors (never retried); raises :class:`RetryableTaskError` for a pipeline worker that died.
    """
    from eyeblink.errors import one_line
    from eyeblink.outputs.analysis import finalize
    from eyeblink.sources.files import open_source

    _inject_fault(task)
    _remove_stale_rings()  # this node's leftovers of earlier crashed runs
    method = resolve_start_method(task.start_method)  # this node's: checked before any work
    cfg = task.config
    started = time.perf_counter()
    try:
        # one chunk of a split video: its per-frame measurements; the driver writes the rows
        if not task.whole:
            from eyeblink.runtime.batch.chunks import measure_chunk

            with open_source(task.path, fps=cfg.fps) as src:
                # a FrameSource's face, frames numbered from 0
                chunk: Any = ChunkSource(src, task.start, task.end)
                meta = measure_chunk(chunk, task.staging, cfg, task.workers, start_method=method)
            return {
                "status": "done",
                "stem": task.stem,
                "index": task.index,
                "frames": int(meta["frames"]),
                "blinks": None,
                "wall_s": time.perf_counter() - started,
                "damaged_packets": 0,
                "node": platform.node(),
                "pid": os.getpid(),
            }
        outdir = Path(task.outdir)
        outdir.mkdir(parents=True, exist_ok=True)
        from eyeblink.runtime.runner import settle_eye_measure

        # one eye: its own measure, from its own first seconds
        cfg = settle_eye_measure([Path(task.path)], cfg)
        with open_source(task.path, fps=cfg.fps) as src:
            result = finalize(_process(src, outdir, cfg, task.workers, method), cfg)
    except WorkerError as exc:
        raise RetryableTaskError(f"{task.stem} chunk {task.index}: {one_line(exc)}") from None
    except EyeblinkError as exc:
        return {
            "status": "failed",
            "error": one_line(exc),
            "stem": task.stem,
            "index": task.index,
            "wall_s": time.perf_counter() - started,
        }
    blinks, prolonged = kind_counts(result.blinks)
    return {
        "status": "done",
        "stem": task.stem,
        "index": task.index,
        "frames": result.frames,
        "blinks": blinks,
        "prolonged_closures": prolonged,
        "wall_s": time.perf_counter() - started,
        "damaged_packets": int((result.summary.get("damaged_packets") or {}).get("count") or 0),
        "node": platform.node(),
        "pid": os.getpid(),
    }


def _remove_stale_rings() -> None:
    from eyeblink.runtime.procs.shm import remove_stale_rings

    remove_stale_rings()


def _process(
    source: Any, outdir: Path, cfg: RunConfig, workers: int, start_method: str | None = None
) -> RunResult:
    from eyeblink.runtime.pipeline import process_source
    from eyeblink.runtime.procs.parallel import ParallelConfig, ParallelPipeline, supports
    from eyeblink.runtime.runner import build_analyzer

    if workers > 1 and supports(cfg):
        pipe = ParallelPipeline(
            cfg,
            ParallelConfig(workers=workers, chunk_frames=ALIGN_FRAMES, start_method=start_method),
        )
        return pipe.process_source(source, outdir)
    return process_source(source, outdir, cfg, analyzer=build_analyzer(cfg))


#: Short videos (whole, up to this many frames: 4 s at 500 FPS) share a task, up to
#: :data:`GROUP_FILES` of them and :data:`GROUP_FRAMES` frames in all: the task loads the models
#: once and keeps its processes for all of them (:mod:`eyeblink.runtime.procs.pool`), instead of
#: paying ~0.3-0.5 s of start per file.
SHORT_FRAMES = 2048
GROUP_FILES = 8
GROUP_FRAMES = 8192


def _groups(videos: list[_Video], gpu: bool) -> list[list[_Video]]:
    """The videos in submission order: runs of short whole videos gathered into groups, every
    other one alone."""
    out: list[list[_Video]] = []
    group: list[_Video] = []
    frames = 0
    for v in videos:
        cfg = v.tasks[0].config
        # a recording of one eye whose measure is its own (chosen in its task): alone, not on a
        # group's models
        own_measure = cfg.eye.roi is not None and cfg.eye_measure is None
        short = (
            not gpu
            and len(v.tasks) == 1
            and v.frames is not None
            and v.frames <= SHORT_FRAMES
            and not cfg.detect.accelerator_stage
            and not own_measure
        )
        if not short:
            out.append([v])
            continue
        assert v.frames is not None
        if group and (len(group) >= GROUP_FILES or frames + v.frames > GROUP_FRAMES):
            out.append(group)
            group, frames = [], 0
        group.append(v)
        frames += v.frames
    if group:
        out.append(group)
    return out


def run_group(
    tasks: list[ChunkTask], analyzer: FrameAnalyzer | None = None
) -> list[dict[str, Any]]:
    """Several short whole videos: models loaded once; with ``workers`` > 1 (and no ``analyzer``)
    each video runs whole on one of the long-lived processes of a
    :class:`~eyeblink.runtime.procs.pool.FilePool`, else one after the other in this process, with
    ``analyzer`` (a :class:`ShortFiles` actor's, loaded once for all its groups) or one built here.
    One outcome per task, in order (see :func:`run_chunk`)."""
    from eyeblink.errors import one_line
    from eyeblink.runtime.procs.pool import FilePool
    from eyeblink.runtime.runner import FATAL, build_analyzer

    for t in tasks:
        _inject_fault(t)
    _remove_stale_rings()
    method = resolve_start_method(tasks[0].start_method)  # this node's: checked before any work
    cfg, workers = tasks[0].config, tasks[0].workers
    outdir = Path(tasks[0].outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    run_one = _GroupInput(outdir, cfg)

    def done(t: ChunkTask, result: RunResult) -> dict[str, Any]:
        return {
            "status": "done",
            "stem": t.stem,
            "index": t.index,
            "frames": result.frames,
            "blinks": kind_counts(result.blinks)[0],
            "prolonged_closures": kind_counts(result.blinks)[1],
            "wall_s": float(result.summary["timings"]["wall_s"] or 0.0),
            "damaged_packets": int((result.summary.get("damaged_packets") or {}).get("count") or 0),
            "node": platform.node(),
            "pid": os.getpid(),
        }

    def failed(t: ChunkTask, exc: EyeblinkError) -> dict[str, Any]:
        return {
            "status": "failed",
            "error": one_line(exc),
            "stem": t.stem,
            "index": t.index,
            "wall_s": time.perf_counter() - started,
        }

    paths = [Path(t.path) for t in tasks]
    if workers > 1 and analyzer is None:
        from eyeblink.frame.analyzer import build_fitter

        pool = FilePool(cfg, workers, build_fitter(cfg), run_one, FATAL, start_method=method)
        got = pool.run(paths)
        outcomes = []
        for i, t in enumerate(tasks):
            if i in got.results:
                outcomes.append(done(t, got.results[i]))
            elif i in got.failures:
                outcomes.append(failed(t, got.failures[i]))
            else:  # longer than the pool takes (the probe said otherwise): the task's usual way
                outcomes.append(run_chunk(t))
        return outcomes
    from eyeblink.sources.files import open_source

    analyzer = analyzer or build_analyzer(cfg)
    outcomes = []
    for t in tasks:
        try:
            with open_source(t.path, fps=cfg.fps) as source:
                analyzer.reset()
                outcomes.append(done(t, run_one(source, analyzer)))
        except EyeblinkError as exc:
            outcomes.append(failed(t, exc))
    return outcomes


class _GroupInput:
    """What a pool worker does with one short video of a group: the reference run, then finalize (a
    class, not a closure: a spawned pool worker gets it pickled)."""

    def __init__(self, outdir: Path, config: RunConfig) -> None:
        self.outdir, self.config = outdir, config

    def __call__(self, source: Any, analyzer: Any) -> RunResult:
        from eyeblink.outputs.analysis import finalize
        from eyeblink.runtime.pipeline import process_source

        return finalize(
            process_source(source, self.outdir, self.config, analyzer=analyzer), self.config
        )


class ShortFiles:
    """The body of a long-lived Ray actor (one CPU) for groups of short whole videos: it loads the
    models once and runs every group it is given one video after the other (:func:`run_group`), so a
    trial clip costs its frames and the opening of its files, not a task's start and a model load.
    The driver starts one per CPU of the cluster while short groups are waiting and ends them when
    none is left (their CPUs go to the long videos' tasks). An actor lost with its node is not
    restarted: its groups run again as tasks, which Ray retries up to ``--max-retries`` times, and a
    new actor takes the groups still waiting (:class:`_ShortActors`)."""

    def __init__(self, config: RunConfig) -> None:
        from eyeblink.runtime.runner import build_analyzer

        _remove_stale_rings()
        self.config = config
        self.analyzer = build_analyzer(config)

    def run(self, tasks: list[ChunkTask]) -> list[dict[str, Any]]:
        return run_group(tasks, self.analyzer)


# ----------------------------------------------------------------------------------------- merge


def merge_chunks(
    tasks: Sequence[ChunkTask], outcomes: Sequence[dict[str, Any]], config: RunConfig
) -> RunResult:
    """A split video's session from its chunks' measurements (staging): one sink over every chunk in
    frame order (:func:`eyeblink.runtime.batch.chunks.sink_chunks`), so ``OUTDIR/<stem>.*`` are the
    files ``process`` writes."""
    from eyeblink.outputs.analysis import finalize
    from eyeblink.runtime.batch.chunks import Chunk, sink_chunks

    first = tasks[0]
    walls = [float(o.get("wall_s", 0.0)) for o in outcomes]
    section = {
        "batch": {
            "chunks": [
                {
                    "start": t.start,
                    "end": t.end,
                    "frames_processed": o.get("frames"),
                    "wall_s": w,
                    "node": o.get("node"),
                }
                for t, w, o in zip(tasks, walls, outcomes, strict=True)
            ]
        }
    }
    result = sink_chunks(
        Path(first.path),
        first.stem,
        Path(first.outdir),
        config,
        [Chunk(t.start, t.staging) for t in tasks],
        extra=section,
    )
    return finalize(result, config)


# ----------------------------------------------------------------------------------------- driver


@dataclass
class BatchReport:
    """What a batch did: per-video records (as in the manifest), the skipped inputs, wall time."""

    done: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    wall_s: float = 0.0
    frames: int = 0
    loadavg: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def damaged(self) -> list[dict[str, Any]]:
        """The done videos in which undecodable packets were skipped (``damaged_packets`` > 0)."""
        return [r for r in self.done if r.get("damaged_packets")]

    @property
    def fps(self) -> float:
        return self.frames / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class _Video:
    path: Path
    key: str
    ident: dict[str, Any]
    tasks: list[ChunkTask]
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
    failed: str | None = None
    refs: list[Any] = field(default_factory=list)
    frames: int | None = None  # the probe's frame count (None: unknown)
    # a split video's own (its eye measure, settled once for its chunks)
    config: RunConfig | None = None


def _preflight(config: RunConfig, outdir: Path, gpu: bool) -> None:
    """Fail before any task on what would fail every task: the output folder, the models (CPU
    runs)."""
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.runtime.pipeline import build_detector

    ensure_output_dir(outdir)
    if not gpu:  # a GPU run's backend need not be importable on the driver (a CPU head node)
        build_detector(config).close()


def run_batch(
    inputs: Sequence[str | Path],
    outdir: str | Path,
    config: RunConfig,
    batch: BatchConfig | None = None,
    *,
    on_video: Callable[[dict[str, Any]], None] | None = None,
) -> BatchReport:
    """Process every input on Ray into ``outdir``; returns the :class:`BatchReport`.

    Joins ``batch.address`` if given; else reuses an initialised Ray, else starts a local one with
    ``batch.local_cpus`` CPUs (no dashboard) and shuts it down at the end.
    """
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.outputs.lock import session_locks
    from eyeblink.runtime.runner import check_inputs, output_plan, stem_of

    bc = batch or BatchConfig()
    gpu = bc.gpus_per_task > 0
    if gpu:
        config = gpu_task_config(config)
    out = Path(outdir)
    if bc.overlap_s is not None:
        from eyeblink.errors import warn

        warn(
            "--overlap-s is ignored: chunks no longer overlap (one pass of the blink detector "
            "runs over the whole "
            "recording, in frame order)"
        )
    paths = expand_inputs([str(p) for p in inputs])
    check_inputs(paths)
    ensure_output_dir(out)
    output_plan(paths, out).check()  # no output is an input (eyeblink.outputs.paths)
    with session_locks(out, [stem_of(p) for p in paths]):  # one writer per session, before any work
        _preflight(config, out, gpu)
        ray = raycluster.import_ray()
        return _run_locked(paths, out, config, bc, gpu, ray, on_video)


def _run_locked(
    paths: list[Path],
    out: Path,
    config: RunConfig,
    bc: BatchConfig,
    gpu: bool,
    ray: Any,
    on_video: Callable[[dict[str, Any]], None] | None,
) -> BatchReport:
    """:func:`run_batch` once the inputs are checked and their sessions locked."""
    from eyeblink.sources.files import open_source

    t_start = time.perf_counter()
    manifest = Manifest(out)
    manifest.compact()  # an earlier run killed before it compacted
    done_keys = manifest.done_keys(out)
    settings = settings_hash(config)
    report = BatchReport()
    fault = os.environ.get(FAULT_ENV) or None
    # a GPU task: the accelerator stage (one process owns the GPU, the task's CPUs post-process),
    # unless the config keeps the Keras backend out of it (--stage fused: one process)
    workers = 1 if gpu and not config.detect.accelerator_stage else bc.cpus_per_task
    videos: list[_Video] = []

    def record(
        v: _Video,
        status: str,
        error: str | None,
        frames: int | None = None,
        blinks: int | None = None,
        damaged: int | None = None,
        closures: int | None = None,
    ) -> None:
        rec = {
            **v.ident,
            "key": v.key,
            "stem": input_stem(v.path),
            "status": status,
            "error": error,
            "frames": frames,
            "blinks": blinks,
            "prolonged_closures": closures,
            "damaged_packets": damaged,
            "chunks": len(v.tasks),
            "wall_s": sum(float(o.get("wall_s", 0.0)) for o in v.outcomes.values()),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "eyeblink": __version__,
        }
        manifest.append(rec)
        (report.done if status == "done" else report.failed).append(rec)
        if on_video is not None:
            on_video(rec)

    for p in paths:
        key, ident = input_key(p, settings)
        if key in done_keys:
            report.skipped.append(p)
            continue
        v = _Video(p, key, ident, [])
        videos.append(v)
        try:
            with open_source(p, fps=config.fps) as src:
                total, fps = src.frame_count_hint, src.nominal_fps
        # not a video, empty, ...: a user error, reported, never submitted
        except EyeblinkError as exc:
            from eyeblink.errors import one_line

            v.failed = one_line(exc)
            continue
        if config.max_frames is not None:
            total = min(total, config.max_frames) if total else None
        v.frames = total
        plan = plan_chunks(total, fps, bc.chunk_s)
        if config.max_frames is not None and len(plan) > 1:
            plan[-1] = (plan[-1][0], config.max_frames)
        vcfg = config
        # a split video of one eye: one measure for all its chunks, chosen here from its start
        if len(plan) > 1:
            try:
                from eyeblink.runtime.runner import settle_eye_measure

                vcfg = v.config = settle_eye_measure([Path(p)], config)
            except EyeblinkError as exc:
                from eyeblink.errors import one_line

                v.failed = one_line(exc)
                continue
        chunk_cfg = replace(vcfg, max_frames=None) if len(plan) > 1 else vcfg
        v.tasks = [
            ChunkTask(
                str(p),
                input_stem(v.path),
                str(out),
                i,
                len(plan),
                s,
                e,
                chunk_cfg,
                workers,
                fault,
                start_method=bc.start_method,
            )
            for i, (s, e) in enumerate(plan)
        ]

    started_here = False
    quiet = raycluster.notices_silenced()
    # a lost node, a retried task: one line each; Ray's own dumps go to the log
    messages = raycluster.RayMessages()
    handlers = raycluster.python_signal_handlers()
    # a stop while Ray starts: raised once it has, in the try below that shuts it down
    hold = stopping.held()
    try:
        with raycluster.keeps_the_sigterm_handler(ray):
            if bc.address:
                raycluster.join(ray, bc.address)
                started_here = True
            elif not ray.is_initialized():
                ray.init(
                    num_cpus=bc.local_cpus,
                    include_dashboard=False,
                    configure_logging=False,
                    log_to_driver=False,
                )
                started_here = True
    except BaseException:
        hold.release(raise_stop=False)
        raise
    # ray.init installs a C++ SIGTERM handler (a stack dump, exit 1)
    raycluster.restore_signal_handlers(handlers)
    actors: _ShortActors | None = None
    try:
        hold.release()
        remote = ray.remote(run_chunk).options(
            num_cpus=bc.cpus_per_task,
            num_gpus=bc.gpus_per_task,
            max_retries=bc.max_retries,
            retry_exceptions=[RetryableTaskError],
        )
        pending: dict[Any, list[tuple[_Video, ChunkTask]]] = {}
        for v in videos:
            if v.failed is not None:
                record(v, "failed", v.failed)
        short: list[list[_Video]] = []
        for group in _groups([v for v in videos if v.failed is None], gpu):
            if len(group) == 1:  # a long (or split) video, or a short one alone: its own task(s)
                for v in group:
                    for t in v.tasks:
                        ref = remote.remote(t)
                        v.refs.append(ref)
                        pending[ref] = [(v, t)]
                continue
            short.append(group)
        actors = _ShortActors(ray, config, bc, short, pending)
        total_frames = sum(
            ((t.end if t.end is not None else (v.frames or 0)) - t.start)
            for v in videos
            for t in v.tasks
        )
        bar = _progress_bar(bc.progress, total_frames or None, len(pending))
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    items = pending.pop(ref)
                    # its actor was lost (with its node)
                    if actors is not None and actors.finished(ref):
                        print(
                            "eyeblink: batch: a worker was lost with its node; running its "
                            f"{len(items)} videos "
                            "again",
                            file=sys.stderr,
                            flush=True,
                        )
                        again = (
                            ray.remote(run_group)
                            .options(
                                num_cpus=1,
                                max_retries=bc.max_retries,
                                retry_exceptions=[RetryableTaskError],
                                # the group again, as a task Ray retries itself
                            )
                            .remote([t for _, t in items])
                        )
                        pending[again] = items
                        for v, _ in items:
                            v.refs.append(again)
                        continue
                    outcomes = _get_group(ray, ref, bc.max_retries, len(items))
                    for (v, t), outcome in zip(items, outcomes, strict=True):
                        v.outcomes[t.index] = outcome
                        if bar is not None:
                            bar.update(outcome.get("frames") or 0)
                        _settle(ray, v, t, outcome, pending, config, record, report)
                    if bar is not None:
                        bar.set_postfix(
                            done=len(report.done), failed=len(report.failed), refresh=False
                        )
        # Ctrl-C or SIGTERM: the videos in flight say so; a rerun does them again
        except KeyboardInterrupt:
            _mark_interrupted({id(v): v for items in pending.values() for v, _ in items}.values())
            raise
        finally:
            if bar is not None:
                bar.close()
    finally:
        if actors is not None:
            actors.close()
        quiet.close()
        messages.close()
        with contextlib.suppress(EyeblinkError):  # a full disk: the appended lines are still there
            # one line per input: this run's lines replace the earlier runs' of the same inputs
            manifest.compact()
        if started_here:
            ray.shutdown()
        # the rings of this machine's Ray workers, killed at shutdown or by a signal
        _remove_stale_rings()
    report.wall_s = time.perf_counter() - t_start
    from eyeblink.host import load_average

    report.loadavg = load_average() or (0.0, 0.0, 0.0)
    return report


class _ShortActors(Closing):
    """The :class:`ShortFiles` actors of a batch and the short groups waiting for them: up to two
    groups in flight per actor (one runs, one waits in the actor's queue), the next group submitted
    as one finishes; an actor with nothing left to do is ended (:meth:`finished`). Submitted refs go
    into ``pending`` as the tasks' do. An actor lost with its node is not restarted (Ray would not
    retry its calls): :meth:`finished` says so, and the driver runs that group again as a task."""

    def __init__(
        self,
        ray: Any,
        config: RunConfig,
        bc: BatchConfig,
        groups: list[list[_Video]],
        pending: dict[Any, list[tuple[_Video, ChunkTask]]],
    ) -> None:
        self.ray, self.pending = ray, pending
        self.waiting = list(reversed(groups))
        self.actor_of: dict[Any, Any] = {}
        self.busy: dict[int, int] = {}
        self.actors: list[Any] = []
        if not groups:
            return
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n = max(1, min(len(groups), cpus))
        self.config = config
        self.cls = ray.remote(ShortFiles).options(num_cpus=1, max_restarts=0)
        self.actors = [self.cls.remote(config) for _ in range(n)]
        for _ in range(2):
            for actor in self.actors:
                self._submit(actor)

    def _start_one(self) -> None:
        """One more actor with up to two waiting groups (none when no group waits: an idle actor
        would hold a CPU the long videos' tasks need)."""
        if not self.waiting:
            return
        actor = self.cls.remote(self.config)
        self.actors.append(actor)
        for _ in range(2):
            self._submit(actor)

    def _submit(self, actor: Any) -> None:
        if not self.waiting:
            return
        group = self.waiting.pop()
        ref = actor.run.remote([v.tasks[0] for v in group])
        for v in group:
            v.refs.append(ref)
        self.pending[ref] = [(v, v.tasks[0]) for v in group]
        self.actor_of[ref] = actor
        self.busy[id(actor)] = self.busy.get(id(actor), 0) + 1

    def finished(self, ref: Any) -> bool:
        """``ref`` is done: its actor takes the next waiting group, or ends when it has none in
        flight. True when ``ref`` was an actor's call that failed with its actor (the group is to be
        run again)."""
        actor = self.actor_of.pop(ref, None)
        if actor is None:
            return False
        self.busy[id(actor)] -= 1
        try:
            self.ray.get(ref, timeout=0)
        # the actor died (its node was lost): no more groups for it
        except self.ray.exceptions.RayError:
            self.busy[id(actor)] = 0
            self._end(actor)
            self._start_one()  # a replacement, placed where a CPU is free, while groups wait
            return True
        self._submit(actor)
        if not self.busy[id(actor)]:
            self._end(actor)
        return False

    def _end(self, actor: Any) -> None:
        with contextlib.suppress(Exception):
            self.ray.kill(actor)
        self.actors = [a for a in self.actors if a is not actor]

    def close(self) -> None:
        for actor in list(self.actors):
            self._end(actor)


def _mark_interrupted(videos: Iterable[_Video]) -> None:
    """The summaries of videos whose tasks were still running say ``interrupted`` (not ``running``);
    their rows so far stay on disk, no manifest line is written, so the next run of the batch
    processes them again."""
    from eyeblink.outputs.export import write_text_atomic

    # a split video's summary is written by its merge
    for t in (t for v in videos for t in v.tasks if t.whole):
        path = Path(t.outdir) / f"{t.stem}.summary.json"
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if summary.get("status") == "running":
            from eyeblink import stopping

            summary.update(
                status="interrupted",
                exit_status=stopping.STOPPED_EXIT,
                error=f"{stopping.reason()}: the batch stopped; run it again to process this video",
            )
            with contextlib.suppress(EyeblinkError):
                write_text_atomic(path, json.dumps(summary, indent=2) + "\n")


def _progress_bar(enabled: bool, total: int | None, tasks: int) -> Any:
    if not enabled or not sys.stderr.isatty() or not tasks:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="batch", unit="frame", unit_scale=True, dynamic_ncols=True)


def _get(ray: Any, ref: Any, retries: int) -> dict[str, Any]:
    """The task's outcome; a task that failed for good (after its retries) becomes a failed
    outcome."""
    from eyeblink.errors import one_line

    try:
        return dict(ray.get(ref))
    # Ray re-raises the task's exception type (as a RayTaskError subclass)
    except RetryableTaskError as exc:
        return {"status": "failed", "error": f"{one_line(exc)} (after {retries} retries)"}
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None)
        text = (
            one_line(cause)
            if isinstance(cause, EyeblinkError)
            else one_line(exc).split(" Traceback")[0]
        )
        return {"status": "failed", "error": f"task failed after {retries} retries: {text[:300]}"}


def _get_group(ray: Any, ref: Any, retries: int, n: int) -> list[dict[str, Any]]:
    """The outcomes of a task's ``n`` videos (a :func:`run_group` task returns a list; a failed
    task fails all)."""
    try:
        value = ray.get(ref)
    except Exception:
        return [_get(ray, ref, retries)] * n
    return [dict(o) for o in value] if isinstance(value, list) else [dict(value)]


def _settle(
    ray: Any,
    v: _Video,
    t: ChunkTask,
    outcome: dict[str, Any],
    pending: dict[Any, Any],
    config: RunConfig,
    record: Callable[..., None],
    report: BatchReport,
) -> None:
    """Book one finished task; when its video is complete, merge it and write the manifest line."""
    from eyeblink.errors import one_line

    if v.failed is not None:
        return  # the video already failed (another chunk): ignore the rest
    if outcome.get("status") != "done":
        v.failed = outcome.get("error") or "failed"
        if len(v.tasks) > 1:
            v.failed = f"chunk {t.index} of {len(v.tasks)}: {v.failed}"
        for ref in v.refs:
            if ref in pending:
                pending.pop(ref)
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
        record(v, "failed", v.failed)
        return
    if len(v.outcomes) < len(v.tasks):
        return
    if len(v.tasks) == 1:
        record(
            v,
            "done",
            None,
            outcome.get("frames"),
            outcome.get("blinks"),
            int(outcome.get("damaged_packets") or 0),
            closures=outcome.get("prolonged_closures"),
        )
        report.frames += int(outcome.get("frames") or 0)
        return
    try:
        merged = merge_chunks(
            v.tasks, [v.outcomes[i] for i in range(len(v.tasks))], v.config or config
        )
    except EyeblinkError as exc:
        v.failed = one_line(exc)
        record(v, "failed", v.failed)
        return
    import shutil

    for tk in v.tasks:
        shutil.rmtree(tk.staging, ignore_errors=True)
    with contextlib.suppress(OSError):
        (Path(v.tasks[0].outdir) / STAGING_NAME).rmdir()
    record(
        v,
        "done",
        None,
        merged.frames,
        kind_counts(merged.blinks)[0],
        int((merged.summary.get("damaged_packets") or {}).get("count") or 0),
        closures=kind_counts(merged.blinks)[1],
    )
    report.frames += merged.frames
