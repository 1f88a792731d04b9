"""Independent tasks of the keypoint pipeline (images, scenes) on every core, in threads.

OpenCV, NumPy and BLAS release the GIL in the work that dominates detection, description and
matching, so threads of one process run the tasks in parallel without copying images, features
or descriptors to other processes. Each task is a pure function of its inputs, so the results
are the same in any number of threads; they come back in the order of the tasks.

BLAS keeps its own number of threads inside the tasks: OpenBLAS rounds a float32 product
differently with one thread than with two (about 1e-7 relative, measured on the descriptor
distances), so limiting it here would change the last digits of every real-valued descriptor's
distances against a serial run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["available_cores", "run_parallel", "run_staged"]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it).

    Examples
    --------
    >>> available_cores() >= 1
    True
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)  # pragma: no cover - platforms without affinity


def run_parallel(
    work: Callable[[T], R],
    tasks: Sequence[T],
    *,
    workers: int | None = None,
    done: Callable[[], None] | None = None,
) -> list[R]:
    """``[work(t) for t in tasks]``, run in up to ``workers`` threads (default: one per core).

    ``done()`` is called in this thread once per finished task, in task order
    (a progress bar's ``advance``). An exception of a task is raised here, after the tasks
    before it in order have been handed to ``done``.

    Examples
    --------
    >>> run_parallel(lambda x: x * x, [1, 2, 3], workers=2)
    [1, 4, 9]
    """
    return run_staged(
        work, [[task] for task in tasks], lambda _, results: results[0], workers=workers, done=done
    )


def run_staged(
    work: Callable[[T], R],
    groups: Sequence[Sequence[T]],
    finish: Callable[[int, list[R]], S],
    *,
    workers: int | None = None,
    done: Callable[[], None] | None = None,
) -> list[S]:
    """``[finish(i, [work(t) for t in group]) for i, group in enumerate(groups)]`` in threads.

    The tasks of every group run in up to ``workers`` threads (default: one per core); as soon
    as the tasks of a group (and of the groups before it) have finished, ``finish`` of that
    group starts in one more thread, so assembling a group's results (e.g. a descriptor's cube,
    work that holds the GIL) overlaps the tasks of the next groups. ``done()`` is called in
    this thread once per finished task, in order. An exception of a task or of ``finish`` is
    raised here; the tasks not started yet are cancelled.

    Examples
    --------
    >>> run_staged(lambda x: x * x, [[1, 2], [3]], lambda i, squares: (i, sum(squares)))
    [(0, 5), (1, 9)]
    """
    count = max(1, min(available_cores() if workers is None else workers, sum(map(len, groups))))
    report = done if done is not None else (lambda: None)
    if count == 1:
        finished = []
        for i, group in enumerate(groups):
            results = []
            for task in group:
                results.append(work(task))
                report()
            finished.append(finish(i, results))
        return finished
    with ThreadPoolExecutor(count) as pool, ThreadPoolExecutor(1) as after:
        futures = [[pool.submit(work, task) for task in group] for group in groups]
        staged: list[Future[S]] = []
        try:
            for i, group_futures in enumerate(futures):
                results = []
                for future in group_futures:
                    results.append(future.result())
                    report()
                staged.append(after.submit(finish, i, results))
            return [future.result() for future in staged]
        except BaseException:
            for group_futures in futures:  # nothing more is started; running tasks finish
                for future in group_futures:
                    future.cancel()
            for later in staged:
                later.cancel()
            raise
