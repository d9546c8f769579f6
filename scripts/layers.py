"""The drawing of the house: eyeblink's floors, what each module imports, and any import that runs
up or round.

    python scripts/layers.py            # the floors, each module's imports, then the problems
    python scripts/layers.py --floors   # the floors only: the block ARCHITECTURE.md shows

The floors are the layers contract of ``pyproject.toml`` (``[tool.importlinter]``, its first
contract: top floor first; ``a | b`` is one floor of rooms that do not import each other). The
imports are read from the source with :mod:`ast` (nothing of the package is imported, so it runs
without the package's dependencies): every ``import`` and ``from ... import`` of ``eyeblink``, at a
module's top or inside a function alike, as the contracts count them.

Two kinds of problem, each printed on a line of its own; the exit status is 1 if there is any, else
0:

* ``upward``: a module imports one on a higher floor, or a room of its own floor (the contract's
  ``ignore_imports`` are allowed);
* ``circle``: sibling modules or folders (the children of one package) that import each other round
  a circle, counting what their modules import.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "eyeblink"

__all__ = [
    "Contract",
    "circles",
    "floor_of",
    "floors_text",
    "imports",
    "load_contract",
    "main",
    "modules",
    "upward_imports",
]


@dataclass(frozen=True)
class Contract:
    """The layers contract: ``floors`` top first, each a tuple of rooms (module or package names);
    ``ignored``: the ``(importer, imported)`` pairs it allows."""

    floors: tuple[tuple[str, ...], ...]
    ignored: frozenset[tuple[str, str]]


def load_contract(root: Path = ROOT) -> Contract:
    """The first ``layers`` contract of ``root``'s ``pyproject.toml`` with no ``containers`` (the
    package's floors)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]
    for contract in config["contracts"]:
        if contract["type"] == "layers" and not contract.get("containers"):
            floors = tuple(
                tuple(r.strip() for r in layer.split("|")) for layer in contract["layers"]
            )
            pairs = [line.split("->") for line in contract.get("ignore_imports", [])]
            return Contract(floors, frozenset((a.strip(), b.strip()) for a, b in pairs))
    raise SystemExit("pyproject.toml has no layers contract for the package")


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name: its
    ``__init__.py``)."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Iterable[str]) -> str | None:
    """``name`` as the nearest module of the package
    (``eyeblink.runtime.procs.parallel.ParallelPipeline`` -> its module); None outside the package.
    """
    known = set(known)
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(name: str, path: Path, known: Iterable[str]) -> list[str]:
    """The package's modules that module ``name`` (at ``path``) imports, sorted, once each."""
    known = set(known)
    is_package = path.name == "__init__.py"
    got: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # a submodule, else the module's own name
            targets = [f"{module}.{a.name}" for a in node.names]
        for target in targets:
            hit = _resolve(target, known)
            if hit is not None and hit != name:
                got.add(hit)
    return sorted(got)


def floor_of(module: str, contract: Contract) -> tuple[int, str] | None:
    """``(floor index, room)`` of ``module`` (0: the top floor), by its nearest room; None for a
    module on no floor (the package's own face)."""
    best: tuple[int, str] | None = None
    for i, floor in enumerate(contract.floors):
        for room in floor:
            if (module == room or module.startswith(room + ".")) and (
                best is None or len(room) > len(best[1])
            ):
                best = (i, room)
    return best


def upward_imports(graph: dict[str, list[str]], contract: Contract) -> list[tuple[str, str]]:
    """The imports that run up the floors or across the rooms of one floor, as ``(importer,
    imported)``."""
    bad = []
    for importer, targets in sorted(graph.items()):
        mine = floor_of(importer, contract)
        for target in targets:
            theirs = floor_of(target, contract)
            if mine is None or theirs is None or (importer, target) in contract.ignored:
                continue
            if theirs[0] < mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1]):
                bad.append((importer, target))
    return bad


def _child(module: str, parent: str) -> str | None:
    """The child of package ``parent`` that ``module`` is or lives in."""
    if not module.startswith(parent + "."):
        return None
    return parent + "." + module[len(parent) + 1 :].split(".")[0]


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Sibling modules or folders (children of one package) that import each other round a circle:
    each circle's members, sorted, for every package of the package (what a module imports counts
    for its folder too)."""
    packages = sorted({m for m in graph if any(o.startswith(m + ".") for o in graph)})
    found = []
    for parent in packages:
        edges: dict[str, set[str]] = {}
        for importer, targets in graph.items():
            a = _child(importer, parent)
            if a is None:
                continue
            for target in targets:
                b = _child(target, parent)
                if b is not None and b != a:
                    edges.setdefault(a, set()).add(b)
        found += [sorted(c) for c in _strong_components(edges) if len(c) > 1]
    return sorted(found)


def _strong_components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of a small graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def graph_of(root: Path = ROOT) -> dict[str, list[str]]:
    """Each module of the package and the package's modules it imports."""
    found = modules(root)
    return {name: imports(name, path, found) for name, path in found.items()}


def floors_text(contract: Contract) -> str:
    """The floors, top first, one line each (the block ARCHITECTURE.md shows)."""
    width = len(str(len(contract.floors)))
    lines = [
        f"floor {len(contract.floors) - i:>{width}}  {' | '.join(floor)}"
        for i, floor in enumerate(contract.floors)
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--floors", action="store_true", help="print the floors only (ARCHITECTURE.md's block)"
    )
    args = parser.parse_args(argv)
    contract = load_contract()
    if args.floors:
        sys.stdout.write(floors_text(contract))
        return 0
    graph = graph_of()
    print("Floors (top first; a room imports only the floors below its own):")
    sys.stdout.write(floors_text(contract))
    print("\nEach module's imports of eyeblink (its floor's room in brackets):")
    for name, targets in sorted(graph.items()):
        where = floor_of(name, contract)
        print(f"{name} [{where[1] if where else 'no floor'}]: {', '.join(targets) or '-'}")
    allowed = sorted(pair for pair in contract.ignored if pair[1] in graph.get(pair[0], ()))
    if allowed:
        print(
            "\nAllowed by the contract's ignore_imports: "
            + ", ".join(f"{a} -> {b}" for a, b in allowed)
        )
    problems = [f"upward: {a} -> {b}" for a, b in upward_imports(graph, contract)]
    problems += [f"circle: {' <-> '.join(c)}" for c in circles(graph)]
    print(f"\n{len(problems)} problem(s)" + "".join(f"\n{p}" for p in problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
