"""Reference rows of a table: published numbers shown below the measured rows, never mixed in.

A :class:`ReferenceRow` is plain data (a name, values by column, its sources), so that this
layer needs nothing from the registry of published numbers
(:mod:`metricalc.datasets.reported`); :func:`metricalc.report.reference.reference_rows` builds
them for a study. :class:`~metricalc.plotting.tables.Table` renders them after its measured
rows, each marked: the name ends in ``(reported)``, LaTeX and Markdown print the row in italics
after a rule, HTML gives the row the class ``reported`` (italic, gray), CSV has a ``kind`` column
(``measured`` or ``reported``). A reference row has no letter, is never bold or underlined, and
is never compared: best and second best, and the significance letters, are those of the
measured rows only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from metricalc.errors import InvalidInputError

__all__ = [
    "HTML_STYLE",
    "REPORTED_SUFFIX",
    "ReferenceRow",
    "check_reference_rows",
    "reference_sentence",
]

REPORTED_SUFFIX = " (reported)"
"""What the name of every reference row ends with."""

HTML_STYLE = "font-style:italic;color:#6b6b6b"
"""The inline style of a reference row in HTML (the page needs no stylesheet for it)."""


@dataclass(frozen=True)
class ReferenceRow:
    """One published row: ``values`` by table column (fractions for rates, as the metric set),
    ``sources`` the files or papers the numbers come from, ``protocol`` the protocol name."""

    name: str
    values: Mapping[str, float]
    sources: tuple[str, ...] = ()
    protocol: str = ""
    keys: tuple[str, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        """The printed name: ``name (reported)``."""
        return self.name + REPORTED_SUFFIX


def check_reference_rows(rows: object, columns: list[str]) -> list[ReferenceRow]:
    """``rows`` as a list of :class:`ReferenceRow` whose values are finite numbers in columns
    of the table (a row may lack some columns: it prints a dash there)."""
    if rows is None:
        return []
    if isinstance(rows, ReferenceRow) or not isinstance(rows, list | tuple):
        raise InvalidInputError(f"Table: reported must be a list of ReferenceRow; got {rows!r}")
    checked = []
    for row in rows:
        if not isinstance(row, ReferenceRow):
            raise InvalidInputError(f"Table: reported rows must be ReferenceRow; got {row!r}")
        unknown = [c for c in row.values if c not in columns]
        if unknown:
            raise InvalidInputError(
                f"Table: reported row {row.name!r} has values for {unknown}, which are not "
                f"columns of the table {columns}"
            )
        bad = {c: v for c, v in row.values.items() if not math.isfinite(float(v))}
        if bad:
            raise InvalidInputError(f"Table: reported row {row.name!r} has non-finite {bad}")
        checked.append(row)
    return checked


def reference_sentence(rows: list[ReferenceRow]) -> str:
    """The caption sentence of the reference rows ("" without any): what they are and their
    sources."""
    if not rows:
        return ""
    sources = sorted({s for row in rows for s in row.sources})
    text = (
        f"Rows marked{REPORTED_SUFFIX} are published numbers, shown for reference only: not "
        "ranked, marked or tested against the measured rows"
    )
    return text + (f"; sources: {'; '.join(sources)}." if sources else ".")
