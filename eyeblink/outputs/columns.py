"""The ``frames.csv`` columns, declared once.

Each column of a frame's row is one :class:`FrameColumn`: its name, unit and meaning (the docs'
column reference is generated from them), its cell type (the type of its value, which decides how
the CSV writes it, and of a live row's field) and how its value is computed from the frame's result.
:class:`FrameTable` derives everything else from the list, once, when the table is made (never per
row):

* :attr:`FrameTable.names`: the CSV header, in file order;
* :attr:`FrameTable.docs`: unit and meaning per column (``docs/reference/outputs.md``);
* :meth:`FrameTable.row`: the sink's row of one frame result, one compiled function;
* :attr:`FrameTable.record_fields`: the fields a worker adds to its per-frame record for the columns
  it computes (:attr:`FrameColumn.worker`), with :meth:`FrameTable.worker_values` to fill them and
  :meth:`FrameTable.carried` to read them back in the sink;
* :attr:`FrameTable.live_row_type` and :meth:`FrameTable.live_row`: a live session's row
  (:class:`eyeblink.runtime.live.publish.LiveRow`);
* :attr:`FrameTable.lsl_channels`: the live LSL sample's channels (:attr:`FrameColumn.lsl`, an
  :class:`LslChannel`, plus the live-only :data:`LSL_LIVE_CHANNELS`, ``age``), in channel order
  (:data:`eyeblink.runtime.live.sinks.lsl.LSL_CHANNELS`);
* :attr:`FrameTable.nwb_series`: the per-frame ``TimeSeries`` of the NWB file's ``EyelidTraces``
  (:attr:`FrameColumn.nwb`, an :class:`NwbSeries`), in file order (:mod:`eyeblink.outputs.nwb`);
* :attr:`FrameTable.report_traces`: the traces the HTML report draws (:attr:`FrameColumn.report`, a
  :class:`ReportTrace`), in file order (:mod:`eyeblink.outputs.report`).

A column reaches LSL, NWB or the report by declaring it there, and only there.

A column is computed in one of two places:

* **in the sink** (``value``, a Python expression): from the frame result ``r`` (a
  :class:`~eyeblink.frame.analyzer.FrameResult`) and the sink's state, over these names: ``r``;
  ``face`` (``r.face`` or None); ``box`` (the face box, or four None); ``ear`` (``r.ear``);
  ``baseline`` (the blink detector's baseline after this frame); ``closure`` (the session's
  :class:`~eyeblink.signals.closure.OnlineClosure`).
* **where the frame was analysed** (``worker``, a function of the frame result): in a worker of the
  multiprocess pipeline, which sends the value to the sink in its record (a field ``col_<name>`` of
  ``record_dtype``), or in the sink of the single-process pipeline. The value is stored as
  ``record_dtype`` in both, so the rows are the same whichever pipeline ran. Use it for what only
  the worker sees (the eye points, the pixels); the accelerator stage computes it from the frame
  result its record gives back (face, EAR, eye patches).

The pipelines read :data:`FRAME_TABLE` when a run starts; new columns are appended (column meanings
never change between releases).
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

__all__ = [
    "FRAME_TABLE",
    "LSL_LIVE_CHANNELS",
    "FrameColumn",
    "FrameTable",
    "LslChannel",
    "NwbSeries",
    "ReportTrace",
]

#: the names a sink expression (:attr:`FrameColumn.value`) may use, in the compiled row function's
#: order
SINK_NAMES = ("r", "face", "box", "ear", "baseline", "closure")
#: the fields a live row has after the table's columns
LIVE_EXTRA = ("dropped", "arrival_time", "sent_time")

_NO_BOX = (None, None, None, None)


@dataclass(frozen=True)
class LslChannel:
    """How a value appears in the live LSL sample stream (its XDF channel description).

    ``label``, ``unit``, ``type``: the channel's description (consumers read channels by them and by
    position: never change one); ``order``: the channel's position key (channels are sorted by it,
    then by declaration; the default puts a new channel after today's, so their positions hold);
    ``field``: the live row's field sent (:attr:`FrameTable.live_row_type`; default the column's
    name), as a float.
    """

    label: str
    unit: str
    type: str
    order: int = 1000
    field: str | None = None


@dataclass(frozen=True)
class NwbSeries:
    """How a column appears in the NWB file: one ``TimeSeries`` of ``EyelidTraces``, named as the
    column.

    ``description`` may name the session's FEC calibration as format fields,
    ``{calibration.full_amplitude:.6g}`` and ``{calibration.method}``
    (:class:`~eyeblink.signals.closure.ClosureCalibration`): it is written
    ``description.format(calibration=...)`` (so a literal brace is doubled). ``data``: the
    :class:`~eyeblink.outputs.session.SessionData` array written (default the column's name: a
    SessionData field, else the frames.csv column as read, :meth:`SessionData.series`).
    """

    unit: str
    description: str
    data: str | None = None

    def describe(self, calibration: Any) -> str:
        """The series' description for a session calibrated by ``calibration``."""
        return self.description.format(calibration=calibration)


