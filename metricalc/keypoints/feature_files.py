"""Bring-your-own features: save, load and validate ``root/<descriptor>/<scene>/<image>.npz``.

Arrays ``keypoints`` (N x 2, x y in pixels) and ``descriptors`` (N x D float, or N x B uint8
packed bits), image 1..6: :func:`save_features` writes them, :func:`load_features` and
:func:`load_image_features` read and validate them, and :func:`export_keypoints` writes the kept
keypoints of a built-in detector for your own descriptor to describe. See ``docs/features.md``.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.fileio import temporary_path
from metricalc.keypoints.extraction import (
    BUILTIN_METHODS,
    EXTRACTION_OPTIONS,
    MAX_KEYPOINTS,
    detect_keypoints,
)
from metricalc.keypoints.featureset import IMAGES, Features, FeatureSet, SequenceLike, _coerce
from metricalc.validation import Boolean, Choice, is_integer, validate_params

__all__ = ["export_keypoints", "load_features", "load_image_features", "save_features"]


def _check_folder_name(name: Any, what: str) -> str:
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or name.startswith(".")
        or any(c in name for c in ("/", "\\", "\0"))
    ):
        raise InvalidInputError(
            f"{what} name {name!r} cannot be a folder name; expected a non-empty str without "
            "path separators that does not start with '.'"
        )
    return name


def save_features(root: str | os.PathLike[str], features: Mapping[str, Any]) -> None:
    """Write features in the bring-your-own layout ``root/<descriptor>/<scene>/<image>.npz``.

    Every scene must have images 1..6; each ``.npz`` holds ``keypoints`` (N x 2 float64) and
    ``descriptors`` (N x D float32 or uint8). Everything is validated before the first file is
    written, and each file is written to a temporary name and renamed (atomic). Existing files of
    the same names are replaced; other files are left alone.

    Parameters
    ----------
    root : path
        Output folder (created if missing).
    features : mapping
        descriptor -> scene -> image (1..6) -> :class:`Features` (or any object with
        ``keypoints`` and ``descriptors``), e.g. from :func:`extract`.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> one = Features(np.array([[50.0, 60.0]]), np.ones((1, 8), dtype=np.float32))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_features(tmp, {"mine": {"i_scene": {k: one for k in range(1, 7)}}})
    ...     sorted(p.name for p in (Path(tmp) / "mine" / "i_scene").iterdir())
    ['1.npz', '2.npz', '3.npz', '4.npz', '5.npz', '6.npz']
    """
    if not isinstance(features, Mapping) or not features:
        raise InvalidInputError("features must be a non-empty mapping descriptor -> scene -> image")
    plan: list[tuple[Path, Features]] = []
    base = Path(root)
    for descriptor, scenes in features.items():
        _check_folder_name(descriptor, "descriptor")
        if not isinstance(scenes, Mapping) or not scenes:
            raise InvalidInputError(
                f"features[{descriptor!r}] must be a non-empty mapping scene -> image -> Features"
            )
        for scene, images in scenes.items():
            _check_folder_name(scene, "scene")
            where = f"features[{descriptor!r}][{scene!r}]"
            if not isinstance(images, Mapping):
                raise InvalidInputError(f"{where} must be a mapping image (1..6) -> Features")
            keys = set()
            for key in images:
                if not is_integer(key):
                    raise InvalidInputError(f"{where} has image key {key!r}; expected ints 1..6")
                keys.add(int(key))
            if keys != set(IMAGES):
                raise InvalidInputError(
                    f"{where} has images {sorted(keys)}; expected exactly 1, 2, 3, 4, 5, 6"
                )
            for key, item in images.items():
                if not isinstance(item, Features):
                    if not (hasattr(item, "keypoints") and hasattr(item, "descriptors")):
                        raise InvalidInputError(
                            f"{where}[{key}] is a {type(item).__name__}; expected Features"
                        )
                    kp, desc = _coerce(item.keypoints, item.descriptors, f"{where}[{key}]")
                    item = Features(kp, desc)
                plan.append((base / descriptor / scene / f"{int(key)}.npz", item))
    for path, item in plan:
        with temporary_path(path) as tmp, open(tmp, "wb") as stream:
            np.savez(stream, keypoints=item.keypoints, descriptors=item.descriptors)


@validate_params(detector=Choice(BUILTIN_METHODS), progress=Boolean(), **EXTRACTION_OPTIONS)
def export_keypoints(
    data: str | os.PathLike[str] | Iterable[SequenceLike],
    out: str | os.PathLike[str],
    *,
    detector: str = "sift",
    max_keypoints: int | None = MAX_KEYPOINTS,
    border: float = 40.0,
    progress: bool = False,
) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """Write the kept keypoints of ``detector`` per image, for your own descriptor to describe.

    ``out/<scene>/<image>.npz`` (image 1..6), the layout of one descriptor folder of
    :func:`load_features`, with the arrays of :func:`detect_keypoints`: ``keypoints`` (N x 2
    float64, x y), ``size``, ``angle``, ``response`` and ``image_size`` (height, width), the image
    they belong to (``scene``, a string, and ``image``, its number 1..6) and no ``descriptors``.
    :func:`load_features` refuses a file whose ``scene`` / ``image`` is not the place it is read
    from (a file copied to the wrong image). Add a ``descriptors`` array (N x D, row i describing
    keypoint i) to each file, in place or in a copy, and evaluate the folder next to the built-in
    methods with ``metricalc keypoints eval --features NAME=FOLDER --locked <detector>``: the
    evaluation checks that its keypoints are these (:func:`check_own_keypoints`). Each file is
    written to a temporary name and renamed; files of the same names are replaced, other files
    left alone.

    Parameters
    ----------
    data : path or iterable of Sequence
        A sequences folder (:func:`metricalc.keypoints.sequences.load_sequences`) or sequences.
    out : path
        Output folder (created if missing).
    detector : str
        A built-in method name; its detector finds the keypoints (``"rootsift"`` = ``"sift"``).
    max_keypoints, border
        As for :func:`extract` (and the same as the evaluation that follows must use).
    progress : bool
        Show a progress bar over (scene, image).

    Returns
    -------
    dict
        scene -> image -> the arrays written.
    """
    base = Path(out)
    if base.exists() and not base.is_dir():
        raise InvalidInputError(f"keypoints folder {base} exists and is not a folder")
    if isinstance(data, (str, os.PathLike)):
        from metricalc.keypoints.sequences import load_sequences

        data = load_sequences(data)
    kept = detect_keypoints(
        data, detector, max_keypoints=max_keypoints, border=border, progress=progress
    )
    for scene, images in kept.items():
        _check_folder_name(scene, "scene")
        for k, arrays in images.items():
            arrays.update(scene=np.array(scene), image=np.array(k, dtype=np.int64))
            with temporary_path(base / scene / f"{k}.npz") as tmp, open(tmp, "wb") as stream:
                fields: dict[str, Any] = dict(arrays)  # the stub types every keyword as a bool
                np.savez(stream, **fields)
    return kept


def _read_npz(path: Path, at: tuple[str, int] | None = None) -> Features:
    """One image's features; ``at`` (scene, image) is where the file lies in a descriptor folder,
    checked against the image an exported file records (``scene``, ``image``)."""
    where = f"features file {path}"
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        archive = np.load(path, allow_pickle=False)
    except unreadable as error:
        raise InvalidInputError(f"{where} cannot be read as an .npz archive: {error}") from error
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InvalidInputError(f"{where} is not an .npz archive (write it with np.savez)")
    with archive:
        missing = [key for key in ("keypoints", "descriptors") if key not in archive.files]
        if missing == ["descriptors"] and "image_size" in archive.files:
            raise InvalidInputError(
                f"{where} has keypoints only (as export-keypoints writes them); add your "
                "'descriptors' array (N x D, row i describing keypoint i)"
            )
        if missing:
            raise InvalidInputError(
                f"{where} has no {' or '.join(repr(m) for m in missing)} array "
                f"(arrays found: {sorted(archive.files)}); expected 'keypoints' (N x 2) and "
                "'descriptors' (N x D)"
            )
        try:
            keypoints = archive["keypoints"]
            descriptors = archive["descriptors"]
            recorded = tuple(
                archive[key].tolist() for key in ("scene", "image") if key in archive.files
            )
        except unreadable as error:
            raise InvalidInputError(f"{where}: an array cannot be read: {error}") from error
    if at is not None and recorded and recorded != at[: len(recorded)]:
        keys = ("scene", "image")[: len(recorded)]
        said = ", ".join(f"{key} {value!r}" for key, value in zip(keys, recorded, strict=True))
        raise InvalidInputError(
            f"{where} records {said} (export-keypoints wrote it for that image) but lies at "
            f"scene {at[0]!r} image {at[1]}; describe each image's own keypoints"
        )
    kp, desc = _coerce(keypoints, descriptors, where)
    return Features(kp, desc, source=str(path))


def load_image_features(path: str | os.PathLike[str]) -> Features:
    """Read one image's bring-your-own ``.npz`` (arrays ``keypoints`` and ``descriptors``).

    The checks of :func:`load_features` for a single file; errors name the file.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     np.savez(Path(tmp) / "1.npz", keypoints=np.ones((3, 2)), descriptors=np.ones((3, 8)))
    ...     load_image_features(Path(tmp) / "1.npz")
    Features(n=3, dims=8, dtype=float32)
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"missing features file {path}")
    return _read_npz(path)


