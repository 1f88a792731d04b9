"""Preference counts of every one-sub-group judgment group at once (equivalence classes).

In a judgment group (JG) with a single sub-group every line is preferred to every line with a
lower ``rel_level``, so the preferences need not be listed: with :math:`c_{g\\ell}` lines of level
:math:`\\ell` in JG :math:`g`, the pairs with different levels number
:math:`(n_g^2 - \\sum_\\ell c_{g\\ell}^2) / 2`, and the same count over the retrieved (or the
unretrieved) lines gives the retrieved (not occurring) ones. A retrieved line :math:`a` fulfils,
implied, one preference per unretrieved line of lower level (a sorted search), and a retrieved
line :math:`b` has one failed retrieved preference per line ranked before it with a higher level
(a cumulative count per level, one pass per level). This is
:func:`metricalc.retrieval.prefs.prefs_counts`'s path for the JGs of qrels read as preferences,
in :math:`O(n L)` for :math:`n` lines of :math:`L` levels, without a Python loop per query.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ClassLines", "class_counts"]


class ClassLines:
    """Lines of one-sub-group JGs: JG index ``g`` (``0 .. n_groups - 1``), docid rank ``rank``,
    level ``rel`` and the number of judged retrieved documents of the line's query ``n_ret``."""

    def __init__(self, g: np.ndarray, rank: np.ndarray, rel: np.ndarray, n_ret: np.ndarray,
                 n_groups: int) -> None:
        self.g, self.rank, self.rel, self.n_ret, self.n_groups = g, rank, rel, n_ret, n_groups
        order = np.lexsort((rel, g))
        new = np.r_[True, (g[order][1:] != g[order][:-1]) | (rel[order][1:] != rel[order][:-1])]
        self.code = np.empty(g.size, dtype=np.int64)
        self.code[order] = np.cumsum(new) - 1  # (JG, level) in increasing order
        first = np.full(n_groups, np.iinfo(np.int64).max)
        np.minimum.at(first, g, self.code)
        self.level = self.code - first[g]  # 0 for the lowest level of the JG
        self.retrieved = rank < n_ret

    def per_group(self, weights: np.ndarray) -> np.ndarray:
        """Per JG, the sum of ``weights`` over its lines."""
        total: np.ndarray = np.bincount(self.g, weights=weights, minlength=self.n_groups)
        return total


def _different_pairs(lines: ClassLines, mask: np.ndarray) -> np.ndarray:
    """Per JG, pairs of lines of ``mask`` with different levels."""
    n = lines.per_group(mask.astype(np.float64))
    per_class = np.bincount(lines.code[mask], minlength=int(lines.code.max(initial=-1)) + 1)
    squares = np.zeros(lines.n_groups)
    class_group = np.zeros(per_class.size, dtype=np.int64)
    class_group[lines.code] = lines.g
    np.add.at(squares, class_group, per_class.astype(np.float64) ** 2)
    pairs: np.ndarray = (n * n - squares) / 2
    return pairs


def _implied_fulfilled(lines: ClassLines, mask: np.ndarray) -> np.ndarray:
    """Per JG, pairs (retrieved line, unretrieved line of lower level) of ``mask``."""
    low = np.sort(lines.code[mask & ~lines.retrieved])
    a = np.flatnonzero(mask & lines.retrieved)
    below = (np.searchsorted(low, lines.code[a])
             - np.searchsorted(low, lines.code[a] - lines.level[a]))
    return np.bincount(lines.g[a], weights=below, minlength=lines.n_groups)


def _retrieved_fulfilled(lines: ClassLines, mask: np.ndarray) -> np.ndarray:
    """Per JG, pairs of retrieved lines of ``mask`` where the one of higher level is ranked
    first: per line, the lines of its JG ranked before it with a higher level, counted level by
    level from cumulative counts."""
    b = np.flatnonzero(mask & lines.retrieved)
    b = b[np.lexsort((lines.rank[b], lines.g[b]))]
    g, level, rank = lines.g[b], lines.level[b], lines.rank[b]
    index = np.arange(b.size)
    first = np.maximum.accumulate(np.where(np.r_[True, g[1:] != g[:-1]], index, 0))
    # the first line of the same document: lines of one rank are not before each other
    same = np.maximum.accumulate(np.where(np.r_[True, rank[1:] != rank[:-1]], index, 0))
    same = np.maximum(same, first)
    fulfilled = np.zeros(b.size)
    for k in range(1, int(level.max(initial=0)) + 1):  # one pass per level above the lowest
        is_k = (level == k).astype(np.int64)
        before = np.cumsum(is_k) - is_k  # lines of level k before each position
        fulfilled += np.where(level < k, before[same] - before[first], 0)
    return np.bincount(g, weights=fulfilled, minlength=lines.n_groups)


