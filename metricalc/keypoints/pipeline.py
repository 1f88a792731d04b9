"""The keypoint pipeline: sequences -> features -> QueryCube, reused from a cache when unchanged.

The one way from image sequences to a QueryCube that ``metricalc demo``,
``metricalc keypoints eval`` and a study's ``data: {dataset: ...}`` (``metricalc report``) all
take: :func:`evaluate_sequences` extracts the features of the built-in methods
(:func:`metricalc.keypoints.features.extract`, native or locked, with your own descriptors) and
evaluates them (:func:`metricalc.keypoints.evaluate`), under one :class:`EvaluationSettings`
(:func:`metricalc.keypoints.modes.evaluate_modes` runs a locked and a native evaluation of the
same sequences, sharing their common work).

Evaluating a dataset takes minutes; reading its cube back takes a second. A cache is a folder
of cube files, each of which records the key of its inputs in its attr ``cache_key``
(:func:`cache_key`, the only key of a keypoint cube): :func:`evaluate_sequences` with
``cache=<folder>`` (:func:`cached_evaluation`) evaluates again only when no file of the folder
holds the key (:func:`cache_entry`), and keeps a new cube as ``<folder>/<key>.nc``. The key
hashes:

- the data: the content fingerprint of the sequences folder
  (:func:`metricalc.keypoints.sequences.dataset_fingerprint`) and the scenes evaluated;
- the systems: the descriptors and the keypoints (``native`` or ``locked:<detector>``), with
  the extraction settings (border, maximum number of keypoints) and the content of your own
  features (:func:`features_fingerprint`);
- the protocol of :func:`metricalc.keypoints.evaluate`: tau, border, tie policy, the Bojanic
  tasks, y0 policy, distractors, seed (and image retrieval where the caller names it);
- the versions of metricalc and OpenCV (its detectors and descriptors make the features).

Any change to one of them gives another key, so a changed input is never served an old cube.
The key is not a proof of identity against edits of metricalc's own code between releases
(its version stays the same): delete the cached files after changing the evaluation code. A
file renamed or written by another key is not taken: its attr names the key it holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.keypoints.evaluate import evaluate
from metricalc.keypoints.extraction import DEFAULT_METHODS, MAX_KEYPOINTS, extract
from metricalc.keypoints.features import FeatureSet, SequenceLike
from metricalc.keypoints.sequences import dataset_fingerprint
from metricalc.validation import Boolean, Text, validate_params
from metricalc.version import __version__

__all__ = [
    "EvaluationSettings",
    "cache_entry",
    "cache_key",
    "cached_cube",
    "cached_evaluation",
    "evaluate_sequences",
    "evaluation_inputs",
    "extract_features",
    "features_fingerprint",
    "holds_key",
    "keypoint_mode",
]


def keypoint_mode(locked: str | None) -> str:
    """The cube's ``keypoints`` attr of an extraction: ``"locked:<detector>"`` or ``"native"``.

    Examples
    --------
    >>> keypoint_mode("sift"), keypoint_mode(None)
    ('locked:sift', 'native')
    """
    return f"locked:{locked}" if locked else "native"


@dataclass(frozen=True)
class EvaluationSettings:
    """Everything but the data that determines a keypoint QueryCube.

    Attributes
    ----------
    descriptors : tuple of str
        The built-in methods to extract (a subset of
        :data:`~metricalc.keypoints.features.BUILTIN_METHODS`; default
        :data:`~metricalc.keypoints.features.DEFAULT_METHODS`).
    keypoints : str
        ``"native"``, ``"locked:<detector>"`` (:func:`keypoint_mode`), or ``"external"``: your
        own features only, nothing extracted.
    max_keypoints, border
        Of the extraction (``border`` also of the evaluation).
    tau, tie_policy, bojanic, y0, seed
        Of :func:`metricalc.keypoints.evaluate`.
    image_retrieval : bool or None
        Also DescriptorWorkbench's image retrieval. None: not run, and not named in the cache
        key (the keys of studies); a bool is named in it (the keys of ``metricalc demo``).

    Examples
    --------
    >>> settings = EvaluationSettings(("sift", "orb"), "locked:sift", tau=5.0)
    >>> settings.locked, settings.max_keypoints, EvaluationSettings().locked
    ('sift', 2000, None)
    """

    descriptors: tuple[str, ...] = DEFAULT_METHODS
    keypoints: str = "native"
    max_keypoints: int | None = MAX_KEYPOINTS
    tau: float = 3.0
    border: float = 40.0
    tie_policy: str = "expected"
    bojanic: bool = True
    y0: str = "negative"
    image_retrieval: bool | None = None
    seed: int = 0

    @property
    def locked(self) -> str | None:
        """The detector of ``locked:<detector>`` keypoints, else None."""
        return self.keypoints.partition(":")[2] or None


def extract_features(
    sequences: Sequence[SequenceLike],
    settings: EvaluationSettings,
    *,
    progress: bool = False,
    own: FeatureSet | None = None,
) -> FeatureSet:
    """The features :func:`evaluate_sequences` evaluates: the built-in methods of ``settings``
    (:func:`metricalc.keypoints.features.extract`, native or locked), with your own ``own``;
    with ``keypoints="external"`` your own features only.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> import cv2
    >>> from skimage import data
    >>> gray = cv2.resize(data.camera(), (256, 256))
    >>> scene = SimpleNamespace(name="i_camera", gray=lambda k: gray, shape=lambda k: gray.shape)
    >>> features = extract_features([scene], EvaluationSettings(("sift",), max_keypoints=50))
    >>> list(features), sorted(features["sift"]["i_camera"])
    (['sift'], [1, 2, 3, 4, 5, 6])
    """
    if settings.keypoints == "external":
        if not own:
            raise InvalidInputError("keypoints='external' evaluates your own features: pass own")
        return dict(own)
    return extract(
        sequences,
        settings.descriptors,
        locked=settings.locked,
        max_keypoints=settings.max_keypoints,
        border=settings.border,
        progress=progress,
        own=own,
    )


@validate_params(progress=Boolean(), dataset_path=Text(empty=True))
def evaluate_sequences(
    sequences: Sequence[SequenceLike],
    settings: EvaluationSettings,
    *,
    progress: bool = False,
    dataset: str | None = None,
    dataset_path: str = "",
    own: FeatureSet | None = None,
    features: FeatureSet | None = None,
    results_of: Mapping[str, xr.Dataset] | None = None,
    cache: str | Path | None = None,
) -> xr.Dataset:
    """Extract the features of ``settings`` and evaluate them into one QueryCube, or read the
    cube of the same inputs back from the cache folder ``cache``.

    Parameters
    ----------
    sequences : sequence of Sequence
        The scenes (:func:`metricalc.keypoints.load_sequences`).
    settings : EvaluationSettings
        Descriptors, keypoints and protocol.
    progress, dataset, dataset_path
        As for :func:`metricalc.keypoints.evaluate` (``dataset`` default: the fingerprint).
    own : mapping descriptor -> scene -> image -> Features, optional
        Your own descriptors, evaluated next to the built-in ones (``extract(own=...)``); with
        ``keypoints="external"`` they are all that is evaluated.
    features : mapping descriptor -> scene -> image -> Features, optional
        The features of :func:`extract_features` with these ``settings`` (and ``own``), when
        the caller extracted them already (e.g. while it did other work): evaluated as given,
        nothing extracted.
    results_of : mapping descriptor -> QueryCube, optional
        Descriptors evaluated before on the same features and protocol
        (:func:`metricalc.keypoints.evaluate`), taken from those cubes.
    cache : path, optional
        A cache folder (:func:`cached_evaluation`): the cube of the same inputs
        (:func:`cache_key`) is read from any of its files, else evaluated and kept there as
        ``<key>.nc``. None: always evaluated, nothing written.

    Returns
    -------
    xarray.Dataset
        The QueryCube of :func:`metricalc.keypoints.evaluate`.
    """
    if cache is not None:
        extracted = features
        given = None if extracted is None else (lambda: extracted)
        return cached_evaluation(
            sequences,
            settings,
            cache,
            dataset=dataset,
            dataset_path=dataset_path,
            progress=progress,
            own=own,
            features=given,
            results_of=results_of,
        )[0]
    if features is None:
        features = extract_features(sequences, settings, progress=progress, own=own)
    return evaluate(
        sequences,
        features,
        keypoints=settings.keypoints,
        tau=settings.tau,
        border=settings.border,
        tie_policy=settings.tie_policy,
        bojanic=settings.bojanic,
        image_retrieval=bool(settings.image_retrieval),
        y0=settings.y0,
        seed=settings.seed,
        dataset=dataset,
        dataset_path=dataset_path,
        progress=progress,
        results_of=results_of,
    )


# --------------------------------------------------------------------------------------------
# The cube cache
# --------------------------------------------------------------------------------------------


def cache_key(inputs: Mapping[str, Any]) -> str:
    """The first 24 hex digits of the SHA-256 of ``inputs`` as canonical JSON (keys sorted).

    Examples
    --------
    >>> cache_key({"tau": 3.0, "descriptors": ["sift"]}) == cache_key(
    ...     {"descriptors": ["sift"], "tau": 3.0})
    True
    >>> cache_key({"tau": 3.0}) == cache_key({"tau": 4.0})
    False
    """
    text = json.dumps(json_safe(dict(inputs)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def features_fingerprint(own: FeatureSet) -> dict[str, str]:
    """Descriptor -> SHA-256 (hex) of its keypoints and descriptors on every image, in the order
    scene, image (names, dtypes, shapes and bytes): your own features' part of a cache key.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.keypoints import Features
    >>> one = Features(np.zeros((1, 2)), np.ones((1, 4), np.float32))
    >>> two = Features(np.zeros((1, 2)), np.full((1, 4), 2, np.float32))
    >>> a, b = (features_fingerprint({"mine": {"i_a": {1: f}}}) for f in (one, two))
    >>> list(a), a == b
    (['mine'], False)
    """
    prints = {}
    for descriptor, scenes in sorted(own.items()):
        digest = hashlib.sha256()
        for scene, images in sorted(scenes.items()):
            for k, image in sorted(images.items()):
                digest.update(f"{scene}/{k}".encode())
                for array in (image.keypoints, image.descriptors):
                    digest.update(f"{array.dtype.str}{array.shape}".encode())
                    digest.update(np.ascontiguousarray(array).tobytes())
        prints[descriptor] = digest.hexdigest()
    return prints


def evaluation_inputs(
    sequences: Sequence[SequenceLike],
    settings: EvaluationSettings,
    *,
    dataset: str | None = None,
    own: FeatureSet | None = None,
) -> dict[str, Any]:
    """Everything that determines the cube of :func:`evaluate_sequences` with ``settings`` on
    ``sequences``: the mapping :func:`cache_key` hashes. The distractors of ``evaluate`` are its
    defaults. ``dataset`` is the fingerprint of ``sequences`` when the caller already has it (it
    is passed to ``evaluate`` too, so the folder is hashed once per run); by default it is
    computed. ``image_retrieval`` is in the mapping only when the settings name it (not None),
    ``own`` (:func:`features_fingerprint`) only when your own features are evaluated."""
    inputs: dict[str, Any] = {
        "dataset": dataset_fingerprint(sequences) if dataset is None else dataset,
        "scenes": sorted(str(s.name) for s in sequences),
        "descriptors": list(settings.descriptors),
        "keypoints": settings.keypoints,
        "max_keypoints": settings.max_keypoints,
        "tau": float(settings.tau),
        "border": float(settings.border),
        "tie_policy": settings.tie_policy,
        "bojanic": bool(settings.bojanic),
        "y0": settings.y0,
        # evaluate() keeps its distractor defaults, the cube schema's
        "n_distractor_scenes": cubes.DEFAULT_ATTRS["n_distractor_scenes"],
        "n_distractors": cubes.DEFAULT_ATTRS["n_distractors"],
        "seed": int(settings.seed),
        "metricalc": __version__,
        "opencv": cv2.__version__,
    }
    if settings.image_retrieval is not None:
        inputs["image_retrieval"] = settings.image_retrieval
    if own:
        inputs["own"] = features_fingerprint(own)
    return inputs


def holds_key(path: str | Path, key: str) -> bool:
    """Whether the file ``path`` records the cache key ``key`` (its attrs only are read; the
    cube itself is checked when :func:`cached_cube` reads it)."""
    if not Path(path).is_file():
        return False
    try:
        with xr.open_dataset(path, engine="h5netcdf") as lazy:  # attrs only, nothing read
            return bool(lazy.attrs.get("cache_key") == key)
    except (OSError, ValueError):
        return False


def _holding(path: Path, key: str) -> xr.Dataset | None:
    """The cube in ``path`` if it is one and holds ``key`` (checked on the attrs first)."""
    if not holds_key(path, key):
        return None
    try:
        return cubes.open_cube(path)
    except (InvalidInputError, OSError, ValueError):
        return None


def cached_cube(
    path: str | Path,
    key: str,
    compute: Callable[[], xr.Dataset],
    *,
    elsewhere: Iterable[Path] = (),
) -> tuple[xr.Dataset, bool]:
    """The cube in ``path`` when it holds ``key`` (its attr ``cache_key``), else the first of
    ``elsewhere`` that does (read where it is, not copied), else ``compute()`` written to
    ``path`` with that key (atomically). Returns the cube and whether it was reused.

    A file at ``path`` that cannot be read as a cube, or holds another key, is replaced.
    """
    path = Path(path)
    for candidate in (path, *elsewhere):
        found = _holding(Path(candidate), key)
        if found is not None:
            return found, True
    cube = compute()
    cube.attrs["cache_key"] = key
    cubes.save(cube, path)
    return cube, False


def cache_entry(cache: str | Path, key: str, *, name: str | None = None) -> Path | None:
    """The file of the cache folder ``cache`` that holds ``key``, or None: ``<cache>/<name>``,
    ``<cache>/<key>.nc``, then any other ``<cache>/*.nc`` that records the key (e.g. a cube
    of ``metricalc demo`` found by ``metricalc keypoints eval --cache``)."""
    folder = Path(cache)
    first = [folder / n for n in (name, f"{key}.nc") if n is not None]
    rest = sorted(set(folder.glob("*.nc")) - set(first)) if folder.is_dir() else []
    return next((path for path in (*first, *rest) if holds_key(path, key)), None)


@validate_params(progress=Boolean(), dataset_path=Text(empty=True))
def cached_evaluation(
    sequences: Sequence[SequenceLike],
    settings: EvaluationSettings,
    cache: str | Path,
    *,
    name: str | None = None,
    dataset: str | None = None,
    dataset_path: str = "",
    elsewhere: Iterable[Path] = (),
    progress: bool = False,
    own: FeatureSet | None = None,
    features: Callable[[], FeatureSet] | None = None,
    results_of: Mapping[str, xr.Dataset] | None = None,
) -> tuple[xr.Dataset, bool]:
    """:func:`evaluate_sequences`, or the cube of the same inputs kept by an earlier run.

    Parameters
    ----------
    sequences, settings, dataset_path, progress, own
        As for :func:`evaluate_sequences`.
    cache : path
        The cache folder: a new cube is written to ``<cache>/<key>.nc`` (or ``<cache>/<name>``);
        a cube of the same key is read from any ``.nc`` file of the folder
        (:func:`cache_entry`).
    name : str, optional
        The file of the folder that holds the cube when it returns (``cube_locked.nc`` of
        ``metricalc demo``): written, or copied from the entry found elsewhere in the folder.
    dataset : str, optional
        The fingerprint of ``sequences`` (computed once here by default), in the key and the cube.
    elsewhere : iterable of path
        Other files to read the cube from when they hold its key (:func:`cached_cube`).
    features : callable, optional
        Called only when the cube is evaluated: the features of ``settings``
        (:func:`extract_features`), e.g. the result of an extraction that ran in the
        background; by default they are extracted here.
    results_of : mapping descriptor -> QueryCube, optional
        As for :func:`evaluate_sequences`, when the cube is evaluated.

    Returns
    -------
    tuple
        The cube, and whether it was read back instead of evaluated.
    """
    dataset = dataset_fingerprint(sequences) if dataset is None else dataset
    key = cache_key(evaluation_inputs(sequences, settings, dataset=dataset, own=own))

    def compute() -> xr.Dataset:
        return evaluate_sequences(
            sequences,
            settings,
            dataset=dataset,
            dataset_path=dataset_path,
            progress=progress,
            own=own,
            features=None if features is None else features(),
            results_of=results_of,
        )

    target = Path(cache) / (name or f"{key}.nc")
    found = cache_entry(cache, key, name=name)
    cube, reused = cached_cube(found or target, key, compute, elsewhere=elsewhere)
    if reused and name is not None and found != target:
        cubes.save(cube, target)  # the named file of the caller, a copy of the entry
    return cube, reused
