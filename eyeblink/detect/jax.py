"""JAX backend: the Keras rebuild of BlazeFace (and of the face mesh) under ``KERAS_BACKEND=jax``,
jitted.

Install: ``pip install "eyeblink[jax]"`` (JAX's CPU build and Keras 3); on NVIDIA GPUs install
JAX's CUDA build instead (``pip install "jax[cuda12]" "keras>=3"``). The network is the one model
definition of :mod:`eyeblink.detect.keras_graph` (the same code the ``tensorflow`` and ``ipu``
backends run); its outputs match the ``litert`` backend to the tolerances of
``tests/test_backends.py`` (``tests/test_jax.py``).

One Keras backend per process
-----------------------------
Keras fixes its backend when it is first imported (from ``KERAS_BACKEND``). Building a
:class:`JaxDetector` sets ``KERAS_BACKEND=jax`` before that first import; in a process that has
already imported Keras on TensorFlow (e.g. after the ``tensorflow`` backend ran) it raises
:class:`~eyeblink.errors.BackendUnavailableError` naming the fix (a process of its own).

Compilation
-----------
The model's forward pass is ``model.stateless_call(weights..., x)`` under ``jax.jit``, the weights
passed as device arrays (not folded into the program as constants), lowered and compiled ahead of
time for each batch shape (see :data:`CPU_COMPILER_OPTIONS` for the CPU). One XLA program per batch
bucket (:class:`~eyeblink.detect.keras_graph.BucketedRunner`: powers of two up to ``batch_size``,
partial batches zero-padded); :attr:`JaxNetwork.compile_seconds` records the first call of each.
Runs on JAX's default device: the first GPU when JAX's CUDA build sees one, else the CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from eyeblink.detect import AcceleratorOptions
from eyeblink.detect.keras_graph import NETWORKS, BucketedRunner, KerasDetector, use_keras_backend

__all__ = ["CPU_COMPILER_OPTIONS", "JaxDetector", "JaxNetwork", "jax_network"]

#: XLA options for programs compiled for the CPU. jaxlib 0.10's XLA:CPU fuses whole stretches of
#: these networks (convolutions, adds, ReLU, max-pool) into one YNNPACK "library fusion", and for
#: BlazeFace that fusion computes wrong numbers: the first max-pool after a conv/add/ReLU block is
#: off by up to 4.3 on the astronaut (eager JAX and TensorFlow agree with LiteRT to 1e-5). Turning
#: the YNNPACK fusions off (an empty fusion-type list) gives LiteRT's numbers
#: (``tests/test_jax.py``). Passed per compile, so a jaxlib that does not know the option compiles
#: without it (and the test against LiteRT says whether its fusions are right); GPU programs never
#: get it.
CPU_COMPILER_OPTIONS: dict[str, str | bool] = {"xla_cpu_experimental_ynn_fusion_type": ""}


class JaxNetwork(BucketedRunner):
    """A Keras model (JAX backend) behind one jitted, stateless forward pass per batch bucket."""

    def __init__(self, model: Any, *, batch_size: int) -> None:
        import jax

        super().__init__(tuple(int(d) for d in model.inputs[0].shape[1:]), batch_size)
        self.model = model
        self.device = str(jax.devices()[0])
        self._trainable = [v.value for v in model.trainable_variables]
        self._non_trainable = [v.value for v in model.non_trainable_variables]

        def forward(trainable: Any, non_trainable: Any, x: Any) -> Any:
            outputs, _ = model.stateless_call(trainable, non_trainable, x, training=False)
            return outputs

        self._jit = jax.jit(forward)
        #: compiled program per batch bucket (ahead of time, with :data:`CPU_COMPILER_OPTIONS` on
        #: the CPU)
        self._programs: dict[int, Any] = {}
        self.compiler_options: dict[str, str | bool] = {}

    def _program(self, x: np.ndarray) -> Any:
        size = int(x.shape[0])
        program = self._programs.get(size)
        if program is None:
            program = self._programs[size] = self._compile(x)
        return program

    def _compile(self, x: np.ndarray) -> Any:
        import jax

        lowered = self._jit.lower(self._trainable, self._non_trainable, x)
        if jax.default_backend() == "cpu":
            try:
                program = lowered.compile(compiler_options=CPU_COMPILER_OPTIONS)
            # a jaxlib without the option (older or newer XLA): its default fusions
            except Exception as exc:
                if "compile option" not in str(exc):
                    raise
            else:
                self.compiler_options = dict(CPU_COMPILER_OPTIONS)
                return program
        return lowered.compile()

    def _execute(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        outs = self._program(x)(self._trainable, self._non_trainable, x)
        return tuple(np.array(o) for o in outs)  # a copy: JAX's host views are read-only


def jax_network(name: str, *, model_path: Path | None = None, batch_size: int = 1) -> JaxNetwork:
    """A network of :data:`~eyeblink.detect.keras_graph.NETWORKS` (``blazeface``, ``mesh``,
    ``iris``) on JAX."""
    use_keras_backend("jax", eyeblink_backend="jax")
    return JaxNetwork(NETWORKS[name].build(model_path), batch_size=batch_size)


class JaxDetector(KerasDetector):
    """BlazeFace on JAX (XLA). Implements :class:`eyeblink.detect.Detector`.

    ``batch_size`` is the largest batch compiled (smaller batches run at the power-of-two bucket
    above them, zero-padded). ``accelerator``: JAX always compiles with XLA (``jax.jit``; there is
    no graph mode without it, and op-by-op execution is ~20x slower on a CPU), so ``jit_compile``
    does not apply (the ``cpu`` preset's ``jit_compile = false`` is for TensorFlow);
    ``prefetch_depth`` is kept for the feeding stage, it does not change this call. ``num_threads``
    is unused (XLA's CPU client sizes its own pool). Not thread-safe.
    """

    def _network(self, path: Path, opts: AcceleratorOptions) -> JaxNetwork:
        self.jit_compile = True  # always jax.jit (see above)
        return jax_network("blazeface", model_path=path, batch_size=self.batch_size)
