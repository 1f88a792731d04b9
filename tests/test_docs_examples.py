"""The examples of the documentation pages (docs/*.md) run as written.

The rules of the README's examples (tests/test_readme.py, :mod:`tests.examples_helpers`): the
blocks fenced ```python of a page run in order in one namespace (blocks fenced ```py need data a
test cannot have and are illustrations), in a folder of the page's own that holds the session's
example inputs (a fresh ``data/``); every ``metricalc ...`` line of a ```bash block runs
in-process in a folder of the page's own, except a line whose comment says ``external data`` and
the lines of :data:`tests.examples_helpers.NOT_RUN_HERE`. Usage synopses (``[--json]``,
``a|b``) are fenced ```text. A line that is also in the README runs in tests/test_readme.py.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.examples_helpers import (
    ROOT,
    arguments,
    bash_commands,
    case_id,
    command_case,
    python_blocks,
    run_command,
    run_python_block,
    workspace,
)

PAGES = sorted((ROOT / "docs").glob("*.md"))
IN_README = {shlex.join(arguments(line)) for line in bash_commands(ROOT / "README.md")}
"""The commands of the README (tests/test_readme.py runs them)."""
COMMANDS = [(page, line) for page in PAGES for line in bash_commands(page)]
PYTHON_PAGES = [page for page in PAGES if python_blocks(page)]


@pytest.fixture(scope="module")
def page_folder(tmp_path_factory: pytest.TempPathFactory):
    """The folder of a page's command lines (a page's runs of ``metricalc run`` are its own)."""
    folders: dict[Path, Path] = {}

    def folder(page: Path) -> Path:
        if page not in folders:
            folders[page] = workspace(tmp_path_factory, page.stem)
        return folders[page]

    return folder


def test_the_docs_have_examples():
    assert len(COMMANDS) >= 40 and len(PYTHON_PAGES) >= 5


@pytest.mark.parametrize(
    ("page", "line"),
    [command_case(line, page) for page, line in COMMANDS],
    ids=[f"{page.stem}: {case_id(line)}" for page, line in COMMANDS],
)
def test_docs_command_runs(page, line, page_folder, monkeypatch, capsys):
    if shlex.join(arguments(line)) in IN_README:
        pytest.skip("the same command runs in tests/test_readme.py")
    run_command(line, page_folder(page), monkeypatch, capsys)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[page.name for page in PYTHON_PAGES])
def test_docs_python_examples_run(page, tmp_path_factory, monkeypatch):
    monkeypatch.chdir(workspace(tmp_path_factory, page.stem, without=("data", "outputs")))
    namespace: dict[str, object] = {}
    for block in python_blocks(page):
        run_python_block(block, page, namespace)
