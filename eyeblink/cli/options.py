"""The options several commands share, their value types, and the frozen configs built from them.

The command-line room is the only place that reads an :class:`argparse.Namespace`: below it,
``runtime/``, ``outputs/`` and :mod:`eyeblink.config` take typed configs
(:class:`~eyeblink.config.RunConfig`, :class:`~eyeblink.config.LiveConfig`,
:class:`~eyeblink.outputs.analysis.AnalysisOptions`).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from eyeblink.config import LANDMARK_MODELS, SPECIES, STAGES, RunConfig
from eyeblink.errors import ConfigError, one_line
from eyeblink.landmarks import EYE_MODELS, tunables
from eyeblink.outputs.analysis import AnalysisOptions

if TYPE_CHECKING:
    from eyeblink.landmarks.region import EyeRegion


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


def add_start_method(p: argparse.ArgumentParser) -> None:
    """``--start-method``: how a run's processes start (:mod:`eyeblink.runtime.procs.processes`)."""
    from eyeblink.runtime.procs.processes import START_METHOD_ENV, START_METHODS

    p.add_argument(
        "--start-method",
        choices=START_METHODS,
        default=None,
        help="how the run's processes start: 'spawn' (a fresh interpreter each; the only way on "
        "Windows, "
        "the default on macOS), 'forkserver', 'fork' (Linux, macOS) or 'auto' (fork on Linux, "
        "spawn "
        f"elsewhere); default: the environment variable {START_METHOD_ENV}, else auto",
    )


def _loader_count(text: str) -> int:
    """``--loaders``: 0 (auto) up to 4 x the CPUs, the bound ``--workers`` has (more is an error,
    not lowered)."""
    import os

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    cpus = os.cpu_count() or 1
    if not 0 <= v <= 4 * cpus:
        raise argparse.ArgumentTypeError(
            f"{v} is out of range: use 0 (from the cores and the decode cost) up to "
            f"{4 * cpus} (4 x the {cpus} CPUs here)"
        )
    return v


def _number(text: str) -> float:
    """A number as written; its range is checked by the config it goes to (one check for the CLI
    and the API)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _nonneg_float(text: str) -> float:
    return _float(text, zero_ok=True)


def _positive_float(text: str) -> float:
    return _float(text, zero_ok=False)


def _segment(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        if not sep:
            raise ValueError
        seg = (float(start), float(end))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected START_S:END_S in seconds (e.g. 0:5), got {text!r}"
        ) from None
    if not 0 <= seg[0] < seg[1]:
        raise argparse.ArgumentTypeError(f"expected 0 <= START_S < END_S, got {text!r}")
    return seg


def _eye_roi(text: str) -> EyeRegion:
    """``--eye-roi X,Y,W,H``: the region value (:meth:`EyeRegion.parse`, the one place the text
    is read)."""
    from eyeblink.landmarks.region import EyeRegion

    try:
        return EyeRegion.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    """argparse with README's one-line errors: ``eyeblink: error: <problem>; <fix>``, exit 2 (no
    usage text).

    ``add_subparsers`` makes every sub-command's parser of this class too; ``--help`` is unchanged.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"eyeblink: error: {one_line(message)}; see `{self.prog} --help`\n")


# ------------------------------------------------------------------------------------------ the
# run's settings


def eye_region_flags() -> tuple[tuple[str, dict[str, Any], str], ...]:
    """The flags of a recording of one eye: (flag, argparse's type or choices and metavar, help);
    each region measure's own settings as its registry entry declares them now
    (:class:`eyeblink.landmarks.Setting`)."""
    own = tuple(
        (
            s.flag,
            {"choices": s.choices}
            if s.choices is not None
            else {"type": _number, "metavar": s.metavar},
            s.help,
        )
        for owner, s in tunables().values()
        if EYE_MODELS[owner].region
    )
    return (
        (
            "--eye-roi",
            {"type": _eye_roi, "metavar": "X,Y,W,H"},
            "a recording of one eye (a head-fixed animal, a human eye close-up): measure the lid "
            "in "
            "this region of every frame (pixels of the frame: left, top, width, height) with no "
            "face "
            "detection; `eyeblink region INPUT` draws a region on the first frame to check it",
        ),
        *own,
    )


