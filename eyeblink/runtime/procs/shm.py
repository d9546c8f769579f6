"""A ring of frame slots in shared memory: how pixels travel between pipeline processes.

At 500 FPS a 640x480 gray stream is 150 MB/s; pickling that through pipes would cost more CPU
than decoding it. Instead the loader writes each decoded frame into a free *slot* of one
:class:`multiprocessing.shared_memory.SharedMemory` block and the queues carry only small
records (frame index, timestamp, slot number). A slot is owned by exactly one process at a time:
the loader takes it from its free list, writes the pixels, hands the slot number to a worker with
the frame record, and the worker gives it back (through the bounded free-slot queue) once the
frame is analysed. The ring's size bounds the frames in flight, and therefore the memory.

The block is created (and finally unlinked) by the parent; children started with the ``fork``
start method inherit the mapping, so attaching costs nothing and the pages are shared, not copied.
A child forked before the block exists (live mode forks its workers before the stream is opened,
when the frame size is not known yet) attaches to it by name with :meth:`FrameRing.attach`.

**Names and stale rings.** A block is named ``eyeblink_<pid>_<random>`` (:data:`RING_PREFIX`),
``<pid>`` being the process that created it and is to unlink it. A run killed outright (SIGKILL of
its process group, the OOM killer, a Ray worker killed at shutdown) cannot unlink its ring, and
Linux keeps the memory until reboot; so every ``process``, ``batch`` (driver and each task) and
``live`` run starts with :func:`remove_stale_rings`, which unlinks the blocks with that prefix whose
creator no longer runs (and logs each one). A pid is checked on this machine: shared memory is per
machine, and a pid that was reused meanwhile only keeps a stale block a little longer. Where the OS
keeps such blocks, and where it can list them, is :func:`eyeblink.host.remove_stale_shared_memory`'s
(Linux; Windows frees a block with its last handle; macOS cannot list them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from dataclasses import dataclass
from multiprocessing import shared_memory
from types import TracebackType
from typing import Any

import numpy as np

from eyeblink import host

__all__ = [
    "RING_MEMORY_SHARE",
    "RING_PREFIX",
    "RING_SHM_SHARE",
    "FrameRing",
    "RingSpec",
    "remove_stale_rings",
    "ring_cap_bytes",
    "ring_refusal",
]

#: Start of every ring's name: ``eyeblink_<creator pid>_<random hex>``.
RING_PREFIX = "eyeblink_"
# its name before runtime/procs/: the prefix users see in the log
log = logging.getLogger("eyeblink.runtime.shm")


@dataclass(frozen=True, slots=True)
class RingSpec:
    """Geometry of a ring: ``slots`` frames of ``shape`` uint8 pixels (``(H, W)`` or ``(H, W,
    3)``)."""

    slots: int
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"RingSpec.slots must be >= 1, got {self.slots}")
        if len(self.shape) not in (2, 3) or any(int(s) < 1 for s in self.shape):
            raise ValueError(
                f"RingSpec.shape must be (H, W) or (H, W, 3) with sizes >= 1, got {self.shape}"
            )
        if len(self.shape) == 3 and self.shape[2] != 3:
            raise ValueError(f"RingSpec.shape must have 3 channels when 3-D, got {self.shape}")

    @property
    def slot_bytes(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.slots * self.slot_bytes


class FrameRing:
    """``slots`` uint8 frames in one shared-memory block; ``ring[i]`` is slot ``i`` as an ndarray
    view.

    Create it in the parent (``FrameRing(spec)``), fork the children, and call :meth:`close` in
    every process and :meth:`unlink` once in the parent (the context manager does both in the
    creating process). Views returned by ``ring[i]`` alias the shared pages: write with
    ``ring[i][...] = image`` (one memcpy, ~0.02 ms for 640x480) and never keep a view past the
    moment the slot is handed back.
    """

    def __init__(
        self,
        spec: RingSpec,
        *,
        name: str | None = None,
        block: shared_memory.SharedMemory | None = None,
    ) -> None:
        self.spec = spec
        if block is not None:  # one this process created with reserve(): it owns it
            self._shm: shared_memory.SharedMemory | None = block
        else:
            self._shm = _create(spec.nbytes) if name is None else _attach(name)
        # an attached ring is never unlinked by its user
        self._owner_pid = _pid() if name is None else -1
        if self._shm.size < spec.nbytes:
            raise ValueError(
                f"shared-memory block {self._shm.name} holds {self._shm.size} bytes, fewer than "
                f"{spec}"
            )
        buf = self._shm.buf
        assert buf is not None
        self._frames: np.ndarray | None = np.ndarray(
            (spec.slots, *spec.shape), dtype=np.uint8, buffer=buf
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """A child started with ``spawn`` or ``forkserver`` gets the ring by name (it maps the same
        block; never a copy of the frames): :meth:`attach`."""
        return FrameRing.attach, (self.name, self.spec)

    @staticmethod
    def reserve(nbytes: int) -> shared_memory.SharedMemory:
        """A block of ``nbytes`` created and faulted in now, for a ring whose geometry comes later.

        Live mode reserves its ring before it connects to the stream (whose frame size it does
        not know yet), so that the page faults (see :meth:`prefault`) are paid before the first
        frame; ``FrameRing(spec, block=block)`` then lays the ring out in it. The caller owns
        the block until then (``close()`` and ``unlink()`` it if it goes unused).
        """
        block = _create(max(1, int(nbytes)))
        assert block.buf is not None
        np.ndarray((block.size,), np.uint8, buffer=block.buf)[::_PAGE] = 0
        return block

    @classmethod
    def attach(cls, name: str, spec: RingSpec) -> FrameRing:
        """The ring created elsewhere under ``name`` (by the parent, after this process was
        forked)."""
        return cls(spec, name=name)

    @property
    def name(self) -> str:
        return self._require().name

    def _require(self) -> shared_memory.SharedMemory:
        if self._shm is None:
            raise RuntimeError("FrameRing is closed")
        return self._shm

    def __len__(self) -> int:
        return self.spec.slots

    def __getitem__(self, slot: int) -> np.ndarray:
        if self._frames is None:
            raise RuntimeError("FrameRing is closed")
        return self._frames[slot]

    def prefault(self, slots: int | None = None) -> None:
        """Map the pages of the first ``slots`` slots (default all) into this process now.

        A page's first touch costs a page fault (and in the creator the zeroing): ~0.3 ms per
        640x480 frame on bare metal, and up to ~2 ms in a VM whose memory is backed lazily by its
        host. Live mode pays that before the capture for the slots it reuses all the time: the
        loader's free list is last-in-first-out and starts with the lowest slots, so the frames in
        flight cycle through the first few slots, and the rest of the ring is touched only
        when a backlog fills it.
        """
        frames = self._frames
        if frames is None:
            raise RuntimeError("FrameRing is closed")
        head = frames[: len(frames) if slots is None else max(0, slots)].reshape(-1)
        if self._owner_pid == _pid():
            head[::_PAGE] = 0  # allocate (the creator): one write per page
        else:
            int(head[::_PAGE].sum(dtype=np.uint64))  # map (the others): one read per page

    def put(self, slot: int, image: np.ndarray) -> None:
        """Copy ``image`` into ``slot``; the shape must be the ring's."""
        if image.shape != self.spec.shape:
            raise ValueError(
                f"frame of shape {image.shape} does not fit a ring slot of shape {self.spec.shape}"
            )
        self[slot][...] = image

    def close(self) -> None:
        """Drop this process's mapping (idempotent); the block lives on until :meth:`unlink`."""
        self._frames = None
        if self._shm is not None:
            shm, self._shm = self._shm, None
            # BufferError: a view is still alive somewhere in this process; the OS unmaps at exit
            with contextlib.suppress(BufferError):
                shm.close()

    def unlink(self) -> None:
        """Remove the block (creator only; idempotent)."""
        if _pid() != self._owner_pid:
            return
        if self._shm is not None:
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()

    def __enter__(self) -> FrameRing:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unlink()
        self.close()