def _subfolders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_features(
    root: str | os.PathLike[str] | Mapping[str, str | os.PathLike[str]],
    *,
    descriptors: Iterable[str] | str | None = None,
) -> FeatureSet:
    """Read bring-your-own features from ``root/<descriptor>/<scene>/<image>.npz``, validated.

    Each scene folder must hold ``1.npz`` .. ``6.npz`` (no other ``.npz``), each with arrays
    ``keypoints`` (N x 2, x y in pixels, float or integer; read as float64) and ``descriptors``
    (N x D, any float type, read as float32 and compared by L2 distance, or uint8 packed bits
    compared by Hamming distance). All images of a descriptor must have the same D and dtype. A
    missing folder or file, a missing array, a wrong shape, a row-count mismatch, another dtype
    or a non-finite value raises :class:`~metricalc.InvalidInputError` naming the file.

    Parameters
    ----------
    root : path or mapping descriptor name -> path
        Folder with one sub-folder per descriptor (folders starting with ``.`` are ignored), or
        a mapping that names descriptor folders (``<scene>/1.npz .. 6.npz`` each) anywhere,
        e.g. ``{"mine": "features/mine_v2"}``; descriptors then come in the mapping's order.
    descriptors : iterable of str or str, optional
        Load only these descriptors of ``root`` (each folder must exist); default all.

    Returns
    -------
    dict
        descriptor -> scene -> image (1..6) -> :class:`Features`, descriptors in the given order
        (default sorted), scenes sorted.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> rng = np.random.default_rng(0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     for k in range(1, 7):
    ...         path = Path(tmp) / "mine" / "v_scene" / f"{k}.npz"
    ...         path.parent.mkdir(parents=True, exist_ok=True)
    ...         np.savez(path, keypoints=rng.uniform(40, 200, (5, 2)),
    ...                  descriptors=rng.normal(size=(5, 64)))
    ...     fs = load_features(tmp)
    >>> fs["mine"]["v_scene"][6].descriptors.dtype, len(fs["mine"]["v_scene"])
    (dtype('float32'), 6)
    """
    if isinstance(root, Mapping):
        return _load_named(root, descriptors)
    base = Path(root)
    if not base.is_dir():
        raise InvalidInputError(f"features folder {base} does not exist or is not a folder")
    if descriptors is None:
        folders = _subfolders(base)
        if not folders:
            raise InvalidInputError(
                f"features folder {base} has no descriptor folders; expected "
                "<descriptor>/<scene>/1.npz .. 6.npz"
            )
    else:
        wanted = (descriptors,) if isinstance(descriptors, str) else tuple(descriptors)
        if not wanted:
            raise InvalidInputError("descriptors is empty; expected descriptor folder names")
        folders = []
        for name in wanted:
            _check_folder_name(name, "descriptor")
            if not (base / name).is_dir():
                raise InvalidInputError(
                    f"missing descriptor folder {base / name} (descriptor {name!r})"
                )
            folders.append(base / name)
    return {folder.name: _load_descriptor_folder(folder) for folder in folders}


