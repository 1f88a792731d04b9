r"""Patch datasets in the layout of the HPatches release: one PNG of stacked patches per image.

Layout (``hpatches-release``, and what
:func:`metricalc.benchmarks.hpatches_patches.generator.make_patch_dataset`
writes)::

    root/<seq>/ref.png                  the reference patches, 65 x 65 pixels each, stacked
    root/<seq>/e1.png .. e5.png         the same patches in images 2..6 with easy affine jitter
    root/<seq>/h1.png .. h5.png         ... hard jitter
    root/<seq>/t1.png .. t5.png         ... tough jitter
    root/splits.json                    optional: {"train": [seq, ...], "test": [seq, ...]}

A PNG of :math:`N` patches is :math:`65` pixels wide and :math:`65 N` high; patch :math:`i`
(0-based, the ``idx`` of the signature ``seq.img.idx``) is rows :math:`65 i .. 65 i + 64`. Patch
:math:`i` of every image of a sequence shows the same physical surface, so every image of a
sequence holds the same number of patches. ``ref.png`` is required; each jitter level (``e``,
``h``, ``t``) is either complete (all five images) or absent.

The train / test split of the sequences comes from ``splits.json`` when the dataset has one, and
otherwise from the split of the ECCV 2016 workshop (:data:`ECCV2016_SPLITS`: the 76 training and
40 test sequences of the benchmark files of the release, HPatches' split ``a``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import cv2
import numpy as np

from metricalc.benchmarks.hpatches_patches.files import write_atomic
from metricalc.benchmarks.hpatches_patches.names import IMAGES, _patch_image_problem
from metricalc.errors import InvalidInputError
from metricalc.fileio import read_json
from metricalc.hpatches import HPATCHES_SEQUENCES

__all__ = [
    "ECCV2016_SPLITS",
    "LEVELS",
    "PATCH_SIZE",
    "SPLITS",
    "SPLITS_NAME",
    "PatchDataset",
    "check_patches",
    "open_patch_dataset",
    "read_patch_dataset",
    "write_patches",
]

PATCH_SIZE = 65
"""Side of a patch in pixels."""

LEVELS: Mapping[str, str] = MappingProxyType({"easy": "e", "hard": "h", "tough": "t"})
"""Jitter levels and the letter of their images (``e1``..``e5`` etc.)."""

SPLITS = ("train", "test")
"""The splits a dataset's sequences are divided into."""

SPLITS_NAME = "splits.json"
"""File name of a dataset's own split, in its root."""

_ECCV2016_TEST = (
    "i_ajuntament", "i_autannes", "i_bologna", "i_books", "i_bridger", "i_brooklyn", "i_fog",
    "i_fruits", "i_kurhaus", "i_lionnight", "i_nijmegen", "i_porta", "i_resort", "i_salon",
    "i_santuario", "i_table", "i_tools", "i_troulos", "i_whitebuilding", "i_zion", "v_abstract",
    "v_azzola", "v_bees", "v_birdwoman", "v_busstop", "v_coffeehouse", "v_courses", "v_eastsouth",
    "v_feast", "v_fest", "v_man", "v_pomegranate", "v_soldiers", "v_strand", "v_tabletop",
    "v_talent", "v_underground", "v_woman", "v_yard", "v_yuri",
)

