"""One experiment run: export predictions, then evaluate the cached predictions.

:func:`run` merges the configuration, checks it against the run folder's ``conf.yaml``, exports
when the predictions are missing (or ``overwrite``), evaluates when the results are missing (or
``overwrite_eval`` / ``overwrite``), writes every output file and returns a :class:`RunResult`
holding what a results database records (tag, benchmark, config hash, versions, timings,
status and error, the metric set, per-scene metrics, summaries).

Cache rules (each a test in tests/experiment/test_experiment_run.py):

============================  =====================  ========================================
state of the tag              flags                  what happens
============================  =====================  ========================================
new tag                       any                    export, evaluate
nothing exported yet          any                    export, evaluate (a failed first run's
                                                     conf.yaml does not hold the tag)
data/model config changed     none / overwrite_eval  refused, the message lists the changes
data/model config changed     overwrite              everything is redone
eval config changed           none                   refused if there are results (needs
                                                     overwrite_eval), else evaluated
eval config changed           overwrite_eval         evaluation redone on the cached export
same config, all cached       none                   nothing is computed; outputs are read
same config                   overwrite_eval         evaluation redone
same config                   overwrite              export and evaluation redone
predictions missing           none                   export (resuming finished pairs), eval
results missing               none                   evaluation only
============================  =====================  ========================================
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.experiment.benchmark import Benchmark, Context, Evaluation
from metricalc.experiment.config import check_tag, config_diff, config_hash, load_config
from metricalc.experiment.registry import BenchmarkTable
from metricalc.experiment.results import open_pairs, write_results_h5
from metricalc.experiment.rundir import RunDir
from metricalc.experiment.scheduler import Scheduler
from metricalc.fileio import json_safe
from metricalc.plotting.figures import save_figure
from metricalc.presets import preset_for
from metricalc.store.database import DEFAULT_DB, open_db
from metricalc.store.inputs import library_versions
from metricalc.store.metadata import format_metadata, metadata_for
from metricalc.store.records import record_experiment

__all__ = ["BENCHMARKS", "DEFAULT_OUTPUTS", "RunResult", "default_db", "get_benchmark", "run"]

BENCHMARKS = BenchmarkTable(
    {
        "hpatches": "metricalc.benchmarks.hpatches_sequences.experiment:HPatches",
        "patches": "metricalc.benchmarks.hpatches_patches.experiment:Patches",
    }
)
"""The benchmarks of ``metricalc run`` by name."""

DEFAULT_OUTPUTS = Path("outputs")
"""Default outputs root: runs go to ``outputs/results/<benchmark>/<tag>/``."""


def default_db(outputs: str | os.PathLike[str] = DEFAULT_OUTPUTS) -> Path:
    """The results database runs of an outputs root are recorded in: ``<outputs>/metricalc.sqlite``
    (for the default root, :data:`metricalc.store.DEFAULT_DB`, which ``metricalc db`` reads).

    Examples
    --------
    >>> default_db("runs").as_posix(), default_db() == DEFAULT_DB
    ('runs/metricalc.sqlite', True)
    """
    return Path(outputs) / DEFAULT_DB.name


def get_benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``."""
    if name not in BENCHMARKS:
        raise InvalidInputError(
            f"unknown benchmark {name!r}; available: {', '.join(sorted(BENCHMARKS))}"
        )
    return BENCHMARKS[name]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class RunResult:
    """What one run did and found; what a results database records about an experiment.

    Attributes
    ----------
    benchmark, tag : str
        The benchmark name and the experiment tag.
    config : dict
        The merged configuration (``data``, ``model``, ``eval``), as in ``conf.yaml``.
    config_hash : str
        SHA-256 of the canonical JSON of ``config``
        (:func:`metricalc.experiment.config.config_hash`).
    export_hash : str
        SHA-256 of the ``data`` and ``model`` sections (what the predictions depend on).
    directory : Path
        The run folder ``<outputs>/results/<benchmark>/<tag>``.
    status : str
        ``"ok"`` or ``"error"``.
    error : str
        ``"<ExceptionType>: <message>"`` of a failed run, else ``""``.
    exported, evaluated : bool
        Whether this call ran the export / the evaluation (False: read from the cache).
    timings : dict
        Wall-clock seconds: ``export`` and ``evaluation`` (of the call that computed them, kept
        in ``run.json``) and ``total`` (this call).
    versions : dict
        Package versions (:func:`metricalc.store.library_versions`).
    started_at, finished_at : str
        ISO 8601 times (UTC) of this call.
    summaries : dict
        The content of ``summaries.json`` (metric set scalars, homography summary, sweep;
        non-finite values as None).
    metric_set : xarray.Dataset or None
        :func:`metricalc.metric_set` of the results cube (one descriptor, named after the tag).
    scene_metrics : xarray.Dataset or None
        :func:`metricalc.scene_metrics` of the cube (descriptor x scene).
    pairs : xarray.Dataset or None
        The per-unit metrics: per image pair (``hpatches``, ``results.h5`` group ``pairs``) or
        per benchmark file (``patches``, group ``files``).
    db : Path or None
        The results database the run was recorded in (None: not recorded).
    experiment_id : int or None
        The experiment's id in ``db``.
    """

    benchmark: str
    tag: str
    config: dict[str, Any]
    config_hash: str
    export_hash: str
    directory: Path
    status: str = "ok"
    error: str = ""
    exported: bool = False
    evaluated: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    summaries: dict[str, Any] = field(default_factory=dict)
    metric_set: xr.Dataset | None = None
    scene_metrics: xr.Dataset | None = None
    pairs: xr.Dataset | None = None
    db: Path | None = None
    experiment_id: int | None = None
    exception: BaseException | None = field(default=None, repr=False)

    @property
    def files(self) -> dict[str, Path]:
        """The output files and folders of the run."""
        rundir = self._rundir()
        return {
            "conf": rundir.conf,
            "predictions": rundir.predictions,
            "results": rundir.results,
            "summaries": rundir.summaries,
            "run": rundir.run_json,
            "plots": rundir.plots,
            "matches": rundir.matches,
        }

    def _rundir(self) -> RunDir:
        return RunDir(self.directory.parent.parent.parent, self.benchmark, self.tag)

    def open_cube(self, *, chunks: Any = None) -> xr.Dataset:
        """The per-query QueryCube of ``results.h5``."""
        return cubes.open_cube(self._rundir().results, chunks=chunks)

    def metadata(self) -> dict[str, object]:
        """The DescriptorWorkbench metadata of the run (:func:`metricalc.metrics.metadata_for`)."""
        if self.metric_set is None or self.scene_metrics is None:
            raise InvalidInputError(f"run {self.tag!r} has no results ({self.status})")
        return metadata_for(self.metric_set, self.scene_metrics, self.tag)

    def metadata_string(self) -> str:
        """:meth:`metadata` as a ``key=value;`` string."""
        return format_metadata(self.metadata())

    def raise_for_status(self) -> RunResult:
        """Raise the exception of a failed run; return the result otherwise."""
        if self.exception is not None:
            raise self.exception
        return self


