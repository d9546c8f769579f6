"""The README's first commands are what CI runs, word for word."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_commands() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    commands = _readme_commands()
    assert len(commands) == 2, commands
    install, test = commands
    assert "eyeblink demo" in install and "pytest" in test
    body = [c for c in ci if not c.startswith(("set ", "cd "))]
    assert body == commands, (body, commands)


def test_readme_states_the_landmark_model_terms() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "iBUG 300-W" in text and "commercial" in text
