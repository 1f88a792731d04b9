"""The reference rows of a study: its ``reported`` published numbers, checked against its table.

A study names published numbers of :data:`metricalc.datasets.reported.REPORTED` under the key
``reported`` (keys, key patterns or filters). They are shown only beside measurements of their
own protocol and data: the protocol of the study is the ``preset`` attr of its cubes (recorded
by ``--preset``), else their ``benchmark`` attr; a number of one split (its ``split`` field) is
shown only beside cubes of that split (their ``split`` attr, where they have one); a published
number was measured on a published release, so none is shown beside cubes computed on data
metricalc generated (their ``dataset`` attr starts with ``synthetic-``:
:func:`metricalc.hpatches.is_synthetic`, e.g. the cubes of ``patches hpatches-eval`` on
``make_hpatches17_set``'s set); and each number's metric must be a column of the table. A number
of another protocol, split or data, or of a metric the table does not show, is refused with an
error that says why, rather than shown in a block of its own (docs/report.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from metricalc.datasets.reported import ReportedResult
from metricalc.errors import InvalidInputError
from metricalc.hpatches import is_synthetic
from metricalc.plotting.reference_rows import ReferenceRow

__all__ = ["reference_rows", "study_protocol"]


def study_protocol(attrs: Mapping[str, object]) -> str:
    """The protocol of a study's metric set: its ``preset`` attr, else ``benchmark``, else "".

    Examples
    --------
    >>> study_protocol({"preset": "gluefactory", "benchmark": "x"}), study_protocol({})
    ('gluefactory', '')
    """
    return str(attrs.get("preset") or attrs.get("benchmark") or "")


def _check(
    entry: ReportedResult, protocol: str, attrs: Mapping[str, object], columns: Sequence[str]
) -> None:
    if entry.protocol != protocol:
        evaluated = f"protocol {protocol!r}" if protocol else "no preset"
        raise InvalidInputError(
            f"reported: {entry.key} is a number of protocol {entry.protocol!r}; the study's "
            f"cubes were evaluated under {evaluated} (their preset attr): a published number is "
            "shown only beside measurements of its own protocol"
        )
    split = str(attrs.get("split", ""))
    if split and entry.split and entry.split != split:
        raise InvalidInputError(
            f"reported: {entry.key} is a number of split {entry.split!r}; the study's cubes hold "
            f"split {split!r} (their split attr): a published number is shown only beside "
            "measurements of its own split"
        )
    dataset = str(attrs.get("dataset", ""))
    if is_synthetic(dataset):
        raise InvalidInputError(
            f"reported: {entry.key} was measured on {entry.dataset}; the study's cubes were "
            f"computed on generated data ({dataset!r}, their dataset attr): a published number "
            "is shown only beside measurements on its own data"
        )
    if entry.metric not in columns:
        raise InvalidInputError(
            f"reported: {entry.key} reports {entry.metric!r}, which is not a column of the "
            f"study's table {list(columns)}; add it to metrics"
        )


def reference_rows(
    entries: Sequence[ReportedResult], attrs: Mapping[str, object], columns: Sequence[str]
) -> list[ReferenceRow]:
    """One :class:`ReferenceRow` per method, dataset and setting of ``entries``.

    A row is named by its method, followed by its setting where the same method comes with
    several settings; its sources are the files the numbers were read in (``"(quoted, not
    checked)"`` after a source that was not).

    Raises
    ------
    InvalidInputError
        A number of a protocol other than the study's (:func:`study_protocol`), of another
        split, beside cubes of generated data, or of a metric that is not a column of the
        table.
    """
    protocol = study_protocol(attrs)
    groups: dict[tuple[str, str, str], list[ReportedResult]] = {}
    for entry in entries:
        _check(entry, protocol, attrs, columns)
        groups.setdefault((entry.method, entry.dataset, entry.setting), []).append(entry)
    settings: dict[str, int] = {}
    for method, _, _ in groups:
        settings[method] = settings.get(method, 0) + 1
    rows = []
    for (method, _, setting), group in groups.items():
        name = f"{method}, {setting}" if settings[method] > 1 else method
        sources = {e.source + ("" if e.checked else " (quoted, not checked)") for e in group}
        rows.append(
            ReferenceRow(
                name,
                {e.metric: e.value for e in group},
                tuple(sorted(sources)),
                protocol,
                tuple(e.key for e in group),
            )
        )
    return rows
