"""The metadata strings in their new home: metricalc.store.metadata, still public as
metricalc.format_metadata / metricalc.parse_metadata (their full tests are in test_metrics.py)."""

from __future__ import annotations

import numpy as np
import pytest

import metricalc as mc
from metricalc.datasets import example_cube
from metricalc.errors import InvalidInputError
from metricalc.store import metadata


def test_public_names_are_the_store_functions():
    assert mc.format_metadata is metadata.format_metadata is mc.store.format_metadata
    assert mc.parse_metadata is metadata.parse_metadata is mc.store.parse_metadata
    assert "format_metadata" not in vars(mc.metrics) and "SCENE_KEYS" not in vars(mc.metrics)


def test_metadata_without_scenes():
    cube = example_cube()
    metrics, scenes = mc.metric_set(cube), mc.scene_metrics(cube)
    full = metadata.metadata_for(metrics, scenes, "sift")
    summary = metadata.metadata_for(metrics, None, "sift")
    # the same keys minus the four per-scene keys of the one scene i_x
    assert set(full) - set(summary) == {f"i_x_{k}" for k in metadata.SCENE_KEYS}
    assert all(full[k] == summary[k] for k in summary)
    assert summary["metricalc_true_map_micro"] == 0.75 and summary["total_queries_excluded"] == 1
    with pytest.raises(InvalidInputError, match="'nope' is not in metrics"):
        metadata.metadata_for(metrics, None, "nope")
    with pytest.raises(InvalidInputError, match="scenes must be a Dataset"):
        metadata.metadata_for(metrics, scenes["true_map"], "sift")


# The keys DescriptorWorkbench's result recording writes into its metadata string
# (cli/experiment_runner/result_recording.cpp of F-Sossi/DescriptorWorkbench, and the throughputs
# of its older cli/experiment_runner.cpp; read by hand): run information, timings, counts,
# precision/recall at 1, 5, 10, r0_rate, and four keys per scene with at least one R = 1 query
# (it skips a scene whose AP list is empty).
WORKBENCH_KEYS = {
    "success", "error_message", "experiment_name", "execution_device", "descriptor_dimension",
    "detect_time_ms", "compute_time_ms", "match_time_ms", "total_images", "total_keypoints",
    "images_per_sec", "kps_per_sec",
    "total_queries_processed", "total_queries_excluded", "r0_rate",
    *(f"{p}_at_{k}" for p in ("precision", "recall") for k in (1, 5, 10)),
}
WORKBENCH_SCENE_SUFFIXES = ("_true_map", "_true_map_with_zeros", "_query_count", "_excluded_count")


def without_r1_queries(cube, descriptor: str, scene: str):
    """``cube`` with every R = 1 query of ``scene`` of ``descriptor`` turned into an R = 0 one."""
    d = cube["descriptor"].values.tolist().index(descriptor)
    hit = np.flatnonzero((cube["scene"].values == scene) & (cube["n_relevant"].values[d] == 1))
    n_relevant, ap = cube["n_relevant"].values.copy(), cube["ap"].values.copy()
    n_relevant[d, hit], ap[d, hit] = 0, np.nan
    return cube.assign(
        n_relevant=(cube["n_relevant"].dims, n_relevant), ap=(cube["ap"].dims, ap)
    )


def test_only_workbench_keys_under_workbench_names():
    from tests.metrics.test_metrics import make_cube

    cube = without_r1_queries(make_cube(), "beta", "v_b")
    metrics, scenes = mc.metric_set(cube), mc.scene_metrics(cube)
    meta = metadata.metadata_for(metrics, scenes, "beta")
    ours = {k for k in meta if k.startswith("metricalc_")}
    theirs = set(meta) - ours
    scene_keys = {k for k in theirs if k.startswith(("i_", "v_"))}
    assert theirs - scene_keys <= WORKBENCH_KEYS
    # v_b has no R = 1 query of beta: DescriptorWorkbench writes no key for it
    assert scene_keys == {f"i_a{s}" for s in WORKBENCH_SCENE_SUFFIXES}
    assert meta["i_a_query_count"] == 4 and meta["i_a_excluded_count"] == 1
    # what DescriptorWorkbench keeps elsewhere (results columns) or drops is metricalc's own
    assert ours == {
        "metricalc_true_map_micro", "metricalc_true_map_macro_by_scene",
        "metricalc_processing_time_ms", "metricalc_v_b_excluded_count",
    }
    assert meta["metricalc_v_b_excluded_count"] == 3
    assert meta["total_queries_excluded"] == 1 + 3
    assert meta["metricalc_true_map_micro"] == pytest.approx(
        float(np.nanmean(cube["ap"].sel(descriptor="beta").values)), abs=5e-7
    )
    assert mc.parse_metadata(mc.format_metadata(meta)) == meta


def test_metricalc_strings_import_with_their_r0_scenes(tmp_path):
    from tests.metrics.test_metrics import make_cube

    cube = without_r1_queries(make_cube(), "beta", "v_b")
    meta = metadata.metadata_for(mc.metric_set(cube), mc.scene_metrics(cube), "beta")
    text, value = mc.format_metadata(meta), meta["i_a_true_map"]  # the only scene: both means
    path = tmp_path / "export.csv"
    path.write_text(
        "experiment_id,descriptor_type,true_map_macro,true_map_micro,metadata\n"
        f"7,beta,{value},{value},{text}\n"
    )
    export = mc.store.read_workbench(path)
    # the totals agree with the scenes: v_b is there, with its 3 R = 0 queries
    assert export.cube is not None and export.mismatches.empty
    scenes = export.cube.sel(descriptor="beta")
    assert scenes["scene"].values.tolist() == ["i_a", "v_b"]
    assert scenes["query_count"].values.tolist() == [4, 0]
    assert scenes["excluded_count"].values.tolist() == [1, 3]


def test_metadata_keys_of_the_real_export_are_workbench_keys():
    """The real export's strings hold only the keys listed above, the list the tests above
    hold metricalc's DescriptorWorkbench-named keys to."""
    import pandas as pd

    from tests.data_files import DATA

    path = DATA / "descriptorworkbench-export" / "descriptor_performance_analysis.csv"
    for text in pd.read_csv(path)["metadata"]:
        keys = set(mc.parse_metadata(text))
        scene_keys = {k for k in keys if k.endswith(WORKBENCH_SCENE_SUFFIXES)}
        assert keys - scene_keys <= WORKBENCH_KEYS
