"""Gate trials on the eye state of a live stream: start each trial only once the eye is open and still.

    python examples/rig_gate.py tcp://127.0.0.1:5000 --trials 5 --out rig

For each trial the script waits (``wait_until_open``) until the eye has been open for ``--stable-ms`` of
capture time on frames received at most ``--max-age-ms`` ago (an answer about older frames is never a "yes":
a lagging pipeline or a frozen camera makes it wait), then "presents" the trial (here: it notes the CS onset;
a rig would raise a TTL or start its stimulus), waits for the inter-trial interval and goes on. Blinks and
state changes arrive as callbacks meanwhile. At the end it writes ``OUT/<stem>.trials.csv`` with each trial's
CS onset on the session's own clock (``cs_onset_s``, the ``timestamp_s`` of frames.csv), ready for
``eyeblink process --trials``.

The same state is on the gate socket (``--gate-port``, JSON lines) and in the LSL marker stream (``--lsl``)
for a rig program in another language; see docs/guides/lab-programs.md.
"""

import argparse
import csv
import time
from pathlib import Path

import eyeblink


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a stream URL or camera, as for `eyeblink live`")
    parser.add_argument("--trials", type=int, default=5, help="trials to run (default: %(default)s)")
    parser.add_argument("--stable-ms", type=float, default=200.0, help="eye open this long before a trial (ms)")
    parser.add_argument("--timeout", type=float, default=10.0, help="give up on a trial after this many seconds")
    parser.add_argument("--max-age-ms", type=float, default=50.0,
                        help="only trust an answer about a frame received at most this long ago (ms)")
    parser.add_argument("--iti", type=float, default=0.3, help="inter-trial interval (s)")
    parser.add_argument("--out", default="rig", help="output folder (default: %(default)s)")
    args = parser.parse_args()

    events = []


    def on_blink(ev):
        events.append(ev)
        print(f"  blink {ev.blink}: {ev.start_s:.3f}-{ev.end_s:.3f} s ({ev.duration_ms:.0f} ms, {ev.kind})", flush=True)


    def on_state(change):
        print(f"  state {change.previous.value} -> {change.state.value} at {change.timestamp_s:.3f} s "
              f"(settled at frame {change.latest_frame}, {change.age_ms:.0f} ms old)", flush=True)


    onsets = []
    with eyeblink.live(args.source, args.out, name="rig", gate_port=0, on_blink=on_blink, on_state=on_state,
                       max_age_ms=args.max_age_ms) as s:
        print(f"gate socket on 127.0.0.1:{s.gate_port}", flush=True)
        for trial in range(1, args.trials + 1):
            if not s.wait_until_open(stable_ms=args.stable_ms, timeout_s=args.timeout):
                print(f"trial {trial}: no trial within {args.timeout:g} s: {s.wait_reason}; stop")
                break
            cs = s.time_s  # capture time of the newest frame: the trial's CS onset on the session's clock
            onsets.append((trial, cs))
            print(f"trial {trial}: eye open for >= {args.stable_ms:g} ms, CS at {cs:.3f} s ({s.age_ms:.0f} ms old)",
                  flush=True)
            time.sleep(args.iti)  # a rig presents its CS/US here
    result = s.result
    print(result)
    path = Path(args.out) / f"{result.stem}.trials.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["trial", "cs_onset_s"])
        w.writerows(onsets)
    print(f"{len(onsets)} trials -> {path}; {len(result.blinks)} blinks in {result.paths.get('blinks')}")


if __name__ == "__main__":  # on Windows and macOS each worker runs this file again: the work must be guarded
    main()
