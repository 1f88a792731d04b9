r"""HPatches-style image sequences: six images of one scene and the homographies between them.

Layout of a sequences folder (the HPatches "full sequences" release, and what
:func:`metricalc.datasets.sequences.make_synthetic_dataset` writes)::

    root/<scene>/1.ppm .. 6.ppm     (or .png, .jpg, .jpeg, .pgm, .bmp, .tif, .tiff)
    root/<scene>/H_1_2 .. H_1_6     3 x 3 homography, whitespace-separated text, one row per line

Image 1 is the reference; ``H_1_k`` maps pixel coordinates of image 1 to image k:

.. math::

    (x_k, y_k, w)^\top \sim H_{1k} \, (x_1, y_1, 1)^\top, \qquad
    (x_k, y_k) \leftarrow (x_k / w, \; y_k / w)

Scene names starting with ``i_`` are illumination sequences (identity geometry), ``v_``
viewpoint sequences. Everything is validated when the folder is loaded; a missing or malformed
file raises :class:`~metricalc.errors.InvalidInputError` naming the file (and line).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.hpatches import SYNTHETIC_PREFIX, select_sequences
from metricalc.validation import is_integer

__all__ = [
    "IMAGE_SUFFIXES",
    "SYNTHETIC_MANIFEST",
    "Sequence",
    "dataset_fingerprint",
    "load_sequences",
    "read_homography",
    "read_image",
]

IMAGE_SUFFIXES = (".ppm", ".pgm", ".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
"""File suffixes (lower case) recognised for the images ``1`` .. ``6`` of a scene."""

SYNTHETIC_MANIFEST = "synthetic_manifest.json"
"""The manifest metricalc's synthetic benchmark writes in its root
(:func:`metricalc.datasets.sequences.make_synthetic_dataset`): the mark of generated data."""

_IMAGE_CACHE_SIZE = 32  # decoded images kept in memory (about 5 scenes of HPatches)
_READ_FLAGS = cv2.IMREAD_ANYCOLOR | cv2.IMREAD_IGNORE_ORIENTATION


@dataclass(frozen=True)
class Sequence:
    """One scene: six images and the five homographies from image 1 to images 2..6.

    Parameters
    ----------
    name : str
        Scene (folder) name, e.g. ``"i_astronaut"`` or ``"v_coffee"``.
    root : Path
        The scene folder.
    image_paths : tuple of Path
        Six paths; ``image_paths[0]`` is image ``1``, the reference.
    homographies : tuple of ndarray
        ``H_1_2 .. H_1_6``: five read-only ``(3, 3)`` float64 arrays mapping image 1 to image k.

    Notes
    -----
    Images are decoded on first use with OpenCV (BGR converted to RGB; EXIF orientation is
    ignored, so pixel coordinates match the homographies) and kept in a small shared
    least-recently-used cache; the arrays returned are read-only. Two sequences are equal when
    their names, folders, image paths and homographies are equal.

    Examples
    --------
    >>> from tempfile import TemporaryDirectory
    >>> from metricalc.datasets import make_synthetic_dataset
    >>> with TemporaryDirectory() as tmp:   # the built-in benchmark's scene, 64 x 64 pixels
    ...     [seq] = make_synthetic_dataset(tmp, scenes=["v_camera"], size=64)
    ...     print(seq.name, seq.split, seq.shape(1), seq.image(3).dtype, seq.homography(1)[2, 2])
    v_camera viewpoint (64, 64) uint8 1.0
    """

    name: str
    root: Path
    image_paths: tuple[Path, ...]
    homographies: tuple[np.ndarray, ...]
    _shapes: dict[int, tuple[int, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if len(self.image_paths) != 6:
            raise InvalidInputError(
                f"scene {self.name!r} needs 6 image paths; got {len(self.image_paths)}"
            )
        if len(self.homographies) != 5:
            raise InvalidInputError(
                f"scene {self.name!r} needs 5 homographies H_1_2 .. H_1_6; "
                f"got {len(self.homographies)}"
            )
        homographies = []
        for k, H in enumerate(self.homographies, start=2):
            H = np.array(H, dtype=np.float64)  # a private copy, made read-only below
            _check_homography(H, f"scene {self.name!r} H_1_{k}")
            H.setflags(write=False)
            homographies.append(H)
        object.__setattr__(self, "root", Path(self.root))
        object.__setattr__(self, "image_paths", tuple(Path(p) for p in self.image_paths))
        object.__setattr__(self, "homographies", tuple(homographies))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return (
            self.name == other.name
            and self.root == other.root
            and self.image_paths == other.image_paths
            and all(
                np.array_equal(a, b)
                for a, b in zip(self.homographies, other.homographies, strict=True)
            )
        )

    def __hash__(self) -> int:
        return hash((self.name, self.root, self.image_paths))

    @property
    def split(self) -> str:
        """``"illumination"`` for ``i_*`` scenes, ``"viewpoint"`` for ``v_*``, else ``"other"``."""
        if self.name.startswith("i_"):
            return "illumination"
        if self.name.startswith("v_"):
            return "viewpoint"
        return "other"

    def _check_k(self, k: int, low: int = 1) -> int:
        if not is_integer(k) or not low <= k <= 6:
            raise InvalidInputError(
                f"scene {self.name!r}: image index must be an integer in {low}..6; got {k!r}"
            )
        return int(k)

    def image(self, k: int) -> np.ndarray:
        """Image ``k`` (1..6) as a read-only uint8 array, ``(H, W)`` gray or ``(H, W, 3)`` RGB."""
        k = self._check_k(k)
        image = read_image(self.image_paths[k - 1])
        self._shapes.setdefault(k, (int(image.shape[0]), int(image.shape[1])))
        return image

    def gray(self, k: int) -> np.ndarray:
        """Image ``k`` (1..6) as a read-only uint8 ``(H, W)`` array (OpenCV's RGB -> gray weights).

        .. math:: Y = 0.299 R + 0.587 G + 0.114 B
        """
        k = self._check_k(k)
        path = self.image_paths[k - 1]
        return _read_gray(str(path), *_stamp(path))

    def homography(self, k: int) -> np.ndarray:
        """``H_1_k`` for k in 2..6 (identity for k = 1): a read-only ``(3, 3)`` float64 array."""
        k = self._check_k(k)
        if k == 1:
            return _IDENTITY
        return self.homographies[k - 2]

    def shape(self, k: int) -> tuple[int, int]:
        """``(height, width)`` of image ``k`` (1..6); remembered after the first read."""
        k = self._check_k(k)
        if k not in self._shapes:
            self.image(k)
        return self._shapes[k]


_IDENTITY = np.eye(3)
_IDENTITY.setflags(write=False)


def _stamp(path: Path) -> tuple[int, int]:
    """Modification time and size of ``path``, so the cache notices a rewritten file."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise InvalidInputError(f"cannot read image {path}: {exc.strerror or exc}") from None
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=_IMAGE_CACHE_SIZE)
def _read_cached(path: str, mtime_ns: int, size: int) -> np.ndarray:
    image = cv2.imread(path, _READ_FLAGS)
    if image is None:
        raise InvalidInputError(
            f"cannot decode image {path}: not a readable image file (corrupt or truncated?)"
        )
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    image = np.ascontiguousarray(image, dtype=np.uint8)
    image.setflags(write=False)
    return image


