r"""Patch-pair verification: descriptor distances of pairs and their FPR at 95 % recall.

The PhotoTour protocol (Brown et al.) ranks the pairs of an ``m50_*`` file by the distance of
their two descriptors and reports the false positive rate at 95 % recall,
:func:`metricalc.core.operating.fpr_at_recall` on the scores :math:`-d` (HardNet's definition by
default). The same measure on any verification pairs (HPatches' included) reads a file of
``distance,label`` rows (:func:`read_scores`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from metricalc.benchmarks.phototour.dataset import PhotoTourPairs, check_patch_ids
from metricalc.core.operating import fpr_at_recall
from metricalc.errors import InvalidInputError
from metricalc.validation import check_choice

__all__ = [
    "DISTANCES",
    "VerificationResult",
    "evaluate_pairs",
    "evaluate_scores",
    "pair_distances",
    "read_clustered_scores",
    "read_descriptors",
    "read_scores",
]

DISTANCES = ("l2", "l1")
"""Descriptor distances: Euclidean (the papers' choice) and city-block."""
_CHUNK_PAIRS = 1 << 14


@dataclass(frozen=True)
class VerificationResult:
    """One FPR at a recall, and what it was computed on.

    Attributes
    ----------
    fpr : float
        The value (a false discovery rate for ``variant="matchnet"``).
    variant, recall, distance
        The protocol: :func:`~metricalc.core.operating.fpr_at_recall`'s variant and recall, the
        descriptor distance (``None`` for given distances).
    n_pairs, n_positive, n_negative : int
        Pairs, matching pairs, non-matching pairs.
    """

    fpr: float
    variant: str
    recall: float
    distance: str | None
    n_pairs: int
    n_positive: int
    n_negative: int

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def read_descriptors(path: str | Path) -> np.ndarray:
    """Descriptors, one row per patch id: a ``.npy`` N x D matrix or a ``.csv`` of N rows of D
    comma-separated numbers (no header).

    Returns
    -------
    ndarray of float64, shape (N, D)

    Raises
    ------
    InvalidInputError
        Naming the file (and row) of an unreadable file, a ragged or non-numeric row, NaN or inf.
    """
    path = Path(path)
    if path.suffix == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as error:
            raise InvalidInputError(f"{path}: expected a .npy N x D matrix ({error})") from None
        if not isinstance(array, np.ndarray):  # an .npz archive under a .npy name
            raise InvalidInputError(f"{path}: is an .npz archive; expected a .npy N x D matrix")
    elif path.suffix == ".csv":
        try:
            array = pd.read_csv(path, header=None, dtype=np.float64, skip_blank_lines=False)
        except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise InvalidInputError(
                f"{path}: expected rows of comma-separated numbers, one per patch ({reason})"
            ) from None
        array = array.to_numpy()
    else:
        raise InvalidInputError(f"{path}: expected a .npy or .csv descriptor file")
    if array.ndim != 2 or array.dtype.kind not in "fiu" or array.shape[1] == 0:
        raise InvalidInputError(
            f"{path}: expected an N x D matrix of numbers (one row per patch id), got "
            f"{array.dtype} of shape {array.shape}"
        )
    values: np.ndarray = array.astype(np.float64)
    finite = np.isfinite(values).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0]) + 1
        raise InvalidInputError(
            f"{path}, row {row}: expected {values.shape[1]} finite numbers (a short row, an "
            "empty field, NaN or inf?)"
        )
    return values


def pair_distances(
    descriptors: np.ndarray, pairs: PhotoTourPairs, *, distance: str = "l2"
) -> np.ndarray:
    r"""The distance of each pair's two descriptors.

    .. math:: d_{L2} = \lVert x_1 - x_2 \rVert_2, \qquad d_{L1} = \lVert x_1 - x_2 \rVert_1

    Parameters
    ----------
    descriptors : ndarray, shape (N, D)
        Row ``i`` describes patch ``i``.
    pairs : PhotoTourPairs
    distance : {"l2", "l1"}

    Returns
    -------
    ndarray of float64, one per pair in file order

    Raises
    ------
    InvalidInputError
        Naming the pair file's line of a patch id beyond the descriptors' rows.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.phototour.dataset import PhotoTourPairs
    >>> ids = np.array([0, 1])
    >>> pairs = PhotoTourPairs(ids, ids, ids + 1, ids)
    >>> pair_distances(np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 5.0]]), pairs).tolist()
    [5.0, 1.0]
    """
    distance = check_choice("distance", distance, DISTANCES)
    n = len(descriptors)
    check_patch_ids(pairs, n, f"has no descriptor (the descriptors have {n} rows, one per id)")
    order = 2 if distance == "l2" else 1
    out = np.empty(len(pairs), dtype=np.float64)
    for start in range(0, len(pairs), _CHUNK_PAIRS):  # bounded temporaries, not one per pair
        chunk = slice(start, start + _CHUNK_PAIRS)
        diff = descriptors[pairs.patch1[chunk]] - descriptors[pairs.patch2[chunk]]
        out[chunk] = np.linalg.norm(diff, ord=order, axis=1)
    return out


