"""MkDocs hook: the reference pages' tables, generated from the code.

A page asks for a table with a marker line ``<!-- generate: NAME -->`` (names in :data:`GENERATORS`), or
holds the table itself between that line and ``<!-- end generate -->`` so that the raw Markdown reads as it
is: the build then replaces the block with the table generated afresh, and ``python docs/hooks/reference.py
PAGE.md ...`` writes the current tables into such pages (tests/test_docs.py checks that they are current). The
tables come from the code itself: the argparse parsers of ``eyeblink.cli.build_parser()``, the column
constants and their description mappings, the config dataclasses (defaults and the checks of their
``__post_init__``), the eye-model registry, the error classes and the live metrics registry. Anything the code
has that the docs cannot describe (an option without ``help=``, a column or preset key without a line in its
description mapping) raises :class:`mkdocs.exceptions.PluginError`, which fails the build: the reference
cannot drift from the code. Offline: imports eyeblink only, no network.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!--\s*generate:\s*([\w.-]+)\s*-->\s*$", re.M)
#: a marker with the table written after it, up to ``<!-- end generate -->``
BLOCK = re.compile(r"^<!--\s*generate:\s*([\w.-]+)\s*-->[ \t]*\n.*?^<!--\s*end generate\s*-->[ \t]*$", re.M | re.S)
ROOT = Path(__file__).resolve().parents[2]


def _escape(text: str) -> str:
    """``<`` and ``>`` outside code spans as entities (``<stem>.frames.csv`` is text, not an HTML tag)."""
    parts = str(text).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _cell(text: Any) -> str:
    """A Markdown table cell: one line, pipes escaped, angle brackets as text."""
    return _escape(" ".join(str(text).split())).replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- the CLI


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, sub, helps.get(name) or ""))
    return out


def _default(action: argparse.Action) -> str:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "on" if action.default else "off"
    if action.option_strings and action.nargs == 0:  # --version, counters
        return "–"
    if action.default is None or action.default == argparse.SUPPRESS:
        return "–"
    if isinstance(action.default, (list, tuple)):
        return " ".join(map(str, action.default)) or "–"
    return f"`{action.default}`"


def _argument(action: argparse.Action) -> str:
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.option_strings and action.nargs != 0:
        if action.choices is not None:
            arg = "{" + ",".join(map(str, action.choices)) + "}"
        else:
            arg = action.metavar or action.dest.upper()
        names += f" `{arg}`"
    elif not action.option_strings and action.nargs in ("+", "*"):
        names += " …"
    return names


def cli_markdown(parser: argparse.ArgumentParser, prog: str | None = None, level: int = 2) -> str:
    """Every command and option of ``parser`` (recursively): usage, description, a table of options.

    Raises PluginError for an option or argument without a help text.
    """
    prog = prog or parser.prog
    out: list[str] = []
    tables: list[tuple[str, list[tuple[str, str, str]]]] = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
                continue
            if action.help == argparse.SUPPRESS:
                continue
            if not action.help or not str(action.help).strip():
                what = "/".join(action.option_strings) or action.dest
                raise PluginError(f"CLI reference: option {what} of `{prog}` has no help text; add help=... to "
                                  "its add_argument (every option is documented in the generated CLI reference)")
            params = {**vars(action), "prog": prog}
            try:
                text = str(action.help) % params
            except (KeyError, TypeError, ValueError):
                text = str(action.help)
            rows.append((_argument(action), _default(action), text))
        if rows:
            tables.append((group.title or "", rows))
    usage = parser.format_usage().replace("usage: ", "").strip()
    out.append(f"```text\n{usage}\n```\n")
    if parser.description:
        description = textwrap.dedent(parser.description).strip()
        if parser.formatter_class is argparse.RawDescriptionHelpFormatter:  # laid out by hand: keep its lines
            out.append(f"```text\n{description}\n```\n")
        else:
            out.append(_escape(description) + "\n")
    for title, rows in tables:
        if len(tables) > 1 and title:
            out.append(f"**{_cell(title)}**\n")
        out.append(_table(("option", "default", "what it does"), rows))
    for name, sub, short in _subparsers(parser):
        out.append(f"{'#' * level} `{prog} {name}`\n")
        if short:
            out.append(f"*{_cell(short)}*\n")
        out.append(cli_markdown(sub, f"{prog} {name}", min(level + 1, 4)))
    return "\n".join(out)


def _gen_cli() -> str:
    from eyeblink.cli import build_parser

    return cli_markdown(build_parser())


# ----------------------------------------------------------------------------------------------- columns


def columns_markdown(columns: Sequence[str], docs: dict[str, tuple[str, str]], what: str,
                     mapping: str = "its description mapping") -> str:
    """A table of ``columns`` in file order with the unit and meaning from ``docs``.

    Raises PluginError for a column without an entry, or an entry for a column the file does not have.
    """
    missing = [c for c in columns if c not in docs or not str(docs[c][1]).strip()]
    if missing:
        raise PluginError(f"output reference: {what} column(s) {missing} have no description; add a (unit, "
                          f"meaning) line for each to {mapping}")
    stale = sorted(set(docs) - set(columns))
    if stale:
        raise PluginError(f"output reference: {what} descriptions {stale} name columns the file does not have")
    return _table(("#", "column", "unit", "meaning"),
                  ((i + 1, f"`{c}`", docs[c][0], docs[c][1]) for i, c in enumerate(columns)))


def _gen_columns(module: str, prefix: str, what: str) -> Callable[[], str]:
    """The generator of a file's column table: ``<prefix>_COLUMNS`` with ``<prefix>_COLUMN_DOCS`` of ``module``."""

    def generate() -> str:
        mod = importlib.import_module(module)
        return columns_markdown(getattr(mod, f"{prefix}_COLUMNS"), getattr(mod, f"{prefix}_COLUMN_DOCS"), what,
                                f"{prefix}_COLUMN_DOCS in {module.replace('.', '/')}.py")

    return generate


