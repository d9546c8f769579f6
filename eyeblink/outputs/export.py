"""Writers for the output contract (see DESIGN.md):

* ``<stem>.frames.csv`` — one row per decoded frame;
* ``<stem>.blinks.csv`` — one row per blink event;
* ``<stem>.summary.json`` — counts, rates, timings, versions, settings;
* ``<stem>.points.csv`` — with ``--points`` only: each frame's eye points and head pose.

Rows are written as they are produced and flushed at least every
``flush_interval_s``, and on close, so a crash or Ctrl-C keeps every row
already computed. Floats are written with enough digits to round-trip EAR to
1e-7; an empty cell means "not measured" (no face, eye not fitted).
Column meanings never change between releases; new columns are appended.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from eyeblink.closing import Closing
from eyeblink.errors import OutputError, OutputWriteError
from eyeblink.outputs import columns as _columns
from eyeblink.outputs.columns import FRAME_TABLE, FrameTable
from eyeblink.signals.blinks import BLINK_COLUMNS, BlinkEvent

#: The ``frames.csv`` header and the unit and meaning of each column, derived from the one
#: declaration of the columns (:data:`eyeblink.outputs.columns.FRAME_TABLE`: add a column there, and
#: only there).
FRAME_COLUMNS = FRAME_TABLE.names
FRAME_COLUMN_DOCS: dict[str, tuple[str, str]] = FRAME_TABLE.docs

#: ``points.csv`` (``--points``): the eye model's 12 eye points in dlib's iBUG-68 numbering (36..41
#: the subject's right eye, 42..47 the subject's left eye), x then y, then the face mesh's head pose
#: and the frame it came from.
POINT_INDICES = tuple(range(36, 48))
POINTS_COLUMNS = (
    "frame",
    "timestamp_s",
    *(f"p{i}_{axis}" for i in POINT_INDICES for axis in ("x", "y")),
    "yaw",
    "pitch",
    "roll",
    "pose_frame",
)


def _point_name(i: int) -> str:
    """What dlib's eye point ``i`` (36..47) is on the subject's face."""
    if i < 42:
        return (
            "subject's right eye: "
            + ("outer corner", "upper lid", "upper lid", "inner corner", "lower lid", "lower lid")[
                i - 36
            ]
        )
    return (
        "subject's left eye: "
        + ("inner corner", "upper lid", "upper lid", "outer corner", "lower lid", "lower lid")[
            i - 42
        ]
    )


#: Unit and meaning of every ``points.csv`` column (the documentation's table is generated from it).
POINTS_COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "frame": ("index", "the frame, as in frames.csv (one row per frames.csv row)"),
    "timestamp_s": ("s", "the frame's timestamp, as in frames.csv"),
    **{
        f"p{i}_{axis}": (
            "px",
            f"{axis} of eye point {i} in frame pixels ({_point_name(i)}); empty where no face "
            "was measured",
        )
        for i in POINT_INDICES
        for axis in ("x", "y")
    },
    "yaw": (
        "deg",
        "the head's turn about its vertical axis from the face mesh's 3D points; > 0 towards the "
        "image's "
        "right (the subject's left, unmirrored camera); empty where no face mesh ran (`face68`, "
        "`eye12`) "
        "or no face",
    ),
    "pitch": ("deg", "the head's nod about its left-right axis; > 0 face up"),
    "roll": (
        "deg",
        "the head's tilt in the image plane; > 0 counter-clockwise as the image is shown (the "
        "subject's "
        "left eye, image right, higher)",
    ),
    "pose_frame": (
        "index",
        "the frame whose face-mesh run gave yaw, pitch and roll (the mesh is reused for "
        "`landmarks.mesh_reuse_ms`, so it can be an earlier frame); empty with the pose",
    ),
}

#: One-line meaning of every top-level field of ``summary.json`` (the docs' output reference is
#: generated from this mapping; a field added later needs a line here: tests/test_docs.py compares
#: it with a real summary).
SUMMARY_FIELDS: dict[str, str] = {
    "status": "`running` while the run goes on, then `ok`, `failed` or `interrupted` (Ctrl-C or "
    "SIGTERM); a live "
    "run that ended well but fell behind says `overloaded` (its `live.status`)",
    "exit_status": "the exit status this input's run ended with: 0, 5 (damaged packets skipped), "
    "an error's status, "
    "130 when stopped (null while running; see the exit statuses)",
    "error": "the one-line error that ended the run (null when none)",
    "error_traceback": "the traceback of a failed pipeline worker (only when one failed)",
    "input": "the input's path as given",
    "stem": "the file-name stem of every output of this input",
    "source": "what was read: kind, container, codec, pixel format, size, nominal FPS, time base "
    "(live: the source "
    "and whether timestamps are the camera's or arrival times)",
    "frames": "rows written to frames.csv",
    "frames_with_face": "frames in which a face was measured",
    "frames_without_face": "frames without a face (empty EAR cells)",
    "face_lost_ratio": "frames without a face / frames",
    "detector_runs": "frames on which the face detector ran (keyframes)",
    "redetections_on_drift": "early re-detections because the eye fit drifted out of the tracked "
    "box",
    "first_timestamp_s": "timestamp of the first frame, s",
    "last_timestamp_s": "timestamp of the last frame, s",
    "duration_s": "the time the frames cover, s: last minus first timestamp, or, where the time "
    "runs backwards or "
    "jumps (`timeline`), the sum of the ordinary frame intervals",
    "frame_interval_median_ms": "median interval between consecutive timestamps, ms",
    "timestamp_gaps": "intervals longer than 1.5 x the median (dropped frames)",
    "duplicate_timestamps": "consecutive frames with the same timestamp",
    "timeline": "where the recording's time runs backwards (files joined with cat) or jumps "
    "forward by more than "
    "25 frame intervals and 1 s: `covered_s` (the span the frames cover), the counts `backwards` "
    "and "
    "`jumps`, and the first 20 `breaks` (frame, kind, `previous_s`, `timestamp_s`, `by_s`); any "
    "break "
    "is also a warning",
    "blinks": "rows of blinks.csv",
    "complete_blinks": "blinks that both started and ended inside the recording",
    "blink_rate_per_min": "complete blinks per minute of recording",
    "mean_blink_duration_ms": "mean duration of the complete blinks, ms",
    "mean_blink_amplitude": "mean amplitude (1 - min / baseline) of the complete blinks",
    "prolonged_closures": "closures longer than blinks.max_blink_ms: reported in blinks.csv, not "
    "counted as blinks",
    "prolonged_closure_s": "total time in prolonged closures, s",
    "closure": "the FEC calibration: full-closure amplitude, method (segment, responses or "
    "default), responses used",
    "timings": "wall time, FPS and milliseconds per frame of each stage (decode, detect, "
    "landmarks, blinks, write); "
    "latency percentiles for the multiprocess pipeline; `keyframe_waits` (`live` above 100 FPS): "
    "how many "
    "frames waited more than 0.5 ms for the keyframe work beside the stream (`count`, `total_ms`, "
    "`mean_ms`; null when none did)",
    "versions": "versions of eyeblink, Python and the libraries that ran",
    "machine": "the host the timings were measured on: CPU model, logical and physical cores, its "
    "vector "
    "extensions (`vector`: avx2, avx512f, avx512_vnni, amx_tile, ...) and `class` (avx512, avx2 or "
    "baseline), which decides what each network costs",
    "settings": "every setting of the run (the preset with the flags applied)",
    "eye_measure": "a recording of one eye (--eye-roi): the measure (model: area or contour), how "
    "it came (named "
    "with --landmarks, or chosen from the recording's first seconds), why in one line, contour's "
    "eye axis (eye_angle, degrees; angle_how: given or found), each measure's scores on those "
    "seconds (closures seen, their depth in spreads of the open level, the noise) and a warning "
    "when the trace looks unlike an eye's; empty in face mode",
    "damaged_packets": "packets the decoder rejected and skipped: count, and each one's position, "
    "byte offset, "
    "timestamp",
    "warnings": "the `eyeblink: warning:` lines of this input",
    "parallel": "the multiprocess layout: workers, loaders, how the processes were started "
    "(`start_method`: `fork`, "
    "`forkserver` or `spawn`), how the file was split, chunk size, ring slots; "
    "`accelerator` with the accelerator stage's backend, device, batches and times",
    "live": "live runs: the source, the eye model chosen and why, frames in / dropped, "
    "reconnects, and `memory`: the "
    "RSS (MiB) of the run's processes at minute 2 (`rss_mib_reference`), at the last sample and "
    "at most, "
    "`growth_ratio` since minute 2 and each process's last RSS (a growth past 10% is a warning); "
    "`host_costs`: what BlazeFace, each eye model (with and without its reused face mesh) and a "
    "frame's "
    "decode cost on this machine, measured before the capture; `ladder` and `adaptations`: the "
    "cheaper "
    "settings the run could step down to, and each step taken (time, frame, from, to, why)",
    "trials": "with --trials: the trial file, trials, scored trials, CR trials and percent CR",
    "outputs": "the path of every file written for this input",
    "corrections": "with <stem>.corrections.json (saved from the report): its file, reviewer, "
    "time and eyeblink "
    "version; blinks accepted, rejected, corrected (retimed), added, unreviewed and left out by an "
    "excluded span; corrected_total; excluded spans, seconds and trials; the detector's own counts "
    "(automatic); and unmatched: decisions no detected blink matches any more. The counts and "
    "rates "
    "above are then those of the corrected session",
}


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


def _plain_line(values: Sequence[Any]) -> bytes | None:
    """The CSV line of a row of plain numbers (``float``, ``int``, ``bool``, ``None``), the bytes
    :func:`_cell` and the ``csv`` writer give (numbers and empty cells need no quoting), without the
    writer; None for any other row (strings, numpy scalars, a lone cell: the writer's own rules)."""
    if len(values) < 2:
        return None
    out = []
    for v in values:
        t = type(v)
        if t is float:
            out.append("" if v != v else f"{v:.9g}")
        elif t is int:
            out.append(str(v))
        elif v is None:
            out.append("")
        elif t is bool:
            out.append("1" if v else "0")
        else:
            return None
    return (",".join(out) + "\n").encode("ascii")


def ensure_output_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and prove it is writable, before any frame is read."""
    from eyeblink import stopping

    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with stopping.held():  # Ctrl-C / SIGTERM: raised once the probe is gone again
            # a unique name: two runs (or two threads of one process) probing the folder at once
            # never remove each other's probe
            fd, probe = tempfile.mkstemp(dir=p, prefix=".eyeblink-write-test-")
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise OutputError(
            f"cannot write to output directory {p} ({exc.strerror or exc}); choose another with -o"
        ) from None
    return p


def write_failed(path: Path, exc: OSError) -> OutputWriteError:
    """The one-line error of a failed write of ``path`` (disk full, file too large, read-only
    file)."""
    why = exc.strerror or str(exc)
    fix = {
        errno.ENOSPC: "free space on that disk or choose another -o",
        errno.EDQUOT: "free space in your disk quota or choose another -o",
        errno.EFBIG: "free space on that disk (or lift the file-size limit) or choose another -o",
        errno.EROFS: "choose another -o: that disk is read-only",
        errno.EACCES: "make it writable or choose another -o",
        errno.EPERM: "make it writable or choose another -o",
    }.get(exc.errno or 0, "choose another -o")
    return OutputWriteError(
        f"cannot write {path} ({why}); {fix} (complete rows written before it are kept)"
    )


def write_summary_in_place(path: Path, summary: dict[str, Any]) -> bool:
    """The last resort of a full disk, where no temporary file can be made for an atomic write: the
    summary written compactly over the bytes the disk already gave its file (what it allocated, not
    only what it used), so that it never keeps saying ``running`` or ``ok`` over a run that failed.
    If the whole summary does not fit there, the file's own summary with this one's ``status``,
    ``exit_status`` and ``error``. One ``write``; returns whether it was written."""
    import os

    def compact(obj: dict[str, Any]) -> bytes:
        return (
            json.dumps(obj, separators=(",", ":"), default=_json_default, allow_nan=False) + "\n"
        ).encode()

    try:
        with open(path, "r+b") as fh:
            room = max(os.fstat(fh.fileno()).st_size, os.fstat(fh.fileno()).st_blocks * 512)
            data = compact(summary)
            if len(data) > room:
                old = json.loads(fh.read().decode("utf-8"))
                if not isinstance(old, dict):
                    return False
                data = compact(
                    {**old, **{k: summary.get(k) for k in ("status", "exit_status", "error")}}
                )
                if len(data) > room:
                    return False
            fh.seek(0)
            fh.write(data)
            fh.truncate()
            fh.flush()
        return True
    except (OSError, ValueError):
        return False


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (:func:`write_atomic`), UTF-8."""
    write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def write_atomic(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` whole or not at all: ``fill`` writes a temporary file, fsynced, then renamed
    over it.

    On failure the temporary file is removed (no 0-byte ``.tmp`` left behind), ``path`` keeps what
    it had, and :class:`OutputWriteError` names the file and the fix.
    """
    from eyeblink import stopping
    from eyeblink.outputs.paths import atomic_path

    try:
        # Ctrl-C / SIGTERM: raised once the file is in place, never a lone .tmp; the fsync and
        # rename (and the removal of the temporary file on failure) are atomic_path's
        with (
            stopping.held(),
            atomic_path(path, temporary=path.with_name(path.name + ".tmp")) as tmp,
            tmp.open("wb") as fh,
        ):
            fill(fh)
    except OSError as exc:
        raise write_failed(path, exc) from None


class _CsvStream:
    """One CSV written row by row, whole rows only.

    Rows are encoded into a buffer and written with ``os.write`` at least every ``flush_interval_s``
    (and when 64 KB are waiting). A write that fails part-way (disk full, ``RLIMIT_FSIZE``)
    truncates the file back to its last complete row, so a reader never sees half a row, and raises
    :class:`OutputWriteError`; the stream then drops further rows (the first error is the one
    reported).
    """

    _MAX_PENDING = 1 << 16

    def __init__(self, path: Path, columns: Sequence[str], flush_interval_s: float) -> None:
        self.path = path
        try:
            # O_BINARY (Windows only): a descriptor opened without it is in text mode there, and
            # os.write would turn each "\n" into "\r\n"; the rows are the same bytes on every OS
            self._fd: int | None = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o666
            )
        except OSError as exc:
            raise OutputWriteError(
                f"cannot create {path} ({exc.strerror or exc}); choose another -o"
            ) from None
        self._buf = io.StringIO()
        self._w = csv.writer(self._buf, lineterminator="\n")
        self._pending: list[bytes] = []
        self._pending_n = 0
        self._size = 0  # bytes on disk: always a whole number of rows
        self.failed = False
        self._columns = columns
        self._interval = flush_interval_s
        self._next_flush = time.perf_counter() + flush_interval_s
        self.rows = 0
        self._add(columns)
        self.flush()

    def _add(self, values: Sequence[Any]) -> None:
        self._w.writerow(values)
        line = self._buf.getvalue().encode("utf-8")
        self._buf.seek(0)
        self._buf.truncate()
        self._pending.append(line)
        self._pending_n += len(line)

    def write(self, values: Sequence[Any]) -> None:
        if self.failed:
            return
        line = _plain_line(values)
        if line is None:
            self._add([_cell(v) for v in values])
        else:
            self._pending.append(line)
            self._pending_n += len(line)
        self.rows += 1
        now = time.perf_counter()
        if now >= self._next_flush or self._pending_n >= self._MAX_PENDING:
            self.flush()
            self._next_flush = now + self._interval

    def flush(self) -> None:
        """Write the waiting rows; on failure keep only whole rows on disk and raise
        OutputWriteError."""
        if self.failed or self._fd is None or not self._pending:
            return
        data = b"".join(self._pending)
        ends = self._pending
        self._pending, self._pending_n = [], 0
        view, done = memoryview(data), 0
        try:
            while done < len(data):
                done += os.write(self._fd, view[done:])
        except OSError as exc:
            self.failed = True
            whole = 0  # the bytes of the rows written completely
            for line in ends:
                if whole + len(line) > done:
                    break
                whole += len(line)
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size + whole)
            raise write_failed(self.path, exc) from None
        self._size += len(data)

    @property
    def flushed(self) -> bool:
        """Whether every row written so far is on disk (none waiting in the buffer)."""
        return not self._pending

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            self.flush()
            if not self.failed:
                try:
                    os.fsync(self._fd)
                except OSError as exc:
                    self.failed = True
                    raise write_failed(self.path, exc) from None
        finally:
            os.close(self._fd)
            self._fd = None


class ResultWriter(Closing):
    """The sink's writer for one input. Use as a context manager; ``close`` is idempotent.

    ``table``: the frame columns (default :data:`~eyeblink.outputs.columns.FRAME_TABLE` as it is
    when the writer is made); the sink computes its rows with the same table (:attr:`table`)."""

    def __init__(
        self,
        outdir: str | Path,
        stem: str,
        *,
        flush_interval_s: float = 0.5,
        table: FrameTable | None = None,
    ) -> None:
        self.outdir = Path(outdir)
        self.stem = stem
        self.table = table if table is not None else _columns.FRAME_TABLE
        self.frames_path = self.outdir / f"{stem}.frames.csv"
        self.blinks_path = self.outdir / f"{stem}.blinks.csv"
        self.summary_path = self.outdir / f"{stem}.summary.json"
        self._frames = _CsvStream(self.frames_path, self.frame_header(), flush_interval_s)
        self._blinks = _CsvStream(self.blinks_path, BLINK_COLUMNS, flush_interval_s)
        self._flush_interval_s = flush_interval_s
        #: ``<stem>.points.csv`` once :meth:`open_points` is called (``--points``), else None
        self.points_path: Path | None = None
        self._points: _CsvStream | None = None
        #: blink rows waiting for the frame rows they cover to be on disk (a run killed outright
        #: never leaves a blink in blinks.csv past the last row of frames.csv)
        self._held: list[list[Any]] = []

    def frame_header(self) -> tuple[str, ...]:
        """The frames.csv header: the table's columns (a live writer appends its own)."""
        return self.table.names

    @property
    def frame_rows(self) -> int:
        return self._frames.rows

    @property
    def blink_rows(self) -> int:
        return self._blinks.rows + len(self._held)

    def write_frame(self, row: Sequence[Any]) -> None:
        """One frames.csv row, values in :meth:`frame_header` order."""
        self._frames.write(row)
        if self._held and self._frames.flushed:
            self._release()

    def open_points(self) -> None:
        """Start ``<stem>.points.csv`` (:data:`POINTS_COLUMNS`), before the first frame."""
        if self._points is None:
            self.points_path = self.outdir / f"{self.stem}.points.csv"
            self._points = _CsvStream(self.points_path, POINTS_COLUMNS, self._flush_interval_s)

    def write_points(
        self,
        frame: int,
        timestamp_s: float,
        points: Any,
        pose: Sequence[float] | None,
        pose_frame: int | None,
    ) -> None:
        """One points.csv row: the 12 eye points ((12, 2) frame pixels, or None: no face), the head
        pose (yaw, pitch, roll; degrees, or None) and the frame it was measured on."""
        assert self._points is not None, "open_points() first"
        xy: list[Any] = (
            [float(v) for v in points.reshape(-1)] if points is not None else [None] * 24
        )
        tail: list[Any] = (
            [float(v) for v in pose] + [int(pose_frame) if pose_frame is not None else None]
            if pose is not None
            else [None] * 4
        )
        self._points.write([frame, timestamp_s, *xy, *tail])

    def write_points_row(self, cells: Sequence[Any]) -> None:
        """One points.csv row as cells in :data:`POINTS_COLUMNS` order (``eyeblink batch``
        merging its chunks)."""
        assert self._points is not None, "open_points() first"
        self._points.write(cells)

    def write_blink(self, ev: BlinkEvent) -> None:
        """One blinks.csv row; it goes to disk once the frame rows written so far (those it covers:
        a blink is reported at or after its last frame) are on disk."""
        r = ev.as_row()
        self._held.append([r[c] for c in BLINK_COLUMNS])

    def _release(self) -> None:
        held, self._held = self._held, []
        for row in held:
            self._blinks.write(row)
        self._blinks.flush()

    def write_summary(self, summary: dict[str, Any]) -> None:
        try:
            write_text_atomic(
                self.summary_path,
                json.dumps(summary, indent=2, default=_json_default, allow_nan=False) + "\n",
            )
        except OutputWriteError:
            if not write_summary_in_place(self.summary_path, summary):
                raise

    def finish(self, summary: dict[str, Any]) -> None:
        """Close the CSVs, then write the summary, whatever happened to the CSVs.

        ``summary["status"]`` other than ``ok`` means an error is already on its way up: a write
        error here is then not raised again (the first error is the one reported). A run that was
        ``ok`` until its CSVs failed to close gets ``failed`` in its summary, and the error is
        raised.
        """
        was_ok = summary.get("status") == "ok"
        first_error: OutputWriteError | None = None
        try:
            self.close()
        except OutputWriteError as exc:
            first_error = exc
            if was_ok:
                summary = {**summary, "status": "failed", "error": str(exc)}
        try:
            self.write_summary(summary)
        except OutputWriteError as exc:
            first_error = first_error or exc
        if was_ok and first_error is not None:
            raise first_error

    @property
    def failed(self) -> bool:
        """Whether a write of frames.csv or blinks.csv failed (the error was raised once)."""
        return (
            self._frames.failed
            or self._blinks.failed
            or (self._points is not None and self._points.failed)
        )

    def close(self) -> None:
        """Flush and close both CSVs (idempotent); both are closed even if the first fails."""
        try:
            self._frames.close()
        finally:
            try:
                if self._held and not self._frames.failed:
                    self._release()
            finally:
                try:
                    self._blinks.close()
                finally:
                    if self._points is not None:
                        self._points.close()


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
