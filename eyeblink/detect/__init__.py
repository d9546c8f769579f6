"""The detector seam: one small protocol, a registry of backends, lazily imported.

A backend runs the BlazeFace short-range network and nothing else: it takes a batch of
pre-processed images (float32 ``[B, 128, 128, 3]`` in [-1, 1], see
:func:`eyeblink.detect.blazeface.letterbox`) and returns the raw network outputs
``(regressors [B, 896, 16], scores [B, 896])`` in the canonical anchor order of
:func:`eyeblink.detect.anchors.blazeface_short_range_anchors`. Decoding, non-max suppression
and mapping to frame pixels are shared, backend-independent numpy code in
:mod:`eyeblink.detect.blazeface`, so every backend is checked against the same reference.

Heavy imports (``ai_edge_litert``, ``tensorflow``, ``jax``/``keras``, the Poplar SDK) live only
inside the backend modules, which :func:`create_detector` imports on demand: ``import
eyeblink.detect`` stays light.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, runtime_checkable

import numpy as np

from eyeblink.errors import BackendUnavailableError, ConfigError

__all__ = [
    "GPU_BACKENDS",
    "INPUT_SIZE",
    "NUM_ANCHORS",
    "NUM_COORDS",
    "AcceleratorOptions",
    "BackendName",
    "Detector",
    "backend_install_hint",
    "backend_installed",
    "check_batch",
    "create_detector",
    "first_installed_backend",
    "missing_accelerator",
]

#: Side of the square network input, in pixels.
INPUT_SIZE = 128


def check_batch(
    batch: np.ndarray, input_shape: tuple[int, ...] = (INPUT_SIZE, INPUT_SIZE, 3)
) -> None:
    """``ValueError`` unless ``batch`` is a float32 ``[B >= 1, *input_shape]`` array: what every
    backend runs."""
    if not isinstance(batch, np.ndarray) or batch.dtype != np.float32:
        got = batch.dtype if isinstance(batch, np.ndarray) else type(batch).__name__
        raise ValueError(f"batch must be a float32 ndarray, got {got}")
    if batch.ndim != 1 + len(input_shape) or batch.shape[1:] != input_shape or batch.shape[0] < 1:
        raise ValueError(
            f"batch must have shape [B>=1, {', '.join(map(str, input_shape))}], got {batch.shape}"
        )


#: Number of SSD anchors (16x16x2 + 8x8x6).
NUM_ANCHORS = 896
#: Regressor values per anchor: box (4) + 6 keypoints x (x, y).
NUM_COORDS = 16


class BackendName(str, enum.Enum):
    """Names of the detector backends (the only place these strings are spelled out)."""

    LITERT = "litert"
    TENSORFLOW = "tensorflow"
    JAX = "jax"
    IPU = "ipu"

    def __str__(self) -> str:
        return self.value


@runtime_checkable
class Detector(Protocol):
    """A BlazeFace backend.

    ``detect`` takes float32 ``[B, 128, 128, 3]`` in [-1, 1] (RGB, letterboxed) and returns raw
    ``(regressors float32 [B, 896, 16], scores float32 [B, 896])``; scores are logits (before the
    sigmoid), rows are in canonical anchor order whatever the batch size. Backends are not
    thread-safe: use one instance per thread or process. ``close()`` releases the runtime; the
    instance is a context manager that closes on exit.
    """

    def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Detector: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


#: I/O tiles: 0 (off) or an even number in this range (Poplar's limits).
IO_TILES_RANGE = (32, 192)


@dataclass(frozen=True, slots=True)
class AcceleratorOptions:
    """Settings of the accelerator backends (``tensorflow``, ``jax``, ``ipu``); CPU backends ignore
    them.

    ``jit_compile``: compile the network with XLA (``tf.function(jit_compile=True)``); on GPUs
    this fuses the depthwise/pointwise pairs and is what makes batch 512 fast. ``prefetch_depth``:
    batches the host prepares ahead of the device (``tf.data`` prefetch; the IPU infeed's
    ``prefetch_depth``, 1..255); 2 was best in the seed study. ``io_tiles``: IPU tiles reserved for
    host I/O so that transfers overlap compute (0 = off, else even, 32..192; 64 for throughput,
    32 for low latency). ``replicas``: IPUs running a copy of the model each (data parallel).
    """

    jit_compile: bool = True
    prefetch_depth: int = 2
    io_tiles: int = 0
    replicas: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.jit_compile, bool):
            raise ConfigError(f"jit_compile must be true or false, got {self.jit_compile!r}")
        if not isinstance(self.prefetch_depth, int) or not 1 <= self.prefetch_depth <= 255:
            raise ConfigError(
                f"prefetch_depth must be a whole number in [1, 255], got {self.prefetch_depth!r}"
            )
        lo, hi = IO_TILES_RANGE
        if not isinstance(self.io_tiles, int) or not (
            self.io_tiles == 0 or (lo <= self.io_tiles <= hi and self.io_tiles % 2 == 0)
        ):
            raise ConfigError(
                f"io_tiles must be 0 (off) or an even number in [{lo}, {hi}], got {self.io_tiles!r}"
            )
        if not isinstance(self.replicas, int) or self.replicas < 1:
            raise ConfigError(f"replicas must be a whole number >= 1, got {self.replicas!r}")


@dataclass(frozen=True, slots=True)
class _BackendEntry:
    """Where a backend lives and what it needs: ``module:attr`` plus its pip extra."""

    module: str
    attr: str
    # modules that must be importable, checked (not imported) before importing
    requires: tuple[str, ...]
    install: str  # how to get it
    accelerated: bool = False  # the factory takes ``accelerator=AcceleratorOptions``


_REGISTRY: dict[BackendName, _BackendEntry] = {
    BackendName.LITERT: _BackendEntry(
        "eyeblink.detect.litert",
        "LiteRTDetector",
        ("ai_edge_litert",),
        'pip install "ai-edge-litert>=1.2"',
    ),
    BackendName.TENSORFLOW: _BackendEntry(
        "eyeblink.detect.tensorflow",
        "TensorFlowDetector",
        ("tensorflow",),
        'pip install "eyeblink[tf]" (CPU; on NVIDIA GPUs: pip install "tensorflow[and-cuda]")',
        accelerated=True,
    ),
    BackendName.JAX: _BackendEntry(
        "eyeblink.detect.jax",
        "JaxDetector",
        ("jax", "keras"),
        'pip install "eyeblink[jax]" (CPU; on NVIDIA GPUs: pip install "jax[cuda12]" "keras>=3")',
        accelerated=True,
    ),
    BackendName.IPU: _BackendEntry(
        "eyeblink.detect.ipu",
        "IPUDetector",
        ("tensorflow.python.ipu",),
        "install Graphcore's TensorFlow wheel from the Poplar SDK (extra: eyeblink[ipu])",
        accelerated=True,
    ),
}


def missing_accelerator(backend: BackendName | str) -> str | None:
    """Why ``backend``, meant for an accelerator, would run without one here (``None``: it has one,
    or it is a CPU backend). The ``tensorflow`` backend falls back to the CPU, where LiteRT is far
    faster: that is a warning (:func:`eyeblink.errors.warn`), not an error; a backend that cannot
    run at all is :class:`~eyeblink.errors.BackendUnavailableError` from :func:`create_detector`."""
    try:
        name = _parse_backend(backend)
    except ConfigError:
        return None
    if name is BackendName.TENSORFLOW:
        try:
            import tensorflow as tf
        except ImportError:
            return None  # create_detector names the extra to install
        if tf.config.list_physical_devices("GPU"):
            return None
        gpu_build = 'pip install "tensorflow[and-cuda]"'
    elif name is BackendName.JAX:
        try:
            import jax
        except ImportError:
            return None
        if jax.default_backend() != "cpu":
            return None
        gpu_build = 'pip install "jax[cuda12]"'
    else:
        return None
    return (
        f"the {name.value} backend found no GPU here and runs on the CPU (tens of frames per "
        "second); use "
        f"--pipeline cpu (LiteRT, the fast CPU path) or install the GPU build: {gpu_build}"
    )


#: The GPU backends in order of preference: ``backend = ["jax", "tensorflow"]`` in a preset
#: (``pipelines/gpu.toml``) means the first of these that is installed.
GPU_BACKENDS = (BackendName.JAX, BackendName.TENSORFLOW)


def backend_install_hint(backend: BackendName | str) -> str:
    """How to install what ``backend`` needs: the fix its :class:`BackendUnavailableError` names."""
    return _REGISTRY[_parse_backend(backend)].install


def backend_installed(backend: BackendName | str) -> bool:
    """Whether the modules ``backend`` needs are importable here (checked without importing
    them)."""
    return all(_requirement_importable(m) for m in _REGISTRY[_parse_backend(backend)].requires)


def first_installed_backend(names: list[str] | tuple[str, ...]) -> str:
    """The first of ``names`` whose backend is installed here; the first name when none is (so that
    :func:`create_detector` names its install command). Unknown names are a :class:`ConfigError`."""
    parsed = [_parse_backend(n) for n in names]
    if not parsed:
        raise ConfigError(f"an empty list of detector backends; valid choices: {_choices()}")
    for name in parsed:
        if backend_installed(name):
            return name.value
    return parsed[0].value


def _choices() -> str:
    return ", ".join(b.value for b in BackendName)


def _parse_backend(backend: BackendName | str) -> BackendName:
    if isinstance(backend, BackendName):
        return backend
    try:
        return BackendName(str(backend).strip().lower())
    except ValueError:
        raise ConfigError(
            f"unknown detector backend {backend!r}; valid choices: {_choices()}"
        ) from None


def _requirement_importable(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it.

    For a dotted name (``tensorflow.python.ipu``) only the top-level package is located by
    ``find_spec``; the rest is looked up on disk, so asking whether the IPU build of TensorFlow is
    there does not import the whole of TensorFlow (seconds, and log noise) to find out it is not.
    """
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):  # a broken package
        return False
    if spec is None:
        return False
    if not rest:
        return True
    for location in spec.submodule_search_locations or ():
        base = Path(location).joinpath(*rest.split("."))
        if (base / "__init__.py").is_file() or base.with_suffix(".py").is_file():
            return True
    return False


