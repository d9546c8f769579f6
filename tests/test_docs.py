"""The documentation cannot rot: the site builds strictly, its examples run, it works offline.

* ``mkdocs build --strict`` (broken links, missing anchors, a reference table the code cannot fill).
* The generated reference pages fail the build when a CLI option, a column or a preset key has no
  description.
* Every ```bash and ```python block in docs/ runs, page by page, in order, in one fresh folder
  holding ``session.avi`` (a 4 s synthetic 500 FPS grayscale recording with three planted blinks,
  made by the pages' own ``eyeblink example session.avi``); a block preceded by ``<!-- skip: reason
  -->`` is skipped with that reason.
* The built site references no external script, style or font, and headless Chromium loads its pages
  with every request that would leave the machine sent to a local recorder that answers none: none
  arrives.
* README.md is a front page: at most 150 lines, links into the site for the tasks a newcomer asks
  about.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import kill_tree

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent

pytest.importorskip("mkdocs")
pytest.importorskip("material")
pytest.importorskip("mkdocstrings")


def _hook():
    spec = importlib.util.spec_from_file_location(
        "eyeblink_docs_reference", DOCS / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------- the
# build


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return out


def test_docs_build_strictly(site: Path) -> None:
    for page in (
        "index.html",
        "reference/cli.html",
        "reference/outputs.html",
        "reference/presets.html",
        "reference/api.html",
        "guides/conditioning.html",
        "explanation/blinks.html",
    ):
        assert (site / page).is_file(), page
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "--mesh-reuse-ms" in cli and "--on-overload" in cli and "--sync-column" in cli
    outputs = (site / "reference" / "outputs.html").read_text(encoding="utf-8")
    from eyeblink.outputs.export import FRAME_COLUMNS
    from eyeblink.signals.blinks import BLINK_COLUMNS

    for column in (*FRAME_COLUMNS, *BLINK_COLUMNS):
        assert f"<code>{column}</code>" in outputs, column


# ------------------------------------------------------------------------------ generated reference
# pages


def test_cli_option_without_help_fails_the_build() -> None:
    hook = _hook()
    parser = argparse.ArgumentParser(prog="eyeblink")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("process", help="process recordings")
    p.add_argument("--documented", help="has a description (default: %(default)s)", default=3)
    assert "has a description (default: 3)" in hook.cli_markdown(parser)
    p.add_argument("--forgotten", type=int, default=1)
    with pytest.raises(hook.PluginError, match=r"--forgotten of `eyeblink process` has no help"):
        hook.cli_markdown(parser)


def test_every_real_cli_option_is_in_the_reference() -> None:
    from eyeblink.cli import build_parser

    hook = _hook()
    text = hook.cli_markdown(build_parser())
    seen = 0

    def walk(parser: argparse.ArgumentParser) -> None:
        nonlocal seen
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                assert f"`{action.option_strings[-1]}`" in text, action.option_strings
                seen += 1

    walk(build_parser())
    assert seen > 100


def test_column_without_description_fails_the_build() -> None:
    hook = _hook()
    docs = {"frame": ("index", "the frame")}
    assert "`frame`" in hook.columns_markdown(("frame",), docs, "frames.csv")
    with pytest.raises(hook.PluginError, match=r"\['new_column'\] have no description"):
        hook.columns_markdown(("frame", "new_column"), docs, "frames.csv")
    with pytest.raises(hook.PluginError, match="columns the file does not have"):
        hook.columns_markdown((), docs, "frames.csv")


def test_the_tables_written_into_outputs_md_are_current() -> None:
    """outputs.md holds its column tables in the Markdown (it reads as it is, as the README says);
    the build generates them afresh, and they must be what the code says now."""
    hook = _hook()
    page = ROOT / "docs" / "reference" / "outputs.md"
    text = page.read_text(encoding="utf-8")
    assert "<!-- end generate -->" in text and "| 1 | `frame` |" in text
    assert hook.refresh(text, str(page)) == text, (
        "the tables in docs/reference/outputs.md are out of date: run python "
        "docs/hooks/reference.py "
        "docs/reference/outputs.md"
    )
    # a stale table is replaced at build time all the same
    stale = text.replace("| 1 | `frame` |", "| 1 | `frame_old` |")
    assert "`frame_old`" not in hook.expand(stale) and "| 1 | `frame` |" in hook.expand(stale)


def test_preset_key_without_description_fails_the_build() -> None:
    from eyeblink.config import _require

    hook = _hook()

    @dataclasses.dataclass(frozen=True)
    class Section:
        """A section."""

        window_ms: float = 200.0
        threshold: float = 0.1

        def __post_init__(self) -> None:
            for name in ("window_ms",):
                _require(getattr(self, name) > 0, f"{name} must be > 0")
            _require(0 < self.threshold < 1, "threshold must be in (0, 1)")

    text = hook.preset_markdown(
        {"s": Section}, {"s": {"window_ms": "the window", "threshold": "the threshold"}}
    )
    assert "`window_ms > 0`" in text and "`0 < threshold < 1`" in text and "`200.0`" in text
    with pytest.raises(hook.PluginError, match=r"\['threshold'\] of \[s\]"):
        hook.preset_markdown({"s": Section}, {"s": {"window_ms": "the window"}})


def test_every_summary_field_is_described(session_avi: Path, tmp_path: Path) -> None:
    import json

    from eyeblink.outputs.export import SUMMARY_FIELDS

    r = subprocess.run(
        [
            str(BIN / "eyeblink"),
            "process",
            str(session_avi),
            "-o",
            str(tmp_path),
            "--max-frames",
            "300",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "session.summary.json").read_text())
    assert set(summary) <= set(SUMMARY_FIELDS), sorted(set(summary) - set(SUMMARY_FIELDS))


# ------------------------------------------------------------------------------------- the example
# runner

FENCE = re.compile(
    r"^(?P<skip><!--\s*skip:(?P<reason>.*?)-->\s*\n)?```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```\s*$",
    re.M | re.S,
)
RUN = {"bash", "python"}


def _blocks(page: Path) -> list[tuple[str, str, int, str | None]]:
    """(language, code, line, skip reason or None) of every fenced block of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("lang")) + 1
        reason = m.group("reason").strip() if m.group("skip") else None
        out.append((m.group("lang"), m.group("body"), line, reason))
    return out


PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
RUNNABLE = [
    p for p in PAGES if any(lang in RUN and reason is None for lang, _, _, reason in _blocks(p))
]
#: pages with shell or Python examples: each is a test (skipped, with the blocks' reasons, if none
#: can run here)
WITH_CODE = [p for p in PAGES if any(lang in RUN for lang, _, _, _ in _blocks(p))]


def test_every_block_is_run_or_skipped_with_a_reason() -> None:
    for page in PAGES:
        for lang, _, line, reason in _blocks(page):
            assert lang, (
                f"{page.relative_to(ROOT)}:{line}: a fenced block needs a language (bash, python, "
                "text, ...)"
            )
            if reason is not None:
                assert reason, f"{page.relative_to(ROOT)}:{line}: <!-- skip: --> needs a reason"
                assert lang in RUN, (
                    f"{page.relative_to(ROOT)}:{line}: only bash/python blocks are skipped"
                )
    assert len(RUNNABLE) >= 10, RUNNABLE


@pytest.fixture(scope="session")
def session_avi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs' example recording: 4 s, 640x480 gray, 500 FPS, blinks at 0.7, 2.0 and 3.1 s, made
    by the command the pages give the reader, ``eyeblink example session.avi``."""
    path = tmp_path_factory.mktemp("docs-recording") / "session.avi"
    r = subprocess.run(
        [str(BIN / "eyeblink"), "example", path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return path


@pytest.mark.slow
@pytest.mark.parametrize("page", WITH_CODE, ids=[str(p.relative_to(DOCS)) for p in WITH_CODE])
def test_examples_run(page: Path, session_avi: Path, tmp_path: Path) -> None:
    """Every bash and python block of ``page``, in order, in one fresh folder holding
    session.avi."""
    skipped = [
        f"line {line}: {reason}"
        for lang, _, line, reason in _blocks(page)
        if lang in RUN and reason
    ]
    if page not in RUNNABLE:
        pytest.skip("; ".join(skipped))
    try:
        os.link(session_avi, tmp_path / "session.avi")
    except OSError:
        shutil.copy(session_avi, tmp_path / "session.avi")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "MPLBACKEND": "Agg",
        "NO_MKDOCS_2_WARNING": "1",
    }
    env.pop("PYTHONPATH", None)
    for lang, code, line, reason in _blocks(page):
        if lang not in RUN or reason is not None:
            continue
        if lang == "bash":
            cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
        else:
            script = tmp_path / f".block_{line}.py"
            script.write_text(code, encoding="utf-8")
            cmd = [sys.executable, str(script)]
        # its own process group: whatever the block leaves behind (a sender in the background) is
        # ended with it
        proc = subprocess.Popen(
            cmd,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            out, err = proc.communicate()
            pytest.fail(
                f"{page.relative_to(ROOT)}:{line}: {lang} block still running after 300 s\n{code}\n"
                f"{err[-2000:]}"
            )
        finally:
            kill_tree(proc)
        assert proc.returncode == 0, (
            f"{page.relative_to(ROOT)}:{line}: {lang} block failed with exit status "
            f"{proc.returncode}\n{code}\n--- stdout\n{out[-2000:]}\n--- stderr\n"
            f"{err[-4000:]}"
        )


# ------------------------------------------------------------------------------------------ offline
# site

EXTERNAL = re.compile(
    r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*["']((?:https?:)?//[^"']+)""",
    re.I,
)
CSS_URL = re.compile(r"""(?:@import\s+|url\()\s*["']?((?:https?:)?//[^"')\s]+)""", re.I)


