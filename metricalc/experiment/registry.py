"""The benchmarks an experiment run can run, by name, each imported when first asked for.

The runner (:mod:`metricalc.experiment.run`) sits below the benchmarks' rooms: it names each
benchmark's run class by its module path (as the ``metricalc`` command names its verbs) instead of
importing it, so a shared layer never imports a benchmark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from metricalc.experiment.benchmark import Benchmark


class BenchmarkTable(Mapping[str, Benchmark]):
    """Benchmark name -> its run object, made from ``"package.module:Class"`` on first access and
    kept (so ``table["hpatches"] is table["hpatches"]``)."""

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._made: dict[str, Benchmark] = {}

    def __getitem__(self, name: str) -> Benchmark:
        if name not in self._made:
            module, _, cls = self._where[name].partition(":")
            made: Benchmark = getattr(import_module(module), cls)()
            self._made[name] = made
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
