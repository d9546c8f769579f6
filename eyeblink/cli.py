"""Command line: ``eyeblink process | demo | eval | report | compare | ...``.

User errors (an :class:`~eyeblink.errors.EyeblinkError`) are printed as one
line, ``eyeblink: error: ...``, with a non-zero exit and no traceback; every
row computed before the failure is already on disk.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from eyeblink import stopping
from eyeblink.api import check_workers, process_workers, progress_factory, run_process
from eyeblink.config import LANDMARK_MODELS, STAGES, run_config_from_args
from eyeblink.errors import INPUT_DAMAGED_EXIT, ConfigError, EyeblinkError, one_line
from eyeblink.version import __version__

DESCRIPTION = """\
Eyeblink detection for high-speed face recordings (e.g. 640x480 grayscale at
500 FPS): BlazeFace face detection, MediaPipe face-mesh eyelids (or dlib's
models, extra dlib), per-frame eye openness (EAR / lid aperture) and blink events.

Outputs per input <stem> (see `eyeblink process --help`):
  <stem>.frames.csv   one row per decoded frame: frame, timestamp_s, face, ear_left, ear_right, ...
  <stem>.blinks.csv   one row per blink: start/end frame and time, duration, amplitude, per-eye fields
  <stem>.summary.json counts, rates, frames without a face, timings, versions, settings
"""


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {v}")
    return v


def _float(text: str, *, zero_ok: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v >= 0 if zero_ok else v > 0):
        raise argparse.ArgumentTypeError(f"expected a number {'>=' if zero_ok else '>'} 0, got {v}")
    return v


def _loader_count(text: str) -> int:
    """``--loaders``: 0 (auto) up to 4 x the CPUs, the bound ``--workers`` has (more is an error, not lowered)."""
    import os

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    cpus = os.cpu_count() or 1
    if not 0 <= v <= 4 * cpus:
        raise argparse.ArgumentTypeError(f"{v} is out of range: use 0 (from the cores and the decode cost) up to "
                                         f"{4 * cpus} (4 x the {cpus} CPUs here)")
    return v


def _number(text: str) -> float:
    """A number as written; its range is checked by the config it goes to (one check for the CLI and the API)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _nonneg_float(text: str) -> float:
    return _float(text, zero_ok=True)


