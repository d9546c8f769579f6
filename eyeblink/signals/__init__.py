"""Signals: per-frame EAR in, events and measures out. Pure numpy, no I/O of frames.

* :mod:`eyeblink.signals.blinks` — the online blink state machine: ``BlinkDetector``, ``BlinkEvent``.
* :mod:`eyeblink.signals.closure` — fraction of eyelid closure (FEC) and its calibration:
  ``OnlineClosure``, ``ClosureCalibration``.
* :mod:`eyeblink.signals.trials` — conditioning trials (CS/US), CR/UR scoring: ``read_trials``,
  ``score_trials``, ``TrialResult``.
"""
