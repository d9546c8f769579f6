"""``eyeblink process``, ``demo`` and ``eval``: recordings in, the output files out."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from eyeblink.api import process_workers, progress_factory, run_process
from eyeblink.cli.options import (
    _loader_count,
    _positive_float,
    add_analysis_options,
    add_log_options,
    add_run_options,
    add_start_method,
    add_view_options,
    analysed_run_config,
    analysis_options,
    run_config_from_args,
    view_settings,
)
from eyeblink.errors import INPUT_DAMAGED_EXIT, ConfigError, one_line


def add_parsers(sub: Any) -> None:
    """The ``process``, ``demo`` and ``eval`` subcommands."""
    p = sub.add_parser(
        "process",
        help="process recordings or image folders into EAR and blink files",
        description="Process video files (AVI/MP4/MKV, any codec FFmpeg decodes) or folders "
        "of images (PNG/JPEG/TIFF/BMP, natural sort, --fps required) into "
        "<stem>.frames.csv, <stem>.blinks.csv and <stem>.summary.json.",
    )
    p.add_argument("inputs", nargs="+", metavar="VIDEO_OR_DIR", help="recordings or image folders")
    p.add_argument(
        "-o", "--output", required=True, metavar="OUTDIR", help="output directory (created)"
    )
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (it is shown on terminals)"
    )
    add_view_options(p)  # --view: the page of the input being processed
    add_start_method(p)
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="landmark worker processes (default: physical cores); 0 or 1 = single process",
    )
    p.add_argument(
        "--loaders",
        type=_loader_count,
        default=0,
        metavar="N",
        help="decoder processes that split each file or image folder into frame ranges (with "
        "--workers > 1; default 0 = from the cores, the decode cost and the eye model's: on 2-3 "
        "cores two when decoding is most of a frame's work, else one)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="also write <stem>.report.html (as `eyeblink report` does) after each input, with "
        "the eye "
        "crops of every blink (kept while processing in <stem>.crops.npz)",
    )
    add_run_options(p)
    add_log_options(p)
    add_analysis_options(p)  # conditioning: --trials, --calibration, --plots, --nwb, ...

    d = sub.add_parser(
        "demo",
        help="generate a 500 FPS recording with planted blinks and process it",
        description="Render a 640x480 grayscale 500 FPS recording of a real face photo "
        "(scikit-image's astronaut) with eyelid closures at known times, run the "
        "full pipeline on it and print planted vs detected blinks. Exit status 0 "
        "when every planted blink is found with no false one.",
    )
    d.add_argument(
        "-o",
        "--output",
        default="eyeblink-demo",
        metavar="OUTDIR",
        help="where the recording and results go (default: %(default)s)",
    )
    d.add_argument(
        "--duration",
        type=_positive_float,
        default=10.0,
        metavar="S",
        help="length of the recording in seconds (default: %(default)s)",
    )
    d.add_argument("--seed", type=int, default=0, help="random seed for head motion and noise")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")

    e = sub.add_parser(
        "eval",
        help="score blink detection on a .tag-annotated dataset",
        description="Run the pipeline on every video of a blinkingmatters-style dataset "
        "(ZJU, Eyeblink8, Talking Face, Researcher's Night: <video> beside "
        "<video>.tag) and print event-level precision, recall, F1 and onset error "
        "(frames) per video and overall.",
    )
    e.add_argument("dataset", metavar="DATASET_DIR", help="folder with videos and their .tag files")
    e.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="OUTDIR",
        help="keep the per-video outputs here (default: a temporary folder)",
    )
    e.add_argument("--json", metavar="FILE", default=None, help="also write the scores as JSON")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument(
        "--ladder",
        action="store_true",
        help="the frame-rate ladder: also score every clip at --rates, each both decimated (every "
        "k-th frame) and exposed (each frame the mean of the frames of its frame time)",
    )
    e.add_argument(
        "--rates",
        default=None,
        metavar="FPS,...",
        help="the ladder's slower rates (default: 15,10,7.5)",
    )
    e.add_argument(
        "--against",
        default=None,
        metavar="LADDER_JSON",
        help="with --ladder: the rule for defaults against this reference ladder (--json of an "
        "earlier run): exit 1 when this run is worse on any rung, condition or convention "
        "beyond the paired bootstrap's noise",
    )
    add_run_options(e)


def _progress_factory(disabled: bool) -> Any:
    return progress_factory(not disabled)


# the checks and the worker count `process` shares with the Python API (eyeblink.api)
_process_workers = process_workers


def cmd_process(args: argparse.Namespace) -> int:
    if args.stage == "accelerator" and args.workers in (0, 1):  # not silently run in one process
        raise ConfigError(
            "--stage accelerator needs --workers 2 or more (one process runs the networks on "
            "batches, "
            f"the workers post-process); --workers {args.workers} runs everything in one process: "
            "use "
            f"--stage fused, or more workers"
        )
    cfg = analysed_run_config(args)
    from eyeblink.runtime.live.pipeline import open_file_view

    # the same function as eyeblink.process(): the same files for the same settings
    # --view: the page of the input being processed
    with open_file_view(**view_settings(args)) as view:
        results, failures = run_process(
            [Path(p) for p in args.inputs],
            Path(args.output),
            cfg,
            progress=_progress_factory(args.no_progress),
            workers=args.workers,
            loaders=args.loaders,
            analysis=analysis_options(args),
            report=args.report,
            view=view,
            start_method=args.start_method,
        )
    from eyeblink.signals.plausibility import count_words, kind_counts

    for r in results:
        s = r.summary
        print(
            f"{r.stem}: {r.frames} frames, face in {r.faces}, "
            f"{count_words(*kind_counts(r.blinks))}, "
            f"{(s['timings'].get('fps') or 0):.0f} FPS -> {r.outputs['frames'].parent}"
        )
        if s.get("eye_measure"):
            print(f"{r.stem}: eye measure {s['eye_measure']['why']}")
        if s.get("trials"):
            tr = s["trials"]
            pct = tr["percent_cr"]
            print(
                f"{r.stem}: {tr['trials']} trials, {tr['scored_trials']} with a valid baseline, "
                "CR in "
                f"{tr['cr_trials']} ({'-' if pct is None else f'{pct:.0f}%'})"
            )
    for r in results:
        if "eyes_video" in r.outputs:
            print(f"{r.stem}: eyes' video {r.outputs['eyes_video']}")
        if "report" in r.outputs:
            print(f"{r.stem}: report {r.outputs['report']}")
    from eyeblink.runtime.summary import damage_warning

    damaged = [r for r in results if (r.summary.get("damaged_packets") or {}).get("count")]
    for r in damaged:
        print(
            f"eyeblink: warning: {damage_warning(r.stem, r.summary['damaged_packets']['packets'])}",
            file=sys.stderr,
        )
    for _path, err in failures:
        print(f"eyeblink: error: {one_line(err)}", file=sys.stderr)
    if failures:
        return failures[0][1].exit_code
    return INPUT_DAMAGED_EXIT if damaged else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from eyeblink.lab.demo import run_demo

    return run_demo(
        Path(args.output),
        duration_s=args.duration,
        seed=args.seed,
        progress=_progress_factory(args.no_progress),
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from eyeblink.lab.evaluate import run_eval

    cfg = run_config_from_args(args)
    if args.ladder or args.rates or args.against:
        return cmd_ladder(args, cfg)
    return run_eval(
        Path(args.dataset),
        cfg,
        outdir=Path(args.output) if args.output else None,
        json_path=Path(args.json) if args.json else None,
        progress=_progress_factory(args.no_progress),
    )


def cmd_ladder(args: argparse.Namespace, cfg: Any) -> int:
    """``eval --ladder``: the frame-rate ladder, and with ``--against`` the rule for defaults
    (exit 1: worse)."""
    from eyeblink.lab import ladder

    if not args.ladder:
        raise ConfigError("--rates and --against belong to the frame-rate ladder: add --ladder")
    rates: tuple[float, ...] = ladder.RATES
    if args.rates:
        try:
            rates = tuple(float(x) for x in args.rates.split(","))
        except ValueError:
            raise ConfigError(
                f"--rates {args.rates!r}: give frame rates separated by commas, e.g. 15,10,7.5"
            ) from None
        if not all(math.isfinite(r) and r > 0 for r in rates):
            raise ConfigError(
                f"--rates {args.rates!r}: every rate must be a positive number of frames a second"
            )
    reference = ladder.read_report(Path(args.against)) if args.against else None
    report = ladder.run_ladder(
        Path(args.dataset),
        cfg,
        rates=rates,
        outdir=Path(args.output) if args.output else None,
        json_path=Path(args.json) if args.json else None,
        progress=_progress_factory(args.no_progress),
    )
    if reference is None:
        return 0
    verdict = ladder.no_worse(report, reference)
    print(ladder.format_verdict(verdict))
    return 0 if verdict["passes"] else 1