def add_run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("pipeline settings (override the preset)")
    g.add_argument(
        "--pipeline",
        metavar="PRESET",
        default="cpu",
        help="device preset: a name from pipelines/ (cpu) or a path to a TOML file "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--backend",
        metavar="NAME",
        default=None,
        help="face detector backend: litert (CPU, default), tensorflow, jax, ipu",
    )
    g.add_argument(
        "--face-model",
        metavar="TFLITE",
        default=None,
        help="a BlazeFace-compatible .tflite of your own (default: the shipped short-range model)",
    )
    g.add_argument(
        "--landmarks",
        choices=LANDMARK_MODELS,
        default=None,
        help="eye model: lids (the face mesh places the eyes, the project's lid network measures "
        "them: the iris network's cost /40; the default), mesh (MediaPipe face mesh + iris-network "
        "eyelids, Apache-2.0: the lid network's teacher, ~2x the cost), mesh-ear (the face mesh's "
        "six-point EAR), face68 (dlib's 68-point model, non-commercial) or eye12 (the project's "
        "12-point dlib eye model) (default from the preset: lids); with --eye-roi: area (the eye's "
        "visible share of the region, any species; the default there) or contour (MediaPipe's iris "
        "network on the region: a human eye close-up)",
    )
    for flag, kind, text in eye_region_flags():
        g.add_argument(flag, default=None, help=text, **kind)
    g.add_argument(
        "--landmark-model",
        metavar="FILE",
        default=None,
        help="a model file of your own for --landmarks: a face-mesh .tflite (mesh, mesh-ear), a "
        "lid network "
        ".tflite (lids; eyeblink train-lids) or a "
        "dlib shape predictor .dat, 68-point or 12-point (face68, eye12; eyeblink "
        "train-landmarks) (default: the file shipped for --landmarks)",
    )
    g.add_argument(
        "--mesh-reuse-ms",
        type=_nonneg_float,
        default=None,
        metavar="MS",
        help="mesh and lids eye models: reuse the face mesh, which places the eye crops, for MS "
        "milliseconds of a tracked face (a new face box or an eye moving in its crop runs it at "
        "once); the iris (lid) network measures the lids on every frame (0 = the mesh on every "
        "frame; default "
        "from the preset: 20, every 10th frame at 500 FPS)",
    )
    g.add_argument(
        "--stage",
        choices=STAGES,
        default=None,
        help="where detection and the face-mesh eyelids run with --workers > 1: 'fused' into each "
        "CPU "
        "worker, 'accelerator' (one process owns the GPU and runs both on batches of frames; the "
        "workers only post-process), 'auto' (the preset's; accelerator for the jax and tensorflow "
        "backends)",
    )
    g.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="threads for the face detector backend (default from the preset: 1)",
    )
    g.add_argument(
        "--detect-every",
        type=_positive_int,
        default=None,
        metavar="N",
        help="detect the face on every N-th frame at any rate, reusing the box in between "
        "(re-detected "
        "early on drift; 1 = every frame); default: the preset's every 10th frame, at most every "
        "50 ms (every 25th at 500 FPS)",
    )
    g.add_argument(
        "--score-threshold",
        type=float,
        default=None,
        metavar="S",
        help="minimum BlazeFace score for a face, in (0, 1) (default 0.5)",
    )
    # its range: config.LIVE_RANGES, as in the API
    g.add_argument(
        "--fps",
        type=_number,
        default=None,
        help="frame rate for image folders (required there); for videos the container's "
        "timestamps are used and --fps is only the fallback when they are missing",
    )
    g.add_argument(
        "--max-frames",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop after N frames of each input",
    )
    g.add_argument(
        "--points",
        action="store_true",
        help="also write <stem>.points.csv: each frame's 12 eye points (frame pixels) and the "
        "face mesh's "
        "head pose (yaw, pitch, roll in degrees; mesh, mesh-ear and lids) with the frame it came "
        "from, "
        "as covariates (frames.csv is unchanged)",
    )
    b = p.add_argument_group("blink detection (ratios of EAR to the subject's open-eye baseline)")
    b.add_argument(
        "--close-ratio",
        type=float,
        default=None,
        metavar="R",
        help="a blink starts below this EAR/baseline ratio (default 0.80)",
    )
    b.add_argument(
        "--open-ratio",
        type=float,
        default=None,
        metavar="R",
        help="a blink ends once the ratio is back above this (hysteresis; default 0.87)",
    )
    b.add_argument(
        "--min-blink-ms",
        type=float,
        default=None,
        metavar="MS",
        help="discard blinks shorter than this (default 30 ms)",
    )
    b.add_argument(
        "--species",
        choices=SPECIES,
        default=None,
        help="whose blink-rate norms the session's warnings use: human (1-60 a minute), or mouse, "
        "rat, "
        "rabbit, animal (0-60: an animal may go minutes without a blink); default auto: human for "
        "a "
        "face, animal with --eye-roi (name human for a human eye close-up)",
    )


