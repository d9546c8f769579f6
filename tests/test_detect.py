"""Tests of the face-detection stage: anchors, decode, weighted NMS, letterbox, backends, weights.

Tests that need the LiteRT runtime skip only when ``ai_edge_litert`` cannot be imported; the
dataset evaluation skips only when the third-party data folder is absent.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eyeblink import weights
from eyeblink.detect import NUM_ANCHORS, BackendName, Detector, create_detector
from eyeblink.detect.anchors import (
    SHORT_RANGE_OPTIONS,
    blazeface_short_range_anchors,
    generate_anchors,
)
from eyeblink.detect.blazeface import (
    FaceDetection,
    FaceDetector,
    Keypoint,
    Letterbox,
    box_iou,
    decode,
    letterbox,
    select_subject,
    weighted_nms,
)
from eyeblink.errors import BackendUnavailableError, ConfigError, ModelFileError

REPO_ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------
# Builders


def make_face(box: tuple[float, float, float, float], score: float = 0.9) -> FaceDetection:
    """A FaceDetection with plausible keypoints inside ``box``."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    rel = np.array([[0.3, 0.35], [0.7, 0.35], [0.5, 0.55], [0.5, 0.75], [0.05, 0.45], [0.95, 0.45]])
    return FaceDetection(box, score, rel * [w, h] + [x0, y0])


def raw_outputs(
    hits: dict[int, tuple[float, np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Regressors (896, 16) of zeros and scores (896,) of -100 logits, with ``hits`` set."""
    reg = np.zeros((NUM_ANCHORS, 16), np.float32)
    logits = np.full(NUM_ANCHORS, -100.0, np.float32)
    for index, (logit, row) in (hits or {}).items():
        logits[index] = logit
        reg[index] = row
    return reg, logits


@pytest.fixture(scope="module")
def astronaut() -> np.ndarray:
    """scikit-image's astronaut photo (512x512 RGB, one frontal face)."""
    data = pytest.importorskip("skimage.data")
    return data.astronaut()


@pytest.fixture(scope="module")
def face_detector() -> Iterator[FaceDetector]:
    """The real BlazeFace model on LiteRT (skips only when ai_edge_litert is not installed)."""
    pytest.importorskip("ai_edge_litert.interpreter")
    with FaceDetector(BackendName.LITERT) as detector:
        yield detector


# ----------------------------------------------------------------------------------------------
# Anchors


def test_anchors_shape_dtype_and_cache() -> None:
    anchors = blazeface_short_range_anchors()
    assert anchors.shape == (896, 4)
    assert anchors.dtype == np.float32
    assert anchors is blazeface_short_range_anchors()
    assert not anchors.flags.writeable
    np.testing.assert_array_equal(anchors[:, 2:], 1.0)  # fixed anchor size


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0, (0.5 / 16, 0.5 / 16)),  # 16x16 grid, 2 anchors per cell
        (1, (0.5 / 16, 0.5 / 16)),
        (2, (1.5 / 16, 0.5 / 16)),  # x varies fastest
        (32, (0.5 / 16, 1.5 / 16)),
        (511, (15.5 / 16, 15.5 / 16)),
        (512, (0.5 / 8, 0.5 / 8)),  # 8x8 grid, 6 anchors per cell
        (517, (0.5 / 8, 0.5 / 8)),
        (518, (1.5 / 8, 0.5 / 8)),
        (895, (7.5 / 8, 7.5 / 8)),
    ],
)
def test_anchor_known_centres(index: int, expected: tuple[float, float]) -> None:
    np.testing.assert_allclose(blazeface_short_range_anchors()[index, :2], expected, atol=1e-7)


