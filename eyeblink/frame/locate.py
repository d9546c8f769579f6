"""Where the eye is: one interface, two locators, chosen once from a run's settings.

A run finds the eye either on a face (:class:`FaceFinder`: BlazeFace on keyframes, the eye model's own points
between them; :class:`~eyeblink.frame.analyzer.FrameAnalyzer` runs that keyframe policy) or in a fixed region of
every frame (:class:`FixedRegion`: ``--eye-roi X,Y,W,H``, a recording of one eye with no face, measured by a region
eye model such as ``area`` or ``contour``). :func:`locator_for` turns the settings into one of them, once; the code
after it passes the value (never the config's string or tuple). A new locator is one class here with a
``from_config`` and one entry in :data:`LOCATORS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from eyeblink.landmarks.region import EyeRegion

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.detect.blazeface import FaceDetection


class EyeLocator(Protocol):
    """Where a run's eye model measures: its ``name`` (the registry's key) and whether a face detector runs."""

    name: ClassVar[str]
    #: the locator needs the face detector (a fixed region runs none: no detector is built, warmed or timed)
    needs_detector: ClassVar[bool]


@dataclass(frozen=True)
class FaceFinder:
    """The eye on a face: BlazeFace on keyframes (``detect.detect_every``, on loss, on drift), the eye model's
    points between them (the keyframe policy of :class:`~eyeblink.frame.analyzer.FrameAnalyzer`)."""

    name: ClassVar[str] = "face"
    needs_detector: ClassVar[bool] = True

    @classmethod
    def from_config(cls, config: RunConfig) -> FaceFinder | None:
        return cls()


@dataclass(frozen=True)
class FixedRegion:
    """The eye in a fixed region of every frame (``--eye-roi``), the region taken as the frame's face."""

    region: EyeRegion
    name: ClassVar[str] = "region"
    needs_detector: ClassVar[bool] = False

    @classmethod
    def from_config(cls, config: RunConfig) -> FixedRegion | None:
        region = config.eye.region
        return None if region is None else cls(region)

    def face(self) -> FaceDetection:
        """The region as the face every frame has (box, score 1, keypoints at its centre)."""
        return self.region.face()

    def check_frame(self, width: int, height: int, where: str = "the frame") -> None:
        """:class:`~eyeblink.errors.ConfigError` unless the region lies inside a ``width`` x ``height`` frame."""
        self.region.check_inside(width, height, where)


#: The locators, the most specific first: a run's is the first whose ``from_config`` gives one.
LOCATORS: dict[str, type[FixedRegion] | type[FaceFinder]] = {"region": FixedRegion, "face": FaceFinder}


def locator_for(config: RunConfig) -> FixedRegion | FaceFinder:
    """The run's eye locator, from its settings (``eye.roi``: a fixed region; else faces)."""
    for cls in LOCATORS.values():
        found = cls.from_config(config)
        if found is not None:
            return found
    raise AssertionError("FaceFinder locates in every config")  # pragma: no cover


__all__ = ["LOCATORS", "EyeLocator", "FaceFinder", "FixedRegion", "locator_for"]
