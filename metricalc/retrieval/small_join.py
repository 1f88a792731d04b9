"""A run evaluated from its file and the qrels file: small plain files read with NumPy alone
(:mod:`~metricalc.retrieval.small_files`) and joined here, any other with pyarrow
(:mod:`~metricalc.retrieval.trec_files`); the values and messages are the same either way."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Unpack

import numpy as np

from metricalc.retrieval.ranking import Joined, join_run, relevance_code
from metricalc.retrieval.small_files import (
    SMALL,
    _as_bytes,
    _columns,
    _decimals,
    _encode,
    _field,
    _joined,
    _keys,
)
from metricalc.retrieval.trec_eval import TrecEval, evaluate_joined

if TYPE_CHECKING:
    from collections.abc import Sequence

    from metricalc.retrieval.querycube import EvalOptions
    from metricalc.retrieval.zscores import ZScores

__all__ = ["evaluate_files", "join_files"]


def evaluate_files(qrels: str | os.PathLike[str], run: str | os.PathLike[str],
                   measures: Sequence[str] = ("official",), *, zscores: ZScores | None = None,
                   **options: Unpack[EvalOptions]) -> TrecEval:
    """Evaluate the run file ``run`` against the qrels file ``qrels``: what
    :func:`~metricalc.retrieval.evaluate` gives for :func:`~metricalc.retrieval.read_qrels` and
    :func:`~metricalc.retrieval.read_run` of them, with its options (``complete``, ``level``,
    ``depth``, ``tie_policy``, ``scores``, ``judged_only``, ``num_docs``, ``zscores``); the files
    are read with NumPy alone when they are small (:data:`SMALL`) and plain (:func:`join_files`,
    whose example evaluates files too).
    """
    joined = join_files(qrels, run) if _size(qrels) + _size(run) <= SMALL else None
    if joined is None:
        from metricalc.retrieval.trec_files import read_qrels, read_run

        joined = join_run(read_qrels(qrels), read_run(run))
    return evaluate_joined(joined, measures, zscores=zscores, **options)


def _size(path: str | os.PathLike[str]) -> int:
    """The size of the file at ``path`` in bytes; one beyond :data:`SMALL` if there is none (the
    reader of large files then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return SMALL + 1


def join_files(qrels: str | os.PathLike[str], run: str | os.PathLike[str]) -> Joined | None:
    """The run file ``run`` joined with the qrels file ``qrels``, read with NumPy; None if
    either file is not plain (module docstring) or cannot be read.

    Examples
    --------
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> with TemporaryDirectory() as folder:
    ...     q, r = Path(folder) / "qrels", Path(folder) / "run"
    ...     _ = q.write_text("q1 0 d1 1\\nq2 0 d1 0\\n")
    ...     _ = r.write_text("q1 Q0 d2 1 2.5 bm25\\nq1 Q0 d1 2 1.5 bm25\\nq3 Q0 d1 1 1 bm25\\n")
    ...     joined = join_files(q, r)
    ...     joined.query.tolist(), joined.code.tolist(), joined.tag
    ...     evaluate_files(q, r, ["map", "P.2"]).summary  # q1 only: d1, relevant, ranked 2nd
    ...     _ = r.write_text("q1 Q0 d2 1 2.5\\n")  # five fields
    ...     join_files(q, r) is None
    ([0, 0], [-1, 1], 'bm25')
    {'map': 0.5, 'P_2': 0.5}
    True
    """
    judged = _columns(qrels, 4, (0, 2, 3))
    ranked = _columns(run, 6, (0, 2, 4))
    if judged is None or ranked is None:
        return None
    (judged_text, (judged_qid, judged_docno, judged_rel), _) = judged
    (run_text, (run_qid, run_docno, run_score), tag) = ranked
    try:  # ValueError: a number Python does not read, a field longer than LONGEST
        rel = _as_bytes(_field(judged_text, *judged_rel)).astype(np.int64)
        score = _decimals(run_text, *run_score)
        qids, query = _encode(_keys(judged_text, *judged_qid))
        run_qids, run_query = _encode(_keys(run_text, *run_qid))
        # documents of both files in one code space, in byte order
        docnos, doc = _encode(_joined(_keys(judged_text, *judged_docno),
                                      _keys(run_text, *run_docno)))
    except (ValueError, OverflowError):
        return None
    if np.isnan(score).any():
        return None
    judged_doc, run_doc = doc[: rel.size], doc[rel.size:]
    qrels_key = query * np.int64(docnos.size) + judged_doc
    order = np.argsort(qrels_key, kind="stable")
    qrels_key = qrels_key[order]
    run_key = np.sort(run_query * np.int64(docnos.size) + run_doc)
    if (qrels_key[1:] == qrels_key[:-1]).any() or (run_key[1:] == run_key[:-1]).any():
        return None  # a document twice for a query: trec_files names the line
    # the run's queries in the qrels' codes (-1: no qrels), then each line's judgment
    at = np.minimum(np.searchsorted(qids, run_qids), qids.size - 1)
    run_q = np.where(qids[at] == run_qids, at, -1)[run_query]
    keep = np.flatnonzero(run_q >= 0)
    key = run_q[keep] * np.int64(docnos.size) + run_doc[keep]
    at = np.minimum(np.searchsorted(qrels_key, key), qrels_key.size - 1)
    found = np.where(qrels_key[at] == key, order[at], -1)
    return Joined(run_q[keep], run_doc[keep], score[keep], relevance_code(found, rel), docnos,
                  qids, query, rel, tag.decode("utf-8", "replace"), str(run), str(qrels))
