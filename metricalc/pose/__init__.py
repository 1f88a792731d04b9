"""The old import path of :mod:`metricalc.benchmarks.twoview`, kept for code that imports it: its
public names and its old module paths (``metricalc.pose.<module>``, :mod:`metricalc.moved`).

``metricalc.pose.NAME`` is ``metricalc.benchmarks.twoview.NAME`` (loaded on first use); the modules
moved to ``metricalc/benchmarks/twoview/`` (docs/architecture.md, "One benchmark, one room").
"""

from __future__ import annotations

from importlib import import_module

from metricalc.moved import install

HOME = "metricalc.benchmarks.twoview"
"""The package this one re-exports."""

install()  # its old module paths (metricalc.pose.<module>) import the moved modules


def __getattr__(name: str) -> object:
    return getattr(import_module(HOME), name)


def __dir__() -> list[str]:
    return sorted(getattr(import_module(HOME), "__all__", []))
