"""FPR95 of several descriptors, their pair records (`patches fpr95 --out`) and `metricalc compare`
of them: the weighted FPR95 against the materialised pair list, the comparisons against a slow
statistic that materialises every resample and swap, Holm against statsmodels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from sklearn.metrics import roc_curve
from statsmodels.stats.multitest import multipletests

from metricalc.benchmarks.phototour import statistic as module
from metricalc.benchmarks.phototour.dataset import read_pairs
from metricalc.benchmarks.phototour.records import open_fpr95_records
from metricalc.benchmarks.phototour.statistic import compare_fpr95, fpr95_statistic
from metricalc.benchmarks.phototour.verification import evaluate_scores
from metricalc.cli import main
from metricalc.core.operating import FPR_AT_RECALL_VARIANTS, fpr_at_recall
from metricalc.core.weighted_operating import (
    fpr_at_recall_leave_one_out,
    fpr_at_recall_sorted,
    tie_groups,
)
from metricalc.errors import InvalidInputError
from metricalc.stats.clustered import intraclass_correlation
from metricalc.stats.compare import compare_statistic
from metricalc.stats.statistics import UnitStatistic


def _materialised(distances, labels, weights, recall, variant, *, sklearn=False):
    """FPR at recall of the pair list with pair i repeated weights[i] times in its place (NaN
    without a positive or a negative): the point estimate's function run on the copies, or for
    "threshold" / "sklearn" with ``sklearn`` scikit-learn's roc_curve read at tpr >= recall."""
    index = np.repeat(np.arange(len(labels)), np.asarray(weights, dtype=np.int64))
    y = labels[index]
    if y.all() or not y.any():
        return np.nan
    if sklearn and variant in ("threshold", "sklearn"):
        fpr, tpr, _ = roc_curve(y, -distances[index], drop_intermediate=variant == "sklearn")
        return float(fpr[np.argmax(tpr >= recall)])
    return fpr_at_recall(y, -distances[index], recall=recall, variant=variant)


@pytest.mark.parametrize("variant", FPR_AT_RECALL_VARIANTS)
def test_weighted_equals_the_materialised_pairs(variant: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(2, 40))
        distances = rng.integers(0, int(rng.integers(1, 6)), n).astype(float)  # many ties
        labels = rng.random(n) < rng.uniform(0.2, 0.8)
        weights = rng.multinomial(n, np.full(n, 1 / n), size=6)
        weights[0] = 1
        recall = float(rng.choice([0.95, 0.5, 0.3, 1.0]))
        order = np.lexsort((np.arange(n), distances))
        got, _ = fpr_at_recall_sorted(labels[order], weights[:, order],
                                      tie_groups(distances[order]), recall=recall,
                                      variant=variant)  # fmt: skip
        expected = [_materialised(distances, labels, w, recall, variant) for w in weights]
        np.testing.assert_array_equal(got, expected)
        per_row = np.tile(labels[order], (len(weights), 1))  # labels of each row's own records
        again, _ = fpr_at_recall_sorted(per_row, weights[:, order], tie_groups(distances[order]),
                                        recall=recall, variant=variant)  # fmt: skip
        np.testing.assert_array_equal(again, expected)
        if labels.any() and not labels.all():  # weights 1: the existing fpr95 value
            table = evaluate_scores(distances, labels, variant=variant, recall=recall).fpr
            assert got[0] == table


