"""Teacher labels for the lid network (``eyeblink train-lids``): strips cut where the face mesh puts
the eyes, labelled with the ``mesh`` eye model's lid aperture (face mesh + MediaPipe's iris-network
lid refinement).

For every frame: BlazeFace finds the subject (photos: every face at least ``min_face_px`` wide), the
face mesh places the eyes, the iris network measures each eye's aperture on the same placement (the
teacher, exactly what ``--landmarks mesh`` reports), and a *context* strip (:data:`CONTEXT_SHAPE`,
the run-time strip with a margin, same pixel scale and centre) is kept so that training can jitter
the crop as the face mesh's placement jitters at run time. Frames are also used rolled (±30°),
scaled and shifted as whole frames (``frame_augment`` copies: detection, mesh and teacher run on the
transformed frame); photometric augmentation (blur, gain, gamma, noise, flicker, glasses-like bars)
happens at training time on the strips.

Sources: videos (``.tag`` datasets keep their annotation: packet frame id, blink id, fully-closed
flags), image files, and rendered faces with planted closures (:mod:`eyeblink.lab.synth`). Each
source is cached as one ``.npz`` in a folder outside the repository (the data is research-only:
never commit it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.landmarks.lids import STRIP_SHAPE, cut_strip, eye_centres, strip_affine

#: The cached strip: the run-time strip plus a margin (same scale and centre), for training-time
#: jitter.
CONTEXT_SHAPE = (STRIP_SHAPE[0] + 24, STRIP_SHAPE[1] + 40)
PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp")


@dataclass
class Samples:
    """Labelled strips of one source: ``ctx`` (N, 64, 160) uint8, ``aperture`` (N, 2) float32
    (subject's right eye, left eye; the teacher's), ``frame_id`` (N,) (packet index for videos, -1
    else), ``augmented`` (N,) bool (a frame-level augmented copy), ``presence`` (N,) the face
    mesh's."""

    source: str
    ctx: np.ndarray
    aperture: np.ndarray
    frame_id: np.ndarray
    augmented: np.ndarray
    presence: np.ndarray

    def save(self, path: Path) -> None:
        np.savez_compressed(
            path,
            source=self.source,
            ctx=self.ctx,
            aperture=self.aperture,
            frame_id=self.frame_id,
            augmented=self.augmented,
            presence=self.presence,
        )

    @classmethod
    def load(cls, path: Path) -> Samples:
        z = np.load(path)
        return cls(
            str(z["source"]), z["ctx"], z["aperture"], z["frame_id"], z["augmented"], z["presence"]
        )

    @classmethod
    def concat(cls, items: list[Samples], source: str = "mixed") -> Samples:
        if not items:
            return cls(
                source,
                np.zeros((0, *CONTEXT_SHAPE), np.uint8),
                np.zeros((0, 2), np.float32),
                np.zeros(0, np.int64),
                np.zeros(0, bool),
                np.zeros(0, np.float32),
            )
        return cls(
            source,
            *(
                np.concatenate([getattr(s, f) for s in items])
                for f in ("ctx", "aperture", "frame_id", "augmented", "presence")
            ),
        )

    def __len__(self) -> int:
        return len(self.aperture)


class Teacher:
    """BlazeFace + the ``mesh`` eye model's two networks, one thread each: :meth:`label` one
    face."""

    def __init__(self) -> None:
        from eyeblink.detect.blazeface import FaceDetector
        from eyeblink.landmarks.mesh import MeshFitter

        self.detector = FaceDetector()
        self.mesher = MeshFitter(refine=True)

    def faces(self, gray: np.ndarray, *, all_faces: bool, min_face_px: float) -> list[Any]:
        from eyeblink.detect.blazeface import select_subject

        dets = self.detector.detect(gray)
        if all_faces:
            return [d for d in dets if d.width >= min_face_px]
        face = select_subject(dets)
        return [face] if face is not None and face.width >= min_face_px else []

    def label(self, gray: np.ndarray, face: Any) -> tuple[np.ndarray, np.ndarray, float] | None:
        """(context strip, (right, left) teacher aperture, presence) for one face; None where the
        mesh fails."""
        from eyeblink.landmarks.mesh import aperture, mesh_eye_corners

        mesher = self.mesher
        mesh = mesher.mesh(gray, mesher.face_roi(face))
        if not np.isfinite(mesh).all():
            return None
        corners = mesh_eye_corners(mesh)
        (r0, r1), (l0, l1) = corners
        right = aperture(mesher.lid_contour(gray, r0, r1, mirror=False))
        left = aperture(mesher.lid_contour(gray, l0, l1, mirror=True))
        if not (math.isfinite(right) and math.isfinite(left)):
            return None
        m = strip_affine(*eye_centres(corners), CONTEXT_SHAPE)
        return (
            cut_strip(gray, m, CONTEXT_SHAPE),
            np.array([right, left], np.float32),
            mesher.presence,
        )

    def close(self) -> None:
        self.detector.close()
        self.mesher.close()