def add_log_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "logging (every process logs through one queue: eyeblink.runtime.procs.logs)"
    )
    g.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="least severe messages shown (default: %(default)s)",
    )
    g.add_argument("--log-file", metavar="FILE", default=None, help="also append the log to FILE")


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """The run's config from parsed flags: the ``--pipeline`` preset, then the flags that override
    it (``eyeblink process``, ``eval``, ``live`` and ``batch`` share these flags). ``--landmarks
    auto`` (live only) is no model: the preset's stays until the live run picks one
    (:func:`eyeblink.cli.live.live_configs`)."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    cfg = load_preset(resolve_preset(args.pipeline))
    # first: a region picks the region's model
    cfg = cfg.with_overrides("eye", roi=getattr(args, "eye_roi", None))
    model = None if args.landmarks == "auto" else args.landmarks
    cfg = cfg.with_overrides(
        "landmarks",
        model=model,
        model_path=args.landmark_model,
        mesh_reuse_ms=getattr(args, "mesh_reuse_ms", None),
        **{name: getattr(args, s.keyword, None) for name, (_, s) in tunables().items()},
    )
    cfg = cfg.with_overrides(
        "detect",
        backend=args.backend,
        model_path=args.face_model,
        num_threads=args.threads,
        detect_every=args.detect_every,
        score_threshold=args.score_threshold,
        stage=getattr(args, "stage", None),
    )
    # an eye model's own flags given to a run of another model, by that model
    given: dict[str, list[str]] = {}
    # (a setting unset unless given, None: the config tells it given and checks)
    for owner, s in tunables().values():
        if (
            not s.optional
            and getattr(args, s.keyword, None) is not None
            and owner != cfg.landmarks.model
            and not cfg.landmarks.region_auto
        ):
            given.setdefault(owner, []).append(s.flag)
    for owner, flags in given.items():
        raise ConfigError(
            f"{' and '.join(flags)} set the {owner} measure of an eye region; with --landmarks "
            f"{cfg.landmarks.model} leave {'them' if len(flags) > 1 else 'it'} out (or use "
            "--eye-roi "
            f"with --landmarks {owner})"
        )
    cfg = cfg.with_overrides(
        "blinks",
        close_ratio=args.close_ratio,
        open_ratio=args.open_ratio,
        min_duration_ms=args.min_blink_ms,
        species=getattr(args, "species", None),
    )
    return replace(
        cfg, fps=args.fps, max_frames=args.max_frames, points=bool(getattr(args, "points", False))
    )


# ------------------------------------------------------------------------------------------
# conditioning


def add_analysis_options(p: argparse.ArgumentParser) -> None:
    """The ``process`` (and ``live``) options for conditioning sessions."""
    g = p.add_argument_group("conditioning: eyelid closure (FEC), trials, CRs, plots, NWB")
    g.add_argument(
        "--trials",
        metavar="CSV_OR_DIR",
        default=None,
        help="trials file: one row per trial with cs_onset_s (or _ms, _frame), optional "
        "us_onset_*, "
        "cs_duration_*, us_duration_*, trial, trial_type, cs_type, us_type; or a folder with "
        "<stem>.csv per input. Writes <stem>.trials.csv and <stem>.traces.csv",
    )
    g.add_argument(
        "--sync-column",
        metavar="NAME",
        default=None,
        help="read --trials as a per-sample sync CSV (time column timestamp_s, time_ms or frame) "
        "and "
        "take CS onsets from the rising edges of this TTL column",
    )
    g.add_argument(
        "--us-sync-column",
        metavar="NAME",
        default=None,
        help="with --sync-column: take US onsets from the rising edges of this column",
    )
    g.add_argument(
        "--calibration",
        metavar="START_S:END_S",
        default=None,
        type=_segment,
        help="calibrate full eyelid closure (FEC = 1) on this segment of the recording, e.g. "
        "US-alone "
        "puffs (default: the session's largest blinks and URs)",
    )
    g.add_argument(
        "--cr-threshold",
        metavar="FEC",
        type=float,
        default=None,
        help="a CR is FEC at least this far above the pre-CS baseline in the CR window (default "
        "0.1)",
    )
    g.add_argument(
        "--block-size",
        metavar="N",
        type=int,
        default=None,
        help="trials per block for the average-CR plot and the block column (default 10)",
    )
    g.add_argument(
        "--plots",
        action="store_true",
        help="also write PNG plots: EAR/FEC trace, per-trial closure heat map, mean CR per block "
        "(needs the plots extra: matplotlib)",
    )
    g.add_argument(
        "--nwb",
        action="store_true",
        help="also write <stem>.nwb: EAR, FEC, blinks and trials with CR metrics (needs the nwb "
        "extra)",
    )


def with_analysis_settings(cfg: RunConfig, args: argparse.Namespace) -> RunConfig:
    """Apply the conditioning flags to the config tree (``None`` = keep the preset's value)."""
    cfg = cfg.with_overrides("closure", calibration_s=getattr(args, "calibration", None))
    return cfg.with_overrides(
        "trials",
        cr_threshold=getattr(args, "cr_threshold", None),
        block_size=getattr(args, "block_size", None),
    )


def analysed_run_config(args: argparse.Namespace) -> RunConfig:
    """The run's config of a command that also analyses (``process``, ``live``): the preset and the
    flags, with the conditioning flags applied."""
    return with_analysis_settings(run_config_from_args(args), args)


def analysis_options(args: argparse.Namespace) -> AnalysisOptions:
    """What to do after each input (trials, plots, NWB) from the conditioning flags."""
    trials = getattr(args, "trials", None)
    return AnalysisOptions(
        trials=Path(trials) if trials else None,
        sync_column=getattr(args, "sync_column", None),
        us_sync_column=getattr(args, "us_sync_column", None),
        plots=bool(getattr(args, "plots", False)),
        nwb=bool(getattr(args, "nwb", False)),
    )


# ------------------------------------------------------------------------------------------ the
# browser view


def add_view_options(p: Any) -> None:
    """``--view``, ``--view-port``, ``--view-host`` (live and process)."""
    v = p.add_argument_group("the browser view (docs: guides/live)")
    v.add_argument(
        "--view",
        action="store_true",
        help="serve the session's page while it runs: the newest frame with the face box, the "
        "closure "
        "trace of both eyes with the blinks, the gate's state, rate, drops and latency (URL "
        "printed "
        "at start; any number of tabs; a slow or closed browser never holds up a frame or a row)",
    )
    v.add_argument(
        "--view-port",
        type=int,
        default=None,
        metavar="PORT",
        help="the page's port (implies --view; default: any free port)",
    )
    v.add_argument(
        "--view-host",
        default=None,
        metavar="ADDR",
        help="serve the page on ADDR instead of 127.0.0.1 (implies --view), e.g. 0.0.0.0; the URL "
        "then "
        "carries a random token, required by every request",
    )


def view_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~eyeblink.config.LiveConfig` fields of ``--view``, ``--view-port`` and
    ``--view-host``."""
    on = bool(args.view or args.view_port is not None or args.view_host is not None)
    return {
        "view": on,
        "view_port": args.view_port or 0,
        "view_host": args.view_host or "127.0.0.1",
    }
