"""Writing files: JSON-safe values and atomic writes, shared by every module that writes.

- :func:`json_safe`: values as plain JSON types (NumPy scalars and arrays as Python numbers and
  lists, NaN and infinities as ``null``), through nested mappings and sequences;
- :func:`atomic_write`: text or bytes to a file through a temporary file and a rename;
- :func:`temporary_path`: a temporary file name to hand to a writer that wants a path (netCDF,
  HDF5, Parquet, a figure), renamed over the target when the block succeeds;
- :func:`hdf5_target`: where an HDF5 writer (h5py, netCDF-4) writes, so that a full disk is an
  ``OSError`` and not a crash inside the HDF5 library;
- :func:`staged_folder`: a folder of outputs (a report) written beside its target and swapped
  in whole, so that the target never mixes two runs' outputs (:func:`recover_folder` completes
  a swap a kill interrupted);
- :func:`csv_text`: a table as CSV text that a spreadsheet opens as data, never as formulas;
- :func:`path_inside`: a path a configuration file names for writing, kept inside the folder
  the configuration belongs to;
- :func:`current_umask`: the umask, which sets the mode of every file written here (0644 by
  default), as for any file a program creates;
- :func:`read_json`, :func:`read_manifest`: JSON side files and the manifests of the generated
  datasets (what was generated, for caching), read with an error naming the file.

Readers of a file written this way never see it half-written: an interrupted write leaves the
old file (or none) and no temporary file behind.

This module sits below every layer (like :mod:`metricalc.errors`): it imports the standard
library and NumPy only, so the core, the domain adapters and the layers on top all use it.
Callers that must differ keep a thin wrapper around it: ``metricalc inspect`` writes infinities
as ``"inf"`` / ``"-inf"`` strings for its script,
:func:`metricalc.benchmarks.hpatches_patches.files.write_atomic` turns
an ``OSError`` into an :class:`~metricalc.errors.InvalidInputError` naming the file, the database
codec (``metricalc.store.codec``) refuses values JSON cannot hold instead of passing them on.
"""

from __future__ import annotations

