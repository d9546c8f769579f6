"""ELAN annotation files (``.eaf``) in and out: a session's blinks as ELAN tiers, and a rater's tier
as corrections or as the reference ``eyeblink agree`` scores against.

Written with ``pympi-ling`` (a maintained reader and writer of the format), in the EAF 3.0 structure
ELAN opens: time slots in milliseconds on the recording's own clock, and a media descriptor linking
the recording (its absolute URL and its path relative to the ``.eaf``), so ELAN opens the video with
the tiers.

Tiers (:func:`write_eaf`): ``blinks-automatic`` (the detector's events), ``blinks-corrected``
(``blinks.csv`` after the session's corrections, when it has some), ``left-eye`` and ``right-eye``
(the detector's per-eye spans). Each annotation's value is the event's kind (``blink`` or
``prolonged_closure``).

Frames and milliseconds: an annotation runs from its first frame's timestamp to its last frame's
timestamp plus one frame interval (frames are inclusive; so its length in ELAN is the event's
``duration_ms``). Reading a tier back (:func:`tier_spans`), an annotation's first frame is the first
frame at or after its start and its last frame the last one at or before its end minus one frame
interval (each within half a frame interval, which absorbs the rounding to milliseconds), so a
session's events go out and come back to the frame.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from eyeblink.errors import ConfigError, InputNotFoundError, one_line

if TYPE_CHECKING:
    from eyeblink.outputs.corrections import Corrections, Frames

__all__ = [
    "TIERS",
    "TierSpan",
    "eaf_path",
    "import_eaf",
    "read_tier",
    "tier_corrections",
    "tier_spans",
    "write_eaf",
]

#: the tiers :func:`write_eaf` writes, in order
TIERS = ("blinks-automatic", "blinks-corrected", "left-eye", "right-eye")
_MIME = {
    ".avi": "video/x-msvideo",
    ".mp4": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
    ".mpg": "video/mpeg",
    ".mpeg": "video/mpeg",
    ".wmv": "video/x-ms-wmv",
}
_CLOSURE_VALUES = ("prolonged_closure", "prolonged closure", "closure")


def _pympi() -> Any:
    """pympi-ling (extra ``elan``), or a one-line error naming the install."""
    try:
        import pympi
    except ImportError:
        raise ConfigError(
            "ELAN files need the pympi-ling package: pip install 'eyeblink[elan]'"
        ) from None
    return pympi


def eaf_path(outdir: str | Path, stem: str) -> Path:
    """Where ``eyeblink export-eaf`` writes by default: ``OUTDIR/<stem>.eaf``."""
    return Path(outdir) / f"{stem}.eaf"


# ------------------------------------------------------------------------------------------ writing


def _ms(t: float) -> int:
    return round(t * 1000)


def write_eaf(session: str | Path, output: str | Path | None = None) -> Path:
    """Write ``OUTDIR/<stem>``'s blinks as an ELAN file (module docstring); returns its path."""
    import json
    import xml.etree.ElementTree as ET

    from eyeblink.outputs.corrections import apply_session, auto_rows, read_frames
    from eyeblink.outputs.paths import OutputPlan, write_text
    from eyeblink.outputs.report import session_paths

    pympi = _pympi()
    outdir, stem, _ = session_paths(session, ".frames.csv", ".blinks.csv", ".summary.json")
    out = Path(output) if output is not None else eaf_path(outdir, stem)
    if out.suffix.lower() != ".eaf":
        raise ConfigError(f"{out}: an ELAN file's name ends in .eaf; give -o FILE.eaf")
    OutputPlan().read(outdir / f"{stem}.blinks.csv", "the session's blinks.csv").write(
        out, "-o"
    ).check()
    frames = read_frames(outdir / f"{stem}.frames.csv")
    step = frames.interval if math.isfinite(frames.interval) else 0.0
    _, auto = auto_rows(outdir, stem)
    applied = apply_session(outdir, stem, write=False)
    try:
        summary = json.loads((outdir / f"{stem}.summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = {}

    eaf = pympi.Elan.Eaf(author="eyeblink")
    eaf.adocument.update(
        {
            "VERSION": "3.0",
            "FORMAT": "3.0",
            "xsi:noNamespaceSchemaLocation": "http://www.mpi.nl/tools/elan/EAFv3.0.xsd",
        }
    )
    eaf.header.update({"MEDIA_FILE": "", "TIME_UNITS": "milliseconds"})
    eaf.remove_tier("default")
    recording = summary.get("input") if isinstance(summary, dict) else None
    if isinstance(recording, str) and recording:
        import os

        media = Path(recording).resolve()
        try:
            relative: str | None = Path(os.path.relpath(media, out.resolve().parent)).as_posix()
        # the recording on another Windows drive than the file: its absolute URL only
        except ValueError:
            relative = None
        if relative is not None and not relative.startswith("../"):
            relative = "./" + relative
        eaf.add_linked_file(
            media.as_uri(), relpath=relative, mimetype=_MIME.get(media.suffix.lower(), "video/*")
        )

    def tier(name: str, spans: list[tuple[float, float, str]]) -> None:
        eaf.add_tier(name)
        for a, b, value in spans:
            if math.isfinite(a) and math.isfinite(b):
                eaf.add_annotation(name, _ms(a), max(_ms(b + step), _ms(a) + 1), value)

    def events(rows: list[dict[str, Any]], side: str = "") -> list[tuple[float, float, str]]:
        out_ = []
        for r in rows:
            a, b = _f(r.get(f"start_s{side}")), _f(r.get(f"end_s{side}"))
            out_.append((a, b, str(r.get("kind") or "blink")))
        return out_

    tier("blinks-automatic", events(auto))
    if applied is not None:
        tier("blinks-corrected", events(applied.blinks))
    tier("left-eye", events(auto, "_left"))
    tier("right-eye", events(auto, "_right"))
    root = pympi.Elan.to_adocument(eaf)
    text = ET.tostring(root, encoding="unicode")
    write_text(out, '<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n", "-o")
    return out


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


# ------------------------------------------------------------------------------------------ reading


def read_tier(path: str | Path, tier: str) -> list[tuple[int, int, str]]:
    """The annotations of ``tier`` in the ELAN file ``path``: (start ms, end ms, value), in time
    order. A file that is not an ELAN file, or has no such tier, is one :class:`ConfigError` line
    naming it and the fix."""
    import warnings

    pympi = _pympi()
    p = Path(path)
    if not p.is_file():
        raise InputNotFoundError(f"ELAN file not found: {p}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eaf = pympi.Elan.Eaf(str(p), suppress_version_warning=True)
    except Exception as exc:  # the parser raises anything from XML errors to KeyError
        raise ConfigError(
            f"{p} is not an ELAN .eaf file ({one_line(exc)}); give a file saved by ELAN or by "
            "eyeblink export-eaf"
        ) from None
    names = sorted(eaf.get_tier_names())
    if tier not in names:
        raise ConfigError(
            f"{p} has no tier {tier!r}; its tiers are "
            f"{', '.join(repr(n) for n in names) or 'none'}: "
            "name one with --tier"
        )
    rows = []
    for a in eaf.get_annotation_data_for_tier(tier):
        start, end, value = a[0], a[1], a[2]
        if start is None or end is None:
            continue
        rows.append((int(start), int(end), str(value or "")))
    return sorted(rows)


class TierSpan(NamedTuple):
    """An annotation on a session's frames: its first and last frame, their timestamps, and its
    kind."""

    start_frame: int
    end_frame: int
    start_s: float
    end_s: float
    kind: str = "blink"


def tier_spans(path: str | Path, tier: str, frames: Frames) -> list[TierSpan]:
    """``tier``'s annotations placed on the session's frames (module docstring)."""
    import numpy as np

    step = frames.interval if math.isfinite(frames.interval) else 0.0
    half = 0.5 * step if step > 0 else 5e-4
    t = frames.t
    out = []
    for a_ms, b_ms, value in read_tier(path, tier):
        a, b = a_ms / 1000, b_ms / 1000 - step
        i0 = int(np.searchsorted(t, a - half, side="left"))
        i1 = int(np.searchsorted(t, b + half, side="right")) - 1
        if not len(t):
            break
        if i0 >= len(t) or i1 < 0:
            continue  # outside the recording
        # shorter than a frame (or over frames the decoder never returned): the frame nearest its
        # middle
        if i1 < i0:
            i0 = i1 = int(np.argmin(np.abs(t - (a_ms + b_ms) / 2000)))
        kind = "prolonged_closure" if value.strip().lower() in _CLOSURE_VALUES else "blink"
        out.append(
            TierSpan(int(frames.frame[i0]), int(frames.frame[i1]), float(t[i0]), float(t[i1]), kind)
        )
    return out


def tier_corrections(
    path: str | Path, tier: str, session: str | Path, *, reviewer: str = ""
) -> Corrections:
    """A rater's ELAN tier as the session's corrections: each automatic blink the tier has
    (overlapping an annotation by :data:`~eyeblink.outputs.corrections.MATCH_IOU` of their union)
    accepted when the frames are the same, else retimed to the annotation's frames; the automatic
    blinks it has not, rejected; its other annotations, added. Applied, ``blinks.csv`` holds the
    tier's events, frame for frame."""
    import time

    from eyeblink.outputs.corrections import (
        MATCH_IOU,
        Corrections,
        Decision,
        Span,
        auto_rows,
        read_frames,
    )
    from eyeblink.outputs.report import session_paths
    from eyeblink.version import __version__

    outdir, stem, _ = session_paths(session, ".frames.csv")
    spans = tier_spans(path, tier, read_frames(outdir / f"{stem}.frames.csv"))
    _, auto = auto_rows(outdir, stem)
    pairs = []
    for i, r in enumerate(auto):
        fa, fb = _f(r.get("start_frame")), _f(r.get("end_frame"))
        for j, s in enumerate(spans):
            inter = min(fb, s.end_frame) - max(fa, s.start_frame) + 1
            union = max(fb, s.end_frame) - min(fa, s.start_frame) + 1
            if inter > 0 and inter / union >= MATCH_IOU:
                pairs.append((-inter / union, i, j))
    row_of: dict[int, int] = {}
    used: set[int] = set()
    for _, i, j in sorted(pairs):
        if i not in row_of and j not in used:
            row_of[i] = j
            used.add(j)
    decisions = []
    for i, r in enumerate(auto):
        a, b = _f(r.get("start_s")), _f(r.get("end_s"))
        fa, fb = _f(r.get("start_frame")), _f(r.get("end_frame"))
        f0 = int(fa) if math.isfinite(fa) else None
        f1 = int(fb) if math.isfinite(fb) else None
        k = row_of.get(i)
        if k is None:
            decisions.append(Decision(a, b, "reject", start_frame=f0, end_frame=f1))
            continue
        s = spans[k]
        if (s.start_frame, s.end_frame) == (f0, f1):
            decisions.append(Decision(a, b, "accept", start_frame=f0, end_frame=f1))
        else:
            decisions.append(
                Decision(a, b, "retime", s.start_s, s.end_s, f0, f1, s.start_frame, s.end_frame)
            )
    added = tuple(
        Span(s.start_s, s.end_s, s.kind, "", s.start_frame, s.end_frame)
        for j, s in enumerate(spans)
        if j not in used
    )
    return Corrections(
        stem,
        tuple(decisions),
        added,
        reviewer=reviewer or f"ELAN tier {tier} of {Path(path).name}",
        saved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        eyeblink_version=__version__,
    )


def import_eaf(
    path: str | Path, tier: str, session: str | Path, output: str | Path | None = None
) -> Path:
    """Write ``tier`` of the ELAN file ``path`` as the session's ``<stem>.corrections.json`` (or
    ``output``); ``eyeblink report`` / ``process`` / :func:`eyeblink.load` then apply it. Returns
    the path written."""
    import json

    from eyeblink.outputs.corrections import as_json, corrections_path
    from eyeblink.outputs.paths import write_text
    from eyeblink.outputs.report import split_stem

    outdir, stem = split_stem(session)
    c = tier_corrections(path, tier, session)
    out = Path(output) if output is not None else corrections_path(outdir, stem)
    write_text(out, json.dumps(as_json(c), indent=2) + "\n", "-o")
    return out