_PAGE = 4096


def _create(nbytes: int) -> shared_memory.SharedMemory:
    """A new block named ``eyeblink_<pid>_<random>``, so that a leftover can be traced to its
    creator."""
    for _ in range(16):
        try:
            return shared_memory.SharedMemory(
                name=f"{RING_PREFIX}{os.getpid()}_{secrets.token_hex(4)}", create=True, size=nbytes
            )
        except FileExistsError:  # pragma: no cover - 32 random bits
            continue
    return shared_memory.SharedMemory(create=True, size=nbytes)  # pragma: no cover


def remove_stale_rings(shm_dir: str | None = None) -> list[str]:
    """Unlink the rings whose creating process no longer runs (in ``shm_dir``, default: where this
    OS keeps them, :func:`eyeblink.host.shared_memory_dir`; none on macOS and Windows); returns
    their names.

    Only names of the form ``eyeblink_<pid>_<hex>`` are touched; a block another user owns, or one
    removed meanwhile by someone else, is left alone. Each removal is logged (``--log-level info``).
    """
    removed = []
    for path, size, pid in host.remove_stale_shared_memory(RING_PREFIX, shm_dir):
        removed.append(os.path.basename(path))
        log.info(
            "removed the shared-memory ring %s (%.0f MB) left by process %s, which no longer runs",
            path,
            size / 1e6,
            pid,
        )
    return removed