def require_backend(backend: BackendName | str) -> BackendName:
    """``backend``'s name if the modules it needs are installed, else
    :class:`BackendUnavailableError` naming the fix; checked without importing them (a process that
    forks workers must not start JAX or TensorFlow)."""
    name = _parse_backend(backend)
    entry = _REGISTRY[name]
    for required in entry.requires:
        if not _requirement_importable(required):
            raise BackendUnavailableError(
                f"detector backend {name.value!r} needs the module {required!r}, which is not "
                f"installed; {entry.install}, or choose another backend (valid choices: "
                f"{_choices()})"
            )
    return name


def create_detector(
    backend: BackendName | str = BackendName.LITERT,
    *,
    model_path: Path | None = None,
    num_threads: int = 1,
    batch_size: int = 1,
    accelerator: AcceleratorOptions | None = None,
) -> Detector:
    """Build a detector backend by name.

    ``model_path`` defaults to the packaged BlazeFace short-range model; ``num_threads`` is the
    CPU thread count for CPU backends (1 is best when several worker processes share the cores);
    ``batch_size`` is the batch the backend allocates for up front (other sizes still work).
    ``accelerator`` (XLA, prefetch depth, I/O tiles, replicas) goes to the accelerator backends
    (``tensorflow``, ``jax``, ``ipu``; defaults when None) and is ignored by CPU backends.

    Raises :class:`ConfigError` for an unknown name or invalid numbers,
    :class:`BackendUnavailableError` when the backend cannot run here (names the fix), and
    :class:`eyeblink.errors.ModelFileError` when the model file is missing or corrupt.
    """
    name = _parse_backend(backend)
    if num_threads < 1:
        raise ConfigError(f"num_threads must be >= 1, got {num_threads}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    entry = _REGISTRY[require_backend(name)]
    try:
        module = importlib.import_module(entry.module)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"detector backend {name.value!r} cannot be imported ({exc}); {entry.install}, "
            f"or choose another backend (valid choices: {_choices()})"
        ) from exc
    factory = getattr(module, entry.attr)
    if entry.accelerated:
        detector: Detector = factory(
            model_path=model_path,
            num_threads=num_threads,
            batch_size=batch_size,
            accelerator=accelerator or AcceleratorOptions(),
        )
    else:  # CPU backends have no accelerator settings; presets may still carry them (ignored here)
        detector = factory(model_path=model_path, num_threads=num_threads, batch_size=batch_size)
    return detector
