"""The built-in synthetic benchmark: HPatches-style sequences from scikit-image's photographs.

For every photograph of :data:`PHOTOGRAPHS` two scenes, ``i_<name>`` (illumination) and
``v_<name>`` (viewpoint), made by :mod:`metricalc.datasets.scenes` (the changes and their
formulas: :mod:`~metricalc.datasets.photometric` and :mod:`~metricalc.datasets.viewpoint`), are
written in the layout of :mod:`metricalc.keypoints.sequences`. A manifest
(:data:`MANIFEST_NAME`) in the root records the generator version, seed, size and, per scene, the
size and SHA-256 of every file; see :func:`make_synthetic_dataset` for the caching rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from metricalc.datasets.photometric import photometric_change
from metricalc.datasets.scenes import (
    DEFAULT_SIZE,
    PHOTOGRAPHS,
    SIZE,
    generate_scene,
    load_photograph,
)
from metricalc.datasets.viewpoint import viewpoint_homographies
from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write, read_manifest
from metricalc.keypoints.parallel import run_staged
from metricalc.keypoints.sequences import SYNTHETIC_MANIFEST, Sequence, load_sequences
from metricalc.progress import progress_bar
from metricalc.validation import Boolean, Integer, validate_params

__all__ = [
    "DEFAULT_SIZE",
    "GENERATOR_VERSION",
    "MANIFEST_NAME",
    "PHOTOGRAPHS",
    "QUICK_SCENES",
    "load_photograph",
    "make_synthetic_dataset",
    "photometric_change",
    "viewpoint_homographies",
]

GENERATOR_VERSION = 2
"""Bumped whenever the generated pixels or homographies change; a different version regenerates."""
GENERATOR = "metricalc.keypoints.synthetic"
"""The manifest's ``generator``: the module's name when the format was fixed."""

MANIFEST_NAME = SYNTHETIC_MANIFEST
"""File name of the manifest written in the dataset root."""

QUICK_SCENES: tuple[str, ...] = tuple(p for p in ("astronaut", "camera") if p in PHOTOGRAPHS)
"""A small default subset for ``--quick``: one RGB and one gray photograph, four scenes."""

_PNG_PARAMS = [cv2.IMWRITE_PNG_COMPRESSION, 3]
_IMAGE_NAMES = tuple(f"{k}.png" for k in range(1, 7))
_H_NAMES = tuple(f"H_1_{k}" for k in range(2, 7))
_SCENE_NAME = re.compile(r"[iv]_[A-Za-z0-9_]+")  # what this generator names its scene folders


# -- files -------------------------------------------------------------------------------------


def _png(image: np.ndarray) -> bytes:
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    ok, buffer = cv2.imencode(".png", image, _PNG_PARAMS)
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 images
        raise InvalidInputError(f"OpenCV could not encode an image of shape {image.shape}")
    return buffer.tobytes()


def _homography_text(H: np.ndarray) -> bytes:
    # repr() of a float64 is the shortest text that reads back to the same number, so the file
    # holds exactly the matrix that warped the image.
    return "".join(" ".join(repr(float(v)) for v in row) + "\n" for row in H).encode("ascii")


def _write_scene(
    folder: Path, images: list[np.ndarray], homographies: list[np.ndarray]
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    blobs = [(name, _png(image)) for name, image in zip(_IMAGE_NAMES, images, strict=True)]
    blobs += [(name, _homography_text(H)) for name, H in zip(_H_NAMES, homographies, strict=True)]
    for name, data in blobs:
        atomic_write(folder / name, data)
        files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return files


def _new_manifest(seed: int, size: int) -> dict[str, Any]:
    import skimage

    return {
        "generator": GENERATOR,
        "version": GENERATOR_VERSION,
        "seed": seed,
        "size": size,
        "opencv": cv2.__version__,
        "scikit_image": skimage.__version__,  # type: ignore[attr-defined]
        "scenes": {},
    }


def _read_manifest(root: Path) -> dict[str, Any] | None:
    return read_manifest(
        root,
        name=MANIFEST_NAME,
        generator=GENERATOR,
        keys=("version", "seed", "size"),
        what="synthetic benchmark",
    )


def _write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    atomic_write(root / MANIFEST_NAME, text.encode("utf-8"))


def _scene_complete(root: Path, scene: str, record: Any) -> bool:
    """Whether the manifest lists ``scene`` and all its files exist at their recorded sizes."""
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return False
    files = record["files"]
    if set(files) != {*_IMAGE_NAMES, *_H_NAMES}:
        return False
    for name, info in files.items():
        path = root / scene / name
        try:
            if path.stat().st_size != info.get("bytes"):
                return False
        except (OSError, AttributeError):
            return False
    return True


def _remove_scene(root: Path, scene: str) -> None:
    """Delete the files this generator wrote for ``scene`` (and the folder if it is then empty)."""
    folder = root / scene
    for name in (*_IMAGE_NAMES, *_H_NAMES):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty (someone else's files) or gone: leave it
        folder.rmdir()


# -- public entry point ------------------------------------------------------------------------


def resolve_scenes(scenes: Iterable[str] | str | None) -> list[str]:
    """Scene names (sorted) for photograph names and/or scene names."""
    if scenes is None:
        scenes = PHOTOGRAPHS
    elif isinstance(scenes, str):
        scenes = [scenes]
    resolved: set[str] = set()
    unknown = []
    for name in scenes:
        name = str(name)
        if name in PHOTOGRAPHS:
            resolved.update((f"i_{name}", f"v_{name}"))
        elif name[:2] in ("i_", "v_") and name[2:] in PHOTOGRAPHS:
            resolved.add(name)
        else:
            unknown.append(name)
    if unknown:
        raise InvalidInputError(
            f"unknown synthetic scene(s) {unknown}: expected photograph names "
            f"({', '.join(PHOTOGRAPHS)}) or scene names i_<photograph> / v_<photograph>"
        )
    if not resolved:
        raise InvalidInputError("scenes selects no scene; pass None for all of them")
    return sorted(resolved)


@validate_params(seed=Integer(0), size=SIZE, progress=Boolean())
def make_synthetic_dataset(
    root: str | Path,
    *,
    scenes: Iterable[str] | str | None = None,
    seed: int = 0,
    size: int = DEFAULT_SIZE,
    progress: bool = False,
) -> list[Sequence]:
    """Write (or reuse) the synthetic HPatches-style benchmark in ``root`` and load it.

    Per photograph of :data:`PHOTOGRAPHS`: an illumination scene ``i_<name>`` and a viewpoint
    scene ``v_<name>`` with six PNG images and ``H_1_2 .. H_1_6`` (module docstring for the
    transformations).

    Parameters
    ----------
    root : path
        Dataset folder: new, empty, or written by this function before.
    scenes : iterable of str, optional
        Photograph names (both scenes, e.g. ``"coffee"``) and/or scene names (``"v_coffee"``);
        default all. :data:`QUICK_SCENES` is a small subset.
    seed : int
        Seed of every random draw (non-negative). Same seed, size and generator version ->
        byte-identical files.
    size : int
        Bound on the longer image side in pixels (>= 32); larger photographs are shrunk.
    progress : bool
        Show a progress bar over the scenes to write.

    Returns
    -------
    list of Sequence
        The requested scenes, sorted by name, read back by
        :func:`~metricalc.keypoints.sequences.load_sequences`.

    Notes
    -----
    Caching, through the manifest ``root/synthetic_manifest.json``:

    - A requested scene that the manifest lists, with every file present at its recorded size,
      is reused; nothing is written (re-running with the same arguments does no work).
    - Missing scenes are generated and added; scenes generated earlier and not requested now
      stay (so the root may hold more scenes than one call returns).
    - A different ``seed`` or ``size`` (or a new :data:`GENERATOR_VERSION`) regenerates the
      requested scenes and deletes the files of every other scene the manifest lists, so one
      root never mixes seeds or sizes.

    Every file (and the manifest after each scene) is written to a temporary name and renamed;
    an interrupted run leaves complete files and a manifest that lists only finished scenes.

    Raises
    ------
    InvalidInputError
        Unknown scene or photograph name, bad ``seed`` or ``size``, ``root`` not empty and not
        written by this function, or an unreadable manifest.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sequences = make_synthetic_dataset(tmp, scenes=["camera"], size=64)
    ...     [(s.name, s.split, s.shape(6)) for s in sequences]
    [('i_camera', 'illumination', (64, 64)), ('v_camera', 'viewpoint', (64, 64))]
    """
    wanted = resolve_scenes(scenes)
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InvalidInputError(f"dataset root {root} exists and is not a directory")
    manifest = _read_manifest(root)
    identity = (GENERATOR_VERSION, seed, size)
    if manifest is None:
        root.mkdir(parents=True, exist_ok=True)
        manifest = _new_manifest(seed, size)
        _write_manifest(root, manifest)
    elif (manifest["version"], manifest["seed"], manifest["size"]) != identity:
        for scene in manifest["scenes"]:
            if scene not in wanted and _SCENE_NAME.fullmatch(str(scene)):
                _remove_scene(root, scene)
        manifest = _new_manifest(seed, size)
        _write_manifest(root, manifest)
    todo = sorted(  # by photograph, so i_<name> and v_<name> share one load
        (
            scene
            for scene in wanted
            if not _scene_complete(root, scene, manifest["scenes"].get(scene))
        ),
        key=lambda scene: (scene[2:], scene),
    )
    photographs = {scene[2:]: load_photograph(scene[2:], size=size) for scene in todo}

    def write(scene: str) -> dict[str, Any]:
        images, homographies = generate_scene(scene, photographs[scene[2:]], seed)
        return _write_scene(root / scene, images, homographies)

    def record(i: int, files: list[dict[str, Any]]) -> None:
        # in one thread, in the order of todo: the manifest lists finished scenes only
        scene = todo[i]
        manifest["scenes"][scene] = {"scene": scene, "photograph": scene[2:], "files": files[0]}
        _write_manifest(root, manifest)

    with progress_bar("benchmark scenes", total=len(todo), enabled=progress) as advance:
        run_staged(write, [[scene] for scene in todo], record, done=advance)
    return load_sequences(root, scenes=wanted)
