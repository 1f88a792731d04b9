"""Keypoint verification and retrieval: the sort-free APs against sorting APs, hand-computed
scenes, and a random differential test against a line-by-line port of DescriptorWorkbench's
``KeypointVerification.cpp`` (evaluateVerification, evaluateRetrieval and the per-scene means of
computeDatasetVerification / computeDatasetRetrieval)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, product

import numpy as np
import pytest

import metricalc as mc
from metricalc.core import kernels
from metricalc.keypoints import Features, evaluate
from metricalc.keypoints.bojanic import _retrieval_ap, distractors, scene_tasks
from metricalc.keypoints.geometry import ground_truth, inside
from metricalc.metrics import metric_set
from tests.shared_checks import IdentityScene


def slots_of(positive: np.ndarray) -> np.ndarray:
    """Columns of each row's True entries, padded with -1."""
    width = max(int(positive.sum(axis=1).max()), 1)
    out = np.full((len(positive), width), -1)
    for r, row in enumerate(positive):
        cols = np.flatnonzero(row)
        out[r, : cols.size] = cols
    return out


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic"])
@pytest.mark.parametrize("y0", ["negative", "ignore"])
def test_retrieval_ap_from_rank_stats_equals_sorting_ap(policy, y0):
    rng = np.random.default_rng(1)
    rows, n, n_hard = 300, 60, 45  # columns 0..44: images 2..6; 45..59: distractors
    distance = rng.integers(0, 12, (rows, n)).astype(np.float32)  # heavy ties
    positive = np.zeros((rows, n), bool)
    for r in range(rows):  # one to five correspondences per list, among the image columns
        positive[r, rng.choice(n_hard, size=rng.integers(1, 6), replace=False)] = True
    ours = _retrieval_ap(distance, slots_of(positive), slice(0, n_hard), policy, y0)
    score = -distance.astype(float)
    if y0 == "ignore":
        hard = np.zeros_like(positive)
        hard[:, :n_hard] = ~positive[:, :n_hard]
        score[hard] = -np.inf
    expected = mc.average_precision(positive, score, method="ir", tie_policy=policy)
    np.testing.assert_allclose(ours, expected, rtol=1e-12)


def test_precision_sum_from_rank_stats_step_policy_equals_sklearn_convention():
    rng = np.random.default_rng(2)
    distance = rng.integers(0, 5, (200, 30)).astype(float)
    relevant = rng.random((200, 30)) < 0.15
    relevant[:, 0] = True
    slots = slots_of(relevant)
    stats = [kernels.rank_stats(distance, slots[:, t]) for t in range(slots.shape[1])]
    better = np.stack([b for b, _ in stats], 1)
    ties = np.stack([t for _, t in stats], 1)
    own = np.take_along_axis(distance, np.maximum(slots, 0), axis=1)
    total = kernels.precision_sum_from_rank_stats(better, ties, own, slots >= 0, "step")
    expected = mc.average_precision(relevant, -distance, method="step")
    np.testing.assert_allclose(total / relevant.sum(1), expected, rtol=1e-12)


Scene = IdentityScene
"""One scene whose images 2..6 repeat image 1's keypoints under the identity homography."""


class Feat:
    def __init__(self, keypoints, descriptors):
        self.keypoints, self.descriptors = keypoints, descriptors


def one_negative_among_ties(n_positive: int) -> float:
    """Expected AP of n positives tied with one negative at the top of a list (brute force over
    the negative's position, each equally likely)."""
    total = 0.0
    for negative_at in range(1, n_positive + 2):
        ranks = [r for r in range(1, n_positive + 2) if r != negative_at]
        total += np.mean([(i + 1) / rank for i, rank in enumerate(ranks)])
    return total / (n_positive + 1)


