"""``eyeblink report``: the HTML session report, opened in a real headless Chromium.

The end-to-end test processes a rendered 500 FPS recording (one blink, one trial, a stretch without
a face) through the real CLI, writes the report through the real CLI, and loads it in Chromium
(Debian package ``chromium``): the page must draw without a console message and show the blink
count, the trace and the tables. Screenshots are saved beside the report (the test prints their
paths). A 600,000-frame session (20 min at 500 FPS, generated with numpy) checks the file size.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import CHROMIUM, needs_chromium, run_cli

from eyeblink.outputs.export import FRAME_COLUMNS
from eyeblink.outputs.report import MISSING, pyramid, quantize, split_stem
from eyeblink.signals.blinks import BLINK_COLUMNS


def chromium(html: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            *args,
            html.resolve().as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def page_messages(stderr: str, html: Path) -> list[str]:
    """The page's own console messages and uncaught errors (Chromium's start-up chatter is left
    out)."""
    return [
        ln
        for ln in stderr.splitlines()
        if ("CONSOLE" in ln and html.name in ln) or "Uncaught" in ln
    ]


def status_of(dom: str) -> dict[str, str]:
    m = re.search(r'<div id="status"([^>]*)>', dom)
    assert m, "the page has no #status element"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


# ------------------------------------------------------------------------------------------
# encoding units


def test_quantize_round_trips_within_a_step_and_keeps_nan() -> None:
    x = np.array([0.31, np.nan, 0.05, 0.4, -0.02])
    lo, step, codes = quantize(x)
    back = np.where(codes == MISSING, np.nan, lo + codes * step)
    np.testing.assert_allclose(back[[0, 2, 3, 4]], x[[0, 2, 3, 4]], atol=step)
    assert codes[1] == MISSING and step < 1e-5


def test_pyramid_is_the_min_max_of_each_bucket() -> None:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 60000, 100_000).astype(np.uint16)
    # a stretch without a face: ignored, and an all-missing bucket stays missing
    codes[1000:1100] = MISSING
    levels = pyramid(codes)
    assert [lv["bucket"] for lv in levels][:3] == [16, 64, 256]
    import base64

    for lv in levels[:2]:
        b = lv["bucket"]
        mn = np.frombuffer(base64.b64decode(lv["min"]), "<u2")
        mx = np.frombuffer(base64.b64decode(lv["max"]), "<u2")
        for j in (0, 7, 1000 // b + 1, len(mn) - 1):
            chunk = codes[j * b : (j + 1) * b]
            ok = chunk[chunk != MISSING]
            if ok.size:
                assert mn[j] == ok.min() and mx[j] == ok.max()
            else:
                assert mn[j] == MISSING and mx[j] == MISSING


@pytest.mark.parametrize(
    ("arg", "stem"),
    [
        ("out/s1", "s1"),
        ("out/s1.summary.json", "s1"),
        ("out/s1.frames.csv", "s1"),
        ("out/a.b", "a.b"),
    ],
)
def test_the_session_argument(arg: str, stem: str) -> None:
    assert split_stem(arg) == (Path("out"), stem)


def test_missing_outputs_are_one_clear_line(tmp_path: Path) -> None:
    proc = run_cli("report", tmp_path / "nothing")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("eyeblink: error: no eyeblink outputs for"), proc.stderr


# ------------------------------------------------------------------------------------------ end to
# end


@pytest.fixture(scope="module")
def processed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rendered 500 FPS recording (1.6 s, one blink, 40 frames without a face, 2 frames dropped)
    and one trial, processed by the real CLI; returns OUTDIR/<stem>."""
    import av

    from eyeblink.lab.synth import BlinkSpec, SynthConfig, write_recording

    d = tmp_path_factory.mktemp("report")
    raw = d / "raw.avi"
    write_recording(
        raw,
        SynthConfig(
            duration_s=1.6,
            mjpeg_qscale=4,
            seed=1,
            dropped_frames=(650, 651),
            blinks=(BlinkSpec(onset_s=0.8, closing_ms=70, closed_ms=30, opening_ms=140),),
        ),
    )
    video = d / "subject.avi"
    # the subject looks away for 40 frames
    with av.open(str(raw)) as src, av.open(str(video), "w") as dst:
        stream = dst.add_stream("mjpeg", rate=500)
        stream.width, stream.height, stream.pix_fmt = 640, 480, "yuvj420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, 500)
        for f in src.decode(video=0):
            img = f.to_ndarray(format="gray")
            if 200 <= f.pts < 240:
                img[:] = int(np.median(img[:20, :20]))
            out = av.VideoFrame.from_ndarray(img, format="gray").reformat(format="yuvj420p")
            out.pts, out.time_base = f.pts, Fraction(1, 500)
            for p in stream.encode(out):
                dst.mux(p)
        for p in stream.encode():
            dst.mux(p)
    trials = d / "trials.csv"
    trials.write_text("trial,cs_onset_s,us_onset_s,cs_type,us_type\n1,0.55,0.8,tone,puff\n")
    out = d / "out"
    proc = run_cli(
        "process",
        video,
        "-o",
        out,
        "--workers",
        "1",
        "--no-progress",
        "--trials",
        trials,
        "--report",
    )
    assert proc.returncode == 0, proc.stderr
    # process --report
    assert (out / "subject.report.html").is_file() and "subject: report " in proc.stdout
    return out / "subject"


