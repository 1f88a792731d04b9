"""Helpers shared by the experiment tests: compare two runs array by array."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from metricalc.errors import InvalidInputError


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


def assert_refused_with_the_difference(rundir, rerun, line):
    """``rerun()`` (a run of ``rundir``'s tag with a changed data/model configuration) is refused
    naming the difference ``line``, the configuration file and ``--overwrite``, and leaves the
    run as it was; ``rundir`` is removed afterwards."""
    try:
        conf = rundir.conf.read_text()
        with pytest.raises(InvalidInputError) as info:
            rerun()
        message = str(info.value)
        assert "data/model configuration differs" in message
        assert line in message and "--overwrite" in message and str(rundir.conf) in message
        assert rundir.conf.read_text() == conf and rundir.has_results()
    finally:
        shutil.rmtree(rundir.path)


EVERY_RERUN = pytest.mark.parametrize("flags", [{}, {"overwrite_eval": True}])
"""A rerun as given and with ``overwrite_eval``: neither may replace a changed data/model
configuration."""
