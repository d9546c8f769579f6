"""Every lab's computer: what a run writes is the same bytes on Windows, macOS and Linux, whatever
its paths.

A Windows run cannot be made on Linux, so the part of it that differs is checked where it comes
from: Python's text mode writes ``os.linesep`` for each ``"\\n"`` unless the file is opened with
``newline=``, and a descriptor ``os.open`` gives is in text mode on Windows unless opened with
``O_BINARY``. The package's sources are scanned for text written without either; a real run with
spaces and non-ASCII names in every path checks the bytes and links.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from conftest import run_cli

from eyeblink.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "eyeblink"
WORKFLOW = REPO / ".github" / "workflows" / "quick-tier.yml"


# --------------------------------------------------------------------------- text written the same
# on every OS


def _keywords(call: ast.Call) -> set[str]:
    return {k.arg for k in call.keywords if k.arg}


def _mode(call: ast.Call, index: int) -> str | None:
    """The constant mode of an ``open``-like call (its ``index``-th argument or ``mode=``), None
    if not given."""
    node = (
        call.args[index]
        if len(call.args) > index
        else next((k.value for k in call.keywords if k.arg == "mode"), None)
    )
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _text_written_without_newline(path: Path, root: Path = REPO) -> list[str]:
    """Each place in ``path`` that opens a text file for writing (``open``, ``Path.open``,
    ``os.fdopen``) or calls ``Path.write_text`` without ``newline=`` and ``encoding=``; and each
    ``os.open`` for writing without ``O_BINARY``."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else ""
        )
        owner = (
            func.value.id
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            else ""
        )
        where = f"{path.relative_to(root)}:{node.lineno}"
        # Path.write_text (not the package's own)
        if name == "write_text" and isinstance(func, ast.Attribute):
            if not {"newline", "encoding"} <= _keywords(node):
                found.append(f"{where}: write_text without newline= and encoding=")
        elif name in ("open", "fdopen") and owner not in ("av", "Image", "os", "self"):
            # open(file, mode), os.fdopen(fd, mode); Path.open(mode): the mode is the first argument
            mode = _mode(node, 0 if isinstance(func, ast.Attribute) and name == "open" else 1)
            if (
                mode is None
                and isinstance(func, ast.Attribute)
                and name == "open"
                and len(node.args) > 1
            ):
                mode = _mode(node, 1)  # some_module.open(file, mode)
            if (
                mode
                and "b" not in mode
                and set(mode) & set("wax+")
                and not {"newline", "encoding"} <= _keywords(node)
            ):
                found.append(
                    f"{where}: text opened for writing ({mode!r}) without newline= and encoding="
                )
        elif name == "fdopen" and owner == "os":
            mode = _mode(node, 1)
            if (
                mode
                and "b" not in mode
                and set(mode) & set("wax+")
                and not {"newline", "encoding"} <= _keywords(node)
            ):
                found.append(
                    f"{where}: text opened for writing ({mode!r}) without newline= and encoding="
                )
        elif name == "open" and owner == "os" and len(node.args) > 1:
            flags = ast.unparse(node.args[1])
            if (
                re.search(r"O_WRONLY|O_RDWR", flags)
                and "O_BINARY" not in flags
                and "lock" not in path.name
            ):
                found.append(f"{where}: os.open for writing without O_BINARY ({flags})")
    return found


def test_every_text_file_the_package_writes_has_explicit_line_ends_and_encoding() -> None:
    """The same bytes on every OS: each text file written is opened with ``newline=`` and
    ``encoding=`` (or written as bytes), each descriptor written to with ``O_BINARY`` (the session
    lock holds no text rows)."""
    found = [hit for p in sorted(PACKAGE.rglob("*.py")) for hit in _text_written_without_newline(p)]
    assert not found, "\n".join(found)


