"""One error hierarchy for everything a user can get wrong.

Every message names the offending value and the fix; the CLI prints it on one
line and exits non-zero without a traceback.
"""

from __future__ import annotations

#: Exit status of a run that completed although an input was damaged (undecodable packets skipped).
INPUT_DAMAGED_EXIT = 5


class EyeblinkError(Exception):
    """Base class of all errors eyeblink reports to users."""

    exit_code = 2


class InputNotFoundError(EyeblinkError):
    """A path given as input does not exist."""


class VideoOpenError(EyeblinkError):
    """A file exists but is not a video FFmpeg can open (or has no video stream)."""


class VideoDecodeError(EyeblinkError):
    """Decoding failed part-way: the file is truncated or corrupt."""


class EmptySourceError(EyeblinkError):
    """A video with zero frames, or a folder with no images."""


class ModelFileError(EyeblinkError):
    """A model file is missing, corrupt, or fails its sha256 check."""


class BackendUnavailableError(EyeblinkError):
    """A detector backend was asked for but cannot run here."""


class ConfigError(EyeblinkError):
    """Contradictory or invalid options or preset values."""


class OutputError(EyeblinkError):
    """The output directory cannot be created or written."""


class OutputWriteError(OutputError):
    """One input's output file cannot be created or written (disk full, file too large, read-only
    file).

    Unlike a bad output directory (checked before any input), it concerns one input: the others are
    still attempted.
    """


class NoFaceError(EyeblinkError):
    """No face was found in any frame of an input."""


class DatasetError(EyeblinkError):
    """An evaluation dataset is missing, empty or malformed."""


class WorkerError(EyeblinkError):
    """A pipeline worker process failed; carries its traceback text."""

    exit_code = 3


class TrialFileError(EyeblinkError):
    """A trials file or sync CSV is missing, malformed, or contradicts itself (e.g. US before CS).

    Checked before the first frame (the run stops); a mismatch only visible after an input was
    processed (a frame number beyond its last frame) fails that input only.
    """


class CalibrationError(EyeblinkError):
    """The eyelid-closure (FEC) calibration cannot be made from the named segment or session."""


class MissingExtraError(ConfigError):
    """An option needs an optional dependency (an extra such as ``plots`` or ``nwb``) that is not
    installed."""


def picklable_error(exc: BaseException) -> EyeblinkError:
    """``exc`` as it can travel to another process: an :class:`EyeblinkError` as it is when it
    pickles, else one with its line and exit status; anything else a :class:`WorkerError` naming its
    type."""
    import pickle

    if isinstance(exc, EyeblinkError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:
            err = EyeblinkError(str(exc))
            err.exit_code = exc.exit_code
            return err
    return WorkerError(f"{type(exc).__name__}: {exc}")


def one_line(exc: BaseException | str) -> str:
    """The message on one line (native libraries such as dlib put newlines in theirs)."""
    return " ".join(str(exc).split())


def warn(message: str) -> str:
    """Tell the user about a result that is valid but probably not what they wanted, on one stderr
    line ``eyeblink: warning: …`` (naming the fix); returns ``message`` for the summary's
    ``warnings``.

    The rule: what cannot run is an error (non-zero exit); what runs but ignores part of the input
    or runs on another device than asked for is a warning (exit 0, listed in ``summary.json``).
    """
    import sys

    print(f"eyeblink: warning: {one_line(message)}", file=sys.stderr, flush=True)
    return one_line(message)
