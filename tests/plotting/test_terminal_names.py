"""Names a user chose reach the terminal as written: rich markup in them is never parsed (it
raised MarkupError for ``[/]``) and control characters never reach the terminal raw."""

from __future__ import annotations

import pytest

from metricalc.cli import main
from tests.store_cases import make_cube

HOSTILE = ("[red]mine[/]", "[/]", "a\x1b[31mb")
"""A markup tag, a closing tag with nothing open, a terminal colour escape sequence."""


@pytest.fixture(scope="module")
def hostile_cube(tmp_path_factory: pytest.TempPathFactory):
    cube = make_cube()
    cube = cube.assign_coords(descriptor=list(HOSTILE))
    path = tmp_path_factory.mktemp("names") / "cube.nc"
    cube.to_netcdf(path, engine="h5netcdf")
    return path


@pytest.mark.parametrize(
    "argv",
    [["metrics"], ["compare", "--baseline", "[/]", "--test", "ttest", "--pair-by", "pair"]],
    ids=["metrics", "compare"],
)
def test_markup_and_escape_sequences_in_names_are_printed_as_written(
    hostile_cube, argv, capsys, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "200")
    assert main([argv[0], str(hostile_cube), *argv[1:]]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "\x1b" not in out  # the escape sequence is shown, not sent
    assert "a\\x1b[31mb" in out
    assert "[red]mine[/]" in out and "[/]" in out


def test_experiment_summaries_print_names_as_written():
    from rich.console import Console

    from metricalc.experiment.terminal import print_summaries

    console = Console(width=200, record=True, color_system=None)
    print_summaries({name: {"true_map_micro": 0.5} for name in HOSTILE}, title="[/]",
                    console=console)  # fmt: skip
    out = console.export_text()
    assert "[red]mine[/]" in out and "a\\x1b[31mb" in out and "\x1b" not in out
