"""Small checks and stubs shared by several test modules."""

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


def reference_multipletests(pvalues, method: str):
    """``statsmodels.stats.multitest.multipletests(pvalues, method=method)[1]``, with the objects
    alive now frozen (:func:`gc.freeze`) during the call: its Holm branch ends with a full
    ``gc.collect()``, up to a second in a process holding a whole test session. Same values."""
    import gc

    from statsmodels.stats.multitest import multipletests

    if gc.get_freeze_count():  # frozen by someone else: leave the collector alone
        return multipletests(pvalues, method=method)[1]
    gc.freeze()
    try:
        return multipletests(pvalues, method=method)[1]
    finally:
        gc.unfreeze()


def reading_error(path, text: str, reader) -> str:
    """The message of the InvalidInputError ``reader(path)`` must raise once ``path`` holds
    ``text``."""
    import pytest

    from metricalc.errors import InvalidInputError

    path.write_text(text)
    with pytest.raises(InvalidInputError) as error:
        reader(path)
    return str(error.value)


class IdentityScene:
    """A 200 x 200 scene for ``keypoints.evaluate`` whose images 2..6 are image 1 under the
    identity homography."""

    def __init__(self, name: str = "i_hand", split: str = "illumination") -> None:
        self.name, self.split = name, split

    def homography(self, k: int):
        import numpy as np

        return np.eye(3)

    def shape(self, k: int) -> tuple[int, int]:
        return (200, 200)
