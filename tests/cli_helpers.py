"""Run the ``metricalc`` command in-process, as a subprocess would see it.

``run_cli(*argv)`` calls :func:`metricalc.cli.main` with standard output and error captured and
returns what :func:`subprocess.run` would (``returncode``, ``stdout``, ``stderr``): an argparse
usage error (``SystemExit``) gives its exit code, as ``python -m metricalc`` does. An exception
that escapes ``main`` (a traceback in a subprocess) fails the test where it is raised. ``cwd``
and ``env`` (variables set for the call only; one given as None is unset) replace the
subprocess's working directory and environment. Starting a Python interpreter per command cost
seconds each; the few true end-to-end runs left are in tests/cli/test_cli.py.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CliResult:
    """What ``subprocess.run(..., capture_output=True, text=True)`` returns, the parts used."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(
    cwd: str | os.PathLike[str] | None, env: Mapping[str, str | None] | None
) -> Iterator[None]:
    before_cwd = Path.cwd()
    saved = {name: os.environ.get(name) for name in env or {}}
    try:
        if cwd is not None:
            os.chdir(cwd)
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        os.chdir(before_cwd)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _exit_code(code: object) -> int:
    """The process exit code of ``sys.exit(code)``."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def run_cli(
    *args: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str | None] | None = None,
) -> CliResult:
    """``metricalc *args`` in this process; see the module docstring."""
    from metricalc.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _environment(cwd, env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as stop:
            code = _exit_code(stop.code)
    return CliResult(code, out.getvalue(), err.getvalue())
