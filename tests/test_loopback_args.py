"""The loopback sender's frame size (``python -m eyeblink.lab.loopback --size WxH``): a small frame
gets a face scaled to fit it; a size no face fits, or that is not WxH, is one line and exit 2, never
a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eyeblink.lab.loopback import render_loop_frames


def test_a_320x240_loop_renders_a_face_that_fits() -> None:
    frames = render_loop_frames(3, width=320, height=240)
    assert [f.shape for f in frames] == [(240, 320)] * 3


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("80x64", "face_scale must be in [80,"),
        ("320by240", "--size '320by240' is not WIDTHxHEIGHT"),
    ],
)
def test_a_wrong_size_is_one_line(size: str, message: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "eyeblink.lab.loopback", "--port", "1", "--size", size],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert (
        line.startswith("python -m eyeblink.lab.loopback") and "error:" in line and message in line
    ), line


@pytest.mark.parametrize("step", ["fast", "0", "-1/30"])
def test_a_wrong_timestamp_step_is_one_line(step: str) -> None:
    """``--timestamp-step S`` (a sender whose clock lies) takes seconds > 0, as a fraction or a
    decimal."""
    r = subprocess.run(
        [sys.executable, "-m", "eyeblink.lab.loopback", "--port", "1", f"--timestamp-step={step}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--timestamp-step" in r.stderr and "expected seconds" in r.stderr
