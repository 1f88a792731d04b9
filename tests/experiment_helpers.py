"""Helpers shared by the experiment tests: compare two runs array by array."""

from __future__ import annotations

import h5py
import numpy as np


def datasets(path):
    """Every dataset of an HDF5 file: path -> array (a hard-linked dataset appears once)."""
    out = {}
    with h5py.File(path) as handle:
        handle.visititems(
            lambda name, item: out.__setitem__(name, item[()])
            if isinstance(item, h5py.Dataset)
            else None
        )
    return out


def assert_same_run(result, reference):
    """Identical predictions, per-query cube, per-pair metrics, summaries (but the processing
    time) and match visualizations."""
    a, b = datasets(result.files["predictions"]), datasets(reference.files["predictions"])
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype
        np.testing.assert_array_equal(a[key], b[key])
    ca, cb = result.open_cube(), reference.open_cube()
    for name in ("better", "ties", "n_relevant", "ap", "nn_correct", "nn_error", "x", "y"):
        np.testing.assert_array_equal(ca[name].values, cb[name].values)
    assert result.pairs.keys() == reference.pairs.keys()
    for name in reference.pairs.data_vars:
        np.testing.assert_array_equal(result.pairs[name].values, reference.pairs[name].values)
    skip = {"processing_time_ms"}
    assert {k: v for k, v in result.summaries.items() if k not in skip} == {
        k: v for k, v in reference.summaries.items() if k not in skip
    }
    for path in reference.pairs["match_image"].values:
        assert (result.directory / path).read_bytes() == (reference.directory / path).read_bytes()
