"""The rule for a new default network, on every ladder at once: exit 0 when the candidate replaces
the default.

A candidate (a lid network, an eye model, a threshold) becomes the default only if it is no worse
than the current default on every rung, condition and convention of **each** ladder, each ladder a
different kind of recording (``zju-dev``; its webcam-like copy, ``scripts/webcam_ladder.py``),
within the paired bootstrap's noise (:func:`eyeblink.lab.ladder.replaces_default`). Each ladder is a
pair of ``eyeblink eval --ladder --json`` reports on the same clips:

    python scripts/default_rule.py --ladder zju-dev cand_zju.json current_zju.json \\
        --ladder webcam-like cand_webcam.json current_webcam.json

Prints each ladder's verdict (its failing cells, or its closest ones) and the decision; exit 0:
replaces, 1: the current default stays, 2: a report that cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from eyeblink.errors import EyeblinkError
    from eyeblink.lab.ladder import format_verdict, read_report, replaces_default

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--ladder",
        nargs=3,
        action="append",
        required=True,
        metavar=("NAME", "CANDIDATE", "CURRENT"),
        help="a ladder's name and the candidate's and the current default's reports on it",
    )
    args = ap.parse_args(argv)
    try:
        ladders = {
            name: (read_report(Path(cand)), read_report(Path(cur)))
            for name, cand, cur in args.ladder
        }
        decision = replaces_default(ladders)
    except EyeblinkError as exc:
        print(f"default_rule: error: {exc}", file=sys.stderr)
        return 2
    for name, verdict in decision["ladders"].items():
        print(f"{name}: {format_verdict(verdict)}")
    print(
        "the candidate replaces the default"
        if decision["replaces"]
        else "the current default stays"
    )
    return 0 if decision["replaces"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
