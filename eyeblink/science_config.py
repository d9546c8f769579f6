"""The conditioning sections of the config tree: ``[closure]`` (FEC calibration) and ``[trials]``.

They live in their own module so the stages that own them can evolve without touching the rest of
:mod:`eyeblink.config`; :class:`eyeblink.config.RunConfig` holds them as ``closure`` and ``trials``,
and TOML presets set them in ``[closure]`` / ``[trials]`` tables like every other section.
"""

from __future__ import annotations

from dataclasses import dataclass

from eyeblink.errors import ConfigError


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


@dataclass(frozen=True)
class ClosureConfig:
    """Fraction of eyelid closure (FEC): 0 = the subject's open baseline, 1 = full closure.

    ``FEC = (1 - EAR / baseline_EAR) / A_full`` where ``baseline_EAR`` is the blink detector's
    running open-eye baseline and ``A_full`` the session's full-closure amplitude (the
    ``1 - min/baseline`` of a complete closure). ``A_full`` is calibrated per session either from
    ``calibration_s`` (a ``(start_s, end_s)`` segment the user names, e.g. air puffs alone: its
    largest closure, median-filtered over ``smooth_ms``) or from the session's largest reflex
    closures: the ``percentile``-th percentile of the amplitudes of its complete blinks and
    US-evoked responses that reach ``min_amplitude``, once there are ``min_responses`` of them.
    Until then (and for sessions without enough) ``default_full_amplitude`` is used: dlib's
    68-point eye at full closure reads about 0.7 below its open EAR. See :mod:`eyeblink.closure`.
    """

    percentile: float = 90.0
    min_responses: int = 3
    min_amplitude: float = 0.3
    default_full_amplitude: float = 0.7
    calibration_s: tuple[float, float] | None = None
    smooth_ms: float = 10.0

    def __post_init__(self) -> None:
        _require(0.0 < self.percentile <= 100.0, f"closure.percentile must be in (0, 100], got {self.percentile}")
        _require(self.min_responses >= 1, f"closure.min_responses must be >= 1, got {self.min_responses}")
        _require(0.0 < self.min_amplitude < 1.0, f"closure.min_amplitude must be in (0, 1), got {self.min_amplitude}")
        _require(0.0 < self.default_full_amplitude <= 1.0,
                 f"closure.default_full_amplitude must be in (0, 1], got {self.default_full_amplitude}")
        _require(self.smooth_ms >= 0, f"closure.smooth_ms must be >= 0, got {self.smooth_ms}")
        if self.calibration_s is not None:
            _require(isinstance(self.calibration_s, (tuple, list)),
                     f"--calibration must be START_S:END_S (two numbers), got {self.calibration_s!r}")
            seg = tuple(self.calibration_s)
            _require(len(seg) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seg),
                     f"--calibration must be START_S:END_S (two numbers), got {self.calibration_s!r}")
            _require(0.0 <= seg[0] < seg[1],
                     f"--calibration must satisfy 0 <= START_S < END_S, got {seg[0]}:{seg[1]}")
            object.__setattr__(self, "calibration_s", (float(seg[0]), float(seg[1])))


@dataclass(frozen=True)
class TrialConfig:
    """Per-trial windows and criteria (milliseconds from CS onset unless named ``ur_``; FEC units).

    * baseline: mean FEC over ``baseline_ms`` before CS; *valid* when the eye was open (mean FEC <=
      ``baseline_max_fec``), stable (SD <= ``baseline_max_sd``) and measured (at least
      ``min_valid_fraction`` of its frames have an EAR).
    * startle / alpha response: FEC rises >= ``startle_threshold`` above baseline within
      ``[0, startle_end_ms]`` after CS.
    * CR window: from ``cr_start_ms`` after CS to US onset (CS-alone trials: the median ISI of the
      session's paired trials, else CS offset). A CR is FEC >= baseline + ``cr_threshold`` for at
      least ``cr_min_ms`` in that window; its onset is where FEC last rose through baseline +
      ``onset_threshold`` before that.
    * UR: largest FEC in ``[US, US + ur_window_ms]``.
    * traces: ``trace_pre_ms`` before to ``trace_post_ms`` after CS; plots average ``block_size`` trials.
    See :mod:`eyeblink.trials`.
    """

    baseline_ms: float = 200.0
    baseline_max_fec: float = 0.3
    baseline_max_sd: float = 0.05
    min_valid_fraction: float = 0.8
    startle_end_ms: float = 60.0
    startle_threshold: float = 0.1
    cr_start_ms: float = 60.0
    cr_threshold: float = 0.1
    onset_threshold: float = 0.05
    cr_min_ms: float = 10.0
    ur_window_ms: float = 200.0
    trace_pre_ms: float = 250.0
    trace_post_ms: float = 750.0
    block_size: int = 10

    def __post_init__(self) -> None:
        for name in ("baseline_ms", "ur_window_ms", "trace_post_ms"):
            _require(getattr(self, name) > 0, f"trials.{name} must be > 0 ms, got {getattr(self, name)}")
        for name in ("startle_end_ms", "cr_start_ms", "cr_min_ms", "trace_pre_ms"):
            _require(getattr(self, name) >= 0, f"trials.{name} must be >= 0 ms, got {getattr(self, name)}")
        for name in ("startle_threshold", "cr_threshold", "onset_threshold", "baseline_max_sd"):
            _require(getattr(self, name) > 0, f"trials.{name} must be > 0 (FEC), got {getattr(self, name)}")
        _require(self.onset_threshold <= self.cr_threshold,
                 f"trials.onset_threshold ({self.onset_threshold}) must be <= cr_threshold ({self.cr_threshold})")
        _require(0.0 < self.min_valid_fraction <= 1.0,
                 f"trials.min_valid_fraction must be in (0, 1], got {self.min_valid_fraction}")
        _require(self.block_size >= 1, f"trials.block_size (--block-size) must be >= 1, got {self.block_size}")
