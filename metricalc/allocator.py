"""Let a long keypoint run keep the memory it frees, for the next image or scene (glibc).

Extracting and evaluating keypoints allocates and frees the same large buffers again and again:
OpenCV's Gaussian pyramids of every image, the distance matrices of every image pair. glibc's
``malloc`` serves each buffer above its mmap threshold (128 KiB at first, raised as buffers are
freed, at most 32 MiB) with a fresh ``mmap`` and gives it back with ``munmap``, so the kernel maps
and zeroes every page again: about 3.5 million page faults and 12 s of system time in
``metricalc demo``. :func:`keep_freed_memory` sets, for this process, the mmap threshold to its
maximum and the trim threshold high (``mallopt(3)``), so freed buffers stay in the heap and are
reused; only buffers above 32 MiB are still mapped on demand. The results do not change (the
allocator decides where memory is, not what it holds); the peak resident memory grows by what
the heaps keep. Measured on the demo (2 idle cores, ``/usr/bin/time``): 61.4 s wall, 12.1 s
system time, 3.3 million page faults, peak 2.56 GB without; 56.2 s, 5.9 s, 0.54 million,
2.95 GB with these settings (a trim threshold of 1 GiB gains nothing more; 128 MiB with a
16 MiB pad loses 2.5 s).

``metricalc trec-eval`` asks for more (``heap_only=True``): its arrays of ten million run lines
are larger than any mmap threshold, so every block comes from the heap and the heap is never
trimmed; at ten million lines the page faults fall from 1.8 million to 0.4 million and the
system time from 4.8 s to 2.0 s, with about the same peak memory.

The command line calls it for ``metricalc demo``, ``metricalc keypoints eval`` and ``metricalc
trec-eval`` only, never on import: a library user's process keeps its own allocator
settings. It does nothing where glibc's ``mallopt`` is absent (macOS, Windows, musl returns
failure) or when the user has set one of glibc's ``MALLOC_*`` environment variables (their
choice wins).
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TOP_PAD", "TRIM_THRESHOLD", "keep_freed_memory"]

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -2, -3, -4  # glibc's <malloc.h>

MMAP_THRESHOLD = 32 << 20
"""Buffers up to this size come from the heap (glibc's largest mmap threshold on 64 bits)."""

TRIM_THRESHOLD = 256 << 20
"""Free memory at the top of the heap is given back to the system above this much."""

TOP_PAD = 64 << 20
"""Extra heap requested at each growth (address space; pages cost memory only when used)."""


def keep_freed_memory(*, heap_only: bool = False) -> bool:
    """Set glibc's mmap and trim thresholds for a run that reuses large buffers.

    Parameters
    ----------
    heap_only : bool
        Serve every block from the heap, however large (no ``mmap`` at all), and never trim
        the heap: for runs whose arrays are all larger than :data:`MMAP_THRESHOLD`.

    Returns
    -------
    bool
        True if every setting was taken; False on another C library or platform, or when a
        ``MALLOC_*`` environment variable is set (nothing is changed then).

    Examples
    --------
    Called once, before the work (``tests/test_allocator.py`` runs it in a fresh process):

    >>> MMAP_THRESHOLD >> 20, TRIM_THRESHOLD >> 20   # MiB
    (32, 256)
    """
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        # the symbols the process already has (libc's): no search for the library, which would
        # run ldconfig in a subprocess at every start of metricalc trec-eval
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    settings = (
        ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 2**31 - 1))
        if heap_only
        else (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (M_TOP_PAD, TOP_PAD),
        )
    )
    return all(mallopt(option, value) == 1 for option, value in settings)
