"""What a report is made of: :class:`Report` (what :func:`metricalc.report.build` computed and
wrote) and :class:`Section` (an extra section of its HTML page).

Both the builder and the section hooks (:mod:`metricalc.report.sections`) import them from here,
so neither imports the other's module for its types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import xarray as xr

from metricalc.plotting.tables import Table
from metricalc.report.analysis import ColumnTests
from metricalc.report.study import Study

__all__ = ["Report", "Section"]


@dataclass
class Report:
    """What :func:`~metricalc.report.build` computed and wrote."""

    out: Path
    study: Study
    cubes: dict[str, xr.Dataset]
    metrics: xr.Dataset
    table: Table
    tests: dict[str, ColumnTests]
    sentences: list[str]
    rankings: list[str]
    notes: list[str]
    files: list[Path] = field(default_factory=list)

    @property
    def html(self) -> Path:
        """The HTML page (``out/report.html``)."""
        return self.out / "report.html"


@dataclass(frozen=True)
class Section:
    """An extra section of the HTML page: ``html`` is inserted as is (escape your names)."""

    name: str
    title: str
    html: str