ECCV2016_SPLITS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "train": tuple(s for s in HPATCHES_SEQUENCES if s not in _ECCV2016_TEST),
        "test": _ECCV2016_TEST,
    }
)
"""The sequences of the ECCV 2016 train (76) and test (40) benchmark files, sorted by name: the
train files use every sequence of the release that the test files do not."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Fast zlib level with run-length matching: about twice as fast as level 3 on stacked patches,
# and smaller files.
_PNG_PARAMS = [
    cv2.IMWRITE_PNG_COMPRESSION, 1, cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE,
]  # fmt: skip


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which the PNG standard puts first.

    Reading 24 bytes instead of decoding the image keeps opening a dataset cheap (the HPatches
    release is 4 GB of PNGs).
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(24)
    except OSError as error:
        raise InvalidInputError(f"{path}: cannot read the file ({error.strerror})") from None
    if len(head) < 24 or head[:8] != _PNG_SIGNATURE or head[12:16] != b"IHDR":
        raise InvalidInputError(f"{path}: not a PNG file (expected a PNG of stacked patches)")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def _count_patches(path: Path) -> int:
    width, height = _png_size(path)
    if width != PATCH_SIZE or height == 0 or height % PATCH_SIZE:
        raise InvalidInputError(
            f"{path}: {width} x {height} pixels (width x height); expected {PATCH_SIZE} pixels "
            f"wide and a height that is a positive multiple of {PATCH_SIZE} (patches of "
            f"{PATCH_SIZE} x {PATCH_SIZE} stacked vertically)"
        )
    return height // PATCH_SIZE


@dataclass(frozen=True)
class PatchDataset:
    """A patch dataset: per sequence its images and their (equal) number of patches.

    Attributes
    ----------
    root : Path
    counts : mapping of str to int
        Patches per image of each sequence, sequences sorted by name.
    images : mapping of str to tuple of str
        The images of each sequence, in :data:`~metricalc.benchmarks.hpatches_patches.IMAGES` order
        (``ref`` first).
    splits : mapping of str to str
        ``"train"`` or ``"test"`` for every sequence whose split is known (from ``splits.json``
        or :data:`ECCV2016_SPLITS`).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     stack = np.zeros((3 * 65, 65), np.uint8)
    ...     for image in ("ref", "e1", "e2", "e3", "e4", "e5"):
    ...         _ = write_patches(Path(tmp) / "v_x" / f"{image}.png", stack.reshape(3, 65, 65))
    ...     dataset = read_patch_dataset(tmp)
    ...     dataset.counts["v_x"], dataset.images["v_x"][:3], dataset.patches("v_x", "e2").shape
    (3, ('ref', 'e1', 'e2'), (3, 65, 65))
    """

    root: Path
    counts: Mapping[str, int]
    images: Mapping[str, tuple[str, ...]]
    splits: Mapping[str, str]

    @property
    def sequences(self) -> tuple[str, ...]:
        """The sequence names, sorted."""
        return tuple(self.counts)

    def path(self, sequence: str, image: str) -> Path:
        """``root/<sequence>/<image>.png`` of an image the dataset has."""
        if sequence not in self.counts:
            raise InvalidInputError(
                f"{self.root}: no sequence {sequence!r} (it has {len(self.counts)}: "
                f"{', '.join(self.sequences[:8])}{', ...' if len(self.counts) > 8 else ''})"
            )
        if image not in self.images[sequence]:
            raise InvalidInputError(
                f"{self.root / sequence}: no image {image}.png (it has "
                f"{', '.join(self.images[sequence])})"
            )
        return self.root / sequence / f"{image}.png"

    def patches(self, sequence: str, image: str) -> np.ndarray:
        """The patches of one patch-image as a uint8 array of shape (N, 65, 65).

        Colour PNGs are converted to gray (OpenCV's weights).
        """
        path = self.path(sequence, image)
        stack = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        n = self.counts[sequence]
        if stack is None or stack.shape != (n * PATCH_SIZE, PATCH_SIZE):
            got = "undecodable data" if stack is None else f"shape {stack.shape}"
            raise InvalidInputError(
                f"{path}: expected {n} patches of {PATCH_SIZE} x {PATCH_SIZE} pixels, got {got}"
            )
        return stack.reshape(n, PATCH_SIZE, PATCH_SIZE)

    def split_sequences(self, split: str) -> tuple[str, ...]:
        """The sequences of ``split`` (``"train"`` or ``"test"``) in the dataset, sorted."""
        if split not in SPLITS:
            raise InvalidInputError(f"split: expected one of {SPLITS}, got {split!r}")
        return tuple(s for s in self.sequences if self.splits.get(s) == split)


def _read_splits(root: Path) -> dict[str, str]:
    path = root / SPLITS_NAME
    if not path.exists():
        return {s: split for split, names in ECCV2016_SPLITS.items() for s in names}
    content = read_json(path, "split file")
    if (
        not isinstance(content, dict)
        or set(content) - set(SPLITS)
        or not all(
            isinstance(v, list) and all(isinstance(s, str) for s in v) for v in content.values()
        )
    ):
        raise InvalidInputError(
            f'{path}: expected {{"train": [sequence, ...], "test": [sequence, ...]}}, got '
            f"{str(content)[:80]}"
        )
    splits: dict[str, str] = {}
    for split, names in content.items():
        for name in names:
            if name in splits and splits[name] != split:
                raise InvalidInputError(
                    f"{path}: sequence {name!r} is in both 'train' and 'test'; expected one split"
                )
            splits[name] = split
    return splits


def _read_sequence(folder: Path) -> tuple[int, tuple[str, ...]]:
    present = _sequence_images(folder)
    images = tuple(name for name in IMAGES if name in present)
    reference = _count_patches(present["ref"])
    for name in images[1:]:
        count = _count_patches(present[name])
        if count != reference:
            raise InvalidInputError(
                f"{present[name]}: {count} patches, but ref.png has {reference}; expected the "
                "same number in every image of a sequence (patch i of each is the same surface)"
            )
    return reference, images


def _sequence_images(folder: Path) -> dict[str, Path]:
    """The PNG files of a sequence folder by image name, checked: known names, ``ref`` present,
    each jitter level complete or absent."""
    pngs = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".png" and p.is_file())
    unknown = [p.name for p in pngs if p.stem not in IMAGES]
    if unknown:
        raise InvalidInputError(
            f"{folder}: unexpected image {unknown[0]!r}; expected ref.png, e1..e5.png, "
            "h1..h5.png and t1..t5.png"
        )
    present = {p.stem: p for p in pngs}
    if "ref" not in present:
        raise InvalidInputError(f"{folder}: missing image ref.png (the reference patches)")
    for letter in "eht":
        names = [f"{letter}{k}" for k in range(1, 6)]
        have = [n for n in names if n in present]
        if have and len(have) < 5:
            missing = next(n for n in names if n not in present)
            raise InvalidInputError(
                f"{folder}: missing image {missing}.png; expected all of {names[0]}..{names[-1]} "
                f"or none (found {', '.join(have)})"
            )
    return present


def read_patch_dataset(root: str | os.PathLike[str]) -> PatchDataset:
    """Open a patch dataset in the HPatches release layout (module docstring), checking it.

    Every sub-folder of ``root`` holding PNG files is a sequence (hidden folders, starting with
    ``.``, are skipped). Only the PNG headers are read; patches are decoded by
    :meth:`PatchDataset.patches`.

    Raises
    ------
    InvalidInputError
        Naming the file and what was expected: no sequence folder, an image name other than
        ``ref``, ``e1``..``t5``, a missing ``ref.png`` or an incomplete jitter level, a PNG whose
        width is not 65 or whose height is not a positive multiple of 65, unequal patch counts
        across a sequence's images, a sequence name that cannot be part of a signature, a
        malformed ``splits.json``.
    """
    root = Path(root)
    if not root.is_dir():
        raise InvalidInputError(f"patch dataset {root} is not a folder")
    folders = sorted(
        entry
        for entry in root.iterdir()
        if entry.is_dir()
        and not entry.name.startswith(".")
        and any(p.suffix.lower() == ".png" for p in entry.iterdir())
    )
    if not folders:
        raise InvalidInputError(
            f"no sequence folders in {root}: expected <seq>/ref.png (patches of 65 x 65 pixels "
            "stacked vertically), e1..e5.png, h1..h5.png, t1..t5.png"
        )
    counts, images = {}, {}
    for folder in folders:
        problem = _patch_image_problem(f"{folder.name}.ref")
        if problem:
            raise InvalidInputError(
                f"{folder}: sequence name {folder.name!r} cannot be used in signatures "
                f"'seq.img.idx' ({problem}); expected no dot, comma or whitespace"
            )
        counts[folder.name], images[folder.name] = _read_sequence(folder)
    splits = _read_splits(root)
    return PatchDataset(
        root,
        MappingProxyType(counts),
        MappingProxyType(images),
        MappingProxyType({s: splits[s] for s in counts if s in splits}),
    )


def open_patch_dataset(dataset: PatchDataset | str | os.PathLike[str]) -> PatchDataset:
    """The dataset step of the patch benchmark: ``dataset`` itself, or the patch dataset in the
    folder ``dataset`` (:func:`read_patch_dataset`)."""
    return dataset if isinstance(dataset, PatchDataset) else read_patch_dataset(dataset)


def check_patches(patches: np.ndarray, *, minimum: int = 0) -> np.ndarray:
    """``patches`` as an array (N, 65, 65) of uint8 pixels with N >= ``minimum``.

    Raises
    ------
    InvalidInputError
        Another shape or fewer patches (naming the shape), or other pixels than uint8.
    """
    patches = np.asarray(patches)
    if (
        patches.ndim != 3
        or patches.shape[1:] != (PATCH_SIZE, PATCH_SIZE)
        or len(patches) < minimum
    ):
        at_least = f" with N >= {minimum}" if minimum else ""
        raise InvalidInputError(
            f"patches: expected an array (N, {PATCH_SIZE}, {PATCH_SIZE}){at_least}, got shape "
            f"{patches.shape}"
        )
    if patches.dtype != np.uint8:
        raise InvalidInputError(f"patches: expected uint8 pixels, got {patches.dtype}")
    return patches


def write_patches(path: str | os.PathLike[str], patches: np.ndarray) -> Path:
    """Write patches (N, 65, 65) uint8 as one PNG of stacked patches, atomically.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_patches(Path(tmp) / "s" / "ref.png", np.zeros((2, 65, 65), np.uint8))
    ...     _png_size(path)
    (65, 130)
    """
    patches = check_patches(patches, minimum=1)
    ok, buffer = cv2.imencode(".png", patches.reshape(-1, PATCH_SIZE), _PNG_PARAMS)
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 gray images
        raise InvalidInputError(f"{path}: OpenCV could not encode {len(patches)} patches")
    return write_atomic(path, buffer.tobytes())
