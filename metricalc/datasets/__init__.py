"""Every generated dataset of metricalc: the built-in benchmarks and the example cube.

- :func:`make_synthetic_dataset` (:mod:`~metricalc.datasets.sequences`): HPatches-style image
  sequences with exact homographies, made from the photographs bundled with scikit-image;
- :func:`make_patch_dataset` (:mod:`~metricalc.benchmarks.hpatches_patches.generator`): an
  HPatches-style patch dataset
  cut from those sequences;
- :func:`make_twoview_dataset` (:mod:`~metricalc.benchmarks.twoview.generator`): image pairs of
  textured
  planes with exact relative poses and their pair list, for :mod:`metricalc.benchmarks.twoview`;
- :func:`make_hpatches17_set` (:mod:`~metricalc.benchmarks.hpatches_cvpr17.generator`): descriptors
  and task files
  of that patch dataset in hpatches-benchmark's layout, for the CVPR'17 tasks;
- :func:`make_coco_dataset` (:mod:`~metricalc.benchmarks.coco.generator`): COCO-style ground truth
  and
  detections for decomposition studies;
- :func:`example_cube` (:mod:`~metricalc.datasets.example`): a three-query QueryCube for examples.

The generators load OpenCV, so each is imported on first use.

>>> from metricalc.datasets import example_cube
>>> example_cube().sizes["query"]
3
"""

from metricalc.lazy import lazy_getattr

__all__ = [
    "PHOTOGRAPHS",
    "QUICK_SCENES",
    "example_cube",
    "make_coco_dataset",
    "make_hpatches17_set",
    "make_patch_dataset",
    "make_synthetic_dataset",
    "make_twoview_dataset",
]

_LAZY = {
    "PHOTOGRAPHS": "metricalc.datasets.sequences",
    "QUICK_SCENES": "metricalc.datasets.sequences",
    "make_synthetic_dataset": "metricalc.datasets.sequences",
    "make_patch_dataset": "metricalc.benchmarks.hpatches_patches.generator",
    "make_coco_dataset": "metricalc.benchmarks.coco.generator",
    "make_twoview_dataset": "metricalc.benchmarks.twoview.generator",
    "make_hpatches17_set": "metricalc.benchmarks.hpatches_cvpr17.generator",
    "example_cube": "metricalc.datasets.example",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
