"""Published numbers: the reference rows tables and reports show beside measured results.

Every entry of :data:`REPORTED` is one published number: the method, the metric under
metricalc's name for it, the value as a fraction, the protocol (the ``--preset`` name of the
evaluation it comes from) and the dataset, the paper and table, the code that produced it and
the file where it is printed. ``checked`` says whether that file was read: ``True`` when the
number was read in ``source`` (a public repository file, with its commit), ``False`` when the
number is only quoted (by metricalc's issue 18) and no stored public text printing it was found;
such entries say so in ``notes`` and are never a test's reference.

Sources read (see docs/reported.md, generated from this registry):

- Glue Factory (cvg/glue-factory ``README.md``, commit 071e645): SuperPoint + LightGlue and
  SuperPoint + SuperGlue on HPatches (homography AUC at 1 / 3 / 5 px, the expected-results
  printout and the DLT / OpenCV / PoseLib table) and on MegaDepth-1500 (pose AUC at 5 / 10 /
  20 degrees, the printout and the pycolmap / OpenCV / PoseLib table);
- rpautrat/SuperPoint ``README.md`` (commit 20f0fab): homography estimation accuracy on
  HPatches at e = 1 / 3 / 5 px of SuperPoint (that implementation and MagicLeap's pretrained
  model), SIFT and ORB;
- hpatches-benchmark Python results on split full (issue 18): quoted, not found in stored text
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
    ``setting`` says what else fixes the number (split, estimator, threshold); ``code`` is the
    code that produced it, ``source`` the file that prints it (repository, path, commit).
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


def _slug(method: str) -> str:
    return re.sub(r"[^a-z0-9+]+", "-", method.lower()).strip("-")


def _rows(
    common: Mapping[str, str | bool],
    method: str,
    variant: str,
    values: Mapping[str, float],
    *,
    scale: float = 1.0,
) -> list[ReportedResult]:
    """The entries of one method's row of a source (values divided by ``scale``)."""
    protocol = str(common["protocol"])
    parts = [protocol, _slug(method), *([variant] if variant else [])]
    return [
        ReportedResult(
            key="/".join([*parts, metric]),
            method=method,
            metric=metric,
            value=round(value / scale, 6),
            **common,  # type: ignore[arg-type]
        )
        for metric, value in values.items()
    ]


_GLUEFACTORY = "cvg/glue-factory README.md (commit 071e64599b71d627d4acd26361ed95e65bd7a0d6)"
_LIGHTGLUE = "Lindenberger, Sarlin, Pollefeys: LightGlue, ICCV 2023"


def _gluefactory_hpatches() -> list[ReportedResult]:
    def common(setting: str, table: str, notes: str = "") -> dict[str, str | bool]:
        return {
            "protocol": "gluefactory", "dataset": "HPatches sequences", "setting": setting,
            "paper": _LIGHTGLUE, "table": table,
            "code": "cvg/glue-factory gluefactory/eval/hpatches.py", "source": _GLUEFACTORY,
            "checked": True, "notes": notes,
        }  # fmt: skip

    printout = common(
        "estimator opencv, default ransac_th", "README, HPatches: expected results",
        "`python -m gluefactory.eval.hpatches --conf superpoint+lightglue-official`; the "
        "README prints the mAA as ransac_mAA",
    )
    table = "README, HPatches: AUC of the homography error at 1/3/5 px"
    at = ("@1px", "@3px", "@5px")
    rows = _rows(printout, "SuperPoint+LightGlue", "printout", {
        "H_error_dlt@1px": 0.3515, "H_error_dlt@3px": 0.6723, "H_error_dlt@5px": 0.7756,
        "H_error_ransac@1px": 0.3428, "H_error_ransac@3px": 0.5763,
        "H_error_ransac@5px": 0.6943, "H_error_ransac_mAA": 0.5378,
    })  # fmt: skip
    columns = {  # variant -> (metric prefix, setting)
        "dlt": ("H_error_dlt", "DLT on all matches"),
        "opencv": ("H_error_ransac", "estimator opencv"),
        "poselib": ("H_error_ransac", "estimator poselib, ransac_th=-1 (best of a sweep)"),
    }
    published = {
        "SuperPoint+SuperGlue": {"dlt": (32.1, 65.0, 75.7), "opencv": (32.9, 55.7, 68.0),
                                 "poselib": (37.0, 68.2, 78.7)},
        "SuperPoint+LightGlue": {"dlt": (35.1, 67.2, 77.6), "opencv": (34.2, 57.9, 69.9),
                                 "poselib": (37.1, 67.4, 77.8)},
    }  # fmt: skip
    for method, by_variant in published.items():
        for variant, values in by_variant.items():
            prefix, setting = columns[variant]
            rows += _rows(
                common(setting, table), method, variant,
                {prefix + t: v for t, v in zip(at, values, strict=True)}, scale=100.0,
            )  # fmt: skip
    return rows