def test_scene_tasks_hand_case():
    # two reference keypoints repeated exactly in images 2..6 (their correspondences, distance 0);
    # the other reference is a hard negative (distance 10); the distractor equals reference 1
    points = np.array([[60.0, 60.0], [120.0, 120.0]])
    desc = np.array([[0.0, 0.0], [10.0, 0.0]], np.float32)
    features = {k: Feat(points, desc) for k in range(1, 7)}
    distractor = np.array([[10.0, 0.0]], np.float32)
    result = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="expected", y0="negative"
    )
    # per keypoint: reference 0 ranks its 5 correspondences first (AP 1); reference 1's five tie
    # with the distractor
    per_keypoint = (1.0 + one_negative_among_ties(5)) / 2
    assert result["retrieval_ap_per_keypoint"] == pytest.approx(per_keypoint)
    assert result["verification_ap_per_keypoint"] == pytest.approx(per_keypoint)
    # pooled: 10 positives at distance 0 with negatives at 0 (ref 1's distractor) and 10 (ref 0)
    assert result["verification_ap"] == pytest.approx(one_negative_among_ties(10))
    assert result["retrieval_ap"] == pytest.approx(one_negative_among_ties(10))
    assert result["retrieval_num_true_positives"] == 10
    assert result["retrieval_num_hard_negatives"] == 10  # the other reference in 5 images, x2
    assert result["retrieval_num_distractors"] == 2
    ignore = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="expected", y0="ignore"
    )
    # y = 0 items all lie behind the positives: removing them changes nothing
    assert ignore["retrieval_ap"] == pytest.approx(result["retrieval_ap"])
    assert ignore["retrieval_ap_per_keypoint"] == pytest.approx(per_keypoint)


def test_pooled_list_holds_references_without_correspondence():
    # reference 0 at (60, 60) has its correspondence c0 in images 2..6; reference 1 at (150, 60)
    # has none, but c0 is closer to it (squared distance 0.25) than to reference 0 (1.0).
    # Pooled list, ascending: 5 x (r1, c0) 0.25 | 5 x (r0, c0) 1 + | (r1, e) 1.25 | (r0, e) 4 |
    # 5 x (r1, c1) 4.25 | 5 x (r0, c1) 9; the positives sit at ranks 6..10.
    ref = Feat(np.array([[60.0, 60.0], [150.0, 60.0]]), np.array([[0, 0], [1, 0.5]], np.float32))
    image = Feat(np.array([[60.0, 60.0], [120.0, 120.0]]), np.array([[1, 0], [3, 0]], np.float32))
    features = {1: ref, **{k: image for k in range(2, 7)}}
    distractor = np.array([[2.0, 0.0]], np.float32)
    result = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="pessimistic", y0="negative"
    )
    pooled = (1 / 6 + 2 / 7 + 3 / 8 + 4 / 9 + 5 / 10) / 5
    assert result["verification_ap"] == pytest.approx(pooled, rel=1e-12)
    assert result["retrieval_ap"] == pytest.approx(pooled, rel=1e-12)
    assert result["verification_ap_per_keypoint"] == 1.0  # reference 0 alone: its c0 first
    assert result["retrieval_ap_per_keypoint"] == 1.0
    assert (result["retrieval_num_true_positives"], result["retrieval_num_hard_negatives"]) == (
        5,
        15,
    )
    assert result["retrieval_num_distractors"] == 2
    ignore = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="pessimistic", y0="ignore"
    )
    assert ignore["retrieval_ap"] == 1.0  # only the distractors remain among the negatives
    assert ignore["verification_ap"] == pytest.approx(pooled, rel=1e-12)


def test_scene_without_correspondence_or_keypoints():
    ref = Feat(np.array([[60.0, 60.0]]), np.zeros((1, 2), np.float32))
    image = Feat(np.array([[120.0, 120.0]]), np.ones((1, 2), np.float32))
    features = {1: ref, **{k: image for k in range(2, 7)}}
    distractor = np.zeros((1, 2), np.float32)
    result = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="expected", y0="negative"
    )
    # DescriptorWorkbench: a list without relevant items has AP 0 and its scene counts
    assert result["verification_ap"] == result["retrieval_ap"] == 0.0
    assert np.isnan(result["verification_ap_per_keypoint"])
    assert np.isnan(result["retrieval_ap_per_keypoint"])
    assert result["retrieval_num_hard_negatives"] == 5
    features[1] = Feat(np.array([[1.0, 1.0]]), np.zeros((1, 2), np.float32))  # border-filtered
    empty = scene_tasks(
        Scene(), features, distractor, tau=3.0, border=40.0, tie_policy="expected", y0="negative"
    )
    assert all(np.isnan(empty[name]) for name in ("verification_ap", "retrieval_ap"))
    assert empty["retrieval_num_true_positives"] == empty["retrieval_num_distractors"] == 0


