"""A slow, obvious port of trec_eval 9.0.8's preference evaluation (``form_prefs_counts.c`` and
``m_prefs_*.c``), loop by loop, to check :mod:`metricalc.retrieval.prefs_measures` on random
inputs. Lines are ``(qid, jg, jsg, docno, rel_level)``; a run is ``{qid: {docno: score}}``."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

Line = tuple[str, str, str, str, float]


def docid_ranks(lines: list[Line], scores: dict[str, float],
                depth: int | None) -> tuple[dict[str, int], int]:
    """Docid rank of every judged document and the number retrieved."""
    ranked = sorted(scores, key=lambda d: (-np.float32(scores[d]), d.encode()))
    if depth is not None:
        ranked = ranked[:depth]
    judged = {line[3] for line in lines}
    retrieved = [d for d in ranked if d in judged]
    others = sorted(judged - set(retrieved), key=str.encode)
    return {d: i for i, d in enumerate(retrieved + others)}, len(retrieved)


def group_prefs(lines: list[Line], docid: dict[str, int]) -> tuple[list[tuple[int, int]], dict]:
    """One JG's preferences (docid pairs) and, per docid, its level (trec_eval's rel_array)."""
    if len({line[2] for line in lines}) == 1:  # equivalence classes: every line pair
        prefs = [(docid[x[3]], docid[y[3]]) for x in lines for y in lines if x[4] > y[4]]
        return prefs, {}
    n = len(docid)
    above = [[False] * n for _ in range(n)]
    level: dict[int, float] = {}
    ordered = sorted(lines, key=lambda x: (x[2].encode(), -x[4], docid[x[3]]))
    for x in ordered:
        level[docid[x[3]]] = x[4]
        for y in ordered:
            if y[2] == x[2] and x[4] > y[4]:
                above[docid[x[3]]][docid[y[3]]] = True
    for k in range(n):  # Floyd-Warshall transitive closure
        for i in range(n):
            for j in range(n):
                if above[i][k] and above[k][j]:
                    above[i][j] = True
    prefs = [(i, j) for i in range(n) for j in range(n) if i != j and above[i][j]]
    return prefs, level


def classify(prefs: list[tuple[int, int]], r: int) -> dict[str, int]:
    c = dict.fromkeys(("ful_ret", "poss_ret", "ful_imp", "poss_imp", "notoccur"), 0)
    for a, b in prefs:
        if a < b:
            key = "ful_ret" if b < r else "ful_imp" if a < r else "notoccur"
        else:
            key = "poss_ret" if a < r else "poss_imp" if b < r else "notoccur"
        c[key] += 1
    c["poss_ret"] += c["ful_ret"]
    c["poss_imp"] += c["ful_imp"]
    return c


def rnonrel(lines, prefs, level, docid, r, c, rel, ret_only):
    """(fulfilled, possible) of prefs_avgjg_Rnonrel (``ret_only``: ``_ret``) for one JG."""
    big_r = rel["rel_ret"] if ret_only else rel["rel"]
    big_n = rel["nonrel_ret"] if ret_only else rel["nonrel"]
    if big_r >= big_n:
        ful = c["ful_ret"] + (0 if ret_only else c["ful_imp"]) + rel["rel_ret"] * (big_r - big_n)
        poss = c["poss_ret"] + (0 if ret_only else c["poss_imp"] + c["notoccur"])
        return ful, poss + rel["rel"] * (big_r - big_n)
    ful = poss = 0
    if not level:  # equivalence classes, the last one cut to its first big_r documents
        levels = sorted({x[4] for x in lines}, reverse=True)
        ecs = [sorted(docid[x[3]] for x in lines if x[4] == lev) for lev in levels]
        if ret_only:
            ecs = [[d for d in ec if d < r] for ec in ecs]
        new_last = sorted(docid[x[3]] for x in lines if x[4] == levels[-1])[:big_r]
        if ret_only:
            new_last = [d for d in new_last if d < r]
        pairs = [(x, y) for e1 in range(len(ecs)) for e2 in range(e1 + 1, len(ecs) - 1)
                 for x in ecs[e1] for y in ecs[e2]]
        pairs += [(x, y) for ec in ecs for x in ec for y in new_last]
        for x, y in pairs:
            if x < y and x < r:
                ful += 1
            else:
                poss += 1
        return ful, poss + ful
    limit = r if ret_only else len(docid)
    seen, first = 0, limit
    for i in range(limit):
        if level.get(i, -1.0) == 0.0:
            seen += 1
            if seen == rel["rel"] + 1:
                first = i
                break
    kept = [(a, b) for a, b in prefs
            if not (a >= first and level.get(a, -1.0) == 0.0)
            and not (b >= first and level.get(b, -1.0) == 0.0)
            and (not ret_only or (a < r and b < r))]
    k = classify(kept, r)
    if ret_only:
        return k["ful_ret"], k["poss_ret"]
    return k["ful_ret"] + k["ful_imp"], k["poss_ret"] + k["poss_imp"] + k["notoccur"]


def measures(lines: list[Line], run: dict[str, dict[str, float]],
             depth: int | None = None) -> dict[str, dict[str, float]]:
    """Per query, every prefs measure of trec_eval."""
    out = {}
    for qid in sorted(set(run) & {x[0] for x in lines}, key=str.encode):
        qlines = [x for x in lines if x[0] == qid]
        docid, r = docid_ranks(qlines, run[qid], depth)
        ca: dict[tuple[int, int], int] = defaultdict(int)
        sums = defaultdict(float)
        jgs = sorted({x[1] for x in qlines}, key=str.encode)
        for jg in jgs:
            glines = [x for x in qlines if x[1] == jg]
            prefs, level = group_prefs(glines, docid)
            for pair in prefs:
                ca[pair] += 1
            c = classify(prefs, r)
            if level:
                rel = {"rel": sum(v > 0 for v in level.values()),
                       "rel_ret": sum(v > 0 for d, v in level.items() if d < r),
                       "nonrel": sum(v == 0 for v in level.values()),
                       "nonrel_ret": sum(v == 0 for d, v in level.items() if d < r)}
            else:
                rel = {"rel": sum(x[4] > 0 for x in glines),
                       "rel_ret": sum(x[4] > 0 and docid[x[3]] < r for x in glines),
                       "nonrel": sum(x[4] <= 0 for x in glines),
                       "nonrel_ret": sum(x[4] <= 0 and docid[x[3]] < r for x in glines)}
            ful_all, poss_all = c["ful_ret"] + c["ful_imp"], c["poss_ret"] + c["poss_imp"]
            for name, ful, poss in (("", ful_all, poss_all + c["notoccur"]),
                                    ("_ret", c["ful_ret"], c["poss_ret"]),
                                    ("_imp", ful_all, poss_all)):
                sums["ful" + name] += ful
                sums["poss" + name] += poss
                if poss:
                    sums["avgjg" + name] += ful / poss
            for name, ret_only in (("", False), ("_ret", True)):
                ful, poss = rnonrel(glines, prefs, level, docid, r, c, rel, ret_only)
                with np.errstate(invalid="ignore", divide="ignore"):
                    sums["Rnonrel" + name] += float(np.float64(ful) / np.float64(poss))
        values = {"prefs_num_prefs_poss": sums["poss"], "prefs_num_prefs_ful": sums["ful"],
                  "prefs_num_prefs_ful_ret": sums["ful_ret"]}
        for name in ("", "_ret", "_imp"):
            poss = sums["poss" + name]
            values["prefs_simp" + name] = sums["ful" + name] / poss if poss else 0.0
            avg = sums["avgjg" + name]
            values["prefs_avgjg" + name] = avg / len(jgs) if avg > 0 else 0.0
        for name in ("", "_ret"):
            avg = sums["Rnonrel" + name]
            values["prefs_avgjg_Rnonrel" + name] = avg / len(jgs) if avg > 0 else 0.0
        pair = {"": [], "_ret": [], "_imp": []}
        for a, b in list(ca):
            if a > b and (b, a) in ca:
                continue  # counted from the other side
            lo, hi = min(a, b), max(a, b)
            frac = ca.get((lo, hi), 0) / (ca.get((lo, hi), 0) + ca.get((hi, lo), 0))
            if hi < r:
                kinds = ("", "_ret", "_imp")
            elif lo < r:
                kinds = ("", "_imp")
            else:
                kinds, frac = ("",), 0.0
            for kind in kinds:
                pair[kind].append(frac)
        for name, fracs in pair.items():
            values["prefs_pair" + name] = sum(fracs) / len(fracs) if fracs else 0.0
        out[qid] = values
    return out
