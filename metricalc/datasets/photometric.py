r"""The photometric changes of the illumination scenes ``i_<name>`` of the built-in benchmark.

Images 2..6 of an illumination scene are image 1 photographed again under other light, with
identity homographies. Image :math:`k` applies every step below with strength
:math:`t = (k - 1) / 5` (image 2 mild, image 6 hard), to intensities :math:`x \in [0, 1]`
(per channel for RGB), in the order light -> optics -> sensor -> tone -> file:

1. **Relighting of a relief.** The luminance :math:`Y` smoothed by :math:`G_{\sigma_h}` is read
   as a height map :math:`h = \rho \, G_{\sigma_h} * Y` (:math:`\rho` in pixels per unit
   intensity), with normals :math:`n \propto (-\partial_x h, -\partial_y h, 1)`. Image 1 is lit
   from straight above, :math:`l_0 = (0, 0, 1)`; image k from :math:`l(t)`, tilted by
   :math:`\phi t` towards azimuth :math:`\psi`, and

   .. math::

       x \leftarrow x \, \frac{a + (1 - a) \max(n \cdot l(t), 0)}{a + (1 - a)\, n \cdot l_0}.

2. **Cast shadows** with soft edges: one to three ellipses :math:`E_j` whose centres drift with
   the light (:math:`c_j + t\,v_j`), :math:`x \leftarrow x \prod_j (1 - \delta_j t\, M_j)`, with
   the soft mask :math:`M_j = 1 / (1 + e^{-(1 - r_j)\, s_j / w_j})` (:math:`r_j` the elliptic
   radius, :math:`s_j` the shorter semi-axis, :math:`w_j` the edge width in pixels).
3. **Smooth gain and offset fields**: :math:`x \leftarrow x\, e^{\gamma_g t F_1} + \beta t F_2`,
   with :math:`F_1, F_2` random fields in :math:`[-1, 1]` (a coarse grid of normal values
   upsampled bicubically).
4. **Blur** (optics): :math:`x \leftarrow G_{\sigma_b t} * x`.
5. **Sensor noise**, signal-dependent (shot and read noise):
   :math:`x \leftarrow x + t \sqrt{q \max(x, 0) + r^2}\; \varepsilon`,
   :math:`\varepsilon \sim N(0, 1)`.
6. **Tone**: an exposure and gamma change of direction :math:`d = \pm 1` and a non-monotone
   curve,

   .. math::

       x \leftarrow \operatorname{clip}\big(x (1 + d\,e\,t)\big)^{2^{-d g t}}, \qquad
       x \leftarrow x + \frac{A t}{2 \pi \omega} \sin(2 \pi \omega x + \varphi),

   whose slope :math:`1 + A t \cos(\cdot)` turns negative for :math:`A t > 1` (gradients
   reverse in some intensity bands in the last images).
7. **Colour shift** (RGB): :math:`x_c \leftarrow x_c (1 + c_c t)`.
8. **File**: :math:`\operatorname{round}(255 \operatorname{clip}(x))`, then JPEG (OpenCV,
   quality :math:`\operatorname{round}(95 - (95 - Q) t)`) and decoding.

The per-scene constants and their ranges are in :data:`RANGES`; every draw comes from the
scene's generator, so the images are deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from metricalc.errors import InvalidInputError

__all__ = ["RANGES", "jpeg", "photometric_change", "smooth_field"]

RANGES: dict[str, tuple[float, float]] = {
    "relief_sigma": (1.5, 3.0),  # sigma_h, px
    "relief": (15.0, 30.0),  # rho, px per unit intensity
    "light_tilt": (25.0, 45.0),  # phi, degrees at t = 1
    "ambient": (0.25, 0.4),  # a
    "shadows": (1, 3),  # number of ellipses
    "shadow_axis": (0.12, 0.35),  # semi-axes, share of the longer side
    "shadow_depth": (0.35, 0.65),  # delta
    "shadow_edge": (3.0, 12.0),  # w, px
    "shadow_drift": (0.0, 0.1),  # |v|, share of the longer side at t = 1
    "field_gain": (0.3, 0.6),  # gamma_g (log gain)
    "field_offset": (0.04, 0.1),  # beta
    "field_cells": (2, 4),  # grid cells across the longer side
    "blur": (0.6, 1.4),  # sigma_b, px at t = 1
    "shot_noise": (0.5e-3, 1.5e-3),  # q
    "read_noise": (1.0 / 255, 3.0 / 255),  # r
    "exposure": (0.15, 0.3),  # e
    "gamma": (0.2, 0.4),  # g
    "tone": (1.1, 1.5),  # A
    "tone_frequency": (1.5, 3.0),  # omega, cycles over [0, 1]
    "colour": (0.1, 0.25),  # max_c |c_c|
    "jpeg": (35.0, 55.0),  # Q, JPEG quality at t = 1
}
"""Range of each per-scene constant (uniform draws; counts are integers, both ends included)."""

_JPEG_BEST = 95
_CONSTANTS: tuple[str, ...] = ("field_gain", "field_offset", "blur", "shot_noise", "read_noise")
_CONSTANTS += ("exposure", "gamma", "tone", "tone_frequency", "jpeg")
_REFLECT = cv2.BORDER_REFLECT_101
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # OpenCV's RGB -> gray weights


@dataclass(frozen=True)
class _Shadow:
    centre: np.ndarray  # x, y in px
    axes: np.ndarray  # semi-axes in px
    angle: float  # radians
    drift: np.ndarray  # px at t = 1
    depth: float
    edge: float  # px


def _uniform(rng: np.random.Generator, name: str) -> float:
    low, high = RANGES[name]
    return float(rng.uniform(low, high))


def _count(rng: np.random.Generator, name: str) -> int:
    low, high = RANGES[name]
    return int(rng.integers(int(low), int(high) + 1))


def smooth_field(rng: np.random.Generator, shape: tuple[int, int], cells: int) -> np.ndarray:
    """A smooth random field in [-1, 1]: a grid of normal values upsampled bicubically.

    The grid has ``cells + 1`` nodes across the longer side (and proportionally many across the
    other, at least 2); the field is scaled so its largest magnitude is 1.

    Examples
    --------
    >>> field = smooth_field(np.random.default_rng(0), (40, 60), 3)
    >>> field.shape, float(np.abs(field).max())
    ((40, 60), 1.0)
    """
    height, width = shape
    longer = max(height, width)
    nodes = (max(2, round(cells * height / longer) + 1), max(2, round(cells * width / longer) + 1))
    grid = rng.standard_normal(nodes).astype(np.float32)
    field = cv2.resize(grid, (width, height), interpolation=cv2.INTER_CUBIC)
    peak = float(np.abs(field).max())
    scaled: np.ndarray = field / np.float32(max(peak, 1e-6))
    return scaled


def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    """``image`` (uint8, gray or RGB) encoded as JPEG by OpenCV at ``quality`` and decoded.

    Examples
    --------
    >>> image = np.tile(np.arange(0, 256, 4, dtype=np.uint8), (64, 1))
    >>> out = jpeg(image, 50)
    >>> out.shape, out.dtype, bool(np.abs(out.astype(int) - image).max() < 20)
    ((64, 64), dtype('uint8'), True)
    """
    if not 0 <= quality <= 100:
        raise InvalidInputError(f"JPEG quality must be in [0, 100]; got {quality!r}")
    colour = image.ndim == 3
    bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR) if colour else image
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality), cv2.IMWRITE_JPEG_OPTIMIZE, 0]
    ok, buffer = cv2.imencode(".jpg", bgr, params)
    if not ok:  # pragma: no cover - OpenCV always encodes uint8 images
        raise InvalidInputError(f"OpenCV could not encode an image of shape {image.shape}")
    flag = cv2.IMREAD_COLOR if colour else cv2.IMREAD_GRAYSCALE
    decoded = np.asarray(cv2.imdecode(buffer, flag))
    out: np.ndarray = cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB) if colour else decoded
    return out


def _normals(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit normals (H, W, 3) of the relief ``rho G * Y`` of the image ``x`` (floats in [0, 1])."""
    luminance = x @ _LUMA if x.ndim == 3 else x
    sigma, relief = _uniform(rng, "relief_sigma"), _uniform(rng, "relief")
    height = cv2.GaussianBlur(luminance, (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REFLECT_101)
    gy, gx = np.gradient(height * np.float32(relief))
    normals = np.stack([-gx, -gy, np.ones_like(gx)], axis=-1)
    unit: np.ndarray = normals / np.linalg.norm(normals, axis=-1, keepdims=True)
    return unit


def _shadows(rng: np.random.Generator, shape: tuple[int, int]) -> list[_Shadow]:
    height, width = shape
    longer = max(height, width)
    shadows = []
    for _ in range(_count(rng, "shadows")):
        direction = rng.uniform(0.0, 2 * math.pi)
        shadows.append(
            _Shadow(
                centre=rng.uniform([0.0, 0.0], [width - 1.0, height - 1.0]),
                axes=rng.uniform(*RANGES["shadow_axis"], size=2) * longer,
                angle=float(rng.uniform(0.0, math.pi)),
                drift=_uniform(rng, "shadow_drift")
                * longer
                * np.array([math.cos(direction), math.sin(direction)]),
                depth=_uniform(rng, "shadow_depth"),
                edge=_uniform(rng, "shadow_edge"),
            )
        )
    return shadows


def _shadow_factor(shadows: list[_Shadow], t: float, shape: tuple[int, int]) -> np.ndarray:
    """The product of ``1 - depth t M`` over the soft elliptic shadows at strength ``t``."""
    ys, xs = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float32)
    factor = np.ones(shape, np.float32)
    for s in shadows:
        cx, cy = s.centre + t * s.drift
        c, n = math.cos(s.angle), math.sin(s.angle)
        u = ((xs - cx) * c + (ys - cy) * n) / s.axes[0]
        v = (-(xs - cx) * n + (ys - cy) * c) / s.axes[1]
        radius = np.sqrt(u * u + v * v)
        steepness = float(min(s.axes)) / s.edge
        mask = 1 / (1 + np.exp(np.clip(-(1 - radius) * steepness, -60, 60)))
        factor *= 1 - np.float32(s.depth * t) * mask
    return factor


