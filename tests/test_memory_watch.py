"""The live run's memory watch (:mod:`eyeblink.runtime.live.memory`): its figures, the one-time
growth warning, the NUT hint, and real ``/proc`` reads. A live run's own figures are checked in
``tests/test_live.py``; the growth of a NUT stream sent with syncpoints against one sent without,
through a real live run, in ``tests/test_live.py`` too."""

from __future__ import annotations

import os

import pytest

from eyeblink.runtime.live.memory import NUT_HINT, MemoryWatch, rss_bytes

MIB = 2**20


def feed(watch: MemoryWatch, rss: dict[str, list[float]], every: float = 10.0) -> list[str]:
    """Sample ``watch`` once per ``every`` s with the given RSS (MiB) per role; the warnings it
    returned."""
    roles = {r: i + 100 for i, r in enumerate(rss)}
    pid_role = {v: k for k, v in roles.items()}
    step = {"i": 0}
    watch.processes = lambda: roles
    watch.read = lambda pid: int(rss[pid_role[pid]][step["i"]] * MIB)
    out = []
    for i in range(len(next(iter(rss.values())))):
        step["i"] = i
        w = watch.sample(1000.0 + i * every)
        if w is not None:
            out.append(w)
        assert watch.sample(1000.0 + i * every + every / 2) is None  # between samples: nothing read
    return out


def test_flat_run_gives_figures_and_no_warning() -> None:
    w = MemoryWatch(dict)
    warnings = feed(
        w, {"sink": [250.0] * 121, "loader": [200.0] * 121, "worker-0": [300.0, *([310.0] * 120)]}
    )
    assert warnings == []
    s = w.summary()
    assert s["samples"] == 121 and s["reference_s"] == 120.0
    assert s["rss_mib_reference"] == s["rss_mib_last"] == 760.0
    assert s["rss_mib_max"] == 760.0 and s["growth_ratio"] == 0.0
    assert s["rss_mib_by_process"] == {"loader": 200.0, "sink": 250.0, "worker-0": 310.0}


def test_start_up_growth_before_minute_2_is_not_a_leak() -> None:
    # models load and the ring faults in during the first minute: that growth is before the
    # reference
    grow = [100.0 + 5 * i for i in range(12)] + [160.0] * 60
    assert feed(MemoryWatch(dict), {"sink": [250.0] * 72, "loader": grow}) == []


def test_a_growing_loader_warns_once_with_its_rate_and_the_nut_hint() -> None:
    hint_roles = []

    def hint(role: str) -> str | None:
        hint_roles.append(role)
        return NUT_HINT if role == "loader" else None

    w = MemoryWatch(dict, hint=hint)
    n = 6 * 25  # 25 minutes of samples every 10 s
    loader = [200.0 + 6.0 * i / 6 for i in range(n)]  # +6 MiB a minute
    warnings = feed(w, {"sink": [250.0] * n, "loader": loader, "worker-0": [300.0] * n})
    assert len(warnings) == 1  # once, not once a sample
    (msg,) = warnings
    assert "\n" not in msg and msg.startswith("memory grew ")
    assert "in the loader (+6.0 MiB a minute)" in msg and "-syncpoints none" in msg
    assert hint_roles == ["loader"]
    # it fired when the growth first passed 10% of the minute-2 total (and 32 MiB): 750 -> 825 MiB
    # at minute 2 + 12.5
    ref = 250 + 212 + 300
    assert ref * 0.10 < float(msg.split()[2]) <= ref * 0.10 + 1.0
    s = w.summary()
    assert s["growth_ratio"] > 0.15 and s["rss_mib_by_process"]["loader"] > 340


def test_small_runs_need_32_mib_and_other_processes_get_no_nut_hint() -> None:
    n = 6 * 20
    # a 100 MiB run growing 20% (20 MiB): under the 32 MiB floor
    assert feed(MemoryWatch(dict), {"sink": [100.0 + 0.2 * i * 100 / n for i in range(n)]}) == []
    w = MemoryWatch(dict, hint=lambda role: NUT_HINT if role == "loader" else None)
    warnings = feed(w, {"sink": [200.0 + i for i in range(n)], "loader": [200.0] * n})
    assert len(warnings) == 1 and "in the sink" in warnings[0] and "syncpoints" not in warnings[0]
    assert "report it" in warnings[0]


def test_processes_that_end_or_cannot_be_read_are_left_out() -> None:
    w = MemoryWatch(lambda: {"sink": os.getpid(), "gone": 2**22 + 12345})
    assert w.sample(0.0) is None
    assert set(w.summary()["rss_mib_by_process"]) == {"sink"}
    empty = MemoryWatch(lambda: {"gone": 2**22 + 12345})
    assert empty.sample(0.0) is None and empty.summary()["samples"] == 0
    assert empty.summary()["rss_mib_max"] is None


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_rss_bytes_reads_this_process() -> None:
    import mmap

    # fresh pages from the kernel: in a long test run a bytearray came from memory the allocator
    # already held (RSS unchanged to the byte)
    before = rss_bytes(os.getpid())
    block = mmap.mmap(-1, 64 * MIB)
    for off in range(0, 64 * MIB, mmap.PAGESIZE):  # touch every page
        block[off] = 1
    after = rss_bytes(os.getpid())
    block.close()
    assert before is not None and after is not None
    assert after - before > 48 * MIB
    assert rss_bytes(2**22 + 12345) is None
