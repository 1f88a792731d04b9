"""Instance masks without pycocotools: RLE decoding, polygon rasterization, areas, boxes, IoU.

A mask is held as its runs of foreground pixels in column-major order (the order of COCO's RLE):
``[start, end)`` flat positions, sorted and disjoint per mask. Areas, boxes and intersections are
computed on the runs, never on pixel arrays, so memory grows with the outline length and not
with the image size.

Written here rather than taken from a library because the evaluation must reproduce the COCO
API's pixels exactly:

- **Compressed RLE** (``counts`` a string): COCO's variant of LEB128, 5 bits per character
  (``chr(48 + bits)``, bit 0x20 = more characters follow, bit 0x10 of the last character =
  negative), each count from the fourth on stored as the difference to the count two places
  before. Decoded for all masks at once with NumPy.
- **Polygons**: the COCO rule (:mod:`metricalc.benchmarks.coco.polygons`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metricalc.benchmarks.coco.polygons import polygon_points, polygon_runs
from metricalc.errors import InvalidInputError

__all__ = ["Masks", "encode_rle", "mask_iou", "masks_from_segmentations"]


@dataclass(frozen=True, eq=False)
class Masks:
    """Binary masks as runs of foreground pixels (column-major flat positions).

    Mask ``i`` owns runs ``offsets[i]:offsets[i + 1]`` of ``start``/``end`` (end exclusive),
    sorted and disjoint; it covers an image of ``height[i]`` x ``width[i]`` pixels.
    """

    start: np.ndarray
    end: np.ndarray
    offsets: np.ndarray
    height: np.ndarray
    width: np.ndarray

    @property
    def n(self) -> int:
        return int(self.height.size)

    def owner(self) -> np.ndarray:
        """The mask of every run."""
        return np.repeat(np.arange(self.n), np.diff(self.offsets))

    def area(self) -> np.ndarray:
        """Foreground pixels per mask (int64)."""
        lengths = self.end - self.start
        total = np.concatenate([[0], np.cumsum(lengths)])
        area: np.ndarray = total[self.offsets[1:]] - total[self.offsets[:-1]]
        return area

    def bbox(self) -> np.ndarray:
        """COCO's box of each mask ``[x, y, w, h]`` (``toBbox``): the columns the runs span, and
        the rows of their end pixels, or the full height where a run spans two columns; zeros
        for an empty mask."""
        owner = self.owner()
        h = self.height[owner]
        last = self.end - 1
        x0, y0 = np.divmod(self.start, h)
        x1, y1 = np.divmod(last, h)
        full = x0 < x1
        low = np.where(full, 0, np.minimum(y0, y1))
        high = np.where(full, h - 1, np.maximum(y0, y1))
        box = np.zeros((self.n, 4))
        has = np.diff(self.offsets) > 0
        if has.any():
            first = self.offsets[:-1][has]
            xs = np.minimum.reduceat(x0, first)
            xe = np.maximum.reduceat(x1, first)
            ys = np.minimum.reduceat(low, first)
            ye = np.maximum.reduceat(high, first)
            box[has] = np.stack([xs, ys, xe - xs + 1, ye - ys + 1], axis=1)
        return box


# --------------------------------------------------------------------------------------------
# Runs from counts (RLE)
# --------------------------------------------------------------------------------------------


def _segment_cumsum(values: np.ndarray, group_start: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum restarting where ``group_start`` is True (values of any sign)."""
    if values.size == 0:
        return values.copy()
    total = np.cumsum(values)
    start = np.maximum.accumulate(np.where(group_start, np.arange(values.size), 0))
    restarted: np.ndarray = total - (total[start] - values[start])
    return restarted


