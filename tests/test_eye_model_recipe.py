"""The development page's recipe for an eye model: a class in a module of its own, one entry in
``EYE_MODELS``, and the model is a choice of the Python API and of the workers, its openness in the
rows of a real run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

MODULE = '''
import dataclasses

from eyeblink.landmarks.mesh import MeshFitter


class ScaledEar:
    """The face mesh's six-point openness, times ``scale`` (a model of one's own, for the recipe's test)."""

    def __init__(self, model_path=None, *, scale=1.0):
        self._mesh = MeshFitter(model_path, refine=False)
        self.scale = scale

    def fit(self, gray, face):
        fit = self._mesh.fit(gray, face)
        return dataclasses.replace(fit, ear_left=fit.ear_left * self.scale, ear_right=fit.ear_right * self.scale)

    def warm_up(self, gray):
        self._mesh.warm_up(gray)

    def close(self):
        self._mesh.close()
'''


def test_a_registered_eye_model_runs_through_the_pipeline(
    face_recording: tuple[Path, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pandas")
    import eyeblink
    from eyeblink.landmarks import EYE_MODELS, EyeModelSpec

    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "my_eyes.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setitem(
        EYE_MODELS, "scaled-ear", EyeModelSpec("my_eyes", "ScaledEar", {"scale": 2.0}, fit_ms=0.9)
    )
    video = face_recording[0]
    ours = eyeblink.process(
        video, tmp_path / "ours", landmarks="scaled-ear", workers=2, max_frames=300
    )
    ref = eyeblink.process(video, tmp_path / "ref", landmarks="mesh-ear", workers=2, max_frames=300)
    assert ours.summary["settings"]["landmarks"]["model"] == "scaled-ear"
    a, b = ours.frames, ref.frames
    assert len(a) == len(b) == 300 and (a["face"] == 1).sum() > 290
    both = np.isfinite(a["ear_left"]) & np.isfinite(b["ear_left"])
    assert both.sum() > 290
    np.testing.assert_allclose(a.loc[both, "ear_left"], 2.0 * b.loc[both, "ear_left"], rtol=1e-6)
