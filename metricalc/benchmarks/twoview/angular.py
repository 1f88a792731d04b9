r"""Angular errors of a relative pose: rotation, translation direction, and their maximum.

The definitions of SuperGlue (``models/utils.py``: ``angle_error_mat``, ``angle_error_vec``,
``compute_pose_error``) and Glue Factory (``gluefactory/geometry/epipolar.py``:
``relative_pose_error``), in degrees:

.. math::

    e_R = \left|\arccos\operatorname{clip}\!\left(\tfrac{\operatorname{tr}(\hat R^\top R) - 1}{2},
    -1, 1\right)\right|, \qquad
    \theta_t = \arccos\operatorname{clip}\!\left(\tfrac{\hat t \cdot t}{\lVert \hat t\rVert\,
    \lVert t\rVert}, -1, 1\right), \qquad e_t = \min(\theta_t, 180^\circ - \theta_t),

and the pose error :math:`e = \max(e_R, e_t)`. :math:`e_t` is taken up to the sign of
:math:`t` because an essential matrix fixes the translation only up to scale and sign.
Every function works on stacks of poses (leading axes), vectorized.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import Real, validate_params

__all__ = ["pose_error", "relative_pose_error", "rotation_error", "translation_error"]


def _stack(value: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.shape[array.ndim - len(shape):] != shape or array.ndim < len(shape):
        expected = " x ".join(map(str, shape))
        raise InvalidInputError(f"{name} has shape {array.shape}; expected (..., {expected})")
    if not np.isfinite(array).all():
        raise InvalidInputError(f"{name} contains non-finite values")
    return array


def rotation_error(R_est: Any, R_gt: Any) -> np.ndarray:
    r"""Angle of the rotation :math:`\hat R^\top R` in degrees (SuperGlue's ``angle_error_mat``).

    .. math:: e_R = \left|\arccos \operatorname{clip}\!\left(
        \tfrac{\operatorname{tr}(\hat R^\top R) - 1}{2}, -1, 1\right)\right|

    Parameters
    ----------
    R_est, R_gt : array_like (..., 3, 3)
        Estimated and true rotations (broadcast against each other).

    Returns
    -------
    ndarray
        Errors in degrees, in :math:`[0, 180]`, of the broadcast leading shape.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.deg2rad(30.0)
    >>> Rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    >>> float(np.round(rotation_error(Rz, np.eye(3)), 6))
    30.0
    """
    est = _stack(R_est, "R_est", (3, 3))
    gt = _stack(R_gt, "R_gt", (3, 3))
    cos = (np.sum(est * gt, axis=(-2, -1)) - 1.0) / 2.0  # tr(A^T B) = sum of A * B
    return np.asarray(np.rad2deg(np.abs(np.arccos(np.clip(cos, -1.0, 1.0)))))


@validate_params(ignore_gt_t_thr=Real(0, None))
def translation_error(t_est: Any, t_gt: Any, *, ignore_gt_t_thr: float = 0.0) -> np.ndarray:
    r"""Angle between translation directions up to sign, in degrees.

    .. math:: e_t = \min(\theta_t, 180^\circ - \theta_t), \qquad
        \theta_t = \arccos\operatorname{clip}\!\left(\tfrac{\hat t\cdot t}
        {\lVert\hat t\rVert\lVert t\rVert}, -1, 1\right)

    (SuperGlue's ``angle_error_vec`` then ``np.minimum(e, 180 - e)``; Glue Factory's
    ``relative_pose_error``). Glue Factory's ``ignore_gt_t_thr``: where
    :math:`\lVert t\rVert` is below it (a pure rotation), :math:`e_t = 0`.

    Parameters
    ----------
    t_est, t_gt : array_like (..., 3)
        Estimated and true translations (broadcast against each other).
    ignore_gt_t_thr : float
        Glue Factory's threshold on the true translation's length (default 0: never).

    Returns
    -------
    ndarray
        Errors in degrees, in :math:`[0, 90]`.

    Raises
    ------
    InvalidInputError
        A translation of length zero whose angle is undefined (and not ignored).

    Examples
    --------
    >>> float(translation_error([1.0, 0, 0], [-1.0, 0, 0]))  # opposite sign: no error
    0.0
    >>> float(np.round(translation_error([1.0, 1, 0], [1.0, 0, 0]), 6))
    45.0
    """
    est = _stack(t_est, "t_est", (3,))
    gt = _stack(t_gt, "t_gt", (3,))
    norm_est = np.linalg.norm(est, axis=-1)
    norm_gt = np.linalg.norm(gt, axis=-1)
    ignored = np.broadcast_to(norm_gt < float(ignore_gt_t_thr), np.broadcast_shapes(
        norm_est.shape, norm_gt.shape))
    product = norm_est * norm_gt
    undefined = (product == 0) & ~ignored
    if undefined.any():
        where = np.argwhere(undefined)
        raise InvalidInputError(
            f"a translation of length zero (at index {tuple(int(i) for i in where[0])}): its "
            "direction is undefined; expected non-zero translations (or ignore_gt_t_thr > 0)"
        )
    dot = np.sum(est * gt, axis=-1)
    cos = np.divide(dot, product, out=np.zeros_like(dot * product), where=product != 0)
    angle = np.rad2deg(np.arccos(np.clip(cos, -1.0, 1.0)))
    error = np.minimum(angle, 180.0 - angle)
    return np.asarray(np.where(ignored, 0.0, error))


def pose_error(R_error: Any, t_error: Any) -> np.ndarray:
    r"""The pose error :math:`e = \max(e_R, e_t)` (``np.maximum``; an infinite part stays
    infinite).

    Examples
    --------
    >>> pose_error([1.0, 5.0], [3.0, np.inf]).tolist()
    [3.0, inf]
    """
    return np.asarray(np.maximum(np.asarray(R_error, float), np.asarray(t_error, float)))


@validate_params(ignore_gt_t_thr=Real(0, None))
def relative_pose_error(
    T_0to1: Any, R: Any, t: Any, *, ignore_gt_t_thr: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """``(t_error, R_error)`` in degrees of an estimate ``R, t`` against the true 4 x 4
    ``T_0to1`` (Glue Factory's ``relative_pose_error``, SuperGlue's ``compute_pose_error``; the
    same order of outputs).

    Examples
    --------
    >>> import numpy as np
    >>> T = np.eye(4); T[:3, 3] = [0.0, 0.0, 2.0]
    >>> [float(e) for e in relative_pose_error(T, np.eye(3), [0.0, 0.0, -1.0])]
    [0.0, 0.0]
    """
    T = _stack(T_0to1, "T_0to1", (4, 4))
    t_err = translation_error(t, T[..., :3, 3], ignore_gt_t_thr=ignore_gt_t_thr)
    return t_err, rotation_error(R, T[..., :3, :3])
