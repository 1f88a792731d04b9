"""Error rates of the default tests on clustered keypoint cubes (docs/stats.md).

Simulates cubes with no true difference between two descriptors over scenes (scene,
descriptor x scene and descriptor x pair effects, query noise: 16 scenes x 5 pairs x 60
queries, :func:`metricalc.datasets.clustered.clustered_cube`) and cubes where descriptor "a"
gains ``--gain`` on every query, and prints for each way of testing: how often ``compare``
rejects at alpha 0.05 and how often its 95 % interval covers the true difference (0, or the
gain before clipping):

    python benchmarks/clustered_simulation.py --trials 200
"""

from __future__ import annotations

import argparse

import numpy as np

from metricalc.datasets.clustered import clustered_cube
from metricalc.stats import compare

WAYS = {
    "default (scenes, mean of scene means)": {},
    "scenes, mean over queries (pooled)": {"mean_over": "query"},
    "queries as independent (pair_by=query)": {"pair_by": "query"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--gain", type=float, default=0.06)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for gain in (0.0, args.gain):
        rng = np.random.default_rng(args.seed)
        rejected = dict.fromkeys(WAYS, 0)
        covered = dict.fromkeys(WAYS, 0)
        for trial in range(args.trials):
            cube = clustered_cube(rng, gain=gain)
            for way, options in WAYS.items():
                ds = compare(cube, baseline="b", n_resamples=args.resamples, seed=trial, **options)
                one = ds.sel(descriptor="a", baseline="b")
                rejected[way] += bool(one.reject)
                covered[way] += float(one.ci_low) <= gain <= float(one.ci_high)
        print(f"true difference over scenes {gain:+.2f} ({args.trials} trials, alpha 0.05):")
        for way in WAYS:
            print(
                f"  {way:42s} rejects {rejected[way] / args.trials:6.1%}   "
                f"95% interval covers {covered[way] / args.trials:6.1%}"
            )


if __name__ == "__main__":
    main()
