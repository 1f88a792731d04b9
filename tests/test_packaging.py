"""Every file the package needs at run time is declared as package data, so a regular
(non-editable) install has it: templates, shipped configs, py.typed."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_non_python_file_of_the_package_is_declared_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["metricalc"]
    package = ROOT / "metricalc"
    shipped = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    assert shipped, "the package has no data files: the test looks in the wrong place"
    undeclared = [f for f in shipped if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not undeclared, f"not in [tool.setuptools.package-data] of pyproject.toml: {undeclared}"
