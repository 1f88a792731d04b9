r"""Descriptors computed from OpenCV SIFT or from the SIFT window: RootSIFT, DSP-SIFT, raw patch.

- :func:`sift_octave`: OpenCV's packed ``octave`` field of a keypoint of any size, so SIFT
  describes it on the pyramid level of its size;
- :func:`rootsift`: :math:`\sqrt{d / \lVert d \rVert_1}`;
- :func:`pool_domain_sizes`: DSP-SIFT's pooling of SIFT rows over domain sizes;
- :func:`sample_patches`: patches at the keypoints' scale and orientation (for the raw patch,
  and for your own patch descriptor);
- :func:`raw_patch`: the normalised resampled patch of the SIFT window (the HPatches "Resz"
  baseline at the keypoint's scale and orientation).
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy import ndimage

from metricalc.validation import Integer, Real, validate_params

__all__ = [
    "DSP_SCALES",
    "RAW_PATCH_GRID",
    "RAW_PATCH_WINDOW",
    "pool_domain_sizes",
    "raw_patch",
    "raw_patch_levels",
    "rootsift",
    "sample_patches",
    "scaled_copies",
    "sift_octave",
]

SIFT_SIGMA = 1.6
SIFT_LAYERS = 3
ROOTSIFT_EPS = 1e-12

DSP_SCALES: tuple[float, ...] = (1.0, 1.5, 2.0)
"""Domain sizes of DSP-SIFT, as factors of the keypoint size (DescriptorWorkbench's)."""

RAW_PATCH_GRID = 8
"""Samples per side of the raw patch (``raw_patch`` has ``RAW_PATCH_GRID**2`` = 64 dims)."""
RAW_PATCH_WINDOW = 6.0
"""Side of the raw patch window in keypoint sizes: SIFT's (4 bins of 3 sigma, size = 2 sigma)."""
_MIN_LEVEL_SIDE = 16  # the raw patch pyramid stops before a side would drop below this


def sift_octave(size: float, shape: tuple[int, int]) -> int:
    r"""OpenCV's packed SIFT ``octave`` field for a keypoint of ``size`` (original pixels).

    SIFT reports :math:`\mathrm{size} = 2\sigma\,2^{o + (l + \xi)/3}` (:math:`\sigma = 1.6`,
    layer :math:`l \in \{1, 2, 3\}`, offset :math:`\xi \in [-1/2, 1/2]`); this inverts it so
    SIFT describes the keypoint on the matching pyramid level, clamped to the octaves SIFT
    builds for an image of ``shape``. The descriptor window itself always follows ``size``.

    Examples
    --------
    >>> code = sift_octave(2 * 1.6 * 2 ** (1 + 2 / 3), (480, 640))   # octave 1, layer 2
    >>> code & 255, (code >> 8) & 255, (code >> 16) & 255
    (1, 2, 128)
    """
    t = float(np.log2(max(size, 1e-3) / (2 * SIFT_SIGMA)))
    total = round(SIFT_LAYERS * t)
    octave = (total - 1) // SIFT_LAYERS
    layer = total - SIFT_LAYERS * octave
    offset = SIFT_LAYERS * t - total
    top = max(round(np.log2(min(shape))) - 3, -1)  # the deepest octave SIFT detects on
    if octave < -1:
        octave, layer, offset = -1, 1, -0.5
    elif octave > top:
        octave, layer, offset = top, SIFT_LAYERS, 0.5
    code = round((min(max(offset, -0.5), 0.5) + 0.5) * 255)
    return (octave & 255) | (layer << 8) | (code << 16)


def rootsift(sift: np.ndarray) -> np.ndarray:
    r"""RootSIFT (Arandjelovic & Zisserman 2012): :math:`\sqrt{d / \lVert d \rVert_1}`.

    SIFT entries are nonnegative, so each row has unit L2 norm.

    Examples
    --------
    >>> [round(float(v), 3) for v in rootsift(np.array([[1.0, 3.0, 0.0]]))[0]]
    [0.5, 0.866, 0.0]
    """
    l1 = np.abs(sift).sum(axis=1, keepdims=True, dtype=np.float64)
    root: np.ndarray = np.sqrt(np.abs(sift) / np.maximum(l1, ROOTSIFT_EPS)).astype(np.float32)
    return root


def scaled_copies(
    keypoints: list[cv2.KeyPoint], factor: float, shape: tuple[int, int]
) -> list[cv2.KeyPoint]:
    """Copies of the keypoints with ``size * factor`` and the SIFT octave of that size.

    ``class_id`` is the index in ``keypoints`` (OpenCV's SIFT keeps it), angle and position
    are unchanged (an angle of -1, no orientation, becomes 0).
    """
    out = []
    for j, k in enumerate(keypoints):
        size = float(k.size) * factor
        angle = float(k.angle) if k.angle >= 0 else 0.0
        octave = sift_octave(size, shape)
        out.append(cv2.KeyPoint(k.pt[0], k.pt[1], size, angle, k.response, octave, j))
    return out


def pool_domain_sizes(per_scale: list[np.ndarray]) -> np.ndarray:
    r"""DSP-SIFT's pooling: the mean of the SIFT rows over domain sizes, then unit L2 norm.

    .. math:: d = \frac{\bar s}{\lVert \bar s \rVert_2}, \qquad
              \bar s = \frac{1}{|A|} \sum_{\alpha \in A} \mathrm{SIFT}(x, \alpha\,\mathrm{size})

    with the rows as OpenCV's SIFT returns them (each already clipped at 0.2 and scaled to
    norm 512), as DescriptorWorkbench's ``DSPSIFT::calcDescriptors`` averages them and its
    ``DomainSizePooling`` normalises after pooling. A zero mean row stays zero.

    Examples
    --------
    >>> rows = [np.array([[3.0, 0.0]]), np.array([[1.0, 4.0]])]
    >>> [round(float(v), 3) for v in pool_domain_sizes(rows)[0]]
    [0.707, 0.707]
    """
    mean = np.mean(np.stack(per_scale).astype(np.float64), axis=0)
    norm = np.linalg.norm(mean, axis=1, keepdims=True)
    pooled: np.ndarray = np.divide(mean, norm, out=np.zeros_like(mean), where=norm > 0)
    return pooled.astype(np.float32)


def _pyramid(gray: np.ndarray) -> list[np.ndarray]:
    """float32 Gaussian pyramid (cv2.pyrDown) down to a side of at least ``_MIN_LEVEL_SIDE``."""
    levels: list[np.ndarray] = [gray.astype(np.float32)]
    while min(levels[-1].shape) >= 2 * _MIN_LEVEL_SIDE:
        levels.append(np.asarray(cv2.pyrDown(levels[-1])))
    return levels


def raw_patch_levels(
    sizes: np.ndarray,
    n_levels: int,
    *,
    grid: int = RAW_PATCH_GRID,
    window: float = RAW_PATCH_WINDOW,
) -> np.ndarray:
    r"""Pyramid level of each keypoint's patch: samples :math:`s = w\,\mathrm{size} / g` px
    apart (window :math:`w` sizes, :math:`g` samples a side), level
    :math:`\lfloor \log_2 s \rfloor` clamped to the pyramid, so the samples are 1 to 2 pixels
    apart on the level they are read from."""
    spacing = window * np.maximum(sizes, 1e-3) / grid
    levels: np.ndarray = np.clip(np.floor(np.log2(spacing)), 0, n_levels - 1).astype(np.int64)
    return levels


@validate_params(grid=Integer(1), window=Real(0, None, closed="neither"))
def sample_patches(
    gray: np.ndarray,
    points: np.ndarray,
    sizes: np.ndarray,
    angles: np.ndarray,
    *,
    grid: int = RAW_PATCH_GRID,
    window: float = RAW_PATCH_WINDOW,
) -> np.ndarray:
    r"""Patches at the keypoints' scale and orientation: ``(N, grid, grid)`` float32 pixels.

    The square of side :math:`w\,\mathrm{size}` (``window`` keypoint sizes; 6, SIFT's window,
    by default) centred on each keypoint and rotated by its angle, sampled at the centres of a
    ``grid`` x ``grid`` raster: sample :math:`(u, v)` (offsets from the centre along the
    patch's columns and rows) is read at

    .. math:: x = c_x + u\cos\theta - v\sin\theta, \qquad y = c_y + u\sin\theta + v\cos\theta

    (:math:`\theta` = OpenCV's angle in image coordinates, y down, as SIFT's descriptor reads
    it; an angle of -1 counts as 0), by bilinear interpolation on the level of a Gaussian
    pyramid (``cv2.pyrDown``) where the samples are 1 to 2 pixels apart
    (:func:`raw_patch_levels`; level :math:`L` pixel :math:`i` is centred at
    :math:`2^L (i + 1/2) - 1/2`), replicating the border. One
    ``scipy.ndimage.map_coordinates`` call per pyramid level, no loop over keypoints.
    This is the input of :func:`raw_patch`, and of a learned patch descriptor (HardNet,
    SOSNet, ... take 32 x 32 patches: ``grid=32``) evaluated next to the built-in methods.

    Parameters
    ----------
    gray : ndarray
        uint8 or float image (H, W).
    points, sizes, angles : ndarray
        (N, 2) x y, (N,) OpenCV sizes and angles in degrees
        (:func:`metricalc.keypoints.features.detect_keypoints` gives all three).
    grid : int
        Samples per side.
    window : float
        Side of the patch in keypoint sizes.

    Examples
    --------
    >>> ramp = np.tile(np.arange(64, dtype=np.uint8), (64, 1))
    >>> p = sample_patches(ramp, np.array([[32.0, 32.0]]), np.array([4.0]), np.array([90.0]))
    >>> p.shape, bool(p[0, 7, 0] < p[0, 0, 0])   # turned by 90 degrees: x grows down the rows
    ((1, 8, 8), True)
    """
    levels = _pyramid(gray)
    which = raw_patch_levels(
        np.asarray(sizes, dtype=np.float64), len(levels), grid=grid, window=window
    )
    k = np.arange(grid, dtype=np.float64)
    offsets = (k + 0.5 - grid / 2) * (window / grid)  # in keypoint sizes
    u = np.broadcast_to(offsets[None, :], (grid, grid)).ravel()  # along the columns
    v = np.broadcast_to(offsets[:, None], (grid, grid)).ravel()  # along the rows
    angle = np.asarray(angles, dtype=np.float64)
    theta = np.deg2rad(np.where(angle >= 0, angle, 0.0))[:, None]
    size = np.asarray(sizes, dtype=np.float64)[:, None]
    cos, sin = np.cos(theta) * size, np.sin(theta) * size
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    x = points[:, :1] + u * cos - v * sin
    y = points[:, 1:2] + u * sin + v * cos
    samples = np.empty((len(points), grid * grid), dtype=np.float32)
    for level in np.unique(which):
        rows = which == level
        scale = 2.0**level
        coords = np.stack([(y[rows] + 0.5) / scale - 0.5, (x[rows] + 0.5) / scale - 0.5])
        samples[rows] = ndimage.map_coordinates(levels[level], coords, order=1, mode="nearest")
    return samples.reshape(-1, grid, grid)


def raw_patch(
    gray: np.ndarray, points: np.ndarray, sizes: np.ndarray, angles: np.ndarray
) -> np.ndarray:
    r"""Raw-patch descriptor: the SIFT window resampled to 8 x 8, zero mean, unit L2 norm.

    The HPatches "Resz" baseline (hpatches-benchmark ``matlab/+desc/+feats/resize.m``: the
    patch minus its mean, divided by its standard deviation, resized to a small grid without
    antialiasing, L2-normalised), taken at the keypoint's scale and orientation so that it
    sees the region SIFT sees: :func:`sample_patches` with an 8 x 8 grid over a window of 6
    keypoint sizes, each row then

    .. math:: r = \frac{p - \bar p}{\lVert p - \bar p \rVert_2}

    (dividing by the standard deviation first, as HPatches does, changes nothing after that);
    a flat patch gives zeros.

    Parameters
    ----------
    gray : ndarray
        uint8 or float image (H, W).
    points, sizes, angles : ndarray
        (N, 2) x y, (N,) OpenCV sizes and angles in degrees.

    Returns
    -------
    ndarray
        (N, 64) float32.

    Examples
    --------
    >>> ramp = np.tile(np.arange(64, dtype=np.uint8), (64, 1))
    >>> row = raw_patch(ramp, np.array([[32.0, 32.0]]), np.array([4.0]), np.array([0.0]))
    >>> row.shape, bool(abs(np.linalg.norm(row) - 1) < 1e-6), bool(row[0, 7] > row[0, 0])
    ((1, 64), True, True)
    """
    patches = sample_patches(gray, points, sizes, angles).astype(np.float64)
    flat = patches.reshape(len(patches), -1)
    centred = flat - flat.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(centred, axis=1, keepdims=True)
    out: np.ndarray = np.divide(centred, norm, out=np.zeros_like(centred), where=norm > 1e-9)
    return out.astype(np.float32)