def _gen_frames() -> str:
    """frames.csv's columns from their one declaration (read when the page is built)."""
    from eyeblink.outputs import columns

    table = columns.FRAME_TABLE
    return columns_markdown(table.names, table.docs, "frames.csv", "FRAME_TABLE in eyeblink/outputs/columns.py")


def _gen_live_frames() -> str:
    from eyeblink.outputs.export import FRAME_COLUMNS
    from eyeblink.runtime.live.livewriter import LIVE_FRAME_COLUMN_DOCS, LIVE_FRAME_COLUMNS

    extra = LIVE_FRAME_COLUMNS[len(FRAME_COLUMNS):]
    return columns_markdown(extra, LIVE_FRAME_COLUMN_DOCS, "live frames.csv",
                            "LIVE_FRAME_COLUMN_DOCS in eyeblink/runtime/live/livewriter.py")


def _gen_summary() -> str:
    from eyeblink.outputs.export import SUMMARY_FIELDS

    empty = [k for k, v in SUMMARY_FIELDS.items() if not v.strip()]
    if empty:
        raise PluginError(f"output reference: summary.json fields {empty} have no description")
    return _table(("field", "meaning"), ((f"`{k}`", v) for k, v in SUMMARY_FIELDS.items()))


# ----------------------------------------------------------------------------------------------- presets


def _literal_strings(node: ast.AST) -> list[str] | None:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


class _Checks(ast.NodeVisitor):
    """The checks of a ``__post_init__``: ``_require(cond, msg)`` calls and ``if cond: raise ConfigError(msg)``.

    Each check is attached to the fields its condition reads (``self.x``, or ``getattr(self, name)`` inside a
    ``for name in ("a", "b")`` loop). ``_require`` checks are shown as their condition (``self.`` dropped);
    ``if``/``raise`` checks as their message up to ``, got``.
    """

    def __init__(self, fields: set[str], namespace: dict[str, Any]) -> None:
        self.fields = fields
        self.namespace = namespace
        self.loop: tuple[str, list[str]] | None = None
        self.found: dict[str, list[str]] = {}

    def _targets(self, node: ast.AST, name_value: str | None) -> list[str]:
        out = []
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                out.append(n.attr)
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
                  and name_value is not None):
                out.append(name_value)
        return [f for f in dict.fromkeys(out) if f in self.fields]

    def _render(self, cond: ast.AST, name_value: str | None) -> str:
        src = ast.unparse(cond)
        if name_value is not None:
            src = re.sub(r"getattr\(self, \w+\)", name_value, src)
        return src.replace("self.", "")

    def _message(self, msg: ast.AST, name_value: str | None) -> str:
        if isinstance(msg, ast.Constant):
            text = str(msg.value)
        elif isinstance(msg, ast.JoinedStr):
            parts = []
            for v in msg.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    try:
                        ns = {**self.namespace, **({self.loop[0]: name_value} if self.loop else {})}
                        parts.append(str(eval(compile(ast.Expression(v.value), "<check>", "eval"), ns)))
                    except Exception:
                        parts.append("…")
            text = "".join(parts)
        else:
            text = ast.unparse(msg)
        return text.split(", got")[0]

    def _add(self, cond: ast.AST, text_of: Callable[[str | None], str]) -> None:
        values = self.loop[1] if self.loop else [None]
        for value in values:
            for f in self._targets(cond, value):
                self.found.setdefault(f, []).append(text_of(value))

    def visit_For(self, node: ast.For) -> None:
        names = _literal_strings(node.iter)
        if isinstance(node.target, ast.Name) and names is not None:
            outer, self.loop = self.loop, (node.target.id, names)
            for stmt in node.body:
                self.visit(stmt)
            self.loop = outer
        else:
            self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "_require" and node.args:
            cond = node.args[0]
            self._add(cond, lambda v: f"`{self._render(cond, v)}`")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        raises = [s for s in node.body if isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call)
                  and getattr(s.exc.func, "id", "") == "ConfigError" and s.exc.args]
        if raises:
            msg = raises[0].exc.args[0]  # type: ignore[union-attr]
            self._add(node.test, lambda v: self._message(msg, v))
        self.generic_visit(node)


