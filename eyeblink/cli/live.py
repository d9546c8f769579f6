"""``eyeblink live``: its options, the frozen configs built from them, and the run's one line.

The eye model is settled here once, before anything loads (:func:`live_config`): ``--landmarks
auto`` (live's default) is ``auto`` in :class:`~eyeblink.config.LiveConfig`, and the run picks the
model when the source's rate is known (:func:`eyeblink.runtime.choose.choose_landmarks`); a model
named here is the one of both configs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from eyeblink.cli import options as shared  # the flags and config builders every command shares
from eyeblink.config import (
    LIVE_BATCH_FRAMES,
    LIVE_CHUNK_FRAMES,
    LIVE_LANDMARKS,
    LIVE_PRIORITIES,
    OVERLOAD_POLICIES,
    LiveConfig,
    RunConfig,
)
from eyeblink.errors import ConfigError


def add_parser(sub: Any) -> None:
    """The ``live`` subcommand."""
    from eyeblink.sources.live import STREAM_SCHEMES

    p = sub.add_parser(
        "live",
        help="process a camera or network stream in real time (rows written as frames arrive)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Process a live feed as it arrives into <stem>.frames.csv (plus a `dropped` "
        "column), "
        "<stem>.blinks.csv and <stem>.summary.json. Ctrl-C or SIGTERM stops the capture, drains "
        "the pipeline, flushes every file and exits 0.",
        epilog="SOURCE:\n  0, camera:0, /dev/video0     a V4L2 camera (OpenCV)\n"
        f"  {'://, '.join(STREAM_SCHEMES)}://...\n"
        "                               a network stream FFmpeg opens (PyAV, low-latency "
        "probing),\n"
        "                               e.g. tcp://127.0.0.1:5000, udp://@:1234, "
        "rtsp://cam/stream\n"
        "  basler:, basler:SERIAL       a Basler/GenICam camera (pip install 'eyeblink[basler]')",
    )
    p.add_argument(
        "source", metavar="SOURCE", help="camera index, stream URL or basler:[SERIAL] (see below)"
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="OUTDIR", help="output directory (created)"
    )
    p.add_argument(
        "--name", metavar="STEM", default=None, help="output file stem (default: from the source)"
    )
    g = p.add_argument_group("real time")
    g.add_argument(
        "--on-overload",
        choices=OVERLOAD_POLICIES,
        default="drop",
        help="when the pipeline falls behind and the buffer is full: drop the frame (written as a "
        "gap row, dropped=1) or block the capture (the source backs up) (default: %(default)s)",
    )
    g.add_argument(
        "--max-latency-ms",
        type=float,
        default=250.0,
        metavar="MS",
        help="with --on-overload drop, the latency bound: a frame still waiting half of MS "
        "milliseconds after it arrived is not analysed but written as a gap row (dropped=1), so "
        "that "
        "under overload the newest frames win; a row that still reaches the end of the pipeline "
        "more than MS after its frame arrived is written but not published (no LSL sample, no "
        "state) (default: %(default)s)",
    )
    g.add_argument(
        "--buffer",
        type=float,
        default=1.0,
        metavar="S",
        help="frames buffered in shared memory, in seconds at the source's rate (default: "
        "%(default)s)",
    )
    g.add_argument(
        "--no-adapt",
        action="store_true",
        help="never step down to cheaper settings (longer face-mesh reuse, fewer keyframes, a "
        "cheaper "
        "eye model) when frames drop or the backlog grows; by default each step is a warning line, "
        "a metric and a summary entry",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="worker processes (default: physical cores)",
    )
    g.add_argument(
        "--chunk-frames",
        type=int,
        default=LIVE_CHUNK_FRAMES,
        metavar="N",
        help="frames dealt to one worker at a time; each worker keeps tracking the face across its "
        "chunks (default: %(default)s)",
    )
    g.add_argument(
        "--batch-frames",
        type=int,
        default=LIVE_BATCH_FRAMES,
        metavar="N",
        help="frames per queue message (default: %(default)s)",
    )
    g.add_argument(
        "--duration", type=float, default=None, metavar="S", help="stop after S seconds of capture"
    )
    g.add_argument(
        "--priority",
        choices=LIVE_PRIORITIES,
        default=None,
        help="run the capture and the frame path (sink, loader, workers) ahead of other programs: "
        "high "
        "(nice -10) or realtime (the real-time scheduling class); needs root, CAP_SYS_NICE or a "
        "ulimit that allows it (on Windows realtime needs an administrator), else one line says so "
        "and the run goes on (default: the preset's [live] priority, normal in the shipped "
        "presets)",
    )
    g.add_argument(
        "--record",
        default=None,
        metavar="FILE",
        help="also keep the frames as received, with their timestamps, in FILE (.nut: raw gray, "
        "lossless), written by a thread of its own; `eyeblink process FILE` re-analyses them; an "
        "existing FILE is refused unless --overwrite",
    )
    g.add_argument(
        "--overwrite", action="store_true", help="with --record: replace FILE if it exists"
    )
    g.add_argument(
        "--report",
        action="store_true",
        help="at the end of the capture also write OUTDIR/<stem>.report.html (as `eyeblink report` "
        "does), with the eye crops of every blink kept during the capture",
    )
    s = p.add_argument_group("streams")
    s.add_argument(
        "--reconnect",
        type=int,
        default=0,
        metavar="N",
        help="reopen a stream that ends or fails up to N times (default: %(default)s)",
    )
    s.add_argument(
        "--stream-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an FFmpeg option for the stream (repeatable), e.g. rtsp_transport=tcp",
    )
    s.add_argument(
        "--read-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="a stream silent this long is lost (default: %(default)s)",
    )
    lab = p.add_argument_group(
        "lab programs: Lab Streaming Layer and the trial gate (docs: guides/lab-programs)"
    )
    lab.add_argument(
        "--lsl",
        action="store_true",
        help="publish two LSL streams (pip install 'eyeblink[lsl]'): NAME, one sample per frame "
        "(openness_left, openness_right, closure, face, frame) stamped with the frame's capture "
        "time on LSL's clock, and NAME-markers (state:<state>, blink_start, blink_end, "
        "open_stable, prolonged_closure, face_lost, face_found)",
    )
    lab.add_argument(
        "--lsl-name",
        default="eyeblink",
        metavar="NAME",
        help="name of the LSL sample stream; the marker stream is NAME-markers (default: "
        "%(default)s)",
    )
    lab.add_argument(
        "--lsl-wait",
        type=float,
        default=0.0,
        metavar="S",
        help="before connecting the source, wait up to S seconds for an LSL inlet (e.g. "
        "LabRecorder) "
        "on the sample stream, so that it gets every sample (default: %(default)s, no wait)",
    )
    lab.add_argument(
        "--gate-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the eye state on tcp://127.0.0.1:PORT as JSON lines, one per state change and "
        "event (0 = any free port, printed at start; default: no socket)",
    )
    lab.add_argument(
        "--stable-ms",
        type=float,
        default=200.0,
        metavar="MS",
        help="the open_stable event: the eye state open held for MS milliseconds of capture time "
        "(default: %(default)s)",
    )
    lab.add_argument(
        "--max-age-ms",
        type=float,
        default=50.0,
        metavar="MS",
        help="freshness bound: no 'open' is reported about a frame received more than MS "
        "milliseconds "
        "ago; the gate and the markers say 'stale' instead, within MS of a stall "
        "(default: %(default)s)",
    )
    lab.add_argument(
        "--settle-ms",
        type=float,
        default=10.0,
        metavar="MS",
        help="a new eye state is reported once it has lasted MS milliseconds of capture time "
        "(no single-frame flicker; 0: every change at once) (default: %(default)s)",
    )
    lab.add_argument(
        "--face-lost-ms",
        type=float,
        default=200.0,
        metavar="MS",
        help="face_lost only after no face has been fitted for MS milliseconds; dropped frames "
        "never count (default: %(default)s)",
    )
    shared.add_view_options(p)
    shared.add_start_method(p)
    m = p.add_argument_group("metrics (pip install 'eyeblink[metrics]')")
    m.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (0 = any free port)",
    )
    m.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics server binds (default: %(default)s; 0.0.0.0 exposes it)",
    )
    # FEC, trials, plots, NWB: done when the capture has ended, as in process
    shared.add_analysis_options(p)
    shared.add_log_options(p)
    shared.add_run_options(p)
    for action in p._actions:  # live mode also takes --landmarks auto, its default
        if "--landmarks" in action.option_strings:
            action.choices = LIVE_LANDMARKS
            action.help = (
                "eye model: auto (default: lids when this machine runs it at the source's rate, "
                "else "
                "the cheaper of lids and mesh-ear, said in the first line; costs measured on this "
                "machine "
                "before the capture) or a model: " + ", ".join(LIVE_LANDMARKS[1:])
            )


def stream_options(items: list[str]) -> dict[str, str]:
    """``--stream-option KEY=VALUE`` items as a dict."""
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--stream-option must be KEY=VALUE, got {item!r}")
        options[key] = value
    return options


def live_config(args: argparse.Namespace, cfg: RunConfig) -> LiveConfig:
    """The :class:`~eyeblink.config.LiveConfig` of ``eyeblink live``'s flags; every number in its
    range (``config.LIVE_RANGES``), as in the API. The eye model is settled here, once: no
    ``--landmarks`` (or ``auto``) and no model file (flag or preset) is ``auto``, the model this
    machine runs at the source's rate (chosen when the source is connected); else the model of
    ``cfg``, so that the two configs name the same one. ``--priority`` given wins over the preset's
    ``[live] priority``."""
    auto = args.landmarks in (None, "auto") and cfg.landmarks.model_path is None
    return LiveConfig(
        overload=args.on_overload,
        workers=args.workers,
        chunk_frames=args.chunk_frames,
        batch_frames=args.batch_frames,
        buffer_s=args.buffer,
        duration_s=args.duration,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        landmarks="auto" if auto else cfg.landmarks.model,
        lsl=args.lsl,
        lsl_name=args.lsl_name,
        lsl_wait_s=args.lsl_wait,
        gate_port=args.gate_port,
        stable_ms=args.stable_ms,
        max_age_ms=args.max_age_ms,
        settle_ms=args.settle_ms,
        face_lost_ms=args.face_lost_ms,
        max_latency_ms=args.max_latency_ms,
        record=args.record,
        overwrite=args.overwrite,
        adapt=not args.no_adapt,
        priority=args.priority or cfg.live.priority,
        **shared.view_settings(args),
    )


def cmd_live(args: argparse.Namespace) -> int:
    """``eyeblink live``: open the source, run, print one line; the exit status."""
    from eyeblink.api import check_workers
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.runtime.live.capture import finish, prepare
    from eyeblink.runtime.live.publish import LiveTap
    from eyeblink.sources.live import StreamOptions

    check_workers(args.workers)  # before any model loads or process forks (0 = physical cores)
    cfg = shared.analysed_run_config(args)
    options = stream_options(args.stream_option)
    live = live_config(args, cfg)
    stream = StreamOptions(
        options=options, read_timeout_s=args.read_timeout, reconnect=args.reconnect
    )
    outdir = ensure_output_dir(Path(args.output))
    analysis = shared.analysis_options(args)
    # the outputs, before any model loads: the lsl extra missing, the view's port taken refused now
    tap = LiveTap.from_config(
        live,
        cfg.blink_settings().max_blink_ms,
        announce=lambda text: print(f"eyeblink: {text}", file=sys.stderr, flush=True),
    )
    pipe, source, _ = prepare(
        args.source,
        cfg,
        live,
        name=args.name,
        report=args.report,
        analysis=analysis,
        stream=stream,
        start_method=args.start_method,
    )
    from eyeblink.outputs.lock import session_locks

    # one writer per session: before the capture connects
    with session_locks(outdir, [source.name]):
        with source:
            result, run = pipe.run(source, outdir, tap=tap)
        # the capture ended normally (end of stream, --duration, a signal): calibrate the session's
        # FEC column and write trials, traces, plots and NWB as `process` does (a failed run keeps
        # its provisional rows), with the run's config (with auto: the eye model it chose once the
        # source's rate was known)
        result = finish(result, run.cfg, analysis)
    s = result.summary
    lv = s.get("live", {})
    t = s.get("timings", {})
    p99 = t.get("latency_ms_p99")
    processed = result.frames - (lv.get("frames_dropped") or 0)
    from eyeblink.signals.plausibility import count_words, kind_counts

    print(
        f"{result.stem}: {lv.get('stop_reason')}; {lv.get('frames_in')} frames in, {processed} "
        "processed, "
        f"{lv.get('frames_dropped')} dropped, face in {result.faces}, "
        f"{count_words(*kind_counts(result.blinks))}, "
        f"p99 latency {'-' if p99 is None else f'{p99:.0f} ms'} -> "
        f"{result.outputs['frames'].parent}",
        file=sys.stderr,
    )
    if args.report:
        from eyeblink.outputs.report import write_report

        print(
            f"{result.stem}: report {write_report(result.outputs['frames'].parent / result.stem)}",
            file=sys.stderr,
        )
    return 0
