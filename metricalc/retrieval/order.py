"""The order in which trec_eval ranks the lines of a run (``form_res_rels.c``).

Per query, documents by score descending, ties broken by docno descending in byte order. The
scores compare as doubles (``scores="float64"``, trec_eval 9.0.8 as tagged ``trec_eval-9.0.8``,
whose ``TEXT_RESULTS.sim`` is a ``double``) or as 32-bit floats (``scores="float32"``, the older
tag ``v9.0.8`` and pytrec_eval, whose ``sim`` is a ``float``: scores equal at float32 precision
tie). The reading of run files
(:mod:`~metricalc.retrieval.trec_files`, which writes a run in this order) and the join with
the qrels (:mod:`~metricalc.retrieval.ranking`) both use it, so it sits below them.

Identifiers come as a pyarrow binary array (read by :mod:`~metricalc.retrieval.trec_files`) or
as a NumPy bytes array (read by :mod:`~metricalc.retrieval.small_files`, which does not load
pyarrow; NumPy compares such bytes as ``strcmp`` does, unsigned and byte by byte). pyarrow is
imported only to handle the arrays it made, so it is loaded already then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

Names: TypeAlias = "pa.Array | np.ndarray"
"""Identifiers (bytes): a pyarrow binary array or a NumPy bytes array."""

__all__ = ["SCORES", "byte_order", "decode_ids", "score_key", "trec_order"]

SCORES = ("float64", "float32")
"""How run scores compare: as doubles (trec_eval 9.0.8) or as 32-bit floats (pytrec_eval)."""


def score_key(score: np.ndarray, scores: str = "float64") -> np.ndarray:
    """uint64 keys ordering scores descending at the precision of ``scores``; equal keys tie."""
    if scores == "float32":
        with np.errstate(over="ignore"):  # beyond float32's range: +-inf, as C's (float) cast
            s32 = score.astype(np.float32) + np.float32(0.0)  # -0.0 becomes +0.0: C ties them
        bits = s32.view(np.uint32).astype(np.uint64) << np.uint64(32)
    else:
        bits = (score.astype(np.float64) + 0.0).view(np.uint64)
    # the float's bits as an unsigned integer in the float's order, then reversed (descending)
    top = np.uint64(1) << np.uint64(63)
    ascending = np.where(bits >> np.uint64(63), ~bits, bits | top)
    result: np.ndarray = ~ascending
    return result


def trec_order(qid: np.ndarray, score: np.ndarray, doc: np.ndarray, docnos: Names, *,
               code: np.ndarray | None = None, tie_policy: str = "trec_eval",
               scores: str = "float64") -> np.ndarray:
    """Indices ordering run lines by query code, score descending (at the precision of
    ``scores``), then (tied scores) relevance code descending (``"optimistic"``) or ascending
    (``"pessimistic"``) when ``code`` is given, then docno descending in byte order.

    Examples
    --------
    >>> import pyarrow as pa
    >>> names = pa.array([b"a", b"b", b"c"])
    >>> score = np.array([1.0, 1.0 + 1e-9, 2.0])
    >>> trec_order(np.array([0, 0, 0]), score, np.array([0, 1, 2]), names).tolist()
    [2, 1, 0]
    >>> trec_order(np.array([0, 0, 0]), score[::-1], np.array([0, 1, 2]), names,
    ...            scores="float32").tolist()  # 1.0 and 1.0 + 1e-9 tie: docno descending
    [0, 2, 1]
    """
    # one sort on a 64-bit (query, float32 score) key; float32 rounding is monotone, so only
    # documents tied there can be in another order as doubles: their groups are re-sorted below
    key = score_key(score, "float32") >> np.uint64(32)
    order = np.argsort((qid.astype(np.uint64) << np.uint64(32)) | key, kind="stable")
    sorted_key, sorted_q = key[order], qid[order]
    same = (sorted_key[1:] == sorted_key[:-1]) & (sorted_q[1:] == sorted_q[:-1])
    if not same.any():
        return order
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    where = np.flatnonzero(tied)
    group = np.cumsum(np.r_[True, ~same])[where]
    sub = order[where]
    uniq, inverse = np.unique(doc[sub], return_inverse=True)
    name_rank = np.empty(uniq.size, dtype=np.int64)
    name_rank[byte_order(docnos, uniq)] = np.arange(uniq.size)
    keys = [-name_rank[inverse]]
    if code is not None and tie_policy in ("optimistic", "pessimistic"):
        keys.append(-code[sub] if tie_policy == "optimistic" else code[sub])
    if scores == "float64":
        keys.append(score_key(score[sub], "float64"))
    keys.append(group)
    order[where] = sub[np.lexsort(keys)]
    return order


def byte_order(names: Names, codes: np.ndarray) -> np.ndarray:
    """Indices ordering ``names[codes]`` in byte order (stable).

    Examples
    --------
    >>> byte_order(np.array([b"b", b"ab", b"a"]), np.array([0, 1, 2])).tolist()
    [2, 1, 0]
    """
    if isinstance(names, np.ndarray):
        return np.argsort(names[codes], kind="stable")
    from metricalc.retrieval.arrow import call, take, to_numpy

    return to_numpy(call("sort_indices", take(names, codes))).astype(np.int64)


def decode_ids(qids: Names, codes: np.ndarray | None = None) -> list[str]:
    """The identifiers of ``qids`` (bytes; with ``codes``, those of ``qids[codes]``) as text,
    undecodable bytes replaced.

    Examples
    --------
    >>> decode_ids(np.array([b"q1", "é".encode(), b"\\xff"]), np.array([1, 2])) == ["é", "\\ufffd"]
    True
    """
    if isinstance(qids, np.ndarray):
        values = (qids if codes is None else qids[codes]).tolist()
    else:
        from metricalc.retrieval.arrow import take

        values = (qids if codes is None else take(qids, codes)).to_pylist()
    return [q.decode("utf-8", "replace") for q in values]
