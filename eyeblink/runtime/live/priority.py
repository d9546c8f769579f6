"""``eyeblink live --priority``: the capture and the frame path ahead of the rest of the machine.

On a 2-core lab PC the frames share the cores with everything else that runs: the acquisition
software, a browser, the desktop. A frame that waits for a core waits in its queue, and the latency
bound is about the wait. ``--priority`` asks the OS to run the run's processes (the sink, the loader
with its capture thread, the workers) first:

* ``normal`` (the default): as started.
* ``high``: a nice value of :data:`HIGH_NICE` (Windows: the ``HIGH`` priority class): the frame
  path gets most of a busy core, the rest still runs. On Linux allowed to root, to a process with
  ``CAP_SYS_NICE``, or up to ``ulimit -e`` (``RLIMIT_NICE``, e.g. ``@lab - nice -10`` in
  ``/etc/security/limits.conf``); on macOS to root.
* ``realtime``: Linux's round-robin real-time scheduling class at priority
  :data:`REALTIME_PRIORITY`: a frame path thread that can run does, ahead of every normal process.
  The kernel still keeps 5% of each second for the others (its ``sched_rt_runtime_us`` setting), so
  a run that overloads cannot freeze the machine. Allowed to root, ``CAP_SYS_NICE`` or up to
  ``ulimit -r`` (``RLIMIT_RTPRIO``). Windows: the ``REALTIME`` priority class (an administrator's).
  macOS has no such class for a program: refused.

What each OS does is :func:`eyeblink.host.raise_priority`'s. When the OS refuses,
:func:`raise_priority` says why in one line and the run goes on at the priority it has. Each process
applies it to itself, once, before it starts its threads (threads inherit it).
"""

from __future__ import annotations

from eyeblink import host

__all__ = [
    "HIGH_NICE",
    "PRIORITIES",
    "REALTIME_PRIORITY",
    "raise_priority",
    "restore_priority",
    "settle_heap",
]

PRIORITIES = ("normal", "high", "realtime")
#: the nice value of ``--priority high`` (the default is 0; -20 is the most favoured)
HIGH_NICE = -10
#: the real-time priority of ``--priority realtime`` on Linux (1-99; low enough to stay below the
#: kernel's own threads)
REALTIME_PRIORITY = 10


def raise_priority(level: str) -> str | None:
    """Run this process (its calling thread and every thread it starts next) at ``level``; None when
    done (or ``normal``), else one line saying what the OS refused and how to allow it."""
    if level == "normal":
        return None
    refused = host.raise_priority(level, nice=HIGH_NICE, realtime=REALTIME_PRIORITY)
    return None if refused is None else f"--priority {level}: {refused}"


def current() -> host.Priority:
    """This thread's scheduling policy and nice value (Windows: the priority class): what
    :func:`restore_priority` puts back."""
    return host.current_priority()


def restore_priority(saved: host.Priority) -> None:
    """Put back what :func:`current` returned (the API's caller keeps its own priority after a run);
    a failure leaves it favoured, not broken."""
    host.restore_priority(saved)


def settle_heap() -> None:
    """Collect once, then exempt every object alive now (the modules, the models, the run's setup)
    from later collections (``gc.freeze``): a full collection of a process that imported NumPy,
    pandas, pylsl and LiteRT walks some hundred thousand objects, ~40 ms on a 2-core PC, and the
    frames queue behind it. Called by each process of a live run once it is set up, before the first
    frame; the objects made afterwards are collected as usual, so the later full collections walk
    only those."""
    import gc

    gc.collect()
    gc.freeze()