import ctypes
import errno
import io
import json
import math
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import format_bytes, memory_limit

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "atomic_write",
    "csv_text",
    "current_umask",
    "hdf5_target",
    "json_safe",
    "path_inside",
    "recover_folder",
    "staged_folder",
    "temporary_path",
]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection)."""


def json_safe(value: Any) -> Any:
    r"""``value`` with every number a JSON number: what :func:`json.dumps` writes as strict JSON.

    Mappings become dicts with ``str`` keys, lists, tuples and NumPy arrays become lists (nested
    arrays, nested lists), NumPy integers and Python integers ``int``, booleans ``bool``, finite
    floats ``float``; NaN and infinities, which JSON cannot hold, become ``None`` (``null``):

    .. math:: v \mapsto \begin{cases} v & v \text{ finite} \\
              \text{null} & v \in \{\text{NaN}, +\infty, -\infty\} \end{cases}

    Other scalars with an ``.item()`` (NumPy strings and dates, 0-d arrays) become their Python
    value; anything else (strings, None) is returned as it is. Two keys of one mapping that are
    equal as strings (``5`` and ``"5"``) raise :class:`~metricalc.errors.InvalidInputError`
    rather than one value silently replacing the other.

    Examples
    --------
    >>> import numpy as np
    >>> json_safe({"ap": np.float32(0.5), "n": np.int64(3), "bad": float("nan"), 1: (np.inf,)})
    {'ap': 0.5, 'n': 3, 'bad': None, '1': [None]}
    >>> json_safe(np.array([[1.0, np.nan], [np.inf, 2.0]]))
    [[1.0, None], [None, 2.0]]
    >>> json_safe([np.bool_(True), "sift", None])
    [True, 'sift', None]
    """
    if isinstance(value, Mapping):
        safe = {str(k): json_safe(v) for k, v in value.items()}
        if len(safe) < len(value):  # e.g. 5 and "5": one value would silently replace the other
            keys = [k for k in value if sum(str(j) == str(k) for j in value) > 1]
            raise InvalidInputError(
                f"keys {keys!r} become the same JSON key; expected keys distinct as strings"
            )
        return safe
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    return value.item() if hasattr(value, "item") else value


def current_umask() -> int:
    """The process's file mode creation mask (``umask``), read without changing it where the
    system tells it (Linux's ``/proc/self/status``), else set and restored at once.

    Files this package writes get mode ``0o666 & ~umask`` (0644 under the usual umask 022),
    like any file a program creates, so others can read what the user shares.

    Examples
    --------
    >>> old = os.umask(0o027)
    >>> oct(current_umask())
    '0o27'
    >>> _ = os.umask(old)
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def temporary_path(path: str | os.PathLike[str], *, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary file name next to ``path`` (same folder, so the rename is atomic), created
    empty; renamed over ``path`` when the block ends without an error, removed otherwise.

    Missing parent folders are created. ``suffix`` is the temporary name's ending, for writers
    that choose the format by it (matplotlib's ``savefig``). An ``OSError`` of the block that
    names no file (a write to a full disk) is raised again naming ``path``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     target = Path(tmp) / "out" / "a.txt"
    ...     with temporary_path(target) as part:
    ...         _ = part.write_text("done")
    ...         before = target.exists()
    ...     before, target.read_text(), sorted(p.name for p in target.parent.iterdir())
    (False, 'done', ['a.txt'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp creates the file 0600; the renamed file gets the mode any new file gets
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except OSError as error:
        if error.filename is None and error.errno is not None:  # a failed write names no file
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def hdf5_target(path: str | os.PathLike[str], *, estimate: int) -> Iterator[io.BytesIO | Path]:
    """Where to write an HDF5 file (h5py, or xarray's ``to_netcdf(engine="h5netcdf")``) that
    becomes ``path`` when the block succeeds, atomically.

    The HDF5 library does not survive a full disk: its failed writes end in a segmentation
    fault, not an error. So a file whose ``estimate`` (bytes, e.g. the ``nbytes`` of what is
    written: compression only makes it smaller) is at most an eighth of
    :func:`~metricalc.validation.memory_limit` is written into memory (a
    :class:`io.BytesIO`, which h5py and xarray accept) and then to disk by
    :func:`atomic_write`, where a full disk is an ``OSError`` that leaves the old file. A larger
    one is written to a temporary file next to ``path`` (:func:`temporary_path`) after a
    check that the disk has ``estimate`` bytes free (else ``OSError(ENOSPC)`` before writing).

    Examples
    --------
    >>> import tempfile, h5py
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with hdf5_target(Path(tmp) / "a.h5", estimate=80) as target:
    ...         with h5py.File(target, "w") as handle:
    ...             _ = handle.create_dataset("x", data=list(range(10)))
    ...     with h5py.File(Path(tmp) / "a.h5", "r") as handle:
    ...         type(target).__name__, handle["x"][-1].item()
    ('BytesIO', 9)
    """
    path = Path(path)
    if estimate <= memory_limit() // 8:
        buffer = io.BytesIO()
        yield buffer
        atomic_write(path, buffer.getbuffer())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path.parent).free
    if free < estimate:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device: writing it needs up to {format_bytes(estimate)}, "
            f"{format_bytes(free)} free",
            str(path),
        )
    with temporary_path(path) as tmp:
        yield tmp


def atomic_write(path: str | os.PathLike[str], data: str | bytes | memoryview) -> Path:
    r"""Write ``data`` (text as UTF-8, or bytes) to ``path`` through a temporary file next to it
    and a rename; returns ``path`` as a :class:`~pathlib.Path`.

    Missing parent folders are created; an ``OSError`` (a parent that is a file, no permission,
    a full disk) propagates, and leaves no temporary file.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     atomic_write(Path(tmp) / "a.json", '{"ap": null}\n').read_text()
    '{"ap": null}\n'
    """
    with temporary_path(path) as tmp:
        if isinstance(data, bytes | memoryview):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(path)


def _inert(value: Any) -> Any:
    """``value``, or ``"'" + value`` for text a spreadsheet would run as a formula."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)  # "-0.5" and "+inf" are numbers, not formulas
    except ValueError:
        return "'" + value
    return value


def csv_text(frame: pd.DataFrame, *, index: bool = False) -> str:
    r"""``frame`` as CSV text (``frame.to_csv``) in which no text cell is a formula.

    A text cell, column name or index label that starts with ``=``, ``+``, ``-``, ``@``, a tab
    or a carriage return and is not a number is written with a leading ``'`` (the OWASP advice
    against CSV injection): a spreadsheet shows it as text instead of running it. Numbers,
    including negative ones, are written as they are. Lines end in ``\n``, or in ``\r\n`` when
    a cell holds a carriage return (so that the cell is quoted and reads back whole).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"descriptor": ["=1+2", "sift", "-x"], "ap": [0.5, -0.25, 1.0]})
    >>> print(csv_text(frame), end="")
    descriptor,ap
    '=1+2,0.5
    sift,-0.25
    '-x,1.0
    """
    from pandas.api.types import is_object_dtype, is_string_dtype

    if index:  # the index as leading columns, headed by its names ("" where unnamed)
        names = ["" if n is None else n for n in frame.index.names]
        frame = frame.reset_index(names=names)
    frame = frame.rename(columns=_inert)
    text_columns = [
        c for c in frame.columns if is_object_dtype(frame[c]) or is_string_dtype(frame[c])
    ]
    for column in text_columns:
        frame[column] = frame[column].map(_inert)
    # Python 3.11's csv writer quotes a field with a line break only if the break is in the
    # line terminator: a table holding a carriage return is written with CRLF line ends, so
    # that every field with "\r" or "\n" is quoted and reads back whole.
    bare_return = any("\r" in str(c) for c in frame.columns) or any(
        frame[c].map(lambda v: isinstance(v, str) and "\r" in v).any() for c in text_columns
    )
    text: str = frame.to_csv(index=False, lineterminator="\r\n" if bare_return else "\n")
    return text


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(first: Path, second: Path) -> bool:
    """Swap two folders in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where
    the kernel, the C library or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # pragma: no cover - not glibc >= 2.28
        return False
    at_cwd = -100
    done = renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # pragma: no cover - old kernel / fs
        return False
    raise OSError(code, os.strerror(code), str(second))  # pragma: no cover


