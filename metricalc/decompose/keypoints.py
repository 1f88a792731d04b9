r"""Decomposition of keypoint matching: is the detector or the descriptor the bottleneck?

Every query (a keypoint of image 1 of a pair, a row of the QueryCube) whose descriptor has a
nearest neighbour in image k is a prediction, its confidence the negative nearest-neighbour
distance or the negative ratio-test value. The chain has two stages:

- **L** (detector, repeatability): the query has a ground-truth correspondence within
  :math:`\tau` in image k (``n_relevant == 1``);
- **C|L** (descriptor): its nearest neighbour is that correspondence (``nn_correct == 1``).

Recall is counted over all queries of the descriptor (one item each, so one-to-one), which
gives, at the loosest threshold, the identity of vlbenchmarks (shared denominator):

.. math::

    \underbrace{\frac{\#\text{correct}}{\#\text{queries}}}_{\text{matching score}}
    = \underbrace{\frac{\#\text{repeatable}}{\#\text{queries}}}_{\text{repeatability}}
    \times \frac{\#\text{correct}}{\#\text{repeatable}}

Which stage limits the result is decided from the two factors: the matching score is their
product, so making a stage perfect raises it to the *other* factor, and the stage with the lower
factor is the one whose perfection raises it more:

.. math::

    \text{gain}_{\text{detector}} - \text{gain}_{\text{descriptor}}
    = r_{C|L}(1 - r_L) - r_L(1 - r_{C|L}) = r_{C|L} - r_L.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.ranking import AP_METHODS
from metricalc.decompose.ap import factor_ap
from metricalc.decompose.chain import decompose
from metricalc.decompose.identity import Verification, verify
from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.metrics import ratio_score
from metricalc.plotting.labels import display_name
from metricalc.validation import Choice, validate_params

__all__ = [
    "CONFIDENCES",
    "DetectorDescriptorSection",
    "detector_or_descriptor",
    "keypoint_chains",
    "matching_identity",
]

CONFIDENCES = ("ratio", "distance")
DEFAULT_CONFIDENCE = "ratio"
"""The confidence of a match everywhere a matching AP is printed (CLI, report): the ratio test,
as :func:`metricalc.matching_pr_curve`, so every matching AP of a cube is one number."""
STAGES = ("L", "C|L")
PERFECT_MEANING = {
    "detector": "every query would have a ground-truth correspondence within the pixel "
    "threshold (repeatability 100 %), the descriptor's precision among repeatable queries "
    "unchanged",
    "descriptor": "every repeatable query's nearest neighbour would be its correspondence "
    "(correct among repeatable 100 %), the detector's repeatability unchanged",
}
"""What the what-if analysis assumes when it makes a stage perfect (its factor curves 1)."""
ASSUMPTIONS = (
    f"A perfect detector: {PERFECT_MEANING['detector']}; a perfect descriptor: "
    f"{PERFECT_MEANING['descriptor']}."
)
"""The sentence that follows every verdict: what "perfect" assumes."""
_NEEDED = ("n_relevant", "nn_correct", "nn_distance", "nn2_distance")


def _check_cube(cube: Any, what: str) -> xr.Dataset:
    if not isinstance(cube, xr.Dataset):
        raise InvalidInputError(
            f"{what}: cube must be an xarray.Dataset (a QueryCube); got {type(cube).__name__}"
        )
    wrong = [v for v in _NEEDED if v not in cube.data_vars]
    wrong += [v for v in _NEEDED if v in cube.data_vars and cube[v].dims != ("descriptor", "query")]
    if wrong:
        raise InvalidInputError(
            f"{what}: the cube needs {list(_NEEDED)} over (descriptor, query); missing or of "
            f"other dims: {wrong}"
        )
    return cube


def _ok(cube: xr.Dataset) -> np.ndarray:
    if "status" not in cube:
        return np.ones(cube.sizes["descriptor"], bool)
    ok: np.ndarray = np.asarray(cube["status"].values).astype(str) != "error"
    return ok


@validate_params(confidence=Choice(CONFIDENCES))
def keypoint_chains(
    cube: xr.Dataset, *, confidence: str = DEFAULT_CONFIDENCE
) -> xr.Dataset:
    """The L, C|L chain of every descriptor of a QueryCube along the confidence threshold.

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube with ``n_relevant``, ``nn_correct``, ``nn_distance``, ``nn2_distance``.
    confidence : {"ratio", "distance"}
        ``-(nn_distance / nn2_distance)`` (default; an undefined ratio counts as 1, the worst,
        as :func:`metricalc.matching_pr_curve`) or ``-nn_distance``.

    Returns
    -------
    xarray.Dataset
        :func:`~metricalc.decompose.decompose` over ``(descriptor, stage, threshold)``;
        ``n_ground_truth`` is the number of queries of each descriptor. Descriptors with status
        ``error`` have no prediction (one empty point).

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.decompose import keypoint_chains
    >>> chains = keypoint_chains(example_cube())
    >>> chains.tp.sel(descriptor="sift").values.tolist()     # through L, through L and C|L
    [[1, 1, 2], [1, 1, 1]]
    """
    cube = _check_cube(cube, "keypoint_chains")
    n_relevant = np.asarray(cube["n_relevant"].values)
    present = (n_relevant >= 0) & _ok(cube)[:, None]
    if confidence == "distance":
        score = -np.asarray(cube["nn_distance"].values, dtype=np.float64)
    else:
        score = np.asarray(ratio_score(cube).values, dtype=np.float64)
    predicted = present & np.isfinite(score)
    # rows keep the query axis; non-predictions repeat a confidence of their row (no new
    # threshold) and do not count
    filler = np.where(predicted, score, np.inf).min(axis=1, initial=np.inf)
    filler = np.where(np.isfinite(filler), filler, 0.0)
    score = np.where(predicted, score, filler[:, None])
    outcomes = np.stack([n_relevant == 1, np.asarray(cube["nn_correct"].values) == 1], axis=-1)
    queries = present.sum(axis=1)
    chains = decompose(
        score,
        outcomes,
        np.stack([queries, queries], axis=-1),
        stages=STAGES,
        counted=predicted,
        batch_dims=("descriptor",),
        coords={"descriptor": cube["descriptor"].values},
    )
    chains.attrs.update(confidence=confidence, tau_px=float(cube.attrs.get("tau_px", np.nan)))
    return chains


def matching_identity(cube: xr.Dataset) -> xr.Dataset:
    r"""Repeatability x (correct / repeatable) = matching score, per descriptor and image pair.

    With :math:`Q` the queries, :math:`Q_L` those with a correspondence within :math:`\tau`
    (``n_relevant == 1``) and :math:`Q_D` those whose nearest neighbour is it
    (``nn_correct == 1``): repeatability :math:`|Q_L| / |Q|`, correct over repeatable
    :math:`|Q_D| / |Q_L|`, matching score :math:`|Q_D| / |Q|`.

    Returns
    -------
    xarray.Dataset
        Over ``descriptor`` (all queries) and ``(descriptor, image_pair)`` (``scene/pair``):
        ``repeatability``, ``correct_over_repeatable``, ``matching_score`` and ``deviation``
        :math:`|rep \cdot c/r - ms|` (``*_by_pair`` for the per-pair values); NaN where a
        denominator is 0.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.decompose import matching_identity
    >>> ident = matching_identity(example_cube()).sel(descriptor="sift")
    >>> [round(float(ident[v]), 4) for v in ("repeatability", "correct_over_repeatable",
    ...                                       "matching_score")]
    [0.6667, 0.5, 0.3333]
    """
    cube = _check_cube(cube, "matching_identity")
    n_relevant = cube["n_relevant"]
    present = (n_relevant >= 0) & xr.DataArray(_ok(cube), dims="descriptor")
    repeatable = present & (n_relevant == 1)
    correct = present & (cube["nn_correct"] == 1)

    def rates(group: Callable[[xr.DataArray], xr.DataArray]) -> dict[str, xr.DataArray]:
        q, r, c = (
            group(x.astype(np.int64)).astype(np.float64) for x in (present, repeatable, correct)
        )
        rep = r / q.where(q > 0)
        cor = c / r.where(r > 0)
        ms = c / q.where(q > 0)
        return {
            "repeatability": rep,
            "correct_over_repeatable": cor,
            "matching_score": ms,
            "deviation": abs(rep * cor - ms),
        }

    overall = rates(lambda x: x.sum("query"))
    result = xr.Dataset(overall)
    if all(c in cube.coords for c in ("scene", "pair")):
        unit = np.char.add(
            np.char.add(np.asarray(cube["scene"].values).astype(str), "/"),
            np.asarray(cube["pair"].values).astype(str),
        )
        keyed = {"image_pair": ("query", unit)}
        by_pair = rates(lambda x: x.assign_coords(keyed).groupby("image_pair").sum())
        result = result.assign({f"{k}_by_pair": v for k, v in by_pair.items()})
    return result.drop_vars(
        [c for c in result.coords if c not in ("descriptor", "image_pair")], errors="ignore"
    )


@dataclass(frozen=True, eq=False)
class DetectorDescriptorSection:
    """The report section "detector or descriptor?" of a keypoint cube.

    ``table`` holds one row per descriptor; ``sentence`` says which stage limits the result and
    how that is decided; :meth:`plot` draws the two factors and the matching score.
    """

    table: xr.Dataset
    sentence: str
    chains: xr.Dataset
    verification: Verification
    method: str

    def plot(self, ax: Any = None, names: Mapping[str, str] | None = None) -> Any:
        """Bars per descriptor: repeatability, correct among repeatable, matching score, the
        verdict under each name
        (:func:`metricalc.decompose.figures.plot_detector_or_descriptor`)."""
        from metricalc.decompose.figures import plot_detector_or_descriptor

        return plot_detector_or_descriptor(self.table, ax=ax, names=names)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: per descriptor values, the sentence and the identity check."""
        rows = {}
        for name in self.table["descriptor"].values.tolist():
            row = self.table.sel(descriptor=name)
            rows[str(name)] = {k: json_safe(row[k].values[()]) for k in self.table.data_vars}
        return {
            "descriptors": rows,
            "sentence": self.sentence,
            "identity": self.verification.to_dict(),
            "ap_method": self.method,
            "confidence": self.chains.attrs.get("confidence"),
        }


