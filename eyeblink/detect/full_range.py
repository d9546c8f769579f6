"""BlazeFace full-range (``face_detection_full_range_sparse.tflite``) on LiteRT, for comparisons.

MediaPipe's model for faces up to ~5 m from the camera, from the same wheel and licence as the
short-range model. The pipeline does not use it (its subjects sit ~1 m from the camera); ``eyeblink
bench detectors`` compares it with the other face detectors. The steps follow MediaPipe's
``face_detection_full_range_common.pbtxt``:

* input 192x192 RGB in [-1, 1], the frame letterboxed as for short range
  (:func:`eyeblink.detect.blazeface.letterbox` with ``size=192``);
* outputs ``[1, 2304, 16]`` (box centre, size, 6 keypoints; offsets in input pixels) and
  ``[1, 2304, 1]`` logits; the anchors are one 48x48 grid of stride 4, one anchor per cell
  (:func:`eyeblink.detect.anchors.blazeface_full_range_anchors`);
* decoding with scale 192, sigmoid scores, threshold 0.6; weighted NMS at IoU 0.3.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from eyeblink.closing import Closing
from eyeblink.detect.anchors import FULL_RANGE_OPTIONS, blazeface_full_range_anchors
from eyeblink.detect.blazeface import FaceDetection, letterbox, postprocess
from eyeblink.detect.litert import native_info_silenced
from eyeblink.errors import ModelFileError
from eyeblink.weights import blazeface_full_range_path

__all__ = ["FULL_RANGE_INPUT", "FULL_RANGE_SCORE_THRESHOLD", "FullRangeFaceDetector"]

#: Side of the full-range model's square input, in pixels.
FULL_RANGE_INPUT = FULL_RANGE_OPTIONS.input_size_width
#: MediaPipe's ``min_score_thresh`` for the full-range model (short range: 0.5).
FULL_RANGE_SCORE_THRESHOLD = 0.6


class FullRangeFaceDetector(Closing):
    """Faces in whole frames with BlazeFace full-range (one LiteRT interpreter; not thread-safe)."""

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        num_threads: int = 1,
        score_threshold: float = FULL_RANGE_SCORE_THRESHOLD,
        iou_threshold: float = 0.3,
    ) -> None:
        path = Path(model_path) if model_path is not None else blazeface_full_range_path()
        try:
            interpreter = Interpreter(model_path=str(path), num_threads=int(num_threads))
            with native_info_silenced():
                interpreter.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            raise ModelFileError(f"model file {path} cannot be loaded by LiteRT: {exc}") from exc
        inputs = interpreter.get_input_details()
        outputs = interpreter.get_output_details()
        n = len(blazeface_full_range_anchors())
        shapes = {tuple(int(x) for x in d["shape"]) for d in outputs}  # plain ints in the message
        if (
            len(inputs) != 1
            or tuple(int(x) for x in inputs[0]["shape"])
            != (1, FULL_RANGE_INPUT, FULL_RANGE_INPUT, 3)
            or shapes != {(1, n, 16), (1, n, 1)}
        ):
            raise ModelFileError(
                f"model file {path} is not BlazeFace full-range: input "
                f"{[tuple(int(x) for x in d['shape']) for d in inputs]}, outputs {sorted(shapes)}"
            )
        self._interpreter: Interpreter | None = interpreter
        self._input = inputs[0]["index"]
        self._regressors = next(d["index"] for d in outputs if d["shape"][-1] == 16)
        self._scores = next(d["index"] for d in outputs if d["shape"][-1] == 1)
        self.score_threshold = score_threshold
        self.iou_threshold = iou_threshold

    def raw(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The network's raw ``(regressors [2304, 16], logits [2304])`` for one uint8 gray or RGB
        frame."""
        if self._interpreter is None:
            raise RuntimeError("FullRangeFaceDetector is closed")
        tensor, _ = letterbox(image, size=FULL_RANGE_INPUT)
        self._interpreter.set_tensor(self._input, tensor[None])
        self._interpreter.invoke()
        return (
            self._interpreter.get_tensor(self._regressors)[0].copy(),
            self._interpreter.get_tensor(self._scores)[0].reshape(-1).copy(),
        )

    def detect(self, image: np.ndarray) -> list[FaceDetection]:
        """Faces in one uint8 gray ``(H, W)`` or RGB ``(H, W, 3)`` frame, in frame pixels,
        highest score first."""
        if self._interpreter is None:
            raise RuntimeError("FullRangeFaceDetector is closed")
        tensor, box = letterbox(image, size=FULL_RANGE_INPUT)
        self._interpreter.set_tensor(self._input, tensor[None])
        self._interpreter.invoke()
        regressors = self._interpreter.get_tensor(self._regressors)[0]
        scores = self._interpreter.get_tensor(self._scores)[0]
        return postprocess(
            regressors,
            scores,
            box,
            score_threshold=self.score_threshold,
            iou_threshold=self.iou_threshold,
            anchors=blazeface_full_range_anchors(),
        )

    def close(self) -> None:
        """Release the interpreter (idempotent)."""
        self._interpreter = None
