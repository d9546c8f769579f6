"""A development switch: profile each process of a run with cProfile.

With ``EYEBLINK_PROFILE_DIR=DIR`` in the environment, the multiprocess pipeline runs each child
(loader, worker, accelerator stage) and the parent's sink loop under :mod:`cProfile` and writes
``DIR/<name>-<pid>.prof`` when it ends (read with ``python -m pstats``). Profiling slows a run; the
rows are the same. Unset (the default), nothing is wrapped. With ``EYEBLINK_PROFILE_MODE=cpu`` as
well, no profiler runs: each process writes only its CPU seconds (user, system) to
``DIR/<name>-<pid>.cpu.json``, so that the CPU a frame costs can be split by process without the
profiler's own cost. With ``EYEBLINK_PROFILE_MODE=process`` cProfile runs on the process's CPU clock
instead of the wall clock (on a busy host, the time a process waits or is preempted is charged to no
function).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MODE_ENV", "PROFILE_ENV", "profiled"]

#: The environment variable naming the folder of the profiles.
PROFILE_ENV = "EYEBLINK_PROFILE_DIR"
#: ``cpu``: CPU seconds per process only (no cProfile)
MODE_ENV = "EYEBLINK_PROFILE_MODE"


def profiled(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` itself, or, with :data:`PROFILE_ENV` set, ``fn`` run under cProfile (its profile
    written whether it returns or raises)."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        return fn

    if os.environ.get(MODE_ENV) == "cpu":

        def account(*args: Any, **kwargs: Any) -> Any:
            import json

            t0 = os.times()
            try:
                return fn(*args, **kwargs)
            finally:
                t1 = os.times()
                Path(folder).mkdir(parents=True, exist_ok=True)
                (Path(folder) / f"{name}-{os.getpid()}.cpu.json").write_text(
                    json.dumps(
                        {
                            "name": name,
                            "user_s": t1.user - t0.user,
                            "system_s": t1.system - t0.system,
                        }
                    ),
                    encoding="utf-8",
                    newline="\n",
                )

        return account

    def run(*args: Any, **kwargs: Any) -> Any:
        import cProfile
        import time

        # ``EYEBLINK_PROFILE_MODE=process``: the profile's clock is the process's CPU time, not the
        # wall clock (a busy host's waits and preemptions are not charged to the function that was
        # running)
        prof = (
            cProfile.Profile(time.process_time)
            if os.environ.get(MODE_ENV) == "process"
            else cProfile.Profile()
        )
        prof.enable()
        try:
            return fn(*args, **kwargs)
        finally:
            prof.disable()
            Path(folder).mkdir(parents=True, exist_ok=True)
            prof.dump_stats(str(Path(folder) / f"{name}-{os.getpid()}.prof"))

    return run
