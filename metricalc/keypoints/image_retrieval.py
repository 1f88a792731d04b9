r"""DescriptorWorkbench's image retrieval: each reference image retrieves the images of its scene.

DescriptorWorkbench (``ImageRetrievalAccumulator::compute`` in
``src/cli/experiment_runner/processing.cpp``, scorer ``total_matches``, its default) takes the
reference image (image 1) of every scene as a query and ranks every other image of the dataset
by the number of matches of cross-checked brute-force matching between the two images (a match
is a mutual nearest neighbour); equal scores are ordered by scene name, then image name. The
images of the query's scene are relevant, and the query's AP is the information-retrieval AP of
that ranked list, ties kept in that order (:func:`metricalc.average_precision` with
``method="vlfeat"``):

.. math::

    AP = \frac{1}{|\mathrm{rel}|} \sum_{i \in \mathrm{rel}}
        \frac{\#\{j \le i : j \in \mathrm{rel}\}}{i}

With one query per scene, the results are per-scene cube variables on
``(descriptor, sequence)``: ``image_retrieval_ap`` (NaN where the scene has no query, or its
query no relevant image: :math:`|\mathrm{rel}| = 0`, where DescriptorWorkbench writes 0) and
``image_retrieval_relevant`` (:math:`|\mathrm{rel}|`, -1 where the scene has no query).
``image_retrieval_map`` (:func:`metricalc.metric_set`) is the mean of the APs over the scenes.
:func:`metricalc.keypoints.evaluate` computes them (``image_retrieval=True``).

Cost: per descriptor, one distance matrix of every reference image against all images of the
dataset, i.e. (scenes) x (images) image matchings, done as one GEMM and one nearest-query search
per chunk of whole images (:func:`mutual_match_counts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.ranking import average_precision
from metricalc.errors import InvalidInputError
from metricalc.keypoints.geometry import inside
from metricalc.keypoints.matching import prepare_candidates, prepare_queries, squared_distances

__all__ = [
    "RETRIEVAL_VARIABLES",
    "descriptor_image_retrieval",
    "image_retrieval",
    "mutual_match_counts",
]

RETRIEVAL_VARIABLES = ("image_retrieval_ap", "image_retrieval_relevant")
"""The per-scene cube variables of the image retrieval (on ``(descriptor, sequence)``)."""

CHUNK_ELEMENTS = 1 << 24
"""Distance-matrix elements per chunk of candidate images (64 MiB of float32): larger GEMMs than
``metricalc.keypoints.matching.GEMM_CHUNK_ELEMENTS``, as each query image meets all images."""

_IMAGES = range(1, 7)


def _chunks(sizes: np.ndarray, budget: int) -> list[slice]:
    """Consecutive runs of images whose candidates total at most ``budget`` columns (a larger
    image alone)."""
    runs, start, width = [], 0, 0
    for i, size in enumerate(sizes.tolist()):
        if i > start and width + size > budget:
            runs.append(slice(start, i))
            start, width = i, 0
        width += size
    runs.append(slice(start, len(sizes)))
    return runs


def _check_kinds(query: np.ndarray, images: Sequence[np.ndarray]) -> None:
    """Every image's descriptors have the query's width and kind (float, or uint8 bits)."""
    for position, image in enumerate(images):
        if (
            image.ndim != 2
            or query.ndim != 2
            or image.shape[1] != query.shape[1]
            or (image.dtype == np.uint8) != (query.dtype == np.uint8)
        ):
            raise InvalidInputError(
                f"image {position}: descriptors of shape {image.shape} and dtype {image.dtype}; "
                f"expected (M, {query.shape[-1]}) of the query's kind ({query.dtype})"
            )


def mutual_match_counts(query: np.ndarray, images: Sequence[np.ndarray]) -> np.ndarray:
    r"""Number of mutual nearest neighbours between ``query`` and each of ``images``.

    For image :math:`I`, query keypoint :math:`i` and its nearest neighbour :math:`j` in
    :math:`I` (L2, or Hamming for uint8 packed bits; lowest index on ties) form a match when
    :math:`i` is the nearest query keypoint of :math:`j` (lowest index on ties), as
    :func:`metricalc.keypoints.matching.nn_matches` (``mutual=True``) and OpenCV's
    cross-checked ``BFMatcher`` do:

    .. math::

        n_I = \#\{i : \operatorname{argmin}_{t} d(a_t, b_{j(i)}) = i\}, \qquad
        j(i) = \operatorname{argmin}_{j \in I} d(a_i, b_j)

    The images are concatenated and matched in chunks of whole images: one GEMM and one
    nearest-query search per chunk, then one ``argmin`` over the columns of each image.

    Parameters
    ----------
    query : ndarray (N, D)
        Descriptors of the query image (float, or uint8 packed bits).
    images : sequence of ndarray (M_I, D)
        Descriptors of each candidate image, the same kind as ``query``.

    Returns
    -------
    ndarray of int64, shape (len(images),)
        The match counts (0 for an image without descriptors, or an empty query).

    Examples
    --------
    >>> a = np.array([[0.0, 0], [10, 0], [0, 10]], dtype=np.float32)
    >>> b = np.array([[0.5, 0], [9, 0], [50, 50]], dtype=np.float32)
    >>> mutual_match_counts(a, [b, b[:1], b[2:]]).tolist()
    [2, 1, 1]
    """
    _check_kinds(query, images)
    sizes = np.array([len(image) for image in images], dtype=np.int64)
    counts = np.zeros(len(images), dtype=np.int64)
    n = len(query)
    nonempty = np.flatnonzero(sizes > 0)
    if n == 0 or nonempty.size == 0:
        return counts
    queries = prepare_queries(query)
    rows = np.arange(n)
    for run in _chunks(sizes[nonempty], max(1, CHUNK_ELEMENTS // n)):
        members = nonempty[run]
        candidates = prepare_candidates(np.concatenate([images[i] for i in members]))
        squared = squared_distances(queries, candidates)  # (n, columns of the chunk)
        nearest_query = np.argmin(squared.T, axis=1)  # per column: lowest index on ties
        edges = np.cumsum(np.concatenate(([0], sizes[members])))
        for image, start, stop in zip(members, edges[:-1], edges[1:], strict=True):
            nearest = start + np.argmin(squared[:, start:stop], axis=1)  # lowest on ties
            counts[image] = np.count_nonzero(nearest_query[nearest] == rows)
    return counts


def _registered(
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


def descriptor_image_retrieval(
    sequences: Sequence[Any], scenes: Mapping[str, Mapping[int, Any]], *, border: float = 40.0
) -> dict[str, np.ndarray]:
    """The image retrieval of one descriptor: one query (image 1) per scene.

    Parameters
    ----------
    sequences : sequence of Sequence
        The scenes; image sizes for the border.
    scenes : mapping scene -> image (1..6) -> Features
        The descriptor's features.
    border : float
        Keypoints closer than this to the image edge are dropped (as in the evaluation).

    Returns
    -------
    dict
        ``image_retrieval_ap`` (float64) and ``image_retrieval_relevant`` (int64), one value per
        scene in the order of ``sequences``: the AP of the scene's reference image and its
        number of relevant images (the scene's other images with keypoints inside the border).
        A scene whose reference image has no keypoint inside the border is no query: NaN and -1.
    """
    images = _registered(sequences, scenes, border)
    keys = sorted(images, key=lambda key: (key[0], f"{key[1]}.ppm"))  # DW's tie order
    descriptors = [images[key] for key in keys]
    scene_of = np.array([key[0] for key in keys], dtype=object)
    aps = np.full(len(sequences), np.nan)
    relevant_counts = np.full(len(sequences), -1, dtype=np.int64)
    for position, sequence in enumerate(sequences):
        if (sequence.name, 1) not in images:
            continue
        own = keys.index((sequence.name, 1))
        scores = np.delete(mutual_match_counts(images[(sequence.name, 1)], descriptors), own)
        relevant = np.delete(scene_of == sequence.name, own)
        # the candidates are already in tie order, which "vlfeat" keeps (a stable sort); NaN
        # without a relevant image (DescriptorWorkbench writes 0 there)
        aps[position] = average_precision(relevant, scores, method="vlfeat")
        relevant_counts[position] = int(relevant.sum())
    return {"image_retrieval_ap": aps, "image_retrieval_relevant": relevant_counts}


def image_retrieval(
    sequences: Sequence[Any],
    features: Mapping[str, Mapping[str, Mapping[int, Any]]],
    *,
    border: float = 40.0,
) -> xr.Dataset:
    """DescriptorWorkbench's image retrieval of every reference image, for every descriptor.

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
    xarray.Dataset
        :data:`RETRIEVAL_VARIABLES` over ``(descriptor, sequence)`` (see
        :func:`descriptor_image_retrieval`), as :func:`metricalc.keypoints.evaluate` puts them
        in the cube.
    """
    if not sequences:
        raise InvalidInputError("no sequences for image retrieval")
    names = list(features)
    results = [
        descriptor_image_retrieval(sequences, features[name], border=border) for name in names
    ]
    dims, shape = ("descriptor", "sequence"), (len(names), len(sequences))
    dtypes = dict(zip(RETRIEVAL_VARIABLES, (np.float64, np.int64), strict=True))
    return xr.Dataset(
        {
            variable: (dims, np.array([r[variable] for r in results], dtype=dtype).reshape(shape))
            for variable, dtype in dtypes.items()
        },
        coords={"descriptor": names, "sequence": [sequence.name for sequence in sequences]},
    )
