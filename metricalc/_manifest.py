"""JSON side files of the generated datasets: manifests (what was generated, for caching)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metricalc.errors import InvalidInputError


def read_json(path: Path, what: str) -> Any:
    """The parsed JSON of ``path``; an unreadable or malformed file names ``what`` and ``path``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = (Path(tmp) / "a.json").write_text('{"a": 1}')
    ...     read_json(Path(tmp) / "a.json", "manifest")
    {'a': 1}
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidInputError(f"cannot read {what} {path}: {error}") from None


def read_manifest(
    root: Path, *, name: str, generator: str, keys: tuple[str, ...], what: str
) -> dict[str, Any] | None:
    """The manifest ``root/name`` of a generated dataset, or None for a new or empty ``root``.

    Parameters
    ----------
    root : Path
        The dataset folder.
    name : str
        The manifest's file name.
    generator : str
        The module that writes such datasets (the manifest's ``generator``).
    keys : tuple of str
        Keys the manifest must have besides ``generator`` and ``scenes`` (a dict).
    what : str
        What the dataset is, for the messages ("synthetic benchmark").

    Raises
    ------
    InvalidInputError
        ``root`` is not empty and has no manifest (someone else's folder), or the manifest is
        unreadable or not this generator's.
    """
    path = root / name
    if not path.exists():
        if root.exists() and any(root.iterdir()):
            raise InvalidInputError(
                f"refusing to write the {what} into {root}: the folder is not empty and has no "
                f"{name} (choose a new or empty folder)"
            )
        return None
    manifest = read_json(path, "manifest")
    if (
        not isinstance(manifest, dict)
        or manifest.get("generator") != generator
        or not isinstance(manifest.get("scenes"), dict)
        or not all(key in manifest for key in keys)
    ):
        raise InvalidInputError(
            f"{path} is not a metricalc {what} manifest (expected keys generator={generator!r}, "
            f"{', '.join(keys)}, scenes); delete the folder to regenerate it"
        )
    return manifest
