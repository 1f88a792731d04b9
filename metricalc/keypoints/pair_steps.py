"""The keypoint pipeline one image and one image pair at a time, for export-then-evaluate runs.

:func:`metricalc.keypoints.pipeline.evaluate_sequences` extracts every image, then evaluates
every image pair 1 -> k of every scene (:func:`metricalc.keypoints.pairs.evaluate_pair`) and
gathers the pairs into a QueryCube (:func:`metricalc.keypoints.evaluate.cube_from_pairs`). A run
of ``metricalc run hpatches`` takes the same steps under the same
:class:`~metricalc.keypoints.pipeline.EvaluationSettings`, but one task per image and per pair
(scheduled by dask, each pair's features and matches kept in the run's ``predictions.h5`` so an
interrupted export resumes): :func:`image_features` and :func:`pair_queries` are those steps, so
both give the same features and per-query results.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from metricalc.keypoints.extraction import extract_image
from metricalc.keypoints.feature_files import load_image_features
from metricalc.keypoints.features import SequenceLike
from metricalc.keypoints.featureset import Features
from metricalc.keypoints.pairs import evaluate_pair
from metricalc.keypoints.pipeline import EvaluationSettings

__all__ = ["image_features", "pair_queries"]


def image_features(
    sequence: SequenceLike,
    k: int,
    descriptor: str,
    settings: EvaluationSettings,
    *,
    features: str | Path | None = None,
) -> Features:
    """The keypoints and descriptors of image ``k`` of a scene: the built-in ``descriptor``
    extracted under ``settings`` (its keypoints, maximum number and border), as
    :func:`~metricalc.keypoints.pipeline.extract_features` extracts it, or your own from
    ``<features>/<descriptor>/<scene>/<k>.npz``.

    Examples
    --------
    >>> import numpy as np
    >>> from skimage import data
    >>> from metricalc.keypoints import extract
    >>> half = np.ascontiguousarray(data.camera()[::2, ::2])  # 256 x 256, the same six times
    >>> class Camera:
    ...     name, gray, shape = "i_camera", lambda k: half, lambda k: half.shape
    >>> settings = EvaluationSettings(("orb",), "locked:sift", max_keypoints=50)
    >>> one = image_features(Camera, 2, "orb", settings)
    >>> every = extract([Camera], "orb", locked="sift", max_keypoints=50)["orb"]["i_camera"][2]
    >>> len(one), bool((one.descriptors == every.descriptors).all())
    (50, True)
    """
    if features is not None:
        return load_image_features(Path(features) / descriptor / str(sequence.name) / f"{k}.npz")
    return extract_image(
        sequence.gray(k),
        (descriptor,),
        locked=settings.locked,
        max_keypoints=settings.max_keypoints,
        border=settings.border,
    )[descriptor]


def pair_queries(
    first: Features,
    second: Features,
    H: np.ndarray,
    shape0: tuple[int, int],
    shape1: tuple[int, int],
    settings: EvaluationSettings,
) -> dict[str, np.ndarray]:
    """The per-query results of the image pair (image 1 -> image k, homography ``H``) under the
    protocol of ``settings`` (tau, border, tie policy): those of
    :func:`metricalc.keypoints.pairs.evaluate_pair`, which the cube of
    :func:`~metricalc.keypoints.pipeline.evaluate_sequences` holds for the pair."""
    return evaluate_pair(
        first,
        second,
        H,
        shape0,
        shape1,
        tau=settings.tau,
        border=settings.border,
        tie_policy=settings.tie_policy,
    )
