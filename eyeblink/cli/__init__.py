"""Command line: ``eyeblink process | demo | eval | report | compare | ...``, the one room that
reads arguments.

A module per command family builds its sub-commands' parsers and turns their flags into the frozen
configs the layers below take (:mod:`eyeblink.cli.options`: the shared flags and the run's config;
:mod:`~eyeblink.cli.process`: process, demo, eval; :mod:`~eyeblink.cli.live`;
:mod:`~eyeblink.cli.batch`; :mod:`~eyeblink.cli.review`: report, compare, agree, ELAN). The lab's
commands (bench, train-*, example, eval-long) bring their own parsers (:mod:`eyeblink.lab`).

User errors (an :class:`~eyeblink.errors.EyeblinkError`) are printed as one
line, ``eyeblink: error: ...``, with a non-zero exit and no traceback; every
row computed before the failure is already on disk.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from eyeblink import stopping
from eyeblink.api import process_workers
from eyeblink.cli import batch, live, process, review
from eyeblink.cli.options import _Parser
from eyeblink.errors import ConfigError, EyeblinkError, one_line
from eyeblink.version import __version__

DESCRIPTION = """\
Eyeblink detection for high-speed face recordings (e.g. 640x480 grayscale at
500 FPS): BlazeFace face detection, MediaPipe face-mesh eyelids (or dlib's
models, extra dlib), per-frame eye openness (EAR / lid aperture) and blink events.

Outputs per input <stem> (see `eyeblink process --help`):
  <stem>.frames.csv   one row per decoded frame: frame, timestamp_s, face, ear_left, ...
  <stem>.blinks.csv   one row per blink: start/end frame and time, duration, amplitude, ...
  <stem>.summary.json counts, rates, frames without a face, timings, versions, settings
"""

# the checks and the worker count `process` shares with the Python API (eyeblink.api)
_process_workers = process_workers


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="eyeblink",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"eyeblink {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    process.add_parsers(sub)  # process, demo, eval
    # the lab commands import NumPy and more: after main has installed its stop handlers
    # (eyeblink.stopping)
    from eyeblink.lab import bench, example, longrun, train, train_detector, train_lids

    example.add_parser(sub)
    bench.add_parser(sub)
    longrun.add_parser(sub)
    train.add_parser(sub)
    train_detector.add_parser(sub)
    train_lids.add_parser(sub)
    batch.add_parser(sub)  # no Ray import: the CLI stays light
    review.add_parsers(sub)  # agree, export-eaf, import-eaf, report, compare
    review.add_region_parser(sub)
    live.add_parser(sub)  # no heavy import: PyAV, pypylon, prometheus load when a run starts
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``eyeblink`` command; returns its exit status.

    Stops (:mod:`eyeblink.stopping`): from this first line to the last, SIGINT and SIGTERM end any
    command in order (drain, flush, a complete ``summary.json`` with ``status: interrupted``), exit
    status 130, one line on stderr, never a traceback. Called with ``argv`` (inside another program,
    tests), the previous signal handlers are put back on return; called as the program (``argv``
    None), a stop after the return is only recorded.
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

        handler = {
            "process": process.cmd_process,
            "demo": process.cmd_demo,
            "example": example.run,
            "eval": process.cmd_eval,
            "bench": bench.run,
            "eval-long": longrun.run,
            "train-landmarks": train.run,
            "train-detector": train_detector.run,
            "train-lids": train_lids.run,
            "batch": batch.cmd_batch,
            "live": live.cmd_live,
            "report": review.cmd_report,
            "agree": review.cmd_agree,
            "compare": review.cmd_compare,
            "export-eaf": review.cmd_export_eaf,
            "import-eaf": review.cmd_import_eaf,
            "region": review.cmd_region,
        }[args.command]
        # --start-method: checked before anything runs (the
        if getattr(args, "start_method", None) is not None:
            # command hands it to the run's settings)
            from eyeblink.runtime.procs.processes import resolve_start_method

            resolve_start_method(args.start_method)
        if getattr(args, "log_level", None) is not None:
            from eyeblink.runtime.procs.logs import setup_logging

            # appended to: never a recording or another file of the command
            if args.log_file is not None:
                from eyeblink.outputs.paths import check_log_file

                check_log_file(args.log_file, vars(args))

            logs = setup_logging(args.log_level, args.log_file)
        if args.command in ("process", "batch", "live"):
            from eyeblink.runtime.procs.shm import remove_stale_rings

            # the shared-memory rings of earlier runs that were killed outright
            remove_stale_rings()
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
        # the stop's KeyboardInterrupt turned into another error on its way (a C extension's import
        # says "initialization failed"): the stop is what ended the command
        print(f"eyeblink: {stopping.message(exc)}", file=sys.stderr)
        return stopping.STOPPED_EXIT
    finally:
        if logs is not None:
            logs.close()


__all__ = ["ConfigError", "build_parser", "main"]