def test_site_references_nothing_external(site: Path) -> None:
    bad = []
    for page in site.rglob("*.html"):
        for m in EXTERNAL.finditer(page.read_text(encoding="utf-8")):
            tag = page.read_text(encoding="utf-8")[max(0, m.start()) : m.start() + 12]
            if not tag.lower().startswith("<a "):
                bad.append((str(page.relative_to(site)), m.group(1)))
    for css in site.rglob("*.css"):
        bad += [
            (str(css.relative_to(site)), u)
            for u in CSS_URL.findall(css.read_text(encoding="utf-8"))
        ]
    assert not bad, bad[:20]
    # search works from file:// (offline plugin)
    assert (site / "search" / "search_index.js").is_file()


LOCAL = re.compile(
    r"""<(?:script|link|img|source)\b[^>]*\b(?:src|href)\s*=\s*["'](?![a-z]+:|//|#)([^"'?#]+)""",
    re.I,
)


def test_every_local_resource_of_the_site_exists(site: Path) -> None:
    """What the pages load from the site itself (scripts, styles, images) is there: no failed
    request at view time."""
    missing = []
    for page in site.rglob("*.html"):
        for ref in LOCAL.findall(page.read_text(encoding="utf-8")):
            # root-absolute only on 404.html, which a web server serves from the site's root
            target = site / ref.lstrip("/") if ref.startswith("/") else page.parent / ref
            if not target.resolve().is_file():
                missing.append((str(page.relative_to(site)), ref))
    assert not missing, missing[:20]


#: Hosts of the requests headless Chromium makes on its own (network time, component updates,
#: sign-in, safe browsing: Google's services), never a page's. Google's font hosts are a page's (the
#: theme's default fonts).
BROWSER_OWN = (".google.com", ".googleapis.com", ".gvt1.com")
PAGE_HOSTS = ("fonts.googleapis.com", "fonts.gstatic.com")


def _host(request_line: str) -> str:
    """The host a proxied request line asks for: ``CONNECT host:443 …`` or ``GET http://host/path
    …``."""
    target = request_line.split(" ")[1] if " " in request_line else request_line
    target = target.split("://", 1)[-1]
    return target.split("/", 1)[0].rsplit(":", 1)[0].lower()


