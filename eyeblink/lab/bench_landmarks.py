"""``eyeblink bench landmarks``: the cost of one eye-model fit, per model, on one core.

Every frame of the input (``--input VIDEO``, real faces preferred; default: the synthetic recording
of ``eyeblink bench``) is decoded and its face detected first (untimed); then each eye model
(``--models``, default: every registered model that can be built here) fits every face, timed with
``perf_counter`` around ``fit`` alone. As in the pipeline (the ``cpu`` preset), a face box is held
for ``--detect-every`` frames (10) and each fit knows its frame's timestamp, so ``mesh`` reuses its
face mesh for ``landmarks.mesh_reuse_ms`` (20 ms); ``mesh, reuse 0`` is ``mesh`` running the face
mesh on every frame (``--mesh-reuse-ms 0``). The process is pinned to one core and every LiteRT
interpreter runs one thread, as in the pipeline's workers. The first ``--warmup`` fits per model are
not counted (XNNPACK packs its weights on the first invoke, dlib pages its model in).

Printed: per model, faces timed, median, mean and p10/p90/p99 ms per fit (with the mesh reused,
most fits skip the mesh: the mean is the cost per frame), and the fits per second one core
sustains at the median; ``--json`` also writes them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        metavar="VIDEO",
        default=None,
        help="recording to fit (default: the synthetic recording of `eyeblink bench`)",
    )
    p.add_argument(
        "--frames", type=int, default=600, metavar="N", help="at most N frames (default 600)"
    )
    p.add_argument(
        "--models",
        default=None,
        metavar="LIST",
        help="comma-separated eye models (default: every registered model that can be built here)",
    )
    p.add_argument(
        "--detect-every",
        type=int,
        default=None,
        metavar="N",
        help="hold each detected box for N frames, as the pipeline does (default from the cpu "
        "preset)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=20,
        metavar="K",
        help="untimed fits per model first (default 20)",
    )
    p.add_argument(
        "--cache-dir", default=None, metavar="DIR", help="cache of the synthetic recording"
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def models(args: argparse.Namespace) -> list[str]:
    """The eye models to time (checked: an unknown name or bad number is a ConfigError before any
    work)."""
    from eyeblink.errors import ConfigError
    from eyeblink.landmarks import check_eye_model, face_models

    if (
        args.frames < 1
        or args.warmup < 0
        or (args.detect_every is not None and args.detect_every < 1)
    ):
        raise ConfigError(
            f"--frames and --detect-every must be >= 1 and --warmup >= 0, got {args.frames}, "
            f"{args.detect_every} and {args.warmup}"
        )
    return (
        [check_eye_model(m.strip()) for m in args.models.split(",")]
        if args.models
        else face_models()
    )


def run(args: argparse.Namespace, video: Path, machine: dict[str, Any]) -> int:
    """Time every model of :func:`models` on the faces of ``video`` (``machine``: what to print
    it ran on)."""
    from eyeblink.config import load_preset
    from eyeblink.detect import create_detector
    from eyeblink.detect.blazeface import FaceDetector
    from eyeblink.errors import BackendUnavailableError, ConfigError
    from eyeblink.landmarks import EYE_MODELS, create_eye_model
    from eyeblink.presets import resolve_preset
    from eyeblink.sources.files import open_source

    names = models(args)
    preset = load_preset(resolve_preset("cpu"))
    every = args.detect_every or preset.detect.detect_every
    from eyeblink.host import pin_to_one_core

    # one core, as one pipeline worker (macOS has no CPU affinity: whatever core runs it)
    pin_to_one_core()
    frames: list[Any] = []
    faces: list[Any] = []
    times_s: list[float] = []
    with (
        FaceDetector.from_detector(create_detector("litert")) as detector,
        open_source(video) as src,
    ):
        for fr in src:
            found = detector.detect(fr.gray)
            if found:
                # the keyframe's box, as tracked
                held = len(frames) % every and faces[-1].iou(found[0]) > 0.5
                frames.append(fr.gray.copy())
                faces.append(faces[-1] if held else found[0])
                times_s.append(fr.timestamp_s)
            if len(frames) + 1 > args.frames:
                break
    if not frames:
        raise ConfigError(
            f"no face found in the first {args.frames} frames of {video}; give a recording with a "
            "face"
        )
    print(
        f"eyeblink bench landmarks: {video}, {len(frames)} frames with a face, one core "
        f"({machine['cpu']} [{machine['host_class']}: {' '.join(machine['vector']) or 'no AVX'}], "
        f"Python {machine['python']})",
        flush=True,
    )
    results: dict[str, Any] = {}
    variants = [(name, name, preset.landmarks.options(name)) for name in names]
    for reusing in ("lids", "mesh"):  # the mesh on every frame, too (what a 30 FPS camera gets)
        if reusing in names:
            variants.insert(
                names.index(reusing) + 1, (f"{reusing}, reuse 0", reusing, {"mesh_reuse_ms": 0.0})
            )
    for label, name, settings in variants:
        try:
            model = create_eye_model(name, **settings)
        except BackendUnavailableError as exc:
            print(f"  {label}: skipped ({exc})")
            continue
        set_time = getattr(model, "set_time", lambda t: None)
        for k in range(min(args.warmup, len(frames))):
            model.fit(frames[k], faces[k])
        times, net_times = [], []
        for gray, face, t in zip(frames, faces, times_s, strict=True):
            set_time(t)
            net0 = getattr(model, "network_s", None)
            t0 = time.perf_counter()
            model.fit(gray, face)
            times.append((time.perf_counter() - t0) * 1000.0)
            # lids: the lid network's own part of this fit (strip cut + LiteRT run)
            if net0 is not None:
                net_times.append((getattr(model, "network_s") - net0) * 1000.0)  # noqa: B009
        runs = getattr(model, "mesh_runs", None)
        model.close()
        med = statistics.median(times)
        results[label] = {
            "faces": len(times),
            "median_ms": med,
            "mean_ms": statistics.fmean(times),
            "p10_ms": _percentile(times, 0.1),
            "p90_ms": _percentile(times, 0.9),
            "p99_ms": _percentile(times, 0.99),
            "fits_per_s_one_core": 1000.0 / med,
            "fit_ms_registry": EYE_MODELS[name].fit_ms,
            "settings": settings,
            **({"mesh_runs": runs} if runs is not None else {}),
            **(
                {
                    "network_median_ms": statistics.median(net_times),
                    "network_mean_ms": statistics.fmean(net_times),
                }
                if net_times
                else {}
            ),
        }
    print("\n| model | faces | median ms | mean ms | p10–p90 ms | p99 ms | fits/s on one core |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['faces']} | {r['median_ms']:.2f} | {r['mean_ms']:.2f} | "
            f"{r['p10_ms']:.2f}–"
            f"{r['p90_ms']:.2f} | {r['p99_ms']:.2f} | {r['fits_per_s_one_core']:,.0f} |"
        )
    for name, r in results.items():
        if "network_median_ms" in r:
            print(
                f"\n{name}: the lid network alone (strip cut + one LiteRT run for both eyes), per "
                "frame: "
                f"median {r['network_median_ms']:.3f} ms, mean {r['network_mean_ms']:.3f} ms"
            )
    if args.json:
        from eyeblink.outputs.paths import write_text

        write_text(
            args.json,
            json.dumps({"input": str(video), "machine": machine, "models": results}, indent=2)
            + "\n",
            "--json",
        )
    return 0