def _descriptors(rng, n, binary):
    """Small-valued float rows (many tied distances) or 2-byte binary rows (Hamming 0..16)."""
    if binary:
        return rng.integers(0, 256, (n, 2), dtype=np.uint8)
    return rng.integers(0, 4, (n, 3)).astype(np.float32)


def _distances(candidates, query):
    if candidates.dtype == np.uint8:  # Hamming distance
        return np.unpackbits(candidates ^ query, axis=1).sum(1).astype(np.float64)
    return ((candidates - query) ** 2).sum(1)


@pytest.mark.parametrize("binary", [False, True], ids=["float", "binary"])
@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic"])
def test_verification_ap_equals_the_ap_of_the_explicit_pooled_list(policy, binary, monkeypatch):
    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", 200)  # many chunks of references
    rng = np.random.default_rng(4)
    base = rng.uniform(45, 155, (25, 2))
    images = {1: Feat(base, _descriptors(rng, 25, binary))}
    for k in range(2, 7):  # a jittered subset of the reference points plus new ones
        keep = rng.random(25) < 0.7
        points = np.vstack([base[keep] + rng.normal(0, 1.0, (keep.sum(), 2)),
                            rng.uniform(45, 155, (5, 2))])  # fmt: skip
        images[k] = Feat(points, _descriptors(rng, len(points), binary))
    distractor = _descriptors(rng, 7, binary)
    result = scene_tasks(
        Scene(), images, distractor, tau=3.0, border=40.0, tie_policy=policy, y0="negative"
    )
    # the explicit pooled list: every (reference, candidate) pair, correspondence or not
    labels, scores = [], []
    rel = {k: ground_truth(base, images[k].keypoints, np.eye(3), (200, 200)).relevant
           for k in range(2, 7)}  # fmt: skip
    for i in range(len(base)):
        for k in range(2, 7):
            d = _distances(images[k].descriptors, images[1].descriptors[i])
            labels.append(np.arange(len(d)) == rel[k][i])
            scores.append(-d)
        labels.append(np.zeros(len(distractor), bool))
        scores.append(-_distances(distractor, images[1].descriptors[i]))
    expected = mc.average_precision(
        np.concatenate(labels), np.concatenate(scores), method="ir", tie_policy=policy
    )
    assert result["verification_ap"] == pytest.approx(expected, rel=1e-12)
    assert result["retrieval_num_true_positives"] == int(np.concatenate(labels).sum())
    assert result["retrieval_num_hard_negatives"] == 25 * sum(
        len(images[k].keypoints) for k in range(2, 7)
    ) - int(np.concatenate(labels).sum())


# --------------------------------------------------------------------------------------------
# A line-by-line port of DescriptorWorkbench's KeypointVerification.cpp (evaluation part). The
# candidates are built as buildVerificationCandidates / buildRetrievalCandidates loop (every
# reference keypoint, every keypoint of images 2..6, then the distractors), with metricalc's
# inputs: the ground truth of docs/protocols.md, protocol 2 and one distractor set per scene.
# --------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    """The fields of VerificationCandidate / RetrievalCandidate that the evaluation reads."""

    query_idx: int
    descriptor_distance: float
    label: int  # verification: +1 / -1; retrieval: +1 / 0 (hard negative) / -1 (distractor)
    is_distractor: bool


def dw_distance(a: np.ndarray, b: np.ndarray) -> float:
    """cv::norm(a, b, NORM_L2) for float descriptors; metricalc's Hamming distance for packed
    bits (the distance of the run; DescriptorWorkbench would take L2 of the bytes)."""
    if a.dtype == np.uint8:
        return float(np.unpackbits(a ^ b).sum())
    return float(np.sqrt(((a.astype(np.float64) - b.astype(np.float64)) ** 2).sum()))


