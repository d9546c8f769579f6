"""Finding device presets: a path to a TOML file, or a name from ``pipelines/``."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from eyeblink.errors import ConfigError


def available_presets() -> list[str]:
    root = resources.files("eyeblink.pipelines")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def resolve_preset(name_or_path: str) -> Path:
    """``cpu`` -> the installed ``pipelines/cpu.toml``; an existing path is returned as is."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise ConfigError(f"preset file not found: {p} — give a TOML file or one of {available_presets()}")
        return p
    candidate = resources.files("eyeblink.pipelines") / f"{name_or_path}.toml"
    if not candidate.is_file():
        raise ConfigError(f"unknown pipeline preset {name_or_path!r}; choose one of {available_presets()} "
                          "or give a path to a TOML file")
    return Path(str(candidate))
