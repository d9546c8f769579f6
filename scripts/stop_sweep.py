"""Start-up stop sweep: SIGTERM and SIGINT sent to ``eyeblink process`` at many instants of its
start-up.

Each try starts ``eyeblink process VIDEO -o OUT`` in its own process group (SIGINT at its default,
as in an interactive shell), sends one signal to the whole group after a delay, and checks what
eyeblink promises (docs/explanation/reliability.md, "Stops and signals"):

* the run stops: exit status 130, never ``ok`` / 0 (a *lost* stop);
* no traceback on stderr;
* every file it began is complete: ``summary.json`` with ``status: interrupted`` and ``exit_status:
  130`` (never a lone ``.summary.json.tmp``, never ``running``), ``frames.csv`` whole rows 0..n-1
  with n = the summary's ``frames``, the summary's ``outputs`` naming every file in the folder;
* a signal that arrives before eyeblink's ``main`` runs (the interpreter starting, eyeblink's
  imports) meets Python's defaults: the process ends by that signal and writes nothing; counted
  apart (``before_main``).

The delays are spread evenly from 0 to ``--span`` seconds (default: 1.25 x the time until the first
rows of a calibration run). Usage::

    python scripts/stop_sweep.py VIDEO --tries 200 [--workers 2] [--json results.json]

``tests/test_signals.py`` runs the same sweep with fewer instants.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eyeblink import host


def _default_signals() -> None:
    """preexec_fn: SIGINT and SIGTERM at their defaults and unblocked, whatever this process
    inherited."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))


def _command(video: Path, out: Path, workers: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "eyeblink",
        "process",
        str(video),
        "-o",
        str(out),
        "--no-progress",
        "--workers",
        str(workers),
    ]


def _start(video: Path, out: Path, workers: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _command(video, out, workers),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
        start_new_session=True,
    )


