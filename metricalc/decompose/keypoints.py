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

Making a stage perfect in the what-if analysis answers "detector or descriptor?": the stage
whose perfection raises the matching AP more limits the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.ranking import AP_METHODS
from metricalc.decompose.chain import decompose
from metricalc.decompose.identity import Verification, verify
from metricalc.decompose.whatif import what_if
from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.metrics import ratio_score
from metricalc.validation import check_choice

__all__ = [
    "CONFIDENCES",
    "DetectorDescriptorSection",
    "detector_or_descriptor",
    "keypoint_chains",
    "matching_identity",
]

CONFIDENCES = ("distance", "ratio")
STAGES = ("L", "C|L")
STAGE_ROLE = {"L": "detector", "C|L": "descriptor"}
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


def keypoint_chains(cube: xr.Dataset, *, confidence: str = "distance") -> xr.Dataset:
    """The L, C|L chain of every descriptor of a QueryCube along the confidence threshold.

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube with ``n_relevant``, ``nn_correct``, ``nn_distance``, ``nn2_distance``.
    confidence : {"distance", "ratio"}
        ``-nn_distance`` or ``-(nn_distance / nn2_distance)`` (an undefined ratio counts as 1,
        the worst, as :func:`metricalc.matching_pr_curve`).

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
    [[1, 2], [1, 1]]
    """
    check_choice("confidence", confidence, CONFIDENCES)
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

    ``table`` holds one row per descriptor; ``sentence`` says which stage limits the result;
    :meth:`plot` draws the matching AP now and with either stage made perfect.
    """

    table: xr.Dataset
    sentence: str
    chains: xr.Dataset
    verification: Verification
    method: str

    def plot(self, ax: Any = None) -> Any:
        """Bars per descriptor: matching AP, with a perfect detector, with a perfect descriptor
        (:func:`metricalc.decompose.figures.plot_detector_or_descriptor`)."""
        from metricalc.decompose.figures import plot_detector_or_descriptor

        return plot_detector_or_descriptor(self.table, ax=ax)

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


def _sentence(table: xr.Dataset) -> str:
    names = [str(n) for n in table["descriptor"].values.tolist()]
    limits = [str(s) for s in table["limited_by"].values.tolist()]
    valid = [(n, s) for n, s in zip(names, limits, strict=True) if s in ("detector", "descriptor")]
    if not valid:
        return "No descriptor has matching results, so no stage can be said to limit them."
    stages = {s for _, s in valid}
    if len(stages) == 1:
        stage = stages.pop()
        other = "descriptor" if stage == "detector" else "detector"
        gain = {
            role: float(np.nanmean(table[f"gain_perfect_{role}"].values))
            for role in ("detector", "descriptor")
        }
        scope = "every descriptor" if len(valid) > 1 else valid[0][0]
        rates = (
            float(np.nanmean(table["repeatability"].values)),
            float(np.nanmean(table["correct_over_repeatable"].values)),
        )
        return (
            f"The {stage} limits the result for {scope}: a perfect {stage} would raise the "
            f"matching AP by {100 * gain[stage]:.1f} points"
            f"{' on average' if len(valid) > 1 else ''}, a perfect {other} only by "
            f"{100 * gain[other]:.1f} (repeatability {100 * rates[0]:.1f} %, correct among "
            f"repeatable {100 * rates[1]:.1f} %).{_caveat(table, valid)} {ASSUMPTIONS}"
        )
    by_stage = {
        role: ", ".join(n for n, s in valid if s == role) for role in ("detector", "descriptor")
    }
    return (
        f"The detector limits {by_stage['detector']} and the descriptor limits "
        f"{by_stage['descriptor']} (the stage whose perfection raises the matching AP more)."
        f"{_caveat(table, valid)} {ASSUMPTIONS}"
    )


def _caveat(table: xr.Dataset, valid: list[tuple[str, str]]) -> str:
    """The bias of the what-if comparison, where it shows: descriptors whose AP with a perfect
    detector is 1 (docs/decomposition.md, "What if a stage were perfect?")."""
    judged = {name for name, _ in valid}
    descriptors = table["descriptor"].values.tolist()
    perfect = zip(descriptors, table["ap_perfect_detector"].values, strict=True)
    names = [str(n) for n, ap in perfect if str(n) in judged and ap >= 1.0 - 1e-12]
    if not names:
        return ""
    which = "every descriptor" if len(names) == len(valid) > 1 else ", ".join(names)
    return (
        f" With a perfect detector the AP is 100 % for {which}: its what-if curve starts at "
        "recall 1 whenever the most confident match is correct, so this comparison favours the "
        "detector; the repeatability and the share correct among repeatable compare the stages "
        "more fairly."
    )


def detector_or_descriptor(
    cube: xr.Dataset, *, confidence: str = "distance", method: str = "coco101"
) -> DetectorDescriptorSection:
    """The "detector or descriptor?" section of a report, for a keypoint QueryCube.

    Per descriptor: repeatability (detector), correct over repeatable (descriptor), matching
    score, the identity deviation, the matching AP of the composed curve, the AP with a perfect
    detector and with a perfect descriptor, and the stage that limits (the one whose perfection
    raises the AP more). One plain sentence sums it up.

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube (:func:`metricalc.keypoints.evaluate`).
    confidence : {"distance", "ratio"}
        Confidence of a match (:func:`keypoint_chains`).
    method : str
        AP method of the curves.

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
    ['detector']
    >>> print(section.sentence)  # doctest: +NORMALIZE_WHITESPACE
    The detector limits the result for sift: a perfect detector would raise the matching AP by
    83.2 points, a perfect descriptor only by 27.4 (repeatability 66.7 %, correct among
    repeatable 50.0 %). With a perfect detector the AP is 100 % for sift: its what-if curve
    starts at recall 1 whenever the most confident match is correct, so this comparison favours
    the detector; the repeatability and the share correct among repeatable compare the stages
    more fairly. A perfect detector: every query would have a ground-truth correspondence
    within the pixel threshold (repeatability 100 %), the descriptor's precision among
    repeatable queries unchanged; a perfect descriptor: every repeatable query's nearest
    neighbour would be its correspondence (correct among repeatable 100 %), the detector's
    repeatability unchanged.
    """
    check_choice("method", method, AP_METHODS)
    chains = keypoint_chains(cube, confidence=confidence)
    identity = matching_identity(cube)
    scenario = what_if(chains, method=method)
    perfect_detector = scenario["ap_if_perfect"].sel(stage="L", drop=True)
    perfect_descriptor = scenario["ap_if_perfect"].sel(stage="C|L", drop=True)
    gain_detector = perfect_detector - scenario["ap"]
    gain_descriptor = perfect_descriptor - scenario["ap"]
    defined = gain_detector.notnull() & gain_descriptor.notnull()
    larger = xr.where(gain_detector > gain_descriptor, "detector", "descriptor")  # type: ignore[no-untyped-call]
    limited = xr.where(defined, larger, "-")  # type: ignore[no-untyped-call]
    table = xr.Dataset(
        {
            "repeatability": identity["repeatability"],
            "correct_over_repeatable": identity["correct_over_repeatable"],
            "matching_score": identity["matching_score"],
            "identity_deviation": identity["deviation"],
            "matching_ap": scenario["ap"],
            "ap_perfect_detector": perfect_detector,
            "ap_perfect_descriptor": perfect_descriptor,
            "gain_perfect_detector": gain_detector,
            "gain_perfect_descriptor": gain_descriptor,
            "limited_by": limited.astype(str),
        }
    )
    table.attrs.update(method=method, confidence=confidence)
    return DetectorDescriptorSection(
        table=table,
        sentence=_sentence(table),
        chains=chains,
        verification=verify(chains),
        method=method,
    )