def test_anchor_sizes_follow_mediapipe_scales_when_not_fixed() -> None:
    from dataclasses import replace

    anchors = generate_anchors(replace(SHORT_RANGE_OPTIONS, fixed_anchor_size=False))
    scale0 = 0.1484375
    scale1 = 0.1484375 + (0.75 - 0.1484375) / 3
    np.testing.assert_allclose(anchors[0, 2:], [scale0, scale0], rtol=1e-6)
    np.testing.assert_allclose(anchors[1, 2:], [math.sqrt(scale0 * scale1)] * 2, rtol=1e-6)
    # last: next scale 1
    np.testing.assert_allclose(anchors[-1, 2:], [math.sqrt(0.75 * 1.0)] * 2, rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# Decode


@pytest.mark.parametrize("index", [0, 100, 511, 512, 895])
def test_decode_zero_offsets_give_the_anchor_box(index: int) -> None:
    """Zero centre/keypoint offsets and a size of 128 (= the anchor's size) decode to the anchor
    box."""
    row = np.zeros(16, np.float32)
    row[2:4] = 128.0
    reg, logits = raw_outputs({index: (5.0, row)})
    anchors = blazeface_short_range_anchors()
    boxes, keypoints, scores = decode(reg, logits)
    cx, cy, aw, ah = anchors[index]
    np.testing.assert_allclose(
        boxes, [[cx - aw / 2, cy - ah / 2, cx + aw / 2, cy + ah / 2]], atol=1e-6
    )
    np.testing.assert_allclose(keypoints, np.tile([cx, cy], (1, 6, 1)), atol=1e-6)
    np.testing.assert_allclose(scores, [1 / (1 + math.exp(-5.0))], rtol=1e-6)


def test_decode_offsets_are_in_input_pixels_times_anchor_size() -> None:
    anchors = np.tile(np.array([[0.5, 0.5, 0.5, 0.25]], np.float32), (4, 1))
    reg = np.zeros((4, 16), np.float32)
    reg[0] = [12.8, -25.6, 64.0, 128.0] + [12.8, 0.0] * 6  # reverse_output_order: x, y, w, h
    boxes, keypoints, _ = decode(reg, np.array([0, -9, -9, -9], np.float32), anchors)
    cx, cy, w, h = 0.5 + 0.1 * 0.5, 0.5 - 0.2 * 0.25, 0.5 * 0.5, 1.0 * 0.25
    np.testing.assert_allclose(
        boxes[0], [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], atol=1e-6
    )
    np.testing.assert_allclose(keypoints[0], np.tile([0.55, 0.5], (6, 1)), atol=1e-6)


@pytest.mark.parametrize(
    ("logit", "threshold", "kept", "score"),
    [
        (0.0, 0.5, True, 0.5),  # MediaPipe keeps score == threshold
        (-0.01, 0.5, False, None),
        (1000.0, 0.5, True, 1.0),  # clipped to 100 before the sigmoid: no overflow
        (-1000.0, 0.0, True, 1 / (1 + math.exp(100.0))),  # ~4e-44: kept, no overflow
        (2.0, 0.9, False, None),
    ],
)
def test_decode_score_threshold_and_clipping(
    logit: float, threshold: float, kept: bool, score: float | None
) -> None:
    reg = np.zeros((1, 16), np.float32)
    reg[0, 2:4] = 10.0
    anchors = np.array([[0.5, 0.5, 1.0, 1.0]], np.float32)
    with np.errstate(over="raise", invalid="raise"):
        _, _, scores = decode(
            reg, np.array([logit], np.float32), anchors, score_threshold=threshold
        )
    if kept:
        assert score is not None
        np.testing.assert_allclose(scores, [score], rtol=1e-6, atol=1e-30)
    else:
        assert scores.size == 0


def test_decode_drops_empty_boxes_and_accepts_column_scores() -> None:
    reg, logits = raw_outputs({3: (4.0, np.zeros(16, np.float32))})  # w = h = 0
    boxes, keypoints, scores = decode(reg, logits[:, None])
    assert boxes.shape == (0, 4) and keypoints.shape == (0, 6, 2) and scores.shape == (0,)


@pytest.mark.parametrize(
    ("reg_shape", "score_shape"),
    [((896, 15), (896,)), ((896, 16), (895,)), ((896, 16, 1), (896,)), ((10, 16), (10,))],
)
def test_decode_rejects_bad_shapes(
    reg_shape: tuple[int, ...], score_shape: tuple[int, ...]
) -> None:
    with pytest.raises(ValueError, match="shape"):
        decode(np.zeros(reg_shape, np.float32), np.zeros(score_shape, np.float32))


# ----------------------------------------------------------------------------------------------
# Weighted NMS


def test_weighted_nms_merges_overlaps_with_score_weights() -> None:
    boxes = np.array([[0.1, 0.1, 0.5, 0.5], [0.12, 0.1, 0.52, 0.5]], np.float32)
    keypoints = np.stack([np.full((6, 2), 0.3), np.full((6, 2), 0.4)]).astype(np.float32)
    scores = np.array([0.6, 0.9], np.float32)
    out_b, out_k, out_s = weighted_nms(boxes, keypoints, scores)
    assert out_s.tolist() == pytest.approx([0.9])  # the top candidate's score
    np.testing.assert_allclose(out_b[0], (boxes[0] * 0.6 + boxes[1] * 0.9) / 1.5, atol=1e-6)
    np.testing.assert_allclose(out_k[0], np.full((6, 2), (0.3 * 0.6 + 0.4 * 0.9) / 1.5), atol=1e-6)


def test_weighted_nms_keeps_disjoint_boxes_in_score_order() -> None:
    boxes = np.array([[0.0, 0.0, 0.2, 0.2], [0.5, 0.5, 0.7, 0.7], [0.0, 0.6, 0.3, 0.9]], np.float32)
    keypoints = np.zeros((3, 6, 2), np.float32)
    scores = np.array([0.7, 0.95, 0.8], np.float32)
    out_b, _, out_s = weighted_nms(boxes, keypoints, scores)
    np.testing.assert_allclose(out_s, [0.95, 0.8, 0.7])
    np.testing.assert_allclose(out_b, boxes[[1, 2, 0]])


def test_weighted_nms_empty_input() -> None:
    b, k, s = weighted_nms(np.zeros((0, 4)), np.zeros((0, 6, 2)), np.zeros(0))
    assert b.shape == (0, 4) and k.shape == (0, 6, 2) and s.shape == (0,)


@st.composite
def candidate_sets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(0, 25))
    coords = st.floats(0.0, 1.0, allow_nan=False, width=32)
    xy = np.array(
        draw(st.lists(st.tuples(coords, coords), min_size=n, max_size=n)), np.float32
    ).reshape(n, 2)
    wh = np.array(
        draw(
            st.lists(st.tuples(st.floats(0.01, 0.5), st.floats(0.01, 0.5)), min_size=n, max_size=n)
        ),
        np.float32,
    ).reshape(n, 2)
    scores = np.array(draw(st.lists(st.floats(0.5, 1.0), min_size=n, max_size=n)), np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=1)
    keypoints = np.repeat(((boxes[:, :2] + boxes[:, 2:]) / 2)[:, None, :], 6, axis=1)
    return boxes, keypoints, scores


