"""Names a package offers but imports on first use (a module ``__getattr__``, PEP 562), and the
optional dependencies (extras) some of them need.

A package whose names load heavy libraries (OpenCV, matplotlib, dask, SQLite) lists them with the
module that defines each, and delegates its ``__getattr__`` here (``__getattr__ =
lazy_getattr(__name__, where)``), so that importing the package costs nothing until a name is
used.

``pip install metricalc`` installs the light core (the metrics, cubes, statistics, TREC
evaluation); OpenCV, dask, OmegaConf, matplotlib, ... come with the extras of :data:`EXTRAS`
(docs/installation.md). A name, or a command-line verb, whose module needs a library that is not
installed raises :class:`~metricalc.errors.MissingExtraError` naming the extra
(:func:`missing_extra`), not a bare ``ModuleNotFoundError``.

>>> import metricalc.datasets
>>> lazy_attribute("metricalc.datasets", {"example_cube": "metricalc.datasets.example"},
...                "example_cube").__name__
'example_cube'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.util import find_spec
from typing import Any

from metricalc.errors import MissingExtraError

EXTRAS: dict[str, tuple[str, str]] = {
    "cv2": ("vision", "OpenCV"),
    "skimage": ("vision", "scikit-image"),
    "dask": ("distributed", "dask"),
    "distributed": ("distributed", "dask.distributed"),
    "omegaconf": ("experiments", "OmegaConf"),
    "matplotlib": ("reports", "matplotlib"),
    "seaborn": ("reports", "seaborn"),
    "jinja2": ("reports", "Jinja2"),
}
"""Top-level module of an optional dependency -> (the extra of ``pyproject.toml`` that installs
it, the library's name)."""


def missing_extra(
    error: ImportError, what: str, extra: str | None = None
) -> MissingExtraError | None:
    """The one-line error to raise instead of ``error`` when ``error`` is an import of an
    optional dependency (a module of :data:`EXTRAS`) that is not installed, else None.

    Parameters
    ----------
    error : ImportError
        What an import raised.
    what : str
        What needed the module, the subject of the message (``"metricalc demo"``).
    extra : str, optional
        The extra to name (one that installs the module and the rest of what ``what`` needs);
        default the module's own extra of :data:`EXTRAS`.

    Examples
    --------
    >>> import sys
    >>> saved = sys.modules.get("cv2")
    >>> sys.modules["cv2"] = None  # as if OpenCV were not installed
    >>> try:
    ...     import cv2
    ... except ImportError as error:
    ...     print(missing_extra(error, "x"))
    ... finally:
    ...     del sys.modules["cv2"]
    ...     if saved is not None:
    ...         sys.modules["cv2"] = saved
    x needs OpenCV (module cv2), which is not installed: pip install "metricalc[vision]"
    >>> missing_extra(ModuleNotFoundError("No module named 'zzz'", name="zzz"), "x") is None
    True
    """
    top = (getattr(error, "name", None) or "").partition(".")[0]
    if not isinstance(error, ModuleNotFoundError) or top not in EXTRAS or find_spec(top):
        return None  # not an extra's module, or installed (a submodule missing: another problem)
    own, library = EXTRAS[top]
    extra = extra or own
    return MissingExtraError(
        f"{what} needs {library} (module {top}), which is not installed: "
        f'pip install "metricalc[{extra}]"'
    )


def import_or_explain(module: str, what: str) -> Any:
    """``import_module(module)``, raising :class:`~metricalc.errors.MissingExtraError` (one line
    naming the extra, :func:`missing_extra`) when an optional dependency it needs is not
    installed.

    Examples
    --------
    >>> import_or_explain("metricalc.errors", "a test").__name__
    'metricalc.errors'
    """
    try:
        return import_module(module)
    except ModuleNotFoundError as error:
        explained = missing_extra(error, what)
        if explained is None:
            raise
        raise explained from error


def lazy_attribute(package: str, where: Mapping[str, str], name: str) -> Any:
    """The attribute ``name`` of ``package``, imported from the module ``where[name]``.

    Parameters
    ----------
    package : str
        The package's name (its ``__name__``), for the error message.
    where : mapping of str to str
        Name -> absolute name of the module that defines it. A name that maps to
        ``f"{package}.{name}"`` is a subpackage or module of ``package``: the module itself.
    name : str
        The attribute asked for.

    Raises
    ------
    AttributeError
        ``name`` is not in ``where`` (as for any missing module attribute).
    MissingExtraError
        The module needs an optional dependency that is not installed (:func:`missing_extra`).
    """
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    imported = import_or_explain(module, f"{package}.{name}")
    return imported if module == f"{package}.{name}" else getattr(imported, name)


def lazy_getattr(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of ``package``: :func:`lazy_attribute` over ``where``.

    Examples
    --------
    >>> __getattr__ = lazy_getattr("metricalc.datasets",
    ...                            {"example_cube": "metricalc.datasets.example"})
    >>> __getattr__("example_cube").__name__
    'example_cube'
    """

    def attribute(name: str) -> Any:
        """Import the module that defines ``name`` on first use."""
        return lazy_attribute(package, where, name)

    return attribute