@dataclass(frozen=True)
class ReportTrace:
    """How a column appears in the HTML report's trace: its ``label`` and ``panel`` (``"ear"`` or
    ``"closure"``, the panels ``report.js`` draws; its colour is ``report.js``'s ``COLORS[name]``).
    ``data``: the :class:`~eyeblink.outputs.session.SessionData` array drawn, as
    :attr:`NwbSeries.data`."""

    label: str
    panel: str
    data: str | None = None


@dataclass(frozen=True)
class FrameColumn:
    """One column of ``frames.csv``.

    ``cell``: the type of the value, ``int`` (written in decimal; never empty) or ``float`` (9
    significant digits; None or NaN is an empty cell); the value must have it (the CSV writes what
    it is given), a live row converts to it. ``value``: the expression the sink evaluates (see the
    module docstring for its names); ``worker``: instead, a function of the frame result evaluated
    where the frame was analysed, its value carried to the sink as ``record_dtype`` (``"f8"`` or
    ``"i8"``). ``lsl``, ``nwb``, ``report``: the column's presence in the live LSL stream, the NWB
    file and the HTML report (None: not there).
    """

    name: str
    unit: str
    meaning: str
    cell: type = float
    value: str | None = None
    worker: Callable[[Any], Any] | None = None
    record_dtype: str = "f8"
    lsl: LslChannel | None = None
    nwb: NwbSeries | None = None
    report: ReportTrace | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.worker is None):
            raise ValueError(
                f"frame column {self.name!r}: give exactly one of value (the sink's expression) "
                "and "
                "worker (a function of the frame result)"
            )
        if self.cell not in (int, float):
            raise ValueError(f"frame column {self.name!r}: cell must be int or float")
        if self.record_dtype not in ("f8", "i8"):
            raise ValueError(f"frame column {self.name!r}: record_dtype must be 'f8' or 'i8'")
        if not self.name.isidentifier() or self.name in LIVE_EXTRA:
            raise ValueError(
                f"frame column {self.name!r}: the name must be an identifier, not one of "
                f"{LIVE_EXTRA}"
            )


#: The live-only LSL channels (no frames.csv column): the live row's ``age_ms``, sent last.
LSL_LIVE_CHANNELS: tuple[LslChannel, ...] = (
    # how long ago the frame was received when sent
    LslChannel("age", "ms", "Latency", order=5, field="age_ms"),
)


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


_LIVE_ROW_DOC = """One row of a live session as written to ``frames.csv`` (empty cells are NaN),
plus its arrival time.

Its fields are the ``frames.csv`` columns in file order, then ``dropped`` (1 for a gap row),
``arrival_time`` and ``sent_time``. ``arrival_time`` is when the frame was received and
``sent_time`` when the row was handed on (LSL, the API), ``time.perf_counter()``
(``CLOCK_MONOTONIC`` on Linux, the clock ``pylsl.local_clock()`` reads there too); :attr:`age_ms`
is their difference.
"""