def _refuse(rundir: RunDir, old: Mapping[str, Any], new: Mapping[str, Any], flag: str) -> None:
    sections = ("data", "model") if flag == "--overwrite" else ("eval",)
    lines = config_diff(old, new, sections)
    if lines:
        what = "data/model" if flag == "--overwrite" else "eval"
        shown = "\n  ".join(lines)
        raise InvalidInputError(
            f"the {what} configuration differs from the one of tag "
            f"{rundir.path.name!r} ({rundir.conf}):\n  {shown}\n"
            f"rerun with {flag} to replace the cached "
            f"{'predictions and results' if flag == '--overwrite' else 'results'}, or use "
            "another --tag"
        )


def _load_cached(bench: Benchmark, rundir: RunDir, conf: Mapping[str, Any]) -> Evaluation:
    cube = cubes.open_cube(rundir.results)
    metrics, scenes = bench.metrics(cube, conf)
    summaries = rundir.read_json(rundir.summaries) or {}
    units = open_pairs(rundir.results, group=bench.units_group)
    return Evaluation(cube, units, summaries, metrics, scenes)


def _save(rundir: RunDir, evaluation: Evaluation, group: str) -> None:
    write_results_h5(rundir.results, evaluation.cube, evaluation.pairs, group=group)
    for stem, ax in evaluation.figures.items():
        save_figure(ax, rundir.plots / stem)
    rundir.write_json(rundir.summaries, evaluation.summaries)  # last: marks the results complete


