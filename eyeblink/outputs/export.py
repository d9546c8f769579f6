"""Writers for the output contract (see DESIGN.md):

* ``<stem>.frames.csv`` — one row per decoded frame;
* ``<stem>.blinks.csv`` — one row per blink event;
* ``<stem>.summary.json`` — counts, rates, timings, versions, settings.

Rows are written as they are produced and flushed at least every
``flush_interval_s``, and on close, so a crash or Ctrl-C keeps every row
already computed. Floats are written with enough digits to round-trip EAR to
1e-7; an empty cell means "not measured" (no face, eye not fitted).
Column meanings never change between releases; new columns are appended.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from eyeblink.closing import Closing
from eyeblink.errors import OutputError
from eyeblink.signals.blinks import BLINK_COLUMNS, BlinkEvent

FRAME_COLUMNS = (
    "frame",        # decode order, 0-based
    "timestamp_s",  # container presentation timestamp (or arrival time), seconds
    "face",         # 1 when a face was measured in this frame, else 0
    "ear_left",     # subject's left eye EAR (dlib points 42-47)
    "ear_right",    # subject's right eye EAR (dlib points 36-41)
    "ear",          # mean of the eyes measured
    "baseline_ear", # the blink detector's open-eye baseline at this frame
    "detected",     # 1 when the face detector ran on this frame (keyframe), 0 when the box was reused
    "face_score",   # BlazeFace score of the box used
    "face_x0", "face_y0", "face_x1", "face_y1",  # the face box used, frame pixels
    "closure",      # fraction of eyelid closure (FEC): 0 = open baseline, 1 = full closure (eyeblink.signals.closure)
)


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.9g}"
    return v


def ensure_output_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and prove it is writable, before any frame is read."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".eyeblink-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutputError(
            f"cannot write to output directory {p} ({exc.strerror or exc}); choose another with -o"
        ) from None
    return p


class _CsvStream:
    def __init__(self, path: Path, columns: Sequence[str], flush_interval_s: float) -> None:
        self.path = path
        try:
            self._fh: IO[str] = path.open("w", newline="", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"cannot create {path} ({exc.strerror or exc}); choose another -o") from None
        self._w = csv.writer(self._fh, lineterminator="\n")
        self._w.writerow(columns)
        self._columns = columns
        self._interval = flush_interval_s
        self._next_flush = time.monotonic() + flush_interval_s
        self.rows = 0

    def write(self, values: Sequence[Any]) -> None:
        self._w.writerow([_cell(v) for v in values])
        self.rows += 1
        now = time.monotonic()
        if now >= self._next_flush:
            self._fh.flush()
            self._next_flush = now + self._interval

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()


class ResultWriter(Closing):
    """The sink's writer for one input. Use as a context manager; ``close`` is idempotent."""

    def __init__(self, outdir: str | Path, stem: str, *, flush_interval_s: float = 0.5) -> None:
        self.outdir = Path(outdir)
        self.stem = stem
        self.frames_path = self.outdir / f"{stem}.frames.csv"
        self.blinks_path = self.outdir / f"{stem}.blinks.csv"
        self.summary_path = self.outdir / f"{stem}.summary.json"
        self._frames = _CsvStream(self.frames_path, FRAME_COLUMNS, flush_interval_s)
        self._blinks = _CsvStream(self.blinks_path, BLINK_COLUMNS, flush_interval_s)

    @property
    def frame_rows(self) -> int:
        return self._frames.rows

    @property
    def blink_rows(self) -> int:
        return self._blinks.rows

    def write_frame(self, row: Sequence[Any]) -> None:
        """One frames.csv row, values in FRAME_COLUMNS order."""
        self._frames.write(row)

    def write_blink(self, ev: BlinkEvent) -> None:
        r = ev.as_row()
        self._blinks.write([r[c] for c in BLINK_COLUMNS])

    def write_summary(self, summary: dict[str, Any]) -> None:
        tmp = self.summary_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=_json_default, allow_nan=False) + "\n",
                       encoding="utf-8")
        tmp.replace(self.summary_path)

    def close(self) -> None:
        self._frames.close()
        self._blinks.close()


def read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    """A CSV written by :class:`ResultWriter`: (header, rows); an empty file gives ``([], [])``."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return (rows[0], rows[1:]) if rows else ([], [])


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def clean_json(obj: Any) -> Any:
    """Replace NaN/inf floats by None, recursively, so the summary is strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj
