r"""DescriptorWorkbench's image retrieval: each reference image retrieves the images of its scene.

DescriptorWorkbench (``ImageRetrievalAccumulator::compute`` in
``src/cli/experiment_runner/processing.cpp``, scorer ``total_matches``, its default) takes the
reference image (image 1) of every scene as a query and ranks every other image of the dataset
by the number of matches of cross-checked brute-force matching between the two images (a match
is a mutual nearest neighbour); equal scores are ordered by scene name, then image name. The
images of the query's scene are relevant, and the query's AP is the information-retrieval AP of
that ranked list:

.. math::

    AP = \frac{1}{|\mathrm{rel}|} \sum_{i \in \mathrm{rel}}
        \frac{\#\{j \le i : j \in \mathrm{rel}\}}{i}

``image_retrieval_map`` (:func:`metricalc.metric_set`) is the mean of these APs over the query
images. :func:`image_retrieval_ap` gives them as the cube variable ``image_retrieval_ap`` over
``(descriptor, image_query)``. The QueryCube schema does not hold that dim yet, so
:func:`metricalc.keypoints.evaluate` does not compute it: assign it to a cube before
:func:`metricalc.metric_set` (``cube.assign(image_retrieval_ap=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import inside
from metricalc.keypoints.matching import nn_matches

__all__ = ["image_retrieval_ap", "retrieval_ap"]

_IMAGES = range(1, 7)
_DIM = "image_query"  # metricalc.metrics.IMAGE_RETRIEVAL_DIM (keypoints/ does not import metrics)


def retrieval_ap(relevant: np.ndarray) -> float:
    """IR average precision of a ranked list of relevance flags; NaN without a relevant item
    (DescriptorWorkbench writes 0 there).

    Examples
    --------
    >>> retrieval_ap(np.array([True, False, True]))   # (1/1 + 2/3) / 2
    0.8333333333333333
    """
    hits = np.flatnonzero(relevant)
    if hits.size == 0:
        return float("nan")
    return float(np.mean(np.arange(1, hits.size + 1) / (hits + 1)))


def _descriptors(
    sequences: Sequence[Any], scenes: Mapping[str, Mapping[int, Any]], border: float
) -> dict[tuple[str, int], np.ndarray]:
    """The descriptors of the keypoints ``border`` px inside each image; images without any are
    left out (DescriptorWorkbench registers only images with descriptors)."""
    out = {}
    for sequence in sequences:
        scene = scenes.get(sequence.name)
        if scene is None:
            raise InvalidInputError(f"no features for scene {sequence.name!r}")
        for k in _IMAGES:
            features = scene[k]
            keep = inside(features.keypoints, sequence.shape(k), border)
            if keep.any():
                out[(sequence.name, k)] = features.descriptors[keep]
    return out


def _query_aps(images: dict[tuple[str, int], np.ndarray], scenes: list[str]) -> np.ndarray:
    """AP of the reference image of each scene (NaN where the scene has none)."""
    keys = sorted(images, key=lambda key: (key[0], f"{key[1]}.ppm"))  # the tie order
    aps = np.full(len(scenes), np.nan)
    for position, scene in enumerate(scenes):
        query = images.get((scene, 1))
        if query is None:
            continue
        candidates = [key for key in keys if key != (scene, 1)]
        scores = np.array(
            [int((nn_matches(query, images[key])[0] >= 0).sum()) for key in candidates]
        )
        order = np.argsort(-scores, kind="stable")  # candidates are already in tie order
        relevant = np.array([candidates[i][0] == scene for i in order], dtype=bool)
        aps[position] = retrieval_ap(relevant)
    return aps


def image_retrieval_ap(
    sequences: Sequence[Any],
    features: Mapping[str, Mapping[str, Mapping[int, Any]]],
    *,
    border: float = 40.0,
) -> xr.DataArray:
    """DescriptorWorkbench's image-retrieval AP of every reference image, for every descriptor.

    Parameters
    ----------
    sequences : sequence of Sequence
        The scenes (:func:`metricalc.keypoints.load_sequences`); image sizes for the border.
    features : mapping descriptor -> scene -> image (1..6) -> Features
        As for :func:`metricalc.keypoints.evaluate`.
    border : float
        Keypoints closer than this to the image edge are dropped (as in the evaluation).

    Returns
    -------
    xarray.DataArray
        ``image_retrieval_ap`` over ``(descriptor, image_query)``, one query per scene (its
        image 1, coordinate ``image_scene``); NaN where the reference image has no keypoint inside
        the border or its scene no other image. Cost: per descriptor, (scenes) x (images) image
        matchings.
    """
    if not sequences:
        raise InvalidInputError("no sequences for image retrieval")
    scenes = [sequence.name for sequence in sequences]
    names = list(features)
    values = np.array(
        [_query_aps(_descriptors(sequences, features[name], border), scenes) for name in names]
    ).reshape(len(names), len(scenes))
    return xr.DataArray(
        values,
        dims=("descriptor", _DIM),
        coords={"descriptor": names, "image_scene": (_DIM, scenes)},
        name="image_retrieval_ap",
    )
