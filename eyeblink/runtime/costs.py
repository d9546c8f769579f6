"""This machine: its CPU class, and what each eye model costs on it, measured before a live capture.

A network's cost depends on the CPU's vector extensions far more than on its clock: LiteRT's XNNPACK
kernels run the face mesh, the iris network and BlazeFace ~3x faster with AVX-512 than with AVX2
alone. So

* :func:`host_info` names the host class (CPU model, logical and physical cores, the vector
  extensions ``avx2``, ``avx512f``, ``avx512_vnni``, ``amx_tile``); ``summary.json`` (``host``),
  ``eyeblink bench`` and ``bench landmarks`` record it beside every figure;
* :func:`measure_costs` times, on this machine, on a real face frame at the source's size
  (scikit-image's astronaut photo, the demo's face), a BlazeFace keyframe, each candidate eye
  model's fit with and without its reused face mesh, and the decode of a frame in the source's
  codec. ``eyeblink live --landmarks auto`` picks its model from these numbers
  (:func:`eyeblink.runtime.choose.choose_landmarks`); the registry's constants
  (:data:`eyeblink.landmarks.EYE_MODELS` ``fit_ms``) are only the fallback when measuring fails.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from eyeblink import host
from eyeblink.config import physical_cores

if TYPE_CHECKING:
    from av.video.codeccontext import VideoCodecContext

__all__ = [
    "CoresBusy",
    "HostCosts",
    "face_frame",
    "host_info",
    "measure_costs",
    "registry_costs",
    "with_decode",
]

log = logging.getLogger("eyeblink.host")

#: the CPU flags that decide what a network costs (the Linux kernel's spelling, which
#: :func:`eyeblink.host.cpu_info` gives on every OS)
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")
#: CPU ms a live frame costs besides its eye-model fit, keyframe detection and decode: capture and
#: ring copy, IPC, blinks, publishing, writing. Measured as a capacity: ``eyeblink live`` held to
#: one core (``taskset``) of a 2-core AVX-512 Xeon, fed raw 640x480 real frames at 900 FPS (more
#: than it holds), analysed 836 frames a second at its cheapest ``lids`` setting (mesh reused 80 ms,
#: a keyframe every 20 frames: ~0.23 ms of networks), so ~1.2 ms a frame in all and ~1.0 ms besides
#: the networks. Not a network, so not ~3x dearer on an AVX2-only host.
LIVE_OVERHEAD_MS = 1.0
#: set by the development stand-in for a slower CPU (``slow-host --networks K``): every network run
#: costs K times
SLOW_HOST_ENV = "SLOW_HOST_NETWORKS"
#: BlazeFace keyframe cost when it cannot be measured (one core, LiteRT, an AVX2-only host)
FALLBACK_DETECT_MS = 1.7


def host_info() -> dict[str, Any]:
    """The host class: CPU model, cores, the vector extensions present (``vector``), and a short
    ``class`` label (``avx512``, ``avx2`` or ``baseline``) that the docs' speed tables are grouped
    by; under the slower-host stand-in (``slow-host --avx2-pc``, which sets :data:`SLOW_HOST_ENV`)
    also its factor (``stand_in_network_factor``: each network run costs that many times its own
    time)."""
    info = host.cpu_info()
    flags = set(info.get("flags", "").split())
    vector = [f for f in VECTOR_FLAGS if f in flags]
    if "avx512f" in flags:
        cls = "avx512"
    elif "avx2" in flags:
        cls = "avx2"
    else:
        cls = "baseline" if flags else platform.machine()
    out: dict[str, Any] = {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "logical_cpus": os.cpu_count(),
        "physical_cores": physical_cores(),
        "vector": vector,
        "class": cls,
    }
    slow = os.environ.get(SLOW_HOST_ENV)
    if slow:  # run under the slower-host stand-in: every network costs this many times its own time
        with contextlib.suppress(ValueError):
            out["stand_in_network_factor"] = float(slow)
    return out


def face_frame(width: int = 640, height: int = 480) -> np.ndarray:
    """A real face at ``width`` x ``height``, grayscale uint8: scikit-image's astronaut photo
    (public domain), scaled to the frame's height and centred on a mid-gray canvas; the face spans
    ~40% of the height."""
    import cv2
    from skimage import data

    photo = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    side = max(16, min(width, height))
    photo = cv2.resize(photo, (side, side), interpolation=cv2.INTER_AREA)
    canvas = np.full((height, width), 110, np.uint8)
    y0, x0 = (height - side) // 2, (width - side) // 2
    canvas[y0 : y0 + side, x0 : x0 + side] = photo
    return canvas


@dataclass(frozen=True)
class HostCosts:
    """What a live frame costs on this machine, per part (ms of one core).

    ``fit_ms[m]``: model ``m``'s fit that runs its face mesh; ``reuse_ms[m]``: a fit that reuses the
    mesh (``mesh_reuse_ms``), equal to ``fit_ms[m]`` for a model that never reuses. ``measured``:
    False when these are the registry's constants (measuring failed: ``note`` says why)."""

    detect_ms: float
    fit_ms: dict[str, float]
    reuse_ms: dict[str, float]
    decode_ms: float = 0.0
    overhead_ms: float = LIVE_OVERHEAD_MS
    measured: bool = True
    note: str = ""
    host: dict[str, Any] = field(default_factory=host_info)
    #: False for a recording of one eye (``--eye-roi``): no face detector runs, ``detect_ms`` is 0
    detector: bool = True

    def networks_ms(
        self, model: str, fps: float, *, mesh_reuse_ms: float, detect_every: int
    ) -> float:
        """CPU ms per frame of a worker's networks for ``model`` at ``fps``: the mesh once per
        ``mesh_reuse_ms`` (at most every frame) and BlazeFace once per ``detect_every`` frames."""
        every = max(1, math.floor(mesh_reuse_ms * fps / 1000.0 + 1e-9)) if fps > 0 else 1
        full, reuse = self.fit_ms[model], self.reuse_ms.get(model, self.fit_ms[model])
        fit = (full + (every - 1) * reuse) / every
        return fit + self.detect_ms / max(1, detect_every)

    def frame_ms(self, model: str, fps: float, *, mesh_reuse_ms: float, detect_every: int) -> float:
        """CPU ms per frame of ``model`` at ``fps``: :meth:`networks_ms`, the decode and the
        fixed overhead."""
        return (
            self.networks_ms(model, fps, mesh_reuse_ms=mesh_reuse_ms, detect_every=detect_every)
            + self.decode_ms
            + self.overhead_ms
        )

    def cores_needed(
        self, model: str, fps: float, *, mesh_reuse_ms: float, detect_every: int, max_load: float
    ) -> float:
        """Cores that run ``model`` at ``fps`` with every core at most ``max_load`` busy."""
        ms = self.frame_ms(model, fps, mesh_reuse_ms=mesh_reuse_ms, detect_every=detect_every)
        return fps * ms / 1000.0 / max_load

    def as_dict(self) -> dict[str, Any]:
        """For ``summary.json`` (``live.host_costs``) and the start line."""
        return {
            "measured": self.measured,
            "note": self.note or None,
            "detect_ms": round(self.detect_ms, 3),
            "fit_ms": {k: round(v, 3) for k, v in self.fit_ms.items()},
            "reuse_ms": {k: round(v, 3) for k, v in self.reuse_ms.items()},
            "decode_ms": round(self.decode_ms, 3),
            "overhead_ms": self.overhead_ms,
            "host": self.host,
        }

    def describe(self, models: tuple[str, ...] | list[str]) -> str:
        """One line of the measured costs: ``detect 1.70 ms, lids 1.21/0.19 ms, decode 0.62 ms
        (avx2)``."""
        fits = ", ".join(
            f"{m} {self.fit_ms[m]:.2f}/{self.reuse_ms.get(m, self.fit_ms[m]):.2f} ms"
            for m in models
            if m in self.fit_ms
        )
        how = "measured" if self.measured else f"registry constants ({self.note})"
        detect = (
            f"detect {self.detect_ms:.2f} ms"
            if self.detector
            else "no face detection (an eye region)"
        )
        return (
            f"{how} on {self.host.get('class')} ({self.host.get('cpu')}): {detect}, "
            f"{fits} (fit/reused), decode {self.decode_ms:.2f} ms"
        )


