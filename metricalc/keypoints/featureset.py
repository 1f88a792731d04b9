"""One image's keypoints and descriptors (:class:`Features`), validated; checks of your own.

A :class:`FeatureSet` maps descriptor -> scene -> image (1..6, :data:`IMAGES`) -> :class:`Features`;
:func:`check_own_keypoints` refuses your own descriptors on locked keypoints unless their
keypoints are the locked detector's (``docs/features.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from metricalc.errors import InvalidInputError

__all__ = [
    "IMAGES",
    "FeatureSet",
    "Features",
    "SequenceLike",
    "check_inside_images",
    "check_own_keypoints",
]

IMAGES: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
"""Image numbers of a sequence; image 1 is the reference."""


class SequenceLike(Protocol):
    """What :func:`extract` needs of a sequence (``metricalc.keypoints.sequences.Sequence``)."""

    @property
    def name(self) -> str: ...  # scene name

    def image(self, k: int) -> np.ndarray: ...  # uint8 HxW or HxWx3 (RGB)

    def gray(self, k: int) -> np.ndarray: ...  # uint8 HxW

    def shape(self, k: int) -> tuple[int, int]: ...  # (height, width)


def _coerce(keypoints: Any, descriptors: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate keypoints/descriptors and return them as float64 (N, 2) and float32|uint8 (N, D).

    ``where`` starts every error message (e.g. ``"features file /data/sift/i_a/1.npz"``).
    """
    kp = np.asarray(keypoints)
    desc = np.asarray(descriptors)
    if kp.ndim != 2 or kp.shape[1] != 2:
        raise InvalidInputError(
            f"{where}: 'keypoints' has shape {kp.shape}; expected N x 2 (x, y in pixels)"
        )
    if kp.dtype == bool or not (
        np.issubdtype(kp.dtype, np.floating) or np.issubdtype(kp.dtype, np.integer)
    ):
        raise InvalidInputError(
            f"{where}: 'keypoints' has dtype {kp.dtype}; expected a float (or integer) type"
        )
    kp = np.ascontiguousarray(kp, dtype=np.float64)
    if not np.isfinite(kp).all():
        raise InvalidInputError(f"{where}: 'keypoints' contains non-finite values (NaN or inf)")
    if desc.ndim != 2:
        raise InvalidInputError(
            f"{where}: 'descriptors' has shape {desc.shape} ({desc.ndim}-D); expected a 2-D "
            "N x D array"
        )
    if desc.shape[1] == 0:
        raise InvalidInputError(f"{where}: 'descriptors' has 0 columns; expected N x D, D >= 1")
    if desc.shape[0] != kp.shape[0]:
        raise InvalidInputError(
            f"{where}: 'descriptors' has {desc.shape[0]} rows but 'keypoints' has "
            f"{kp.shape[0]}; expected one descriptor row per keypoint"
        )
    if desc.dtype == np.uint8:
        desc = np.ascontiguousarray(desc)
    elif np.issubdtype(desc.dtype, np.floating):
        if not np.isfinite(desc).all():
            raise InvalidInputError(
                f"{where}: 'descriptors' contains non-finite values (NaN or inf)"
            )
        with np.errstate(over="ignore"):
            desc = np.ascontiguousarray(desc, dtype=np.float32)
        if not np.isfinite(desc).all():
            raise InvalidInputError(
                f"{where}: 'descriptors' has values too large for float32 (they overflow to inf)"
            )
    else:
        raise InvalidInputError(
            f"{where}: 'descriptors' has dtype {desc.dtype}; expected a float type (compared by "
            "L2 distance, stored as float32) or uint8 (packed bits compared by Hamming distance; "
            "pack boolean bits with np.packbits(bits, axis=1))"
        )
    return kp, desc


@dataclass(frozen=True, eq=False)
class Features:
    """Keypoints and descriptors of one image.

    Construction converts integer or float keypoints to float64 and float descriptors to
    float32; any other dtype, a shape that is not N x 2 / N x D, a row-count mismatch or a
    non-finite value raises :class:`~metricalc.InvalidInputError`.

    Attributes
    ----------
    keypoints : ndarray of float64, shape (N, 2)
        x, y pixel coordinates (pixel centres at integers, as in OpenCV).
    descriptors : ndarray, shape (N, D)
        float32 (compared by L2 distance) or uint8 packed bits (compared by Hamming distance).
        Row i describes keypoint i.
    source : str or None
        The file the features were read from (:func:`~metricalc.keypoints.load_features`), for
        error messages; None when built in memory.

    Examples
    --------
    >>> import numpy as np
    >>> f = Features(np.array([[10, 20], [30, 40]]), np.zeros((2, 32), dtype=np.uint8))
    >>> f.keypoints.dtype, f.binary
    (dtype('float64'), True)
    """

    keypoints: np.ndarray
    descriptors: np.ndarray
    source: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        kp, desc = _coerce(self.keypoints, self.descriptors, "Features")
        object.__setattr__(self, "keypoints", kp)
        object.__setattr__(self, "descriptors", desc)

    @property
    def binary(self) -> bool:
        """True for packed-bit descriptors (uint8, Hamming distance), False for float (L2)."""
        return bool(self.descriptors.dtype == np.uint8)

    def __len__(self) -> int:
        return int(self.keypoints.shape[0])

    def __repr__(self) -> str:
        return (
            f"Features(n={len(self)}, dims={self.descriptors.shape[1]}, "
            f"dtype={self.descriptors.dtype})"
        )


