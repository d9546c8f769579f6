"""Keyword settings of the Python API into the frozen configs, with the CLI's checks and one-line
messages.

A key of one section by its own name, a whole section as a dict, the command line's names for the
same things (:data:`ALIASES`); a wrong one raises :class:`SettingsError` whose text is the line the
CLI prints, in Python's words (:func:`python_words`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.config import (
    LIVE_RANGES,
    MOVED_KEYS,
    BlinkConfig,
    ClosureConfig,
    DetectConfig,
    EyeConfig,
    LandmarkConfig,
    RunConfig,
    TrialConfig,
    section_keys,
)
from eyeblink.errors import ConfigError, EyeblinkError, one_line
from eyeblink.landmarks import tunables

if TYPE_CHECKING:
    from eyeblink.outputs.analysis import AnalysisOptions


#: the config sections a setting can name, as in the presets
SECTIONS: dict[str, type] = {
    "eye": EyeConfig,
    "detect": DetectConfig,
    "landmarks": LandmarkConfig,
    "blinks": BlinkConfig,
    "closure": ClosureConfig,
    "trials": TrialConfig,
}
#: the command line's names for preset keys that are not the key's own name
_NAMED: dict[str, tuple[str, str]] = {
    "eye_roi": ("eye", "roi"),
    "landmarks": ("landmarks", "model"),
    "landmark_model": ("landmarks", "model_path"),
    "face_model": ("detect", "model_path"),
    "threads": ("detect", "num_threads"),
    "min_blink_ms": ("blinks", "min_duration_ms"),
    "calibration": ("closure", "calibration_s"),
}


def aliases() -> dict[str, tuple[str, str]]:
    """The command line's names for preset keys: the fixed ones, and each eye model's own settings
    by the keyword its declaration gives (:class:`eyeblink.landmarks.Setting`: ``eye_polarity``,
    ``eye_threshold``), as the registry holds them now (a model registered at run time counts)."""
    own = {
        s.keyword: ("landmarks", name) for name, (_, s) in tunables().items() if s.keyword != name
    }
    return {**_NAMED, **own}


#: :func:`aliases` of the registry as it was imported
ALIASES: dict[str, tuple[str, str]] = aliases()
#: settings of what to do after each input (``eyeblink process``'s conditioning options)
ANALYSIS = ("trials", "sync_column", "us_sync_column", "plots", "nwb")
#: settings of :func:`process` only
PROCESS_ONLY = (
    "workers",
    "loaders",
    "progress",
    "report",
    "view",
    "view_port",
    "view_host",
    "start_method",
)
#: settings of :func:`live` only (besides :class:`~eyeblink.config.LiveConfig`'s fields)
LIVE_ONLY = (
    "name",
    "reconnect",
    "stream_options",
    "read_timeout_s",
    "report",
    "on_frame",
    "on_blink",
    "on_state",
    "start_method",
)


class SettingsError(ConfigError, ValueError):
    """A wrong setting: the one line the CLI prints (``eyeblink: error: <this text>``)."""


def _is_number(value: Any) -> bool:
    """An int or a float (not a bool): a live setting whose range
    :func:`eyeblink.config.check_range` checks."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_ok(value: Any, default: Any) -> str | None:
    """What ``value`` should be, when it is not what the preset key ``default`` is (None: fine)."""
    if value is None:
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "a whole number"
    if isinstance(default, float):
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
        return None if ok else "a number"
    if isinstance(default, str):
        return None if isinstance(value, str) else "text"
    return None


_PROTOTYPES = (("bool", False), ("int", 0), ("float", 0.0), ("str", ""))


def _field_defaults(cls: type) -> dict[str, Any]:
    """Each field of a config dataclass -> a value of its type (for a ``None`` default: one of the
    annotation's first type, ``float | None`` -> 0.0), which :func:`_type_ok` compares a setting
    with."""
    out = section_keys(cls)  # an eye model's own settings too: a value of each from its declaration
    declared = {name: setting for name, (_, setting) in tunables().items()}
    types = {f.name: f.type for f in dataclasses.fields(cls)}
    for name, value in out.items():
        if value is None and name in declared:
            out[name] = declared[name].prototype()
        elif value is None:
            kind = str(types[name]).split("|")[0].strip()
            out[name] = next((v for k, v in _PROTOTYPES if kind == k), None)
    return out


