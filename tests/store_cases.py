"""Inputs shared by the tests of metricalc.store: a random QueryCube built from a long table (so
that expected values can be computed from the table with pandas, independently of metric_set),
and the real DescriptorWorkbench export."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import metricalc as mc

WORKBENCH = Path(__file__).parent / "data" / "descriptorworkbench-export"
PERFORMANCE = WORKBENCH / "descriptor_performance_analysis.csv"
SUMMARY = WORKBENCH / "experiment_summary_full.csv"

DESCRIPTORS = ("sift", "orb", "brief")
SCENES = ("i_a", "i_b", "v_c", "v_d")


def real(path: Path) -> Path:
    """``path`` if the real export is there, else skip the test saying where it was looked for."""
    if not path.exists():
        pytest.skip(f"real DescriptorWorkbench export not available at {path}")
    return path


def long_table(seed: int = 0, *, queries: int = 25) -> pd.DataFrame:
    """Per-query results of three descriptors on four scenes (two pairs each): random ranks,
    about 20 % of the queries without a relevant item (better = ties = -1)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in DESCRIPTORS:
        for s in SCENES:
            for pair in ("1-2", "1-3"):
                for q in range(queries):
                    relevant = rng.random() < 0.8
                    better = int(rng.integers(0, 20)) if relevant else -1
                    ties = int(rng.integers(0, 3)) if relevant else -1
                    rows.append(
                        {
                            "descriptor": d,
                            "scene": s,
                            "pair": pair,
                            "query": q,
                            "better": better,
                            "ties": ties,
                            "nn_correct": int(relevant and better == 0),
                            "processing_time_ms": 100.0 + DESCRIPTORS.index(d),
                        }
                    )
    return pd.DataFrame(rows)


def make_cube(seed: int = 0, *, broken: bool = False) -> xr.Dataset:
    """The QueryCube of :func:`long_table`; with ``broken``, a fourth descriptor that failed."""
    cube = mc.cube.from_dataframe(long_table(seed), attrs={"keypoints": "locked:sift"})
    if broken:
        failed = mc.cube.error_record("broken", "RuntimeError: no keypoints", attrs=cube.attrs)
        cube = mc.cube.combine([cube, failed])
    return cube


def expected_ap(better: int, ties: int) -> float:
    """AP of one relevant item under the 'expected' tie policy (mean of 1/r over tied ranks)."""
    return sum(1 / r for r in range(better + 1, better + ties + 2)) / (ties + 1)


def expected_summaries(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per descriptor (micro, macro mAP) and per (descriptor, scene) (true_map, with zeros,
    query and excluded counts), computed from the long table with pandas."""
    t = table.copy()
    t["r1"] = t["better"] >= 0
    t["ap"] = [
        expected_ap(b, k) if b >= 0 else np.nan for b, k in zip(t.better, t.ties, strict=True)
    ]
    per_scene = t.groupby(["descriptor", "scene"]).agg(
        ap_sum=("ap", "sum"), query_count=("r1", "sum"), n=("r1", "size")
    )
    per_scene["excluded_count"] = per_scene["n"] - per_scene["query_count"]
    per_scene["true_map"] = per_scene["ap_sum"] / per_scene["query_count"]
    per_scene["true_map_with_zeros"] = per_scene["ap_sum"] / per_scene["n"]
    micro = t.groupby("descriptor")["ap"].mean()  # NaN (R = 0) skipped
    macro = per_scene["true_map"].groupby("descriptor").mean()
    scene_names = per_scene.index.get_level_values("scene")
    split_macro = {  # DescriptorWorkbench: the mean over the split's scenes of their mAP
        name: per_scene["true_map"][scene_names.str.startswith(prefix)].groupby("descriptor").mean()
        for name, prefix in (("viewpoint_map", "v_"), ("illumination_map", "i_"))
    }
    per_descriptor = pd.DataFrame({"true_map_micro": micro, "true_map_macro": macro, **split_macro})
    return per_descriptor, per_scene


def tampered_copy(tmp_path: Path) -> tuple[Path, dict[int, set[str]]]:
    """The real export with four edits; returns the file and the checks that must fail by
    line. Line 20 is changed within the tolerance and must not be reported."""
    with real(PERFORMANCE).open(newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    macro, meta = header.index("true_map_macro"), header.index("metadata")
    rows[5 - 1][macro] = repr(float(rows[5 - 1][macro]) + 3e-6)
    rows[20 - 1][macro] = repr(float(rows[20 - 1][macro]) + 3e-7)
    text = rows[10 - 1][meta]
    old = re.search(r"v_wall_true_map=([0-9.]+);", text)[1]
    rows[10 - 1][meta] = text.replace(
        f"v_wall_true_map={old};", f"v_wall_true_map={float(old) + 0.01:.6f};"
    )
    text = rows[30 - 1][meta]
    old = re.search(r"i_dome_query_count=([0-9]+);", text)[1]
    rows[30 - 1][meta] = text.replace(
        f"i_dome_query_count={old};", f"i_dome_query_count={int(old) + 1};"
    )
    path = tmp_path / "tampered.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    expected = {
        5: {"true_map_macro"},
        10: {"true_map_macro", "true_map_micro", "true_map_micro_with_zeros"},
        # one more query of weight m_dome moves the micro mAPs by ~(m_dome - micro) / 1e5
        30: {"total_queries_processed", "true_map_micro", "true_map_micro_with_zeros"},
    }
    return path, expected
