"""``eyeblink compare A B``: two sessions of the same recording side by side, for a user checking a
rerun.

On the same machine and settings every runtime writes the same rows byte for byte (worker and loader
counts, batch tasks: the tracking segments of :mod:`eyeblink.runtime.pipeline`). On another machine
LiteRT's kernels differ with the CPU (AVX2 against AVX-512, another thread count), and so do the
Keras backends: the openness may differ in its last digits, and a blink at the edge of a threshold
may start a frame earlier. This module says how far two sessions are apart:

* frames: the frames both have (and those only one has), how many differ in face presence, the
  largest difference of each eye's openness, the mean, the closure, and the face box (pixels), each
  with its frame;
* blinks: matched one to one by overlapping frame spans (the scoring convention of ``eyeblink
  eval``), the largest onset and end difference of the matched ones, and every unmatched blink of
  either session;
* a verdict against a tolerance on the openness (default :data:`DEFAULT_TOLERANCE`): ``identical``
  (the two CSV files byte for byte), ``within tolerance`` (openness within it, every blink matched),
  or ``different``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eyeblink.errors import ConfigError

__all__ = ["DEFAULT_TOLERANCE", "Comparison", "compare_sessions", "format_comparison"]

#: The openness (EAR) difference two runs of the same recording and settings may show on different
#: CPUs or backends (measured: docs/explanation/reliability.md#across-machines); a larger one is a
#: real difference.
DEFAULT_TOLERANCE = 1e-3

_OPENNESS = ("ear_left", "ear_right", "ear")
_ALSO = ("closure", "baseline_ear")
_BOX = ("face_x0", "face_y0", "face_x1", "face_y1")


@dataclass
class Comparison:
    """Two sessions side by side (see the module docstring)."""

    a: str
    b: str
    tolerance: float
    identical: dict[str, bool]
    frames_a: int
    frames_b: int
    frames_common: int
    only_a: list[int]
    only_b: list[int]
    face_differs: int
    max_diff: dict[str, tuple[float, int | None]]  # column -> (largest |a - b|, at frame)
    blinks_a: int
    blinks_b: int
    matched: list[tuple[int, int]]  # (blink number in A, in B)
    onset_diff_frames: int
    end_diff_frames: int
    unmatched_a: list[dict[str, Any]] = field(default_factory=list)
    unmatched_b: list[dict[str, Any]] = field(default_factory=list)

    @property
    def max_openness_diff(self) -> float:
        return max((self.max_diff[c][0] for c in _OPENNESS if c in self.max_diff), default=0.0)

    @property
    def verdict(self) -> str:
        """``identical``, ``within tolerance`` or ``different``."""
        if all(self.identical.values()):
            return "identical"
        same_frames = not self.only_a and not self.only_b and self.face_differs == 0
        if (
            same_frames
            and self.max_openness_diff <= self.tolerance
            and not self.unmatched_a
            and not self.unmatched_b
        ):
            return "within tolerance"
        return "different"

    def as_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready values (``--json``)."""
        return {
            "a": self.a,
            "b": self.b,
            "verdict": self.verdict,
            "tolerance": self.tolerance,
            "identical": self.identical,
            "frames": {
                "a": self.frames_a,
                "b": self.frames_b,
                "common": self.frames_common,
                "only_a": self.only_a,
                "only_b": self.only_b,
                "face_differs": self.face_differs,
            },
            "max_diff": {
                c: {"value": v if math.isfinite(v) else None, "frame": f}
                for c, (v, f) in self.max_diff.items()
            },
            "max_openness_diff": self.max_openness_diff,
            "blinks": {
                "a": self.blinks_a,
                "b": self.blinks_b,
                "matched": len(self.matched),
                "onset_diff_frames": self.onset_diff_frames,
                "end_diff_frames": self.end_diff_frames,
                "unmatched_a": self.unmatched_a,
                "unmatched_b": self.unmatched_b,
            },
        }


def _session_files(session: str | Path) -> tuple[str, Path, Path]:
    """(name, frames.csv, blinks.csv) of ``OUTDIR/<stem>`` or any of its files."""
    from eyeblink.outputs.report import session_paths

    outdir, stem, (frames, blinks) = session_paths(session, ".frames.csv", ".blinks.csv")
    return str(outdir / stem), frames, blinks


def _table(path: Path, needed: tuple[str, ...]) -> list[dict[str, str]]:
    from eyeblink.outputs.export import read_table

    header, rows = read_table(path)
    missing = [c for c in needed if c not in header]
    if missing:
        raise ConfigError(
            f"{path} has no column {missing[0]!r}: not an eyeblink {path.name.split('.', 1)[1]} "
            "file; "
            "give the outputs of `eyeblink process`"
        )
    return [dict(zip(header, r, strict=False)) for r in rows]


def _float(text: str | None) -> float:
    return float(text) if text not in (None, "") else math.nan


