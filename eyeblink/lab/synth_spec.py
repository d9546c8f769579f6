"""What a synthetic recording is made of (:mod:`eyeblink.lab.synth` writes it): the blinks planted
(``BlinkSpec``, ``default_blinks``, ``closure_at``), the recording's settings (``SynthConfig``) and
the truth of each written frame (``PlantedBlink``, ``SyntheticTruth``, ``planned_truth``). Nothing
here renders a pixel: the face is :mod:`eyeblink.lab.synth_face`'s.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np

from eyeblink.errors import ConfigError

Eye = Literal["left", "right"]
EyesSpec = Literal["both", "left", "right"]
Codec = Literal["mjpeg", "ffv1", "rawvideo"]

#: Blinks at least this deep count as blinks; shallower ones are "don't care".
FULL_BLINK_AMPLITUDE = 0.8
_CODECS: tuple[str, ...] = ("mjpeg", "ffv1", "rawvideo")
_EYES: tuple[str, ...] = ("both", "left", "right")


def _check_finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


@dataclass(frozen=True, slots=True)
class BlinkSpec:
    """One planted blink: closing, hold (closed), opening.

    Durations are milliseconds. The closure rises from 0 to ``amplitude`` over
    ``closing_ms`` and falls back over ``opening_ms`` with raised-cosine ramps
    (zero velocity at both ends). Real spontaneous blinks close faster than they
    open (~60-80 ms vs ~120-200 ms); this is what :func:`default_blinks` plants,
    but it is not enforced because slow-closing conditioned responses are real.
    ``closed_ms`` may be 0 (no hold).
    """

    onset_s: float
    closing_ms: float = 70.0
    closed_ms: float = 30.0
    opening_ms: float = 140.0
    amplitude: float = 1.0
    eyes: EyesSpec = "both"

    def __post_init__(self) -> None:
        _check_finite("BlinkSpec.onset_s", self.onset_s)
        if self.onset_s < 0:
            raise ConfigError(f"BlinkSpec.onset_s must be >= 0 s, got {self.onset_s}")
        for name in ("closing_ms", "opening_ms"):
            value = getattr(self, name)
            _check_finite(f"BlinkSpec.{name}", value)
            if value <= 0:
                raise ConfigError(f"BlinkSpec.{name} must be > 0 ms, got {value}")
        _check_finite("BlinkSpec.closed_ms", self.closed_ms)
        if self.closed_ms < 0:
            raise ConfigError(f"BlinkSpec.closed_ms must be >= 0 ms, got {self.closed_ms}")
        _check_finite("BlinkSpec.amplitude", self.amplitude)
        if not 0.0 < self.amplitude <= 1.0:
            raise ConfigError(
                f"BlinkSpec.amplitude must be in (0, 1] (1 = full closure), got {self.amplitude}"
            )
        if self.eyes not in _EYES:
            raise ConfigError(f"BlinkSpec.eyes must be one of {_EYES}, got {self.eyes!r}")

    @property
    def duration_s(self) -> float:
        """Closing + closed + opening, in seconds."""
        return (self.closing_ms + self.closed_ms + self.opening_ms) / 1000.0

    @property
    def end_s(self) -> float:
        """Time at which the lid is fully open again."""
        return self.onset_s + self.duration_s

    @property
    def peak_s(self) -> float:
        """Middle of the closed (maximum closure) plateau."""
        return self.onset_s + (self.closing_ms + 0.5 * self.closed_ms) / 1000.0

    @property
    def counts(self) -> bool:
        """Whether this blink is deep enough to count (see :data:`FULL_BLINK_AMPLITUDE`)."""
        return self.amplitude >= FULL_BLINK_AMPLITUDE

    def affects(self, eye: Eye) -> bool:
        """Whether this blink closes ``eye``."""
        return self.eyes in ("both", eye)

    def closure(self, t: np.ndarray) -> np.ndarray:
        """Closure fraction of an affected eye at times ``t`` (seconds), 0 outside the blink."""
        t = np.asarray(t, dtype=np.float64)
        u = (t - self.onset_s) * 1000.0  # ms since onset
        t_closed = self.closing_ms
        t_open = self.closing_ms + self.closed_ms
        t_end = t_open + self.opening_ms
        rise = 0.5 - 0.5 * np.cos(np.pi * np.clip(u / self.closing_ms, 0.0, 1.0))
        fall = 0.5 + 0.5 * np.cos(np.pi * np.clip((u - t_open) / self.opening_ms, 0.0, 1.0))
        out = np.where(u < t_closed, rise, np.where(u <= t_open, 1.0, fall))
        out = np.where((u <= 0.0) | (u >= t_end), 0.0, out)
        return cast(np.ndarray, self.amplitude * out)


def default_blinks(duration_s: float = 10.0) -> tuple[BlinkSpec, ...]:
    """A realistic demo schedule: 7 blinks per 10 s, one of them partial.

    Blinks last 170-300 ms, close faster than they open, and are >= 0.8 s apart
    (end to next onset). The blink at 4.4 s is partial (amplitude 0.5): it does
    not *count* (see :data:`FULL_BLINK_AMPLITUDE`) and is there to check that a
    detector neither needs it nor breaks on it. For ``duration_s`` other than
    10 s the 10-s pattern is tiled and cut: only blinks that end at least 0.1 s
    before ``duration_s`` are kept (so a recording shorter than ~0.8 s has none).
    """
    _check_finite("duration_s", duration_s)
    if duration_s <= 0:
        raise ConfigError(f"duration_s must be > 0 s, got {duration_s}")
    pattern = (
        BlinkSpec(0.70, 60.0, 30.0, 120.0),
        BlinkSpec(2.00, 70.0, 40.0, 150.0),
        BlinkSpec(3.10, 50.0, 20.0, 100.0),
        BlinkSpec(4.40, 60.0, 30.0, 130.0, amplitude=0.5),
        BlinkSpec(5.60, 80.0, 50.0, 170.0),
        BlinkSpec(7.00, 55.0, 25.0, 110.0),
        BlinkSpec(8.30, 65.0, 35.0, 140.0),
    )
    out: list[BlinkSpec] = []
    period = 10.0
    k = 0
    while k * period < duration_s:
        for b in pattern:
            shifted = BlinkSpec(
                b.onset_s + k * period, b.closing_ms, b.closed_ms, b.opening_ms, b.amplitude, b.eyes
            )
            if shifted.end_s <= duration_s - 0.1:
                out.append(shifted)
        k += 1
    return tuple(out)


def closure_at(t: float | np.ndarray, blinks: Sequence[BlinkSpec]) -> tuple[Any, Any]:
    """Closure fraction ``(left, right)`` per eye at time(s) ``t``.

    0 = open, 1 = fully closed. Overlapping blinks combine by maximum. Scalars
    in, floats out; arrays in, arrays (float64, same shape) out.
    """
    arr = np.asarray(t, dtype=np.float64)
    left = np.zeros_like(arr)
    right = np.zeros_like(arr)
    for b in blinks:
        c = b.closure(arr)
        if b.affects("left"):
            left = np.maximum(left, c)
        if b.affects("right"):
            right = np.maximum(right, c)
    if arr.ndim == 0:
        return float(left), float(right)
    return left, right


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """Everything that defines a synthetic recording (all of it is seeded/deterministic).

    ``face_scale`` is the face width (jaw, landmarks 0-16) in px: 220 px in a
    640x480 frame is a subject ~1 m from a high-speed camera with a short tele
    lens. Head motion is a smooth wander of at most ``head_shift_px`` px and
    ``head_roll_deg`` degrees with components up to ``head_motion_hz``.
    ``flicker_amplitude`` is the relative amplitude of mains flicker at
    ``flicker_hz`` (100 Hz for 50 Hz mains). ``noise_sigma`` is the sensor noise
    in gray levels. ``mjpeg_qscale`` is FFmpeg's MJPEG quantiser (1 = best,
    31 = worst; 2-3 is "high quality"). ``dropped_frames`` are frame indices that
    are rendered but not written. ``blinks`` defaults to none; use
    :meth:`demo` for the demo schedule.
    """

    duration_s: float = 10.0
    blinks: tuple[BlinkSpec, ...] = ()
    width: int = 640
    height: int = 480
    fps: float = 500.0
    seed: int = 0
    face_scale: float = 220.0
    head_shift_px: float = 3.0
    head_roll_deg: float = 2.0
    head_motion_hz: float = 1.0
    noise_sigma: float = 2.0
    flicker_amplitude: float = 0.03
    flicker_hz: float = 100.0
    codec: Codec = "mjpeg"
    mjpeg_qscale: int = 2
    dropped_frames: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in (
            "duration_s",
            "fps",
            "face_scale",
            "head_shift_px",
            "head_roll_deg",
            "head_motion_hz",
            "noise_sigma",
            "flicker_amplitude",
            "flicker_hz",
        ):
            _check_finite(f"SynthConfig.{name}", getattr(self, name))
        if self.duration_s <= 0:
            raise ConfigError(f"SynthConfig.duration_s must be > 0 s, got {self.duration_s}")
        if self.fps <= 0:
            raise ConfigError(f"SynthConfig.fps must be > 0, got {self.fps}")
        for name in ("width", "height", "seed", "mjpeg_qscale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"SynthConfig.{name} must be an int, got {value!r}")
        if self.width < 64 or self.height < 64 or self.width % 2 or self.height % 2:
            raise ConfigError(
                "SynthConfig width/height must be even and >= 64 (4:2:0 chroma), got "
                f"{self.width}x{self.height}"
            )
        if self.seed < 0:
            raise ConfigError(f"SynthConfig.seed must be >= 0, got {self.seed}")
        max_face = 0.9 * min(self.width, self.height)
        if not 80.0 <= self.face_scale <= max_face:
            raise ConfigError(
                f"SynthConfig.face_scale must be in [80, {max_face:g}] px (face width; landmark "
                "models need >= 80 px "
                f"and the face must fit the {self.width}x{self.height} frame), got "
                f"{self.face_scale}"
            )
        for name in ("head_shift_px", "head_roll_deg", "noise_sigma", "flicker_amplitude"):
            if getattr(self, name) < 0:
                raise ConfigError(f"SynthConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.head_roll_deg > 25.0:
            raise ConfigError(
                f"SynthConfig.head_roll_deg must be <= 25 degrees, got {self.head_roll_deg}"
            )
        if self.head_shift_px > 0.1 * min(self.width, self.height):
            raise ConfigError(
                "SynthConfig.head_shift_px must be <= 10% of the frame's short side, got "
                f"{self.head_shift_px}"
            )
        if self.head_motion_hz <= 0 or self.flicker_hz <= 0:
            raise ConfigError(
                f"SynthConfig.head_motion_hz and flicker_hz must be > 0 Hz, got "
                f"{self.head_motion_hz} and {self.flicker_hz}"
            )
        if self.flicker_amplitude >= 0.5:
            raise ConfigError(
                f"SynthConfig.flicker_amplitude must be < 0.5, got {self.flicker_amplitude}"
            )
        if self.codec not in _CODECS:
            raise ConfigError(f"SynthConfig.codec must be one of {_CODECS}, got {self.codec!r}")
        if not 1 <= self.mjpeg_qscale <= 31:
            raise ConfigError(
                f"SynthConfig.mjpeg_qscale must be in [1, 31], got {self.mjpeg_qscale}"
            )
        if not isinstance(self.blinks, tuple) or not all(
            isinstance(b, BlinkSpec) for b in self.blinks
        ):
            raise ConfigError(
                f"SynthConfig.blinks must be a tuple of BlinkSpec, got {self.blinks!r}"
            )
        for prev, nxt in zip(self.blinks, self.blinks[1:], strict=False):
            if nxt.onset_s < prev.end_s:
                raise ConfigError(
                    f"SynthConfig.blinks must be sorted by onset and must not overlap: blink at "
                    f"{nxt.onset_s} s starts before the previous one ends ({prev.end_s} s)"
                )
        for b in self.blinks:
            if b.end_s > self.duration_s:
                raise ConfigError(
                    f"blink at {b.onset_s} s ends at {b.end_s:.3f} s, after "
                    f"duration_s={self.duration_s} s"
                )
        n = self.n_frames
        if not isinstance(self.dropped_frames, tuple):
            raise ConfigError(
                f"SynthConfig.dropped_frames must be a tuple of ints, got {self.dropped_frames!r}"
            )
        for i in self.dropped_frames:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                raise ConfigError(
                    f"SynthConfig.dropped_frames entries must be ints in [0, {n}), got {i!r}"
                )
        if len(set(self.dropped_frames)) != len(self.dropped_frames):
            raise ConfigError(f"SynthConfig.dropped_frames has duplicates: {self.dropped_frames}")
        if len(self.dropped_frames) >= n:
            raise ConfigError(f"SynthConfig.dropped_frames drops all {n} frames")

    @classmethod
    def demo(cls, duration_s: float = 10.0, **kwargs: Any) -> SynthConfig:
        """A config with the :func:`default_blinks` schedule for ``duration_s``."""
        return cls(duration_s=duration_s, blinks=default_blinks(duration_s), **kwargs)

    @property
    def n_frames(self) -> int:
        """Frames in the recording before drops: ``round(duration_s * fps)``."""
        return max(1, round(self.duration_s * self.fps))

    @property
    def time_base(self) -> Fraction:
        """The PTS time base, ``1 / fps`` (fps as an exact fraction)."""
        return 1 / self.frame_rate

    @property
    def frame_rate(self) -> Fraction:
        """``fps`` as a fraction (e.g. 500, or 30000/1001)."""
        return Fraction(self.fps).limit_denominator(1001000)

    @property
    def suffix(self) -> str:
        """The usual container suffix for ``codec``: ``.mkv`` for ffv1, ``.avi`` otherwise."""
        return ".mkv" if self.codec == "ffv1" else ".avi"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (blinks as dicts)."""
        d = asdict(self)
        d["blinks"] = [asdict(b) for b in self.blinks]
        d["dropped_frames"] = list(self.dropped_frames)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SynthConfig:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["blinks"] = tuple(BlinkSpec(**b) for b in d.get("blinks", ()))
        d["dropped_frames"] = tuple(int(i) for i in d.get("dropped_frames", ()))
        return cls(**d)


