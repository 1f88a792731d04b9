"""Old module paths that still import: ``import metricalc.patches.files`` gives the module that
moved to ``metricalc.benchmarks.hpatches_patches.files`` (docs/architecture.md, "One benchmark,
one room"), the same module object, so its classes and functions are the new ones.

:func:`install` puts :class:`MovedModules` on :data:`sys.meta_path` once; the old packages
``metricalc.patches``, ``metricalc.detection`` and ``metricalc.pose`` call it when imported.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_loader
from types import ModuleType

MOVED: dict[str, str] = {
    "metricalc.patches.benchmark": "metricalc.benchmarks.hpatches_patches.benchmark",
    "metricalc.patches.checks": "metricalc.benchmarks.hpatches_patches.checks",
    "metricalc.patches.compute": "metricalc.benchmarks.hpatches_patches.compute",
    "metricalc.patches.dataset": "metricalc.benchmarks.hpatches_patches.dataset",
    "metricalc.patches.describe": "metricalc.benchmarks.hpatches_patches.describe",
    "metricalc.patches.evaluate": "metricalc.benchmarks.hpatches_patches.evaluate",
    "metricalc.patches.files": "metricalc.benchmarks.hpatches_patches.files",
    "metricalc.patches.folder": "metricalc.benchmarks.hpatches_patches.folder",
    "metricalc.patches.names": "metricalc.benchmarks.hpatches_patches.names",
    "metricalc.patches.pool": "metricalc.benchmarks.hpatches_patches.pool",
    "metricalc.patches.querycube": "metricalc.benchmarks.hpatches_patches.querycube",
    "metricalc.patches.trec": "metricalc.benchmarks.hpatches_patches.trec",
    "metricalc.patches.cvpr17_cube": "metricalc.benchmarks.hpatches_cvpr17.cube",
    "metricalc.patches.cvpr17_eval": "metricalc.benchmarks.hpatches_cvpr17.evaluate",
    "metricalc.patches.cvpr17_files": "metricalc.benchmarks.hpatches_cvpr17.files",
    "metricalc.patches.cvpr17_pairs": "metricalc.benchmarks.hpatches_cvpr17.pairs",
    "metricalc.patches.cvpr17_verification": "metricalc.benchmarks.hpatches_cvpr17.verification",
    "metricalc.patches.phototour": "metricalc.benchmarks.phototour.dataset",
    "metricalc.patches.fpr95_records": "metricalc.benchmarks.phototour.records",
    "metricalc.patches.verification": "metricalc.benchmarks.phototour.verification",
    "metricalc.pose.accuracy": "metricalc.benchmarks.twoview.accuracy",
    "metricalc.pose.angular": "metricalc.benchmarks.twoview.angular",
    "metricalc.pose.estimation": "metricalc.benchmarks.twoview.estimation",
    "metricalc.pose.evaluate": "metricalc.benchmarks.twoview.evaluate",
    "metricalc.pose.pairs": "metricalc.benchmarks.twoview.pairs",
    "metricalc.detection.coco": "metricalc.benchmarks.coco.files",
    "metricalc.detection.evaluate": "metricalc.benchmarks.coco.evaluate",
    "metricalc.detection.iou": "metricalc.benchmarks.coco.iou",
    "metricalc.detection.masks": "metricalc.benchmarks.coco.masks",
    "metricalc.detection.matching": "metricalc.benchmarks.coco.matching",
    "metricalc.detection.polygons": "metricalc.benchmarks.coco.polygons",
    "metricalc.detection.resampled": "metricalc.benchmarks.coco.resampled",
}
"""Each old module path and the module it moved to."""


class MovedModules(MetaPathFinder, Loader):
    """Finds an old module path of :data:`MOVED` and loads it as the module it moved to."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """A spec for ``fullname`` if it is an old path, else None (other finders go on)."""
        return spec_from_loader(fullname, self) if fullname in MOVED else None

    def __init__(self) -> None:
        self.specs: dict[str, ModuleSpec | None] = {}

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        """The module at its new path (imported there if it is not yet)."""
        module = import_module(MOVED[spec.name])
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run; the import machinery gave the module the old path's spec, so give it
        back its own (``__spec__`` names where it lives, for pickling and reloads)."""
        module.__spec__ = self.specs.pop(module.__name__)


def install() -> None:
    """Put :class:`MovedModules` on :data:`sys.meta_path` (once).

    Examples
    --------
    >>> install()
    >>> import metricalc.pose.angular as old
    >>> import metricalc.benchmarks.twoview.angular as new
    >>> old is new, old.__spec__.name
    (True, 'metricalc.benchmarks.twoview.angular')
    """
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
