"""The record a worker sends the sink per frame, and its encoding.

A worker of the multiprocess pipeline (and the accelerator stage's post-processing workers, and a
chunk task of ``eyeblink batch``) sends the sink one numpy record per frame, a record array per
batch: no pickled objects. :func:`record_dtype` is the record of a run's settings,
:func:`encode_results` fills a batch's records from the analysed frames'
:class:`~eyeblink.frame.analyzer.FrameResult`, :func:`decode_rows` gives them back in the sink, bit
for bit. The frame columns a worker computes (:attr:`eyeblink.outputs.columns.FrameColumn.worker`)
add a field each (none by default).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from eyeblink.config import RunConfig
from eyeblink.frame.analyzer import FrameResult
from eyeblink.landmarks.eyes import STRIP_SHAPE
from eyeblink.outputs import columns as _columns

__all__ = [
    "CROP_DTYPE",
    "POINTS_FIELDS",
    "RESULT_DTYPE",
    "decode_rows",
    "encode_batch",
    "encode_result",
    "encode_results",
    "record_dtype",
    "rows_message",
    "rows_of",
]

#: One row per frame from a worker to the sink (a numpy record array per batch: no pickled objects).
RESULT_DTYPE = np.dtype(
    [
        ("index", "i8"),
        ("timestamp_s", "f8"),
        ("face", "?"),
        ("detected", "?"),
        ("ear_left", "f8"),
        ("ear_right", "f8"),
        ("box", "f8", (4,)),
        ("score", "f8"),
        ("keypoints", "f8", (6, 2)),
        ("t_decoded", "f8"),
        # the blink detector's appearance cue (landmarks.eye_patches): 576 bytes a frame
        ("has_patches", "?"),
        ("patches", "u1", (2, 12, 24)),
        # live mode (eyeblink.runtime.live.pipeline): per-frame stage times (perf_counter, one clock
        # for all processes) and the gap marker of a frame the live loader dropped (slot -1: no
        # pixels, nothing analysed); ``t_got``: the worker received the frame's batch, ``t_recv``:
        # the sink received it (eyeblink.runtime.live.hops)
        ("t_start", "f8"),
        ("t_end", "f8"),
        ("dropped", "?"),
        ("t_got", "f8"),
        ("t_recv", "f8"),
    ]
)
#: ``eye_crops`` runs (``--report``): each row also carries both eyes as one small image and the eye
#: points in its pixels (4.9 KB a frame; :mod:`eyeblink.outputs.crops`). Other runs do not pay for
#: them.
CROP_DTYPE = np.dtype(
    [
        *RESULT_DTYPE.descr,
        ("has_strip", "?"),
        ("strip", "u1", STRIP_SHAPE),
        ("strip_points", "f4", (12, 2)),
    ]
)
#: ``points`` runs (``--points``): the 12 eye points and the face mesh's head pose with its frame
#: (129 bytes a frame, appended to the row only in those runs).
POINTS_FIELDS = [
    ("has_points", "?"),
    ("eye_points", "f4", (12, 2)),
    ("has_pose", "?"),
    ("pose", "f8", (3,)),
    ("pose_frame", "i8"),
]


def record_dtype(cfg: RunConfig) -> np.dtype:
    """The record a worker sends the sink per frame: :data:`RESULT_DTYPE`, or :data:`CROP_DTYPE`
    with ``eye_crops``, plus :data:`POINTS_FIELDS` with ``points``, plus a field per frame column
    the workers compute (:attr:`eyeblink.outputs.columns.FrameTable.record_fields`; none by
    default)."""
    base = CROP_DTYPE if cfg.eye_crops else RESULT_DTYPE
    extra = [*(POINTS_FIELDS if cfg.points else ()), *_columns.FRAME_TABLE.record_fields]
    return np.dtype([*base.descr, *extra]) if extra else base


def rows_message(wid: int, rows: np.ndarray) -> tuple[str, int, bytes]:
    """A batch of records as the message a worker puts on the results queue: their bytes, not the
    array.

    Pickling a record array pickles its dtype too (17 fields and more): ~50 µs to pickle and ~20 µs
    to unpickle a batch of one row, paid per frame by a live worker's queue thread and by the sink,
    while its bytes cost well under 1 µs each way. Both ends know the record (:func:`record_dtype`
    of the run's settings)."""
    return ("rows", wid, rows.tobytes())


def rows_of(payload: bytes, dtype: np.dtype) -> np.ndarray:
    """The records of a :func:`rows_message` payload, a writable array of ``dtype`` (the sink
    stamps ``t_recv``)."""
    return np.frombuffer(bytearray(payload), dtype)


def encode_result(row: Any, r: FrameResult) -> None:
    """Fill one zeroed record of :func:`record_dtype` with ``r`` (the timing and ``dropped`` fields
    are left to the caller). :func:`decode_rows` gives ``r`` back, bit for bit."""
    row["index"] = r.index
    row["timestamp_s"] = r.timestamp_s
    row["detected"] = r.detected
    row["ear_left"] = r.ear_left
    row["ear_right"] = r.ear_right
    if r.eye_patches is not None:
        row["has_patches"] = True
        row["patches"] = r.eye_patches
    if r.eye_strip is not None:
        row["has_strip"] = True
        row["strip"] = r.eye_strip
        row["strip_points"] = r.strip_points
    if r.eye_points is not None:
        row["has_points"] = True
        row["eye_points"] = r.eye_points
        if r.pose is not None:
            row["has_pose"], row["pose"], row["pose_frame"] = True, r.pose, r.pose_frame
    if r.face is not None:
        row["face"] = True
        row["box"] = r.face.box
        row["score"] = r.face.score
        row["keypoints"] = r.face.keypoints
    table = _columns.FRAME_TABLE
    for (name, _), values in zip(table.record_fields, table.worker_values([r]), strict=True):
        row[name] = values[0]


def encode_results(out: np.ndarray, at: Sequence[int], results: Sequence[FrameResult]) -> None:
    """:func:`encode_result` of ``results[k]`` into the zeroed record ``out[at[k]]``, a column at a
    time (a worker's batch: the same records, without a dozen record-field writes per frame)."""
    if not results:
        return
    if (
        len(results) == 1
        or "has_strip" in (out.dtype.names or ())
        or "has_points" in (out.dtype.names or ())
    ):
        for j, r in zip(at, results, strict=True):
            encode_result(out[j], r)
        return
    idx = np.asarray(at, np.intp)
    out["index"][idx] = [r.index for r in results]
    out["timestamp_s"][idx] = [r.timestamp_s for r in results]
    out["detected"][idx] = [r.detected for r in results]
    out["ear_left"][idx] = [r.ear_left for r in results]
    out["ear_right"][idx] = [r.ear_right for r in results]
    with_patches = [k for k, r in enumerate(results) if r.eye_patches is not None]
    if with_patches:
        rows = idx[with_patches]
        out["has_patches"][rows] = True
        out["patches"][rows] = [results[k].eye_patches for k in with_patches]
    faces = [k for k, r in enumerate(results) if r.face is not None]
    if faces:
        rows = idx[faces]
        found = [results[k].face for k in faces]
        out["face"][rows] = True
        out["box"][rows] = [f.box for f in found]  # type: ignore[union-attr]
        out["score"][rows] = [f.score for f in found]  # type: ignore[union-attr]
        out["keypoints"][rows] = [f.keypoints for f in found]  # type: ignore[union-attr]
    table = _columns.FRAME_TABLE
    for (name, _), values in zip(table.record_fields, table.worker_values(results), strict=True):
        out[name][idx] = values


def decode_rows(rows: np.ndarray, shift: int = 0) -> Iterator[FrameResult]:
    """The :class:`FrameResult` of each record (:func:`encode_result`), frame numbers (and the
    pose's) plus ``shift``: what the sink is fed. Consecutive records of one face (the same box,
    score and keypoints, bit for bit: a box reused between detections) share one
    :class:`FaceDetection`."""
    from eyeblink.detect.blazeface import FaceDetection

    n = len(rows)
    if not n:
        return
    crops = "has_strip" in (rows.dtype.names or ())
    points = "has_points" in (rows.dtype.names or ())
    index = (rows["index"] + shift).tolist() if shift else rows["index"].tolist()
    ts = rows["timestamp_s"].tolist()
    has_face = rows["face"].tolist()
    detected = rows["detected"].tolist()
    ear_l = rows["ear_left"].tolist()
    ear_r = rows["ear_right"].tolist()
    has_patches = rows["has_patches"].tolist()
    patches = rows["patches"]
    box, score, kp = rows["box"], rows["score"], rows["keypoints"]
    # a face's bits (box, score, keypoints), to tell a new face from the one before
    bits = np.concatenate(
        [
            np.ascontiguousarray(box).view(np.uint64).reshape(n, 4),
            np.ascontiguousarray(score).view(np.uint64).reshape(n, 1),
            np.ascontiguousarray(kp).view(np.uint64).reshape(n, 12),
        ],
        axis=1,
    )
    same = np.zeros(n, bool)
    same[1:] = (bits[1:] == bits[:-1]).all(axis=1)
    same_l = same.tolist()
    boxes = box.tolist()
    scores = score.tolist()
    # the frame columns the workers computed (none by default)
    carried = _columns.FRAME_TABLE.carried(rows)
    face = None
    for j in range(n):
        if not has_face[j]:
            face = None
        elif face is None or not same_l[j]:
            face = FaceDetection(tuple(boxes[j]), scores[j], kp[j])
        strip = pts = None
        eye_points = pose = pose_frame = None
        if crops or points:
            r = rows[j]
            if crops and r["has_strip"]:
                strip, pts = r["strip"].copy(), r["strip_points"].copy()
            if points and r["has_points"]:
                eye_points = r["eye_points"].copy()
                if r["has_pose"]:
                    pose, pose_frame = tuple(r["pose"].tolist()), int(r["pose_frame"]) + shift
        yield FrameResult(
            index[j],
            ts[j],
            face,
            detected[j],
            ear_l[j],
            ear_r[j],
            patches[j].copy() if has_patches[j] else None,
            strip,
            pts,
            eye_points,
            pose,
            pose_frame,
            carried[j] if carried is not None else None,
        )


def encode_batch(
    out: np.ndarray,
    td: np.ndarray,
    at: list[int],
    results: list[FrameResult],
    t_start: list[float],
    t_end: list[float],
    t_got: float = 0.0,
) -> None:
    """A worker's analysed frames of one batch into their records, with their decode, receipt, start
    and end times."""
    if at:
        encode_results(out, at, results)
        idx = np.asarray(at, np.intp)
        out["t_decoded"][idx] = td[idx]
        out["t_got"][idx] = t_got
        out["t_start"][idx] = t_start
        out["t_end"][idx] = t_end
