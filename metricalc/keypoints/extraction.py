"""Extraction of whole sequences and of single images with the built-in methods.

:func:`extract` (every image of every sequence, native or locked keypoints, with your own
descriptors), :func:`extract_image` (one image, for work split per image) and
:func:`detect_keypoints` (the kept keypoints before any description, for your own descriptor).
The checks of their arguments are here; the detectors and descriptors in
:mod:`metricalc.keypoints.detectors`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.keypoints.detectors import (
    BUILTIN_METHODS,
    CONTRIB_METHODS,
    DEFAULT_METHODS,
    DETECTORS,
    Toolkit,
    describe_image,
    describe_image_both,
    opencv_feature,
    select,
)
from metricalc.keypoints.featureset import IMAGES, Features, FeatureSet, SequenceLike
from metricalc.keypoints.parallel import run_parallel
from metricalc.progress import progress_bar
from metricalc.validation import Boolean, Choice, Integer, Nullable, Real, validate_params

__all__ = [
    "BUILTIN_METHODS",
    "DEFAULT_METHODS",
    "MAX_KEYPOINTS",
    "detect_keypoints",
    "extract",
    "extract_both",
    "extract_image",
]

T = TypeVar("T")

MAX_KEYPOINTS = 2000
"""Keypoints kept per image by default (the strongest by detector response)."""


def _check_methods(
    methods: Iterable[str] | str, locked: str | None, *, allow_empty: bool = False
) -> tuple[str, ...]:
    names = (methods,) if isinstance(methods, str) else tuple(methods)
    available = ", ".join(BUILTIN_METHODS)
    if not names and not allow_empty:
        raise InvalidInputError(f"methods is empty; expected one or more of {available}")
    for name in names:
        if name not in BUILTIN_METHODS:
            raise InvalidInputError(
                f"unknown method {name!r} in methods; available methods: {available} "
                "(load other descriptors with load_features)"
            )
    if len(set(names)) != len(names):
        raise InvalidInputError(f"methods {names} lists a method twice")
    if locked is not None and locked not in BUILTIN_METHODS:
        raise InvalidInputError(
            f"locked={locked!r} is not a built-in detector; expected None (native keypoints) "
            f"or one of {available}"
        )
    _check_opencv(names if locked is None else (*names, DETECTORS[locked]))
    return names


def _check_opencv(methods: Iterable[str]) -> None:
    """BRISK, AKAZE and KAZE need them in this OpenCV (a clear error before any work)."""
    for method in methods:
        if method in CONTRIB_METHODS:
            opencv_feature(method)


MIN_IMAGE_SIDE = 16
"""The smallest image side in pixels a keypoint can be described in (SIFT's 4 x 4 cells)."""


def _check_size(shape: tuple[int, ...], border: float, where: str) -> None:
    """An image too small for any keypoint to be kept is an error, not an empty result."""
    needed = max(MIN_IMAGE_SIDE, int(2 * border) + 1)
    if min(shape) < needed:
        raise InvalidInputError(
            f"{where} is {shape[1]} x {shape[0]} px; expected at least {needed} px per side "
            f"(a keypoint is kept {border:g} px from the border and described in a window of "
            f"at least {MIN_IMAGE_SIDE} px): lower --border, or use larger images"
        )


def _check_gray(sequence: SequenceLike, k: int, border: float) -> np.ndarray:
    gray = np.asarray(sequence.gray(k))
    if gray.ndim != 2 or gray.dtype != np.uint8:
        raise InvalidInputError(
            f"scene {sequence.name!r} image {k}: gray() returned a {gray.dtype} array of shape "
            f"{gray.shape}; expected uint8 HxW"
        )
    shape = tuple(int(v) for v in sequence.shape(k))
    if shape != gray.shape:
        raise InvalidInputError(
            f"scene {sequence.name!r} image {k}: shape() is {shape} but gray() has shape "
            f"{gray.shape}"
        )
    _check_size(gray.shape, border, f"scene {sequence.name!r} image {k}")
    return np.ascontiguousarray(gray)


EXTRACTION_OPTIONS = {"max_keypoints": Nullable(Integer(1)), "border": Real(0, None)}
"""The declared options of the extraction entry points (:func:`validate_params`)."""


def _as_options(max_keypoints: int | None, border: float) -> tuple[int | None, float]:
    """``max_keypoints`` and ``border`` (declared) as a Python int or None and a float."""
    return None if max_keypoints is None else int(max_keypoints), float(border)


@validate_params(progress=Boolean(), **EXTRACTION_OPTIONS)
def extract(
    sequences: Iterable[SequenceLike],
    methods: Iterable[str] | str = DEFAULT_METHODS,
    *,
    locked: str | None = None,
    max_keypoints: int | None = MAX_KEYPOINTS,
    border: float = 40.0,
    progress: bool = False,
    own: Mapping[str, Mapping[str, Mapping[int, Features]]] | None = None,
) -> FeatureSet:
    r"""Detect and describe keypoints in every image of every sequence with built-in methods.

    Per image (uint8 gray, ``sequence.gray(k)``, k = 1..6):

    1. detect with the detector of the method (native) or of ``locked`` (every method);
    2. drop keypoints closer than ``border`` px to the edge,
       :math:`b \le x \le W - 1 - b` and :math:`b \le y \le H - 1 - b` are kept
       (:func:`metricalc.keypoints.geometry.inside`);
    3. keep the ``max_keypoints`` strongest by detector response (SIFT: DoG contrast, ORB: Harris
       score, FAST: corner score, BRISK: FAST score, AKAZE / KAZE: Hessian determinant), ordered
       by decreasing response, ties by x then y;
    4. describe them with each method's ``compute``; keypoints a describer cannot describe
       (OpenCV ORB, BRISK and BRIEF drop those whose patch leaves the image) are removed. In
       locked mode a keypoint any method fails to describe is removed for every method, so all
       descriptors get identical keypoint arrays.

    RootSIFT is :math:`\sqrt{d / \lVert d \rVert_1}` of the SIFT descriptor :math:`d`, so each
    row has unit L2 norm. DSP-SIFT is the mean of the SIFT rows at sizes x 1, 1.5, 2, L2
    normalised (DescriptorWorkbench's; :func:`~metricalc.keypoints.sift_family.pool_domain_sizes`).
    ``raw_patch`` is the SIFT window resampled to 8 x 8, zero mean, unit norm (the HPatches
    "Resz" baseline; :func:`~metricalc.keypoints.sift_family.raw_patch`). BRIEF is
    scikit-image's (256 bits, 49 px patch, Gaussian sampling, fixed seed) packed with
    ``np.packbits`` into 32 bytes; it uses positions only (no scale or orientation). BRISK
    (512 bits), AKAZE (MLDB, 486 bits in 61 bytes) and KAZE (64 floats) are OpenCV's with
    their default settings. In locked mode every method describes foreign keypoints at the
    detector's position, size and angle (an angle of -1, as FAST reports, is described upright)
    on the pyramid or scale-space level that matches the size
    (:mod:`metricalc.keypoints.describers`); BRISK and KAZE compute their own orientation.
    The result is deterministic: equal inputs give identical arrays.

    Parameters
    ----------
    sequences : iterable of Sequence
        Objects with ``name``, ``gray(k)`` (uint8 HxW) and ``shape(k)``
        (:class:`metricalc.keypoints.sequences.Sequence`); names must be unique.
    methods : iterable of str or str
        Built-in methods, a subset of :data:`BUILTIN_METHODS` (default :data:`DEFAULT_METHODS`:
        sift, rootsift, orb, brief). brisk, akaze and kaze need OpenCV's BRISK / AKAZE / KAZE
        (``opencv-contrib-python-headless`` with OpenCV 5).
    locked : str, optional
        None for native keypoints; a built-in method name to describe that method's detector's
        keypoints with every method (``"sift"`` and ``"rootsift"`` both lock to SIFT keypoints).
    max_keypoints : int or None
        Keep at most this many keypoints per image (None: all).
    border : float
        Border margin in pixels (default 40, the protocol's).
    progress : bool
        Show a rich progress bar over (method, scene, image).
    own : mapping descriptor -> scene -> image (1..6) -> Features, optional
        Your own descriptors (e.g. from :func:`load_features`), evaluated next to the built-in
        ones. Locked: their keypoints must be the locked detector's kept keypoints, in order
        (:func:`detect_keypoints`, :func:`export_keypoints`; checked by
        :func:`check_own_keypoints`), and a keypoint a built-in method cannot describe is removed
        from them too, so every descriptor ends with identical keypoint arrays. Native: they are
        added unchanged. ``methods`` may then be empty.

    Returns
    -------
    dict
        descriptor -> scene -> image (1..6) -> :class:`Features`, in the order of ``methods``
        (then ``own``) and ``sequences``.

    Examples
    --------
    >>> import cv2
    >>> from skimage import data
    >>> class Scene:
    ...     name = "i_camera"
    ...     def image(self, k): return cv2.resize(data.camera(), (256, 256))
    ...     def gray(self, k): return self.image(k)
    ...     def shape(self, k): return (256, 256)
    >>> fs = extract([Scene()], ("sift", "orb"), locked="sift", max_keypoints=100)
    >>> sift, orb = fs["sift"]["i_camera"][1], fs["orb"]["i_camera"][1]
    >>> bool((sift.keypoints == orb.keypoints).all()), sift.descriptors.shape[1], orb.binary
    (True, 128, True)
    """
    own = dict(own or {})
    names = _check_methods(methods, locked, allow_empty=bool(own))
    limit, border = _as_options(max_keypoints, border)
    scenes = _unique_scenes(sequences)
    _check_own(own, names, scenes)
    if locked is None and own:  # native: your own features keep their own keypoints
        builtin = (
            extract(scenes, names, max_keypoints=limit, border=border, progress=progress)
            if names
            else {}
        )
        return {**builtin, **{n: {s.name: dict(own[n][s.name]) for s in scenes} for n in own}}

    every = (*names, *own)
    toolkit = _per_thread_toolkit(limit)

    def describe(task: tuple[SequenceLike, int]) -> dict[str, Features]:
        sequence, k = task
        return describe_image(
            toolkit(),
            _check_gray(sequence, k, border),
            names,
            locked,
            border,
            limit,
            own={name: own[name][sequence.name][k] for name in own},
            where=f"scene {sequence.name!r} image {k}",
        )

    return _assemble(scenes, every, _run_images(scenes, describe, progress))


@validate_params(progress=Boolean(), **EXTRACTION_OPTIONS)
def extract_both(
    sequences: Iterable[SequenceLike],
    methods: Iterable[str] | str,
    native: Iterable[str] | str,
    *,
    locked: str,
    max_keypoints: int | None = MAX_KEYPOINTS,
    border: float = 40.0,
    progress: bool = False,
) -> tuple[FeatureSet, FeatureSet]:
    """``extract(sequences, methods, locked=locked)`` and ``extract(sequences, native)`` in one
    pass over the images, for ``native`` methods of ``locked``'s detector (e.g. ``"sift"`` next
    to a run locked on SIFT): the detection and SIFT ``compute`` of each image serve both.

    The two results are identical, array for array, to the two calls; the native one differs
    from the locked one where a method of ``methods`` fails to describe a keypoint the native
    method describes (the locked run drops it for every method).

    Examples
    --------
    >>> import numpy as np
    >>> from skimage import data
    >>> half = np.ascontiguousarray(data.camera()[::2, ::2])  # 256 x 256, the same six times
    >>> class Camera:
    ...     name, gray, shape = "i_camera", lambda k: half, lambda k: half.shape
    >>> locked, native = extract_both([Camera], ("sift", "brief"), ("sift",), locked="sift")
    >>> alone = extract([Camera], "sift")["sift"]["i_camera"][1]
    >>> same = native["sift"]["i_camera"][1].descriptors == alone.descriptors
    >>> list(locked), list(native), bool(same.all())
    (['sift', 'brief'], ['sift'], True)
    """
    names = _check_methods(methods, locked, allow_empty=False)
    own_detector = _check_methods(native, None, allow_empty=False)
    foreign = [m for m in own_detector if DETECTORS[m] != DETECTORS[locked]]
    if foreign:
        raise InvalidInputError(
            f"native methods {foreign} do not use the detector of locked={locked!r} "
            f"({DETECTORS[locked]}); extract them with extract()"
        )
    limit, border = _as_options(max_keypoints, border)
    scenes = _unique_scenes(sequences)
    toolkit = _per_thread_toolkit(limit)

    def describe(task: tuple[SequenceLike, int]) -> tuple[dict[str, Features], ...]:
        sequence, k = task
        gray = _check_gray(sequence, k, border)
        return describe_image_both(toolkit(), gray, names, own_detector, locked, border, limit)

    described = _run_images(scenes, describe, progress)
    return (
        _assemble(scenes, names, [pair[0] for pair in described]),
        _assemble(scenes, own_detector, [pair[1] for pair in described]),
    )


def _per_thread_toolkit(limit: int | None) -> Callable[[], Toolkit]:
    """A function giving the calling thread its own :class:`Toolkit` (OpenCV's detector and
    extractor objects are not shared between threads), made on its first call there."""
    local = threading.local()

    def toolkit() -> Toolkit:
        if not hasattr(local, "kit"):
            local.kit = Toolkit(limit)
        kit: Toolkit = local.kit
        return kit

    return toolkit


def _image_tasks(scenes: list[SequenceLike]) -> list[tuple[SequenceLike, int]]:
    """Every (scene, image) in the order of the results: scene by scene, images 1..6."""
    return [(sequence, k) for sequence in scenes for k in IMAGES]


def _run_images(
    scenes: list[SequenceLike],
    describe: Callable[[tuple[SequenceLike, int]], T],
    progress: bool,
) -> list[T]:
    """``describe`` of every (scene, image) of :func:`_image_tasks`, in threads, with a
    progress bar."""
    tasks = _image_tasks(scenes)
    with progress_bar("features", total=len(tasks), enabled=progress) as advance:
        return run_parallel(describe, tasks, done=advance)


def _assemble(
    scenes: list[SequenceLike], names: Iterable[str], described: list[dict[str, Features]]
) -> FeatureSet:
    """Per-image results, in :func:`_image_tasks` order, as descriptor -> scene -> image."""
    result: FeatureSet = {name: {s.name: {} for s in scenes} for name in names}
    for (sequence, k), image in zip(_image_tasks(scenes), described, strict=True):
        for name, features in image.items():
            result[name][sequence.name][k] = features
    return result


def _unique_scenes(sequences: Iterable[SequenceLike]) -> list[SequenceLike]:
    scenes = list(sequences)
    seen: set[str] = set()
    for sequence in scenes:
        if not isinstance(sequence.name, str) or not sequence.name:
            raise InvalidInputError(f"sequence name {sequence.name!r}; expected a non-empty str")
        if sequence.name in seen:
            raise InvalidInputError(f"scene {sequence.name!r} appears twice in sequences")
        seen.add(sequence.name)
    return scenes


def _check_own(
    own: Mapping[str, Mapping[str, Mapping[int, Any]]],
    names: tuple[str, ...],
    scenes: list[SequenceLike],
) -> None:
    """Your own features: names that are not built-in methods, and every scene and image."""
    for name, per_scene in own.items():
        if name in names:
            raise InvalidInputError(
                f"your own descriptor {name!r} has the name of a built-in method in methods; "
                "give it another name"
            )
        for sequence in scenes:
            images = per_scene.get(sequence.name)
            if images is None:
                raise InvalidInputError(
                    f"your own descriptor {name!r} has no features for scene {sequence.name!r} "
                    f"(it has {len(per_scene)} scenes: {', '.join(sorted(per_scene)[:5])}"
                    f"{', ...' if len(per_scene) > 5 else ''})"
                )
            for k in IMAGES:
                if not isinstance(images.get(k), Features):
                    raise InvalidInputError(
                        f"your own descriptor {name!r}, scene {sequence.name!r}: image {k} is "
                        f"{type(images.get(k)).__name__}; expected Features"
                    )


@validate_params(detector=Choice(BUILTIN_METHODS), progress=Boolean(), **EXTRACTION_OPTIONS)
def detect_keypoints(
    sequences: Iterable[SequenceLike],
    detector: str = "sift",
    *,
    max_keypoints: int | None = MAX_KEYPOINTS,
    border: float = 40.0,
    progress: bool = False,
) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """The keypoints :func:`extract` keeps with ``locked=detector``, before any description.

    Steps 1-3 of :func:`extract` (detect, drop the border, keep the ``max_keypoints`` strongest,
    in their order) for every image. These are the keypoints your own descriptor describes to be
    evaluated next to the built-in methods on locked keypoints (``extract(..., own=...)``).

    Returns
    -------
    dict
        scene -> image (1..6) -> arrays ``keypoints`` (N x 2 float64, x y), ``size``, ``angle``,
        ``response`` (N float64, as OpenCV reports them; an angle of -1 means none) and
        ``image_size`` (height, width).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> import cv2
    >>> from skimage import data
    >>> gray = cv2.resize(data.camera(), (256, 256))   # the same image 1..6, as a stand-in
    >>> scene = SimpleNamespace(name="i_camera", gray=lambda k: gray, shape=lambda k: gray.shape)
    >>> kept = detect_keypoints([scene], "sift", max_keypoints=100)["i_camera"][1]
    >>> fs = extract([scene], "sift", locked="sift", max_keypoints=100)["sift"]["i_camera"]
    >>> bool((kept["keypoints"] == fs[1].keypoints).all()), kept["image_size"].tolist()
    (True, [256, 256])
    """
    _check_opencv([DETECTORS[detector]])
    limit, border = _as_options(max_keypoints, border)
    scenes = _unique_scenes(sequences)
    tools = Toolkit(limit)
    result: dict[str, dict[int, dict[str, np.ndarray]]] = {s.name: {} for s in scenes}
    with progress_bar("keypoints", total=len(scenes) * len(IMAGES), enabled=progress) as advance:
        for sequence in scenes:
            for k in IMAGES:
                gray = _check_gray(sequence, k, border)
                shape = (int(gray.shape[0]), int(gray.shape[1]))
                kept = select(tools.detect(DETECTORS[detector], gray), shape, border, limit)
                table = np.array(
                    [(*p.pt, p.size, p.angle, p.response) for p in kept], dtype=np.float64
                ).reshape(-1, 5)
                result[sequence.name][k] = {
                    "keypoints": np.ascontiguousarray(table[:, :2]),
                    "size": table[:, 2].copy(),
                    "angle": table[:, 3].copy(),
                    "response": table[:, 4].copy(),
                    "image_size": np.array(shape, dtype=np.int64),
                }
                advance()
    return result


@validate_params(**EXTRACTION_OPTIONS)
def extract_image(
    gray: np.ndarray,
    methods: Iterable[str] | str = DEFAULT_METHODS,
    *,
    locked: str | None = None,
    max_keypoints: int | None = MAX_KEYPOINTS,
    border: float = 40.0,
) -> dict[str, Features]:
    """Detect and describe one image with built-in methods, exactly as :func:`extract` does.

    The same steps and options as :func:`extract` for a single uint8 gray ``(H, W)`` image, so
    the work of a benchmark can be split per image (e.g. over a dask cluster) with identical
    results.

    Returns
    -------
    dict
        method -> :class:`Features`, in the order of ``methods``.

    Examples
    --------
    >>> import cv2
    >>> from skimage import data
    >>> gray = cv2.resize(data.camera(), (256, 256))
    >>> one = extract_image(gray, "sift", max_keypoints=50)["sift"]
    >>> len(one), one.descriptors.shape[1]
    (50, 128)
    """
    names = _check_methods(methods, locked)
    limit, border = _as_options(max_keypoints, border)
    image = np.asarray(gray)
    if image.ndim != 2 or image.dtype != np.uint8:
        raise InvalidInputError(
            f"extract_image: gray is a {image.dtype} array of shape {image.shape}; expected uint8 "
            "HxW"
        )
    _check_size(image.shape, border, "extract_image: gray")
    return describe_image(Toolkit(limit), np.ascontiguousarray(image), names, locked, border, limit)