@pytest.mark.slow
def test_report_of_a_processed_recording(processed: Path) -> None:
    proc = run_cli("report", processed)
    assert proc.returncode == 0, proc.stderr
    html = processed.parent / "subject.report.html"
    assert html.is_file() and f"report: {html}" in proc.stdout
    text = html.read_text(encoding="utf-8")
    # nothing to fetch
    assert "<script src" not in text and "http://" not in text and "https://" not in text
    data = json.loads(
        re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
        .group(1)
        .replace("<\\/", "</")
    )
    with processed.with_suffix(".blinks.csv").open(newline="") as fh:
        blinks = list(csv.DictReader(fh))
    assert len(blinks) == 1 and len(data["blinks"]) == 1
    assert data["frames"] == 798 and len(data["trials"]) == 1
    assert data["noFace"] and data["noFace"][0][0] == pytest.approx(0.4, abs=0.03)  # frames 200-239
    assert [g[2] for g in data["gaps"]] == [2.0]  # the two dropped frames
    assert {s["name"] for s in data["series"]} == {"ear_left", "ear_right", "closure"}


@pytest.mark.slow
def test_blink_crops_are_the_blinks_frames(processed: Path, tmp_path: Path) -> None:
    """--report keeps both eyes at the blink's onset, peak and offset; the eye is shut at the peak,
    open around it; the multiprocess pipeline keeps its blinks' frames too."""
    from eyeblink.outputs.crops import load_crops

    crops = load_crops(processed.with_suffix(".crops.npz"))
    with processed.with_suffix(".blinks.csv").open(newline="") as fh:
        (blink,) = list(csv.DictReader(fh))
    wanted = [int(blink[k]) for k in ("start_frame", "peak_frame", "end_frame")]
    assert sorted(crops) == wanted  # the face is in view at all three: the exact frames
    # the eye is shut at the peak and open at both ends, by the eye model's own openness at the kept
    # frames (the default model's drawn points come from its face mesh, reused over 20 ms: they need
    # not follow the lid)
    with processed.with_suffix(".frames.csv").open(newline="") as fh:
        opening = {
            int(r["frame"]): float(r["ear"])
            for r in csv.DictReader(fh)
            if int(r["frame"]) in wanted
        }
    ears = [opening[f] for f in wanted]
    assert ears[1] < 0.6 * min(ears[0], ears[2]), ears
    for strip, pts in crops.values():
        # a picture, not a border
        assert strip.shape == (40, 120) and strip.dtype == np.uint8 and strip.std() > 10
        assert ((pts >= 0) & (pts < (120, 40))).all()  # the eye points are inside it
        assert pts[:6, 0].mean() < pts[6:, 0].mean()  # subject's right eye on the image left
    par = tmp_path / "par"
    proc = run_cli(
        "process",
        processed.parent.parent / "subject.avi",
        "-o",
        par,
        "--workers",
        "2",
        "--no-progress",
        "--report",
    )
    assert proc.returncode == 0, proc.stderr
    got = load_crops(par / "subject.crops.npz")
    # its keyframes differ: its own blink frames
    with (par / "subject.blinks.csv").open(newline="") as fh:
        (pblink,) = list(csv.DictReader(fh))
    assert sorted(got) == [int(pblink[k]) for k in ("start_frame", "peak_frame", "end_frame")]
    for f in set(got) & set(crops):  # the same frame, fitted in another process: the same picture
        assert np.abs(got[f][0].astype(int) - crops[f][0]).mean() < 3.0
    data = json.loads(
        re.search(
            r'<script type="application/json" id="report-data">(.*?)</script>',
            (par / "subject.report.html").read_text(encoding="utf-8"),
            re.S,
        )
        .group(1)
        .replace("<\\/", "</")
    )
    assert len(data["crops"]["1"]) == 3 and all(
        u.startswith("data:image/jpeg;base64,") for u in data["crops"]["1"]
    )


