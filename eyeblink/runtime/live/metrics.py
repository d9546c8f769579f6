"""Prometheus metrics of a live run (``prometheus-client``, extra ``metrics``).

The sink (the parent process) owns the registry and serves it over HTTP (``--metrics-port``, bound
to ``127.0.0.1`` unless ``--metrics-host`` says otherwise). Workers do not talk to Prometheus: the
per-frame stage times travel in the result records they already send (``t_decoded`` = arrival,
``t_start``/``t_end`` = analysis, see :data:`eyeblink.runtime.procs.results.RESULT_DTYPE`), and the
loader's counters are shared-memory integers the sink reads at scrape time.

Metrics (all prefixed ``eyeblink_``):

==========================================  =====================================================
``frames_in_total``                         frames received from the source (counter)
``frames_processed_total``                  rows written with a measurement attempt (counter)
``frames_dropped_total``                    frames dropped by the overload policy (gap rows)
                                            (counter)
``frames_without_face_total``               processed frames where no face was found (counter)
``fps{direction="in"|"processed"}``         frames per second over the last second (gauge)
``stage_latency_seconds{stage=…}``          histogram per stage: ``queue`` (arrival -> a worker
                                            starts it), ``analyze`` (detect + landmarks + EAR),
                                            ``deliver`` (worker -> result queue -> reorder -> row),
                                            ``total`` (arrival -> row written)
``queue_depth{queue=…}``                    ``ring`` (frames in flight in shared memory),
                                            ``work`` (batches waiting for workers), ``results``
                                            (batches waiting for the sink), ``reorder``
``face_lost_ratio``                         share of processed frames without a face (gauge)
``blinks_total``                            blink events detected (counter)
``ear{eye="left"|"right"}``                 EAR of the last processed frame (NaN without a face)
``worker_restarts_total``                   worker processes restarted: always 0, the pipeline
                                            stops on a worker failure (WorkerError) instead
``source_reconnects_total``                 stream reconnects (``--reconnect``)
``info{source, version, overload}``         constant 1, labels describe the run
``landmark_model{model}``                   1 for the landmark model the run uses (``--landmarks
                                            auto`` settles it once the source is open)
``adapt_steps_total{direction}``            steps of the cost ladder: ``down`` when frames dropped
                                            or the backlog grew, ``up`` with headroom (counter)
``adapt_level``                             the rung the run is on, 0 = the settings chosen at the
                                            start (gauge; see :mod:`eyeblink.runtime.live.adapt`)
``stream_clock_believed``                   1 while the source's own timestamps agree with the
                                            arrival clock, 0 once they did not (the run then uses
                                            the arrival clock; see :mod:`eyeblink.sources.clock`)
``memory_rss_bytes{process}``               resident memory of each process of the run: ``sink``,
                                            ``loader``, ``worker-N``, ``accelerator-N`` (gauge, read
                                            at scrape time; see :mod:`eyeblink.runtime.live.memory`)
==========================================  =====================================================
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from eyeblink.errors import ConfigError, MissingExtraError

__all__ = ["LATENCY_BUCKETS", "LiveMetrics", "start_metrics_server"]

#: Latency histogram buckets (seconds): 0.5 ms .. 2 s, dense around the 50 ms real-time target.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
)
STAGES = ("queue", "analyze", "deliver", "total")


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise MissingExtraError(
            "--metrics-port needs prometheus-client: pip install 'eyeblink[metrics]'"
        ) from exc
    return prometheus_client


class LiveMetrics:
    """The registry of one live run and the sink-side updates (see the module docstring).

    ``gauges`` maps a ``queue_depth`` label, ``frames_in``, ``frames_dropped`` and ``reconnects`` to
    zero-argument callables read at scrape time (shared counters of the loader),
    ``rows_unpublished`` (optional) to the rows the tap did not publish, and ``memory_rss``
    (optional) to one returning ``{process: RSS bytes or None}``.
    """

    def __init__(self, *, source: str, overload: str, gauges: dict[str, Callable[[], Any]]) -> None:
        from eyeblink.version import __version__

        pc = _client()
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.registry = pc.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.processed = pc.Counter(
            "eyeblink_frames_processed", "Frames analysed and written", registry=r
        )
        self.no_face = pc.Counter(
            "eyeblink_frames_without_face", "Processed frames without a face", registry=r
        )
        self.blinks = pc.Counter("eyeblink_blinks", "Blink events detected", registry=r)
        self.restarts = pc.Counter(
            "eyeblink_worker_restarts",
            "Worker processes restarted (0: a worker failure stops the run)",
            registry=r,
        )
        self.fps = pc.Gauge(
            "eyeblink_fps", "Frames per second over the last second", ["direction"], registry=r
        )
        self.ear = pc.Gauge(
            "eyeblink_ear", "EAR of the last processed frame (NaN: no face)", ["eye"], registry=r
        )
        self.face_lost = pc.Gauge(
            "eyeblink_face_lost_ratio", "Share of processed frames without a face", registry=r
        )
        self.latency = pc.Histogram(
            "eyeblink_stage_latency_seconds",
            "Per-frame latency of each pipeline stage",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        info = pc.Gauge(
            "eyeblink_info", "The live run", ["source", "version", "overload"], registry=r
        )
        info.labels(source=source, version=__version__, overload=overload).set(1)
        self.landmark_model = pc.Gauge(
            "eyeblink_landmark_model", "The landmark model of the run (1)", ["model"], registry=r
        )
        self.adapt_steps = pc.Counter(
            "eyeblink_adapt_steps",
            "Steps of the cost ladder (down: the pipeline fell behind; up: headroom again)",
            ["direction"],
            registry=r,
        )
        self.adapt_level = pc.Gauge(
            "eyeblink_adapt_level",
            "Rung of the cost ladder the run is on (0: as chosen)",
            registry=r,
        )
        for d in ("down", "up"):
            self.adapt_steps.labels(direction=d)
        for eye in ("left", "right"):
            self.ear.labels(eye=eye).set(math.nan)
        for d in ("in", "processed"):
            self.fps.labels(direction=d).set(0)
        self._lat = {s: self.latency.labels(stage=s) for s in STAGES}
        self._fps_in = self.fps.labels(direction="in")
        self._fps_out = self.fps.labels(direction="processed")
        self._ear_l = self.ear.labels(eye="left")
        self._ear_r = self.ear.labels(eye="right")
        self._n = 0
        self._lost = 0
        self.gauges = gauges
        self._closed = threading.Event()
        threading.Thread(target=self._tick, name="eyeblink-metrics-fps", daemon=True).start()

        def frames_in() -> float:
            return float(gauges["frames_in"]())

        class _Shared:
            """Counters and depths owned by other processes, read at scrape time."""

            def collect(self) -> Iterable[Any]:
                yield CounterMetricFamily(
                    "eyeblink_frames_in", "Frames received from the source", value=frames_in()
                )
                yield CounterMetricFamily(
                    "eyeblink_frames_dropped",
                    "Frames dropped by the overload policy (written as gap rows)",
                    value=float(gauges["frames_dropped"]()),
                )
                yield CounterMetricFamily(
                    "eyeblink_source_reconnects",
                    "Stream reconnects",
                    value=float(gauges["reconnects"]()),
                )
                if "clock_believed" in gauges:
                    yield GaugeMetricFamily(
                        "eyeblink_stream_clock_believed",
                        "1 while the source's own timestamps "
                        "agree with the arrival clock, 0 once they did not and the run went on "
                        "on the arrival clock",
                        value=float(gauges["clock_believed"]()),
                    )
                if "rows_unpublished" in gauges:
                    yield CounterMetricFamily(
                        "eyeblink_rows_unpublished",
                        "Rows written but not published (no LSL "
                        "sample, no state): they reached the sink more than --max-latency-ms "
                        "after their frame arrived",
                        value=float(gauges["rows_unpublished"]()),
                    )
                depth = GaugeMetricFamily(
                    "eyeblink_queue_depth", "Items waiting in each queue", labels=["queue"]
                )
                for name, fn in gauges.items():
                    if name.startswith("queue:"):
                        try:
                            depth.add_metric([name[6:]], float(fn()))
                        # qsize() after close / on macOS
                        except (NotImplementedError, OSError, ValueError):
                            depth.add_metric([name[6:]], math.nan)
                yield depth
                if "memory_rss" in gauges:
                    mem = GaugeMetricFamily(
                        "eyeblink_memory_rss_bytes",
                        "Resident memory of each process of the run",
                        labels=["process"],
                    )
                    for role, value in gauges["memory_rss"]().items():
                        if value is not None:
                            mem.add_metric([role], float(value))
                    yield mem

            def describe(self) -> Iterable[Any]:
                return []

        r.register(_Shared())

    def adapted(self, direction: str, level: int) -> None:
        """A step of the cost ladder (eyeblink.runtime.live.adapt): ``direction`` down or up, the
        rung now."""
        self.adapt_steps.labels(direction=direction).inc()
        self.adapt_level.set(level)

    def observe(self, rows: np.ndarray, now: float, blinks: int) -> None:
        """Account for one batch of written rows (a RESULT_DTYPE array) at ``now``
        (perf_counter)."""
        done = rows[~rows["dropped"]]
        n = len(done)
        if n:
            self.processed.inc(n)
            lost = int(n - done["face"].sum())
            if lost:
                self.no_face.inc(lost)
            self._n += n
            self._lost += lost
            self.face_lost.set(self._lost / self._n)
            obs = self._lat
            for td, ts, te in zip(
                done["t_decoded"].tolist(),
                done["t_start"].tolist(),
                done["t_end"].tolist(),
                strict=True,
            ):
                obs["queue"].observe(ts - td)
                obs["analyze"].observe(te - ts)
                obs["deliver"].observe(now - te)
                obs["total"].observe(now - td)
            last = done[-1]
            self._ear_l.set(float(last["ear_left"]))
            self._ear_r.set(float(last["ear_right"]))
        if blinks:
            self.blinks.inc(blinks)

    def _tick(self) -> None:
        """Refresh the FPS gauges once a second (a daemon thread: FPS falls to 0 when frames
        stop)."""
        last_in, last_out, last_t = 0.0, 0, time.perf_counter()
        while not self._closed.wait(1.0):
            now = time.perf_counter()
            fin, fout = float(self.gauges["frames_in"]()), self._n
            self._fps_in.set((fin - last_in) / (now - last_t))
            self._fps_out.set((fout - last_out) / (now - last_t))
            last_in, last_out, last_t = fin, fout, now

    def close(self) -> None:
        self._closed.set()


def start_metrics_server(
    metrics: LiveMetrics, port: int, host: str = "127.0.0.1"
) -> tuple[Any, int]:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread; returns the server and the bound
    port."""
    pc = _client()
    if not 0 <= port <= 65535:
        raise ConfigError(f"--metrics-port must be in 0..65535, got {port}")
    try:
        server, _thread = pc.start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on {host}:{port} ({exc.strerror or exc}); choose another "
            "--metrics-port"
        ) from None
    return server, int(server.server_address[1])