def dataclass_checks(cls: type, fields: set[str]) -> dict[str, list[str]]:
    """Field -> the checks ``cls.__post_init__`` makes on it (see :class:`_Checks`)."""
    post = getattr(cls, "__post_init__", None)
    if post is None:
        return {}
    tree = ast.parse(textwrap.dedent(inspect.getsource(post)))
    module = inspect.getmodule(cls)
    namespace = dict(vars(module)) if module else {}
    func = tree.body[0]
    for stmt in getattr(func, "body", []):  # simple local constants (lo, hi = IO_TILES_RANGE) for the messages
        if isinstance(stmt, ast.Assign) and "self" not in ast.unparse(stmt.value):
            with contextlib.suppress(Exception):
                exec(compile(ast.Module([stmt], []), "<check>", "exec"), namespace)
    visitor = _Checks(fields, namespace)
    visitor.visit(tree)
    return visitor.found


def _default_of(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "required"
    return _value_text(value)


def _value_text(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _declared(f: dataclasses.Field) -> list[Any]:
    """The settings a section's field of declared settings holds (``LandmarkConfig.model_settings``:
    each eye model's own, :class:`eyeblink.landmarks.Setting`), each a key of the section; none for
    another field."""
    from eyeblink.config import DECLARED
    from eyeblink.landmarks import tunables

    return [setting for _, setting in tunables().values()] if f.metadata.get(DECLARED) else []


def preset_markdown(sections: dict[str, type], docs: dict[str, dict[str, str]],
                    extra_checks: dict[str, list[type]] | None = None) -> str:
    """One table per section: key, default, type, checks, meaning.

    Raises PluginError for a dataclass field without a line in ``docs`` (or a line for a field that
    is gone), or a declared setting (an eye model's own) without its ``doc``.
    """
    out = []
    for section, cls in sections.items():
        plain = [f for f in dataclasses.fields(cls) if not _declared(f)]
        declared = [s for f in dataclasses.fields(cls) for s in _declared(f)]
        names = [f.name for f in plain]
        section_docs = docs.get(section, {})
        missing = [n for n in names if not str(section_docs.get(n, "")).strip()]
        if missing:
            raise PluginError(f"preset reference: key(s) {missing} of [{section}] ({cls.__name__}) have no "
                              "description; add a line to PRESET_KEY_DOCS in eyeblink/config.py")
        undocumented = [s.field for s in declared if not s.doc.strip()]
        if undocumented:
            raise PluginError(f"preset reference: eye-model setting(s) {undocumented} of "
                              f"[{section}] have no description; give their Setting a doc in "
                              "eyeblink/landmarks/__init__.py")
        stale = sorted(set(section_docs) - set(names))
        if stale:
            raise PluginError(f"preset reference: PRESET_KEY_DOCS[{section!r}] describes keys {stale} that "
                              f"{cls.__name__} does not have")
        checks = dataclass_checks(cls, set(names))
        for other in (extra_checks or {}).get(section, []):
            for k, v in dataclass_checks(other, set(names)).items():
                checks.setdefault(k, []).extend(v)
        hints = {f.name: str(f.type).replace(" | ", " or ") for f in plain}
        rows = []
        for f in dataclasses.fields(cls):
            if f.name in hints:
                checked = "; ".join(dict.fromkeys(checks.get(f.name, []))) or "–"
                rows.append((f"`{f.name}`", _default_of(f), hints[f.name], checked,
                             section_docs[f.name]))
            else:  # the declared settings, in their field's place
                rows += [(f"`{s.field}`", _value_text(s.default), s.kind.replace(" | ", " or "),
                          f"must be {s.expected()}", s.doc) for s in _declared(f)]
        out.append(f"### `[{section}]`\n")
        doc = inspect.getdoc(cls) or ""
        first = doc.split("\n\n")[0]
        out.append(_cell(first) + f" (`{cls.__module__}.{cls.__name__}`)\n")
        out.append(_table(("key", "default", "type", "checked", "what it does"), rows))
    return "\n".join(out)


def _gen_preset_keys() -> str:
    from eyeblink import config
    from eyeblink.detect import AcceleratorOptions

    top = docs = config.PRESET_KEY_DOCS
    missing = [k for k in config.TOP_LEVEL_KEYS if not top.get("", {}).get(k)]
    if missing:
        raise PluginError(f"preset reference: top-level key(s) {missing} have no description in PRESET_KEY_DOCS")
    head = "### Top level\n\n" + _table(("key", "what it does"),
                                         ((f"`{k}`", docs[""][k]) for k in config.TOP_LEVEL_KEYS))
    return head + "\n" + preset_markdown(config._SECTIONS, {k: v for k, v in docs.items() if k},
                                         {"detect": [AcceleratorOptions]})


def _gen_presets() -> str:
    import tomllib

    rows = []
    for path in sorted((ROOT / "pipelines").glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        settings = []
        for section, values in data.items():
            if isinstance(values, dict):
                settings += [f"{section}.{k} = {v!r}" for k, v in values.items()]
        rows.append((f"`{path.stem}`", data.get("description", ""), "; ".join(settings)))
    if not rows:
        raise PluginError("preset reference: no presets found in pipelines/")
    return _table(("preset", "what it is for", "what it sets"), rows)


# ----------------------------------------------------------------------------------------------- others


def _gen_eye_models() -> str:
    from eyeblink.config import LandmarkConfig
    from eyeblink.landmarks import DEFAULT_EYE_MODEL, EYE_MODELS

    reuse = LandmarkConfig().mesh_reuse_ms
    rows = []
    for name, spec in EYE_MODELS.items():
        rows.append((f"`{name}`" + (" (default)" if name == DEFAULT_EYE_MODEL else ""), f"{spec.fit_ms:g}",
                     f"{spec.reusable_ms:g}" if spec.reusable_ms else "–", f"{spec.cost_ms(500.0, reuse):.2f}",
                     "yes" if spec.lid_confirms else "no", spec.install or "core install",
                     ", ".join(f"`landmarks.{s}`" for s in spec.settings) or "–"))
    return _table(("model", "fit, ms (one face, one core)", "skipped when reused, ms",
                   f"ms per frame at 500 FPS (reuse {reuse:g} ms)", "openness confirms the patch cue", "needs",
                   "settings it takes"), rows)


def _error_classes() -> list[type]:
    import eyeblink.runtime.batch.driver
    import eyeblink.sources.live  # noqa: F401  (defines SourceLostError)
    from eyeblink.errors import EyeblinkError

    seen: list[type] = []
    todo = [EyeblinkError]
    while todo:
        cls = todo.pop(0)
        if cls not in seen:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return seen


def _gen_exit_statuses() -> str:
    from eyeblink.errors import INPUT_DAMAGED_EXIT

    by_code: dict[int, list[str]] = {}
    for cls in _error_classes():
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0]
        if not doc:
            raise PluginError(f"exit statuses: error class {cls.__name__} has no docstring")
        by_code.setdefault(int(cls.exit_code), []).append(f"`{cls.__name__}`: {doc}")
    fixed = {0: "done: every input processed",
             INPUT_DAMAGED_EXIT: "done, but an input was damaged: undecodable packets were skipped (listed in "
                                 "summary.json's `damaged_packets`; `batch`: every video done, at least one damaged)",
             1: "an internal error (a bug: please report it with the traceback)",
             2: "a user error (bad input or option): one line `eyeblink: error: …` naming the problem and the fix.",
             130: "interrupted (Ctrl-C or SIGTERM): every row computed so far is on disk, status `interrupted`"}
    rows = []
    for code in sorted({*fixed, *by_code}):
        text = fixed.get(code, "")
        if code in by_code:
            text = (text + " " if text else "") + "<br>".join(by_code[code])
        rows.append((f"`{code}`", text))
    return _table(("exit status", "meaning (error classes in `eyeblink.errors` and their sources)"), rows)


def _gen_metrics() -> str:
    try:
        from eyeblink.runtime.live.metrics import LiveMetrics
    except ImportError as exc:  # pragma: no cover
        raise PluginError(f"metrics reference: {exc}") from None
    try:
        m = LiveMetrics(source="camera:0", overload="drop",
                        gauges={"frames_in": lambda: 0, "frames_dropped": lambda: 0, "reconnects": lambda: 0,
                                "queue:ring": lambda: 0, "queue:work": lambda: 0, "queue:results": lambda: 0,
                                "queue:reorder": lambda: 0, "memory_rss": lambda: {"loader": 0},
                                "rows_unpublished": lambda: 0})
    except Exception as exc:
        raise PluginError(f"metrics reference: cannot build the live metrics registry ({exc}); install the "
                          "docs extra: pip install -e \".[docs]\"") from None
    m.landmark_model.labels(model="mesh").set(1)
    rows = []
    try:
        for family in m.registry.collect():
            if not family.documentation.strip():
                raise PluginError(f"metrics reference: metric {family.name} has no help text")
            labels = sorted({k for s in family.samples for k in s.labels if k not in ("le",)})
            name = family.name + ("_total" if family.type == "counter" else "")
            rows.append((f"`{name}`", family.type, ", ".join(f"`{x}`" for x in labels) or "–",
                         family.documentation))
    finally:
        m.close()
    return _table(("metric", "type", "labels", "meaning"), rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": _gen_cli,
    "columns-frames": _gen_frames,
    "columns-live-frames": _gen_live_frames,
    "columns-blinks": _gen_columns("eyeblink.signals.events", "BLINK", "blinks.csv"),
    "columns-trials": _gen_columns("eyeblink.signals.trials", "TRIAL", "trials.csv"),
    "columns-traces": _gen_columns("eyeblink.signals.trials", "TRACE", "traces.csv"),
    "columns-points": _gen_columns("eyeblink.outputs.export", "POINTS", "points.csv"),
    "summary-fields": _gen_summary,
    "preset-keys": _gen_preset_keys,
    "presets": _gen_presets,
    "eye-models": _gen_eye_models,
    "exit-statuses": _gen_exit_statuses,
    "metrics": _gen_metrics,
}


def _generated(name: str, where: str) -> str:
    if name not in GENERATORS:
        raise PluginError(f"{where}: unknown generator {name!r}; known: {', '.join(GENERATORS)}")
    return GENERATORS[name]()


def expand(markdown: str, where: str = "page") -> str:
    """``markdown`` with every ``<!-- generate: NAME -->`` line (or block) replaced by its generated table."""
    markdown = BLOCK.sub(lambda m: _generated(m.group(1), where), markdown)
    return MARKER.sub(lambda m: _generated(m.group(1), where), markdown)


def refresh(markdown: str, where: str = "page") -> str:
    """``markdown`` with every marker followed by its current table, up to ``<!-- end generate -->`` (the form
    committed in pages that must read as they are)."""
    def block(m: re.Match[str]) -> str:
        return f"<!-- generate: {m.group(1)} -->\n{_generated(m.group(1), where).strip()}\n<!-- end generate -->"

    markdown = BLOCK.sub(lambda m: f"<!-- generate: {m.group(1)} -->", markdown)
    return MARKER.sub(block, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown, page.file.src_path)


SPHINX_ROLE = re.compile(r":(?:class|func|mod|data|meth|attr|obj|exc):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """The code's docstrings use Sphinx roles (``:class:`~x.Y```) and literal-block markers (``Example::``); on
    these pages they are plain code and a colon."""
    return SPHINX_ROLE.sub("", html).replace("<code>~", "<code>").replace("::</p>", ":</p>")


if __name__ == "__main__":  # python docs/hooks/reference.py docs/reference/outputs.md: write the current tables in
    import sys

    for arg in sys.argv[1:]:
        page = Path(arg)
        page.write_text(refresh(page.read_text(encoding="utf-8"), arg), encoding="utf-8")
        print(f"{page}: tables written")
