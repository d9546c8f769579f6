"""Landmarks: the eye model that turns a face box into eye contour points and per-eye EAR.

* :mod:`eyeblink.landmarks.dlib` — dlib ERT predictors (``face68``: 68 points; ``eye12``: the
  project's 12-point eye model), box mapping, eye patches, EAR: ``LandmarkFitter``, ``EyeFit``,
  ``BoxMapping``, ``eye_aspect_ratio``, ``eye_ears``, ``EYE_POINTS``.

One module per eye model; add a new model (e.g. MediaPipe's face mesh) as a sibling module.
Nothing is imported here: dlib loads only when a fitter is built.
"""
