"""HPatches patch retrieval benchmark (ECCV 2016 workshop): files, validation, evaluation.

``.benchmark``, ``.labels`` and ``.results`` files are read into :class:`Benchmark`,
:class:`Labels` and :class:`Results` (:mod:`metricalc.patches.files`), checked against every rule
of PROTOCOLS.md section 6 by :func:`validate`, and scored by :func:`evaluate_results` /
:func:`evaluate_files` (:mod:`metricalc.patches.evaluate`): per query the patch retrieval and the
image retrieval AP over ranks 2..51, and their means. See ``docs/patches.md``.

>>> import metricalc.patches as mp
>>> mp.patch_image("i_chestnuts.ref.631")
'i_chestnuts.ref'
"""

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
    validate,
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
    "evaluate_files",
    "evaluate_results",
    "parse_patch_image",
    "parse_signature",
    "patch_image",
    "read_benchmark",
    "read_labels",
    "read_results",
    "relevance",
    "validate",
    "write_results",
]