def _decode_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counts of COCO compressed RLE strings, all at once.

    Returns the counts (int64), the mask of each count, and the index of each count within its
    mask; a string that does not end a value raises.
    """
    lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
    text = "".join(strings)
    try:
        raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.int64)
    except UnicodeEncodeError:
        raise ValueError("a compressed RLE string holds a non-ASCII character") from None
    if raw.size and ((raw < 48) | (raw > 111)).any():
        bad = chr(int(raw[(raw < 48) | (raw > 111)][0]))
        raise ValueError(f"a compressed RLE string holds {bad!r}; expected characters 0..o")
    c = raw - 48
    more = (c & 0x20) != 0
    string_end = np.cumsum(lengths) - 1
    if lengths.size and (lengths == 0).any():
        raise ValueError("a compressed RLE string is empty")
    if string_end.size and more[string_end].any():
        raise ValueError("a compressed RLE string ends in the middle of a number")
    ends = ~more
    value_id = np.concatenate([[0], np.cumsum(ends)[:-1]]) if c.size else np.zeros(0, np.int64)
    value_start = np.flatnonzero(np.concatenate([[True], ends[:-1]])) if c.size else value_id
    k = np.arange(c.size) - value_start[value_id]
    if c.size and k.max() > 6:
        raise ValueError("a compressed RLE string holds a number too large for a pixel count")
    x = np.add.reduceat((c & 0x1F) << (5 * k), value_start) if c.size else np.zeros(0, np.int64)
    last = np.flatnonzero(ends)
    negative = (c[last] & 0x10) != 0
    x = np.where(negative, x - (np.int64(1) << (5 * (k[last] + 1))), x)
    # counts per string, then COCO's delta: count m (m > 2) is stored minus count m - 2
    per_string = np.bincount(
        np.repeat(np.arange(lengths.size), lengths)[last], minlength=lengths.size
    )
    owner = np.repeat(np.arange(lengths.size), per_string)
    first = np.concatenate([[0], np.cumsum(per_string)[:-1]])
    index = np.arange(x.size) - np.repeat(first, per_string)
    # counts 1, 3, 5, ... of each string accumulate their deltas, and so do counts 2, 4, ...
    counts = x.copy()
    for parity, first_index in ((1, 1), (0, 2)):
        chosen = (index % 2 == parity) & (index >= first_index)
        counts[chosen] = _segment_cumsum(x[chosen], index[chosen] == first_index)
    return counts, owner, index


def _runs_from_counts(
    counts: np.ndarray, owner: np.ndarray, index: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Foreground runs (odd-indexed counts) of RLEs given as flat counts; also the pixel total
    of each RLE."""
    group_start = index == 0
    end = _segment_cumsum(counts, group_start)
    start = end - counts
    totals = np.zeros(n, np.int64)
    np.add.at(totals, owner, counts)
    keep = (index % 2 == 1) & (counts > 0)
    return start[keep], end[keep], owner[keep], totals


# --------------------------------------------------------------------------------------------
# Segmentation objects -> Masks
# --------------------------------------------------------------------------------------------


def _check_rle_size(segm: dict[str, Any], h: int, w: int, where: str) -> None:
    size = segm.get("size")
    if not (isinstance(size, (list, tuple)) and len(size) == 2 and list(size) == [h, w]):
        raise InvalidInputError(
            f"{where}: RLE size {size!r} differs from the image size [{h}, {w}] (height, width)"
        )


