"""Names and numbers as a reader sees them: metric labels, system names, escaping, p-values.

Everything the tables, the summary sentences and the HTML report print goes through here, so a
metric is called the same everywhere and every name is escaped for the format it lands in.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "FRACTION_METRICS",
    "METRICS",
    "PAIR_BY_ORDER",
    "MetricInfo",
    "compared_metric_phrase",
    "dataset_name",
    "display_name",
    "escape_html",
    "escape_latex",
    "escape_markdown",
    "format_p",
    "is_fraction_metric",
    "metric_info",
]


def dataset_name(attrs: Mapping[str, object]) -> str:
    """The data of a cube (or metric set) as captions name it: the attr ``dataset_path`` (where
    the data was read from) when there is one, else ``dataset`` (a name, or for metricalc's
    keypoint evaluation the content fingerprint ``sha256:...``, which identifies but does not
    tell a reader anything); ``""`` when neither is set.

    Examples
    --------
    >>> dataset_name({"dataset": "sha256:0123456789abcdef", "dataset_path": "data/hpatches"})
    'data/hpatches'
    >>> dataset_name({"dataset": "hpatches_release"}), dataset_name({})
    ('hpatches_release', '')
    """
    return str(attrs.get("dataset_path") or attrs.get("dataset") or "")


@dataclass(frozen=True)
class MetricInfo:
    """How one metric-set column is shown and tested.

    Attributes
    ----------
    label : str
        Short column header (``"mAP v"``).
    phrase : str
        The metric inside a sentence (``"viewpoint mAP"``).
    kind : str
        ``"rate"`` (a fraction, shown in percent), ``"count"`` (an integer) or ``"value"``
        (shown as is).
    higher_is_better : bool
        Direction of "best" (bold) and "second" (underlined).
    test : tuple or None
        ``(metric, split, mean_over)`` of the :func:`metricalc.stats.compare` call that tests
        this column on a QueryCube: the compare metric (a cube variable; ``hit@K`` for
        ``hit_rate_at_K``: per query the hit probability under the tie policy, whose mean is
        the column's value; ``precision@K``, that probability / K, for ``precision_at_K``), the
        split (None for all queries) and the level of the column's
        mean (``"query"``: pooled over queries; ``"pair"``: over image pairs of pair means;
        ``"scene"``: over scenes of scene means; None: the unit's mean), so that the test is of
        the column's own statistic; the independent unit is the study's ``pair_by`` or this
        level, whichever is coarser. None when the column
        cannot be tested from per-query values (e.g. the Bojanic APs are per scene).
    definition : str
        What the column's value of a keypoint QueryCube is, for a table caption ("mean over
        scenes of ..."); "" where none is written (a caption then defines nothing).
    """

    label: str
    phrase: str
    kind: str = "rate"
    higher_is_better: bool = True
    test: tuple[str, str | None, str | None] | None = None
    definition: str = ""


_SCENE_MEAN = "mean of the scene mAPs over {}"
_WITH_ZEROS = " over all its queries, those without a correct match (R = 0) as AP 0"


def _hit_rate(k: int | str) -> str:
    """The definition of the hit rate at ``k`` (``hit_rate_at_k``)."""
    where = "is the nearest candidate" if int(k) == 1 else f"is among the {k} nearest candidates"
    return f"share of the R = 1 queries whose correct match {where}"


METRICS: Mapping[str, MetricInfo] = {
    # every unqualified "mAP" is a mean over scenes of scene mAPs, DescriptorWorkbench's definition
    # of the split mAPs; the query-weighted means say so ("(queries)")
    "true_map_macro_by_scene": MetricInfo(
        "mAP", "mAP", test=("ap", None, "scene"), definition=_SCENE_MEAN.format("all scenes")
    ),
    "true_map_micro": MetricInfo(
        "mAP (queries)",
        "query-weighted mAP",
        test=("ap", None, "query"),
        definition="mean AP over all R = 1 queries, each query weighing the same",
    ),
    # the split mAPs are means over scenes (DescriptorWorkbench), tested as such
    "viewpoint_map": MetricInfo(
        "mAP v",
        "viewpoint mAP",
        test=("ap", "viewpoint", "scene"),
        definition=_SCENE_MEAN.format("the viewpoint scenes (v_*)"),
    ),
    "illumination_map": MetricInfo(
        "mAP i",
        "illumination mAP",
        test=("ap", "illumination", "scene"),
        definition=_SCENE_MEAN.format("the illumination scenes (i_*)"),
    ),
    "viewpoint_map_micro": MetricInfo(
        "mAP v (queries)",
        "query-weighted viewpoint mAP",
        test=("ap", "viewpoint", "query"),
        definition="mean AP over the R = 1 queries of the viewpoint scenes (v_*)",
    ),
    "illumination_map_micro": MetricInfo(
        "mAP i (queries)",
        "query-weighted illumination mAP",
        test=("ap", "illumination", "query"),
        definition="mean AP over the R = 1 queries of the illumination scenes (i_*)",
    ),
    "true_map_micro_including_zeros": MetricInfo(
        "mAP (queries, R=0 as 0)",
        "query-weighted mAP including R=0 queries",
        definition="mean AP over all queries, those without a correct match (R = 0) as AP 0",
    ),
    "true_map_macro_by_scene_including_zeros": MetricInfo(
        "mAP (R=0 as 0)",
        "mAP including R=0 queries",
        definition="mean over the scenes with an R = 1 query of each scene's mean AP" + _WITH_ZEROS,
    ),
    "viewpoint_map_including_zeros": MetricInfo(
        "mAP v (R=0 as 0)",
        "viewpoint mAP including R=0 queries",
        definition="mean over the viewpoint scenes (v_*) of each scene's mean AP" + _WITH_ZEROS,
    ),
    "illumination_map_including_zeros": MetricInfo(
        "mAP i (R=0 as 0)",
        "illumination mAP including R=0 queries",
        definition="mean over the illumination scenes (i_*) of each scene's mean AP" + _WITH_ZEROS,
    ),
    "mean_precision": MetricInfo(
        "precision",
        "legacy precision",
        test=("nn_correct", None, "pair"),
        definition="mean over image pairs of the share of queries whose nearest neighbour is "
        "the correct match",
    ),
    "legacy_macro_precision_by_scene": MetricInfo(
        "precision (scenes)",
        "scene-averaged legacy precision",
        test=("nn_correct", None, "scene"),
        definition="mean over scenes of the share of the scene's queries whose nearest "
        "neighbour is the correct match",
    ),
    "hit_rate_at_1": MetricInfo(
        "HR@1", "hit rate at 1", test=("hit@1", None, "query"), definition=_hit_rate(1)
    ),
    "hit_rate_at_5": MetricInfo(
        "HR@5", "hit rate at 5", test=("hit@5", None, "query"), definition=_hit_rate(5)
    ),
    "hit_rate_at_10": MetricInfo(
        "HR@10", "hit rate at 10", test=("hit@10", None, "query"), definition=_hit_rate(10)
    ),
    "keypoint_verification_ap": MetricInfo(
        "verif. AP",
        "keypoint verification AP",
        definition="keypoint verification AP (Bojanic et al.): per scene the AP of one list "
        "pooling every query's candidates (its correct match relevant; the sequence's other "
        "keypoints and distractors from other scenes not), averaged over scenes",
    ),
    "keypoint_retrieval_ap": MetricInfo(
        "retr. AP",
        "keypoint retrieval AP",
        definition="keypoint retrieval AP (Bojanic et al.), as verification AP with the "
        "sequence's other keypoints as hard negatives",
    ),
    "r0_rate": MetricInfo(
        "R=0 rate",
        "R=0 rate",
        higher_is_better=False,
        definition="share of queries without a correct match (R = 0)",
    ),
    "total_queries_processed": MetricInfo(
        "queries",
        "processed queries",
        kind="count",
        definition="number of queries with a correct match (R = 1)",
    ),
    "total_matches": MetricInfo("matches", "cross-checked matches", kind="count"),
    "total_keypoints": MetricInfo("keypoints", "keypoints of the matched images", kind="count"),
    "image_retrieval_map": MetricInfo(
        "image mAP",
        "image retrieval mAP",
        test=("image_ap", None, None),
        definition="image retrieval mAP (DescriptorWorkbench): the mean over scenes of the AP of "
        "ranking every image by its number of cross-checked matches with the scene's first image",
    ),
    "hpatches17_verification_map": MetricInfo(
        "verif. mAP", "HPatches verification mAP (mean of the 6 imbalanced APs)"
    ),
    # a matching cube's APs (``test`` names the variable it needs); a report tests the average
    # itself over sequences (metricalc.stats.cvpr17_matching, report.analysis)
    "hpatches17_matching_map": MetricInfo(
        "match. mAP", "HPatches matching mAP", test=("ap", None, "query")
    ),
}
"""Known metric-set columns (docs/metric_set.md names, and the patch-retrieval means)."""

PAIR_BY_ORDER = ("query", "pair", "scene")
"""Pairing units from finest to coarsest."""

_HIT = re.compile(r"(hit|precision)@([0-9]+)")
_RATE_AT_RECALL = re.compile(r"f[pd]r[0-9]+")  # fpr95, fdr95 of patch pair records
_AT_K = re.compile(r"(hit_rate|recall|precision)_at_([0-9]+)")


_TREC_PER_QUERY = re.compile(
    r"map|Rprec|bpref|recip_rank|ndcg|set_P|set_recall|set_relative_P|set_map|11pt_avg(_.+)?"
    r"|(P|recall|ndcg_cut|map_cut|relative_P|success|f1)_[0-9]+"
    r"|(iprec_at_recall|Rprec_mult)_[0-9.]+|set_F(_.+)?"
)
"""trec_eval's printed names of the measures with a value per query: a retrieval cube
(:mod:`metricalc.retrieval.querycube`) holds each as a variable (``map`` as ``ap``)."""
_TREC_COUNTS = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
_GEOMETRY = re.compile(
    r"(H_error_(dlt|ransac)@[0-9.]+px|H_error_ransac_mAA|auc@[0-9.]+|mAA@[0-9.]+|ransac_mAA"
    r"|homography_accuracy@[0-9.]+px)"
)
"""Fractions of the homography (Glue Factory, SuperPoint) and pose (SuperGlue, IMC) summaries:
AUCs, mAAs and accuracies, shown in percent."""


def metric_info(name: str) -> MetricInfo:
    """The :class:`MetricInfo` of a metric-set column; unknown names get a plain entry.

    Examples
    --------
    >>> metric_info("viewpoint_map").phrase
    'viewpoint mAP'
    >>> metric_info("hit_rate_at_20").label, metric_info("precision_at_20").label
    ('HR@20', 'P@20')
    >>> metric_info("my_score").label
    'my_score'
    >>> metric_info("ndcg_cut_10").test, metric_info("map").test  # trec_eval measures
    (('ndcg_cut_10', None, 'query'), ('ap', None, 'query'))
    """
    if name in METRICS:
        return METRICS[name]
    match = _AT_K.fullmatch(name)
    if match:
        kind, k = match.groups()
        if kind == "precision":
            return MetricInfo(
                f"P@{k}",
                f"precision at {k}",
                test=(f"precision@{k}", None, "query"),
                definition=f"hit rate at {k} divided by {k} (hits / {k})",
            )
        test = (f"hit@{k}", None, "query")
        label = "HR" if kind == "hit_rate" else "R"
        phrase = f"{kind.replace('_', ' ')} at {k}"
        return MetricInfo(f"{label}@{k}", phrase, test=test, definition=_hit_rate(k))
    if _TREC_PER_QUERY.fullmatch(name):  # a retrieval cube's measure: tested per query (qid)
        variable = "ap" if name == "map" else name
        return MetricInfo(name, name, kind="value", test=(variable, None, "query"))
    if name in _TREC_COUNTS:
        return MetricInfo(name, name, kind="value")
    if _GEOMETRY.fullmatch(name):
        return MetricInfo(name, name)
    return MetricInfo(name, name.replace("_", " "), kind="value")


def compared_metric_phrase(metric: str, split: str = "") -> str:
    """The phrase of a :func:`metricalc.stats.compare` metric (cube variable) and split.

    Examples
    --------
    >>> compared_metric_phrase("ap", "viewpoint"), compared_metric_phrase("hit@5")
    ('viewpoint mAP', 'hit rate at 5')
    >>> compared_metric_phrase("precision@5")
    'precision at 5'
    """
    hit = _HIT.fullmatch(metric)
    at_k = ""
    if hit:
        at_k = f"{'hit rate' if hit.group(1) == 'hit' else 'precision'} at {hit.group(2)}"
    base = {
        "ap": "mAP",
        "image_ap": "image retrieval mAP",
        "nn_correct": "legacy precision",
    }.get(metric, at_k or metric)
    return f"{split} {base}" if split else base


FRACTION_METRICS = ("ap", "image_ap", "nn_correct", "nn_mutual")
"""Cube variables whose values lie in [0, 1] (as do ``hit@K`` and ``precision@K``): shown in
percent points."""


def is_fraction_metric(metric: str) -> bool:
    """True for compare metrics whose values lie in [0, 1]: :data:`FRACTION_METRICS`,
    ``hit@K``, ``precision@K`` and the FPR95 of pair records, ``fpr95`` (means and differences
    shown in percent points).

    Examples
    --------
    >>> is_fraction_metric("nn_mutual"), is_fraction_metric("hit@5"), is_fraction_metric("ties")
    (True, True, False)
    """
    return (
        metric in FRACTION_METRICS
        or bool(_HIT.fullmatch(metric))
        or bool(_RATE_AT_RECALL.fullmatch(metric))
    )


def display_name(system: str, names: Mapping[str, str] | None = None) -> str:
    """The display name of a system: ``names[system]``, or ``names[d] (label)`` for a system
    ``"d (label)"`` of labelled cubes, else the system name itself.

    Examples
    --------
    >>> display_name("sift (locked)", {"sift": "SIFT"}), display_name("orb", {"sift": "SIFT"})
    ('SIFT (locked)', 'orb')
    """
    names = names or {}
    if system in names:
        return str(names[system])
    descriptor, sep, rest = system.partition(" (")
    if sep and rest.endswith(")") and descriptor in names:
        return f"{names[descriptor]} ({rest}"
    return system


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_LATEX_PATTERN = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))


def escape_latex(text: str) -> str:
    r"""``text`` with every LaTeX special character escaped (text mode).

    Examples
    --------
    >>> print(escape_latex("my_desc & 50% {v2}"))
    my\_desc \& 50\% \{v2\}
    """
    return _LATEX_PATTERN.sub(lambda m: _LATEX_SPECIAL[m.group(0)], str(text))


_MARKDOWN_PATTERN = re.compile(r"([\\`*_\[\]|~])")


def escape_markdown(text: str) -> str:
    r"""``text`` safe inside a Markdown table cell: Markdown punctuation backslash-escaped,
    ``<``, ``>`` and ``&`` as HTML entities.

    Examples
    --------
    >>> print(escape_markdown("a_b|c <d>"))
    a\_b\|c &lt;d&gt;
    """
    return _MARKDOWN_PATTERN.sub(r"\\\1", html.escape(str(text), quote=False))


def escape_html(text: str) -> str:
    """``text`` escaped for HTML element content and attribute values.

    Examples
    --------
    >>> escape_html('<b> & "x"')
    '&lt;b&gt; &amp; &quot;x&quot;'
    """
    return html.escape(str(text), quote=True)


def format_p(p: float, *, alpha: float | None = None) -> str:
    """A p-value as a sentence prints it: ``p < 0.001``, else two significant digits.

    Rules: below 0.001 -> ``"p < 0.001"``; otherwise two significant digits (``p = 0.0042``,
    ``p = 0.049``, ``p = 0.21``), ``p = 1`` for 1; a p-value below ``alpha`` is never rounded up
    to ``alpha`` or beyond (more digits are shown instead, ``p = 0.0499`` rather than
    ``p = 0.05``); NaN -> ``"p n/a"``.

    Examples
    --------
    >>> format_p(0.0004), format_p(0.0123), format_p(0.4567), format_p(1.0)
    ('p < 0.001', 'p = 0.012', 'p = 0.46', 'p = 1')
    >>> format_p(0.04996, alpha=0.05)
    'p = 0.04996'
    """
    if not math.isfinite(p):
        return "p n/a"
    if p < 0.001:
        return "p < 0.001"
    if p >= 1:
        return "p = 1"
    digits = 2
    while True:
        text = f"{p:.{digits}g}"
        if alpha is None or p >= alpha or float(text) < alpha or digits > 12:
            break
        digits += 1
    return f"p = {text}"