class _Recorder:
    """A local 'proxy' that records every request sent to it and answers none: the network,
    unreachable."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            with contextlib.suppress(OSError):
                line = conn.recv(4096).split(b"\r\n")[0].decode("latin-1")
                if line:  # a connection the browser opened ahead and closed unused sent no request
                    self.requests.append(line)
            conn.close()

    def page_requests(self) -> list[str]:
        out = []
        for r in self.requests:
            host = _host(r)
            if host in PAGE_HOSTS or not host.endswith(BROWSER_OWN):
                out.append(r)
        return out


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    pytest.skip("headless chromium is not installed")


def _load_offline(browser: str, recorder: _Recorder, url: str, profile: Path) -> str:
    """The DOM of ``url`` after 5 s of (virtual) time, every outside request going to
    ``recorder``."""
    r = subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            f"--proxy-server=http://127.0.0.1:{recorder.port}",
            "--proxy-bypass-list=<-loopback>",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-client-side-phishing-detection",
            "--disable-domain-reliability",
            "--no-pings",
            "--disable-features=Translate,OptimizationHints,MediaRouter,NetworkTimeServiceQuerying",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.slow
def test_site_loads_offline_in_chromium(site: Path, tmp_path: Path) -> None:
    browser = _chromium()
    recorder = _Recorder()
    try:
        for page, expect in (
            ("index.html", "What do you want to do?"),
            ("guides/conditioning.html", "The trials file"),
            ("reference/cli.html", "--detect-every"),
            ("reference/outputs.html?q=closure", "matching document"),
        ):
            dom = _load_offline(
                browser, recorder, (site / page).as_uri().replace("%3F", "?"), tmp_path / "profile"
            )
            # rendered, and (last page) the offline search answered
            assert expect in dom, (page, dom[:500])
    finally:
        recorder.sock.close()
    assert recorder.page_requests() == [], recorder.page_requests()


@pytest.mark.slow
def test_offline_check_sees_a_page_that_needs_the_network(tmp_path: Path) -> None:
    """The check above can fail: a page with a CDN script and Google Fonts is caught."""
    browser = _chromium()
    page = tmp_path / "cdn.html"
    page.write_text(
        '<html><head><script src="https://cdn.example.org/lib.js"></script>'
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto"></head>'
        "<body><h1>needs the network</h1></body></html>",
        encoding="utf-8",
    )
    recorder = _Recorder()
    try:
        assert "needs the network" in _load_offline(
            browser, recorder, page.as_uri(), tmp_path / "profile"
        )
    finally:
        recorder.sock.close()
    hosts = {_host(r) for r in recorder.page_requests()}
    assert {"cdn.example.org", "fonts.googleapis.com"} <= hosts, recorder.requests


@pytest.mark.slow
def test_mkdocs_serve_works_offline() -> None:
    """``mkdocs serve`` (what a contributor runs after ``pip install -e ".[docs]"``) builds and
    serves the site."""
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "--no-livereload", "-a", f"127.0.0.1:{port}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    try:
        # 127.0.0.1 direct, whatever the env
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + 240
        page = ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with opener.open(f"http://127.0.0.1:{port}/reference/outputs.html", timeout=5) as r:
                    page = r.read().decode("utf-8")
                break
            except OSError:
                time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert "ear_left" in page and "Output files and columns" in page
    finally:
        kill_tree(proc)
        proc.wait(timeout=30)


# ------------------------------------------------------------------------------------------------
# README


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_is_a_front_page_linking_into_the_site() -> None:
    text = _readme()
    assert len(text.splitlines()) <= 150
    links = re.findall(r"\]\((docs/[^)#\s]+)(#[^)\s]+)?\)", text)
    assert links, "README links into docs/"
    for path, _anchor in links:
        assert (ROOT / path).is_file(), path
    # a newcomer's questions, one click from the front page
    for target in (
        "docs/guides/conditioning.md",
        "docs/guides/live.md",
        "docs/reference/outputs.md#framescsv",
        "docs/explanation/blinks.md#closure-fec",
        "docs/guides/eye-models.md",
    ):
        assert f"({target})" in text, target
    image = re.search(r"!\[[^\]]*\]\((docs/assets/[^)]+\.png)\)", text)
    assert image and (ROOT / image.group(1)).stat().st_size > 10_000


def test_anchors_the_readme_uses_exist(site: Path) -> None:
    for path, anchor in re.findall(r"\]\(docs/([^)#\s]+)\.md(#[^)\s]+)\)", _readme()):
        html = (site / f"{path}.html").read_text(encoding="utf-8")
        assert f'id="{anchor[1:]}"' in html, (path, anchor)


def test_docs_state_the_landmark_model_terms() -> None:
    """Moved from test_readme: the dlib models' non-commercial terms are stated where the models
    are listed."""
    text = (DOCS / "explanation" / "models.md").read_text(encoding="utf-8")
    assert "iBUG 300-W" in text and "commercial" in text
