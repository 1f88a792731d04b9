"""Run independent blocks of work in threads, each with single-threaded BLAS."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from threadpoolctl import threadpool_limits

from metricalc.core.kernels import MAX_THREADS

T = TypeVar("T")
R = TypeVar("R")


def in_threads(work: Callable[[T], R], blocks: Sequence[T]) -> list[R]:
    """``[work(b) for b in blocks]``, in up to one thread per core (at most ``MAX_THREADS``).

    The blocks' matrix products are small, so BLAS runs single-threaded inside each block (its
    own threads would only wait on each other); NumPy releases the GIL, so the blocks run in
    parallel instead. Results come back in the order of ``blocks``.
    """
    workers = max(1, min(os.cpu_count() or 1, MAX_THREADS, len(blocks)))
    with threadpool_limits(limits=1, user_api="blas"):
        if workers == 1:
            return [work(block) for block in blocks]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(work, blocks))
