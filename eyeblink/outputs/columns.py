"""The ``frames.csv`` columns, declared once.

Each column of a frame's row is one :class:`FrameColumn`: its name, unit and meaning (the docs' column reference
is generated from them), its cell type (the type of its value, which decides how the CSV writes it, and of a live
row's field) and how its value is computed from the frame's result. :class:`FrameTable` derives everything else
from the list, once, when the table is made (never per row):

* :attr:`FrameTable.names`: the CSV header, in file order;
* :attr:`FrameTable.docs`: unit and meaning per column (``docs/reference/outputs.md``);
* :meth:`FrameTable.row`: the sink's row of one frame result, one compiled function;
* :attr:`FrameTable.record_fields`: the fields a worker adds to its per-frame record for the columns it computes
  (:attr:`FrameColumn.worker`), with :meth:`FrameTable.worker_values` to fill them and
  :meth:`FrameTable.carried` to read them back in the sink;
* :attr:`FrameTable.live_row_type` and :meth:`FrameTable.live_row`: a live session's row
  (:class:`eyeblink.runtime.live.publish.LiveRow`).

A column is computed in one of two places:

* **in the sink** (``value``, a Python expression): from the frame result ``r`` (a
  :class:`~eyeblink.frame.analyzer.FrameResult`) and the sink's state, over these names: ``r``; ``face``
  (``r.face`` or None); ``box`` (the face box, or four None); ``ear`` (``r.ear``); ``baseline`` (the blink
  detector's baseline after this frame); ``closure`` (the session's :class:`~eyeblink.signals.closure.OnlineClosure`).
* **where the frame was analysed** (``worker``, a function of the frame result): in a worker of the multiprocess
  pipeline, which sends the value to the sink in its record (a field ``col_<name>`` of ``record_dtype``), or in the
  sink of the single-process pipeline. The value is stored as ``record_dtype`` in both, so the rows are the same
  whichever pipeline ran. Use it for what only the worker sees (the eye points, the pixels); the accelerator stage
  computes it from the frame result its record gives back (face, EAR, eye patches).

The pipelines read :data:`FRAME_TABLE` when a run starts; new columns are appended (column meanings never change
between releases).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

__all__ = ["FRAME_TABLE", "FrameColumn", "FrameTable"]

#: the names a sink expression (:attr:`FrameColumn.value`) may use, in the compiled row function's order
SINK_NAMES = ("r", "face", "box", "ear", "baseline", "closure")
#: the fields a live row has after the table's columns
LIVE_EXTRA = ("dropped", "arrival_time", "sent_time")

_NO_BOX = (None, None, None, None)


@dataclass(frozen=True)
class FrameColumn:
    """One column of ``frames.csv``.

    ``cell``: the type of the value, ``int`` (written in decimal; never empty) or ``float`` (9 significant digits;
    None or NaN is an empty cell); the value must have it (the CSV writes what it is given), a live row converts to
    it. ``value``: the expression the sink evaluates (see the module docstring for its names); ``worker``:
    instead, a function of the frame result evaluated where the frame was analysed, its value carried to the
    sink as ``record_dtype`` (``"f8"`` or ``"i8"``).
    """

    name: str
    unit: str
    meaning: str
    cell: type = float
    value: str | None = None
    worker: Callable[[Any], Any] | None = None
    record_dtype: str = "f8"

    def __post_init__(self) -> None:
        if (self.value is None) == (self.worker is None):
            raise ValueError(f"frame column {self.name!r}: give exactly one of value (the sink's expression) and "
                             "worker (a function of the frame result)")
        if self.cell not in (int, float):
            raise ValueError(f"frame column {self.name!r}: cell must be int or float")
        if self.record_dtype not in ("f8", "i8"):
            raise ValueError(f"frame column {self.name!r}: record_dtype must be 'f8' or 'i8'")
        if not self.name.isidentifier() or self.name in LIVE_EXTRA:
            raise ValueError(f"frame column {self.name!r}: the name must be an identifier, not one of {LIVE_EXTRA}")


def _to_f8(v: Any) -> float:
    return math.nan if v is None else float(v)


class _LiveRowMixin:
    """Behaviour of every live row type (:attr:`FrameTable.live_row_type`)."""

    __slots__ = ()
    sent_time: float
    arrival_time: float

    @property
    def age_ms(self) -> float:
        """How long ago the frame was received when the row was handed on, in ms."""
        return (self.sent_time - self.arrival_time) * 1000.0


_LIVE_ROW_DOC = """One row of a live session as written to ``frames.csv`` (empty cells are NaN), plus its arrival time.

