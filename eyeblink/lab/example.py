"""``eyeblink example``: the example recording every tutorial starts from, made in one command.

``eyeblink example session.avi`` renders a 4 s, 640x480 grayscale, 500 FPS MJPG recording of a real
face photo (scikit-image's astronaut, :mod:`eyeblink.lab.synth`) with eyelid closures at known times
(0.7, 2.0 and 3.1 s), the same file the documentation's examples are tested on. It needs nothing but
eyeblink itself, so a reader without a camera can follow every page as written. The recording is
written to a temporary name and renamed (:func:`eyeblink.outputs.paths.atomic_path`); an existing
file is refused unless ``--overwrite`` (it may be someone's real recording).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

#: the example recording's length, s (~10 s to render on one core)
EXAMPLE_DURATION_S = 4.0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``example`` subcommand (no heavy import: rendering imports run in :func:`run`)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "example",
        help="write the example recording the tutorials use (a face with blinks at known times)",
        description="Render a 640x480 grayscale 500 FPS MJPG recording of a real face photo "
        "(scikit-image's "
        "astronaut) with blinks at known times: the session.avi every tutorial starts from.",
    )
    p.add_argument(
        "output",
        nargs="?",
        default="session.avi",
        metavar="FILE",
        help="the recording to write, .avi or .mkv (default: %(default)s)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=EXAMPLE_DURATION_S,
        metavar="S",
        help="length in seconds (default: %(default)s; blinks repeat every 10 s)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="random seed of head motion and noise (default: 0)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    return p


def run(args: argparse.Namespace) -> int:
    """Write the example recording; prints one line: the file, its format and the planted blinks."""
    import math

    from eyeblink.errors import ConfigError, OutputError
    from eyeblink.lab.synth import VIDEO_SUFFIXES, SynthConfig, write_recording
    from eyeblink.outputs.paths import atomic_path, check_writable

    out = Path(args.output)
    if out.suffix.lower() not in VIDEO_SUFFIXES:
        raise ConfigError(
            f"example: {out} must end in {' or '.join(VIDEO_SUFFIXES)} (e.g. session.avi)"
        )
    if not math.isfinite(args.duration) or not 0 < args.duration <= 600:
        raise ConfigError(
            f"example: --duration {args.duration} must be more than 0 and at most 600 s"
        )
    if out.exists() and not args.overwrite:
        raise OutputError(
            f"example: {out} exists; give another file name, or --overwrite to replace it"
        )
    check_writable(out, "example FILE")
    cfg = SynthConfig.demo(
        float(args.duration),
        mjpeg_qscale=4,
        seed=int(args.seed),
        codec="mjpeg" if out.suffix.lower() == ".avi" else "ffv1",
    )
    with atomic_path(out) as tmp:
        truth = write_recording(tmp, cfg)
    onsets = ", ".join(f"{b.onset_s:g}" for b in truth.blinks)
    print(
        f"{out}: {cfg.duration_s:g} s, {cfg.width}x{cfg.height} gray, {cfg.fps:g} FPS, "
        f"{len(truth.blinks)} "
        f"blinks planted (onsets {onsets} s)"
    )
    return 0