def _leftovers(target: Path) -> list[Path]:
    if not target.parent.is_dir():
        return []
    prefix = f".{target.name}.staged-"
    return sorted(p for p in target.parent.iterdir() if p.name.startswith(prefix) and p.is_dir())


Outputs = Collection[str] | Callable[[Path], Collection[str]]
"""The outputs of a folder of :func:`staged_folder`: paths relative to the folder (``/``
between parts; a folder's path covers everything below it), or a function of the folder that
returns them (e.g. read from the manifest the previous run wrote there)."""


def _carry_over(source: Path, target: Path, replaced: Outputs) -> None:
    """Move everything below ``source`` that is not one of its outputs (``replaced``) and that
    ``target`` lacks to the same place below ``target`` (caches, other jobs' and the user's
    files, also inside a folder both hold), then delete ``source``."""
    outputs = set(replaced(source) if callable(replaced) else replaced)
    _move_kept(source, target, outputs, "")
    shutil.rmtree(source)


def _move_kept(source: Path, target: Path, outputs: set[str], prefix: str) -> None:
    """The work of :func:`_carry_over` in one folder (``prefix``: its path, ``""`` at the top)."""
    for entry in sorted(source.iterdir()):
        name = prefix + entry.name
        if name in outputs:
            continue
        there = target / entry.name
        folder = entry.is_dir() and not entry.is_symlink()
        holds_outputs = folder and any(o.startswith(name + "/") for o in outputs)
        created = not os.path.lexists(there)
        if created and not holds_outputs:
            os.rename(entry, there)
            continue
        if created:
            there.mkdir()
        if folder and there.is_dir() and not there.is_symlink():
            _move_kept(entry, there, outputs, name + "/")
        if created and not any(there.iterdir()):  # it held nothing but outputs
            there.rmdir()


