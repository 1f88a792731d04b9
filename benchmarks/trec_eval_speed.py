"""Speed of ``metricalc trec-eval`` end to end from files, against ranx and pytrec_eval timed in
the same run.

Run: ``python benchmarks/trec_eval_speed.py`` (``--sizes 10000x100`` for a quick look). Both
references need their packages (``pip install metricalc[test,bench]``).

For each size (queries x documents per query, default 100,000 x 100 and 10,000 x 1,000) a qrels
file (20 judged documents per query, relevance 0-2) and a run file (scores rounded to 4 decimals,
so there are ties) are written to a temporary folder; then, reading both files and computing
``map``, ``P_10``, ``ndcg_cut_10``, ``recip_rank`` and ``Rprec``:

- metricalc: ``read_qrels``, ``read_run``, ``evaluate``;
- ranx: ``Qrels.from_file``, ``Run.from_file``, ``evaluate`` (run once before timing, so numba
  has compiled);
- pytrec_eval: ``parse_qrel``, ``parse_run``, ``RelevanceEvaluator(...).evaluate``.

Targets: metricalc <= 1.0x ranx and <= 0.5x pytrec_eval. Each tool is timed once per size (the
files are large); on a shared machine the figures are noisy.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

MEASURES = ["map", "P.10", "ndcg_cut.10", "recip_rank", "Rprec"]
RANX = ["map", "precision@10", "ndcg@10", "mrr", "r-precision"]
PYTREC = {"map", "P.10", "ndcg_cut.10", "recip_rank", "Rprec"}


def write_files(folder: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path]:
    """A qrels and a run file of ``n_queries`` x ``n_docs``."""
    rng = np.random.default_rng(seed)
    pool = 5 * n_docs
    q = np.repeat(np.arange(n_queries), n_docs)
    d = (rng.permuted(np.tile(np.arange(pool), (n_queries, 1)), axis=1)[:, :n_docs]).ravel()
    qid = np.char.add("q", q.astype(str))
    run = pa.table({
        "qid": qid, "q0": np.full(q.size, "Q0"), "docno": np.char.add("doc", d.astype(str)),
        "rank": np.tile(np.arange(1, n_docs + 1), n_queries),
        "score": np.round(rng.random(q.size), 4), "tag": np.full(q.size, "bench"),
    })
    judged = 20
    qq = np.repeat(np.arange(n_queries), judged)
    dd = (rng.permuted(np.tile(np.arange(pool), (n_queries, 1)), axis=1)[:, :judged]).ravel()
    qrels = pa.table({
        "qid": np.char.add("q", qq.astype(str)), "iter": np.zeros(qq.size, dtype=np.int64),
        "docno": np.char.add("doc", dd.astype(str)), "rel": rng.integers(0, 3, qq.size),
    })
    options = pcsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    paths = folder / "qrels.txt", folder / "run.txt"
    pcsv.write_csv(qrels, paths[0], options)
    pcsv.write_csv(run, paths[1], options)
    return paths


def metricalc_time(qrels: Path, run: Path) -> float:
    from metricalc.retrieval import evaluate, read_qrels, read_run

    start = time.perf_counter()
    evaluate(read_qrels(qrels), read_run(run), MEASURES)
    return time.perf_counter() - start


def ranx_time(qrels: Path, run: Path) -> float:
    import ranx

    start = time.perf_counter()
    ranx.evaluate(ranx.Qrels.from_file(str(qrels), kind="trec"),
                  ranx.Run.from_file(str(run), kind="trec"), RANX)
    return time.perf_counter() - start


def pytrec_time(qrels: Path, run: Path) -> float:
    import pytrec_eval

    start = time.perf_counter()
    with qrels.open() as f:
        judgments = pytrec_eval.parse_qrel(f)
    with run.open() as f:
        scores = pytrec_eval.parse_run(f)
    pytrec_eval.RelevanceEvaluator(judgments, PYTREC).evaluate(scores)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000x100,10000x1000",
                        help="comma-separated QUERIESxDOCS (default 100000x100,10000x1000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        warm = write_files(Path(tmp), 50, 20, seed=1)
        metricalc_time(*warm)
        ranx_time(*warm)  # numba compiles here, not in the timed runs
        print(f"{'size':<16} {'metricalc':>10} {'ranx':>10} {'pytrec_eval':>12} "
              f"{'vs ranx':>8} {'vs pytrec':>10}   targets <= 1.0x, <= 0.5x")
        for size in args.sizes.split(","):
            n_queries, n_docs = (int(v) for v in size.lower().split("x"))
            files = write_files(Path(tmp), n_queries, n_docs)
            ours = metricalc_time(*files)
            theirs = ranx_time(*files)
            pytrec = pytrec_time(*files)
            print(f"{size:<16} {ours:>9.2f}s {theirs:>9.2f}s {pytrec:>11.2f}s "
                  f"{ours / theirs:>7.2f}x {ours / pytrec:>9.2f}x")


if __name__ == "__main__":
    main()
