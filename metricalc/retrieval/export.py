r"""A keypoint QueryCube exported as TREC files, so that trec_eval, pytrec_eval or ranx compute
metricalc's numbers from them.

A cube keeps, per descriptor and query, only the rank statistics of the query's relevant item:
``better`` (candidates scored strictly above it) and ``ties`` (candidates scored equal to it).
:func:`export_cube` writes one descriptor's queries as a run and its qrels:

- every query with ``n_relevant = 1`` retrieves ``better`` placeholder documents at score 1 and
  its relevant document with ``ties`` placeholders at score 0, the relevant document placed in
  the tie group by its docno (trec_eval orders tied scores by docno descending): first under
  ``optimistic``, last under ``pessimistic``, after :math:`\lfloor (t+1)/2 \rfloor` placeholders
  under ``workbench``; ``expected`` averages over every order and is no single run (tools
  that order ties otherwise, ranx, need ``scores="ranked"``: one distinct score per rank);
- the qrels judge the relevant document 1; placeholders are not judged (non-relevant to
  trec_eval);
- queries with ``n_relevant = 0`` are left out (``true_map_micro`` excludes them), or written to
  the qrels only with ``include_zeros``; queries with ``n_relevant = -1`` (not evaluated for the
  descriptor) are left out.

trec_eval's ``recip_rank`` and ``map`` of a query are then ``ap_from_rank_stats(better, ties,
policy)``, ``success.k`` and ``recall.k`` its hit at :math:`k` and ``P.k`` that hit over :math:`k`;
their ``all`` values are ``metric_set``'s ``true_map_micro``, ``hit_rate_at_k`` and
``precision_at_k`` under that policy. See docs/retrieval.md, "Exporting to TREC files".
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.retrieval.writer import check_token, trec_writer
from metricalc.validation import check_choice, is_integer

__all__ = ["EXPORT_POLICIES", "SCORES", "CubeExport", "export_cube"]

EXPORT_POLICIES = ("optimistic", "pessimistic", "workbench")
"""The tie policies a single run can hold (``expected`` is a mean over orders)."""

SCORES = ("tied", "ranked")
"""Scores of an exported run: the tie group kept, or one distinct score per rank."""

DEFAULT_DEPTH = 1000
"""Documents written per query by default (trec_eval ranks beyond it as not retrieved)."""

CHUNK_LINES = 1 << 21
"""Run lines built at once: the run is written in slices of queries of about this many lines."""

@dataclass(frozen=True)
class CubeExport:
    """What :func:`export_cube` wrote.

    ``n_queries``: queries with a relevant document (in the run and the qrels); ``n_zeros``:
    queries without one written to the qrels (``include_zeros``); ``n_lines``: run lines;
    ``n_beyond_depth``: relevant documents ranked beyond ``depth``, so not written (trec_eval
    scores their queries as if nothing relevant was retrieved).
    """

    run: Path
    qrels: Path
    descriptor: str
    tie_policy: str
    depth: int | None
    n_queries: int
    n_zeros: int
    n_lines: int
    n_beyond_depth: int


def export_cube(
    cube: xr.Dataset,
    descriptor: str,
    *,
    run: str | os.PathLike[str],
    qrels: str | os.PathLike[str],
    tie_policy: str,
    depth: int | None = DEFAULT_DEPTH,
    include_zeros: bool = False,
    scores: str = "tied",
    tag: str | None = None,
) -> CubeExport:
    r"""Write one descriptor of a QueryCube as a TREC run and its qrels (atomically).

    Query :math:`q` with :math:`b` = ``better`` and :math:`t` = ``ties`` becomes, in trec_eval's
    order, :math:`b` placeholders ``b1 .. bb`` at score 1, then its tie group at score 0: the
    relevant document and :math:`t` placeholders named ``t`` + a zero-padded number, numbered so
    that docno descending puts the relevant document :math:`m`-th from the top,

    .. math::

        m = 0 \ (\texttt{optimistic}), \quad m = t \ (\texttt{pessimistic}), \quad
        m = \lfloor (t + 1) / 2 \rfloor \ (\texttt{workbench}),

    so that its rank is :math:`1 + b + m`, the rank of :func:`metricalc.ap_from_rank_stats`
    under that policy. Ranks beyond ``depth`` are not written.

    Parameters
    ----------
    cube : xarray.Dataset
        A QueryCube with ``better``, ``ties`` and ``n_relevant``.
    descriptor : str
        The descriptor to export (a run holds one system).
    run, qrels : path
        Files to write: ``qid Q0 docno rank score tag`` and ``qid 0 docno rel`` lines.
    tie_policy : {"optimistic", "pessimistic", "workbench"}
        Where the relevant document goes in its tie group. ``"expected"`` is refused: it is a
        mean over every order of the tie group, which no single run holds (``metricalc
        trec-eval --tie-policy expected`` on the exported run computes it, the tied scores being
        kept, where ``depth`` cuts no tie group).
    depth : int or None
        Documents written per query at most (default 1000); ``None`` writes all
        :math:`b + t + 1`. A relevant document beyond it is not written and trec_eval scores the
        query 0 (it stays in the qrels).
    include_zeros : bool
        Also write the queries with ``n_relevant = 0`` to the qrels, one placeholder ``none``
        judged 0 each, and not to the run: trec_eval evaluates only run queries, so its ``all``
        stays ``true_map_micro``, and ``trec_eval -c`` averages over the qrels queries, which
        gives ``true_map_micro_including_zeros``. Default: left out of both files.
    scores : {"tied", "ranked"}
        ``"tied"`` (default): 1 above the relevant document, 0 for its tie group, so the run
        holds the cube's ties and only the docnos set the policy: trec_eval and pytrec_eval
        (ties by docno descending) follow it, tools that order ties otherwise (ranx) do not.
        ``"ranked"``: strictly decreasing scores :math:`n_q, \dots, 1` in that order, so every
        tool ranks as the policy does; the ties are lost.
    tag : str, optional
        The run's tag (default: the descriptor).

    Returns
    -------
    CubeExport
        The paths and counts written.

    Raises
    ------
    InvalidInputError
        An unknown descriptor or one whose evaluation failed, ``tie_policy="expected"``, a
        ``depth`` below 1, a query with a relevant item but no rank statistics (``better`` =
        -1: a cube built from APs only), an identifier holding whitespace.

    Notes
    -----
    The query id is ``scene/pair/keypoint_set/query_keypoint`` (the cube's query identity).
    Placeholder docnos repeat across queries; a docno names a document of its query only, as
    TREC files allow.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc import cube as qc
    >>> cube = qc.new_cube(["sift"], {"scene": ["v_a", "v_a"], "pair": ["1-2", "1-2"],
    ...                               "keypoint_set": ["kp", "kp"], "query_keypoint": [0, 1]},
    ...                    {"better": [[1, -1]], "ties": [[2, -1]]}, attrs=qc.DEFAULT_ATTRS)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     done = export_cube(cube, "sift", run=Path(tmp) / "run", qrels=Path(tmp) / "qrels",
    ...                        tie_policy="pessimistic")
    ...     print(done.run.read_text() + done.qrels.read_text(), end="")
    v_a/1-2/kp/0 Q0 b1 1 1 sift
    v_a/1-2/kp/0 Q0 t2 2 0 sift
    v_a/1-2/kp/0 Q0 t1 3 0 sift
    v_a/1-2/kp/0 Q0 t0 4 0 sift
    v_a/1-2/kp/0 0 t0 1
    """
    if tie_policy == "expected":
        raise InvalidInputError(
            "tie_policy 'expected' is a mean over every order of the tied documents, which no "
            "single run holds; export with tie_policy 'optimistic' or 'pessimistic' (or "
            "'workbench')"
        )
    check_choice("tie_policy", tie_policy, EXPORT_POLICIES)
    check_choice("scores", scores, SCORES)
    if depth is not None and (not is_integer(depth) or depth < 1):
        raise InvalidInputError(f"depth must be a positive integer or None; got {depth!r}")
    depth = None if depth is None else int(depth)
    tag = descriptor if tag is None else tag
    check_token("tag", tag)
    better, ties, n_relevant, qids = _descriptor_queries(cube, descriptor)
    ranked = n_relevant == 1
    if not ranked.any():
        raise InvalidInputError(
            f"descriptor {descriptor!r} has no query with a relevant item (n_relevant = 1); "
            "there is no run to write"
        )
    zeros = (n_relevant == 0) & include_zeros
    b, t = better[ranked], ties[ranked]
    m = _tie_offset(b, t, tie_policy)
    width = len(str(int(max(b.max(), t.max()))))
    n_lines = _write_run(run, qids.filter(pa.array(ranked)), b, t, depth, width,
                         scores == "ranked", tag)
    kept = ranked | zeros
    is_ranked = ranked[kept]
    number = np.zeros(is_ranked.size, dtype=np.int64)
    number[is_ranked] = t - m  # the relevant document's docno, t<t - m>
    docno = pc.if_else(pa.array(is_ranked), _padded("t", number, width), "none")
    with trec_writer(qrels) as out:
        out.write_table(pa.table({
            "qid": qids.filter(pa.array(kept)),
            "iter": pa.array(np.zeros(is_ranked.size, dtype=np.int64)),
            "docno": docno,
            "rel": pa.array(is_ranked.astype(np.int64)),
        }))
    beyond = int((1 + b + m > depth).sum()) if depth is not None else 0
    return CubeExport(Path(run), Path(qrels), descriptor, tie_policy, depth, int(ranked.sum()),
                      int(zeros.sum()), n_lines, beyond)


def _tie_offset(better: np.ndarray, ties: np.ndarray, tie_policy: str) -> np.ndarray:
    """Placeholders of the tie group ordered before the relevant document: its rank under
    ``tie_policy`` (:func:`metricalc.core.ranking.rank_from_rank_stats`) less ``1 + better``."""
    from metricalc.core.ranking import rank_from_rank_stats

    rank = np.asarray(rank_from_rank_stats(better, ties, tie_policy=tie_policy))
    offset: np.ndarray = rank.astype(np.int64) - 1 - better
    return offset


def _descriptor_queries(
    cube: xr.Dataset, descriptor: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
    """better, ties, n_relevant of one descriptor and the query ids, checked."""
    from metricalc import cube as qc

    if not isinstance(cube, xr.Dataset):
        raise InvalidInputError(
            f"cube must be an xarray.Dataset (a QueryCube); got {type(cube).__name__}"
        )
    missing = [name for name in ("better", "ties", "n_relevant", *qc.QUERY_IDENTITY)
               if name not in cube.variables]
    if missing:
        raise InvalidInputError(
            f"the cube lacks {missing}; expected a QueryCube with rank statistics (metricalc.cube)"
        )
    names = [str(d) for d in cube["descriptor"].values]
    if descriptor not in names:
        raise InvalidInputError(
            f"descriptor {descriptor!r} is not in the cube; expected one of {', '.join(names)}"
        )
    one = cube.sel(descriptor=descriptor)
    if "status" in one and str(one["status"].values) == "error":
        raise InvalidInputError(
            f"descriptor {descriptor!r} failed in this cube (status 'error'); it has no results"
        )
    better = np.asarray(one["better"].values, dtype=np.int64)
    ties = np.asarray(one["ties"].values, dtype=np.int64)
    n_relevant = np.asarray(one["n_relevant"].values, dtype=np.int64)
    unranked = (n_relevant == 1) & ((better < 0) | (ties < 0))
    if unranked.any():
        raise InvalidInputError(
            f"descriptor {descriptor!r}: {int(unranked.sum())} queries have a relevant item but "
            "no rank statistics (better = -1: a cube built from APs only); a run needs them"
        )
    return better, ties, n_relevant, _query_ids(cube)


def _query_ids(cube: xr.Dataset) -> pa.Array:
    """``scene/pair/keypoint_set/query_keypoint`` of every query, checked to be distinct TREC
    tokens."""
    parts = [pa.array(np.asarray(cube[name].values).astype(str)) for name in
             ("scene", "pair", "keypoint_set", "query_keypoint")]
    qids = pc.binary_join_element_wise(*parts, "/")
    blank = pc.match_substring_regex(qids, r"\s").to_numpy(zero_copy_only=False)
    if blank.any():
        raise InvalidInputError(
            f"query {qids[int(np.argmax(blank))].as_py()!r} holds whitespace; a TREC query id "
            "cannot (rename the scene, pair or keypoint set)"
        )
    if pc.count_distinct(qids).as_py() != len(qids):  # "/" inside a part can join two alike
        import pandas as pd

        twice = pd.Series(qids.to_numpy(zero_copy_only=False)).duplicated().to_numpy()
        raise InvalidInputError(
            f"two queries get the query id {qids[int(np.argmax(twice))].as_py()!r}; a TREC "
            "query id names one query (a scene, pair or keypoint set holds '/')"
        )
    return qids


def _padded(prefix: str | pa.Array, numbers: np.ndarray, width: int) -> pa.Array:
    """``prefix`` (one, or one per number) + each number zero-padded to ``width`` digits (byte
    order = numeric order)."""
    digits = pc.utf8_lpad(pc.cast(pa.array(numbers, pa.int64()), pa.string()), width, "0")
    return pc.binary_join_element_wise(prefix, digits, "")


def _write_run(path: str | os.PathLike[str], qids: pa.Array, better: np.ndarray,
               ties: np.ndarray, depth: int | None, width: int, ranked: bool, tag: str) -> int:
    """Write the placeholder run in slices of queries; returns the lines written."""
    lines = better + ties + 1
    if depth is not None:
        lines = np.minimum(lines, depth)
    chunk = (np.cumsum(lines) - 1) // CHUNK_LINES  # slices of about CHUNK_LINES lines
    cuts = np.r_[0, np.flatnonzero(np.diff(chunk)) + 1, lines.size]
    with trec_writer(path) as out:
        for start, stop in itertools.pairwise(cuts):
            out.write_table(_run_table(qids[start:stop], better[start:stop], ties[start:stop],
                                       lines[start:stop], width, ranked, tag))
    return int(lines.sum())


def _run_table(qids: pa.Array, better: np.ndarray, ties: np.ndarray, lines: np.ndarray,
               width: int, ranked: bool, tag: str) -> pa.Table:
    """The run lines of some queries: positions 1..lines of each, in trec_eval's order; scores
    1 above the tie group and 0 in it, or (``ranked``) lines..1."""
    n = int(lines.sum())
    query = np.repeat(np.arange(lines.size), lines)
    starts = np.cumsum(lines) - lines
    position = np.arange(n) - np.repeat(starts, lines)  # 0-based
    b, t = better[query], ties[query]
    above = position < b
    # placeholders above: b1..bb; the tie group: t<t - k> at its k-th position (docno descending)
    number = np.where(above, position + 1, t - (position - b))
    prefix = pa.array(np.where(above, "b", "t"), pa.string())
    return pa.table({
        "qid": qids.take(pa.array(query)),
        "q0": pa.array(np.full(n, "Q0"), pa.string()),
        "docno": _padded(prefix, number, width),
        "rank": pa.array(position + 1),
        "score": pa.array(lines[query] - position if ranked else above.astype(np.int64)),
        "tag": pa.array(np.full(n, tag), pa.string()),
    })
