"""The metadata strings in their new home: metricalc.store.metadata, still public as
metricalc.format_metadata / metricalc.parse_metadata (their full tests are in test_metrics.py)."""

from __future__ import annotations

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
    assert summary["true_map_micro"] == 0.75 and summary["total_queries_excluded"] == 1
    with pytest.raises(InvalidInputError, match="'nope' is not in metrics"):
        metadata.metadata_for(metrics, None, "nope")
    with pytest.raises(InvalidInputError, match="scenes must be a Dataset"):
        metadata.metadata_for(metrics, scenes["true_map"], "sift")
