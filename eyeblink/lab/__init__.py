"""Lab: tools around the product, not on the path of a frame.

* :mod:`eyeblink.lab.bench` / :mod:`eyeblink.lab.bench_detector` — ``eyeblink bench`` throughput
  runs.
* :mod:`eyeblink.lab.evaluate` — ``eyeblink eval`` against annotated data sets.
* :mod:`eyeblink.lab.demo` — ``eyeblink demo``.
* :mod:`eyeblink.lab.synth` — synthetic face recordings with planted blinks (tests, demo, bench).
* :mod:`eyeblink.lab.loopback` — ``python -m eyeblink.lab.loopback``: a synthetic live stream
  sender.
* :mod:`eyeblink.lab.train` — ``eyeblink train-landmarks`` (the eye12 model).
"""

from __future__ import annotations

import argparse
from typing import Any


def add_command(
    subparsers: Any, name: str, doc: str | None, *, help: str
) -> argparse.ArgumentParser:
    """The lab command ``name`` on ``subparsers``: ``help`` is its line in the command list; its
    description is ``doc`` (the command module's docstring) after the first paragraph, with its
    lines kept as written."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=doc.split("\n\n", 1)[1] if doc else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return p
