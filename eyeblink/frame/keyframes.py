"""Keyframe work beside the stream: a detection or a face-mesh placement used a fixed time after its
frame.

The helper of the face finder's keyframe policy (:class:`eyeblink.frame.locate.FaceFinder`, which
submits the work and adopts its results).

On a high-speed camera the occasional, expensive work of the eye model (BlazeFace on a keyframe, the
search for a new face at four quarter turns, the face mesh that places the eye strip) costs several
frame times. Run on the frame that asks for it, it holds that frame and every frame queued behind
it: the spikes of a live run's latency. So, when frames come faster than ``detect.keyframe_lag_ms``
apart, that work is *lagged*:

* the frame that asks for it (a keyframe, a drifted or low-confidence fit, a face lost, a placement
  older than ``landmarks.mesh_reuse_ms``) is rowed at once with what the finder holds (the tracked
  face and its placement, or no face), and the work starts on that frame's pixels;
* its result (the face, the placement) is adopted by the first frame at least ``keyframe_lag_ms``
  later by timestamp, and used from that frame on. One piece of work is in flight at a time.

Which frame's pixels the work sees and which frame adopts it are functions of the frames' timestamps
alone, never of when the work finished: ``process`` computes it inline on the frame that asks and
holds the result, ``live`` computes it in a thread of the worker (:class:`BesideKeyframes`; LiteRT
releases the interpreter lock while a network runs, so it takes the other core) and waits at the
adopting frame only if it is not done yet. The rows are the same either way
(``tests/test_keyframes.py``).

Frames further apart than the lag (every camera below 1000 / ``keyframe_lag_ms`` FPS: 100 FPS by
default) and the first frame of a tracking segment (and of a live session) do the work on the frame
itself, as without lagging. So does ``--detect-every 1``: every frame its own detection. Only eye
models that separate placement from measurement (``lids``) are lagged; the others always work on the
frame.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from eyeblink.closing import Closing

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.detect.blazeface import FaceDetection, FaceDetector
    from eyeblink.landmarks.mesh import MeshFitter

__all__ = [
    "BesideKeyframes",
    "InlineKeyframes",
    "KeyframeJob",
    "KeyframeResult",
    "holds_box",
    "run_job",
]

#: What a job does: look for a new face (no tracked one), detect the tracked face again (a keyframe
#: or a drifted fit; ``hold``: a nearly unchanged box is kept), or place the eyes again on the
#: tracked face.
KINDS = ("search", "detect", "place")


@dataclass(frozen=True, slots=True)
class KeyframeJob:
    """One piece of keyframe work on frame ``frame`` (its pixels, timestamp ``t``) and what it is
    judged on."""

    kind: str
    frame: int
    t: float
    image: np.ndarray  # what the detector sees (the frame's image)
    gray: np.ndarray  # what the face mesh sees
    prior: FaceDetection | None  # the tracked face when the job was asked for
    face_t: float  # when the tracked box was adopted (detect.hold_max_ms)
    hold: bool  # keep the tracked box when the new one overlaps it by detect.hold_iou
    # the held placement serves the detected face if it is the tracked one (no mesh run)
    reuse_ok: bool
    # the asking analyzer's keyframe interval (its state: live's cost ladder changes it)
    detect_every: int


@dataclass(slots=True)
class KeyframeResult:
    """A job's outcome: the face (None: none found), when its box was adopted, the new placement
    (None: keep the held one), the seconds spent detecting and placing, and whether a placement job
    detected again."""

    face: FaceDetection | None
    face_t: float
    placement: tuple[Any, ...] | None
    seconds: dict[str, float] = field(default_factory=dict)
    redetected: bool = False  # a placement that found no face in the tracked box detected again


def holds_box(
    config: RunConfig,
    detect_every: int,
    found: FaceDetection,
    prior: FaceDetection | None,
    t: float,
    face_t: float,
) -> bool:
    """Whether a new detection ``found`` (at ``t``) keeps the tracked box ``prior`` (adopted at
    ``face_t``): it overlaps it by ``detect.hold_iou`` and the box is younger than
    ``detect.hold_max_ms`` (keyframe policy only: ``detect_every``, the analyzer's, above 1)."""
    d = config.detect
    return (
        detect_every > 1
        and prior is not None
        and d.hold_iou > 0
        and found.iou(prior) >= d.hold_iou
        and (t - face_t) * 1000 < d.hold_max_ms
    )


def run_job(
    job: KeyframeJob,
    config: RunConfig,
    detector: FaceDetector,
    fitter: Any,
    mesher: MeshFitter | None = None,
) -> KeyframeResult:
    """Do ``job``: a pure function of the job (the frame's pixels and the state it was asked in) and
    the settings.

    ``fitter``: the eye model (``placement``); ``mesher``: the face mesh to place with (a thread's
    own)."""
    seconds: dict[str, float] = {}
    face = job.prior
    face_t = job.face_t
    if job.kind != "place":
        t0 = time.perf_counter()
        found = detector.track(job.image, job.prior)
        seconds["detect"] = time.perf_counter() - t0
        if found is None:
            return KeyframeResult(None, face_t, None, seconds)
        if job.hold and holds_box(config, job.detect_every, found, job.prior, job.t, job.face_t):
            found = job.prior  # nearly the same box: keep the tracked one (FaceFinder._detect's)
        else:
            face_t = job.t
        face = found
        if face is job.prior and job.reuse_ok:
            return KeyframeResult(face, face_t, None, seconds)
    assert face is not None
    t0 = time.perf_counter()
    placement = fitter.placement(job.gray, face, job.t, job.frame, mesher)
    seconds["landmarks"] = time.perf_counter() - t0
    if job.kind == "place" and placement[3] < config.landmarks.min_presence:
        # the face mesh no longer sees a face in the tracked box: detect again in the same piece of
        # work (what the frame after it would ask for), so that a face that left is let go after one
        # lag, not two
        t0 = time.perf_counter()
        found = detector.track(job.image, job.prior)
        seconds["detect"] = time.perf_counter() - t0
        if found is None:
            return KeyframeResult(None, face_t, None, seconds)
        t0 = time.perf_counter()
        placement = fitter.placement(job.gray, found, job.t, job.frame, mesher)
        seconds["landmarks"] += time.perf_counter() - t0
        return KeyframeResult(found, job.t, placement, seconds, redetected=True)
    return KeyframeResult(face, face_t, placement, seconds)


class InlineKeyframes(Closing):
    """Keyframe work done on the frame that asks for it (``process``): the result waits for its
    frame."""

    def __init__(self, detector: FaceDetector) -> None:
        self.detector = detector

    def submit(self, job: KeyframeJob, config: RunConfig, fitter: Any) -> Any:
        """Do ``job`` now (``fitter``: the eye model that places); the handle :meth:`result`
        takes."""
        return run_job(job, config, self.detector, fitter)

    def result(self, handle: Any) -> KeyframeResult:
        return handle

    def close(self) -> None:
        """Nothing of its own to release (the analyzer's detector and eye model are the
        analyzer's)."""


class _Pending:
    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: KeyframeResult | None = None
        self.error: BaseException | None = None


class BesideKeyframes(Closing):
    """Keyframe work in a thread of the worker with its own detector and face mesh (``live``).

    :meth:`submit` copies the frame's pixels (the frame's ring slot is reused once its batch is
    rowed) and returns at once; :meth:`result` waits for the work. At most one job is in flight (the
    face finder asks for the next only after adopting the last)."""

    def __init__(self, detector: FaceDetector, mesher: MeshFitter) -> None:
        self.detector, self.mesher = detector, mesher
        self._jobs: queue.SimpleQueue[tuple[KeyframeJob, RunConfig, Any, _Pending] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._loop, name="eyeblink-keyframes", daemon=True)
        self._thread.start()

    def submit(self, job: KeyframeJob, config: RunConfig, fitter: Any) -> _Pending:
        image = np.array(job.image, copy=True)
        gray = image if job.gray is job.image else np.array(job.gray, copy=True)
        handle = _Pending()
        self._jobs.put((replace(job, image=image, gray=gray), config, fitter, handle))
        return handle

    def result(self, handle: _Pending) -> KeyframeResult:
        handle.done.wait()
        if handle.error is not None:
            raise handle.error
        assert handle.value is not None
        return handle.value

    def _loop(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, config, fitter, handle = item
            try:
                self.mesher.pose_wanted = getattr(fitter, "pose_wanted", False)
                handle.value = run_job(job, config, self.detector, fitter, self.mesher)
            except BaseException as exc:  # raised in the worker's thread at the adopting frame
                handle.error = exc
            handle.done.set()

    def close(self) -> None:
        """Stop the thread (after the job in flight) and release its networks. Idempotent."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()
        self.detector.close()
        self.mesher.close()