def dw_assign_retrieval_label(is_same_sequence: bool, is_closest_to_projection: bool) -> int:
    """assignRetrievalLabel: -1 out of sequence, +1 the correspondence, 0 otherwise."""
    if not is_same_sequence:
        return -1
    if is_closest_to_projection:
        return 1
    return 0


def dw_verification_label(is_correct: bool) -> int:
    """buildVerificationCandidates' label: +1 for the correspondence, -1 otherwise."""
    return 1 if is_correct else -1


def dw_build_candidates(ref_desc, images, relevant, distractor_desc, *, three_tier):
    """buildRetrievalCandidates (``three_tier``) or buildVerificationCandidates."""
    candidates = []
    for query_idx in range(len(ref_desc)):
        query_desc = ref_desc[query_idx]
        # PART 1: same-sequence matches
        for k in range(2, 7):
            target_descriptors = images[k]
            for cand_idx in range(len(target_descriptors)):
                distance = dw_distance(query_desc, target_descriptors[cand_idx])
                is_correct = relevant[k][query_idx] == cand_idx
                if three_tier:
                    label = dw_assign_retrieval_label(True, is_correct)
                else:
                    label = dw_verification_label(is_correct)
                candidates.append(Candidate(query_idx, distance, label, False))
        # PART 2: out-of-sequence distractors
        for cand_desc in distractor_desc:
            distance = dw_distance(query_desc, cand_desc)
            candidates.append(Candidate(query_idx, distance, -1, True))
    return candidates


def dw_evaluate_verification(candidates):
    """evaluateVerification. Python's sort is stable: tied candidates keep their input order,
    one of the orders std::sort may leave them in."""
    result = {"average_precision": 0.0, "total_candidates": 0, "total_correct": 0,
              "total_distractors": 0}  # fmt: skip
    if not candidates:
        return result
    sorted_candidates = sorted(candidates, key=lambda c: c.descriptor_distance)
    relevance = [1 if cand.label > 0 else 0 for cand in sorted_candidates]
    if not dw_ap_of_sorted(result, relevance, "total_correct"):
        return result
    for cand in sorted_candidates:
        if cand.is_distractor:
            result["total_distractors"] += 1
    return result


def dw_ap_of_sorted(result, relevance, count_key):
    """The common tail of both evaluate functions: ``total_candidates``, and where any candidate
    is relevant the AP and the relevant count (under ``count_key``), else AP 0. Returns the
    relevant count."""
    total_relevant = sum(relevance)
    result["total_candidates"] = len(relevance)
    result["average_precision"] = 0.0
    if total_relevant:
        result["average_precision"] = dw_inline_ap(relevance, total_relevant)
        result[count_key] = total_relevant
    return total_relevant


def dw_inline_ap(relevance, total_relevant):
    """The AP loop written inline in both evaluate functions: precision at each relevant rank,
    summed, over the relevant count."""
    ap_sum = 0.0
    hits = 0
    for k in range(len(relevance)):
        if relevance[k]:
            hits += 1
            precision_at_k = hits / (k + 1)
            ap_sum += precision_at_k
    return ap_sum / total_relevant


def dw_evaluate_retrieval(candidates):
    """evaluateRetrieval (only y = +1 is relevant), tied candidates in input order."""
    result = {"average_precision": 0.0, "total_queries": 0, "total_candidates": 0,
              "num_true_positives": 0, "num_hard_negatives": 0, "num_distractors": 0}  # fmt: skip
    if not candidates:
        return result
    sorted_candidates = sorted(candidates, key=lambda c: c.descriptor_distance)
    relevance = [1 if cand.label == 1 else 0 for cand in sorted_candidates]
    for cand in sorted_candidates:
        if cand.label == 1:
            result["num_true_positives"] += 1
        elif cand.label == 0:
            result["num_hard_negatives"] += 1
        else:
            result["num_distractors"] += 1
    dw_ap_of_sorted(result, relevance, "total_queries")
    return result


