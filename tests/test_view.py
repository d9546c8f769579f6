"""The browser view (``eyeblink live --view``): the real loopback sender, the real ``eyeblink live``
CLI, the page opened in the system Chromium through Playwright, and a real browser killed
mid-stream."""

from __future__ import annotations

import contextlib
import csv
import http.client
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    CHILD_SIGNALS,
    CHROMIUM,
    free_port,
    kill_tree,
    needs_chromium,
    needs_fork,
    start_sender,
)

from eyeblink.errors import ConfigError
from eyeblink.runtime.live.publish import LiveRow
from eyeblink.runtime.live.view import PreviewGrab, ViewSink

REPO = Path(__file__).resolve().parent.parent
#: a deterministic live run: no frame dropped or stepped down, one eye model whatever the host
#: measured
STEADY = ("--on-overload", "block", "--no-adapt", "--landmarks", "lids")


class LiveRun:
    """``eyeblink live`` on the loopback sender, its stderr read line by line (the view's URL is
    in it)."""

    def __init__(self, out: Path, sender_args: list[str], *live_args: str) -> None:
        port = free_port()
        self.sender = start_sender(port, *sender_args, distinct=100)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "live",
                f"tcp://127.0.0.1:{port}",
                "-o",
                str(out),
                "--name",
                "cam",
                *live_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            **CHILD_SIGNALS,
        )  # type: ignore[call-overload]
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def url(self, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                m = re.search(r"eyeblink: view: (http://\S+)", line)
                if m:
                    return m.group(1)
            assert self.proc.poll() is None, "".join(self.lines)
            time.sleep(0.05)
        raise AssertionError("no view URL printed:\n" + "".join(self.lines))

    def wait(self, timeout: float = 180.0) -> str:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self.proc.kill()
            self.sender.kill()
        self._reader.join(5)
        err = "".join(self.lines)
        assert self.proc.returncode == 0, err
        return err


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# ------------------------------------------------------------------------------------------ the
# page in a browser


def _wait_for(cond: Any, timeout_s: float) -> None:
    """Until ``cond()`` holds (every 50 ms), or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"not reached in {timeout_s} s"
        time.sleep(0.05)


@needs_chromium
def test_the_page_shows_the_trace_the_blinks_in_order_the_face_lost_banner_and_a_fresh_image(
    tmp_path: Path,
) -> None:
    """Two tabs on one live run: the trace advances, the image is at most 0.25 s (two of the page's
    row batches) behind the last row written, the blank stretch raises the face-lost banner (and it
    goes away), every blink of blinks.csv is listed in order, and the end of the run is said."""
    pw_api = pytest.importorskip("playwright.sync_api")
    out = tmp_path / "out"
    # 100 FPS, one 150 ms blink a second; frames 700..899 blank (2 s without a face)
    run = LiveRun(
        out,
        ["--fps", "100", "--stop-after", "1500", "--blank-at", "700", "--blank-frames", "200"],
        "--view",
        *STEADY,
    )
    url = run.url()
    assert url.startswith("http://127.0.0.1:")
    banners: list[str] = []
    image_tops: list[float] = []
    lags: list[float] = []
    try:
        with pw_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
                errors: list[str] = []
                pages = [ctx.new_page(), ctx.new_page()]
                for page in pages:
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    page.goto(url)
                    page.wait_for_selector('#conn[data-ok="1"]', timeout=60_000)
                page = pages[0]
                # polled from here: the page's policy refuses Playwright's string conditions (it
                # evaluates them)
                _wait_for(
                    lambda: int(page.locator("#trace").get_attribute("data-newest") or -1) > 50, 90
                )
                before = [
                    int(p.locator("#trace").get_attribute("data-newest") or -1) for p in pages
                ]
                page.wait_for_timeout(1000)
                after = [int(p.locator("#trace").get_attribute("data-newest") or -1) for p in pages]
                # both tabs
                assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)
                _wait_for(
                    lambda: page.locator("#image-lag").get_attribute("data-ms") is not None, 30
                )
                # until the run ends: the banner's kind and the image's lag behind the last row, ten
                # times a second
                while run.proc.poll() is None:
                    kind = page.locator("#banner").get_attribute("data-kind") or ""
                    if not banners or banners[-1] != kind:
                        banners.append(kind)
                        frame_box = page.locator("#frame").bounding_box()
                        assert frame_box is not None
                        image_tops.append(frame_box["y"])  # as each banner comes and goes
                    ms = page.locator("#image-lag").get_attribute("data-ms")
                    if ms and kind in ("", "face_lost"):
                        lags.append(float(ms))
                    if kind == "ended":
                        break
                    page.wait_for_timeout(100)
                page.wait_for_selector('#banner[data-kind="ended"]', timeout=60_000)
                points_drawn = page.locator("#frame").get_attribute("data-points")
                listed = [
                    int(x)
                    for x in page.eval_on_selector_all(
                        "#blink-list li", "els => els.map(e => e.dataset.startFrame)"
                    )
                ]
                assert errors == []
            finally:
                browser.close()
    finally:
        err = run.wait()
    # no child ends with Python's complaint about the preview's shared memory (a spawned child
    # unmaps it itself)
    assert "Exception ignored" not in err and "Traceback" not in err, err
    blinks = [int(b["start_frame"]) for b in read_csv(out / "cam.blinks.csv")]
    assert len(blinks) >= 8 and listed == blinks  # every blink, as markers, in order
    assert points_drawn == "12"  # the eye points of the last image (a frame with a face) were drawn
    assert "face_lost" in banners, banners
    assert (
        banners.index("face_lost") < len(banners) - 1
        and "" in banners[banners.index("face_lost") + 1 :]
    ), banners
    assert max(image_tops) - min(image_tops) < 0.5, image_tops  # a banner never moves the image
    print(
        f"image behind the last row written: median {np.median(lags):.0f} ms, max {max(lags):.0f} "
        "ms "
        f"({len(lags)} samples)"
    )
    assert len(lags) >= 20
    # the page gets rows in batches about 110 ms apart at this rate and the lag is read when an
    # image is drawn: it steps by a batch (0-10, 110-120 or 220-230 ms, for seconds at a time); at
    # most two batches behind
    assert float(np.median(lags)) <= 250.0, sorted(lags)
    s = json.loads((out / "cam.summary.json").read_text())
    view = s["live"]["publish"]["view"]
    assert view["tabs"] >= 2 and view["images"] > 10 and view["token"] is False


@contextlib.contextmanager
def _one_page(pw: Any, url: str, errors: list[str]) -> Any:
    """The page at ``url`` in the system Chromium (1280x1000), its script errors appended to
    ``errors``."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        yield page
    finally:
        browser.close()


@needs_chromium
def test_an_eye_region_dragged_on_the_image_reads_as_eye_roi_and_a_region_run_shows_its_region(
    tmp_path: Path,
) -> None:
    """A live run of one eye (``--eye-roi``): the page draws the run's region as its box; a
    rectangle dragged on the image reads as the ``--eye-roi`` of the frame pixels under it (the
    image is letterboxed and scaled)."""
    pw_api = pytest.importorskip("playwright.sync_api")
    out = tmp_path / "out"
    run = LiveRun(
        out,
        ["--fps", "100", "--stop-after", "600"],
        "--view",
        "--on-overload",
        "block",
        "--no-adapt",
        # measured from the first frame: no
        "--eye-roi",
        "240,166,66,44",
        "--landmarks",
        "area",
    )
    # survey of the stream's first frames, whose catch-up the page shows as a "stale" banner above
    # the image
    url = run.url()
    errors: list[str] = []
    try:
        with pw_api.sync_playwright() as pw, _one_page(pw, url, errors) as page:
            _wait_for(lambda: page.locator("#image-frame").inner_text() not in ("–", ""), 90)
            box = page.locator("#frame").bounding_box()
            assert box is not None
            # the 640x480 frame, letterboxed in the canvas
            k = min(box["width"] / 640, box["height"] / 480)
            ox, oy = (
                box["x"] + (box["width"] - 640 * k) / 2,
                box["y"] + (box["height"] - 480 * k) / 2,
            )
            want = (100, 120, 200, 150)  # frame pixels
            # dragged up-left
            page.mouse.move(ox + (want[0] + want[2]) * k, oy + (want[1] + want[3]) * k)
            page.mouse.down()
            page.mouse.move(ox + (want[0] + 60) * k, oy + (want[1] + 40) * k, steps=5)
            page.mouse.move(ox + want[0] * k, oy + want[1] * k, steps=5)
            page.mouse.up()
            got = [
                int(v) for v in (page.locator("#roi").get_attribute("data-roi") or "").split(",")
            ]
            assert all(abs(g - w) <= 1 for g, w in zip(got, want, strict=True)), got
            assert page.locator("#roi").inner_text() == "--eye-roi " + ",".join(map(str, got))
            # a click is not a region: the drawn one goes
            page.mouse.click(ox + 10 * k, oy + 10 * k)
            assert page.locator("#roi").get_attribute("data-roi") == ""
        assert errors == []
    finally:
        run.wait()
    rows = read_csv(out / "cam.frames.csv")
    assert {(r["face_x0"], r["face_y0"], r["face_x1"], r["face_y1"]) for r in rows} == {
        ("240", "166", "306", "210")
    }


@needs_chromium
def test_a_browser_killed_mid_stream_leaves_the_rows_of_a_run_without_a_view(
    tmp_path: Path,
) -> None:
    """The same stream with a view whose browser is killed (SIGKILL) mid-stream, and without a view:
    frames.csv and blinks.csv are identical, cell for cell."""
    sender = ["--fps", "100", "--stop-after", "1000"]
    run = LiveRun(tmp_path / "view", sender, "--view", *STEADY)
    url = run.url()
    browser = None
    try:
        browser = subprocess.Popen(
            [
                str(CHROMIUM),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--user-data-dir=" + str(tmp_path / "profile"),
                url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        # the run has written a few seconds of rows with the tab open
        while time.monotonic() < deadline:
            rows = tmp_path / "view" / "cam.frames.csv"
            if rows.exists() and rows.read_text().count("\n") > 400:
                break
            time.sleep(0.1)
        kill_tree(browser)
        browser.wait(10)
    finally:
        if browser is not None and browser.poll() is None:
            kill_tree(browser)
        run.wait()
    view = json.loads((tmp_path / "view" / "cam.summary.json").read_text())["live"]["publish"][
        "view"
    ]
    assert view["tabs"] >= 1  # the browser had the page open
    plain = LiveRun(tmp_path / "plain", sender, *STEADY)
    plain.wait()
    for name in ("cam.frames.csv", "cam.blinks.csv"):
        a, b = read_csv(tmp_path / "view" / name), read_csv(tmp_path / "plain" / name)
        assert len(a) == len(b) and a == b, name
    assert len(read_csv(tmp_path / "plain" / "cam.frames.csv")) == 1000


# ------------------------------------------------------------------------------------------ the
# server on its own


def _row(i: int) -> LiveRow:
    t = i / 500.0
    return LiveRow(
        i,
        t,
        1,
        0.28,
        0.27,
        0.275,
        0.28,
        0,
        0.9,
        100.0,
        80.0,
        300.0,
        300.0,
        0.0,
        0,
        time.perf_counter(),
        time.perf_counter(),
    )


def test_the_minute_of_history_costs_the_garbage_collector_nothing() -> None:
    """The page's minute of rows (30,000 at 500 FPS) is kept as plain tuples of numbers, which the
    garbage collector stops tracking: as lists they made every full collection of the session's
    process 20-30 ms longer, a pause a frame's row waited behind. The page still gets each row as an
    array."""
    import gc

    view = ViewSink(port=0)
    view.open(source="test", stem="cam")
    try:
        for i in range(2000):
            view.row(_row(i))
        deadline = time.monotonic() + 30
        while len(view._history) < 2000 and time.monotonic() < deadline:
            time.sleep(0.05)
        gc.collect()
        kept = list(view._history)
        assert len(kept) == 2000 and not any(gc.is_tracked(item) for item in kept)
        assert json.loads(json.dumps(kept[5]))[:3] == [5, 0.01, 0.28]
    finally:
        view.close()


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_loopback_by_default_and_a_token_on_any_other_address() -> None:
    view = ViewSink(port=0)
    view.open(source="test", stem="cam")
    try:
        assert view.url == f"http://127.0.0.1:{view.port}/" and view.token is None
        code, body = _get(view.url)
        assert code == 200 and b"eyeblink view" in body
        # no external resource: nothing in the page points off the machine
        assert (
            not re.search(rb"(src|href)=\"(https?:)?//", body)
            and b"@import" not in body
            and b"url(" not in body
        )
        # another site's page (DNS rebinding) cannot read it
        assert _get(view.url, host=f"evil.example:{view.port}")[0] == 403
    finally:
        view.close()
    view = ViewSink(port=0, host="0.0.0.0")
    view.open(source="test", stem="cam")
    try:
        assert view.token is not None and f"?token={view.token}" in view.url
        base = f"http://127.0.0.1:{view.port}/"
        assert _get(base)[0] == 403
        assert _get(base + "?token=wrong")[0] == 403
        assert _get(base + "events?token=x")[0] == 403
        assert _get(base + f"?token={view.token}")[0] == 200
    finally:
        view.close()


def test_view_options_that_cannot_work_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--view-host must be an IP address"):
        ViewSink(host="my laptop")
    busy = ViewSink(port=0)
    busy.open()
    try:
        with pytest.raises(ConfigError, match=f"--view-port {busy.port}: cannot listen"):
            ViewSink(port=busy.port).open()
        # a live run's view takes its port as it is made, before any model loads: the API's session
        # refuses as it is made, the CLI before its models load
        import eyeblink
        from eyeblink.runtime.live.sinks.view import ViewOutput

        with pytest.raises(ConfigError, match=f"--view-port {busy.port}: cannot listen"):
            ViewOutput(port=busy.port)
        with pytest.raises(ConfigError, match=f"--view-port {busy.port}: cannot listen"):
            eyeblink.live("tcp://127.0.0.1:9", view=True, view_port=busy.port)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "eyeblink",
                "live",
                "tcp://127.0.0.1:9",
                "-o",
                str(tmp_path),
                "--view",
                "--view-port",
                str(busy.port),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert (
            proc.stderr.strip()
            .splitlines()[-1]
            .startswith(f"eyeblink: error: --view-port {busy.port}: cannot listen")
        )
    finally:
        busy.close()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            "tcp://127.0.0.1:9",
            "-o",
            str(tmp_path),
            "--view-host",
            "not an address",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("eyeblink: error: --view-host must be an IP address")
    )


def test_a_tab_that_stops_reading_is_let_go_and_the_rows_never_wait() -> None:
    """A client that connects and never reads: the sink's calls stay one append each, the stream of
    the other tab goes on, and the stalled one is disconnected once a whole backlog waits for it."""
    view = ViewSink(port=0)
    view.open(source="test", stem="cam")
    stalled = http.client.HTTPConnection("127.0.0.1", view.port, timeout=30)
    stalled.request("GET", "/events")
    stalled.getresponse()  # the headers; the body is never read
    live = http.client.HTTPConnection("127.0.0.1", view.port, timeout=30)
    live.request("GET", "/events")
    resp = live.getresponse()
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.extend(iter(lambda: resp.read1(65536), b"")), daemon=True
    )
    reader.start()
    try:
        # a minute of rows at 500 FPS, as fast as the sink can hand them on
        for i in range(60 * 500):
            view.row(_row(i))
            if i % 250 == 0:
                time.sleep(0.05)  # the pump's time to send them
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and view._clients > 1:
            time.sleep(0.1)
        assert view._clients == 1  # the reader is still there, the stalled tab was let go
        while time.monotonic() < deadline and b"[29999," not in b"".join(got[-3:]):
            time.sleep(0.1)
        text = b"".join(got)
        # the reading tab got every row, the last one too
        assert b"[29999," in text and b"[0," in text
    finally:
        view.close()
        stalled.close()
        live.close()


@needs_fork
def test_the_preview_grab_crosses_a_fork_only_when_asked() -> None:
    grab = PreviewGrab()
    frame = np.arange(480 * 640, dtype=np.uint32).astype(np.uint8).reshape(480, 640)
    big = np.zeros((1080, 1920, 3), np.uint8)
    big[::3, ::3] = 200
    pid = os.fork()
    if pid == 0:  # the loader: serves each request once
        served = 0
        deadline = time.monotonic() + 20
        while served < 2 and time.monotonic() < deadline:
            if grab.wanted():
                grab.put(7 if not served else 8, frame if not served else big)
                served += 1
            time.sleep(0.001)
        os._exit(0)
    try:
        assert grab.take() is None  # nothing asked, nothing put
        grab.request()
        deadline = time.monotonic() + 20
        got: Any = None
        while got is None and time.monotonic() < deadline:
            got = grab.take()
            time.sleep(0.002)
        assert (
            got is not None
            and got[0] == 7
            and got[2] == (480, 640)
            and np.array_equal(got[1], frame)
        )
        assert grab.take() is None  # taken once
        grab.request()
        got = None
        while got is None and time.monotonic() < deadline:
            got = grab.take()
            time.sleep(0.002)
        assert got is not None and got[0] == 8 and got[2] == (1080, 1920)
        # every 3rd pixel, at most 640 wide
        assert got[1].shape == (360, 640, 3) and (got[1] == 200).all()
    finally:
        os.waitpid(pid, 0)
        grab.close()


# ------------------------------------------------------------------------------------------ a file:
# process --view


@needs_chromium
def test_process_view_shows_a_recording_as_it_is_processed(tmp_path: Path) -> None:
    """``eyeblink process VIDEO --view``: the page follows the file (the image, the trace, the
    blinks of blinks.csv in order) and says when every input is done; the rows are those of a run
    without a view."""
    from conftest import write_video

    from eyeblink.lab.loopback import render_loop_frames

    pw_api = pytest.importorskip("playwright.sync_api")
    loop = render_loop_frames(100, fps=100.0, width=320, height=240)
    video = write_video(
        tmp_path / "rec.mkv", [loop[i % 100] for i in range(3000)], fps=100, width=320, height=240
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(tmp_path / "view"),
            "--no-progress",
            "--view",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    m = re.match(r"eyeblink: view: (http://127\.0\.0\.1:\d+/)$", first.strip())
    assert m, first + proc.stderr.read()
    seen: list[int] = []
    try:
        with pw_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(m.group(1))
                page.wait_for_selector('#conn[data-ok="1"]', timeout=60_000)
                while True:
                    kind = page.locator("#banner").get_attribute("data-kind")
                    seen.append(int(page.locator("#trace").get_attribute("data-newest") or -1))
                    if kind == "ended":
                        break
                    page.wait_for_timeout(100)
                # the end can be announced before the trace's next redraw (at most ~15 a second)
                # shows the last rows
                for _ in range(100):
                    if seen[-1] == 2999:
                        break
                    page.wait_for_timeout(100)
                    seen.append(int(page.locator("#trace").get_attribute("data-newest") or -1))
                listed = [
                    int(x)
                    for x in page.eval_on_selector_all(
                        "#blink-list li", "els => els.map(e => e.dataset.startFrame)"
                    )
                ]
                assert page.locator("#stem").text_content() == "rec"
                assert page.locator("#image-frame").text_content() != "–"  # an image was shown
                assert errors == []
            finally:
                browser.close()
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert seen[-1] == 2999 and len(set(seen)) > 3  # the trace advanced up to the last frame
    blinks = [int(b["start_frame"]) for b in read_csv(tmp_path / "view" / "rec.blinks.csv")]
    assert len(blinks) >= 20 and listed == blinks
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "eyeblink",
            "process",
            str(video),
            "-o",
            str(tmp_path / "plain"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert plain.returncode == 0, plain.stderr
    for name in ("rec.frames.csv", "rec.blinks.csv"):
        assert read_csv(tmp_path / "view" / name) == read_csv(tmp_path / "plain" / name), name


def test_the_api_s_view_url_serves_the_session(tmp_path: Path) -> None:
    """``eyeblink.live(url, view=True)``: :attr:`LiveSession.view_url` serves the page and its
    stream of rows."""
    import eyeblink

    port = free_port()
    sender = start_sender(port, "--fps", "100", "--stop-after", "600")
    try:
        with eyeblink.live(
            f"tcp://127.0.0.1:{port}", tmp_path, name="cam", view=True, landmarks="lids"
        ) as s:
            url = s.view_url
            assert url is not None and url.startswith("http://127.0.0.1:")
            assert b"eyeblink view" in _get(url)[1]
            for item in s:
                if isinstance(item, LiveRow) and item.frame >= 200:
                    break
            conn = http.client.HTTPConnection(
                "127.0.0.1", int(url.rsplit(":", 1)[1].strip("/")), timeout=30
            )
            conn.request("GET", "/events")
            resp = conn.getresponse()
            snap = b""
            while b"\n\n" not in snap.split(b"event: snapshot", 1)[-1]:
                snap += resp.read1(1 << 20)
            data = json.loads(snap.split(b"event: snapshot\ndata: ", 1)[1].split(b"\n\n", 1)[0])
            # every row so far, from the first (the pump sends 20 times a second)
            frames = [r[0] for r in data["rows"]]
            assert (
                data["hello"]["stem"] == "cam"
                and frames == list(range(len(frames)))
                and len(frames) >= 100
            )
            # the images of an open tab come with the eye points the eye model placed on that frame
            images: list[dict] = []
            text = snap.split(b"event: snapshot", 1)[1]
            deadline = time.monotonic() + 30
            while len([i for i in images if i["points"]]) < 3 and time.monotonic() < deadline:
                text += resp.read1(1 << 16)
                blocks = text.split(b"\n\n")
                text = blocks.pop()
                new = [
                    json.loads(b.split(b"data: ", 1)[1])
                    for b in blocks
                    if b.startswith(b"event: image")
                ]
                if new:  # fetched as a browser does: the next image is made once this one was
                    assert _get(url + "frame.jpg")[0] == 200
                images += new
            conn.close()
    finally:
        sender.kill()
    assert s.result is not None and s.result.summary["live"]["publish"]["view"]["tabs"] == 1
    rows = {int(r["frame"]): r for r in read_csv(tmp_path / "cam.frames.csv")}
    shown = [i for i in images if i["points"]]
    assert len(shown) >= 3, images
    # 12 points, the subject's two eyes, inside the face box of that very frame's row
    for im in shown:
        r = rows[im["frame"]]
        pts = np.array(im["points"])
        x0, y0, x1, y1 = (float(r[k]) for k in ("face_x0", "face_y0", "face_x1", "face_y1"))
        assert pts.shape == (12, 2) and (pts[:, 0] > x0).all() and (pts[:, 0] < x1).all()
        assert (pts[:, 1] > y0).all() and (pts[:, 1] < y1).all()
        assert pts[:6, 0].mean() < pts[6:, 0].mean()  # the subject's right eye on the image's left


def _statuses(port: int, seconds: float) -> list[dict]:
    """The status messages a tab gets over ``seconds``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/events")
    resp = conn.getresponse()
    text = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text += resp.read1(1 << 16)
    conn.close()
    return [
        json.loads(block.split(b"data: ", 1)[1])
        for block in text.split(b"\n\n")
        if block.startswith(b"event: status")
    ]


def test_a_stalled_stream_and_a_lost_face_are_said_in_the_status() -> None:
    """Rows that stop coming (the stream stalled) and rows without a face for face_lost_ms: the
    status a tab gets says so (the page's banners), and says it no more once rows with a face come
    again."""
    view = ViewSink(port=0)
    view.open(source="test", stem="cam")
    try:
        for i in range(200):
            view.row(_row(i))
        time.sleep(0.3)
        st = _statuses(view.port, 1.2)  # nothing comes for 1.2 s: stalled after 0.5 s
        assert not st[0]["face_lost"] and st[0]["stalled_s"] is None
        assert (
            st[-1]["stalled_s"] is not None
            and st[-1]["stalled_s"] >= 0.5
            and st[-1]["frame"] == 199
        )
        for i in range(200, 400):  # 0.4 s of capture time without a face
            view.row(_row(i)._replace(face=0, ear_left=math.nan, ear_right=math.nan))
        st = _statuses(view.port, 0.5)
        assert st[-1]["face_lost"] and st[-1]["face_lost_frame"] == 200
        for i in range(400, 450):
            view.row(_row(i))
        st = _statuses(view.port, 0.5)
        assert not st[-1]["face_lost"] and st[-1]["frame"] == 449
    finally:
        view.close()


def test_the_api_s_process_view_serves_the_page_while_a_recording_is_processed(
    tmp_path: Path,
) -> None:
    """``eyeblink.process(video, out, view=True, view_port=P)``: the page of ``process --view`` is
    served while the recording is processed (its stream says the file's stem), then closed; the rows
    are those without a view."""
    from conftest import write_video

    import eyeblink
    from eyeblink.lab.loopback import render_loop_frames

    loop = render_loop_frames(50, fps=100.0, width=320, height=240)
    video = write_video(
        tmp_path / "rec.mkv", [loop[i % 50] for i in range(1500)], fps=100, width=320, height=240
    )
    port = free_port()
    seen: dict[str, Any] = {}

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "hello" not in seen:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/events")
                resp = conn.getresponse()
                text = b""
                # the snapshot, then the rows of the input being processed
                while b"event: rows" not in text:
                    chunk = resp.read1(1 << 16)
                    if not chunk:
                        break
                    text += chunk
                conn.close()
                for block in text.split(b"\n\n"):
                    # (after "retry:")
                    if b"event: snapshot" in block or block.startswith(b"event: reset"):
                        data = json.loads(block.split(b"data: ", 1)[1])
                        seen["hello"] = data.get("hello", data)
                    if block.startswith(b"event: rows") and "hello" in seen:
                        seen["rows"] = json.loads(block.split(b"data: ", 1)[1])
            except OSError:
                time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with pytest.raises(eyeblink.SettingsError, match="view_port must be an int"):
        eyeblink.process(video, tmp_path / "bad", view_port="8050")
    s = eyeblink.process(video, tmp_path / "view", view=True, view_port=port, workers=1)
    watcher.join(30)
    assert seen["hello"]["mode"] == "file" and seen["hello"]["stem"] == "rec" and seen["rows"], seen
    with pytest.raises(OSError):  # the page is gone with the call
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    plain = eyeblink.process(video, tmp_path / "plain", workers=1)
    assert len(s.frames) == 1500 and s.frames.equals(plain.frames) and s.blinks.equals(plain.blinks)


def test_fewer_images_while_the_machine_s_cores_are_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The share of the cores busy is read from this machine's /proc/stat over the last seconds;
    above BUSY_CORES the view makes at most BUSY_IMAGE_HZ images a second, and at most MAX_IMAGE_HZ
    otherwise."""
    from eyeblink.runtime.costs import CoresBusy
    from eyeblink.runtime.live import view as view_mod

    cores = CoresBusy()
    assert cores.share(0.0) is None  # one reading: nothing known yet
    if not cores.readable:
        pytest.skip("no /proc/stat on this machine")
    t0 = time.process_time()
    while time.process_time() - t0 < 0.1:  # some jiffies pass
        pass
    share = cores.share(CoresBusy.PERIOD_S + 1.0)
    assert share is not None and 0.0 < share <= 1.0
    assert cores.share(CoresBusy.PERIOD_S + 1.5) == share  # read again only after PERIOD_S

    def period(readings: list[tuple[int, int]]) -> float:
        """The image period of a view whose two /proc/stat readings were ``readings`` (busy, all
        jiffies)."""
        v = ViewSink()
        try:
            it = iter(readings)
            monkeypatch.setattr(CoresBusy, "_read", staticmethod(lambda: next(it)))
            v._cores = CoresBusy()
            v._cores.share(time.monotonic() - 10.0)
            return v._image_period()
        finally:
            v.close("test")

    # 10% busy
    assert period([(0, 1000), (100, 2000)]) == pytest.approx(1.0 / view_mod.MAX_IMAGE_HZ)
    # 90% busy
    assert period([(0, 1000), (900, 2000)]) == pytest.approx(1.0 / view_mod.BUSY_IMAGE_HZ)