Its fields are the ``frames.csv`` columns in file order, then ``dropped`` (1 for a gap row), ``arrival_time`` and
``sent_time``. ``arrival_time`` is when the frame was received and ``sent_time`` when the row was handed on (LSL,
the API), ``time.perf_counter()`` (``CLOCK_MONOTONIC`` on Linux, the clock ``pylsl.local_clock()`` reads there
too); :attr:`age_ms` is their difference.
"""


class FrameTable:
    """The columns of ``frames.csv`` and what is derived from them (see the module docstring)."""

    def __init__(self, columns: Sequence[FrameColumn]) -> None:
        self.columns = tuple(columns)
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"frame columns named twice: {sorted({n for n in names if names.count(n) > 1})}")
        #: the CSV header, in file order
        self.names: tuple[str, ...] = tuple(names)
        #: unit and meaning per column (the docs' column reference)
        self.docs: dict[str, tuple[str, str]] = {c.name: (c.unit, c.meaning) for c in self.columns}
        self.worker_columns = tuple(c for c in self.columns if c.worker is not None)
        #: the per-frame record's fields of the columns a worker computes (``col_<name>``)
        self.record_fields: list[tuple[str, str]] = [(f"col_{c.name}", c.record_dtype) for c in self.worker_columns]
        self.row: Callable[[Any, Any, Any], tuple[Any, ...]] = self._compile_row()
        self.live_row: Callable[[Sequence[Any], float, float], Any] = self._compile_live_row()

    def extended(self, *columns: FrameColumn) -> FrameTable:
        """This table with ``columns`` appended."""
        return type(self)([*self.columns, *columns])

    # ---------------------------------------------------------------- the sink's row

    def _compile_row(self) -> Callable[[Any, Any, Any], tuple[Any, ...]]:
        """``row(r, baseline, closure)``: the cells of frame result ``r`` in file order (one function, compiled
        once: the sink calls it for every frame)."""
        env: dict[str, Any] = {"_NO_BOX": _NO_BOX}
        cells = []
        for k, c in enumerate(self.worker_columns):
            env[f"_w{k}"] = c.worker
            env[f"_t{k}"] = _to_f8 if c.record_dtype == "f8" else int
        worker_k = {c.name: k for k, c in enumerate(self.worker_columns)}
        for c in self.columns:
            if c.worker is not None:
                k = worker_k[c.name]
                # carried from the worker's record, else computed here, stored as the record would store it
                cells.append(f"(_c[{k}] if _c is not None else _t{k}(_w{k}(r)))")
            else:
                cells.append(f"({c.value})")
        body = [
            "def row(r, baseline, closure):",
            "    face = r.face",
            "    box = face.box if face is not None else _NO_BOX",
            "    ear = r.ear",
        ]
        if self.worker_columns:
            body.append("    _c = r.columns")
        body.append(f"    return ({', '.join(cells)},)")
        exec(compile("\n".join(body), f"<frame table row: {', '.join(self.names)}>", "exec"), env)
        return env["row"]  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- the worker's record

    def worker_values(self, results: Sequence[Any]) -> list[list[Any]]:
        """Per worker column, its value for each of ``results`` (as the record stores it)."""
        return [[_to_f8(c.worker(r)) if c.record_dtype == "f8" else int(c.worker(r))  # type: ignore[misc]
                 for r in results] for c in self.worker_columns]

    def carried(self, rows: Any) -> list[tuple[Any, ...]] | None:
        """The worker columns' values of each record in ``rows`` (a record array), or None without such columns."""
        if not self.worker_columns:
            return None
        return list(zip(*(rows[f].tolist() for f, _ in self.record_fields), strict=True))

    # ---------------------------------------------------------------- the live row

    @cached_property
    def live_row_type(self) -> type:
        """The named tuple of a live session's rows: the columns, then ``dropped``, ``arrival_time``, ``sent_time``
        (NaN by default), with ``age_ms``."""
        base = namedtuple("LiveRow", (*self.names, *LIVE_EXTRA), defaults=(math.nan,))  # type: ignore[misc]
        return type("LiveRow", (_LiveRowMixin, base), {"__slots__": (), "__doc__": _LIVE_ROW_DOC,
                                                       "__module__": "eyeblink.runtime.live.publish"})

    def _compile_live_row(self) -> Callable[[Sequence[Any], float, float], Any]:
        """``live_row(values, arrival_time, sent_time)``: a live row of the cells written (the columns, then
        ``dropped``); an empty float cell becomes NaN."""
        cells = [f"int(v[{k}])" if c.cell is int else f"_f(v[{k}])" for k, c in enumerate(self.columns)]
        src = (f"def live_row(v, arrival, sent):\n"
               f"    return _new(_cls, ({', '.join(cells)}, int(v[{len(self.columns)}]), arrival, sent))")
        env: dict[str, Any] = {"_f": _to_f8, "_new": tuple.__new__, "_cls": self.live_row_type}
        exec(compile(src, "<frame table live row>", "exec"), env)
        return env["live_row"]  # type: ignore[no-any-return]


