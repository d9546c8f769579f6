"""Signals: per-frame EAR in, events and measures out. Pure numpy, no I/O of frames.

* :mod:`eyeblink.signals.blinks` — the online blink state machine: ``BlinkDetector``; the event it
  reports, ``BlinkEvent``, and the blinks.csv columns are in :mod:`eyeblink.signals.events`, its
  measures in :mod:`eyeblink.signals.measures`, the numerics both run in
  :mod:`eyeblink.signals.numerics`.
* :mod:`eyeblink.signals.closure` — fraction of eyelid closure (FEC) and its calibration:
  ``OnlineClosure``, ``ClosureCalibration``.
* :mod:`eyeblink.signals.trials` — conditioning trials (CS/US), CR/UR scoring: ``read_trials``,
  ``score_trials``, ``TrialResult``.
"""