HOW_DECIDED = (
    "The stage with the lower factor limits the result: the matching score is repeatability x "
    "correct among repeatable, and making one stage perfect raises it to the other factor, so "
    "perfecting the lower one gains more."
)
"""How the verdict is decided, said after it (docs/decomposition.md)."""
_FACTOR = {"detector": "repeatability", "descriptor": "correct among repeatable"}


def _sentence(table: xr.Dataset, names: Mapping[str, str] | None) -> str:
    rows = [
        (display_name(str(n), names), str(s), float(r), float(c))
        for n, s, r, c in zip(
            table["descriptor"].values.tolist(),
            table["limited_by"].values.tolist(),
            table["repeatability"].values,
            table["correct_over_repeatable"].values,
            strict=True,
        )
        if s != "-"
    ]
    if not rows:
        return "No descriptor has matching results, so no stage can be said to limit them."
    parts = []
    for stage, other in (("detector", "descriptor"), ("descriptor", "detector")):
        members = [(n, r, c) for n, s, r, c in rows if s == stage]
        if not members:
            continue
        scope = "every descriptor" if len(members) == len(rows) > 1 else ", ".join(
            n for n, _, _ in members
        )
        low_first = stage == "detector"
        detail = ", ".join(
            f"{n} {100 * (r if low_first else c):.1f} % < {100 * (c if low_first else r):.1f} %"
            for n, r, c in members
        )
        parts.append(
            f"The {stage} limits {scope}: {_FACTOR[stage]} is below {_FACTOR[other]} ({detail})."
        )
    even = [(n, r) for n, s, r, _ in rows if s == "both"]
    if even:
        parts.append(
            "Detector and descriptor limit "
            + ", ".join(f"{n} (both factors {100 * r:.1f} %)" for n, r in even)
            + " equally."
        )
    return " ".join([*parts, HOW_DECIDED, ASSUMPTIONS])


