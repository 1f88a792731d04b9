"""Ranked retrieval evaluated as trec_eval evaluates it: TREC qrels and run files, the measures by
trec_eval's names (and ranx's spellings), the ``all`` summary, vectorised over all queries.

- :mod:`~metricalc.retrieval.trec_files`: read and write qrels and runs (:class:`Qrels`,
  :class:`Run`);
- :mod:`~metricalc.retrieval.ranking`: a run joined with its qrels and ordered as trec_eval orders
  it (scores as doubles or float32, ties by docno descending), or by a tie policy; ranked
  relevance lists;
- :mod:`~metricalc.retrieval.measures`, :mod:`~metricalc.retrieval.gain_measures` (graded gains,
  infAP, utility, relstring) and :mod:`~metricalc.retrieval.extra_measures` (Judged, ERR, RBP,
  NCG): the measures, one value per query;
- :mod:`~metricalc.retrieval.ir_names`: ir_measures names (``nDCG@10``, ``P(rel=2)@5``);
- :mod:`~metricalc.retrieval.zscores`: trec_eval's z-scores (``-Z``);
- :mod:`~metricalc.retrieval.trec_eval`: measure names and parameters, :func:`evaluate`, the
  printout;
- :mod:`~metricalc.retrieval.querycube`: several runs as a QueryCube (one variable per measure);
- :mod:`~metricalc.retrieval.export`: a keypoint QueryCube written as a run and qrels;
- trec_eval's other relevance formats (``-R``): :mod:`~metricalc.retrieval.prefs_files` (read),
  :mod:`~metricalc.retrieval.prefs` and :mod:`~metricalc.retrieval.prefs_classes` (preference
  counts), :mod:`~metricalc.retrieval.prefs_measures` (the ``prefs_*`` measures) and
  :mod:`~metricalc.retrieval.judgment_groups` (the ``*_avgjg`` measures);
- :mod:`~metricalc.retrieval.small_files`: small files read with NumPy alone, and
  :mod:`~metricalc.retrieval.small_join`: :func:`evaluate_files`, a run evaluated from its file;
- below them, :mod:`~metricalc.retrieval.order` (trec_eval's order of a run's lines) and
  :mod:`~metricalc.retrieval.writer` (TREC files written atomically).

Several runs compared (paired tests per measure, the table) is a study on top of this package
and :mod:`metricalc.stats`: :mod:`metricalc.benchmarks.trec.comparison`.

Every name is imported from its module on first use (:mod:`metricalc.lazy`): the files of a
small run are read with NumPy alone (:mod:`~metricalc.retrieval.small_files`), and importing
pyarrow would take longer than evaluating them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metricalc.lazy import lazy_getattr

if TYPE_CHECKING:  # the names __getattr__ imports on first use, as static analysis sees them
    from metricalc.retrieval.ranking import TIE_POLICIES, Ranked, rank_lists, rank_run
    from metricalc.retrieval.small_join import evaluate_files
    from metricalc.retrieval.trec_eval import (
        ALIASES,
        NICKNAMES,
        TrecEval,
        evaluate,
        evaluate_ranked,
        parse_measures,
    )
    from metricalc.retrieval.trec_files import (
        Qrels,
        Run,
        read_qrels,
        read_run,
        write_qrels,
        write_run,
    )
    from metricalc.retrieval.zscores import read_zscores

_MODULES = {
    "ranking": ("TIE_POLICIES", "Ranked", "rank_lists", "rank_run"),
    "small_join": ("evaluate_files",),
    "trec_eval": ("ALIASES", "NICKNAMES", "TrecEval", "evaluate", "evaluate_ranked",
                  "parse_measures"),
    "trec_files": ("Qrels", "Run", "read_qrels", "read_run", "write_qrels", "write_run"),
    "zscores": ("read_zscores",),
}
"""The names each module of the package offers here."""

_WHERE = {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}

__all__ = [
    "ALIASES",
    "NICKNAMES",
    "TIE_POLICIES",
    "Qrels",
    "Ranked",
    "Run",
    "TrecEval",
    "evaluate",
    "evaluate_files",
    "evaluate_ranked",
    "parse_measures",
    "rank_lists",
    "rank_run",
    "read_qrels",
    "read_run",
    "read_zscores",
    "write_qrels",
    "write_run",
]

__getattr__ = lazy_getattr(__name__, _WHERE)
