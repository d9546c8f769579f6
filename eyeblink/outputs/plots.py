"""PNG figures of a processed session (the ``plots`` extra: matplotlib; ``eyeblink process
--plots``).

* ``<stem>.trace.png``: EAR per eye with the open-eye baseline (top) and FEC (bottom) over the
  whole recording, blinks shaded, CS (shaded for its duration) and US (line) of each trial marked.
  Long recordings are drawn as a min/max envelope per pixel column, so every blink stays visible.
* ``<stem>.heatmap.png`` (with trials): one row per trial, FEC against time from CS onset on the
  frame-interval grid, CS onset and US onset marked, CR trials ticked on the right.
* ``<stem>.cr_blocks.png`` (with trials): mean FEC above the pre-CS baseline per block of
  ``trials.block_size`` trials against time from CS onset (early blocks dark, late blocks light),
  ±SEM shaded, CR window start, US onset and the CR criterion marked.

matplotlib is imported inside the functions, with the non-interactive Agg backend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from eyeblink.config import RunConfig
    from eyeblink.outputs.session import SessionData
    from eyeblink.signals.blinks import BlinkEvent

#: the colours of the HTML report (``report.css``), so that a figure and the report of one session
#: agree: the subject's left eye blue, the right red, the CS blue, the US purple
LEFT_COLOUR = "#1f77b4"
RIGHT_COLOUR = "#d62728"
CS_COLOUR = "#1e88e5"
US_COLOUR = "#7b1fa2"
BLINK_COLOUR = "#ff7f0e"
DPI = 120
_CALIBRATED_ON = {
    "segment": "the calibration segment",
    "responses": "the session's blinks and URs",
    "default": "nothing: default",
}


def _save(fig: Any, path: Path) -> None:
    """``fig`` as PNG at ``path``, whole or not at all (a temporary name, renamed:
    eyeblink.outputs.paths)."""
    from eyeblink.outputs.paths import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def envelope(t: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """A min/max envelope of ``y`` in ``bins`` time bins (``t`` and ``y`` as they are when
    short)."""
    if len(t) <= 2 * bins:
        return t, y
    edges = np.linspace(t[0], t[-1], bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    lo = np.full(bins, np.nan)
    hi = np.full(bins, np.nan)
    ok = np.isfinite(y)
    np.fmin.at(lo, idx[ok], y[ok])
    np.fmax.at(hi, idx[ok], y[ok])
    mid = (edges[:-1] + edges[1:]) / 2
    return np.repeat(mid, 2), np.column_stack([lo, hi]).ravel()


def trial_grid(data: SessionData, config: RunConfig) -> tuple[np.ndarray, np.ndarray]:
    """FEC per trial on a regular grid of times from CS onset (ms): ``(grid_ms, matrix[trials,
    grid])``.

    Each grid point takes the nearest frame; a grid point farther than 1.5 frame intervals from any
    frame (dropped frames, outside the recording) is NaN.
    """
    cfg = config.trials
    t = data.t
    dt_ms = float(np.median(np.diff(t))) * 1000.0 if len(t) > 1 else 2.0
    grid = np.arange(-cfg.trace_pre_ms, cfg.trace_post_ms + dt_ms / 2, dt_ms)
    out = np.full((len(data.trials), len(grid)), np.nan)
    for k, tr in enumerate(data.trials):
        want = tr.cs_onset_s + grid / 1000.0
        j = np.clip(np.searchsorted(t, want), 1, max(1, len(t) - 1))
        left = np.clip(j - 1, 0, len(t) - 1)
        right = np.clip(j, 0, len(t) - 1)
        near = np.where(np.abs(t[left] - want) <= np.abs(t[right] - want), left, right)
        vals = data.closure[near]
        far = np.abs(t[near] - want) * 1000.0 > 1.5 * dt_ms
        out[k] = np.where(far, np.nan, vals)
    return grid, out


def plot_trace(data: SessionData, blinks: Sequence[BlinkEvent], path: Path, title: str) -> Path:
    plt = _pyplot()
    fig, (ax_ear, ax_fec) = plt.subplots(
        2,
        1,
        figsize=(12, 5.5),
        sharex=True,
        gridspec_kw={"height_ratios": [1, 1.2]},
        constrained_layout=True,
    )
    bins = 2000
    for y, label, colour in (
        (data.ear_left, "left eye", LEFT_COLOUR),
        (data.ear_right, "right eye", RIGHT_COLOUR),
    ):
        ax_ear.plot(*envelope(data.t, y, bins), lw=0.7, color=colour, label=label)
    ax_ear.plot(
        *envelope(data.t, data.baseline, bins),
        lw=1.0,
        ls="--",
        color="0.3",
        label="open-eye baseline",
    )
    ax_ear.set_ylabel("EAR")
    ax_ear.set_title(title)
    ax_fec.plot(*envelope(data.t, data.closure, bins), lw=0.8, color="black", label="FEC")
    ax_fec.axhline(0, color="0.6", lw=0.6)
    ax_fec.axhline(1, color="0.6", lw=0.6, ls=":")
    for k, ev in enumerate(blinks):
        for ax in (ax_ear, ax_fec):
            ax.axvspan(
                ev.start_s,
                max(ev.end_s, ev.start_s + 0.002),
                color=BLINK_COLOUR,
                alpha=0.25,
                lw=0,
                label="blink" if (k == 0 and ax is ax_fec) else None,
            )
    for k, tr in enumerate(data.trials):
        cs_end = tr.cs_onset_s + (
            tr.cs_duration_ms / 1000.0 if math.isfinite(tr.cs_duration_ms) else 0.0
        )
        if cs_end > tr.cs_onset_s:
            ax_fec.axvspan(
                tr.cs_onset_s,
                cs_end,
                ymin=0.92,
                ymax=1.0,
                color=CS_COLOUR,
                alpha=0.6,
                lw=0,
                label="CS" if k == 0 else None,
            )
        else:
            ax_fec.axvline(tr.cs_onset_s, color=CS_COLOUR, lw=0.8, label="CS" if k == 0 else None)
        if tr.paired:
            ax_fec.axvline(tr.us_onset_s, color=US_COLOUR, lw=0.8, label="US" if k == 0 else None)
    ax_fec.set_ylabel("eyelid closure (FEC)")
    ax_fec.set_xlabel("time (s, recording timestamps)")
    lo = np.nanpercentile(data.closure, 0.5) if np.isfinite(data.closure).any() else 0.0
    hi = np.nanmax(data.closure) if np.isfinite(data.closure).any() else 1.0
    ax_fec.set_ylim(min(-0.1, lo - 0.05), max(1.15, hi + 0.05))
    if len(data.t):
        ax_fec.set_xlim(data.t[0], data.t[-1])
    ax_ear.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax_fec.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    _save(fig, path)
    plt.close(fig)
    return path


def plot_heatmap(data: SessionData, config: RunConfig, path: Path, title: str) -> Path:
    plt = _pyplot()
    grid, mat = trial_grid(data, config)
    n = len(data.trials)
    fig, ax = plt.subplots(figsize=(8, 2.6 + min(6.0, 0.13 * n)), constrained_layout=True)
    dt = grid[1] - grid[0] if len(grid) > 1 else 1.0
    # grey: no frame (outside the recording, gaps)
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")
    im = ax.imshow(
        np.ma.masked_invalid(mat),
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=0.0,
        vmax=1.0,
        extent=(grid[0] - dt / 2, grid[-1] + dt / 2, n + 0.5, 0.5),
    )
    # visible on viridis and on white
    ax.axvline(0, color="#4fc3f7", lw=1.5, ls="--", label="CS onset")
    isis = [tr.isi_ms for tr in data.trials if tr.paired]
    # one line only when every trial has the same US
    if isis and len(isis) == n and np.ptp(isis) < dt:
        ax.axvline(float(np.median(isis)), color=US_COLOUR, lw=1.5, label="US onset")
    else:
        for k, tr in enumerate(data.trials):
            if tr.paired:
                ax.plot(
                    [tr.isi_ms] * 2,
                    [k + 0.5, k + 1.5],
                    color=US_COLOUR,
                    lw=1.5,
                    label="US onset"
                    if k == next(i for i, x in enumerate(data.trials) if x.paired)
                    else None,
                )
    ax.set_xlabel("time from CS onset (ms)")
    ax.set_ylabel("trial (* = CR)")
    labels = [
        f"{tr.trial}{'*' if r.cr else ''}" for tr, r in zip(data.trials, data.results, strict=True)
    ]
    step = max(1, math.ceil(n / 25))
    ax.set_yticks(range(1, n + 1, step), labels[::step])
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    if np.isnan(mat).any():
        from matplotlib.patches import Patch

        handles.append(Patch(color="0.85"))
        labels.append("no frame (outside the recording or dropped)")
    cb = fig.colorbar(im, ax=ax, extend="both", pad=0.02, fraction=0.05, aspect=25)
    cb.set_label("eyelid closure (FEC)")
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    _save(fig, path)
    plt.close(fig)
    return path


def plot_blocks(data: SessionData, config: RunConfig, path: Path, title: str) -> Path:
    plt = _pyplot()
    cfg = config.trials
    grid, mat = trial_grid(data, config)
    base = np.array([r.baseline_fec for r in data.results])
    mat = mat - base[:, None]
    blocks = sorted({r.block for r in data.results})
    cmap = plt.get_cmap("viridis")
    fig, ax = plt.subplots(figsize=(10, 4.5), constrained_layout=True)
    for b in blocks:
        rows = [k for k, r in enumerate(data.results) if r.block == b and r.baseline_valid]
        if not rows:
            continue
        colour = cmap(0.85 * (blocks.index(b) / max(1, len(blocks) - 1)))
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                # all-NaN columns (outside the recording)
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(mat[rows], axis=0)
                sem = np.nanstd(mat[rows], axis=0) / np.sqrt(
                    np.maximum(1, np.isfinite(mat[rows]).sum(0))
                )
        first, last = data.trials[rows[0]].trial, data.trials[rows[-1]].trial
        label = (
            f"block {b}: trial {first}" if first == last else f"block {b}: trials {first}–{last}"
        )
        ax.plot(grid, mean, color=colour, lw=1.5, label=f"{label} (n={len(rows)})")
        if len(rows) > 1:
            ax.fill_between(grid, mean - sem, mean + sem, color=colour, alpha=0.2, lw=0)
    isis = [tr.isi_ms for tr in data.trials if tr.paired]
    durs = [tr.cs_duration_ms for tr in data.trials if math.isfinite(tr.cs_duration_ms)]
    if durs:
        ax.axvspan(0, float(np.median(durs)), color=CS_COLOUR, alpha=0.08, lw=0, label="CS")
    ax.axvline(0, color=CS_COLOUR, lw=1, ls="--", label="CS onset")
    ax.axvline(
        cfg.cr_start_ms,
        color="0.5",
        lw=0.8,
        ls=":",
        label=f"CR window start ({cfg.cr_start_ms:g} ms)",
    )
    if isis:
        ax.axvline(float(np.median(isis)), color=US_COLOUR, lw=1.2, label="US onset")
    ax.axhline(
        cfg.cr_threshold,
        color="0.3",
        lw=0.8,
        ls="-.",
        label=f"CR criterion (+{cfg.cr_threshold:g})",
    )
    ax.axhline(0, color="0.7", lw=0.6)
    ax.set_xlim(grid[0], grid[-1])
    ax.set_xlabel("time from CS onset (ms)")
    ax.set_ylabel("eyelid closure above baseline (FEC)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    _save(fig, path)
    plt.close(fig)
    return path


def write_plots(
    data: SessionData, blinks: Sequence[BlinkEvent], config: RunConfig, outdir: Path, stem: str
) -> dict[str, Path]:
    """Write the session's PNGs into ``outdir``; returns ``{"plot_trace": path, ...}``."""
    out = {
        "plot_trace": plot_trace(
            data,
            blinks,
            outdir / f"{stem}.trace.png",
            f"{stem}: eye aspect ratio and eyelid closure (FEC = 1 at 1 - EAR/baseline = "
            f"{data.calibration.full_amplitude:.2f}, calibrated on "
            f"{_CALIBRATED_ON[data.calibration.method]})",
        )
    }
    if data.trials:
        out["plot_heatmap"] = plot_heatmap(
            data,
            config,
            outdir / f"{stem}.heatmap.png",
            f"{stem}: eyelid closure per trial, aligned to CS onset",
        )
        out["plot_cr_blocks"] = plot_blocks(
            data,
            config,
            outdir / f"{stem}.cr_blocks.png",
            f"{stem}: mean conditioned response per block of {config.trials.block_size} "
            f"trial{'s' if config.trials.block_size != 1 else ''}",
        )
    return out


