"""Reproducible experiment runs: export predictions once, evaluate the cache (docs/experiments.md).

``metricalc run <benchmark> --conf CONF --tag TAG`` and :func:`run` write
``outputs/results/<benchmark>/<tag>/`` (``conf.yaml``, ``predictions.h5``, ``results.h5``,
``summaries.json``, ``run.json``, ``plots/``, ``matches/``). See ``docs/experiments.md``.

>>> from metricalc import experiment
>>> sorted(experiment.BENCHMARKS), "sift" in experiment.list_configs()
(['hpatches', 'patches'], True)
"""

from metricalc.experiment.config import Config, config_diff, config_hash, list_configs, load_config
from metricalc.experiment.run import (
    BENCHMARKS,
    DEFAULT_OUTPUTS,
    RunResult,
    default_db,
    get_benchmark,
    run,
)
from metricalc.experiment.scheduler import LOCAL_SCHEDULERS, Scheduler

__all__ = [
    "BENCHMARKS",
    "DEFAULT_OUTPUTS",
    "LOCAL_SCHEDULERS",
    "Config",
    "RunResult",
    "Scheduler",
    "config_diff",
    "config_hash",
    "default_db",
    "get_benchmark",
    "list_configs",
    "load_config",
    "run",
]