def masks_from_segmentations(
    segmentations: Sequence[Any], heights: np.ndarray, widths: np.ndarray, *, where: Sequence[str]
) -> Masks:
    """Masks of COCO ``segmentation`` objects: polygons, uncompressed or compressed RLE.

    Parameters
    ----------
    segmentations : sequence
        One object per mask: a list of polygons ``[[x0, y0, x1, y1, ...], ...]`` (at least three
        points each), or ``{"size": [h, w], "counts": [...]}`` (uncompressed RLE), or
        ``{"size": [h, w], "counts": "..."}`` (compressed RLE).
    heights, widths : ndarray of int
        The image size of each mask.
    where : sequence of str
        How to name each mask in error messages (file and entry).

    Raises
    ------
    InvalidInputError
        Malformed polygons or RLE, an RLE whose size is not its image's, or whose counts do not
        cover the image.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.masks import masks_from_segmentations
    >>> square = [[1, 1, 4, 1, 4, 3, 1, 3]]                  # polygon (x, y pairs)
    >>> column = {"size": [4, 5], "counts": [5, 3, 12]}        # RLE: rows 1..3 of column 1
    >>> m = masks_from_segmentations([square, column], np.array([4, 4]), np.array([5, 5]),
    ...                              where=["a", "b"])
    >>> m.area().tolist(), m.bbox().tolist()
    ([6, 3], [[1.0, 1.0, 3.0, 2.0], [1.0, 1.0, 1.0, 3.0]])
    """
    n = len(segmentations)
    heights = np.asarray(heights, np.int64)
    widths = np.asarray(widths, np.int64)
    parts = _Parts()
    for i, segm in enumerate(segmentations):
        parts.add(i, segm, int(heights[i]), int(widths[i]), where[i])
    starts, ends, owners = [], [], []
    if parts.polygons:
        s, e, o = polygon_runs(parts.polygons, parts.polygon_owner, heights, widths)
        starts.append(s)
        ends.append(e)
        owners.append(o)
    for items, item_owner in ((parts.strings, parts.string_owner), (parts.lists, parts.list_owner)):
        if items:
            s, e, o = _rle_runs(items, item_owner, heights, widths, where)
            starts.append(s)
            ends.append(e)
            owners.append(o)
    # each part lists its masks' runs in order; a stable sort by mask interleaves the parts
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    order = np.argsort(owner, kind="stable")
    start = np.concatenate(starts)[order] if starts else np.zeros(0, np.int64)
    end = np.concatenate(ends)[order] if ends else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))])
    return Masks(start=start, end=end, offsets=offsets, height=heights, width=widths)


def _rle_counts(segm: dict[str, Any], h: int, w: int, where: str) -> str | list[int]:
    """The counts of an RLE object, checked: a string (compressed) or a list of integers."""
    _check_rle_size(segm, h, w, where)
    counts = segm["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii", errors="replace")
    if isinstance(counts, str):
        return counts
    if isinstance(counts, list) and all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts
    ):
        return counts
    raise InvalidInputError(
        f"{where}: RLE counts must be a string (compressed) or a list of non-negative integers"
    )


@dataclass
class _Parts:
    """The segmentations sorted by kind, each part with the index of its mask."""

    polygons: list[np.ndarray] = field(default_factory=list)
    polygon_owner: list[int] = field(default_factory=list)
    lists: list[list[int]] = field(default_factory=list)
    list_owner: list[int] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    string_owner: list[int] = field(default_factory=list)

    def add(self, i: int, segm: Any, h: int, w: int, where: str) -> None:
        """Sort segmentation ``segm`` of mask ``i`` (image ``h`` x ``w``) into its kind."""
        if isinstance(segm, list):
            if not segm:
                raise InvalidInputError(f"{where}: segmentation is an empty list of polygons")
            for part in segm:
                self.polygons.append(polygon_points(part, where))
                self.polygon_owner.append(i)
        elif isinstance(segm, dict) and "counts" in segm:
            counts = _rle_counts(segm, h, w, where)
            if isinstance(counts, str):
                self.strings.append(counts)
                self.string_owner.append(i)
            else:
                self.lists.append(counts)
                self.list_owner.append(i)
        else:
            raise InvalidInputError(
                f"{where}: segmentation must be polygons (a list of lists) or RLE (an object "
                f"with size and counts); got {type(segm).__name__}"
            )


