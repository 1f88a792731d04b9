"""Requests too large for the machine are refused up front, with the memory they need."""

from __future__ import annotations

import numpy as np
import pytest

from metricalc import stats
from metricalc.cli import main
from metricalc.errors import InvalidInputError
from metricalc.report.study import study_from_dict
from metricalc.stats import randomization
from metricalc.stats.bootstrap import bca_interval
from metricalc.validation import MEMORY_LIMIT_ENV, format_bytes, memory_limit


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1000", 1000), ("512M", 512 * 2**20), ("1.5g", int(1.5 * 2**30)), ("2TiB", 2 * 2**40)],
)
def test_memory_limit_reads_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, text)
    assert memory_limit() == expected


@pytest.mark.parametrize("text", ["lots", "-1G", "0", "8X"])
def test_a_bad_memory_limit_is_named(monkeypatch, text):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, text)
    with pytest.raises(InvalidInputError, match=f"{MEMORY_LIMIT_ENV}="):
        memory_limit()


def test_the_default_limit_is_half_the_physical_memory(monkeypatch):
    import os

    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert memory_limit() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def test_bootstrap_refuses_what_does_not_fit_and_says_how_much(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1M")
    d = np.random.default_rng(0).normal(size=(4, 50))
    needed = format_bytes(16 * 4 * 100_000)
    with pytest.raises(InvalidInputError, match=f"n_resamples=100000 .* needs {needed} of memory"):
        bca_interval(d, n_resamples=100_000, rng=np.random.default_rng(0))
    low, high = bca_interval(d, n_resamples=1_000, rng=np.random.default_rng(0))  # 64 kB fits
    assert np.all(low < high)


def test_compare_refuses_before_any_flip(monkeypatch, make_query_cube):
    cube = make_query_cube({"sift": 0.6, "orb": 0.4, "brief": 0.5})

    def no_flips(*args, **kwargs):  # pragma: no cover - reached only if the check comes late
        raise AssertionError("the randomization ran before the memory check")

    import importlib

    module = importlib.import_module("metricalc.stats.compare")  # the module, not the function
    monkeypatch.setattr(module, "sign_flip_pvalues", no_flips)
    with pytest.raises(InvalidInputError, match=r"n_resamples=10\*\*12|needs .* TiB"):
        stats.compare(cube, baseline="sift", n_resamples=10**12)


def test_cli_compare_and_report_refuse_in_one_line(tmp_path, capsys, make_query_cube):
    from metricalc import cube as qc

    path = tmp_path / "c.nc"
    qc.save(make_query_cube({"sift": 0.6, "orb": 0.4}), path)
    assert main(["compare", str(path), "--baseline", "sift", "--n-resamples", str(10**12)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs" in err and "TiB of memory" in err
    with pytest.raises(InvalidInputError, match=r"r\.yaml: tests\.n_resamples: .* TiB"):
        study_from_dict(
            {"data": {"dataset": "synthetic"}, "tests": {"n_resamples": 10**12}}, source="r.yaml"
        )


def test_generators_spawned_in_batches_give_the_same_pvalues(monkeypatch):
    d = np.random.default_rng(5).normal(0.02, 1, size=(2, 300))
    n = 5 * randomization.BLOCK_PERMUTATIONS + 17  # six blocks, the last one short
    monkeypatch.setattr(randomization, "SPAWN_BATCH", 10**6)
    all_at_once = randomization.sign_flip_pvalues(d, n_resamples=n, rng=np.random.default_rng(1))
    monkeypatch.setattr(randomization, "SPAWN_BATCH", 4)
    batched = randomization.sign_flip_pvalues(d, n_resamples=n, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(batched, all_at_once)