def registry_costs(
    models: tuple[str, ...] | list[str], note: str, *, detector: bool = True
) -> HostCosts:
    """The fallback: the registry's measured-once constants (``fit_ms``, ``reusable_ms``);
    ``detector`` False: a recording of one eye, no face detector's cost."""
    from eyeblink.landmarks import EYE_MODELS

    fit = {m: EYE_MODELS[m].fit_ms for m in models}
    reuse = {m: EYE_MODELS[m].fit_ms - EYE_MODELS[m].reusable_ms for m in models}
    return HostCosts(
        FALLBACK_DETECT_MS if detector else 0.0,
        fit,
        reuse,
        measured=False,
        note=note,
        detector=detector,
    )


def _median_ms(fn: Any, reps: int) -> float:
    """Median CPU milliseconds of ``fn()`` over ``reps`` runs: this thread's CPU time, not the wall
    clock, so that other programs (and this process's capture thread, already reading the stream)
    busy while it measures do not inflate the cost (on a loaded 2-core machine the wall clock made
    BlazeFace's 0.7 ms look like 10 ms, and ``auto`` said a model that held the rate could not);
    what the machine has left over is the adaptation's business during the run. The networks run on
    the calling thread (LiteRT with one thread)."""
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        fn()
        times.append((time.thread_time() - t0) * 1000.0)
    return statistics.median(times)


