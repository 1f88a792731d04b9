"""Cubes kept on disk and reused, keyed by everything that determines them.

Evaluating a dataset (feature extraction, matching, every query's ranks) takes minutes; reading
its cube back takes a second. ``metricalc report`` and ``metricalc demo`` therefore keep each
cube they evaluate in a file whose key is a hash of its inputs (:func:`cache_key`), and evaluate
again only when no file holds that key (:func:`cached_cube`):

- the data: the content fingerprint of the sequences folder
  (:func:`metricalc.keypoints.sequences.dataset_fingerprint`) and the scenes evaluated;
- the systems: the descriptors and the keypoints (``native`` or ``locked:<detector>``), with
  the extraction settings (border, maximum number of keypoints);
- the protocol of :func:`metricalc.keypoints.evaluate`: tau, border, tie policy, the Bojanic
  tasks, y0 policy, distractors, seed;
- the versions of metricalc and OpenCV (its detectors and descriptors make the features).

Any change to one of them gives another key, so a changed input is never served an old cube.
The key is not a proof of identity against edits of metricalc's own code between releases
(its version stays the same): delete the cache folder after changing the evaluation code. Each
file also records its key in the attr ``cache_key``, so a file renamed or written by another
key is not taken.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe

__all__ = ["CACHE_FOLDER", "cache_key", "cached_cube", "evaluation_inputs"]

CACHE_FOLDER = "cache"
"""The folder of cached cubes below a report's output folder (``reports/<study>/cache/``)."""

MAX_KEYPOINTS = 2000
"""Keypoints kept per image by :func:`metricalc.keypoints.features.extract` (its default)."""


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


def evaluation_inputs(
    sequences: Sequence[Any],
    descriptors: Sequence[str],
    keypoints: str,
    *,
    tau: float = 3.0,
    border: float = 40.0,
    tie_policy: str = "expected",
    bojanic: bool = True,
    seed: int = 0,
    dataset: str | None = None,
) -> dict[str, Any]:
    """Everything that determines the cube of :func:`metricalc.keypoints.features.extract` then
    :func:`metricalc.keypoints.evaluate` on ``sequences`` (the mapping :func:`cache_key`
    hashes). The other settings of ``evaluate`` (``y0``, the distractors) are their defaults.
    ``dataset`` is the fingerprint of ``sequences`` when the caller already has it (it is passed
    to ``evaluate`` too, so the folder is hashed once per run); by default it is computed."""
    import cv2

    from metricalc.keypoints.sequences import dataset_fingerprint
    from metricalc.version import __version__

    return {
        "dataset": dataset_fingerprint(sequences) if dataset is None else dataset,
        "scenes": sorted(str(s.name) for s in sequences),
        "descriptors": list(descriptors),
        "keypoints": keypoints,
        "max_keypoints": MAX_KEYPOINTS,
        "tau": float(tau),
        "border": float(border),
        "tie_policy": tie_policy,
        "bojanic": bool(bojanic),
        "y0": "negative",
        "n_distractor_scenes": 10,
        "n_distractors": 20,
        "seed": int(seed),
        "metricalc": __version__,
        "opencv": cv2.__version__,
    }


def _holding(path: Path, key: str) -> xr.Dataset | None:
    """The cube in ``path`` if it is one and holds ``key`` (checked on the attrs first)."""
    if not path.is_file():
        return None
    try:
        with xr.open_dataset(path, engine="h5netcdf") as lazy:  # attrs only, nothing read
            if lazy.attrs.get("cache_key") != key:
                return None
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
