"""from_dataframe against a slow, obvious construction (a Python loop over the rows), on random
tables; the grouping of rows into queries against the lexsort it replaces."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from metricalc import cube as qc
from metricalc.cube.identity import _groups, _row_groups
from metricalc.errors import InvalidInputError

SENTINELS = {name: field.sentinel for name, field in qc.QUERY_VARIABLES.items()}
SCENES = ["v_boat", "i_dome", "coffee", "v_bark", "i_zz"]
PAIRS = ["1-2", "1-10", "1-9", "2-3", ""]


def slow_ap(better: int, ties: int, policy: str) -> float:
    """AP of the one relevant item behind ``better`` better and ``ties`` tied candidates."""
    if policy == "expected":
        return sum(1 / r for r in range(better + 1, better + ties + 2)) / (ties + 1)
    extra = {"optimistic": 0, "pessimistic": ties, "workbench": (ties + 1) // 2}[policy]
    return 1 / (1 + better + extra)


def pair_key(pair: str) -> tuple[int, int, str]:
    match = re.fullmatch(r"(\d+)-(\d+)", pair)
    return (int(match[1]), int(match[2]), pair) if match else (-1, -1, pair)


def split(scene: str) -> str:
    return {"i_": "illumination", "v_": "viewpoint"}.get(scene[:2], "other")


def integer(value: Any) -> int:
    return -1 if value is None or value is pd.NA or math.isnan(value) else int(value)


def slow_cube(rows: list[dict[str, Any]], keypoints: str, policy: str) -> dict[str, Any]:
    """The cube's values, built row by row."""
    descriptors = list(dict.fromkeys(row["descriptor"] for row in rows))
    cells: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        kset = row.get("keypoint_set") or {"native": row["descriptor"]}.get(
            keypoints, keypoints.removeprefix("locked:")
        )
        identity = (row["scene"], row.get("pair", ""), kset, row["query"])
        cells[row["descriptor"], identity] = row
        first.setdefault(identity, row)
    queries = sorted(first, key=lambda q: (q[0], pair_key(q[1]), q[2], q[3]))
    out: dict[str, Any] = {"descriptor": descriptors}
    out["scene"], out["pair"], out["keypoint_set"], out["query_keypoint"] = (
        [q[i] for q in queries] for i in range(4)
    )
    out["split"] = [first[q].get("split") or split(q[0]) for q in queries]
    for name in ("x", "y"):
        out[name] = [first[q].get(name, math.nan) for q in queries]
    for name in qc.QUERY_VARIABLES:
        grid = []
        for d in descriptors:
            line = []
            for q in queries:
                row = cells.get((d, q))
                line.append(SENTINELS[name] if row is None else slow_value(row, name, policy))
            grid.append(line)
        out[name] = grid
    return out


def slow_value(row: dict[str, Any], name: str, policy: str) -> Any:
    """One variable of a row that is in the table."""
    if "better" in row:
        better, ties = integer(row["better"]), integer(row["ties"])
        if name == "n_relevant":
            return int(better >= 0)
        if name == "ap":
            return slow_ap(better, ties, policy) if better >= 0 else math.nan
    elif name == "n_relevant":
        return int(not math.isnan(row["ap"]))
    if name not in row:
        return SENTINELS[name]
    if isinstance(SENTINELS[name], int):
        return integer(row[name])
    return row[name]


