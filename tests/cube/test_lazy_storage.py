"""Cube files with the query labels as text (layout 3) and the bounded-memory lazy path: labels
round trip and read back as codes, older layouts open, lazy metric sets equal eager ones whatever
the chunks, and the same on a dask.distributed cluster (``--scheduler``)."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import xarray as xr

from metricalc import cube as qc
from metricalc.cli import main
from metricalc.commands import dask_options
from metricalc.cube.io import FORMAT_ATTR, query_codes
from metricalc.errors import InvalidInputError
from metricalc.metrics import metric_set, scene_metrics


def random_cube(
    n: int, seed: int, scenes: list[str] | None = None, policy: str = "expected"
) -> xr.Dataset:
    """``n`` queries of three descriptors over a few scenes and pairs (some pairless)."""
    rng = np.random.default_rng(seed)
    names = np.array(scenes or [f"{'vi'[i % 2]}_sç{i}" for i in range(7)])
    relevant = rng.integers(-1, 2, (3, n)).astype(np.int8)
    correct = np.where(relevant == 0, 0, rng.integers(0, 2, (3, n)))
    return qc.new_cube(
        ["a", "b", "c"],
        {
            "scene": names[rng.integers(0, names.size, n)],
            "pair": np.array(["1-2", "1-3", "1-6", ""])[rng.integers(0, 4, n)],
            "keypoint_set": ["k"] * n,
            "query_keypoint": np.arange(n),
        },
        {
            "better": np.where(relevant == 1, rng.integers(0, 40, (3, n)), -1),
            "ties": np.where(relevant == 1, rng.integers(0, 3, (3, n)), -1),
            "n_relevant": relevant,
            "nn_correct": np.where(relevant >= 0, correct, -1).astype(np.int8),
            "nn_mutual": np.where(relevant >= 0, rng.integers(0, 2, (3, n)), -1).astype(np.int8),
            "n_candidates": np.where(relevant >= 0, 60, -1),
        },
        attrs={**qc.DEFAULT_ATTRS, "tie_policy": policy},
    )


def assert_same_metrics(eager: xr.Dataset, lazy: xr.Dataset) -> None:
    """Counts and strings equal, rates equal up to the order of the float sums."""
    assert list(eager.data_vars) == list(lazy.data_vars)
    for name in eager.data_vars:
        a, b = eager[name].values, lazy[name].values
        if a.dtype.kind == "f":
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(b, a, err_msg=name)


@pytest.mark.parametrize(
    "vocabulary",
    [
        ["only"],
        ["", "v_ñandú", "i_日本", "i_a b", "v_café\t"],
        [f"s{i:03d}" for i in range(300)],  # more than 256 labels: uint16 codes
    ],
)
def test_labels_round_trip(tmp_path, vocabulary):
    rng = np.random.default_rng(len(vocabulary))
    n = 1_000
    labels = np.array(vocabulary)[rng.integers(0, len(vocabulary), n)]
    keypoint_sets = np.char.add("k", labels)  # never empty; a pair may be (no image pair)
    pairs = np.where(labels == "", "", "1-2")
    cube = qc.new_cube(
        ["sift"],
        {"scene": np.char.add("v_", labels), "pair": pairs, "keypoint_set": keypoint_sets,
         "query_keypoint": range(n)},
        {"better": np.zeros((1, n), int), "ties": np.zeros((1, n), int)},
        attrs=qc.DEFAULT_ATTRS,
    )
    qc.save(cube, tmp_path / "c.nc")
    with h5py.File(tmp_path / "c.nc") as handle:  # UTF-8 characters, as wide as the longest
        assert handle.attrs[FORMAT_ATTR].tolist() in (3, [3])
        stored = handle["keypoint_set"]
        longest = max(len(k.encode()) for k in keypoint_sets.tolist())
        assert stored.dtype == "S1" and stored.shape == (n, longest)
        assert stored.attrs["_Encoding"] == "utf-8"
        text = [bytes(row).rstrip(b"\0").decode() for row in stored[...]]
        assert text == keypoint_sets.tolist()
    with xr.open_dataset(tmp_path / "c.nc", engine="h5netcdf") as plain:  # text to xarray
        assert plain["keypoint_set"].values.tolist() == keypoint_sets.tolist()
        assert plain["pair"].values.tolist() == pairs.tolist()
    xr.testing.assert_identical(qc.open_cube(tmp_path / "c.nc"), cube)
    lazy = qc.open_cube(tmp_path / "c.nc", chunks={})
    codes, found = query_codes(lazy["keypoint_set"])
    expected = np.uint8 if len(vocabulary) <= 256 else np.uint16
    assert codes.dtype == expected and found.tolist() == sorted(set(keypoint_sets.tolist()))
    np.testing.assert_array_equal(found[np.asarray(codes)], keypoint_sets)
    xr.testing.assert_identical(lazy.compute(), cube)
    lazy.close()


def test_query_codes_after_a_selection_and_for_a_foreign_label(tmp_path):
    cube = random_cube(2_000, 0)
    qc.save(cube, tmp_path / "c.nc")
    with qc.open_cube(tmp_path / "c.nc", chunks={}) as lazy:
        part = lazy["scene"].isel(query=slice(100, 1_500))  # not the file's codes any more
        codes, vocabulary = query_codes(part)
        np.testing.assert_array_equal(
            vocabulary[np.asarray(codes)], cube["scene"].values[100:1_500]
        )
        foreign = part.copy(data=part.data.map_blocks(np.char.add, "x", dtype="<U20"))
        with pytest.raises(InvalidInputError, match=r"'scene': label 'v_sç\dx' is not in its"):
            np.asarray(query_codes(foreign)[0])


def test_files_of_the_character_array_layout_open(tmp_path):
    cube = random_cube(500, 1)
    old = cube.copy()
    for variable in old.variables.values():
        variable.encoding = {}
    encoding = {
        name: {"dtype": "S1"} if variable.dims == ("query",) else {"dtype": str}
        for name, variable in old.variables.items()
        if variable.dtype.kind == "U"
    }
    old.to_netcdf(tmp_path / "old.nc", engine="h5netcdf", encoding=encoding)
    with h5py.File(tmp_path / "old.nc") as handle:
        assert FORMAT_ATTR not in handle.attrs and handle["scene"].dtype == "S1"
    xr.testing.assert_identical(qc.open_cube(tmp_path / "old.nc"), cube)
    with qc.open_cube(tmp_path / "old.nc", chunks={}) as lazy:
        assert_same_metrics(metric_set(cube), metric_set(lazy).compute())


def test_a_cube_edited_with_plain_xarray_opens(tmp_path):
    """Plain xarray opens a cube file with its labels as text; an edited file saved with
    to_netcdf opens with the edit, whether a label column was kept (written back as characters)
    or replaced (variable-length strings)."""
    cube = random_cube(500, 2)
    qc.save(cube, tmp_path / "c.nc")
    with xr.open_dataset(tmp_path / "c.nc", engine="h5netcdf") as plain:
        edited = plain.load()
    assert edited["scene"].values.tolist() == cube["scene"].values.tolist()
    renamed = np.char.replace(cube["scene"].values, "sç", "scene ")
    edited = edited.assign_coords(scene=("query", renamed.astype(object)))
    edited["nn_distance"] = edited["nn_distance"] * 2
    edited.to_netcdf(tmp_path / "edited.nc", engine="h5netcdf")
    expected = cube.assign(nn_distance=cube["nn_distance"] * 2).assign_coords(
        scene=("query", renamed)
    )
    xr.testing.assert_identical(qc.open_cube(tmp_path / "edited.nc"), expected)
    with qc.open_cube(tmp_path / "edited.nc", chunks={}) as lazy:
        np.testing.assert_array_equal(lazy["scene"].values, renamed)
        assert_same_metrics(metric_set(expected), metric_set(lazy).compute())


def test_labels_that_are_not_text_in_their_encoding_are_refused(tmp_path):
    cube = random_cube(50, 3)
    qc.save(cube, tmp_path / "c.nc")
    with h5py.File(tmp_path / "c.nc", "r+") as handle:
        handle["pair"][7, 0] = b"\xff"  # not UTF-8
    for chunks in (None, {}):
        with pytest.raises(InvalidInputError, match=r"c.nc is not a valid QueryCube: query "
                           r"coordinate 'pair': label b'\\xff-\d' is not utf-8 text"):
            qc.open_cube(tmp_path / "c.nc", chunks=chunks)


@pytest.mark.parametrize("seed", [0, 1])
def test_lazy_metric_set_equals_eager_for_any_chunks(tmp_path, seed):
    cube = random_cube(3_000, seed)
    qc.save(cube, tmp_path / "c.nc")
    eager = metric_set(cube, k=(1, 3, 10))
    scenes = scene_metrics(cube)
    for chunk in (437, 3_000):  # not aligned to scenes
        with qc.open_cube(tmp_path / "c.nc", chunks={"query": chunk}) as lazy:
            result = metric_set(lazy, k=(1, 3, 10))
            assert result["true_map_micro"].chunks is not None  # lazy until computed
            assert_same_metrics(eager, result.compute())
            xr.testing.assert_allclose(scene_metrics(lazy).compute(), scenes, rtol=1e-12)
            # a selection drops scenes from the file's vocabulary: they are not groups
            part = lazy.isel(query=slice(0, 900))
            assert_same_metrics(metric_set(cube.isel(query=slice(0, 900))), metric_set(part))


def test_lazy_metric_set_over_one_scene_and_other_tie_policies(tmp_path):
    cube = random_cube(800, 3, scenes=["v_only"], policy="pessimistic")
    qc.save(cube, tmp_path / "c.nc")
    with qc.open_cube(tmp_path / "c.nc", chunks={"query": 300}) as lazy:
        assert_same_metrics(metric_set(cube), metric_set(lazy).compute())


def test_chunks_that_cut_the_stored_chunks_open_quietly_with_the_eager_numbers(tmp_path, capsys):
    """``--chunks 1000`` on a file stored in chunks of 10,000 queries: opened at the stored
    chunks and rechunked to 1000 (xarray's chunk-alignment warning is an error under the test
    settings), every number the eager one."""
    cube = random_cube(12_000, 6)
    path = tmp_path / "c.nc"
    qc.save(cube, path)
    with qc.open_cube(path, chunks={"query": 1000}) as lazy:
        assert set(lazy["ap"].chunks[1]) == {1000} and set(lazy["scene"].chunks[0]) == {1000}
        assert_same_metrics(metric_set(cube), metric_set(lazy).compute())
    assert main(["metrics", str(path), "--json"]) == 0
    eager = json.loads(capsys.readouterr().out)
    for chunks in ("1000", "4000", "25000"):  # cutting 10,000 apart, and more than the file
        assert main(["metrics", str(path), "--json", "--chunks", chunks]) == 0
        assert_same_json(json.loads(capsys.readouterr().out), eager, chunks)
    assert main(["compare", str(path), "--json", "--chunks", "1000", "--n-resamples", "99"]) == 0
    lazy_rows = json.loads(capsys.readouterr().out)
    assert main(["compare", str(path), "--json", "--n-resamples", "99"]) == 0
    eager_rows = json.loads(capsys.readouterr().out)
    # the scene sums of a lazy cube add chunk by chunk: equal to the last bits
    for lazy_row, eager_row in zip(lazy_rows, eager_rows, strict=True):
        assert lazy_row.keys() == eager_row.keys()
        for key, value in eager_row.items():
            if isinstance(value, float):
                assert lazy_row[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
            else:
                assert lazy_row[key] == value, key


@pytest.mark.parametrize("verb", ["metrics", "compare"])
def test_an_empty_scheduler_option_is_an_error_an_empty_variable_unset(
    tmp_path, capsys, monkeypatch, verb
):
    qc.save(random_cube(50, 5), tmp_path / "c.nc")
    for given in ("", "  "):
        assert main([verb, str(tmp_path / "c.nc"), "--json", "--scheduler", given]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--scheduler {given!r}: expected the address" in err
    monkeypatch.setenv(dask_options.SCHEDULER_ENV, " ")  # unset: no cluster, in memory
    assert main([verb, str(tmp_path / "c.nc"), "--json"]) == 0
    assert capsys.readouterr().err == ""


# before the LocalCluster test (distributed reuses the closed event loop of a finished
# in-process cluster)
@pytest.mark.parametrize("address", ["nonsense", "tcp://127.0.0.1:1"])
def test_a_bad_scheduler_address_is_one_line_naming_it(tmp_path, capsys, monkeypatch, address):
    pytest.importorskip("distributed")
    monkeypatch.setattr(dask_options, "CONNECT_TIMEOUT_S", 1)
    qc.save(random_cube(50, 5), tmp_path / "c.nc")
    monkeypatch.setenv(dask_options.SCHEDULER_ENV, address)
    assert main(["metrics", str(tmp_path / "c.nc")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"dask scheduler {address!r}" in err


def test_a_server_that_is_no_scheduler_is_one_line_not_a_hang(tmp_path, capsys, monkeypatch):
    """A port that accepts connections but never speaks dask's protocol (an HTTP server, the
    dashboard): distributed would wait for the handshake past its timeout."""
    pytest.importorskip("distributed")
    import socket

    monkeypatch.setattr(dask_options, "CONNECT_TIMEOUT_S", 1)
    qc.save(random_cube(50, 5), tmp_path / "c.nc")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never answers
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        assert main(["metrics", str(tmp_path / "c.nc"), "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"dask scheduler {address!r}" in err


def assert_same_json(got: object, expected: object, where: str = "") -> None:
    """The metric sets as JSON (descriptor -> metric -> value, the rank histogram a mapping)
    agree: floats to 1e-12, everything else exactly."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), where
        for key, value in expected.items():
            assert_same_json(got[key], value, f"{where}/{key}")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-9, nan_ok=True), where
    else:
        assert got == expected, where


