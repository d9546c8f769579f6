"""The report of ``eyeblink train-detector`` (:mod:`eyeblink.lab.train_detector`): the stock model,
the teacher's box and the tuned model on frame pairs of the held-out recordings, as they are and
augmented (recall, false boxes per frame and box jitter, ``eyeblink bench detectors``' measurement,
and ms per frame), the table printed and the verdict against the targets.
"""

from __future__ import annotations

from typing import Any

from eyeblink.lab.train_detector_data import TeacherFit, augment, teacher_mesh


def augmented_pairs(
    pairs: list[tuple[Any, Any]], stock: Any, mesher: Any, seed: int
) -> list[tuple[Any, Any]]:
    """Each pair with one random :func:`augment` applied alike to both frames (pairs without a
    teacher face dropped).

    The geometry follows the first frame's teacher mesh and both frames get the same random draw, so
    the pair's frame-to-frame change is the recording's, under the conditions of the augmentation.
    """
    import numpy as np

    from eyeblink.detect.blazeface import select_subject

    out = []
    for i, (a, b) in enumerate(pairs):
        face = select_subject(stock.detect(a))
        mesh = None if face is None else teacher_mesh(mesher, a, face, passes=1)
        if mesh is not None:
            out.append(
                tuple(augment(f, mesh, np.random.default_rng([seed, 0xA46, i]))[0] for f in (a, b))
            )
    return out  # type: ignore[return-value]


def evaluate(
    stock: Any,
    tuned: Any,
    mesher: Any,
    teacher: TeacherFit,
    pairs: list[tuple[Any, Any]],
    timing: list[Any],
    *,
    with_teacher: bool = True,
) -> dict[str, Any]:
    """Recall, false boxes/frame, jitter (``bench detectors``' measurement) and ms/frame per
    candidate."""
    from eyeblink.detect.blazeface import select_subject
    from eyeblink.lab import bench_detectors as bd

    def boxes_of(det: Any) -> Any:
        return lambda rgb: [(d.box, d.score) for d in det.detect(rgb)]

    def teacher_boxes(rgb: Any) -> Any:
        gray = rgb[:, :, 0]
        face = select_subject(stock.detect(gray))
        if face is None:
            return []
        mesh = teacher_mesh(mesher, gray, face)
        if mesh is None or mesher.presence < 0.5:
            return []
        box, _ = teacher.label(mesh)
        return [(tuple(float(v) for v in box), mesher.presence)]

    rows: dict[str, Any] = {}
    with bd._one_core():
        for name, fn in (
            ("stock", boxes_of(stock)),
            ("teacher", teacher_boxes),
            ("tuned", boxes_of(tuned)),
        ):
            if name == "teacher" and not with_teacher:
                continue
            cand = bd.Candidate(name, fn, lambda: None)
            rows[name] = {
                **bd.score_video(cand, pairs),
                "timing": bd.time_frames(cand, timing) if timing else None,
            }
    return rows


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "–" if v is None else format(v, spec)


def table(groups: dict[str, dict[str, Any]]) -> str:
    """The Markdown table: one row per frame set and model."""
    head = [
        "frames",
        "model",
        "recall",
        "false boxes/frame",
        "jitter median",
        "jitter p90",
        "ms/frame 640x480 median [min–max]",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, rows in groups.items():
        for name, r in rows.items():
            t = r["timing"]
            ms = "–" if t is None else f"{t['median_ms']:.2f} [{t['min_ms']:.2f}–{t['max_ms']:.2f}]"
            lines.append(
                f"| {group} | {name} | {_fmt(r['recall'])} | {_fmt(r['false_boxes_per_frame'])} | "
                f"{_fmt(r['jitter_median'], '.4f')} | {_fmt(r['jitter_p90'], '.4f')} | {ms} |"
            )
    return "\n".join(lines)


def verdict(rows: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets: held-out recall not lower, median jitter >= 30% lower."""
    s, t = rows["stock"], rows["tuned"]
    out: dict[str, Any] = {"recall_not_lower": t["recall"] >= s["recall"]}
    for q in ("median", "p90"):
        a, b = s[f"jitter_{q}"], t[f"jitter_{q}"]
        out[f"jitter_{q}_reduction"] = (1.0 - b / a) if a and b is not None else None
    r = out["jitter_median_reduction"]
    out["jitter_30pct_lower"] = r is not None and r >= 0.3
    return out
