"""What a browser showing the view page costs, by Chromium process, without the rest of a live run.

    python scripts/bench_view_browser.py [--fps 500] [--duration 30] [--warmup 5] [--no-images]
                                         [--js FILE] [--metrics] [--paused]

A :class:`~eyeblink.runtime.live.view.ViewSink` is fed as a live run feeds it (rows at ``--fps``, a
blink every 3 s, a face lost for 1 s every 10 s; the preview frames the synthetic face of the
loopback sender with its eye points, handed through the real
:class:`~eyeblink.runtime.live.preview.PreviewGrab` whenever the view asks for one), and a headless
system Chromium is started on the page as ``scripts/bench_lab_latency.py --browser`` starts it.
After ``--warmup`` seconds the CPU seconds of each of its processes (browser, renderer, GPU/viz,
utility) are read, again ``--duration`` seconds later, and the difference is printed as JSON (with
the view's own threads' CPU and the images the page fetched). ``--metrics`` also reads the page's
own time (scripting, layout, style) over the same span through the DevTools protocol (Playwright
attached to the browser). ``--js FILE`` serves another page script (to compare a change);
``--no-images`` never hands a frame (the page without images); ``--not-busy`` keeps the images at
their full rate (the view makes fewer while the machine's load exceeds its cores); ``--paused``
presses the page's pause key after the warm-up; ``--repo PATH`` measures the page of another
checkout of eyeblink (before and after a change).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# --repo PATH: the eyeblink checkout whose view is measured (another branch, to compare); this one
# by default
REPO = Path(
    sys.argv[sys.argv.index("--repo") + 1]
    if "--repo" in sys.argv
    else Path(__file__).resolve().parent.parent
)
sys.path.insert(0, str(REPO.resolve()))

from eyeblink import host  # noqa: E402
from eyeblink.lab.loopback import render_loop_frames  # noqa: E402
from eyeblink.runtime.live.view import ViewSink, _FileRow  # noqa: E402


def _kind(pid: int, root: int) -> str:
    """A Chromium process's role from its command line: browser, renderer, gpu-process,
    utility:NetworkService..."""
    kind = "browser" if pid == root else "child"
    for a in " ".join(host.process_cmdline(pid)).split():
        if a.startswith("--type="):
            kind = a[7:]
        elif a.startswith("--utility-sub-type="):
            kind = "utility:" + a.rsplit(".", 1)[-1]
    return kind


def chromium_cpu(root: int) -> dict[str, float]:
    """CPU seconds so far of ``root`` and its descendants, by ``pid:role``."""
    out: dict[str, float] = {}
    for pid in sorted([root, *host.descendants(root)]):
        cpu = host.process_cpu_seconds(pid)
        if cpu is not None:
            out[f"{pid}:{_kind(pid, root)}"] = cpu
    return out


def feed(view: ViewSink, fps: float, stop: threading.Event) -> None:
    """Rows at ``fps`` in batches of 10 ms, blinks, a lost face; the preview frame whenever it is
    asked for."""
    frames = render_loop_frames(100, fps=fps)
    pts = np.array(
        [[260 + 12 * i, 200 + (i % 3)] for i in range(6)]
        + [[350 + 12 * i, 200 + (i % 3)] for i in range(6)],
        np.float32,
    )
    grab = view.preview
    t0 = time.perf_counter()
    frame = 0
    blink_no = 0
    while not stop.is_set():
        now = time.perf_counter() - t0
        upto = int(now * fps)
        while frame < upto:
            t = frame / fps
            phase = t % 3.0
            closure = (
                max(0.0, math.cos((phase - 1.5) / 0.075 * math.pi / 2))
                if abs(phase - 1.5) < 0.075
                else 0.0
            )
            face = 0 if 7.0 <= t % 10.0 < 8.0 else 1
            ear = 0.3 * (1 - 0.8 * closure) + 0.005 * math.sin(frame * 0.37)
            nan = math.nan
            row = _FileRow(
                frame,
                t,
                face,
                ear if face else nan,
                ear * 1.02 if face else nan,
                0.3 if face else nan,
                *((200.0, 120.0, 440.0, 380.0) if face else (nan,) * 4),
                closure if face else nan,
                0,
                3.0,
            )
            if grab.wanted():
                grab.put(frame, frames[frame % len(frames)])
            if grab.points_wanted() == frame:
                grab.put_points(frame, pts)
            view.row(row)
            if phase < 1.6 <= phase + 1 / fps:
                blink_no += 1
                view.blink(
                    SimpleNamespace(
                        blink=blink_no,
                        kind="blink",
                        start_frame=frame - 40,
                        end_frame=frame,
                        start_s=t - 0.08,
                        end_s=t,
                        duration_ms=150.0,
                        amplitude=0.8,
                        complete=True,
                    )
                )
            frame += 1
        stop.wait(0.01)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fps", type=float, default=500.0)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--no-images", action="store_true")
    ap.add_argument("--paused", action="store_true")
    ap.add_argument(
        "--not-busy",
        action="store_true",
        help="the view's images at their full rate whatever the machine's load (30 a second)",
    )
    ap.add_argument(
        "--image-hz",
        type=float,
        default=None,
        help="the view's most images a second (default: the view's own)",
    )
    ap.add_argument("--metrics", action="store_true")
    ap.add_argument("--js", type=Path)
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--repo", type=Path, help="the eyeblink checkout whose page is measured (default: this one)"
    )
    ap.add_argument(
        "--profile", action="store_true", help="the page's JavaScript self time by function"
    )
    ap.add_argument(
        "--trace", type=Path, help="a Chromium trace of the measured span (DevTools' timeline)"
    )
    args = ap.parse_args()

    view = ViewSink(**({"max_image_hz": args.image_hz} if args.image_hz else {}))
    if args.js is not None:
        js = args.js.read_text()
        render = view._render_page
        view._render_page = lambda: render().replace(  # type: ignore[method-assign]
            (REPO / "eyeblink/runtime/live/view.js").read_text().encode(), js.encode()
        )
    if args.not_busy:
        view._busy = lambda: False  # type: ignore[method-assign]
    if args.no_images:
        view.preview.wanted = lambda: 0  # type: ignore[method-assign]
    stop = threading.Event()
    view.open(source="harness", stem="harness", mode="live", fps=args.fps, eye_model="lids")
    feeder = threading.Thread(target=feed, args=(view, args.fps, stop), daemon=True)
    feeder.start()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "needs the system Chromium"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dport = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp}",
            "--window-size=1280,1000",
        ]
        if args.metrics or args.paused or args.trace or args.profile:
            cmd.append(f"--remote-debugging-port={dport}")
        browser = subprocess.Popen(
            [*cmd, view.url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        pw = page = cdp = None
        try:
            time.sleep(args.warmup)
            if args.metrics or args.paused or args.trace or args.profile:
                from playwright.sync_api import sync_playwright

                pw = sync_playwright().start()
                b = pw.chromium.connect_over_cdp(f"http://127.0.0.1:{dport}")
                page = b.contexts[0].pages[0]
                if args.paused:
                    page.keyboard.press(" ")
                if args.trace:
                    b.start_tracing(
                        page=page,
                        path=str(args.trace),
                        categories=[
                            "devtools.timeline",
                            "disabled-by-default-devtools.timeline",
                            "cc",
                            "viz",
                            "gpu",
                            "toplevel",
                            "blink",
                            "renderer.scheduler",
                            "v8",
                        ],
                    )
                if args.metrics or args.profile:
                    cdp = page.context.new_cdp_session(page)
                if args.profile:
                    cdp.send("Profiler.enable")
                    cdp.send("Profiler.start")
                if args.metrics:
                    cdp.send("Performance.enable")
                    m0 = {
                        m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                    }
            counts = "JSON.stringify(window.eyeblinkView ? window.eyeblinkView.counts : {})"
            k0 = json.loads(page.evaluate(counts)) if page is not None else {}
            fetched0, c0, v0 = view.images_sent, chromium_cpu(browser.pid), view.cpu_now()
            time.sleep(args.duration)
            fetched1, c1, v1 = view.images_sent, chromium_cpu(browser.pid), view.cpu_now()
            if args.trace:
                b.stop_tracing()
            if page is not None:
                k1 = json.loads(page.evaluate(counts))
                page_draws = {k: k1[k] - k0.get(k, 0) for k in k1}
            res: dict = {
                "label": args.label,
                "repo": str(REPO),
                "view_module": sys.modules["eyeblink.runtime.live.view"].__file__,
                "fps": args.fps,
                "duration_s": args.duration,
                "images": not args.no_images,
                "js": str(args.js or ""),
                "paused": args.paused,
                "not_busy": args.not_busy,
                "max_image_hz": round(1.0 / view.image_period_s, 1),
            }
            by = {k: round(c1[k] - c0.get(k, 0.0), 2) for k in c1}
            res["chromium_cpu_s"] = round(sum(by.values()), 2)
            res["chromium_share_of_one_core"] = round(sum(by.values()) / args.duration, 3)
            res["by_process"] = by
            res["chromium_cpu_s_since_start"] = round(sum(c1.values()), 2)
            res["images_made"] = fetched1 - fetched0
            if page is not None:
                res["page_draws"] = page_draws
            res["view_threads_cpu_s"] = round(sum(v1.values()) - sum(v0.values()), 2)
            if args.profile:
                prof = cdp.send("Profiler.stop")["profile"]
                self_ms: dict[str, float] = {}
                for n in prof["nodes"]:
                    cf = n["callFrame"]
                    k = f"{cf['functionName'] or '(anon)'}:{cf['lineNumber']}"
                    self_ms[k] = self_ms.get(k, 0.0) + n.get("hitCount", 0)
                total = sum(self_ms.values()) or 1
                res["js_self_share"] = {
                    k: round(v / total, 3)
                    for k, v in sorted(self_ms.items(), key=lambda kv: -kv[1])[:15]
                }
            if args.metrics:
                m1 = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
                res["page_s"] = {
                    k: round(m1[k] - m0[k], 3)
                    for k in (
                        "TaskDuration",
                        "ScriptDuration",
                        "LayoutDuration",
                        "RecalcStyleDuration",
                    )
                }
                res["page_counts"] = {k: m1[k] - m0[k] for k in ("LayoutCount", "RecalcStyleCount")}
            print(json.dumps(res))
        finally:
            if pw is not None:
                with contextlib.suppress(Exception):
                    pw.stop()
            with contextlib.suppress(ProcessLookupError):
                host.kill_process_group(browser.pid, signal.SIGKILL)
            browser.wait(10)
            stop.set()
            view.close("harness done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