@settings(max_examples=200, deadline=None)
@given(candidate_sets(), st.sampled_from([0.0, 0.3, 0.7]))
def test_weighted_nms_invariants(
    cands: tuple[np.ndarray, np.ndarray, np.ndarray], threshold: float
) -> None:
    boxes, keypoints, scores = cands
    out_b, out_k, out_s = weighted_nms(boxes, keypoints, scores, threshold)
    n = scores.shape[0]
    assert out_b.shape == (out_s.shape[0], 4) and out_k.shape == (out_s.shape[0], 6, 2)
    assert (n == 0) == (out_s.size == 0)
    assert out_s.size <= n
    assert np.all(np.diff(out_s) <= 0)  # descending
    if n:
        assert out_s[0] == scores.max()
        assert set(out_s.tolist()) <= set(scores.tolist())  # scores are never invented
        # merged boxes are convex combinations of input boxes: inside their hull
        assert np.all(out_b[:, :2] >= boxes[:, :2].min(axis=0) - 1e-6)
        assert np.all(out_b[:, 2:] <= boxes[:, 2:].max(axis=0) + 1e-6)


def test_weighted_nms_threshold_one_merges_nothing() -> None:
    boxes = np.array([[0.1, 0.1, 0.5, 0.5]] * 3, np.float32)  # identical: IoU == 1, not > 1
    out_b, _, out_s = weighted_nms(
        boxes, np.zeros((3, 6, 2)), np.array([0.6, 0.9, 0.7]), iou_threshold=1.0
    )
    assert out_s.tolist() == pytest.approx([0.9, 0.7, 0.6])
    np.testing.assert_allclose(out_b, boxes)


