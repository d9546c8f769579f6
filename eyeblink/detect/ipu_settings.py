"""The IPU backend's configuration and host-side plumbing, without the Poplar SDK.

Everything here is plain Python so that it is unit-tested on any machine
(``tests/test_backends.py``); :mod:`eyeblink.detect.ipu` is the thin layer that hands these
values to Graphcore's TensorFlow (``tensorflow.python.ipu``):

* :func:`ipu_settings` turns the run's settings (batch size, :class:`AcceleratorOptions`) into a
  frozen :class:`IPUSettings`, validated against Poplar's limits;
* :meth:`IPUSettings.ipu_config_fields` lists the ``IPUConfig`` attributes to set, by dotted
  name (``io_tiles.num_io_tiles`` ...), and :func:`apply_ipu_config` sets them on an ``IPUConfig``
  (or any object with the same attribute tree), failing with a clear error when the installed
  SDK lacks one;
* :class:`OutfeedDrainer` is the asynchronous callback thread that empties the
  ``IPUOutfeedQueue``: the host thread that feeds the device never waits for results.

Why these settings (from the seed study; see ``pipelines/ipu-*.toml``): BlazeFace is tiny, so on
an IPU the time goes into moving 128x128x3 float32 images in (196 KB each) rather than into
compute. Reserving I/O tiles (``io_tiles.num_io_tiles``, with ``place_ops_on_io_tiles``) lets the
next batch stream in while the compute tiles run the current one; 64 I/O tiles gave the best
throughput on MK1 (batch 32) and MK2 (batch 64), 32 tiles and batches of at most 16 the lowest
latency. ``prefetch_depth`` 2 keeps one batch ready in the Poplar data stream behind the one being
read.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eyeblink.detect import IO_TILES_RANGE, AcceleratorOptions
from eyeblink.errors import BackendUnavailableError, ConfigError

__all__ = ["IPUSettings", "OutfeedDrainer", "apply_ipu_config", "ipu_settings"]

#: Largest number of IPUs a single host process asks for (a POD16).
MAX_REPLICAS = 16


@dataclass(frozen=True)
class IPUSettings:
    """Everything the IPU backend configures, as plain values.

    ``batch_size``: images per replica per device step (the compiled, static batch).
    ``steps_per_execution``: device-loop iterations per host call (``ipu.loops.repeat`` count);
    1 keeps latency lowest, more amortises the host call over several batches.
    ``replicas``: IPUs each running a copy (``auto_select_ipus``); one device step then
    consumes ``batch_size * replicas`` images.
    """

    batch_size: int
    steps_per_execution: int
    replicas: int
    num_io_tiles: int
    place_ops_on_io_tiles: bool
    io_tiles_available_memory_proportion: float
    prefetch_depth: int
    jit_compile: bool

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"IPU batch_size must be >= 1, got {self.batch_size}")
        if self.steps_per_execution < 1:
            raise ConfigError(
                f"IPU steps_per_execution must be >= 1, got {self.steps_per_execution}"
            )
        if not 1 <= self.replicas <= MAX_REPLICAS:
            raise ConfigError(f"replicas must be in [1, {MAX_REPLICAS}], got {self.replicas}")
        lo, hi = IO_TILES_RANGE
        if self.num_io_tiles != 0 and not (
            lo <= self.num_io_tiles <= hi and self.num_io_tiles % 2 == 0
        ):
            raise ConfigError(
                f"io_tiles must be 0 (off) or an even number in [{lo}, {hi}], got "
                f"{self.num_io_tiles}"
            )
        if self.place_ops_on_io_tiles and self.num_io_tiles == 0:
            raise ConfigError("place_ops_on_io_tiles needs io_tiles > 0")
        if not 0.0 < self.io_tiles_available_memory_proportion <= 1.0:
            raise ConfigError(
                "io_tiles available_memory_proportion must be in (0, 1], "
                f"got {self.io_tiles_available_memory_proportion}"
            )
        if not 1 <= self.prefetch_depth <= 255:
            raise ConfigError(f"prefetch_depth must be in [1, 255], got {self.prefetch_depth}")

    @property
    def images_per_step(self) -> int:
        """Images consumed by one device-loop iteration over all replicas."""
        return self.batch_size * self.replicas

    @property
    def images_per_execution(self) -> int:
        """Images consumed by one host call (``steps_per_execution`` iterations)."""
        return self.images_per_step * self.steps_per_execution

    def ipu_config_fields(self) -> dict[str, Any]:
        """``IPUConfig`` attributes to set, by dotted path, in the order they are applied."""
        fields: dict[str, Any] = {"auto_select_ipus": self.replicas}
        if self.num_io_tiles:
            fields["io_tiles.num_io_tiles"] = self.num_io_tiles
            fields["io_tiles.place_ops_on_io_tiles"] = self.place_ops_on_io_tiles
            fields["io_tiles.available_memory_proportion"] = (
                self.io_tiles_available_memory_proportion
            )
        return fields

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def ipu_settings(
    *,
    batch_size: int,
    accelerator: AcceleratorOptions | None = None,
    steps_per_execution: int = 1,
    io_tiles_available_memory_proportion: float = 0.9,
) -> IPUSettings:
    """The IPU settings for a detector with ``batch_size`` and ``accelerator`` options.

    I/O tiles are used for I/O operations whenever some are reserved
    (``place_ops_on_io_tiles = io_tiles > 0``): reserving them without placing the infeed and
    outfeed there would only take tiles away from compute.
    """
    opts = accelerator or AcceleratorOptions()
    return IPUSettings(
        batch_size=int(batch_size),
        steps_per_execution=int(steps_per_execution),
        replicas=opts.replicas,
        num_io_tiles=opts.io_tiles,
        place_ops_on_io_tiles=opts.io_tiles > 0,
        io_tiles_available_memory_proportion=float(io_tiles_available_memory_proportion),
        prefetch_depth=opts.prefetch_depth,
        jit_compile=opts.jit_compile,
    )


def apply_ipu_config(settings: IPUSettings, config: Any) -> Any:
    """Set :meth:`IPUSettings.ipu_config_fields` on ``config`` (an ``IPUConfig``) and return it.

    Raises :class:`BackendUnavailableError` naming the attribute when the installed SDK's
    ``IPUConfig`` has no such field (too old a Poplar SDK).
    """
    for dotted, value in settings.ipu_config_fields().items():
        *parents, leaf = dotted.split(".")
        target = config
        for part in parents:
            if not hasattr(target, part):
                raise BackendUnavailableError(
                    f"this Poplar SDK's IPUConfig has no {dotted!r}; install a newer Poplar SDK "
                    "(eyeblink needs IPUConfig with io_tiles, SDK 2.1 or later)"
                )
            target = getattr(target, part)
        if not hasattr(target, leaf):
            raise BackendUnavailableError(
                f"this Poplar SDK's IPUConfig has no {dotted!r}; install a newer Poplar SDK "
                "(eyeblink needs IPUConfig with io_tiles, SDK 2.1 or later)"
            )
        setattr(target, leaf, value)
    return config


class OutfeedDrainer:
    """A daemon thread that empties an outfeed and hands each result to a callback, in order.

    ``dequeue()`` returns a sequence of results (possibly empty: nothing enqueued since the last
    call), as ``IPUOutfeedQueue.dequeue()`` does; ``on_result(item)`` is called for each, on this
    thread. The thread polls every ``poll_s`` seconds while idle and stops at :meth:`stop`
    (after one last drain). An exception from ``dequeue`` or ``on_result`` stops the thread and is
    re-raised by :meth:`check` / :meth:`stop` in the owner's thread, never swallowed.
    """

    def __init__(
        self,
        dequeue: Callable[[], Any],
        on_result: Callable[[Any], None],
        *,
        poll_s: float = 0.0005,
        name: str = "eyeblink-ipu-outfeed",
    ) -> None:
        self._dequeue = dequeue
        self._on_result = on_result
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> OutfeedDrainer:
        self._thread.start()
        return self

    def _drain_once(self) -> int:
        items = self._dequeue()
        n = 0
        for item in items:
            self._on_result(item)
            n += 1
        return n

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                if self._drain_once() == 0:
                    self._stop.wait(self._poll_s)
            self._drain_once()
        except BaseException as exc:  # handed to the owner by check()/stop()
            self._error = exc

    def check(self) -> None:
        """Re-raise a failure of the drain thread in the calling thread."""
        if self._error is not None:
            raise self._error

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after a final drain; re-raises the thread's failure, if any."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise TimeoutError(f"outfeed drain thread did not stop within {timeout_s} s")
        self.check()


class ResultRouter:
    """Matches outfeed results to the requests waiting for them (FIFO tickets).

    The feeding side calls :meth:`expect` with the number of device steps a request occupies and
    gets a ticket; the drain thread calls :meth:`deliver` for every step result; :meth:`wait`
    returns a ticket's results (in order) once all have arrived, or raises ``TimeoutError``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()  # (ticket, steps)
        self._current: tuple[int, int] | None = None
        self._results: dict[int, list[Any]] = {}
        self._done: dict[int, threading.Event] = {}
        self._next = 0

    def expect(self, steps: int) -> int:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        with self._lock:
            ticket = self._next
            self._next += 1
            self._results[ticket] = []
            self._done[ticket] = threading.Event()
        self._pending.put((ticket, steps))
        return ticket

    def deliver(self, item: Any) -> None:
        if self._current is None:
            try:
                self._current = self._pending.get_nowait()
            except queue.Empty:
                raise RuntimeError("the device produced a result nobody asked for") from None
        ticket, steps = self._current
        with self._lock:
            self._results[ticket].append(item)
            complete = len(self._results[ticket]) == steps
        if complete:
            self._current = None
            self._done[ticket].set()

    def wait(
        self, ticket: int, timeout_s: float, check: Callable[[], None] | None = None
    ) -> list[Any]:
        event = self._done[ticket]
        remaining = timeout_s
        while not event.wait(min(0.05, remaining)):
            if check is not None:
                check()
            remaining -= 0.05
            if remaining <= 0:
                raise TimeoutError(f"no result from the IPU within {timeout_s} s")
        with self._lock:
            del self._done[ticket]
            return self._results.pop(ticket)