def _positive_float(text: str) -> float:
    return _float(text, zero_ok=False)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("pipeline settings (override the preset)")
    g.add_argument("--pipeline", metavar="PRESET", default="cpu",
                   help="device preset: a name from pipelines/ (cpu) or a path to a TOML file "
                        "(default: %(default)s)")
    g.add_argument("--backend", metavar="NAME", default=None,
                   help="face detector backend: litert (CPU, default), tensorflow, jax, ipu")
    g.add_argument("--face-model", metavar="TFLITE", default=None,
                   help="a BlazeFace-compatible .tflite of your own (default: the shipped short-range model)")
    g.add_argument("--landmarks", choices=LANDMARK_MODELS, default=None,
                   help="eye model: lids (the face mesh places the eyes, the project's lid network measures "
                        "them: the iris network's cost /40; the default), mesh (MediaPipe face mesh + iris-network "
                        "eyelids, Apache-2.0: the lid network's teacher, ~2x the cost), mesh-ear (the face mesh's "
                        "six-point EAR), face68 (dlib's 68-point model, non-commercial) or eye12 (the project's "
                        "12-point dlib eye model) (default from the preset: lids)")
    g.add_argument("--landmark-model", metavar="FILE", default=None,
                   help="a model file of your own for --landmarks: a face-mesh .tflite (mesh, mesh-ear), a lid network "
                        ".tflite (lids; eyeblink train-lids) or a "
                        "dlib shape predictor .dat, 68-point or 12-point (face68, eye12; eyeblink "
                        "train-landmarks) (default: the file shipped for --landmarks)")
    g.add_argument("--mesh-reuse-ms", type=_nonneg_float, default=None, metavar="MS",
                   help="mesh and lids eye models: reuse the face mesh, which places the eye crops, for MS "
                        "milliseconds of a tracked face (a new face box or an eye moving in its crop runs it at "
                        "once); the iris (lid) network measures the lids on every frame (0 = the mesh on every "
                        "frame; default "
                        "from the preset: 20, every 10th frame at 500 FPS)")
    g.add_argument("--stage", choices=STAGES, default=None,
                   help="where detection and the face-mesh eyelids run with --workers > 1: 'fused' into each CPU "
                        "worker, 'accelerator' (one process owns the GPU and runs both on batches of frames; the "
                        "workers only post-process), 'auto' (the preset's; accelerator for the jax and tensorflow "
                        "backends)")
    g.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                   help="threads for the face detector backend (default from the preset: 1)")
    g.add_argument("--detect-every", type=_positive_int, default=None, metavar="N",
                   help="run face detection on every N-th frame and reuse the box in between; the box is "
                        "re-detected early when the eye fit drifts (1 = every frame; default from preset)")
    g.add_argument("--score-threshold", type=float, default=None, metavar="S",
                   help="minimum BlazeFace score for a face, in (0, 1) (default 0.5)")
    g.add_argument("--fps", type=_number, default=None,  # its range: config.LIVE_RANGES, as in the API
                   help="frame rate for image folders (required there); for videos the container's "
                        "timestamps are used and --fps is only the fallback when they are missing")
    g.add_argument("--max-frames", type=_positive_int, default=None, metavar="N",
                   help="stop after N frames of each input")
    g.add_argument("--points", action="store_true",
                   help="also write <stem>.points.csv: each frame's 12 eye points (frame pixels) and the face mesh's "
                        "head pose (yaw, pitch, roll in degrees; mesh, mesh-ear and lids) with the frame it came from, "
                        "as covariates (frames.csv is unchanged)")
    b = p.add_argument_group("blink detection (ratios of EAR to the subject's open-eye baseline)")
    b.add_argument("--close-ratio", type=float, default=None, metavar="R",
                   help="a blink starts below this EAR/baseline ratio (default 0.80)")
    b.add_argument("--open-ratio", type=float, default=None, metavar="R",
                   help="a blink ends once the ratio is back above this (hysteresis; default 0.87)")
    b.add_argument("--min-blink-ms", type=float, default=None, metavar="MS",
                   help="discard blinks shorter than this (default 30 ms)")


def _add_log_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("logging (every process logs through one queue: eyeblink.runtime.logs)")
    g.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
                   help="least severe messages shown (default: %(default)s)")
    g.add_argument("--log-file", metavar="FILE", default=None, help="also append the log to FILE")