# ----------------------------------------------------------------------------------------------
# Letterbox


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 4000),
    height=st.integers(1, 4000),
    fx=st.floats(0.0, 1.0),
    fy=st.floats(0.0, 1.0),
)
def test_letterbox_mapping_round_trip(width: int, height: int, fx: float, fy: float) -> None:
    box = Letterbox.fit(width, height)
    assert max(box.content_width, box.content_height) == 128
    point = np.array([fx * width, fy * height])
    normalised = box.to_input(point)
    assert np.all(normalised >= -1e-9) and np.all(normalised <= 1 + 1e-9)
    np.testing.assert_allclose(box.to_frame(normalised), point, atol=0.5)


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(24, 900),
    height=st.integers(24, 900),
    rgb=st.booleans(),
    fx=st.floats(0.15, 0.85),
    fy=st.floats(0.15, 0.85),
)
def test_letterbox_pixels_land_where_the_mapping_says(
    width: int, height: int, rgb: bool, fx: float, fy: float
) -> None:
    """A bright square drawn in the frame is found in the network input where ``to_input`` maps
    it."""
    side_x = side_y = min(max(4, round(0.12 * max(width, height))), width, height)
    x0 = min(width - side_x, max(0, round(fx * width - side_x / 2)))
    y0 = min(height - side_y, max(0, round(fy * height - side_y / 2)))
    frame = np.zeros((height, width, 3) if rgb else (height, width), np.uint8)
    frame[y0 : y0 + side_y, x0 : x0 + side_x] = 255
    tensor, box = letterbox(frame)
    assert tensor.shape == (128, 128, 3) and tensor.dtype == np.float32
    assert tensor.min() >= -1.0 and tensor.max() <= 1.0
    weight = tensor[..., 0] + 1.0
    ys, xs = np.mgrid[0:128, 0:128]
    centroid = (
        np.array([(weight * (xs + 0.5)).sum(), (weight * (ys + 0.5)).sum()]) / weight.sum() / 128
    )
    expected = box.to_input(np.array([x0 + side_x / 2, y0 + side_y / 2]))
    np.testing.assert_allclose(centroid, expected, atol=1.0 / 128)  # within one input pixel
    back = box.to_frame(centroid)
    np.testing.assert_allclose(back, [x0 + side_x / 2, y0 + side_y / 2], atol=1.0 / box.scale + 0.5)


@pytest.mark.parametrize(
    ("shape", "content", "pad"),
    [
        ((480, 640), (128, 96), (0, 16)),
        ((640, 480), (96, 128), (16, 0)),
        ((128, 128), (128, 128), (0, 0)),
    ],
)
def test_letterbox_fit_mode_centres_and_pads_black(
    shape: tuple[int, int], content: tuple[int, int], pad: tuple[int, int]
) -> None:
    tensor, box = letterbox(np.full(shape, 255, np.uint8))
    assert (box.content_width, box.content_height) == content
    assert (box.pad_x, box.pad_y) == pad
    assert box.scale == pytest.approx(128 / max(shape))
    inside = tensor[pad[1] : pad[1] + content[1], pad[0] : pad[0] + content[0]]
    np.testing.assert_allclose(inside, 1.0)
    assert np.isclose(tensor, -1.0).sum() == (128 * 128 - content[0] * content[1]) * 3


