"""``predictions.h5``: the cached keypoints, descriptors and matches of every image pair.

Layout (HDF5, h5py)::

    /                       attrs: format = "metricalc-predictions", format_version = 1,
                                   benchmark, tag, export_hash, metricalc_version
    /<scene>/<pair>/        one group per image pair, e.g. /v_coffee/1-3
                            attrs: scene, pair, image0 (1), image1 (k), shape0, shape1 (h, w)
        keypoints0          (N0, 2) float64   x, y of image 1 (pixel centres at integers)
        keypoints1          (N1, 2) float64   x, y of image k
        descriptors0        (N0, D) float32 (L2) or uint8 packed bits (Hamming)
        descriptors1        (N1, D)
        matches0            (N0,)   int64     index into keypoints1, -1 where unmatched
        matching_scores0    (N0,)   float64   1 - d1/d2 of the match, 0 where unmatched

Image 1 belongs to all five pairs of a scene; its arrays are stored once and the other pairs'
``keypoints0`` / ``descriptors0`` are HDF5 hard links to them (readers see ordinary datasets).

During an export each finished pair is one small file ``predictions.parts/<scene>/<pair>.h5``
(same datasets), written to a temporary name and renamed: a killed export (Ctrl-C, ``kill -9``)
leaves only whole pair files, and a rerun exports just the missing pairs. When every pair is
there the parts are merged into ``predictions.h5`` (again through a temporary file and a
rename) and removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import h5py
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.fileio import hdf5_target

__all__ = [
    "ARRAYS",
    "FORMAT",
    "PairPrediction",
    "merge_parts",
    "open_predictions",
    "pair_names",
    "predictions_writer",
    "read_part",
    "read_part_file",
    "read_prediction",
    "write_part",
]

FORMAT = "metricalc-predictions"
FORMAT_VERSION = 1
ARRAYS = (
    "keypoints0",
    "keypoints1",
    "descriptors0",
    "descriptors1",
    "matches0",
    "matching_scores0",
)
"""The datasets of one image-pair group."""

_SHARED = ("keypoints0", "descriptors0")  # image 1: linked across the pairs of a scene
H5_COMPRESSION = {"compression": "gzip", "compression_opts": 1, "shuffle": True}
T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class PairPrediction:
    """The predictions of one image pair (image 1 -> image k of a scene)."""

    scene: str
    pair: str  # "1-k"
    keypoints0: np.ndarray
    keypoints1: np.ndarray
    descriptors0: np.ndarray
    descriptors1: np.ndarray
    matches0: np.ndarray
    matching_scores0: np.ndarray
    shape0: tuple[int, int]
    shape1: tuple[int, int]

    @property
    def images(self) -> tuple[int, int]:
        """The image numbers of the pair, e.g. (1, 3)."""
        first, second = self.pair.split("-")
        return int(first), int(second)

    def equal(self, other: PairPrediction) -> bool:
        """Whether two predictions hold identical arrays (exact comparison)."""
        return (
            (self.scene, self.pair, self.shape0, self.shape1)
            == (other.scene, other.pair, other.shape0, other.shape1)
            and all(
                getattr(self, name).dtype == getattr(other, name).dtype
                and np.array_equal(getattr(self, name), getattr(other, name))
                for name in ARRAYS
            )
        )


def _write_group(
    group: h5py.Group, prediction: PairPrediction, names: Iterable[str] = ARRAYS
) -> None:
    first, second = prediction.images
    group.attrs.update(
        scene=prediction.scene,
        pair=prediction.pair,
        image0=first,
        image1=second,
        shape0=np.asarray(prediction.shape0, dtype=np.int64),
        shape1=np.asarray(prediction.shape1, dtype=np.int64),
    )
    for name in names:
        data = np.asarray(getattr(prediction, name))
        options = H5_COMPRESSION if data.size else {}
        group.create_dataset(name, data=data, **options)


def _shape(value: Any) -> tuple[int, int]:
    """An image shape attribute (height, width) as two ints."""
    height, width = (int(v) for v in value)
    return height, width


def _read_group(group: h5py.Group, where: str) -> PairPrediction:
    missing = [name for name in ARRAYS if name not in group]
    if missing:
        raise InvalidInputError(f"{where} lacks the dataset(s) {missing}")
    arrays = {name: np.asarray(group[name][()]) for name in ARRAYS}
    try:
        shape0 = _shape(group.attrs["shape0"])
        shape1 = _shape(group.attrs["shape1"])
        scene, pair = str(group.attrs["scene"]), str(group.attrs["pair"])
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidInputError(f"{where} has missing or bad attributes: {error}") from error
    kp0, kp1, m0 = arrays["keypoints0"], arrays["keypoints1"], arrays["matches0"]
    for name in ("keypoints0", "keypoints1"):
        if arrays[name].ndim != 2 or arrays[name].shape[1] != 2:
            raise InvalidInputError(
                f"{where}/{name} has shape {arrays[name].shape}; expected N x 2"
            )
    for i, name in enumerate(("descriptors0", "descriptors1")):
        rows = len(kp0) if i == 0 else len(kp1)
        if arrays[name].ndim != 2 or arrays[name].shape[0] != rows:
            raise InvalidInputError(
                f"{where}/{name} has shape {arrays[name].shape}; expected {rows} rows"
            )
    if (
        m0.shape != (len(kp0),)
        or not np.issubdtype(m0.dtype, np.integer)
        or (m0 < -1).any()
        or (m0 >= len(kp1)).any()
    ):
        raise InvalidInputError(
            f"{where}/matches0 must hold {len(kp0)} indices in -1 .. {len(kp1) - 1}"
        )
    if arrays["matching_scores0"].shape != (len(kp0),):
        raise InvalidInputError(f"{where}/matching_scores0 must hold {len(kp0)} values")
    return PairPrediction(scene=scene, pair=pair, shape0=shape0, shape1=shape1, **arrays)


def write_part(path: Path, prediction: PairPrediction) -> None:
    """Write one image pair to its own file, atomically."""
    estimate = sum(
        np.asarray(getattr(prediction, f.name)).nbytes for f in fields(prediction)
    )
    with hdf5_target(path, estimate=estimate) as target, h5py.File(target, "w") as handle:
        _write_group(handle.create_group("pair"), prediction)


def read_part(path: Path) -> PairPrediction:
    """Read a file of :func:`write_part`."""
    return read_part_file(path, lambda handle, where: _read_group(handle["pair"], where))


def read_part_file(path: Path, read: Callable[[h5py.File, str], T]) -> T:
    """``read(handle, where)`` on the part file ``path`` open for reading (``where`` names it in
    messages); an unreadable file or a missing dataset raises an InvalidInputError."""
    try:
        with h5py.File(path, "r") as handle:
            return read(handle, f"prediction part {path}")
    except (OSError, KeyError) as error:
        raise InvalidInputError(f"prediction part {path} cannot be read: {error}") from error


@contextmanager
def predictions_writer(
    target: Path,
    marker: str,
    attrs: Mapping[str, Any],
    *,
    version: int = FORMAT_VERSION,
    estimate: int,
) -> Iterator[h5py.File]:
    """A new ``predictions.h5`` open for writing, its root attrs set (format ``marker``, format
    version ``version`` and ``attrs``); renamed over ``target`` when the block ends without
    error. ``estimate``: about how many bytes it will hold (where it is written meanwhile,
    :func:`metricalc.fileio.hdf5_target`)."""
    with hdf5_target(target, estimate=estimate) as where, h5py.File(where, "w") as handle:
        handle.attrs.update(format=marker, format_version=version, **attrs)
        yield handle


def merge_parts(
    parts: Mapping[tuple[str, str], Path], target: Path, attrs: Mapping[str, Any]
) -> None:
    """Merge the part files of every image pair into ``target`` (atomically).

    ``parts`` maps (scene, pair) -> part file, in the order to write. Image 1 of a scene is
    stored once (hard links) when every pair of the scene holds the same image-1 arrays.
    """
    estimate = sum(path.stat().st_size for path in parts.values())
    with predictions_writer(target, FORMAT, attrs, estimate=estimate) as handle:
        first: dict[str, h5py.Group] = {}
        for (scene, pair), path in parts.items():
            prediction = read_part(path)
            group = handle.require_group(scene).create_group(pair)
            shared = first.get(scene)
            if shared is None:
                _write_group(group, prediction)
                first[scene] = group
                continue
            linked = all(
                np.array_equal(shared[name][()], getattr(prediction, name))
                and shared[name].dtype == getattr(prediction, name).dtype
                for name in _SHARED
            )
            if not linked:
                _write_group(group, prediction)
                continue
            _write_group(group, prediction, [n for n in ARRAYS if n not in _SHARED])
            for name in _SHARED:
                group[name] = shared[name]  # hard link: one copy of image 1 per scene


def open_predictions(path: Path, *, marker: str = FORMAT) -> h5py.File:
    """Open ``predictions.h5`` for reading, checking its format marker (the root attr
    ``format``: :data:`FORMAT`, or the ``patches`` benchmark's descriptors format)."""
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise InvalidInputError(
            f"{path} cannot be read as HDF5 ({error}); rerun with --overwrite"
        ) from error
    if handle.attrs.get("format") != marker:
        handle.close()
        raise InvalidInputError(
            f"{path} is not a metricalc predictions file of format {marker!r}; rerun with "
            "--overwrite"
        )
    return handle


def read_prediction(handle: h5py.File, scene: str, pair: str) -> PairPrediction:
    """One image pair of an open ``predictions.h5``."""
    where = f"{handle.filename}:/{scene}/{pair}"
    if scene not in handle or pair not in handle[scene]:
        raise InvalidInputError(
            f"{handle.filename} has no image pair /{scene}/{pair}; the predictions do not "
            "match the data configuration (rerun with --overwrite)"
        )
    return _read_group(handle[scene][pair], where)


def pair_names(handle: h5py.File) -> Iterable[tuple[str, str]]:
    """Every (scene, pair) group of an open ``predictions.h5``, sorted."""
    for scene in sorted(handle):
        for pair in sorted(handle[scene]):
            yield scene, pair
