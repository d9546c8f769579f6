"""eyeblink: real-time eyeblink detection for high-speed face recordings.

The Python API (:mod:`eyeblink.api`)::

    import eyeblink

    session = eyeblink.process("session.avi")   # frames, blinks, trials as pandas DataFrames
    session = eyeblink.load("results/session")  # a finished session back
    # a camera or stream, in real time
    with eyeblink.live("tcp://127.0.0.1:5000", gate_port=0) as s:
        s.wait_until_open(stable_ms=200, timeout_s=5)

Importing this package is cheap: heavy dependencies (pandas, dlib, ai_edge_litert, av, tensorflow)
are imported only inside the functions and modules that use them.
"""

from eyeblink.api import (
    CorrectionsWarning,
    EyeState,
    LiveRow,
    LiveSession,
    Session,
    SessionDamageWarning,
    SettingsError,
    StateChange,
    agree,
    live,
    load,
    process,
)
from eyeblink.version import __version__

__all__ = [
    "CorrectionsWarning",
    "EyeState",
    "LiveRow",
    "LiveSession",
    "Session",
    "SessionDamageWarning",
    "SettingsError",
    "StateChange",
    "__version__",
    "agree",
    "live",
    "load",
    "process",
]
