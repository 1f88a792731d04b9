"""COCO's rasterization of polygons into runs of foreground pixels (column-major).

The COCO rule, which is not OpenCV's ``fillPoly``: vertices are scaled by 5 and rounded; every
edge is walked one upsampled step at a time (rounding the other coordinate); wherever the walk
crosses the centre line of a pixel column, the pixel row below the crossing (``ceil``) toggles
inside/outside. A pixel is inside when an odd number of toggles lie at or before it in
column-major order; the parts of a multi-polygon are united. ``fillPoly`` fills pixels by their
centres' scan lines and disagrees on boundary pixels, which changes IoUs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError

__all__ = ["POINT_CHUNK", "SCALE", "polygon_points", "polygon_runs"]

SCALE = 5.0
"""Upsampling factor of COCO's polygon rasterization."""

POINT_CHUNK = 1 << 21
"""Upsampled boundary points walked at once (bounds the temporary memory of rasterization)."""


def _polygon_toggles(
    coords: np.ndarray, vertex_offsets: np.ndarray, h: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Toggle positions (column-major) of every polygon, and the polygon of each.

    ``coords`` holds (x, y) rows of all polygons; polygon p owns rows
    ``vertex_offsets[p]:vertex_offsets[p + 1]``; ``h``, ``w`` its image size. Polygons are
    walked in chunks of about :data:`POINT_CHUNK` upsampled points.
    """
    # C's (int) truncates toward zero
    x = np.trunc(SCALE * coords[:, 0] + 0.5).astype(np.int64)
    y = np.trunc(SCALE * coords[:, 1] + 0.5).astype(np.int64)
    following = np.arange(x.size) + 1
    following[vertex_offsets[1:] - 1] = vertex_offsets[:-1]
    points = np.maximum(np.abs(x[following] - x), np.abs(y[following] - y)) + 1
    per_polygon = np.add.reduceat(points, vertex_offsets[:-1]) if x.size else points
    reach = np.cumsum(per_polygon)
    toggles, owners = [], []
    lo = 0
    while lo < h.size:
        done = int(reach[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(reach, done + POINT_CHUNK, side="right")))
        a, b = vertex_offsets[lo], vertex_offsets[hi]
        t, o = _walk(
            x[a:b], y[a:b], following[a:b] - a, vertex_offsets[lo : hi + 1] - a, h[lo:hi], w[lo:hi]
        )
        toggles.append(t)
        owners.append(o + lo)
        lo = hi
    if not toggles:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(toggles), np.concatenate(owners)


def _walk(
    x: np.ndarray,
    y: np.ndarray,
    following: np.ndarray,
    vertex_offsets: np.ndarray,
    h: np.ndarray,
    w: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """COCO's boundary walk of a few polygons (upsampled integer vertices): the toggles."""
    n_poly = h.size
    poly_of_vertex = np.repeat(np.arange(n_poly), np.diff(vertex_offsets))
    xs, ys, xe, ye = x, y, x[following], y[following]
    dx, dy = np.abs(xe - xs), np.abs(ys - ye)
    along_x = dx >= dy
    flip = (along_x & (xs > xe)) | (~along_x & (ys > ye))
    xs, xe = np.where(flip, xe, xs), np.where(flip, xs, xe)
    ys, ye = np.where(flip, ye, ys), np.where(flip, ys, ye)
    # a repeated vertex (dx = dy = 0) gives one point whose row is never used; slope 0 there
    slope = np.where(
        along_x, (ye - ys) / np.where(dx > 0, dx, 1), (xe - xs) / np.where(dy > 0, dy, 1)
    )
    steps = np.maximum(dx, dy)
    n_points = steps + 1
    edge = np.repeat(np.arange(x.size), n_points)
    d = np.arange(edge.size) - np.repeat(np.cumsum(n_points) - n_points, n_points)
    t = np.where(flip[edge], steps[edge] - d, d)
    horizontal = along_x[edge]
    # the coordinate that is not stepped is rounded as C does: (int)(start + slope * t + .5)
    rounded = np.trunc(
        np.where(horizontal, ys[edge], xs[edge]) + slope[edge] * t.astype(np.float64) + 0.5
    ).astype(np.int64)
    u = np.where(horizontal, t + xs[edge], rounded)
    v = np.where(horizontal, rounded, t + ys[edge])
    poly = poly_of_vertex[edge]
    # crossings of pixel-column centres along the boundary walk of each polygon
    j = np.flatnonzero((poly[1:] == poly[:-1]) & (u[1:] != u[:-1])) + 1
    column = np.where(u[j] < u[j - 1], u[j], u[j] - 1).astype(np.float64)
    column = (column + 0.5) / SCALE - 0.5
    owner = poly[j]
    keep = (np.floor(column) == column) & (column >= 0) & (column <= w[owner] - 1)
    j, column, owner = j[keep], column[keep], owner[keep]
    row = (np.minimum(v[j], v[j - 1]).astype(np.float64) + 0.5) / SCALE - 0.5
    row = np.ceil(np.clip(row, 0, h[owner]))
    return column.astype(np.int64) * h[owner] + row.astype(np.int64), owner


def _runs_from_toggles(
    toggles: np.ndarray, owner: np.ndarray, n_poly: int, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of each polygon from its toggles (odd parity inside); polygons with an odd number
    of toggles end inside, at the last pixel."""
    odd = np.bincount(owner, minlength=n_poly) % 2 == 1
    toggles = np.concatenate([toggles, size[odd]])
    owner = np.concatenate([owner, np.flatnonzero(odd)])
    order = np.lexsort((toggles, owner))
    toggles, owner = toggles[order], owner[order]
    start, end, owner = toggles[0::2], toggles[1::2], owner[0::2]
    keep = end > start
    return start[keep], end[keep], owner[keep]


def _union(
    start: np.ndarray, end: np.ndarray, owner: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted, disjoint runs of each mask from possibly overlapping runs (the parts of a
    multi-polygon; touching runs merge, as COCO's merge does)."""
    if start.size == 0:
        return start, end, owner
    stride = int(end.max()) + 1
    order = np.lexsort((start, owner))
    start, end, owner = start[order], end[order], owner[order]
    reach = np.maximum.accumulate(owner * stride + end)
    new = np.ones(start.size, bool)
    new[1:] = (owner[1:] != owner[:-1]) | (owner[1:] * stride + start[1:] > reach[:-1])
    first = np.flatnonzero(new)
    return start[first], np.maximum.reduceat(end, first), owner[first]


def polygon_points(part: Any, where: str) -> np.ndarray:
    """One polygon ``[x0, y0, x1, y1, ...]`` as (x, y) rows, checked."""
    coords = np.asarray(part, dtype=np.float64) if isinstance(part, list) else None
    if (
        coords is None
        or coords.ndim != 1
        or coords.size < 6
        or coords.size % 2
        or not np.isfinite(coords).all()
    ):
        raise InvalidInputError(
            f"{where}: a polygon must be a list of at least 3 (x, y) pairs of "
            f"finite numbers; got {part!r:.80}"
        )
    return coords.reshape(-1, 2)


def polygon_runs(
    polygons: list[np.ndarray], polygon_owner: list[int], heights: np.ndarray, widths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs (start, end, mask) of the masks drawn by ``polygons`` ((x, y) rows; polygon ``p``
    belongs to mask ``polygon_owner[p]`` of image ``heights`` x ``widths``), the parts of a mask
    united."""
    vertex_offsets = np.concatenate([[0], np.cumsum([len(c) for c in polygons])])
    owner_array = np.asarray(polygon_owner, np.int64)
    h, w = heights[owner_array], widths[owner_array]
    toggles, owner = _polygon_toggles(np.concatenate(polygons), vertex_offsets, h, w)
    s, e, p = _runs_from_toggles(toggles, owner, len(polygons), h * w)
    return _union(s, e, owner_array[p])  # unite the parts of each mask
