"""``metricalc run hpatches`` records the data as ``metricalc keypoints eval`` does: the content
fingerprint in ``dataset`` (so its cube combines with ``keypoints eval`` cubes of the same
images) and the folder in ``dataset_path``."""

from __future__ import annotations

from metricalc import cube as cubes
from metricalc.experiment import run
from metricalc.keypoints.sequences import dataset_fingerprint, load_sequences
from metricalc.plotting.labels import dataset_name

QUICK = ["data.quick=true", "data.size=192", "model.max_keypoints=100"]


def test_the_run_cube_records_fingerprint_and_folder(tmp_path):
    result = run("hpatches", "sift", overrides=QUICK, outputs=tmp_path, db=False)
    assert result.status == "ok", result.error
    cube = cubes.open_cube(tmp_path / "results" / "hpatches" / "sift" / "results.h5")
    folder = tmp_path / "data" / "synthetic" / "seed0_size192"
    assert cube.attrs["dataset_path"] == str(folder)
    assert cube.attrs["dataset"] == dataset_fingerprint(load_sequences(folder))
    assert dataset_name(cube.attrs) == str(folder)  # what a report caption shows
