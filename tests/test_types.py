"""The package type-checks: mypy, with the project's settings (``[tool.mypy]`` in
``pyproject.toml``), finds nothing to say about ``eyeblink``.

mypy is pinned to one minor version in the test extra: a new release may check more and report
code that was clean. The check starts from an empty cache of its own each time (a cache shared
between runs may be stale or written by another run at the same moment), which costs tens of
seconds on a 2-core machine: the quick tier leaves it out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)
    stdout, stderr, status = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy_cache"),
            "eyeblink",
        ]
    )
    assert status == 0, f"run `mypy eyeblink` from the repository's root:\n{stdout}{stderr}"
