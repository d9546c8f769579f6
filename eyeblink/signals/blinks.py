"""Online blink detection over the per-eye EAR traces (plus an optional eye-patch appearance cue).

The detector sees one sample per frame, in order, and emits each blink a
bounded time after it has ended (``merge_gap_ms``, so that a blink split by
noise can still be merged): it is what the sink of a live run uses, and what
the offline ``process`` runs use too, so both give the same events.

Definition (all times in milliseconds, never frames, so it behaves the same at
30 and 500 FPS; every parameter is a field of :class:`~eyeblink.config.BlinkConfig`):

* **Signal.** Each eye's EAR is divided by that eye's own open-eye baseline
  (the median over the last ``baseline_window_ms`` of samples outside blinks);
  the combined signal ``ratio`` is the mean of the per-eye ratios of the eyes
  fitted in that frame (per-eye normalisation: an eye with a larger EAR does not
  dominate, and a frame where one eye is missing is not a step).
* **Noise-adaptive depth.** A drop counts only when it exceeds
  ``max(1 - close_ratio, noise_k * sigma)``, ``sigma`` being the robust
  (MAD) standard deviation of the ratio over the baseline window: for a noisy
  fit (small face, glasses) the thresholds widen instead of firing on noise.
* **Appearance cue** (when the landmark stage supplies eye patches, see
  :func:`eyeblink.landmarks.eyes.eye_patches`): each eye's patch, aligned on its
  fitted corners, is compared with that eye's open-eye template (median of the
  patches of the baseline window) by normalised cross-correlation;
  ``1 - NCC`` in robust z-units of its own baseline noise, the smaller of the two
  eyes (a blink closes both), is mapped onto the ratio scale so that
  ``appearance_z`` equals ``close_ratio``. The detection signal is the smaller
  of the EAR ratio and that appearance ratio. dlib's eyelid points barely move
  on some faces (looking up, glasses) while the eye patch changes a lot. An
  event the appearance cue alone started counts only if the EAR ratio also
  falls below ``open_ratio`` somewhere in it (``appearance_needs_lid``): a
  patch can change without a closure (gaze, light, a hand), a blink moves the lid.
* **Hysteresis.** A blink starts when the detection signal falls below the
  (noise-adapted) ``close_ratio`` level and ends when it rises back above
  ``open_ratio`` and then reaches ``onset_ratio``. The reported span is widened
  to the frames where the signal left and regained ``onset_ratio``: from the
  first closing frame to the last frame before the eye is open again; both ends
  are inclusive frames.
* **Onset refinement.** With at least ``onset_min_samples`` frames in the
  closing phase (high-speed cameras) the onset is the knee of a least-squares
  fit of the lid's start from rest, ``baseline - a (t - t0)^2`` (see
  :func:`quadratic_onset`): a threshold crossing is late by the time the lid
  needs to move past the noise (4-6 frames at 500 FPS), the knee is not. At
  30 FPS (2-3 frames per closing phase) the threshold crossing is kept.
* **Warm-up.** The first ``min_baseline_ms`` of samples are buffered (time between
  samples further apart than ``max_gap_ms`` does not count, but the samples before
  such a gap stay in the buffer: a frame the camera dropped does not discard the
  frames before it); once the baseline exists they are re-scanned, so a blink in the
  very first frames is found (the median is robust to a blink filling less than half
  the buffer). The re-scan ends a blink at a gap as everywhere else.
* **Merging.** Blinks whose gap (next start - previous end) is shorter than
  ``merge_gap_ms`` are one blink; shorter than ``min_duration_ms``: discarded.
* **Every blink kept.** An event longer than ``max_blink_ms`` is a ``prolonged_closure``; a full
  closure inside it (a squint or a movement bout that deepens into a full blink) is also a blink of
  its own, emitted right after it (:func:`~eyeblink.signals.measures.inner_closures`).
* **Gaps.** Timestamps drive everything. A gap longer than ``max_gap_ms``
  (dropped frames, face lost) inside a blink ends it as ``complete = False``
  at the last frame seen, so an event never spans frames nobody saw.

Measures of each blink (``BlinkEvent``): onset/peak/offset, combined and per
eye (per-eye spans: the run of that eye's ratio below ``onset_ratio`` around its
minimum); ``amplitude`` = closing amplitude ``1 - min/baseline`` of the combined
signal (0 open, 1 EAR zero), clipped to [0, 1]; ``opening_amplitude`` = the
ratio regained from the minimum to the offset; peak closing and opening
velocities of the ratio smoothed over ``smooth_ms`` (EAR-ratio units per
second, both positive); ``partial`` when ``amplitude`` is below
``partial_fraction`` of the subject's full closure, estimated as the
``full_closure_quantile`` of the amplitudes of this session's blinks (the prior
``full_closure_amplitude`` until ``full_closure_min_events`` blinks were seen);
``cue`` says which signal crossed the threshold (``ear``, ``appearance``, ``both``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from eyeblink.config import BlinkConfig
from eyeblink.signals.events import (
    BLINK,
    BLINK_COLUMN_DOCS,
    BLINK_COLUMNS,
    EVENT_KINDS,
    PROLONGED_CLOSURE,
    BlinkEvent,
)
from eyeblink.signals.measures import (
    _EL,
    _ER,
    _F,
    _R,
    _T,
    event_rows,
    full_closure,
    inner_closures,
    measure_event,
)
from eyeblink.signals.numerics import (
    CenteredTemplate,
    TimeWindow,
    median_of_few,
    nanmean,
    patch_dissimilarity,
    quadratic_onset,
    row_medians,
)
from eyeblink.signals.state import EyeState, StateChange

# the event, its columns and the two fits were defined here before they had modules of their own:
# importable from here still
__all__ = [
    "BLINK",
    "BLINK_COLUMNS",
    "BLINK_COLUMN_DOCS",
    "EVENT_KINDS",
    "PROLONGED_CLOSURE",
    "STATE_BUFFER",
    "BlinkDetector",
    "BlinkEvent",
    "patch_dissimilarity",
    "quadratic_onset",
]

#: state changes kept for ``pop_state_changes`` between two calls (the oldest are dropped past it)
STATE_BUFFER = 4096

_NAN = math.nan
_MAD_TO_SIGMA = 1.4826

# how often the baseline medians and noise are recomputed (and the settle check runs)
_REFRESH_S = 0.04
#: live mode's warm-up end, one piece a frame: warm-up samples per piece (~1 ms of appending or
#: measuring), and the most patches whose template is computed at once (more: in pieces)
_START_PIECE = 64
_TEMPLATE_PIECE = 128
_DONE = object()
# at low frame rates a gap is this many frame intervals (a 6 FPS camera is not all gaps)
_GAP_INTERVALS = 2.5
# a level has settled when this fraction of the last settle_ms stays in its band
_SETTLED_FRACTION = 0.8


class BlinkDetector:
    """Feed ``update(frame, t, ear_left, ear_right[, patches])`` per frame; collect finished blinks.

    ``ear_left``/``ear_right`` may be NaN (eye or face not found). ``patches`` is the optional ``(2,
    h, w)`` uint8 pair of eye patches (subject's left, right) from
    :func:`eyeblink.landmarks.eyes.eye_patches`; without it only the EAR is used. Call ``finish()``
    at the end of the input to emit what is still pending and close a blink still open.

    ``update``/``finish`` return the events settled with that frame: each ``BlinkEvent`` has a
    ``kind``, ``"blink"`` or ``"prolonged_closure"`` (a closure longer than ``max_blink_ms``: not a
    blink); a live consumer tells them apart by ``ev.kind`` (or ``ev.is_blink``). The eye's state,
    decided here and nowhere else, is ``state`` (after the last frame) and ``pop_state_changes()``
    (every change since the previous call, in order).
    """

    _OPEN, _CLOSED, _REOPENING = 0, 1, 2

    def __init__(
        self, config: BlinkConfig | None = None, *, rescan_per_frame: int | None = None
    ) -> None:
        """``rescan_per_frame``: when the warm-up ends, its frames are judged again against the new
        baseline; None does that at once (~0.2 ms a frame: ~100 ms for a 1 s warm-up at 500 FPS,
        fine for a file), N does N of them per later frame (live mode: no 100 ms stall of the
        sink; the blinks come out the same, a few frames later)."""
        self.cfg = config or BlinkConfig()
        if rescan_per_frame is not None and rescan_per_frame < 2:
            raise ValueError(
                f"rescan_per_frame must be None or >= 2 (to catch up), got {rescan_per_frame}"
            )
        self._rescan_step = rescan_per_frame
        # frames waiting for the state machine, in order, after the warm-up: (frame, t, left, right,
        # patches, learn)
        self._backlog: deque[tuple[int, float, float, float, np.ndarray | None, bool]] = deque()
        # open-eye samples of the baseline window: (t, ear, left, right, ratio, dis_left, dis_right)
        self._base = TimeWindow(7)
        self._stats = np.full(7, _NAN)  # medians of the columns above (index 0 unused)
        self._sigma = np.full(7, _NAN)  # robust sigmas
        self._stats_t = -math.inf
        self._patches: deque[tuple[float, np.ndarray]] = deque()  # (t, (2, h, w)) open-eye patches
        self._template: np.ndarray | None = None
        self._centered: tuple[np.ndarray, CenteredTemplate] | None = None
        self._dis_cache: tuple[np.ndarray, np.ndarray, tuple[float, float]] | None = None
        self._template_t = -math.inf
        # seconds of patches a template started afresh needs before the cue is used
        self._app_min_span = 0.0
        # since when only the appearance cue holds the event open (the EAR is open)
        self._stale_t = _NAN
        self._warm: list[tuple[int, float, float, float, np.ndarray | None]] | None = []
        self._warm_s = 0.0  # seconds of the warm-up buffer covered by samples (gaps left out)
        #: live mode: the warm-up's end (the baseline, the template, the warm-up rows measured
        #: against them), one piece a frame (:meth:`_start_steps`); the frames meanwhile wait in the
        #: backlog
        self._starting: Iterator[None] | None = None
        self._state = self._OPEN
        self._count = 0
        self._last: tuple[int, float] | None = None  # last valid (frame, t)
        # first frame of the input, or of the stretch after the last gap: a blink that starts there
        # may have started before it (cut by its start: complete = False, left out of the rate and
        # mean duration)
        self._seg_first = -1
        # samples below onset level before the blink was confirmed
        self._dip: deque[tuple[float, ...]] = deque()
        # when the current dip began (its oldest samples are dropped past _hold_s)
        self._dip_t0 = math.nan
        # the last settle_ms of samples: has the level settled?
        self._tail: deque[tuple[float, ...]] = deque()
        self._settle_t = -math.inf  # when the settle check last ran
        # recent frame intervals (the gap threshold)
        self._intervals: deque[float] = deque(maxlen=64)
        self._interval = _NAN  # their median: the frame interval
        self._prev_t = _NAN  # capture time of the previous fitted frame
        # a re-judged sample after the hole in a long event's kept samples: not a gap
        self._bridge_t = _NAN
        # re-judged frames up to this one publish no state change
        self._quiet_frame: int | None = None
        #: (t, old, new) each time the baseline was re-learnt from a settled level (most recent
        #: 1,000)
        self.level_shifts: deque[tuple[float, float, float]] = deque(maxlen=1000)
        self._recent: deque[tuple[float, ...]] = deque()  # last onset_search_ms of samples
        self._ev: dict[str, Any] = {}
        self._pending: dict[str, Any] | None = None  # ended blink held for merge_gap_ms
        self._ready: list[dict[str, Any]] = []  # ended blinks that can no longer merge
        # the last blinks' amplitudes (full closure)
        self._amplitudes: deque[float] = deque(maxlen=1000)
        self._floor_t = -math.inf  # end of the last blink: the next one's onset fit starts after it
        self._eye = EyeState.NO_FACE  # the published state (see ``state``)
        self._changes: deque[StateChange] = deque(maxlen=STATE_BUFFER)

    # -- the eye's state (the one definition live consumers read)
    # -----------------------------------------
    @property
    def state(self) -> EyeState:
        """The eye's state after the last frame the state machine has judged.

        ``no_face`` for a frame without a fitted eye (both EARs NaN) and until the baseline exists
        (the first ``min_baseline_ms`` of fitted frames: open and closed cannot be told apart before
        it); then ``open``, ``closing`` (the signal left the open level), ``closed`` (below the
        closed threshold, for a blink and a prolonged closure alike), ``reopening`` (back above
        ``open_ratio``, not yet at the open level). In live mode (``rescan_per_frame``) the warm-up
        frames are judged over the following frames, so the state can lag the newest frame by up to
        that backlog.
        """
        return self._eye

    @property
    def judged_to_newest(self) -> bool:
        """True when :attr:`state` is about the newest frame given to :meth:`update`: the warm-up is
        over and no frame waits to be judged (live mode re-judges its warm-up, and after a re-learnt
        level an event's frames, a few per new frame; meanwhile ``state`` is about an older frame).
        """
        return self._warm is None and self._starting is None and not self._backlog

    def pop_state_changes(self) -> list[StateChange]:
        """The state changes since the last call, oldest first (at most ``STATE_BUFFER``: older ones
        dropped).

        Each carries the frame and capture time at which the new state began. Warm-up frames judged
        late (see ``state``) publish their changes with their own, earlier, frame numbers.
        """
        out = list(self._changes)
        self._changes.clear()
        return out

    def _publish(self, frame: int, t: float, state: EyeState) -> None:
        if self._quiet_frame is not None:
            if frame < self._quiet_frame:
                # re-judged after a re-learnt level: only the outcome at the newest frame is news
                return
            self._quiet_frame = None
        if state is not self._eye:
            self._changes.append(
                StateChange(frame=int(frame), timestamp_s=float(t), state=state, previous=self._eye)
            )
            self._eye = state

    def _machine_state(self) -> EyeState:
        if self._state == self._CLOSED:
            return EyeState.CLOSED
        if self._state == self._REOPENING:
            return EyeState.REOPENING
        return EyeState.CLOSING if self._dip else EyeState.OPEN

    # -- baseline
    # ---------------------------------------------------------------------------------------
    @property
    def baseline(self) -> float:
        """Current open-eye baseline of the mean EAR (NaN while warming up)."""
        return float(self._stats[1]) if self._warm is None and self._starting is None else _NAN

    def _push_baseline(self, t: float, row: tuple[float, ...], patches: np.ndarray | None) -> None:
        self._base.append((t, *row))
        horizon = t - self.cfg.baseline_window_ms / 1000
        self._base.drop_before(horizon)
        if patches is not None and self.cfg.appearance:
            every = self.cfg.baseline_window_ms / 1000 / 128  # at most ~128 patches in the template
            if not self._patches or t - self._patches[-1][0] >= every:
                self._patches.append((t, patches))
            while self._patches and self._patches[0][0] < horizon:
                self._patches.popleft()
        # recompute the medians at most every _REFRESH_S: a 3 s window at 500 FPS is 1,500 samples,
        # and twelve medians of it cost ~0.6 ms; a baseline over 3 s does not move in 40 ms
        if t - self._stats_t >= _REFRESH_S:
            self._recompute(t)

    def _recompute(self, t: float) -> None:
        for _ in self._recompute_steps(t):
            pass

    def _recompute_steps(self, t: float) -> Iterator[None]:
        """The baseline's medians and sigmas, then the patch template; yields between the template's
        pieces when there are many patches (the warm-up's end: ~4 ms at once at 500 FPS otherwise).
        """
        arr = self._base.view()
        stats = np.full(7, _NAN)
        sigma = np.full(7, _NAN)
        with np.errstate(all="ignore"):
            partial: list[int] = [1, 2, 3, 4, 5, 6]
            if len(arr):
                # the columns without a NaN: their medians (and MADs) in one call each, the same
                # values as column by column (row_medians: np.median of each row)
                cols = arr[:, 1:7].T
                whole = np.isfinite(cols).all(axis=1)
                if whole.any():
                    at = np.flatnonzero(whole)
                    c = cols[at]
                    meds = row_medians(c)
                    stats[at + 1] = meds
                    sigma[at + 1] = _MAD_TO_SIGMA * row_medians(np.abs(c - meds[:, None]))
                    partial = (np.flatnonzero(~whole) + 1).tolist()
            for k in partial:
                col = arr[:, k] if len(arr) else np.empty(0)
                col = col[np.isfinite(col)]
                if len(col):
                    med = float(np.median(col))
                    stats[k] = med
                    sigma[k] = _MAD_TO_SIGMA * float(np.median(np.abs(col - med)))
        self._stats, self._sigma, self._stats_t = stats, sigma, t
        if self._patches and t - self._template_t >= 0.1:
            # the warm-up's end: all its patches, in pieces
            many = len(self._patches) > _TEMPLATE_PIECE
            raw = np.stack([p for _, p in self._patches])
            if many:
                yield
            stack = raw.astype(np.float32)
            # no NaN: np.median(stack, axis=0)'s floats, each pixel's row sorted
            if raw.dtype.kind in "ui":
                pixels = np.ascontiguousarray(stack.reshape(len(stack), -1).T)
                if many:
                    yield
                # each pixel's median on its own: the same floats
                half = len(pixels) // 2 if many else len(pixels)
                first = row_medians(pixels[:half])
                if many:
                    yield
                self._template = np.concatenate([first, row_medians(pixels[half:])]).reshape(
                    stack.shape[1:]
                )
            else:
                self._template = np.median(stack, axis=0)
            self._template_t = t

    def _template_ready(self) -> bool:
        """A template started afresh (:meth:`_reset_template`) is used once it has
        ``min_baseline_ms`` of patches behind it (its noise is then known); the first one (the
        warm-up's) at once."""
        if self._app_min_span <= 0:
            return True
        p = self._patches
        if len(p) >= 8 and p[-1][0] - p[0][0] >= self._app_min_span:
            self._app_min_span = 0.0
            return True
        return False

    def _reset_template(self, t: float) -> None:
        """Forget the appearance template and its noise: it is rebuilt from the open-eye patches
        that follow."""
        self._patches.clear()
        self._template = None
        self._centered = None
        self._dis_cache = None
        self._stale_t = _NAN
        self._app_min_span = 0.9 * self.cfg.min_baseline_ms / 1000
        v = self._base.view()
        if len(v):
            v[:, 5:7] = _NAN
        self._recompute(t)

    # -- per-sample signals
    # -----------------------------------------------------------------------------
    def _measure(
        self, frame: int, t: float, el: float, er: float, patches: np.ndarray | None
    ) -> tuple[tuple[float, ...], float, float, float]:
        """(sample row, ear ratio level, appearance level, detection level) of one frame."""
        s = self._stats
        rl = el / s[2] if s[2] > 0 else _NAN
        rr = er / s[3] if s[3] > 0 else _NAN
        ratio = nanmean((rl, rr))
        dl = dr = _NAN
        if (
            patches is not None
            and self._template is not None
            and self.cfg.appearance
            and self._template_ready()
        ):
            dl, dr = self._dis(patches)
        # noise-adapted EAR level: deviations shrunk so that noise_k sigma of the ratio never
        # crosses
        depth = 1.0 - self.cfg.close_ratio
        sig_r = self._sigma[4]
        scale = depth / max(depth, self.cfg.noise_k * sig_r) if sig_r == sig_r else 1.0
        ear_level = 1.0 - (1.0 - ratio) * scale if ratio == ratio else _NAN
        app_level = _NAN
        zs = []
        for d, k in ((dl, 5), (dr, 6)):
            if d == d and self._stats[k] == self._stats[k]:
                sig = max(self._sigma[k], self.cfg.appearance_min_sigma)
                zs.append((d - self._stats[k]) / sig)
        if zs:
            app_level = 1.0 - depth * min(zs) / self.cfg.appearance_z
        level = (
            ear_level
            if app_level != app_level
            else (app_level if ear_level != ear_level else min(ear_level, app_level))
        )
        row = (float(frame), t, ratio, rl, rr, level, el, er)
        return row, ear_level, app_level, level

    # -- input
    # ------------------------------------------------------------------------------------------
    def update(
        self,
        frame: int,
        t: float,
        ear_left: float,
        ear_right: float,
        patches: np.ndarray | None = None,
    ) -> list[BlinkEvent]:
        """Process one frame; returns the blinks that were settled with it (usually none)."""
        # live: the warm-up's end is under way; this frame waits its turn
        if self._starting is not None:
            nan = math.isnan(ear_left) and math.isnan(ear_right)
            if not nan:
                self._note_interval(t)
            self._backlog.append((frame, t, ear_left, ear_right, None if nan else patches, not nan))
            return self._advance_start()
        if math.isnan(ear_left) and math.isnan(ear_right):
            # face or eyes not found: the state is no_face; a gap for the events, judged by time
            # when the next valid sample arrives. Behind a backlog it waits its turn, so the changes
            # stay in order.
            if self._warm is None and self._backlog:
                self._backlog.append((frame, t, ear_left, ear_right, None, False))
                return self._drain(self._rescan_step)
            if self._warm is None:
                self._publish(frame, t, EyeState.NO_FACE)
            return []
        self._note_interval(t)
        if self._warm is not None:
            return self._warm_up(frame, t, ear_left, ear_right, patches)
        if self._backlog:
            self._backlog.append((frame, t, ear_left, ear_right, patches, True))
            return self._drain(self._rescan_step)
        out = self._step(frame, t, ear_left, ear_right, patches, learn=True)
        if self._backlog:  # a re-learnt level queued the event's samples to be judged again
            out += self._drain(self._rescan_step)
        return out

    def _note_interval(self, t: float) -> None:
        """Track the frame interval (median of the last 64): a gap is several intervals, never
        one."""
        prev, self._prev_t = self._prev_t, t
        if prev == prev and t > prev:
            self._intervals.append(t - prev)
            # (a full deque's length is always 64, so this runs on every frame: sorted() of 64
            # floats is ~10x cheaper than np.median of a deque, and gives the same value to the last
            # bit)
            if len(self._intervals) % 8 == 0 or self._interval != self._interval:
                self._interval = median_of_few(self._intervals)

    def _gap_s(self) -> float:
        """Seconds without a sample that make a gap: ``max_gap_ms``, or 2.5 frame intervals at
        low frame rates."""
        gap = self.cfg.max_gap_ms / 1000
        return (
            max(gap, _GAP_INTERVALS * self._interval) if self._interval == self._interval else gap
        )

    def _drain(self, n: int | None) -> list[BlinkEvent]:
        """Run up to ``n`` (None: all) frames of the backlog through the state machine, in order."""
        out: list[BlinkEvent] = []
        backlog = self._backlog
        k = 0
        while backlog and (n is None or k < n):
            f, ts, a, b, p, learn = backlog.popleft()
            out += self._step(f, ts, a, b, p, learn=learn)
            k += 1
        return out

    def _warm_up(
        self, frame: int, t: float, el: float, er: float, patches: np.ndarray | None
    ) -> list[BlinkEvent]:
        assert self._warm is not None
        if self._warm:
            step = t - self._warm[-1][1]
            if step <= self._gap_s():  # a gap (dropped frames, face lost) adds no baseline time
                self._warm_s += step
        self._warm.append((frame, t, el, er, patches))
        if self._warm_s * 1000 < self.cfg.min_baseline_ms or len(self._warm) < 3:
            return []
        return self._start()

    def _start(self) -> list[BlinkEvent]:
        """Warm-up done: baseline from the whole buffer (robust medians), then re-scan the buffer.
        In live mode (``rescan_per_frame``) one piece of that a frame (~25 ms of work at once at 500
        FPS: the sink's rows would wait behind it), the frames meanwhile queued behind the
        warm-up's; the same numbers either way."""
        if self._rescan_step is None:
            for _ in self._start_steps():
                pass
            return self._drain(None)
        self._starting = self._start_steps()
        return self._advance_start()

    def _advance_start(self) -> list[BlinkEvent]:
        """The next piece of the warm-up's end; once it is done, the backlog's first frames are
        judged."""
        assert self._starting is not None
        if next(self._starting, _DONE) is not _DONE:
            return []
        self._starting = None
        return self._drain(self._rescan_step)

    def _start_steps(self) -> Iterator[None]:
        """The warm-up's end in pieces (a yield between them): the buffer's samples and patches,
        their medians and template, the buffer's ratios and appearance measured against them, their
        medians again; then the buffer goes to the front of the backlog (before the frames that came
        meanwhile)."""
        assert self._warm is not None
        warm, self._warm = self._warm, None
        t_end = warm[-1][1]
        for i, (_, ts, a, b, p) in enumerate(warm):
            self._base.append((ts, nanmean((a, b)), a, b, _NAN, _NAN, _NAN))
            if p is not None and self.cfg.appearance:
                self._patches.append((ts, p))
            if i % _START_PIECE == _START_PIECE - 1:
                yield
        yield
        yield from self._recompute_steps(t_end)  # EAR medians and the patch template
        yield
        s = self._stats
        rows = []
        for i, (_, ts, a, b, p) in enumerate(warm):
            ratio = nanmean((a / s[2] if s[2] > 0 else _NAN, b / s[3] if s[3] > 0 else _NAN))
            rows.append((ts, nanmean((a, b)), a, b, ratio, *self._dis(p)))
            if i % _START_PIECE == _START_PIECE - 1:
                yield
        self._base = TimeWindow(7)
        for row in rows:
            self._base.append(row)
        yield
        yield from self._recompute_steps(t_end)  # ratio and appearance noise
        self._backlog.extendleft((f, ts, a, b, p, False) for f, ts, a, b, p in reversed(warm))

    # -- state machine
    # ----------------------------------------------------------------------------------
    def _step(
        self, frame: int, t: float, el: float, er: float, patches: np.ndarray | None, *, learn: bool
    ) -> list[BlinkEvent]:
        cfg = self.cfg
        if math.isnan(el) and math.isnan(er):  # a no-face frame queued behind the warm-up backlog
            self._publish(frame, t, EyeState.NO_FACE)
            return []
        out: list[BlinkEvent] = []
        gap = self._last is not None and t - self._last[1] > self._gap_s() and t != self._bridge_t
        # (not on _last = None: a re-learnt level replays from a blink's start)
        if gap or self._seg_first < 0:
            self._seg_first = frame
        if gap:
            if self._state != self._OPEN:
                self._end(complete=False)
            out += self._flush()
            self._dip.clear()
            self._recent.clear()
            self._tail.clear()
        elif (
            self._pending is not None
            and self._state == self._OPEN
            and ((self._dip[0][_T] if self._dip else t) - self._pending["end"][1]) * 1000
            >= cfg.merge_gap_ms
        ):
            # a dip that began within the merge gap may still merge: wait for it
            out += self._flush()
        row, ear_level, app_level, level = self._measure(frame, t, el, er, patches)
        self._recent.append(row)
        horizon = t - cfg.onset_search_ms / 1000
        while self._recent[0][_T] < horizon:
            self._recent.popleft()
        self._tail.append(row)
        horizon = t - cfg.settle_ms / 1000
        while self._tail[0][_T] < horizon:
            self._tail.popleft()

        def learn_open() -> None:
            if learn:
                self._push_baseline(
                    t, (nanmean((el, er)), el, er, row[_R], *self._dis(patches)), patches
                )

        if self._state == self._OPEN:
            if math.isnan(level) or level >= cfg.onset_ratio:
                self._dip.clear()
                if self._pending is not None:
                    self._pending["after"].append(row)
                learn_open()
            else:
                if not self._dip:
                    self._dip_t0 = t
                self._dip.append(row)
                # bounded: a dip this long is not a closing lid
                while self._dip[0][_T] < t - self._hold_s():
                    self._dip.popleft()
                if level < cfg.close_ratio:
                    self._begin(ear_level, app_level)
        elif self._state in (self._CLOSED, self._REOPENING):
            self._keep(row)
            self._note_cue(ear_level, app_level)
            if level < cfg.onset_ratio:
                self._ev["end"] = (frame, t)
            if not ear_level >= cfg.onset_ratio:
                self._ev["ear_end"] = (frame, t)
                self._stale_t = _NAN
            elif level < cfg.onset_ratio and ("ear_end" in self._ev or cfg.appearance_needs_lid):
                # the lid is open and only the eye patches say closed: a blink reopens the lid and
                # the patch together, so after appearance_stale_ms the template is stale (light,
                # glasses, a head turn): end the event where the lid reopened and learn the template
                # afresh (an event the lid never joined is left alone unless the lid must confirm:
                # the patches-only blinks of a model whose lid does not confirm them)
                if self._stale_t != self._stale_t:
                    self._stale_t = t
                elif (t - self._stale_t) * 1000 >= cfg.appearance_stale_ms:
                    self._ev["end"] = self._ev.get("ear_end", self._ev["start"])
                    self._end(complete=True)
                    self._reset_template(t)
                    learn_open()
                    self._last = (frame, t)
                    self._publish(frame, t, self._machine_state())
                    return out
            if self._state == self._CLOSED and level >= cfg.open_ratio:
                self._state = self._REOPENING
            elif self._state == self._REOPENING and level < cfg.close_ratio:
                self._state = self._CLOSED
            if self._state == self._REOPENING and level >= cfg.onset_ratio:
                self._end(complete=True)
                learn_open()
        self._last = (frame, t)
        self._publish(frame, t, self._machine_state())
        if self._state != self._OPEN or self._dip:
            out += self._bound(frame, t)
        return out

    # -- bounds: no state lasts longer than a blink can, unless the eye is really closed
    # ---------------------
    def _hold_s(self) -> float:
        """Seconds of samples a dip or the tail of an event keeps (``max_blink_ms + settle_ms``)."""
        return (self.cfg.max_blink_ms + self.cfg.settle_ms) / 1000

    def _keep(self, row: tuple[float, ...]) -> None:
        """Add a sample to the open event: its first ``_hold_s`` kept whole, then only the last
        ``_hold_s`` and the deepest sample between (bounded memory however long the event lasts)."""
        ev = self._ev
        t = row[_T]
        if t - ev["start"][1] <= self._hold_s():
            ev["samples"].append(row)
            return
        tail: deque[tuple[float, ...]] = ev["tail"]
        tail.append(row)
        while tail[0][_T] < t - self._hold_s():
            old = tail.popleft()
            peak = ev["peak"]
            if old[_R] == old[_R] and (peak is None or old[_R] < peak[_R]):
                ev["peak"] = old
            ev["hole"] = True

    def _settled(self, t: float) -> float | None:
        """The EAR ratio's level when it has held still for ``settle_ms`` (a settled level), else
        None."""
        cfg = self.cfg
        if not self._tail or t - self._tail[0][_T] < 0.9 * cfg.settle_ms / 1000:
            return None
        r = np.fromiter((row[_R] for row in self._tail), dtype=np.float64, count=len(self._tail))
        r = r[np.isfinite(r)]
        if len(r) < 3:
            return None
        med = float(np.median(r))
        sig = self._sigma[4]
        tol = max(cfg.settle_tolerance, 3 * sig) if sig == sig else cfg.settle_tolerance
        return med if float(np.mean(np.abs(r - med) <= tol)) >= _SETTLED_FRACTION else None

    def _bound(self, frame: int, t: float) -> list[BlinkEvent]:
        """A dip or event past ``max_blink_ms``: learn a settled shallow level as open; end at
        ``max_closure_ms``."""
        cfg = self.cfg
        in_event = self._state != self._OPEN
        start = self._ev["start"][1] if in_event else self._dip_t0
        age_ms = (t - start) * 1000
        if in_event and age_ms > cfg.max_closure_ms:
            # a prolonged closure, cut here: whatever the level is now, it is open
            self._end(complete=False)
            self._relearn(t)
            self._publish(frame, t, self._machine_state())
            return []
        if age_ms <= cfg.max_blink_ms or t - self._settle_t < _REFRESH_S:
            return []
        self._settle_t = t
        level = self._settled(t)
        if level is None or 1.0 - level >= cfg.partial_fraction * full_closure(
            self.cfg, self._amplitudes
        ):
            return []  # still moving, or settled as deep as a closed eye: a closure goes on
        # a new open level (gaze, posture, glasses, light): learn it, and judge the event's samples
        # again
        self._relearn(t)
        if not in_event:
            self._dip.clear()
            self._publish(frame, t, self._machine_state())
            return []
        ev, self._ev = self._ev, {}
        self._state = self._OPEN
        rows = list(ev["samples"])
        if ev["tail"]:
            if ev["hole"]:
                self._bridge_t = ev["tail"][0][_T]
            rows += list(ev["tail"])
        self._backlog.extendleft(
            reversed([(int(r[_F]), r[_T], r[_EL], r[_ER], None, False) for r in rows])
        )
        self._quiet_frame = frame
        self._last = None
        self._dip.clear()
        self._recent.clear()
        self._tail.clear()
        return []

    def _relearn(self, t: float) -> None:
        """Re-learn the open level from the last ``settle_ms`` of samples (EAR medians, ratio
        noise), and start the appearance template afresh from the patches that follow."""
        rows = list(self._tail)
        old = float(self._stats[1])
        self._base = TimeWindow(7)
        for r in rows:
            self._base.append((r[_T], nanmean((r[_EL], r[_ER])), r[_EL], r[_ER], _NAN, _NAN, _NAN))
        self._recompute(t)
        s = self._stats
        base = TimeWindow(7)
        for r in rows:
            a, b = r[_EL], r[_ER]
            ratio = nanmean((a / s[2] if s[2] > 0 else _NAN, b / s[3] if s[3] > 0 else _NAN))
            base.append((r[_T], nanmean((a, b)), a, b, ratio, _NAN, _NAN))
        self._base = base
        self._reset_template(t)
        self.level_shifts.append((t, old, float(self._stats[1])))

    def _dis(self, patches: np.ndarray | None) -> tuple[float, float]:
        if patches is None or self._template is None or not self.cfg.appearance:
            return _NAN, _NAN
        # a frame's patches are measured, then learnt with the same template: compute them once
        # (the sink's per-frame cost at thousands of frames per second), the template centred once
        cached = self._dis_cache
        if cached is not None and cached[0] is patches and cached[1] is self._template:
            return cached[2]
        if self._centered is None or self._centered[0] is not self._template:
            self._centered = (self._template, CenteredTemplate(self._template))
        c = self._centered[1]
        out = (
            c.pair(patches)
            if len(c.b) == 2
            else (c.dissimilarity(0, patches[0]), c.dissimilarity(1, patches[1]))
        )
        self._dis_cache = (patches, self._template, out)
        return out

    def _note_cue(self, ear_level: float, app_level: float) -> None:
        if ear_level < self.cfg.close_ratio:
            self._ev["cue_ear"] = True
        if app_level < self.cfg.close_ratio:
            self._ev["cue_app"] = True

    def finish(self) -> list[BlinkEvent]:
        """End of input: emit what is pending; a blink still open is reported as incomplete."""
        out: list[BlinkEvent] = []
        if self._warm is not None:
            # an input shorter than the warm-up: judge it against its own medians
            if len(self._warm) >= 3:
                for _ in self._start_steps():
                    pass
            self._warm = None
        if self._starting is not None:  # live: the warm-up's end under way, finished now
            for _ in self._starting:
                pass
            self._starting = None
        out += self._drain(None)
        if self._state != self._OPEN:
            self._end(complete=False)
        out += self._flush()
        return out

    def _begin(self, ear_level: float, app_level: float) -> None:
        dip = list(self._dip) or [self._recent[-1]]
        first, now = dip[0], dip[-1]
        # the samples before the dip, for the onset fit -- never from the previous blink
        pre = [r for r in self._recent if self._floor_t < r[_T] < first[_T]]
        # ends at least at this frame, the one below close_ratio (a one-frame dip at low rates)
        self._ev = {
            "start": (int(first[_F]), first[_T]),
            "end": (int(now[_F]), now[_T]),
            "baseline": (float(self._stats[1]), float(self._stats[2]), float(self._stats[3])),
            "samples": list(dip),
            "pre": pre,
            "cue_ear": False,
            "cue_app": False,
            "complete": True,
            "tail": deque(),
            "peak": None,
            "hole": False,
            "seg_first": self._seg_first,
        }
        if ear_level < self.cfg.onset_ratio:
            self._ev["ear_end"] = self._ev["end"]
        self._note_cue(ear_level, app_level)
        self._dip.clear()
        self._state = self._CLOSED

    def _end(self, *, complete: bool) -> None:
        """The blink in progress ended: hold it for merge_gap_ms (merge with a close successor)."""
        ev = self._ev
        self._ev = {}
        self._stale_t = _NAN
        self._state = self._OPEN
        self._dip.clear()
        ev["complete"] = complete
        if not complete and self._last is not None and self._last[0] > ev["end"][0]:
            ev["end"] = self._last
        self._floor_t = ev["end"][1]
        ev["after"] = []
        prev = self._pending
        if (
            prev is not None
            and complete
            and (ev["start"][1] - prev["end"][1]) * 1000 < self.cfg.merge_gap_ms
        ):
            prev["samples"] = event_rows(prev) + prev["after"] + event_rows(ev)
            prev["tail"], prev["peak"], prev["hole"] = deque(), None, False
            prev["end"] = ev["end"]
            prev["cue_ear"] |= ev["cue_ear"]
            prev["cue_app"] |= ev["cue_app"]
            prev["complete"] = complete
            prev["after"] = []
            return
        if prev is not None:
            # not mergeable: settle the previous one first (it is emitted at the next flush)
            self._ready.append(prev)
        self._pending = ev

    def _flush(self) -> list[BlinkEvent]:
        evs = self._ready + ([self._pending] if self._pending is not None else [])
        self._ready = []
        self._pending = None
        out = []
        for ev in evs:
            b = measure_event(
                self.cfg,
                ev,
                interval=self._interval,
                amplitudes=self._amplitudes,
                number=self._count + 1,
            )
            if b is None:
                continue
            self._count += 1
            out.append(b)
            if b.kind != PROLONGED_CLOSURE:
                continue
            # every blink kept: a full closure inside the long event is a blink row of its own,
            # after it
            full = full_closure(self.cfg, self._amplitudes)
            for inner in inner_closures(self.cfg, ev, full, self._gap_s()):
                ib = measure_event(
                    self.cfg,
                    inner,
                    interval=self._interval,
                    amplitudes=self._amplitudes,
                    number=self._count + 1,
                )
                if ib is not None and ib.kind == BLINK:
                    self._count += 1
                    out.append(ib)
        return out
