"""ir_measures-style measure names (``AP@100``, ``nDCG@10``, ``P(rel=2)@5``, ``R@1000``, ``RR``,
``Judged@10``, ``RBP(p=0.8)``, ``NumRel``) and the measures of
:data:`metricalc.retrieval.trec_eval.FAMILIES` they stand for.

A name is ``Name``, ``Name@k`` or ``Name(param=value,...)[@k]``; ``rel=N`` evaluates that
measure at relevance level N (trec_eval's ``-l`` for this measure only), ``p=`` is RBP's
persistence. The values are printed under the name as written (``P(rel=2)@5``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from metricalc.errors import InvalidInputError

__all__ = ["IR_NAMES", "IrSpec", "parse_ir_name"]


@dataclass(frozen=True)
class IrName:
    """The trec_eval-style families of one ir_measures name: without a cutoff, with one."""

    whole: tuple[str, ...]
    cut: str | None = None
    rel: bool = True  # takes rel=N (a binary measure)


IR_NAMES: dict[str, IrName] = {
    "AP": IrName(("map",), "map_cut"),
    "P": IrName((), "P"),
    "R": IrName((), "recall"),
    "RR": IrName(("recip_rank",)),
    "Rprec": IrName(("Rprec",)),
    "Bpref": IrName(("bpref",)),
    "infAP": IrName(("infAP",)),
    "Success": IrName((), "success"),
    "IPrec": IrName((), "iprec_at_recall"),
    "nDCG": IrName(("ndcg",), "ndcg_cut", rel=False),
    "NCG": IrName((), "NCG", rel=False),
    "ERR": IrName((), "ERR", rel=False),
    "Judged": IrName((), "Judged", rel=False),
    "RBP": IrName(("RBP", "RBP_residual")),
    "NumQ": IrName(("num_q",), rel=False),
    "NumRet": IrName(("num_ret",), rel=False),
    "NumRel": IrName(("num_rel",)),
    "NumRelRet": IrName(("num_rel_ret",)),
    "SetP": IrName(("set_P",)),
    "SetRelP": IrName(("set_relative_P",)),
    "SetR": IrName(("set_recall",)),
    "SetF": IrName(("set_F",)),
    "SetAP": IrName(("set_map",)),
}
"""ir_measures names and the families they map onto (``RBP``: its value and its residual)."""

_FORM = re.compile(r"^(?P<name>[A-Za-z]+)(?:\((?P<params>[^()]*)\))?(?:@(?P<cut>[^@]+))?$")


@dataclass(frozen=True)
class IrSpec:
    """One family asked for by an ir_measures name."""

    family: str
    params: str | None  # the trec_eval-style parameter string (a cutoff, RBP's p)
    level: int | None  # rel=N
    alias: str  # the printed name


def parse_ir_name(spec: str) -> list[IrSpec] | None:
    """The families an ir_measures name asks for, or None if ``spec`` is not one.

    Examples
    --------
    >>> parse_ir_name("P(rel=2)@5")
    [IrSpec(family='P', params='5', level=2, alias='P(rel=2)@5')]
    >>> [s.alias for s in parse_ir_name("RBP(p=0.5)")]
    ['RBP(p=0.5)', 'RBP(p=0.5)_residual']
    >>> parse_ir_name("map") is None
    True
    """
    match = _FORM.match(spec.replace(" ", ""))
    if match is None or match["name"] not in IR_NAMES:
        return None
    name, cut = match["name"], match["cut"]
    known = IR_NAMES[name]
    params = dict(_pairs(match["params"] or "", spec))
    level = params.pop("rel", None)
    p = params.pop("p", None) if name == "RBP" else None
    if params or (level is not None and not known.rel):
        extra = ", ".join([*params, *(["rel"] if level is not None else [])])
        raise InvalidInputError(f"measure {spec!r}: {name} takes no parameter {extra}")
    alias = spec.replace(" ", "")
    relevance = None if level is None else _integer(level, spec)
    if cut is not None:
        if known.cut is None:
            raise InvalidInputError(f"measure {spec!r}: {name} takes no cutoff @k")
        return [IrSpec(known.cut, cut, relevance, alias)]
    if not known.whole:
        raise InvalidInputError(f"measure {spec!r}: {name} needs a cutoff, like {name}@10")
    suffixes = ["", "_residual"] if name == "RBP" else [""]
    return [IrSpec(family, p, relevance, alias + suffix)
            for family, suffix in zip(known.whole, suffixes, strict=True)]


def _pairs(text: str, spec: str) -> list[tuple[str, str]]:
    pairs = []
    for part in filter(None, text.split(",")):
        key, eq, value = part.partition("=")
        if not eq or not value:
            raise InvalidInputError(f"measure {spec!r}: expected param=value like rel=2; got "
                                    f"{part!r}")
        pairs.append((key, value))
    return pairs


def _integer(text: str, spec: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidInputError(f"measure {spec!r}: rel must be an integer; got {text!r}") from None
