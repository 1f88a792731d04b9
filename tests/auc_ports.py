"""Line-by-line ports of the recall-AUC of SuperGlue and Glue Factory, the tests' references.

SuperGlue's ``models/utils.py`` ``pose_auc`` and Glue Factory's ``utils/tools.py``
``cal_error_auc`` are the same computation (sorted errors, recall k / n with (0, 0) prepended,
``searchsorted`` side "left", trapezoid up to the threshold over the threshold); Glue Factory
rounds each AUC to 4 decimals. ``np.trapz`` is ``np.trapezoid`` in NumPy 2.
"""

from __future__ import annotations

import numpy as np


def recall_auc_port(errors, thresholds, *, decimals: int | None = None) -> list[float]:
    """SuperGlue's ``pose_auc`` (``decimals=None``) or Glue Factory's ``cal_error_auc``
    (``decimals=4``), line by line."""
    sort_idx = np.argsort(errors)
    errors = np.array(list(errors))[sort_idx]
    recall = (np.arange(len(errors)) + 1) / len(errors)
    errors = np.r_[0.0, errors]
    recall = np.r_[0.0, recall]
    aucs = []
    for t in thresholds:
        last_index = np.searchsorted(errors, t)
        r = np.r_[recall[:last_index], recall[last_index - 1]]
        e = np.r_[errors[:last_index], t]
        auc = np.trapezoid(r, x=e) / t
        aucs.append(float(auc) if decimals is None else np.round(auc, decimals))
    return aucs