def dw_dataset_means(scene_results):
    """The aggregation of computeDatasetVerification / computeDatasetRetrieval: the mean AP of
    the scenes with candidates, and of those whose name starts with 'v' / 'i'."""
    scene_aps, per_scene = [], {}
    viewpoint_ap = illumination_ap = 0.0
    for scene_name, scene_result in scene_results.items():
        if scene_result["total_candidates"] > 0:
            scene_aps.append(scene_result["average_precision"])
            per_scene[scene_name] = scene_result["average_precision"]
            if scene_name[0] == "v":
                viewpoint_ap += scene_result["average_precision"]
            elif scene_name[0] == "i":
                illumination_ap += scene_result["average_precision"]
    average_precision = 0.0
    if scene_aps:
        average_precision = sum(scene_aps) / len(scene_aps)
        viewpoint_count = sum(1 for name in per_scene if name[0] == "v")
        illumination_count = sum(1 for name in per_scene if name[0] == "i")
        if viewpoint_count > 0:
            viewpoint_ap /= viewpoint_count
        if illumination_count > 0:
            illumination_ap /= illumination_count
    return average_precision, viewpoint_ap, illumination_ap


def tie_order(candidates, policy, relevant):
    """Input order standing for the std::sort order a tie policy describes: relevant candidates
    first among ties (optimistic), last (pessimistic), or as built (no ties to break)."""
    if policy == "optimistic":
        return sorted(candidates, key=lambda c: not relevant(c))
    if policy == "pessimistic":
        return sorted(candidates, key=relevant)
    return candidates


# --------------------------------------------------------------------------------------------
# random scenes
# --------------------------------------------------------------------------------------------

SIDE, BORDER, TAU = 160, 20.0, 3.0


class RandomSequence:
    """A scene of six images of SIDE x SIDE px with random near-identity homographies."""

    def __init__(self, name, homographies):
        self.name, self._H = name, homographies

    @property
    def split(self):
        return {"i": "illumination", "v": "viewpoint"}.get(self.name[0], "other")

    def homography(self, k):
        return np.eye(3) if k == 1 else self._H[k]

    def shape(self, k):
        return (SIDE, SIDE)


def random_descriptors(rng, n, kind):
    if kind == "float":  # continuous: no ties
        return rng.normal(size=(n, 6)).astype(np.float32)
    if kind == "int":  # few distinct distances: many ties
        return rng.integers(0, 3, (n, 3)).astype(np.float32)
    return rng.integers(0, 256, (n, 1), dtype=np.uint8)  # Hamming 0..8: many ties


def random_dataset(rng, kinds, n_scenes=6, max_ref=9, max_extra=5):
    """Random scenes, and per descriptor kind its features of every image (same keypoints)."""
    sequences, features = [], {kind: {} for kind in kinds}
    for s in range(n_scenes):
        homographies = {}
        for k in range(2, 7):
            H = np.eye(3)
            H[:2, :2] += rng.normal(0, 0.03, (2, 2))
            H[:2, 2] = rng.normal(0, 4, 2)
            homographies[k] = H
        sequence = RandomSequence(f"{'vi'[s % 2]}_{s}", homographies)
        n_ref = int(rng.integers(1, max_ref + 1))
        base = np.vstack([rng.uniform(40, 120, (1, 2)), rng.uniform(5, 155, (n_ref - 1, 2))])
        points = {1: base}
        keep_rate = rng.choice([0.0, 0.5, 0.9])  # some scenes without any correspondence
        for k in range(2, 7):
            keep = rng.random(n_ref) < keep_rate
            projected = np.c_[base[keep], np.ones(keep.sum())] @ homographies[k].T
            moved = projected[:, :2] / projected[:, 2:] + rng.normal(0, 1.5, (keep.sum(), 2))
            moved = np.clip(moved, 0, SIDE - 1)  # keypoints lie inside their image
            extra = rng.uniform(5, 155, (int(rng.integers(1, max_extra + 1)), 2))
            points[k] = rng.permutation(np.vstack([moved, extra]))
        sequences.append(sequence)
        for kind in kinds:
            features[kind][sequence.name] = {
                k: Features(p, random_descriptors(rng, len(p), kind)) for k, p in points.items()
            }
    return sequences, features