class FrameTable:
    """The columns of ``frames.csv`` and what is derived from them (see the module docstring)."""

    def __init__(self, columns: Sequence[FrameColumn]) -> None:
        self.columns = tuple(columns)
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(
                f"frame columns named twice: {sorted({n for n in names if names.count(n) > 1})}"
            )
        #: the CSV header, in file order
        self.names: tuple[str, ...] = tuple(names)
        #: unit and meaning per column (the docs' column reference)
        self.docs: dict[str, tuple[str, str]] = {c.name: (c.unit, c.meaning) for c in self.columns}
        self.worker_columns = tuple(c for c in self.columns if c.worker is not None)
        #: the per-frame record's fields of the columns a worker computes (``col_<name>``)
        self.record_fields: list[tuple[str, str]] = [
            (f"col_{c.name}", c.record_dtype) for c in self.worker_columns
        ]
        self.row: Callable[[Any, Any, Any], tuple[Any, ...]] = self._compile_row()
        self.live_row: Callable[[Sequence[Any], float, float], Any] = self._compile_live_row()
        declared = [(c.lsl, c.name) for c in self.columns if c.lsl is not None]
        declared += [(ch, ch.field or ch.label) for ch in LSL_LIVE_CHANNELS]
        ordered = sorted(range(len(declared)), key=lambda k: (declared[k][0].order, k))
        #: the live LSL sample's channels in order: (channel, the live row's field it sends)
        self.lsl: tuple[tuple[LslChannel, str], ...] = tuple(
            (declared[k][0], declared[k][0].field or declared[k][1]) for k in ordered
        )
        #: the NWB file's per-frame series in file order: (name, declaration, the SessionData array
        #: it writes)
        self.nwb_series: tuple[tuple[str, NwbSeries, str], ...] = tuple(
            (c.name, c.nwb, c.nwb.data or c.name) for c in self.columns if c.nwb is not None
        )
        #: the report's traces in file order: (name, declaration, the SessionData array it draws)
        self.report_traces: tuple[tuple[str, ReportTrace, str], ...] = tuple(
            (c.name, c.report, c.report.data or c.name)
            for c in self.columns
            if c.report is not None
        )

    @property
    def lsl_channels(self) -> tuple[tuple[str, str, str], ...]:
        """The live LSL sample's channels: (label, unit, type) per channel, in order."""
        return tuple((ch.label, ch.unit, ch.type) for ch, _ in self.lsl)

    @property
    def lsl_fields(self) -> tuple[str, ...]:
        """The live row's fields an LSL sample sends, in channel order."""
        return tuple(field for _, field in self.lsl)

    def extended(self, *columns: FrameColumn) -> FrameTable:
        """This table with ``columns`` appended."""
        return type(self)([*self.columns, *columns])

    # ---------------------------------------------------------------- the sink's row

    def _compile_row(self) -> Callable[[Any, Any, Any], tuple[Any, ...]]:
        """``row(r, baseline, closure)``: the cells of frame result ``r`` in file order (one
        function, compiled once: the sink calls it for every frame)."""
        env: dict[str, Any] = {"_NO_BOX": _NO_BOX}
        cells = []
        for k, c in enumerate(self.worker_columns):
            env[f"_w{k}"] = c.worker
            env[f"_t{k}"] = _to_f8 if c.record_dtype == "f8" else int
        worker_k = {c.name: k for k, c in enumerate(self.worker_columns)}
        for c in self.columns:
            if c.worker is not None:
                k = worker_k[c.name]
                # carried from the worker's record, else computed here, stored as the record would
                # store it
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
        return env["row"]

    # ---------------------------------------------------------------- the worker's record

    def worker_values(self, results: Sequence[Any]) -> list[list[Any]]:
        """Per worker column, its value for each of ``results`` (as the record stores it)."""
        return [
            [
                _to_f8(c.worker(r))  # type: ignore[misc]
                if c.record_dtype == "f8"
                else int(c.worker(r))  # type: ignore[misc]
                for r in results
            ]
            for c in self.worker_columns
        ]

    def carried(self, rows: Any) -> list[tuple[Any, ...]] | None:
        """The worker columns' values of each record in ``rows`` (a record array), or None
        without such columns."""
        if not self.worker_columns:
            return None
        return list(zip(*(rows[f].tolist() for f, _ in self.record_fields), strict=True))

    # ---------------------------------------------------------------- the live row

    @cached_property
    def live_row_type(self) -> type:
        """The named tuple of a live session's rows: the columns, then ``dropped``,
        ``arrival_time``, ``sent_time`` (NaN by default), with ``age_ms``."""
        fields = (*self.names, *LIVE_EXTRA)
        base = namedtuple("LiveRow", fields, defaults=(math.nan,))  # type: ignore[misc]
        return type(
            "LiveRow",
            (_LiveRowMixin, base),
            {
                "__slots__": (),
                "__doc__": _LIVE_ROW_DOC,
                "__module__": "eyeblink.runtime.live.publish",
            },
        )

    def _compile_live_row(self) -> Callable[[Sequence[Any], float, float], Any]:
        """``live_row(values, arrival_time, sent_time)``: a live row of the cells written (the
        columns, then ``dropped``); an empty float cell becomes NaN."""
        cells = [
            f"int(v[{k}])" if c.cell is int else f"_f(v[{k}])" for k, c in enumerate(self.columns)
        ]
        src = (
            f"def live_row(v, arrival, sent):\n"
            f"    return _new(_cls, ({', '.join(cells)}, int(v[{len(self.columns)}]), arrival, "
            "sent))"
        )
        env: dict[str, Any] = {"_f": _to_f8, "_new": tuple.__new__, "_cls": self.live_row_type}
        exec(compile(src, "<frame table live row>", "exec"), env)
        return env["live_row"]


