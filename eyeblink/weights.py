"""Where eyeblink's model files live, and how they are checked before use.

The main model files:

* ``face_detection_short_range.tflite`` — MediaPipe's BlazeFace short-range face detector
  (Apache-2.0, 230 KB). It lives in the repository's ``weights/`` folder (see
  ``weights/README.md``), which installs as the package ``eyeblink.models`` (pyproject's
  package-dir), so source, editable and wheel installs use the one copy. It is verified with a
  full sha256 at every load: hashing 230 KB costs
  well under a millisecond.
* ``shape_predictor_68_face_landmarks.dat`` — dlib's 68-point ERT landmark predictor (100 MB),
  installed by the ``face-recognition-models`` PyPI package. It was trained on iBUG 300-W, whose
  terms exclude commercial use. Hashing 100 MB takes ~0.1 s (0.07 s measured on a 2-core dev
  VM) and reads the whole file (cold page cache: seconds), which every landmark worker process
  would pay at start-up, so :func:`dlib68_path` checks existence and the exact byte size by
  default (catches truncated downloads and the wrong model) and does the full sha256 only when
  asked (``full_check=True``, e.g. from a ``doctor`` command or a test).

Every digest is computed at most once per process for a given ``(path, size, mtime)``
(:func:`file_sha256` is cached), so repeated loads in one process are free.

The sha256 constants below are the single source of truth in code; ``weights/SHA256SUMS``
repeats them in ``sha256sum`` format for people, and a test checks the two agree.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

from eyeblink.errors import ModelFileError

__all__ = [
    "BLAZEFACE_FILENAME",
    "BLAZEFACE_FULL_RANGE_FILENAME",
    "BLAZEFACE_FULL_RANGE_SHA256",
    "BLAZEFACE_SHA256",
    "DLIB68_FILENAME",
    "DLIB68_SHA256",
    "DLIB68_SIZE",
    "EYE12_FILENAME",
    "EYE12_SHA256",
    "FACE_MESH_FILENAME",
    "FACE_MESH_SHA256",
    "IRIS_FILENAME",
    "IRIS_SHA256",
    "LIDS_FILENAME",
    "LIDS_SHA256",
    "LIDS_V1_FILENAME",
    "LIDS_V1_SHA256",
    "LIDS_V2_FILENAME",
    "LIDS_V2_SHA256",
    "LIDS_V3_FILENAME",
    "LIDS_V3_SHA256",
    "WEIGHTS_DIR",
    "blazeface_full_range_path",
    "blazeface_path",
    "dlib68_path",
    "eye12_path",
    "face_mesh_path",
    "file_sha256",
    "iris_path",
    "lids_path",
    "verify_sha256",
    "verify_size",
]


def _models_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("eyeblink.models")))


#: The repository's ``weights/`` folder (README, SHA256SUMS, licences, the .tflite), installed as
#: the package ``eyeblink.models``: one copy of each file, found in source, editable and wheel
#: installs.
WEIGHTS_DIR: Path = _models_dir()

BLAZEFACE_FILENAME = "face_detection_short_range.tflite"
#: sha256 of face_detection_short_range.tflite from the PyPI wheel mediapipe==0.10.21.
BLAZEFACE_SHA256 = "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8"

BLAZEFACE_FULL_RANGE_FILENAME = "face_detection_full_range_sparse.tflite"
#: sha256 of face_detection_full_range_sparse.tflite from the PyPI wheel mediapipe==0.10.21
#: (BlazeFace full-range, 192x192 input: compared with the other detectors by ``eyeblink bench
#: detectors``).
BLAZEFACE_FULL_RANGE_SHA256 = "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1"

DLIB68_FILENAME = "shape_predictor_68_face_landmarks.dat"
#: sha256 and size of models/shape_predictor_68_face_landmarks.dat in face-recognition-models 0.3.0.
DLIB68_SHA256 = "fbdc2cb80eb9aa7a758672cbfdda32ba6300efe9b6e6c7a299ff7e736b11b92f"
DLIB68_SIZE = 99_693_937

EYE12_FILENAME = "eye12_v1.dat"
#: sha256 of weights/eye12_v1.dat, the project's 12-point eye-contour predictor (eyeblink.lab.train,
#: scripts/train_eye12.py; see weights/README.md). Verified in full at every load (a few MB:
#: milliseconds).
EYE12_SHA256 = "4d7307f46e9bb52b515c2bd2abc855bf0f3b6a40b5571be348334cfb3308815b"

FACE_MESH_FILENAME = "face_landmark.tflite"
#: sha256 of mediapipe/modules/face_landmark/face_landmark.tflite from the PyPI wheel
#: mediapipe==0.10.21.
FACE_MESH_SHA256 = "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814"
IRIS_FILENAME = "iris_landmark.tflite"
#: sha256 of mediapipe/modules/iris_landmark/iris_landmark.tflite from the PyPI wheel
#: mediapipe==0.10.21.
IRIS_SHA256 = "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f"

LIDS_FILENAME = "lids_v4.tflite"
#: sha256 of lids_v4.tflite: the project's own lid network, the default (``eyeblink train-lids
#: --members 2``, fourth recipe: two networks of the third recipe, seeds 0 and 1, averaged in one
#: file; weights/README.md). It is the default because on every ladder (zju-dev, its webcam-like and
#: dim-room renditions) of people it never saw its recipe is no worse than lids_v3's and lids_v1's
#: on any rung, way, condition or convention, and better at 7.5 FPS exposed
#: (docs/explanation/lid-network.md, "Which network is the default").
LIDS_SHA256 = "1e52c71f22fe9d56c28c9435d98ee4c412e906365e8d0311f91cc60cf8ab9587"
LIDS_V3_FILENAME = "lids_v3.tflite"
#: sha256 of lids_v3.tflite: the third recipe's lid network (mid-blink strips twice, long
#: exposures), the default before lids_v4, not loaded by default, kept so that ``--landmark-model
#: weights/lids_v3.tflite`` can compare.
LIDS_V3_SHA256 = "62141bc38ad3b075669cc4abfd50e31218fa02f0a3b1afd908febcd817ecb799"
LIDS_V1_FILENAME = "lids_v1.tflite"
#: sha256 of lids_v1.tflite: the first recipe's lid network, a default before lids_v3, not loaded by
#: default, kept so that ``--landmark-model weights/lids_v1.tflite`` can compare (it is listed in
#: SHA256SUMS too).
LIDS_V1_SHA256 = "4f4841340a1a6dda7044716f98836a450efe4490ec2a18b7f257498a3b97cb7c"
LIDS_V2_FILENAME = "lids_v2.tflite"
#: sha256 of lids_v2.tflite: the second recipe's lid network (eye shapes and lenses), not loaded by
#: default, kept so that ``--landmark-model weights/lids_v2.tflite`` can compare the two (it is
#: listed in SHA256SUMS too).
LIDS_V2_SHA256 = "e694ae0dcb1c1825eb60ae51bf40810c51368bf64d97a6dfc2b36b45e7770a28"

_BLAZEFACE_FIX = (
    "restore it (the repository's weights/ folder holds the reference copy, see weights/README.md) "
    'or reinstall eyeblink: pip install --force-reinstall --no-deps "eyeblink"'
)
_DLIB68_FIX = 'reinstall it: pip install --force-reinstall --no-deps "face-recognition-models>=0.3"'


@functools.lru_cache(maxsize=32)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    """Hash ``path``; the cache key includes size and mtime so an edited file is re-hashed."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path | str) -> str:
    """Return the hex sha256 of ``path``, cached per process by ``(path, size, mtime)``.

    Raises :class:`ModelFileError` when the file is missing or unreadable.
    """
    p = Path(path)
    try:
        st = p.stat()
        return _sha256_cached(str(p.resolve()), st.st_size, st.st_mtime_ns)
    except OSError as exc:
        raise ModelFileError(f"model file {p} cannot be read: {exc.strerror or exc}") from exc


