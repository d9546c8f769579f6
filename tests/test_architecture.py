"""The house keeps its shape: the import graph, the number of top-level rooms, and a light
``import``.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``): folders import only the folders
below them (cli > api > lab > runtime > frame > outputs > signals > sources > config > landmarks >
detect > leaves > errors > version | host; ``frame``: the per-frame core every runtime runs) and no
modules or folders import each other round a circle. ``scripts/layers.py`` draws those floors from
the source (``ast``): the layering checks below are its functions, and ``ARCHITECTURE.md`` shows its
drawing. See ``ARCHITECTURE.md``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eyeblink"
HEAVY = ("tensorflow", "jax", "keras", "dlib", "ai_edge_litert", "av", "cv2")
#: the modules allowed directly in eyeblink/ (everything else lives in a stage folder)
MAX_TOP_LEVEL_MODULES = 12


def _layers() -> ModuleType:
    """``scripts/layers.py``, the drawing of the floors (a script: loaded from its file)."""
    if "layers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("layers", ROOT / "scripts" / "layers.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["layers"] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules["layers"]


def test_no_import_runs_up_the_floors_nor_round_a_circle() -> None:
    """The drawing's check (``python scripts/layers.py`` exits 0): every module on a floor, no
    import up the floors or across the rooms of one floor, no sibling modules or folders importing
    each other round a circle."""
    layers = _layers()
    contract = layers.load_contract(ROOT)
    graph = layers.graph_of(ROOT)
    # the package's face only
    assert [m for m in graph if layers.floor_of(m, contract) is None] == ["eyeblink"]
    assert layers.upward_imports(graph, contract) == []
    assert layers.circles(graph) == []
    assert (
        "eyeblink.host" in graph["eyeblink.config"]
        and "eyeblink.host" in graph["eyeblink.outputs.lock"]
    )


def test_the_drawing_finds_what_it_is_for() -> None:
    layers = _layers()
    contract = layers.Contract(
        (("a.top",), ("a.mid", "a.side"), ("a.low",)), frozenset({("a.low.y", "a.top")})
    )
    graph = {
        "a.top.m": ["a.mid.x", "a.low"],
        "a.mid.x": ["a.low", "a.side"],
        "a.low": ["a.mid.x"],
        "a.low.y": ["a.top"],
        "a.mid": [],
        "a.side": [],
        "a.top": [],
        "a": [],
    }
    assert layers.upward_imports(graph, contract) == [("a.low", "a.mid.x"), ("a.mid.x", "a.side")]
    # ignore_imports is the floors' only
    assert layers.circles(graph) == [["a.low", "a.mid", "a.top"]]


def test_the_map_shows_the_floors() -> None:
    """ARCHITECTURE.md shows the floors as ``python scripts/layers.py --floors`` prints them."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    floors = _layers().floors_text(_layers().load_contract(ROOT))
    assert floors in text, (
        f"paste `python scripts/layers.py --floors` into ARCHITECTURE.md:\n{floors}"
    )


def test_import_contracts_hold() -> None:
    code = (
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    assert "0 broken" in report, report


def test_few_modules_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules directly in eyeblink/: {top}"


def test_every_folder_ships_in_the_wheel() -> None:
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["packages"]
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    missing = sorted(folders - set(packages))
    assert not missing, (
        f"{missing} would be left out of the wheel: add them to [tool.setuptools] packages"
    )


def test_every_folder_says_what_it_is_for() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        text = init.read_text(encoding="utf-8")
        assert text.lstrip().startswith('"""') and len(text) > 200, (
            f"{init.relative_to(ROOT)} needs its docstring"
        )


def test_the_cli_and_every_folder_import_light() -> None:
    """``eyeblink --help`` builds the whole parser; it and every folder's ``__init__`` stay
    light."""
    folders = ", ".join(f"eyeblink.{p.parent.name}" for p in sorted(PACKAGE.glob("*/__init__.py")))
    code = (
        f"import sys, eyeblink, {folders}; from eyeblink.cli import build_parser; build_parser(); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_version_is_read_from_the_ground_floor() -> None:
    """No module reads the version through the package's face (an import upwards, and a circle
    through the API); the installed metadata's version is the code's."""
    import re

    from eyeblink.version import __version__

    pkg = Path(__file__).resolve().parent.parent / "eyeblink"
    upward = [
        str(p.relative_to(pkg))
        for p in pkg.rglob("*.py")
        if re.search(r"from eyeblink import [^\n]*__version__", p.read_text(encoding="utf-8"))
    ]
    assert upward == []
    toml = (pkg.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"', toml, re.M).group(1) == __version__  # type: ignore[union-attr]