FeatureSet = dict[str, dict[str, dict[int, Features]]]
"""descriptor -> scene -> image (1..6) -> :class:`Features`."""


def check_inside_images(
    features: Mapping[str, Mapping[str, Mapping[int, Any]]], sequences: Sequence[SequenceLike]
) -> None:
    """Refuse keypoints that lie outside their image.

    With pixel centres at integers (OpenCV's convention), an image of width :math:`W` and height
    :math:`H` covers :math:`x \\in [-0.5, W - 0.5]`, :math:`y \\in [-0.5, H - 0.5]`; a keypoint
    outside is not a point of that image (a wrong image, scale or coordinate order) and is
    refused rather than silently dropped as a border keypoint. Scenes or images a descriptor
    lacks are left to the evaluation's own checks.

    Raises
    ------
    InvalidInputError
        Naming the features file (or descriptor, scene and image), the first such keypoint, its
        coordinates and the image size, and how many keypoints of the image are outside.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> scene = SimpleNamespace(name="i_a", shape=lambda k: (480, 640))
    >>> f = Features(np.array([[10.0, 20.0], [-1e6, 5.0]]), np.zeros((2, 4), dtype=np.float32))
    >>> check_inside_images({"mine": {"i_a": {1: f}}}, [scene])
    Traceback (most recent call last):
    metricalc.errors.InvalidInputError: descriptor 'mine', scene 'i_a', image 1: keypoint 1 at (-1000000, 5) is outside the image (640 x 480 px: x in [-0.5, 639.5], y in [-0.5, 479.5]); 1 of 2 keypoints are outside; keypoints are x, y pixel coordinates of that image
    """  # noqa: E501
    for sequence in sequences:
        for name, scenes in features.items():
            for k, one in scenes.get(sequence.name, {}).items():
                points = np.asarray(getattr(one, "keypoints", np.empty((0, 2))), dtype=np.float64)
                if points.size == 0:
                    continue
                height, width = sequence.shape(k)
                limits = np.array([width, height], dtype=np.float64) - 0.5
                outside = np.flatnonzero(((points < -0.5) | (points > limits)).any(axis=1))
                if outside.size == 0:
                    continue
                i = int(outside[0])
                source = getattr(one, "source", None)
                where = (
                    f"features file {source}"
                    if source
                    else f"descriptor {name!r}, scene {sequence.name!r}, image {k}"
                )
                raise InvalidInputError(
                    f"{where}: keypoint {i} at ({points[i, 0]:.9g}, {points[i, 1]:.9g}) is outside "
                    f"the image ({width} x {height} px: x in [-0.5, {width - 0.5:g}], y in "
                    f"[-0.5, {height - 0.5:g}]); {outside.size} of {len(points)} keypoints are "
                    "outside; keypoints are x, y pixel coordinates of that image"
                )


def check_own_keypoints(
    keypoints: np.ndarray, kept: np.ndarray, *, descriptor: str, locked: str, where: str
) -> None:
    """Refuse your own keypoints of one image unless they are the locked detector's, in order.

    Equal means: the same number of keypoints and, row by row, the same x and y once both are
    rounded to float32 (the precision OpenCV reports keypoints in, so keypoints written as float32
    or float64 both match, anything moved does not). The error is one line naming the descriptor,
    the image (``where``) and both counts.

    Examples
    --------
    >>> kept = np.array([[50.25, 60.5], [70.0, 80.0]])
    >>> check_own_keypoints(kept.astype(np.float32), kept, descriptor="mine", locked="sift",
    ...                     where="scene 'i_a' image 1")
    >>> check_own_keypoints(kept[:1], kept, descriptor="mine", locked="sift",
    ...                     where="scene 'i_a' image 1")
    Traceback (most recent call last):
    metricalc.errors.InvalidInputError: descriptor 'mine' is not on the keypoints of sift: scene 'i_a' image 1 has 1 keypoints in your file but sift keeps 2; describe the keypoints of export-keypoints --detector sift (same border and max_keypoints), in their order
    """  # noqa: E501
    mine = np.asarray(keypoints, dtype=np.float64).astype(np.float32)
    theirs = np.asarray(kept, dtype=np.float64).astype(np.float32)
    start = f"descriptor {descriptor!r} is not on the keypoints of {locked}: {where}"
    advice = (
        f"describe the keypoints of export-keypoints --detector {locked} (same border and "
        "max_keypoints), in their order"
    )
    if mine.shape != theirs.shape:
        raise InvalidInputError(
            f"{start} has {len(mine)} keypoints in your file but {locked} keeps {len(theirs)}; "
            f"{advice}"
        )
    moved = np.flatnonzero((mine != theirs).any(axis=1))
    if moved.size:
        i = int(moved[0])
        raise InvalidInputError(
            f"{start} has keypoint {i} at ({mine[i, 0]:.9g}, {mine[i, 1]:.9g}) in your file but "
            f"at ({theirs[i, 0]:.9g}, {theirs[i, 1]:.9g}) for {locked} ({moved.size} of "
            f"{len(mine)} keypoints differ, {len(mine)} in your file and {len(theirs)} for "
            f"{locked}); {advice}"
        )