def read_scores(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read verification pairs as ``distance,label`` rows (label 1 for a matching pair); a first
    line ``distance,label`` is a header (:func:`read_clustered_scores` with the clusters
    dropped).

    Returns
    -------
    (distances, labels) : ndarray of float64, ndarray of bool

    Raises
    ------
    InvalidInputError
        Naming the file and line of a row that is not a number and a 0/1 label.
    """
    distances, labels, _ = read_clustered_scores(path)
    return distances, labels


def read_clustered_scores(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Read ``distance,label`` or ``distance,label,cluster`` rows (every row alike): the
    cluster names the independent unit a pair belongs to (its sequence, scene or 3D point); a
    first line ``distance,label[,cluster]`` is a header.

    Returns
    -------
    (distances, labels, clusters) : ndarray of float64, ndarray of bool, ndarray of str or None
        ``clusters`` is None for two-field rows.

    Raises
    ------
    InvalidInputError
        Naming the file and line of a row that is not a number, a 0/1 label (and a non-empty
        cluster, when the first row has one), or of a file of one class only.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "s.csv"
    ...     _ = path.write_text("distance,label,cluster\\n0.5,1,v_a\\n2,0,v_b\\n")
    ...     d, y, c = read_clustered_scores(path)
    >>> d.tolist(), y.tolist(), c.tolist()
    ([0.5, 2.0], [True, False], ['v_a', 'v_b'])
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").rstrip().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInputError(f"{path}: cannot read distance,label rows ({error})") from None
    first = 1
    if lines and lines[0].replace(" ", "").lower() in ("distance,label", "distance,label,cluster"):
        lines, first = lines[1:], 2
    if not lines:
        raise InvalidInputError(f"{path}: no rows; expected distance,label rows")
    n_fields = 3 if lines[0].count(",") == 2 else 2
    expected = "'distance,label'" if n_fields == 2 else "'distance,label,cluster'"
    distances = np.empty(len(lines), dtype=np.float64)
    labels = np.empty(len(lines), dtype=bool)
    clusters = []
    for number, line in enumerate(lines):  # a reader: one parse per line, with its line number
        fields = [field.strip() for field in line.split(",")]
        try:
            value = float(fields[0])
            label = fields[1] if len(fields) == n_fields else ""
        except ValueError:
            label, value = "", float("nan")
        if label not in ("0", "1") or not np.isfinite(value) or fields[-1] == "":
            raise InvalidInputError(
                f"{path}, line {number + first}: expected {expected} with a finite distance "
                f"and a 0/1 label{' and a cluster' if n_fields == 3 else ''}; got {line!r}"
            )
        distances[number], labels[number] = value, label == "1"
        clusters.append(fields[-1])
    if labels.all() or not labels.any():
        missing = "negative (non-matching)" if labels.all() else "positive (matching)"
        raise InvalidInputError(
            f"{path}: no {missing} pair: all {len(labels)} rows have label {int(labels[0])}; "
            "expected both matching (1) and non-matching (0) rows"
        )
    return distances, labels, np.array(clusters) if n_fields == 3 else None


def evaluate_scores(
    distances: np.ndarray,
    labels: np.ndarray,
    *,
    variant: str = "hardnet",
    recall: float = 0.95,
    distance: str | None = None,
) -> VerificationResult:
    """FPR at ``recall`` of pairs ranked by increasing distance (see
    :func:`~metricalc.core.operating.fpr_at_recall` for the variants).

    Examples
    --------
    >>> evaluate_scores([0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0], recall=0.5).fpr
    0.0
    """
    labels = np.asarray(labels)
    value = fpr_at_recall(labels, -np.asarray(distances), recall=recall, variant=variant)
    n_positive = int(np.count_nonzero(labels))
    return VerificationResult(
        fpr=value, variant=variant, recall=recall, distance=distance, n_pairs=len(labels),
        n_positive=n_positive, n_negative=len(labels) - n_positive,
    )  # fmt: skip


def evaluate_pairs(
    pairs: PhotoTourPairs,
    descriptors: np.ndarray,
    *,
    distance: str = "l2",
    variant: str = "hardnet",
    recall: float = 0.95,
) -> VerificationResult:
    """FPR95 of descriptors on PhotoTour pairs: :func:`pair_distances`, then
    :func:`evaluate_scores`."""
    distances = pair_distances(descriptors, pairs, distance=distance)
    return evaluate_scores(
        distances, pairs.labels, variant=variant, recall=recall, distance=distance
    )
