"""A live run's config: requested, resolved once when the source connects (``auto`` replaced by the
chosen eye model), kept to the end; the cost ladder changes the analyzer's state, never its config;
a preset's ``[live]`` table gives the run's priority, which the command line's flag overrides."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eyeblink.config import LiveConfig, LivePreset, RunConfig, load_preset
from eyeblink.errors import ConfigError
from eyeblink.runtime.choose import AUTO_LANDMARKS, ResolvedConfig, resolve_run_config
from eyeblink.runtime.costs import HostCosts

REPO = Path(__file__).resolve().parents[1]
HOST = {"cpu": "test", "class": "avx2", "vector": ["avx2"]}


def _costs() -> HostCosts:
    """lids cheap with its mesh reused, mesh-ear cheaper still at 500 FPS: a ladder of several
    rungs."""
    return HostCosts(
        detect_ms=1.7,
        fit_ms={"lids": 1.9, "mesh-ear": 0.1},
        reuse_ms={"lids": 0.15, "mesh-ear": 0.1},
        host=HOST,
    )


# --------------------------------------------------------------------------- resolving: one
# function, one store


def test_auto_resolves_into_a_new_frozen_config_and_the_request_is_untouched() -> None:
    requested = load_preset(REPO / "pipelines" / "cpu.toml")
    choice = resolve_run_config(requested, auto=True, fps=500.0, cores=2, costs=_costs())
    assert choice.config is not requested and choice.config.landmarks.model in AUTO_LANDMARKS
    # only the eye model differs; the request is the same object, unchanged (frozen)
    assert dataclasses.replace(choice.config, landmarks=requested.landmarks) == requested
    assert requested == load_preset(REPO / "pipelines" / "cpu.toml")
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.config.landmarks.model = "mesh"  # type: ignore[misc]
    fixed = resolve_run_config(requested, auto=False, fps=500.0, cores=2, costs=_costs())
    assert (
        fixed.config is requested and fixed.reason is not None and fixed.reason.startswith("lids")
    )


class _Holder:
    cfg = ResolvedConfig()

    def __init__(self, requested: RunConfig) -> None:
        self.requested = requested


def test_the_resolved_config_is_stored_once() -> None:
    requested = RunConfig()
    run = _Holder(requested)
    # before the resolution: the request
    assert run.cfg is requested and not _Holder.cfg.is_set(run)
    resolved = resolve_run_config(requested, auto=True, fps=500.0, cores=2, costs=_costs()).config
    run.cfg = resolved
    assert run.cfg is resolved and _Holder.cfg.is_set(run)
    with pytest.raises(RuntimeError, match="resolved once"):
        run.cfg = resolved  # a second store, even of the same config, is a programming error
    assert run.cfg is resolved


# --------------------------------------------------------------------------- the ladder: state, not
# config


def test_a_ladder_step_changes_the_analyzers_state_not_its_config() -> None:
    """The real run's rung table and worker hook: stepping down swaps the eye model, lengthens the
    mesh reuse and spaces the keyframes (fewer detections on the same real frames), while
    ``analyzer.cfg`` stays the run's."""
    from eyeblink.frame.analyzer import FrameAnalyzer
    from eyeblink.lab.loopback import render_loop_frames
    from eyeblink.runtime.live.pipeline import LivePipeline, _LiveRun
    from eyeblink.runtime.pipeline import Frame, build_detector
    from eyeblink.sources.live import open_live_source

    pipe = LivePipeline(
        load_preset(REPO / "pipelines" / "cpu.toml"), LiveConfig(workers=1, landmarks="auto")
    )
    # never connected: only the run's tables
    source = open_live_source("tcp://127.0.0.1:9", connect=False)
    run = _LiveRun(pipe, source)
    run.costs, run.fps = _costs(), 200.0
    run._choose(source)
    cfg = run.cfg
    assert cfg is not run.requested and cfg.landmarks.model == "lids"
    assert run.steps is not None and len(run.steps.rungs) >= 3, run.steps
    with build_detector(cfg) as detector:
        analyzer = FrameAnalyzer(cfg, detector, pipe.fitters[cfg.landmarks.model])
        analyzer.segment_frames = None
        # 30 FPS: every keyframe on its own frame (no lag)
        frames = render_loop_frames(80, fps=30.0)

        def detections(first: int) -> int:
            rows = [
                analyzer.analyze(Frame(first + i, (first + i) / 30.0, f))
                for i, f in enumerate(frames[:40])
            ]
            assert all(r.face is not None for r in rows)
            return sum(r.detected for r in rows)

        run._on_batch(analyzer, pipe.fitters)  # level 0: nothing to change
        assert analyzer.detect_every == cfg.detect.detect_every == 10
        before = detections(0)
        bottom = len(run.steps.rungs) - 1
        run.level.value = bottom
        run._on_batch(analyzer, pipe.fitters)
        rung = run.steps.rungs[bottom]
        # the keyframe rung doubles the keyframes' spacing at this rate: 10 frames (detect_min_ms:
        # 50 ms at 200 FPS)
        assert cfg.detect.keyframe_frames(200.0) == 10
        assert analyzer.detect_every == rung.detect_every == 20
        assert analyzer.fitter is pipe.fitters[rung.model]
        if rung.model == "lids":
            assert (
                analyzer.fitter.mesh_reuse_s
                == rung.mesh_reuse_ms / 1000.0
                > cfg.landmarks.mesh_reuse_ms / 1000.0
            )
        after = detections(40)
        assert after < before, (before, after)
    assert analyzer.cfg is cfg and run.cfg is cfg  # the same object: no config was replaced
    assert cfg.detect.detect_every == 10 and cfg.landmarks.mesh_reuse_ms == 20.0
    with pytest.raises(RuntimeError):
        run.cfg = cfg


