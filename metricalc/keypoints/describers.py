"""Describing the keypoints of one image with each built-in method (OpenCV and scikit-image).

:class:`ImageDescriber` describes a list of kept keypoints with any built-in method and returns
the indices of the keypoints it could describe with their rows. A keypoint of another detector
("foreign", in locked mode) is first given the fields the describer reads:

- SIFT, RootSIFT, DSP-SIFT: the packed ``octave`` of the pyramid level of its size
  (:func:`~metricalc.keypoints.sift_family.sift_octave`);
- ORB: the pyramid level (``octave``) whose 31 px patch times 1.2**level is closest to its size;
- AKAZE and KAZE: ``class_id`` = the nonlinear scale-space level of its size and ``octave`` =
  that level's octave (their ``compute()`` reads the level from ``class_id``);
- BRISK reads only the size (its own scale and orientation are computed by ``compute()``);
- an angle of -1 (FAST, no orientation) becomes 0 (upright).

A method's own keypoints are passed as its detector made them. Which keypoints a describer kept
is tracked by ``class_id`` = input index for the describers that do not read ``class_id``
(SIFT, ORB, BRISK drop or keep keypoints in input order); AKAZE and KAZE drop none.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import cv2
import numpy as np
from skimage.feature import BRIEF
from skimage.util import img_as_float

from metricalc.errors import MetricalcError
from metricalc.keypoints.sift_family import (
    DSP_SCALES,
    RAW_PATCH_GRID,
    pool_domain_sizes,
    raw_patch,
    rootsift,
    scaled_copies,
    sift_octave,
)

__all__ = ["DIMENSIONS", "ImageDescriber", "nonlinear_level"]

DIMENSIONS: dict[str, tuple[int, type]] = {
    "sift": (128, np.float32),
    "rootsift": (128, np.float32),
    "dspsift": (128, np.float32),
    "orb": (32, np.uint8),  # 256 bits
    "brief": (32, np.uint8),  # 256 bits
    "brisk": (64, np.uint8),  # 512 bits
    "akaze": (61, np.uint8),  # MLDB, 486 bits
    "kaze": (64, np.float32),
    "raw_patch": (RAW_PATCH_GRID**2, np.float32),
}
"""Row length and dtype of each built-in method."""

ORB_LEVELS = 8
ORB_SCALE = 1.2
ORB_PATCH = 31
BRIEF_PATCH = 49
# OpenCV's nonlinear scale spaces (defaults): 4 octaves of 4 sublevels; a keypoint of level i
# has size base * 2**(i / 4) (AKAZE: 2 * 1.5 * 1.6 = 4.8, KAZE: 2 * 1.6 = 3.2).
NONLINEAR_SUBLEVELS = 4
NONLINEAR_OCTAVES = 4
NONLINEAR_BASE = {"akaze": 4.8, "kaze": 3.2}


def _empty(method: str) -> tuple[np.ndarray, np.ndarray]:
    dims, dtype = DIMENSIONS[method]
    return np.zeros(0, dtype=np.int64), np.zeros((0, dims), dtype=dtype)


def _orb_level(size: float) -> int:
    """ORB pyramid level whose patch (31 px times 1.2**level) is closest to ``size``."""
    level = round(float(np.log(max(size, 1e-3) / ORB_PATCH) / np.log(ORB_SCALE)))
    return min(max(level, 0), ORB_LEVELS - 1)


def _akaze_octaves(shape: tuple[int, int]) -> int:
    """Octaves OpenCV's AKAZE builds for an image of ``shape`` (it stops below 80 x 40 px)."""
    height, width = shape
    octaves = 1
    while octaves < NONLINEAR_OCTAVES:
        if int(width / 2**octaves) < 80 or int(height / 2**octaves) < 40:
            break
        octaves += 1
    return octaves


def nonlinear_level(method: str, size: float, shape: tuple[int, int]) -> int:
    r"""AKAZE / KAZE scale-space level of a keypoint of ``size``.

    :math:`\mathrm{round}(4 \log_2(\mathrm{size} / b))` with :math:`b` = 4.8 (AKAZE) or 3.2
    (KAZE), the sizes OpenCV gives level 0, clamped to the levels built for ``shape`` (AKAZE
    halves the image per octave and stops below 80 x 40 px; KAZE keeps all 16 levels). KAZE
    starts at level 1: its ``compute()`` has no derivatives on level 0 (where it detects
    nothing) and would return NaN rows there.

    Examples
    --------
    >>> nonlinear_level("akaze", 4.8 * 2 ** (5 / 4), (480, 640))
    5
    >>> nonlinear_level("kaze", 1.0, (480, 640))   # KAZE's lowest level with derivatives
    1
    """
    octaves = _akaze_octaves(shape) if method == "akaze" else NONLINEAR_OCTAVES
    top = NONLINEAR_SUBLEVELS * octaves - 1
    level = round(NONLINEAR_SUBLEVELS * float(np.log2(max(size, 1e-3) / NONLINEAR_BASE[method])))
    return min(max(level, 1 if method == "kaze" else 0), top)


