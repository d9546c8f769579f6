"""``eyeblink batch``: its options, and the batch's lines (the Ray driver is
:mod:`eyeblink.runtime.batch.driver`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from eyeblink.cli.options import (
    add_log_options,
    add_run_options,
    add_start_method,
    run_config_from_args,
)


def add_parser(sub: Any) -> None:
    """The ``batch`` subcommand (no Ray import here: ``eyeblink --help`` stays light)."""
    p = sub.add_parser(
        "batch",
        help="process a whole archive on a Ray cluster (resumable, chunked, retried)",
        description="Process many recordings on Ray: one task per video (long videos in time "
        "chunks, joined by "
        "one ordered pass), each running the multiprocess pipeline on its node's cores. Writes "
        "exactly "
        "the files of `eyeblink process` per video into OUTDIR plus a manifest, "
        "eyeblink-batch.jsonl: "
        "a rerun skips the videos it lists as done. Inputs and OUTDIR must be on a filesystem "
        "every node sees. Exit status 0 when every video is done, 5 when every video is done but "
        "some were "
        "damaged (undecodable packets skipped), 2 when a video failed.",
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="PATTERN_OR_LIST",
        help="videos, folders (their videos, recursively), glob patterns ('**' recurses; quote "
        "them) or @LIST files with one path per line",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="OUTDIR", help="output directory (created)"
    )
    p.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help="join this Ray cluster (e.g. auto, or ray://head:10001); default: start a local one",
    )
    p.add_argument(
        "--local-cpus",
        type=int,
        default=None,
        metavar="N",
        help="CPUs of the local Ray instance (default: all of this machine's)",
    )
    p.add_argument(
        "--cpus-per-task",
        type=int,
        default=2,
        metavar="N",
        help="CPUs per task = detect+landmark workers of its pipeline (default: %(default)s)",
    )
    p.add_argument(
        "--gpus-per-task",
        type=float,
        default=0.0,
        metavar="G",
        help="GPUs per task; > 0 runs a GPU backend (jax, else tensorflow, as the gpu preset) on "
        "GPU nodes "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--chunk-s",
        type=float,
        default=300.0,
        metavar="S",
        help="split videos longer than this into chunks of ~S seconds; 0 = never (default: "
        "%(default)s)",
    )
    p.add_argument(
        "--overlap-s",
        type=float,
        default=None,
        metavar="S",
        help="ignored: chunks no longer overlap (one ordered pass over a video's chunks finds its "
        "blinks); "
        "accepted so that older command lines still run",
    )
    p.add_argument(
        "--max-retries",
        type=int,
        default=2,
        metavar="N",
        help="retries of a task after a system failure (crash, lost node); user errors such as a "
        "corrupt video are never retried (default: %(default)s)",
    )
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (it is shown on terminals)"
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="also write OUTDIR/<stem>.report.html for each video done (as `eyeblink report` "
        "does), "
        "with eye crops of every blink (videos skipped as done before keep their files)",
    )
    add_run_options(p)
    add_start_method(p)  # how each task's processes start on its node
    add_log_options(p)  # --log-level info also shows Ray's own notices


def cmd_batch(args: argparse.Namespace) -> int:
    """``eyeblink batch``: returns the exit status (0 all done, else the first failure's)."""
    from eyeblink.errors import INPUT_DAMAGED_EXIT, warn
    from eyeblink.runtime.batch.driver import MANIFEST_NAME, BatchConfig, run_batch

    cfg = run_config_from_args(args)
    if args.report:  # the workers keep each blink's eye crops for the report
        cfg = replace(cfg, eye_crops=True)
    bc = BatchConfig(
        cpus_per_task=args.cpus_per_task,
        gpus_per_task=args.gpus_per_task,
        chunk_s=args.chunk_s,
        overlap_s=args.overlap_s,
        max_retries=args.max_retries,
        address=args.address,
        local_cpus=args.local_cpus,
        progress=not args.no_progress,
        start_method=args.start_method,
    )

    def show(rec: dict[str, Any]) -> None:
        if rec["status"] == "done":
            from eyeblink.signals.plausibility import count_words

            words = count_words(rec["blinks"], rec.get("prolonged_closures"))
            print(f"{rec['stem']}: done, {rec['frames']} frames, {words}", flush=True)
            if rec.get("damaged_packets"):
                warn(
                    f"{rec['stem']}: {rec['damaged_packets']} damaged packet(s) skipped "
                    "(undecodable: a gap in "
                    "frames.csv; the rows after the damage are complete); "
                    f"{rec['stem']}.summary.json lists them "
                    "under damaged_packets"
                )
            if args.report:
                from eyeblink.outputs.report import write_report
                from eyeblink.runtime.runner import add_output

                html = write_report(Path(args.output) / rec["stem"])
                add_output(Path(args.output) / f"{rec['stem']}.summary.json", "report", html)
                print(f"{rec['stem']}: report {html}", flush=True)
        else:
            print(f"eyeblink: error: {rec['stem']}: {rec['error']}", file=sys.stderr, flush=True)

    rep = run_batch(args.inputs, args.output, cfg, bc, on_video=show)
    print(
        f"batch: {len(rep.done)} done, {len(rep.failed)} failed, {len(rep.skipped)} skipped (done "
        "before); "
        f"{rep.frames} frames in {rep.wall_s:.1f} s ({rep.fps:.0f} FPS); manifest "
        f"{Path(args.output) / MANIFEST_NAME}"
    )
    if rep.failed:
        return 2
    return INPUT_DAMAGED_EXIT if rep.damaged else 0