def _attach(name: str) -> shared_memory.SharedMemory:
    """Map an existing block by name.

    Python (before 3.13) registers every mapped block with the resource tracker, which unlinks
    what is still registered when it shuts down. The tracker must therefore be the creator's:
    fork the attaching child after ``multiprocessing.resource_tracker.ensure_running()`` in the
    parent, so both register the name in the same tracker and the creator's unlink clears it.
    """
    return shared_memory.SharedMemory(name=name, create=False)


def _pid() -> int:
    import os

    return os.getpid()


#: a live ring may take at most this share of the memory available
#: (:func:`eyeblink.host.memory_available_bytes`) ...
RING_MEMORY_SHARE = 0.25
#: ... and at most this share of the free space where shared memory lives (Linux: its own tmpfs)
RING_SHM_SHARE = 0.5


def ring_cap_bytes(shm_dir: str | None = None) -> tuple[int | None, str]:
    """The most a live ring may take now, and why: :data:`RING_MEMORY_SHARE` of the memory available
    and :data:`RING_SHM_SHARE` of the free space where shared memory lives (``shm_dir``, default:
    this OS's place, :func:`eyeblink.host.shared_memory_free`), whichever is less (None where
    neither can be read)."""
    caps: list[tuple[int, str]] = []
    avail = host.memory_available_bytes()
    if avail is not None:
        caps.append(
            (
                int(RING_MEMORY_SHARE * avail),
                f"{RING_MEMORY_SHARE:.0%} of the {avail / 2**30:.1f} GiB of memory available",
            )
        )
    shm = host.shared_memory_free(shm_dir)
    if shm is not None:
        free, where = shm
        caps.append(
            (
                int(RING_SHM_SHARE * free),
                f"{RING_SHM_SHARE:.0%} of the {free / 2**30:.1f} GiB free in {where}",
            )
        )
    if not caps:
        return None, "memory not readable here"
    return min(caps)


def ring_refusal(spec: RingSpec, fps: float | None, buffer_s: float, cap: int, why: str) -> str:
    """The one line of a ring past the memory cap: what it needs, what is allowed, the
    ``--buffer`` that fits."""
    height, width = spec.shape[:2]
    fits = cap / (spec.slot_bytes * fps) if fps else 0.0
    where = host.shared_memory_dir()
    fix = (
        f"lower --buffer to {fits:.2g} s or less"
        if fits >= 0.01
        else f"free memory{f' (or {where})' if where else ''}, or send smaller frames"
    )
    return (
        f"the live ring for --buffer {buffer_s:g} s of {width}x{height} frames at {fps or 0:.4g} "
        "FPS needs "
        f"{spec.nbytes / 2**20:,.0f} MiB of shared memory, more than a ring may take here "
        f"({cap / 2**20:,.0f} MiB: {why}); {fix}"
    )
