r"""Patch retrieval results written as TREC files (a run and qrels), for trec_eval, pytrec_eval
or ranx.

Query :math:`q` (qid: its signature) retrieves its results at ranks 2..51 in the listed order with
scores 50..1 (rank 1, the query itself, is left out, as the evaluation leaves it out). A signature
listed again in the same line is renamed ``<signature>#<k>`` at its :math:`k`-th listing (the
query at rank 1 counts as the first listing of the query), so that no document is retrieved twice
and a repeat is not relevant, as ``repeats="negative"`` scores it
(:func:`~metricalc.benchmarks.hpatches_patches.relevance`).

- patch qrels: the cluster's other patches :math:`C_q \setminus \{q\}` judged 1, listed or not
  (:math:`R = |C_q| - 1`), so that trec_eval's measures on the files are
  :func:`~metricalc.benchmarks.hpatches_patches.evaluate.ir_measures`;
- image qrels: the listed results whose patch-image is a cluster member's, judged 1 (the
  relevant results present: :math:`R` is their number, as in the HPatches image retrieval AP),
  so that trec_eval's ``map`` is ``image_retrieval_ap`` under ``repeats="negative"``.

Both judge the query itself 0, so that trec_eval evaluates (as 0) a query with nothing relevant
instead of skipping it: the query is not in its run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from metricalc.benchmarks.hpatches_patches.checks import validate
from metricalc.benchmarks.hpatches_patches.evaluate import relevance
from metricalc.benchmarks.hpatches_patches.files import N_RESULTS, Benchmark, Labels, Results
from metricalc.errors import InvalidInputError
from metricalc.retrieval.writer import check_token, trec_writer

__all__ = ["PatchExport", "export_trec"]


@dataclass(frozen=True)
class PatchExport:
    """What :func:`export_trec` wrote: the paths (``image_qrels`` None when not asked) and the
    counts of queries, run lines and relevant judgments of each qrels."""

    run: Path
    qrels: Path
    image_qrels: Path | None
    n_queries: int
    n_lines: int
    n_patch_relevant: int
    n_image_relevant: int


def export_trec(
    benchmark: Benchmark,
    labels: Labels,
    results: Results,
    *,
    run: str | os.PathLike[str],
    qrels: str | os.PathLike[str],
    image_qrels: str | os.PathLike[str] | None = None,
    tag: str | None = None,
) -> PatchExport:
    r"""Write a ``.results`` file as a TREC run, with its patch (and image) retrieval qrels.

    Run: per query, ``qid Q0 docno rank score tag`` for the results :math:`s_2 .. s_{51}`
    (rank :math:`j = 1..50`, score :math:`51 - j`), a repeated signature renamed
    ``<signature>#<k>``. Qrels: ``qid 0 docno 1`` for every patch of the query's cluster but
    the query (patch retrieval) or for every listed result whose patch-image is one of the
    cluster's (image retrieval, ``image_qrels``), and ``qid 0 qid 0``. Files are written
    atomically.

    trec_eval on the run and the patch qrels gives
    :func:`~metricalc.benchmarks.hpatches_patches.evaluate.ir_measures`
    (``recip_rank``, ``P_k``, ``recall_k``, ``Rprec``, ``ndcg_cut_k``, ``success_k``, with
    :math:`R = |C_q| - 1`); its ``map`` on the image qrels is the image retrieval AP of
    :func:`~metricalc.benchmarks.hpatches_patches.evaluate_results` with ``repeats="negative"``.

    Parameters
    ----------
    benchmark, labels, results : Benchmark, Labels, Results
        Validated first (:func:`~metricalc.benchmarks.hpatches_patches.validate`).
    run, qrels : path
        The run and the patch retrieval qrels to write.
    image_qrels : path, optional
        Also write the image retrieval qrels there.
    tag : str, optional
        The run's tag (default: the results file's stem, ``"results"`` in memory).

    Raises
    ------
    InvalidInputError
        A failed validation rule, a query listed twice in the benchmark (a qid names one
        query), a cluster listing a patch twice, a tag with whitespace.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.benchmarks.hpatches_patches import Benchmark, Labels, Results
    >>> pool = ("a.ref", "a.e1", "b.ref")
    >>> bench = Benchmark(pool, ("a.ref.0",))
    >>> labels = Labels(pool, (("a.ref.0", "a.e1.0"),))
    >>> ranked = ["a.ref.0", "b.ref.1", "a.e1.0", "b.ref.1"] + [f"b.ref.{k}" for k in range(2, 49)]
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     done = export_trec(bench, labels, Results(pool, (tuple(ranked),)),
    ...                        run=Path(tmp) / "run", qrels=Path(tmp) / "qrels")
    ...     print(*done.run.read_text().splitlines()[:3], sep="\n")
    ...     print(done.qrels.read_text(), end="")
    a.ref.0 Q0 b.ref.1 1 50 results
    a.ref.0 Q0 a.e1.0 2 49 results
    a.ref.0 Q0 b.ref.1#2 3 48 results
    a.ref.0 0 a.e1.0 1
    a.ref.0 0 a.ref.0 0
    """
    validate(benchmark, labels, results)
    tag = (results.path.stem if results.path is not None else "results") if tag is None else tag
    check_token("tag", tag)
    queries = pd.Series(benchmark.queries)
    repeated = queries.duplicated()
    if repeated.any():
        raise InvalidInputError(
            f"{_name(benchmark, '<benchmark>')}: query {queries[repeated].iloc[0]!r} is listed "
            "twice; a TREC query id names one query"
        )
    patch_q, patch_d = _cluster_judgments(labels, queries)
    n = len(queries)
    docno = _docnos(results)
    qid = np.repeat(queries.to_numpy(dtype=object), N_RESULTS - 1)
    rank = np.tile(np.arange(1, N_RESULTS), n)
    with trec_writer(run) as out:
        out.write_table(pa.table({
            "qid": pa.array(qid, pa.string()),
            "q0": pa.array(np.full(qid.size, "Q0"), pa.string()),
            "docno": pa.array(docno.ravel(), pa.string()),
            "rank": pa.array(rank),
            "score": pa.array(N_RESULTS - rank),
            "tag": pa.array(np.full(qid.size, tag), pa.string()),
        }))
    _write_qrels(qrels, patch_q, patch_d, queries)
    _, image = relevance(benchmark, labels, results, repeats="negative", check=False)
    if image_qrels is not None:
        rows = np.broadcast_to(np.arange(n)[:, None], image.shape)
        _write_qrels(image_qrels, rows[image], docno[image], queries)
    return PatchExport(Path(run), Path(qrels), None if image_qrels is None else Path(image_qrels),
                       n, int(qid.size), int(patch_d.size), int(image.sum()))


def _name(obj: Benchmark | Labels | Results, default: str) -> str:
    return str(obj.path) if obj.path is not None else default


def _docnos(results: Results) -> np.ndarray:
    """The docnos of ranks 2..51 (queries x 50): the signatures, ``<signature>#<k>`` at the
    ``k``-th listing of a signature in its line (rank 1 included)."""
    names = np.array(results.results, dtype=object)  # (queries, 51)
    row = np.repeat(np.arange(names.shape[0]), names.shape[1])
    flat = pd.Series(names.ravel())
    listing = flat.groupby([row, flat.to_numpy()], sort=False).cumcount().to_numpy() + 1
    renamed = listing > 1
    flat[renamed] = flat[renamed] + "#" + pd.Series(listing[renamed], index=flat.index[renamed]
                                                     ).astype(str)
    return flat.to_numpy(dtype=object).reshape(names.shape)[:, 1:]


def _cluster_judgments(labels: Labels, queries: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(query index, docno) of every cluster member but the query, checked to be listed once."""
    sizes = np.array([len(cluster) for cluster in labels.clusters])
    index = np.repeat(np.arange(sizes.size), sizes)
    member = np.array([s for cluster in labels.clusters for s in cluster], dtype=object)
    twice = pd.DataFrame({"q": index, "m": member}).duplicated().to_numpy()
    if twice.any():
        first = int(np.argmax(twice))
        raise InvalidInputError(
            f"{_name(labels, '<labels>')}, line {index[first] + 2}: the cluster lists "
            f"{member[first]!r} twice; expected distinct patches"
        )
    other = member != queries.to_numpy(dtype=object)[index]
    return index[other], member[other]


def _write_qrels(path: str | os.PathLike[str], index: np.ndarray, docno: np.ndarray,
                 queries: pd.Series) -> None:
    """Judgments ``qid 0 docno 1`` (``index``: the query of each) and every query judging
    itself 0, query by query."""
    everyone = queries.to_numpy(dtype=object)
    index = np.r_[index, np.arange(everyone.size)]
    order = np.argsort(index, kind="stable")
    docnos = np.r_[docno, everyone][order]
    rel = np.r_[np.ones(docno.size, np.int64), np.zeros(everyone.size, np.int64)][order]
    with trec_writer(path) as out:
        out.write_table(pa.table({
            "qid": pa.array(everyone[index[order]], pa.string()),
            "iter": pa.array(np.zeros(index.size, dtype=np.int64)),
            "docno": pa.array(docnos, pa.string()),
            "rel": pa.array(rel),
        }))
