"""What the built-in benchmark is calibrated against: real-data anchors and the published order.

:data:`REAL_HPATCHES_ANCHORS` are DescriptorWorkbench results on real HPatches sequences
(12 scenes: ``i_autannes``, ``i_contruction``, ``i_dome``, ``i_greentea``, ``i_londonbridge``,
``i_porta``, ``v_beyus``, ``v_charing``, ``v_churchill``, ``v_vitro``, ``v_wall``, ``v_yard``;
2,000 keypoints per image), recomputed with metricalc's metric set from the per-scene values of
the export ``descriptor_performance_analysis.csv`` (``metricalc db import-workbench`` reads it;
the tests recompute every number here from a copy of that file):

- ``true_map_micro``: the query-weighted mean AP over all scenes;
- ``viewpoint_map`` / ``illumination_map``: the mean over the split's scenes of each scene's mAP
  (DescriptorWorkbench's ``calculateMeanPrecision``).

:data:`PUBLISHED_ORDER` is the ranking that published HPatches results agree on (Balntas et al.,
CVPR 2017: RootSIFT >= SIFT > ORB > BRIEF, raw-pixel baselines last; Dong and Soatto, CVPR 2015,
and the anchors above: DSP-SIFT > SIFT), as pairs of built-in method names.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PUBLISHED_ORDER", "REAL_HPATCHES_ANCHORS", "Anchor", "OrderClaim"]


@dataclass(frozen=True)
class Anchor:
    """One descriptor's result on real HPatches sequences (fractions, 5 decimals, so that the
    3 decimals a report prints are the export's own rounding, not a rounding of a rounding).

    ``method`` is the built-in method of metricalc computing the same descriptor, or ``""``
    where metricalc has none; ``label`` and ``experiment_id`` name the export's row.
    """

    name: str
    method: str
    label: str
    experiment_id: int
    true_map_micro: float
    viewpoint_map: float
    illumination_map: float


REAL_HPATCHES_ANCHORS: tuple[Anchor, ...] = (
    Anchor("SIFT", "sift", "sift_baseline_grayscale_none_l2", 1, 0.47204, 0.41716, 0.52712),
    Anchor(
        "DSP-SIFT", "dspsift", "dspsift_baseline_grayscale_dsp_l2", 25, 0.54496, 0.52040, 0.57981
    ),
    Anchor("RGB-SIFT", "", "rgbsift_baseline_color_none_l2", 4, 0.47923, 0.42825, 0.53051),
    Anchor("SURF", "", "surf_baseline", 40, 0.17508, 0.10955, 0.22327),
)
"""DescriptorWorkbench's results on 12 real HPatches sequences (see the module docstring)."""


@dataclass(frozen=True)
class OrderClaim:
    """``better`` scores at least (``strict=False``) or more than (``strict=True``) ``worse``."""

    better: str
    worse: str
    strict: bool = True

    def holds(self, better: float, worse: float) -> bool:
        """Whether the two scores satisfy the claim.

        Examples
        --------
        >>> OrderClaim("sift", "orb").holds(0.5, 0.5), OrderClaim("rootsift", "sift", False).holds(0.5, 0.5)
        (False, True)
        """  # noqa: E501
        return better > worse if self.strict else better >= worse

    def __str__(self) -> str:
        return f"{self.better} {'>' if self.strict else '>='} {self.worse}"


PUBLISHED_ORDER: tuple[OrderClaim, ...] = (
    OrderClaim("rootsift", "sift", strict=False),
    OrderClaim("dspsift", "sift"),
    OrderClaim("sift", "orb"),
    OrderClaim("sift", "brief"),
    OrderClaim("sift", "raw_patch"),
)
"""The order published HPatches results agree on, as claims between built-in methods."""
