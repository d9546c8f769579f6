"""The quick tier (``pytest -m "not slow"``) reaches every module of the package: each one is
imported here, so a module whose own tests are all ``slow`` (end-to-end runs of the real CLI) still
fails the quick run when it cannot even be imported (a syntax error, a broken import, a heavy
library imported at module level)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "eyeblink"
MODULES = sorted(
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
    for p in PACKAGE.rglob("*.py")
    if p.name != "__main__.py"
)
#: libraries a module may import only inside the functions that use them (ARCHITECTURE.md: heavy
#: imports)
HEAVY = ("tensorflow", "jax", "keras", "dlib", "ray", "torch", "matplotlib", "pynwb", "pandas")
#: the backend modules, whose library (and what it brings along) is their reason to exist: the
#: registry imports them on first use of the backend
BACKENDS = {
    "eyeblink.detect._tf",
    "eyeblink.detect.tensorflow",
    "eyeblink.detect.jax",
    "eyeblink.detect.ipu",
}

_WALK = """
import importlib, json, sys
heavy = {heavy!r}
out = {{}}
for name in {modules!r}:
    before = {{m for m in heavy if m in sys.modules}}
    try:
        importlib.import_module(name)
    except Exception as exc:
        out[name] = {{"error": f"{{type(exc).__name__}}: {{exc}}"}}
        continue
    out[name] = {{"heavy": sorted(m for m in heavy if m in sys.modules and m not in before)}}
print(json.dumps(out))
"""


def test_every_module_imports_without_a_heavy_library() -> None:
    """Every module, in order, in one fresh interpreter: it imports, and brings in no heavy library
    (backend modules only their own)."""
    # a backend's library last: it brings others
    order = [m for m in MODULES if m not in BACKENDS] + sorted(BACKENDS)
    r = subprocess.run(
        [sys.executable, "-c", _WALK.format(heavy=HEAVY, modules=order)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(report) == set(MODULES) and len(MODULES) > 50
    # a backend module without its library (the IPU SDK's TensorFlow) raises ImportError: the
    # registry says so
    failed = {
        m: v["error"]
        for m, v in report.items()
        if "error" in v and not (m in BACKENDS and v["error"].startswith("ImportError"))
    }
    assert not failed, failed
    heavy = {m: v["heavy"] for m, v in report.items() if v.get("heavy") and m not in BACKENDS}
    assert not heavy, f"modules that import a heavy library at import time: {heavy}"


def test_every_test_the_tier_leaves_out_exists() -> None:
    """Each name in :data:`conftest.SLOW_TESTS` is a test function of its file (a renamed test would
    silently come back into the quick tier)."""
    from conftest import SLOW_TESTS

    tests = PACKAGE.parent / "tests"
    missing = [
        name
        for name in SLOW_TESTS
        if f"def {name.split('::')[1]}("
        not in (tests / name.split("::")[0]).read_text(encoding="utf-8")
    ]
    assert not missing, missing
    assert all(cost.strip() for cost in SLOW_TESTS.values())
