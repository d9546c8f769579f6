"""The per-frame core: where the eye is, and what one frame measures there.

* :mod:`eyeblink.frame.analyzer` — ``FrameAnalyzer``: a frame in, a ``FrameResult`` out (it asks the
  locator where the eye is, the eye model is fitted there); the stage clock and the tracking
  segments every runtime deals frames in.
* :mod:`eyeblink.frame.locate` — the eye locator of a run, chosen once from its settings, one per
  analyzer, with its tracking state: :class:`~eyeblink.frame.locate.FaceFinder` (the keyframe
  policy: BlazeFace on keyframes, the eye model's points between them) or
  :class:`~eyeblink.frame.locate.FixedRegion` (``--eye-roi X,Y,W,H``: a recording of one eye, the
  region measure fitted on the region); :data:`~eyeblink.frame.locate.LOCATORS` is their registry.
* :mod:`eyeblink.frame.keyframes` — the keyframe work (a detection, a face-mesh placement) that
  ``FaceFinder`` lags on fast cameras.

It sits below :mod:`eyeblink.runtime` (every runtime's workers run it) and above the seams it drives
(:mod:`eyeblink.detect`, :mod:`eyeblink.landmarks`).
"""
