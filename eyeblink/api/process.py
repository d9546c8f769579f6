"""``eyeblink.process``: recordings in, :class:`~eyeblink.api.load.Session` objects out; what
``eyeblink process`` runs too (:func:`run_process`), so that the two write byte-identical files for
the same settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eyeblink.api.load import Session, _require_pandas, load
from eyeblink.api.settings import (
    ANALYSIS,
    PROCESS_ONLY,
    SettingsError,
    _analysis,
    _check_keyword_types,
    _python_errors,
    _run_config,
    _settings_errors,
)
from eyeblink.config import RunConfig
from eyeblink.errors import ConfigError, EyeblinkError
from eyeblink.runtime.procs.processes import check_main_guard, resolve_start_method

if TYPE_CHECKING:
    from eyeblink.outputs.analysis import AnalysisOptions
    from eyeblink.outputs.session import RunResult


def check_workers(requested: int | None) -> None:
    """``--workers`` within 0..4 x the CPUs (:func:`eyeblink.config.check_worker_count`, which live
    settings use too)."""
    from eyeblink.config import check_worker_count

    check_worker_count(requested)


def process_workers(
    requested: int | None, cfg: RunConfig, physical_cores: Callable[[], int]
) -> int:
    """Worker processes for ``process``: physical cores by default; 1 with an accelerator backend
    that does not run in the accelerator stage.

    The TensorFlow, JAX and Poplar runtimes are not fork-safe (a worker forked after the parent has
    loaded the backend hangs), and on an accelerator the networks are meant to run in one batching
    process, not one copy per worker. With ``detect.stage`` = ``accelerator`` (``auto`` for ``jax``
    and ``tensorflow``) that process is the accelerator stage of the multiprocess pipeline and the
    workers post-process; the ``ipu`` backend, and a Keras backend with ``--stage fused``, run in
    one process.
    """
    from eyeblink.detect import BackendName

    check_workers(requested)
    accelerated = str(cfg.detect.backend).strip().lower() in (
        BackendName.TENSORFLOW.value,
        BackendName.JAX.value,
        BackendName.IPU.value,
    )
    if not accelerated or cfg.detect.accelerator_stage:
        return int(physical_cores()) if requested is None else requested
    if requested is not None and requested > 1:
        raise ConfigError(
            f"--workers {requested} is not supported with the {cfg.detect.backend!r} backend and "
            f"--stage {cfg.detect.stage} (its runtime is not fork-safe); use --workers 1, "
            "--stage accelerator (jax, tensorflow) or the litert backend"
        )
    return 1


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (a notebook, JupyterLab, VS Code's or Colab's): IPython
    is loaded and its shell has a kernel. There stderr is no terminal, yet the cell shows a progress
    bar."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except AttributeError:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_factory(show: bool) -> Any:
    """A tqdm progress bar per input when ``show`` and stderr is a terminal or this runs in a
    notebook (a widget where ipywidgets is installed, else text in the cell), else None."""
    notebook = show and in_notebook()
    if not show or not (notebook or sys.stderr.isatty()):
        return None
    if notebook:
        import importlib.util

        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.notebook import tqdm
        else:
            from tqdm import tqdm
    else:
        from tqdm import tqdm

    def make(name: str, total: int | None) -> Any:
        return tqdm(total=total, desc=name, unit="frame", dynamic_ncols=True, leave=False)

    return make


def run_process(
    paths: Sequence[Path],
    outdir: Path,
    cfg: RunConfig,
    *,
    workers: int | None = None,
    loaders: int = 0,
    analysis: AnalysisOptions | None = None,
    progress: Any = None,
    report: bool = False,
    view: Any = None,
    start_method: str | None = None,
) -> tuple[list[RunResult], list[tuple[Path, EyeblinkError]]]:
    """What ``eyeblink process`` and :func:`process` both run: every input into ``outdir``,
    finalized (FEC, trials, plots, NWB as ``analysis`` asks), with ``<stem>.report.html`` when
    ``report``; returns the results and the per-input failures (the other inputs still run).
    ``start_method``: how the worker processes start (``--start-method``, ``start_method=``; None:
    the environment's, else auto)."""
    from eyeblink.runtime.procs.parallel import physical_cores
    from eyeblink.runtime.runner import process_paths, report_writer, stem_of

    if report:  # keep the eye crops of each blink for the report's table
        cfg = dataclasses.replace(cfg, eye_crops=True)
    from eyeblink.outputs.corrections import corrections_path, read_corrections

    # a rerun applies the reviewer's corrections: a file it cannot read stops it before any frame
    for p in paths:
        stem = stem_of(p)
        if corrections_path(outdir, stem).is_file():
            read_corrections(corrections_path(outdir, stem), stem)

    results, failures = process_paths(
        list(paths),
        outdir,
        cfg,
        progress=progress,
        workers=process_workers(workers, cfg, physical_cores),
        loaders=loaders,
        analysis=analysis,
        then=report_writer(outdir) if report else None,
        view=view,
        start_method=start_method,
    )
    return results, failures


@contextlib.contextmanager
def _output_dir(output: str | Path | None) -> Iterator[Path]:
    if output is not None:
        yield Path(output)
        return
    with tempfile.TemporaryDirectory(prefix="eyeblink-") as tmp:
        yield Path(tmp)


@contextlib.contextmanager
def _file_view(rest: dict[str, Any]) -> Iterator[Any]:
    """``view=True`` (or ``view_port`` / ``view_host``) of :func:`process`: the page served for the
    whole call, its address said on stderr as the CLI does; None without."""
    if not (rest.get("view") or "view_port" in rest or "view_host" in rest):
        yield None
        return
    from eyeblink.runtime.live.view import serving

    with serving(
        port=rest.get("view_port", 0),
        host=rest.get("view_host", "127.0.0.1"),
        announce=lambda text: print(f"eyeblink: {text}", file=sys.stderr, flush=True),
    ) as view:
        yield view


def _input_paths(path_or_paths: Any) -> list[Path]:
    """The inputs of :func:`process` as paths; anything but a path or a list of paths is a
    :class:`SettingsError` naming the argument and the type given."""
    if isinstance(path_or_paths, (str, Path)):
        return [Path(path_or_paths)]
    items = list(path_or_paths) if isinstance(path_or_paths, (list, tuple)) else None
    if items is None or not items or not all(isinstance(p, (str, Path)) for p in items):
        shown = next((p for p in items or () if not isinstance(p, (str, Path))), path_or_paths)
        raise SettingsError(
            f"path_or_paths must be a str or pathlib.Path, or a non-empty list of them, got "
            f"{type(shown).__name__} {shown!r}"
        )
    return [Path(p) for p in items]


def process(
    path_or_paths: str | Path | Sequence[str | Path],
    output: str | Path | None = None,
    **settings: Any,
) -> Session | list[Session]:
    """Process recordings (or image folders) as ``eyeblink process`` does; a :class:`Session` per
    input.

    ``output``: the folder to write ``<stem>.frames.csv``, ``.blinks.csv``, ``.summary.json`` (and
    what the settings ask for) into, byte for byte what the CLI writes with the same settings;
    ``None`` keeps everything in memory (the files go to a temporary folder that is removed). One
    path gives one :class:`Session`, a list gives a list. ``settings``: see the module docstring;
    besides the preset keys, ``workers`` (default: physical cores), ``loaders``, ``start_method``
    (how the worker processes start: ``"auto"``, ``"spawn"``, ``"forkserver"`` or ``"fork"``, as
    ``--start-method``; default: the environment variable ``EYEBLINK_START_METHOD``, else auto),
    ``progress`` (a bar on a terminal or in a notebook), ``report``, ``trials``, ``sync_column``,
    ``us_sync_column``, ``plots``, ``nwb``; ``view=True`` serves the page of ``eyeblink process
    --view`` while the inputs are processed (its address printed on stderr; ``view_port``,
    ``view_host`` as ``--view-port``, ``--view-host``, either implying ``view``).

    Raises :class:`SettingsError` (a ValueError) for a wrong setting, before any frame is read, and
    the first input's :class:`~eyeblink.errors.EyeblinkError` if an input fails (the others are
    processed first).
    """
    _require_pandas()
    single = isinstance(path_or_paths, (str, Path))
    paths = _input_paths(path_or_paths)
    if output is not None and not isinstance(output, (str, Path)):
        raise SettingsError(
            f"output must be a str or pathlib.Path (a folder) or None, got {type(output).__name__} "
            f"{output!r}"
        )
    with _settings_errors(python=True):
        _check_keyword_types(settings)
        cfg, rest = _run_config(settings, (*ANALYSIS, *PROCESS_ONLY))
        analysis = _analysis(rest)
        workers = rest.get("workers")
        check_workers(workers)
        loaders = rest.get("loaders", 0)
        if loaders < 0:
            raise ConfigError(f"loaders must be >= 0, got {loaders!r}")
        start_method = rest.get("start_method")
        # checked now: a wrong one, or a script that spawned workers would run again, is one line
        # before anything runs
        check_main_guard(resolve_start_method(start_method))
    with _output_dir(output) as outdir, _python_errors(), _file_view(rest) as view:
        results, failures = run_process(
            paths,
            outdir,
            cfg,
            workers=workers,
            loaders=loaders,
            analysis=analysis,
            progress=progress_factory(bool(rest.get("progress"))),
            report=bool(rest.get("report")),
            view=view,
            start_method=start_method,
        )
        if failures:
            raise failures[0][1]
        sessions = [load(outdir / r.stem) for r in results]
        if output is None:
            for s in sessions:
                s.paths = {}
    return sessions[0] if single else sessions
