"""Names of the HPatches sequences and the subsets that papers evaluate on.

Constants and one resolver only (no NumPy, no domain imports), so that the keypoint loader
(:func:`metricalc.keypoints.load_sequences`), the metrics
(:func:`metricalc.matching_accuracy`) and the command line share one definition.

- :data:`HPATCHES_SEQUENCES`: the 116 sequences of the HPatches full-image release (57 ``i_*``
  illumination, 59 ``v_*`` viewpoint), as the ``full`` split of hpatches-benchmark's
  ``splits.json`` lists them.
- :data:`D2NET_EXCLUDED`: the 8 sequences D2-Net's HPatches-sequences benchmark removes because
  their images are larger than 1600 x 1200 (Dusmanu et al., CVPR 2019; the ``download.sh`` of
  ``hpatches_sequences/`` in the d2-net repository deletes these folders).
- :data:`D2NET_SEQUENCES`: the remaining 108 (52 illumination, 56 viewpoint), 540 image pairs:
  the ``n_i = 52``, ``n_v = 56`` of D2-Net's notebook.
- :data:`CVPR17_UNITS` and :func:`cvpr17_unit`: what the paired units of the HPatches CVPR'17
  task cubes (``patches hpatches-eval --out``) are, as captions and sentences name them;
  :data:`CVPR17_PROTOCOL`: the attrs that describe such a cube's protocol.
- :data:`SYNTHETIC_PREFIX`: how the ``dataset`` attr of a cube computed on data metricalc
  generated starts (:func:`is_synthetic`), e.g. ``make_hpatches17_set``'s
  (:data:`SYNTHETIC_HPATCHES17`): published numbers are never shown beside such cubes.

Examples
--------
>>> from metricalc.hpatches import D2NET_SEQUENCES, SEQUENCE_SPLITS
>>> len(D2NET_SEQUENCES), sum(s.startswith("i_") for s in D2NET_SEQUENCES)
(108, 52)
>>> sorted(SEQUENCE_SPLITS)
['d2net', 'full']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from metricalc.errors import InvalidInputError

__all__ = [
    "CVPR17_LEVELS",
    "CVPR17_PROTOCOL",
    "CVPR17_UNITS",
    "D2NET_EXCLUDED",
    "D2NET_SEQUENCES",
    "HPATCHES_PAIRS",
    "HPATCHES_SEQUENCES",
    "SEQUENCE_SPLITS",
    "SYNTHETIC_HPATCHES17",
    "SYNTHETIC_PREFIX",
    "common_cvpr17_unit",
    "cvpr17_unit",
    "is_synthetic",
    "select_sequences",
    "split_sequences",
]

HPATCHES_SEQUENCES: tuple[str, ...] = (
    "i_ajuntament", "i_autannes", "i_bologna", "i_books", "i_boutique", "i_bridger",
    "i_brooklyn", "i_castle", "i_chestnuts", "i_contruction", "i_crownday", "i_crownnight",
    "i_dc", "i_dome", "i_duda", "i_fenis", "i_fog", "i_fruits", "i_gonnenberg", "i_greenhouse",
    "i_greentea", "i_indiana", "i_kions", "i_ktirio", "i_kurhaus", "i_leuven", "i_lionday",
    "i_lionnight", "i_londonbridge", "i_melon", "i_miniature", "i_nescafe", "i_nijmegen",
    "i_nuts", "i_objects", "i_parking", "i_partyfood", "i_pencils", "i_pinard", "i_pool",
    "i_porta", "i_resort", "i_salon", "i_santuario", "i_school", "i_ski", "i_smurf", "i_steps",
    "i_table", "i_tools", "i_toy", "i_troulos", "i_veggies", "i_village", "i_whitebuilding",
    "i_yellowtent", "i_zion", "v_abstract", "v_adam", "v_apprentices", "v_artisans",
    "v_astronautis", "v_azzola", "v_bark", "v_bees", "v_beyus", "v_bip", "v_bird",
    "v_birdwoman", "v_blueprint", "v_boat", "v_bricks", "v_busstop", "v_calder",
    "v_cartooncity", "v_charing", "v_churchill", "v_circus", "v_coffeehouse", "v_colors",
    "v_courses", "v_dirtywall", "v_dogman", "v_eastsouth", "v_feast", "v_fest", "v_gardens",
    "v_grace", "v_graffiti", "v_home", "v_laptop", "v_london", "v_machines", "v_man",
    "v_maskedman", "v_pomegranate", "v_posters", "v_samples", "v_soldiers", "v_strand",
    "v_sunseason", "v_tabletop", "v_talent", "v_tempera", "v_there", "v_underground", "v_vitro",
    "v_wall", "v_wapping", "v_war", "v_weapons", "v_woman", "v_wormhole", "v_wounded", "v_yard",
    "v_yuri",
)  # fmt: skip
"""The 116 sequences of the HPatches full-image release, sorted."""

D2NET_EXCLUDED: tuple[str, ...] = (
    "i_contruction",
    "i_crownnight",
    "i_dc",
    "i_pencils",
    "i_whitebuilding",
    "v_artisans",
    "v_astronautis",
    "v_talent",
)
"""The 8 sequences with images larger than 1600 x 1200 that D2-Net's benchmark removes."""