def test_cli_on_a_local_cluster_equals_eager(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    cube = random_cube(20_000, 4)
    qc.save(cube, tmp_path / "c.nc")
    assert main(["metrics", str(tmp_path / "c.nc"), "--json"]) == 0
    eager = json.loads(capsys.readouterr().out)
    assert main(["metrics", str(tmp_path / "c.nc"), "--json", "--chunks", "10000"]) == 0
    assert_same_json(json.loads(capsys.readouterr().out), eager)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        argv = ["metrics", str(tmp_path / "c.nc"), "--json", "--scheduler"]
        assert main([*argv, cluster.scheduler_address]) == 0
        assert_same_json(json.loads(capsys.readouterr().out), eager)


def edge_cube(n: int, seed: int, policy: str = "expected") -> xr.Dataset:
    """:func:`random_cube` with what the fused pass must classify right: ranks past the
    largest cutoff and ties, unknown ``n_candidates`` (-1) of present queries, varied
    ``n_candidates``."""
    from metricalc.core.ranking import ap_from_rank_stats

    cube = random_cube(n, seed, policy=policy)
    rng = np.random.default_rng(seed + 100)
    shape = cube["n_relevant"].shape
    relevant = cube["n_relevant"].values
    far = (relevant == 1) & (rng.random(shape) < 0.3)
    better = np.where(far, rng.integers(0, 150, shape), cube["better"].values)
    ties = np.where(better >= 0, rng.integers(0, 4, shape) * (rng.random(shape) < 0.3), -1)
    r1 = relevant == 1
    ranked = ap_from_rank_stats(np.where(r1, better, 0), np.where(r1, ties, 0), tie_policy=policy)
    ap = np.where(r1, ranked, cube["ap"].values)
    candidates = np.where(rng.random(shape) < 0.1, -1, rng.integers(1, 500, shape))
    return cube.assign(
        ap=(cube["ap"].dims, ap),
        better=(cube["better"].dims, better),
        ties=(cube["ties"].dims, ties),
        n_candidates=(cube["n_candidates"].dims, np.where(relevant >= 0, candidates, -1)),
    )


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic"])
def test_the_one_pass_equals_eager_on_edge_cases(tmp_path, policy):
    cube = edge_cube(2_500, 7, policy)
    qc.save(cube, tmp_path / "c.nc")
    with qc.open_cube(tmp_path / "c.nc", chunks={"query": 611}) as lazy:
        result = metric_set(lazy, k=(1, 2, 7, 10, 200))
        assert_same_metrics(metric_set(cube, k=(1, 2, 7, 10, 200)), result.compute())
        unmatched = ["nn_mutual", "n_candidates"]  # a cube without them: counts -1
        expected = metric_set(cube.drop_vars(unmatched))
        assert_same_metrics(expected, metric_set(lazy.drop_vars(unmatched)).compute())
        assert int(expected["total_matches"].sel(descriptor="a")) == -1


def test_the_one_pass_sums_equal_the_grouped_sums(tmp_path):
    """The fused pass against the eager grouped sums it replaces, quantity by quantity."""
    from metricalc.metrics.fused import query_sums
    from metricalc.metrics.reductions import PAIR_UNIT, group_sum, prepare_cube

    cube = edge_cube(1_500, 3)
    qc.save(cube, tmp_path / "c.nc")
    eager, _ = prepare_cube(cube, ["n_relevant"], "test")
    relevant, correct = eager["n_relevant"], eager["nn_correct"]
    present = relevant >= 0
    known = present & (eager["n_candidates"] >= 0)
    r1 = relevant == 1
    expected = {
        "ap_sum": group_sum(eager["ap"].where(r1).fillna(0), "scene"),
        "n1": group_sum(r1, "scene"),
        "n0": group_sum(relevant == 0, "scene"),
        "correct": group_sum(correct == 1, PAIR_UNIT),
        "counted": group_sum(correct >= 0, PAIR_UNIT),
        "matches": group_sum(present & (eager["nn_mutual"] == 1), PAIR_UNIT),
        "candidates": group_sum(eager["n_candidates"].where(known, 0), PAIR_UNIT),
        "known": group_sum(known, PAIR_UNIT),
        "ranked": (r1 & (eager["better"] >= 0)).sum("query"),
    }
    with qc.open_cube(tmp_path / "c.nc", chunks={"query": 400}) as lazy:
        prepared, _ = prepare_cube(lazy, ["n_relevant"], "test")
        sums = query_sums(prepared, [1, 3], "expected")
        for name, values in expected.items():
            found = getattr(sums, name).compute()
            assert found.dims == values.dims, name
            for dim in values.dims:  # the same groups in the same order
                assert found[dim].values.tolist() == values[dim].values.tolist(), name
            if values.dtype.kind == "f":
                np.testing.assert_allclose(found.values, values.values, rtol=1e-12, err_msg=name)
            else:
                assert found.dtype == np.int64, name
                np.testing.assert_array_equal(found.values, values.values, err_msg=name)
        hits = sums.hits.compute()
        b = eager["better"].where(r1, -1).values
        for kk in (1, 3):  # expected policy: a tied query hits with (k - b) / (t + 1), clipped
            t = np.where(b >= 0, eager["ties"].values, 0)
            share = np.clip((kk - b) / (t + 1), 0, 1)
            np.testing.assert_allclose(
                hits.sel(k=kk).values, np.where(b >= 0, share, 0).sum(axis=1), rtol=1e-12
            )


def test_the_one_pass_without_queries_with_a_failed_descriptor_and_zero_division(tmp_path):
    cube = random_cube(500, 1)
    qc.save(cube, tmp_path / "c.nc")
    status = ("descriptor", np.array(["ok", "error", "ok"]))
    with qc.open_cube(tmp_path / "c.nc", chunks={"query": 100}) as lazy:
        for part in (slice(0, 0), slice(0, 1)):  # no query; one query, no scene with R = 1
            expected = metric_set(cube.isel(query=part))
            assert_same_metrics(expected, metric_set(lazy.isel(query=part)).compute())
        failed = metric_set(lazy.assign(status=status)).compute()
        assert_same_metrics(metric_set(cube.assign(status=status)), failed)
        assert int(failed["total_queries_processed"].sel(descriptor="b")) == 0
        eager = metric_set(cube.isel(query=slice(0, 1)), zero_division=0)
        found = metric_set(lazy.isel(query=slice(0, 1)), zero_division=0).compute()
        assert_same_metrics(eager, found)


def test_a_client_that_connects_after_the_timeout_is_closed(monkeypatch):
    """The command gave up waiting (a one-line error); a connection made later in the
    background thread is closed, not left as distributed's default client."""
    import time

    class Late:
        closed = False

        def close(self):
            Late.closed = True

    def connect():
        time.sleep(0.3)
        return Late()

    monkeypatch.setattr(dask_options, "CONNECT_TIMEOUT_S", -4.95)  # gives up after 0.05 s
    with pytest.raises(TimeoutError, match="no dask scheduler answered"):
        dask_options._connected(connect)
    for _ in range(100):
        if Late.closed:
            break
        time.sleep(0.02)
    assert Late.closed
