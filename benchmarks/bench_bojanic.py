"""Keypoint verification / retrieval of one scene with binary descriptors: histogram vs sort.

Run: ``python benchmarks/bench_bojanic.py [--keypoints 2000] [--bytes 32]``

One synthetic scene (identity homographies, ``--keypoints`` keypoints per image, 200
distractors) described by random binary descriptors. The Hamming distances of packed bits are
whole numbers, so ``scene_tasks`` counts the pooled negatives below / equal to each positive
distance with a histogram (``np.bincount``). The reference, timed in the same run, is the same
scene with the bits unpacked to 0/1 floats: the same squared distances (Hamming = squared L2 of
0/1 vectors) and the same APs, counted by sorting. The two results are checked equal first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from timing import best_time, integer_options

from metricalc.keypoints.bojanic import scene_tasks


@dataclass
class _Features:
    keypoints: np.ndarray
    descriptors: np.ndarray


class _Scene:
    name = "i_bench"

    def shape(self, k: int) -> tuple[int, int]:
        return (640, 640)

    def homography(self, k: int) -> np.ndarray:
        return np.eye(3)


def main(argv: list[str] | None = None) -> int:
    args = integer_options(__doc__ or "", argv, keypoints=2000, bytes=32)
    rng = np.random.default_rng(0)
    base = rng.uniform(50, 590, (args.keypoints, 2))
    reference = rng.integers(0, 256, (args.keypoints, args.bytes), dtype=np.uint8)
    binary = {1: _Features(base, reference)}
    for k in range(2, 7):
        flips = rng.random(reference.shape) < 0.05  # a corrupted copy: mostly close descriptors
        noisy = reference ^ (flips * rng.integers(1, 256, reference.shape)).astype(np.uint8)
        binary[k] = _Features(base + rng.normal(0, 0.7, base.shape), noisy)
    unpacked = {
        k: _Features(f.keypoints, np.unpackbits(f.descriptors, axis=1).astype(np.float32))
        for k, f in binary.items()
    }
    distractors = rng.integers(0, 256, (200, args.bytes), dtype=np.uint8)
    options = {"tau": 3.0, "border": 40.0, "tie_policy": "expected", "y0": "negative"}

    def histogram() -> dict[str, float]:
        return scene_tasks(_Scene(), binary, distractors, **options)

    def sorting() -> dict[str, float]:
        floats = np.unpackbits(distractors, axis=1).astype(np.float32)
        return scene_tasks(_Scene(), unpacked, floats, **options)

    ours, theirs = histogram(), sorting()
    for name, value in ours.items():
        assert np.isclose(value, theirs[name], rtol=1e-12, equal_nan=True), name
    fast, slow = best_time(histogram, repeat=3), best_time(sorting, repeat=3)
    print(
        f"{args.keypoints} keypoints x 6 images, {8 * args.bytes}-bit descriptors: "
        f"histogram {fast:.2f} s, sort {slow:.2f} s, ratio {fast / slow:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