D2NET_SEQUENCES: tuple[str, ...] = tuple(s for s in HPATCHES_SEQUENCES if s not in D2NET_EXCLUDED)
"""D2-Net's 108 HPatches sequences (52 ``i_*``, 56 ``v_*``), sorted."""

HPATCHES_PAIRS: tuple[str, ...] = ("1-2", "1-3", "1-4", "1-5", "1-6")
"""The image pairs of one HPatches sequence: the reference image 1 with each of images 2..6."""

SEQUENCE_SPLITS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"d2net": D2NET_SEQUENCES, "full": HPATCHES_SEQUENCES}
)
"""Named sets of sequences: ``"d2net"`` (108, D2-Net's), ``"full"`` (all 116)."""

CVPR17_LEVELS: Mapping[str, str] = MappingProxyType({"e": "easy", "h": "hard", "t": "tough"})
"""The noise levels of the HPatches CVPR'17 tasks: the letter of their images (``e1`` ..
``e5``) -> the name of the JSON output, the benchmark's tables and a matching cube's
``keypoint_set``."""

CVPR17_UNITS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "matching": {"query": "image pair and level", "pair": "image pair", "scene": "sequence",
                     "sequence": "sequence"},
        "retrieval": {"query": "query and level", "pair": "sequence", "scene": "sequence",
                      "sequence": "sequence"},
    }
)  # fmt: skip
"""The paired unit of each ``pair_by`` (:func:`metricalc.stats.compare`) in an HPatches CVPR'17
task cube, by task (:mod:`metricalc.benchmarks.hpatches_cvpr17.cube`): a matching cube's "query" is
one
(sequence, image pair, level), ``pair`` averages an image pair's three levels, ``scene`` is a
sequence; a retrieval cube's "query" is one (retrieval query, level), and as its queries have
no image pair (``pair`` is ``""``), ``pair`` groups them by sequence, as ``scene`` does.
``"sequence"`` is the ``pair_by`` of the statistics tested over sequences whatever the study's
unit (the matching average: :mod:`metricalc.stats.cvpr17_matching`)."""

CVPR17_PROTOCOL: tuple[str, ...] = (
    "dataset", "task", "split", "level", "pool_size", "distance", "tie_policy", "ap_method",
    "preset",
)  # fmt: skip
"""The attrs that describe the protocol of an HPatches CVPR'17 task cube, in the order a report
lists them. Such a cube also holds the keypoint attrs every QueryCube holds (``tau_px``,
``border_px``, ``keypoints``, ...: :data:`metricalc.cube.PROTOCOL_ATTRS`, at their defaults);
they do not apply to patches and are not shown."""

SYNTHETIC_PREFIX = "synthetic-"
"""The start of the ``dataset`` attr of a cube computed on data metricalc generated."""

SYNTHETIC_HPATCHES17 = SYNTHETIC_PREFIX + "hpatches17"
"""The data of ``make_hpatches17_set`` (:mod:`metricalc.benchmarks.hpatches_cvpr17.generator`), as
the
``dataset`` attr of the cubes of ``patches hpatches-eval`` names it."""


