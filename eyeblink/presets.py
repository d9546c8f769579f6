"""Finding device presets: a path to a TOML file, or a name from ``pipelines/``."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

from eyeblink.errors import ConfigError


def available_presets() -> list[str]:
    root = resources.files("eyeblink.pipelines")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def resolve_preset(name_or_path: str) -> Path:
    """``cpu`` -> the installed ``pipelines/cpu.toml``; an existing path is returned as is."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise ConfigError(
                f"preset file not found: {p} — give a TOML file or one of {available_presets()}"
            )
        return p
    candidate = resources.files("eyeblink.pipelines") / f"{name_or_path}.toml"
    if not candidate.is_file():
        raise ConfigError(
            f"unknown pipeline preset {name_or_path!r}; choose one of {available_presets()} "
            "or give a path to a TOML file"
        )
    return Path(str(candidate))


_KEY_LINE = re.compile(r"""^\s*([A-Za-z0-9_.-]+)\s*=\s*"(.*)"\s*(?:#.*)?$""")
_TABLE_LINE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]")
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def _windows_path_fix(key: str, value: str) -> str:
    """How to write the Windows path ``value`` of ``key`` so TOML keeps its backslashes."""
    return (
        "a backslash in a double-quoted TOML string starts an escape; write Windows paths in "
        "single quotes "
        f"({key} = '{value}') or with forward slashes ({key} = \"{value.replace(chr(92), '/')}\")"
    )


def _table_of(lines: list[str], index: int) -> str:
    for line in reversed(lines[:index]):
        m = _TABLE_LINE.match(line)
        if m:
            return f"[{m.group(1)}] "
    return ""


def toml_error(path: Path, text: str, exc: Exception) -> str:
    """The one-line message of a preset TOML could not read: a double-quoted Windows path
    (``"C:\\data\\x"``, an invalid escape) is named by its key, with the fix; anything else is the
    parser's own message."""
    m = _AT_LINE.search(str(exc))
    if m:
        lines = text.splitlines()
        index = int(m.group(1)) - 1
        line = lines[index] if 0 <= index < len(lines) else ""
        k = _KEY_LINE.match(line)
        if k and "\\" in k.group(2):
            key, value = k.groups()
            return (
                f'preset {path} line {index + 1}: {_table_of(lines, index)}{key} = "{value}" is '
                "not valid "
                f"TOML: {_windows_path_fix(key, value)}"
            )
    return f"preset {path} is not valid TOML: {exc}"


def check_strings(path: Path, text: str, data: dict[str, Any]) -> None:
    """Refuse a setting whose string TOML read with a control character in it: a Windows path in
    double quotes whose backslashes happened to be valid escapes (``"D:\\new\\face.tflite"`` reads
    as a newline and a form feed), which would otherwise fail later as a file that does not exist,
    far from its cause."""
    for table, values in data.items():
        if not isinstance(values, dict):
            continue  # the top-level name and description are free text
        for key, value in values.items():
            if isinstance(value, str) and any(ord(c) < 32 for c in value):
                lines = text.splitlines()
                raw = next(
                    (
                        m.group(2)
                        for i, line in enumerate(lines)
                        if (m := _KEY_LINE.match(line))
                        and m.group(1) == key
                        and _table_of(lines, i) == f"[{table}] "
                    ),
                    value.encode("unicode_escape").decode(),
                )
                raise ConfigError(
                    f'preset {path}: [{table}] {key} = "{raw}" holds a control character: '
                    f"{_windows_path_fix(key, raw)}"
                )