def roll_scale(
    gray: np.ndarray,
    rng: np.random.Generator,
    *,
    max_roll: float = 30.0,
    scale: tuple[float, float] = (0.7, 1.3),
) -> np.ndarray:
    """``gray`` rolled by up to ±``max_roll`` degrees, scaled and shifted (±10 % of the frame)
    about its centre."""
    import cv2

    h, w = gray.shape
    m = np.asarray(
        cv2.getRotationMatrix2D(
            (w / 2, h / 2),
            float(rng.uniform(-max_roll, max_roll)),
            float(np.exp(rng.uniform(*np.log(scale)))),
        ),
        np.float64,
    )
    m[:, 2] += rng.uniform(-0.1, 0.1, 2) * np.array([w, h], np.float64)
    return cv2.warpAffine(
        gray, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101
    )


def frames_of(path: Path, *, every: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """(frame id, gray) of a video (frame id: the demuxed packet index where known, else the decode
    index) or of one image (-1)."""
    import cv2

    from eyeblink.errors import EmptySourceError
    from eyeblink.sources.files import open_source

    if path.suffix.lower() in PHOTO_SUFFIXES:
        img = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        if img is None:
            raise EmptySourceError(f"cannot read image {path}")
        yield -1, img
        return
    with open_source(path, fps=30.0) as src:
        for frame in src:
            if frame.index % every:
                continue
            pid = src.packet_index(frame.index) if hasattr(src, "packet_index") else None
            yield (int(pid) if pid is not None else int(frame.index)), frame.gray.copy()


def label_path(
    teacher: Teacher,
    path: Path,
    rng: np.random.Generator,
    *,
    every: int = 1,
    frame_augment: int = 1,
    min_face_px: float = 40.0,
) -> Samples:
    """Teacher-labelled strips of one video or image (clean frames plus ``frame_augment`` rolled
    copies each)."""
    photo = path.suffix.lower() in PHOTO_SUFFIXES
    out: dict[str, list[Any]] = {"ctx": [], "ap": [], "fid": [], "aug": [], "pres": []}
    for fid, gray in frames_of(path, every=every):
        for k in range(1 + frame_augment):
            img = gray if k == 0 else roll_scale(gray, rng)
            for face in teacher.faces(img, all_faces=photo, min_face_px=min_face_px):
                got = teacher.label(img, face)
                if got is None:
                    continue
                out["ctx"].append(got[0])
                out["ap"].append(got[1])
                out["fid"].append(fid)
                out["aug"].append(k > 0)
                out["pres"].append(got[2])
    return _samples(path.name, out)


def label_synthetic(teacher: Teacher, frames: int, seed: int) -> Samples:
    """Rendered faces (:mod:`eyeblink.lab.synth`) with random per-eye closures (a third open, a
    third closed, a third in between), random face size, roll and lighting, labelled by the teacher
    like real frames."""
    from dataclasses import replace

    from eyeblink.lab.synth import SynthConfig, render_frame

    rng = np.random.default_rng(seed)
    out: dict[str, list[Any]] = {"ctx": [], "ap": [], "fid": [], "aug": [], "pres": []}
    base = SynthConfig()
    configs = [
        replace(
            base,
            seed=int(s),
            face_scale=float(rng.uniform(120, 320)),
            head_roll_deg=float(rng.uniform(0, 25)),
            head_shift_px=float(rng.uniform(0, 40)),
            noise_sigma=float(rng.uniform(0, 6)),
            flicker_amplitude=float(rng.uniform(0, 0.08)),
        )
        for s in rng.integers(0, 2**31, 8)
    ]

    def closure() -> float:
        u = rng.random()
        return 0.0 if u < 1 / 3 else 1.0 if u < 2 / 3 else float(rng.uniform(0, 1))

    for i in range(frames):
        cfg = configs[i % len(configs)]
        gray = render_frame(float(rng.uniform(0, 10)), closure(), closure(), rng, cfg)
        for face in teacher.faces(gray, all_faces=False, min_face_px=40.0):
            got = teacher.label(gray, face)
            if got is not None:
                out["ctx"].append(got[0])
                out["ap"].append(got[1])
                out["fid"].append(i)
                out["aug"].append(False)
                out["pres"].append(got[2])
    return _samples(f"synthetic-{seed}", out)


def _samples(source: str, out: dict[str, list[Any]]) -> Samples:
    if not out["ctx"]:
        return Samples.concat([], source)
    return Samples(
        source,
        np.stack(out["ctx"]),
        np.stack(out["ap"]).astype(np.float32),
        np.asarray(out["fid"], np.int64),
        np.asarray(out["aug"], bool),
        np.asarray(out["pres"], np.float32),
    )


def subject_of(name: str) -> str:
    """The person key of a source name: ZJU ``000001M_FBN.avi`` -> ``000001``; Eyeblink8 clips ->
    their video folder (``EyeBlink8_3``); anything else: its own name."""
    m = re.match(r"(\d{6})[MF]?_", name)
    if m:
        return m.group(1)
    m = re.search(r"(EyeBlink8_\d+)", name)
    return m.group(1) if m else name


def cache_name(path: Path, frame_augment: int = 1) -> str:
    """A flat cache file name for a source path (its last two parts) labelled with ``frame_augment``
    copies (another count is another file: a cached file is reused only for the same labelling)."""
    suffix = "" if frame_augment == 1 else f".aug{frame_augment}"
    return re.sub(r"[^\w.-]+", "_", f"{path.parent.name}__{path.name}{suffix}") + ".npz"


def build_cache(
    sources: list[Path],
    cache: Path,
    *,
    every: int = 1,
    frame_augment: int = 1,
    synthetic: int = 0,
    seed: int = 0,
    log: Any = print,
) -> list[Path]:
    """Label every source into ``cache`` (one ``.npz`` each; an existing file is reused) and
    return the files."""
    cache.mkdir(parents=True, exist_ok=True)
    teacher = Teacher()
    files = []
    try:
        for n, path in enumerate(sources):
            dest = cache / cache_name(path, frame_augment)
            if not dest.exists():
                s = label_path(
                    teacher,
                    path,
                    np.random.default_rng([seed, n]),
                    every=every,
                    frame_augment=frame_augment,
                )
                s.source = str(path)
                s.save(dest)
                log(f"labelled {path.name}: {len(s)} strips")
            files.append(dest)
        if synthetic:
            dest = cache / f"synthetic-{synthetic}-{seed}.npz"
            if not dest.exists():
                s = label_synthetic(teacher, synthetic, seed)
                s.save(dest)
                log(f"labelled {synthetic} rendered frames: {len(s)} strips")
            files.append(dest)
    finally:
        teacher.close()
    return files


# --------------------------------------------------------------------------- blinks and long
# exposures

#: Mid-blink: an eye's teacher aperture between these fractions of its open value (the source's 80th
#: percentile).
MID_BLINK = (0.2, 0.85)
#: Frames averaged into one long-exposure sample (the ladder's exposed rungs: 2..4 at 30 FPS; 5 for
#: margin).
EXPOSURE_FRAMES = (2, 5)


@dataclass
class BlinkFrames:
    """Where the lid moves in a set of strips (one source's or the training set's, same order):
    ``mid`` and ``dip`` (:func:`blink_masks`), ``runs`` of consecutive clean frames
    (:func:`clean_runs`, as indices)."""

    mid: np.ndarray
    dip: np.ndarray
    runs: list[np.ndarray]

    @classmethod
    def of(cls, s: Samples, states: dict[int, str] | None = None) -> BlinkFrames:
        return cls(*blink_masks(s, states), clean_runs(s))

    @classmethod
    def concat(cls, items: list[BlinkFrames]) -> BlinkFrames:
        offsets = np.cumsum([0, *(len(b.mid) for b in items)])
        return cls(
            np.concatenate([b.mid for b in items]) if items else np.zeros(0, bool),
            np.concatenate([b.dip for b in items]) if items else np.zeros(0, bool),
            [r + o for b, o in zip(items, offsets, strict=False) for r in b.runs],
        )


def open_value(aperture: np.ndarray) -> np.ndarray:
    """Per eye the open-eye aperture of a source: the 80th percentile of ``aperture`` ``(N, 2)`` (at
    least 0.05, the blink detector's open baseline being a high percentile too)."""
    if len(aperture) == 0:
        return np.full(2, 0.05, np.float32)
    return np.maximum(np.percentile(aperture, 80, axis=0), 0.05).astype(np.float32)


def blink_masks(s: Samples, states: dict[int, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(mid, dip)`` boolean masks over the strips of one source.

    ``mid`` (mid-blink): either eye's teacher aperture within :data:`MID_BLINK` of the source's open
    value (:func:`open_value` of its clean frames), or, where ``states`` (``.tag`` frame id ->
    ``open`` / ``blink`` / ``closed``, :func:`eyeblink.lab.train_lids.tag_states`) label the frame,
    inside a labelled blink and not flagged fully closed. ``dip``: the lid down at all, i.e.
    ``mid``, or an eye under the upper bound (shut included), or inside a labelled blink."""
    if len(s) == 0:
        return np.zeros(0, bool), np.zeros(0, bool)
    clean = ~s.augmented
    ratio = s.aperture / open_value(s.aperture[clean] if clean.any() else s.aperture)
    lo, hi = MID_BLINK
    mid = ((ratio >= lo) & (ratio <= hi)).any(1)
    dip = (ratio <= hi).any(1)
    if states:
        st = np.array([states.get(int(f), "none") for f in s.frame_id])
        mid |= st == "blink"
        dip |= (st == "blink") | (st == "closed")
    return mid, dip


def clean_runs(s: Samples, *, max_gap: int = 2) -> list[np.ndarray]:
    """Indices of a video source's clean (not frame-augmented) strips in runs of consecutive frames
    (frame ids at most ``max_gap`` apart: a repeated or dropped frame, or one without a face, is a
    small gap; a longer gap ends the run). Photos and rendered faces (independent frames) have none.
    """
    from eyeblink.lab.evaluate import VIDEO_EXTENSIONS

    if Path(s.source).suffix.lower() not in VIDEO_EXTENSIONS:
        return []
    idx = np.flatnonzero(~s.augmented & (s.frame_id >= 0))
    if len(idx) < 2:
        return []
    idx = idx[np.argsort(s.frame_id[idx], kind="stable")]
    breaks = np.flatnonzero(np.diff(s.frame_id[idx]) > max_gap) + 1
    return [r for r in np.split(idx, breaks) if len(r) >= 2]


def exposed_samples(
    ctx: np.ndarray, aperture: np.ndarray, windows: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Long-exposure samples: per window (indices of consecutive frames' strips) the mean of their
    context strips (as a camera exposing over those frames records the eye) and the mean of their
    teacher apertures (the lid opening over the exposure: what the exposed picture integrates)."""
    if not windows:
        return np.zeros((0, *ctx.shape[1:]), np.uint8), np.zeros((0, 2), np.float32)
    out = np.stack([np.rint(ctx[w].astype(np.float32).mean(0)) for w in windows]).astype(np.uint8)
    return out, np.stack([aperture[w].mean(0) for w in windows]).astype(np.float32)


def tiled_windows(runs: list[np.ndarray], k: int) -> list[np.ndarray]:
    """The windows of ``k`` consecutive strips that tile each run (as an exposed rung at step
    ``k`` cuts a clip)."""
    return [r[i : i + k] for r in runs for i in range(0, len(r) - k + 1, k)]


def random_windows(
    runs: list[np.ndarray],
    dip: np.ndarray,
    count: int,
    rng: np.random.Generator,
    *,
    frames: tuple[int, int] = EXPOSURE_FRAMES,
    dip_share: float = 0.5,
) -> list[np.ndarray]:
    """``count`` random windows of ``frames[0]..frames[1]`` consecutive strips from ``runs``; a
    share ``dip_share`` of them placed over a frame of ``dip`` (the lid down: most of a recording is
    the open eye, whose exposure is the open eye again)."""
    runs = [r for r in runs if len(r) >= frames[0]]
    if not runs or count <= 0:
        return []
    owner = np.concatenate([np.full(len(r), i) for i, r in enumerate(runs)])
    pos = np.concatenate([np.arange(len(r)) for r in runs])
    dips = np.flatnonzero(dip[np.concatenate(runs)])
    out = []
    for _ in range(count):
        k = int(rng.integers(frames[0], frames[1] + 1))
        over_blink = len(dips) and rng.random() < dip_share
        j = int(rng.choice(dips)) if over_blink else int(rng.integers(len(owner)))
        r, p = runs[owner[j]], int(pos[j])
        k = min(k, len(r))
        start = int(rng.integers(max(0, p - k + 1), min(p, len(r) - k) + 1))
        out.append(r[start : start + k])
    return out
