"""HPatches patch retrieval benchmark (ECCV 2016 workshop): files, validation, evaluation.

Signatures and patch-image names are parsed by :mod:`metricalc.benchmarks.hpatches_patches.names`;
``.benchmark``,
``.labels`` and ``.results`` files are read into :class:`Benchmark`, :class:`Labels` and
:class:`Results` (:mod:`metricalc.benchmarks.hpatches_patches.files`), checked against every rule of
docs/patches.md
section 6 by :func:`validate` (:mod:`metricalc.benchmarks.hpatches_patches.checks`), and scored by
:func:`evaluate_results` / :func:`evaluate_files`
(:mod:`metricalc.benchmarks.hpatches_patches.evaluate`): per query
the patch retrieval and the image retrieval AP over ranks 2..51, and their means.
See ``docs/patches.md``.

The synthetic patch dataset is made by :func:`metricalc.datasets.make_patch_dataset`.
The rest of the offline pipeline is imported on first use (it loads OpenCV):
:func:`read_patch_dataset` (:mod:`~metricalc.benchmarks.hpatches_patches.dataset`),
:func:`make_benchmark`
(:mod:`~metricalc.benchmarks.hpatches_patches.benchmark`), :func:`describe_dataset`
(:mod:`~metricalc.benchmarks.hpatches_patches.describe`) and :func:`evaluate_folders`
(:mod:`~metricalc.benchmarks.hpatches_patches.querycube`).

>>> import metricalc.benchmarks.hpatches_patches as mp
>>> mp.patch_image("i_chestnuts.ref.631")
'i_chestnuts.ref'
"""

from metricalc.benchmarks.hpatches_patches.checks import validate
from metricalc.benchmarks.hpatches_patches.evaluate import (
    REPEAT_POLICIES,
    evaluate_files,
    evaluate_results,
    relevance,
)
from metricalc.benchmarks.hpatches_patches.files import (
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
from metricalc.lazy import lazy_getattr

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
    "read_patch_dataset": "metricalc.benchmarks.hpatches_patches.dataset",
    "make_benchmark": "metricalc.benchmarks.hpatches_patches.benchmark",
    "describe_dataset": "metricalc.benchmarks.hpatches_patches.describe",
    "evaluate_folders": "metricalc.benchmarks.hpatches_patches.querycube",
}
"""The dataset, generator, descriptor and cube functions, imported on first use."""

__getattr__ = lazy_getattr(__name__, _LAZY)
