"""The README's first commands are what CI runs, word for word."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


_SCRUB = re.compile(r'^if \[ -z "\$\{EYEBLINK_CI_SCRUBBED:-\}" \]; then\n.*?^fi\n', re.M | re.S)


def _ci_body(text: str) -> list[str]:
    """The commands of .ci/run after its scrubbed-environment re-exec preamble."""
    return [
        line.strip()
        for line in _SCRUB.sub("", text).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_ci_runs_the_readme_commands() -> None:
    ci = _ci_body((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    commands = _readme_commands()
    assert len(commands) == 2, commands
    install, test = commands
    assert "eyeblink demo" in install and "pytest" in test
    body = [c for c in ci if not c.startswith(("set ", "cd "))]
    assert body == commands, (body, commands)


def test_ci_runs_in_a_scrubbed_environment(tmp_path: Path) -> None:
    """.ci/run behaves as on a fresh machine: no PATH entries, variables or eyeblink installed by
    hand leak in.

    A copy of .ci/run whose two README commands are replaced by a probe shows the environment they
    would see.
    """
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install, test = _readme_commands()
    assert install in text and test in text
    probe = (
        'env > env.txt; python3 -c "import sys; print(sys.version_info >= (3, 10))" > py.txt; '
        "command -v eyeblink > eyeblink.txt || true"
    )
    script = tmp_path / ".ci" / "run"
    script.parent.mkdir()
    script.write_text(text.replace(install, probe).replace(test, "true"), encoding="utf-8")
    fake_bin = tmp_path / "handmade"
    fake_bin.mkdir()
    (fake_bin / "eyeblink").write_text("#!/bin/sh\nexit 0\n")
    (fake_bin / "eyeblink").chmod(0o755)
    # the machine's environment as a user's shell has it: hand-made PATH entries, and not the marker
    # of an already scrubbed run (this test itself runs inside .ci/run's scrubbed environment in CI)
    env = {
        **{k: v for k, v in os.environ.items() if k != "EYEBLINK_CI_SCRUBBED"},
        "PATH": os.pathsep.join(
            [str(fake_bin), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
        ),
        "PYTHONPATH": str(ROOT),
        "EYEBLINK_HANDMADE": "1",
        "CI": "true",
    }
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    seen = dict(
        line.split("=", 1)
        for line in (tmp_path / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert seen["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert (
        "PYTHONPATH" not in seen and "EYEBLINK_HANDMADE" not in seen and "VIRTUAL_ENV" not in seen
    )
    assert seen.get("CI") == "true"
    assert (tmp_path / "py.txt").read_text().strip() == "True"  # the README needs Python >= 3.10
    # no eyeblink but the one CI installs
    assert (tmp_path / "eyeblink.txt").read_text().strip() == ""
