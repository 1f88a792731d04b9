r"""The PhotoTour patch dataset (Brown, Hua and Winder: liberty, notredame, yosemite): its files.

A dataset folder holds (the layout torchvision's ``PhotoTour`` and MatchNet's
``generate_patch_db.py`` read):

- ``patches0000.bmp``, ``patches0001.bmp``, ...: 1024 x 1024 greyscale bitmaps, each a 16 x 16
  grid of 64 x 64 patches in row-major order, so patch :math:`i` is in bitmap
  :math:`\lfloor i / 256 \rfloor`, at grid row :math:`\lfloor (i \bmod 256) / 16 \rfloor` and
  column :math:`i \bmod 16` (the last bitmap may be partly empty);
- ``info.txt``: line :math:`i` (from 0) is patch :math:`i`: its 3D point id, then an unused number;
- ``m50_<n>_<n>_0.txt`` (e.g. ``m50_100000_100000_0.txt``, the test pairs papers use): one pair per
  line, six integers ``patchID1 3DpointID1 unused1 patchID2 3DpointID2 unused2``; a pair matches
  when its two 3D point ids are equal.

Every reader names the file and line of bad input.

Examples
--------
Four patches of two 3D points (``info.txt``) and two pairs, the first of one point:

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     folder = Path(tmp)
...     _ = (folder / "info.txt").write_text("7 0\n7 0\n8 0\n9 0\n")
...     _ = (folder / "m50_2_2_0.txt").write_text("0 7 0 1 7 0\n2 8 0 3 9 0\n")
...     pairs, point_ids = read_pairs(folder / "m50_2_2_0.txt"), read_info(folder / "info.txt")
>>> point_ids.tolist(), pairs.patch2.tolist(), pairs.labels.tolist()
([7, 7, 8, 9], [1, 3], [True, False])
>>> check_pairs(pairs, point_ids)  # every patch exists and carries its pair's point id
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metricalc.errors import InvalidInputError

_INTEGER = re.compile(r"-?[0-9]{1,18}")  # what int64 always holds

__all__ = [
    "DATASETS",
    "PAIRS_FILE",
    "PATCHES_PER_BITMAP",
    "PATCHES_PER_ROW",
    "PATCH_SIZE",
    "PhotoTourPairs",
    "bitmap_name",
    "check_pairs",
    "check_patch_ids",
    "describe_phototour",
    "patch_location",
    "read_info",
    "read_pairs",
    "read_patches",
]

DATASETS = ("liberty", "notredame", "yosemite")
"""The three PhotoTour scenes."""
PAIRS_FILE = "m50_100000_100000_0.txt"
"""The test pairs of every paper's table: 100,000 pairs, half of them matching."""
PATCH_SIZE = 64
PATCHES_PER_ROW = 16
PATCHES_PER_BITMAP = PATCHES_PER_ROW * PATCHES_PER_ROW


@dataclass(frozen=True)
class PhotoTourPairs:
    """The pairs of an ``m50_*`` file, in file order (row ``i`` is line ``i + 1``).

    Attributes
    ----------
    patch1, point1, patch2, point2 : ndarray of int64
        Patch ids and 3D point ids of the two sides.
    path : str
        The file read (for messages).
    """

    patch1: np.ndarray
    point1: np.ndarray
    patch2: np.ndarray
    point2: np.ndarray
    path: str = "<pairs>"

    @property
    def labels(self) -> np.ndarray:
        """True where the pair matches (equal 3D point ids)."""
        return np.asarray(self.point1 == self.point2)

    def __len__(self) -> int:
        return len(self.patch1)


