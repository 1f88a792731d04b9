"""Protocol presets: the settings a paper's or a tool's evaluation fixed, in one table.

``--preset NAME`` on the verb a protocol belongs to sets every option of :data:`PRESETS`
``[NAME].settings`` as a default; an option given on the command line (or, for ``metricalc run``,
in ``--conf`` or a ``key=value`` override) still wins. The preset's name and source are recorded
in what the verb writes (the cube attrs ``preset`` and ``preset_source``; the run config key
``eval.preset``), so a report shows which protocol produced a number. ``docs/presets.md`` gives
every setting with the file, function or notebook cell it was read from, and what metricalc
cannot reproduce.

The table itself is data, ``metricalc/presets.yaml`` (package data), read once at import; no
NumPy, no domain imports: the command-line parser reads it.

Settings are keyed by what the verb calls them: the option names (argparse ``dest``) of
``keypoints eval`` and ``patches hpatches-eval``, the dotted config keys of ``run hpatches``.

Examples
--------
>>> from metricalc.presets import PRESETS, preset_for
>>> sorted(PRESETS)
['d2net', 'gluefactory', 'hpatches-cvpr17', 'superpoint', 'workbench']
>>> PRESETS["d2net"].verb, PRESETS["d2net"].values()["split"]
('keypoints eval', 'd2net')
>>> preset_for("d2net", "run hpatches")
Traceback (most recent call last):
...
metricalc.errors.InvalidInputError: --preset d2net applies to metricalc keypoints eval, not to metricalc run hpatches; the presets of run hpatches: gluefactory
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from metricalc.errors import InvalidInputError

__all__ = ["PRESETS", "PRESET_VERBS", "Preset", "Setting", "preset_attrs", "preset_for"]


@dataclass(frozen=True)
class Setting:
    """One setting of a preset: its value and where in the source it was read."""

    value: Any
    source: str


@dataclass(frozen=True)
class Preset:
    """A protocol preset (an entry of ``presets.yaml``; ``name`` is its ``--preset`` name)."""

    name: str
    source: str
    """``"repo/file@what"``: the code the protocol was read from."""
    verb: str
    """The verb the protocol belongs to (one of :data:`PRESET_VERBS`)."""
    settings: Mapping[str, Setting]
    """Option (or config key) -> :class:`Setting`: what the preset sets."""
    fixed: tuple[str, ...] = ()
    """Choices of the source that metricalc's verb makes anyway (no option to set)."""
    not_reproduced: tuple[str, ...] = ()
    """Choices of the source that metricalc's verb cannot express."""

    def values(self) -> dict[str, Any]:
        """The settings' values: option -> value."""
        return {key: setting.value for key, setting in self.settings.items()}


PRESET_VERBS = ("keypoints eval", "run hpatches", "patches hpatches-eval")
"""The verbs that take ``--preset``."""


def _load_presets() -> Mapping[str, Preset]:
    """The table of ``presets.yaml`` (package data), checked: every preset names a source and
    one of :data:`PRESET_VERBS`, every setting a value's source."""
    import yaml

    text = resources.files("metricalc").joinpath("presets.yaml").read_text("utf-8")
    table = yaml.safe_load(text)
    presets = {}
    for name, entry in table.items():
        if entry["verb"] not in PRESET_VERBS or not entry["source"]:
            raise InvalidInputError(f"presets.yaml: preset {name!r} lacks a source or a known verb")
        settings = {
            key: Setting(item["value"], item["source"]) for key, item in entry["settings"].items()
        }
        presets[name] = Preset(
            name=name,
            source=entry["source"],
            verb=entry["verb"],
            settings=MappingProxyType(settings),
            fixed=tuple(entry.get("fixed", ())),
            not_reproduced=tuple(entry.get("not_reproduced", ())),
        )
    return MappingProxyType(presets)


PRESETS: Mapping[str, Preset] = _load_presets()
"""Every preset by name (the table ``metricalc/presets.yaml``)."""


def presets_of(verb: str) -> tuple[str, ...]:
    """The names of the presets of ``verb`` (sorted): the choices of its ``--preset``.

    Examples
    --------
    >>> presets_of("keypoints eval")
    ('d2net', 'superpoint', 'workbench')
    """
    return tuple(sorted(p.name for p in PRESETS.values() if p.verb == verb))


def preset_for(name: str, verb: str) -> Preset:
    """The preset ``name`` of ``verb``; a one-line error if it is unknown or belongs to another
    verb (the message says which verbs take it)."""
    own = ", ".join(presets_of(verb)) or "none"
    if name not in PRESETS:
        raise InvalidInputError(
            f"--preset {name!r} is unknown; the presets of metricalc {verb}: {own}"
        )
    preset = PRESETS[name]
    if preset.verb != verb:
        raise InvalidInputError(
            f"--preset {name} applies to metricalc {preset.verb}, not to metricalc {verb}; "
            f"the presets of {verb}: {own}"
        )
    return preset


def preset_attrs(preset: Preset | None) -> dict[str, str]:
    """The attrs that record a preset: ``preset`` and ``preset_source`` ("" without one).

    Examples
    --------
    >>> preset_attrs(PRESETS["hpatches-cvpr17"])["preset_source"]
    'hpatches/hpatches-benchmark python/hpatches_eval.py@docopt'
    >>> preset_attrs(None)
    {'preset': '', 'preset_source': ''}
    """
    if preset is None:
        return {"preset": "", "preset_source": ""}
    return {"preset": preset.name, "preset_source": preset.source}
