"""Small checks shared by several test modules."""

from __future__ import annotations

import re


def assert_balanced_latex(latex: str) -> None:
    """Every ``\\begin{x}`` closed by its ``\\end{x}`` in order, and the unescaped braces
    balanced (never more closed than opened)."""
    stack = []
    for kind, name in re.findall(r"\\(begin|end)\{([^}]*)\}", latex):
        if kind == "begin":
            stack.append(name)
        else:
            assert stack.pop() == name
    assert stack == []
    depth = 0
    for char in re.sub(r"\\[{}]", "", latex):
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
