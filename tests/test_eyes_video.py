"""The eyes' video beside the report (``<stem>.eyes.webm``), in a real headless Chromium: the frame
on screen is the trace cursor's frame (checked on the pixels against the recording's own frames),
``,`` / ``.`` step one frame, a click on the trace seeks, and the report still opens without the
video."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_chromium, run_cli
from test_review import browser_page


def _source_crops(session: Path, frames: list[int], size: tuple[int, int]) -> dict[int, np.ndarray]:
    """The recording's own frames cut as the eyes' video cuts them (no encoding): frame -> gray
    image."""
    import csv

    from eyeblink.outputs.eyevideo import _crop, eye_boxes
    from eyeblink.sources.files import open_source

    with (session.parent / f"{session.name}.frames.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    box = np.array(
        [[float(r[c] or "nan") for c in ("face_x0", "face_y0", "face_x1", "face_y1")] for r in rows]
    )
    summary = json.loads((session.parent / f"{session.name}.summary.json").read_text())
    out = {}
    with open_source(summary["input"]) as src:
        origin, cw, ch = eye_boxes(box, src.nominal_fps)
        for f in src:
            if f.index in frames:
                out[f.index] = _crop(
                    f.image, origin[f.index, 0], origin[f.index, 1], cw, ch, *size
                ).astype(float)
            if f.index > max(frames):
                break
    return out


def _shown(page) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The eyes' video element as on screen, gray, at the video's own size (it is drawn at twice
    its size)."""
    from PIL import Image

    page.evaluate("document.getElementById('eye-video').controls = false")
    page.mouse.move(5, 5)
    png = page.locator("#eye-video").screenshot()
    img = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    h, w = img.shape[0] // 2 * 2, img.shape[1] // 2 * 2
    return img[:h, :w].reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))


@pytest.mark.slow
@needs_chromium
def test_the_frame_on_screen_is_the_cursors_frame(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = run_cli("demo", "-o", out, "--duration", "2", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    video = out / "demo.eyes.webm"
    assert video.is_file()  # the demo's report comes with the eyes' video
    import av

    with av.open(str(video)) as c:
        s = c.streams.video[0]
        assert s.codec_context.name == "vp9" and float(s.average_rate) == 500
        size = (s.width, s.height)
        assert (
            sum(1 for _ in c.decode(s))
            == len((out / "demo.frames.csv").read_text().splitlines()) - 1
        )
    summary = json.loads((out / "demo.summary.json").read_text())
    assert Path(summary["outputs"]["eyes_video"]).resolve() == video.resolve()
    with browser_page(out / "demo.report.html") as p:
        page = p.page
        st = page.locator("#status")
        page.wait_for_selector('#status[data-video="1"]', state="attached", timeout=30_000)
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("n")  # blink 1: the cursor at its onset
        onset = int(st.get_attribute("data-cursor-frame"))
        for _ in range(10):
            page.keyboard.press(".")
        shots = {}
        for k in range(6):  # the closing lid, a frame at a time
            page.keyboard.press(".")
            want = onset + 10 + k + 1
            assert st.get_attribute("data-cursor-frame") == str(want)
            page.wait_for_selector(
                f'#status[data-video-frame="{want}"]', state="attached", timeout=10_000
            )
            assert page.locator("#eye-frame").text_content().startswith(f"frame {want} ·")
            shots[want] = _shown(page)
        page.keyboard.press(",")
        assert st.get_attribute("data-cursor-frame") == str(onset + 15)
        # a click on the trace seeks: the cursor and the video to the frame under the pointer
        _, _, left, width = map(float, st.get_attribute("data-view").split(","))
        box = page.locator("#trace").bounding_box()
        page.mouse.click(box["x"] + left + width * 0.9, box["y"] + box["height"] / 2)
        clicked = int(st.get_attribute("data-cursor-frame"))
        assert clicked > onset + 16
        page.wait_for_selector(
            f'#status[data-video-frame="{clicked}"]', state="attached", timeout=10_000
        )
        assert p.errors == [] and [m for m in p.console if m.startswith("error")] == []
    frames = sorted(shots)
    src = _source_crops(out / "demo", list(range(frames[0] - 3, frames[-1] + 4)), size)
    for f, shown in shots.items():
        diffs = {g: float(np.abs(shown - src[g]).mean()) for g in src}
        assert min(diffs, key=diffs.get) == f, (f, diffs)  # the cursor's frame, not a neighbour
        assert diffs[f] < 8, diffs[f]  # VP9 at the quality used: a few grey levels


@needs_chromium
def test_the_report_opens_without_the_eyes_video(tmp_path: Path) -> None:
    import av
    from review_session import write_session

    session = write_session(tmp_path / "out", "s1")
    # linked when the page is written
    with av.open(str(session.parent / "s1.eyes.webm"), "w", format="webm") as c:
        s = c.add_stream("libvpx-vp9", rate=100)
        s.width, s.height, s.pix_fmt = 64, 32, "yuv420p"
        for i in range(5):
            frame = av.VideoFrame.from_ndarray(
                np.full((32, 64), 40 * i, np.uint8), format="gray"
            ).reformat(format="yuv420p")
            frame.pts = i
            for packet in s.encode(frame):
                c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    html_cli = run_cli("report", session)
    assert html_cli.returncode == 0, html_cli.stderr
    assert "s1.eyes.webm" in (session.parent / "s1.report.html").read_text()
    (session.parent / "s1.eyes.webm").unlink()  # ... then gone (or the page copied elsewhere)
    with browser_page(session.parent / "s1.report.html") as p:
        page = p.page
        page.wait_for_selector('#status[data-video="0"]', state="attached", timeout=10_000)
        assert page.locator("#eyes").is_hidden()
        assert "eyeblink report --eyes-video" in page.locator("#eyes-note").text_content()
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press(".")  # the cursor works without the video
        assert page.locator("#status").get_attribute("data-cursor-frame") == "0"
        assert p.errors == []


def test_no_recording_for_the_eyes_video_is_one_line(tmp_path: Path) -> None:
    from review_session import write_session

    # its summary names /recordings/s1.avi, not here
    session = write_session(tmp_path / "out", "s1")
    proc = run_cli("report", session, "--eyes-video")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        "give it with --video VIDEO" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    )
    assert not (session.parent / "s1.eyes.webm").exists()