def test_eye_strip_maps_the_points_into_its_pixels() -> None:
    """Bright dots drawn at 12 eye points of a tilted face come out at the strip points eye_strip
    returns."""
    from eyeblink.landmarks.eyes import STRIP_SHAPE, eye_strip

    rng = np.random.default_rng(3)
    gray = (rng.random((480, 640)) * 40).astype(np.uint8)
    ang = np.deg2rad(12)
    rot = np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
    eye = np.array([[-18, 0], [-8, -6], [8, -6], [18, 0], [8, 6], [-8, 6]], float)
    pts = np.concatenate([eye + np.array([-45, 0]), eye + np.array([45, 0])]) @ rot.T + (300, 220)
    for x, y in np.round(pts).astype(int):
        gray[y - 1 : y + 2, x - 1 : x + 2] = 255
    strip, sp = eye_strip(gray, pts)
    assert strip.shape == STRIP_SHAPE and sp.shape == (12, 2)
    for u, v in np.round(sp).astype(int):
        assert strip[v, u] > 150, (u, v)
    assert np.ptp(sp[[0, 3, 6, 9], 1]) < 1.0  # upright: the eye corners on one row
    # 2 IODs wide
    assert abs(np.linalg.norm(sp[:6].mean(0) - sp[6:].mean(0)) - STRIP_SHAPE[1] / 2.0) < 0.5


def test_blink_crops_window_nearest_frame_and_file(tmp_path: Path) -> None:
    from eyeblink.outputs.crops import BlinkCrops, load_crops, render_blink_crops

    class Ev:  # the three fields BlinkCrops reads of a BlinkEvent
        def __init__(self, a: int, p: int, z: int) -> None:
            self.start_frame, self.peak_frame, self.end_frame = a, p, z

    keeper = BlinkCrops(window=50)
    pts = np.tile(np.array([[20.0, 20.0]], np.float32), (12, 1))
    for i in range(200):
        if i != 120:  # no face at frame 120: the nearest frame stands in
            keeper.add(i, np.full((40, 120), i % 256, np.uint8), pts)
        if i == 145:  # reported a little after its offset, as the detector does
            keeper.blink(Ev(100, 120, 140))  # type: ignore[arg-type]
    keeper.add(200, None, None)
    keeper.blink(Ev(10, 12, 14))  # type: ignore[arg-type]  # long gone from the window
    path = keeper.save(tmp_path / "s.crops.npz")
    assert path is not None
    crops = load_crops(path)
    assert sorted(crops) == [100, 119, 140] and crops[119][0][0, 0] == 119
    uris = render_blink_crops(
        crops,
        [
            {"blink": "1", "start_frame": "100", "peak_frame": "120", "end_frame": "140"},
            {"blink": "2", "start_frame": "10", "peak_frame": "12", "end_frame": "14"},
        ],
    )
    assert list(uris) == [1] and len(uris[1]) == 3
    (tmp_path / "bad.crops.npz").write_bytes(b"not a zip")
    assert load_crops(tmp_path / "bad.crops.npz") == {} and load_crops(tmp_path / "none.npz") == {}
    assert BlinkCrops().save(tmp_path / "empty.crops.npz") is None


