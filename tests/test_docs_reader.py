"""The documentation as a reader meets it, without building the site (fast): every page that uses
the example recording says how to make it first, the command that makes it writes the recording the
examples are tested on, and no page speaks the workshop's words (issue numbers, commits, who ran
what on which shared machine)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([*(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts), ROOT / "README.md"])
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```\s*$", re.M | re.S)
MAKE = "eyeblink example session.avi"

#: words of the workshop, not of the reader: each pattern (case-insensitive) with what it is
WORKSHOP_WORDS: tuple[tuple[str, str], ...] = (
    (r"\bissues?\s+#?\d+", "an issue number"),
    (r"\b(?:the|this|that) issue(?:'s)?\b|\bissue's\b", "'the issue'"),
    (r"\bitem \d+ of\b|\bissue\b.{0,20}\bitem \d+", "an issue's item"),
    (r"\bcommit\s+[0-9a-f]{7,40}\b|\bcommits? [0-9a-f]{7,40}\b", "a commit"),
    (r"\b(?:pull request|PR #?\d+)\b", "a pull request"),
    (r"\bengineers?\b", "who ran what"),
    (r"\bdevelopment (?:VM|host|machine)\b|\bdev (?:VM|host|box)\b", "the workshop's machine"),
    (r"\bshared\b[^.]{0,25}\bVM\b|\bVM\b[^.]{0,15}\bshared\b", "the workshop's shared machine"),
    (r"\bother (?:jobs|agents|engineers)\b", "who else ran what"),
    (r"\bin this session\b|\bafter this lands\b|\bbefore this work\b", "the workshop's timeline"),
)


def test_workshop_words_are_found_by_the_check() -> None:
    """The patterns catch the phrases they are for (a check that cannot fail protects nothing)."""
    caught = [
        "as in issue 30",
        "issue 16 item 3",
        "before commit 163778a",
        "the issue's bar",
        "The issue's targets",
        "while five other engineers ran their work on it",
        "shared 2-core development VM while other jobs ran",
        "2-core VM shared with other jobs",
        "no GPU in this session",
    ]
    for text in caught:
        assert _workshop_words(text), text
    for text in [
        "a 2-core Intel Xeon virtual machine",
        "each session's summary",
        "a GitHub issue tracker",
        "report an issue at the tracker",
        "000015F",
        "session.avi",
    ]:
        assert not _workshop_words(text), text


def _workshop_words(text: str) -> list[str]:
    return [
        f"{what}: {m.group(0)!r}"
        for pattern, what in WORKSHOP_WORDS
        for m in re.finditer(pattern, text, re.I)
    ]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_workshop_words_in_user_docs(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [
        f"line {text.count(chr(10), 0, text.find(hit.split(': ', 1)[1][1:-1])) + 1}: {hit}"
        for hit in _workshop_words(text)
    ]
    assert not found, f"{page.relative_to(ROOT)} speaks the workshop's words: " + "; ".join(found)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_page_says_how_to_make_session_avi_before_it_uses_it(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    uses = [
        m
        for m in FENCE.finditer(text)
        if m.group("lang") in ("bash", "python")
        and "session.avi" in m.group("body")
        and MAKE not in m.group("body")
    ]
    if not uses:
        return
    made = text.find(MAKE)
    assert 0 <= made < uses[0].start(), (
        f"{page.relative_to(ROOT)} uses session.avi (line "
        f"{text.count(chr(10), 0, uses[0].start()) + 1}) before saying "
        f"`{MAKE}` makes it"
    )


def test_the_example_command_writes_the_recording_the_docs_are_tested_on(tmp_path: Path) -> None:
    """``eyeblink example session.avi`` in an empty folder: one line naming the planted blinks; a
    second run refuses to replace the file (it may be a real recording) in one line, exit 2."""
    cmd = [sys.executable, "-m", "eyeblink", "example", "session.avi", "--duration", "1.5"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "session.avi: 1.5 s, 640x480 gray, 500 FPS, 1 blinks planted (onsets 0.7 s)"
    )
    from eyeblink.sources.files import open_source

    with open_source(tmp_path / "session.avi") as src:
        assert (src.width, src.height, src.nominal_fps) == (640, 480, 500.0)
        assert sum(1 for _ in src) == 750
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and again.stderr.strip().count("\n") == 0
    assert "session.avi exists" in again.stderr and "--overwrite" in again.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["session.avi"]  # no temporary file left


def test_the_install_page_lists_every_extra() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    page = (DOCS / "get-started" / "install.md").read_text(encoding="utf-8")
    missing = [e for e in extras if f"| `{e}` |" not in page]
    assert not missing, f"the install page's extras table lacks {missing}"


def test_every_page_installs_from_the_clone_as_the_install_page_does() -> None:
    from_index = re.compile(r"pip install (?:-q )?(?:-U )?['\"]?eyeblink\b")
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in PAGES
        for m in from_index.finditer(p.read_text())
    ]
    assert not found, found


def test_the_front_pages_say_a_human_face_is_needed() -> None:
    for page in (DOCS / "index.md", DOCS / "get-started" / "install.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert re.search(r"\bhuman\b[^.]*\bface", text, re.I), page
