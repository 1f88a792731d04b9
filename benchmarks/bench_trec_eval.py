"""``metricalc trec-eval`` end to end from the shell, against the trec_eval binary and
pytrec_eval, each a cold process (interpreter start, imports, reading both files, evaluating,
printing).

Run: ``python benchmarks/bench_trec_eval.py --trec-eval PATH`` where PATH is a trec_eval binary or
a source checkout of https://github.com/usnistgov/trec_eval (built there with ``make``). Without
``--trec-eval`` the trec_eval column is left out; without pytrec_eval installed
(``pip install pytrec-eval-terrier``) the pytrec_eval column is. ``--sizes 30k`` for a quick look;
``--data DIR`` keeps the generated files there and reuses them on the next call.

Files, per size (run lines; 1,000 documents per query): run lines ``qid Q0 docno rank score tag``
separated by single spaces, scores with 6 decimals (a few ties), 8-character TREC-COVID-like docnos
from a collection of at least 200,000 documents; qrels of ~150 judgments per query (relevance -1 to
2, a third of them drawn from the query's top 100) written as TREC-COVID writes them: ``qid 1.5
docno rel`` with two spaces before the docno. Measures: ``map``, ``P.10``, ``ndcg_cut.10``,
``recip_rank``, ``Rprec`` (``common``) and ``all_trec``. Each command runs once untimed, then
``--repeat`` times (default 3), the tools taking turns; the table shows the medians of the wall
time and of the CPU time (user + system; on a machine other jobs share, the steadier figure) and
the ratios metricalc / trec_eval and metricalc / pytrec_eval, and the ``all`` values of the
common measures are checked to equal trec_eval's printout.

The Python processes run as an installed package runs: with their modules' bytecode cached (in a
temporary ``PYTHONPYCACHEPREFIX``, written by the untimed run), whatever ``PYTHONDONTWRITEBYTECODE``
says; compiling metricalc's modules anew at every start would cost more than reading a small run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

COMMON = ["map", "P.10", "ndcg_cut.10", "recip_rank", "Rprec"]
MEASURE_SETS = {"common": COMMON, "all_trec": ["all_trec"]}
DOCS_PER_QUERY = 1000
JUDGED_PER_QUERY = 150
SIZES = {"30k": 30_000, "1m": 1_000_000, "10m": 10_000_000}

PYTREC_SCRIPT = """
import sys, pytrec_eval
qrels_path, run_path, *measures = sys.argv[1:]
if measures == ["all_trec"]:
    measures = sorted(pytrec_eval.supported_measures)
with open(qrels_path) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(run_path) as f:
    run = pytrec_eval.parse_run(f)
per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
names = sorted({n for values in per_query.values() for n in values})
for name in names:
    values = [values[name] for values in per_query.values()]
    print(name, "all", sum(values) / len(values))
"""
"""pytrec_eval from the shell: parse both files, evaluate, print the mean of each measure."""


def docnos(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` distinct 8-character identifiers of lower-case letters and digits."""
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    names = np.unique(alphabet[rng.integers(0, 36, (int(n * 1.01) + 10, 8))]
                      .view("S8").ravel())
    return rng.permutation(names)[:n]