def is_synthetic(dataset: str) -> bool:
    """Whether the ``dataset`` attr of a cube (or the joined attr of a metric set over several
    cubes) names data metricalc generated: one of its parts starts with
    :data:`SYNTHETIC_PREFIX`.

    Examples
    --------
    >>> is_synthetic("synthetic-hpatches17 seed 0: hpatches-cvpr17 matching, split full")
    True
    >>> is_synthetic("hpatches-cvpr17 matching, split full")
    False
    >>> is_synthetic("hpatches-cvpr17 matching, split full, synthetic-hpatches17 seed 1: x")
    True
    """
    return dataset.startswith(SYNTHETIC_PREFIX) or f", {SYNTHETIC_PREFIX}" in dataset


def cvpr17_unit(attrs: Mapping[str, object], pair_by: str) -> str | None:
    """The name of the paired unit ``pair_by`` in a cube (or metric set) with the attrs
    ``attrs`` when it holds an HPatches CVPR'17 task (attr ``benchmark = "hpatches-cvpr17"``,
    :data:`CVPR17_UNITS`); None for any other cube (a keypoint cube's units are the queries,
    image pairs and scenes ``pair_by`` names).

    Examples
    --------
    >>> cvpr17_unit({"benchmark": "hpatches-cvpr17", "task": "matching"}, "query")
    'image pair and level'
    >>> cvpr17_unit({"benchmark": "hpatches-cvpr17", "task": "retrieval"}, "pair")
    'sequence'
    >>> cvpr17_unit({"tau_px": 3.0}, "query") is None
    True
    """
    if attrs.get("benchmark") != "hpatches-cvpr17":
        return None
    return CVPR17_UNITS.get(str(attrs.get("task")), {}).get(pair_by)


def common_cvpr17_unit(attrs: Iterable[Mapping[str, object]], pair_by: str) -> str | None:
    """The :func:`cvpr17_unit` of ``pair_by`` that every cube (attrs) of a comparison shares,
    None when they name it differently or are not HPatches CVPR'17 cubes.

    Examples
    --------
    >>> matching = {"benchmark": "hpatches-cvpr17", "task": "matching"}
    >>> common_cvpr17_unit([matching, matching], "query")
    'image pair and level'
    >>> common_cvpr17_unit([matching, {}], "query") is None
    True
    """
    names = {cvpr17_unit(one, pair_by) for one in attrs}
    return names.pop() if len(names) == 1 else None


def split_sequences(split: str | Iterable[str]) -> tuple[str, ...]:
    """The sequences of a named split (:data:`SEQUENCE_SPLITS`), or the given names, sorted.

    Examples
    --------
    >>> split_sequences("d2net")[:2], split_sequences(["v_b", "i_a"])
    (('i_ajuntament', 'i_autannes'), ('i_a', 'v_b'))
    """
    if isinstance(split, str):
        if split not in SEQUENCE_SPLITS:
            raise InvalidInputError(
                f"unknown split {split!r}; expected one of {sorted(SEQUENCE_SPLITS)} or a list "
                "of sequence names"
            )
        return SEQUENCE_SPLITS[split]
    names = list(dict.fromkeys(split))
    bad = [name for name in names if not isinstance(name, str) or not name]
    if bad or not names:  # checked before sorting: sorting mixed types raises a TypeError
        raise InvalidInputError(
            f"a split must be a non-empty list of sequence names; got {names!r}"
        )
    return tuple(sorted(names))


def select_sequences(
    split: str | Iterable[str], available: Iterable[str], *, where: str
) -> tuple[str, ...]:
    """The sequences of ``split``, all of which must be among ``available``.

    Sequences of ``available`` outside the split are left out; a sequence of the split that is
    not available raises :class:`~metricalc.errors.InvalidInputError` naming it (``where`` says
    what was searched, e.g. the folder).

    Examples
    --------
    >>> select_sequences(["i_a"], ["i_a", "v_b"], where="the cube")
    ('i_a',)
    >>> select_sequences(["i_a", "i_c"], ["i_a"], where="the cube")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: split ['i_a', 'i_c']: 1 of its 2 sequences are missing from the cube: i_c
    """  # noqa: E501
    wanted = split_sequences(split)
    have = set(available)
    missing = [name for name in wanted if name not in have]
    if missing:
        label = repr(split) if isinstance(split, str) else repr(list(wanted))
        shown = ", ".join(missing[:12]) + (", ..." if len(missing) > 12 else "")
        raise InvalidInputError(
            f"split {label}: {len(missing)} of its {len(wanted)} sequences are missing from "
            f"{where}: {shown}"
        )
    return wanted