def test_letterbox_gray_equals_replicated_rgb() -> None:
    gray = np.random.default_rng(0).integers(0, 256, (480, 640), dtype=np.uint8)
    a, _ = letterbox(gray)
    b, _ = letterbox(np.repeat(gray[:, :, None], 3, axis=2))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("image", "match"),
    [
        (np.zeros((10, 10), np.float32), "uint8"),
        (np.zeros((10, 10, 4), np.uint8), "shape"),
        (np.zeros((10,), np.uint8), "shape"),
        (np.zeros((0, 10), np.uint8), "1x1"),
        ([[0, 1], [2, 3]], "ndarray"),
    ],
)
def test_letterbox_rejects_bad_images(image: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        letterbox(image)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# FaceDetection and select_subject


def test_face_detection_helpers_and_immutability() -> None:
    face = make_face((10.0, 20.0, 50.0, 100.0), 0.8)
    assert (face.width, face.height, face.area, face.center) == (40.0, 80.0, 3200.0, (30.0, 60.0))
    assert face.keypoint(Keypoint.RIGHT_EYE) == pytest.approx((22.0, 48.0))
    assert not face.keypoints.flags.writeable
    with pytest.raises(AttributeError):
        face.score = 0.1  # type: ignore[misc]
    assert face.iou(face) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("box", "score", "keypoints", "match"),
    [
        ((10, 10, 5, 20), 0.5, np.zeros((6, 2)), "x0 <= x1"),
        ((0, 0, 1, float("nan")), 0.5, np.zeros((6, 2)), "finite"),
        ((0, 0, 1, 1), 1.5, np.zeros((6, 2)), "score"),
        ((0, 0, 1, 1), 0.5, np.zeros((5, 2)), r"\(6, 2\)"),
        ((0, 0, 1, 1), 0.5, np.full((6, 2), np.inf), "finite"),
    ],
)
def test_face_detection_validates(
    box: tuple[float, ...], score: float, keypoints: np.ndarray, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        FaceDetection(box, score, keypoints)  # type: ignore[arg-type]


SUBJECT = make_face((100, 100, 300, 300), 0.9)
BYSTANDER_BIG = make_face((350, 0, 640, 300), 0.95)
SMALL_NEAR_SUBJECT = make_face((110, 105, 290, 300), 0.7)
POSTER = make_face((400, 0, 640, 480), 0.3)


@pytest.mark.parametrize(
    ("detections", "previous", "expected"),
    [
        ([], None, None),
        ([], SUBJECT, None),
        ([SUBJECT, BYSTANDER_BIG], None, BYSTANDER_BIG),  # no track: largest area x score
        ([SUBJECT, POSTER], None, SUBJECT),  # area x score discounts a low-confidence giant
        ([BYSTANDER_BIG, SMALL_NEAR_SUBJECT], SUBJECT, SMALL_NEAR_SUBJECT),  # track wins over size
        # track lost: fall back
        ([BYSTANDER_BIG, SUBJECT], make_face((0, 400, 40, 480)), BYSTANDER_BIG),
    ],
)
def test_select_subject(
    detections: list[FaceDetection], previous: FaceDetection | None, expected: FaceDetection | None
) -> None:
    assert select_subject(detections, previous) is expected


def test_box_iou_table() -> None:
    boxes = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 0, 0]], float)
    np.testing.assert_allclose(box_iou(np.array([0, 0, 10, 10]), boxes), [1.0, 50 / 150, 0.0, 0.0])


# ----------------------------------------------------------------------------------------------
# Backend registry


@pytest.mark.parametrize("name", ["", "cuda", "tflite", "lite rt"])
def test_unknown_backend_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="valid choices: litert, tensorflow, jax, ipu"):
        create_detector(name)


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"num_threads": 0}, "num_threads"), ({"batch_size": 0}, "batch_size")]
)
def test_backend_numbers_are_validated(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        create_detector("litert", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("backend", "extra"),
    [
        (BackendName.TENSORFLOW, 'eyeblink[tf]"'),
        ("ipu", "eyeblink[ipu]"),
        ("jax", 'pip install "eyeblink[jax]"'),
    ],
)
def test_backend_without_its_runtime_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, backend: BackendName | str, extra: str
) -> None:
    for module in ("tensorflow", "jax"):
        # makes `import tensorflow` / `import jax` fail here
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(BackendUnavailableError, match="valid choices") as info:
        create_detector(backend)
    assert extra in str(info.value)


def test_backend_names_are_strings() -> None:
    assert [b.value for b in BackendName] == ["litert", "tensorflow", "jax", "ipu"]
    assert BackendName("litert") is BackendName.LITERT and str(BackendName.IPU) == "ipu"


