"""``eyeblink report``, ``compare``, ``agree``, ``export-eaf`` and ``import-eaf``: processed
sessions in."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eyeblink.cli.options import _nonneg_float, _positive_float
from eyeblink.errors import ConfigError

#: ``eyeblink region``
REGION_DESCRIPTION = (
    "Write one frame of INPUT (the first by default) as a PNG with a pixel scale along its edges "
    "and, with --eye-roi, the region drawn on it: choose the region of a recording of one eye by "
    "eye, then pass the same --eye-roi to process, live or batch. A small frame is drawn larger "
    "(a whole factor, up to about 960 pixels), the scale in the frame's own pixels."
)
#: ``eyeblink report --eyes-video``
EYES_VIDEO_HELP = (
    "also write OUTDIR/<stem>.eyes.webm, the band of both eyes of every frame (VP9), which the "
    "report "
    "plays in step with its trace (process --report writes it too)"
)


def add_parsers(sub: Any) -> None:
    """The ``agree``, ``export-eaf``, ``import-eaf``, ``report`` and ``compare`` subcommands."""
    g = sub.add_parser(
        "agree",
        help="agreement of automatic and corrected blinks, or of two raters",
        description="Score one scoring of a session's blinks against another: the detector's "
        "against the session's <stem>.corrections.json (saved from its report), or two "
        "raters' corrections files. Prints event precision, recall, F1, onset and "
        "duration differences, and per trial; for a folder, every session with "
        "corrections and all of them pooled.",
    )
    g.add_argument(
        "session",
        metavar="OUTDIR/STEM_OR_OUTDIR",
        help="a processed session (e.g. results/session1), or a folder of sessions with "
        "corrections",
    )
    g.add_argument(
        "--corrections",
        nargs="+",
        metavar="JSON",
        default=(),
        help="one file: the detector against it (instead of <stem>.corrections.json); two files: "
        "the "
        "second rater against the first (the reference)",
    )
    g.add_argument(
        "--reference",
        metavar="EAF",
        default=None,
        help="score against a human rater's tier of this ELAN file instead (with --tier); the "
        "detector, "
        "or the one --corrections file, is scored",
    )
    g.add_argument(
        "--tier", metavar="NAME", default=None, help="the tier of --reference to score against"
    )
    g.add_argument(
        "--json", metavar="FILE", default=None, help="also write the figures to this JSON file"
    )
    x = sub.add_parser(
        "export-eaf",
        help="write a session's blinks as an ELAN (.eaf) file linked to the recording",
        description="Write OUTDIR/<stem>.eaf: the session's blinks as ELAN tiers "
        "(blinks-automatic, "
        "blinks-corrected when the session has corrections, left-eye, right-eye), time "
        "slots in milliseconds, the recording linked, so ELAN opens the video with them.",
    )
    x.add_argument(
        "session", metavar="OUTDIR/STEM", help="a processed session (e.g. results/session1)"
    )
    x.add_argument(
        "-o",
        "--output",
        metavar="EAF",
        default=None,
        help="where to write (default: OUTDIR/<stem>.eaf)",
    )
    m = sub.add_parser(
        "import-eaf",
        help="bring a rater's ELAN tier into a session as its corrections",
        description="Read one tier of an ELAN file (a rater's blinks) and write the session's "
        "<stem>.corrections.json from it: the detector's blinks the tier has are accepted "
        "or retimed to its frames, the others rejected, the tier's other annotations "
        "added. eyeblink report (or process) then applies it: blinks.csv holds the "
        "tier's events, frame for frame.",
    )
    m.add_argument("eaf", metavar="FILE.eaf", help="the ELAN file")
    m.add_argument(
        "session", metavar="OUTDIR/STEM", help="the processed session of the same recording"
    )
    m.add_argument(
        "--tier", metavar="NAME", required=True, help="the tier that holds the rater's blinks"
    )
    m.add_argument(
        "-o",
        "--output",
        metavar="JSON",
        default=None,
        help="where to write (default: OUTDIR/<stem>.corrections.json)",
    )
    r = sub.add_parser(
        "report",
        help="write a self-contained HTML report of a processed session",
        description="Read OUTDIR/<stem>.frames.csv, .blinks.csv, .summary.json (and .trials.csv) "
        "and write OUTDIR/<stem>.report.html: one file that opens offline in a browser, "
        "with the zoomable EAR/closure trace, blinks, frames without a face, dropped "
        "frames, trials, a sortable blink table and the summary.",
    )
    r.add_argument(
        "session",
        metavar="OUTDIR/STEM",
        help="a processed session: its output folder and stem "
        "(e.g. results/session1), or any of its output files",
    )
    r.add_argument(
        "-o",
        "--output",
        metavar="HTML",
        default=None,
        help="where to write the report (default: OUTDIR/<stem>.report.html)",
    )
    r.add_argument("--eyes-video", action="store_true", help=EYES_VIDEO_HELP)
    ov = r.add_argument_group("annotated video (--overlay)")
    ov.add_argument(
        "--overlay",
        metavar="MP4",
        default=None,
        help="also re-encode the recording (H.264) with the face box, the eye points (fitted "
        "again by "
        "the session's eye model), EAR per eye, closure and blinks drawn on every frame",
    )
    ov.add_argument(
        "--video",
        metavar="VIDEO",
        default=None,
        help="the recording, when it is no longer where summary.json says (--overlay, "
        "--eyes-video)",
    )
    ov.add_argument(
        "--start", type=float, default=None, metavar="S", help="first second of the overlay video"
    )
    ov.add_argument(
        "--end", type=float, default=None, metavar="S", help="last second of the overlay video"
    )
    ov.add_argument(
        "--fps",
        type=_positive_float,
        default=None,
        metavar="FPS",
        help="playback rate of the overlay video, e.g. 30 for slow motion (default: the "
        "recording's)",
    )
    c = sub.add_parser(
        "compare",
        help="two sessions of the same recording side by side (checking a rerun)",
        description="Compare two processed sessions of the same recording (a rerun on another "
        "machine, another backend, another release): the frames both have, the largest "
        "openness, closure and face-box differences with their frames, the blinks "
        "matched one to one by overlapping frames and every blink only one session has. "
        "Exit status 0 when the two are identical or within --tolerance, 1 when not.",
    )
    c.add_argument(
        "a",
        metavar="A",
        help="a processed session: OUTDIR/<stem> (e.g. results/session1) or one of "
        "its output files",
    )
    c.add_argument("b", metavar="B", help="the session to compare it with, the same way")
    c.add_argument(
        "--tolerance",
        type=_nonneg_float,
        default=None,
        metavar="EAR",
        help="largest openness (EAR) difference that still counts as the same (default 0.001: what "
        "different CPUs and backends give)",
    )
    c.add_argument("--json", metavar="FILE", default=None, help="also write the comparison as JSON")


def cmd_compare(args: argparse.Namespace) -> int:
    """``eyeblink compare A B``: 0 when the sessions are identical or within the tolerance, 1
    when not."""
    import json

    from eyeblink.outputs.compare import DEFAULT_TOLERANCE, compare_sessions, format_comparison
    from eyeblink.outputs.paths import OutputPlan, write_text
    from eyeblink.outputs.report import split_stem

    plan = OutputPlan()
    for session, what in ((args.a, "session A"), (args.b, "session B")):
        outdir, stem = split_stem(session)
        for suffix in ("frames.csv", "blinks.csv", "summary.json"):
            plan.read(outdir / f"{stem}.{suffix}", f"{what}'s {suffix}")
    plan.write(args.json, "--json").check()  # never over a session's own files
    result = compare_sessions(
        args.a, args.b, tolerance=DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    )
    print(format_comparison(result))
    if args.json:
        write_text(args.json, json.dumps(result.as_dict(), indent=2) + "\n", "--json")
    return 1 if result.verdict == "different" else 0


def add_region_parser(sub: Any) -> None:
    """``eyeblink region``: a frame of a recording as a picture, with an eye region drawn on it."""
    from eyeblink.cli.options import _eye_roi

    g = sub.add_parser(
        "region",
        help="a recording's first frame as a PNG, with an eye region (--eye-roi) drawn",
        description=REGION_DESCRIPTION,
    )
    g.add_argument("input", metavar="INPUT", help="a video file or an image folder")
    g.add_argument(
        "--eye-roi",
        type=_eye_roi,
        default=None,
        metavar="X,Y,W,H",
        help="the region to draw (pixels of the frame: left, top, width, height)",
    )
    g.add_argument(
        "--frame",
        type=int,
        default=0,
        metavar="N",
        help="the frame to show (default: the first, 0)",
    )
    g.add_argument(
        "--fps",
        type=_positive_float,
        default=None,
        help="frame rate of a video without timestamps (an image folder needs none here: one "
        "frame is "
        "shown)",
    )
    g.add_argument(
        "-o",
        "--output",
        metavar="PNG",
        default=None,
        help="where to write (default: <stem>.region.png in the current folder)",
    )


def cmd_region(args: argparse.Namespace) -> int:
    from eyeblink.outputs.regionview import picture_scale, write_region_picture
    from eyeblink.sources.files import input_stem

    out = Path(args.output) if args.output else Path(f"{input_stem(args.input)}.region.png")
    size = write_region_picture(Path(args.input), out, args.eye_roi, frame=args.frame, fps=args.fps)
    where = f"; region {args.eye_roi} drawn" if args.eye_roi else ""
    k = picture_scale(*size)
    drawn = f", drawn {k}x with the scale in frame pixels" if k > 1 else ""
    print(f"frame {args.frame} ({size[0]}x{size[1]}{drawn}): {out}{where}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from eyeblink.outputs.report import load_report_data, report_plan, split_stem, write_report

    given = [f"--{k}" for k in ("video", "start", "end", "fps") if getattr(args, k) is not None]
    if args.eyes_video:
        given = [g for g in given if g != "--video"]  # the recording, for the eyes' video too
    if given and not args.overlay:
        raise ConfigError(
            f"{'/'.join(given)} only {'shape' if len(given) > 1 else 'shapes'} the --overlay "
            "video; "
            "add --overlay OUT.mp4, or leave "
            f"{'them' if len(given) > 1 else 'it'} out"
        )
    # a damaged session stops here, before anything is written
    data = load_report_data(args.session)
    # no output is an input or another output (-o rec.frames.csv, --overlay rec.avi, --overlay X
    # --video X)
    report_plan(
        args.session, args.output, overlay=args.overlay, video=args.video, data=data
    ).check()
    if args.eyes_video:  # before the page, which links it when it is there
        from eyeblink.outputs.eyevideo import write_eyes_video

        eyes = write_eyes_video(args.session, args.video)
        print(f"eyes' video: {eyes} ({eyes.stat().st_size / 1e6:.1f} MB)")
    path = write_report(args.session, args.output, data=data)
    print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if args.overlay:
        from eyeblink.outputs.overlay import write_overlay
        from eyeblink.runtime.runner import eye_point_fitter

        outdir, stem = split_stem(args.session)
        n = write_overlay(
            data,
            outdir / f"{stem}.frames.csv",
            Path(args.overlay),
            video=Path(args.video) if args.video else None,
            start_s=args.start,
            end_s=args.end,
            fps=args.fps,
            eye_points=eye_point_fitter(data.summary),
        )
        print(f"overlay: {args.overlay} ({n} frames)")
    return 0


def cmd_agree(args: argparse.Namespace) -> int:
    from eyeblink.outputs.agreement import agree_sessions, format_text, write_json

    if args.tier is not None and args.reference is None:
        raise ConfigError(
            "--tier names a tier of the --reference ELAN file; give --reference FILE.eaf too"
        )
    result = agree_sessions(
        args.session, args.corrections, reference=args.reference, tier=args.tier
    )
    print(format_text(result))
    if args.json:
        write_json(result, Path(args.json))
    return 0


def cmd_export_eaf(args: argparse.Namespace) -> int:
    from eyeblink.outputs.elan import write_eaf

    print(f"ELAN file: {write_eaf(args.session, args.output)}")
    return 0


def cmd_import_eaf(args: argparse.Namespace) -> int:
    from eyeblink.outputs.elan import import_eaf

    path = import_eaf(args.eaf, args.tier, args.session, args.output)
    print(
        f"corrections: {path} (tier {args.tier} of {args.eaf}); apply them with eyeblink report "
        f"{args.session}"
    )
    return 0
