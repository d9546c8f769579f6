"""The worker role of a multiprocess run: detect, fit and measure each frame of the chunks it is
dealt.

A fused worker (:meth:`_WorkerRole._worker_main`) builds its detector after the fork, reads frame
records from its queue and the pixels from the ring, and sends one record array of rows per batch to
the sink (:mod:`eyeblink.runtime.procs.results`). On an accelerator, the stage's processes and their
post-processing workers run here too (:mod:`eyeblink.runtime.procs.accelerator`). The
fault-injection test hook (``EYEBLINK_TEST_WORKER_FAULT``, see
:mod:`eyeblink.runtime.procs.parallel`) is read and applied here.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from eyeblink import host
from eyeblink.config import RunConfig
from eyeblink.errors import ConfigError
from eyeblink.frame.analyzer import (
    ChunkStates,
    FrameAnalyzer,
    FrameResult,
    StageClock,
    build_fitter,
)
from eyeblink.frame.keyframes import BesideKeyframes
from eyeblink.frames import Frame
from eyeblink.runtime.pipeline import build_detector
from eyeblink.runtime.procs.results import encode_batch, record_dtype, rows_message
from eyeblink.runtime.procs.roles.base import _POLL_S, _ChildRole, _Stop
from eyeblink.runtime.procs.shm import FrameRing

#: Environment variable of the fault-injection test hook (see
#: :mod:`eyeblink.runtime.procs.parallel`).
FAULT_ENV = "EYEBLINK_TEST_WORKER_FAULT"


def _warm_up(detector: Any, fitter: Any, source: Any) -> None:
    """One detection and one fit on a blank frame before the first real one.

    The first LiteRT invoke packs XNNPACK's weights (detector, mesh) and a first dlib fit pages in
    its model, together ~100-200 ms: paid here, before a live capture starts, instead of on the
    first frames.
    """
    h, w = int(getattr(source, "height", 0) or 480), int(getattr(source, "width", 0) or 640)
    blank = np.full((h, w), 128, np.uint8)
    detector.detect(blank)
    fitter.warm_up(blank)


def live_analyzer(config: RunConfig, warm: FrameAnalyzer, fitters: dict[str, Any]) -> FrameAnalyzer:
    """A live worker's analyzer on the run's ``config`` (resolved at connection), before its first
    frame: the networks of ``warm`` (built and warmed up before the source connected), the eye model
    ``config`` names (one of ``fitters`` with ``--landmarks auto``; a recording of one eye: the
    measure its survey chose, built here), the same tracking layout."""
    fitter = fitters.get(config.landmarks.model, warm.fitter)
    if getattr(config, "eye_measure", None) is not None and config.landmarks.model not in fitters:
        # a recording of one eye: the measure the stream's survey chose (contour: on the eye's axis
        # it found)
        fitter = build_fitter(config)
        fitter.warm_up(np.full((480, 640), 128, np.uint8))
    analyzer = FrameAnalyzer(config, warm.detector, fitter, warm.clock)
    analyzer.segment_frames = warm.segment_frames
    analyzer.keyframes = warm.keyframes
    return analyzer


def beside_keyframes(config: RunConfig, fitters: Any, source: Any) -> BesideKeyframes | None:
    """A live worker's thread for keyframe work (:mod:`eyeblink.frame.keyframes`), its networks
    warmed up on a blank frame; None when lagging is off or no eye model of the run places apart
    from measuring."""
    fitter = next((f for f in fitters if hasattr(f, "new_mesher")), None)
    if fitter is None or config.detect.keyframe_lag_ms <= 0:
        return None
    beside = BesideKeyframes(build_detector(config), fitter.new_mesher())
    h, w = int(getattr(source, "height", 0) or 480), int(getattr(source, "width", 0) or 640)
    blank = np.full((h, w), 128, np.uint8)
    beside.detector.detect(blank)
    beside.mesher.warm_up(blank)
    return beside


_PAUSE_S = 2.0  # the pause@K test hook's pause


def _parse_fault() -> tuple[str, int] | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    kind, _, at = spec.partition("@")
    if kind not in ("raise", "exit", "stall", "pause", "slowstart") or not at.strip().isdigit():
        raise ConfigError(
            f"{FAULT_ENV} must be 'raise@K', 'exit@K', 'stall@K', 'pause@K' (K a frame index) or "
            f"'slowstart@S' (S seconds), got {spec!r}"
        )
    return kind, int(at)


class _WorkerRole(_ChildRole):
    """The workers' methods, and the accelerator stage's children (a mixin of
    :class:`eyeblink.runtime.procs.parallel._Run`)."""

    def _on_batch(self, analyzer: FrameAnalyzer, fitters: dict[str, Any]) -> None:
        """Before each batch a worker runs: files run as configured (live mode steps down under
        load)."""

    def _worker_main(self, wid: int) -> None:
        self._child_setup()
        frame_index = -1
        try:
            # self.cfg: a file's run config; a live worker is forked before its source connects, and
            # reads the requested config until the ring's message brings the run's (resolved) one
            detector = build_detector(self.cfg)
            # the eye models: the parent's (forked) or loaded here once (spawned); live: the models
            # to pick from
            fitters = self.pipe.eye_models()
            for fitter in fitters.values():
                _warm_up(detector, fitter, self.source)
            analyzer = FrameAnalyzer(self.cfg, detector, self.pipe.fitter, StageClock())
            track = self.par.track_across_chunks
            # live: each worker tracks the face across its own chunks, no segment restarts
            if track:
                analyzer.segment_frames = None
                analyzer.keyframes = beside_keyframes(self.cfg, fitters.values(), self.source)
            self._worker_ready(wid)
            ring = self.ring  # None: forked before the ring existed; its first message names it
            # the stage's hook
            fault = self.fault if self.fault is None or self.fault[0] != "slowstart" else None
            late = self.late_s
            preview = self.preview  # --view: the eye points of the frame the view shows
            row_dtype = record_dtype(self.cfg)
            chunk = -1
            chunks = ChunkStates(self.C)
            ends = 0
            while True:
                msg = self._get(self.work_qs[wid])
                if msg is None:  # one per loader: each sends its own after its last frame
                    ends += 1
                    if ends < self.n_loaders:
                        continue
                    break
                if msg[0] == "ring":
                    _, name, spec, prefault, config = msg
                    ring = self.ring = FrameRing.attach(name, spec)
                    ring.prefault(prefault)
                    # live: the run's config, resolved at connection (--landmarks auto: the model
                    # picked for the source's rate), stored once in this process too; the analyzer
                    # of the frames is built on it
                    self.cfg = config
                    analyzer = live_analyzer(config, analyzer, fitters)
                    continue
                assert ring is not None
                t_got = time.perf_counter()
                c, first, slots, ts, td = msg
                self._on_batch(analyzer, fitters)
                # a new chunk: forget the tracked face (keyframe on its first frame)
                if c != chunk and not track:
                    chunks.switch(analyzer, chunk, c)
                    chunk = c
                out = np.zeros(len(slots), row_dtype)
                # the batch's analysed frames: encoded into out at once (encode_results)
                done_at: list[int] = []
                done: list[FrameResult] = []
                t_starts: list[float] = []
                t_ends: list[float] = []
                # Python ints and floats: no numpy scalar per frame
                slot_l, ts_l = slots.tolist(), ts.tolist()
                for j in range(len(slots)):
                    frame_index = first + j
                    if fault is not None and fault[1] == frame_index and fault[0] == "pause":
                        time.sleep(_PAUSE_S)  # slow on frame K for a moment, then on as usual
                    elif fault is not None and fault[1] == frame_index:
                        # a crash on frame K, not in the middle of IPC: the rows
                        if fault[0] == "exit":
                            # already sent leave the queue's feeder thread first (on any
                            self.out_q.close()
                            self.out_q.join_thread()  # machine: no timed pause)
                            os._exit(70)
                        if j:  # the rows before the failing frame are computed: send them first
                            encode_batch(out, td, done_at, done, t_starts, t_ends, t_got)
                            self._put(self.out_q, rows_message(wid, out[:j]))
                        # stuck on frame K until the run is stopped (Ctrl-C, SIGTERM)
                        if fault[0] == "stall":
                            while not self.stop.wait(_POLL_S) and host.parent_alive():
                                pass
                            raise _Stop
                        raise RuntimeError(f"injected failure at frame {frame_index} ({FAULT_ENV})")
                    if slot_l[j] < 0 or (
                        late is not None
                        and time.perf_counter() - td[j] > late
                        and frame_index >= self.late_from()
                    ):
                        # dropped by the live loader (eyeblink.runtime.live.pipeline), or too late
                        # to be worth it: a gap row
                        out[j]["index"], out[j]["timestamp_s"], out[j]["t_decoded"] = (
                            frame_index,
                            ts[j],
                            td[j],
                        )
                        out[j]["dropped"] = True
                        continue
                    t_starts.append(time.perf_counter())
                    done.append(analyzer.analyze(Frame(frame_index, ts_l[j], ring[slot_l[j]])))
                    # the view's image
                    if preview is not None and preview.points_wanted() == frame_index:
                        preview.put_points(frame_index, analyzer.last_points)
                    done_at.append(j)
                    t_ends.append(time.perf_counter())
                encode_batch(out, td, done_at, done, t_starts, t_ends, t_got)
                self._put(self.out_q, rows_message(wid, out))
                self._release(slots[slots >= 0])
                chunks.advanced(c, first + len(slots))
            if analyzer.keyframes is not None:
                analyzer.keyframes.close()
            clock = analyzer.clock
            self._put(
                self.out_q,
                ("done", wid, dict(clock.seconds), dict(clock.calls), analyzer.redetections),
            )
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report("worker", wid, frame_index, exc)
            self._quit()
            raise SystemExit(1) from None

    def _worker_ready(self, wid: int) -> None:
        """Called in worker ``wid`` once its detector is built (a hook: live mode starts
        capturing then)."""

    # ------------------------------------------------------------ the accelerator stage's children

    def _accelerator_main(self, sid: int) -> None:
        """Process ``sid`` of the accelerator stage
        (:func:`eyeblink.runtime.procs.accelerator.stage_main`)."""
        from eyeblink.runtime.procs.accelerator import stage_main

        self._guarded("accelerator", sid, lambda at: stage_main(self, sid, at))

    def _post_worker_main(self, wid: int) -> None:
        """A CPU worker of the accelerator stage
        (:func:`eyeblink.runtime.procs.accelerator.post_worker_main`)."""
        from eyeblink.runtime.procs.accelerator import post_worker_main

        row_dtype = record_dtype(self.cfg)
        self._guarded("worker", wid, lambda at: post_worker_main(self, wid, row_dtype, at))

    def _guarded(self, role: str, wid: int, body: Any) -> None:
        """Run a child's ``body(at)``: a stop ends it quietly; a failure goes to the sink as a
        report at frame ``at[0]`` (what the body last set) and the child exits 1."""
        self._child_setup()
        at = [-1]
        try:
            body(at)
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report(role, wid, at[0], exc)
            self._quit()
            raise SystemExit(1) from None

    def _slow_start(self) -> None:
        """The test hook ``slowstart@S`` (module docstring): the accelerator stage's warm-up
        lasts ``S`` s longer."""
        if self.fault is not None and self.fault[0] == "slowstart":
            self.stop.wait(self.fault[1])
            self._check_stop()

    def _inject_fault(self, first: int, n: int) -> None:
        """The test hook (module docstring) in the accelerator stage: ``raise@K`` / ``exit@K`` /
        ``stall@K`` in the batch holding frame K (``first`` .. ``first + n - 1``)."""
        fault = self.fault
        if fault is None or fault[0] == "slowstart" or not first <= fault[1] < first + n:
            return
        if fault[0] == "stall":  # stuck (not compiling: no heartbeat) until the run is stopped
            while not self.stop.wait(_POLL_S) and host.parent_alive():
                pass
            raise _Stop
        if fault[0] == "exit":
            time.sleep(0.3)  # the rows already sent leave the queues first
            os._exit(70)
        raise RuntimeError(f"injected failure at frame {fault[1]} ({FAULT_ENV})")
