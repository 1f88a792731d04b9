"""The per-query retrieval APs of the HPatches CVPR'17 tasks as a QueryCube (for ``compare``).

One query of the cube per (retrieval query, noise level): ``scene`` the query's sequence,
``query_keypoint`` its row in ``retr_queries_split-X.csv``, ``keypoint_set`` the level
(``easy``, ``hard``, ``tough``), ``ap`` its AP in the pool of ``pool_size`` items
(:func:`metricalc.patches.cvpr17_eval.retrieval_ap`). Two descriptors evaluated on the same split
therefore have the same queries, so the paired tests of ``metricalc compare`` pair them query by
query. The attrs say how the AP was made: ``ap_method="trapezoid"`` (``metrics.pr``),
``tie_policy="optimistic"`` (the positives come first in the list and a stable sort keeps them
ahead of tied distractors), ``distance`` (``"l2"`` or ``"l1"``), ``dataset`` naming the split
and pool size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.patches.cvpr17_eval import LEVEL_NAMES, POOL_SIZES

__all__ = ["retrieval_cube"]


def retrieval_cube(
    ap: np.ndarray,
    queries_seq: np.ndarray,
    *,
    descriptor: str,
    split: str,
    pool_size: int = 20000,
    distance: str = "l2",
) -> xr.Dataset:
    """A QueryCube of the retrieval APs ``ap`` (queries x 3 levels x :data:`POOL_SIZES`)."""
    if pool_size not in POOL_SIZES:
        raise InvalidInputError(f"pool_size: expected one of {POOL_SIZES}, got {pool_size}")
    n = len(queries_seq)
    if ap.shape != (n, len(LEVEL_NAMES), len(POOL_SIZES)):
        raise InvalidInputError(f"ap: expected shape ({n}, 3, {len(POOL_SIZES)}), got {ap.shape}")
    column = POOL_SIZES.index(pool_size)
    frame = pd.DataFrame(
        {
            "descriptor": descriptor,
            "scene": np.repeat(np.asarray(queries_seq, dtype=str), len(LEVEL_NAMES)),
            "query": np.repeat(np.arange(n), len(LEVEL_NAMES)),
            "keypoint_set": np.tile(list(LEVEL_NAMES.values()), n),
            "ap": ap[:, :, column].ravel(),
        }
    )
    attrs = {
        "ap_method": "trapezoid",
        "tie_policy": "optimistic",
        "distance": distance,
        "dataset": f"hpatches-cvpr17 retrieval, split {split}, pool {pool_size}",
    }
    return qc.from_dataframe(frame, attrs=attrs)
