"""Published numbers: the reference rows tables and reports show beside measured results.

Every entry of :data:`REPORTED` is one published number: the method, the metric under
metricalc's name for it, the value as a fraction, the protocol (the ``--preset`` name of the
evaluation it comes from), the dataset (the published release it was measured on) and the split
(``split``, where the protocol has named splits: a report checks it against its cubes'), the
paper and table, the code that produced it and
the file where it is printed. ``checked`` says whether that file was read: ``True`` when the
number was read in ``source`` (a public repository file, with its commit), ``False`` when the
number is only quoted (in metricalc's own notes) and no stored public text printing it was found;
such entries say so in ``notes`` and are never a test's reference.

Sources read (see docs/reported.md, generated from this registry):

- Glue Factory (cvg/glue-factory ``README.md``, commit 071e645): SuperPoint + LightGlue and
  SuperPoint + SuperGlue on HPatches (homography AUC at 1 / 3 / 5 px, the expected-results
  printout and the DLT / OpenCV / PoseLib table) and on MegaDepth-1500 (pose AUC at 5 / 10 /
  20 degrees, the printout and the pycolmap / OpenCV / PoseLib table);
- rpautrat/SuperPoint ``README.md`` (commit 20f0fab): homography estimation accuracy on
  HPatches at e = 1 / 3 / 5 px of SuperPoint (that implementation and MagicLeap's pretrained
  model), SIFT and ORB;
- hpatches-benchmark Python results on split full: quoted, not found in stored text
  (``docs/results.md`` and ``python/utils/docs/results.md`` of hpatches/hpatches-benchmark are
  empty placeholders; ``python/hpatches_results.pdf``, the results figure, is binary).

>>> entry = reported_by_key()["gluefactory/superpoint+lightglue/poselib/H_error_ransac@1px"]
>>> entry.value, entry.protocol, entry.checked
(0.371, 'gluefactory', True)
>>> [e.method for e in select_reported([{"protocol": "hpatches-cvpr17",
...                                      "metric": "hpatches17_matching_map"}])][:2]
['SIFT', 'RootSIFT']
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources

from metricalc.errors import InvalidInputError

__all__ = [
    "FILTER_FIELDS",
    "REPORTED",
    "ReportedResult",
    "reported_by_key",
    "reported_markdown",
    "select_reported",
]


@dataclass(frozen=True)
class ReportedResult:
    """One published number (a fraction in [0, 1]) and where it comes from.

    ``key`` is ``<protocol>/<method slug>[/<variant>]/<metric>``, unique in :data:`REPORTED`;
    ``split`` is the split of the protocol it was measured on (``""`` where the protocol has
    none), ``setting`` what else fixes the number (estimator, threshold); ``code`` is the code
    that produced it, ``source`` the file that prints it (repository, path, commit).
    """

    key: str
    method: str
    metric: str
    value: float
    protocol: str
    dataset: str
    setting: str
    paper: str
    table: str
    code: str
    source: str
    checked: bool
    notes: str = ""
    split: str = ""


def _slug(method: str) -> str:
    return re.sub(r"[^a-z0-9+]+", "-", method.lower()).strip("-")


_COMMON = ("protocol", "dataset", "setting", "paper", "table", "code", "source", "checked", "notes")
"""The fields every number of one source table shares (a block of ``reported.yaml``)."""

_OPTIONAL = ("split",)
"""The fields a block may leave out (``""``)."""


def _load_reported() -> tuple[ReportedResult, ...]:
    """The entries of ``reported.yaml`` (package data), checked: every block names all of
    :data:`_COMMON` (and may name :data:`_OPTIONAL`), every value is a fraction in [0, 1], every
    key is unique."""
    import yaml

    text = resources.files("metricalc.datasets").joinpath("reported.yaml").read_text("utf-8")
    entries: list[ReportedResult] = []
    for block in yaml.safe_load(text):
        missing = [f for f in _COMMON if f not in block]
        if missing:
            raise InvalidInputError(f"reported.yaml: a block lacks {missing}")
        common = {f: block[f] for f in _COMMON} | {f: str(block.get(f, "")) for f in _OPTIONAL}
        for method, variants in block["values"].items():
            for variant, metrics in variants.items():
                parts = [common["protocol"], _slug(method), *([variant] if variant != "-" else [])]
                for metric, value in metrics.items():
                    if not 0 <= value <= 1:
                        raise InvalidInputError(f"reported.yaml: {method} {metric} = {value}")
                    key = "/".join([*parts, metric])
                    entries.append(ReportedResult(key, method, metric, float(value), **common))
    keys = [e.key for e in entries]
    if len(set(keys)) != len(keys):
        raise InvalidInputError("reported.yaml: a key appears twice")
    return tuple(entries)


REPORTED: tuple[ReportedResult, ...] = _load_reported()
"""Every published number metricalc knows (the table ``metricalc/datasets/reported.yaml``), in
the order of docs/reported.md."""

FILTER_FIELDS = ("protocol", "dataset", "split", "method", "metric", "setting")
"""The fields a filter of :func:`select_reported` may name."""


def reported_by_key() -> dict[str, ReportedResult]:
    """:data:`REPORTED` by key."""
    return {entry.key: entry for entry in REPORTED}


def _matches(entry: ReportedResult, item: str | Mapping[str, str]) -> bool:
    if isinstance(item, str):
        return fnmatch.fnmatchcase(entry.key, item)
    return all(getattr(entry, field) == value for field, value in item.items())


def select_reported(items: Iterable[str | Mapping[str, str]]) -> tuple[ReportedResult, ...]:
    """The entries named by ``items``, in registry order, each once.

    An item is a key, a key pattern (``fnmatch``: ``"gluefactory/*/poselib/*"``) or a filter
    mapping fields of :data:`FILTER_FIELDS` to values (``{"protocol": "hpatches-cvpr17"}``).

    Raises
    ------
    InvalidInputError
        An item that is neither, names an unknown field, or matches no entry.
    """
    chosen: set[str] = set()
    for item in items:
        if isinstance(item, Mapping):
            unknown = [f for f in item if f not in FILTER_FIELDS]
            if unknown or not item:
                raise InvalidInputError(
                    f"reported: filter {dict(item)!r} must map some of "
                    f"{', '.join(FILTER_FIELDS)} to values"
                )
        elif not isinstance(item, str):
            raise InvalidInputError(
                f"reported: expected a key, a key pattern or a filter mapping; got {item!r}"
            )
        found = {entry.key for entry in REPORTED if _matches(entry, item)}
        if not found:
            raise InvalidInputError(
                f"reported: {item!r} matches no published number (docs/reported.md lists them)"
            )
        chosen |= found
    return tuple(entry for entry in REPORTED if entry.key in chosen)


def _where(entry: ReportedResult) -> str:
    """``dataset, split X, setting``, leaving out the empty parts."""
    split = f"split {entry.split}" if entry.split else ""
    return ", ".join(part for part in (entry.dataset, split, entry.setting) if part)


def reported_markdown() -> str:
    """The table of every published number (docs/reported.md holds it; a test checks they
    agree): one row per entry with its key, value in percent, dataset, split, setting and
    source.

    Examples
    --------
    >>> print(reported_markdown().splitlines()[0])
    | key | method | metric | value (%) | dataset, split, setting | paper, table | source | checked |
    """  # noqa: E501
    lines = [
        "| key | method | metric | value (%) | dataset, split, setting | paper, table | source "
        "| checked |",
        "| --- | --- | --- | ---: | --- | --- | --- | --- |",
    ]
    for e in REPORTED:
        cells = [
            f"`{e.key}`", e.method, f"`{e.metric}`", f"{100 * e.value:.2f}",
            _where(e), f"{e.paper}; {e.table}", e.source,
            "yes" if e.checked else "no",
        ]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
