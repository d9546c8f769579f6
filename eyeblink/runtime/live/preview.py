"""The frame the browser view shows: handed from the loader process to the view, on request, through
a small named shared-memory block (:class:`PreviewGrab`). The loader copies a frame only when the
view asks for one."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from eyeblink.runtime.procs.shm import RING_PREFIX

__all__ = ["GRAB_SIDE", "PreviewGrab"]

#: the longest side of a frame the loader hands over (a larger frame is subsampled by an integer
#: step first)
GRAB_SIDE = 640


class PreviewGrab:
    """One frame handed from the loader process to the view, on request, through an anonymous shared
    mapping.

    Made in the parent before the loader starts; a child maps the same block by its name (pickled
    with the run, whatever the start method), and the parent removes it at :meth:`close`. The view
    sets the request flag; the loader, after putting a frame into the ring, reads that flag (one
    shared int) and, when set, copies the frame (subsampled to at most :data:`GRAB_SIDE`) under a
    sequence lock and clears it. So the loader copies at most as many frames as the view asks for
    (30 a second, and none while no tab is open).

    The eye points of that frame come the same way from the worker that analyses it: the loader
    names the frame (:meth:`points_wanted`, one shared int a worker reads per frame), the worker
    copies the eye model's 12 points (:meth:`put_points`) before it sends the frame's row, and the
    view reads them once the row is written.
    """

    #: int64: want, seq, frame, height, width, channels, the serving loader's pid, frame height,
    #: width, -, then the points: the frame whose points are wanted, their seq, their frame, 1 when
    #: a face was fitted
    HEADER = 14
    POINTS = 24 * 4  # (12, 2) float32

    def __init__(self, side: int = GRAB_SIDE) -> None:
        self.capacity = side * side * 3
        self.side = side
        size = self.HEADER * 8 + self.POINTS + self.capacity
        # named as the rings are (swept as they are after a crash), short enough for macOS's 31
        # characters
        self._shm = shared_memory.SharedMemory(
            name=f"{RING_PREFIX}{os.getpid()}_v{os.urandom(4).hex()}", create=True, size=size
        )
        self._owner = os.getpid()
        self._map()
        self._hdr[:] = [0] * self.HEADER
        self._hdr[10] = -1
        self._last_seq = 0
        self.grabs = 0  # frames taken (in the view's process)

    def _map(self) -> None:
        buf = self._shm.buf
        assert buf is not None
        self._hdr = (ctypes.c_int64 * self.HEADER).from_buffer(buf)
        self._pts = np.ndarray((12, 2), np.float32, buffer=buf, offset=self.HEADER * 8)
        self._pix = np.ndarray(
            (self.capacity,), np.uint8, buffer=buf, offset=self.HEADER * 8 + self.POINTS
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self._shm.name, "side": self.side}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.side = state["side"]
        self.capacity = self.side * self.side * 3
        self._shm = shared_memory.SharedMemory(name=state["name"], create=False)
        self._owner = -1  # mapped here: removed by its creator
        self._map()
        # a spawned child (loader, worker) unmaps it before Python's own teardown, which cannot
        # close a block that the views above still point into ("cannot close exported pointers
        # exist" at every child's exit)
        atexit.register(self.close)
        self._last_seq = 0
        self.grabs = 0

    # in the loader
    # ------------------------------------------------------------------------------------------

    def wanted(self) -> int:
        return self._hdr[0]

    def put(self, frame: int, image: np.ndarray) -> None:
        """The loader's newest frame (it was asked for one): copied, flag cleared. With several
        loaders (a file split into ranges) the first one to serve a request serves them all."""
        hdr = self._hdr
        if hdr[6] != self._pid():
            if hdr[6]:
                return
            hdr[6] = self._pid()
        h, w = image.shape[:2]
        step = max(1, -(-max(h, w) // self.side))
        img = image[::step, ::step] if step > 1 else image
        hh, ww = img.shape[:2]
        c = img.shape[2] if img.ndim == 3 else 1
        hdr[1] += 1  # odd: being written
        np.copyto(self._pix[: hh * ww * c].reshape(img.shape), img)
        hdr[2], hdr[3], hdr[4], hdr[5], hdr[7], hdr[8] = frame, hh, ww, c, h, w
        hdr[1] += 1
        hdr[10] = frame  # before any worker sees the frame: its points are wanted
        hdr[0] = 0

    # in a worker
    # ---------------------------------------------------------------------------------------------

    def points_wanted(self) -> int:
        """The frame whose eye points the view wants (-1: none)."""
        return self._hdr[10]

    def put_points(self, frame: int, points: np.ndarray | None) -> None:
        """The eye model's 12 points of ``frame`` in frame pixels (None: no face), under a
        sequence lock."""
        hdr = self._hdr
        hdr[11] += 1  # odd: being written
        if points is not None:
            np.copyto(self._pts, points, casting="unsafe")
        hdr[12], hdr[13] = frame, points is not None
        hdr[11] += 1
        hdr[10] = -1

    @staticmethod
    def _pid() -> int:
        import os

        return os.getpid()

    # in the view
    # ---------------------------------------------------------------------------------------------

    def request(self) -> None:
        self._hdr[0] = 1

    def take(self, side: int | None = None) -> tuple[int, np.ndarray, tuple[int, int]] | None:
        """The frame the loader put since the last take (frame number, a copy reduced by a whole
        factor to at most ``side`` pixels, the frame's own height and width), or None."""
        import cv2

        hdr = self._hdr
        seq = hdr[1]
        if seq == self._last_seq or seq & 1:
            return None
        frame, h, w, c, full = hdr[2], hdr[3], hdr[4], hdr[5], (hdr[7], hdr[8])
        img = self._pix[: h * w * c].reshape((h, w, c) if c > 1 else (h, w))
        k = -(-max(h, w) // side) if side else 1
        img = (
            cv2.resize(img, (max(1, w // k), max(1, h // k)), interpolation=cv2.INTER_AREA)
            if k > 1
            else img.copy()
        )
        if hdr[1] != seq:
            return None  # overwritten while copied: the next one
        self._last_seq = seq
        self.grabs += 1
        return int(frame), img, (int(full[0]), int(full[1]))

    def points(self, frame: int) -> np.ndarray | None:
        """The eye points a worker put for ``frame`` (a copy), or None (not put, no face, being
        written)."""
        hdr = self._hdr
        seq = hdr[11]
        if seq & 1 or hdr[12] != frame or not hdr[13]:
            return None
        pts = self._pts.copy()
        return pts if hdr[11] == seq else None

    def close(self) -> None:
        """Unmap the block (idempotent); the process that made it removes it too."""
        with contextlib.suppress(AttributeError):
            del self._hdr, self._pix, self._pts
        with contextlib.suppress(BufferError, ValueError, AttributeError):
            self._shm.close()
        if self._owner == os.getpid():
            self._owner = -1
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()
