r"""A small synthetic patch set in the PhotoTour layout, so FPR95 runs offline end to end.

The real PhotoTour patches (Brown et al.) are patches of 3D points seen in many photographs.
Here a "3D point" is a frame of the built-in patch dataset
(:func:`~metricalc.benchmarks.hpatches_patches.generator.cut_patches` on the synthetic sequences of
:func:`~metricalc.datasets.sequences.make_synthetic_dataset`) and its views are that frame's
patches in the images :data:`VIEWS` (the reference and jittered ones of increasing difficulty),
cropped from 65 x 65 to the 64 x 64 of the layout (last row and column dropped). The folder gets
what :mod:`metricalc.benchmarks.phototour.dataset` reads: ``patches<NNNN>.bmp`` (16 x 16 patches per
1024 x 1024 bitmap, row-major, the views of a point consecutive), ``info.txt`` (3D point id, then
0) and ``m50_<n>_<n>_0.txt``: ``n`` matching pairs (two different views of one point) and ``n``
non-matching pairs (views of two different points), shuffled.
Every draw comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from metricalc.benchmarks.hpatches_patches.generator import cut_patches
from metricalc.benchmarks.phototour.dataset import (
    PATCH_SIZE,
    PATCHES_PER_ROW,
    bitmap_name,
    patch_location,
)
from metricalc.datasets.sequences import QUICK_SCENES, make_synthetic_dataset
from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write
from metricalc.validation import check_integer

__all__ = ["VIEWS", "PhotoTourSet", "make_phototour_set"]

VIEWS = ("ref", "e1", "h2", "t3")
"""The patch images whose patches are the views of a point."""


@dataclass(frozen=True)
class PhotoTourSet:
    """What :func:`make_phototour_set` wrote.

    Attributes
    ----------
    folder : Path
    pairs : Path
        The ``m50_<n>_<n>_0.txt`` file.
    n_points, n_patches : int
    """

    folder: Path
    pairs: Path
    n_points: int
    n_patches: int


def _views(scenes: tuple[str, ...], seed: int, size: int, points_per_scene: int) -> np.ndarray:
    """(points, views, 64, 64) uint8 patches of every scene's frames."""
    with tempfile.TemporaryDirectory() as tmp:
        sequences = make_synthetic_dataset(tmp, scenes=scenes, seed=seed, size=size)
        cuts = [cut_patches(s, seed=seed, max_patches=points_per_scene) for s in sequences]
    stacks = [np.stack([cut.patches[v] for v in VIEWS], axis=1) for cut in cuts]
    return np.concatenate(stacks)[:, :, :PATCH_SIZE, :PATCH_SIZE]


def _write_bitmaps(folder: Path, patches: np.ndarray) -> None:
    bitmap, row, column = patch_location(np.arange(len(patches)))
    side = PATCH_SIZE * PATCHES_PER_ROW
    for index in range(int(bitmap[-1]) + 1):
        image = np.zeros((PATCHES_PER_ROW, PATCH_SIZE, PATCHES_PER_ROW, PATCH_SIZE), np.uint8)
        chosen = np.flatnonzero(bitmap == index)
        image[row[chosen], :, column[chosen], :] = patches[chosen]
        ok, encoded = cv2.imencode(".bmp", image.reshape(side, side))
        if not ok:  # pragma: no cover - OpenCV always encodes a uint8 image as BMP
            raise InvalidInputError(f"OpenCV could not encode bitmap {index} as BMP")
        atomic_write(folder / bitmap_name(index), encoded.tobytes())


def _pairs(n_points: int, n_views: int, n_pairs: int, seed: int) -> np.ndarray:
    """(2 n_pairs, 4): point1, view1, point2, view2; first the matching, then shuffled."""
    rng = np.random.default_rng(seed)
    point = rng.integers(0, n_points, n_pairs)
    view1 = rng.integers(0, n_views, n_pairs)
    view2 = (view1 + rng.integers(1, n_views, n_pairs)) % n_views  # another view
    first = rng.integers(0, n_points, n_pairs)
    other = (first + rng.integers(1, n_points, n_pairs)) % n_points  # another point
    matching = np.stack([point, view1, point, view2], axis=1)
    non_matching = np.stack([first, rng.integers(0, n_views, n_pairs), other,
                             rng.integers(0, n_views, n_pairs)], axis=1)  # fmt: skip
    both = np.concatenate([matching, non_matching])
    return both[rng.permutation(len(both))]


def make_phototour_set(
    folder: str | Path,
    *,
    scenes: tuple[str, ...] = QUICK_SCENES,
    n_pairs: int = 500,
    seed: int = 0,
    size: int = 240,
    points_per_scene: int = 200,
) -> PhotoTourSet:
    """Write a synthetic PhotoTour-layout patch set (module docstring) into ``folder``.

    Parameters
    ----------
    folder : str or Path
    scenes : tuple of str
        Scenes of the synthetic benchmark to cut points from.
    n_pairs : int
        Matching pairs, and as many non-matching ones (``m50_<n>_<n>_0.txt``).
    seed : int
    size : int
        Longer image side of the synthetic sequences.
    points_per_scene : int
        At most this many points per scene.

    Returns
    -------
    PhotoTourSet

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.benchmarks.phototour.dataset import read_info, read_pairs
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     made = make_phototour_set(tmp, scenes=("i_camera",), n_pairs=50, size=160)
    ...     pairs, info = read_pairs(made.pairs), read_info(made.folder / "info.txt")
    >>> made.pairs.name, len(pairs), int(pairs.labels.sum()), len(info) == made.n_patches
    ('m50_50_50_0.txt', 100, 50, True)
    """
    n_pairs = check_integer("n_pairs", n_pairs, minimum=1)
    check_integer("points_per_scene", points_per_scene, minimum=2)
    folder = Path(folder)
    views = _views(tuple(scenes), seed, size, points_per_scene)
    n_points, n_views = views.shape[:2]
    if n_points < 2:
        raise InvalidInputError(
            f"scenes {scenes!r} gave {n_points} point; expected at least 2 (larger size?)"
        )
    _write_bitmaps(folder, views.reshape(-1, PATCH_SIZE, PATCH_SIZE))
    point_ids = np.repeat(np.arange(n_points), n_views)
    atomic_write(folder / "info.txt", "".join(f"{p} 0\n" for p in point_ids))
    drawn = _pairs(n_points, n_views, n_pairs, seed)
    patch1 = drawn[:, 0] * n_views + drawn[:, 1]
    patch2 = drawn[:, 2] * n_views + drawn[:, 3]
    lines = (f"{a} {pa} 0 {b} {pb} 0\n" for a, pa, b, pb in
             zip(patch1, drawn[:, 0], patch2, drawn[:, 2], strict=True))  # fmt: skip
    pairs = atomic_write(folder / f"m50_{n_pairs}_{n_pairs}_0.txt", "".join(lines))
    return PhotoTourSet(folder, pairs, n_points, n_points * n_views)

