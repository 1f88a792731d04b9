"""trec_eval's z-scores (``-Z zscores_file``, ``get_zscores.c`` and ``convert_zscores.c``).

A z-scores file has one line ``qid measure mean stddev`` per query and measure (the measure by
its printed name, ``P_10``). Each per-query value :math:`v` becomes :math:`(v - \\mu) / \\sigma`;
where :math:`\\sigma = 0` it becomes 0 if :math:`v = \\mu`, else trec_eval's missing value
:data:`MISSING` (-1000000), and so does a value whose query or measure the file lacks. The
``all`` line then summarises the z-scores as it summarises values (means, sums, geometric means).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from metricalc.errors import InvalidInputError

__all__ = ["MISSING", "ZScores", "read_zscores"]

MISSING = -1000000.0
"""trec_eval's MISSING_ZSCORE_VALUE."""


@dataclass(frozen=True, eq=False)
class ZScores:
    """Mean and standard deviation (columns ``mean``, ``sd``) per (query, measure), indexed by
    ``(qid, measure)`` without repeats."""

    table: pd.DataFrame

    def convert(self, queries: list[str], name: str, values: np.ndarray) -> np.ndarray:
        """The z-scores of ``values`` of measure ``name`` for ``queries``.

        Examples
        --------
        >>> z = ZScores(pd.DataFrame({"mean": [0.5, 2.0], "sd": [0.25, 0.0]},
        ...     index=pd.MultiIndex.from_tuples([("q1", "map"), ("q2", "map")])))
        >>> z.convert(["q1", "q2", "q3"], "map", np.array([1.0, 3.0, 1.0])).tolist()
        [2.0, -1000000.0, -1000000.0]
        """
        keys = pd.MultiIndex.from_arrays([queries, [name] * len(queries)])
        at = self.table.index.get_indexer(keys)
        known = at >= 0
        mean = np.where(known, self.table["mean"].to_numpy(dtype=np.float64)[at], np.nan)
        sd = np.where(known, self.table["sd"].to_numpy(dtype=np.float64)[at], np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = (values - mean) / sd
        out = np.where(sd != 0, scaled, np.where(values == mean, 0.0, MISSING))
        result: np.ndarray = np.where(known, out, MISSING)
        return result


def read_zscores(path: str | os.PathLike[str]) -> ZScores:
    """Read a z-scores file (``qid measure mean stddev`` per line; ``nan`` is a number here, as
    C's ``atof`` reads it).

    Examples
    --------
    >>> from tempfile import TemporaryDirectory
    >>> with TemporaryDirectory() as folder:
    ...     path = Path(folder) / "z"
    ...     _ = path.write_text("301 map 0.2 0.1\\n")
    ...     read_zscores(path).convert(["301"], "map", np.array([0.4])).round(6).tolist()
    [2.0]
    """
    path = Path(path)
    rows: list[tuple[str, str, float, float]] = []
    try:
        lines = path.read_bytes().decode("utf-8", "replace").splitlines()
    except OSError as error:
        raise InvalidInputError(f"{path}: cannot read the z-scores file "
                                f"({error.strerror or error})") from None
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            raise InvalidInputError(
                f"{path} line {number}: expected 4 fields 'qid measure mean stddev'; found "
                f"{len(fields)}"
            )
        try:
            mean, sd = float(fields[2]), float(fields[3])
        except ValueError:
            raise InvalidInputError(
                f"{path} line {number}: mean and stddev must be numbers; got {fields[2]!r} "
                f"{fields[3]!r}"
            ) from None
        rows.append((fields[0], fields[1], mean, sd))
    if not rows:
        raise InvalidInputError(f"{path}: the z-scores file is empty; expected "
                                "'qid measure mean stddev' lines")
    frame = pd.DataFrame(rows, columns=["qid", "measure", "mean", "sd"])
    return ZScores(frame.drop_duplicates(["qid", "measure"]).set_index(["qid", "measure"]))
