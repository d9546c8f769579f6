"""Live latency: where a frame's time goes (the per-hop breakdown) and ``--priority``, through the
real CLI on the real loopback sender."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import free_port, live_to_end, start_sender

from eyeblink.runtime.live.hops import HOPS, HopRecord
from eyeblink.runtime.procs.results import RESULT_DTYPE

REPO = Path(__file__).resolve().parent.parent


def live_cli(out: Path, sender_args: list[str], *args: str, prefix: tuple[str, ...] = ()) -> str:
    port = free_port()
    sender = start_sender(port, *sender_args)
    live = subprocess.Popen(
        [
            *prefix,
            sys.executable,
            "-m",
            "eyeblink",
            "live",
            f"tcp://127.0.0.1:{port}",
            "-o",
            str(out),
            "--name",
            "cam",
            "--landmarks",
            "lids",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    return live_to_end(live, sender, timeout=180)


def test_the_hops_add_up_to_each_frames_latency() -> None:
    """The record's arithmetic on known times: per frame the hops telescope, so their means add up
    to the end-to-end mean; gap rows have no hops."""
    rows = np.zeros(4, RESULT_DTYPE)
    rows["t_decoded"] = [1.0, 1.002, 1.004, 1.006]
    rows["t_got"] = rows["t_decoded"] + 0.003
    rows["t_start"] = rows["t_got"] + [0.0, 0.0005, 0.0, 0.0]
    rows["t_end"] = rows["t_start"] + 0.0007
    rows["t_recv"] = rows["t_end"] + 0.001
    rows["dropped"][3] = True
    rec = HopRecord()
    rec.add(rows, written=1.02)
    s = rec.summary()
    assert s["frames"] == 3
    assert s["analysis"]["p50"] == pytest.approx(0.7, abs=1e-6)
    assert s["capture_to_worker"]["max"] == pytest.approx(3.0, abs=1e-6)
    total = sum(s[name]["mean"] for name, _, _ in HOPS)
    assert total == pytest.approx(s["end_to_end"]["mean"], abs=1e-3)
    assert s["end_to_end"]["max"] == pytest.approx(20.0, abs=1e-6)


def test_frames_added_one_at_a_time_give_the_figures_of_one_batch() -> None:
    """A live sink adds each frame as it writes it; the records buffer them and account for a buffer
    at a time. 3,000 frames one by one (the buffers fill and flush, a gap row among them) give
    exactly the summary of the same frames in one batch, and a latency record fed past its exact
    part, frame by frame, the percentiles and max of one fed in one go."""
    rng = np.random.default_rng(3)
    n = 3000
    rows = np.zeros(n, RESULT_DTYPE)
    rows["t_decoded"] = np.cumsum(rng.uniform(0.001, 0.003, n))
    for field, prev in (
        ("t_got", "t_decoded"),
        ("t_start", "t_got"),
        ("t_end", "t_start"),
        ("t_recv", "t_end"),
    ):
        rows[field] = rows[prev] + rng.lognormal(-7, 1, n)
    rows["dropped"][::97] = True
    written = rows["t_recv"] + rng.lognormal(-8, 1, n)
    each = HopRecord()
    for i in range(n):
        each.add(rows[i : i + 1], float(written[i]))
    ref = HopRecord()  # the same analysed frames accounted at once, each with its own written time
    ref._account(
        np.column_stack(
            [
                rows[f][~rows["dropped"]]
                for f in ("t_decoded", "t_got", "t_start", "t_end", "t_recv")
            ]
            + [written[~rows["dropped"]]]
        )
    )
    assert len(each) == int((~rows["dropped"]).sum())
    assert each.summary() == ref.summary()
    from eyeblink.runtime.procs.roles.sink import LatencyRecord

    lat = rng.lognormal(-5, 1, 5000)
    a, b = LatencyRecord(exact_frames=2000), LatencyRecord(exact_frames=2000)
    for x in lat:
        a.add(x)
    b.add(lat)
    assert len(a) == len(b) == 5000
    for q in (50, 99):
        assert a.percentile_ms(q) == b.percentile_ms(q)
    assert a.max_s == b.max_s == lat.max()
    assert np.array_equal(a.exact_ms(), b.exact_ms())


def test_a_live_runs_hops_add_up_to_its_end_to_end_latency(tmp_path: Path) -> None:
    """A real run at 200 FPS: every hop is measured (non-negative), their means add up to the
    end-to-end mean, and the end-to-end figure is the run's own latency record (the summary's
    ``latency_ms_max``)."""
    live_cli(tmp_path, ["--fps", "200", "--duration", "3"])
    summary = json.loads((tmp_path / "cam.summary.json").read_text())
    hops = summary["live"]["hops_ms"]
    frames = summary["frames"] - summary["live"]["frames_dropped"]
    assert hops["frames"] == frames > 100
    for name, _, _ in HOPS:
        assert hops[name]["p50"] >= 0 and hops[name]["mean"] >= 0, (name, hops[name])
    total = sum(hops[name]["mean"] for name, _, _ in HOPS)
    assert total == pytest.approx(hops["end_to_end"]["mean"], abs=2e-3)
    assert hops["analysis"]["p50"] > 0.05  # the networks ran: not a hop of zeros
    # the same frames, the same clock as the run's latency figures (the sink stamps both right after
    # a write)
    assert hops["end_to_end"]["max"] == pytest.approx(
        summary["timings"]["latency_ms_max"], rel=0.05, abs=2.0
    )


def test_priority_high_is_applied_to_every_process(tmp_path: Path) -> None:
    if not _may_renice():
        pytest.skip(
            "this user may not lower a nice value (neither root nor CAP_SYS_NICE nor RLIMIT_NICE)"
        )
    err = live_cli(tmp_path, ["--fps", "100", "--duration", "2"], "--priority", "high")
    summary = json.loads((tmp_path / "cam.summary.json").read_text())
    assert summary["live"]["priority"] == {"asked": "high", "applied": True, "refused": None}
    assert "--priority" not in err


@pytest.mark.skipif(
    shutil.which("setpriv") is None, reason="needs util-linux setpriv to drop CAP_SYS_NICE"
)
def test_priority_refused_by_the_os_is_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    """Without the right to raise its priority (CAP_SYS_NICE dropped, no RLIMIT_NICE): one line,
    exit 0, rows."""
    if _may_renice(without_cap=True):
        pytest.skip("this user may lower nice values even without CAP_SYS_NICE (RLIMIT_NICE)")
    prefix = ("setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice")
    err = live_cli(
        tmp_path, ["--fps", "100", "--duration", "2"], "--priority", "high", prefix=prefix
    )
    lines = [ln for ln in err.splitlines() if "--priority high" in ln]
    assert len(lines) == 1 and "refused" in lines[0] and "RLIMIT_NICE" in lines[0], err
    assert "Traceback" not in err
    summary = json.loads((tmp_path / "cam.summary.json").read_text())
    assert summary["live"]["priority"]["applied"] is False
    assert summary["frames"] > 100


def _may_renice(without_cap: bool = False) -> bool:
    code = "import os; os.setpriority(os.PRIO_PROCESS, 0, -1)"
    prefix = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"] if without_cap else []
    return (
        subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True).returncode == 0
    )


def test_frames_go_to_one_worker_while_its_networks_hold_the_rate() -> None:
    """The default deals every frame to one worker (one tracker: half the face-mesh refits of two)
    while its measured networks need at most LIVE_ONE_WORKER_LOAD of a core; past it, to all;
    --workers N is obeyed."""
    from eyeblink.runtime.choose import LIVE_ONE_WORKER_LOAD, choose_dealt_workers
    from eyeblink.runtime.costs import HostCosts

    # an AVX2-only PC: BlazeFace 1.7 ms, lids 2.1 ms with its face mesh, 0.4 ms reusing it
    costs = HostCosts(
        detect_ms=1.7, fit_ms={"lids": 2.1}, reuse_ms={"lids": 0.4}, decode_ms=0.6, host={}
    )
    kw = {"mesh_reuse_ms": 20.0, "detect_every": 10}
    n, why = choose_dealt_workers(costs, "lids", 500.0, workers=2, asked=0, **kw)
    load = 500.0 * ((2.1 + 9 * 0.4) / 10 + 0.17) / 1000.0
    assert load <= LIVE_ONE_WORKER_LOAD and n == 1 and f"~{load:.2f}" in why
    n, why = choose_dealt_workers(costs, "lids", 1000.0, workers=2, asked=0, **kw)
    assert n == 2 and "> 0.6" in why
    assert choose_dealt_workers(costs, "lids", 500.0, workers=3, asked=3, **kw)[0] == 3
    unmeasured = HostCosts(
        detect_ms=1.7, fit_ms={"lids": 2.1}, reuse_ms={"lids": 0.4}, measured=False, host={}
    )
    assert choose_dealt_workers(unmeasured, "lids", 500.0, workers=2, asked=0, **kw)[0] == 2


def test_an_explicit_worker_count_deals_to_every_worker(tmp_path: Path) -> None:
    live_cli(tmp_path, ["--fps", "100", "--duration", "2"], "--workers", "2")
    live = json.loads((tmp_path / "cam.summary.json").read_text())["live"]
    assert live["workers_dealt"] == 2 and "--workers" in live["workers_dealt_reason"]