def _kill_group(proc: subprocess.Popen[str], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        host.kill_process_group(proc.pid, sig)


def time_to_rows(video: Path, workers: int, timeout_s: float = 300) -> float:
    """Seconds from the start of ``eyeblink process`` until its frames.csv holds a first row (the
    run is then stopped with SIGTERM)."""
    with tempfile.TemporaryDirectory(prefix="eyeblink-sweep-") as tmp:
        out = Path(tmp) / "out"
        t0 = time.monotonic()
        proc = _start(video, out, workers)
        frames = out / f"{video.stem}.frames.csv"
        try:
            while time.monotonic() - t0 < timeout_s and proc.poll() is None:
                if frames.is_file() and frames.read_bytes().count(b"\n") > 1:
                    return time.monotonic() - t0
                time.sleep(0.01)
            raise RuntimeError(f"no rows within {timeout_s} s (exit status {proc.poll()})")
        finally:
            _kill_group(proc, signal.SIGTERM)
            proc.communicate(timeout=60)


@dataclass
class Try:
    """One try: the signal, its delay and what came of it (``problems`` empty: as promised)."""

    signal: str
    delay_s: float
    returncode: int
    phase: str  # "main" (stopped by eyeblink) or "before_main" (Python's defaults, nothing written)
    status: str | None = None
    frames: int | None = None
    problems: list[str] = field(default_factory=list)
    # before main: what Python's default did (SIGINT: its KeyboardInterrupt traceback)
    note: str = ""
    stderr: str = ""  # kept when something is wrong


def check_run(sig: int, delay: float, returncode: int, stderr: str, out: Path, stem: str) -> Try:
    """What one stopped run left behind, against the promise (module docstring)."""
    name = signal.Signals(sig).name
    files = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    # before main (the interpreter starting, eyeblink's imports): Python's defaults, nothing
    # written; the signal's default action, or Python's KeyboardInterrupt (SIGINT) outside
    # eyeblink's main
    before = returncode == -sig or (
        sig == signal.SIGINT
        and returncode in (1, -sig)
        and "KeyboardInterrupt" in stderr
        and 'eyeblink/cli/__init__.py", line' not in stderr
    )
    if before and not files:
        return Try(
            name,
            delay,
            returncode,
            "before_main",
            note="Python's KeyboardInterrupt traceback" if "Traceback" in stderr else "",
        )
    t = Try(name, delay, returncode, "main")
    if returncode == 0:
        t.problems.append("lost: exit status 0")
    elif returncode != 130:
        t.problems.append(f"exit status {returncode}, not 130")
    if "Traceback" in stderr or "Exception ignored" in stderr:
        t.problems.append("traceback: " + stderr.strip().splitlines()[-1][:200])
    if [f for f in files if f.endswith(".tmp")]:
        t.problems.append(f"temporary file left: {files}")
    summary_path = out / f"{stem}.summary.json"
    if not files:
        return t  # stopped before any output existed
    if not summary_path.is_file():
        t.problems.append(f"no summary.json beside {files}")
        return t
    try:
        s = json.loads(summary_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        t.problems.append(f"summary.json unreadable: {exc}")
        return t
    t.status, t.frames = s.get("status"), s.get("frames")
    if t.status != "interrupted":
        t.problems.append(f"summary status {t.status!r}" + (" (lost)" if t.status == "ok" else ""))
    if s.get("exit_status") != returncode:
        t.problems.append(
            f"summary exit_status {s.get('exit_status')!r} != exit status {returncode}"
        )
    want = "stopped by SIGTERM" if sig == signal.SIGTERM else "interrupted by Ctrl-C (SIGINT)"
    if t.status == "interrupted" and s.get("error") != want:
        t.problems.append(f"summary error {s.get('error')!r}, not {want!r}")
    named = {Path(p).name for p in (s.get("outputs") or {}).values()}
    if set(files) != named:
        t.problems.append(f"outputs {sorted(named)} != files {files}")
    frames_path = out / f"{stem}.frames.csv"
    if frames_path.is_file():
        text = frames_path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            t.problems.append("frames.csv ends with half a row")
        rows = list(csv.DictReader(text.splitlines()))
        if [int(r["frame"]) for r in rows] != list(range(len(rows))):
            t.problems.append("frames.csv rows are not 0..n-1")
        if len(rows) != t.frames:
            t.problems.append(f"frames.csv has {len(rows)} rows, the summary {t.frames}")
    return t


def one_try(
    video: Path, workdir: Path, sig: int, delay: float, workers: int, timeout_s: float = 300
) -> Try:
    """Start a run, send ``sig`` to its process group after ``delay`` seconds, check what it
    left."""
    out = workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    proc = _start(video, out, workers)
    time.sleep(delay)
    # the run ended before the signal: no stop to keep (use a longer recording)
    if proc.poll() is not None:
        proc.communicate()
        return Try(signal.Signals(sig).name, delay, proc.returncode, "ended_before_signal")
    _kill_group(proc, sig)
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        _, stderr = proc.communicate()
        t = Try(
            signal.Signals(sig).name,
            delay,
            proc.returncode,
            "main",
            problems=[f"hung past {timeout_s} s"],
        )
        return t
    t = check_run(sig, delay, proc.returncode, stderr, out, video.stem)
    if t.problems:
        t.stderr = stderr[-4000:]
    return t


def sweep(
    video: Path,
    tries: int,
    *,
    span_s: float | None = None,
    workers: int = 2,
    start_s: float = 0.0,
    progress: bool = False,
) -> dict[str, object]:
    """``tries`` runs, SIGTERM and SIGINT alternately, delays spread evenly over ``[start_s,
    span_s]``."""
    if span_s is None:
        span_s = 1.25 * time_to_rows(video, workers)
    results: list[Try] = []
    with tempfile.TemporaryDirectory(prefix="eyeblink-sweep-") as tmp:
        for i in range(tries):
            delay = start_s + (span_s - start_s) * i / max(1, tries - 1)
            sig = signal.SIGTERM if i % 2 == 0 else signal.SIGINT
            t = one_try(video, Path(tmp), sig, delay, workers)
            results.append(t)
            if progress:
                verdict = "ok" if not t.problems else "; ".join(t.problems)
                print(
                    f"{i + 1:4d}/{tries} {t.signal:7s} {delay:6.3f} s  rc {t.returncode:4d}  "
                    f"{t.phase:11s} "
                    f"{t.status or '-':11s} frames {t.frames if t.frames is not None else '-':>5} "
                    f" {verdict}",
                    flush=True,
                )
    bad = [t for t in results if t.problems]
    return {
        "video": str(video),
        "tries": tries,
        "span_s": span_s,
        "workers": workers,
        "stopped_in_main": sum(t.phase == "main" for t in results),
        "before_main": sum(t.phase == "before_main" for t in results),
        "ended_before_signal": sum(t.phase == "ended_before_signal" for t in results),
        "with_summary": sum(t.status is not None for t in results),
        "lost": sum(
            any(p.startswith("lost") or "(lost)" in p for p in t.problems) for t in results
        ),
        "tracebacks": sum(any(p.startswith("traceback") for p in t.problems) for t in results),
        "missing_summary": sum(
            any("summary.json" in p or "temporary" in p for p in t.problems) for t in results
        ),
        "problems": len(bad),
        "failed_tries": [asdict(t) for t in bad],
        "all": [asdict(t) for t in results],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "video", type=Path, help="a recording long enough not to finish within the span"
    )
    ap.add_argument("--tries", type=int, default=200)
    ap.add_argument(
        "--span",
        type=float,
        default=None,
        metavar="S",
        help="latest delay, s (default: 1.25 x the time to the first rows)",
    )
    ap.add_argument(
        "--start", type=float, default=0.0, metavar="S", help="earliest delay, s (default 0)"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="write every try here")
    args = ap.parse_args()
    res = sweep(
        args.video,
        args.tries,
        span_s=args.span,
        workers=args.workers,
        start_s=args.start,
        progress=True,
    )
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in res.items() if k not in ("failed_tries", "all")}, indent=2))
    return 1 if res["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
