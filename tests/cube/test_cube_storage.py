"""The string coordinates over ``query`` are stored as compressed character arrays: they read
back identical (non-ASCII, empty, eagerly and lazily), the file is much smaller than with
variable-length strings, and a file written the old way still opens."""

from __future__ import annotations

import numpy as np
import xarray as xr

from metricalc import cube as qc


def many_queries(n: int = 20_000) -> xr.Dataset:
    rng = np.random.default_rng(0)
    scenes = np.array(["v_café <b>", "i_ñandú", "v_x"])[rng.integers(0, 3, n)]
    return qc.new_cube(
        ["sift", "orb"],
        {
            "scene": scenes,
            "pair": np.where(rng.random(n) < 0.1, "", "1-2"),
            "keypoint_set": ["sift"] * n,
            "query_keypoint": np.arange(n),
        },
        {"ap": rng.random((2, n))},
        attrs=qc.DEFAULT_ATTRS,
    )


def test_strings_round_trip_and_take_little_space(tmp_path):
    cube = many_queries()
    qc.save(cube, tmp_path / "new.nc")
    back = qc.open_cube(tmp_path / "new.nc")
    xr.testing.assert_identical(back, cube)
    assert back["scene"].dtype.kind == "U" and back["pair"].dtype.kind == "U"
    for chunks in ({}, "auto"):
        lazy = qc.open_cube(tmp_path / "new.nc", chunks=chunks)
        assert lazy["scene"].dtype.kind == "U" and lazy["scene"].chunks is not None
        xr.testing.assert_identical(lazy.compute(), cube)
        lazy.close()
    # the old layout: every string variable-length
    old = cube.copy()
    for variable in old.variables.values():
        variable.encoding = {}
    encoding = {n: {"dtype": str} for n, v in old.variables.items() if v.dtype.kind == "U"}
    old.to_netcdf(tmp_path / "old.nc", engine="h5netcdf", encoding=encoding)
    xr.testing.assert_identical(qc.open_cube(tmp_path / "old.nc"), cube)
    assert (tmp_path / "new.nc").stat().st_size < (tmp_path / "old.nc").stat().st_size / 2