def test_the_scan_finds_what_it_is_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        'import os\nfrom pathlib import Path\nPath("a").write_text("x", encoding="utf-8")\n'
        'open("b", "w", encoding="utf-8")\nPath("c").open("a")\nos.fdopen(3, "w")\n'
        'os.open("d", os.O_WRONLY | os.O_CREAT)\n'
        'open("e", "wb")\nPath("f").write_text("x", encoding="utf-8", newline="\\n")\n'
        'open("g", "w", encoding="utf-8", newline="")\n',
        encoding="utf-8",
        newline="\n",
    )
    found = _text_written_without_newline(bad, tmp_path)
    assert [f.split(":")[1] for f in found] == ["3", "4", "5", "6", "7"], found


def test_the_writers_write_lf_only(tmp_path: Path) -> None:
    """The package's writers (the atomic text writer, the row-by-row CSV stream) put ``\\n`` and
    no ``\\r``."""
    from eyeblink.outputs.export import _CsvStream, write_text_atomic
    from eyeblink.outputs.paths import write_text

    write_text(tmp_path / "a é.json", '{\n "a": "é"\n}\n', "-o")
    write_text_atomic(tmp_path / "b é.json", '{\n "b": 1\n}\n')
    stream = _CsvStream(tmp_path / "c é.csv", ["frame", "label"], 0.0)
    stream.write([1, 'two words, "quoted"\nand a line'])
    stream.write([2, 0.5])
    stream.close()
    assert (tmp_path / "a é.json").read_bytes() == '{\n "a": "é"\n}\n'.encode()
    assert (tmp_path / "b é.json").read_bytes() == b'{\n "b": 1\n}\n'
    assert (
        tmp_path / "c é.csv"
    ).read_bytes() == b'frame,label\n1,"two words, ""quoted""\nand a line"\n2,0.5\n'


# --------------------------------------------------------------------------- presets with Windows
# paths


@pytest.mark.parametrize(
    "value", [r"C:\data\x.tflite", r"C:\Users\me\face.tflite", r"D:\new\face.tflite"]
)
def test_a_double_quoted_windows_path_in_a_preset_is_one_line_naming_the_key_and_the_fix(
    tmp_path: Path, value: str
) -> None:
    """``"C:\\data\\x.tflite"`` is an invalid escape in TOML (``"D:\\new\\face.tflite"`` even reads
    as a newline and a form feed): the message names the key and says to use single quotes or
    forward slashes."""
    from eyeblink.config import load_preset

    preset = tmp_path / "my presets é" / "lab rig.toml"
    preset.parent.mkdir()
    preset.write_text(
        f'name = "lab"\n[detect]\nmodel_path = "{value}"\n', encoding="utf-8", newline="\n"
    )
    with pytest.raises(ConfigError) as err:
        load_preset(preset)
    msg = str(err.value)
    assert "\n" not in msg and str(preset) in msg
    assert "[detect] model_path" in msg and f"model_path = '{value}'" in msg
    assert f'model_path = "{value.replace(chr(92), "/")}"' in msg and "single quotes" in msg


@pytest.mark.parametrize(
    "value", ["'C:\\data\\x.tflite'", '"C:/data/x.tflite"', '"C:\\\\data\\\\x.tflite"']
)
def test_windows_paths_in_single_quotes_forward_slashes_or_doubled_backslashes_load(
    tmp_path: Path, value: str
) -> None:
    from eyeblink.config import load_preset

    preset = tmp_path / "rig.toml"
    preset.write_text(f"[detect]\nmodel_path = {value}\n", encoding="utf-8", newline="\n")
    assert load_preset(preset).detect.model_path in ("C:\\data\\x.tflite", "C:/data/x.tflite")


def test_other_toml_errors_keep_the_parsers_message(tmp_path: Path) -> None:
    from eyeblink.config import load_preset

    preset = tmp_path / "rig.toml"
    preset.write_text("[detect]\nbatch = \n", encoding="utf-8", newline="\n")
    with pytest.raises(ConfigError, match=r"is not valid TOML: .*line 2"):
        load_preset(preset)


