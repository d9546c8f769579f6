"""Whether a live source's own clock can be believed: its timestamps checked against the arrival clock.

A stream's presentation timestamps (or a camera's tick counter) are the frames' capture times only while they
advance as the frames arrive. A sender that stamps 500 frames a second 1/64,000 s apart (or 1/30 s apart) would
otherwise size the ring for 64,000 FPS (or 30), give ``duration_s`` 0.06 s (or 133 s) for 8 s of video and
make a gate's "stable for 200 ms" mean 1.6 ms (or 3.3 s) of real time. :class:`ClockCheck` compares the two
clocks, and once the source's clock is not believable the run uses the arrival clock instead.

The arrival clock (``time.perf_counter()`` when the frame was received and decoded) is late by the network's
and this machine's delays, never early. So every comparison uses each window's *least-delayed* frame: the one
whose arrival time minus its timestamp is smallest. The tolerances:

* **at connection** (the rate probe of :class:`~eyeblink.sources.live.StreamSource`): the rate the first
  frames' timestamps give and the rate at which those frames arrived more than :data:`PROBE_FACTOR` apart:
  the source's clock is not believed from the first frame on;
* **rate**: over each :data:`WINDOW_S` of arrival time, the source's time between two consecutive windows'
  least-delayed frames divided by the arrival time between them outside ``1 ± RATE_TOLERANCE``;
* **drift**: the source's time minus the arrival time since the first window beyond :data:`DRIFT_S` and
  :data:`DRIFT_SHARE` of the time elapsed;
* **jump**: one frame's timestamp step longer than its arrival step by more than :data:`JUMP_S`, or a step back
  by more than :data:`JUMP_S`.

The source's time running *ahead* of the arrival clock is judged always (a frame cannot arrive before it was
taken). *Behind* it is judged only over windows in which the capture never waited for a free ring slot (with
``--on-overload block`` the capture waits, the sender backs up and frames then arrive late through no fault of
the source's clock) and in which the reader waited for data at least :data:`BACKED_UP_SHARE` of the time (one
that never waits reads slower than the frames come: a busy machine, not a slow clock).

From the first mismatch on (from the first frame when found at connection), each frame's timestamp is the
previous frame's plus the arrival step (``timestamps`` ``arrival_monotonic`` in the summary): durations, rates,
the rows' ``timestamp_s`` and every capture-time bound of the run (``--stable-ms``, ``--settle-ms``,
``--face-lost-ms``) are then arrival time. The mismatch is one warning line, the metric
``eyeblink_stream_clock_believed`` 0 and the summary's ``live.clock``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["BACKED_UP_SHARE", "DRIFT_S", "DRIFT_SHARE", "JUMP_S", "PROBE_FACTOR", "RATE_TOLERANCE", "WINDOW_S",
           "ClockCheck", "probe_verdict"]

#: at connection: the timestamps' rate and the arrival rate of the same frames more than this factor apart
PROBE_FACTOR = 2.0
#: seconds of arrival time per window of the running check
WINDOW_S = 2.0
#: the source's time per second of arrival time, window to window, within 1 ± this
RATE_TOLERANCE = 0.05
#: the source's time minus the arrival time since the first window, beyond this many seconds ...
DRIFT_S = 1.0
#: ... and beyond this share of the time elapsed
DRIFT_SHARE = 0.01
#: one frame's timestamp step past its arrival step (or back) by more than this many seconds
JUMP_S = 1.0
#: a reader that waited for data less than this share of the time read slower than the frames came (backed up)
BACKED_UP_SHARE = 0.05


def probe_verdict(ts_rate: float | None, arrival_rate: float | None, *, backed_up: bool = False) -> str | None:
    """At connection: why the source's clock is not believed (None: believed, or nothing to compare).
    ``backed_up``: the reader never waited for data (it read slower than the frames came): frames arriving slower
    than their timestamps say is then no verdict."""
    if not ts_rate or not arrival_rate or ts_rate <= 0 or arrival_rate <= 0:
        return None
    factor = max(ts_rate / arrival_rate, arrival_rate / ts_rate)
    if factor <= PROBE_FACTOR or (backed_up and ts_rate > arrival_rate):
        return None
    return (f"its timestamps give {ts_rate:.4g} FPS but its first frames arrived at {arrival_rate:.4g} FPS "
            f"({factor:.1f}x apart, more than {PROBE_FACTOR:g}x)")


class ClockCheck:
    """Checks a source's timestamps against arrival times frame by frame; :meth:`stamp` gives the timestamp to use.

    ``on_mismatch(text)`` is called once, with the one line that says what was found (the live loader prints it
    and sets the metric). Not thread-safe: the capture thread calls :meth:`stamp`; :meth:`note_wait` may be called
    from the same thread (the loader's capture waits for a slot there).
    """

    def __init__(self, source: str = "the source") -> None:
        self.source = source
        self.believed = True
        self.kind: str | None = None  # "probe", "rate", "drift", "jump"
        self.text: str | None = None
        self.frame: int | None = None  # the first frame stamped on the arrival clock
        self.ratio: float | None = None  # the latest window's ratio (source time per arrival second)
        self.drift_s: float | None = None  # source time minus arrival time since the first window
        self.windows = 0
        self.on_mismatch: Callable[[str], None] | None = None
        self._n = 0
        self._last: tuple[float, float] | None = None  # (source ts, arrival) of the previous frame
        self._out: tuple[float, float] | None = None  # (timestamp given, arrival) of the previous frame
        self._win_start: float | None = None
        self._win_best: tuple[float, float, float] | None = None  # (arrival - ts, ts, arrival)
        self._prev_best: tuple[float, float, float] | None = None
        self._ref: tuple[float, float, float] | None = None
        self._waited = False
        self._prev_waited = False
        self._read_wait = 0.0

    # ------------------------------------------------------------------ inputs

    def distrust(self, kind: str, why: str) -> None:
        """The source's clock is not believed from the next frame on (``kind``: what was found, ``why``: in words)."""
        if not self.believed:
            return
        self.believed = False
        self.kind = kind
        self.frame = self._n
        self.text = (f"{self.source}: the source's clock is not believable ({why}); from frame {self._n} on the "
                     f"run uses the arrival clock for timestamps, durations, rates and the gate's times")
        if self.on_mismatch is not None:
            self.on_mismatch(self.text)

    def note_wait(self) -> None:
        """The capture waited for a free ring slot (``--on-overload block``): frames may arrive late meanwhile."""
        self._waited = True

    def note_read(self, seconds: float) -> None:
        """The reader waited ``seconds`` for the next packet (a reader that never waits is backed up)."""
        self._read_wait += seconds

    def new_segment(self) -> None:
        """A reconnected stream: its timestamps start again (continued on the arrival clock by the source)."""
        self._last = None
        self._win_start = self._win_best = self._prev_best = None

    def stamp(self, ts: float, arrival: float) -> float:
        """The timestamp of a frame whose source time is ``ts`` (seconds) and arrival ``arrival``
        (``perf_counter``): ``ts`` while the source's clock is believed, else the arrival clock's."""
        if self.believed:
            self._check(ts, arrival)
        if self.believed:
            out = ts
        elif self._out is None:
            out = 0.0
        else:
            out = self._out[0] + max(0.0, arrival - self._out[1])
        self._out = (out, arrival)
        self._n += 1
        return out

    # ------------------------------------------------------------------ the checks

    def _check(self, ts: float, arrival: float) -> None:
        if self._last is not None:
            d_ts, d_arr = ts - self._last[0], arrival - self._last[1]
            if d_ts - d_arr > JUMP_S and not self._waited:
                self.distrust("jump", f"its time jumped {d_ts:.3g} s ahead between two frames that arrived "
                                      f"{d_arr * 1000.0:.0f} ms apart, more than {JUMP_S:g} s")
                return
            if d_ts < -JUMP_S:
                self.distrust("jump", f"its time went back {-d_ts:.3g} s between two frames, more than {JUMP_S:g} s")
                return
        self._last = (ts, arrival)
        here = (arrival - ts, ts, arrival)
        if self._win_start is None or self._win_best is None:
            self._win_start, self._win_best = arrival, here
            return
        if arrival - self._win_start < WINDOW_S:
            if here[0] < self._win_best[0]:
                self._win_best = here
            return
        self._close_window(arrival)
        self._win_start, self._win_best = arrival, here

    def _close_window(self, now: float) -> None:
        best = self._win_best
        assert best is not None and self._win_start is not None
        self.windows += 1
        if self._read_wait < BACKED_UP_SHARE * (now - self._win_start):
            self._waited = True  # the reader never waited for data: frames came in late (see BACKED_UP_SHARE)
        self._read_wait = 0.0
        waited = self._waited or self._prev_waited
        if self._prev_best is not None and best[2] > self._prev_best[2]:
            ratio = (best[1] - self._prev_best[1]) / (best[2] - self._prev_best[2])
            self.ratio = ratio
            if ratio > 1 + RATE_TOLERANCE or (ratio < 1 - RATE_TOLERANCE and not waited):
                self.distrust("rate", f"its time ran at {ratio:.3g}x the arrival clock over {WINDOW_S:g} s, outside "
                                      f"1 ± {RATE_TOLERANCE:g}" + ("" if ratio > 1 else
                                                                   "; or this machine reads the stream slower than "
                                                                   "it is sent"))
        if self.believed:
            if self._ref is None:
                self._ref = best
            else:
                drift = (best[1] - self._ref[1]) - (best[2] - self._ref[2])
                elapsed = best[2] - self._ref[2]
                self.drift_s = drift
                if abs(drift) > max(DRIFT_S, DRIFT_SHARE * elapsed) and (drift > 0 or not waited):
                    self.distrust("drift", f"its time drifted {drift:+.3g} s from the arrival clock in "
                                           f"{elapsed:.0f} s, more than {DRIFT_S:g} s and {DRIFT_SHARE:.0%}")
        self._prev_best, self._prev_waited = best, self._waited
        self._waited = False

    def summary(self) -> dict[str, Any]:
        """The summary's ``live.clock``: what was checked, found and chosen."""
        return {"believed": self.believed, "clock": "source" if self.believed else "arrival",
                "mismatch": self.kind, "from_frame": self.frame, "message": self.text,
                "window_ratio": self.ratio, "drift_s": self.drift_s, "windows": self.windows,
                "tolerance": {"probe_factor": PROBE_FACTOR, "window_s": WINDOW_S, "rate": RATE_TOLERANCE,
                              "drift_s": DRIFT_S, "drift_share": DRIFT_SHARE, "jump_s": JUMP_S}}
