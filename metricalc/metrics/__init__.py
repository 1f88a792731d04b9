"""The DescriptorWorkbench metric set and the matching metrics over a QueryCube.

Every metric of the DescriptorWorkbench set (docs/metric_set.md), under DescriptorWorkbench's
names, computed from a QueryCube (:mod:`metricalc.cube`): an :class:`xarray.Dataset` over
``descriptor`` x ``query`` with the query coordinates ``scene``, ``split`` and ``pair``. Every
metric is counts and sums first, rates after (masked sums, grouped sums over integer codes of
the scenes and image pairs, ``xr.dot``), so a dask-backed cube (``open_cube(..., chunks=...)``)
stays lazy until ``.compute()`` and is evaluated chunk by chunk; its labels are never read as
strings (the groups come from the file's codes, :func:`metricalc.cube.io.query_codes`).

One job per module:

- :mod:`~metricalc.metrics.metric_set`: :func:`metric_set`, the whole set per descriptor;
- :mod:`~metricalc.metrics.scenes`: the per-scene mAPs and :func:`scene_metrics`;
- :mod:`~metricalc.metrics.ranks`: hits at k and the rank histogram (:data:`RANK_BINS`);
- :mod:`~metricalc.metrics.bojanic`: the Bojanic et al. aggregates;
- :mod:`~metricalc.metrics.retrieval`: the trec_eval means of a retrieval cube;
- :mod:`~metricalc.metrics.matching`: D2-Net's mean matching accuracy
  (:func:`matching_accuracy`) and the counts it prints (:func:`matching_counts`);
- :mod:`~metricalc.metrics.ratio_curves`: the precision-recall and ROC curves of the ratio test
  (:func:`matching_pr_curve`, :func:`matching_roc_curve`);
- :mod:`~metricalc.metrics.reductions`: the cube checks and grouped reductions they share.

``docs/metric_set.md`` lists every formula. The metadata strings of the DescriptorWorkbench
database (``format_metadata``, ``parse_metadata``, ``metadata_for``) live in
:mod:`metricalc.store.metadata`.
"""

from metricalc.metrics.bojanic import BOJANIC_COUNTS, BOJANIC_METRICS
from metricalc.metrics.matching import (
    MMA_CONVENTIONS,
    MMA_SPLITS,
    matching_accuracy,
    matching_counts,
    pair_matching_accuracy,
)
from metricalc.metrics.metric_set import MAP_METRICS, WORKBENCH_COUNTS, metric_set
from metricalc.metrics.ranks import RANK_BINS
from metricalc.metrics.ratio_curves import matching_pr_curve, matching_roc_curve, ratio_score
from metricalc.metrics.scenes import SCENE_METRICS, SPLIT_LETTERS, scene_metrics

__all__ = [
    "BOJANIC_COUNTS",
    "BOJANIC_METRICS",
    "MAP_METRICS",
    "MMA_CONVENTIONS",
    "MMA_SPLITS",
    "RANK_BINS",
    "SCENE_METRICS",
    "SPLIT_LETTERS",
    "WORKBENCH_COUNTS",
    "matching_accuracy",
    "matching_counts",
    "matching_pr_curve",
    "matching_roc_curve",
    "metric_set",
    "pair_matching_accuracy",
    "ratio_score",
    "scene_metrics",
]
