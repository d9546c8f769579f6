"""``eyeblink eval --ladder``: an annotated set scored at its own frame rate and at slower ones.

A slow camera differs from a fast one in two ways, and the ladder shows both, rung by rung (15, 10
and 7.5 FPS by default, each with its own step ``k = round(native / rate)``: every 2nd, 3rd, 4th
frame of a 30 FPS set):

- **decimated**: the first decoded frame of each output frame time ``k / native`` s (every k-th
  frame when no frame is missing): a camera with a short exposure, sampling the same scene less
  often;
- **exposed**: each output frame the time-weighted mean of the input frames shown during its frame
  time (a frame counts for the time until the next one, so a "repeat the previous frame" packet or a
  dropped frame weighs as the picture it left on screen): a camera exposing that long, which
  integrates a blink into one blurred, partly closed frame.

Either way an output frame keeps the container timestamp of the first input frame in its frame time,
so the pipeline times the stream as the slower camera would. The frames go through the real analysis
path (:func:`eyeblink.runtime.pipeline.process_source` with the analyzer reset per clip), from a
:class:`RungSource` that wraps the real decoder.

Scoring is ``eyeblink eval``'s (:mod:`eyeblink.lab.evaluate`): detected spans in the ``.tag``
frame-ID space (packet indices: an exposed output frame spans the packets of its frame time),
one-to-one overlap matching, unscored and strict conventions, per condition. A labelled blink counts
at a rung only when one of its frames falls in it (a decimated rung can step over a one-frame blink:
nobody could score it there).

:func:`no_worse` is the rule a new default must pass: on every rung, way, condition and convention
the candidate's F1 may be lower than the reference's only by the paired bootstrap's noise (clips
resampled).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.errors import ConfigError, DatasetError, EyeblinkError
from eyeblink.frames import Frame
from eyeblink.lab.evaluate import (
    EMPTY,
    Score,
    Span,
    detected_spans,
    group_of,
    match_events,
    prepare_dataset,
    read_tag,
    within,
)
from eyeblink.sources.files import FrameSource

#: the slower rates of the ladder, FPS
RATES = (15.0, 10.0, 7.5)
WAYS = ("decimated", "exposed")
#: paired bootstrap of :func:`no_worse`: resamples of the clips, and the one-sided quantile of the
#: loss
BOOT_RESAMPLES = 2000
BOOT_QUANTILE = 0.95


@dataclass(frozen=True)
class Rung:
    """One rung: ``way`` ``native`` (the set as it is), ``decimated`` or ``exposed`` at step
    ``k``."""

    way: str
    k: int
    fps: float

    @property
    def key(self) -> str:
        return "native" if self.way == "native" else f"{self.way} {self.fps:g}"


def rungs_for(native_fps: float, rates: Sequence[float] = RATES) -> list[Rung]:
    """The native rung, then each rate both ways; a rate not below the native one is left out."""
    out = [Rung("native", 1, native_fps)]
    for r in rates:
        k = round(native_fps / r)
        if k >= 2:
            out += [Rung(w, k, r) for w in WAYS]
    return out


class RungSource(FrameSource):
    """The frames of ``inner`` as a camera at ``1 / k`` of its rate would give them (see the module
    doc).

    ``packet_index(i)`` / ``packet_end(i)``: the first and last packet index (the ``.tag`` frame id)
    that output frame ``i`` stands for: the sampled frame's own packet when decimated, every packet
    of its frame time when exposed. ``spans`` holds them all after the iteration.
    """

    def __init__(self, inner: FrameSource, rung: Rung) -> None:
        if rung.k < 2 or rung.way not in WAYS:
            raise ValueError(
                f"RungSource needs a decimated or exposed rung with k >= 2, got {rung}"
            )
        native = inner.nominal_fps
        if not native:
            raise DatasetError(
                f"{inner.path} has no nominal frame rate; the ladder needs it to place frame times"
            )
        self.inner, self.rung = inner, rung
        self.path, self.name = inner.path, inner.name
        self.width, self.height = inner.width, inner.height
        self.nominal_fps = native / rung.k
        self.frame_count_hint = None
        self.period_s = rung.k / native
        self.spans: list[tuple[int, int]] = []

    def describe(self) -> dict[str, Any]:
        return {
            **self.inner.describe(),
            "ladder": {"way": self.rung.way, "k": self.rung.k, "fps": self.nominal_fps},
        }

    def close(self) -> None:
        self.inner.close()

    def packet_index(self, frame_index: int) -> int | None:
        p = self.spans[frame_index][0]
        return None if p < 0 else p

    def packet_end(self, frame_index: int) -> int | None:
        p = self.spans[frame_index][1]
        return None if p < 0 else p

    def _packet(self, i: int) -> int:
        p = self.inner.packet_index(i) if hasattr(self.inner, "packet_index") else None
        return -1 if p is None else int(p)

    def __iter__(self) -> Iterator[Frame]:
        # Time runs on the native frame grid: an input frame's slot is round((t - t0) * native), so
        # a millisecond time base (1/30 s rounded) still puts every frame in its own slot. A picture
        # stays on screen from its slot to the next frame's; an output frame is slots [w k, (w + 1)
        # k).
        exposed, k = self.rung.way == "exposed", self.rung.k
        native = k / self.period_s
        self.spans = []
        t0: float | None = None
        win = -1  # the output frame time being filled
        first: Frame | None = None  # its first input frame
        first_packet = -1
        acc: np.ndarray | None = None
        slots = 0
        prev: Frame | None = None
        prev_slot = prev_packet = -1
        out = 0

        def add(img: np.ndarray, a: int, b: int) -> None:
            """``img`` shown during slots [a, b) of the current output frame."""
            nonlocal acc, slots
            n = min(b, (win + 1) * k) - max(a, win * k)
            if n > 0:
                acc = (
                    img.astype(np.float64) * n if acc is None else acc + img.astype(np.float64) * n
                )
                slots += n

        def emit(last_packet: int) -> Frame:
            nonlocal out
            assert first is not None
            image = first.image
            if exposed and acc is not None and slots > 0:
                image = np.clip(np.rint(acc / slots), 0, 255).astype(np.uint8)
            self.spans.append(
                (first_packet, max(first_packet, last_packet) if exposed else first_packet)
            )
            frame = Frame(index=out, timestamp_s=first.timestamp_s, image=image)
            out += 1
            return frame

        for fr in self.inner:
            packet = self._packet(fr.index)
            if t0 is None:
                t0 = fr.timestamp_s
            slot = max(prev_slot + 1, round((fr.timestamp_s - t0) * native))
            w = slot // k
            # the previous picture stayed on screen until this one came
            if exposed and prev is not None:
                add(prev.image, prev_slot, slot)
            if w != win:
                if first is not None:
                    yield emit(packet - 1 if packet >= 0 else prev_packet)
                win, first, first_packet, acc, slots = w, fr, packet, None, 0
                # ... also into this frame time, until this frame came
                if exposed and prev is not None:
                    add(prev.image, prev_slot, slot)
            prev, prev_slot, prev_packet = fr, slot, packet
        if first is not None and prev is not None:
            if exposed:  # the last picture: one slot
                add(prev.image, prev_slot, prev_slot + 1)
            yield emit(prev_packet)


def present(blinks: Sequence[Span], spans: Sequence[tuple[int, int]]) -> list[Span]:
    """The labelled blinks with a frame in the rung: overlapping an output frame's packet span."""
    if not spans:
        return []
    starts = np.array([s for s, _ in spans])
    ends = np.array([e for _, e in spans])
    return [b for b in blinks if bool(np.any((starts <= b.end) & (ends >= b.start)))]


