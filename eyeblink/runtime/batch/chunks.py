"""One recording over several ``batch`` tasks: each task measures a chunk, one ordered sink writes
the session.

::

    chunk task k (any node)                        the batch driver, once every chunk is measured
    ───────────────────────                        ──────────────────────────────────────────────
    frames [start_k, end_k) ─► the per-frame       chunk 0, 1, ... in frame order ─► SessionSink:
    stage (decode, keyframe policy, eye model:     the blink detector, the closure, the writers
    FrameAnalyzer, 1 process or the multiprocess   and the summary of the reference run
    pipeline) ─► records (results.record_dtype)    ─► OUTDIR/<stem>.*
    ─► staging/rows.bin + meta.json

Why this split: the per-frame stage is a function of the frame and of its tracking segment only
(:data:`~eyeblink.frame.analyzer.SEGMENT_FRAMES`: the keyframe policy restarts on every multiple of
it in every runtime), so a chunk whose borders are whole segments measures exactly what an unsplit
run measures. The blink detector and the closure are not: they carry a running open-eye level from
the first frame of the session to the last. So they run once per recording, over every chunk in
frame order, as in ``process``: the rows, blinks and crops are byte-identical to ``process``'s
whatever ``--chunk-s`` and ``--cpus-per-task``.

Cost: the records are ~0.8 KB a frame (the blink detector's eye patches are most of it; ~5 KB with
``--report``'s eye crops), written to the staging folder on the shared filesystem and removed once
merged; the ordered step costs what ``process``'s sink costs (~0.4 ms a frame on one core: blink
detection, writing), on the machine that runs ``batch``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from eyeblink import stopping
from eyeblink.config import RunConfig
from eyeblink.errors import EyeblinkError
from eyeblink.frame.analyzer import SEGMENT_FRAMES, FrameAnalyzer, StageClock
from eyeblink.runtime.pipeline import RunResult, SessionSink
from eyeblink.runtime.summary import Outcome, build_summary, session_outcome, write_running_summary

if TYPE_CHECKING:
    from eyeblink.sources.files import FrameSource

__all__ = ["META_NAME", "ROWS_NAME", "Chunk", "measure_chunk", "sink_chunks"]

#: A chunk's records (raw :func:`~eyeblink.runtime.procs.results.record_dtype` rows, frame order) in
#: its staging folder.
ROWS_NAME = "rows.bin"
#: A chunk's facts (frames, source description, stage clock, redetections, wall time), written last.
META_NAME = "meta.json"
_BLOCK = 256  # records per write in the single-process measurement, per read in the ordered step


@dataclass(frozen=True)
class Chunk:
    """One measured chunk: its first global frame (a multiple of :data:`SEGMENT_FRAMES`) and its
    staging folder."""

    start: int
    staging: Path

    def __post_init__(self) -> None:
        if self.start < 0 or self.start % SEGMENT_FRAMES:
            raise ValueError(
                f"a chunk starts on a tracking segment (a multiple of {SEGMENT_FRAMES}), got "
                f"{self.start}"
            )


def measure_chunk(
    source: FrameSource,
    staging: Path,
    config: RunConfig,
    workers: int,
    *,
    start_method: str | None = None,
) -> dict[str, Any]:
    """The per-frame stage of ``source`` (a chunk, its frames numbered from 0) into ``staging``;
    returns its facts.

    ``workers`` > 1 (and a config the multiprocess pipeline runs): its loader and workers; else this
    process. ``meta.json`` is written last, so a chunk with no ``meta.json`` was not measured to its
    end.
    """
    from eyeblink.outputs.export import write_text_atomic
    from eyeblink.runtime.procs.parallel import ParallelConfig, ParallelPipeline, supports
    from eyeblink.runtime.procs.results import record_dtype

    staging.mkdir(parents=True, exist_ok=True)
    meta_path = staging / META_NAME
    meta_path.unlink(missing_ok=True)  # a retried task: its earlier attempt's facts no longer hold
    started = time.perf_counter()
    frames = 0
    with (staging / ROWS_NAME).open("wb") as fh:

        def capture(rows: np.ndarray) -> None:
            nonlocal frames
            if len(rows) and int(rows["index"][0]) != frames:
                raise EyeblinkError(
                    f"{source.name}: chunk records out of order (frame {int(rows['index'][0])} "
                    f"after {frames}); rerun the batch"
                )
            fh.write(rows.tobytes())
            frames += len(rows)

        if workers > 1 and supports(config):
            pipe = ParallelPipeline(
                config,
                ParallelConfig(
                    workers=workers, chunk_frames=SEGMENT_FRAMES, start_method=start_method
                ),
            )
            info, clock, redetections = pipe.measure_source(source, capture)
        else:
            from eyeblink.runtime.runner import build_analyzer

            analyzer = build_analyzer(config)
            _measure_here(source, analyzer, record_dtype(config), capture)
            info, clock, redetections = source.describe(), analyzer.clock, analyzer.redetections
    meta = {
        "frames": frames,
        "source": info or source.describe(),
        "seconds": dict(clock.seconds),
        "calls": dict(clock.calls),
        "redetections": redetections,
        "wall_s": time.perf_counter() - started,
    }
    write_text_atomic(meta_path, json.dumps(meta, default=str) + "\n")
    return meta


def _measure_here(
    source: FrameSource,
    analyzer: FrameAnalyzer,
    dtype: np.dtype,
    capture: Callable[[np.ndarray], None],
) -> None:
    """The per-frame stage in this process: the reference run's loop without its sink."""
    from eyeblink.runtime.procs.results import encode_result

    clock = analyzer.clock
    out = np.zeros(_BLOCK, dtype)
    n = 0
    it = iter(source)
    while True:
        t0 = time.perf_counter()
        frame = next(it, None)
        if frame is None:
            break
        clock.add("decode", time.perf_counter() - t0)
        encode_result(out[n], analyzer.analyze(frame))
        n += 1
        if n == _BLOCK:
            capture(out)
            out, n = np.zeros(_BLOCK, dtype), 0
        stopping.check()
    if n:
        capture(out[:n])