def _decode_ms(frame: np.ndarray, codec: str | None, reps: int) -> float:
    """ms to decode one frame of ``codec`` (0 for raw video; the frame encoded here with PyAV
    first)."""
    if not codec or codec in ("rawvideo", "raw"):
        return 0.0
    import av

    # a video codec's name: PyAV's stub types the context by the name's literal, not a str's
    enc = cast("VideoCodecContext", av.CodecContext.create(codec, "w"))
    enc.width, enc.height = frame.shape[1], frame.shape[0]
    enc.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
    from fractions import Fraction

    enc.time_base = Fraction(1, 500)
    packets = []
    for i in range(reps):
        vf = av.VideoFrame.from_ndarray(frame, format="gray").reformat(format=enc.pix_fmt)
        vf.pts = i
        packets.extend(enc.encode(vf))
    packets.extend(enc.encode(None))
    dec = cast("VideoCodecContext", av.CodecContext.create(codec, "r"))
    dec.thread_count = 1  # one thread: its CPU time is all of the decode's
    times = []
    for pkt in packets:
        t0 = time.thread_time()  # CPU time, as _median_ms
        for out in dec.decode(pkt):
            out.to_ndarray(format="gray")
        times.append((time.thread_time() - t0) * 1000.0)
    if not times:
        raise ValueError(f"the {codec} encoder gave no packets")
    return statistics.median(times[1:] if len(times) > 2 else times)