# --------------------------------------------------------------------------- ground truth


@dataclass(frozen=True, slots=True)
class PlantedBlink:
    """A blink as planted, in seconds and in frame indices (= PTS) of the recording.

    ``onset_frame`` is the first frame at or after ``onset_s``, ``end_frame`` the
    last frame at or before ``end_s``, ``peak_frame`` the frame nearest the
    middle of the closed plateau. Frame indices refer to the undropped timeline.
    """

    onset_s: float
    end_s: float
    onset_frame: int
    end_frame: int
    peak_s: float
    peak_frame: int
    amplitude: float
    eyes: EyesSpec

    def __post_init__(self) -> None:
        if not self.onset_s < self.end_s:
            raise ValueError(f"PlantedBlink onset_s {self.onset_s} must be < end_s {self.end_s}")
        if not 0 <= self.onset_frame <= self.peak_frame <= self.end_frame:
            raise ValueError(
                f"PlantedBlink frames must satisfy 0 <= onset <= peak <= end, got "
                f"{self.onset_frame}, {self.peak_frame}, {self.end_frame}"
            )

    @property
    def counts(self) -> bool:
        """Deep enough to count as a blink (amplitude >= :data:`FULL_BLINK_AMPLITUDE`)."""
        return self.amplitude >= FULL_BLINK_AMPLITUDE

    @property
    def duration_ms(self) -> float:
        """Onset to fully open again, in milliseconds."""
        return (self.end_s - self.onset_s) * 1000.0

    @classmethod
    def from_spec(cls, spec: BlinkSpec, fps: float) -> PlantedBlink:
        """The planted blink of ``spec`` on a frame grid of ``fps``."""
        eps = 1e-9
        return cls(
            onset_s=spec.onset_s,
            end_s=spec.end_s,
            onset_frame=math.ceil(spec.onset_s * fps - eps),
            end_frame=math.floor(spec.end_s * fps + eps),
            peak_s=spec.peak_s,
            peak_frame=round(spec.peak_s * fps),
            amplitude=spec.amplitude,
            eyes=spec.eyes,
        )


