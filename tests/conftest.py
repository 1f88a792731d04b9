"""Shared test helpers: random labelled score lists with controllable ties."""

from __future__ import annotations

import os

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


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``-n``), one thread of BLAS and OpenCV per worker: the workers already
    share the cores, and more threads per worker only make them wait for each other."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        import cv2
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
        cv2.setNumThreads(1)


@pytest.fixture(autouse=True)
def _pipe_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test sees a terminal table as wide as in a pipe (120 columns): ``COLUMNS`` unset,
    whatever the terminal pytest runs in (pytest-xdist's workers set it to the terminal's
    width). A test that wants a width sets ``COLUMNS`` itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


# ---------------------------------------------------------------------------------------------
# Headless Chromium for the tests of HTML pages (reports, inspect)
# ---------------------------------------------------------------------------------------------

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
"""Executable names looked up on PATH (Debian's package installs /usr/bin/chromium)."""

CHROMIUM_ARGS = [
    "--no-sandbox",  # the tests may run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # the machine has no network: no background requests
    "--disable-component-update",
    "--disable-sync",
]


def chromium_executable() -> str | None:
    """``$METRICALC_CHROMIUM`` if set, else the first Chromium found on PATH, else None."""
    import os
    import shutil

    chosen = os.environ.get("METRICALC_CHROMIUM")
    if chosen:
        return chosen
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium driven by Playwright; the test is skipped, saying why, without one.

    ``.ci/run`` installs Debian's ``chromium``; Playwright drives that binary
    (``executable_path``), so no browser download is needed.
    """
    executable = chromium_executable()
    if executable is None:
        pytest.skip(
            "no Chromium found (install Debian's 'chromium' package, or set METRICALC_CHROMIUM "
            "to a Chromium binary): the HTML page cannot be opened in a browser"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install '.[test]')")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser):
    """A fresh browser page (its own context: no state shared between tests)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


# ---------------------------------------------------------------------------------------------
# A random QueryCube (report tests): descriptors of known relative quality
# ---------------------------------------------------------------------------------------------


def _random_query_cube(
    quality: dict[str, float],
    *,
    scenes: tuple[str, ...] = tuple(f"{t}_{k}" for t in "iv" for k in "abcdefgh"),
    per_pair: int = 8,
    seed: int = 0,
    keypoints: str = "locked:sift",
):
    """A validated QueryCube over identical queries (locked keypoints): ``per_pair`` queries in
    each image pair 1-2 .. 1-6 of each scene (8 illumination and 8 viewpoint scenes: enough
    for tests over scenes, the default independent unit). A descriptor of higher ``quality``
    (0..1) ranks
    the relevant item better (fewer ``better``), matches correctly more often and has smaller
    ratios; 10 % of the queries have no ground truth (R = 0)."""
    from metricalc import cube as qc

    rng = np.random.default_rng(seed)
    pairs = [f"1-{k}" for k in range(2, 7)]
    scene = np.repeat(scenes, len(pairs) * per_pair)
    pair = np.tile(np.repeat(pairs, per_pair), len(scenes))
    n = scene.size
    coords = {
        "scene": scene,
        "pair": pair,
        "keypoint_set": np.full(n, "sift"),
        "query_keypoint": np.tile(np.arange(per_pair), n // per_pair),
    }
    r0 = rng.random(n) < 0.1
    names = ("better", "ties", "n_relevant", "nn_correct", "nn_distance", "nn2_distance")
    data: dict[str, list] = {k: [] for k in (*names, "nn_error")}
    for q in quality.values():
        better = rng.geometric(0.25 + 0.7 * q, n) - 1
        ties = (rng.random(n) < 0.1).astype(np.int64)
        correct = (better == 0) & (ties == 0) & ~r0
        nn = rng.random(n) + 0.1
        ratio = np.where(correct, rng.beta(2, 2 + 6 * q, n), rng.beta(5, 2, n))
        data["better"].append(np.where(r0, -1, better))
        data["ties"].append(np.where(r0, -1, ties))
        data["n_relevant"].append(np.where(r0, 0, 1))
        data["nn_correct"].append(correct.astype(np.int8))
        data["nn_distance"].append(nn)
        data["nn2_distance"].append(nn / np.maximum(ratio, 1e-3))
        data["nn_error"].append(np.where(correct, rng.random(n) * 2, rng.random(n) * 30))
    attrs = {**qc.DEFAULT_ATTRS, "keypoints": keypoints, "distance": "l2", "dataset": "random"}
    arrays = {k: np.array(v) for k, v in data.items()}
    return qc.new_cube(list(quality), coords, arrays, attrs=attrs)


@pytest.fixture(scope="session")
def make_query_cube():
    """The builder of a random QueryCube of known descriptor quality (``_random_query_cube``)."""
    return _random_query_cube


# ---------------------------------------------------------------------------------------------
# The built-in benchmark of the quick scenes, its features and cubes: made once per session
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def quick_sequences(tmp_path_factory):
    """The synthetic benchmark of ``QUICK_SCENES`` (seed 0, default size), generated once per
    session. Read-only: a test that changes files makes its own copy."""
    from metricalc.datasets import QUICK_SCENES, make_synthetic_dataset

    return make_synthetic_dataset(tmp_path_factory.mktemp("quick_benchmark"), scenes=QUICK_SCENES)


@pytest.fixture(scope="session")
def quick_locked_features(quick_sequences):
    """SIFT and ORB on SIFT's keypoints of :func:`quick_sequences` (``extract`` defaults)."""
    from metricalc.keypoints import extract

    return extract(quick_sequences, ("sift", "orb"), locked="sift")


@pytest.fixture(scope="session")
def quick_native_features(quick_sequences):
    """SIFT and ORB on their own keypoints of :func:`quick_sequences` (``extract`` defaults)."""
    from metricalc.keypoints import extract

    return extract(quick_sequences, ("sift", "orb"))


@pytest.fixture(scope="session")
def quick_locked_cube(quick_sequences, quick_locked_features):
    """The cube of :func:`quick_locked_features` (``keypoints="locked:sift"``, no Bojanic)."""
    from metricalc.keypoints import evaluate

    return evaluate(quick_sequences, quick_locked_features, keypoints="locked:sift", bojanic=False)


@pytest.fixture(scope="session")
def quick_native_cube(quick_sequences, quick_native_features):
    """The cube of :func:`quick_native_features` (``keypoints="native"``, no Bojanic)."""
    from metricalc.keypoints import evaluate

    return evaluate(quick_sequences, quick_native_features, keypoints="native", bojanic=False)


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the keypoints mode of every call of metricalc.keypoints.evaluate by the keypoint
    pipeline (the minutes a cache hit saves)."""
    from metricalc.keypoints import pipeline

    calls: list[str] = []
    real = pipeline.evaluate

    def counted(*args, **kwargs):
        calls.append(kwargs["keypoints"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "evaluate", counted)
    return calls
