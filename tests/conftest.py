"""Shared test helpers: random labelled score lists with controllable ties."""

from __future__ import annotations

import numpy as np
import pytest


def random_case(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores of length ``n``: random class balance (all-negative and all-positive
    included) and random tie density (from one distinct score to continuous scores)."""
    positive_rate = rng.choice([0.0, 0.02, 0.2, 0.5, 0.9, 1.0])
    y_true = rng.random(n) < positive_rate
    distinct = rng.choice([1, 2, 3, 10, 100, 0])
    if distinct == 0:
        y_score = rng.normal(size=n)
    else:
        y_score = rng.integers(0, distinct, size=n) / max(distinct - 1, 1)
    return y_true, y_score


CASE_SIZES = [1, 2, 3, 4, 5, 7, 10, 20, 50, 100, 500, 1000]


def random_cases(seed: int, count: int, *, large: tuple[int, ...] = (10_000, 100_000)):
    """``count`` random cases of mixed sizes, then one case for each size in ``large``."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield random_case(rng, int(rng.choice(CASE_SIZES)))
    for n in large:
        yield random_case(rng, n)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