class _ChunkedSource:
    """What the summary needs to know of a recording whose chunks were decoded elsewhere: the last
    chunk's description (it read to the end), every chunk's damaged packets once each."""

    def __init__(self, path: Path, name: str, metas: Sequence[dict[str, Any]]) -> None:
        self.path, self.name = path, name
        info = dict(metas[-1]["source"]) if metas else {}
        info.pop("frame_range", None)
        damaged = {
            json.dumps(p, sort_keys=True, default=str): p
            for m in metas
            for p in (m["source"].get("damaged_packets") or [])
        }
        if damaged or "damaged_packets" in info:
            info["damaged_packets"] = list(damaged.values())
        self._info = info

    def describe(self) -> dict[str, Any]:
        return self._info


@dataclass
class _Redetections:
    redetections: int = 0


def sink_chunks(
    path: Path,
    stem: str,
    outdir: Path,
    config: RunConfig,
    chunks: Sequence[Chunk],
    *,
    extra: dict[str, Any] | None = None,
) -> RunResult:
    """Run the session's sink over the measured ``chunks`` (in frame order, tiling the recording)
    into ``outdir``: the files ``process`` writes, ended the way ``process`` ends a session (a
    recording without a face fails with its one-line error after the rows are written). ``extra``:
    summary sections to add (the ``batch`` section). Not yet finalised
    (:func:`eyeblink.outputs.analysis.finalize`)."""
    from eyeblink.outputs.export import ResultWriter
    from eyeblink.runtime.procs.results import record_dtype

    metas = [_read_meta(c, stem) for c in chunks]
    clock = StageClock()
    for m in metas:
        clock.merge(m["seconds"], m["calls"])
    # a stand-in for the source: the summary reads only its path, name and describe()
    view = cast("FrameSource", _ChunkedSource(path, stem, metas))
    redet = _Redetections(sum(int(m["redetections"]) for m in metas))
    dtype = record_dtype(config)
    started = time.perf_counter()
    # a stop once the files exist: raised in the try below
    with ExitStack() as stack, stopping.held() as hold:
        writer = stack.enter_context(ResultWriter(outdir, stem))
        sink = SessionSink(writer, config, clock)
        outcome = Outcome()
        try:
            with session_outcome(sink, view) as outcome:
                hold.release()
                with stopping.held():
                    write_running_summary(writer, view, config)
                for c, m in zip(chunks, metas, strict=True):
                    _feed(sink, c, m, dtype, stem)
        finally:
            with stopping.held():
                outcome.stopped_at_the_end()
                wall = sum(float(m["wall_s"]) for m in metas) + time.perf_counter() - started
                summary = build_summary(
                    view,
                    config,
                    sink,
                    clock,
                    redet,
                    wall,
                    outcome.status,
                    outcome.error,
                    exit_status=outcome.exit_status,
                )
                summary.update(extra or {})
                writer.finish(summary)
    return RunResult(stem, sink.frames, sink.faces, sink.events, summary, sink.output_paths())


def _read_meta(chunk: Chunk, stem: str) -> dict[str, Any]:
    try:
        meta = json.loads((chunk.staging / META_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise EyeblinkError(
            f"{stem}: the chunk from frame {chunk.start} has no complete measurements in "
            f"{chunk.staging}; rerun the batch"
        ) from None
    return dict(meta)


def _feed(
    sink: SessionSink, chunk: Chunk, meta: dict[str, Any], dtype: np.dtype, stem: str
) -> None:
    """A chunk's records, frame numbers made global, to the sink in frame order."""
    from eyeblink.runtime.procs.results import decode_rows

    rows_path = chunk.staging / ROWS_NAME
    n = int(meta["frames"])
    size = rows_path.stat().st_size if rows_path.exists() else -1
    if size != n * dtype.itemsize or sink.frames != chunk.start:
        raise EyeblinkError(
            f"{stem}: the chunk from frame {chunk.start} holds {max(size, 0) // dtype.itemsize} of "
            f"{n} records and follows frame {sink.frames}; a chunk ended early — rerun the batch"
        )
    if n == 0:
        return
    rows = np.memmap(rows_path, dtype=dtype, mode="r", shape=(n,))
    try:
        for a in range(0, n, _BLOCK):
            block = np.array(rows[a : a + _BLOCK])
            for r in decode_rows(block, shift=chunk.start):
                sink.add(r)
            stopping.check()
    finally:
        del rows
