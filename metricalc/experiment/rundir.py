"""The folder of one run, ``<outputs>/results/<benchmark>/<tag>/``: its files, lock and state.

Layout (docs/experiments.md)::

    conf.yaml            the merged configuration
    predictions.h5       cached predictions (written once every image pair is exported)
    predictions.parts/   finished image pairs of an export in progress, one file per pair
    results.h5           per-query (QueryCube) and per-pair metrics
    summaries.json       aggregates; non-finite values as null
    run.json             status, error, timings, versions and config hash of the last run
    plots/               figures (PNG and SVG)
    matches/<scene>/<pair>.png   match visualization of every image pair (written at export)
    benchmarks/, retrieval/<tag>/  the ``patches`` benchmark: its benchmark and .results files

Every file is written to a temporary name in the same folder and renamed over its target, so
a killed run leaves complete files or none. A run holds an exclusive lock on ``.lock`` (POSIX
``flock``) while it works, so a second run of the same tag is refused instead of interleaving;
runs of different tags share nothing and run side by side.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from metricalc.errors import InvalidInputError
from metricalc.experiment.config import check_tag
from metricalc.fileio import atomic_write, json_safe

try:  # POSIX; elsewhere runs are not locked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunDir", "file_lock"]


@contextmanager
def file_lock(path: Path, what: str, *, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``: wait for it (``wait=True``), or refuse at once
    if another process holds it.

    The lock is released when the process ends, however it ends (also on ``kill -9``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held for the block
    try:
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise InvalidInputError(
                    f"{what} is in use by another metricalc process (lock {path}); wait for it "
                    "to finish or use another tag"
                ) from None
        yield
    finally:
        handle.close()


class RunDir:
    """Paths and state of one run folder (module docstring).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     run = RunDir(Path(tmp), "hpatches", "sift")
    ...     run.path.relative_to(tmp).as_posix(), run.read_conf()
    ('results/hpatches/sift', None)
    """

    def __init__(self, outputs: Path, benchmark: str, tag: str) -> None:
        # both become folder names under outputs: names, never paths (no '/', no '..')
        check_tag(benchmark, "benchmark")
        check_tag(tag)
        self.outputs = Path(outputs)
        self.path = self.outputs / "results" / benchmark / tag
        self.conf = self.path / "conf.yaml"
        self.predictions = self.path / "predictions.h5"
        self.parts = self.path / "predictions.parts"
        self.results = self.path / "results.h5"
        self.summaries = self.path / "summaries.json"
        self.run_json = self.path / "run.json"
        self.plots = self.path / "plots"
        self.matches = self.path / "matches"
        self.lock_file = self.path / ".lock"

    def lock(self) -> Any:
        """Context manager: the exclusive lock of this run folder."""
        return file_lock(self.lock_file, f"run folder {self.path}")

    def match_image(self, scene: str, pair: str) -> Path:
        """The match visualization of one image pair, e.g. ``matches/v_coffee/1-3.png``."""
        return self.matches / scene / f"{pair}.png"

    def part(self, scene: str, pair: str) -> Path:
        """The file of one finished image pair during an export."""
        return self.parts / scene / f"{pair}.h5"

    # -- state ------------------------------------------------------------------------------

    def read_conf(self) -> dict[str, Any] | None:
        """The stored configuration, None if there is none."""
        if not self.conf.exists():
            return None
        try:
            data = yaml.safe_load(self.conf.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            raise InvalidInputError(
                f"{self.conf} cannot be read ({error}); delete it or rerun with --overwrite"
            ) from error
        if not isinstance(data, dict):
            raise InvalidInputError(
                f"{self.conf} does not hold a mapping; delete it or rerun with --overwrite"
            )
        return data

    def write_conf(self, values: dict[str, Any]) -> None:
        atomic_write(self.conf, yaml.safe_dump(values, sort_keys=False))

    def read_json(self, path: Path) -> dict[str, Any] | None:
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise InvalidInputError(f"{path} cannot be read as JSON: {error}") from error
        if not isinstance(data, dict):
            raise InvalidInputError(f"{path} does not hold a JSON object")
        return data

    def write_json(self, path: Path, data: dict[str, Any]) -> None:
        atomic_write(path, json.dumps(json_safe(data), indent=2) + "\n")

    def has_predictions(self) -> bool:
        return self.predictions.is_file()

    def has_results(self) -> bool:
        return self.results.is_file() and self.summaries.is_file()

    # -- clearing ---------------------------------------------------------------------------

    def clear_results(self) -> None:
        """Remove the evaluation outputs (``--overwrite_eval``)."""
        for path in (self.results, self.summaries):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.plots, ignore_errors=True)

    def clear_all(self) -> None:
        """Remove every output of the run (``--overwrite``); the lock file stays."""
        self.clear_results()
        for path in (self.predictions, self.run_json, self.conf):
            path.unlink(missing_ok=True)
        for folder in (self.parts, self.matches):
            shutil.rmtree(folder, ignore_errors=True)

    def clear_stale_parts(self) -> None:
        """Remove the part files left over once ``predictions.h5`` exists (a merge was
        interrupted after its rename)."""
        if self.has_predictions():
            shutil.rmtree(self.parts, ignore_errors=True)