@functools.lru_cache(maxsize=_IMAGE_CACHE_SIZE)
def _read_gray(path: str, mtime_ns: int, size: int) -> np.ndarray:
    image = _read_cached(path, mtime_ns, size)
    if image.ndim == 2:
        return image
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    gray.setflags(write=False)
    return gray


def read_image(path: str | Path) -> np.ndarray:
    """Read an image file as a read-only uint8 array: ``(H, W)`` gray or ``(H, W, 3)`` RGB.

    OpenCV decodes the file (``IMREAD_ANYCOLOR``: gray stays gray, alpha is dropped, 16-bit is
    reduced to 8-bit; EXIF orientation is ignored). Decoded images are cached by path,
    modification time and size.

    Raises
    ------
    InvalidInputError
        The file is missing or cannot be decoded (OpenCV returned no image).

    Examples
    --------
    >>> import tempfile, pathlib, cv2, numpy as np
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "1.png"
    ...     ok = cv2.imwrite(str(path), np.zeros((4, 5, 3), np.uint8) + [255, 0, 0])  # BGR: blue
    ...     read_image(path)[0, 0].tolist()                                          # RGB
    [0, 0, 255]
    """
    path = Path(path)
    return _read_cached(str(path), *_stamp(path))


def _check_homography(H: np.ndarray, where: str) -> None:
    if H.shape != (3, 3):
        raise InvalidInputError(f"{where}: a homography must be 3x3; got shape {H.shape}")
    if not np.isfinite(H).all():
        raise InvalidInputError(f"{where}: homography has non-finite entries: {H.tolist()}")
    # Rank below 3 under NumPy's default tolerance (largest singular value * 3 * eps): the
    # homography cannot be inverted, so it is no mapping between two images.
    if np.linalg.matrix_rank(H) < 3:
        raise InvalidInputError(f"{where}: homography is singular (rank < 3): {H.tolist()}")


