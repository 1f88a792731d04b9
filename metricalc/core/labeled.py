"""The labeled layer: run an unlabeled kernel on NumPy arrays or xarray DataArrays alike.

NumPy inputs carry their samples on the last axis and get NumPy results. DataArray inputs name
their sample dimension with ``dim=``; every other dimension is kept, the kernel runs through
:func:`xarray.apply_ufunc`, and dask-backed inputs stay lazy (``dask="parallelized"``).

xarray is imported by the labeled path only: a DataArray argument means xarray is loaded, so a
call on NumPy arrays (``average_precision(y_true, y_score)``) never pays for importing it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import ZeroDivision, fill_value, warn_undefined

if TYPE_CHECKING:
    import xarray as xr


def is_labeled(*values: object) -> bool:
    """True if any value is an :class:`xarray.DataArray` (never while xarray is not imported:
    no value can be one then)."""
    xarray = sys.modules.get("xarray")
    return xarray is not None and any(isinstance(v, xarray.DataArray) for v in values)


def is_lazy(value: object) -> TypeGuard[xr.DataArray]:
    """True for a dask-backed DataArray (its values are not computed yet)."""
    return is_labeled(value) and getattr(value, "chunks", None) is not None


def resolve_dim(named: Mapping[str, object], core: Sequence[str], dim: str | None) -> str:
    """The sample dimension of the core DataArrays in ``named`` (``dim``, or the only dim of a
    1-D input); the arguments without a sample dimension are not checked."""
    import xarray as xr

    arrays = {k: v for k, v in named.items() if isinstance(v, xr.DataArray) and k in core}
    if not arrays:
        names = ", ".join(core)
        raise InvalidInputError(f"{names} must be DataArrays when other arguments are DataArrays")
    first_name, first = next(iter(arrays.items()))
    if dim is None:
        if first.ndim == 1:
            return str(first.dims[0])
        raise InvalidInputError(
            f"dim= must name the sample dimension of {first_name} (dims {tuple(first.dims)})"
        )
    for name, array in arrays.items():
        if dim not in array.dims:
            raise InvalidInputError(
                f"dim={dim!r} is not a dimension of {name}; it has dims {tuple(array.dims)}"
            )
    return dim


def _as_dataarray(name: str, value: Any, like: xr.DataArray, drop: str | None) -> Any:
    """Give a NumPy array the dims of ``like`` (minus ``drop``) so it can join a labeled call."""
    import xarray as xr

    if isinstance(value, xr.DataArray) or np.ndim(value) == 0:
        return value
    dims = [d for d in like.dims if d != drop]
    shape = tuple(like.sizes[d] for d in dims)
    array = np.asarray(value)
    if array.shape != shape:
        raise InvalidInputError(
            f"{name} is a NumPy array of shape {array.shape}; next to DataArrays it must have "
            f"shape {shape} (dims {tuple(dims)}), or be passed as a DataArray"
        )
    return xr.DataArray(array, dims=dims)


def check_aligned(named: Mapping[str, object]) -> None:
    """DataArray arguments must share the coordinates of their common dims (no silent join)."""
    import xarray as xr

    arrays = {k: v for k, v in named.items() if isinstance(v, xr.DataArray)}
    try:
        xr.align(*arrays.values(), join="exact")
    except ValueError as error:
        names = ", ".join(arrays)
        raise InvalidInputError(
            f"{names} must have the same sizes and coordinates along their shared dims: {error}"
        ) from None


def apply_kernel(
    kernel: Callable[..., Any],
    named: Mapping[str, object],
    *,
    core: Sequence[str] = (),
    dim: str | None = None,
    output_core_dims: Sequence[Sequence[str]] = ((),),
    output_dtypes: Sequence[Any] = (np.float64,),
    output_sizes: Mapping[str, int] | None = None,
    kwargs: Mapping[str, Any] | None = None,
) -> Any:
    """Call ``kernel(*named.values(), **kwargs)`` on NumPy arrays or through ``xr.apply_ufunc``.

    Parameters
    ----------
    kernel
        Unlabeled function working on the last axis of the arguments named in ``core`` (or
        element-wise when ``core`` is empty).
    named
        Argument name -> value, in the kernel's positional order (names are used in messages).
    core
        Names of the arguments that carry the sample dimension; empty for element-wise kernels.
    dim
        Sample dimension of DataArray inputs; must be None for NumPy inputs.
    output_core_dims, output_dtypes, output_sizes
        As for :func:`xarray.apply_ufunc`; sizes of new dims are needed for lazy inputs.
    """
    kwargs = dict(kwargs or {})
    if not is_labeled(*named.values()):
        if dim is not None:
            raise InvalidInputError(
                f"dim={dim!r} is for xarray DataArrays; NumPy inputs carry samples on the last axis"
            )
        return kernel(*named.values(), **kwargs)
    import xarray as xr

    check_aligned(named)
    sample_dim = resolve_dim(named, core, dim) if core else None
    values = _labeled_arguments(named, core, sample_dim)
    n_outputs = len(output_core_dims)
    gufunc_kwargs = {"output_sizes": dict(output_sizes)} if output_sizes else {}
    return xr.apply_ufunc(
        kernel,
        *values,
        input_core_dims=[[sample_dim] if name in core else [] for name in named],
        output_core_dims=[list(d) for d in output_core_dims],
        dask="parallelized",
        output_dtypes=list(output_dtypes)[:n_outputs],
        dask_gufunc_kwargs=gufunc_kwargs,
        kwargs=kwargs,
    )


def _labeled_arguments(
    named: Mapping[str, object], core: Sequence[str], sample_dim: str | None
) -> list[Any]:
    """The arguments of a labeled call, ready for :func:`xarray.apply_ufunc`: NumPy companions
    given the dims of a DataArray, lazy core arguments in one chunk along the sample dim."""
    import xarray as xr

    like = next(
        v for k, v in named.items() if isinstance(v, xr.DataArray) and (k in core or not core)
    )  # a DataArray that defines the dims of NumPy companions
    empty = sample_dim is not None and like.sizes[sample_dim] == 0
    values = []
    for name, value in named.items():
        if empty and is_lazy(value):  # dask cannot map over a zero-length core dim; nothing to load
            value = value.compute()
        if name in core:
            value = _as_dataarray(name, value, like, None)
            if sample_dim is not None and is_lazy(value):
                value = value.chunk({sample_dim: -1})
        else:
            _check_per_list(name, value, sample_dim)
            value = _as_dataarray(name, value, like, sample_dim)
        values.append(value)
    return values


def _check_per_list(name: str, value: object, sample_dim: str | None) -> None:
    """An argument outside ``core`` holds one value per list: no sample dimension."""
    import xarray as xr

    if isinstance(value, xr.DataArray) and sample_dim is not None and sample_dim in value.dims:
        raise InvalidInputError(
            f"{name} must not have the sample dimension {sample_dim!r}; "
            f"it holds one value per list (dims {tuple(value.dims)})"
        )


def where(condition: Any, x: Any, y: Any) -> Any:
    """:func:`xarray.where` when any argument is a DataArray, else :func:`numpy.where`."""
    if is_labeled(condition, x, y):
        import xarray as xr

        return xr.where(condition, x, y)  # type: ignore[no-untyped-call]
    return np.where(condition, x, y)


def fill_undefined(undefined: Any, value: Any, zero_division: ZeroDivision, what: str) -> Any:
    """``value`` with the value of the ``zero_division`` policy (checked) where ``undefined``.

    Under ``"warn"`` an :class:`~metricalc.errors.UndefinedMetricWarning` counts the undefined
    elements (counting computes a lazy mask); it names the caller of this function's caller.
    """
    if zero_division == "warn":
        warn_undefined(what, int(undefined.sum()), zero_division, stacklevel=4)
    return where(undefined, fill_value(zero_division), value)


def unwrap(value: Any, labeled: bool) -> Any:
    """Return a DataArray as is for labeled calls, else its NumPy value (a scalar for 0-d)."""
    if labeled:
        return value
    array = value.values if is_labeled(value) else np.asarray(value)
    return array[()] if array.ndim == 0 else array
