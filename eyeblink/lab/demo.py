"""``eyeblink demo``: a recording with blinks at known times, through the full pipeline.

The recording is rendered by :mod:`eyeblink.lab.synth` from a real face photo that
scikit-image ships (the astronaut), as a 640x480 grayscale 500 FPS MJPG AVI with
head motion, mains flicker and sensor noise. Planted blinks that close the eye
at least :data:`~eyeblink.lab.synth.FULL_BLINK_AMPLITUDE` must be found; a partial
closure may or may not be reported (a detection there is neither a hit nor a
false positive); any other detection is a false one. Onsets must be within
:data:`ONSET_TOLERANCE_FRAMES` frames of the planted onset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eyeblink.config import RunConfig
from eyeblink.lab.synth import PlantedBlink, SynthConfig, SyntheticTruth, write_recording
from eyeblink.signals.blinks import BlinkEvent

#: 8 ms at 500 FPS: the earlier default lid network ``lids_v1`` places the rendered closures' onsets
#: 2-4 frames after the lid starts to move (the default ``lids_v4``, ``lids_v3``, ``lids_v2`` and
#: the face mesh within 1 frame)
ONSET_TOLERANCE_FRAMES = 4


@dataclass(frozen=True)
class DemoScore:
    """Planted vs detected: the pairs, the misses and the false detections."""

    pairs: tuple[tuple[PlantedBlink, BlinkEvent], ...]
    missed: tuple[PlantedBlink, ...]
    false: tuple[BlinkEvent, ...]
    partial_hits: tuple[tuple[PlantedBlink, BlinkEvent], ...]
    fps: float

    def onset_error_frames(self, p: PlantedBlink, d: BlinkEvent) -> float:
        return (d.start_s - p.onset_s) * self.fps

    @property
    def max_onset_error(self) -> float:
        worst = max((abs(self.onset_error_frames(p, d)) for p, d in self.pairs), default=0.0)
        return round(worst, 6)  # timestamps are float seconds: 2 frames must not read as 2.0000001

    @property
    def passed(self) -> bool:
        return not self.missed and not self.false and self.max_onset_error <= ONSET_TOLERANCE_FRAMES


def score_demo(truth: SyntheticTruth, events: list[BlinkEvent]) -> DemoScore:
    """Match detections to planted blinks by time overlap, one to one, in time order."""
    fps = truth.config.fps
    used: set[int] = set()
    pairs: list[tuple[PlantedBlink, BlinkEvent]] = []
    partial: list[tuple[PlantedBlink, BlinkEvent]] = []
    missed: list[PlantedBlink] = []
    for p in truth.blinks:
        cands = [
            i
            for i, e in enumerate(events)
            if i not in used and e.start_s <= p.end_s and e.end_s >= p.onset_s
        ]
        if cands:
            best = min(cands, key=lambda i: abs(events[i].start_s - p.onset_s))
            used.add(best)
            (pairs if p.counts else partial).append((p, events[best]))
        elif p.counts:
            missed.append(p)
    false = tuple(e for i, e in enumerate(events) if i not in used)
    return DemoScore(tuple(pairs), tuple(missed), false, tuple(partial), fps)


def print_report(truth: SyntheticTruth, score: DemoScore) -> None:
    fps = truth.config.fps
    print(
        f"\nplanted vs detected ({truth.config.width}x{truth.config.height}, {fps:g} FPS, "
        f"{truth.config.duration_s:g} s):"
    )
    print(
        f"  {'planted onset':>13} {'end':>7} {'amp':>5}   {'detected onset':>14} {'end':>7} "
        f"{'dur ms':>7} "
        f"{'amp':>5} {'onset err':>10}"
    )
    found = {id(p): d for p, d in score.pairs + score.partial_hits}
    for p in truth.blinks:
        d = found.get(id(p))
        kind = "" if p.counts else "  (partial: optional)"
        if d is None:
            miss = "MISSED" if p.counts else "-"
            print(f"  {p.onset_s:>12.3f}s {p.end_s:>6.3f}s {p.amplitude:>5.2f}   {miss:>14}{kind}")
            continue
        err = score.onset_error_frames(p, d)
        print(
            f"  {p.onset_s:>12.3f}s {p.end_s:>6.3f}s {p.amplitude:>5.2f}   {d.start_s:>13.3f}s "
            f"{d.end_s:>6.3f}s "
            f"{d.duration_ms:>7.0f} {d.amplitude:>5.2f} {err:>+7.1f} fr{kind}"
        )
    for e in score.false:
        print(
            f"  {'FALSE':>13}                  {e.start_s:>13.3f}s {e.end_s:>6.3f}s "
            f"{e.duration_ms:>7.0f} "
            f"{e.amplitude:>5.2f}"
        )
    n_full = sum(p.counts for p in truth.blinks)
    verdict = "PASS" if score.passed else "FAIL"
    print(
        f"\n{verdict}: {len(score.pairs)}/{n_full} planted blinks found, {len(score.false)} false, "
        f"max onset error {score.max_onset_error:.1f} frames (tolerance {ONSET_TOLERANCE_FRAMES})"
    )


def run_demo(
    outdir: Path,
    *,
    duration_s: float = 10.0,
    seed: int = 0,
    progress: Any = None,
    config: RunConfig | None = None,
) -> int:
    """Render, process (with the report: ``demo.report.html``) and score; returns the exit status (0
    = every planted blink found, none false)."""
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.runtime.runner import process_paths

    ensure_output_dir(outdir)
    video = outdir / "demo.avi"
    synth = SynthConfig.demo(duration_s, seed=seed, mjpeg_qscale=4)
    print(
        f"rendering {synth.n_frames} frames of a 640x480 grayscale {synth.fps:g} FPS recording "
        f"with {len(synth.blinks)} planted blinks -> {video}"
    )
    truth = write_recording(video, synth)
    (outdir / "demo.truth.json").write_text(
        truth.to_json(indent=2) + "\n", encoding="utf-8", newline="\n"
    )
    # the run a user gets from `eyeblink process`: the cpu preset, one worker per physical core
    import dataclasses

    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset
    from eyeblink.runtime.procs.parallel import physical_cores
    from eyeblink.runtime.runner import report_writer

    # with the eye crops of each blink, for the report's table (as --report keeps them)
    cfg = dataclasses.replace(config or load_preset(resolve_preset("cpu")), eye_crops=True)
    results, failures = process_paths(
        [video],
        outdir,
        cfg,
        progress=progress,
        workers=physical_cores(),
        then=report_writer(outdir),
    )
    if failures:
        raise failures[0][1]
    res = results[0]
    t = res.summary["timings"]
    print(
        f"processed {res.frames} frames at {t['fps']:.0f} FPS; outputs in {outdir}/demo.*.csv, "
        f"demo.summary.json; report {res.outputs.get('report', outdir / 'demo.report.html')}"
    )
    score = score_demo(truth, res.blinks)
    print_report(truth, score)
    return 0 if score.passed else 1