def verify_sha256(path: Path | str, expected: str, *, fix: str = _BLAZEFACE_FIX) -> None:
    """Raise :class:`ModelFileError` unless ``path`` exists and its sha256 equals ``expected``.

    The message is one line naming the file, the expected and actual digests and ``fix``
    (how to get a good copy back).
    """
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"model file {p} does not exist; {fix}")
    actual = file_sha256(p)
    if actual != expected.lower():
        raise ModelFileError(
            f"model file {p} fails its sha256 check (expected {expected.lower()}, got {actual}): "
            f"the file is corrupt, truncated or a different model; {fix}"
        )


def verify_size(path: Path | str, expected_size: int, *, fix: str = _DLIB68_FIX) -> None:
    """Cheap integrity check: raise :class:`ModelFileError` unless ``path`` has ``expected_size``
    bytes."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise ModelFileError(
            f"model file {p} cannot be read: {exc.strerror or exc}; {fix}"
        ) from exc
    if size != expected_size:
        raise ModelFileError(
            f"model file {p} has {size} bytes, expected {expected_size}: "
            f"the file is truncated or a different model; {fix}"
        )


def _shipped(filename: str, sha256: str, fix: str | None = None) -> Path:
    """Path of a network shipped in ``weights/``, sha256-verified (cached per process); ``fix``:
    what the one-line error of a missing or damaged file tells the user to do (default: restore the
    shipped file)."""
    path = WEIGHTS_DIR / filename
    if fix is None:
        verify_sha256(path, sha256)
        return path
    if not path.is_file():
        raise ModelFileError(f"{filename} not found in {WEIGHTS_DIR}; {fix}")
    verify_sha256(path, sha256, fix=fix)
    return path


def blazeface_path() -> Path:
    """Path of the BlazeFace short-range ``.tflite`` (not verified here; backends verify at load).

    The file lives in the repository's ``weights/`` folder, installed as ``eyeblink.models``.
    """
    candidate = WEIGHTS_DIR / BLAZEFACE_FILENAME
    if candidate.is_file():
        return candidate
    raise ModelFileError(f"{BLAZEFACE_FILENAME} not found in {WEIGHTS_DIR}; {_BLAZEFACE_FIX}")


def face_model(model_path: Path | str | None) -> Path:
    """The face detector's model file every backend loads: the shipped short-range BlazeFace,
    sha256-verified, or a user's ``--face-model`` file (which must exist; its contents are the
    backend's to check)."""
    if model_path is None:
        path = blazeface_path()
        verify_sha256(path, BLAZEFACE_SHA256)
        return path
    path = Path(model_path)
    if not path.is_file():
        raise ModelFileError(f"face model not found: {path} — check --face-model")
    return path