#: The columns of ``frames.csv``, in file order (the output contract: append, never change a meaning).
FRAME_TABLE = FrameTable([
    FrameColumn("frame", "index", "position of the frame in decode order, 0-based (a dropped frame leaves no row, "
                                  "a timestamp gap instead)", int, "r.index"),
    FrameColumn("timestamp_s", "s", "the container's presentation timestamp (live: the camera's or stream's, else "
                                    "the arrival time), never frame / fps", float, "r.timestamp_s"),
    FrameColumn("face", "0/1", "1 when a face was measured in this frame, 0 when none was found (the EAR cells are "
                               "then empty)", int, "int(face is not None)"),
    FrameColumn("ear_left", "ratio", "openness of the subject's left eye: lid distance over eye width (`lids`, "
                                     "`mesh`: lid aperture; `mesh-ear`, `face68`, `eye12`: six-point EAR); "
                                     "~0.25-0.35 open, towards 0 closed. A recording of one eye (`--eye-roi`): "
                                     "that eye's openness (`contour`: lid aperture; `area`: its share of the "
                                     "region)", float, "r.ear_left"),
    FrameColumn("ear_right", "ratio", "openness of the subject's right eye, as `ear_left`", float, "r.ear_right"),
    FrameColumn("ear", "ratio", "mean openness of the eyes measured in this frame", float, "ear"),
    FrameColumn("baseline_ear", "ratio", "the blink detector's open-eye baseline at this frame (median `ear` of the "
                                         "last 3 s outside blinks; empty during the first second's warm-up)",
                float, "baseline"),
    FrameColumn("detected", "0/1", "1 when the face detector ran on this frame (a keyframe), 0 when the tracked box "
                                   "was reused (or no detector ran: an eye region)", int, "int(r.detected)"),
    FrameColumn("face_score", "probability", "BlazeFace's score of the face box used (1 for an eye region)", float,
                "face.score if face is not None else None"),
    FrameColumn("face_x0", "px", "left edge of the face box (or the eye region), frame pixels", float, "box[0]"),
    FrameColumn("face_y0", "px", "top edge of the face box (or the eye region), frame pixels", float, "box[1]"),
    FrameColumn("face_x1", "px", "right edge of the face box (or the eye region), frame pixels", float, "box[2]"),
    FrameColumn("face_y1", "px", "bottom edge of the face box (or the eye region), frame pixels", float, "box[3]"),
    FrameColumn("closure", "FEC", "fraction of eyelid closure: 0 = the subject's open baseline, 1 = full closure, "
                                  "calibrated on the whole session when it ends (eyeblink.signals.closure)",
                float, "closure.update(r.timestamp_s, ear, baseline)"),
])