class _Parser(argparse.ArgumentParser):
    """argparse with README's one-line errors: ``eyeblink: error: <problem>; <fix>``, exit 2 (no usage text).

    ``add_subparsers`` makes every sub-command's parser of this class too; ``--help`` is unchanged.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"eyeblink: error: {one_line(message)}; see `{self.prog} --help`\n")


#: ``eyeblink report --eyes-video``
EYES_VIDEO_HELP = ("also write OUTDIR/<stem>.eyes.webm, the band of both eyes of every frame (VP9), which the report "
                   "plays in step with its trace (process --report writes it too)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eyeblink", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"eyeblink {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("process", help="process recordings or image folders into EAR and blink files",
                       description="Process video files (AVI/MP4/MKV, any codec FFmpeg decodes) or folders "
                                   "of images (PNG/JPEG/TIFF/BMP, natural sort, --fps required) into "
                                   "<stem>.frames.csv, <stem>.blinks.csv and <stem>.summary.json.")
    p.add_argument("inputs", nargs="+", metavar="VIDEO_OR_DIR", help="recordings or image folders")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="output directory (created)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it is shown on terminals)")
    from eyeblink.runtime.live import add_view_options

    add_view_options(p)  # --view: the page of the input being processed
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="landmark worker processes (default: physical cores); 0 or 1 = single process")
    p.add_argument("--loaders", type=_loader_count, default=0, metavar="N",
                   help="decoder processes that split each file or image folder into frame ranges (with "
                        "--workers > 1; default 0 = from the cores, the decode cost and the eye model's: on 2-3 "
                        "cores two when decoding is most of a frame's work, else one)")
    p.add_argument("--report", action="store_true",
                   help="also write <stem>.report.html (as `eyeblink report` does) after each input, with the eye "
                        "crops of every blink (kept while processing in <stem>.crops.npz)")
    _add_run_options(p)
    _add_log_options(p)
    from eyeblink.outputs.analysis import add_cli_options

    add_cli_options(p)  # conditioning: --trials, --calibration, --plots, --nwb, ...

    d = sub.add_parser("demo", help="generate a 500 FPS recording with planted blinks and process it",
                       description="Render a 640x480 grayscale 500 FPS recording of a real face photo "
                                   "(scikit-image's astronaut) with eyelid closures at known times, run the "
                                   "full pipeline on it and print planted vs detected blinks. Exit status 0 "
                                   "when every planted blink is found with no false one.")
    d.add_argument("-o", "--output", default="eyeblink-demo", metavar="OUTDIR",
                   help="where the recording and results go (default: %(default)s)")
    d.add_argument("--duration", type=_positive_float, default=10.0, metavar="S",
                   help="length of the recording in seconds (default: %(default)s)")
    d.add_argument("--seed", type=int, default=0, help="random seed for head motion and noise")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")

    e = sub.add_parser("eval", help="score blink detection on a .tag-annotated dataset",
                       description="Run the pipeline on every video of a blinkingmatters-style dataset "
                                   "(ZJU, Eyeblink8, Talking Face, Researcher's Night: <video> beside "
                                   "<video>.tag) and print event-level precision, recall, F1 and onset error "
                                   "(frames) per video and overall.")
    e.add_argument("dataset", metavar="DATASET_DIR", help="folder with videos and their .tag files")
    e.add_argument("-o", "--output", default=None, metavar="OUTDIR",
                   help="keep the per-video outputs here (default: a temporary folder)")
    e.add_argument("--json", metavar="FILE", default=None, help="also write the scores as JSON")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--ladder", action="store_true",
                   help="the frame-rate ladder: also score every clip at --rates, each both decimated (every "
                        "k-th frame) and exposed (each frame the mean of the frames of its frame time)")
    e.add_argument("--rates", default=None, metavar="FPS,...",
                   help="the ladder's slower rates (default: 15,10,7.5)")
    e.add_argument("--against", default=None, metavar="LADDER_JSON",
                   help="with --ladder: the rule for defaults against this reference ladder (--json of an "
                        "earlier run): exit 1 when this run is worse on any rung, condition or convention "
                        "beyond the paired bootstrap's noise")
    _add_run_options(e)
    # the lab commands import NumPy and more: after main has installed its stop handlers (eyeblink.stopping)
    from eyeblink.lab import bench, example, longrun, train, train_detector, train_lids

    example.add_parser(sub)
    bench.add_parser(sub)
    longrun.add_parser(sub)
    train.add_parser(sub)
    train_detector.add_parser(sub)
    train_lids.add_parser(sub)
    from eyeblink.runtime import batch as _batch  # no Ray import: the CLI stays light

    _batch.add_parser(sub, _add_run_options, _add_log_options)
    g = sub.add_parser("agree", help="agreement of automatic and corrected blinks, or of two raters",
                       description="Score one scoring of a session's blinks against another: the detector's "
                                   "against the session's <stem>.corrections.json (saved from its report), or two "
                                   "raters' corrections files. Prints event precision, recall, F1, onset and "
                                   "duration differences, and per trial; for a folder, every session with "
                                   "corrections and all of them pooled.")
    g.add_argument("session", metavar="OUTDIR/STEM_OR_OUTDIR",
                   help="a processed session (e.g. results/session1), or a folder of sessions with corrections")
    g.add_argument("--corrections", nargs="+", metavar="JSON", default=(),
                   help="one file: the detector against it (instead of <stem>.corrections.json); two files: the "
                        "second rater against the first (the reference)")
    g.add_argument("--reference", metavar="EAF", default=None,
                   help="score against a human rater's tier of this ELAN file instead (with --tier); the detector, "
                        "or the one --corrections file, is scored")
    g.add_argument("--tier", metavar="NAME", default=None, help="the tier of --reference to score against")
    g.add_argument("--json", metavar="FILE", default=None, help="also write the figures to this JSON file")
    x = sub.add_parser("export-eaf", help="write a session's blinks as an ELAN (.eaf) file linked to the recording",
                       description="Write OUTDIR/<stem>.eaf: the session's blinks as ELAN tiers (blinks-automatic, "
                                   "blinks-corrected when the session has corrections, left-eye, right-eye), time "
                                   "slots in milliseconds, the recording linked, so ELAN opens the video with them.")
    x.add_argument("session", metavar="OUTDIR/STEM", help="a processed session (e.g. results/session1)")
    x.add_argument("-o", "--output", metavar="EAF", default=None, help="where to write (default: OUTDIR/<stem>.eaf)")
    m = sub.add_parser("import-eaf", help="bring a rater's ELAN tier into a session as its corrections",
                       description="Read one tier of an ELAN file (a rater's blinks) and write the session's "
                                   "<stem>.corrections.json from it: the detector's blinks the tier has are accepted "
                                   "or retimed to its frames, the others rejected, the tier's other annotations "
                                   "added. eyeblink report (or process) then applies it: blinks.csv holds the "
                                   "tier's events, frame for frame.")
    m.add_argument("eaf", metavar="FILE.eaf", help="the ELAN file")
    m.add_argument("session", metavar="OUTDIR/STEM", help="the processed session of the same recording")
    m.add_argument("--tier", metavar="NAME", required=True, help="the tier that holds the rater's blinks")
    m.add_argument("-o", "--output", metavar="JSON", default=None,
                   help="where to write (default: OUTDIR/<stem>.corrections.json)")
    r = sub.add_parser("report", help="write a self-contained HTML report of a processed session",
                       description="Read OUTDIR/<stem>.frames.csv, .blinks.csv, .summary.json (and .trials.csv) "
                                   "and write OUTDIR/<stem>.report.html: one file that opens offline in a browser, "
                                   "with the zoomable EAR/closure trace, blinks, frames without a face, dropped "
                                   "frames, trials, a sortable blink table and the summary.")
    r.add_argument("session", metavar="OUTDIR/STEM", help="a processed session: its output folder and stem "
                                                          "(e.g. results/session1), or any of its output files")
    r.add_argument("-o", "--output", metavar="HTML", default=None,
                   help="where to write the report (default: OUTDIR/<stem>.report.html)")
    r.add_argument("--eyes-video", action="store_true", help=EYES_VIDEO_HELP)
    ov = r.add_argument_group("annotated video (--overlay)")
    ov.add_argument("--overlay", metavar="MP4", default=None,
                    help="also re-encode the recording (H.264) with the face box, the eye points (fitted again by "
                         "the session's eye model), EAR per eye, closure and blinks drawn on every frame")
    ov.add_argument("--video", metavar="VIDEO", default=None,
                    help="the recording, when it is no longer where summary.json says (--overlay, --eyes-video)")
    ov.add_argument("--start", type=float, default=None, metavar="S", help="first second of the overlay video")
    ov.add_argument("--end", type=float, default=None, metavar="S", help="last second of the overlay video")
    ov.add_argument("--fps", type=_positive_float, default=None, metavar="FPS",
                    help="playback rate of the overlay video, e.g. 30 for slow motion (default: the recording's)")
    c = sub.add_parser("compare", help="two sessions of the same recording side by side (checking a rerun)",
                       description="Compare two processed sessions of the same recording (a rerun on another "
                                   "machine, another backend, another release): the frames both have, the largest "
                                   "openness, closure and face-box differences with their frames, the blinks "
                                   "matched one to one by overlapping frames and every blink only one session has. "
                                   "Exit status 0 when the two are identical or within --tolerance, 1 when not.")
    c.add_argument("a", metavar="A", help="a processed session: OUTDIR/<stem> (e.g. results/session1) or one of "
                                          "its output files")
    c.add_argument("b", metavar="B", help="the session to compare it with, the same way")
    c.add_argument("--tolerance", type=_nonneg_float, default=None, metavar="EAR",
                   help="largest openness (EAR) difference that still counts as the same (default 0.001: what "
                        "different CPUs and backends give)")
    c.add_argument("--json", metavar="FILE", default=None, help="also write the comparison as JSON")
    from eyeblink.runtime import live as _live  # no heavy import: PyAV, pypylon, prometheus load when a run starts

    _live.add_parser(sub, _add_run_options, _add_log_options)
    return parser


def _progress_factory(disabled: bool) -> Any:
    return progress_factory(not disabled)


# the checks and the worker count `process` shares with the Python API (eyeblink.api)
_process_workers = process_workers


def cmd_process(args: argparse.Namespace) -> int:
    from eyeblink.outputs.analysis import config_from_args, options_from_args

    if args.stage == "accelerator" and args.workers in (0, 1):  # not silently run in one process
        raise ConfigError(f"--stage accelerator needs --workers 2 or more (one process runs the networks on batches, "
                          f"the workers post-process); --workers {args.workers} runs everything in one process: use "
                          f"--stage fused, or more workers")
    cfg = config_from_args(run_config_from_args(args), args)
    from eyeblink.runtime.live import open_file_view

    # the same function as eyeblink.process(): the same files for the same settings
    with open_file_view(args) as view:  # --view: the page of the input being processed
        results, failures = run_process([Path(p) for p in args.inputs], Path(args.output), cfg,
                                        progress=_progress_factory(args.no_progress), workers=args.workers,
                                        loaders=args.loaders, analysis=options_from_args(args), report=args.report,
                                        view=view)
    for r in results:
        s = r.summary
        print(f"{r.stem}: {r.frames} frames, face in {r.faces}, {len(r.blinks)} blinks, "
              f"{(s['timings'].get('fps') or 0):.0f} FPS -> {r.outputs['frames'].parent}")
        if s.get("trials"):
            tr = s["trials"]
            pct = tr["percent_cr"]
            print(f"{r.stem}: {tr['trials']} trials, {tr['scored_trials']} with a valid baseline, CR in "
                  f"{tr['cr_trials']} ({'-' if pct is None else f'{pct:.0f}%'})")
    for r in results:
        if "eyes_video" in r.outputs:
            print(f"{r.stem}: eyes' video {r.outputs['eyes_video']}")
        if "report" in r.outputs:
            print(f"{r.stem}: report {r.outputs['report']}")
    from eyeblink.runtime.pipeline import damage_warning

    damaged = [r for r in results if (r.summary.get("damaged_packets") or {}).get("count")]
    for r in damaged:
        print(f"eyeblink: warning: {damage_warning(r.stem, r.summary['damaged_packets']['packets'])}",
              file=sys.stderr)
    for _path, err in failures:
        print(f"eyeblink: error: {one_line(err)}", file=sys.stderr)
    if failures:
        return failures[0][1].exit_code
    return INPUT_DAMAGED_EXIT if damaged else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from eyeblink.lab.demo import run_demo

    return run_demo(Path(args.output), duration_s=args.duration, seed=args.seed,
                    progress=_progress_factory(args.no_progress))


def cmd_eval(args: argparse.Namespace) -> int:
    from eyeblink.lab.evaluate import run_eval

    cfg = run_config_from_args(args)
    if args.ladder or args.rates or args.against:
        return cmd_ladder(args, cfg)
    return run_eval(Path(args.dataset), cfg, outdir=Path(args.output) if args.output else None,
                    json_path=Path(args.json) if args.json else None,
                    progress=_progress_factory(args.no_progress))


def cmd_ladder(args: argparse.Namespace, cfg: Any) -> int:
    """``eval --ladder``: the frame-rate ladder, and with ``--against`` the rule for defaults (exit 1: worse)."""
    from eyeblink.lab import ladder

    if not args.ladder:
        raise ConfigError("--rates and --against belong to the frame-rate ladder: add --ladder")
    rates = ladder.RATES
    if args.rates:
        try:
            rates = tuple(float(x) for x in args.rates.split(","))
        except ValueError:
            raise ConfigError(f"--rates {args.rates!r}: give frame rates separated by commas, e.g. 15,10,7.5") from None
        if not all(math.isfinite(r) and r > 0 for r in rates):
            raise ConfigError(f"--rates {args.rates!r}: every rate must be a positive number of frames a second")
    reference = ladder.read_report(Path(args.against)) if args.against else None
    report = ladder.run_ladder(Path(args.dataset), cfg, rates=rates,
                               outdir=Path(args.output) if args.output else None,
                               json_path=Path(args.json) if args.json else None,
                               progress=_progress_factory(args.no_progress))
    if reference is None:
        return 0
    verdict = ladder.no_worse(report, reference)
    print(ladder.format_verdict(verdict))
    return 0 if verdict["passes"] else 1


def cmd_compare(args: argparse.Namespace) -> int:
    """``eyeblink compare A B``: 0 when the sessions are identical or within the tolerance, 1 when not."""
    import json

    from eyeblink.outputs.compare import DEFAULT_TOLERANCE, compare_sessions, format_comparison
    from eyeblink.outputs.paths import OutputPlan, write_text
    from eyeblink.outputs.report import split_stem

    plan = OutputPlan()
    for session, what in ((args.a, "session A"), (args.b, "session B")):
        outdir, stem = split_stem(session)
        for suffix in ("frames.csv", "blinks.csv", "summary.json"):
            plan.read(outdir / f"{stem}.{suffix}", f"{what}'s {suffix}")
    plan.write(args.json, "--json").check()  # never over a session's own files
    result = compare_sessions(args.a, args.b,
                              tolerance=DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance)
    print(format_comparison(result))
    if args.json:
        write_text(args.json, json.dumps(result.as_dict(), indent=2) + "\n", "--json")
    return 1 if result.verdict == "different" else 0


def cmd_report(args: argparse.Namespace) -> int:
    from eyeblink.outputs.report import load_report_data, report_plan, split_stem, write_report

    given = [f"--{k}" for k in ("video", "start", "end", "fps") if getattr(args, k) is not None]
    if args.eyes_video:
        given = [g for g in given if g != "--video"]  # the recording, for the eyes' video too
    if given and not args.overlay:
        raise ConfigError(f"{'/'.join(given)} only {'shape' if len(given) > 1 else 'shapes'} the --overlay video; "
                          "add --overlay OUT.mp4, or leave "
                          f"{'them' if len(given) > 1 else 'it'} out")
    data = load_report_data(args.session)  # a damaged session stops here, before anything is written
    # no output is an input or another output (-o rec.frames.csv, --overlay rec.avi, --overlay X --video X)
    report_plan(args.session, args.output, overlay=args.overlay, video=args.video, data=data).check()
    if args.eyes_video:  # before the page, which links it when it is there
        from eyeblink.outputs.eyevideo import write_eyes_video

        eyes = write_eyes_video(args.session, args.video)
        print(f"eyes' video: {eyes} ({eyes.stat().st_size / 1e6:.1f} MB)")
    path = write_report(args.session, args.output, data=data)
    print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if args.overlay:
        from eyeblink.outputs.overlay import write_overlay
        from eyeblink.runtime.runner import eye_point_fitter

        outdir, stem = split_stem(args.session)
        n = write_overlay(data, outdir / f"{stem}.frames.csv", Path(args.overlay),
                          video=Path(args.video) if args.video else None, start_s=args.start, end_s=args.end,
                          fps=args.fps, eye_points=eye_point_fitter(data.summary))
        print(f"overlay: {args.overlay} ({n} frames)")
    return 0


def _run_batch(args: argparse.Namespace) -> int:
    from eyeblink.runtime.batch import run

    return run(args)


def cmd_agree(args: argparse.Namespace) -> int:
    from eyeblink.outputs.agreement import agree_sessions, format_text, write_json

    if args.tier is not None and args.reference is None:
        raise ConfigError("--tier names a tier of the --reference ELAN file; give --reference FILE.eaf too")
    result = agree_sessions(args.session, args.corrections, reference=args.reference, tier=args.tier)
    print(format_text(result))
    if args.json:
        write_json(result, Path(args.json))
    return 0


def cmd_export_eaf(args: argparse.Namespace) -> int:
    from eyeblink.outputs.elan import write_eaf

    print(f"ELAN file: {write_eaf(args.session, args.output)}")
    return 0


def cmd_import_eaf(args: argparse.Namespace) -> int:
    from eyeblink.outputs.elan import import_eaf

    path = import_eaf(args.eaf, args.tier, args.session, args.output)
    print(f"corrections: {path} (tier {args.tier} of {args.eaf}); apply them with eyeblink report {args.session}")
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    from eyeblink.runtime.live import run

    check_workers(args.workers)  # before any model loads or process forks (0 = physical cores)
    if args.landmarks == "auto":  # live's default (settled once the source's rate is known): not a config value
        args.landmarks = None
    from eyeblink.outputs.analysis import config_from_args

    return int(run(args, config_from_args(run_config_from_args(args), args)))


def main(argv: Sequence[str] | None = None) -> int:
    """The ``eyeblink`` command; returns its exit status.

    Stops (:mod:`eyeblink.stopping`): from this first line to the last, SIGINT and SIGTERM end any command in
    order (drain, flush, a complete ``summary.json`` with ``status: interrupted``), exit status 130, one line on
    stderr, never a traceback. Called with ``argv`` (inside another program, tests), the previous signal handlers
    are put back on return; called as the program (``argv`` None), a stop after the return is only recorded.
    """
    restore = stopping.install()
    code = stopping.STOPPED_EXIT
    try:
        try:
            code = _main(argv)
        finally:
            _leave(argv, restore)
    except KeyboardInterrupt:  # the first stop arrived while main was returning: it still counts
        _leave(argv, restore)  # no second raise: the handler raises once (eyeblink.stopping)
        code = stopping.STOPPED_EXIT
    return code


def _leave(argv: Sequence[str] | None, restore: Any) -> None:
    if argv is None:
        stopping.finished()
    else:
        restore()


def _main(argv: Sequence[str] | None) -> int:
    logs = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        from eyeblink.lab import bench, example, longrun, train, train_detector, train_lids

        handler = {"process": cmd_process, "demo": cmd_demo, "example": example.run, "eval": cmd_eval,
                   "bench": bench.run,
                   "eval-long": longrun.run, "train-landmarks": train.run, "train-detector": train_detector.run,
                   "train-lids": train_lids.run, "batch": _run_batch, "live": cmd_live,
                   "report": cmd_report, "agree": cmd_agree, "compare": cmd_compare,
                   "export-eaf": cmd_export_eaf, "import-eaf": cmd_import_eaf}[args.command]
        if getattr(args, "log_level", None) is not None:
            from eyeblink.runtime.logs import setup_logging

            if args.log_file is not None:  # appended to: never a recording or another file of the command
                from eyeblink.outputs.paths import check_log_file

                check_log_file(args.log_file, vars(args))

            logs = setup_logging(args.log_level, args.log_file)
        if args.command in ("process", "batch", "live"):
            from eyeblink.runtime.shm import remove_stale_rings

            remove_stale_rings()  # the shared-memory rings of earlier runs that were killed outright
        code = handler(args)
        stopping.check()  # a stop whose KeyboardInterrupt was swallowed after the last check point
        return code
    except EyeblinkError as exc:
        print(f"eyeblink: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM, at any moment (eyeblink.stopping)
        print(f"eyeblink: {stopping.message(exc)}", file=sys.stderr)
        return stopping.STOPPED_EXIT
    except BrokenPipeError:
        return 1
    except Exception as exc:
        if stopping.received() is None:
            raise
        # the stop's KeyboardInterrupt turned into another error on its way (a C extension's import says
        # "initialization failed"): the stop is what ended the command
        print(f"eyeblink: {stopping.message(exc)}", file=sys.stderr)
        return stopping.STOPPED_EXIT
    finally:
        if logs is not None:
            logs.close()


__all__ = ["ConfigError", "build_parser", "main"]
