"""The built-in benchmark ranks descriptors as published HPatches results do (issue 17).

A small seeded version (four photographs at 320 px: eight scenes, generated and evaluated in a
few seconds) is evaluated with every method of the demo's locked run on SIFT keypoints, and the
order the real anchors and the HPatches paper agree on is pinned, so that a change to the
scene generators or the describers cannot undo it silently. The two claims that do not hold on
the illumination scenes (ORB and BRIEF against SIFT: an upright descriptor pays nothing for
orientation on identity homographies, docs/synthetic.md) are expected failures there.
"""

from __future__ import annotations

import pytest

from metricalc.datasets.anchors import PUBLISHED_ORDER, REAL_HPATCHES_ANCHORS

PHOTOGRAPHS = ("astronaut", "camera", "brick", "stereo_motorcycle")
METHODS = ("sift", "rootsift", "dspsift", "orb", "brief", "raw_patch")
ILLUMINATION_EXCEPTIONS = {("sift", "orb"), ("sift", "brief")}


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    from metricalc.datasets.sequences import make_synthetic_dataset
    from metricalc.keypoints.pipeline import EvaluationSettings, evaluate_sequences
    from metricalc.metrics import metric_set

    root = tmp_path_factory.mktemp("ranking")
    sequences = make_synthetic_dataset(root, scenes=list(PHOTOGRAPHS), seed=0, size=320)
    assert len(sequences) == 2 * len(PHOTOGRAPHS)
    settings = EvaluationSettings(METHODS, "locked:sift", bojanic=False, seed=0)
    return metric_set(evaluate_sequences(sequences, settings))


def _score(metrics, descriptor: str, name: str) -> float:
    return float(metrics[name].sel(descriptor=descriptor))


EXCEPTION = pytest.mark.xfail(
    strict=True, reason="upright BRIEF and ORB on identity homographies: see docs/synthetic.md"
)


@pytest.mark.parametrize(
    ("claim", "split"),
    [
        pytest.param(
            claim,
            split,
            id=f"{claim} on {split}",
            marks=[EXCEPTION]
            if split == "illumination" and (claim.better, claim.worse) in ILLUMINATION_EXCEPTIONS
            else [],
        )
        for claim in PUBLISHED_ORDER
        for split in ("viewpoint", "illumination")
    ],
)
def test_the_published_order_holds(metrics, claim, split):
    """Every claim on both splits; the two known exceptions are strict xfails, so the day they
    hold the test says so and docs/synthetic.md is due an update."""
    better = _score(metrics, claim.better, f"{split}_map")
    worse = _score(metrics, claim.worse, f"{split}_map")
    assert claim.holds(better, worse), f"{claim} on {split}: {better:.3f} vs {worse:.3f}"


def test_sift_is_as_hard_as_on_real_data(metrics):
    """SIFT's mAP within 0.35 .. 0.60 (real HPatches: 0.472), illumination above viewpoint."""
    real = next(a for a in REAL_HPATCHES_ANCHORS if a.method == "sift")
    assert real.illumination_map > real.viewpoint_map
    assert 0.35 <= _score(metrics, "sift", "true_map_micro") <= 0.60
    assert _score(metrics, "sift", "illumination_map") > _score(metrics, "sift", "viewpoint_map")


def test_the_viewpoint_scenes_separate_binary_and_float_descriptors(metrics):
    """The viewpoint changes (tilt, roll, zoom up to about 2x) leave BRIEF, which has no
    orientation or scale, far behind SIFT: the gap the old mild warps did not show."""
    gap = _score(metrics, "sift", "viewpoint_map") - _score(metrics, "brief", "viewpoint_map")
    assert gap > 0.2