@pytest.mark.slow
@needs_chromium
def test_report_renders_in_chromium(processed: Path) -> None:
    html = processed.parent / "subject.report.html"
    if not html.is_file():
        assert run_cli("report", processed).returncode == 0
    proc = chromium(html, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert page_messages(proc.stderr, html) == []
    dom = proc.stdout
    st = status_of(dom)
    assert st.get("data-ok") == "1", st
    assert st["data-frames"] == "798" and st["data-blinks"] == "1" and st["data-blink-rows"] == "1"
    assert re.search(r'<span id="blink-count">1</span>', dom)
    assert '<canvas id="trace"' in dom and '<canvas id="overview"' in dom
    assert len(re.findall(r'<tr data-row="\d+"', dom)) == 2  # one blink row, one trial row
    # the crops cell
    assert len(re.findall(r'<td class="crops text"><img alt="(?:onset|peak|offset)"', dom)) == 1
    assert len(re.findall(r'<img alt="(?:onset|peak|offset)"', dom)) == 3
    shots = []
    for fragment, name in (
        ("", "report.png"),
        ("#blink=1", "report-blink1.png"),
        ("#trial=1", "report-trial1.png"),
    ):
        shot = html.parent / name
        proc = chromium(html, f"--screenshot={shot}", "--window-size=1400,1300", fragment=fragment)
        assert proc.returncode == 0 and shot.stat().st_size > 20_000, proc.stderr[-2000:]
        assert page_messages(proc.stderr, html) == []
        shots.append(str(shot))
    print("screenshots:", *shots)


# ------------------------------------------------------------------------------------------ 600,000
# frames


def write_long_session(outdir: Path, stem: str, n: int = 600_000, fps: float = 500.0) -> None:
    """A 20-minute 500 FPS session's output files, with blinks, a face lost now and then and
    dropped frames."""
    rng = np.random.default_rng(7)
    t = np.arange(n) / fps
    t = np.delete(np.concatenate([t, np.arange(n, n + 50) / fps]), rng.choice(n, 50, replace=False))
    onsets = np.sort(rng.uniform(1, t[-1] - 1, 300))
    closure = np.zeros(n)
    for o in onsets:
        closure += np.clip(1 - np.abs(t - o - 0.1) / 0.1, 0, None)
    base = 0.3 + 0.01 * np.sin(t / 30)
    ear_l = base * (1 - 0.75 * closure) + rng.normal(0, 0.006, n)
    ear_r = base * (1 - 0.72 * closure) + rng.normal(0, 0.006, n)
    face = np.ones(n, dtype=bool)
    for a in rng.choice(n - 3000, 40, replace=False):
        face[a : a + rng.integers(10, 2500)] = False
    ear_l[~face] = ear_r[~face] = np.nan
    ear = (ear_l + ear_r) / 2
    cols = {c: np.full(n, np.nan) for c in FRAME_COLUMNS}
    cols.update(
        frame=np.arange(n),
        timestamp_s=t,
        face=face.astype(float),
        ear_left=ear_l,
        ear_right=ear_r,
        ear=ear,
        baseline_ear=base,
        detected=(np.arange(n) % 10 == 0).astype(float),
        closure=closure,
    )
    cols["closure"][~face] = np.nan
    table = np.column_stack([cols[c] for c in FRAME_COLUMNS])
    with (outdir / f"{stem}.frames.csv").open("w") as fh:
        fh.write(",".join(FRAME_COLUMNS) + "\n")
        np.savetxt(fh, table, fmt="%.9g", delimiter=",")
    text = (outdir / f"{stem}.frames.csv").read_text().replace("nan", "")
    (outdir / f"{stem}.frames.csv").write_text(text)
    with (outdir / f"{stem}.blinks.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(BLINK_COLUMNS)
        for k, o in enumerate(onsets):
            row = {
                "blink": k + 1,
                "start_frame": int(o * fps),
                "end_frame": int((o + 0.2) * fps),
                "start_s": o,
                "end_s": o + 0.2,
                "duration_ms": 200,
                "peak_s": o + 0.1,
                "amplitude": 0.74,
                "complete": 1,
            }
            w.writerow([row.get(c, "") for c in BLINK_COLUMNS])
    (outdir / f"{stem}.summary.json").write_text(
        json.dumps(
            {
                "status": "ok",
                "input": "/nowhere/long.avi",
                "stem": stem,
                "frames": n,
                "frames_with_face": int(face.sum()),
                "frames_without_face": int((~face).sum()),
                "duration_s": float(t[-1] - t[0]),
                "blinks": len(onsets),
                "complete_blinks": len(onsets),
                "frame_interval_median_ms": 2.0,
                "timestamp_gaps": 50,
            }
        )
    )


@pytest.mark.slow
def test_report_of_600k_frames_stays_small(tmp_path: Path) -> None:
    write_long_session(tmp_path, "long")
    t0 = time.perf_counter()
    proc = run_cli("report", tmp_path / "long")
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    html = tmp_path / "long.report.html"
    size = html.stat().st_size
    print(
        f"600,000-frame report: {size / 1e6:.1f} MB, written in {wall:.1f} s (CLI, incl. start-up)"
    )
    assert size < 20e6
    if CHROMIUM is not None:
        t0 = time.perf_counter()
        proc = chromium(html, "--dump-dom")
        wall = time.perf_counter() - t0
        assert page_messages(proc.stderr, html) == []
        st = status_of(proc.stdout)
        assert (
            st.get("data-ok") == "1"
            and st["data-frames"] == "600000"
            and st["data-blinks"] == "300"
        ), st
        print(
            f"headless Chromium: first draw {st['data-draw-ms']} ms after navigation (page clock), "
            f"{wall:.1f} s including the browser's start"
        )
        shot = tmp_path / "long.png"
        chromium(html, f"--screenshot={shot}", "--window-size=1400,900")
        print("screenshot:", shot)


# ------------------------------------------------------------------------------------------
# --overlay


@pytest.mark.slow
def test_overlay_video_decodes_with_every_frame_of_the_range(
    processed: Path, tmp_path: Path
) -> None:
    import av

    video = tmp_path / "overlay.mp4"
    proc = run_cli(
        "report",
        processed,
        "-o",
        tmp_path / "r.html",
        "--overlay",
        video,
        "--start",
        "0.7",
        "--end",
        "1.4",
        "--fps",
        "50",
    )
    assert proc.returncode == 0, proc.stderr
    t = np.loadtxt(processed.with_suffix(".frames.csv"), delimiter=",", skiprows=1, usecols=1)
    # frames 650-651 were dropped: 349, not 351
    expected = int(((t >= 0.7 - 1e-6) & (t <= 1.4 + 1e-6)).sum())
    assert expected == 349 and f"({expected} frames)" in proc.stdout
    with av.open(str(video)) as c:
        stream = c.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(stream)]
        assert stream.codec_context.name == "h264" and stream.average_rate == 50
    assert len(frames) == expected and frames[0].shape == (480, 640, 3)
    # the face box is drawn: green or yellow pixels, which a gray recording has none of
    colored = [(np.abs(f[..., 0].astype(int) - f[..., 2]) > 80).sum() for f in frames[::50]]
    assert min(colored) > 500, colored
    # the eye points of both eyes, fitted again by the session's model: red (subject's right eye)
    # and blue (left) dots on the face, away from the EAR bars at the right edge and the text panel
    # at the top left
    for f in frames[::50]:
        face = f[100:400, 100:540].astype(int)
        red = ((face[..., 0] > 150) & (face[..., 1] < 100) & (face[..., 2] < 100)).sum()
        blue = ((face[..., 2] > 140) & (face[..., 0] < 90)).sum()
        assert red > 20 and blue > 20, (red, blue)


def test_overlay_without_the_recording_names_the_fix(processed: Path, tmp_path: Path) -> None:
    proc = run_cli(
        "report",
        processed,
        "-o",
        tmp_path / "r.html",
        "--overlay",
        tmp_path / "o.mp4",
        "--video",
        tmp_path / "gone.avi",
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "recording not found" in proc.stderr and "gone.avi" in proc.stderr
