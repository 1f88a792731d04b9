"""The Python example of README.md runs as written (it is the first thing a newcomer tries).

Blocks fenced ```python run here; blocks fenced ```py need data a test cannot have (HPatches,
a user's table) and are illustrations.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    for block in blocks:
        namespace: dict[str, object] = {}
        exec(compile(block, str(README), "exec"), namespace)  # fails if the example is stale
    # the example's claims: counts along a descending threshold dim, Wilson interval [0.34, 1]
    counts = namespace["c"]
    assert counts.tp.dims == ("threshold",)
    assert (np.diff(counts.cutoff.values) < 0).all()
    ci = namespace["mc"].rate_confint({"tp": 2, "fn": 0}, "tpr")
    assert round(float(ci.low), 2) == 0.34 and float(ci.high) == 1.0


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    commands = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert "metricalc demo" in commands[0]
    assert "pip install" in commands[0]
    assert 'pip install ".[test]"' in commands[1] and "python -m pytest" in commands[1]