def recover_folder(target: str | os.PathLike[str], replaced: Outputs) -> None:
    """Complete the swap of a :func:`staged_folder` that a kill interrupted.

    A staged folder left beside ``target`` (``.<name>.staged-*``) holds either the outputs of a
    run that did not finish (marked as such: deleted) or the previous folder (put back where
    ``target`` is missing; else everything that is not one of its outputs, ``replaced`` as in
    :func:`staged_folder`, and that ``target`` lacks is moved into ``target``, and the rest
    deleted). Nothing but outputs is removed.
    """
    target = Path(target)
    for leftover in _leftovers(target):
        if (leftover / _STAGING_MARK).exists():  # the outputs of a run that did not finish
            shutil.rmtree(leftover)
        elif not os.path.lexists(target):  # the previous folder, moved aside: put it back
            os.rename(leftover, target)
        else:  # the previous folder after the swap: keep what is not an output
            _carry_over(leftover, target, replaced)


_STAGING_MARK = ".metricalc-staging"


@contextmanager
def staged_folder(target: str | os.PathLike[str], replaced: Outputs) -> Iterator[Path]:
    """A new folder beside ``target`` to write outputs into, swapped in for ``target`` whole.

    When the block succeeds, the staged folder and ``target`` are exchanged in one atomic step
    (Linux ``renameat2``; elsewhere two renames), then everything in the previous ``target``
    that is not one of its outputs (``replaced``: :data:`Outputs`, the paths the previous run
    wrote, or a function reading them from the previous folder) and that the new one lacks is
    moved into the new one, inside subfolders too (a cache, another job's figures, the user's
    own files), and the previous folder is deleted. So ``target`` holds either all the previous
    outputs or all the new ones, never a mix, a stale output the new run does not produce
    disappears with the previous folder, and nothing else is deleted (a file the new run writes
    under the same path replaces it). When the block fails,
    the staged folder is deleted and ``target`` is untouched. A run killed half-way leaves a
    hidden ``.<name>.staged-*`` folder that :func:`recover_folder` (called first here) settles.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = Path(tmp) / "report"
    ...     for name in ("old.html", "cache.nc"):
    ...         _ = atomic_write(out / name, "before")
    ...     with staged_folder(out, {"old.html", "new.html"}) as stage:
    ...         _ = atomic_write(stage / "new.html", "after")
    ...     sorted(p.name for p in out.iterdir()), sorted(p.name for p in Path(tmp).iterdir())
    (['cache.nc', 'new.html'], ['report'])
    """
    target = Path(target)
    recover_folder(target, replaced)
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = target.parent / f".{target.name}.staged-{secrets.token_hex(4)}"
    stage.mkdir()
    (stage / _STAGING_MARK).touch()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    (stage / _STAGING_MARK).unlink()
    if not os.path.lexists(target):
        os.rename(stage, target)
        return
    if not _exchange(stage, target):  # pragma: no cover - no renameat2 here
        aside = stage.with_name(stage.name + "-previous")
        os.rename(target, aside)
        os.rename(stage, target)
        stage = aside
    _carry_over(stage, target, replaced)  # stage now holds the previous folder


def path_inside(base: str | os.PathLike[str], value: str, what: str) -> Path:
    """``base / value`` for a path a configuration names for writing, refused unless it stays
    inside ``base`` (the configuration's folder): an absolute path, ``..`` out of ``base`` or a
    symbolic link that leads out raise :class:`~metricalc.errors.InvalidInputError` naming
    ``what`` (e.g. ``"reports/x.yaml: data.root"``). A folder outside is for the command line
    to name, not a file that may come from someone else.

    Examples
    --------
    >>> path_inside("reports", "bench/synthetic", "x.yaml: data.root").as_posix()
    'reports/bench/synthetic'
    >>> path_inside("reports", "../../etc", "x.yaml: data.root")
    Traceback (most recent call last):
    ...
    metricalc.errors.InvalidInputError: x.yaml: data.root: '../../etc' leads outside reports; ...
    """
    base = Path(base)
    if Path(value).is_absolute():
        raise InvalidInputError(
            f"{what}: {value!r} is an absolute path; a configuration writes only below its own "
            f"folder ({base}): give a relative path, or name the folder on the command line"
        )
    target = base / value
    if not target.resolve().is_relative_to(base.resolve()):
        raise InvalidInputError(
            f"{what}: {value!r} leads outside {base}; a configuration writes only below its own "
            "folder: give a path inside it, or name the folder on the command line"
        )
    return target


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
