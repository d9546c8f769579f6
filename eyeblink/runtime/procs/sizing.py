"""How many loaders feed the workers of a multiprocess run: the placement model of decode and worker
costs.

An estimate for placing processes, never for rows: a worker's CPU per frame from the eye model's
registered cost (:func:`worker_ms_per_frame`), a decode probe on the input's first frames
(:func:`_probe_decode_ms`), and the rule that turns them into a loader count
(:func:`choose_loaders`); ``eyeblink bench`` measures the same costs.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

from eyeblink.config import ParallelConfig, RunConfig, physical_cores

#: Placement model of the loaders (ms of one core per 640x480 frame; ``eyeblink bench`` measures
#: them). A landmark worker's frame costs ~0.8 ms with the default eye model (``lids``: the lid
#: network every frame, the face mesh and BlazeFace every ~10th) to 3.5-5 ms (``mesh``, or detection
#: on every frame); a file's decode ~1 ms (MJPG) to ~1.5 ms (H.264) of CPU. The fallback when the
#: eye model's cost is not known:
WORKER_MS_PER_FRAME = 1.7
#: A frame's CPU outside its networks and decoding (the worker's Python per frame, the hand-off, the
#: sink and the CSV writer): measured with ``lids`` on real 640x480 MJPG frames at 500 FPS, 2-core
#: AVX-512 VM, per process over a whole 20,000-frame file: the workers ~0.14 ms besides their
#: networks' ~0.25, the sink ~0.085 (its start-up included), rounded up. Not a network, so not ~3x
#: dearer on an AVX2-only host.
FRAME_OVERHEAD_MS = 0.25
#: BlazeFace runs per detection (a segment's first frame looks at four quarter turns): 1.24 on real
#: recordings.
DETECT_RUNS_PER_KEYFRAME = 1.24
#: From this many cores, loaders by the throughput rule (see :func:`choose_loaders`).
MIN_CORES_FOR_LOADERS = 4
#: Below :data:`MIN_CORES_FOR_LOADERS` cores, a second loader when one loader would need at least
#: this share of a core to keep the cores busy (with the decode cost :func:`_probe_decode_ms`
#: measures). Measured on 2 cores (AVX-512 VM, real 640x480 MJPG, 20,000 frames, alternated runs):
#: with ``lids`` (share ~1.2) a second loader raised the cores' use from 0.86 to 0.97 and the rate
#: by 7-12 %; with ``mesh`` (share ~0.75) it changed nothing. Again later, keyframes 50 ms apart
#: (share ~1.1): 0.80 -> 0.96 of the cores, 1,272-1,308 -> 1,484-1,498 FPS.
SECOND_LOADER_SHARE = 1.0


def worker_ms_per_frame(cfg: RunConfig, fps: float | None) -> float:
    """A landmark worker's CPU per frame under ``cfg`` at ``fps`` (the registry's costs,
    :data:`FRAME_OVERHEAD_MS`).

    An estimate for placing processes (never for rows): the eye model's cost with its reuse at
    ``fps``, the detector's keyframes, the per-frame overhead. :data:`WORKER_MS_PER_FRAME` when the
    model is not registered.
    """
    from eyeblink.landmarks import EYE_MODELS
    from eyeblink.runtime.costs import FALLBACK_DETECT_MS

    spec = EYE_MODELS.get(cfg.landmarks.model)
    if spec is None:
        return WORKER_MS_PER_FRAME
    rate = fps if fps and fps > 0 else 500.0
    detect = FALLBACK_DETECT_MS * DETECT_RUNS_PER_KEYFRAME / cfg.detect.keyframe_frames(rate)
    return spec.cost_ms(rate, cfg.landmarks.mesh_reuse_ms) + detect + FRAME_OVERHEAD_MS


def loader_share(decode_ms: float, worker_ms: float, cores: int) -> float:
    """The share of one core a single loader needs to keep ``cores`` busy: ``decode x cores /
    (decode + worker)``."""
    return decode_ms * cores / max(decode_ms + worker_ms, 1e-9)


def choose_loaders(
    par: ParallelConfig,
    workers: int,
    source: Any,
    *,
    cores: int | None = None,
    decode_ms: float | None = None,
    worker_ms: float = WORKER_MS_PER_FRAME,
) -> int:
    """How many loaders feed ``workers`` landmark workers (``par.loaders`` when set).

    From :data:`MIN_CORES_FOR_LOADERS` cores the rule is throughput: frames flow at ``min(L /
    decode_ms, W / worker_ms)``, so ``L = ceil(W x decode_ms / worker_ms)`` loaders keep ``W``
    workers busy; capped at a quarter of the cores (the workers are the expensive stage). Below it
    the cores are shared by every process, and the rule is the loader's share: at the rate the cores
    allow, one loader must run ``decode_ms x cores / (decode_ms
    + worker_ms)`` of a core; from :data:`SECOND_LOADER_SHARE` on (a cheap eye model on a costly
      codec) a second
    loader keeps the cores busy, otherwise one. ``decode_ms`` (CPU time) is measured on the input's
    first frames when not given. One worker or one core: one loader.
    """
    if par.loaders:
        return par.loaders
    cores = cores or physical_cores()
    if cores < 2 or workers <= 1:
        return 1
    if decode_ms is None:
        decode_ms = _probe_decode_ms(source)
    if cores < MIN_CORES_FOR_LOADERS:
        return 2 if loader_share(decode_ms, worker_ms, cores) >= SECOND_LOADER_SHARE else 1
    need = math.ceil(workers * decode_ms / worker_ms - 1e-9)
    return max(1, min(need, cores // 4))


def time_decode(source: Any, frames: int) -> tuple[int, float]:
    """Decode at most ``frames`` frames of ``source`` in this process: (frames decoded, seconds)."""
    t0 = time.perf_counter()
    n = 0
    for _ in source:
        n += 1
        if n >= frames:
            break
    return n, time.perf_counter() - t0


def _probe_decode_ms(source: Any, frames: int = 48) -> float:
    """User CPU ms per frame of decoding ``source`` in this process: frames 2 to ``frames`` (~50 ms
    in all).

    User CPU time (the decoder's threads included), not the wall clock: what decoding takes from the
    cores whatever else runs, without the kernel's time reading a file not yet cached. The first
    frame (the decoder's set-up) is not counted. The first frames cost more than the rest (MJPG
    640x480 here: ~1.3 ms against ~0.95 over a whole file); :data:`SECOND_LOADER_SHARE` is set on
    this measure.
    """
    from eyeblink.host import process_cpu_seconds

    n, t0 = 0, 0.0
    for _ in source:
        n += 1
        if n == 1:
            t0 = process_cpu_seconds(user_only=True) or 0.0
        if n >= frames:
            break
    seconds = (process_cpu_seconds(user_only=True) or 0.0) - t0
    with contextlib.suppress(Exception):
        source.close()
    return seconds * 1000.0 / max(n - 1, 1)
