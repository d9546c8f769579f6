"""Event-level evaluation on blinkingmatters ``.tag`` datasets (ZJU, Eyeblink8, Talking Face, ...).

Ground truth: every run of frames sharing one ``blinkID`` (!= -1) is a blink,
spanning closing start to reopening end. ``frameID`` is the frame's position in
the original stream; a decoded frame's ID is ``round(timestamp_s * fps)`` from
its container presentation timestamp (this is what makes the ZJU AVIs, whose
null packets decode to nothing, line up).

Scoring convention (the dataset README): a detected blink matches a ground-truth blink when their
frame spans overlap; matching is one-to-one (largest overlap first); precision, recall, F1 and the
onset error in frames (detected - true). Only the annotated frames can be judged: a detection lying
entirely before the first or after the last ``frameID`` of the ``.tag`` is neither a hit nor a false
positive (ZJU tags often start a few frames in and stop up to 12 frames before the video ends); it
is counted as ``unscored``. The *strict* convention counts those as false positives: ``eval`` prints
and writes both.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eyeblink.config import RunConfig
from eyeblink.errors import DatasetError, EyeblinkError

VIDEO_EXTENSIONS = (".avi", ".mp4", ".mkv", ".mov", ".wmv", ".mpg")


@dataclass(frozen=True, slots=True)
class Span:
    """An inclusive frame span [start, end] in the dataset's frame-ID space."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"Span end {self.end} < start {self.start}")

    def overlap(self, other: Span) -> int:
        return max(0, min(self.end, other.end) - max(self.start, other.start) + 1)


@dataclass(frozen=True)
class TagFile:
    """A parsed ``.tag``: the annotated frame IDs and the ground-truth blink spans."""

    path: Path
    frame_ids: tuple[int, ...]
    blinks: tuple[Span, ...]
    header: dict[str, str] = field(default_factory=dict)

    @property
    def annotated(self) -> Span:
        """The span of annotated frame IDs (first to last line)."""
        return Span(min(self.frame_ids), max(self.frame_ids))


def within(spans: Sequence[Span], annotated: Span) -> tuple[list[Span], int]:
    """(spans overlapping the annotated range, number of spans entirely outside it)."""
    kept = [s for s in spans if s.overlap(annotated) > 0]
    return kept, len(spans) - len(kept)


