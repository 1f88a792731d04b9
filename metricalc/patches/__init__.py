"""The old import path of :mod:`metricalc.benchmarks.hpatches_patches`, kept for code that imports
it: its public names and its old module paths (``metricalc.patches.<module>``,
:mod:`metricalc.moved`).

``metricalc.patches.NAME`` is ``metricalc.benchmarks.hpatches_patches.NAME`` (loaded on first use);
the modules moved to ``metricalc/benchmarks/hpatches_patches/`` (docs/architecture.md, "One
benchmark, one room").
"""

from __future__ import annotations

from importlib import import_module

from metricalc.moved import install

HOME = "metricalc.benchmarks.hpatches_patches"
"""The package this one re-exports."""

install()  # its old module paths (metricalc.patches.<module>) import the moved modules


def __getattr__(name: str) -> object:
    return getattr(import_module(HOME), name)


def __dir__() -> list[str]:
    return sorted(getattr(import_module(HOME), "__all__", []))
