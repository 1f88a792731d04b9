"""Pair lists with intrinsics and relative poses: MegaDepth-1500 / Glue Factory / SuperGlue.

One pair a line, fields separated by white space:

- Glue Factory (``gluefactory/datasets/image_pairs.py``: ``ImagePairs`` with ``extra_data:
  relative_pose``; its ``megadepth1500/pairs_calibrated.txt``), 36 fields:
  ``name0 name1 K0 (9, row-major) K1 (9) T_0to1 (16, row-major 4 x 4)``, or 32 fields with the
  pose as ``R (9) t (3)`` (its ``parse_relative_pose``);
- SuperGlue (``assets/*_pairs_with_gt.txt``, read by ``match_pairs.py``), 38 fields:
  ``name0 name1 rot0 rot1 K0 (9) K1 (9) T_0to1 (16)``, where ``rot`` is an EXIF rotation in
  quarter turns; only 0 is read (a rotated image needs rotated intrinsics, which metricalc
  does not apply).

:math:`T_{0\\to1}` maps camera 0's coordinates to camera 1's (:math:`X_1 = R X_0 + t`). Blank
lines and lines starting with ``#`` are skipped. A malformed line is a one-line
:class:`~metricalc.errors.InvalidInputError` naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write

__all__ = ["PAIR_FIELDS", "PosePair", "read_pairs", "write_pairs"]

PAIR_FIELDS: tuple[int, ...] = (32, 36, 38)
"""Accepted numbers of fields per line (Glue Factory R|t, Glue Factory 4 x 4, SuperGlue)."""
_ROTATION_TOLERANCE = 1e-3  # |R^T R - I| allowed: the files hold 6 to 8 significant digits


@dataclass(frozen=True)
class PosePair:
    """An image pair: names, intrinsics ``K0``, ``K1`` (3 x 3) and ``T_0to1`` (4 x 4)."""

    name0: str
    name1: str
    K0: np.ndarray
    K1: np.ndarray
    T_0to1: np.ndarray

    @property
    def name(self) -> str:
        """``name0/name1`` with slashes inside a name replaced (Glue Factory's
        ``names_to_pair``)."""
        return f"{self.name0.replace('/', '-')}/{self.name1.replace('/', '-')}"

    @property
    def scene(self) -> str:
        """The folder both image names share, the pair's scene for pair lists that keep each
        scene's images in one folder (``0015`` of ``0015/a.jpg 0015/b.jpg``); ``""`` when the
        names have no folder or different ones (the pair is then a cluster of its own).

        Examples
        --------
        >>> eye = np.eye(3)
        >>> PosePair("s1/a.jpg", "s1/b.jpg", eye, eye, np.eye(4)).scene
        's1'
        >>> PosePair("a.jpg", "s1/b.jpg", eye, eye, np.eye(4)).scene
        ''
        """
        first, _, _ = self.name0.rpartition("/")
        second, _, _ = self.name1.rpartition("/")
        return first if first == second else ""


def _numbers(fields: list[str], where: str, what: str) -> np.ndarray:
    try:
        values = np.array([float(field) for field in fields])
    except ValueError:
        bad = next(f for f in fields if not _is_float(f))
        raise InvalidInputError(f"{where}: {what} has {bad!r}; expected numbers") from None
    if not np.isfinite(values).all():
        raise InvalidInputError(f"{where}: {what} has a non-finite value; expected numbers")
    return values


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_intrinsics(K: np.ndarray, where: str, name: str) -> np.ndarray:
    if not (K[0, 0] > 0 and K[1, 1] > 0) or not np.allclose(K[2], [0, 0, 1]):
        raise InvalidInputError(
            f"{where}: {name} = {K.ravel().tolist()}; expected intrinsics with fx, fy > 0 and "
            "last row 0 0 1"
        )
    return K


def _check_pose(T: np.ndarray, where: str) -> np.ndarray:
    R = T[:3, :3]
    if not np.allclose(T[3], [0, 0, 0, 1]):
        raise InvalidInputError(f"{where}: T_0to1's last row is {T[3].tolist()}; expected 0 0 0 1")
    if np.abs(R.T @ R - np.eye(3)).max() > _ROTATION_TOLERANCE or np.linalg.det(R) <= 0:
        raise InvalidInputError(f"{where}: T_0to1's 3 x 3 block is not a rotation")
    if not np.linalg.norm(T[:3, 3]) > 0:
        raise InvalidInputError(
            f"{where}: T_0to1's translation is zero; the direction the pose error measures is "
            "undefined"
        )
    return T


def _parse(fields: list[str], where: str) -> PosePair:
    if len(fields) not in PAIR_FIELDS:
        raise InvalidInputError(
            f"{where}: {len(fields)} fields; expected 36 (name0 name1 K0 K1 T_0to1), 32 "
            "(name0 name1 K0 K1 R t) or 38 (name0 name1 rot0 rot1 K0 K1 T_0to1)"
        )
    names, rest = fields[:2], fields[2:]
    if len(fields) == 38:
        rotations = _numbers(rest[:2], where, "rot0 rot1")
        if rotations.any():
            raise InvalidInputError(
                f"{where}: EXIF rotations {rotations.astype(int).tolist()}; only 0 0 is read"
            )
        rest = rest[2:]
    K0 = _check_intrinsics(_numbers(rest[:9], where, "K0").reshape(3, 3), where, "K0")
    K1 = _check_intrinsics(_numbers(rest[9:18], where, "K1").reshape(3, 3), where, "K1")
    pose = _numbers(rest[18:], where, "the pose")
    if pose.size == 12:
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = pose[:9].reshape(3, 3), pose[9:]
    else:
        T = pose.reshape(4, 4)
    return PosePair(names[0], names[1], K0, K1, _check_pose(T, where))


def read_pairs(path: str | Path) -> list[PosePair]:
    """Read a pair list (module docstring for the formats).

    Raises
    ------
    InvalidInputError
        A line with a wrong number of fields, a field that is not a number, intrinsics
        without positive focal lengths, a pose that is not rigid, or a file without pairs;
        the message names the file and line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> line = "a.jpg b.jpg " + "1 0 0 0 1 0 0 0 1 " * 2 + "1 0 0 1 0 1 0 0 0 0 1 0 0 0 0 1"
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder, "pairs.txt")
    ...     _ = path.write_text(line + "\\n")
    ...     pair = read_pairs(path)[0]
    >>> pair.name, pair.T_0to1[:3, 3].tolist()
    ('a.jpg/b.jpg', [1.0, 0.0, 0.0])
    """
    source = Path(path)
    pairs = []
    try:
        with source.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                fields = line.split()
                if fields and not fields[0].startswith("#"):
                    pairs.append(_parse(fields, f"{source}:{number}"))
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            f"{source}: not UTF-8 text (byte {error.start}); expected a pair list"
        ) from None
    if not pairs:
        raise InvalidInputError(f"{source}: no pairs; expected one pair a line")
    return pairs


def _format(values: Any) -> str:
    return " ".join(repr(float(v)) for v in np.asarray(values, dtype=np.float64).ravel())


def write_pairs(path: str | Path, pairs: Iterable[PosePair]) -> Path:
    """Write pairs in Glue Factory's 36-field format (full precision); returns the path."""
    lines = []
    for pair in pairs:
        if any(" " in name or not name for name in (pair.name0, pair.name1)):
            raise InvalidInputError(
                f"image names {pair.name0!r}, {pair.name1!r}; expected names without spaces"
            )
        numbers = " ".join(_format(m) for m in (pair.K0, pair.K1, pair.T_0to1))
        lines.append(f"{pair.name0} {pair.name1} {numbers}\n")
    return atomic_write(path, "".join(lines))
