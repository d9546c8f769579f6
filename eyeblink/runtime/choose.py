"""What a live run settles before its first frame: its config (the eye model) and how many workers
get frames.

A run's config is the requested one with ``auto`` resolved, once, before the run, into a new frozen
:class:`~eyeblink.config.RunConfig` that the run keeps. :func:`resolve_eye_model` makes the two
configs name one eye model before any model loads (or leaves ``auto``). For a live run, "before the
run" is the source's connection: its rate is known only then, and no frame is analysed before it.
:func:`resolve_run_config` takes the requested config and what is known at connection (the rate, the
cores, the costs measured on this machine before the capture, :mod:`eyeblink.runtime.costs`) and
returns the run's config, ``auto`` replaced by the model :func:`choose_landmarks` picks; the run
stores it once (:class:`ResolvedConfig`: a second store raises). What the cost ladder changes during
the run (the eye model in use, mesh reuse, ``detect_every``) is state of the analyzer and its eye
model, never a replaced config (:mod:`eyeblink.runtime.live.adapt`). :func:`choose_dealt_workers`
decides how many of the forked workers get frames.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from eyeblink.config import LiveConfig, RunConfig
    from eyeblink.runtime.costs import HostCosts

__all__ = [
    "AUTO_LANDMARKS",
    "LIVE_MAX_LOAD",
    "LIVE_ONE_WORKER_LOAD",
    "ResolvedConfig",
    "RunChoice",
    "choose_dealt_workers",
    "choose_landmarks",
    "resolve_eye_model",
    "resolve_run_config",
]

#: the live pipeline keeps its cores at most this busy (30% headroom): above it, queueing makes the
#: latency tail grow fast
LIVE_MAX_LOAD = 0.7
#: with the default ``--workers``, all frames go to one worker while its networks need at most this
#: share of a core at the source's rate (see :func:`choose_dealt_workers`)
LIVE_ONE_WORKER_LOAD = 0.6
#: ``--landmarks auto`` candidates, first choice first (Apache-2.0 models only): ``lids`` is as
#: accurate as ``mesh`` on people it never saw at about half the cost; ``mesh-ear`` is the fallback
#: where ``lids`` cannot hold the rate (its face mesh on every frame is cheaper than the lids' mesh
#: only at low rates).
AUTO_LANDMARKS = ("lids", "mesh-ear")


def choose_landmarks(
    fps: float | None,
    cores: int,
    mesh_reuse_ms: float = 20.0,
    *,
    costs: HostCosts | None = None,
    detect_every: int = 10,
    candidates: tuple[str, ...] = AUTO_LANDMARKS,
) -> tuple[str, str, bool]:
    """``--landmarks auto``: the first of ``candidates`` that ``cores`` run at ``fps`` in real time.

    Real time needs ``fps x frame_ms`` of CPU at most ``LIVE_MAX_LOAD`` of the cores, ``frame_ms``
    being the per-frame cost on this machine (:meth:`HostCosts.frame_ms`: the fit with its face mesh
    reused for ``mesh_reuse_ms``, BlazeFace every ``detect_every`` frames, the decode and a fixed
    overhead) from ``costs`` measured before the capture
    (:func:`eyeblink.runtime.costs.measure_costs`), or the registry's constants when there are none.
    When none fits, the cheapest at this rate, and the reason says that it cannot hold the rate. An
    unknown rate counts as 500 FPS. Returns (model, reason, holds the rate).
    """
    from eyeblink.runtime.costs import registry_costs

    rate = fps if fps and fps > 0 else 500.0
    if costs is None:
        costs = registry_costs(candidates, "not measured")
    usable = [m for m in candidates if m in costs.fit_ms] or list(candidates)

    def need(model: str) -> float:
        return costs.cores_needed(
            model,
            rate,
            mesh_reuse_ms=mesh_reuse_ms,
            detect_every=detect_every,
            max_load=LIVE_MAX_LOAD,
        )

    where = costs.describe(usable)
    for model in usable:
        if need(model) <= cores:
            return (
                model,
                (
                    f"{model}: {rate:g} FPS needs ~{need(model):.1f} of the {cores} cores at most "
                    f"{LIVE_MAX_LOAD:.0%} busy; {where}"
                ),
                True,
            )
    model = min(usable, key=need)
    return (
        model,
        (
            f"{model} CANNOT hold {rate:g} FPS here: it needs ~{need(model):.1f} cores at most "
            f"{LIVE_MAX_LOAD:.0%} busy, this machine has {cores}; frames will be dropped (lower "
            "the "
            f"camera's rate, or use a machine with more cores); {where}"
        ),
        False,
    )


def choose_dealt_workers(
    costs: HostCosts | None,
    model: str,
    fps: float | None,
    *,
    workers: int,
    asked: int,
    mesh_reuse_ms: float,
    detect_every: int,
) -> tuple[int, str]:
    """How many of the ``workers`` forked get frames, and why.

    Each worker tracks the face over its own frames, so each runs its own keyframes and its own
    face-mesh refits (every ``mesh_reuse_ms`` of capture time): two workers run the face mesh twice
    as often as one, and on two cores four busy processes (sink, loader, two workers) wait for each
    other's cores. So with the default (``asked`` 0) all frames go to one worker while its networks,
    measured on this machine before the capture (:class:`~eyeblink.runtime.costs.HostCosts`: the fit
    with its mesh reused, a keyframe every ``detect_every`` frames), need at most
    :data:`LIVE_ONE_WORKER_LOAD` of a core at ``fps``; otherwise to all. An explicit ``--workers N``
    is obeyed. Returns (workers dealt, reason)."""
    if asked > 0 or workers <= 1:
        return (
            workers,
            f"{workers} worker{'s' if workers > 1 else ''} "
            f"({'--workers' if asked else 'one core'})",
        )
    if costs is None or not costs.measured or model not in costs.fit_ms:
        return workers, f"{workers} workers (costs not measured)"
    rate = fps if fps and fps > 0 else 500.0
    load = (
        rate
        * costs.networks_ms(model, rate, mesh_reuse_ms=mesh_reuse_ms, detect_every=detect_every)
        / 1000.0
    )
    if load <= LIVE_ONE_WORKER_LOAD:
        return 1, (
            f"1 worker of {workers}: {model}'s networks need ~{load:.2f} of a core at {rate:g} FPS "
            f"(<= {LIVE_ONE_WORKER_LOAD:g}); one tracker refits the face mesh half as often as two"
        )
    return workers, (
        f"{workers} workers: {model}'s networks need ~{load:.2f} of a core at {rate:g} FPS "
        f"(> {LIVE_ONE_WORKER_LOAD:g})"
    )


class RunChoice(NamedTuple):
    """:func:`resolve_run_config`'s answer: the run's config, why its eye model (None: nothing to
    say), and whether that model holds the rate."""

    config: RunConfig
    reason: str | None
    holds: bool


def resolve_run_config(
    requested: RunConfig,
    *,
    auto: bool,
    fps: float | None,
    cores: int,
    costs: HostCosts | None,
    check: bool = True,
) -> RunChoice:
    """The run's config: ``requested`` with ``auto`` resolved, from what is known at connection.

    ``auto`` (``--landmarks auto``, :data:`AUTO_LANDMARKS`): a new frozen config naming the model
    :func:`choose_landmarks` picks for ``fps`` on ``cores`` from ``costs`` (measured before the
    capture). Otherwise ``requested`` itself; with ``check`` and measured ``costs``, the reason says
    whether the user's model holds the rate. A live run calls this once, when its source connects
    (its rate is known only then, and no frame is analysed before it): that is "before the run" for
    live, and the run keeps the answer's config to its end.
    """
    lm = requested.landmarks
    # detect_every, or more frames at a fast camera (detect_min_ms)
    every = requested.detect.keyframe_frames(fps)
    if auto:
        model, reason, holds = choose_landmarks(
            fps, cores, lm.mesh_reuse_ms, costs=costs, detect_every=every
        )
        return RunChoice(replace(requested, landmarks=replace(lm, model=model)), reason, holds)
    if check and costs is not None:
        _, reason, holds = choose_landmarks(
            fps, cores, lm.mesh_reuse_ms, costs=costs, detect_every=every, candidates=(lm.model,)
        )
        return RunChoice(requested, reason, holds)
    return RunChoice(requested, None, True)


class ResolvedConfig:
    """A run's ``cfg``: stored once (a second store is a programming error: :class:`RuntimeError`),
    read by everything of the run after it. Until it is stored (a live run, before its source
    connects), it reads as the owner's ``requested`` config: the start-up reads only what the
    resolution does not change (the rate asked, the frame limit, the blink detector's and the
    workers' set-up)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.slot = f"_{name}_resolved"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        got = obj.__dict__.get(self.slot)
        return got if got is not None else obj.requested

    def __set__(self, obj: Any, value: RunConfig) -> None:
        if obj.__dict__.get(self.slot) is not None:
            raise RuntimeError(
                f"the run's {self.name} is resolved once, before the run, and never replaced: what "
                f"changes during a run is state, not config"
            )
        obj.__dict__[self.slot] = value

    def is_set(self, obj: Any) -> bool:
        """Whether ``obj``'s config is stored (resolved)."""
        return obj.__dict__.get(self.slot) is not None


def resolve_eye_model(config: RunConfig, live: LiveConfig) -> tuple[RunConfig, LiveConfig]:
    """The live run's one eye model, settled before any model loads: the configs it returns name the
    same model, or ``live.landmarks`` is ``auto`` (the run picks one of :data:`AUTO_LANDMARKS` when
    the source's rate is known, :func:`resolve_run_config`, and keeps that config to its end). The
    accelerator stage runs the eye model on the device: ``auto`` is the accurate one there, whatever
    the CPU cores. A model named in ``live`` (a :class:`LiveConfig` built by a program) is the
    run's."""
    # one eye in a region: its model, no face's
    if live.landmarks == "auto" and config.eye.roi is not None:
        live = replace(live, landmarks=config.landmarks.model)
    if live.landmarks == "auto" and config.detect.accelerator_stage:
        live = replace(live, landmarks=AUTO_LANDMARKS[0])
    if live.landmarks != "auto" and live.landmarks != config.landmarks.model:
        config = replace(config, landmarks=replace(config.landmarks, model=live.landmarks))
    return config, live
