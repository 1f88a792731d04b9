"""The order in which trec_eval ranks the lines of a run (``form_res_rels.c``).

Per query, documents by score descending, the score stored as a 32-bit float (scores equal at
float32 precision tie), ties broken by docno descending in byte order. The reading of run files
(:mod:`~metricalc.retrieval.trec_files`, which writes a run in this order) and the join with
the qrels (:mod:`~metricalc.retrieval.ranking`) both use it, so it sits below them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from metricalc.retrieval.arrow import from_numpy, to_numpy

__all__ = ["decode_ids", "score_key", "trec_order"]


def score_key(qid: np.ndarray, score: np.ndarray) -> np.ndarray:
    """uint64 keys ordering (query ascending, float32 score descending); equal keys tie."""
    with np.errstate(over="ignore"):  # beyond float32's range: +-inf, as C's (float) cast
        s32 = score.astype(np.float32)
    s32 = s32 + np.float32(0.0)  # -0.0 becomes +0.0: C compares them equal
    bits = s32.view(np.uint32)
    # the float's bits as an unsigned integer in the float's order, then reversed (descending)
    ascending = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))
    return (qid.astype(np.uint64) << np.uint64(32)) | (~ascending).astype(np.uint64)


def trec_order(qid: np.ndarray, score: np.ndarray, doc: np.ndarray, docnos: pa.Array, *,
               code: np.ndarray | None = None, ties: str = "trec_eval") -> np.ndarray:
    """Indices ordering run lines by query code, float32 score descending, then (tied scores)
    relevance code descending (``"optimistic"``) or ascending (``"pessimistic"``) when ``code``
    is given, then docno descending in byte order.

    Examples
    --------
    >>> import pyarrow as pa
    >>> trec_order(np.array([0, 0, 0]), np.array([1.0, 1.0 + 1e-9, 2.0]), np.array([0, 1, 2]),
    ...            pa.array([b"a", b"b", b"c"])).tolist()
    [2, 1, 0]
    """
    key = score_key(qid, score)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    same = sorted_key[1:] == sorted_key[:-1]
    if not same.any():
        return order
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    where = np.flatnonzero(tied)
    group = np.cumsum(np.r_[True, ~same])[where]
    sub = order[where]
    uniq, inverse = np.unique(doc[sub], return_inverse=True)
    names = docnos.take(from_numpy(uniq))
    name_rank = np.empty(uniq.size, dtype=np.int64)
    name_rank[to_numpy(pc.sort_indices(names))] = np.arange(uniq.size)
    keys = [-name_rank[inverse]]
    if code is not None and ties in ("optimistic", "pessimistic"):
        keys.append(-code[sub] if ties == "optimistic" else code[sub])
    keys.append(group)
    order[where] = sub[np.lexsort(keys)]
    return order


def decode_ids(qids: pa.Array) -> list[str]:
    """The identifiers of ``qids`` (bytes) as text, undecodable bytes replaced."""
    return [q.decode("utf-8", "replace") for q in qids.to_pylist()]
