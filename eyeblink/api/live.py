"""``eyeblink.live``: a camera or a stream in real time, as a context manager that yields rows,
blinks and state changes (:class:`LiveSession`); ``eyeblink live`` and :func:`live` share
:func:`eyeblink.runtime.live.capture.prepare` and ``finish``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.api.load import Session, _require_pandas, load
from eyeblink.api.settings import (
    ANALYSIS,
    LIVE_ONLY,
    SettingsError,
    _analysis,
    _field_defaults,
    _is_number,
    _run_config,
    _settings_errors,
    _type_ok,
)
from eyeblink.config import (
    LIVE_RANGES,
    LiveConfig,
)
from eyeblink.errors import ConfigError, EyeblinkError
from eyeblink.runtime.live.publish import LiveRow  # stdlib only: what a live session yields
from eyeblink.runtime.procs.processes import check_main_guard, resolve_start_method
from eyeblink.signals.state import EyeState  # the eye's state (one definition, the detector's)

if TYPE_CHECKING:
    from eyeblink.outputs.session import RunResult
    from eyeblink.runtime.live.pipeline import LivePipeline, _LiveRun
    from eyeblink.runtime.live.publish import LiveTap
    from eyeblink.signals.blinks import BlinkEvent

_END = object()


class LiveSession:
    """A live session (:func:`live`): a context manager; iterate it for rows and blink events as
    they come.

    ``with eyeblink.live("tcp://127.0.0.1:5000", lsl=True) as s:`` loads the models, connects the
    source and runs the pipeline in a background thread of this process (its workers are child
    processes). In the block:

    * ``for item in s:`` yields :class:`~eyeblink.runtime.live.publish.LiveRow` (one per written
      row, frame order) and :class:`~eyeblink.signals.blinks.BlinkEvent` (as the detector settles
      them) until the source ends or :meth:`stop`; up to :attr:`QUEUE_ITEMS` unread items are kept
      (older ones are dropped: ``missed``);
    * ``s.state`` (the detector's :class:`~eyeblink.signals.state.EyeState`),
      ``s.wait_until_open(...)``;
    * callbacks ``on_frame(row)``, ``on_blink(event)``, ``on_state(change)`` run in the session's
      thread, in order, as each is written: keep them short.

    Leaving the block (or Ctrl-C in it, or the source ending) stops the capture, analyses every
    frame already captured, flushes the files and finalizes the session as ``eyeblink live`` does;
    Ctrl-C is then swallowed (the block ends normally; ``summary["live"]["stop_reason"]`` says
    ``stopped by SIGINT``). Afterwards :attr:`result` is the :class:`Session`.
    """

    #: unread items kept for iteration (~100 s of rows at 500 FPS)
    QUEUE_ITEMS = 50_000

    def __init__(
        self, source: str | int, output: str | Path | None, settings: dict[str, Any]
    ) -> None:
        from eyeblink.runtime.live.publish import LiveTap
        from eyeblink.runtime.live.sinks.queue import QueueSink

        _require_pandas()
        settings = dict(settings)
        landmarks = settings.get("landmarks")
        if landmarks == "auto":  # live's default: the model this machine runs at the source's rate
            del settings["landmarks"]
        with _settings_errors():
            cfg, rest = _run_config(
                settings, (*ANALYSIS, *LIVE_ONLY, *(f.name for f in dataclasses.fields(LiveConfig)))
            )
            self._callbacks = {k: rest.pop(k, None) for k in ("on_frame", "on_blink", "on_state")}
            for k, cb in self._callbacks.items():
                if cb is not None and not callable(cb):
                    raise ConfigError(f"{k} must be a function, got {cb!r}")
            self._analysis = _analysis(rest)
            self._name = rest.pop("name", None)
            self._start_method = rest.pop("start_method", None)
            if self._start_method is not None and not isinstance(self._start_method, str):
                raise ConfigError(
                    f"start_method must be a str (auto, spawn, forkserver or fork) or None, got "
                    f"{self._start_method!r}"
                )
            # a wrong one, or a script that spawned workers would run again: one line, before
            # anything loads
            check_main_guard(resolve_start_method(self._start_method))
            self._report = bool(rest.pop("report", False))
            stream: dict[str, Any] = {
                k: rest.pop(k)
                for k in ("reconnect", "stream_options", "read_timeout_s")
                if k in rest
            }
            auto = landmarks in (None, "auto") and cfg.landmarks.model_path is None
            live_defaults = _field_defaults(LiveConfig)
            if isinstance(rest.get("record"), os.PathLike):  # a path, as ``output`` takes
                rest["record"] = os.fspath(rest["record"])
            # None: the default (one per physical core), as process
            if "workers" in rest and rest["workers"] is None:
                del rest["workers"]
            for k, v in rest.items():
                if k in LIVE_RANGES and _is_number(v):
                    continue  # its range: LiveConfig's check, the CLI's (config.check_range)
                want = _type_ok(v, live_defaults[k])
                if want is not None:
                    raise ConfigError(f"live {k} must be {want}, got {v!r}")
            # their ranges: StreamOptions (config.check_range)
            for k in ("reconnect", "read_timeout_s"):
                if k in stream and not _is_number(stream[k]):
                    raise ConfigError(f"{k} must be a number, got {stream[k]!r}")
            # not given: the preset's [live] priority (a keyword given wins)
            if rest.get("priority") is None:
                rest["priority"] = cfg.live.priority
            self.live_config = LiveConfig(
                **{**rest, "landmarks": "auto" if auto else cfg.landmarks.model}
            )
            from eyeblink.sources.live import StreamOptions

            opts = stream.get("stream_options") or {}
            if not isinstance(opts, dict):
                raise ConfigError(f"stream_options must be a dict of FFmpeg options, got {opts!r}")
            self._stream = StreamOptions(
                options={str(k): str(v) for k, v in opts.items()},
                read_timeout_s=stream.get("read_timeout_s", 5.0),
                reconnect=stream.get("reconnect", 0),
            )
        if isinstance(source, int) and not isinstance(source, bool):
            source = str(source)  # live(0) is live("0"): camera 0
        if not isinstance(source, str):
            raise SettingsError(
                f"live source must be a camera index (0), a stream URL or basler:[SERIAL], "
                f"got {source!r}"
            )
        self.cfg = cfg
        self.source_spec = source
        self.output = output
        # the outputs, before any model loads: a missing lsl extra, the view's port taken raise now
        tap = LiveTap.from_config(self.live_config, cfg.blink_settings().max_blink_ms, always=True)
        assert tap is not None
        self.tap: LiveTap = tap
        #: why the last :meth:`wait_until_open` returned False ("" after True)
        self.wait_reason = ""
        # the session's own output: the callbacks and the queue the iterator reads
        # (eyeblink.runtime.live.sinks.queue)
        self._queue = QueueSink(
            **self._callbacks, max_items=self.QUEUE_ITEMS, failed=self._callback_failed
        )
        self.tap.add(self._queue)
        self.result: Session | None = None
        self._items: deque[Any] = self._queue.items
        self._cond = self._queue.cond
        self._ended = False
        self._error: BaseException | None = None
        self._run: _LiveRun | None = None
        self._stop_reason: str | None = None
        self._thread: threading.Thread | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._outdir: Path | None = None
        self._run_result: RunResult | None = None
        self._pipe: LivePipeline | None = None

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> EyeState:
        """The eye's state as of the last row written (``no_face`` before the detector has a
        baseline)."""
        return self.tap.tracker.state

    @property
    def time_s(self) -> float:
        """Capture time (``timestamp_s``, the source's clock) of the newest row written; NaN
        before the first."""
        return self.tap.newest_s

    @property
    def frame(self) -> int:
        """The newest row written (-1 before the first)."""
        return self.tap.newest_frame

    @property
    def age_ms(self) -> float:
        """How long ago (ms) the newest analysed frame was received: the age of :attr:`state` now
        (inf before the first frame)."""
        return self.tap.age_s() * 1000.0

    @property
    def stale(self) -> bool:
        """True when the newest analysed frame is older than the session's ``max_age_ms``:
        :attr:`state` is then about the past (a stalled camera or a pipeline that lags), and
        :meth:`wait_until_open` waits."""
        return self.tap.stale_now()

    @property
    def gate_port(self) -> int | None:
        """The gate socket's port on 127.0.0.1 once listening (``gate_port=0`` picks a free one)."""
        return self.tap.bound_port

    @property
    def view_url(self) -> str | None:
        """The browser view's address (``view=True``; None without a view): its port is taken as the
        session is made, before any model loads."""
        return next((url for s in self.tap.sinks if (url := getattr(s, "url", ""))), None)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._ended

    # ------------------------------------------------------------------ the session's thread

    @property
    def missed(self) -> int:
        """Rows and blinks dropped from the iterator's queue unread (more than
        :attr:`QUEUE_ITEMS` waited)."""
        return self._queue.missed

    def _callback_failed(self, exc: BaseException, cb: Any) -> None:
        """A callback raised (in the session's thread): the session stops; ``__exit__`` re-raises
        it."""
        if self._error is None:
            self._error = exc
        self.stop(f"a callback ({cb!r}) failed")

    def _started(self, run: _LiveRun) -> None:
        self._run = run
        if self._stop_reason is not None:
            run.request_stop(self._stop_reason)

    def _main(self, source: Any) -> None:
        from eyeblink.outputs.lock import session_locks
        from eyeblink.runtime.live.capture import finish

        try:
            assert self._pipe is not None and self._outdir is not None
            # one writer per session, before the capture
            with session_locks(self._outdir, [source.name]):
                with source:
                    result, run = self._pipe.run(
                        source, self._outdir, tap=self.tap, signals=False, started=self._started
                    )
                # the run's config: with auto, the eye model it chose once the source's rate was
                # known
                self._run_result = finish(result, run.cfg, self._analysis, report=self._report)
        except BaseException as exc:
            if self._error is None:
                self._error = exc
        finally:
            with self._cond:
                self._ended = True
                self._items.append(_END)
                self._cond.notify_all()

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> LiveSession:
        from eyeblink.outputs.export import ensure_output_dir
        from eyeblink.runtime.live.capture import prepare

        if self.output is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="eyeblink-live-")
            self._outdir = Path(self._tmp.name)
        else:
            self._outdir = ensure_output_dir(Path(self.output))
        try:
            self._pipe, source, self.cfg = prepare(
                self.source_spec,
                self.cfg,
                self.live_config,
                name=self._name,
                stream=self._stream,
                report=self._report,
                analysis=self._analysis,
                start_method=self._start_method,
            )
        except BaseException:
            self._cleanup()
            raise
        self._thread = threading.Thread(
            target=self._main, args=(source,), name="eyeblink-live", daemon=True
        )
        self._thread.start()
        # the models loaded, the outlets and the socket up (gate_port known), the source about to
        # connect
        try:
            while not self.tap.opened.wait(0.1):
                if self._ended:
                    break
        except BaseException:  # Ctrl-C while the models load
            self.__exit__(*sys.exc_info())
            raise
        if self._ended and self._error is not None:
            self._join()
            self._cleanup()
            raise self._error
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        # while the session ends, Ctrl-C (any number of times) stops it at once instead of escaping:
        # the files are closed, the children stopped and the ring unlinked whatever the user presses
        restore = self._catch_sigint()
        try:
            self.stop("stopped by SIGINT" if interrupted else "stopped by the program")
            self._join()
            stem = (
                self._run_result.stem
                if self._run_result is not None
                else getattr(getattr(self._run, "source", None), "name", None)
            )
            if (
                stem is not None
                and self._outdir is not None
                and (self._outdir / f"{stem}.summary.json").exists()
            ):
                with contextlib.suppress(EyeblinkError, OSError, ValueError):
                    self.result = load(self._outdir / stem)
                    if self.output is None:
                        self.result.paths = {}
        finally:
            self._cleanup()
            restore()
        aborted = isinstance(self._error, KeyboardInterrupt)
        if aborted:
            interrupted = True  # a second Ctrl-C: the session ended interrupted, its files whole
        elif self._error is not None and (exc_type is None or interrupted):
            raise self._error
        # Ctrl-C in the block stopped the session: every row is on disk, the block ends
        return interrupted

    def _catch_sigint(self) -> Callable[[], object]:
        """In the main thread: SIGINT aborts the session (see :meth:`_abort`) until the returned
        function runs."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        try:
            old = signal.signal(signal.SIGINT, lambda _s, _f: self._abort())
        except (ValueError, OSError):
            return lambda: None
        # None: the handler before was not Python's (an embedding application's); the default then
        return lambda: signal.signal(signal.SIGINT, old if old is not None else signal.SIG_DFL)

    def _abort(self) -> None:
        """A Ctrl-C while the session ends: stop at once (no more draining)."""
        self._stop_reason = self._stop_reason or "stopped by SIGINT"
        if self._run is not None:
            self._run.abort()

    def _join(self) -> None:
        if self._thread is None:
            return
        while self._thread.is_alive():
            try:
                self._thread.join(0.1)
            # outside the main thread's handler (another thread's session)
            except KeyboardInterrupt:
                self._abort()

    def _cleanup(self) -> None:
        if not self.tap.closed:  # no run closed them: the view's port, taken as the session began
            for sink in self.tap.sinks:
                sink.close(None)
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.cleanup()
            self._tmp = None

    # ------------------------------------------------------------------ in the block

    def stop(self, reason: str = "stopped by the program") -> None:
        """Stop the capture (frames already captured are still analysed); the iteration then
        ends."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self._run is not None:
            self._run.request_stop(reason)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the source ends (or :meth:`stop`); False after ``timeout_s``."""
        deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        with self._cond:
            while not self._ended:
                left = None if deadline is None else deadline - time.perf_counter()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.1 if left is None else min(left, 0.1))
        return True

    # a LiveRow is a named tuple built from the columns at import: to a type checker, a tuple
    def __iter__(self) -> Iterator[tuple[Any, ...] | BlinkEvent]:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait(0.1)
                item = self._items.popleft()
            if item is _END:
                with self._cond:
                    self._items.appendleft(_END)  # a second loop ends at once too
                if self._error is not None:
                    raise self._error
                return
            if type(item) is tuple:  # a row, kept by the queue as a plain tuple of its cells
                item = tuple.__new__(LiveRow, item)
            yield item

    def wait_until_open(
        self,
        stable_ms: float = 200.0,
        timeout_s: float | None = None,
        max_age_ms: float | None = None,
    ) -> bool:
        """Block until the eye is ``open``, settled, has stayed open for ``stable_ms`` of capture
        time (the state the ``open_stable`` marker and gate line report) **and** the newest analysed
        frame was received at most ``max_age_ms`` ago (default: the session's ``max_age_ms``); True
        then, checked at the moment it returns. A stale answer is never True: it keeps waiting.
        False after ``timeout_s`` seconds or when the session ended first, with the reason in
        :attr:`wait_reason`. Returns at once when it already holds."""
        if not (
            isinstance(stable_ms, (int, float)) and math.isfinite(stable_ms) and stable_ms >= 0
        ):
            raise SettingsError(f"stable_ms must be a finite number >= 0, got {stable_ms!r}")
        if max_age_ms is not None and not (
            isinstance(max_age_ms, (int, float)) and math.isfinite(max_age_ms) and max_age_ms > 0
        ):
            raise SettingsError(f"max_age_ms must be a finite number > 0, got {max_age_ms!r}")
        deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        with self._cond:
            while True:
                ok, why = self.tap.open_now(stable_ms, max_age_ms)
                if ok:
                    self.wait_reason = ""
                    return True
                if self._ended:
                    self.wait_reason = f"the session ended ({why})"
                    return False
                left = None if deadline is None else deadline - time.perf_counter()
                if left is not None and left <= 0:
                    self.wait_reason = f"timed out after {timeout_s:g} s: {why}"
                    return False
                # the tap notifies on every event; a frozen stream sends none, so poll within the
                # bound too
                self._cond.wait(
                    min(0.005, self.tap.max_age_s / 4)
                    if left is None
                    else min(left, 0.005, self.tap.max_age_s / 4)
                )

    def __repr__(self) -> str:
        return (
            f"LiveSession({self.source_spec!r}, state={self.state.value}, running={self.running})"
        )


def live(source: str | int, output: str | Path | None = None, **settings: Any) -> LiveSession:
    """A live session on a camera or stream (``source`` as for ``eyeblink live``: ``0``,
    ``tcp://...``, ``basler:``), as a context manager (:class:`LiveSession`).

    ``output``: where ``<stem>.frames.csv`` (with ``dropped``), ``.blinks.csv`` and
    ``.summary.json`` are written as the frames arrive (``None``: a temporary folder, removed at the
    end; the tables stay in :attr:`LiveSession.result`). ``settings``: the preset keys as for
    :func:`process`, the live ones of :class:`~eyeblink.config.LiveConfig` (``lsl``, ``lsl_name``,
    ``lsl_wait_s``, ``gate_port``, ``stable_ms``, ``duration_s``, ``overload``, ``workers``,
    ``buffer_s``, ...), ``name``, ``reconnect``, ``stream_options`` (a dict of FFmpeg options),
    ``read_timeout_s``, ``report``, ``start_method`` (how the pipeline's processes start, as for
    :func:`process`), the conditioning options and the callbacks ``on_frame``, ``on_blink``,
    ``on_state``. A wrong setting raises :class:`SettingsError` at once, before any model loads.
    """
    return LiveSession(source, output, settings)