def test_every_shipped_preset_still_loads() -> None:
    from eyeblink.config import load_preset
    from eyeblink.presets import available_presets, resolve_preset

    for name in available_presets():
        load_preset(resolve_preset(name))


# --------------------------------------------------------------------------- a real run with
# awkward paths


def test_process_with_spaces_and_accents_in_every_path_writes_lf_csvs_and_quoted_relative_links(
    tmp_path: Path,
) -> None:
    """The real CLI, input and output folders with spaces and "é": LF-only UTF-8 files, the report's
    link to its eyes' video relative and URL-quoted (beside it, and from a page written elsewhere),
    the session loads back."""
    import eyeblink

    video = tmp_path / "my recordings é" / "session 1 é.avi"
    video.parent.mkdir()
    r = run_cli("example", "--duration", "2", video)  # one blink, at 0.7 s
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out dir é"
    r = run_cli("process", video, "-o", out, "--workers", "1", "--report")
    assert r.returncode == 0, r.stderr
    stem = "session 1 é"
    for suffix in ("frames.csv", "blinks.csv", "summary.json", "report.html"):
        data = (out / f"{stem}.{suffix}").read_bytes()
        assert b"\r" not in data, suffix
        data.decode("utf-8")
    frames = (out / f"{stem}.frames.csv").read_bytes()
    assert frames.startswith(b"frame,timestamp_s,") and frames.endswith(b"\n")

    def eyes(page: Path) -> dict:
        m = re.search(
            r'<script type="application/json" id="report-data">(.*?)</script>',
            page.read_text(encoding="utf-8"),
            re.S,
        )
        assert m
        return json.loads(m.group(1))["eyesVideo"]

    assert (out / f"{stem}.eyes.webm").is_file()
    assert eyes(out / f"{stem}.report.html") == {
        "src": f"{stem}.eyes.webm",
        "url": "session%201%20%C3%A9.eyes.webm",
        "fps": 500.0,
    }
    elsewhere = tmp_path / "reports #2 é" / "page é.html"
    elsewhere.parent.mkdir()
    r = run_cli("report", out / stem, "-o", elsewhere)
    assert r.returncode == 0, r.stderr
    ev = eyes(elsewhere)
    assert ev["src"] == f"../out dir é/{stem}.eyes.webm"
    assert ev["url"] == "../out%20dir%20%C3%A9/session%201%20%C3%A9.eyes.webm"
    assert "\\" not in ev["url"] and not ev["url"].startswith(("/", "file:"))

    s = eyeblink.load(out / stem)
    assert len(s.frames) == 1000 and len(s.blinks) == 1 and not s.notes
    assert s.paths["frames"] == out / f"{stem}.frames.csv"


# --------------------------------------------------------------------------- the CI workflow of the
# three OSes