#: blink bands of :func:`session_figure` by ``source`` (a corrected session) or kind
SOURCE_COLOURS = {
    "auto": BLINK_COLOUR,
    "accepted": "#2ca02c",
    "corrected": "#9467bd",
    "added": "#17becf",
    "prolonged_closure": "#8c564b",
}


def session_figure(
    t: np.ndarray,
    ear_left: np.ndarray,
    ear_right: np.ndarray,
    closure: np.ndarray,
    blinks: Sequence[dict[str, Any]],
    trials: Sequence[dict[str, Any]],
    title: str,
    *,
    start_s: float | None = None,
    end_s: float | None = None,
) -> Any:
    """One matplotlib :class:`~matplotlib.figure.Figure` of a session (``Session.plot``): each eye's
    openness (top) and the closure (bottom, when measured) against time, the blinks shaded (by
    ``source`` in a corrected session: reviewed, retimed and added ones apart; prolonged closures
    apart), CS (line) and US (dashed) of each trial, excluded trials grey. ``start_s``/``end_s``:
    the seconds shown (default: all). Built without pyplot, so it neither needs nor changes a GUI
    backend; a notebook shows it as the cell's value."""
    from matplotlib.figure import Figure

    t = np.asarray(t, dtype=np.float64)
    lo = t[0] if start_s is None and len(t) else (start_s or 0.0)
    hi = t[-1] if end_s is None and len(t) else (end_s if end_s is not None else 1.0)
    m = (t >= lo) & (t <= hi)
    has_closure = bool(np.isfinite(np.asarray(closure, dtype=np.float64)[m]).any())
    fig = Figure(figsize=(11, 5 if has_closure else 3.2), layout="constrained")
    axes = fig.subplots(
        2 if has_closure else 1,
        1,
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [3, 2] if has_closure else [1]},
    )[:, 0]
    for y, name, colour in ((ear_left, "left eye", "#1f77b4"), (ear_right, "right eye", "#d62728")):
        x, v = envelope(t[m], np.asarray(y, dtype=np.float64)[m], 2000)
        axes[0].plot(x, v, lw=0.8, color=colour, label=name, alpha=0.85)
    axes[0].set_ylabel("openness (EAR)")
    if has_closure:
        x, v = envelope(t[m], np.asarray(closure, dtype=np.float64)[m], 2000)
        axes[1].plot(x, v, lw=0.8, color="#2b2b2b", label="closure (FEC)")
        axes[1].set_ylabel("closure (FEC)")
    shown: set[str] = set()
    for b in blinks:
        try:
            a, z = float(b["start_s"]), float(b["end_s"])
        except (KeyError, TypeError, ValueError):
            continue
        if z < lo or a > hi:
            continue
        key = (
            "prolonged_closure"
            if b.get("kind") == "prolonged_closure"
            else str(b.get("source") or "auto")
        )
        label = {"auto": "blink", "prolonged_closure": "prolonged closure"}.get(
            key, f"blink ({key})"
        )
        for ax in axes:
            ax.axvspan(
                a,
                z,
                color=SOURCE_COLOURS.get(key, BLINK_COLOUR),
                alpha=0.3,
                lw=0,
                label=label if key not in shown and ax is axes[0] else None,
            )
        shown.add(key)
    for tr in trials:
        try:
            cs = float(tr.get("cs_onset_s", math.nan))
        except (TypeError, ValueError):
            continue
        excluded = bool(tr.get("excluded")) and str(tr.get("excluded")) not in ("0", "False", "nan")
        us = tr.get("us_onset_s")
        for ax in axes:
            if lo <= cs <= hi:
                ax.axvline(cs, color="#999999" if excluded else CS_COLOUR, lw=1)
            try:
                if us is not None and math.isfinite(float(us)) and lo <= float(us) <= hi:
                    ax.axvline(float(us), color="#999999" if excluded else US_COLOUR, lw=1, ls="--")
            except (TypeError, ValueError):
                pass
    axes[-1].set_xlabel("time (s)")
    axes[-1].set_xlim(lo, hi)
    axes[0].legend(loc="lower right", fontsize=8, ncol=4, frameon=False)
    fig.suptitle(title)
    return fig
