"""The per-frame core: where the eye is, and what one frame measures there.

* :mod:`eyeblink.frame.locate` — the eye locator of a run, chosen once from its settings into a typed value:
  :class:`~eyeblink.frame.locate.FaceFinder` (BlazeFace on keyframes, the eye model's points between them) or
  :class:`~eyeblink.frame.locate.FixedRegion` (``--eye-roi X,Y,W,H``: a recording of one eye, no face);
  :data:`~eyeblink.frame.locate.LOCATORS` is their registry.
* :mod:`eyeblink.frame.analyzer` — ``FrameAnalyzer`` (the keyframe policy and the eye fit: a frame in, a
  ``FrameResult`` out), the stage clock and the tracking segments every runtime deals frames in.
* :mod:`eyeblink.frame.keyframes` — the keyframe work (a detection, a face-mesh placement) that ``FrameAnalyzer``
  lags on fast cameras.

It sits below :mod:`eyeblink.runtime` (every runtime's workers run it) and above the seams it drives
(:mod:`eyeblink.detect`, :mod:`eyeblink.landmarks`).
"""