def test_the_quick_tier_workflow_runs_on_linux_windows_and_macos() -> None:
    yaml = pytest.importorskip("yaml")
    wf = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as True
    (job,) = wf["jobs"].values()
    matrix = job["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "windows-latest", "macos-14"}
    assert {str(v) for v in matrix["python-version"]} == {"3.11", "3.12"}
    assert job["runs-on"] == "${{ matrix.os }}"
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "pip install -e . pytest hypothesis" in runs
    assert 'python -m pytest -m "not slow"' in runs and "eyeblink demo" in runs


def test_the_quick_tier_workflow_also_runs_the_real_process_tests() -> None:
    """Windows and macOS start a run's processes with ``spawn``: the workflow runs the
    real-process tests too."""
    yaml = pytest.importorskip("yaml")
    (job,) = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"].values()
    runs = [step.get("run", "") for step in job["steps"]]
    assert any("python -m pytest -m spawn_proof" in run for run in runs), runs
    assert runs.index(next(r for r in runs if "eyeblink demo" in r)) < runs.index(
        next(r for r in runs if "spawn_proof" in r)
    )


# ---------------------------------------------------------------------------
# scripts/check_wheels.py


def _check_wheels():
    import importlib.util
    import sys

    if "check_wheels" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "check_wheels", REPO / "scripts" / "check_wheels.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["check_wheels"] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules["check_wheels"]


def _names(reqs) -> set[str]:
    from packaging.utils import canonicalize_name

    return {canonicalize_name(r.name) for r in reqs}


def test_check_wheels_evaluates_the_project_s_markers_for_the_target_not_this_machine() -> None:
    """tensorflow-cpu (no macOS wheel) is left out of ``[test]`` on macOS arm64 and kept on Windows
    and Linux; tomli only below Python 3.11; face-recognition-models (source only) is taken out of
    the wheel-only dry run."""
    cw = _check_wheels()
    deps, extras = cw.read_project()
    mac, win, linux = (
        cw.TARGETS[k] for k in ("macosx_12_0_arm64", "win_amd64", "manylinux_x86_64")
    )
    env = cw.target_environment(mac, "3.13")
    assert (
        env["sys_platform"] == "darwin"
        and env["platform_machine"] == "arm64"
        and env["python_version"] == "3.13"
    )
    assert cw.target_environment(win, "3.12")["sys_platform"] == "win32"
    with pytest.raises(ValueError):
        cw.target_environment(win, "312")

    test_mac = cw.applicable(cw.declared(deps, extras, "test"), cw.target_environment(mac, "3.12"))
    assert "tensorflow-cpu" not in _names(test_mac)
    assert {"pytest", "jax", "ai-edge-litert", "numpy", "face-recognition-models"} <= _names(
        test_mac
    )
    for target in (win, linux):
        assert "tensorflow-cpu" in _names(
            cw.applicable(cw.declared(deps, extras, "test"), cw.target_environment(target, "3.12"))
        )
    default_win = cw.applicable(cw.declared(deps, extras, None), cw.target_environment(win, "3.11"))
    assert "ai-edge-litert" in _names(default_win) and not {"pytest", "tomli"} & _names(default_win)
    assert "tomli" in _names(
        cw.applicable(cw.declared(deps, extras, None), cw.target_environment(win, "3.10"))
    )
    with pytest.raises(ValueError, match="no extra"):
        cw.declared(deps, extras, "no-such-extra")

    binary, source = cw.split_source_only(test_mac)
    assert [s.split(">")[0] for s in source] == ["face-recognition-models"]
    # markers are stripped
    assert not any(";" in r or r.startswith("face-recognition-models") for r in binary)

    made_up = [
        "a; platform_machine == 'arm64'",
        "b; os_name == 'nt'",
        "c>=1; python_version >= '3.13'",
        "d[x]; sys_platform == 'darwin' and python_version < '3.14'",
        "e",
    ]
    assert [
        cw.without_marker(r) for r in cw.applicable(made_up, cw.target_environment(mac, "3.13"))
    ] == ["a", "c>=1", "d[x]", "e"]
    assert [
        cw.without_marker(r) for r in cw.applicable(made_up, cw.target_environment(win, "3.12"))
    ] == ["b", "e"]


def test_check_wheels_command_line_carries_the_target() -> None:
    import json
    from itertools import pairwise

    cw = _check_wheels()
    mac, linux = cw.TARGETS["macosx_12_0_arm64"], cw.TARGETS["manylinux_x86_64"]
    cmd = cw.pip_command(
        ["numpy>=1.24", "ai-edge-litert>=1.2"], mac, "3.13", "r.json", interpreter="py"
    )
    assert cmd[:3] == ["py", "-c", cw.BOOTSTRAP]
    assert json.loads(cmd[3]) == cw.target_environment(mac, "3.13")
    pairs = set(pairwise(cmd))
    assert {
        ("install", "--dry-run"),
        ("--report", "r.json"),
        ("--platform", "macosx_12_0_arm64"),
        ("--python-version", "3.13"),
        ("--implementation", "cp"),
        ("--index-url", "https://pypi.org/simple"),
    } <= pairs
    assert {"--only-binary=:all:", "--ignore-installed", "--isolated"} <= set(
        cmd
    ) and "--no-deps" not in cmd
    assert cmd[-2:] == ["numpy>=1.24", "ai-edge-litert>=1.2"]
    lin = cw.pip_command(["x"], linux, "3.11", "r.json", index_url=None, no_deps=True)
    assert {
        ("--platform", "manylinux_2_17_x86_64"),
        ("--platform", "manylinux_2_28_x86_64"),
        ("--platform", "manylinux2014_x86_64"),
    } <= set(pairwise(lin))
    assert "--no-index" in lin and "--index-url" not in lin and "--no-deps" in lin


def test_check_wheels_makes_pip_evaluate_markers_for_the_target(tmp_path: Path) -> None:
    """The real pip, offline (``--no-index``): a requirement whose marker holds only on Linux is
    skipped for the macOS target, and pip's report carries macOS's marker environment (``resolve``
    checks it). pip alone would evaluate the marker for this machine (on Linux: seek the package,
    and fail without an index). The Windows side, a marker that holds there only, is in the slow
    test below."""
    cw = _check_wheels()
    out = cw.resolve(
        ["colorama; sys_platform == 'linux'"],
        cw.TARGETS["macosx_12_0_arm64"],
        "3.12",
        index_url=None,
        timeout=120,
    )
    assert out.resolves is True and out.installs == 0, out


def test_check_wheels_reads_pip_s_reason() -> None:
    cw = _check_wheels()
    stderr = (
        "WARNING: something\nERROR: Could not find a version that satisfies the requirement "
        "tensorflow-cpu>=2.15 (from versions: none)\nERROR: No matching distribution found for "
        "tensorflow-cpu>=2.15\n"
    )
    assert (
        cw.first_reason(stderr)
        == "Could not find a version that satisfies the requirement tensorflow-cpu>=2.15"
    )
    assert cw.failing_requirement(stderr) == "tensorflow-cpu>=2.15"
    assert cw.first_reason("Traceback ...\nKeyError: 'x'\n") == "KeyError: 'x'"
    assert cw.failing_requirement("ERROR: Cannot install a and b") is None


def _pypi_reachable() -> bool:
    import socket

    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.mark.slow
def test_check_wheels_against_pypi() -> None:
    """With the network: LiteRT has a Windows wheel, tensorflow-cpu has none for macOS arm64. First,
    offline: a requirement whose marker holds on Windows only is sought for the Windows target."""
    cw = _check_wheels()
    out = cw.resolve(
        ["colorama; sys_platform == 'win32'"],
        cw.TARGETS["win_amd64"],
        "3.12",
        index_url=None,
        timeout=120,
    )
    assert out.resolves is False and out.not_found and out.not_found.startswith("colorama"), out
    if not _pypi_reachable():
        pytest.skip("PyPI (pypi.org:443) is unreachable from here")
    win, mac = cw.TARGETS["win_amd64"], cw.TARGETS["macosx_12_0_arm64"]
    out = cw.resolve(["ai-edge-litert>=1.2"], win, "3.12", no_deps=True, timeout=300)
    assert out.resolves is True and "ai-edge-litert" in out.versions, out
    out = cw.resolve(["tensorflow-cpu>=2.15"], mac, "3.12", no_deps=True, timeout=300)
    assert out.resolves is False and out.not_found == "tensorflow-cpu>=2.15", out
    assert cw.without_wheels(["tensorflow-cpu>=2.15", "numpy>=1.24"], mac, "3.12", timeout=300) == [
        "tensorflow-cpu"
    ]