def _tagged(
    keypoints: list[cv2.KeyPoint], octave: Callable[[cv2.KeyPoint], int] | None = None
) -> list[cv2.KeyPoint]:
    """Copies tagged with ``class_id`` = index (angle -1 -> 0; ``octave`` recomputed if given)."""
    return [
        cv2.KeyPoint(
            k.pt[0],
            k.pt[1],
            k.size,
            k.angle if k.angle >= 0 else 0.0,
            k.response,
            k.octave if octave is None else octave(k),
            j,
        )
        for j, k in enumerate(keypoints)
    ]


def _compute_tagged(
    extractor: Any, gray: np.ndarray, tagged: list[cv2.KeyPoint], method: str
) -> tuple[np.ndarray, np.ndarray]:
    """``extractor.compute`` on keypoints tagged by index; the described indices and rows."""
    if not tagged:
        return _empty(method)
    described, rows = extractor.compute(gray, tagged)
    if rows is None or not described:
        return _empty(method)
    dims, dtype = DIMENSIONS[method]
    index = np.array([k.class_id for k in described], dtype=np.int64)
    order = np.argsort(index, kind="stable")
    order = order[index[order] >= 0]  # class_id -1: the SIFT sentinel below
    return index[order], np.ascontiguousarray(rows[order], dtype=dtype).reshape(-1, dims)


def _compute_sift(
    sift: Any, gray: np.ndarray, tagged: list[cv2.KeyPoint]
) -> tuple[np.ndarray, np.ndarray]:
    """SIFT ``compute`` on the pyramid its detector builds, whatever keypoints it is given.

    OpenCV's SIFT starts the pyramid of ``compute()`` at the lowest octave among the keypoints
    it gets: at octave -1 (the image upsampled twice, as for detection) only if one of them is
    there, else at octave 0 (a different Gaussian pyramid, so slightly different rows). One
    sentinel keypoint of octave -1 (``class_id`` -1, its row dropped) makes every call start
    at octave -1, so a keypoint's row does not depend on the other keypoints of the call.
    """
    if not tagged:
        return _empty("sift")
    first = tagged[0]
    sentinel = cv2.KeyPoint(first.pt[0], first.pt[1], 1.0, 0.0, 0.0, sift_octave(1.0, (2, 2)), -1)
    return _compute_tagged(sift, gray, [*tagged, sentinel], "sift")


