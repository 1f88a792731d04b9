r"""Descriptors of 65 x 65 patches, written in the HPatches descriptor layout ``DIR/<seq>/<img>``.

Two methods, so that the retrieval benchmark runs end to end offline with real descriptors:

``sift``
    OpenCV's SIFT descriptor (128 values) of one keypoint at the patch centre :math:`(32, 32)`,
    orientation 0 (the patches are already oriented) and size :data:`SIFT_SIZE`
    :math:`= 2\sigma` with :math:`\sigma = 64 / 12`: SIFT's 4 x 4 grid of cells of
    :math:`3\sigma` pixels then spans the 64 pixels between the first and last patch pixel. Each
    patch is padded by :data:`SIFT_PADDING` pixels (reflected, ``BORDER_REFLECT_101``) so that the
    outer cells, whose weights reach :math:`7.5\sigma = 40` pixels from the centre, see the
    patch's own continuation; the padded patches are stacked into one image and described by a
    single ``compute`` call per chunk of :data:`CHUNK` patches.
``raw``
    The pixels themselves, averaged down to :data:`RAW_SIZE` x :data:`RAW_SIZE` (area
    interpolation) and normalised: with :math:`x` the vector of the :math:`16^2` averages,

    .. math::

        d = \frac{x - \bar{x}}{\|x - \bar{x}\|_2} \qquad
        (d = 0 \text{ for a constant patch: } \|x - \bar{x}\|_2 \le 10^{-3}),

    so the squared L2 distance of two descriptors is :math:`2 - 2\,\mathrm{NCC}`, a
    normalised-cross-correlation baseline (HPatches' own trivial baseline resizes to 6 x 6).

:func:`describe_dataset` writes one file per patch-image, ``<out>/<seq>/<img>.npy`` (N x D
float32) or ``.csv`` (one row per patch, the layout
:func:`~metricalc.benchmarks.hpatches_patches.compute.
load_descriptor_pool` reads).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import cv2
import numpy as np

from metricalc.benchmarks.hpatches_patches.dataset import (
    PATCH_SIZE,
    PatchDataset,
    check_patches,
    open_patch_dataset,
)
from metricalc.benchmarks.hpatches_patches.files import write_atomic
from metricalc.errors import InvalidInputError
from metricalc.progress import progress_bar
from metricalc.validation import Boolean, Choice, validate_params

__all__ = [
    "CHUNK",
    "FORMATS",
    "METHODS",
    "RAW_SIZE",
    "SIFT_PADDING",
    "SIFT_SIZE",
    "describe_dataset",
    "describe_image",
    "describe_patches",
]

METHODS = ("sift", "raw")
"""Descriptor methods of :func:`describe_patches`."""

FORMATS = ("npy", "csv")
"""File formats of :func:`describe_dataset`."""

SIFT_SIZE = 2 * 64 / 12
"""OpenCV keypoint size (diameter, :math:`2\\sigma`) of the patch keypoint: 4 x 4 cells of
:math:`3\\sigma` span 64 pixels."""

SIFT_PADDING = 16
"""Pixels of reflected border around each patch before SIFT (the outer cells reach 8 pixels
beyond the patch, the Gaussian smoothing a few more)."""

RAW_SIZE = 16
"""Side of the averaged-down patch of the ``raw`` descriptor (256 values)."""

CHUNK = 512
"""Patches described at once (bounds the memory of the stacked image)."""


def _sift(patches: np.ndarray) -> np.ndarray:
    pad = SIFT_PADDING
    side = PATCH_SIZE + 2 * pad
    tiles = np.pad(patches, ((0, 0), (pad, pad), (pad, pad)), mode="reflect")
    centre = pad + (PATCH_SIZE - 1) / 2
    keypoints = [cv2.KeyPoint(centre, side * i + centre, SIFT_SIZE, 0) for i in range(len(tiles))]
    found, descriptors = cv2.SIFT.create().compute(tiles.reshape(-1, side), keypoints)
    if descriptors is None or len(found) != len(tiles):  # pragma: no cover - OpenCV keeps them
        raise InvalidInputError(f"OpenCV SIFT described {len(found)} of {len(tiles)} patches")
    return np.asarray(descriptors, dtype=np.float32)


def _raw(patches: np.ndarray) -> np.ndarray:
    # INTER_AREA on the stack: output row j covers input rows [65 j / 16, 65 (j + 1) / 16), so
    # the 16 rows of patch i average exactly its own 65 rows.
    stack = patches.reshape(-1, PATCH_SIZE).astype(np.float32)
    small = cv2.resize(stack, (RAW_SIZE, RAW_SIZE * len(patches)), interpolation=cv2.INTER_AREA)
    x = small.reshape(len(patches), -1)
    x = x - x.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    # A constant patch leaves float32 rounding noise of about 1e-5; a single pixel one grey level
    # off moves an average by 1 / 16.5, so 1e-3 separates the two.
    normalised: np.ndarray = np.divide(x, norm, out=np.zeros_like(x), where=norm > 1e-3)
    return normalised.astype(np.float32)


@validate_params(method=Choice(METHODS))
def describe_patches(patches: np.ndarray, *, method: str = "sift") -> np.ndarray:
    """Descriptors (N x D float32) of patches (N, 65, 65) uint8 (module docstring).

    Parameters
    ----------
    patches : ndarray of uint8, shape (N, 65, 65)
    method : {"sift", "raw"}
        SIFT at the patch centre (D = 128) or normalised averaged pixels (D = 256).

    Examples
    --------
    >>> import numpy as np
    >>> patches = np.random.default_rng(0).integers(0, 256, (3, 65, 65), dtype=np.uint8)
    >>> describe_patches(patches).shape, describe_patches(patches, method="raw").shape
    ((3, 128), (3, 256))
    >>> d = describe_patches(patches, method="raw")
    >>> np.allclose(np.linalg.norm(d, axis=1), 1), np.allclose(d.sum(axis=1), 0, atol=1e-5)
    (True, True)
    """
    patches = check_patches(patches)
    kernel = _sift if method == "sift" else _raw
    width = 128 if method == "sift" else RAW_SIZE * RAW_SIZE
    out = np.empty((len(patches), width), dtype=np.float32)
    for first in range(0, len(patches), CHUNK):
        out[first : first + CHUNK] = kernel(patches[first : first + CHUNK])
    return out


def describe_image(
    dataset: PatchDataset, sequence: str, image: str, *, method: str = "sift"
) -> np.ndarray:
    """The describe step of the patch benchmark: the descriptors (N x D float32) of the patches
    of patch-image ``sequence.image`` of ``dataset`` (:func:`describe_patches`)."""
    return describe_patches(dataset.patches(sequence, image), method=method)


def _encode(descriptors: np.ndarray, fmt: str) -> bytes:
    if fmt == "npy":
        binary = io.BytesIO()
        np.save(binary, descriptors, allow_pickle=False)
        return binary.getvalue()
    text = io.StringIO()
    np.savetxt(text, descriptors, delimiter=",", fmt="%.9g")  # float32 round-trips
    return text.getvalue().encode("ascii")


@validate_params(method=Choice(METHODS), format=Choice(FORMATS), progress=Boolean())
def describe_dataset(
    dataset: PatchDataset | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    method: str = "sift",
    format: str = "npy",
    progress: bool = False,
) -> list[Path]:
    """Describe every patch-image of a patch dataset into ``out/<seq>/<img>.<format>``.

    Parameters
    ----------
    dataset : PatchDataset or path
    out : path
        Descriptor folder (the ``--descriptors`` of ``metricalc patches compute``); created.
    method : {"sift", "raw"}
    format : {"npy", "csv"}
        ``.npy`` (N x D float32) or ``.csv`` (one row of D comma-separated values per patch).
    progress : bool
        Show a progress bar over the patch-images.

    Returns
    -------
    list of Path
        The files written, one per patch-image, each written atomically.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from metricalc.benchmarks.hpatches_patches.dataset import write_patches
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     patches = np.zeros((2, 65, 65), np.uint8)
    ...     _ = write_patches(Path(tmp) / "data" / "v_a" / "ref.png", patches)
    ...     paths = describe_dataset(Path(tmp) / "data", Path(tmp) / "raw", method="raw")
    ...     [p.relative_to(tmp).as_posix() for p in paths], np.load(paths[0]).shape
    (['raw/v_a/ref.npy'], (2, 256))
    """
    dataset = open_patch_dataset(dataset)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} is a file; expected a folder for the descriptors")
    jobs = [(s, image) for s in dataset.sequences for image in dataset.images[s]]
    written = []
    with progress_bar(f"{method} descriptors", total=len(jobs), enabled=progress) as advance:
        for sequence, image in jobs:
            descriptors = describe_image(dataset, sequence, image, method=method)
            path = out / sequence / f"{image}.{format}"
            written.append(write_atomic(path, _encode(descriptors, format)))
            for other in FORMATS:  # a stale file of the other format would shadow or confuse
                if other != format:
                    path.with_suffix(f".{other}").unlink(missing_ok=True)
            advance()
    return written
