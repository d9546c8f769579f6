"""The Python API: :func:`process`, :func:`load` and :func:`live` (``import eyeblink``).

The command line is a thin layer over the same functions: ``eyeblink process`` calls
:func:`run_process`, as :func:`process` does, so the two write byte-identical files for the same
settings; ``eyeblink live`` and :func:`live` share :func:`eyeblink.runtime.live.capture.prepare` and
``finish``.

Settings are keywords with the names of the presets (``pipelines/*.toml``) and the same checks: a
key of one section by its own name (``detect_every=4``, ``close_ratio=0.75``, ``mesh_reuse_ms=0``),
a whole section as a dict (``blinks={"smooth_ms": 5}``, needed for the names two sections share:
``model_path``, ``smooth_ms``), the command line's names for the same things
(``landmarks="mesh-ear"``, ``threads``, ``face_model``, ``landmark_model``, ``min_blink_ms``,
``calibration``), ``pipeline`` (a preset name or TOML path), ``fps``, ``max_frames`` and ``points``
(``True``: also ``<stem>.points.csv``, the eye points and head pose per frame, as ``--points``). A
wrong one raises :class:`SettingsError` (a :class:`ValueError`) whose text is the line the CLI
prints after ``eyeblink: error:``, in Python's words for :func:`process` (:func:`python_words`:
``workers=2`` where the CLI says ``--workers 2``; the type given where it was wrong; a suggestion
for every unknown keyword).

Results are :class:`Session` objects: ``frames``, ``blinks`` and ``trials`` as pandas DataFrames
(the CSV contract's columns, dtypes and units: ``df.attrs["units"]``), ``summary`` as a dict and the
paths written. pandas is the ``api`` extra (``pip install 'eyeblink[api]'``); the command line does
not need it.

This module imports only the standard library and the light config at import time (``import
eyeblink`` stays light); pandas, PyAV, LiteRT and the runtime load inside the functions that use
them.
"""

from __future__ import annotations

# every name eyeblink.api had as one module (the helpers the CLI and the tests use too) is still one
# here; ``X as X``: kept for the importers, though not in __all__
from eyeblink.api.live import LiveSession, live
from eyeblink.api.load import CorrectionsWarning, Session, SessionDamageWarning, load
from eyeblink.api.load import agree as agree
from eyeblink.api.process import (
    check_workers,
    process,
    process_workers,
    progress_factory,
    run_process,
)
from eyeblink.api.process import in_notebook as in_notebook
from eyeblink.api.settings import ALIASES as ALIASES
from eyeblink.api.settings import ANALYSIS as ANALYSIS
from eyeblink.api.settings import LIVE_ONLY as LIVE_ONLY
from eyeblink.api.settings import PROCESS_ONLY as PROCESS_ONLY
from eyeblink.api.settings import SECTIONS as SECTIONS
from eyeblink.api.settings import SettingsError
from eyeblink.api.settings import _process_keywords as _process_keywords
from eyeblink.api.settings import python_words as python_words
from eyeblink.errors import ConfigError as ConfigError
from eyeblink.errors import EyeblinkError as EyeblinkError
from eyeblink.errors import InputNotFoundError as InputNotFoundError
from eyeblink.errors import MissingExtraError as MissingExtraError
from eyeblink.runtime.live.publish import LiveRow  # stdlib only: what a live session yields

# the eye's state (one definition, the detector's)
from eyeblink.signals.state import EyeState, StateChange

__all__ = [
    "CorrectionsWarning",
    "EyeState",
    "LiveRow",
    "LiveSession",
    "Session",
    "SessionDamageWarning",
    "SettingsError",
    "StateChange",
    "check_workers",
    "live",
    "load",
    "process",
    "process_workers",
    "progress_factory",
    "run_process",
]