class ImageDescriber:
    """Describes keypoints of one image with any built-in method (SIFT computed once).

    Parameters
    ----------
    get : callable
        ``get(name)`` -> the OpenCV object ``name`` (:meth:`Toolkit.get`).
    gray : ndarray
        The uint8 gray image.
    methods : collection of str
        The methods that will be asked for, when known: with ``dspsift`` among them, the SIFT
        rows at sizes x 1, 1.5 and 2 come from one ``compute`` call (one Gaussian pyramid
        instead of two; every row is the same as from separate calls, since the pyramid
        starts at octave -1 either way, see :func:`_compute_sift`).
    """

    def __init__(
        self, get: Callable[[str], Any], gray: np.ndarray, methods: Collection[str] = ()
    ) -> None:
        self.get = get
        self.gray = gray
        self.shape = (int(gray.shape[0]), int(gray.shape[1]))
        self._pool_sizes = "dspsift" in methods
        self._sift: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # by detector
        self._larger: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # DSP-SIFT's, by detector

    def describe(
        self, method: str, keypoints: list[cv2.KeyPoint], detector: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Indices (ascending) of the keypoints ``method`` described and their rows."""
        if not keypoints:
            return _empty(method)
        if method in ("sift", "rootsift"):
            index, rows = self._sift_rows(keypoints, detector)
            return (index, rootsift(rows)) if method == "rootsift" else (index, rows)
        if method == "dspsift":
            return self._dspsift(keypoints, detector)
        if method == "orb":
            level = None if detector == "orb" else (lambda k: _orb_level(k.size))
            return _compute_tagged(self.get("orb"), self.gray, _tagged(keypoints, level), method)
        if method == "brisk":
            return _compute_tagged(self.get("brisk"), self.gray, _tagged(keypoints), method)
        if method in ("akaze", "kaze"):
            return self._nonlinear(method, keypoints, detector)
        if method == "raw_patch":
            return self._raw_patch(keypoints)
        return self._brief(keypoints)

    def _larger_copies(self, keypoints: list[cv2.KeyPoint], start: int) -> list[cv2.KeyPoint]:
        """DSP-SIFT's copies at sizes x 1.5 and 2, ``class_id`` = ``start`` + index in the
        concatenated list (scale s, keypoint i -> start + (s - 1) * n + i)."""
        larger = [c for f in DSP_SCALES[1:] for c in scaled_copies(keypoints, f, self.shape)]
        for j, k in enumerate(larger):
            k.class_id = start + j
        return larger

    def _sift_rows(
        self, keypoints: list[cv2.KeyPoint], detector: str
    ) -> tuple[np.ndarray, np.ndarray]:
        # one keypoint list per detector and image: sift, rootsift, dspsift share it
        if detector not in self._sift:
            level = None if detector == "sift" else (lambda k: sift_octave(k.size, self.shape))
            tagged = _tagged(keypoints, level)
            n = len(tagged)
            larger = self._larger_copies(keypoints, n) if self._pool_sizes else []
            index, rows = _compute_sift(self.get("sift"), self.gray, [*tagged, *larger])
            first = index < n
            self._sift[detector] = (index[first], rows[first])
            if larger:
                self._larger[detector] = (index[~first] - n, rows[~first])
        return self._sift[detector]

    def _dspsift(
        self, keypoints: list[cv2.KeyPoint], detector: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """DSP-SIFT: SIFT at sizes x 1 (the SIFT rows), 1.5 and 2, pooled."""
        index, first = self._sift_rows(keypoints, detector)
        n = len(keypoints)
        if detector in self._larger:
            more_index, more = self._larger[detector]
        else:
            more_index, more = _compute_sift(
                self.get("sift"), self.gray, self._larger_copies(keypoints, 0)
            )
        if len(more_index) != (len(DSP_SCALES) - 1) * n or len(index) != n:
            raise MetricalcError("OpenCV SIFT dropped keypoints; DSP-SIFT needs every scale")
        per_scale = [first, *np.split(more, len(DSP_SCALES) - 1)]
        return index, pool_domain_sizes(per_scale)

    def _nonlinear(
        self, method: str, keypoints: list[cv2.KeyPoint], detector: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """AKAZE / KAZE: own keypoints as detected; others on the level of their size."""
        if detector == method:
            prepared = keypoints
        else:
            prepared = []
            for k in keypoints:
                level = nonlinear_level(method, k.size, self.shape)
                angle = k.angle if k.angle >= 0 else 0.0
                octave = level // NONLINEAR_SUBLEVELS
                prepared.append(
                    cv2.KeyPoint(k.pt[0], k.pt[1], k.size, angle, k.response, octave, level)
                )
        described, rows = self.get(method).compute(self.gray, prepared)
        if rows is None or len(described) != len(prepared):
            raise MetricalcError(f"OpenCV {method.upper()} dropped keypoints in compute()")
        dims, dtype = DIMENSIONS[method]
        index = np.arange(len(prepared), dtype=np.int64)
        return index, np.ascontiguousarray(rows, dtype=dtype).reshape(-1, dims)

    def _raw_patch(self, keypoints: list[cv2.KeyPoint]) -> tuple[np.ndarray, np.ndarray]:
        table = np.array([(*k.pt, k.size, k.angle) for k in keypoints], dtype=np.float64)
        rows = raw_patch(self.gray, table[:, :2], table[:, 2], table[:, 3])
        return np.arange(len(keypoints), dtype=np.int64), rows

    def _brief(self, keypoints: list[cv2.KeyPoint]) -> tuple[np.ndarray, np.ndarray]:
        image = img_as_float(self.gray)  # type: ignore[no-untyped-call]
        rows_cols = np.array([(k.pt[1], k.pt[0]) for k in keypoints], dtype=np.float64)
        brief = BRIEF(descriptor_size=256, patch_size=BRIEF_PATCH, mode="normal")  # type: ignore[no-untyped-call]
        brief.extract(image, rows_cols)  # type: ignore[no-untyped-call]
        # BRIEF drops keypoints whose patch leaves the image; mask marks the ones it described
        index = np.flatnonzero(np.asarray(brief.mask)).astype(np.int64)
        rows = np.packbits(np.asarray(brief.descriptors, dtype=bool), axis=1)
        return index, np.ascontiguousarray(rows, dtype=np.uint8)