def blazeface_full_range_path() -> Path:
    """Path of the shipped BlazeFace full-range ``.tflite``, sha256-verified (cached per
    process)."""
    return _shipped(BLAZEFACE_FULL_RANGE_FILENAME, BLAZEFACE_FULL_RANGE_SHA256)


def face_mesh_path() -> Path:
    """Path of the shipped MediaPipe face mesh (``--landmarks mesh``), sha256-verified (cached
    per process)."""
    return _shipped(FACE_MESH_FILENAME, FACE_MESH_SHA256)


def iris_path() -> Path:
    """Path of the shipped MediaPipe iris/eyelid network (``mesh``'s lid refinement),
    sha256-verified."""
    return _shipped(IRIS_FILENAME, IRIS_SHA256)


def lids_path() -> Path:
    """Path of the shipped lid network (``--landmarks lids``), sha256-verified (cached per
    process)."""
    return _shipped(
        LIDS_FILENAME,
        LIDS_SHA256,
        "restore it from the repository's weights/ folder or reinstall "
        "eyeblink, or train one (eyeblink train-lids) and pass it with --landmark-model",
    )


def eye12_path() -> Path:
    """Path of the shipped 12-point eye model (``--landmarks eye12``), sha256-verified (cached per
    process).

    Raises :class:`ModelFileError` when the file is missing, truncated or not the shipped model.
    """
    return _shipped(
        EYE12_FILENAME,
        EYE12_SHA256,
        "restore it from the repository's weights/ folder or reinstall "
        "eyeblink, or retrain one (eyeblink train-landmarks) and pass it with --landmark-model",
    )


def dlib68_path(*, full_check: bool = False) -> Path:
    """Path of dlib's 68-point landmark predictor from the ``face-recognition-models`` package.

    Always checks that the file exists and has exactly :data:`DLIB68_SIZE` bytes (a stat call);
    with ``full_check=True`` also verifies its sha256 (~0.1 s once per process, then cached).
    Raises :class:`ModelFileError` with the install command when the package or file is missing.
    """
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(
            f"{DLIB68_FILENAME} is missing: the face-recognition-models package is not installed; "
            'install it: pip install "face-recognition-models>=0.3" '
            "(the model is trained on iBUG 300-W: non-commercial use only)"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    path = package_dir / "models" / DLIB68_FILENAME
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist; {_DLIB68_FIX}")
    verify_size(path, DLIB68_SIZE, fix=_DLIB68_FIX)
    if full_check:
        verify_sha256(path, DLIB68_SHA256, fix=_DLIB68_FIX)
    return path
