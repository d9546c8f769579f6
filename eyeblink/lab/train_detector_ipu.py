"""``eyeblink train-detector --device ipu``: BlazeFace's fine-tuning steps on Graphcore IPUs.

Written against Graphcore's TensorFlow 2 API (the Poplar SDK's ``tensorflow.python.ipu``, not on
PyPI: install the SDK, ``source`` its ``enable.sh``, then ``pip install
<sdk>/tensorflow-2.*+gc*.whl``), as the inference backend :mod:`eyeblink.detect.ipu` is. Only the
training steps move to the IPU: the teacher labels, augmentation, the ``.tflite`` export and the
report stay on the host (:func:`eyeblink.lab.train_detector.run`, which also builds the model, the
loss and the data: this module is the thin layer that hands them to the SDK).

How:

1. :func:`plan_ipu_training` turns the run's options into an :class:`IPUTrainingPlan`: the
   :class:`~eyeblink.detect.ipu_settings.IPUSettings` of the preset (``--pipeline ipu-mk2``: I/O
   tiles, infeed prefetch depth, replicas; validated as for inference) with the training batch per
   replica, plus Keras's ``steps_per_execution`` and ``steps_per_epoch`` and the gradient
   accumulation. :func:`fit_on_ipu` writes the settings into an ``ipu.config.IPUConfig``
   (:func:`~eyeblink.detect.ipu_settings.apply_ipu_config`: ``auto_select_ipus``,
   ``io_tiles.*``) and calls ``configure_ipu_system()``.
2. Under ``ipu.ipu_strategy.IPUStrategy().scope()`` the Keras model is built (with a static batch:
   IPU programs are compiled for fixed shapes) and compiled with ``steps_per_execution``; with
   gradient accumulation ``set_gradient_accumulation_options`` is called, and the infeed gets the
   preset's ``prefetch_depth`` through ``set_infeed_queue_options``. ``model.fit`` then runs
   ``steps_per_epoch`` steps of a ``tf.data`` dataset batched with ``drop_remainder=True``.
3. The loss is given to ``compile`` (two Keras losses, one per output, that call the CPU step's
   loss functions), not written as a ``train_step``: with gradient accumulation Graphcore's Keras
   builds its own step from ``compiled_loss`` and would ignore an overridden ``train_step``.

Replicas and accumulation: Keras counts steps over all replicas, so ``steps_per_execution`` must be
a multiple of ``replicas * gradient_accumulation`` (Graphcore's rule) and ``steps_per_epoch`` of
``steps_per_execution``; the batches that do not fill one execution are left out of that epoch.
One weight update sees ``batch_size * gradient_accumulation * replicas`` images. Graphcore sums the
accumulated (and the replicas') gradients by default; Adam's step does not change with the scale of
the gradient (up to its epsilon), so this is the update of the mean.

Not run on IPU hardware: the tests run this module against a stand-in for ``tensorflow.python.ipu``
on the CPU (``tests/test_train_detector_ipu.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from eyeblink.detect import AcceleratorOptions, backend_install_hint
from eyeblink.detect.ipu_settings import IPUSettings, apply_ipu_config, ipu_settings
from eyeblink.errors import BackendUnavailableError, ConfigError

__all__ = [
    "IPUTrainingPlan",
    "check_ipu_training_options",
    "fit_on_ipu",
    "plan_ipu_training",
    "require_ipu",
]

#: The SDK module this path needs.
IPU_MODULE = "tensorflow.python.ipu"


def require_ipu() -> Any:
    """Graphcore's ``tensorflow.python.ipu``, or :class:`BackendUnavailableError` naming what to
    install.

    Imports it (TensorFlow is imported by then anyway): a broken SDK install fails here too, before
    any frame is labelled.
    """
    try:
        from eyeblink.detect._tf import tf_ipu

        return tf_ipu()
    except ImportError:
        raise BackendUnavailableError(
            "train-detector --device ipu needs Graphcore's TensorFlow (the module "
            f"{IPU_MODULE!r}), which is "
            f"not installed; {backend_install_hint('ipu')}, or train with --device cpu"
        ) from None


@dataclass(frozen=True)
class IPUTrainingPlan:
    """What one IPU training run compiles and runs, as plain values.

    ``settings``: the IPU configuration (``batch_size`` per replica per step; its
    ``steps_per_execution`` is per replica, as for inference). ``steps_per_execution`` and
    ``steps_per_epoch`` are Keras's: steps of all replicas together, one batch each.
    """

    settings: IPUSettings
    gradient_accumulation: int
    steps_per_execution: int
    steps_per_epoch: int
    samples: int

    @property
    def images_per_epoch(self) -> int:
        return self.steps_per_epoch * self.settings.batch_size

    @property
    def images_per_update(self) -> int:
        return self.settings.batch_size * self.gradient_accumulation * self.settings.replicas

    def to_dict(self) -> dict[str, Any]:
        return {
            "ipu_config": self.settings.ipu_config_fields(),
            "batch_size_per_replica": self.settings.batch_size,
            "replicas": self.settings.replicas,
            "gradient_accumulation": self.gradient_accumulation,
            "images_per_update": self.images_per_update,
            "steps_per_execution": self.steps_per_execution,
            "steps_per_epoch": self.steps_per_epoch,
            "images_per_epoch": self.images_per_epoch,
            "samples": self.samples,
            "prefetch_depth": self.settings.prefetch_depth,
            "settings": asdict(self.settings),
        }


def check_ipu_training_options(
    *,
    batch_size: int,
    accelerator: AcceleratorOptions,
    steps_per_execution: int | None,
    gradient_accumulation: int,
) -> IPUSettings:
    """Validate the options that do not depend on the data (before any work); the settings, one
    step per execution."""
    if gradient_accumulation < 1:
        raise ConfigError(f"--gradient-accumulation must be >= 1, got {gradient_accumulation}")
    # validates replicas, I/O tiles, ...
    settings = ipu_settings(batch_size=batch_size, accelerator=accelerator)
    unit = settings.replicas * gradient_accumulation
    if steps_per_execution is not None and steps_per_execution < 1:
        raise ConfigError(f"--steps-per-execution must be >= 1, got {steps_per_execution}")
    if steps_per_execution is not None and steps_per_execution % unit:
        raise ConfigError(
            f"--steps-per-execution must be a multiple of replicas x gradient accumulation "
            f"({settings.replicas} x {gradient_accumulation} = {unit}), got {steps_per_execution}"
        )
    return settings


def plan_ipu_training(
    samples: int,
    *,
    batch_size: int,
    accelerator: AcceleratorOptions,
    steps_per_execution: int | None = None,
    gradient_accumulation: int = 1,
) -> IPUTrainingPlan:
    """The plan for ``samples`` training samples; ``steps_per_execution`` None: a whole epoch per
    execution.

    Raises :class:`ConfigError` when the samples do not fill one execution.
    """
    settings = check_ipu_training_options(
        batch_size=batch_size,
        accelerator=accelerator,
        steps_per_execution=steps_per_execution,
        gradient_accumulation=gradient_accumulation,
    )
    unit = settings.replicas * gradient_accumulation
    steps = samples // batch_size  # drop_remainder: full batches only
    spe = steps_per_execution if steps_per_execution is not None else steps // unit * unit
    if spe < 1 or steps < spe:
        raise ConfigError(
            f"{samples} training samples make {steps} batches of {batch_size}, fewer than one IPU "
            "execution "
            f"({max(spe, unit)} steps: a multiple of replicas x gradient accumulation = {unit}); "
            "lower "
            "--batch-size, --steps-per-execution or --gradient-accumulation, or give more frames"
        )
    return IPUTrainingPlan(
        settings=ipu_settings(
            batch_size=batch_size,
            accelerator=accelerator,
            steps_per_execution=spe // settings.replicas,
        ),
        gradient_accumulation=gradient_accumulation,
        steps_per_execution=spe,
        steps_per_epoch=steps // spe * spe,
        samples=samples,
    )


def fit_on_ipu(
    plan: IPUTrainingPlan,
    *,
    keras: Any,
    build_model: Callable[[int], Any],
    losses: list[Any],
    loss_weights: list[float],
    dataset: Any,
    learning_rate: float,
    epochs: int,
    log: Callable[..., Any] = print,
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """Configure the IPUs, build and compile the model in ``IPUStrategy``'s scope and ``fit`` it.

    ``build_model(batch_size)`` returns the Keras model for that static batch; ``losses`` and
    ``loss_weights`` go to ``compile`` (one per output); ``dataset`` yields ``(x, (y per output))``
    batches of ``plan.settings.batch_size`` with static shapes. Returns the trained model, one entry
    per epoch (loss parts, seconds and images/s; the first epoch includes the compilation) and the
    IPU Keras options that were set.
    """
    ipu = require_ipu()
    s = plan.settings
    apply_ipu_config(s, ipu.config.IPUConfig()).configure_ipu_system()

    history: list[dict[str, Any]] = []

    class EpochLog(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            secs = time.perf_counter() - self.t0
            logs = dict(logs or {})
            names = list(getattr(self.model, "output_names", None) or ())
            parts = {
                key: float(logs[f"{name}_loss"])
                for key, name in zip(("reg_loss", "cls_loss"), names, strict=False)
                if f"{name}_loss" in logs
            }
            entry = {
                "epoch": epoch + 1,
                "loss": float(logs.get("loss", float("nan"))),
                **({"cls_loss": parts["cls_loss"]} if "cls_loss" in parts else {}),
                **({"reg_loss": parts["reg_loss"]} if "reg_loss" in parts else {}),
                "seconds": secs,
                "images_per_s": plan.images_per_epoch / secs,
                **({"includes_compile": True} if epoch == 0 else {}),
            }
            history.append(entry)
            log(
                f"  epoch {epoch + 1}/{epochs}: loss {entry['loss']:.4f}, {secs:.0f} s, "
                f"{entry['images_per_s']:.1f} "
                f"images/s{' (with the compilation)' if epoch == 0 else ''}",
                flush=True,
            )

    applied: dict[str, Any] = {}
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = build_model(s.batch_size)
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate),
            loss=losses,
            loss_weights=loss_weights,
            steps_per_execution=plan.steps_per_execution,
        )
        if plan.gradient_accumulation > 1:
            setter = getattr(model, "set_gradient_accumulation_options", None)
            if setter is None:
                raise BackendUnavailableError(
                    "this TensorFlow's Keras models have no set_gradient_accumulation_options "
                    "(Graphcore's Keras "
                    "extensions); install a newer Poplar SDK, or train with "
                    "--gradient-accumulation 1"
                )
            setter(gradient_accumulation_steps_per_replica=plan.gradient_accumulation)
            applied["set_gradient_accumulation_options"] = {
                "gradient_accumulation_steps_per_replica": plan.gradient_accumulation
            }
        infeed = getattr(model, "set_infeed_queue_options", None)  # SDK 2.3 and later
        if infeed is not None:
            infeed(prefetch_depth=s.prefetch_depth)
            applied["set_infeed_queue_options"] = {"prefetch_depth": s.prefetch_depth}
        model.fit(
            dataset,
            epochs=epochs,
            steps_per_epoch=plan.steps_per_epoch,
            callbacks=[EpochLog()],
            verbose=0,
            shuffle=False,
        )
    return model, history, applied
