"""Progress bars for long work (rich), switched off in tests and pipes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def progress_bar(description: str, *, total: int, enabled: bool) -> Iterator[Callable[[], None]]:
    """Yield an ``advance()`` callable that moves a rich progress bar one step (no-op if disabled).

    Examples
    --------
    >>> with progress_bar("work", total=2, enabled=False) as advance:
    ...     advance(); advance()
    """
    if not enabled:
        yield lambda: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)
