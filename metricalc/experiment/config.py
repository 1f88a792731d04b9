"""Experiment configurations: files, the merge order of Glue Factory, overrides, checks, diffs.

A configuration has three sections (``data``, ``model``, ``eval``). A custom config file has the
layout of Glue Factory (docs/experiments.md)::

    model: {...}                 # the model (predictions) for every benchmark
    benchmarks:
      <benchmark>:
        data: {...}              # how the benchmark's data are loaded ("export")
        model: {...}             # benchmark-specific model settings
        eval: {...}              # the evaluation ("evaluation")

and is merged with the benchmark's defaults with OmegaConf, later layers winning (a
``--preset``, :func:`preset_layer`, comes right after the defaults)::

    data:  defaults < benchmarks.<name>.data
    model: defaults < model < benchmarks.<name>.model
    eval:  defaults < benchmarks.<name>.eval

then command-line ``key=value`` overrides (``eval.ransac_th=[1,2,3]``, values parsed as YAML).
Every key must exist in the defaults (a typo is an error naming the file and the key); values
are checked by the benchmark. ``--conf`` takes a file path or the name of a config shipped in
``metricalc/experiment/configs/`` (:func:`list_configs`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from metricalc.errors import InvalidInputError
from metricalc.presets import Preset
from metricalc.store import codec

__all__ = [
    "CONFIG_DIR",
    "PRESET_LABEL",
    "SECTIONS",
    "Config",
    "check_tag",
    "config_diff",
    "config_hash",
    "find_config",
    "list_configs",
    "load_config",
    "preset_layer",
    "read_conf_file",
]

CONFIG_DIR = Path(__file__).parent / "configs"
"""The configs shipped with metricalc (``--conf <name>``)."""

SECTIONS = ("data", "model", "eval")
"""The sections of a merged configuration."""

_TOP_KEYS = ("model", "benchmarks")
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]*")


@dataclass(frozen=True)
class _Layer:
    label: str  # where the values come from, for messages
    values: DictConfig


@dataclass(frozen=True)
class Config:
    """A merged configuration and where each of its values came from.

    Attributes
    ----------
    values : dict
        ``{"data": {...}, "model": {...}, "eval": {...}}``, plain Python values.
    name : str or None
        The config name (file stem), the default tag.
    path : Path or None
        The config file, if any.
    """

    values: dict[str, Any]
    name: str | None = None
    path: Path | None = None
    layers: tuple[_Layer, ...] = field(default=(), repr=False, compare=False)

    def get(self, key: str) -> Any:
        """The value at a dotted key, e.g. ``conf.get("eval.ransac_th")``."""
        node: Any = self.values
        for part in key.split("."):
            node = node[part]
        return node

    def origin(self, key: str) -> str:
        """Which layer set ``key`` last: a file (and its section), an override, or the defaults."""
        for layer in reversed(self.layers):
            if OmegaConf.select(layer.values, key, default=_MISSING) is not _MISSING:
                return layer.label
        return "the defaults"

    def fail(self, key: str, expected: str) -> InvalidInputError:
        """The error for a bad value at ``key``, naming the key, the value and its origin."""
        try:
            value = self.get(key)
        except (KeyError, TypeError):
            value = None
        return InvalidInputError(
            f"config key {key} = {value!r} (set by {self.origin(key)}): expected {expected}"
        )


_MISSING = object()


def list_configs() -> list[str]:
    """Names of the configs shipped in :data:`CONFIG_DIR`.

    Examples
    --------
    >>> {"sift", "orb", "rootsift", "brief"} <= set(list_configs())
    True
    """
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def find_config(conf: str | os.PathLike[str]) -> Path:
    """The file of ``--conf``: an existing file, else a name in :data:`CONFIG_DIR` (a folder
    named like a shipped config does not hide it).

    Examples
    --------
    >>> find_config("sift").name
    'sift.yaml'
    """
    path = Path(conf)
    if path.is_file():
        return path
    text = str(conf)
    if os.sep not in text and "/" not in text:
        shipped = CONFIG_DIR / (text if text.endswith(".yaml") else f"{text}.yaml")
        if shipped.is_file():
            return shipped
    if path.exists():
        raise InvalidInputError(f"config {conf} is not a file")
    raise InvalidInputError(
        f"config {conf!r} is neither a file nor a shipped config; shipped configs: "
        f"{', '.join(list_configs())}"
    )


def read_conf_file(path: Path) -> dict[str, Any]:
    """A YAML mapping from ``path`` (empty file -> {}), with errors naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInputError(f"config file {path} cannot be read: {error}") from error
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InvalidInputError(f"config file {path} is not valid YAML: {error}") from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidInputError(
            f"config file {path} holds a {type(data).__name__}; expected a mapping with the keys "
            "'model' and 'benchmarks'"
        )
    return data


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"{where} is a {type(value).__name__}; expected a mapping")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise InvalidInputError(f"{where} has the non-string key {bad[0]!r}")
    return value


