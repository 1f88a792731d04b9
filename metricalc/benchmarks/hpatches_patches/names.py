"""Names in the HPatches patch retrieval files: signatures and patch-images (docs/patches.md).

A patch is named by its *signature* ``seq.img.idx`` (``i_chestnuts.ref.631``): the image sequence,
the image of the sequence (``ref``, ``e1``..``e5``, ``h1``..``h5``, ``t1``..``t5``) and the patch
index, a non-negative integer. ``seq.img`` names a *patch-image*, the set of patches cut from one
image. This module parses and checks names; :mod:`metricalc.benchmarks.hpatches_patches.files` reads
and writes the
files holding them and :mod:`metricalc.benchmarks.hpatches_patches.checks` validates the files
against each other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from metricalc.errors import InvalidInputError

__all__ = [
    "IMAGES",
    "N_RESULTS",
    "Signature",
    "parse_patch_image",
    "parse_signature",
    "patch_image",
]

IMAGES: tuple[str, ...] = (
    "ref",
    *(f"e{k}" for k in range(1, 6)),
    *(f"h{k}" for k in range(1, 6)),
    *(f"t{k}" for k in range(1, 6)),
)
"""The image names of a sequence: the reference and the easy, hard and tough jitters 1..5."""

N_RESULTS = 51
"""Signatures per line of a ``.results`` file: the query, then the 50 best other patches."""

_SEQUENCE = re.compile(r"[^.,\s/\\]+")  # no dot, comma, whitespace or path separator
_INDEX = re.compile(r"[0-9]+")
_MAX_INDEX = 2**63 - 1  # patch indices are stored as 64-bit integers
_IMAGE_SET = frozenset(IMAGES)
# the fast path takes up to 18 digits (always below 2**63); longer indices go the slow way
_SIGNATURE_RE = r"[^.,\s/\\]+\.(?:ref|[eht][1-5])\.[0-9]{1,18}"
_SIGNATURE_LINE = re.compile(rf"{_SIGNATURE_RE}(?:,{_SIGNATURE_RE})*")  # fast path, one per line
_EXPECTED_SIGNATURE = (
    "a signature 'seq.img.idx' (img one of ref, e1..e5, h1..h5, t1..t5; idx an integer "
    "0 .. 2**63 - 1)"
)
_EXPECTED_PATCH_IMAGE = "a patch-image 'seq.img' (img one of ref, e1..e5, h1..h5, t1..t5)"


class Signature(NamedTuple):
    """The parts of a patch signature ``seq.img.idx``."""

    sequence: str
    image: str
    index: int  # type: ignore[assignment]  # the documented field name shadows tuple.index

    @property
    def patch_image(self) -> str:
        """``seq.img``, the patch-image the patch comes from."""
        return f"{self.sequence}.{self.image}"

    def __str__(self) -> str:
        return f"{self.sequence}.{self.image}.{self.index}"


def _signature_problem(text: str) -> str | None:
    parts = text.split(".")
    if len(parts) != 3:
        return f"{len(parts)} dot-separated parts instead of 3"
    sequence, image, index = parts
    if not _SEQUENCE.fullmatch(sequence):
        return "an empty or invalid sequence name"
    if image not in _IMAGE_SET:
        return f"unknown image {image!r}"
    if not _INDEX.fullmatch(index):
        return f"patch index {index!r} is not a non-negative integer"
    if int(index) > _MAX_INDEX:
        return f"patch index {index} does not fit in 64 bits"
    return None


def _patch_image_problem(text: str) -> str | None:
    parts = text.split(".")
    if len(parts) != 2:
        return f"{len(parts)} dot-separated parts instead of 2"
    if not _SEQUENCE.fullmatch(parts[0]):
        return "an empty or invalid sequence name"
    if parts[1] not in _IMAGE_SET:
        return f"unknown image {parts[1]!r}"
    return None


def parse_signature(text: str) -> Signature:
    """Split a patch signature ``seq.img.idx`` into its parts, checking each.

    Parameters
    ----------
    text : str
        ``seq.img.idx``: a sequence name without dots, commas, whitespace or path separators, an
        image of :data:`IMAGES` and a decimal integer 0 .. 2**63 - 1 (a 64-bit patch index).

    Returns
    -------
    Signature
        ``(sequence, image, index)``.

    Raises
    ------
    InvalidInputError
        If ``text`` is not a well-formed signature.

    Examples
    --------
    >>> parse_signature("i_chestnuts.ref.631")
    Signature(sequence='i_chestnuts', image='ref', index=631)
    >>> parse_signature("v_bricks.e1.85").patch_image
    'v_bricks.e1'
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"signature: expected a str, got {type(text).__name__}")
    problem = _signature_problem(text)
    if problem:
        raise InvalidInputError(f"expected {_EXPECTED_SIGNATURE}, got {text!r} ({problem})")
    sequence, image, index = text.split(".")
    return Signature(sequence, image, int(index))


def parse_patch_image(text: str) -> tuple[str, str]:
    """Split a patch-image name ``seq.img`` into ``(sequence, image)``, checking both.

    Examples
    --------
    >>> parse_patch_image("i_chestnuts.e3")
    ('i_chestnuts', 'e3')
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"patch-image: expected a str, got {type(text).__name__}")
    problem = _patch_image_problem(text)
    if problem:
        raise InvalidInputError(f"expected {_EXPECTED_PATCH_IMAGE}, got {text!r} ({problem})")
    sequence, image = text.split(".")
    return sequence, image


def patch_image(signature: str) -> str:
    """The patch-image ``seq.img`` of a signature ``seq.img.idx`` (validated).

    Examples
    --------
    >>> patch_image("i_chestnuts.ref.631")
    'i_chestnuts.ref'
    """
    return parse_signature(signature).patch_image


def _where(path: Path | None, kind: str) -> str:
    return str(path) if path is not None else f"<{kind}>"


def _fail(where: str, line: int, message: str) -> InvalidInputError:
    return InvalidInputError(f"{where}, line {line}: {message}")


def _check_pool(pool: Sequence[str], where: str) -> None:
    if not pool:
        raise _fail(where, 1, f"expected a non-empty pool of patch-images, got {pool!r}")
    for position, name in enumerate(pool, start=1):
        problem = _patch_image_problem(name) if isinstance(name, str) else "not a str"
        if problem:
            raise _fail(
                where,
                1,
                f"pool entry {position}: expected {_EXPECTED_PATCH_IMAGE}, "
                f"got {name!r} ({problem})",
            )


def _check_signatures(signatures: Sequence[str], where: str, line: int) -> None:
    if all(isinstance(name, str) for name in signatures):
        joined = ",".join(signatures)
        if joined.count(",") == len(signatures) - 1 and _SIGNATURE_LINE.fullmatch(joined):
            return
    for position, name in enumerate(signatures, start=1):
        problem = _signature_problem(name) if isinstance(name, str) else "not a str"
        if problem:
            raise _fail(
                where,
                line,
                f"name {position}: expected {_EXPECTED_SIGNATURE}, got {name!r} ({problem})",
            )

