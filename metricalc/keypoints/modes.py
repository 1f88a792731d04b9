"""A locked and a native evaluation of one set of sequences, their common work done once.

:func:`evaluate_modes` is :func:`metricalc.keypoints.pipeline.evaluate_sequences` twice, with
the same cache folder, for the two keypoint modes of a comparison (``metricalc demo``): the
built-in methods on one detector's keypoints (``locked:<detector>``) and on their own detectors'
keypoints (``native``). Its cubes are those two calls would give, array for array; it is faster
because (docs/keypoints.md, "On every core"):

- the detection and description of each image by the locked detector's own methods (SIFT on
  SIFT keypoints) serve both modes
  (:func:`metricalc.keypoints.extraction.extract_both`);
- a native method whose features are the locked run's has the locked cube's results;
- the native features are extracted in a background thread while the caller works on the
  locked cube (``meanwhile``: figures, a report), and evaluated there too when their distances
  are exact whatever BLAS does (:func:`metricalc.keypoints.matching.exact_products`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.keypoints.detectors import DETECTORS
from metricalc.keypoints.extraction import extract_both
from metricalc.keypoints.features import FeatureSet, SequenceLike
from metricalc.keypoints.matching import exact_products
from metricalc.keypoints.pipeline import (
    EvaluationSettings,
    cache_entry,
    cache_key,
    cached_evaluation,
    evaluation_inputs,
    extract_features,
)
from metricalc.keypoints.sequences import dataset_fingerprint
from metricalc.validation import Boolean, Text, validate_params

__all__ = ["MODES", "evaluate_modes"]

MODES = ("locked", "native")
"""The keypoint modes of :func:`evaluate_modes`, the keys of its result."""

Cached = tuple[xr.Dataset, bool]
"""A cube and whether it was read back from the cache instead of evaluated."""


@validate_params(progress=Boolean(), dataset_path=Text(empty=True))
def evaluate_modes(
    sequences: Sequence[SequenceLike],
    locked: EvaluationSettings,
    native: EvaluationSettings,
    *,
    cache: str | Path,
    names: Mapping[str, str] | None = None,
    dataset_path: str = "",
    progress: bool = False,
    meanwhile: Callable[[xr.Dataset, bool], None] | None = None,
) -> dict[str, Cached]:
    """The cubes of ``locked`` and ``native`` on ``sequences``, each evaluated or read back
    from the cache folder ``cache`` (:func:`metricalc.keypoints.pipeline.cached_evaluation`).

    Parameters
    ----------
    sequences : sequence of Sequence
        The scenes (:func:`metricalc.keypoints.load_sequences`).
    locked, native : EvaluationSettings
        The settings of the two modes: ``keypoints="locked:<detector>"`` and ``"native"``.
    cache : path
        The cache folder of both cubes.
    names : mapping mode -> file name, optional
        The file of ``cache`` that holds each mode's cube (default ``<key>.nc``), e.g.
        ``{"locked": "cube_locked.nc", "native": "cube_native.nc"}``.
    dataset_path, progress
        As for :func:`metricalc.keypoints.pipeline.evaluate_sequences`.
    meanwhile : callable, optional
        Called with the locked cube and whether it was reused, in this thread, while the
        native cube is made in another.

    Returns
    -------
    dict
        Mode (:data:`MODES`) -> (cube, whether it was read back from the cache).
    """
    detector = locked.locked
    if detector is None or native.keypoints != "native":
        raise InvalidInputError(
            f"evaluate_modes takes locked:<detector> and native keypoints; got "
            f"{locked.keypoints!r} and {native.keypoints!r}"
        )
    named = dict(names or {})
    fingerprint = dataset_fingerprint(sequences)  # hashed once: the cache keys and both cubes
    native_key = cache_key(evaluation_inputs(sequences, native, dataset=fingerprint))
    native_cached = cache_entry(cache, native_key, name=named.get("native")) is not None
    # native methods of the locked detector are described in the locked extraction, from its
    # detection and description, identical to an extraction of their own
    shared = tuple(m for m in native.descriptors if DETECTORS[m] == DETECTORS[detector])
    extracted: dict[str, FeatureSet] = {}
    result: dict[str, Cached] = {}

    def evaluate_mode(
        mode: str,
        settings: EvaluationSettings,
        features: Callable[[], FeatureSet] | None = None,
        *,
        shown: bool = progress,
        results_of: Mapping[str, xr.Dataset] | None = None,
    ) -> Cached:
        return cached_evaluation(
            sequences,
            settings,
            cache,
            name=named.get(mode),
            dataset=fingerprint,
            dataset_path=dataset_path,
            progress=shown,
            features=features,
            results_of=results_of,
        )

    def locked_features() -> FeatureSet:
        if native_cached or not shared:
            return extract_features(sequences, locked, progress=progress)
        extracted["locked"], extracted["native"] = extract_both(
            sequences,
            locked.descriptors,
            shared,
            locked=detector,
            max_keypoints=locked.max_keypoints,
            border=locked.border,
            progress=progress,
        )
        return extracted["locked"]

    def native_in_background() -> tuple[FeatureSet, Cached | None]:
        # the native features are extracted (OpenCV, without the GIL) while the main thread
        # runs `meanwhile` (e.g. matplotlib, with it); evaluated there too when their
        # distances are exact whatever BLAS does (SIFT's whole numbers, bits): the caller may
        # limit BLAS to one thread for a while, which would change the last digits of other
        # descriptors' distances
        done = extracted.get("native", {})
        rest = replace(native, descriptors=tuple(m for m in native.descriptors if m not in done))
        more = extract_features(sequences, rest) if rest.descriptors else {}
        features = {m: done[m] if m in done else more[m] for m in native.descriptors}
        exact = all(
            exact_products(image.descriptors)
            for scenes in features.values()
            for images in scenes.values()
            for image in images.values()
        )
        if not exact:
            return features, None
        # a native method whose features are the locked run's (unless the locked run dropped
        # keypoints another method could not describe) has the locked cube's results
        same = [m for m in done if _same_features(done[m], extracted["locked"].get(m))]
        return features, evaluate_mode(
            "native",
            native,
            lambda: features,
            shown=False,
            results_of={m: result["locked"][0] for m in same},
        )

    result["locked"] = evaluate_mode("locked", locked, locked_features)
    with ThreadPoolExecutor(1) as background:
        pending = None if native_cached else background.submit(native_in_background)
        if meanwhile is not None:
            meanwhile(*result["locked"])
        features, evaluated = (None, None) if pending is None else pending.result()
        if evaluated is None:
            given = None if features is None else (lambda: features)
            evaluated = evaluate_mode("native", native, given)
        result["native"] = evaluated
    return result


def _same_features(a: Mapping[str, Any], b: Mapping[str, Any] | None) -> bool:
    """Whether two extractions of one method hold the same keypoints and rows on every image."""
    return b is not None and all(
        np.array_equal(a[scene][k].keypoints, b[scene][k].keypoints)
        and np.array_equal(a[scene][k].descriptors, b[scene][k].descriptors)
        for scene in a
        for k in a[scene]
    )
