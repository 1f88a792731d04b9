"""A pool of patch descriptors: every patch of the patch-images a ``.benchmark`` header names.

:func:`load_descriptor_pool` reads the descriptors of every pool patch-image (HPatches layout
``DIR/<seq>/<img>.csv``, one row per patch, or ``DIR/<seq>/<img>.npy``, N x D) into one
:class:`DescriptorPool`, a float32 matrix with the rows of each patch-image and the signature
``seq.img.idx`` of every row; :func:`metricalc.benchmarks.hpatches_patches.compute.compute_results`
ranks it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from metricalc.benchmarks.hpatches_patches.names import _patch_image_problem, parse_signature
from metricalc.errors import InvalidInputError
from metricalc.progress import progress_bar

__all__ = ["DescriptorPool", "load_descriptor_pool"]


# -- names -----------------------------------------------------------------------------------------


def _check_names(names: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(names, str):
        raise InvalidInputError(f"{what}: expected a sequence of patch-image names, got a str")
    names = tuple(names)
    if not names:
        raise InvalidInputError(f"{what}: expected at least one patch-image, got none")
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        problem = _patch_image_problem(name) if isinstance(name, str) else "not a str"
        if problem:
            raise InvalidInputError(
                f"{what}, entry {position}: expected a patch-image 'seq.img' (img one of ref, "
                f"e1..e5, h1..h5, t1..t5), got {name!r} ({problem})"
            )
        if name in seen:
            raise InvalidInputError(
                f"{what}, entry {position}: patch-image {name!r} repeats entry {seen[name]}; "
                "expected each patch-image once"
            )
        seen[name] = position
    return names


# -- the pool --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DescriptorPool:
    """The descriptors of every patch of a pool of patch-images, in one float32 matrix.

    Attributes
    ----------
    names : tuple of str
        The patch-images ``seq.img``, in pool order (the ``.benchmark`` header).
    descriptors : ndarray of float32, shape (M, D)
        The patches of every patch-image, concatenated in pool order; C-contiguous.
    offsets : ndarray of int64, shape (len(names) + 1,)
        Patch-image ``i`` holds rows ``offsets[i]:offsets[i + 1]``; ``offsets[-1] == M``.

    Examples
    --------
    >>> import numpy as np
    >>> pool = DescriptorPool.from_arrays(
    ...     ["a.ref", "a.e1"], [np.zeros((3, 4)), np.ones((2, 4))]
    ... )
    >>> pool.descriptors.shape, pool.offsets.tolist()
    ((5, 4), [0, 3, 5])
    >>> pool.row("a.e1.1"), pool.signature(4)
    (4, 'a.e1.1')
    """

    names: tuple[str, ...]
    descriptors: np.ndarray
    offsets: np.ndarray
    _position: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = _check_names(self.names, "pool")
        descriptors, offsets = self.descriptors, np.asarray(self.offsets)
        if (
            not isinstance(descriptors, np.ndarray)
            or descriptors.ndim != 2
            or descriptors.dtype != np.float32
            or not descriptors.flags.c_contiguous
        ):
            raise InvalidInputError(
                "descriptors: expected a C-contiguous float32 matrix (M x D), got "
                f"{type(descriptors).__name__} {getattr(descriptors, 'shape', '')}"
            )
        if (
            offsets.shape != (len(names) + 1,)
            or offsets.dtype.kind not in "iu"
            or offsets[0] != 0
            or offsets[-1] != len(descriptors)
            or np.any(np.diff(offsets) < 0)
        ):
            raise InvalidInputError(
                f"offsets: expected {len(names) + 1} non-decreasing integers from 0 to "
                f"{len(descriptors)}, got {offsets!r}"
            )
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "offsets", offsets.astype(np.int64))
        object.__setattr__(self, "_position", {name: i for i, name in enumerate(names)})

    @classmethod
    def from_arrays(
        cls, names: Sequence[str], arrays: Sequence[np.ndarray], *, sources: Sequence[str] = ()
    ) -> DescriptorPool:
        """Build a pool from one (N_i x D) array per patch-image, checking every array.

        Each array must be 2-D, real, finite, with the same D as the first (N_i may be 0).
        ``sources`` optionally names where each array came from, for the error messages.

        Examples
        --------
        >>> import numpy as np
        >>> DescriptorPool.from_arrays(["s.ref"], [np.eye(2)]).descriptors.dtype
        dtype('float32')
        """
        names = _check_names(names, "pool")
        arrays = list(arrays)
        if len(arrays) != len(names):
            raise InvalidInputError(
                f"arrays: expected one array per patch-image ({len(names)}), got {len(arrays)}"
            )
        sources = list(sources) or [f"patch-image {name!r}" for name in names]
        checked: list[np.ndarray] = []
        for name, array, source in zip(names, arrays, sources, strict=True):
            checked.append(_checked_matrix(np.asarray(array), source, name))
            first, last = checked[0], checked[-1]
            if last.shape[1] != first.shape[1]:
                raise InvalidInputError(
                    f"{source}: {last.shape[1]} values per patch, but {sources[0]} has "
                    f"{first.shape[1]}; every patch-image of the pool needs the same descriptor "
                    "dimension"
                )
        counts = [len(a) for a in checked]
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        descriptors = np.ascontiguousarray(np.concatenate(checked, axis=0), dtype=np.float32)
        return cls(names, descriptors, offsets)

    @property
    def n_patches(self) -> int:
        """Number of pool patches M (rows of :attr:`descriptors`)."""
        return int(self.offsets[-1])

    @property
    def counts(self) -> np.ndarray:
        """Number of patches of each patch-image, in pool order."""
        return np.diff(self.offsets)

    def row(self, signature: str) -> int:
        """Pool row of the patch ``seq.img.idx``.

        Raises
        ------
        InvalidInputError
            If the signature is malformed, its patch-image is not in the pool, or ``idx`` is not
            below the patch-image's number of patches (the message names both).
        """
        image, index = _split_signature(signature)
        position = self._position.get(image)
        if position is None:
            raise InvalidInputError(
                f"signature {signature!r}: patch-image {image!r} is not in the pool"
            )
        count = int(self.offsets[position + 1] - self.offsets[position])
        if index >= count:
            raise InvalidInputError(
                f"signature {signature!r}: patch index {index} is out of range; patch-image "
                f"{image!r} has {count} patches (indices 0..{count - 1})"
            )
        return int(self.offsets[position]) + index

    def signature(self, row: int) -> str:
        """The signature ``seq.img.idx`` of pool row ``row``."""
        return self.signatures(np.array([row]))[0]

    def signatures(self, rows: np.ndarray) -> list[str]:
        """Signatures of the pool rows ``rows`` (any shape), flattened in C order."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_patches):
            raise InvalidInputError(
                f"rows: expected pool rows in 0..{self.n_patches - 1}, got "
                f"{rows.min()}..{rows.max()}"
            )
        image = np.searchsorted(self.offsets, rows, side="right") - 1
        index = rows - self.offsets[image]
        names = self.names
        return [f"{names[i]}.{j}" for i, j in zip(image.tolist(), index.tolist(), strict=True)]