def _custom_layers(
    path: Path, benchmark: str, benchmarks: Sequence[str]
) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The layers a custom config file contributes to each section, checked for structure."""
    data = read_conf_file(path)
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise InvalidInputError(
            f"config file {path}: unknown top-level key {unknown[0]!r}; expected 'model' and "
            "'benchmarks' (benchmarks.<name>.data / .model / .eval)"
        )
    layers: dict[str, list[tuple[str, dict[str, Any]]]] = {section: [] for section in SECTIONS}
    model = _mapping(data.get("model"), f"config file {path}: key 'model'")
    if model:
        layers["model"].append((f"config file {path} (model)", {"model": model}))
    per_benchmark = _mapping(data.get("benchmarks"), f"config file {path}: key 'benchmarks'")
    for name, sections in per_benchmark.items():
        if name not in benchmarks:
            raise InvalidInputError(
                f"config file {path}: unknown benchmark 'benchmarks.{name}'; benchmarks: "
                f"{', '.join(benchmarks)}"
            )
        sections = _mapping(sections, f"config file {path}: key 'benchmarks.{name}'")
        unknown = [k for k in sections if k not in SECTIONS]
        if unknown:
            raise InvalidInputError(
                f"config file {path}: unknown key 'benchmarks.{name}.{unknown[0]}'; expected "
                "data, model and eval"
            )
        if name != benchmark:
            continue
        for section in SECTIONS:
            values = _mapping(
                sections.get(section), f"config file {path}: key 'benchmarks.{name}.{section}'"
            )
            if values:
                label = f"config file {path} (benchmarks.{name}.{section})"
                layers[section].append((label, {section: values}))
    return layers


def _override_layers(overrides: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    layers = []
    for text in overrides:
        key, sep, raw = str(text).partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidInputError(
                f"override {text!r} is not key=value (e.g. eval.ransac_th=2.0 or data.quick=true)"
            )
        section = key.split(".", 1)[0]
        if section not in SECTIONS or "." not in key or any(not p for p in key.split(".")):
            raise InvalidInputError(
                f"override {text!r}: the key must start with data., model. or eval. "
                "(e.g. model.max_keypoints=500)"
            )
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as error:
            raise InvalidInputError(
                f"override {text!r}: the value is not valid YAML: {error}"
            ) from None
        nested: Any = value
        for part in reversed(key.split(".")):
            nested = {part: nested}
        layers.append((f"command-line override {text!r}", nested))
    return layers


def _merge(base: DictConfig, label: str, values: dict[str, Any]) -> DictConfig:
    try:
        return OmegaConf.merge(base, values)  # type: ignore[return-value]
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or getattr(error, "key", None)
        if "not in struct" in str(error):
            raise InvalidInputError(
                f"{label}: unknown key {key!r}; the known keys are those of the benchmark's "
                "defaults (docs/experiments.md lists them)"
            ) from None
        message = str(error).splitlines()[0]
        raise InvalidInputError(f"{label}: key {key!r}: {message}") from None


PRESET_LABEL = "--preset"
"""How :meth:`Config.origin` names the preset layer: ``"--preset <name> (<source>)"``."""


def preset_layer(preset: Preset) -> tuple[str, dict[str, Any]]:
    """The config layer of a preset: its dotted settings nested, plus ``eval.preset``.

    Examples
    --------
    >>> from metricalc.presets import PRESETS
    >>> label, values = preset_layer(PRESETS["gluefactory"])
    >>> values["data"], values["eval"]["preset"], values["eval"]["ransac_th"]
    ({'border': 0.0}, 'gluefactory', -1)
    """
    nested: dict[str, Any] = {"eval": {"preset": preset.name}}
    for key, value in preset.values().items():
        *parents, last = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return f"{PRESET_LABEL} {preset.name} ({preset.source})", nested


def load_config(
    conf: str | os.PathLike[str] | None,
    *,
    benchmark: str,
    defaults: Mapping[str, Any],
    benchmarks: Sequence[str] = (),
    overrides: Sequence[str] = (),
    preset: Preset | None = None,
) -> Config:
    """Merge the defaults, a preset, a custom config and command-line overrides (module
    docstring).

    Parameters
    ----------
    conf : path, name or None
        The custom config (:func:`find_config`); None for the defaults alone.
    benchmark : str
        The benchmark whose section of the custom config applies.
    defaults : mapping
        ``{"data": ..., "model": ..., "eval": ...}`` of the benchmark; they fix the known keys.
    benchmarks : sequence of str
        Every benchmark name a config file may have a section for (default: ``benchmark``).
    overrides : sequence of str
        ``key=value`` strings, the value parsed as YAML.
    preset : Preset, optional
        A protocol preset (:data:`metricalc.presets.PRESETS`): its settings (dotted keys) and
        ``eval.preset`` (its name) as the layer right after the defaults, so the config file
        and the overrides still win.

    Returns
    -------
    Config
        Plain values, the config name and the layers (for :meth:`Config.origin`).

    Examples
    --------
    >>> defaults = {"data": {"quick": False}, "model": {"descriptor": "sift"},
    ...             "eval": {"estimator": "DLT", "ransac_th": 1.0}}
    >>> c = load_config("orb", benchmark="hpatches", defaults=defaults, benchmarks=["hpatches"],
    ...                 overrides=["eval.ransac_th=[1, 2]"])
    >>> c.name, c.values["model"]["descriptor"], c.values["eval"]
    ('orb', 'orb', {'estimator': 'RANSAC', 'ransac_th': [1, 2]})
    >>> c.origin("eval.ransac_th"), c.origin("data.quick")
    ("command-line override 'eval.ransac_th=[1, 2]'", 'the defaults')
    """
    base = OmegaConf.create({section: dict(defaults.get(section) or {}) for section in SECTIONS})
    OmegaConf.set_struct(base, True)
    path = find_config(conf) if conf is not None else None
    custom = (
        _custom_layers(path, benchmark, list(benchmarks) or [benchmark])
        if path
        else {s: [] for s in SECTIONS}
    )
    ordered = [] if preset is None else [preset_layer(preset)]
    ordered += [item for section in SECTIONS for item in custom[section]]
    ordered += _override_layers(overrides)
    merged = base
    layers = []
    for label, values in ordered:
        merged = _merge(merged, label, values)
        layers.append(_Layer(label, OmegaConf.create(values)))
    try:
        plain = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as error:
        where = f"config file {path}" if path else "the configuration"
        key = getattr(error, "full_key", "")
        raise InvalidInputError(
            f"{where}: key {key!r}: {str(error).splitlines()[0]}"
        ) from None
    name = path.stem if path is not None else None
    return Config(values=cast(dict[str, Any], plain), name=name, path=path, layers=tuple(layers))


def check_tag(tag: Any, what: str = "tag") -> str:
    """A tag usable as a folder name: letters, digits and ``. _ + = -``, not starting with ``.``
    (so never a path: no ``/``, no ``..``). ``what`` names the value in the message.

    Examples
    --------
    >>> check_tag("sift+magsac_th2")
    'sift+magsac_th2'
    >>> check_tag("../sift")
    Traceback (most recent call last):
    metricalc.errors.InvalidInputError: tag '../sift': expected letters, digits and . _ + = - (starting with a letter or digit)
    """  # noqa: E501
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise InvalidInputError(
            f"{what} {tag!r}: expected letters, digits and . _ + = - (starting with a letter or "
            "digit)"
        )
    return tag


def config_hash(values: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a configuration (sorted keys, no spaces).

    The canonical JSON is the results database's (:func:`metricalc.store.codec.dumps`), so the
    hash of a run and of its database record are one value computed one way.

    Examples
    --------
    >>> config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    True
    """
    return codec.sha256(codec.dumps(values, "config"))


def _flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(values, Mapping) and values:
        out: dict[str, Any] = {}
        for key, value in values.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: values}


def config_diff(
    old: Mapping[str, Any], new: Mapping[str, Any], sections: Sequence[str] = SECTIONS
) -> list[str]:
    """Lines ``key: old -> new`` for every dotted key of ``sections`` that differs.

    Examples
    --------
    >>> config_diff({"model": {"a": 1, "b": 2}}, {"model": {"a": 1, "b": 3, "c": 0}}, ["model"])
    ['model.b: 2 -> 3', 'model.c: <unset> -> 0']
    """
    lines = []
    for section in sections:
        a = _flatten(old.get(section) or {}, f"{section}.")
        b = _flatten(new.get(section) or {}, f"{section}.")
        for key in sorted(set(a) | set(b)):
            va, vb = a.get(key, _MISSING), b.get(key, _MISSING)
            if va != vb:
                show_a = "<unset>" if va is _MISSING else repr(va)
                show_b = "<unset>" if vb is _MISSING else repr(vb)
                lines.append(f"{key}: {show_a} -> {show_b}")
    return lines