@pytest.mark.parametrize("variant", ["hardnet", "matchnet", "threshold"])
def test_leave_one_cluster_out_equals_the_pairs_without_it(variant: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        n, n_clusters = int(rng.integers(2, 40)), int(rng.integers(1, 8))
        distances = rng.integers(0, 5, n).astype(float)
        labels = rng.random(n) < 0.5
        clusters = rng.integers(0, n_clusters, n)
        recall = float(rng.choice([0.95, 0.5, 1.0, 0.3, 0.7, 0.9]))
        order = np.lexsort((np.arange(n), distances))
        got = fpr_at_recall_leave_one_out(labels[order], clusters[order], n_clusters,
                                          new_group=tie_groups(distances[order]), recall=recall,
                                          variant=variant)  # fmt: skip
        expected = [_materialised(distances, labels, clusters != c, recall, variant)
                    for c in range(n_clusters)]  # fmt: skip
        np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- files and the slow reference


def _write_set(folder: Path, n_points: int, seed: int, names=("good", "mid", "bad")) -> Path:
    """A PhotoTour-layout pair file of n_points points (2 matching and 1 to 3 non-matching pairs
    of each point, shuffled) and small-integer descriptors of ``names``, whose
    matching patches get closer from "bad" to "good" (L1 distances tie often)."""
    rng = np.random.default_rng(seed)
    views = 3
    n_patches = n_points * views
    centres = rng.integers(0, 6, (n_points, 4))
    lines = []
    for point in range(n_points):
        first = point * views
        lines += [(first, point, first + 1, point), (first + 2, point, first, point)]
        for _ in range(int(rng.integers(1, 4))):
            other = int((point + rng.integers(1, n_points)) % n_points)
            lines.append((first + int(rng.integers(views)), point,
                          other * views + int(rng.integers(views)), other))  # fmt: skip
    lines = [lines[k] for k in rng.permutation(len(lines))]
    pairs = folder / "m50_pairs_0.txt"
    pairs.write_text("".join(f"{a} {pa} 0 {b} {pb} 0\n" for a, pa, b, pb in lines))
    for spread, name in zip((1, 2, 4), names, strict=False):
        noise = rng.integers(-spread, spread + 1, (n_patches, 4))
        np.save(folder / f"{name}.npy", np.repeat(centres, views, axis=0) + noise)
    return pairs


def _slow_statistic(records: xr.Dataset, pair_by: str = "cluster") -> UnitStatistic:
    """The same statistic as a UnitStatistic whose function materialises every resample and
    swap and calls fpr_at_recall on the copies."""
    labels = records["label"].values == 1
    recall, variant = float(records.attrs["recall"]), records.attrs["variant"]

    def function(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        values, weights = np.broadcast_arrays(values, weights)
        rows = values.reshape(-1, values.shape[-1]), weights.reshape(-1, weights.shape[-1])
        out = [_materialised(v, labels, w, recall, variant, sklearn=True)
               for v, w in zip(*rows, strict=True)]  # fmt: skip
        return np.array(out).reshape(values.shape[:-1])

    fast = fpr95_statistic(records, pair_by=pair_by)
    return UnitStatistic(fast.name, fast.phrase, fast.systems, fast.clusters,
                         records["distance"].values, fast.pair_clusters, function)  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``patches fpr95 --descriptors good.npy mid.npy bad.npy --out ...`` on 7 points."""
    folder = tmp_path_factory.mktemp("fpr95")
    pairs = _write_set(folder, 7, seed=3)
    out = folder / "run.fpr95.nc"
    argv = ["patches", "fpr95", "--pairs", str(pairs), "--descriptors",
            *(str(folder / f"{n}.npy") for n in ("good", "mid", "bad")), "--distance", "l1",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return pairs, out


def test_rows_and_records_of_several_descriptors(
    recorded: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pairs_file, out = recorded
    folder = out.parent
    capsys.readouterr()
    argv = ["patches", "fpr95", "--pairs", str(pairs_file), "--distance", "l1", "--json",
            "--descriptors", *(str(folder / f"{n}.npy") for n in ("good", "bad"))]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    pairs = read_pairs(pairs_file)
    records = open_fpr95_records(out)
    assert records["descriptor"].values.tolist() == ["good", "mid", "bad"]
    assert records["cluster"].values.tolist() == pairs.point1.astype(str).tolist()
    assert records["label"].values.tolist() == pairs.labels.astype(int).tolist()
    for row, name in zip(rows, ("good", "bad"), strict=True):
        x = np.load(folder / f"{name}.npy").astype(float)
        d = np.abs(x[pairs.patch1] - x[pairs.patch2]).sum(axis=1)  # L1 by hand
        np.testing.assert_array_equal(records["distance"].sel(descriptor=name).values, d)
        assert row["descriptor"] == name
        assert row["fpr"] == fpr_at_recall(pairs.labels, -d)  # hardnet, recall 0.95


@pytest.mark.parametrize(
    ("pair_by", "variant"),
    [("cluster", "hardnet"), ("pair", "hardnet"), ("cluster", "threshold"), ("cluster", "sklearn")],
)
def test_compare_equals_the_slow_statistic(
    recorded: tuple[Path, Path], pair_by: str, variant: str
) -> None:
    """Estimates, cluster-bootstrap intervals (their jackknife too), randomization p-values
    (exact over 7 points; random patterns over the pairs), Holm, wins: the fast statistic and
    one that materialises every resample give the same rows."""
    records = open_fpr95_records(recorded[1])
    records.attrs["variant"] = variant
    options = {"pair_by": pair_by, "n_resamples": 150, "seed": 5}
    fast = compare_fpr95(records, **options)
    slow = compare_statistic(_slow_statistic(records, pair_by), **options)
    for name in ("n", "mean_descriptor", "mean_baseline", "mean_diff", "ci_low", "ci_high",
                 "pvalue", "pvalue_corrected", "exact", "ties"):  # fmt: skip
        np.testing.assert_allclose(fast[name].values, slow[name].values, rtol=1e-12, atol=1e-15)
    # lower is better: a win is a cluster with the lower FPR95
    np.testing.assert_array_equal(fast.wins.values, slow.losses.values)
    np.testing.assert_array_equal(fast.losses.values, slow.wins.values)
    assert bool(fast.exact.all()) == (pair_by == "cluster")
    raw = fast.pvalue.values
    np.testing.assert_allclose(fast.pvalue_corrected.values,
                               multipletests(raw, method="holm")[1], rtol=1e-12)  # fmt: skip
    labels = records["label"].values == 1
    for k, (a, b) in enumerate(fast.get_index("comparison")):
        fa, fb = (fpr_at_recall(labels, -records["distance"].sel(descriptor=name).values,
                                variant=variant) for name in (a, b))  # fmt: skip
        assert float(fast.mean_diff[k]) == fa - fb
        # lower is better: a rejected comparison favours the lower FPR95
        expected = -int(np.sign(fa - fb)) if bool(fast.reject[k]) else 0
        assert int(fast.favours[k]) == expected


def test_a_clearly_better_descriptor_is_marked(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pairs = _write_set(tmp_path, 40, seed=1)
    out = tmp_path / "r.fpr95.nc"
    argv = ["patches", "fpr95", "--pairs", str(pairs), "--descriptors",
            str(tmp_path / "good.npy"), str(tmp_path / "bad.npy"), "--out", str(out)]
    capsys.readouterr()
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()  # one per descriptor, named
    assert [line.split(":")[0] for line in lines] == ["good", "bad"]
    assert main(["compare", str(out), "--baseline", "bad", "--json", "--n-resamples", "500"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["mean_diff"] < 0 and row["reject"] and row["favours"] == 1
    assert row["ci_low"] <= row["mean_diff"] <= row["ci_high"] < 0 and row["n"] == 40
    assert main(["compare", str(out), "--n-resamples", "500"]) == 0
    printed = capsys.readouterr().out
    assert "lower is better" in printed
    assert "independent unit: the 3D point of the pair's first patch" in " ".join(printed.split())
    (row_line,) = [line for line in printed.splitlines() if line.split()[:2] == ["good", "bad"]]
    assert " > " in row_line  # the row marks good over bad


def test_pairs_as_units_show_the_design_effect(recorded: tuple[Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    records = open_fpr95_records(recorded[1])
    by_pair = compare_fpr95(records, pair_by="pair", n_resamples=100)
    labels = records["label"].values == 1

    def false_accepts(name: str) -> np.ndarray:
        """Non-matching pairs ranked (stable) before the k-th matching pair: 1, else 0."""
        d = records["distance"].sel(descriptor=name).values
        order = np.argsort(d, kind="stable")
        k = int(np.ceil(0.95 * labels.sum()))
        stop = int(np.flatnonzero(labels[order])[k - 1])
        rank = np.empty(len(d), int)
        rank[order] = np.arange(len(d))
        return np.where(labels, np.nan, (rank < stop).astype(float))

    for k, (a, b) in enumerate(by_pair.get_index("comparison")):
        assert np.nanmean(false_accepts(a)) == float(by_pair.mean_descriptor[k])
        icc, deff = intraclass_correlation(false_accepts(a) - false_accepts(b),
                                           records["cluster"].values)  # fmt: skip
        assert float(by_pair.icc[k]) == pytest.approx(icc, rel=1e-12, nan_ok=True)
        assert float(by_pair.design_effect[k]) == pytest.approx(deff, rel=1e-12, nan_ok=True)
    assert np.isfinite(by_pair.icc.values).sum() >= 2
    capsys.readouterr()
    assert main(["compare", str(recorded[1]), "--pair-by", "pair", "--n-resamples", "100"]) == 0
    printed = capsys.readouterr().out
    assert "those of one 3D point are correlated" in printed and "good vs mid: ICC" in printed


def test_chunks_do_not_change_the_statistic(recorded: tuple[Path, Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    statistic = fpr95_statistic(open_fpr95_records(recorded[1]))
    weights = np.random.default_rng(0).multinomial(7, np.full(7, 1 / 7), size=9)
    swap = np.random.default_rng(1).random((9, 7)) < 0.5
    keep = np.ones(7, dtype=bool)
    whole = (statistic.weighted(1, weights), statistic.swapped_difference(0, 2, swap, keep),
             statistic.cluster_values())  # fmt: skip
    monkeypatch.setattr(module, "CHUNK_ELEMENTS", 1)  # one row at a time
    chunked = (statistic.weighted(1, weights), statistic.swapped_difference(0, 2, swap, keep),
               statistic.cluster_values())  # fmt: skip
    for a, b in zip(whole, chunked, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pair-by", "scene"], "pair by their clusters (default: 3D points of PhotoTour"),
        (["--split", "viewpoint"], "--split does not apply to FPR95 pair records"),
        (["--metric", "auc@10"], "--metric auc@10 does not apply to FPR95 pair records"),
        (["--labels", "a"], "--labels does not apply to FPR95 pair records"),
    ],
)
def test_compare_options_that_do_not_apply(recorded: tuple[Path, Path], extra: list[str],
                                           message: str, capsys) -> None:  # fmt: skip
    capsys.readouterr()
    assert main(["compare", str(recorded[1]), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_input_is_one_line(recorded: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    pairs, out = recorded
    folder = out.parent
    good = str(folder / "good.npy")
    cases = [
        (["compare", str(out), str(out)], "are compared alone"),
        (["patches", "fpr95", "--pairs", str(pairs), "--descriptors", good, "--out", "x.txt"],
         "expected a .nc file name"),
        (["patches", "fpr95", "--pairs", str(pairs), "--descriptors", good, good],
         "is given twice"),
        (["patches", "fpr95", "--pairs", str(pairs), "--descriptors", good, "--names", "a,b"],
         "--names gives 2 names for 1 descriptor files"),
        (["patches", "fpr95", "--scores", good, "--pairs", str(pairs)], "give --scores alone"),
    ]  # fmt: skip
    records = open_fpr95_records(out)
    broken = records.copy(deep=True)
    broken["distance"][0, 0] = np.nan
    broken.to_netcdf(tmp_path / "nan.nc", engine="h5netcdf")
    cases.append((["compare", str(tmp_path / "nan.nc")], "distance holds a non-finite value"))
    for argv, message in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    with pytest.raises(InvalidInputError, match="not FPR95 pair records"):
        open_fpr95_records(pairs)


def test_score_files_with_a_cluster_column(tmp_path: Path, capsys) -> None:
    """HPatches-style pairs as distance,label,cluster rows (the cluster: the sequence), one file
    per descriptor: one row each, records clustered by the column, compared over sequences."""
    rng = np.random.default_rng(2)
    sequences = np.repeat([f"v_{k}" for k in range(8)], 6)
    labels = np.tile([1, 1, 1, 0, 0, 0], 8)
    for name, shift in (("a", 0.6), ("b", 0.2)):
        distance = np.round(rng.random(48) + shift * (labels == 0), 1)  # ties
        rows = [f"{d},{y},{c}\n" for d, y, c in zip(distance, labels, sequences, strict=True)]
        (tmp_path / f"{name}.csv").write_text("distance,label,cluster\n" + "".join(rows))
    out = tmp_path / "s.fpr95.nc"
    capsys.readouterr()
    assert main(["patches", "fpr95", "--scores", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                 "--json", "--out", str(out)]) == 0  # fmt: skip
    rows = json.loads(capsys.readouterr().out)
    records = open_fpr95_records(out)
    assert records["cluster"].values.tolist() == sequences.tolist()
    values = []
    for row in rows:
        d = records["distance"].sel(descriptor=row["descriptor"]).values
        values.append(fpr_at_recall(labels, -d))
        assert row["fpr"] == values[-1]
    assert main(["compare", str(out), "--json", "--n-resamples", "200"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["n"] == 8 and row["exact"] and row["mean_diff"] == values[0] - values[1]
    assert main(["compare", str(out), "--n-resamples", "200"]) == 0
    assert "independent unit: the rows' cluster column" in " ".join(
        capsys.readouterr().out.split())
    text = (tmp_path / "b.csv").read_text().splitlines()
    text[3] = text[3].replace(",1,", ",0,")  # the third pair's label
    (tmp_path / "c.csv").write_text("\n".join(text) + "\n")
    assert main(["patches", "fpr95", "--scores", str(tmp_path / "a.csv"),
                 str(tmp_path / "c.csv")]) == 2  # fmt: skip
    assert "c.csv, row 3: its label (or cluster) differs" in capsys.readouterr().err
