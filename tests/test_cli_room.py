"""The command line in one room: only ``eyeblink/cli/`` (and the lab's own commands) read argparse
namespaces; the layers below take frozen configs, and live's eye model is settled once, before
anything loads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eyeblink.cli import build_parser
from eyeblink.cli.live import live_config
from eyeblink.cli.options import run_config_from_args, with_analysis_settings
from eyeblink.config import DetectConfig, LiveConfig, RunConfig
from eyeblink.runtime.choose import AUTO_LANDMARKS, resolve_eye_model

PACKAGE = Path(__file__).resolve().parent.parent / "eyeblink"
#: the rooms that may parse arguments: the command line, and the lab's tools (their commands bring
#: their parsers)
ARGUMENT_ROOMS = ("cli", "lab")


def _below_the_cli() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ARGUMENT_ROOMS
    )


def test_no_module_below_the_command_line_imports_argparse_or_takes_a_namespace() -> None:
    offenders = []
    for path in _below_the_cli():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "argparse" or n.startswith("argparse.") for n in names):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports argparse")
            annotation = node.annotation if isinstance(node, ast.arg) else None
            if annotation is not None and "Namespace" in ast.unparse(annotation):
                offenders.append(
                    f"{path.relative_to(PACKAGE)}:{node.lineno} takes a Namespace ({node.arg})"
                )
    assert offenders == [], offenders
    assert len(_below_the_cli()) > 50  # the walk saw the package (not an empty glob)


def _live(*flags: str) -> tuple[RunConfig, LiveConfig]:
    args = build_parser().parse_args(["live", "tcp://127.0.0.1:5000", "-o", "out", *flags])
    cfg = with_analysis_settings(run_config_from_args(args), args)
    return cfg, live_config(args, cfg)


def test_live_settles_the_eye_model_once_in_its_configs(tmp_path: Path) -> None:
    # the default: auto, chosen when the source's rate is known; the preset's model meanwhile
    cfg, live = _live()
    assert live.landmarks == "auto" and cfg.landmarks.model == "lids"
    cfg, live = _live("--landmarks", "auto")
    assert live.landmarks == "auto" and cfg.landmarks.model == "lids"
    cfg, live = _live("--landmarks", "mesh-ear")  # a model named: the one of both configs
    assert live.landmarks == cfg.landmarks.model == "mesh-ear"
    own = tmp_path / "my.tflite"
    own.write_bytes(b"")
    # a model file of one's own is never swapped for auto's
    cfg, live = _live("--landmark-model", str(own))
    assert live.landmarks == cfg.landmarks.model == "lids" and cfg.landmarks.model_path == str(own)
    for c, lv in (_live(), _live("--landmarks", "mesh")):  # nothing left for the run to reconcile
        assert resolve_eye_model(c, lv) == (c, lv)


def test_the_run_resolves_a_program_built_live_config_into_one_model() -> None:
    cfg = RunConfig()
    assert resolve_eye_model(cfg, LiveConfig(landmarks="mesh")) == (
        cfg.with_overrides("landmarks", model="mesh"),
        LiveConfig(landmarks="mesh"),
    )
    accel = RunConfig(detect=DetectConfig(backend="jax", stage="accelerator"))
    # the device runs the accurate model, whatever the cores
    c, lv = resolve_eye_model(accel, LiveConfig())
    assert lv.landmarks == c.landmarks.model == AUTO_LANDMARKS[0]


@pytest.mark.parametrize("command", ["process", "eval", "batch", "live"])
def test_every_run_command_builds_its_config_from_the_same_flags(command: str) -> None:
    first = {
        "process": ["x.avi", "-o", "out"],
        "eval": ["data"],
        "batch": ["x.avi", "-o", "out"],
        "live": ["0", "-o", "out"],
    }[command]
    args = build_parser().parse_args(
        [command, *first, "--detect-every", "3", "--close-ratio", "0.7", "--mesh-reuse-ms", "0"]
    )
    cfg = run_config_from_args(args)
    assert (cfg.detect.detect_every, cfg.blinks.close_ratio, cfg.landmarks.mesh_reuse_ms) == (
        3,
        0.7,
        0.0,
    )
