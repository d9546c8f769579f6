"""The one place TensorFlow is imported for eyeblink's backends.

TensorFlow's C++ runtime logs several INFO/WARNING lines at import (oneDNN, CPU features, XLA
service) that would interleave with eyeblink's one-line messages; unless the user set
``TF_CPP_MIN_LOG_LEVEL`` themselves, only errors are shown (of the C++ runtime and of TensorFlow's
Python logger). Imported lazily, by the backend modules only.
"""

from __future__ import annotations

import os
from typing import Any

_QUIET = "TF_CPP_MIN_LOG_LEVEL" not in os.environ
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402  (after the log level is set)

# the Python side too: e.g. the "retracing" warning, which one program per batch bucket sets off
if _QUIET:
    tf.get_logger().setLevel("ERROR")

__all__ = ["tf", "tf_ipu"]


def tf_ipu() -> Any:
    """Graphcore's ``tensorflow.python.ipu`` (only in the Poplar SDK's TensorFlow build)."""
    from tensorflow.python import ipu

    return ipu
