"""Argument types shared by the verbs of the ``metricalc`` command.

Light on purpose: building the parser imports this module, so it needs the standard library only
(the preset table, which parses YAML, is read by the verbs that take ``--preset`` when they run).
A type raises :class:`argparse.ArgumentTypeError`, which argparse turns into a usage error (exit 2,
no traceback).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metricalc.presets import Preset


class VerbParser(argparse.ArgumentParser):
    """The parser of a verb (and of its sub-verbs): an argument it does not know is its own
    usage error (``metricalc keypoints eval: error: unrecognized arguments: --varient`` after
    that verb's usage), not the top-level usage that argparse prints by default."""

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def add_preset_option(parser: argparse.ArgumentParser, verb: str, help: str) -> None:
    """``--preset NAME`` of ``verb``: its usage and help list the presets of that verb only
    (:func:`metricalc.presets.presets_of`); another name is refused when the verb runs, with
    the verb it applies to (:func:`metricalc.presets.preset_for`). The preset table is read
    only by the verbs that take one."""
    from metricalc.presets import presets_of

    own = presets_of(verb)
    listed = f"{{{','.join(own)}}}" if own else "NAME"
    parser.add_argument("--preset", metavar=listed, help=help if own else f"{help} (none here)")


def names(text: str) -> list[str]:
    """A comma-separated list of names, blanks dropped.

    Examples
    --------
    >>> names("sift, orb,,brief")
    ['sift', 'orb', 'brief']
    """
    return [part.strip() for part in text.split(",") if part.strip()]


def chosen_scenes(args: argparse.Namespace) -> list[str] | tuple[str, ...] | None:
    """The scenes a ``make-dataset`` verb writes: those of ``--scenes``, else the quick set
    (:data:`metricalc.datasets.sequences.QUICK_SCENES`) with ``--quick``, else ``None`` (all).

    Examples
    --------
    >>> chosen_scenes(argparse.Namespace(scenes="i_a, v_b", quick=True))
    ['i_a', 'v_b']
    >>> chosen_scenes(argparse.Namespace(scenes=None, quick=False)) is None
    True
    """
    if args.scenes:
        return names(args.scenes)
    if not args.quick:
        return None
    from metricalc.datasets.sequences import QUICK_SCENES

    return QUICK_SCENES


def passed(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The values of the options ``names``, to pass on as the library's keyword arguments of the
    same names (``f(**passed(args, "seed", "tag"))`` for ``f(seed=args.seed, tag=args.tag)``).

    Examples
    --------
    >>> passed(argparse.Namespace(seed=1, tag="a", out="x"), "seed", "tag")
    {'seed': 1, 'tag': 'a'}
    """
    return {name: getattr(args, name) for name in names}


def cutoffs(text: str) -> tuple[int, ...]:
    """``--k 1,5,10`` -> (1, 5, 10); anything else is a usage error.

    Examples
    --------
    >>> cutoffs("1,5,10")
    (1, 5, 10)
    >>> cutoffs("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected positive integers like 1,5,10; got '0'
    """
    try:
        values = tuple(int(part) for part in names(text))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,5,10; got {text!r}")
    return values


def thresholds(text: str) -> tuple[float, ...]:
    """``--iou 0.5,0.75`` -> (0.5, 0.75); anything else is a usage error.

    Examples
    --------
    >>> thresholds("0.5,0.75")
    (0.5, 0.75)
    >>> thresholds("1.5")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected IoU thresholds in [0, 1] like 0.5,0.75; got '1.5'
    """
    try:
        values = tuple(float(part) for part in names(text))
    except ValueError:
        values = ()
    if not values or any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected IoU thresholds in [0, 1] like 0.5,0.75; got {text!r}"
        )
    return values


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that shows every option's default: ``(default: X)`` is appended to the help of an
    option whose default is a value (not ``None``, ``False`` or suppressed) unless its help
    already names the default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.help is None or not has_default(action) or "default" in action.help:
            return action.help
        return f"{action.help} (default: %(default)s)".strip()


def has_default(action: argparse.Action) -> bool:
    """True for an option whose default is worth printing: not None, False or suppressed
    (``--help``, ``--version``), and not a positional argument."""
    default = action.default
    return bool(action.option_strings) and not (
        default is None or default is False or default == argparse.SUPPRESS
    )


def document_defaults(parser: argparse.ArgumentParser) -> None:
    """Set :class:`DefaultsHelpFormatter` on ``parser`` and its sub-command parsers, and give
    every option that has a default but no help text the help ``(default: X)``."""
    parser.formatter_class = DefaultsHelpFormatter
    for action in parser._actions:
        if action.help is None and has_default(action):
            action.help = "(default: %(default)s)"
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                document_defaults(sub)


def max_keypoints(text: str) -> int | None:
    """``--max-keypoints 2000`` -> 2000; ``0`` -> None (keep all); anything else a usage error.

    Examples
    --------
    >>> max_keypoints("2000"), max_keypoints("0")
    (2000, None)
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0 (0: all); got {text!r}")
    return value or None


def with_preset(
    args: argparse.Namespace, defaults: Mapping[str, Any], verb: str
) -> tuple[dict[str, Any], Preset | None]:
    """The protocol options of ``verb``: each as given on the command line, else the value of
    ``--preset`` (:data:`metricalc.presets.PRESETS`), else ``defaults``. The options are added
    with ``default=argparse.SUPPRESS``, so an option not given is absent from ``args``.

    Examples
    --------
    >>> args = argparse.Namespace(preset="hpatches-cvpr17", distance="l1")
    >>> with_preset(args, {"task": "all", "split": "a", "distance": "l2"},
    ...             "patches hpatches-eval")[0]
    {'task': 'all', 'split': 'full', 'distance': 'l1'}
    """
    from metricalc.presets import preset_for

    preset = preset_for(args.preset, verb) if getattr(args, "preset", None) else None
    values = preset.values() if preset is not None else {}
    unknown = sorted(set(values) - set(defaults))
    if unknown:  # the table and the verb disagree: a bug of metricalc, not of the input
        raise RuntimeError(f"preset {args.preset} sets {unknown}, which {verb} does not have")
    given = vars(args)
    options = {
        key: given[key] if key in given else values.get(key, default)
        for key, default in defaults.items()
    }
    return options, preset


def protocol_attrs(options: Mapping[str, Any], preset: Preset | None) -> dict[str, str]:
    """The attrs recording a verb's protocol: ``preset``, ``preset_source`` and
    ``protocol_options`` (the options as canonical JSON).

    Examples
    --------
    >>> protocol_attrs({"tau": 3.0, "split": None}, None)["protocol_options"]
    '{"split": null, "tau": 3.0}'
    """
    from metricalc.presets import preset_attrs

    return {**preset_attrs(preset), "protocol_options": json.dumps(dict(options), sort_keys=True)}
