"""The loader role of a multiprocess run: decode the input into the ring and deal the frames to the
workers.

One loader reads the whole input (:meth:`_LoaderRole._loader_main`); several loaders read ranges of
it in turn (:meth:`_LoaderRole._range_loader_main`, started by the parent's ``_start_ranges``), each
with its own ring slots and free-slot queue, never more than a window ahead of the sink.
:class:`_Batcher` gathers the outgoing frame records into one message per batch.
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from eyeblink import host
from eyeblink.errors import EyeblinkError
from eyeblink.runtime.procs.roles.base import _ChildRole, _Stop


class _Batcher:
    """The loader's outgoing frame records: gathered until ``batch_frames`` are waiting or a chunk
    ends, then sent as one message to the worker that owns the chunk (``chunk % W``)."""

    def __init__(self, run: _LoaderRole) -> None:
        self._run = run
        self.n = 0  # frames added so far: the next frame's index
        self._first = 0
        self._slots: list[int] = []
        self._ts: list[float] = []
        self._td: list[float] = []

    def add(self, slot: int, timestamp_s: float, t_decoded: float) -> None:
        """One frame (``slot`` -1: a gap the live loader dropped); sent when its batch or chunk
        is full."""
        preview = self._run.preview
        # the view asked for a frame (<= 30 a second)
        if preview is not None and slot >= 0 and preview.wanted():
            preview.put(self.n, self._run.ring[slot])  # type: ignore[index]
        self._slots.append(slot)
        self._ts.append(timestamp_s)
        self._td.append(t_decoded)
        self.n += 1
        if len(self._slots) >= self._run.B or self.n % self._run.C == 0:
            self.flush()

    @property
    def starting(self) -> bool:
        """Whether the next frame starts a batch (none is waiting)."""
        return not self._slots

    def start_at(self, first: int) -> None:
        """Continue at frame ``first`` (a loader's next range; ranges start on chunk boundaries)."""
        self.flush()
        self.n = self._first = first

    def flush(self) -> None:
        """Send what is waiting (the end of the input: a partial batch)."""
        if self._slots:
            run = self._run
            c = self._first // run.C
            run._put(
                run._dest(c),
                (
                    c,
                    self._first,
                    np.asarray(self._slots, np.int32),
                    np.asarray(self._ts),
                    np.asarray(self._td),
                ),
            )
            self._slots.clear()
            self._ts.clear()
            self._td.clear()
        self._first = self.n


class _LoaderRole(_ChildRole):
    """The loaders' methods (a mixin of :class:`eyeblink.runtime.procs.parallel._Run`)."""

    def _take_slot(self, free: list[int], free_q: Any, drain: bool = True) -> int:
        """A free ring slot for the next frame: wait for one if none is known, and take back every
        other slot the workers have freed meanwhile without waiting (``drain``; the file loaders do
        at the start of each batch: workers free slots a batch at a time, and an empty look at the
        queue costs a system call).
        """
        if not free:
            free.extend(self._get(free_q))
        elif not drain:
            return free.pop()
        while True:
            try:
                free.extend(free_q.get_nowait())
            except queue.Empty:
                break
        return free.pop()

    @contextlib.contextmanager
    def _as_loader(
        self, batch: _Batcher, on_exit: Callable[[], object] | None = None
    ) -> Iterator[None]:
        """A loader's ends: a stop asked for (:class:`_Stop`) quits quietly; anything else is
        reported with the frames dealt so far and ends the process with status 1 (the parent reads
        the report); ``on_exit`` runs last in every case."""
        try:
            yield
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report("loader", -1, batch.n, exc)
            self._quit()
            raise SystemExit(1) from None
        finally:
            if on_exit is not None:
                on_exit()

    def _loader_main(self) -> None:
        self._child_setup()
        ring = self.ring
        assert ring is not None
        free: list[int] = list(range(len(ring) - 1, -1, -1))
        max_frames = self.cfg.max_frames
        decode_s = 0.0
        batch = _Batcher(self)
        source_error: EyeblinkError | None = None
        with self._as_loader(batch):
            frames = iter(self.source)
            while max_frames is None or batch.n < max_frames:
                t0 = time.perf_counter()
                try:
                    frame = next(frames)
                except StopIteration:
                    break
                except EyeblinkError as exc:  # decode error part-way: what came before still counts
                    source_error = exc
                    break
                t1 = time.perf_counter()
                decode_s += t1 - t0
                slot = self._take_slot(free, self.free_q, batch.starting)
                ring.put(slot, frame.image)
                batch.add(slot, frame.timestamp_s, t1)
            batch.flush()
            n = batch.n
            info = self.source.describe()
            self.source.close()
            self._put(self.out_q, ("eof", n, info, decode_s, n, source_error))
            self._end_of_input()

    def _release(self, slots: np.ndarray) -> None:
        """A worker hands the ring slots it has read back to the loader(s) that own them."""
        if self.n_loaders == 1:
            self._put(self.free_q, slots.tolist())
            return
        owner = slots % self.n_loaders
        for lid in np.unique(owner).tolist():
            self._put(self.free_qs[lid], slots[owner == lid].tolist())

    def _loader_pid(self, lid: int) -> int | None:
        if self.loaders and 0 <= lid < len(self.loaders):
            return self.loaders[lid].pid
        return self.loader.pid if self.loader is not None else None

    def _wait_window(self, first: int) -> None:
        """Block (stop-aware) until frame ``first`` is within :attr:`window` of the sink's write
        position."""
        assert self.written is not None
        while first - self.written.value > self.window:
            if self.stop.is_set() or not host.parent_alive():
                raise _Stop
            time.sleep(0.002)

    def _range_loader_main(self, lid: int) -> None:
        from eyeblink.sources.ranges import RangeReader

        self._child_setup()
        ring, plan, n = self.ring, self.plan, self.n_loaders
        assert ring is not None and plan is not None
        free: list[int] = list(range(len(ring) - 1, -1, -1))
        free = [s for s in free if s % n == lid]
        free_q = self.free_qs[lid]
        decode_s = 0.0
        decoded = 0
        # the frame the stream ended at, when the file's last range ends early (sources.ranges)
        ended = None
        batch = _Batcher(self)
        reader = RangeReader(self.source, plan)  # one decoder for all of this loader's ranges
        try:
            for rng in plan.ranges[lid::n]:
                self._wait_window(rng.first)
                batch.start_at(rng.first)
                frames = reader.frames(rng)
                before = decoded
                while True:
                    t0 = time.perf_counter()
                    try:
                        frame = next(frames)
                    except StopIteration:
                        break
                    except EyeblinkError:  # rows below it still count: send them, then report it
                        batch.flush()
                        raise
                    t1 = time.perf_counter()
                    decode_s += t1 - t0
                    decoded += 1
                    slot = self._take_slot(free, free_q, batch.starting)
                    ring.put(slot, frame.image)
                    batch.add(slot, frame.timestamp_s, t1)
                batch.flush()
                if decoded - before < rng.stop - rng.first:
                    ended = rng.first + decoded - before
            self._put(self.out_q, ("part", lid, decode_s, decoded, ended))
            self._end_of_input()
        except _Stop:
            self._quit()
        except BaseException as exc:
            self._report("loader", lid, batch.n, exc)
            self._quit()
            raise SystemExit(1) from None
        finally:
            reader.close()

    def _merge_part(self, msg: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Gather the loaders' ``part`` messages; the input's ``eof`` message once every loader
        sent one."""
        _, lid, decode_s, decoded, ended = msg
        self._parts[lid] = (decode_s, decoded, ended)
        if len(self._parts) < self.n_loaders:
            return None
        plan = self.plan
        # the file's last range may end early (its last packets decode to nothing): the input ends
        # there
        frames = min([plan.frames, *(p[2] for p in self._parts.values() if p[2] is not None)])
        return (
            "eof",
            frames,
            plan.info or None,
            sum(p[0] for p in self._parts.values()),
            sum(p[1] for p in self._parts.values()),
            None,
        )