def _flat_keys() -> tuple[dict[str, str], set[str]]:
    """Each preset key -> its section, and the keys more than one section has (they need the
    section's dict)."""
    owner: dict[str, str] = {}
    shared: set[str] = set()
    for section, cls in SECTIONS.items():
        for name in section_keys(cls):
            if name in owner:
                shared.add(name)
            owner[name] = section
    for name in shared:
        owner.pop(name, None)
    return owner, shared


def _unknown(key: str, known: Sequence[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = (
        f"did you mean {close[0]}=?"
        if close
        else "use a preset key (e.g. detect_every, close_ratio) "
        "or a section dict (e.g. blinks={...})"
    )
    return ConfigError(f"unknown setting {key!r}: {hint}")


def _run_config(
    settings: dict[str, Any], allowed: Sequence[str]
) -> tuple[RunConfig, dict[str, Any]]:
    """The :class:`RunConfig` of ``settings`` (the preset, then the keys that override it, as the
    CLI applies its flags) and the settings that are not config keys (only names in ``allowed``)."""
    from eyeblink.config import load_preset
    from eyeblink.presets import resolve_preset

    settings = dict(settings)
    cfg = load_preset(resolve_preset(str(settings.pop("pipeline", "cpu"))))
    owner, shared = _flat_keys()
    named = aliases()
    overrides: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    top: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in settings.items():
        if key in SECTIONS and isinstance(value, dict):
            valid = _field_defaults(SECTIONS[key])
            for k, v in value.items():
                # a key in its old place: read into its new one
                section, name = MOVED_KEYS.get((key, k), (key, k))
                if name not in _field_defaults(SECTIONS[section]):
                    raise _unknown(f"{key}.{k}", [f"{key}.{n}" for n in valid])
                overrides[section][name] = v
        elif key in SECTIONS and key not in named:
            raise ConfigError(
                f"{key} must be a dict of [{key}] settings (e.g. {key}={{...}}), got "
                f"{type(value).__name__} {value!r}"
            )
        elif key in named and not isinstance(value, dict):
            alias_section, name = named[key]
            overrides[alias_section][name] = (
                str(value) if name == "model_path" and isinstance(value, Path) else value
            )
        elif key in owner and key not in allowed:
            overrides[owner[key]][key] = value
        elif key in ("fps", "max_frames", "points"):
            top[key] = value
        elif key in allowed:
            rest[key] = value
        elif key in shared:
            sections = [s for s, c in SECTIONS.items() if key in _field_defaults(c)]
            raise ConfigError(
                f"setting {key!r} is ambiguous: it is a key of {' and '.join(sections)}; give it "
                f"in its section, e.g. {sections[0]}={{{key!r}: ...}}"
            )
        else:
            raise _unknown(
                key,
                [
                    *owner,
                    *SECTIONS,
                    *named,
                    "fps",
                    "max_frames",
                    "points",
                    "pipeline",
                    "output",
                    *allowed,
                ],
            )
    for section, values in overrides.items():
        defaults = _field_defaults(SECTIONS[section])
        for k, v in values.items():
            want = _type_ok(v, defaults[k])
            if want is not None:
                raise ConfigError(f"{section}.{k} must be {want}, got {type(v).__name__} {v!r}")
        if section == "closure" and values.get("calibration_s") is not None:
            values["calibration_s"] = tuple(values["calibration_s"])
        try:
            cfg = cfg.with_overrides(section, **values)
        except TypeError as exc:
            raise ConfigError(f"[{section}] {exc}") from None
    for k, v in top.items():
        if k in LIVE_RANGES and _is_number(v):
            # its range, infinity included: the check the CLI's --fps goes through
            # (config.check_range)
            continue
        want = _type_ok(v, {"fps": 1.0, "points": False}.get(k, 1))
        if want is not None:
            raise ConfigError(f"{k} must be {want}, got {type(v).__name__} {v!r}")
    cfg = dataclasses.replace(
        cfg,
        fps=top.get("fps"),
        max_frames=top.get("max_frames"),
        points=bool(top.get("points", False)),
    )
    return cfg, rest


def _analysis(rest: dict[str, Any]) -> AnalysisOptions:
    from eyeblink.outputs.analysis import AnalysisOptions

    trials = rest.pop("trials", None)
    sync, us_sync = rest.pop("sync_column", None), rest.pop("us_sync_column", None)
    return AnalysisOptions(
        trials=Path(trials) if trials else None,
        sync_column=sync,
        us_sync_column=us_sync,
        plots=bool(rest.pop("plots", False)),
        nwb=bool(rest.pop("nwb", False)),
    )


#: a command-line flag in an error's text, with its value when one follows (a number, a path, a
#: quoted text)
_FLAG = re.compile(r"(?<![\w-])(--?)([a-z][a-z0-9-]*)(?: ([-\w./:]*[\d./][-\w./:]*|'[^']*'))?")
#: flags whose keyword of :func:`process` is not the flag's name with underscores
_FLAG_KEYWORDS = {"o": "output", "no-progress": "progress"}


def _process_keywords() -> set[str]:
    """Every keyword :func:`process` takes (its settings, the analysis and process-only ones,
    ``output``)."""
    owner, _shared = _flat_keys()
    return {
        *owner,
        *SECTIONS,
        *aliases(),
        *ANALYSIS,
        *PROCESS_ONLY,
        "fps",
        "max_frames",
        "pipeline",
        "output",
    }


def python_words(text: str) -> str:
    """``text`` (an error of the command line's checks) in the words of :func:`process`: each flag
    that is a keyword becomes the keyword (``--workers 2`` -> ``workers=2``, ``give --fps`` ->
    ``give fps=...``, ``-o`` -> ``output=...``); other words are kept. The CLI prints the flags, the
    API names its keywords."""
    known = _process_keywords()

    def keyword(m: re.Match[str]) -> str:
        dashes, flag, value = m.groups()
        if dashes == "-" and flag != "o":
            return m.group(0)
        name = _FLAG_KEYWORDS.get(flag, flag.replace("-", "_"))
        if name not in known:
            return m.group(0)
        if flag == "no-progress":
            return "progress=False"
        if value is not None:
            return f"{name}={value}"
        return name if m.string.startswith(" must", m.end()) else f"{name}=..."

    # a command quoted in backticks (the run that holds a session) is kept as it was typed
    return "`".join(
        part if i % 2 else _FLAG.sub(keyword, part) for i, part in enumerate(text.split("`"))
    )


@contextlib.contextmanager
def _settings_errors(python: bool = False) -> Iterator[None]:
    """A :class:`ConfigError` of the settings -> :class:`SettingsError` with the CLI's one-line
    text, or, with ``python``, that text in keyword words (:func:`python_words`)."""
    try:
        yield
    except SettingsError as exc:
        if not python:
            raise
        raise SettingsError(python_words(str(exc))) from None
    except ConfigError as exc:
        raise SettingsError(python_words(one_line(exc)) if python else one_line(exc)) from None


@contextlib.contextmanager
def _python_errors() -> Iterator[None]:
    """An :class:`~eyeblink.errors.EyeblinkError` of a run, its text in keyword words (same class,
    same exit status); one that cannot be rebuilt from its text is raised as it is."""
    try:
        yield
    except EyeblinkError as exc:
        text = python_words(str(exc))
        if text == str(exc):
            raise
        try:
            again = type(exc)(text)
        except TypeError:
            raise exc from None
        again.__dict__.update(exc.__dict__)
        raise again from None


#: the types of :func:`process`'s own keywords (the config keys are checked by :func:`_type_ok`), by
#: name
_KEYWORD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "workers": ((int, type(None)), "an int or None"),
    "start_method": ((str, type(None)), "a str (auto, spawn, forkserver or fork) or None"),
    "loaders": ((int,), "an int"),
    "progress": ((bool,), "a bool"),
    "report": ((bool,), "a bool"),
    "view": ((bool,), "a bool"),
    "view_port": ((int,), "an int (0: any free port)"),
    "view_host": ((str,), "a str (an IP address of this machine)"),
    "plots": ((bool,), "a bool"),
    "nwb": ((bool,), "a bool"),
    "trials": ((str, Path, type(None)), "a str or pathlib.Path (a file or a folder) or None"),
    "sync_column": ((str, type(None)), "a str (a column name) or None"),
    "us_sync_column": ((str, type(None)), "a str (a column name) or None"),
    "pipeline": ((str, Path), "a str (a preset name) or a pathlib.Path (a TOML file)"),
}


def _check_keyword_types(settings: dict[str, Any]) -> None:
    """Refuse a keyword of :func:`process` whose value has the wrong type, naming the keyword, the
    type wanted and the type given (``workers="2"``: ``workers must be an int or None, got str
    '2'``)."""
    for name, value in settings.items():
        if name not in _KEYWORD_TYPES:
            continue
        types, want = _KEYWORD_TYPES[name]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise SettingsError(f"{name} must be {want}, got {type(value).__name__} {value!r}")