def write_files(folder: Path, lines: int, seed: int = 0) -> tuple[Path, Path]:
    """A qrels and a run file with ``lines`` run lines (module docstring)."""
    qrels_path, run_path = folder / f"qrels-{lines}.txt", folder / f"run-{lines}.txt"
    if qrels_path.exists() and run_path.exists():
        return qrels_path, run_path
    rng = np.random.default_rng(seed)
    n_queries = max(lines // DOCS_PER_QUERY, 1)
    depth = lines // n_queries
    collection = docnos(rng, max(200_000, lines // 10))
    qids = np.array([str(q).encode() for q in range(1, n_queries + 1)])
    # each query retrieves `depth` distinct documents: a random start and stride in the collection
    start = rng.integers(0, collection.size, n_queries)
    stride = rng.integers(1, collection.size // depth, n_queries)
    rank = np.arange(depth)
    doc = (start[:, None] + stride[:, None] * rank) % collection.size
    score = np.round(np.sort(rng.gamma(2.0, 4.0, (n_queries, depth)), axis=1)[:, ::-1], 6)
    with run_path.open("wb") as out:
        for q in range(n_queries):
            block = (qids[q] + b" Q0 " + collection[doc[q]] + b" "
                     + np.char.encode((rank + 1).astype(str)) + b" "
                     + np.char.encode(np.char.mod("%.6f", score[q])) + b" bench\n")
            out.write(b"".join(block.tolist()))
    # judgments: a third from the top 100 of the run, the rest from the collection
    top = doc[:, : min(100, depth)]
    pooled = top[np.arange(n_queries)[:, None],
                 rng.integers(0, top.shape[1], (n_queries, JUDGED_PER_QUERY // 3))]
    other = rng.integers(0, collection.size, (n_queries, JUDGED_PER_QUERY))
    rel = np.array([b"-1", b"0", b"1", b"2"])[rng.choice(4, (n_queries, 2 * JUDGED_PER_QUERY),
                                                        p=[0.05, 0.55, 0.25, 0.15])]
    with qrels_path.open("wb") as out:
        for q in range(n_queries):
            judged = np.unique(np.r_[pooled[q], other[q]])
            block = qids[q] + b" 1.5  " + collection[judged] + b" " + rel[q, : judged.size] + b"\n"
            out.write(b"".join(block.tolist()))
    return qrels_path, run_path


def build_trec_eval(path: Path) -> Path:
    """The trec_eval binary at ``path``, or built with ``make`` in the source checkout ``path``."""
    if path.is_file():
        return path
    if not (path / "trec_eval.c").is_file():
        sys.exit(f"--trec-eval {path}: neither a trec_eval binary nor its source checkout")
    if shutil.which("make") is None:
        sys.exit(f"--trec-eval {path}: building trec_eval needs make and a C compiler")
    subprocess.run(["make", "-s"], cwd=path, check=True)
    return path / "trec_eval"


def metricalc_command() -> list[str]:
    """The ``metricalc`` console script next to this interpreter, else ``python -m metricalc``."""
    script = Path(sys.executable).with_name("metricalc")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "metricalc"]


def commands(trec_eval: Path | None, pytrec: bool, qrels: Path, run: Path,
             measures: list[str]) -> dict[str, list[str]]:
    """The command line of every tool, evaluating ``run`` with ``measures``."""
    flags = [arg for m in measures for arg in ("-m", m)]
    found = {"metricalc": [*metricalc_command(), "trec-eval", str(qrels), str(run), *flags]}
    if trec_eval is not None:
        found["trec_eval"] = [str(trec_eval), *flags, str(qrels), str(run)]
    if pytrec:
        found["pytrec_eval"] = [sys.executable, "-c", PYTREC_SCRIPT, str(qrels), str(run),
                                *measures]
    return found


def timed(tools: dict[str, list[str]], repeat: int,
          env: dict[str, str]) -> dict[str, tuple[float, float, str]]:
    """The median wall time and median CPU time (user + system, of the process and its threads)
    of ``repeat`` runs of each command of ``tools`` (after one untimed run), and its output; the
    tools take turns, so that a change of the machine's load reaches all of them alike."""
    wall: dict[str, list[float]] = {tool: [] for tool in tools}
    cpu: dict[str, list[float]] = {tool: [] for tool in tools}
    output: dict[str, str] = {}
    for command in tools.values():
        subprocess.run(command, capture_output=True, check=True, env=env)
    for _ in range(repeat):
        for tool, command in tools.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, check=True, env=env)
            wall[tool].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[tool].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            output[tool] = done.stdout.decode()
    return {tool: (statistics.median(wall[tool]), statistics.median(cpu[tool]), output[tool])
            for tool in tools}


def all_values(output: str) -> dict[str, str]:
    """``name -> value`` of the ``all`` lines of trec_eval's printout."""
    rows = (line.split() for line in output.splitlines())
    return {row[0]: row[2] for row in rows if len(row) == 3 and row[1] == "all"}


def row(results: dict[str, tuple[float, float, str]]) -> str:
    """The cells of one line of the table: times, then the ratios of metricalc's."""
    ours = results["metricalc"]
    cells = [f"{results[t][0]:>6.2f}s ({results[t][1]:.2f}s)".rjust(14) if t in results
             else f"{'-':>14}" for t in ("metricalc", "trec_eval", "pytrec_eval")]
    cells += [f"{ours[0] / results[t][0]:>5.2f}x ({ours[1] / results[t][1]:.2f}x)".rjust(14)
              if t in results else f"{'-':>14}" for t in ("trec_eval", "pytrec_eval")]
    return " ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30k,1m,10m",
                        help=f"comma-separated run sizes in lines, of {', '.join(SIZES)} or a "
                        "number (default 30k,1m,10m)")
    parser.add_argument("--measures", default="common,all_trec",
                        help="comma-separated, of common and all_trec (default both)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (the median)")
    parser.add_argument("--trec-eval", type=Path, metavar="PATH",
                        help="trec_eval binary, or its source checkout to build with make")
    parser.add_argument("--data", type=Path, metavar="DIR",
                        help="keep the generated files here and reuse them (default: a temporary "
                        "folder)")
    args = parser.parse_args()
    trec_eval = None if args.trec_eval is None else build_trec_eval(args.trec_eval)
    if trec_eval is None:
        print("no --trec-eval PATH: trec_eval is not timed")
    try:
        import pytrec_eval  # noqa: F401
        pytrec = True
    except ImportError:
        print("pytrec_eval is not installed: it is not timed")
        pytrec = False
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.data or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        env = {name: value for name, value in os.environ.items()
               if name != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": f"{tmp}/pycache"}
        print(f"{'lines':>10} {'measures':<9} {'metricalc':>14} {'trec_eval':>14} "
              f"{'pytrec_eval':>14} {'/ trec_eval':>14} {'/ pytrec_eval':>14}")
        print(f"{'':>10} {'':<9} {'wall (cpu)':>14} {'wall (cpu)':>14} {'wall (cpu)':>14} "
              f"{'wall (cpu)':>14} {'wall (cpu)':>14}")
        for size in args.sizes.split(","):
            lines = SIZES.get(size.lower()) or int(size)
            qrels, run = write_files(folder, lines)
            for name in args.measures.split(","):
                tools = commands(trec_eval, pytrec, qrels, run, MEASURE_SETS[name])
                results = timed(tools, args.repeat, env)
                print(f"{lines:>10,} {name:<9} {row(results)}", flush=True)
                if "trec_eval" in results and name == "common":
                    theirs = all_values(results["trec_eval"][2])
                    mine = all_values(results["metricalc"][2])
                    if any(mine.get(k) != v for k, v in theirs.items() if k != "runid"):
                        print("  (!) metricalc's all values differ from trec_eval's")


if __name__ == "__main__":
    main()