def kept(image):
    mask = inside(image.keypoints, (SIDE, SIDE), BORDER)
    return image.keypoints[mask], image.descriptors[mask]


def port_scene(sequence, images, distractor_desc, policy, y0):
    """The port's four APs and three counts of one scene."""
    ref_points, ref_desc = kept(images[1])
    descs, relevant = {}, {}
    for k in range(2, 7):
        points, descs[k] = kept(images[k])
        gt = ground_truth(ref_points, points, sequence.homography(k), (SIDE, SIDE), tau=TAU,
                          border=BORDER)  # fmt: skip
        relevant[k] = gt.relevant
    verification = dw_build_candidates(ref_desc, descs, relevant, distractor_desc,
                                       three_tier=False)  # fmt: skip
    retrieval = dw_build_candidates(ref_desc, descs, relevant, distractor_desc, three_tier=True)
    # y0="ignore" (metricalc's HPatches option): y = 0 candidates removed before AP
    retrieval_list = [c for c in retrieval if c.label != 0] if y0 == "ignore" else retrieval
    out = {
        "verification": dw_evaluate_verification(
            tie_order(verification, policy, lambda c: c.label > 0)
        ),
        "retrieval": dw_evaluate_retrieval(
            tie_order(retrieval_list, policy, lambda c: c.label == 1)
        ),
        "counts": dw_evaluate_retrieval(retrieval),
    }
    # the per-keypoint variants: the same evaluation on each corresponding keypoint's own list
    for name, pool, evaluate_list, rel in (
        (
            "verification_per_keypoint",
            verification,
            dw_evaluate_verification,
            lambda c: c.label > 0,
        ),
        ("retrieval_per_keypoint", retrieval_list, dw_evaluate_retrieval, lambda c: c.label == 1),
    ):
        aps = []
        for q in range(len(ref_desc)):
            own = [c for c in pool if c.query_idx == q]
            if any(rel(c) for c in own):
                aps.append(evaluate_list(tie_order(own, policy, rel))["average_precision"])
        out[name] = float(np.mean(aps)) if aps else float("nan")
    return out


TIED = {"optimistic", "pessimistic"}  # the policies that are orders std::sort may produce


@pytest.mark.parametrize("policy", ["expected", "optimistic", "pessimistic", "workbench"])
@pytest.mark.parametrize("y0", ["negative", "ignore"])
def test_evaluate_and_metric_set_equal_the_workbench_port(policy, y0):
    for seed in range(2):
        rng = np.random.default_rng([seed, len(policy), len(y0)])
        sequences, features = random_dataset(rng, ("float", "int", "binary"))
        cube = evaluate(sequences, features, keypoints="external", tau=TAU, border=BORDER,
                        tie_policy=policy, y0=y0, n_distractor_scenes=2, n_distractors=3,
                        seed=seed)  # fmt: skip
        metrics = metric_set(cube)
        # ties between a relevant and a non-relevant pair only for "float"; the others' ties
        # leave DescriptorWorkbench's AP unspecified unless a policy fixes the order
        for kind in ("float", *(("int", "binary") if policy in TIED else ())):
            per_scene = {}
            for sequence in sequences:
                pool = distractors(sequence.name, sequences, features[kind], border=BORDER,
                                   n_scenes=2, n_keypoints=3, seed=seed)  # fmt: skip
                ours = cube.sel(descriptor=kind, sequence=sequence.name)
                port = port_scene(sequence, features[kind][sequence.name], pool, policy, y0)
                per_scene[sequence.name] = port
                for task in ("verification", "retrieval"):
                    assert ours[f"{task}_ap"].item() == pytest.approx(
                        port[task]["average_precision"], rel=1e-9, abs=1e-12
                    ), (seed, kind, sequence.name, task)
                    np.testing.assert_allclose(
                        ours[f"{task}_ap_per_keypoint"].item(),
                        port[f"{task}_per_keypoint"],
                        rtol=1e-9,
                    )
                for name in ("true_positives", "hard_negatives", "distractors"):
                    assert ours[f"retrieval_num_{name}"].item() == port["counts"][f"num_{name}"]
            m = metrics.sel(descriptor=kind)
            for task in ("verification", "retrieval"):
                overall, viewpoint, illumination = dw_dataset_means(
                    {name: port[task] for name, port in per_scene.items()}
                )
                assert m[f"keypoint_{task}_ap"].item() == pytest.approx(overall, rel=1e-9)
                assert m[f"{task}_viewpoint_ap"].item() == pytest.approx(viewpoint, rel=1e-9)
                assert m[f"{task}_illumination_ap"].item() == pytest.approx(illumination, rel=1e-9)
                per_keypoint = [port[f"{task}_per_keypoint"] for port in per_scene.values()]
                assert m[f"keypoint_{task}_ap_per_keypoint"].item() == pytest.approx(
                    np.nanmean(per_keypoint), rel=1e-9
                )
            for name in ("true_positives", "hard_negatives", "distractors"):
                total = sum(port["counts"][f"num_{name}"] for port in per_scene.values())
                assert m[f"retrieval_num_{name}"].item() == total