def clip_score(truth: Sequence[Span], spans: Sequence[Span], annotated: Span) -> tuple[Score, int]:
    """(score inside the annotated frames, detections entirely outside them)."""
    kept, outside = within(spans, annotated)
    return match_events(truth, kept), outside


# --------------------------------------------------------------------------- running


def run_ladder(
    dataset: Path,
    config: Any,
    *,
    rates: Sequence[float] = RATES,
    outdir: Path | None = None,
    json_path: Path | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Every clip of ``dataset`` at every rung through the real pipeline; prints the table,
    returns the report."""
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.runtime.pipeline import process_source
    from eyeblink.runtime.runner import build_analyzer
    from eyeblink.sources.files import open_source

    pairs, outdir, tmp = prepare_dataset(dataset, json_path, outdir, "ladder")
    analyzer = build_analyzer(config)
    clips: list[dict[str, Any]] = []
    try:
        for video, tag_path in pairs:
            tag = read_tag(tag_path)
            with open_source(video, fps=config.fps) as probe:
                native = probe.nominal_fps or config.fps
            if not native:
                raise DatasetError(f"{video} has no nominal frame rate; pass --fps")
            row: dict[str, Any] = {"video": str(video), "group": group_of(video), "rungs": {}}
            for rung in rungs_for(native, rates):
                rung_dir = outdir / rung.key.replace(" ", "-")
                ensure_output_dir(rung_dir)
                try:
                    with open_source(video, fps=config.fps) as inner:
                        src: Any = inner if rung.way == "native" else RungSource(inner, rung)
                        analyzer.reset()
                        res = process_source(
                            src, rung_dir, config, analyzer=analyzer, progress=progress
                        )
                        spans = detected_spans(res.blinks, src, native)
                        truth = (
                            list(tag.blinks)
                            if rung.way == "native"
                            else present(tag.blinks, src.spans)
                        )
                except DatasetError:
                    raise
                except EyeblinkError as exc:
                    print(f"{video.stem} {rung.key}: failed: {exc}")
                    row["rungs"][rung.key] = {
                        "error": str(exc),
                        "truth": len(tag.blinks),
                        "tp": 0,
                        "fp": 0,
                        "fn": len(tag.blinks),
                        "unscored": 0,
                    }
                    continue
                sc, outside = clip_score(truth, spans, tag.annotated)
                row["rungs"][rung.key] = {
                    "fps": native / rung.k,
                    "frames": res.summary.get("frames"),
                    "truth": len(truth),
                    "labelled": len(tag.blinks),
                    "tp": sc.tp,
                    "fp": sc.fp,
                    "fn": sc.fn,
                    "unscored": outside,
                }
            clips.append(row)
            print(
                f"{video.stem:<24} "
                + "  ".join(f"{k} {r['tp']}/{r['fp']}/{r['fn']}" for k, r in row["rungs"].items()),
                flush=True,
            )
    finally:
        if tmp is not None:
            tmp.cleanup()
    report = {
        "dataset": str(dataset),
        "rates": list(rates),
        "clips": clips,
        "table": table(clips),
        "settings": config.to_dict(),
    }
    print()
    print(format_table(report["table"]))
    if json_path is not None:
        from eyeblink.outputs.export import clean_json
        from eyeblink.outputs.paths import write_text

        write_text(json_path, json.dumps(clean_json(report), indent=2) + "\n", "--json")
    return report


# --------------------------------------------------------------------------- scores


def rung_keys(clips: Sequence[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for c in clips:
        keys += [k for k in c["rungs"] if k not in keys]
    return keys


def cell_scores(clips: Sequence[dict[str, Any]], key: str) -> dict[str, tuple[Score, Score]]:
    """Per condition (and ``overall``) of one rung: (unscored, strict) scores summed over the
    clips."""
    un: dict[str, Score] = defaultdict(lambda: EMPTY)
    st: dict[str, Score] = defaultdict(lambda: EMPTY)
    for c in clips:
        r = c["rungs"].get(key)
        if r is None:
            continue
        s = Score(r["tp"], r["fp"], r["fn"], ())
        for g in ("overall", c["group"]):
            un[g] = un[g] + s
            st[g] = st[g] + s.strict(r["unscored"])
    return {g: (un[g], st[g]) for g in un}


def table(clips: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{rung: {condition: {f1, strict_f1, tp, fp, fn, unscored, truth}}}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in rung_keys(clips):
        out[key] = {}
        for g, (u, s) in sorted(
            cell_scores(clips, key).items(), key=lambda x: (x[0] != "overall", x[0])
        ):
            out[key][g] = {
                "f1": u.f1,
                "strict_f1": s.f1,
                "tp": u.tp,
                "fp": u.fp,
                "fn": u.fn,
                "unscored": s.fp - u.fp,
                "truth": u.tp + u.fn,
            }
    return out


def format_table(tab: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The printed ladder: one line per rung, F1 unscored / strict per condition, TP/FP/FN
    overall."""
    groups = [g for g in next(iter(tab.values()), {})]
    head = f"{'rung':<14} {'truth':>5} {'TP/FP/FN':>10} {'unsc.':>5} " + " ".join(
        f"{g:>13}" for g in groups
    )
    lines = [head, "-" * len(head)]
    for key, cells in tab.items():
        o = cells["overall"]
        lines.append(
            f"{key:<14} {o['truth']:>5} {o['tp']:>3}/{o['fp']:>2}/{o['fn']:>3} {o['unscored']:>5} "
            + " ".join(
                f"{cells[g]['f1']:.3f} / {cells[g]['strict_f1']:.3f}"
                if g in cells
                else f"{'-':>13}"
                for g in groups
            )
        )
    lines.append(
        "F1 unscored / strict (strict: detections outside the annotated frames count as false "
        "positives)"
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the rule for defaults


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    den = 2 * tp + fp + fn
    return np.where(den > 0, 2 * tp / np.maximum(den, 1), 1.0)


def no_worse(
    candidate: dict[str, Any],
    reference: dict[str, Any],
    *,
    margin: float | None = None,
    resamples: int = BOOT_RESAMPLES,
    quantile: float = BOOT_QUANTILE,
    seed: int = 0,
) -> dict[str, Any]:
    """Is ``candidate``'s ladder (a :func:`run_ladder` report) no worse than ``reference``'s on
    every cell?

    A cell is a rung, a condition (and overall) and a convention (unscored, strict). The clips are
    resampled with replacement ``resamples`` times, the same clips for both (paired); a cell's noise
    margin is the ``quantile`` of the reference's F1 minus the candidate's under that resampling
    *minus* the observed difference, i.e. how far the difference of the two F1 moves by the luck of
    which clips were recorded. The candidate fails a cell when its F1 is lower than the reference's
    by more than that margin (a fixed ``margin`` replaces the bootstrap). Returns ``{"passes": bool,
    "cells": [...]}``, the failing cells first.
    """
    cand = {c["video"]: c for c in candidate["clips"]}
    ref = {c["video"]: c for c in reference["clips"]}
    videos = sorted(set(cand) & set(ref))
    if not videos:
        raise ConfigError("the two ladders share no clip: run both on the same data set")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(videos), size=(resamples, len(videos)))
    groups = sorted({ref[v]["group"] for v in videos})
    cells: list[dict[str, Any]] = []
    for key in rung_keys([ref[v] for v in videos]):
        for g in ["overall", *groups]:
            members = [i for i, v in enumerate(videos) if g == "overall" or ref[v]["group"] == g]
            if not members or any(
                key not in ref[videos[i]]["rungs"] or key not in cand[videos[i]]["rungs"]
                for i in members
            ):
                continue
            for conv in ("unscored", "strict"):
                counts = []
                for side in (cand, ref):
                    rows = [side[v]["rungs"][key] for v in videos]
                    tp = np.array([r["tp"] for r in rows], float)
                    fp = np.array(
                        [r["fp"] + (r["unscored"] if conv == "strict" else 0) for r in rows], float
                    )
                    fn = np.array([r["fn"] for r in rows], float)
                    mask = np.zeros(len(videos), float)
                    mask[members] = 1.0
                    counts.append((tp * mask, fp * mask, fn * mask))
                (ctp, cfp, cfn), (rtp, rfp, rfn) = counts
                f1c = float(_f1(ctp.sum(), cfp.sum(), cfn.sum()))
                f1r = float(_f1(rtp.sum(), rfp.sum(), rfn.sum()))
                loss = f1r - f1c
                if margin is None:
                    boot = _f1(rtp[draws].sum(1), rfp[draws].sum(1), rfn[draws].sum(1)) - _f1(
                        ctp[draws].sum(1), cfp[draws].sum(1), cfn[draws].sum(1)
                    )
                    m = float(np.quantile(boot - loss, quantile))
                else:
                    m = margin
                cells.append(
                    {
                        "rung": key,
                        "condition": g,
                        "convention": conv,
                        "candidate_f1": f1c,
                        "reference_f1": f1r,
                        "loss": loss,
                        "margin": m,
                        "passes": loss <= m + 1e-12,
                    }
                )
    cells.sort(key=lambda c: (c["passes"], -c["loss"]))
    return {
        "passes": all(c["passes"] for c in cells),
        "clips": len(videos),
        "resamples": resamples,
        "quantile": quantile,
        "cells": cells,
    }


def replaces_default(
    ladders: dict[str, tuple[dict[str, Any], dict[str, Any]]], **rule: Any
) -> dict[str, Any]:
    """The rule for a new default network (or any default of the pipeline): ``ladders`` maps each
    ladder's name (``zju-dev``, ``webcam-like``: each a different kind of recording) to
    ``(candidate's report, current default's report)`` on it. The candidate replaces the default
    only if it is no worse (:func:`no_worse`, with ``rule``'s options) on every cell of **every**
    ladder; otherwise the current default stays. Returns ``{"replaces": bool, "ladders": {name:
    verdict}}``; a missing ladder is refused (:class:`ConfigError`): a default is chosen on more
    than one kind of recording."""
    if len(ladders) < 2:
        raise ConfigError(
            "a default is chosen on at least two ladders (kinds of recording), got "
            f"{len(ladders)}: "
            f"{', '.join(ladders) or 'none'}"
        )
    verdicts = {name: no_worse(cand, current, **rule) for name, (cand, current) in ladders.items()}
    return {"replaces": all(v["passes"] for v in verdicts.values()), "ladders": verdicts}


def format_verdict(verdict: dict[str, Any]) -> str:
    failing = [c for c in verdict["cells"] if not c["passes"]]
    head = (
        f"rule for defaults: {'NO WORSE' if verdict['passes'] else 'WORSE'} on "
        f"{len(verdict['cells'])} "
        f"cells ({verdict['clips']} clips, paired bootstrap {verdict['resamples']}x, "
        f"{verdict['quantile']:.0%} quantile)"
    )
    worst = failing or verdict["cells"][:3]
    return "\n".join(
        [head]
        + [
            f"  {c['rung']:<14} {c['condition']:<8} {c['convention']:<8} candidate "
            f"{c['candidate_f1']:.3f} reference {c['reference_f1']:.3f} loss {c['loss']:+.3f} "
            f"margin {c['margin']:.3f}{'' if c['passes'] else '  FAILS'}"
            for c in worst
        ]
    )


def read_report(path: Path) -> dict[str, Any]:
    """A ladder's ``--json`` report; a file that is not one is a one-line error."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the ladder report {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ConfigError(
            f"{path} is not JSON: give a report written by eyeblink eval --ladder --json"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("clips"), list):
        raise ConfigError(
            f"{path} is not a ladder report: give one written by eyeblink eval --ladder --json"
        )
    return data


__all__ = [
    "RATES",
    "WAYS",
    "Rung",
    "RungSource",
    "format_table",
    "format_verdict",
    "no_worse",
    "present",
    "read_report",
    "run_ladder",
    "rungs_for",
    "table",
]
