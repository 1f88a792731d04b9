"""The HPatches image sequences: keypoint matching and image retrieval (``keypoints eval``, ``run
hpatches``, ``demo``), D2-Net's MMA.

The room of this benchmark (docs/architecture.md, "One benchmark, one room").
"""