def pair_counts(lines: ClassLines, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Per JG, the preferences between lines of ``mask`` by class (``poss_*`` include the
    fulfilled ones), as :func:`metricalc.retrieval.prefs.classify` counts listed ones."""
    every = _different_pairs(lines, mask)
    poss_ret = _different_pairs(lines, mask & lines.retrieved)
    notoccur = _different_pairs(lines, mask & ~lines.retrieved)
    out = {"ful_ret": _retrieved_fulfilled(lines, mask), "poss_ret": poss_ret,
           "ful_imp": _implied_fulfilled(lines, mask),
           "poss_imp": every - poss_ret - notoccur, "notoccur": notoccur}
    return {name: value.astype(np.float64) for name, value in out.items()}


def class_counts(lines: ClassLines) -> dict[str, np.ndarray]:
    """Per JG, the counts of :data:`metricalc.retrieval.prefs.COUNTS`."""
    everything = np.ones(lines.g.size, dtype=bool)
    out = pair_counts(lines, everything)
    relevant = lines.rel > 0
    for name, which in (("num_rel", relevant), ("num_rel_ret", relevant & lines.retrieved),
                        ("num_nonrel", ~relevant), ("num_nonrel_ret", ~relevant & lines.retrieved)):
        out[name] = lines.per_group(which.astype(np.float64))
    for retrieved_only in (False, True):
        prefix = "rnonrel_ret_" if retrieved_only else "rnonrel_"
        big_r = out["num_rel_ret" if retrieved_only else "num_rel"]
        big_n = out["num_nonrel_ret" if retrieved_only else "num_nonrel"]
        if retrieved_only:
            ful, poss = out["ful_ret"].copy(), out["poss_ret"].copy()
        else:
            ful = out["ful_ret"] + out["ful_imp"]
            poss = out["poss_ret"] + out["poss_imp"] + out["notoccur"]
        ful += out["num_rel_ret"] * np.maximum(big_r - big_n, 0)
        poss += out["num_rel"] * np.maximum(big_r - big_n, 0)
        recount = _recount(lines, big_r, retrieved_only)
        more = big_r < big_n
        out[prefix + "ful"] = np.where(more, recount[0], ful)
        out[prefix + "poss"] = np.where(more, recount[1], poss)
    return out


def _recount(lines: ClassLines, keep: np.ndarray,
             retrieved_only: bool) -> tuple[np.ndarray, np.ndarray]:
    """trec_eval's recount of ``prefs_avgjg_Rnonrel`` (``_ret``): the preferences between the
    classes above the lowest one, plus every line (retrieved, for ``_ret``) against each of the
    first ``keep[g]`` lines of the lowest class (those retrieved, for ``_ret``); fulfilled when
    the line is retrieved and ranked before the kept one."""
    lowest = lines.level == 0
    upper = ~lowest & lines.retrieved if retrieved_only else ~lowest
    above = pair_counts(lines, upper)
    if retrieved_only:
        ful, poss = above["ful_ret"], above["poss_ret"]
    else:
        ful = above["ful_ret"] + above["ful_imp"]
        poss = above["poss_ret"] + above["poss_imp"] + above["notoccur"]
    # the lowest class's lines in rank order; its first keep[g] kept
    low = np.flatnonzero(lowest)
    low = low[np.lexsort((lines.rank[low], lines.g[low]))]
    position = np.arange(low.size) - np.searchsorted(lines.g[low], lines.g[low])
    kept = low[position < keep[lines.g[low]]]
    if retrieved_only:
        kept = kept[lines.retrieved[kept]]
    counted = lines.retrieved if retrieved_only else np.ones(lines.g.size, dtype=bool)
    span = int(lines.rank.max(initial=0)) + 2
    # per kept line, the counted lines of its JG ranked before min(its rank, n_ret)
    x = np.flatnonzero(counted)
    key = np.sort(lines.g[x] * span + lines.rank[x])
    limit = np.minimum(lines.rank[kept], lines.n_ret[kept])
    before = (np.searchsorted(key, lines.g[kept] * span + limit)
              - np.searchsorted(key, lines.g[kept] * span))
    n_counted = lines.per_group(counted.astype(np.float64))
    ful = ful + np.bincount(lines.g[kept], weights=before, minlength=lines.n_groups)
    poss = poss + n_counted * np.bincount(lines.g[kept], minlength=lines.n_groups)
    return ful, poss
