"""The inputs of ``eyeblink batch``: glob patterns, folders of videos and ``@LIST`` files as
video paths."""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

from eyeblink.errors import InputNotFoundError

__all__ = ["expand_inputs"]


def expand_inputs(items: Sequence[str]) -> list[Path]:
    """Paths from glob patterns (``**`` recurses), directories (their videos, recursively), video
    paths and ``@LIST`` files (one path or pattern per line, ``#`` comments, relative to the list).

    Order is kept, duplicates dropped. A pattern or list that matches nothing is an error.
    """
    from eyeblink.sources.files import VIDEO_SUFFIXES

    out: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)

    def add_all(paths: list[Path], nothing: str) -> None:
        """Every one of ``paths``; none is an error saying ``nothing``."""
        if not paths:
            raise InputNotFoundError(nothing)
        for q in paths:
            add(q)

    def one(item: str, base: Path | None) -> None:
        text = item.strip()
        if text.startswith("@"):
            lst = Path(text[1:])
            if base is not None and not lst.is_absolute():
                lst = base / lst
            if not lst.is_file():
                raise InputNotFoundError(
                    f"list file not found: {lst} — give @FILE with one video path per line"
                )
            lines = [ln.strip() for ln in lst.read_text(encoding="utf-8").splitlines()]
            entries = [ln for ln in lines if ln and not ln.startswith("#")]
            if not entries:
                raise InputNotFoundError(f"list file {lst} names no video; put one path per line")
            for ln in entries:
                one(ln, lst.parent)
            return
        p = Path(text)
        if base is not None and not p.is_absolute():
            p = base / p
        if glob.has_magic(str(p)):
            matches = sorted(Path(m) for m in glob.glob(str(p), recursive=True))
            add_all(
                [m for m in matches if m.is_file()],
                f"pattern {text!r} matches no file — check the pattern "
                "(quote it so the shell does not expand it)",
            )
        elif p.is_dir():
            add_all(
                sorted(
                    q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in VIDEO_SUFFIXES
                ),
                f"folder {p} holds no video ({', '.join(VIDEO_SUFFIXES[:4])}, ...); give video "
                "files, a "
                "pattern or @LIST",
            )
        elif p.is_file():
            add(p)
        else:
            raise InputNotFoundError(f"input not found: {p} — check the path")

    for item in items:
        one(item, None)
    return out


# -----------------------------------------------------------------------------------------
# settings, manifest
