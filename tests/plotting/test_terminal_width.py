"""The terminal tables fit the console's width and never cut a cell.

:func:`metricalc.plotting.terminal.fit_table` is checked on random tables against the rule it
promises (every line within the width; every number and every name in full), and the verbs that
print tables (``metrics``, ``compare``, ``db list`` / ``db show``, ``decompose keypoints``) are
run in-process at 80 and 200 columns (``COLUMNS``, as a terminal of that width sets it).
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console
from rich.table import Table

import metricalc as mc
from metricalc.cli import main
from metricalc.plotting.terminal import fit_table, print_table
from metricalc.store import record_experiment, to_dataframe

WIDTHS = (80, 200)
NAMES = {"SIFT (baseline)": 0.4, "My-Descriptor v2": 0.8, "orb": 0.2}
"""Descriptors as a user names them: capitals, spaces, a hyphen."""


def rendered(table: Table, width: int, keys: int = 1) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_table(table, console=console, keys=keys)
    return console.export_text()


SOFT = ("config ", "metricalc ")
"""The header lines of ``db show`` are printed unwrapped on purpose (to be piped and searched):
the terminal wraps them; they are not table lines."""


def assert_fits(text: str, width: int) -> None:
    longest = max(len(line.rstrip()) for line in text.splitlines() if not line.startswith(SOFT))
    assert longest <= width, f"a line of {longest} characters at width {width}:\n{text}"
    assert "…" not in text, f"an ellipsis (a cut cell) at width {width}:\n{text}"


def random_table(rng: np.random.Generator) -> tuple[Table, list[str], list[str]]:
    """A table of 1-2 name columns (left) and 2-16 number columns (right), random headers; the
    names and the number cells."""
    keys = int(rng.integers(1, 3))
    table = Table(title="random table", caption="a caption under the last part")
    words = ["mAP", "macro", "viewpoint", "HR@1", "verif.", "AP", "queries", "R=0", "rate", "p"]
    for k in range(keys):
        table.add_column(f"name {k}")
    n_numbers = int(rng.integers(2, 17))
    for _ in range(n_numbers):
        header = " ".join(rng.choice(words, size=int(rng.integers(1, 4))))
        table.add_column(header, justify="right")
    names, numbers = [], []
    for r in range(int(rng.integers(1, 6))):
        row = []
        for k in range(keys):
            name = f"desc{r}{k} (" + "x" * int(rng.integers(0, 10)) + ")"
            names.append(name)
            row.append(name)
        for _ in range(n_numbers):
            cell = f"{rng.normal() * 10 ** int(rng.integers(0, 6)):,.2f}"
            numbers.append(cell)
            row.append(cell)
        table.add_row(*row)
    return table, names, numbers


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_fit_and_keep_every_cell(seed):
    rng = np.random.default_rng(seed)
    table, names, numbers = random_table(rng)
    keys = sum(1 for c in table.columns if c.justify == "left")
    for width in (60, 80, 120, 200):
        text = rendered(table, width, keys=keys)
        assert_fits(text, width)
        for cell in numbers:
            assert cell in text, f"{cell!r} is not whole at width {width}:\n{text}"
        for name in names:  # whole while the row names take at most half the width
            pieces = [name] if len(name) <= width // (2 * keys) else name.split()
            assert all(p in text for p in pieces), f"{name!r} is cut at width {width}:\n{text}"
        assert text.count("a caption under the last part") == 1


def test_a_table_that_fits_stays_one_table_and_a_wide_one_is_stacked():
    table = Table(title="t")
    table.add_column("descriptor")
    for i in range(12):
        table.add_column(f"metric number {i}", justify="right")
    table.add_row("sift", *[f"{i}.5" for i in range(12)])
    assert len(fit_table(table, 200)) == 1  # headers wrap to "metric" / "number i"
    parts = fit_table(table, 60)
    assert len(parts) > 1
    assert all(p.columns[0].header == "descriptor" for p in parts)  # the row names repeat
    assert [p.title for p in parts][:2] == ["t", "(continued)"]
    # every number column exactly once, in order
    headers = [c.header for p in parts for c in p.columns[1:]]
    assert headers == [f"metric number {i}" for i in range(12)]
    # as even as they can be: the parts differ by at most one column
    sizes = [len(p.columns) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_default_rich_rendering_cuts_what_fit_table_keeps():
    """The failure this guards against: rich alone crops cells with an ellipsis."""
    table = Table()
    table.add_column("descriptor", no_wrap=True)
    for i in range(12):
        table.add_column(f"header {i}", justify="right", no_wrap=True)
    table.add_row("My-Descriptor v2", *["12,345.67"] * 12)
    console = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    console.print(table)
    assert "…" in console.export_text()
    text = rendered(table, 80)
    assert_fits(text, 80)
    assert text.count("12,345.67") == 12 and "My-Descriptor v2" in text


# ------------------------------------------------------------------------------------------
# the verbs, in-process
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cube_file(tmp_path_factory, make_query_cube):
    path = tmp_path_factory.mktemp("width") / "cube.nc"
    mc.cube.save(make_query_cube(NAMES, per_pair=8), path)
    return path


def run_at(width: int, argv: list[str], monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert_fits(out, width)
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_metrics_table(width, cube_file, monkeypatch, capsys):
    out = run_at(width, ["metrics", str(cube_file)], monkeypatch, capsys)
    values = json.loads(run_at(width, ["metrics", str(cube_file), "--json"], monkeypatch, capsys))
    for name, metrics in values.items():
        assert name in out
        assert f"{100 * metrics['true_map_micro']:.1f}" in out
        assert f"{metrics['total_queries_processed']:,}" in out
    for header in ("mAP", "HR@1", "queries"):
        assert header in out


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_table(width, cube_file, monkeypatch, capsys):
    argv = ["compare", str(cube_file), "--n-resamples", "200"]
    out = run_at(width, argv, monkeypatch, capsys)
    payload = json.loads(run_at(width, [*argv, "--json"], monkeypatch, capsys))
    rows = payload
    assert len(rows) == 3
    for name in NAMES:
        assert name in out
    for row in rows:
        assert f"{100 * row['mean_diff']:+.2f}" in out
        low, high = (f"{100 * row[k]:+.2f}" for k in ("ci_low", "ci_high"))
        assert f"[{low}, {high}]" in out
        assert f"{row['wins']}/{row['ties']}/{row['losses']}" in out
    assert "randomization test" in out and "values in percent" in out
    if width == 80:
        assert "(continued)" in out  # 13 columns do not fit in 80: stacked parts
    else:
        assert "(continued)" not in out


@pytest.mark.parametrize("width", WIDTHS)
def test_decompose_keypoints_table(width, cube_file, monkeypatch, capsys):
    out = run_at(width, ["decompose", "keypoints", str(cube_file)], monkeypatch, capsys)
    for name in NAMES:
        assert name in out
    for part in ("repeatability", "limited", "identity"):
        assert part in out


@pytest.fixture(scope="module")
def db_file(tmp_path_factory, make_query_cube):
    path = tmp_path_factory.mktemp("db") / "r.sqlite"
    cube = make_query_cube(NAMES, per_pair=8)
    record_experiment(
        path,
        tag="a rather long experiment tag",
        benchmark="hpatches (quick)",
        config={"descriptors": sorted(NAMES)},
        metrics=mc.metric_set(cube),
        scenes=mc.scene_metrics(cube),
    )
    return path


@pytest.mark.parametrize("width", WIDTHS)
def test_db_list_and_show(width, db_file, monkeypatch, capsys):
    out = run_at(width, ["db", "list", "--db", str(db_file)], monkeypatch, capsys)
    assert "hpatches (quick)" in out
    # a text cell wraps at its spaces when the width asks for it, never inside a word
    assert all(word in out for word in ["a", "rather", "long", "experiment", "tag"])
    argv = ["db", "show", "--db", str(db_file), "a rather long experiment tag", "--scenes"]
    out = run_at(width, argv, monkeypatch, capsys)
    results = to_dataframe(db_file, "results")
    assert len(results) == len(NAMES)
    for row in results.itertuples():
        assert row.descriptor in out
        assert f"{100 * row.true_map_micro:.2f}" in out
        assert f"{100 * row.hit_rate_at_1:.2f}" in out