def compare_sessions(
    a: str | Path, b: str | Path, *, tolerance: float = DEFAULT_TOLERANCE
) -> Comparison:
    """Compare session ``a`` with session ``b`` (each ``OUTDIR/<stem>`` or one of its output
    files)."""
    if not tolerance >= 0:
        raise ConfigError(f"--tolerance must be >= 0, got {tolerance}")
    name_a, frames_a, blinks_a = _session_files(a)
    name_b, frames_b, blinks_b = _session_files(b)
    identical = {
        "frames.csv": frames_a.read_bytes() == frames_b.read_bytes(),
        "blinks.csv": blinks_a.read_bytes() == blinks_b.read_bytes(),
    }
    needed = ("frame", "face", *_OPENNESS)
    rows_a = {int(r["frame"]): r for r in _table(frames_a, needed)}
    rows_b = {int(r["frame"]): r for r in _table(frames_b, needed)}
    common = sorted(rows_a.keys() & rows_b.keys())
    max_diff: dict[str, tuple[float, int | None]] = {}
    face_differs = 0
    for i in common:
        ra, rb = rows_a[i], rows_b[i]
        if ra["face"] != rb["face"]:
            face_differs += 1
            continue
        for col in (*_OPENNESS, *_ALSO, *_BOX):
            if col not in ra or col not in rb:
                continue
            va, vb = _float(ra[col]), _float(rb[col])
            if math.isnan(va) and math.isnan(vb):
                d = 0.0
            elif math.isnan(va) or math.isnan(vb):
                d = math.inf  # a value on one side only
            else:
                d = abs(va - vb)
            if d > max_diff.get(col, (-1.0, None))[0]:
                max_diff[col] = (d, i)
    blink_cols = ("blink", "start_frame", "end_frame", "start_s")
    ev_a, ev_b = _table(blinks_a, blink_cols), _table(blinks_b, blink_cols)
    matched, onset, end = _match_blinks(ev_a, ev_b)
    used_a, used_b = {m[0] for m in matched}, {m[1] for m in matched}
    brief = ("blink", "start_frame", "end_frame", "start_s", "duration_ms", "amplitude")
    return Comparison(
        name_a,
        name_b,
        tolerance,
        identical,
        len(rows_a),
        len(rows_b),
        len(common),
        sorted(rows_a.keys() - rows_b.keys()),
        sorted(rows_b.keys() - rows_a.keys()),
        face_differs,
        max_diff,
        len(ev_a),
        len(ev_b),
        matched,
        onset,
        end,
        [{k: e.get(k) for k in brief} for e in ev_a if int(e["blink"]) not in used_a],
        [{k: e.get(k) for k in brief} for e in ev_b if int(e["blink"]) not in used_b],
    )


def _match_blinks(
    ev_a: list[dict[str, str]], ev_b: list[dict[str, str]]
) -> tuple[list[tuple[int, int]], int, int]:
    """One-to-one matches of blinks whose frame spans overlap, greedily by the largest overlap; the
    largest onset and end differences (frames) of the matched pairs."""
    pairs = []
    for x in ev_a:
        xa, xb = int(x["start_frame"]), int(x["end_frame"])
        for y in ev_b:
            ya, yb = int(y["start_frame"]), int(y["end_frame"])
            overlap = min(xb, yb) - max(xa, ya) + 1
            if overlap > 0:
                pairs.append(
                    (
                        -overlap,
                        abs(xa - ya),
                        int(x["blink"]),
                        int(y["blink"]),
                        abs(xa - ya),
                        abs(xb - yb),
                    )
                )
    pairs.sort()
    used_a: set[int] = set()
    used_b: set[int] = set()
    matched: list[tuple[int, int]] = []
    onset = end = 0
    for _, _, na, nb, d_on, d_end in pairs:
        if na in used_a or nb in used_b:
            continue
        used_a.add(na)
        used_b.add(nb)
        matched.append((na, nb))
        onset, end = max(onset, d_on), max(end, d_end)
    matched.sort()
    return matched, onset, end


def _fmt(value: float, frame: int | None) -> str:
    if math.isinf(value):
        return f"a value on one side only (frame {frame})"
    return f"{value:.6g}" + (f" (frame {frame})" if frame is not None and value > 0 else "")


def format_comparison(c: Comparison) -> str:
    """The terminal report: a few lines, the verdict last."""
    lines = [f"A: {c.a}", f"B: {c.b}"]
    same = [k for k, v in c.identical.items() if v]
    if same:
        lines.append(f"byte-identical: {', '.join(same)}")
    lines.append(
        f"frames: A {c.frames_a}, B {c.frames_b}, {c.frames_common} in both"
        + (f"; only in A: {_span(c.only_a)}" if c.only_a else "")
        + (f"; only in B: {_span(c.only_b)}" if c.only_b else "")
        + (f"; face found in one only: {c.face_differs} frames" if c.face_differs else "")
    )
    for cols, label in (
        (_OPENNESS, "openness (EAR)"),
        (_ALSO, "closure, baseline"),
        (_BOX, "face box (px)"),
    ):
        parts = [f"{col} {_fmt(*c.max_diff[col])}" for col in cols if col in c.max_diff]
        if parts:
            lines.append(f"largest difference, {label}: " + ", ".join(parts))
    lines.append(
        f"blinks: A {c.blinks_a}, B {c.blinks_b}, {len(c.matched)} matched"
        + (
            f" (onsets within {c.onset_diff_frames} frames, ends within {c.end_diff_frames})"
            if c.matched
            else ""
        )
    )
    for side, events in (("A", c.unmatched_a), ("B", c.unmatched_b)):
        for e in events:
            lines.append(
                f"  only in {side}: blink {e['blink']}, frames {e['start_frame']}-{e['end_frame']} "
                f"(from {e['start_s']} s)"
            )
    lines.append(f"verdict: {c.verdict} (openness tolerance {c.tolerance:g})")
    return "\n".join(lines)


def _span(frames: list[int]) -> str:
    if len(frames) <= 6:
        return ", ".join(map(str, frames))
    return f"{len(frames)} frames ({frames[0]}..{frames[-1]})"