@validate_params(confidence=Choice(CONFIDENCES), method=Choice(AP_METHODS))
def detector_or_descriptor(
    cube: xr.Dataset,
    *,
    confidence: str = DEFAULT_CONFIDENCE,
    method: str = "coco101",
    names: Mapping[str, str] | None = None,
) -> DetectorDescriptorSection:
    r"""The "detector or descriptor?" section of a report, for a keypoint QueryCube.

    Per descriptor: repeatability :math:`r_L` (detector), correct over repeatable
    :math:`r_{C|L}` (descriptor), matching score :math:`r_L r_{C|L}`, the identity deviation,
    the matching AP of the composed curve, and the stage that limits: the detector where
    :math:`r_L < r_{C|L}`, the descriptor where :math:`r_{C|L} < r_L`, ``"both"`` where they
    are equal (a perfect detector raises the matching score to :math:`r_{C|L}`, a perfect
    descriptor to :math:`r_L`). One plain sentence sums it up and says how it was decided.

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube (:func:`metricalc.keypoints.evaluate`).
    confidence : {"ratio", "distance"}
        Confidence of a match (:func:`keypoint_chains`), which orders the matching AP's curve.
    method : str
        AP method of the curves.
    names : mapping, optional
        Display names of the descriptors in the sentence (``{"sift": "SIFT"}``).

    Returns
    -------
    DetectorDescriptorSection
        ``table`` (Dataset over ``descriptor``), ``sentence``, ``plot(ax=None)``, ``to_dict()``.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> from metricalc.decompose import detector_or_descriptor
    >>> section = detector_or_descriptor(example_cube())
    >>> section.table.limited_by.values.tolist()
    ['descriptor']
    >>> print(section.sentence)  # doctest: +NORMALIZE_WHITESPACE
    The descriptor limits sift: correct among repeatable is below repeatability (sift 50.0 % <
    66.7 %). The stage with the lower factor limits the result: the matching score is
    repeatability x correct among repeatable, and making one stage perfect raises it to the
    other factor, so perfecting the lower one gains more. A perfect detector: every query would
    have a ground-truth correspondence within the pixel threshold (repeatability 100 %), the
    descriptor's precision among repeatable queries unchanged; a perfect descriptor: every
    repeatable query's nearest neighbour would be its correspondence (correct among repeatable
    100 %), the detector's repeatability unchanged.
    """
    chains = keypoint_chains(cube, confidence=confidence)
    identity = matching_identity(cube)
    composed = factor_ap(chains, method=method)["ap"]
    repeatability = identity["repeatability"]
    correct = identity["correct_over_repeatable"]
    stage = xr.where(  # type: ignore[no-untyped-call]
        repeatability < correct,
        "detector",
        xr.where(correct < repeatability, "descriptor", "both"),  # type: ignore[no-untyped-call]
    )
    defined = repeatability.notnull() & correct.notnull()
    limited = xr.where(defined, stage, "-")  # type: ignore[no-untyped-call]
    table = xr.Dataset(
        {
            "repeatability": repeatability,
            "correct_over_repeatable": correct,
            "matching_score": identity["matching_score"],
            "identity_deviation": identity["deviation"],
            "matching_ap": composed,
            "limited_by": limited.astype(str),
        }
    )
    table.attrs.update(method=method, confidence=confidence)
    return DetectorDescriptorSection(
        table=table,
        sentence=_sentence(table, names),
        chains=chains,
        verification=verify(chains),
        method=method,
    )