def _tone(x: np.ndarray, t: float, direction: float, values: dict[str, float]) -> np.ndarray:
    """Exposure and gamma of ``direction``, then the non-monotone curve (module docstring)."""
    y = np.clip(x * np.float32(1 + direction * values["exposure"] * t), 0, 1)
    y = y ** np.float32(2.0 ** (-direction * values["gamma"] * t))
    omega = np.float32(2 * math.pi * values["tone_frequency"])
    amplitude = np.float32(values["tone"] * t) / omega
    out: np.ndarray = y + amplitude * np.sin(omega * y + np.float32(values["tone_phase"]))
    return out


def _noise_spread(y: np.ndarray, values: dict[str, float]) -> np.ndarray:
    """Standard deviation of the sensor noise: sqrt(q max(y, 0) + r^2)."""
    variance = np.float32(values["shot_noise"]) * np.maximum(y, 0)
    spread: np.ndarray = np.sqrt(variance + np.float32(values["read_noise"] ** 2))
    return spread


def photometric_change(image: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Images 2..6 of an illumination scene: growing photometric changes of ``image``.

    Draws the scene's constants from ``rng`` (:data:`RANGES`; module docstring for the steps and
    formulas) and applies them with strength :math:`t = (k - 1) / 5` for k = 2..6. The sensor
    noise is drawn from ``rng`` too.

    Examples
    --------
    >>> from metricalc.datasets.scenes import load_photograph
    >>> image = load_photograph("coffee", size=64)
    >>> changed = photometric_change(image, np.random.default_rng(0))
    >>> len(changed), changed[0].shape == image.shape, changed[0].dtype
    (5, True, dtype('uint8'))
    """
    shape = (int(image.shape[0]), int(image.shape[1]))
    x = image.astype(np.float32) / np.float32(255.0)
    normals = _normals(x, rng)
    tilt, azimuth = math.radians(_uniform(rng, "light_tilt")), rng.uniform(0.0, 2 * math.pi)
    ambient = np.float32(_uniform(rng, "ambient"))
    shadows = _shadows(rng, shape)
    gain_field = smooth_field(rng, shape, _count(rng, "field_cells"))
    offset_field = smooth_field(rng, shape, _count(rng, "field_cells"))
    values = {name: _uniform(rng, name) for name in _CONSTANTS}
    values["tone_phase"] = float(rng.uniform(0.0, 2 * math.pi))
    direction = float(rng.choice([-1.0, 1.0]))
    colour = rng.normal(size=3)
    colour -= colour.mean()
    colour *= _uniform(rng, "colour") / max(float(np.abs(colour).max()), 1e-12)

    lit_before = ambient + (1 - ambient) * normals[..., 2]
    out = []
    for k in range(2, 7):
        t = (k - 1) / 5
        phi = tilt * t
        light = np.array(
            [math.sin(phi) * math.cos(azimuth), math.sin(phi) * math.sin(azimuth), math.cos(phi)],
            np.float32,
        )
        lit = ambient + (1 - ambient) * np.maximum(normals @ light, 0)
        gain = (lit / lit_before) * _shadow_factor(shadows, t, shape)
        gain *= np.exp(np.float32(values["field_gain"] * t) * gain_field)
        offset = np.float32(values["field_offset"] * t) * offset_field
        if x.ndim == 3:
            gain, offset = gain[..., None], offset[..., None]
        y = x * gain + offset
        y = cv2.GaussianBlur(y, (0, 0), sigmaX=values["blur"] * t, borderType=_REFLECT)
        y = y + np.float32(t) * _noise_spread(y, values) * rng.standard_normal(y.shape, np.float32)
        y = _tone(y, t, direction, values)
        if x.ndim == 3:
            y = y * (1 + colour * t).astype(np.float32)
        quantised = np.rint(np.clip(y, 0, 1) * 255).astype(np.uint8)
        out.append(jpeg(quantised, round(_JPEG_BEST - (_JPEG_BEST - values["jpeg"]) * t)))
    return out
