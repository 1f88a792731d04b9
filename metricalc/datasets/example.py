"""A tiny QueryCube for docstring examples and first experiments."""

from __future__ import annotations

import numpy as np
import xarray as xr


def example_cube() -> xr.Dataset:
    """One descriptor ("sift"), one scene ("i_x"), one pair ("1-2"), three queries: R = 1 at
    rank 1 and rank 2, and one R = 0 query (for the docstring examples)."""
    one = {"dims": ("descriptor", "query")}
    return xr.Dataset(
        {
            "better": (one["dims"], np.array([[0, 1, -1]], np.int64)),
            "ties": (one["dims"], np.array([[0, 0, -1]], np.int64)),
            "n_relevant": (one["dims"], np.array([[1, 1, 0]], np.int8)),
            "ap": (one["dims"], np.array([[1.0, 0.5, np.nan]])),
            "nn_correct": (one["dims"], np.array([[1, 0, 0]], np.int8)),
            "nn_distance": (one["dims"], np.array([[1.0, 2.0, 1.0]])),
            "nn2_distance": (one["dims"], np.array([[4.0, 2.0, 2.0]])),
            "nn_error": (one["dims"], np.array([[0.5, 2.0, 4.0]])),
            "nn_mutual": (one["dims"], np.array([[1, 0, 1]], np.int8)),
            "processing_time_ms": ("descriptor", np.array([5.0])),
            "status": ("descriptor", np.array(["ok"], dtype=object)),
            "error": ("descriptor", np.array([""], dtype=object)),
        },
        coords={
            "descriptor": ["sift"],
            "scene": ("query", np.array(["i_x"] * 3, dtype=object)),
            "split": ("query", np.array(["illumination"] * 3, dtype=object)),
            "pair": ("query", np.array(["1-2"] * 3, dtype=object)),
        },
        attrs={"tie_policy": "expected", "ap_method": "ir", "tau_px": 3.0},
    )