def _integer_rows(path: Path, n_fields: int, what: str, *, exact: bool) -> np.ndarray:
    """The first ``n_fields`` whitespace-separated integers of each line (exactly that many if
    ``exact``)."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInputError(f"{path}: cannot read {what} ({error})") from None
    rows = [line.split() for line in text.rstrip().splitlines()]
    if not rows:
        raise InvalidInputError(f"{path}: empty file; expected {what}")
    for number, fields in enumerate(rows, start=1):
        wrong_length = len(fields) != n_fields if exact else len(fields) < n_fields
        if wrong_length or not all(_INTEGER.fullmatch(f) for f in fields):
            raise InvalidInputError(
                f"{path}, line {number}: expected {what}; got {' '.join(fields)!r}"
            )
    return np.array([fields[:n_fields] for fields in rows], dtype=np.int64)


def read_pairs(path: str | Path) -> PhotoTourPairs:
    """Read an ``m50_<n>_<n>_0.txt`` pair file.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    PhotoTourPairs

    Raises
    ------
    InvalidInputError
        Naming the file and line of a line that is not six integers, or of a negative patch id.

    See the module docstring for an example.
    """
    path = Path(path)
    what = "six integers: patchID1 3DpointID1 unused1 patchID2 3DpointID2 unused2"
    rows = _integer_rows(path, 6, what, exact=True)
    negative = (rows[:, [0, 3]] < 0).any(axis=1)
    if negative.any():
        line = int(np.flatnonzero(negative)[0]) + 1
        raise InvalidInputError(f"{path}, line {line}: patch ids must be >= 0")
    return PhotoTourPairs(rows[:, 0], rows[:, 1], rows[:, 3], rows[:, 4], str(path))


def read_info(path: str | Path) -> np.ndarray:
    """Read ``info.txt``: the 3D point id of every patch (line ``i + 1`` is patch ``i``).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    ndarray of int64
        ``point_id[patch_id]``.

    Raises
    ------
    InvalidInputError
        Naming the file and line of a line that does not start with two integers.

    See the module docstring for an example.
    """
    return _integer_rows(Path(path), 2, "two integers: 3DpointID unused", exact=False)[:, 0]


def check_patch_ids(pairs: PhotoTourPairs, n: int, problem: str) -> None:
    """Raise, naming the pair file's line and ``problem``, at the first patch id ``>= n``
    (side 1 of every pair before side 2)."""
    for side, patch in ((1, pairs.patch1), (2, pairs.patch2)):
        outside = np.flatnonzero(patch >= n)
        if outside.size:
            raise InvalidInputError(
                f"{pairs.path}, line {int(outside[0]) + 1}: patchID{side} "
                f"{int(patch[outside[0]])} {problem}"
            )


def check_pairs(pairs: PhotoTourPairs, point_ids: np.ndarray, *, source: str = "info.txt") -> None:
    """Check every pair against ``info.txt``: its patches exist and carry its 3D point ids.

    Raises
    ------
    InvalidInputError
        Naming the pair file's line of the first pair that disagrees.
    """
    n = len(point_ids)
    check_patch_ids(pairs, n, f"is beyond the {n} patches of {source}")
    for side, patch, point in ((1, pairs.patch1, pairs.point1), (2, pairs.patch2, pairs.point2)):
        wrong = point_ids[patch] != point
        if wrong.any():
            line = int(np.flatnonzero(wrong)[0]) + 1
            raise InvalidInputError(
                f"{pairs.path}, line {line}: 3DpointID{side} {point[line - 1]} but {source} "
                f"gives patch {patch[line - 1]} point {point_ids[patch[line - 1]]}"
            )


def patch_location(patch_id: np.ndarray | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where patches are: (bitmap index, grid row, grid column), row-major 16 x 16 per bitmap.

    Examples
    --------
    >>> [v.tolist() for v in patch_location([0, 17, 256, 511])]
    [[0, 0, 1, 1], [0, 1, 0, 15], [0, 1, 0, 15]]
    """
    ids = np.asarray(patch_id, dtype=np.int64)
    bitmap, offset = np.divmod(ids, PATCHES_PER_BITMAP)
    row, column = np.divmod(offset, PATCHES_PER_ROW)
    return bitmap, row, column


def bitmap_name(index: int) -> str:
    """The file name of bitmap ``index``.

    >>> bitmap_name(12)
    'patches0012.bmp'
    """
    return f"patches{index:04d}.bmp"


def read_patches(folder: str | Path, patch_ids: np.ndarray | list[int]) -> np.ndarray:
    """Cut patches out of a dataset folder's bitmaps.

    Parameters
    ----------
    folder : str or Path
        The folder holding ``patches<NNNN>.bmp``.
    patch_ids : array-like of int

    Returns
    -------
    ndarray of uint8, shape (n, 64, 64)

    Raises
    ------
    InvalidInputError
        If a bitmap is missing, unreadable or not 1024 x 1024.
    """
    import cv2

    folder = Path(folder)
    ids = np.asarray(patch_ids, dtype=np.int64).reshape(-1)
    bitmap, row, column = patch_location(ids)
    out = np.empty((len(ids), PATCH_SIZE, PATCH_SIZE), dtype=np.uint8)
    side = PATCH_SIZE * PATCHES_PER_ROW
    for index in np.unique(bitmap):
        path = folder / bitmap_name(int(index))
        image = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE) if path.is_file() else None
        if image is None or image.shape != (side, side):
            found = "missing or unreadable" if image is None else f"of shape {image.shape}"
            raise InvalidInputError(
                f"{path}: {found}; expected a {side} x {side} bitmap of 16 x 16 patches"
            )
        grid = image.reshape(PATCHES_PER_ROW, PATCH_SIZE, PATCHES_PER_ROW, PATCH_SIZE)
        chosen = np.flatnonzero(bitmap == index)
        out[chosen] = grid[row[chosen], :, column[chosen], :]
    return out


def describe_phototour(folder: str | Path, *, method: str = "sift") -> np.ndarray:
    """Descriptors of every patch of a dataset folder (``info.txt`` gives the count), one row per
    patch id: :func:`~metricalc.benchmarks.hpatches_patches.describe.describe_patches` on the 64 x
    64 patches padded to
    its 65 x 65 by repeating the last row and column.

    Parameters
    ----------
    folder : str or Path
        Holds ``info.txt`` and the bitmaps.
    method : {"sift", "raw"}

    Returns
    -------
    ndarray of float32, shape (N, D)
    """
    from metricalc.benchmarks.hpatches_patches.describe import describe_patches

    folder = Path(folder)
    n = len(read_info(folder / "info.txt"))
    patches = read_patches(folder, np.arange(n))
    padded = np.pad(patches, ((0, 0), (0, 1), (0, 1)), mode="edge")
    return describe_patches(padded, method=method)
