"""HPatches patch retrieval benchmark (ECCV 2016 workshop): files, validation, evaluation.

Signatures and patch-image names are parsed by :mod:`metricalc.patches.names`; ``.benchmark``,
``.labels`` and ``.results`` files are read into :class:`Benchmark`, :class:`Labels` and
:class:`Results` (:mod:`metricalc.patches.files`), checked against every rule of docs/patches.md
section 6 by :func:`validate` (:mod:`metricalc.patches.checks`), and scored by
:func:`evaluate_results` / :func:`evaluate_files` (:mod:`metricalc.patches.evaluate`): per query
the patch retrieval and the image retrieval AP over ranks 2..51, and their means.
See ``docs/patches.md``.

The synthetic patch dataset is made by :func:`metricalc.datasets.make_patch_dataset`.
The rest of the offline pipeline is imported on first use (it loads OpenCV):
:func:`read_patch_dataset` (:mod:`~metricalc.patches.dataset`), :func:`make_benchmark`
(:mod:`~metricalc.patches.benchmark`), :func:`describe_dataset`
(:mod:`~metricalc.patches.describe`) and :func:`evaluate_folders`
(:mod:`~metricalc.patches.querycube`).

>>> import metricalc.patches as mp
>>> mp.patch_image("i_chestnuts.ref.631")
'i_chestnuts.ref'
"""

from metricalc.lazy import lazy_getattr
from metricalc.patches.checks import validate
from metricalc.patches.evaluate import REPEAT_POLICIES, evaluate_files, evaluate_results, relevance
from metricalc.patches.files import (
    IMAGES,
    N_RESULTS,
    Benchmark,
    Labels,
    Results,
    Signature,
    parse_patch_image,
    parse_signature,
    patch_image,
    read_benchmark,
    read_labels,
    read_results,
    write_results,
)

__all__ = [
    "IMAGES",
    "N_RESULTS",
    "REPEAT_POLICIES",
    "Benchmark",
    "Labels",
    "Results",
    "Signature",
    "describe_dataset",
    "evaluate_files",
    "evaluate_folders",
    "evaluate_results",
    "make_benchmark",
    "parse_patch_image",
    "parse_signature",
    "patch_image",
    "read_benchmark",
    "read_labels",
    "read_patch_dataset",
    "read_results",
    "relevance",
    "validate",
    "write_results",
]

_LAZY = {
    "read_patch_dataset": "metricalc.patches.dataset",
    "make_benchmark": "metricalc.patches.benchmark",
    "describe_dataset": "metricalc.patches.describe",
    "evaluate_folders": "metricalc.patches.querycube",
}
"""The dataset, generator, descriptor and cube functions, imported on first use."""

__getattr__ = lazy_getattr(__name__, _LAZY)
