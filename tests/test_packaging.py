"""What a wheel carries: every preset and every model file, through pyproject's package data."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("package", "folder", "wanted"),
    [
        ("eyeblink.pipelines", "pipelines", ["*.toml"]),
        ("eyeblink.models", "weights", ["*.tflite", "*.dat", "SHA256SUMS", "*LICENSE*"]),
    ],
)
def test_package_data_covers_the_folder(package: str, folder: str, wanted: list[str]) -> None:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    assert tool["package-dir"][package] == folder
    assert package in tool["packages"]
    patterns = tool["package-data"].get(package, [])
    files = [p.name for p in (ROOT / folder).iterdir() if p.is_file() and p.suffix != ".py"]
    needed = [f for f in files if any(fnmatch.fnmatch(f, w) for w in wanted)]
    assert needed, f"nothing in {folder}/ matches {wanted}"
    missing = [f for f in needed if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not missing, (
        f"{missing} would be left out of the wheel: add them to [tool.setuptools.package-data]"
    )
