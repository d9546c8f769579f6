"""What the browser view's page draws, counted in the system Chromium: nothing while nothing it
shows changes.

A :class:`ViewSink` is fed rows as a live run feeds it (and the preview frames through the real
:class:`PreviewGrab`), the page is opened through Playwright with every animation-frame callback and
every canvas drawing call counted by an init script, and the counts are read over one second:
following the rows, paused while they still come, with the stream stalled, and after the run ended.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import CHROMIUM, needs_chromium

from eyeblink.lab.loopback import render_loop_frames
from eyeblink.runtime.live.view import ViewSink, _FileRow

#: counts every animation-frame callback and every drawing call of a 2D canvas (the page's own code
#: untouched)
COUNT = """
window.__n = { raf: 0, draw: 0 };
const raf = window.requestAnimationFrame.bind(window);
window.requestAnimationFrame = (cb) => raf((t) => { window.__n.raf++; cb(t); });
const P = CanvasRenderingContext2D.prototype;
for (const m of ["stroke", "fill", "fillRect", "strokeRect", "clearRect", "drawImage", "fillText"]) {
  const f = P[m];
  P[m] = function (...a) { window.__n.draw++; return f.apply(this, a); };
}
"""


def _feed(view: ViewSink, fps: float, stop: threading.Event) -> None:
    """Rows at ``fps`` with a face box, a preview frame whenever the view asks (the loader's
    part)."""
    frames = render_loop_frames(10, fps=fps)
    pts = np.array(
        [[260 + 12 * i, 200.0] for i in range(6)] + [[350 + 12 * i, 200.0] for i in range(6)],
        np.float32,
    )
    grab = view.preview
    t0 = time.perf_counter()
    frame = 0
    while not stop.is_set():
        while frame < int((time.perf_counter() - t0) * fps):
            t = frame / fps
            ear = 0.3 + 0.01 * math.sin(t * 7)
            if grab.wanted():
                grab.put(frame, frames[frame % len(frames)])
            view.row(_FileRow(frame, t, 1, ear, ear, 0.3, 200.0, 120.0, 440.0, 380.0, 0.0, 0, 3.0))
            if grab.points_wanted() == frame:
                grab.put_points(frame, pts)
            frame += 1
        stop.wait(0.01)


def _count(page: Any, seconds: float = 1.0) -> dict[str, int]:
    before = page.evaluate("({...window.__n})")
    page.wait_for_timeout(seconds * 1000)
    after = page.evaluate("({...window.__n})")
    return {k: after[k] - before[k] for k in after}


@needs_chromium
def test_the_page_draws_nothing_while_nothing_it_shows_changes(tmp_path: Path) -> None:
    pw_api = pytest.importorskip("playwright.sync_api")
    view = ViewSink()
    view.open(source="test", stem="test", mode="live", fps=200.0, eye_model="lids")
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(view, 200.0, stop), daemon=True)
    feeder.start()
    try:
        with pw_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                # bypass_csp: Playwright's polling of a condition evaluates it as a string (the
                # page's policy has no 'unsafe-eval'); it polls by a timer, not by animation frames,
                # so it adds none to the count
                page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.add_init_script(COUNT)
                page.goto(view.url)
                page.wait_for_function(
                    "Number(document.getElementById('trace').dataset.newest) > 400",
                    timeout=60_000,
                    polling=100,
                )
                page.wait_for_selector('#frame[data-points="12"]', state="attached", timeout=30_000)
                live = _count(page)
                # the counters see the page drawing
                assert live["draw"] > 0 and live["raf"] > 0, live
                # an animation frame for what changed together: the trace (10 a second) in the
                # images' frames
                assert live["raf"] <= 40, live
                page.keyboard.press(" ")  # paused: rows still come, the status still changes
                page.wait_for_timeout(300)
                paused = _count(page)
                assert paused["draw"] == 0, paused
                assert paused["raf"] <= 4, paused  # the status' text, twice a second
                page.keyboard.press(" ")
                page.wait_for_timeout(500)
                stop.set()  # the stream stalls: no row, no image
                feeder.join(5)
                page.wait_for_selector('#banner[data-kind="stalled"]', timeout=10_000)
                stalled = _count(page)
                assert stalled["draw"] == 0 and stalled["raf"] <= 4, stalled
                view.close("test over")
                page.wait_for_selector('#banner[data-kind="ended"]', timeout=10_000)
                page.wait_for_timeout(300)
                ended = _count(page)
                assert ended == {"raf": 0, "draw": 0}, ended
                assert errors == []
            finally:
                browser.close()
    finally:
        stop.set()
        view.close("test over")
