"""The map of the code (``ARCHITECTURE.md``) is today's: every module under ``eyeblink/`` is named
in it, every module it names exists, and the default eye model it names is the code's, with its
weights file. The users' page on the pipeline (``docs/explanation/pipeline.md``) points to the map
instead of keeping a copy of it."""

from __future__ import annotations

import re
from pathlib import Path

from eyeblink import weights
from eyeblink.landmarks import DEFAULT_EYE_MODEL, EYE_MODELS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eyeblink"
MAP = ROOT / "ARCHITECTURE.md"
#: the file each eye model loads from weights/ (the one that makes it that model)
MODEL_FILES = {
    "lids": weights.LIDS_FILENAME,
    "mesh": weights.IRIS_FILENAME,
    "mesh-ear": weights.FACE_MESH_FILENAME,
    "face68": weights.DLIB68_FILENAME,
    "eye12": weights.EYE12_FILENAME,
    "area": None,
    "contour": weights.IRIS_FILENAME,
}  # area: no model file (pixels of the eye region)


def _modules() -> list[Path]:
    return sorted(
        p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts
    )


def _folders() -> set[str]:
    return {p.parts[0] for p in _modules() if len(p.parts) == 2}


def _rows(text: str) -> dict[str, str]:
    """The folders table: ``{"runtime": row text, "runtime/live": ..., "": the top level's row}``
    (a sub-package may have a row of its own)."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| (?:`(\w+(?:/\w+)*)/`|(top level)) \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1) or ""] = m.group(3)
    return rows


def _row_of(module: Path, rows: dict[str, str]) -> tuple[str, str]:
    """The row that names ``module`` (its folder's, or the nearest enclosing folder's) and the
    module's path from that folder (runtime/live/sinks/lsl.py in the `runtime/live/` row:
    `sinks/lsl.py`)."""
    parts = module.parts
    for k in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:k])
        if folder in rows:
            return folder, "/".join(parts[k:])
    return "", "/".join(parts)


def test_every_module_is_named_in_the_map_and_every_module_it_names_exists() -> None:
    text = MAP.read_text(encoding="utf-8")
    rows = _rows(text)
    folders = _folders()
    assert {r.split("/")[0] for r in rows} == folders | {""}, (
        f"one row per folder of eyeblink/ and one for the top level: {sorted(rows)}"
    )
    assert all((PACKAGE / r).is_dir() for r in rows), sorted(rows)
    missing = []
    for module in _modules():
        # a module of a sub-package is named by its path in the nearest folder with a row
        # (runtime/live/sinks/lsl.py in the `runtime/live/` row: `sinks/lsl.py`)
        folder, name = _row_of(module, rows)
        if name.endswith("__init__.py") and folder:
            continue  # the folder's row is its own
        if f"`{name}`" not in rows[folder] and f"{folder}/{name}" not in text:
            missing.append(str(module))
    assert missing == [], (
        f"modules the map does not name (add them to their folder's row): {missing}"
    )
    named = {
        (f, n)
        for f, n in re.findall(r"(?<![\w/.])(\w+)/((?:\w+/)?\w+\.py)\b", text)
        if f in folders
    }
    # `x.py` in a folder's row; `sub/x.py` there: a sub-package's (another folder's path when it
    # starts with a top folder or a dot path)
    for f, row in rows.items():
        for n in re.findall(r"`((?:\w+/)*\w+\.py)`", row):
            head = n.split("/")[0]
            if "/" not in n or not (head in folders or head in ("eyeblink", "tests")):
                named.add((f, n))
    gone = sorted(f"{f}/{n}".lstrip("/") for f, n in named if not (PACKAGE / f / n).is_file())
    assert gone == [], f"the map names modules that do not exist: {gone}"


def test_the_map_names_the_codes_default_eye_model_and_its_weights() -> None:
    text = " ".join(MAP.read_text(encoding="utf-8").split())
    m = re.search(r"The default eye model is `([\w-]+)`[^.]*?`(weights/[\w.]+)`", text)
    assert m, "the map says 'The default eye model is `...`' and names its file in weights/"
    assert (
        m.group(1) == DEFAULT_EYE_MODEL
        and m.group(2) == f"weights/{MODEL_FILES[DEFAULT_EYE_MODEL]}"
    )
    assert set(MODEL_FILES) == set(EYE_MODELS)  # a new eye model: say which file it loads
    # no other model is called the default anywhere
    for sentence in re.split(r"(?<=[.;:])\s", text):
        if "default eye model" in sentence or "(the default)" in sentence:
            others = set(re.findall(r"`([\w-]+)`", sentence)) & (
                set(EYE_MODELS) - {DEFAULT_EYE_MODEL}
            )
            assert not others, f"the map calls {others} the default: {sentence!r}"


def test_the_pipeline_page_points_to_the_map_instead_of_copying_it() -> None:
    page = (ROOT / "docs" / "explanation" / "pipeline.md").read_text(encoding="utf-8")
    assert "ARCHITECTURE.md" in page
    for heading in (
        "## The path of a frame",
        "## The path of an option",
        "## Where to add",
        "## The code, folder",
    ):
        assert heading not in page, (
            f"pipeline.md copies the map's {heading!r}: link ARCHITECTURE.md instead"
        )
