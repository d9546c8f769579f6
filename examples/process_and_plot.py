"""Process a recording with the Python API and plot it.

Run it as a script; in a notebook each commented step of ``main`` is a cell as it is (a notebook needs no
``if __name__ == "__main__":`` guard, a script does).

    python examples/process_and_plot.py session.avi [--out results] [--png session.png]

Needs the ``api`` and ``plots`` extras: ``pip install 'eyeblink[api,plots]'``.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, no window (remove in a notebook)
import matplotlib.pyplot as plt

import eyeblink


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", help="a video file or image folder")
    parser.add_argument("--out", default="results", help="output folder (default: %(default)s)")
    parser.add_argument("--png", default=None, help="where to save the figure (default: OUT/<stem>.png)")
    args = parser.parse_args()

    # process: the same files as `eyeblink process RECORDING -o OUT --detect-every 1`
    session = eyeblink.process(args.recording, output=args.out, detect_every=1)
    print(session)

    # the tables are pandas DataFrames with the CSV contract's columns; units in .attrs
    frames, blinks = session.frames, session.blinks
    print(frames[["frame", "timestamp_s", "ear_left", "ear_right", "closure"]].describe().round(3))
    print(blinks[["start_s", "end_s", "duration_ms", "amplitude", "complete"]])
    print("units:", {c: frames.attrs["units"][c] for c in ("timestamp_s", "ear", "closure")})
    print("blink rate per minute:", session.summary.get("blink_rate_per_min"))

    # plot: EAR per eye, the baseline, and the blinks
    fig, (ax_ear, ax_fec) = plt.subplots(2, 1, sharex=True, figsize=(10, 5))
    ax_ear.plot(frames.timestamp_s, frames.ear_left, lw=0.8, label="left eye")
    ax_ear.plot(frames.timestamp_s, frames.ear_right, lw=0.8, label="right eye")
    ax_ear.plot(frames.timestamp_s, frames.baseline_ear, lw=1, ls="--", color="k", label="open baseline")
    ax_ear.set_ylabel(f"EAR ({frames.attrs['units']['ear']})")
    ax_ear.legend(loc="lower left")
    ax_fec.plot(frames.timestamp_s, frames.closure, lw=0.8, color="C3")
    ax_fec.set_ylabel("eyelid closure (FEC)")
    ax_fec.set_xlabel("time (s)")
    for b in blinks.itertuples():
        for ax in (ax_ear, ax_fec):
            ax.axvspan(b.start_s, b.end_s, color="C2", alpha=0.2)
    fig.suptitle(f"{session.stem}: {len(blinks)} blinks")
    fig.tight_layout()
    png = Path(args.png) if args.png else Path(args.out) / f"{session.stem}.png"
    fig.savefig(png, dpi=100)
    print("figure:", png)

    # a session can be read back later, the same object
    again = eyeblink.load(Path(args.out) / session.stem)
    assert again.frames.equals(frames) and again.blinks.equals(blinks)


if __name__ == "__main__":  # on Windows and macOS each worker runs this file again: the work must be guarded
    main()