def run(
    benchmark: str,
    conf: str | os.PathLike[str] | None = None,
    *,
    tag: str | None = None,
    overrides: Sequence[str] = (),
    overwrite: bool = False,
    overwrite_eval: bool = False,
    scheduler: str = "threads",
    workers: int | None = None,
    outputs: str | os.PathLike[str] = DEFAULT_OUTPUTS,
    db: str | os.PathLike[str] | bool = True,
    progress: bool = False,
    preset: str | None = None,
) -> RunResult:
    """Run (or read from the cache) one experiment on a benchmark.

    Parameters
    ----------
    benchmark : str
        ``"hpatches"`` or ``"patches"`` (:data:`BENCHMARKS`).
    conf : path or name, optional
        A config file or the name of a shipped config (``"sift"``, ``"orb"``, ...); None for
        the defaults.
    tag : str, optional
        The experiment's name (default: the config name, else the preset name).
    overrides : sequence of str
        ``key=value`` overrides (``"eval.ransac_th=[1,2,3]"``, ``"data.quick=true"``).
    overwrite, overwrite_eval : bool
        Redo everything / only the evaluation (module docstring).
    scheduler : str
        ``"threads"``, ``"processes"``, ``"synchronous"`` or a dask.distributed address.
    workers : int, optional
        Local pool size (default: the CPU count).
    outputs : path
        The outputs root (default ``outputs``).
    db : path or bool
        The results database the run is recorded in (:func:`metricalc.store.record_experiment`,
        one upsert per call: ok, failed, interrupted or read from the cache): True (default) for
        ``<outputs>/metricalc.sqlite`` (:func:`default_db`), a path for another file, False to
        record nothing. The file is opened (created, migrated) before any work, so a bad
        database is refused up front.
    progress : bool
        Show progress bars.
    preset : str, optional
        A protocol preset of the benchmark (:data:`metricalc.presets.PRESETS`, e.g.
        ``"gluefactory"`` for ``hpatches``): its settings are defaults that ``conf`` and
        ``overrides`` override; its name is the config key ``eval.preset``.

    Returns
    -------
    RunResult
        ``status == "error"`` (with ``error`` and ``exception``) when the export or the
        evaluation failed; :meth:`RunResult.raise_for_status` re-raises it.

    Raises
    ------
    InvalidInputError
        Before any work: an unknown benchmark, a malformed config or override, a bad value,
        a configuration that conflicts with the cached run, a tag in use by another process,
        a ``db`` that is not a metricalc database. Refused runs are not recorded.
    metricalc.store.DatabaseBusyError
        The database stayed locked by other writers for longer than its busy timeout when the
        run was recorded (the run's files are complete: a rerun reads them from the cache and
        records it).
    """
    started, started_at = time.perf_counter(), _now()
    bench = get_benchmark(benchmark)
    config = load_config(
        conf,
        benchmark=benchmark,
        defaults=bench.default_conf,
        benchmarks=list(BENCHMARKS),
        overrides=overrides,
        preset=None if preset is None else preset_for(preset, f"run {benchmark}"),
    )
    bench.validate(config)
    default_tag = config.name or preset  # the config's name, else the preset's
    if tag is None and default_tag is None:
        raise InvalidInputError("give a config (--conf) or a tag (--tag) to name the run")
    tag = check_tag(tag if tag is not None else default_tag)
    pool = Scheduler(scheduler, workers=workers)  # checks both; starts nothing yet
    database = _database(db, outputs)
    values = config.values
    export_hash = config_hash({s: values[s] for s in ("data", "model")})
    rundir = RunDir(Path(outputs), benchmark, tag)
    result = RunResult(
        benchmark=benchmark,
        tag=tag,
        config=values,
        config_hash=config_hash(values),
        export_hash=export_hash,
        directory=rundir.path,
        versions=library_versions(),
        started_at=started_at,
    )
    with rundir.lock():
        previous = _reset_folder(rundir, values, overwrite=overwrite, overwrite_eval=overwrite_eval)
        timings = dict(previous.get("timings") or {})
        ctx = Context(rundir, values, tag, benchmark, pool, export_hash, progress)
        try:
            evaluation = _evaluation(bench, ctx, timings, result)
            result.summaries = json_safe(evaluation.summaries)  # as in summaries.json
            result.metric_set, result.scene_metrics = evaluation.metrics, evaluation.scenes
            result.pairs = evaluation.pairs
        except KeyboardInterrupt:
            result.status, result.error = "interrupted", "KeyboardInterrupt"
            _finish(rundir, result, timings, started)
            _record(database, result)
            raise
        except Exception as error:  # recorded as a failed run, returned to the caller
            result.status, result.error = "error", f"{type(error).__name__}: {error}"
            result.exception = error
        _finish(rundir, result, timings, started)
        _record(database, result)  # under the tag's lock: the database row matches the folder
    return result


