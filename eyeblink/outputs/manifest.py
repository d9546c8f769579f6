"""``OUTDIR/eyeblink-batch.jsonl``, the manifest of ``eyeblink batch``: which input was done with
which settings.

A rerun skips an input whose key (:func:`input_key`: absolute path, size, mtime,
:func:`settings_hash`) has a ``done`` line and whose three output files exist
(:meth:`Manifest.done_keys`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.version import __version__

if TYPE_CHECKING:
    from eyeblink.config import RunConfig

__all__ = ["MANIFEST_NAME", "Manifest", "input_key", "settings_hash"]

#: The manifest's file name inside OUTDIR.
MANIFEST_NAME = "eyeblink-batch.jsonl"


def settings_hash(config: RunConfig) -> str:
    """16 hex digits over everything that changes the outputs: the run config and eyeblink's
    version.

    Scheduling settings (CPUs per task, chunk length) are left out: they do not change the results;
    so is ``eye_crops`` (``--report``: an extra file beside the same rows).
    """
    cfg = config.to_dict()
    cfg.pop("eye_crops", None)
    # hashed where [eye] roi was kept before it had its section: a batch resumed across the move
    # keeps its finished inputs (the same settings, the same hash)
    cfg["detect"]["eye_roi"] = cfg.pop("eye")["roi"]
    blob = json.dumps({"config": cfg, "eyeblink": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def input_key(path: Path, settings: str) -> tuple[str, dict[str, Any]]:
    """(key, identity) of one input: absolute path + size + mtime (ns) + settings hash."""
    st = path.stat()
    ident = {
        "input": str(path.resolve()),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "settings": settings,
    }
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode("utf-8")).hexdigest()[:24]
    return key, ident


class Manifest:
    """``OUTDIR/eyeblink-batch.jsonl``: one JSON line per finished video; the driver is the only
    writer.

    Line fields: ``key`` (sha256 of the identity below), ``input`` (absolute path), ``size``,
    ``mtime_ns``, ``settings`` (:func:`settings_hash`), ``stem``, ``status`` (``done`` |
    ``failed``), ``error`` (the one-line message, failed only), ``frames``, ``blinks``, ``chunks``,
    ``wall_s`` (task seconds, summed over chunks), ``damaged_packets`` (undecodable packets skipped,
    done only), ``finished`` (ISO 8601 UTC), ``eyeblink`` (version). Lines are appended and fsynced
    one by one, so a crash loses at most the line being written; an unreadable (torn) line is
    ignored on reading. A rerun's line of an input replaces the earlier ones (:meth:`compact`): one
    line per input.
    """

    def __init__(self, outdir: Path) -> None:
        self.path = outdir / MANIFEST_NAME

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if isinstance(rec, dict) and "key" in rec:
                    out.append(rec)
        return out

    def done_keys(self, outdir: Path) -> set[str]:
        """Keys of videos whose last line says ``done`` and whose three output files exist."""
        last: dict[str, dict[str, Any]] = {}
        for rec in self.records():
            last[rec["key"]] = rec
        done = set()
        for key, rec in last.items():
            stem = rec.get("stem", "")
            if rec.get("status") == "done" and all(
                (outdir / f"{stem}.{kind}").is_file()
                for kind in ("frames.csv", "blinks.csv", "summary.json")
            ):
                done.add(key)
        return done

    def compact(self) -> None:
        """Rewrite the manifest with one line per input (its latest), atomically: a rerun's lines
        replace the earlier run's lines of the same inputs instead of adding to them. Called when a
        batch starts (after a killed run) and when it ends; in between, lines are appended
        (crash-safe)."""
        from eyeblink.outputs.export import write_text_atomic

        records = self.records()
        latest: dict[str, dict[str, Any]] = {}
        for rec in records:
            # re-inserted: the order of the latest lines
            latest.pop(str(rec.get("input", rec["key"])), None)
            latest[str(rec.get("input", rec["key"]))] = rec
        if len(latest) == len(records) and (
            not self.path.exists()
            or self.path.read_text(encoding="utf-8").count("\n") == len(records)
        ):
            return  # nothing to drop (no duplicate, no torn line)
        write_text_atomic(self.path, "".join(_line(rec) for rec in latest.values()))

    def append(self, record: dict[str, Any]) -> None:
        line = _line(record)
        with self.path.open("a", encoding="utf-8", newline="\n") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, allow_nan=False, default=str) + "\n"


# ----------------------------------------------------------------------------------------- chunks
