"""Speed of ``metricalc trec-eval -R qrels_prefs`` and ``-R prefs`` against trec_eval's binary.

Run: ``python benchmarks/trec_prefs_speed.py --trec-eval /path/to/trec_eval`` (trec_eval 9.0.8
built from https://github.com/usnistgov/trec_eval with ``make``; without ``--trec-eval`` the one
on ``PATH``, or metricalc alone).

For each size (queries x judged documents per query; default 2,000 x 100 and 50 x 2,000) a
qrels file (relevance 0-2, read as preferences: one judgment group per query) and a run
(retrieving half the judged documents among as many others, scores with ties) are written to a
temporary folder, plus a preference file of the same documents in three judgment groups of two
sub-groups each (preference arrays). Each tool evaluates ``all_prefs`` per query (``-q``) from
the files; the printed ratio is metricalc's time over trec_eval's, and the outputs are compared.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_files(folder: Path, n_queries: int, n_docs: int, seed: int = 0) -> dict[str, Path]:
    """qrels, prefs and run files of ``n_queries`` x ``n_docs``."""
    rng = np.random.default_rng(seed)
    qrels, prefs, run = [], [], []
    for q in range(n_queries):
        docs = rng.choice(4 * n_docs, n_docs, replace=False)
        rel = rng.choice(3, n_docs, p=[0.7, 0.2, 0.1])
        qrels += [f"q{q} 0 d{d} {r}" for d, r in zip(docs, rel, strict=True)]
        for jg in range(3):
            for jsg in range(2):
                part = rng.choice(n_docs, min(n_docs, 30), replace=False)
                prefs += [f"q{q} u{jg} s{jsg} d{docs[i]} {rel[i]}" for i in part]
        retrieved = np.r_[rng.choice(docs, n_docs // 2, replace=False),
                          rng.choice(np.arange(4 * n_docs, 5 * n_docs), n_docs // 2)]
        scores = rng.integers(0, 1000, retrieved.size) / 100
        run += [f"q{q} Q0 d{d} 1 {s} bench" for d, s in zip(np.unique(retrieved), scores,
                                                              strict=False)]
    paths = {"qrels": folder / "qrels.txt", "prefs": folder / "prefs.txt",
             "run": folder / "run.txt"}
    for name, lines in (("qrels", qrels), ("prefs", prefs), ("run", run)):
        paths[name].write_text("\n".join(lines) + "\n")
    return paths


def timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trec-eval", default=shutil.which("trec_eval"))
    parser.add_argument("--sizes", nargs="+", default=["2000x100", "50x2000"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            n_queries, n_docs = map(int, size.split("x"))
            paths = write_files(Path(tmp), n_queries, n_docs)
            for fmt, judged in (("qrels_prefs", paths["qrels"]), ("prefs", paths["prefs"])):
                flags = ["-q", "-m", "all_prefs", "-R", fmt, str(judged), str(paths["run"])]
                ours, text = timed([sys.executable, "-m", "metricalc", "trec-eval", *flags])
                line = f"{size:>10} -R {fmt:<11} metricalc {ours:6.2f} s"
                if args.trec_eval:
                    theirs, reference = timed([args.trec_eval, *flags])
                    line += (f"  trec_eval {theirs:6.2f} s  ratio {ours / theirs:5.2f}x  "
                             f"output {'identical' if text == reference else 'DIFFERENT'}")
                print(line, flush=True)


if __name__ == "__main__":
    main()