def _gluefactory_megadepth() -> list[ReportedResult]:
    def common(setting: str, table: str, notes: str = "") -> dict[str, str | bool]:
        return {
            "protocol": "gluefactory", "dataset": "MegaDepth-1500", "setting": setting,
            "paper": _LIGHTGLUE, "table": table,
            "code": "cvg/glue-factory gluefactory/eval/megadepth1500.py",
            "source": _GLUEFACTORY, "checked": True, "notes": notes,
        }  # fmt: skip

    printout = common(
        "estimator opencv, default ransac_th", "README, MegaDepth-1500: expected results",
        "`python -m gluefactory.eval.megadepth1500 --conf superpoint+lightglue-official`; "
        "printed as rel_pose_error@5/10/20 degrees and ransac_mAA",
    )
    rows = _rows(printout, "SuperPoint+LightGlue", "printout", {
        "auc@5": 0.5102, "auc@10": 0.681, "auc@20": 0.8065, "ransac_mAA": 0.6659,
    })  # fmt: skip
    table = "README, MegaDepth-1500: AUC of the pose error at 5/10/20 degrees"
    published = {
        "SuperPoint+SuperGlue": {"pycolmap": (54.4, 70.4, 82.4), "opencv": (48.7, 65.6, 79.0),
                                 "poselib": (64.8, 77.9, 87.0)},
        "SuperPoint+LightGlue": {"pycolmap": (56.7, 72.4, 83.7), "opencv": (51.0, 68.1, 80.7),
                                 "poselib": (66.8, 79.3, 87.9)},
        "SuperPoint+GlueStick": {"pycolmap": (53.2, 69.8, 81.9), "opencv": (46.3, 64.2, 78.1),
                                 "poselib": (64.4, 77.5, 86.5)},
    }  # fmt: skip
    for method, by_variant in published.items():
        for variant, values in by_variant.items():
            metrics = {f"auc@{t}": v for t, v in zip((5, 10, 20), values, strict=True)}
            rows += _rows(common(f"estimator {variant}", table), method, variant, metrics,
                          scale=100.0)  # fmt: skip
    return rows


def _superpoint_hpatches() -> list[ReportedResult]:
    common: dict[str, str | bool] = {
        "protocol": "superpoint", "dataset": "HPatches sequences",
        "setting": "at most 1000 points, NMS 8, viewpoint and illumination",
        "paper": "DeTone, Malisiewicz, Rabinovich: SuperPoint, CVPRW 2018 (reimplementation)",
        "table": "README, Descriptors evaluation: homography estimation, e = 1 / 3 / 5",
        "code": "rpautrat/SuperPoint notebooks/descriptors_evaluation_on_hpatches.ipynb",
        "source": "rpautrat/SuperPoint README.md (commit 20f0fab7250bbc725a5cdd142f0bfc356643cd47)",
        "checked": True,
        "notes": "share of image pairs whose estimated homography is correct within e pixels",
    }  # fmt: skip
    published = {
        "SuperPoint (rpautrat)": (0.483, 0.836, 0.910),
        "SuperPoint (MagicLeap)": (0.438, 0.833, 0.914),
        "SIFT": (0.498, 0.786, 0.786),
        "ORB": (0.162, 0.467, 0.564),
    }
    rows = []
    for method, values in published.items():
        metrics = {f"homography_accuracy@{e}px": v for e, v in zip((1, 3, 5), values, strict=True)}
        rows += _rows(common, method, "", metrics)
    return rows


def _hpatches_cvpr17() -> list[ReportedResult]:
    common: dict[str, str | bool] = {
        "protocol": "hpatches-cvpr17", "dataset": "HPatches patches", "setting": "split full",
        "paper": "Balntas, Lenc, Vedaldi, Mikolajczyk: HPatches, CVPR 2017 (Python results)",
        "table": "hpatches-benchmark Python results, split full",
        "code": "hpatches/hpatches-benchmark python/hpatches_results.py, python/utils/results.py",
        "source": "metricalc issue 18, part 4 (quoted there)",
        "checked": False,
        "notes": "not found in stored public text (docs/results.md and "
        "python/utils/docs/results.md of hpatches-benchmark are empty placeholders; "
        "python/hpatches_results.pdf is binary); verification = mean of the 6 imbalanced APs",
    }  # fmt: skip
    published = {  # verification, matching (percent)
        "SIFT": (65.12, 25.47), "RootSIFT": (58.53, 27.22), "BRIEF": (56.88, 10.48),
        "ORB": (59.11, 15.33), "TFeat-M*": (81.90, 32.68), "HardNet": (88.43, 52.79),
    }  # fmt: skip
    rows = []
    for method, (verification, matching) in published.items():
        metrics = {"hpatches17_verification_map": verification, "hpatches17_matching_map": matching}
        rows += _rows(common, method, "", metrics, scale=100.0)
    return rows


REPORTED: tuple[ReportedResult, ...] = (
    *_hpatches_cvpr17(),
    *_superpoint_hpatches(),
    *_gluefactory_hpatches(),
    *_gluefactory_megadepth(),
)
"""Every published number metricalc knows, in the order of docs/reported.md."""

FILTER_FIELDS = ("protocol", "dataset", "method", "metric", "setting")
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


def reported_markdown() -> str:
    """The table of every published number (docs/reported.md holds it; a test checks they
    agree): one row per entry with its key, value in percent, setting and source.

    Examples
    --------
    >>> print(reported_markdown().splitlines()[0])
    | key | method | metric | value (%) | dataset, setting | paper, table | source | checked |
    """
    lines = [
        "| key | method | metric | value (%) | dataset, setting | paper, table | source "
        "| checked |",
        "| --- | --- | --- | ---: | --- | --- | --- | --- |",
    ]
    for e in REPORTED:
        cells = [
            f"`{e.key}`", e.method, f"`{e.metric}`", f"{100 * e.value:.2f}",
            f"{e.dataset}, {e.setting}", f"{e.paper}; {e.table}", e.source,
            "yes" if e.checked else "no",
        ]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
