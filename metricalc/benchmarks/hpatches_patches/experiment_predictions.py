"""``predictions.h5`` of the ``patches`` benchmark: the cached descriptors of every patch-image.

Layout (HDF5, h5py)::

    /                   attrs: format = "metricalc-patch-descriptors", format_version = 1,
                               benchmark, tag, export_hash, metricalc_version, descriptor,
                               distance
    /<seq>/             one group per sequence, e.g. /v_bricks
        <img>           (N, D) float32: the descriptors of patch-image seq.img, one row per
                        patch in patch order (row i = patch seq.img.i); attrs: sequence,
                        image, seconds (the time spent describing it)

During an export each described patch-image is one small file
``predictions.parts/<seq>/<img>.h5`` (dataset ``descriptors``, attr ``seconds``), written to a
temporary name and renamed: a killed export leaves only whole files, and a rerun describes only
the missing patch-images. When every patch-image is there the parts are merged into
``predictions.h5`` (through a temporary file and a rename).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.experiment.predictions import (
    H5_COMPRESSION,
    open_predictions,
    predictions_writer,
    read_part_file,
)
from metricalc.fileio import hdf5_target

__all__ = [
    "FORMAT",
    "describe_seconds",
    "merge_parts",
    "open_descriptors",
    "read_descriptors",
    "read_part",
    "write_part",
]

FORMAT = "metricalc-patch-descriptors"
FORMAT_VERSION = 1


def _write(group: h5py.Group, name: str, descriptors: np.ndarray, seconds: float) -> None:
    data = np.ascontiguousarray(descriptors, dtype=np.float32)
    dataset = group.create_dataset(name, data=data, **(H5_COMPRESSION if data.size else {}))
    dataset.attrs["seconds"] = float(seconds)


def _checked(dataset: Any, where: str) -> tuple[np.ndarray, float]:
    if not isinstance(dataset, h5py.Dataset):
        raise InvalidInputError(f"{where} is not a dataset; rerun with --overwrite")
    array = np.asarray(dataset[()])
    if array.ndim != 2 or array.dtype != np.float32:
        raise InvalidInputError(
            f"{where} holds {array.dtype} of shape {array.shape}; expected an N x D float32 "
            "matrix (rerun with --overwrite)"
        )
    return array, float(dataset.attrs.get("seconds", np.nan))


def write_part(path: Path, descriptors: np.ndarray, seconds: float) -> None:
    """Write the descriptors of one patch-image to their own file, atomically.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "v_a" / "ref.h5"
    ...     write_part(path, np.ones((2, 3)), 0.5)
    ...     array, seconds = read_part(path)
    >>> array.dtype, array.shape, seconds
    (dtype('float32'), (2, 3), 0.5)
    """
    estimate = int(np.asarray(descriptors).nbytes)
    with hdf5_target(path, estimate=estimate) as target, h5py.File(target, "w") as handle:
        _write(handle, "descriptors", descriptors, seconds)


def read_part(path: Path) -> tuple[np.ndarray, float]:
    """The descriptors and describing time of a file of :func:`write_part`."""
    return read_part_file(path, lambda handle, where: _checked(handle["descriptors"], where))


def merge_parts(
    parts: Mapping[tuple[str, str], Path], target: Path, attrs: Mapping[str, Any]
) -> None:
    """Merge the part files (``(sequence, image) -> path``, in the order to write) into
    ``target``, atomically."""
    estimate = sum(path.stat().st_size for path in parts.values())
    with predictions_writer(
        target, FORMAT, attrs, version=FORMAT_VERSION, estimate=estimate
    ) as handle:
        for (sequence, image), path in parts.items():
            descriptors, seconds = read_part(path)
            group = handle.require_group(sequence)
            _write(group, image, descriptors, seconds)
            group[image].attrs.update(sequence=sequence, image=image)


def open_descriptors(path: Path) -> h5py.File:
    """Open a patch ``predictions.h5`` for reading, checking its format marker."""
    return open_predictions(path, marker=FORMAT)


def read_descriptors(handle: h5py.File, sequence: str, image: str) -> np.ndarray:
    """The descriptors (N x D float32) of patch-image ``sequence.image`` of an open file."""
    if sequence not in handle or image not in handle[sequence]:
        raise InvalidInputError(
            f"{handle.filename} has no patch-image /{sequence}/{image}; the predictions do not "
            "match the data configuration (rerun with --overwrite)"
        )
    return _checked(handle[sequence][image], f"{handle.filename}:/{sequence}/{image}")[0]


def describe_seconds(handle: h5py.File) -> float:
    """Seconds spent describing every patch-image of an open file (the sum of their
    ``seconds`` attributes)."""
    total = 0.0
    for sequence in handle.values():
        for dataset in sequence.values():
            total += float(dataset.attrs.get("seconds", np.nan))
    return total