#: The columns of ``frames.csv``, in file order (the output contract: append, never change a
#: meaning).
FRAME_TABLE = FrameTable(
    [
        FrameColumn(
            "frame",
            "index",
            "position of the frame in decode order, 0-based (a dropped frame leaves no row, "
            "a timestamp gap instead)",
            int,
            "r.index",
            lsl=LslChannel("frame", "count", "Index", order=4),
        ),
        FrameColumn(
            "timestamp_s",
            "s",
            "the container's presentation timestamp (live: the camera's or stream's, else "
            "the arrival time), never frame / fps",
            float,
            "r.timestamp_s",
        ),
        FrameColumn(
            "face",
            "0/1",
            "1 when a face was measured in this frame, 0 when none was found (the EAR cells are "
            "then empty)",
            int,
            "int(face is not None)",
            lsl=LslChannel("face", "boolean", "Presence", order=3),
        ),
        FrameColumn(
            "ear_left",
            "ratio",
            "openness of the subject's left eye: lid distance over eye width (`lids`, "
            "`mesh`: lid aperture; `mesh-ear`, `face68`, `eye12`: six-point EAR); "
            "~0.25-0.35 open, towards 0 closed. A recording of one eye (`--eye-roi`): "
            "that eye's openness (`contour`: lid aperture; `area`: its share of the "
            "region)",
            float,
            "r.ear_left",
            lsl=LslChannel("openness_left", "ratio", "EAR", order=0),
            nwb=NwbSeries(
                "dimensionless",
                "subject's left eye aspect ratio (dlib points 42-47); NaN: not measured",
            ),
            report=ReportTrace("openness left eye", "ear"),
        ),
        FrameColumn(
            "ear_right",
            "ratio",
            "openness of the subject's right eye, as `ear_left`",
            float,
            "r.ear_right",
            lsl=LslChannel("openness_right", "ratio", "EAR", order=1),
            nwb=NwbSeries("dimensionless", "subject's right eye aspect ratio (dlib points 36-41)"),
            report=ReportTrace("openness right eye", "ear"),
        ),
        FrameColumn(
            "ear",
            "ratio",
            "mean openness of the eyes measured in this frame",
            float,
            "ear",
            nwb=NwbSeries("dimensionless", "mean EAR of the eyes measured"),
        ),
        FrameColumn(
            "baseline_ear",
            "ratio",
            "the blink detector's open-eye baseline at this frame (median `ear` of the "
            "last 3 s outside blinks; empty during the first second's warm-up)",
            float,
            "baseline",
            nwb=NwbSeries(
                "dimensionless",
                "running open-eye baseline EAR (warm-up back-filled)",
                data="baseline",
            ),
        ),
        FrameColumn(
            "detected",
            "0/1",
            "1 when the face detector ran on this frame (a keyframe), 0 when the tracked box "
            "was reused (or no detector ran: an eye region)",
            int,
            "int(r.detected)",
        ),
        FrameColumn(
            "face_score",
            "probability",
            "BlazeFace's score of the face box used (1 for an eye region)",
            float,
            "face.score if face is not None else None",
        ),
        FrameColumn(
            "face_x0",
            "px",
            "left edge of the face box (or the eye region), frame pixels",
            float,
            "box[0]",
        ),
        FrameColumn(
            "face_y0",
            "px",
            "top edge of the face box (or the eye region), frame pixels",
            float,
            "box[1]",
        ),
        FrameColumn(
            "face_x1",
            "px",
            "right edge of the face box (or the eye region), frame pixels",
            float,
            "box[2]",
        ),
        FrameColumn(
            "face_y1",
            "px",
            "bottom edge of the face box (or the eye region), frame pixels",
            float,
            "box[3]",
        ),
        FrameColumn(
            "closure",
            "FEC",
            "fraction of eyelid closure: 0 = the subject's open baseline, 1 = full closure, "
            "calibrated on the whole session when it ends (eyeblink.signals.closure)",
            float,
            "closure.update(r.timestamp_s, ear, baseline)",
            lsl=LslChannel("closure", "normalized", "FEC", order=2),
            nwb=NwbSeries(
                "fraction",
                "fraction of eyelid closure (FEC): (1 - EAR/baseline) / "
                "{calibration.full_amplitude:.6g}; 0 = open baseline, 1 = full closure "
                "(calibration: {calibration.method})",
            ),
            report=ReportTrace("closure (FEC)", "closure"),
        ),
    ]
)
