"""Stage payloads: small frozen dataclasses validated on construction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame.

    ``timestamp_s`` is the container's presentation timestamp (or the camera's
    arrival time), never ``index / fps``, so dropped or duplicated frames show up
    as gaps. ``image`` is ``uint8`` and either ``(H, W)`` grayscale or
    ``(H, W, 3)`` RGB.
    """

    index: int
    timestamp_s: float
    image: np.ndarray

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"Frame.index must be >= 0, got {self.index}")
        img = self.image
        if img.dtype != np.uint8:
            raise ValueError(f"Frame.image must be uint8, got {img.dtype}")
        if not (img.ndim == 2 or (img.ndim == 3 and img.shape[2] == 3)):
            raise ValueError(f"Frame.image must be (H, W) or (H, W, 3), got shape {img.shape}")

    @property
    def gray(self) -> np.ndarray:
        """The frame as a 2-D uint8 grayscale array (no copy when already gray)."""
        if self.image.ndim == 2:
            return self.image
        import cv2

        return cv2.cvtColor(self.image, cv2.COLOR_RGB2GRAY)

    @property
    def rgb(self) -> np.ndarray:
        """The frame as ``(H, W, 3)`` uint8 RGB (gray is replicated)."""
        if self.image.ndim == 3:
            return self.image
        import cv2

        return cv2.cvtColor(self.image, cv2.COLOR_GRAY2RGB)
