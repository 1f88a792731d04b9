"""Old module paths of the packages that moved into metricalc/benchmarks/ still import, as the
very module at the new path (docs/architecture.md, "One benchmark, one room")."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from metricalc.moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_module_path_is_the_moved_module(old, new):
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new


def test_every_moved_module_exists_and_every_old_path_is_gone_from_the_tree():
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        package, name = old.rsplit(".", 1)
        folders = importlib.import_module(package).__path__
        assert not any((Path(folder) / f"{name}.py").exists() for folder in folders), old


def test_old_paths_in_a_fresh_process_the_ways_users_wrote_them():
    code = (
        "import pickle\n"
        "import metricalc.patches.files as f\n"
        "from metricalc.detection.coco import load_ground_truth\n"
        "from metricalc.pose import estimation\n"
        "import metricalc.benchmarks.hpatches_patches.files as g\n"
        "assert f is g and pickle.loads(pickle.dumps(f.read_benchmark)) is g.read_benchmark\n"
        "assert estimation.__name__ == 'metricalc.benchmarks.twoview.estimation'\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")


def test_a_name_that_never_existed_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("metricalc.patches.no_such_module")
