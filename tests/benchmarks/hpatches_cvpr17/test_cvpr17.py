"""HPatches CVPR'17 tasks against a slow port of hpatches-benchmark's Python evaluation.

The port below follows python/utils/metrics.py (tpfp, pr, roc), tasks.py (eval_verification,
eval_matching, eval_retrieval, gen_verif) and results.py (results_*) step by step, with loops
and scipy's cdist / euclidean as the reference uses them (np.trapezoid for the removed np.trapz).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import distance

from metricalc.benchmarks.hpatches_cvpr17 import evaluate as ev
from metricalc.benchmarks.hpatches_cvpr17 import files as cf
from metricalc.errors import InvalidInputError

DATA = Path(__file__).parents[2] / "data"
NAMES = {"e": "easy", "h": "hard", "t": "tough"}
POOLS = [100, 500, 1000, 5000, 10000, 15000, 20000]


# ---------------------------------------------------------------- the slow port (reference)
def ref_tpfp(scores, labels, numpos=None):
    p = int(np.sum(labels))
    n = len(labels) - p
    if numpos is not None:
        extra = numpos - p
        p = numpos
        scores = np.hstack((scores, np.repeat(-np.inf, extra)))
        labels = np.hstack((labels, np.repeat(1, extra)))
    perm = np.argsort(-scores, kind="mergesort", axis=0)
    scores = scores[perm]
    stop = np.max(np.where(scores > -np.inf))
    perm = perm[0 : stop + 1]
    labels = labels[perm]
    tp = np.hstack((0, np.cumsum(labels == 1)))
    fp = np.hstack((0, np.cumsum(labels == 0)))
    return tp, fp, p, n


def ref_pr(scores, labels, numpos=None):
    tp, fp, p, _ = ref_tpfp(scores, labels, numpos)
    small = 1e-10
    recall = tp / float(np.maximum(p, small))
    precision = np.maximum(tp, small) / np.maximum(tp + fp, small)
    return np.trapezoid(precision, recall)


def ref_roc(scores, labels):
    tp, fp, p, n = ref_tpfp(scores, labels)
    small = 1e-10
    return np.trapezoid(tp / float(np.maximum(p, small)), fp / float(np.maximum(n, small)))


def ref_image(descr, seq, t, level):
    return descr[seq]["ref" if t == 0 else f"{level}{t}"]


PAIR_DIST = {"l2": distance.euclidean, "l1": distance.cityblock}
CDIST = {"l2": "euclidean", "l1": "cityblock"}


def ref_verification(descr, pairs, dist="l2"):
    out = {}
    for level in "eht":
        d = {}
        for kind, rows in pairs.items():
            d[kind] = np.array([
                PAIR_DIST[dist](ref_image(descr, s1, t1, level)[i1],
                                ref_image(descr, s2, t2, level)[i2])
                for s1, t1, i1, s2, t2, i2 in zip(*rows, strict=True)
            ])  # fmt: skip
        labels = np.hstack((np.zeros(len(d["pos"])), np.ones(len(d["pos"]))))
        entry = {"balanced": {}, "imbalanced": {}}
        for kind in ("inter", "intra"):
            dd = np.hstack((d[f"neg_{kind}"], d["pos"]))
            entry["balanced"][kind] = ref_roc(-dd, labels)
            n_imb = len(d["pos"]) + int(len(d["pos"]) * 0.2)
            entry["imbalanced"][kind] = ref_pr(-dd[0:n_imb], labels[0:n_imb])
        out[NAMES[level]] = entry
    return out


def ref_matching(descr, test, dist="l2"):
    total = {"e": 0.0, "h": 0.0, "t": 0.0}
    count = 0
    for seq in test:
        d_ref = descr[seq]["ref"]
        gt = np.arange(d_ref.shape[0])
        for level in "eht":
            for i in range(1, 6):
                D = distance.cdist(d_ref, descr[seq][f"{level}{i}"], CDIST[dist])
                idx = np.argmin(D, axis=1)
                m_l = np.equal(idx, gt)
                total[level] += ref_pr(-D[gt, idx], m_l, numpos=m_l.shape[0])
                count += 1
    count = count / 3.0
    res = {NAMES[k]: total[k] / count for k in "eht"}
    res["mean"] = sum(res.values()) / 3.0
    return res


def ref_retrieval(descr, queries, distractors, test, dist="l2"):
    desc_q = np.array([descr[s]["ref"][i] for s, i in queries], dtype=np.float32)
    desc_d = np.array([descr[s]["ref"][i] for s, i in distractors], dtype=np.float32)
    masks = {seq: np.array([s != seq for s, _ in distractors]) for seq in test}
    D = distance.cdist(desc_q, desc_d, CDIST[dist])
    sums = {k: dict.fromkeys(POOLS, 0.0) for k in "eht"}
    for i, (seq, idx) in enumerate(queries):
        for level in "eht":
            intra = np.array([
                distance.cdist(desc_q[i][None], descr[seq][f"{level}{k}"][idx][None],
                               CDIST[dist])[0, 0]
                for k in range(1, 6)
            ])  # fmt: skip
            row = np.hstack((intra, D[i][masks[seq]]))
            gt = np.hstack((np.ones(5), np.zeros(row.size - 5)))
            for k in POOLS:
                sums[level][k] += ref_pr(-row[0:k], gt[0:k])
    res = {NAMES[k]: {str(p): sums[k][p] / len(queries) for p in POOLS} for k in "eht"}
    res["mean"] = {str(p): np.mean([res[NAMES[k]][str(p)] for k in "eht"]) for p in POOLS}
    return res


def ref_gen_verif(counts, test, n):
    rs = np.random.RandomState(42)
    s = rs.choice(test, n)
    s_idx = np.array([rs.choice(np.arange(counts[k]), 2, replace=False) for k in s])
    s_type = np.array([rs.choice(np.arange(5), 2, replace=False) for _ in s_idx])
    s_inter = rs.choice(test, n)
    s_idx_inter = np.array([rs.randint(counts[k]) for k in s_inter])
    a, b, ta, tb = s_idx[:, 0], s_idx[:, 1], s_type[:, 0], s_type[:, 1]
    return {
        "pos": (s, ta, a, s, tb, a),
        "neg_intra": (s, ta, a, s, tb, b),
        "neg_inter": (s, ta, a, s_inter, tb, s_idx_inter),
    }


# ---------------------------------------------------------------- fixtures
def write_folder(root: Path, descr: dict) -> None:
    for seq, images in descr.items():
        (root / seq).mkdir(parents=True)
        for image, values in images.items():
            np.savetxt(root / seq / f"{image}.csv", values, delimiter=",", fmt="%.9g")


def make_set(tmp: Path, seed: int, *, integer: bool, n_seq: int = 8, dim: int = 6):
    rng = np.random.default_rng(seed)
    seqs = [f"{'iv'[k % 2]}_s{k}" for k in range(n_seq)]
    descr = {}
    for seq in seqs:
        n = int(rng.integers(20, 40))
        if integer:
            base = rng.integers(0, 3, (n, dim)).astype(np.float32)
            images = {img: base.copy() for img in cf.IMAGES17}
            for img in cf.IMAGES17[1:]:
                flip = rng.random((n, dim)) < 0.3
                images[img][flip] = rng.integers(0, 3, int(flip.sum()))
        else:
            base = rng.normal(size=(n, dim)).astype(np.float32)
            images = {img: base + rng.normal(scale=0.8, size=(n, dim)).astype(np.float32)
                      for img in cf.IMAGES17}  # fmt: skip
            images["ref"] = base
        descr[seq] = images
    write_folder(tmp / "descr", descr)
    tasks = tmp / "tasks"
    tasks.mkdir()
    splits = {"x": {"name": "x", "test": seqs[:5]}, "y": {"name": "y", "test": seqs}}
    (tasks / "splits.json").write_text(json.dumps(splits))
    for split, spec in splits.items():
        pool = [(s, i) for s in spec["test"] for i in range(descr[s]["ref"].shape[0])]
        order = rng.permutation(len(pool))
        queries = [pool[k] for k in order[:20]]
        distractors = [pool[k] for k in order[20:]]
        for name, rows in (("queries", queries), ("distractors", distractors)):
            text = "s,idx\n" + "".join(f"{s},{i}\n" for s, i in rows)
            (tasks / f"retr_{name}_split-{split}.csv").write_text(text)
    return descr, tasks, splits


def load_ref_task(tasks: Path, split: str):
    out = []
    for name in ("queries", "distractors"):
        lines = (tasks / f"retr_{name}_split-{split}.csv").read_text().split()[1:]
        out.append([(s, int(i)) for s, i in (line.split(",") for line in lines)])
    return out


def assert_close(got, want, path=""):
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for key in want:
            assert_close(got[key], want[key], f"{path}/{key}")
    else:
        assert got == pytest.approx(want, abs=1e-6), path


# ---------------------------------------------------------------- tests
def test_ap_and_auc_hand_computed() -> None:
    # ranks 1 and 3 of 2 positives: (1 + 1)/2 * 1/2 + (1/2 + 2/3)/2 * 1/2
    assert ev.sorted_labels_ap(np.array([1, 0, 1])) == pytest.approx(19 / 24)
    # negative first: P_1 = 1e-10 (not 0), then (1e-10 + 1/2)/2
    assert ev.sorted_labels_ap(np.array([0, 1])) == pytest.approx(0.25 + 5e-11, abs=1e-15)
    assert ev.sorted_labels_auc(np.array([1, 0, 0, 1])) == pytest.approx(0.5)
    assert ev.sorted_labels_ap(np.array([0, 0])) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_kernels_equal_reference_metrics(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 4, 40).astype(float)  # many ties: input order decides
    labels = rng.random(40) < 0.4
    order = np.argsort(d, kind="stable")
    assert ev.sorted_labels_ap(labels[order]) == pytest.approx(ref_pr(-d, labels), abs=1e-12)
    assert ev.sorted_labels_auc(labels[order]) == pytest.approx(ref_roc(-d, labels), abs=1e-12)
    got = ev.sorted_labels_ap(labels[order], numpos=60)
    assert got == pytest.approx(ref_pr(-d, labels, numpos=60), abs=1e-12)


@pytest.mark.parametrize(
    ("seed", "integer", "dist"),
    [(0, False, "l2"), (1, True, "l2"), (2, True, "l2"), (3, False, "l2"), (4, False, "l1"),
     (5, True, "l1")],
)  # fmt: skip
def test_all_tasks_equal_slow_port(tmp_path: Path, seed: int, integer: bool, dist: str) -> None:
    descr, tasks, splits = make_set(tmp_path, seed, integer=integer)
    for split in splits:
        test = splits[split]["test"]
        counts = {s: descr[s]["ref"].shape[0] for s in test}
        got = ev.evaluate_hpatches17(
            tmp_path / "descr", split=split, task_dir=tasks, n_pairs=150, distance=dist
        )
        want_pairs = ref_gen_verif(counts, test, 150)
        assert_close(got["verification"][split], ref_verification(descr, want_pairs, dist))
        assert_close(got["matching"][split], ref_matching(descr, test, dist))
        queries, distractors = load_ref_task(tasks, split)
        want = ref_retrieval(descr, queries, distractors, test, dist)
        assert_close(got["retrieval"][split], want)
        assert got["units"]["retrieval"].shape == (20, 3, 7)
        assert "generated" in got["pairs_source"]


def test_pairs_equal_the_generator_port() -> None:
    counts = {f"s{k}": 10 + k for k in range(7)}
    test = list(counts)
    got = cf.generate_verification_pairs(test, counts, n_pairs=200).pairs
    want = ref_gen_verif(counts, test, 200)
    for kind in want:
        for a, b in zip(got[kind], want[kind], strict=True):
            assert np.array_equal(np.asarray(a).astype(str), np.asarray(b).astype(str))
    assert max(got["pos"][1].max(), got["pos"][4].max()) == 4  # image 5 is never used


def test_generator_reproduces_the_official_first_positive_rows() -> None:
    # hpatches-benchmark python/utils/docs/tasks.md prints the first rows of verif_pos_split-a
    test = cf.read_splits()["a"]
    rng = np.random.RandomState(42)
    s = rng.choice(np.asarray(test, dtype=object), 1_000_000)[:4]
    assert list(s) == ["v_birdwoman", "v_strand", "i_salon", "i_zion"]
    idx = cf.draw_pair_indices(rng, [2000, 1816, 1102, 2000])
    assert idx[:, 0].tolist() == [251, 1625, 1100, 1766]


def test_verification_ties_rank_the_negative_first(tmp_path: Path) -> None:
    ones = np.ones((3, 2), np.float32)
    descr = {"v_a": {img: ones for img in cf.IMAGES17}}
    write_folder(tmp_path, descr)
    d = cf.read_descriptors(tmp_path, ["v_a"])
    col = (np.array(["v_a"]), np.array([0]), np.array([0]))
    pairs = cf.PairSet({"pos": col * 2, "neg_intra": col * 2, "neg_inter": col * 2}, "test")
    res = ev.verification(d, pairs)["easy"]
    assert res["balanced"]["inter"] == 0.0  # the tied negative ranks before the positive
    assert res["imbalanced"]["intra"] == pytest.approx(ref_pr(-np.zeros(1), np.zeros(1)))


def test_retrieval_ties_rank_positives_first_and_pool_prefix(tmp_path: Path) -> None:
    n = 130
    ref = np.zeros((n, 2), np.float32)
    descr = {"v_a": {img: ref[:2] for img in cf.IMAGES17}, "v_b": {img: ref for img in cf.IMAGES17}}
    write_folder(tmp_path, descr)
    d = cf.read_descriptors(tmp_path, ["v_a", "v_b"])
    task = cf.RetrievalTask(np.array(["v_a"]), np.array([0]),
                            np.array(["v_a"] + ["v_b"] * n), np.r_[1, np.arange(n)])  # fmt: skip
    ap = ev.retrieval_ap(d, task, ["v_a", "v_b"])
    assert np.all(ap == 1.0)  # all distances 0: the 5 positives lead every pool


def test_reader_errors_name_the_file(tmp_path: Path) -> None:
    descr = {"v_a": {img: np.ones((3, 2), np.float32) for img in cf.IMAGES17}}
    write_folder(tmp_path, descr)
    (tmp_path / "v_a" / "h2.csv").write_text("1,2\n1\n3,4\n")
    with pytest.raises(InvalidInputError, match=r"h2\.csv"):
        cf.read_descriptors(tmp_path, ["v_a"])
    (tmp_path / "v_a" / "h2.csv").write_text("1,2\nnan,2\n3,4\n")
    with pytest.raises(InvalidInputError, match=r"h2\.csv: row 2 holds a NaN"):
        cf.read_descriptors(tmp_path, ["v_a"])
    (tmp_path / "v_a" / "h2.csv").write_text("1,2\n3,4\n")
    with pytest.raises(InvalidInputError, match=r"h2\.csv: 2 patches .* expected 3"):
        cf.read_descriptors(tmp_path, ["v_a"])
    (tmp_path / "v_a" / "h2.csv").unlink()
    with pytest.raises(InvalidInputError, match=r"h2\.csv: missing"):
        cf.read_descriptors(tmp_path, ["v_a"])
    with pytest.raises(InvalidInputError, match="v_zz"):
        cf.read_descriptors(tmp_path, ["v_zz"])


def test_shipped_task_files() -> None:
    splits = cf.read_splits()
    assert {k: len(v) for k, v in splits.items()} == {
        "a": 40, "b": 40, "c": 40, "illum": 57, "view": 59, "full": 116,
    }  # fmt: skip
    for split in cf.SPLITS17:
        task = cf.read_retrieval_task(split)
        assert task.queries_seq.size == 10_000 and task.distractors_seq.size == 20_000
        assert set(task.queries_seq) <= set(splits[split])
    subset = (DATA / "cvpr17_retr_queries_split-a_head.csv").read_bytes()
    shipped = (cf.DATA_DIR / "retr_queries_split-a.csv").read_bytes()
    assert shipped.startswith(subset)
    digest = hashlib.sha1(b"blob %d\0" % len(shipped) + shipped).hexdigest()
    assert digest == "02c1941eeb64229e0a9c6fd1eee13d9ab6dcee32"  # the repository's git blob id


def test_constant_descriptors_all_ties_equal_slow_port(tmp_path: Path) -> None:
    seqs = ["i_a", "v_b", "v_c"]
    descr = {s: {img: np.full((n, 3), 2.0, np.float32) for img in cf.IMAGES17}
             for s, n in zip(seqs, (40, 50, 60), strict=True)}  # fmt: skip
    write_folder(tmp_path / "descr", descr)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "splits.json").write_text(json.dumps({"z": {"test": seqs}}))
    pool = [(s, i) for s in seqs for i in range(40)]
    for name, rows in (("queries", pool[::7]), ("distractors", [p for p in pool if p[1] % 7])):
        text = "s,idx\n" + "".join(f"{s},{i}\n" for s, i in rows)
        (tasks / f"retr_{name}_split-z.csv").write_text(text)
    got = ev.evaluate_hpatches17(tmp_path / "descr", split="z", task_dir=tasks, n_pairs=100)
    counts = {s: descr[s]["ref"].shape[0] for s in seqs}
    assert_close(
        got["verification"]["z"], ref_verification(descr, ref_gen_verif(counts, seqs, 100))
    )
    assert_close(got["matching"]["z"], ref_matching(descr, seqs))
    queries, distractors = load_ref_task(tasks, "z")
    assert_close(got["retrieval"]["z"], ref_retrieval(descr, queries, distractors, seqs))
