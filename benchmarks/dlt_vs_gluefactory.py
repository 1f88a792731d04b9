"""How far metricalc's DLT is from Glue Factory's (kornia's solver), on HPatches-like matches.

Run: ``python benchmarks/dlt_vs_gluefactory.py`` (a few seconds; ``--cases N``, ``--seed S``)

Glue Factory's ``H_error_dlt`` is ``kornia.geometry.homography.find_homography_dlt(pts0, pts1,
matching_scores)`` on float32 tensors (``gluefactory/eval/utils.py``, ``eval_homography_dlt``).
Neither torch nor kornia is a dependency, so the reference here is a NumPy port of kornia 0.9's
arithmetic (``normalize_points``, the DLT rows, the weighted normal matrix, ``solver="lu"``: an LU
solve of the normal matrix against a vector of ones, ``normalize_transformation``), run in float32
as Glue Factory runs it. The first row compares metricalc's default DLT
(:func:`metricalc.keypoints.homography.dlt_homography`, ``eval.dlt=svd``: root-mean-square
normalisation, smallest singular vector, no weights) with it; the next rows go from one to the
other a step at a time, each row against the one above, to show where the difference comes from:
kornia's mean-distance normalisation (still the SVD), kornia's LU solver (``eval.dlt=kornia``),
the matching-score weights (``eval.dlt=gluefactory``), float32. The last row checks
``kornia_dlt_homography(p0, p1, scores)`` against the port run in float64.

The cases: 640 x 480 images, a homography from the four image corners each moved by up to 0 to 30 %
of the image size (HPatches' viewpoint sequences down to its near-identity illumination ones),
10 to 2000 matches (log-uniform), Gaussian noise of 0.3 to 2 px on the inliers, no outliers in a
third of the cases, 0-10 % in a third and 10-50 % in the rest, and matching scores in [0, 1]
drawn higher for inliers (Beta(5, 2)) than for outliers (Beta(2, 5)).

Printed per row, for all cases and for those without outliers: on how many cases the two
homographies move the image corners apart by more than 1e-6, 0.01, 0.1 and 1 px (the mean corner
distance between the two estimates), its median and 90th percentile, on how many cases the
corner error against the truth falls on different sides of 1, 3 or 5 px, and the DLT AUCs at
1 / 3 / 5 px of the row's estimate.
"""

from __future__ import annotations

import argparse
import itertools
import math

import cv2
import numpy as np

from metricalc.keypoints import homography as hg

SHAPE = (480, 640)  # height, width
AUC_PX = (1.0, 3.0, 5.0)


# --------------------------------------------------------------------------------------------
# the reference: kornia 0.9 find_homography_dlt(points1, points2, weights, solver="lu")
# --------------------------------------------------------------------------------------------