# --------------------------------------------------------------------------- end to end over the
# loopback sender


def _sender(port: int, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.loopback",
            "--port",
            str(port),
            "--distinct",
            "50",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


def test_a_live_auto_run_keeps_the_config_resolved_at_connection(tmp_path: Path) -> None:
    """``landmarks="auto"`` over the loopback sender: before the connection the run reads the
    request, from the connection on one resolved config (``auto`` replaced by the chosen model) that
    every written row's sink sees, the summary's settings report, and a second store refuses."""
    from conftest import free_port

    from eyeblink.runtime.live.pipeline import LivePipeline
    from eyeblink.sources.live import open_live_source

    requested = load_preset(REPO / "pipelines" / "cpu.toml")
    pipe = LivePipeline(requested, LiveConfig(workers=1, landmarks="auto", overload="block"))
    assert pipe.cfg is requested
    port = free_port()
    sender = _sender(port, "--fps", "200", "--stop-after", "300")
    seen: dict[str, Any] = {"at_start": None, "written": set()}

    def started(run: Any) -> None:
        seen["at_start"] = run.cfg
        judge = run._judge

        # the parent, after each write: which config the run holds
        def observed(rows: np.ndarray) -> None:
            seen["written"].add(id(run.cfg))
            seen["resolved"] = run.cfg
            judge(rows)

        run._judge = observed

    try:
        with open_live_source(f"tcp://127.0.0.1:{port}", name="cam", connect=False) as source:
            result, run = pipe.run(
                source, tmp_path / "out", metrics=False, signals=False, started=started
            )
    finally:
        sender.kill()
    s = result.summary
    assert s["status"] == "ok" and result.frames == 300, s.get("warnings")
    assert seen["at_start"] is requested  # before the connection: the request
    # one config for every row
    assert seen["written"] == {id(run.cfg)} and seen["resolved"] is run.cfg
    assert run.requested is requested and pipe.cfg is requested
    chosen = s["live"]["landmarks_model"]
    # what was asked, what was chosen
    assert s["live"]["landmarks"] == "auto" and chosen in AUTO_LANDMARKS
    assert run.cfg.landmarks.model == chosen
    assert run.cfg == dataclasses.replace(
        requested, landmarks=dataclasses.replace(requested.landmarks, model=chosen)
    )
    settings = json.loads(json.dumps(run.cfg.to_dict()))
    assert s["settings"] == settings  # the summary reports the resolved config
    with pytest.raises(RuntimeError, match="resolved once"):
        run.cfg = requested


# --------------------------------------------------------------------------- the preset's [live]
# priority


def _preset(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rig.toml"
    path.write_text(body, encoding="utf-8")
    return path


def _live_args(*argv: str) -> Any:
    from eyeblink.cli import build_parser

    return build_parser().parse_args(["live", "tcp://127.0.0.1:9", "-o", "out", *argv])


def test_a_presets_live_priority_reaches_the_live_config(tmp_path: Path) -> None:
    from eyeblink.cli import options as shared
    from eyeblink.cli.live import live_config

    rig = _preset(tmp_path, '[live]\npriority = "high"\n')
    assert load_preset(rig).live == LivePreset(priority="high")
    args = _live_args("--pipeline", str(rig))
    assert live_config(args, shared.analysed_run_config(args)).priority == "high"
    args = _live_args("--pipeline", str(rig), "--priority", "normal")  # the flag, given, wins
    assert live_config(args, shared.analysed_run_config(args)).priority == "normal"
    args = _live_args()  # the cpu preset: normal
    assert live_config(args, shared.analysed_run_config(args)).priority == "normal"


def test_a_presets_live_priority_is_what_the_live_run_asks_for(tmp_path: Path) -> None:
    """``eyeblink live --pipeline rig.toml`` with ``[live] priority = "high"``, no flag: the run
    asks for high (the summary's ``live.priority``; applied or refused by the OS, the run goes on).
    """
    from conftest import free_port, live_to_end, start_sender

    text = (REPO / "pipelines" / "cpu.toml").read_text(encoding="utf-8")
    assert 'priority = "normal"' in text
    rig = _preset(tmp_path, text.replace('priority = "normal"', 'priority = "high"'))
    port = free_port()
    sender = start_sender(port, "--fps", "100", "--stop-after", "150")
    live = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{port}",
            "-o",
            str(tmp_path / "out"),
            "--name",
            "cam",
            "--pipeline",
            str(rig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    err = live_to_end(live, sender, timeout=180)
    s = json.loads((tmp_path / "out" / "cam.summary.json").read_text())
    assert s["live"]["priority"]["asked"] == "high", err
    assert s["settings"]["live"] == {"priority": "high"} and s["frames"] == 150


def test_the_apis_priority_takes_the_preset_unless_given(tmp_path: Path) -> None:
    import eyeblink

    rig = _preset(tmp_path, '[live]\npriority = "realtime"\n')
    assert eyeblink.live("tcp://127.0.0.1:9", pipeline=str(rig)).live_config.priority == "realtime"
    assert (
        eyeblink.live("tcp://127.0.0.1:9", pipeline=str(rig), priority="high").live_config.priority
        == "high"
    )


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('[live]\npriority = "turbo"\n', "normal, high, realtime"),
        ("[live]\npriority = 10\n", "normal, high, realtime"),
        ('[live]\nnice = "high"\n', "valid keys: ['priority']"),
    ],
)
def test_a_bad_live_priority_in_a_preset_is_one_line_exit_2(
    tmp_path: Path, body: str, words: str
) -> None:
    rig = _preset(tmp_path, body)
    with pytest.raises(ConfigError, match="priority"):
        load_preset(rig)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            "tcp://127.0.0.1:9",
            "-o",
            str(tmp_path / "o"),
            "--pipeline",
            str(rig),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr, proc.stderr
