"""``--chunks`` and ``--scheduler``: the verbs that evaluate a cube file on dask.

``--chunks N`` opens the cube lazily (:func:`metricalc.cube.open_cube` with ``chunks=``), N
queries per chunk, so the metric set streams over a cube larger than memory. ``--scheduler
ADDRESS`` (or the environment variable ``METRICALC_SCHEDULER``) runs that lazy evaluation on a
``dask.distributed`` cluster: the verb opens a :class:`distributed.Client` on the address for
its run, and dask sends the chunks to the cluster's workers (the same code path as on one
machine; ``docs/scaling.md``). Building the parser imports neither dask nor distributed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from metricalc.errors import InvalidInputError
from metricalc.lazy import import_or_explain

SCHEDULER_ENV = "METRICALC_SCHEDULER"
"""Environment variable: the scheduler address used when ``--scheduler`` is not given (empty or
blank: unset)."""

DEFAULT_CHUNK = 1_000_000
"""Queries per chunk of a cube opened for a ``--scheduler`` run without ``--chunks`` (a
multiple of the file's 10,000-query HDF5 chunks)."""

CONNECT_TIMEOUT_S = 10
"""Seconds to wait for the scheduler before giving up with an error naming its address."""


def positive_int(text: str) -> int:
    """``--chunks 1000000`` -> 1000000; anything else is a usage error.

    Examples
    --------
    >>> positive_int("500000")
    500000
    >>> positive_int("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a positive integer (queries per chunk); got '0'
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer (queries per chunk); got {text!r}"
        )
    return value


def add_dask_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--chunks`` and ``--scheduler`` to a verb's parser."""
    parser.add_argument(
        "--chunks",
        type=positive_int,
        metavar="N",
        help="open the cube lazily, N queries per chunk (bounded memory; fastest a multiple of "
        "10000, the file's chunks: other numbers are read at those and rechunked)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="dask.distributed scheduler to run on, e.g. tcp://host:8786 (default: "
        f"${SCHEDULER_ENV}; implies --chunks {DEFAULT_CHUNK})",
    )


def scheduler_address(args: argparse.Namespace) -> str | None:
    """``--scheduler``, else ``$METRICALC_SCHEDULER``, else None (no cluster).

    An empty (or blank) ``$METRICALC_SCHEDULER`` counts as unset (``METRICALC_SCHEDULER= cmd``
    runs without a cluster); an empty ``--scheduler ""`` is an error, never a silent run
    without the cluster asked for.

    Raises
    ------
    InvalidInputError
        When ``--scheduler`` is given empty or blank.

    Examples
    --------
    >>> scheduler_address(argparse.Namespace(scheduler=" tcp://host:8786 "))
    'tcp://host:8786'
    >>> scheduler_address(argparse.Namespace(scheduler=""))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    metricalc.errors.InvalidInputError: --scheduler '': expected the address of a dask scheduler...
    """
    given = getattr(args, "scheduler", None)
    if given is not None:
        if not given.strip():
            raise InvalidInputError(
                f"--scheduler {given!r}: expected the address of a dask scheduler such as "
                "tcp://host:8786 (leave the option out to run without a cluster)"
            )
        return str(given).strip()
    return os.environ.get(SCHEDULER_ENV, "").strip() or None


def cube_chunks(args: argparse.Namespace) -> dict[str, int] | None:
    """The ``chunks=`` of :func:`metricalc.cube.open_cube`: None (in memory) unless
    ``--chunks`` or a scheduler is given.

    Raises
    ------
    MissingExtraError
        Chunks are asked for and dask (the ``distributed`` extra) is not installed.
    """
    if getattr(args, "chunks", None):
        chunks, option = {"query": int(args.chunks)}, f"--chunks {args.chunks}"
    elif address := scheduler_address(args):
        chunks, option = {"query": DEFAULT_CHUNK}, f"--scheduler {address}"
    else:
        return None
    import_or_explain("dask.array", option)
    return chunks


def _reachable(address: str) -> None:
    """Raise (ValueError, OSError) unless ``address`` parses and, for ``tcp://`` / ``tls://``,
    a TCP connection to it opens: checked before a :class:`distributed.Client` is made, since
    a Client that fails to connect leaves state behind in distributed (it stays the default)."""
    import socket

    from distributed.comm.addressing import get_address_host_port, parse_address

    scheme, _ = parse_address(address)
    if scheme in ("tcp", "tls"):
        host, port = get_address_host_port(address)
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()


def _connected(connect: Callable[[], Any]) -> Any:
    """``connect()``, run in a daemon thread and given up after :data:`CONNECT_TIMEOUT_S` + 5
    seconds: a server that accepts the connection but never speaks dask's protocol (an HTTP
    server, the dashboard's port) leaves distributed waiting for its handshake, past its own
    timeout. Raises TimeoutError then, and what ``connect`` raised otherwise. A client that
    connects after the caller gave up is closed at once, not left behind."""
    outcome: dict[str, Any] = {}
    lock = threading.Lock()

    def run() -> None:
        try:
            client = connect()
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error
            return
        with lock:
            late = outcome.get("abandoned", False)
            outcome["client"] = client
        if late:
            client.close()

    thread = threading.Thread(target=run, name="metricalc-dask-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + 5)
    with lock:
        gave_up = "client" not in outcome and "error" not in outcome
        outcome["abandoned"] = gave_up
    if gave_up:
        raise TimeoutError(
            f"no dask scheduler answered within {CONNECT_TIMEOUT_S + 5} s (the port is open: "
            "is it a scheduler's port, not its dashboard's?)"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["client"]


@contextlib.contextmanager
def dask_session(args: argparse.Namespace) -> Iterator[Any]:
    """A :class:`distributed.Client` on the scheduler address for the ``with`` block (the
    default scheduler of every dask computation in it), or nothing without an address.

    Raises
    ------
    InvalidInputError
        Naming the address, when the scheduler cannot be reached within
        :data:`CONNECT_TIMEOUT_S` seconds.
    MissingExtraError
        When dask.distributed (the ``distributed`` extra) is not installed.
    """
    address = scheduler_address(args)
    if address is None:
        yield None
        return
    distributed = import_or_explain("distributed", f"--scheduler {address}")
    try:
        _reachable(address)
        # not the default until it is connected: a failed Client would stay the default
        client = _connected(
            lambda: distributed.Client(
                address, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False
            )
        )
    except (OSError, ValueError, TypeError, RuntimeError, MemoryError) as error:
        # MemoryError: a server that is not a dask scheduler answers bytes that distributed
        # reads as the length of a frame
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidInputError(
            f"cannot connect to the dask scheduler {address!r} (--scheduler / "
            f"${SCHEDULER_ENV}): {reason}; expected the address of a running scheduler such "
            "as tcp://host:8786"
        ) from None
    import dask

    with client, dask.config.set(scheduler=client.get):
        yield client
