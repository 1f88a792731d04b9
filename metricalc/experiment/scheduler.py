"""Run the per-pair work of an experiment through dask: local threads or processes, or a cluster.

``--scheduler`` takes ``threads`` (default; OpenCV and NumPy release the GIL), ``processes``
(a pool of spawned processes), ``synchronous`` (one task at a time in this process, for
debugging) or the address of a ``dask.distributed`` scheduler (``tcp://host:8786``) to scale out.

With a local scheduler, BLAS and OpenMP are limited to one thread per worker (threadpoolctl) for
the run: the tasks are the parallelism, and the many small matrix products and decompositions of
the per-pair work are several times slower on oversubscribed BLAS threads (over 10x measured on
a busy machine). dask.distributed workers do the same by default.

Whatever runs the tasks, every finished output is handed to a callback **in this process, as
soon as it finishes** (dask's ``posttask`` callback for the local schedulers, ``as_completed``
for a cluster), so the caller writes each finished image pair at once and an interrupted run
loses none. Tasks are pure functions of their inputs, so every scheduler gives identical results.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from dask.base import compute
from dask.callbacks import Callback
from threadpoolctl import threadpool_limits

from metricalc.errors import InvalidInputError

__all__ = ["LOCAL_SCHEDULERS", "Scheduler", "batches", "check_scheduler"]

LOCAL_SCHEDULERS = ("threads", "processes", "synchronous")
"""The local schedulers; anything else must be a dask.distributed scheduler address."""

_ADDRESS = re.compile(r"(tcp|tls|inproc|ucx|ws|wss)://\S+|[A-Za-z0-9.\-]+:\d+")
_CONNECT_TIMEOUT = "10s"


_LIMITS: Any = None  # the BLAS limit of a worker process (kept alive for its lifetime)


def _single_threaded_blas() -> None:
    """Initializer of the worker processes: one BLAS / OpenMP thread each."""
    global _LIMITS  # per-process state by design
    _LIMITS = threadpool_limits(limits=1)


def batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of ``size`` (the last may be shorter): the batches of
    tasks handed to :meth:`Scheduler.run`, which bound what is in flight at once.

    Examples
    --------
    >>> [list(b) for b in batches(range(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    for start in range(0, len(items), size):
        yield items[start : start + size]


def check_scheduler(spec: Any) -> str:
    """``spec`` if it names a local scheduler or looks like a scheduler address.

    Examples
    --------
    >>> check_scheduler("threads"), check_scheduler("tcp://10.0.0.5:8786")
    ('threads', 'tcp://10.0.0.5:8786')
    """
    if isinstance(spec, str) and (spec in LOCAL_SCHEDULERS or _ADDRESS.fullmatch(spec)):
        return spec
    raise InvalidInputError(
        f"scheduler {spec!r}: expected {', '.join(LOCAL_SCHEDULERS)} or a dask.distributed "
        "scheduler address such as tcp://host:8786"
    )


class Scheduler:
    """Runs batches of ``dask.delayed`` tasks; a context manager owning the pool or client.

    Parameters
    ----------
    spec : str
        ``"threads"``, ``"processes"``, ``"synchronous"`` or a scheduler address.
    workers : int, optional
        Local pool size (default: the number of CPUs).

    Examples
    --------
    >>> from dask import delayed
    >>> done = {}
    >>> with Scheduler("threads", workers=2) as scheduler:
    ...     tasks = {scheduler.key("square", i): delayed(pow)(i, 2, dask_key_name=None)
    ...              for i in range(3)}
    ...     scheduler.run(tasks, lambda name, value: done.__setitem__(name, value))
    >>> sorted(done.values())
    [0, 1, 4]
    """

    def __init__(self, spec: str = "threads", *, workers: int | None = None) -> None:
        self.spec = check_scheduler(spec)
        if workers is not None and (isinstance(workers, bool) or int(workers) < 1):
            raise InvalidInputError(f"workers={workers!r}; expected a positive integer")
        self.workers = int(workers) if workers else (os.cpu_count() or 1)
        self._pool: Executor | None = None
        self._client: Any = None
        self._limits: Any = None
        self._token = uuid.uuid4().hex[:12]  # keys unique per run, also on a shared cluster

    def __enter__(self) -> Scheduler:
        if self.spec in ("threads", "synchronous"):
            self._limits = threadpool_limits(limits=1)
        if self.spec == "threads":
            self._pool = ThreadPoolExecutor(self.workers)
        elif self.spec == "processes":
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_single_threaded_blas,
            )
        elif self.spec != "synchronous":
            from distributed import Client

            try:
                self._client = Client(  # type: ignore[no-untyped-call]  # distributed: no hints
                    self.spec, timeout=_CONNECT_TIMEOUT, set_as_default=False
                )
            except (OSError, TimeoutError) as error:
                raise InvalidInputError(
                    f"cannot connect to the dask scheduler at {self.spec}: {error}"
                ) from error
            self.workers = max(1, sum(self._client.nthreads().values()))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._limits is not None:
            self._limits.restore_original_limits()
            self._limits = None
        if self._pool is not None:
            self._pool.shutdown(wait=exc[0] is None, cancel_futures=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def key(self, *parts: Any) -> str:
        """A task key unique to this run: ``"<part>-<part>-...-<token>"``."""
        return "-".join([*map(str, parts), self._token])

    def run(self, tasks: Mapping[str, Any], on_result: Callable[[str, Any], None]) -> None:
        """Compute ``tasks`` (key -> Delayed whose key is that key); call ``on_result(key,
        value)`` in this process as each one finishes. The first failing task raises."""
        if not tasks:
            return
        named = {}
        for name, task in tasks.items():
            named[str(task.key)] = name
        if self._client is not None:
            self._run_distributed(tasks, named, on_result)
            return

        def posttask(key: Any, result: Any, dsk: Any, state: Any, worker: Any) -> None:
            if key in named:
                on_result(named[key], result)

        options: dict[str, Any] = {"scheduler": self.spec, "optimize_graph": False}
        if self._pool is not None:
            options["pool"] = self._pool
        with Callback(posttask=posttask):  # type: ignore[no-untyped-call]  # dask: no hints
            compute(*tasks.values(), **options)  # type: ignore[no-untyped-call]

    def _run_distributed(
        self,
        tasks: Mapping[str, Any],
        named: Mapping[str, str],
        on_result: Callable[[str, Any], None],
    ) -> None:
        from distributed import as_completed

        futures = self._client.compute(list(tasks.values()))
        try:
            completed = as_completed(  # type: ignore[no-untyped-call]  # distributed: no hints
                futures, with_results=True, loop=self._client.loop
            )
            for future, value in completed:
                on_result(named[str(future.key)], value)
        finally:
            self._client.cancel(futures)