def _rle_runs(
    items: list[str] | list[list[int]],
    item_owner: list[int],
    heights: np.ndarray,
    widths: np.ndarray,
    where: Sequence[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs (start, end, mask) of RLE masks: compressed strings or lists of counts (one kind),
    the counts checked to cover each image."""
    if isinstance(items[0], str):
        try:
            counts, local, index = _decode_strings(items)
        except ValueError as error:
            raise InvalidInputError(f"{where[item_owner[0]]} or a later mask: {error}") from None
    else:
        lengths = [len(c) for c in items]
        counts = np.fromiter((v for c in items for v in c), dtype=np.int64, count=sum(lengths))
        local = np.repeat(np.arange(len(items)), lengths)
        index = np.arange(counts.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    s, e, o, totals = _runs_from_counts(counts, local, index, len(items))
    mask_index = np.asarray(item_owner, np.int64)
    expected = heights[mask_index] * widths[mask_index]
    wrong = (totals != expected) | (counts < 0).any()
    if wrong.any():
        bad = int(np.flatnonzero(wrong)[0])
        raise InvalidInputError(
            f"{where[item_owner[bad]]}: RLE counts sum to {int(totals[bad])}; expected "
            f"height x width = {int(expected[bad])}"
        )
    return s, e, mask_index[o]


# --------------------------------------------------------------------------------------------
# Masks -> compressed RLE
# --------------------------------------------------------------------------------------------


def encode_rle(masks: Masks) -> list[dict[str, Any]]:
    """COCO compressed RLE (``{"size": [h, w], "counts": str}``) of every mask.

    The inverse of the decoding in :func:`masks_from_segmentations`, for all masks at once:
    counts alternate background and foreground from pixel 0 (column-major), each count from
    the fourth on is stored minus the count two places before, then written 5 bits per
    character with 0x20 = more to follow.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.masks import encode_rle, masks_from_segmentations
    >>> m = masks_from_segmentations([{"size": [4, 5], "counts": [5, 3, 12]}], np.array([4]),
    ...                              np.array([5]), where=["a"])
    >>> encode_rle(m)
    [{'size': [4, 5], 'counts': '53<'}]
    """
    n = masks.n
    runs = np.diff(masks.offsets)
    size = masks.height * masks.width
    # counts: background before each run, the run; then the background to the end
    owner = masks.owner()
    previous_end = np.concatenate([[0], masks.end[:-1]])
    first_run = np.zeros(masks.start.size, bool)
    first_run[masks.offsets[:-1][runs > 0]] = True
    gap = masks.start - np.where(first_run, 0, previous_end)
    last_end = np.zeros(n, np.int64)
    has = runs > 0
    last_end[has] = masks.end[masks.offsets[1:][has] - 1]
    tail = size - last_end  # no trailing count when the last run ends at the last pixel
    per_mask = 2 * runs + (tail > 0)
    counts = np.empty(int(per_mask.sum()), np.int64)
    base = np.cumsum(per_mask) - per_mask
    local = np.arange(masks.start.size) - np.repeat(masks.offsets[:-1], runs)
    counts[base[owner] + 2 * local] = gap
    counts[base[owner] + 2 * local + 1] = masks.end - masks.start
    counts[(base + per_mask - 1)[tail > 0]] = tail[tail > 0]
    mask_of = np.repeat(np.arange(n), per_mask)
    index = np.arange(counts.size) - np.repeat(base, per_mask)
    x = counts.copy()
    delta = index > 2
    x[delta] -= counts[np.flatnonzero(delta) - 2]
    # characters: 5 bits each, least significant first, until the rest is the sign extension
    groups = 7
    shift = 5 * np.arange(groups)
    chunk = (x[:, None] >> shift) & 0x1F
    rest = x[:, None] >> (shift + 5)
    negative = (chunk & 0x10) != 0
    stop = np.where(negative, rest == -1, rest == 0)
    n_chars = np.argmax(stop, axis=1) + 1
    used = np.arange(groups)[None, :] < n_chars[:, None]
    more = np.arange(groups)[None, :] < (n_chars - 1)[:, None]
    codes = (chunk | np.where(more, 0x20, 0)) + 48
    flat = codes[used].astype(np.uint8).tobytes().decode("ascii")
    chars_per_mask = np.bincount(mask_of, weights=n_chars, minlength=n).astype(np.int64)
    ends = np.cumsum(chars_per_mask)
    return [
        {
            "size": [int(masks.height[i]), int(masks.width[i])],
            "counts": flat[ends[i] - chars_per_mask[i] : ends[i]],
        }
        for i in range(n)
    ]


# --------------------------------------------------------------------------------------------
# IoU of mask pairs
# --------------------------------------------------------------------------------------------


class _Coverage:
    """Pixels of a mask before a flat position, for many (mask, position) lookups at once."""

    def __init__(self, masks: Masks) -> None:
        self.masks = masks
        self.stride = int(masks.height.max(initial=1) * masks.width.max(initial=1)) + 1
        self.keys = masks.owner() * self.stride + masks.start
        self.lengths = masks.end - masks.start
        self.before = np.concatenate([[0], np.cumsum(self.lengths)])

    def at(self, mask: np.ndarray, position: np.ndarray) -> np.ndarray:
        if self.lengths.size == 0:
            return np.zeros(position.shape, np.int64)
        j = np.searchsorted(self.keys, mask * self.stride + position, side="right") - 1
        first = self.masks.offsets[mask]
        js = np.maximum(j, 0)
        inside = np.clip(position - self.masks.start[js], 0, self.lengths[js])
        return np.where(j >= first, self.before[js] - self.before[first] + inside, 0)


def mask_iou(
    dt: Masks, gt: Masks, d: np.ndarray, g: np.ndarray, crowd: np.ndarray, *, chunk: int = 1 << 22
) -> np.ndarray:
    r"""IoU of the mask pairs ``(dt[d[p]], gt[g[p]])``, COCO's definition.

    .. math::

        IoU = \frac{|D \cap G|}{|D \cup G|}, \qquad
        IoU_{crowd} = \frac{|D \cap G|}{|D|} \;\text{(crowd regions)}, \qquad
        IoU = 0 \text{ if } D \cap G = \emptyset

    The intersection is summed over the runs of D from the coverage of G at each run's ends
    (one binary search per run end), in chunks of about ``chunk`` run ends.

    Parameters
    ----------
    dt, gt : Masks
        Masks of one image size per pair (the caller pairs masks of the same image).
    d, g : ndarray of int
        Pair indices into ``dt`` and ``gt``.
    crowd : ndarray of bool
        Per pair: ``gt[g]`` is a crowd region.

    Returns
    -------
    ndarray of float64
        One IoU per pair.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.benchmarks.coco.masks import mask_iou, masks_from_segmentations
    >>> size = np.array([10, 10])
    >>> a = masks_from_segmentations([[[0, 0, 4, 0, 4, 4, 0, 4]]] * 2, size, size, where=["a"] * 2)
    >>> b = masks_from_segmentations([[[0, 0, 2, 0, 2, 4, 0, 4]]] * 2, size, size, where=["b"] * 2)
    >>> mask_iou(a, b, np.array([0, 1]), np.array([0, 1]), np.array([False, True])).tolist()
    [0.5, 0.5]
    """
    d = np.asarray(d, np.int64)
    g = np.asarray(g, np.int64)
    inter = np.zeros(d.size, np.int64)
    coverage = _Coverage(gt)
    runs = np.diff(dt.offsets)[d]
    reach = np.cumsum(runs)
    lo = 0
    while lo < d.size:  # pairs in chunks of about ``chunk`` runs: bounded memory
        done = int(reach[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(reach, done + chunk, side="right")))
        count = runs[lo:hi]
        pair = np.repeat(np.arange(lo, hi), count)
        local = np.arange(pair.size) - np.repeat(np.cumsum(count) - count, count)
        run = dt.offsets[d[pair]] + local
        target = g[pair]
        covered = coverage.at(target, dt.end[run]) - coverage.at(target, dt.start[run])
        inter[lo:hi] = np.bincount(pair - lo, weights=covered, minlength=hi - lo).astype(np.int64)
        lo = hi
    area_d = dt.area()[d]
    area_g = gt.area()[g]
    union = np.where(crowd, area_d, area_d + area_g - inter)
    return np.where(inter > 0, inter / np.where(inter > 0, union, 1), 0.0)
