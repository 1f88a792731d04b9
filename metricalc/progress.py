"""Progress bars for long work (rich), switched off in tests and pipes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def progress_bar(
    description: str, *, total: int, enabled: bool, stderr: bool = False
) -> Iterator[Callable[..., None]]:
    """Yield an ``advance(steps=1)`` callable that moves a rich progress bar ``steps`` steps
    (no-op if disabled); with ``stderr`` the bar is drawn on stderr, leaving stdout to the
    results.

    Examples
    --------
    >>> with progress_bar("work", total=3, enabled=False) as advance:
    ...     advance(); advance(2)
    """
    if not enabled:
        yield lambda steps=1: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    console = Console(stderr=True) if stderr else None
    with Progress(*columns, transient=False, console=console) as bar:
        task = bar.add_task(description, total=total)
        yield lambda steps=1: bar.advance(task, steps)