def test_import_detect_is_light() -> None:
    code = (
        "import sys, eyeblink.detect; sys.exit(int('ai_edge_litert' in sys.modules or 'cv2' "
        "in sys.modules))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0


# ----------------------------------------------------------------------------------------------
# Weights


def test_sha256sums_file_matches_constants() -> None:
    lines = (REPO_ROOT / "weights" / "SHA256SUMS").read_text().split("\n")
    sums = {name: digest for digest, name in (line.split() for line in lines if line.strip())}
    assert sums == {
        weights.BLAZEFACE_FILENAME: weights.BLAZEFACE_SHA256,
        weights.BLAZEFACE_FULL_RANGE_FILENAME: weights.BLAZEFACE_FULL_RANGE_SHA256,
        weights.DLIB68_FILENAME: weights.DLIB68_SHA256,
        weights.EYE12_FILENAME: weights.EYE12_SHA256,
        weights.FACE_MESH_FILENAME: weights.FACE_MESH_SHA256,
        weights.IRIS_FILENAME: weights.IRIS_SHA256,
        weights.LIDS_FILENAME: weights.LIDS_SHA256,
        weights.LIDS_V1_FILENAME: weights.LIDS_V1_SHA256,
        weights.LIDS_V2_FILENAME: weights.LIDS_V2_SHA256,
        weights.LIDS_V3_FILENAME: weights.LIDS_V3_SHA256,
    }


def test_blazeface_model_verifies() -> None:
    weights.verify_sha256(weights.blazeface_path(), weights.BLAZEFACE_SHA256)
    assert weights.blazeface_path().parent == weights.WEIGHTS_DIR


def test_verify_sha256_message_is_one_line_with_both_digests(tmp_path: Path) -> None:
    bad = tmp_path / "model.tflite"
    bad.write_bytes(b"not a model")
    actual = hashlib.sha256(b"not a model").hexdigest()
    with pytest.raises(ModelFileError) as info:
        weights.verify_sha256(bad, weights.BLAZEFACE_SHA256)
    message = str(info.value)
    assert "\n" not in message
    assert str(bad) in message and weights.BLAZEFACE_SHA256 in message and actual in message
    assert "reinstall" in message


@pytest.mark.parametrize(
    ("content", "check"),
    [
        (None, lambda p: weights.verify_sha256(p, weights.BLAZEFACE_SHA256)),  # missing file
        (b"12345", lambda p: weights.verify_size(p, 6)),
        (None, lambda p: weights.verify_size(p, 6)),
    ],
)
def test_model_file_checks_raise_model_file_error(
    tmp_path: Path, content: bytes | None, check: object
) -> None:
    path = tmp_path / "file.bin"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelFileError, match=str(path)):
        check(path)  # type: ignore[operator]


def test_dlib68_missing_package_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "face_recognition_models" else real_find_spec(name, *a),
    )
    with pytest.raises(ModelFileError, match="pip install"):
        weights.dlib68_path()


def test_dlib68_path_when_installed() -> None:
    if importlib.util.find_spec("face_recognition_models") is None:
        pytest.skip("face-recognition-models is not installed")
    path = weights.dlib68_path()
    assert path.name == weights.DLIB68_FILENAME and path.stat().st_size == weights.DLIB68_SIZE


# ----------------------------------------------------------------------------------------------
# LiteRT backend and the real model


def test_corrupt_shipped_model_fails_its_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("eyeblink.detect.litert")
    truncated = tmp_path / "face_detection_short_range.tflite"
    truncated.write_bytes(weights.blazeface_path().read_bytes()[:100_000])
    # the shipped file, as every backend finds it
    monkeypatch.setattr(weights, "blazeface_path", lambda: truncated)
    with pytest.raises(ModelFileError, match="sha256"):
        create_detector("litert")


def test_truncated_own_model_is_a_model_file_error(tmp_path: Path) -> None:
    pytest.importorskip("ai_edge_litert.interpreter")
    truncated = tmp_path / "my_face_model.tflite"
    truncated.write_bytes(weights.blazeface_path().read_bytes()[:100_000])
    with pytest.raises(ModelFileError, match="my_face_model"):
        create_detector("litert", model_path=truncated)


def test_unloadable_model_file_is_a_model_file_error(tmp_path: Path) -> None:
    """A user's model file (not checksummed: only the shipped one is) that LiteRT rejects is
    reported, not a crash."""
    litert = pytest.importorskip("eyeblink.detect.litert")
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"\x00" * 4096)
    with pytest.raises(ModelFileError, match="cannot be loaded"):
        litert.LiteRTDetector(model_path=garbage)


