"""Simulated keypoint cubes with clustered queries: the check of the statistics' error rates.

Two descriptors over ``scenes`` x ``pairs`` x ``queries``: each query's AP is

.. math::

    v_{d,s,p,q} = \\mathrm{clip}\\bigl(\\mu + a_s + b_{s,p} + c_{d,s} + e_{d,s,p}
    + \\epsilon_{d,s,p,q} + g\\,[d = 0],\\ 0,\\ 1\\bigr)

with scene effects :math:`a_s`, pair effects :math:`b_{s,p}`, descriptor x scene effects
:math:`c_{d,s}`, descriptor x pair effects :math:`e_{d,s,p}` and query noise
:math:`\\epsilon`, all normal with mean 0. Over new scenes the two descriptors do not differ
unless ``gain`` :math:`g \\ne 0`: the descriptor x scene effects make the queries of one scene
correlated, so a test that treats queries as independent rejects far too often
(docs/stats.md reruns this simulation).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from metricalc import cube as qc

__all__ = ["clustered_cube"]


def clustered_cube(
    rng: np.random.Generator,
    *,
    scenes: int = 16,
    pairs: int = 5,
    queries: int = 60,
    gain: float = 0.0,
    scene_sd: float = 0.15,
    descriptor_scene_sd: float = 0.06,
    descriptor_pair_sd: float = 0.04,
    query_sd: float = 0.2,
) -> xr.Dataset:
    """A locked-keypoint QueryCube of descriptors ``"a"`` (with the ``gain``) and ``"b"``.

    Scenes alternate ``i_`` and ``v_`` names; every query has a relevant item.

    Examples
    --------
    >>> import numpy as np
    >>> cube = clustered_cube(np.random.default_rng(0), scenes=4, pairs=2, queries=3)
    >>> cube.sizes["query"], cube.descriptor.values.tolist()
    (24, ['a', 'b'])
    """
    shape = (scenes, pairs, queries)
    base = 0.5 + rng.normal(0, scene_sd, (scenes, 1, 1)) + rng.normal(0, 0.05, (scenes, pairs, 1))
    values = (
        base[None]
        + rng.normal(0, descriptor_scene_sd, (2, scenes, 1, 1))
        + rng.normal(0, descriptor_pair_sd, (2, scenes, pairs, 1))
        + rng.normal(0, query_sd, (2, *shape))
    )
    values[0] += gain
    names = np.array([f"{'iv'[s % 2]}_{s:03d}" for s in range(scenes)])
    n = scenes * pairs * queries
    coords = {
        "scene": np.repeat(names, pairs * queries),
        "pair": np.tile(np.repeat([f"1-{k + 2}" for k in range(pairs)], queries), scenes),
        "keypoint_set": np.full(n, "sift"),
        "query_keypoint": np.tile(np.arange(queries), scenes * pairs),
    }
    ap = np.clip(values, 0.0, 1.0).reshape(2, n)
    return qc.new_cube(["a", "b"], coords, {"ap": ap}, attrs=qc.DEFAULT_ATTRS)
