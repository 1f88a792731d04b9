"""Extraction time per image of every built-in method, as a ratio against SIFT in the same run.

Run: ``python benchmarks/bench_descriptors.py`` (``--images N`` images, default 12)

Writes the quick scenes of the built-in benchmark (640 px on the longer side) to a temporary
folder and times, per method, :func:`metricalc.keypoints.features.extract_image` on the same
images (2,000 keypoints at most, border 40 px):

- native: the method's own detector, selection, and its descriptor;
- locked: the method describing SIFT's kept keypoints (SIFT's detection included, as every
  locked method pays it once per image in ``extract``; ``sift`` itself is the reference).

Each time is the best of three passes over the images, in milliseconds per image. The demo's
choice of methods (``metricalc.report.study.DEMO_LOCKED`` / ``DEMO_NATIVE``) follows these
figures: slow detectors stay out of its native run.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np
from timing import best_time

from metricalc.datasets.sequences import QUICK_SCENES, make_synthetic_dataset
from metricalc.keypoints.detectors import available_methods
from metricalc.keypoints.features import extract_image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=12, help="images timed (default 12)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        scenes = make_synthetic_dataset(folder, scenes=QUICK_SCENES)
        grays = [np.ascontiguousarray(s.gray(k)) for s in scenes for k in range(1, 7)]
    grays = grays[: args.images]
    print(f"{len(grays)} images of {grays[0].shape[1]} x {grays[0].shape[0]} px")

    def per_image(method: str, locked: str | None) -> float:
        seconds = best_time(lambda: [extract_image(g, method, locked=locked) for g in grays], 3)
        return 1000 * seconds / len(grays)

    per_image("sift", None)  # warm up OpenCV and the page cache before the first timing
    times = {m: (per_image(m, None), per_image(m, "sift")) for m in available_methods()}
    sift_native, sift_locked = times["sift"]
    print(f"{'method':<10} {'native ms':>10} {'x SIFT':>7} {'locked ms':>10} {'x SIFT':>7}")
    for method, (native, locked) in times.items():
        print(
            f"{method:<10} {native:10.1f} {native / sift_native:7.2f} "
            f"{locked:10.1f} {locked / sift_locked:7.2f}"
        )


if __name__ == "__main__":
    main()
