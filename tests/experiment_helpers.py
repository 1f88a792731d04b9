"""Helpers shared by the experiment tests: compare two runs array by array; the cache rules every
benchmark obeys."""

from __future__ import annotations

import shutil
from functools import partial

import h5py
import numpy as np
import pytest

from metricalc.errors import InvalidInputError


def datasets(path):
    """Every dataset of an HDF5 file: path -> array (a hard-linked dataset appears once)."""
    out = {}
    with h5py.File(path) as handle:
        handle.visititems(
            lambda name, item: (
                out.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
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


def stamp(path):
    """The inode and modification time of ``path`` (None if there is no such file): another
    after the file is written again."""
    if not path.exists():
        return None
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def rerun_and_check(rundir, rerun, *, exported):
    """``rerun()`` (a run of ``rundir``'s tag), checked to have evaluated again (``results.h5``
    rewritten), and to have exported again (``predictions.h5`` rewritten) exactly when
    ``exported``; its result."""
    predictions, results = stamp(rundir.predictions), stamp(rundir.results)
    result = rerun()
    assert result.status == "ok" and result.evaluated and result.exported == exported
    assert (stamp(rundir.predictions) != predictions) == exported
    assert stamp(rundir.results) != results
    return result


def assert_needs_overwrite_eval(rundir, rerun, line):
    """``rerun(**flags)`` (a run of ``rundir``'s tag with a changed eval configuration) is
    refused naming the difference ``line`` and ``--overwrite_eval``; with ``overwrite_eval`` it
    evaluates the cached predictions again (its result is returned)."""
    with pytest.raises(InvalidInputError) as info:
        rerun()
    message = str(info.value)
    assert "eval configuration differs" in message
    assert line in message and "--overwrite_eval" in message
    return rerun_and_check(rundir, partial(rerun, overwrite_eval=True), exported=False)


def assert_refused_with_the_difference(rundir, rerun, line):
    """``rerun(**flags)`` (a run of ``rundir``'s tag with a changed data/model configuration),
    as it is and with ``overwrite_eval`` (neither may replace a changed data/model
    configuration), is refused naming the difference ``line``, the configuration file and
    ``--overwrite``, and leaves the run as it was; ``rundir`` is removed afterwards."""
    try:
        conf = rundir.conf.read_text()
        for flags in ({}, {"overwrite_eval": True}):
            with pytest.raises(InvalidInputError) as info:
                rerun(**flags)
            message = str(info.value)
            assert "data/model configuration differs" in message
            assert line in message and "--overwrite" in message and str(rundir.conf) in message
            assert rundir.conf.read_text() == conf and rundir.has_results()
    finally:
        shutil.rmtree(rundir.path)


def refused_config_test(copy, run, changes):
    """The test that every data/model configuration change ``(override, line)`` of ``changes``
    is refused (:func:`assert_refused_with_the_difference`), for a test module whose fixtures
    ``base`` (a run) and ``outputs`` and whose helpers ``copy(base, outputs, tag)`` (a copy of
    the run under ``tag``) and ``run(outputs, tag, *overrides, **flags)`` are given."""

    @pytest.mark.parametrize(("override", "line"), changes)
    def test(base, outputs, override, line):
        rundir = copy(base, outputs, "conflict")
        assert_refused_with_the_difference(
            rundir, partial(run, outputs, "conflict", override), line
        )

    return test