def test_litert_detector_protocol_and_validation() -> None:
    pytest.importorskip("ai_edge_litert.interpreter")
    with create_detector(BackendName.LITERT) as detector:
        assert isinstance(detector, Detector)
        regressors, scores = detector.detect(np.zeros((1, 128, 128, 3), np.float32))
        assert regressors.shape == (1, 896, 16) and scores.shape == (1, 896)
        assert regressors.dtype == np.float32 and scores.dtype == np.float32
        for bad in (np.zeros((1, 128, 128, 3), np.uint8), np.zeros((128, 128, 3), np.float32)):
            with pytest.raises(ValueError, match="batch must"):
                detector.detect(bad)
    with pytest.raises(RuntimeError, match="closed"):
        detector.detect(np.zeros((1, 128, 128, 3), np.float32))


@pytest.mark.parametrize("batch_size", [2, 3, 5])
def test_litert_batch_outputs_equal_single_outputs(batch_size: int, astronaut: np.ndarray) -> None:
    """LiteRT groups batched outputs per grid; the backend must restore canonical per-image
    order."""
    pytest.importorskip("ai_edge_litert.interpreter")
    rng = np.random.default_rng(batch_size)
    images = [letterbox(astronaut)[0], letterbox(astronaut[::-1].copy())[0]]
    images += [rng.uniform(-1, 1, (128, 128, 3)).astype(np.float32) for _ in range(batch_size)]
    batch = np.stack(images[:batch_size])
    with (
        create_detector("litert", batch_size=batch_size) as batched,
        create_detector("litert") as single,
    ):
        reg_b, sc_b = batched.detect(batch)
        for i in range(batch_size):
            reg_1, sc_1 = single.detect(batch[i : i + 1])
            np.testing.assert_allclose(reg_b[i], reg_1[0], atol=1e-5)
            np.testing.assert_allclose(sc_b[i], sc_1[0], atol=1e-5)
        # a different batch size later re-allocates and stays correct
        reg_1b, _ = batched.detect(batch[:1])
        np.testing.assert_allclose(reg_1b[0], reg_b[0], atol=1e-5)


def test_astronaut_has_exactly_one_face_with_eyes_in_place(
    face_detector: FaceDetector, astronaut: np.ndarray
) -> None:
    faces = face_detector.detect(astronaut)
    assert len(faces) == 1
    face = faces[0]
    assert face.score > 0.8
    x0, y0, x1, y1 = face.box
    right_eye = face.keypoint(Keypoint.RIGHT_EYE)
    left_eye = face.keypoint(Keypoint.LEFT_EYE)
    for x, y in (right_eye, left_eye):
        assert x0 <= x <= x1 and y0 <= y <= y1
        assert y < face.center[1]  # upper half of the box
    # subject's right eye is on the image's left in an unmirrored photo
    assert right_eye[0] < left_eye[0]
    # the face is where it is in the photo (about x 180-270, y 80-175 of 512x512)
    assert 150 < face.center[0] < 300 and 90 < face.center[1] < 170
    assert 70 < face.width < 130


@pytest.mark.parametrize(("scale", "offset"), [(1.4, (40, 16)), (1.5, (10, 0)), (1.3, (80, 40))])
def test_detection_maps_back_through_letterbox(
    face_detector: FaceDetector, astronaut: np.ndarray, scale: float, offset: tuple[int, int]
) -> None:
    """The photo scaled and placed in a 640x480 gray canvas gives the direct detection, moved and
    scaled."""
    gray = cv2.cvtColor(astronaut, cv2.COLOR_RGB2GRAY)[0:320, 40:440]  # 400x320 around the face
    direct = face_detector.detect(gray)
    assert len(direct) == 1
    cw, ch = round(400 * scale), round(320 * scale)
    ox, oy = offset
    canvas = np.full((480, 640), 30, np.uint8)
    canvas[oy : oy + ch, ox : ox + cw] = cv2.resize(gray, (cw, ch), interpolation=cv2.INTER_LINEAR)
    placed = face_detector.detect(canvas)
    assert len(placed) == 1
    expected_box = np.array(direct[0].box) * scale + [ox, oy, ox, oy]
    expected_kp = direct[0].keypoints * scale + [ox, oy]
    size = direct[0].width * scale
    np.testing.assert_allclose(placed[0].box, expected_box, atol=0.06 * size)
    np.testing.assert_allclose(placed[0].keypoints, expected_kp, atol=0.12 * size)


