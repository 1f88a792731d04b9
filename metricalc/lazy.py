"""Names a package offers but imports on first use (a module ``__getattr__``, PEP 562).

A package whose names load heavy libraries (OpenCV, matplotlib, dask, SQLite) lists them with the
module that defines each, and delegates its ``__getattr__`` here (``__getattr__ =
lazy_getattr(__name__, where)``), so that importing the package costs nothing until a name is
used.

>>> import metricalc.datasets
>>> lazy_attribute("metricalc.datasets", {"example_cube": "metricalc.datasets.example"},
...                "example_cube").__name__
'example_cube'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


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
    """
    module = where.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    if module == f"{package}.{name}":
        return import_module(module)
    return getattr(import_module(module), name)


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