def read_homography(path: str | Path) -> np.ndarray:
    """Read a 3x3 homography: three lines of three whitespace-separated numbers.

    Blank lines are ignored. The matrix must be finite and invertible.

    Raises
    ------
    InvalidInputError
        Missing file, a line without exactly three numbers (named with its line number), the
        wrong number of rows, non-finite entries or a singular matrix.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "H_1_2"
    ...     _ = path.write_text("1 0 10\\n0 1 -5\\n0 0 1\\n")
    ...     read_homography(path).tolist()
    [[1.0, 0.0, 10.0], [0.0, 1.0, -5.0], [0.0, 0.0, 1.0]]
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"missing homography file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read homography file {path}: {exc}") from None
    rows: list[list[float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(rows) == 3:
            raise InvalidInputError(
                f"{path}, line {number}: a homography has 3 rows of 3 numbers; "
                f"found a fourth row {line.strip()!r}"
            )
        if len(parts) != 3:
            raise InvalidInputError(
                f"{path}, line {number}: expected 3 numbers, got {len(parts)}: {line.strip()!r}"
            )
        try:
            rows.append([float(part) for part in parts])
        except ValueError:
            raise InvalidInputError(
                f"{path}, line {number}: expected 3 numbers, got {line.strip()!r}"
            ) from None
    if len(rows) != 3:
        raise InvalidInputError(
            f"{path}: a homography has 3 rows of 3 numbers; found {len(rows)} row(s)"
        )
    H = np.array(rows, dtype=np.float64)
    _check_homography(H, str(path))
    return H


def _find_image(folder: Path, names: Iterable[str], k: int) -> Path:
    candidates = sorted(
        name
        for name in names
        if Path(name).stem == str(k) and Path(name).suffix.lower() in IMAGE_SUFFIXES
    )
    if not candidates:
        raise InvalidInputError(
            f"missing image {folder / str(k)}.* in scene folder {folder}: expected one of "
            + ", ".join(f"{k}{suffix}" for suffix in IMAGE_SUFFIXES[:4])
            + ", ..."
        )
    if len(candidates) > 1:
        raise InvalidInputError(
            f"ambiguous image {k} in scene folder {folder}: {candidates} (keep one)"
        )
    path = folder / candidates[0]
    if not path.is_file() or not cv2.haveImageReader(str(path)):
        raise InvalidInputError(f"unreadable image {path}: OpenCV recognises no image format in it")
    return path


def _load_scene(folder: Path) -> Sequence:
    try:
        names = [entry.name for entry in folder.iterdir()]
    except OSError as exc:
        raise InvalidInputError(f"cannot list scene folder {folder}: {exc}") from None
    image_paths = tuple(_find_image(folder, names, k) for k in range(1, 7))
    homographies = tuple(read_homography(folder / f"H_1_{k}") for k in range(2, 7))
    return Sequence(folder.name, folder, image_paths, homographies)


def load_sequences(
    root: str | os.PathLike[str],
    *,
    scenes: Iterable[str] | str | None = None,
    split: str | None = None,
) -> list[Sequence]:
    """Load every scene folder below ``root`` (HPatches layout), sorted by name.

    Each sub-folder of ``root`` (hidden ones, starting with ``.``, are skipped; plain files are
    ignored) is one scene with images ``1`` .. ``6`` and homographies ``H_1_2`` .. ``H_1_6``
    (see the module docstring). Homographies are read and checked now; images are checked to be
    in a format OpenCV decodes (from their header) and decoded on first use.

    Parameters
    ----------
    root : path
        The sequences folder, e.g. ``hpatches-sequences-release``.
    scenes : sequence of str, optional
        Load only these scenes (folder names); by default all.
    split : str, optional
        Load the sequences of a named split of :data:`metricalc.hpatches.SEQUENCE_SPLITS`:
        ``"d2net"`` for D2-Net's 108 HPatches sequences (the 8 of
        :data:`~metricalc.hpatches.D2NET_EXCLUDED` are skipped if present), ``"full"`` for all
        116. Every sequence of the split must be in ``root``. Not together with ``scenes``.

    Returns
    -------
    list of Sequence
        Sorted by scene name.

    Raises
    ------
    InvalidInputError
        Missing ``root`` or no scene in it; an unknown name in ``scenes``; a sequence of
        ``split`` missing from ``root`` (all missing ones are named); a scene without one of
        the images 1..6 or with an unreadable one; a missing ``H_1_k``; a homography file that is
        not three lines of three numbers (the line is named), non-finite or singular.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.datasets.sequences import make_synthetic_dataset
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = make_synthetic_dataset(tmp, scenes=["camera"], size=64)
    ...     [s.name for s in load_sequences(tmp)], len(load_sequences(tmp, scenes=["i_camera"]))
    (['i_camera', 'v_camera'], 1)
    """
    root = Path(root)
    if not root.exists():
        raise InvalidInputError(f"sequences folder {root} does not exist")
    if not root.is_dir():
        raise InvalidInputError(f"sequences folder {root} is not a directory")
    available = sorted(
        entry.name for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith(".")
    )
    if split is not None:
        if scenes is not None:
            raise InvalidInputError("load_sequences: give scenes= or split=, not both")
        selected = list(select_sequences(split, available, where=str(root)))
    elif scenes is None:
        selected = available
    else:
        if isinstance(scenes, str):
            scenes = [scenes]
        wanted = list(dict.fromkeys(str(name) for name in scenes))
        unknown = [name for name in wanted if name not in available]
        if unknown:
            shown = ", ".join(available[:10]) + (", ..." if len(available) > 10 else "")
            raise InvalidInputError(
                f"unknown scene(s) {unknown} in {root}; available ({len(available)}): "
                f"{shown or 'none'}"
            )
        selected = sorted(wanted)
    if not selected:
        raise InvalidInputError(
            f"no scene folders in {root}: expected sub-folders holding 1.ppm .. 6.ppm "
            "(or .png/.jpg) and H_1_2 .. H_1_6"
        )
    return [_load_scene(root / name) for name in selected]


_CHUNK = 1 << 20


def _hash_file(digest: Any, path: Path) -> None:
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InvalidInputError(f"cannot read image file {path}: {exc}") from None


def _folder(sequences: list[Any]) -> Path | None:
    """The one sequences folder whose scene folders (``root``) hold ``sequences``, if any."""
    roots = [getattr(s, "root", None) for s in sequences]
    paths = [root for root in roots if isinstance(root, Path)]
    if not paths or len(paths) < len(roots):
        return None
    folders = {path.parent for path in paths}
    return folders.pop() if len(folders) == 1 else None


def _whole_folder(sequences: list[Any]) -> list[Any]:
    """Every scene of the one sequences folder that holds ``sequences`` (else ``sequences``)."""
    folder = _folder(sequences)
    if folder is None:
        return sequences
    try:
        return load_sequences(folder)
    except InvalidInputError:  # a folder that does not load as a whole: the scenes given
        return sequences


def dataset_fingerprint(sequences: Iterable[Any]) -> str:
    """The content identity of the data of an evaluation: ``"sha256:"`` and 16 hex digits, after
    ``"synthetic-sequences "`` for a folder of metricalc's synthetic benchmark.

    The data is the whole sequences folder the scenes were loaded from (every scene folder of it,
    as :func:`load_sequences` lists them), so evaluations of different scenes of one folder
    combine; sequences not loaded from one folder (or from one that does not load as a whole)
    are taken as given. The fingerprint is the first 16 hex digits of the SHA-256 over, scene by
    scene in name order: the scene name; for images 1..6 the file name (relative to the scene
    folder) and the file's bytes (objects without ``image_paths``: the dtype, shape and bytes of
    ``image(k)``; stand-ins with neither, the image shapes); for k = 2..6 the float64 values of
    ``H_1_k`` (so the text layout of the homography files does not matter). The same folder
    copied elsewhere has the same fingerprint; any changed pixel, homography, image file name or
    scene gives another. Nothing is cached: the files are hashed on every call (about 1 GB/s).
    A folder holding :data:`SYNTHETIC_MANIFEST` is generated data: its fingerprint starts with
    ``"synthetic-sequences "`` (:func:`metricalc.hpatches.is_synthetic`), so a report refuses
    numbers published on real data beside its cubes.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.datasets.sequences import make_synthetic_dataset
    >>> with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
    ...     one = make_synthetic_dataset(a, scenes=["camera"], size=64)
    ...     two = make_synthetic_dataset(b, scenes=["camera"], size=64)
    ...     same = dataset_fingerprint(one) == dataset_fingerprint(two[:1])  # folder b, i_camera
    ...     print(same, dataset_fingerprint(one)[:27], len(dataset_fingerprint(one)))
    True synthetic-sequences sha256: 43
    """
    given = list(sequences)
    digest = hashlib.sha256()
    for sequence in sorted(_whole_folder(given), key=lambda s: str(s.name)):
        digest.update(f"scene {sequence.name}\n".encode())
        paths = getattr(sequence, "image_paths", None)
        for k in range(1, 7):
            if paths is not None:
                path = Path(paths[k - 1])
                digest.update(f"image {k} {path.name}\n".encode())
                _hash_file(digest, path)
            elif hasattr(sequence, "image"):
                image = np.ascontiguousarray(sequence.image(k))
                digest.update(f"image {k} {image.dtype.str} {image.shape}\n".encode())
                digest.update(image.tobytes())
            else:  # a stand-in that has geometry only
                digest.update(f"image {k} shape {tuple(sequence.shape(k))}\n".encode())
        for k in range(2, 7):
            H = np.ascontiguousarray(sequence.homography(k), dtype=np.float64) + 0.0  # -0 -> 0
            digest.update(f"H_1_{k}\n".encode())
            digest.update(H.tobytes())
    folder = _folder(given)
    generated = folder is not None and (folder / SYNTHETIC_MANIFEST).is_file()
    return f"{SYNTHETIC_PREFIX + 'sequences ' if generated else ''}sha256:{digest.hexdigest()[:16]}"
