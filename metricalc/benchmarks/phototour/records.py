r"""Per-pair records of ``patches fpr95 --out``: every pair's distance under every descriptor.

FPR95 is one number of a whole pair file, so a comparison of descriptors needs the pairs
themselves: ``metricalc compare FILE`` recomputes FPR95 on resampled pairs
(:mod:`metricalc.benchmarks.phototour.statistic`). The file is netCDF (HDF5, read with xarray's
``h5netcdf`` engine):

- ``distance`` (descriptor, pair): the descriptor distance of each pair, in pair-file order;
- coordinates on ``pair``: ``label`` (1 for a matching pair) and ``cluster``: the independent
  unit the pair belongs to, for PhotoTour pairs the 3D point of its first patch (docs/patches.md
  says why; with ``patch1``, ``point1``, ``patch2``, ``point2``, the pair file's ids), for
  ``distance,label,cluster`` rows their cluster, for ``distance,label`` rows the pair itself;
- attrs: ``records = "fpr95_pairs"`` (how ``compare`` recognises the file), the protocol
  (``variant``, ``recall``, ``distance`` for PhotoTour pairs), ``pairs`` (the pair file),
  ``cluster_name`` (``"3D point"``, ``"cluster"`` or ``"pair"``) and ``cluster_by`` (in words).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import xarray as xr

from metricalc.benchmarks.phototour.dataset import PhotoTourPairs
from metricalc.core.operating import FPR_AT_RECALL_VARIANTS
from metricalc.errors import InvalidInputError
from metricalc.fileio import hdf5_target
from metricalc.version import __version__

__all__ = ["MARKER", "is_fpr95_records", "open_fpr95_records", "pair_records", "save_fpr95_records",
           "score_records"]  # fmt: skip

MARKER = "fpr95_pairs"
"""The ``records`` attr of a records file."""


def _records(
    distances: dict[str, np.ndarray],
    labels: np.ndarray,
    coords: dict[str, tuple[str, np.ndarray]],
    attrs: dict[str, object],
) -> xr.Dataset:
    names = list(distances)
    return xr.Dataset(
        {"distance": (("descriptor", "pair"), np.stack([distances[n] for n in names]))},
        coords={"descriptor": names, "pair": np.arange(len(labels)),
                "label": ("pair", np.asarray(labels).astype(np.int8)), **coords},
        attrs={"records": MARKER, **attrs, "metricalc_version": __version__},
    )  # fmt: skip


def pair_records(
    pairs: PhotoTourPairs,
    distances: dict[str, np.ndarray],
    *,
    variant: str,
    recall: float,
    distance: str,
) -> xr.Dataset:
    """The records of ``distances`` (descriptor name -> one distance per pair, file order) on
    PhotoTour pairs: clusters are the 3D points of the first patches.

    Examples
    --------
    >>> ids = np.array([0, 1])
    >>> pairs = PhotoTourPairs(ids, np.array([5, 6]), ids + 2, np.array([5, 7]))
    >>> ds = pair_records(pairs, {"a": np.array([0.5, 2.0])}, variant="hardnet", recall=0.95,
    ...                   distance="l2")
    >>> ds["label"].values.tolist(), ds["cluster"].values.tolist(), ds.attrs["cluster_name"]
    ([1, 0], ['5', '6'], '3D point')
    """
    coords = {name: ("pair", getattr(pairs, name))
              for name in ("patch1", "point1", "patch2", "point2")}  # fmt: skip
    attrs = {"variant": variant, "recall": float(recall), "distance": distance,
             "pairs": Path(pairs.path).name, "cluster_name": "3D point",
             "cluster_by": "the 3D point of the pair's first patch"}  # fmt: skip
    coords["cluster"] = ("pair", pairs.point1.astype(str))
    return _records(distances, pairs.labels, coords, attrs)


def score_records(
    distances: dict[str, np.ndarray],
    labels: np.ndarray,
    clusters: np.ndarray | None,
    *,
    variant: str,
    recall: float,
) -> xr.Dataset:
    """The records of ``distance,label[,cluster]`` rows (one file per descriptor, the same pairs
    in the same order): clusters are the rows' third column, or each pair alone without one.

    Examples
    --------
    >>> ds = score_records({"a": np.array([0.5, 2.0])}, np.array([True, False]), None,
    ...                    variant="hardnet", recall=0.95)
    >>> ds["cluster"].values.tolist(), ds.attrs["cluster_name"]
    (['line 1', 'line 2'], 'pair')
    """
    if clusters is None:
        cluster = np.array([f"line {k + 1}" for k in range(len(labels))])
        name, by = "pair", "each pair alone (the rows give no cluster)"
    else:
        cluster, name, by = np.asarray(clusters).astype(str), "cluster", "the rows' cluster column"
    attrs = {"variant": variant, "recall": float(recall), "cluster_name": name, "cluster_by": by}
    return _records(distances, labels, {"cluster": ("pair", cluster)}, attrs)


def save_fpr95_records(records: xr.Dataset, path: str | Path) -> Path:
    """Write ``records`` to ``path`` atomically (:func:`metricalc.fileio.hdf5_target`)."""
    with hdf5_target(path, estimate=int(records.nbytes)) as target:
        records.to_netcdf(target, engine="h5netcdf")
    return Path(path)


def is_fpr95_records(path: str | Path) -> bool:
    """Whether ``path`` is an HDF5 file with the records marker (False for anything else)."""
    try:
        with h5py.File(path, "r") as handle:
            marker = handle.attrs.get("records")
    except (OSError, ValueError, KeyError, RuntimeError):
        return False
    return marker in (MARKER, MARKER.encode())


def open_fpr95_records(path: str | Path) -> xr.Dataset:
    """Read and check a records file.

    Raises
    ------
    InvalidInputError
        Naming the file and what is wrong: not a records file, a missing variable or
        coordinate, an unknown variant, a recall outside (0, 1], a non-finite distance, labels
        other than 0/1 or of one class only, a descriptor name given twice.
    """
    path = Path(path)
    if not is_fpr95_records(path):
        raise InvalidInputError(
            f"{path}: not FPR95 pair records (expected the file of `patches fpr95 --out`)"
        )
    with xr.open_dataset(path, engine="h5netcdf") as opened:
        records = opened.load()
    missing = [n for n in ("distance", "label", "cluster") if n not in records.variables]
    if missing or records["distance"].dims != ("descriptor", "pair"):
        raise InvalidInputError(
            f"{path}: expected distance (descriptor, pair) with the coordinates label and "
            f"cluster; missing {', '.join(missing) or 'the dims (descriptor, pair)'}"
        )
    variant, recall = records.attrs.get("variant"), records.attrs.get("recall")
    if variant not in FPR_AT_RECALL_VARIANTS:
        raise InvalidInputError(
            f"{path}: variant {variant!r}; expected one of {', '.join(FPR_AT_RECALL_VARIANTS)}"
        )
    if not isinstance(recall, float | np.floating) or not 0 < recall <= 1:
        raise InvalidInputError(f"{path}: recall {recall!r}; expected a number in (0, 1]")
    distances = records["distance"].values
    if distances.dtype.kind != "f" or not np.isfinite(distances).all():
        raise InvalidInputError(f"{path}: distance holds a non-finite value; expected numbers")
    labels = records["label"].values
    if not np.isin(labels, (0, 1)).all() or labels.all() or not labels.any():
        raise InvalidInputError(
            f"{path}: label must be 0/1 with both matching (1) and non-matching (0) pairs"
        )
    names = [str(n) for n in records["descriptor"].values]
    if len(set(names)) < len(names):
        raise InvalidInputError(f"{path}: descriptor names repeat: {names}")
    return records