def _load_named(root: Mapping[str, Any], descriptors: Any) -> FeatureSet:
    """:func:`load_features` of a mapping descriptor name -> descriptor folder."""
    if descriptors is not None:
        raise InvalidInputError(
            "descriptors selects folders of one root; with a mapping name -> folder, list only "
            "the descriptors you want in the mapping"
        )
    if not root:
        raise InvalidInputError("the mapping descriptor name -> folder is empty")
    result: FeatureSet = {}
    for name, folder in root.items():
        _check_folder_name(name, "descriptor")
        path = Path(folder)
        if not path.is_dir():
            raise InvalidInputError(
                f"features folder {path} of descriptor {name!r} does not exist or is not a folder"
            )
        result[name] = _load_descriptor_folder(path)
    return result


def _load_descriptor_folder(folder: Path) -> dict[str, dict[int, Features]]:
    """scene -> image -> :class:`Features` of one descriptor folder ``<scene>/1.npz .. 6.npz``."""
    expected_names = {f"{k}.npz" for k in IMAGES}
    scene_folders = _subfolders(folder)
    if not scene_folders:
        raise InvalidInputError(
            f"descriptor folder {folder} has no scene folders; expected <scene>/1.npz .. 6.npz"
        )
    first: tuple[Path, int, np.dtype[Any]] | None = None
    per_scene: dict[str, dict[int, Features]] = {}
    for scene_folder in scene_folders:
        extra = sorted(
            p.name
            for p in scene_folder.glob("*.npz")
            if p.name not in expected_names and not p.name.startswith(".")
        )
        if extra:
            raise InvalidInputError(
                f"scene folder {scene_folder} has unexpected files {extra}; images are "
                "named 1.npz .. 6.npz"
            )
        images: dict[int, Features] = {}
        for k in IMAGES:
            path = scene_folder / f"{k}.npz"
            if not path.is_file():
                raise InvalidInputError(
                    f"missing features file {path}; every scene needs 1.npz .. 6.npz"
                )
            item = _read_npz(path, (scene_folder.name, k))
            dims, dtype = item.descriptors.shape[1], item.descriptors.dtype
            if first is None:
                first = (path, dims, dtype)
            elif (dims, dtype) != first[1:]:
                raise InvalidInputError(
                    f"features file {path}: descriptors are {dims} x {dtype} but "
                    f"{first[0]} has {first[1]} x {first[2]}; every image of a descriptor "
                    "needs the same length and dtype"
                )
            images[k] = item
        per_scene[scene_folder.name] = images
    return per_scene