def _frozen_array(a: Any, dtype: type) -> np.ndarray:
    arr: np.ndarray = np.array(a, dtype=dtype)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, eq=False)
class SyntheticTruth:
    """What was planted in a synthetic recording, per *written* frame.

    ``frame_index`` is each written frame's PTS (frame number on the undropped
    timeline), ``timestamps_s`` its presentation time, ``closure_left`` /
    ``closure_right`` the lid closure rendered (0 open .. 1 closed). Arrays are
    read-only. ``blinks`` are in onset order.
    """

    config: SynthConfig
    frame_index: np.ndarray
    timestamps_s: np.ndarray
    closure_left: np.ndarray
    closure_right: np.ndarray
    blinks: tuple[PlantedBlink, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "frame_index", _frozen_array(self.frame_index, np.int64))
        for name in ("timestamps_s", "closure_left", "closure_right"):
            object.__setattr__(self, name, _frozen_array(getattr(self, name), np.float64))
        n = self.frame_index.shape
        for name in ("frame_index", "timestamps_s", "closure_left", "closure_right"):
            arr = getattr(self, name)
            if arr.ndim != 1 or arr.shape != n:
                raise ValueError(f"SyntheticTruth.{name} must be 1-D of shape {n}, got {arr.shape}")

    @property
    def counted_blinks(self) -> tuple[PlantedBlink, ...]:
        """The blinks a detector must find (see :data:`FULL_BLINK_AMPLITUDE`)."""
        return tuple(b for b in self.blinks if b.counts)

    def to_json(self, indent: int | None = None) -> str:
        """Serialise (config, per-frame arrays rounded to 1e-6, blinks) to a JSON string."""
        return json.dumps(
            {
                "config": self.config.to_dict(),
                "frame_index": self.frame_index.tolist(),
                "timestamps_s": [round(v, 9) for v in self.timestamps_s.tolist()],
                "closure_left": [round(v, 6) for v in self.closure_left.tolist()],
                "closure_right": [round(v, 6) for v in self.closure_right.tolist()],
                "blinks": [asdict(b) for b in self.blinks],
            },
            indent=indent,
        )

    @classmethod
    def from_json(cls, text: str) -> SyntheticTruth:
        """Inverse of :meth:`to_json`."""
        d = json.loads(text)
        return cls(
            config=SynthConfig.from_dict(d["config"]),
            frame_index=np.asarray(d["frame_index"], dtype=np.int64),
            timestamps_s=np.asarray(d["timestamps_s"], dtype=np.float64),
            closure_left=np.asarray(d["closure_left"], dtype=np.float64),
            closure_right=np.asarray(d["closure_right"], dtype=np.float64),
            blinks=tuple(PlantedBlink(**b) for b in d["blinks"]),
        )


def planned_truth(config: SynthConfig) -> SyntheticTruth:
    """The ground truth of ``config`` without rendering anything."""
    dropped = set(config.dropped_frames)
    idx = np.array([i for i in range(config.n_frames) if i not in dropped], dtype=np.int64)
    times = idx * float(config.time_base)
    left, right = closure_at(times, config.blinks)
    return SyntheticTruth(
        config=config,
        frame_index=idx,
        timestamps_s=times,
        closure_left=left,
        closure_right=right,
        blinks=tuple(PlantedBlink.from_spec(b, float(config.frame_rate)) for b in config.blinks),
    )
