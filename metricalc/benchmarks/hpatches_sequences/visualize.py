"""The match visualization of one image pair: both images side by side, one line per match.

A match is drawn green when its symmetric reprojection error under the ground-truth homography
is below :data:`CORRECT_PX` and red otherwise; unmatched keypoints are small grey dots. The
image is at most :data:`WIDTH` pixels wide and written as PNG at export
(``matches/<scene>/<pair>.png`` in the run folder).
"""

from __future__ import annotations

import cv2
import numpy as np

from metricalc.keypoints.homography import symmetric_error

__all__ = ["CORRECT_PX", "WIDTH", "draw_matches", "png_bytes"]

CORRECT_PX = 3.0
"""A match is drawn as correct when its symmetric error is below this (pixels)."""

WIDTH = 960
"""Largest width of the side-by-side image (both images scaled by the same factor)."""

_GREEN, _RED, _GREY = (40, 200, 60), (230, 40, 40), (170, 170, 170)


def _rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    return image[:, :, :3]


def draw_matches(
    image0: np.ndarray,
    image1: np.ndarray,
    keypoints0: np.ndarray,
    keypoints1: np.ndarray,
    matches0: np.ndarray,
    H: np.ndarray | None = None,
    *,
    width: int = WIDTH,
) -> np.ndarray:
    """The side-by-side RGB picture of a pair's matches (uint8, height x width x 3).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.zeros((100, 120), np.uint8)
    >>> kp = np.array([[10.0, 10.0], [50.0, 60.0]])
    >>> draw_matches(a, a, kp, kp, np.array([0, -1]), np.eye(3)).shape
    (100, 240, 3)
    """
    left, right = _rgb(image0), _rgb(image1)
    height = max(left.shape[0], right.shape[0])
    canvas_width = left.shape[1] + right.shape[1]
    scale = min(1.0, width / canvas_width)
    canvas = np.zeros((height, canvas_width, 3), np.uint8)
    canvas[: left.shape[0], : left.shape[1]] = left
    canvas[: right.shape[0], left.shape[1] :] = right
    if scale < 1.0:
        size = (round(canvas_width * scale), round(height * scale))
        canvas = cv2.resize(canvas, size, interpolation=cv2.INTER_AREA)
    canvas = np.ascontiguousarray(canvas // 2 + 32)  # dimmed, so the lines stand out
    offset = np.array([left.shape[1], 0.0])
    # OpenCV draws in integer pixels; 4 fractional bits keep sub-pixel positions
    shift = 4

    def point(p: np.ndarray) -> tuple[int, int]:
        q = np.round((p + 0.5) * scale * (1 << shift) - 0.5).astype(np.int64)
        return int(q[0]), int(q[1])

    for p in np.asarray(keypoints0):
        cv2.circle(canvas, point(p), 1 << shift, _GREY, 1, cv2.LINE_AA, shift)
    for p in np.asarray(keypoints1):
        cv2.circle(canvas, point(p + offset), 1 << shift, _GREY, 1, cv2.LINE_AA, shift)
    matched = np.flatnonzero(np.asarray(matches0) >= 0)
    p0 = np.asarray(keypoints0)[matched]
    p1 = np.asarray(keypoints1)[np.asarray(matches0)[matched]]
    correct = (
        symmetric_error(p0, p1, H) < CORRECT_PX if H is not None else np.ones(len(p0), bool)
    )
    for order in (False, True):  # wrong matches first, correct ones on top
        for a, b, ok in zip(p0, p1, correct, strict=True):
            if bool(ok) is order:
                color = _GREEN if ok else _RED
                cv2.line(canvas, point(a), point(b + offset), color, 1, cv2.LINE_AA, shift)
    return canvas


def png_bytes(rgb: np.ndarray) -> bytes:
    """PNG encoding of an RGB image."""
    ok, buffer = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 image
        raise RuntimeError("PNG encoding failed")
    return buffer.tobytes()