def random_rows(rng: np.random.Generator, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of a random long table (shuffled; each (descriptor, query) at most once)."""
    descriptors = [f"d{i}" for i in range(rng.integers(1, 4))]
    pairs = PAIRS if options["pair"] else [""]
    queries = sorted(
        {
            (str(rng.choice(SCENES)), str(rng.choice(pairs)), int(rng.integers(0, 40)))
            for _ in range(rng.integers(1, 60))
        }
    )
    position = {q: (float(rng.random() * 100), float(rng.random() * 100)) for q in queries}
    kset = {q: str(rng.choice(["sift", "orb"])) for q in queries}
    rows = []
    for d in descriptors:
        for q in queries:
            if rng.random() < 0.3:
                continue  # no row: the cell is missing
            ranked = rng.random() < 0.8
            better, ties = (
                (int(rng.integers(0, 30)), int(rng.integers(0, 4))) if ranked else (-1, -1)
            )
            row: dict[str, Any] = {"descriptor": d, "scene": q[0], "query": q[2]}
            if options["pair"]:
                row["pair"] = q[1]
            if options["rank"]:
                row["better"], row["ties"] = better, ties
            else:
                row["ap"] = slow_ap(better, ties, "expected") if ranked else math.nan
            if options["positions"]:
                row["x"], row["y"] = position[q]
            if options["split"]:
                row["split"] = split(q[0])
            if options["keypoint_set"]:
                row["keypoint_set"] = kset[q]
            row["nn_correct"] = int(ranked and better == 0)
            row["nn_distance"] = float(rng.random())
            row["n_candidates"] = int(rng.integers(0, 100))
            rows.append(row)
    rng.shuffle(rows)  # type: ignore[arg-type]
    return rows


def as_frame(rows: list[dict[str, Any]], rng: np.random.Generator) -> pd.DataFrame:
    """The rows as a table with a random string representation and integer NaNs."""
    df = pd.DataFrame(rows)
    df.index = [f"r{i}" for i in rng.permutation(len(df))]
    kind = rng.integers(0, 3)
    for column in ("descriptor", "scene", "pair", "keypoint_set", "split"):
        if column in df:
            df[column] = df[column].astype(["str", "object", "category"][kind])
    if "better" in df and rng.random() < 0.5:  # R = 0 as NaN: float or nullable integers
        missing = df["better"] == -1
        dtype = "float64" if rng.random() < 0.5 else "Int64"
        for column in ("better", "ties"):
            df[column] = df[column].astype(dtype).mask(missing)
    return df


@pytest.mark.parametrize("seed", range(40))
def test_from_dataframe_matches_a_row_by_row_construction(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    if seed % 3 == 0:  # the AP grid computed in several slices
        monkeypatch.setattr("metricalc.cube.frame.CHUNK_ELEMENTS", 3)
    options = {
        k: bool(rng.random() < 0.5) for k in ("pair", "rank", "positions", "split", "keypoint_set")
    }
    keypoints = str(rng.choice(["external", "native", "locked:sift"]))
    policy = str(rng.choice(["expected", "optimistic", "pessimistic", "workbench"]))
    rows = random_rows(rng, options)
    c = qc.from_dataframe(as_frame(rows, rng), attrs={"keypoints": keypoints}, tie_policy=policy)
    expected = slow_cube(rows, keypoints, policy)
    assert qc.validate(c) is c
    for name, values in expected.items():
        got = c[name].values
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, np.array(values, float), rtol=1e-12, err_msg=name)
        else:
            assert got.tolist() == values, name
        if name in qc.QUERY_VARIABLES:
            assert got.dtype == qc.QUERY_VARIABLES[name].dtype, name


@pytest.mark.parametrize("seed", range(10))
def test_row_groups_equal_lexsort_groups(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    # 7 and 2**40: one folded int64 key; 2**62 (the product reaches 2**62): the lexsort path
    sizes = [int(s) for s in rng.integers(1, 6, 3)] + [[7, 2**40, 2**62][seed % 3]]
    columns = [(rng.integers(0, size, n), size) for size in sizes]
    keys = np.column_stack([c for c, _ in columns]).reshape(-1, 4)
    group, first = _row_groups(columns)
    expected_group, expected_first = _groups(keys)
    np.testing.assert_array_equal(group, expected_group)
    np.testing.assert_array_equal(first, expected_first)


def test_from_dataframe_keeps_no_reference_to_the_table():
    df = pd.DataFrame(
        {
            "descriptor": ["d", "d"],
            "scene": ["s", "s"],
            "query": [0, 1],
            "better": [0, 2],
            "ties": [0, 1],
        }
    )
    c = qc.from_dataframe(df)
    df.loc[0, "better"] = 5
    assert c.better.values.tolist() == [[0, 2]]


def test_new_cube_copies_unless_told_not_to():
    better = np.array([[0, 2]])
    coords = {"scene": ["s", "s"], "pair": ["", ""], "keypoint_set": ["k", "k"]}
    coords["query_keypoint"] = [0, 1]
    data = {"better": better, "ties": better}
    kept = qc.new_cube(["d"], coords, data, attrs=qc.DEFAULT_ATTRS)
    shared = qc.new_cube(["d"], coords, data, attrs=qc.DEFAULT_ATTRS, copy=False)
    assert not np.shares_memory(kept.better.values, better)
    assert np.shares_memory(shared.better.values, better)


def test_validate_finds_a_wrong_ap_in_a_later_slice(monkeypatch):
    monkeypatch.setattr("metricalc.cube.checks.CHUNK_ELEMENTS", 3)
    n = 10
    coords = {"scene": ["s"] * n, "pair": [""] * n, "keypoint_set": ["k"] * n}
    better = np.arange(n)[None, :]
    c = qc.new_cube(
        ["d"],
        {**coords, "query_keypoint": np.arange(n)},
        {"better": better, "ties": 0 * better},
        attrs=qc.DEFAULT_ATTRS,
    )
    wrong = c.copy(deep=True)
    wrong.ap.values[0, 7] = 0.5
    with pytest.raises(InvalidInputError, match=r"'ap' must equal ap_from_rank_stats.*\(0, 7\)"):
        qc.validate(wrong)
