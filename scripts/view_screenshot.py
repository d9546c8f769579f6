"""The live guide's screenshot of the browser view (``docs/assets/live-view.png``), retaken from a
real session.

    python scripts/view_screenshot.py [--out docs/assets/live-view.png] [--theme light]

The project's loopback sender streams its rendered face (100 FPS, a 150 ms blink a second) to
``eyeblink live --view`` (eye model lids); the page is opened in the system Chromium (Playwright, no
browser download), left to fill ten seconds of trace, and photographed at 1200x880.
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "assets" / "live-view.png"))
    ap.add_argument("--theme", default="light", choices=("light", "dark"))
    ap.add_argument(
        "--seconds", type=float, default=12.0, help="session time before the picture (default 12)"
    )
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    sender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink.lab.loopback",
            "--port",
            str(port),
            "--fps",
            "100",
            "--duration",
            str(args.seconds + 60),
            "--distinct",
            "100",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert sender.stdout is not None and sender.stdout.readline().strip() == "listening"
    with tempfile.TemporaryDirectory() as tmp:
        live = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "live",
                f"tcp://127.0.0.1:{port}",
                "-o",
                tmp,
                "--name",
                "cam",
                "--view",
                "--landmarks",
                "lids",
                "--on-overload",
                "block",
            ],
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        try:
            assert live.stderr is not None
            url = None
            for line in live.stderr:
                m = re.search(r"eyeblink: view: (http://\S+)", line)
                if m:
                    url = m.group(1)
                    break
            assert url is not None, "no view URL"
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=shutil.which("chromium"), args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1200, "height": 880})
                page.add_init_script(f"localStorage.setItem('eyeblink-view-theme', '{args.theme}')")
                page.goto(url)
                page.wait_for_selector('#conn[data-ok="1"]', timeout=120_000)
                page.wait_for_function(
                    "Number(document.getElementById('trace').dataset.newest) > 0", timeout=120_000
                )
                time.sleep(args.seconds)
                page.wait_for_selector('#frame[data-points="12"]', timeout=30_000)
                page.screenshot(path=args.out)
                browser.close()
        finally:
            live.terminate()
            live.wait(60)
            sender.kill()
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
