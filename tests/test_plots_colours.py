"""``--plots`` figures and the HTML report of one session draw each eye, the CS and the US in the
same colours."""

from __future__ import annotations

import re
from pathlib import Path

import eyeblink.outputs.plots as plots

CSS = Path(plots.__file__).with_name("report.css").read_text(encoding="utf-8")


def _css_colour(name: str) -> str:
    """A ``--name`` custom property of the report's stylesheet as ``#rrggbb``."""
    value = re.search(rf"--{name}:\s*([^;]+);", CSS)
    assert value is not None, name
    text = value.group(1).strip()
    rgb = re.match(r"rgba?\((\d+),\s*(\d+),\s*(\d+)", text)
    return "#{:02x}{:02x}{:02x}".format(*map(int, rgb.groups())) if rgb else text.lower()


def test_the_figures_use_the_reports_colours() -> None:
    assert _css_colour("left") == plots.LEFT_COLOUR
    assert _css_colour("right") == plots.RIGHT_COLOUR
    assert _css_colour("cs") == plots.CS_COLOUR
    assert _css_colour("us") == plots.US_COLOUR
    assert (
        len(
            {
                plots.LEFT_COLOUR,
                plots.RIGHT_COLOUR,
                plots.CS_COLOUR,
                plots.US_COLOUR,
                plots.BLINK_COLOUR,
            }
        )
        == 5
    )