def mean_over_tie_orders(candidates, evaluate_list, relevant):
    """Exact mean of the port's AP over every order std::sort may leave tied candidates in:
    each arrangement of the relevant items inside each group of equal distances (all equally
    likely under a uniformly random order), enumerated and passed to the port in that order."""
    groups = {}
    for cand in candidates:
        groups.setdefault(cand.descriptor_distance, []).append(cand)
    choices = []
    for members in groups.values():
        rel = [c for c in members if relevant(c)]
        other = [c for c in members if not relevant(c)]
        arrangements = []
        for places in combinations(range(len(members)), len(rel)):
            order, r, o = [], iter(rel), iter(other)
            for i in range(len(members)):
                order.append(next(r) if i in places else next(o))
            arrangements.append(order)
        choices.append(arrangements)
    total = [
        evaluate_list([c for group in pick for c in group])["average_precision"]
        for pick in product(*choices)
    ]
    return float(np.mean(total))


def test_expected_policy_is_the_mean_over_every_workbench_tie_order():
    rng = np.random.default_rng(11)
    checked = 0
    while checked < 25:
        sequences, by_kind = random_dataset(rng, ("int",), n_scenes=2, max_ref=2, max_extra=1)
        features = by_kind["int"]
        sequence = sequences[0]
        images = features[sequence.name]
        pool = distractors(sequence.name, sequences, features, border=BORDER, n_scenes=1,
                           n_keypoints=1, seed=0)  # fmt: skip
        ref_points, ref_desc = kept(images[1])
        descs, relevant = {}, {}
        for k in range(2, 7):
            points, descs[k] = kept(images[k])
            relevant[k] = ground_truth(ref_points, points, sequence.homography(k),
                                       (SIDE, SIDE), tau=TAU, border=BORDER).relevant  # fmt: skip
        candidates = dw_build_candidates(ref_desc, descs, relevant, pool, three_tier=True)
        if not any(c.label == 1 for c in candidates):
            continue
        orders = 1
        for d in {c.descriptor_distance for c in candidates}:
            members = [c for c in candidates if c.descriptor_distance == d]
            orders *= math.comb(len(members), sum(c.label == 1 for c in members))
        if orders > 3000:
            continue
        result = scene_tasks(sequence, images, pool, tau=TAU, border=BORDER,
                             tie_policy="expected", y0="ignore")  # fmt: skip
        verification = [Candidate(c.query_idx, c.descriptor_distance, c.label or -1,
                                  c.is_distractor) for c in candidates]  # fmt: skip
        expected = mean_over_tie_orders(
            verification, dw_evaluate_verification, lambda c: c.label > 0
        )
        assert result["verification_ap"] == pytest.approx(expected, rel=1e-12)
        ignored = [c for c in candidates if c.label != 0]
        expected = mean_over_tie_orders(ignored, dw_evaluate_retrieval, lambda c: c.label == 1)
        assert result["retrieval_ap"] == pytest.approx(expected, rel=1e-12)
        checked += 1