def tag_rows(path: str | Path) -> tuple[dict[str, str], list[tuple[int, list[str]]]]:
    """A blinkingmatters ``.tag`` file's header (``# key : value`` lines before ``#start``, keys
    lower-case) and its annotated lines between ``#start`` and ``#end`` as (line number,
    ``:``-separated fields)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise DatasetError(f"cannot read annotation {p}: {exc.strerror or exc}") from None
    header: dict[str, str] = {}
    rows: list[tuple[int, list[str]]] = []
    inside = False
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if s == "#start":
            inside = True
            continue
        if s == "#end":
            break
        if not inside:
            m = re.match(r"#\s*([\w ]+?)\s*:\s*(.*)$", s)
            if m:
                header[m.group(1).lower()] = m.group(2).strip()
        elif s:
            rows.append((n, [x.strip() for x in s.split(":")]))
    return header, rows


def tag_ids(path: Path, n: int, parts: list[str]) -> tuple[int, int]:
    """(frame id, blink id) of one annotated line; a malformed one is a :class:`DatasetError`
    naming it."""
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise DatasetError(
            f"{path}:{n}: expected 'frameID : blinkID : ...', got {':'.join(parts)[:60]!r}"
        ) from None


def read_tag(path: str | Path) -> TagFile:
    """Parse a blinkingmatters ``.tag`` file (lines between ``#start`` and ``#end``)."""
    p = Path(path)
    header, rows = tag_rows(p)
    frame_ids: list[int] = []
    by_blink: dict[int, list[int]] = defaultdict(list)
    for n, parts in rows:
        fid, bid = tag_ids(p, n, parts)
        frame_ids.append(fid)
        if bid >= 0:
            by_blink[bid].append(fid)
    if not frame_ids:
        raise DatasetError(f"{p} has no annotated frames between #start and #end")
    spans = sorted((Span(min(v), max(v)) for v in by_blink.values()), key=lambda s: s.start)
    return TagFile(p, tuple(frame_ids), tuple(spans), header)


@dataclass(frozen=True)
class Score:
    tp: int
    fp: int
    fn: int
    onset_errors: tuple[int, ...]

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else math.nan

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else math.nan

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        if math.isnan(p) or math.isnan(r):
            return 1.0 if self.tp + self.fp + self.fn == 0 else 0.0
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def mean_abs_onset(self) -> float:
        e = self.onset_errors
        return sum(abs(x) for x in e) / len(e) if e else math.nan

    @property
    def mean_onset(self) -> float:
        e = self.onset_errors
        return sum(e) / len(e) if e else math.nan

    def strict(self, unscored: int) -> Score:
        """The strict convention: ``unscored`` detections outside the annotated frames count as
        false positives."""
        return Score(self.tp, self.fp + unscored, self.fn, self.onset_errors)

    def __add__(self, other: Score) -> Score:
        return Score(
            self.tp + other.tp,
            self.fp + other.fp,
            self.fn + other.fn,
            self.onset_errors + other.onset_errors,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "onset_error_mean_abs_frames": self.mean_abs_onset,
            "onset_error_mean_frames": self.mean_onset,
        }


EMPTY = Score(0, 0, 0, ())


def match_events(truth: Sequence[Span], detected: Sequence[Span]) -> Score:
    """One-to-one matching of overlapping spans, largest overlap first."""
    pairs = [
        (t.overlap(d), i, j)
        for i, t in enumerate(truth)
        for j, d in enumerate(detected)
        if t.overlap(d) > 0
    ]
    pairs.sort(key=lambda x: (-x[0], x[1], x[2]))
    used_t: set[int] = set()
    used_d: set[int] = set()
    onsets: list[int] = []
    for _, i, j in pairs:
        if i in used_t or j in used_d:
            continue
        used_t.add(i)
        used_d.add(j)
        onsets.append(detected[j].start - truth[i].start)
    tp = len(used_t)
    return Score(tp, len(detected) - tp, len(truth) - tp, tuple(onsets))


def find_pairs(dataset: Path) -> list[tuple[Path, Path]]:
    """(video, tag) pairs in ``dataset`` (recursively): a ``.tag`` with a video of the same stem."""
    if not dataset.is_dir():
        raise DatasetError(
            f"dataset folder not found: {dataset} — give the folder holding videos and .tag files"
        )
    pairs = []
    for tag in sorted(dataset.rglob("*.tag")):
        for ext in VIDEO_EXTENSIONS:
            v = tag.with_suffix(ext)
            if v.is_file():
                pairs.append((v, tag))
                break
    if not pairs:
        raise DatasetError(
            f"no <video> + <video>.tag pairs found under {dataset}; expected files such as "
            "clip.avi beside clip.tag"
        )
    return pairs


def group_of(video: Path) -> str:
    """A condition label from the file name (ZJU: 000001M_FBN -> FBN), else 'all'."""
    m = re.search(r"_([A-Z]{3})$", video.stem)
    return m.group(1) if m else "all"


def detected_spans(blinks: Iterable[Any], source: Any, fps: float) -> list[Span]:
    """Blink events -> inclusive spans of the annotation's frame IDs.

    blinkingmatters tags number the demuxed video *packets*: ZJU's 2-byte null packets ("repeat the
    previous frame") get a line each although they decode to nothing, and the source knows each
    decoded frame's packet index. Where it does not (image folders, frames without pts) the ID is
    ``round(t * fps)``. In the ZJU AVIs the container timestamps also skip zero-length index entries
    (frames the capture dropped) that the tags do not count, so timestamps alone misalign those
    clips by up to 14 frames. A source with ``packet_end`` (a frame standing for several packets:
    :class:`eyeblink.lab.ladder.RungSource`) ends a span at its frame's last packet.
    """

    def fid(frame: int, t: float, lookup: str = "packet_index") -> int:
        if not hasattr(source, lookup):
            lookup = "packet_index"
        p = getattr(source, lookup)(frame) if hasattr(source, lookup) else None
        return int(p) if p is not None else round(t * fps)

    spans = []
    # a frame that stands for several packets (the ladder's exposed rungs) ends at its last
    for b in blinks:
        s, e = fid(b.start_frame, b.start_s), fid(b.end_frame, b.end_s, "packet_end")
        spans.append(Span(s, max(s, e)))
    return spans


def prepare_dataset(
    dataset: Path, json_path: Path | None, outdir: Path | None, what: str
) -> tuple[list[tuple[Path, Path]], Path, tempfile.TemporaryDirectory[str] | None]:
    """The dataset's (video, .tag) pairs, every one readable and ``json_path`` writable (checked
    before the first video: an unwritable ``--json`` must not cost the whole evaluation), and the
    folder the rows go to (a temporary one, returned to be cleaned up, when ``outdir`` is None)."""
    from eyeblink.outputs.paths import OutputPlan

    pairs = find_pairs(dataset)
    plan = OutputPlan()
    for video, tag_path in pairs:
        plan.read(video, "the dataset video").read(tag_path, "the dataset annotation")
    plan.write(json_path, "--json").check()
    tmp = None
    if outdir is None:
        tmp = tempfile.TemporaryDirectory(prefix=f"eyeblink-{what}-")
        outdir = Path(tmp.name)
    return pairs, outdir, tmp


def run_eval(
    dataset: Path,
    config: RunConfig,
    *,
    outdir: Path | None = None,
    json_path: Path | None = None,
    progress: Any = None,
) -> int:
    """``eyeblink eval``: process every annotated video and print the scores."""
    from eyeblink.outputs.export import ensure_output_dir
    from eyeblink.runtime.pipeline import process_source
    from eyeblink.runtime.runner import build_analyzer, settle_eye_measure
    from eyeblink.sources.files import open_source

    pairs, outdir, tmp = prepare_dataset(dataset, json_path, outdir, "eval")
    ensure_output_dir(outdir)
    choose = config.eye.roi is not None and config.landmarks.region_auto  # each clip's own measure
    analyzers: dict[Any, Any] = {}

    def analyzer_of(cfg: RunConfig) -> Any:
        key = (cfg.landmarks.model, cfg.landmarks.setting("eye_angle"))
        if key not in analyzers:
            analyzers[key] = build_analyzer(cfg)
        return analyzers[key]

    analyzer = None if choose else analyzer_of(config)
    rows: list[dict[str, Any]] = []
    total = EMPTY
    unscored = 0
    # events past max_blink_ms: scored like blinks (the annotations mark every closure a blink)
    prolonged = 0
    groups: dict[str, Score] = defaultdict(lambda: EMPTY)
    group_unscored: dict[str, int] = defaultdict(int)
    print(
        f"{'video':<28} {'truth':>5} {'det':>4} {'TP':>3} {'FP':>3} {'FN':>3} {'P':>6} {'R':>6} "
        f"{'F1':>6} {'onset':>6}"
    )
    try:
        for video, tag_path in pairs:
            tag = read_tag(tag_path)
            try:
                with open_source(video, fps=config.fps) as src:
                    fps = src.nominal_fps or config.fps
                    if not fps:
                        raise DatasetError(f"{video} has no nominal frame rate; pass --fps")
                    clip_config = settle_eye_measure([video], config) if choose else config
                    analyzer = analyzer_of(clip_config)
                    analyzer.reset()
                    res = process_source(
                        src, outdir, clip_config, analyzer=analyzer, progress=progress
                    )
                    spans, outside = within(detected_spans(res.blinks, src, fps), tag.annotated)
            except DatasetError:
                raise
            except EyeblinkError as exc:
                print(f"{video.stem:<28} failed: {exc}")
                rows.append({"video": str(video), "error": str(exc)})
                sc = Score(0, 0, len(tag.blinks), ())
            else:
                sc = match_events(tag.blinks, spans)
                rows.append(
                    {
                        "video": str(video),
                        "group": group_of(video),
                        "truth": len(tag.blinks),
                        "detected": len(res.blinks),
                        "unscored": outside,
                        **sc.as_dict(),
                    }
                )
                unscored += outside
                prolonged += sum(getattr(b, "kind", "blink") != "blink" for b in res.blinks)
                group_unscored[group_of(video)] += outside
                print(
                    f"{video.stem:<28} {len(tag.blinks):>5} {len(res.blinks):>4} {sc.tp:>3} "
                    f"{sc.fp:>3} "
                    f"{sc.fn:>3} {sc.precision:>6.3f} {sc.recall:>6.3f} {sc.f1:>6.3f} "
                    f"{sc.mean_onset:>+6.2f}"
                )
            total = total + sc
            groups[group_of(video)] = groups[group_of(video)] + sc
    finally:
        if tmp is not None:
            tmp.cleanup()
    print()
    if len(groups) > 1:
        for g in sorted(groups):
            s = groups[g]
            print(
                f"{g:<28} {s.tp + s.fn:>5} {s.tp + s.fp:>4} {s.tp:>3} {s.fp:>3} {s.fn:>3} "
                f"{s.precision:>6.3f} "
                f"{s.recall:>6.3f} {s.f1:>6.3f} {s.mean_onset:>+6.2f}"
            )
    print(
        f"{'OVERALL':<28} {total.tp + total.fn:>5} {total.tp + total.fp:>4} {total.tp:>3} "
        f"{total.fp:>3} "
        f"{total.fn:>3} {total.precision:>6.3f} {total.recall:>6.3f} {total.f1:>6.3f} "
        f"{total.mean_onset:>+6.2f}"
    )
    print(
        f"onset error: mean {total.mean_onset:+.2f} frames, mean |error| "
        f"{total.mean_abs_onset:.2f} frames"
    )
    print(f"unscored: {unscored} detection(s) entirely outside the annotated frames")
    if prolonged:
        print(
            f"prolonged closures: {prolonged} of the detections are longer than max_blink_ms "
            "(scored as detections: "
            "the annotations call every closure a blink)"
        )
    strict = {g: groups[g].strict(group_unscored[g]) for g in sorted(groups)}
    strict_total = total.strict(unscored)
    print(
        "strict (the unscored detections counted as false positives): "
        + "".join(f"{g} F1 {sc.f1:.3f}, " for g, sc in strict.items() if len(groups) > 1)
        + f"OVERALL P {strict_total.precision:.3f} R {strict_total.recall:.3f} F1 "
        f"{strict_total.f1:.3f}"
    )
    if json_path is not None:
        from eyeblink.outputs.export import clean_json

        report = {
            "dataset": str(dataset),
            "overall": total.as_dict(),
            "unscored": unscored,
            "prolonged_closures": prolonged,
            "groups": {g: s.as_dict() for g, s in groups.items()},
            "strict": {
                "overall": strict_total.as_dict(),
                "groups": {g: sc.as_dict() for g, sc in strict.items()},
            },
            "videos": rows,
            "settings": config.to_dict(),
        }
        from eyeblink.outputs.paths import write_text

        write_text(json_path, json.dumps(clean_json(report), indent=2) + "\n", "--json")
    return 0


__all__ = ["Score", "Span", "TagFile", "asdict", "match_events", "read_tag", "run_eval", "within"]