def _reset_folder(
    rundir: RunDir, values: dict[str, Any], *, overwrite: bool, overwrite_eval: bool
) -> dict[str, Any]:
    """Check the run folder's configuration against ``values`` (refusing a conflict), clear
    what must be redone, write ``conf.yaml``; the previous ``run.json`` when it is kept."""
    old = rundir.read_conf()
    if old is not None and not overwrite:
        if rundir.has_predictions() or rundir.parts.is_dir():
            _refuse(rundir, old, values, "--overwrite")
        elif config_diff(old, values, ("data", "model")):
            old = None  # nothing was exported with the stored configuration: start afresh
        if old is not None and not overwrite_eval and rundir.has_results():
            _refuse(rundir, old, values, "--overwrite_eval")
    fresh = overwrite or old is None  # without conf.yaml nothing in the folder is trusted
    previous = {} if fresh else (rundir.read_json(rundir.run_json) or {})
    if fresh:
        rundir.clear_all()
    elif overwrite_eval:
        rundir.clear_results()
    rundir.clear_stale_parts()
    rundir.write_conf(values)
    return previous


def _evaluation(
    bench: Benchmark, ctx: Context, timings: dict[str, Any], result: RunResult
) -> Evaluation:
    """The run's evaluation: read from the cache, or exported (when the predictions are
    missing) and evaluated, timed into ``timings`` and saved."""
    rundir = ctx.rundir
    if rundir.has_predictions() and rundir.has_results():
        return _load_cached(bench, rundir, ctx.conf)  # no scheduler needed
    with ctx.scheduler:
        if not rundir.has_predictions():
            t0 = time.perf_counter()
            bench.export(ctx)
            rundir.clear_stale_parts()  # merged into predictions.h5
            timings["export"] = time.perf_counter() - t0
            result.exported = True
            rundir.clear_results()  # results of other predictions are stale
        t0 = time.perf_counter()
        evaluation = bench.evaluate(ctx)
        _save(rundir, evaluation, bench.units_group)
        timings["evaluation"] = time.perf_counter() - t0
        result.evaluated = True
    return evaluation


def _database(db: str | os.PathLike[str] | bool, outputs: str | os.PathLike[str]) -> Path | None:
    """The database file of ``run(db=...)``, opened once (created, migrated) to fail early."""
    if db is False:
        return None
    path = default_db(outputs) if db is True else db
    if not isinstance(path, str | os.PathLike):
        raise InvalidInputError(f"db must be a database path, True or False; got {db!r}")
    with open_db(path):
        pass
    return Path(path)


def _record(database: Path | None, result: RunResult) -> None:
    """Upsert the run into the results database: the experiment row (status, error, config,
    timings, versions) and, for a run with results, its metric set and per-scene rows."""
    if database is None:
        return
    status = "ok" if result.status == "ok" else "error"  # "interrupted" is a failed run
    error = result.error
    if result.status == "interrupted":
        error = "KeyboardInterrupt: the run was interrupted"
    result.experiment_id = record_experiment(
        database,
        tag=result.tag,
        benchmark=result.benchmark,
        config=result.config,
        status=status,
        error=error,
        timings=result.timings,
        versions=result.versions,
        metrics=_recorded_metrics(result),
        scenes=result.scene_metrics,
    )
    result.db = database


def _recorded_metrics(result: RunResult) -> xr.Dataset | None:
    """The metric set plus the benchmark's own scalar summaries (the homography AUCs, medians
    and reported threshold of ``summaries.json``), which the database stores under ``extra``."""
    metrics = result.metric_set
    if metrics is None:
        return None
    own = {
        key: ("descriptor", [np.nan if value is None else float(value)])
        for key, value in result.summaries.items()
        if key not in metrics.data_vars
        and (value is None or (isinstance(value, int | float) and not isinstance(value, bool)))
    }
    return metrics.assign(own)


def _finish(rundir: RunDir, result: RunResult, timings: dict[str, float], started: float) -> None:
    timings["total"] = time.perf_counter() - started
    result.timings = timings
    result.finished_at = _now()
    rundir.write_json(
        rundir.run_json,
        {
            "benchmark": result.benchmark,
            "tag": result.tag,
            "status": result.status,
            "error": result.error,
            "config_hash": result.config_hash,
            "export_hash": result.export_hash,
            "exported": result.exported,
            "evaluated": result.evaluated,
            "timings": timings,
            "versions": result.versions,
            "started_at": result.started_at,
            "finished_at": result.finished_at,
        },
    )