def _split_signature(signature: object) -> tuple[str, int]:
    """``seq.img.idx`` -> (``seq.img``, idx), checked by
    :func:`~metricalc.benchmarks.hpatches_patches.parse_signature`."""
    if not isinstance(signature, str):
        raise InvalidInputError(f"signature: expected a str, got {type(signature).__name__}")
    parsed = parse_signature(signature)
    return parsed.patch_image, parsed.index


def _checked_matrix(array: np.ndarray, source: str, name: str) -> np.ndarray:
    if array.ndim != 2 or array.dtype.kind not in "fiu":
        raise InvalidInputError(
            f"{source}: expected an N x D matrix of real numbers (one row per patch of "
            f"{name!r}), got {array.dtype} of shape {array.shape}"
        )
    with np.errstate(over="ignore"):  # beyond float32 range: inf, reported below
        values = array.astype(np.float32, copy=False)
    if values.shape[1] == 0:
        raise InvalidInputError(f"{source}: expected at least one value per patch, got 0")
    finite = np.isfinite(values).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise InvalidInputError(
            f"{source}, row {row + 1}: expected {values.shape[1]} finite float32 values "
            "(a short row, an empty field, NaN, inf or a value beyond float32 range?)"
        )
    return values


def _read_csv(path: Path, name: str) -> np.ndarray:
    try:  # a blank line is a row of NaN and a value beyond float32 range is inf: both reported
        with np.errstate(over="ignore"):
            frame = pd.read_csv(
                path, header=None, dtype=np.float32, engine="c", skip_blank_lines=False
            )
    except pd.errors.EmptyDataError:
        raise InvalidInputError(
            f"{path}: empty file; expected one row of comma-separated floats per patch of {name!r}"
        ) from None
    except (ValueError, pd.errors.ParserError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidInputError(
            f"{path}: expected one row of comma-separated floats per patch of {name!r} ({reason})"
        ) from None
    return frame.to_numpy(dtype=np.float32)


def _read_npy(path: Path, name: str) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise InvalidInputError(
            f"{path}: expected a NumPy .npy file holding an N x D matrix for {name!r} ({error})"
        ) from None
    if not isinstance(array, np.ndarray):
        raise InvalidInputError(f"{path}: expected a .npy array for {name!r}, got an archive")
    return array


def load_descriptor_pool(
    directory: str | os.PathLike[str], pool: Sequence[str], *, progress: bool = False
) -> DescriptorPool:
    """Read the descriptors of every patch-image of ``pool`` from ``directory``.

    Parameters
    ----------
    directory : str or path-like
        HPatches descriptor layout: ``directory/<seq>/<img>.npy`` (an N x D real matrix) or
        ``directory/<seq>/<img>.csv`` (N rows of D comma-separated floats, no header). When both
        exist the ``.npy`` is read.
    pool : sequence of str
        The patch-images ``seq.img`` (the ``.benchmark`` header), in order; each must exist.
    progress : bool, default False
        Show a progress bar over the patch-images.

    Returns
    -------
    DescriptorPool
        Rows concatenated in pool order, as float32.

    Raises
    ------
    InvalidInputError
        On a malformed or repeated pool name, a missing patch-image (naming it and both paths
        tried), an unreadable file, a non-finite value (naming file and row), a descriptor
        dimension different from the first patch-image's, or a number of rows different from
        that of the first patch-image of the same sequence (naming both files).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     (Path(tmp) / "s").mkdir()
    ...     np.save(Path(tmp) / "s" / "ref.npy", np.zeros((2, 2)))
    ...     _ = (Path(tmp) / "s" / "e1.csv").write_text("1,2\\n3,4\\n")
    ...     pool = load_descriptor_pool(tmp, ["s.ref", "s.e1"])
    >>> pool.descriptors.tolist()[-1], pool.counts.tolist()
    ([3.0, 4.0], [2, 2])
    """
    directory = Path(directory)
    names = _check_names(pool, "pool")
    if not directory.is_dir():
        raise InvalidInputError(f"directory: {directory} is not a folder of descriptors")
    arrays, sources = [], []
    with progress_bar("reading descriptors", total=len(names), enabled=progress) as advance:
        for position, name in enumerate(names, start=1):
            sequence, image = name.split(".")
            npy, csv = directory / sequence / f"{image}.npy", directory / sequence / f"{image}.csv"
            if npy.is_file():
                arrays.append(_read_npy(npy, name))
                sources.append(str(npy))
            elif csv.is_file():
                arrays.append(_read_csv(csv, name))
                sources.append(str(csv))
            else:
                raise InvalidInputError(
                    f"patch-image {name!r} (pool entry {position}) has no descriptors: neither "
                    f"{npy} nor {csv} exists"
                )
            advance()
    loaded = DescriptorPool.from_arrays(names, arrays, sources=sources)
    _check_sequence_counts(loaded, sources)
    return loaded


def _check_sequence_counts(pool: DescriptorPool, sources: Sequence[str]) -> None:
    """Every patch-image of a sequence has as many rows as the sequence's first one.

    Row ``i`` of each image of a sequence is patch ``i`` (the same surface): a file with a row
    too few or too many would silently shift the signatures of every later patch.
    """
    first: dict[str, tuple[int, str]] = {}
    for name, rows, source in zip(pool.names, pool.counts.tolist(), sources, strict=True):
        count, where = first.setdefault(name.split(".")[0], (rows, source))
        if rows != count:
            raise InvalidInputError(
                f"{source}: {rows} rows (patches), but {where} has {count}; every image of a "
                "sequence holds the same patches (row i is patch i), so expected the same count"
            )