def test_detect_many_equals_detect(face_detector: FaceDetector, astronaut: np.ndarray) -> None:
    gray = cv2.cvtColor(astronaut, cv2.COLOR_RGB2GRAY)
    images = [
        astronaut,
        gray[0:320, 40:440],
        astronaut[:, ::-1].copy(),
        np.zeros((480, 640), np.uint8),
        gray,
    ]
    singles = [face_detector.detect(image) for image in images]
    pytest.importorskip("ai_edge_litert.interpreter")
    with FaceDetector("litert", batch_size=3) as batched:
        many = batched.detect_many(images)
    assert [len(f) for f in many] == [len(f) for f in singles]
    assert sum(len(f) for f in many) >= 4
    for got, want in zip(many, singles, strict=True):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a.box, b.box, atol=1e-5)
            np.testing.assert_allclose(a.keypoints, b.keypoints, atol=1e-5)
            assert a.score == pytest.approx(b.score, abs=1e-5)


def test_face_detector_from_fake_backend() -> None:
    """FaceDetector only relies on the Detector protocol (a test double is enough)."""

    class Fake:
        closed = False

        def detect(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            row = np.zeros(16, np.float32)
            row[2:4] = 32.0  # a 32x32 input-pixel box on anchor 0 of the 8x8 grid
            reg, logits = raw_outputs({512: (3.0, row)})
            return np.repeat(reg[None], len(batch), 0), np.repeat(logits[None], len(batch), 0)

        def close(self) -> None:
            self.closed = True

        def __enter__(self) -> Fake:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    fake = Fake()
    with FaceDetector.from_detector(fake, batch_size=2) as detector:
        faces = detector.detect_many([np.zeros((480, 640), np.uint8)] * 3)
    assert fake.closed
    assert [len(f) for f in faces] == [1, 1, 1]
    # anchor centre (8, 8) input px, box 32 px: in a 640x480 frame (scale 0.2, pad_y 16) -> x 40, y
    # -40
    np.testing.assert_allclose(faces[0][0].box, [-40.0, -120.0, 120.0, 40.0], atol=1e-3)


# ----------------------------------------------------------------------------------------------
# Evaluation on hand-drawn face boxes (third-party data beside the repo; skipped when absent)


def _data_root() -> Path:
    return Path(os.environ.get("EYEBLINK_DATA", REPO_ROOT.parent / "shared" / "data"))


def test_recall_on_dlib_face_boxes(face_detector: FaceDetector) -> None:
    """Recall at IoU > 0.3 of faces >= 60 px in dlib's example photos (PASCAL VOC, ~500x375).

    The short-range model is trained for faces within ~2 m that fill a good part of the frame:
    faces under ~15 px in the 128x128 input (under ~60 px in these photos, under ~75 px in a
    640x480 frame) are mostly missed, so they are counted but not asserted. Measured: 10/10
    faces >= 60 px found (IoU 0.65-0.90), about 1/33 smaller faces.
    """
    folder = _data_root() / "faces-dlib"
    if not (folder / "testing.xml").is_file() or not (folder / "training.xml").is_file():
        pytest.skip(f"face-box dataset not found in {folder} (set EYEBLINK_DATA)")
    large_hits, large_total, small_hits, small_total = 0, 0, 0, 0
    for xml_name in ("training.xml", "testing.xml"):
        for image_el in ET.parse(folder / xml_name).getroot().iter("image"):
            bgr = cv2.imread(str(folder / image_el.get("file", "")))
            assert bgr is not None, f"cannot read {image_el.get('file')}"
            faces = face_detector.detect(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            found = np.array([f.box for f in faces], float).reshape(-1, 4)
            for box_el in image_el.iter("box"):
                top, left, width, height = (
                    int(box_el.get(k, "0")) for k in ("top", "left", "width", "height")
                )
                truth = np.array([left, top, left + width, top + height], float)
                hit = bool(found.size) and float(box_iou(truth, found).max()) > 0.3
                if min(width, height) >= 60:
                    large_total, large_hits = large_total + 1, large_hits + hit
                else:
                    small_total, small_hits = small_total + 1, small_hits + hit
    print(
        f"recall faces >= 60 px: {large_hits}/{large_total}; smaller faces: "
        f"{small_hits}/{small_total}"
    )
    assert large_total >= 5
    assert large_hits / large_total >= 0.8
