"""The code's own shape: ruff's lint rules and its formatter, at the project's line length (100).

Lines a reader takes in at once: code, comments and docstrings of the package and the scripts stay
within 100 characters (the tests too, but for their long names and embedded scripts). The
formatter's layout is checked, not just run: a change that skips it fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["eyeblink", "scripts", "tests"]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        import ruff  # noqa: F401  (the test extra's)
    except ImportError:
        if shutil.which("ruff") is None:
            pytest.skip("ruff is not installed (pip install -e '.[test]')")
        cmd = ["ruff"]
    else:
        cmd = [sys.executable, "-m", "ruff"]
    return subprocess.run([*cmd, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing_to_say() -> None:
    r = _ruff("check", "--no-cache", *TREES)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_code_is_laid_out_as_the_formatter_lays_it_out() -> None:
    r = _ruff("format", "--check", "--no-cache", *TREES)
    assert r.returncode == 0, "run `ruff format eyeblink scripts tests`:\n" + r.stdout + r.stderr


def test_the_line_length_is_one_a_reader_takes_in_at_once() -> None:
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
    assert conf["line-length"] == 100
    longest = max(
        (len(line), f"{p.relative_to(ROOT)}:{i}")
        for tree in ("eyeblink", "scripts")
        for p in (ROOT / tree).rglob("*.py")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
    )
    assert longest[0] <= 100, longest