def measure_costs(
    fitters: dict[str, Any],
    detector: Any,
    *,
    width: int,
    height: int,
    reps: int = 15,
    region: Any = None,
) -> HostCosts:
    """Time each part on this machine on a real face frame of the source's size (~0.3 s in all on a
    2-core AVX2 host): BlazeFace (``detector``, a :class:`~eyeblink.detect.blazeface.FaceDetector`;
    none with ``region``, an :class:`~eyeblink.landmarks.region.EyeRegion`: a recording of one eye
    runs no detector, its cost is 0, and ``fitters`` are region measures, fitted on the region) and
    each of ``fitters`` (``{model: EyeModel}``) with a fresh face mesh and with the mesh reused.
    Medians of ``reps`` runs each, after a warm-up. The decode is added once the source's codec is
    known (:func:`with_decode`). Falls back to :func:`registry_costs` (with the reason) if the frame
    has no face or a part fails."""
    try:
        if region is not None:  # a recording of one eye: no detector; the eye models fit the region
            frame = face_frame(
                max(width, math.ceil(region.box[2])), max(height, math.ceil(region.box[3]))
            )
            face, detect_ms = region, 0.0  # (the region measures take the region itself)
        else:
            frame = face_frame(width, height)
            faces = detector.detect(frame)
            for _ in range(2):
                detector.detect(frame)
            if not faces:
                return registry_costs(list(fitters), "no face found in the measuring frame")
            face = faces[0]
            detect_ms = _median_ms(lambda: detector.detect(frame), reps)
        fit: dict[str, float] = {}
        reuse: dict[str, float] = {}
        for name, fitter in fitters.items():
            fitter.warm_up(frame)
            clock = {"t": 0.0}

            def fresh(f: Any = fitter) -> None:
                if hasattr(f, "restore_tracking"):
                    f.restore_tracking(None)
                if hasattr(f, "set_time"):
                    f.set_time(None)
                f.fit(frame, face)

            def reused(f: Any = fitter, c: dict[str, float] = clock) -> None:
                if hasattr(f, "set_time"):
                    c["t"] += 1e-4  # well inside any mesh_reuse_ms
                    f.set_time(c["t"])
                f.fit(frame, face)

            fresh()
            fit[name] = _median_ms(fresh, reps)
            if getattr(fitter, "mesh_reuse_s", 0.0) > 0 and hasattr(fitter, "set_time"):
                fitter.restore_tracking(None)
                fitter.set_time(0.0)
                fitter.fit(frame, face)  # the mesh the next fits reuse
                reuse[name] = _median_ms(reused, reps)
                fitter.restore_tracking(None)
                fitter.set_time(None)
            else:
                reuse[name] = fit[name]
        return HostCosts(detect_ms, fit, reuse, detector=region is None)
    # measuring is an aid: a failure falls back to the registry, said in the summary
    except Exception as exc:
        log.debug("measuring the host failed", exc_info=True)
        return registry_costs(
            list(fitters), f"measuring failed: {type(exc).__name__}: {exc}", detector=region is None
        )


def with_decode(
    costs: HostCosts, codec: str | None, width: int, height: int, reps: int = 10
) -> HostCosts:
    """``costs`` with the decode of one ``width`` x ``height`` frame of ``codec`` measured (~30 ms
    for MJPG); unchanged, with a note, where this PyAV build cannot encode ``codec``."""
    from dataclasses import replace

    try:
        return replace(costs, decode_ms=_decode_ms(face_frame(width, height), codec, reps))
    except Exception as exc:  # an encoder this PyAV build lacks: the decode is then not counted
        return replace(costs, note=f"decode of {codec} not measured ({type(exc).__name__})")


class CoresBusy:
    """The share of the machine's cores that was busy (:func:`eyeblink.host.cpu_busy_seconds`: all
    but idle and I/O wait) over the last :data:`PERIOD_S` seconds or more: :meth:`share`, None until
    two readings (and where it cannot be read: then :attr:`readable` is False). The browser view
    makes fewer preview images while it is high."""

    PERIOD_S = 2.0

    def __init__(self) -> None:
        # (monotonic, busy CPU seconds, all CPU seconds)
        self._last: tuple[float, float, float] | None = None
        self._share: float | None = None
        self.readable = True

    _read = staticmethod(host.cpu_busy_seconds)  # (the tests give it readings of their own)

    def share(self, now: float) -> float | None:
        if self._last is not None and now - self._last[0] < self.PERIOD_S:
            return self._share
        got = self._read()
        if got is None:
            self.readable = False
            return None
        if self._last is not None and got[1] > self._last[2]:
            share = (got[0] - self._last[1]) / (got[1] - self._last[2])
            # (seconds are floats: all busy can read 1 + 1e-12)
            self._share = min(1.0, max(0.0, share))
        self._last = (now, *got)
        return self._share