def kornia_normalize_points(points: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """kornia ``normalize_points(points, weights=w)``: weighted centroid, weighted mean radius."""
    dtype = points.dtype
    total = w.sum()
    w = w if total > 0 else np.ones_like(w)
    x_mean = ((points * w[:, None]).sum(0) / w.sum()).astype(dtype)
    centered = points - x_mean
    radii = np.sqrt((centered * centered).sum(-1))
    mean_radius = ((radii * w).sum() / w.sum()).astype(dtype)
    scale = (dtype.type(math.sqrt(2.0)) / (mean_radius + dtype.type(1e-8))).astype(dtype)
    transform = np.zeros((3, 3), dtype)
    transform[0, 0] = transform[1, 1] = scale
    transform[0, 2], transform[1, 2] = -scale * x_mean[0], -scale * x_mean[1]
    transform[2, 2] = 1
    return centered * scale, transform


def dlt_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two rows of the DLT system of each normalised match ``a[i] -> b[i]`` (kornia's)."""
    x1, y1, x2, y2 = a[:, 0], a[:, 1], b[:, 0], b[:, 1]
    zeros, ones = np.zeros_like(x1), np.ones_like(x1)
    ax = np.stack([zeros, zeros, zeros, -x1, -y1, -ones, y2 * x1, y2 * y1, y2], -1)
    ay = np.stack([x1, y1, ones, zeros, zeros, zeros, -x2 * x1, -x2 * y1, -x2], -1)
    return ax, ay


def kornia_dlt(p0: np.ndarray, p1: np.ndarray, w: np.ndarray, dtype: type) -> np.ndarray:
    """The reference estimate (five or more matches), computed in ``dtype``."""
    p0, p1, w = p0.astype(dtype), p1.astype(dtype), w.astype(dtype)
    a, t0 = kornia_normalize_points(p0, w)
    b, t1 = kornia_normalize_points(p1, w)
    A = np.stack(dlt_rows(a, b), 1).reshape(-1, 9)
    normal = (A.T * np.repeat(w, 2)) @ A
    sol = np.linalg.solve(normal, np.ones(9, dtype))
    H = np.linalg.inv(t1) @ (sol.reshape(3, 3) @ t0)
    if abs(H[2, 2]) > 1e-8:
        H = H / H[2, 2]
    return H.astype(np.float64)


# --------------------------------------------------------------------------------------------
# the steps between metricalc's DLT and kornia's, for the breakdown
# --------------------------------------------------------------------------------------------


def svd_with_mean_normalisation(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """metricalc's solver (smallest right singular vector) after kornia's normalisation."""
    ones = np.ones(len(p0))
    a, t0 = kornia_normalize_points(p0, ones)
    b, t1 = kornia_normalize_points(p1, ones)
    A = np.concatenate(dlt_rows(a, b))
    h = np.linalg.svd(A, full_matrices=False)[2][-1]
    H = np.linalg.inv(t1) @ h.reshape(3, 3) @ t0
    return H / H[2, 2]


# --------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------


Case = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]


def make_case(rng: np.random.Generator) -> Case:
    """(H, points0, points1, scores, outlier share) of one HPatches-like image pair."""
    height, width = SHAPE
    corners = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    reach = rng.uniform(0.0, 0.3)
    moved = corners + rng.uniform(-reach, reach, (4, 2)) * [width, height]
    H = cv2.getPerspectiveTransform(corners, moved.astype(np.float32)).astype(np.float64)
    n = int(np.exp(rng.uniform(np.log(10), np.log(2000))))
    group = rng.integers(3)
    share = 0.0 if group == 0 else rng.uniform(0, 0.1) if group == 1 else rng.uniform(0.1, 0.5)
    p0 = rng.uniform([0, 0], [width, height], (n, 2))
    mapped = np.c_[p0, np.ones(n)] @ H.T
    p1 = mapped[:, :2] / mapped[:, 2:] + rng.normal(0, rng.uniform(0.3, 2.0), (n, 2))
    outliers = rng.random(n) < share
    p1[outliers] = rng.uniform([0, 0], [width, height], (int(outliers.sum()), 2))
    scores = np.where(outliers, rng.beta(2, 5, n), rng.beta(5, 2, n))
    # keypoints as a detector stores them (float32), as Glue Factory's tensors hold them
    return H, p0.astype(np.float32), p1.astype(np.float32), scores.astype(np.float32), share


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------


def _corner_gap(Ha: np.ndarray | None, Hb: np.ndarray | None) -> float:
    """Mean distance between the image corners mapped by two estimates (inf if one failed)."""
    if Ha is None or Hb is None:
        return math.inf
    return hg.corner_error(Ha, Hb, SHAPE)


def compare(name: str, ours: list, theirs: list, truths: list, keep: np.ndarray) -> None:
    """One row: estimate ``ours`` against ``theirs`` on the cases ``keep``."""
    pick = np.flatnonzero(keep)
    gaps = np.array([_corner_gap(ours[i], theirs[i]) for i in pick])
    errors = np.array([hg.corner_error(ours[i], truths[i], SHAPE) for i in pick])
    reference = np.array([hg.corner_error(theirs[i], truths[i], SHAPE) for i in pick])
    counts = [int((gaps > tol).sum()) for tol in (1e-6, 1e-2, 1e-1, 1.0)]
    flips = int(np.any([(errors < t) != (reference < t) for t in AUC_PX], axis=0).sum())
    aucs = " / ".join(f"{a:.4f}" for a in hg.error_auc(errors, AUC_PX))
    print(
        f"{name:<44} " + " ".join(f"{c:>5}" for c in counts)
        + f"  {np.median(gaps):>8.2g} {np.percentile(gaps, 90):>8.2g} {flips:>5}   {aucs}"
    )


STEPS = (
    ("svd", "eval.dlt=svd (metricalc's SVD DLT)"),
    ("svd_mean", "1. kornia's normalisation (SVD)"),
    ("kornia", "2. kornia's LU solver (eval.dlt=kornia)"),
    ("gluefactory", "3. score weights (eval.dlt=gluefactory)"),
    ("port32", "4. in float32 (= the reference)"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = [make_case(rng) for _ in range(args.cases)]
    truths = [c[0] for c in cases]
    clean = np.array([c[4] == 0 for c in cases])
    estimates = {
        "svd": [hg.dlt_homography(p0, p1) for _, p0, p1, _, _ in cases],
        "svd_mean": [svd_with_mean_normalisation(p0, p1) for _, p0, p1, _, _ in cases],
        "kornia": [hg.kornia_dlt_homography(p0, p1) for _, p0, p1, _, _ in cases],
        "gluefactory": [hg.kornia_dlt_homography(p0, p1, s) for _, p0, p1, s, _ in cases],
        "port64": [kornia_dlt(p0, p1, s, np.float64) for _, p0, p1, s, _ in cases],
        "port32": [kornia_dlt(p0, p1, s, np.float32) for _, p0, p1, s, _ in cases],
    }
    print(
        f"{len(cases)} HPatches-like cases (seed {args.seed}), {int(clean.sum())} without outliers."
        " Reference: Glue Factory's H_error_dlt, kornia 0.9\nfind_homography_dlt(solver='lu') "
        "weighted by the matching scores, on float32 points (a NumPy port).\n"
    )
    header = (
        f"{'A against B (the reference)':<44} {'corners differ by > px':^23}"
        f"  {'gap A-B (px)':^17} {'flips':>5}   AUC@1/3/5px of A\n"
        f"{'':<44} {'1e-6':>5} {'0.01':>5} {'0.1':>5} {'1':>5}  {'median':>8} {'p90':>8}"
    )
    labels = dict(STEPS)
    for title, keep in (("all cases", np.ones(len(cases), bool)), ("no outliers", clean)):
        print(f"{title} ({int(keep.sum())})\n{header}\n" + "-" * 118)
        compare(labels["svd"], estimates["svd"], estimates["port32"], truths, keep)
        print("the steps from it to the reference, each against the one above:")
        for (previous, _), (key, label) in itertools.pairwise(STEPS):
            compare(label, estimates[key], estimates[previous], truths, keep)
        compare(
            "eval.dlt=gluefactory vs the float64 port",
            estimates["gluefactory"],
            estimates["port64"],
            truths,
            keep,
        )
        print()
    print(
        "gap: mean distance between the image corners mapped by A and by B; flips: cases whose "
        "corner error against the truth\nis below 1, 3 or 5 px for one of A, B and not the other."
    )


if __name__ == "__main__":
    main()
