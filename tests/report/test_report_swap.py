"""A report folder holds one run's outputs: swapped in whole, intact after a failure or a kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metricalc import cube as qc
from metricalc.fileio import atomic_write, recover_folder, staged_folder
from metricalc.report.builder import MANIFEST, REPORT_OUTPUTS, build

STUDY = (
    "data: {cube: cube.nc}\nbaseline: good\nfigures: [forest]\n"
    "tests: {n_resamples: 99, rank: false}\n"
)


def _study(folder: Path, make_query_cube, outputs: str) -> Path:
    qc.save(make_query_cube({"good": 0.8, "poor": 0.3}, seed=1), folder / "cube.nc")
    (folder / "mine.yaml").write_text(STUDY + f"outputs: [{outputs}]\n")
    return folder / "mine.yaml"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_rebuild_replaces_every_output_and_keeps_everything_else(tmp_path, make_query_cube):
    spec = _study(tmp_path, make_query_cube, "html, csv, latex, figures")
    first = build(spec)
    out = first.out
    assert out == tmp_path / "mine" / "report" and first.html == out / "report.html"
    assert all(p.is_file() and p.is_relative_to(out) for p in first.files)
    atomic_write(out / "cache" / "key.nc", "a cache")  # what load_cubes keeps there
    atomic_write(out / "notes.txt", "my own notes")
    (tmp_path / "mine.yaml").write_text(STUDY + "outputs: [csv]\n")
    second = build(spec)
    names = sorted(p.name for p in out.iterdir())
    # the html page, tables.tex and figures/ of the first run are gone: not this run's outputs
    assert names == ["cache", "comparisons.csv", "metrics.csv", "notes.txt", "rankings.csv",
                     "report-files.json", "table.csv"]  # fmt: skip
    assert (out / "notes.txt").read_text() == "my own notes"
    assert sorted(p.name for p in second.files) == sorted(
        n for n in names if n in REPORT_OUTPUTS and n != MANIFEST
    )
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert listed == sorted(p.name for p in second.files)
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_a_rebuild_removes_only_the_files_the_previous_build_wrote(tmp_path, make_query_cube):
    """Another job's files in the report's folders (the demo's figures in ``figures/``, a
    second study's page) survive every rebuild; the report's own stale figures do not."""
    spec = _study(tmp_path, make_query_cube, "html, csv, figures")
    out = tmp_path / "common"
    first = build(spec, out=out)
    ours = sorted(p.relative_to(out).as_posix() for p in first.files)
    forest = next(name for name in ours if name.startswith("figures/forest_"))
    theirs = {"figures/locked_map_by_split.png": "demo", "figures/native/scene_map.svg": "demo",
              "report/report.html": "another page", "summary.md": "mine"}  # fmt: skip
    for name, text in theirs.items():
        atomic_write(out / name, text)
    build(spec, out=out)  # the same outputs again
    (tmp_path / "mine.yaml").write_text(STUDY + "outputs: [csv]\n")
    last = build(spec, out=out)
    for name, text in theirs.items():
        assert (out / name).read_text() == text, name
    kept = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert kept == sorted([*theirs, MANIFEST, *(p.relative_to(out).as_posix() for p in last.files)])
    assert not (out / "report.html").exists()
    assert not (out / forest).exists()


def test_a_report_folder_without_manifest_keeps_its_figures(tmp_path, make_query_cube):
    """A folder of an earlier version (no manifest): its top-level report files are replaced,
    the files of ``figures/`` cannot be told apart from other jobs' and stay."""
    spec = _study(tmp_path, make_query_cube, "csv")
    out = tmp_path / "old"
    for name in ("report.html", "figures/forest_x.png", "figures/locked_scene_map.png"):
        atomic_write(out / name, "old")
    build(spec, out=out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted([
        "comparisons.csv", "figures/forest_x.png", "figures/locked_scene_map.png", "metrics.csv",
        MANIFEST, "rankings.csv", "table.csv",
    ])  # fmt: skip


def test_a_failing_build_leaves_the_previous_report_as_it_was(
    tmp_path, make_query_cube, monkeypatch
):
    spec = _study(tmp_path, make_query_cube, "html, csv")
    out = build(spec).out
    before = _tree(out)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("metricalc.report.builder._page", broken)
    with pytest.raises(OSError, match="No space left"):
        build(spec)
    assert _tree(out) == before
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_a_report_killed_mid_write_leaves_the_previous_one_and_the_next_run_recovers(
    tmp_path, make_query_cube
):
    spec = _study(tmp_path, make_query_cube, "html, csv")
    out = build(spec).out
    before = _tree(out)
    script = textwrap.dedent(
        f"""
        import os, signal
        from metricalc.report.builder import build, register_section

        def die(report):  # called while the page is written: csv files are staged already
            os.kill(os.getpid(), signal.SIGKILL)

        register_section(die)
        build({str(spec)!r})
        """
    )
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert killed.returncode == -9
    assert _tree(out) == before  # the previous report, whole
    leftovers = [p for p in out.parent.iterdir() if p.name.startswith(".report.staged-")]
    assert len(leftovers) == 1 and (leftovers[0] / "table.csv").is_file()
    again = build(spec)
    assert again.html.is_file()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_recovery_puts_back_or_carries_over_the_previous_folder(tmp_path):
    target = tmp_path / "out"
    # killed between the two renames of the fallback: the previous folder is put back
    aside = tmp_path / ".out.staged-0001"
    atomic_write(aside / "report.html", "previous")
    recover_folder(target, {"report.html"})
    assert (target / "report.html").read_text() == "previous" and not aside.exists()
    # killed after the swap: the previous folder's cache joins the new outputs
    atomic_write(aside / "report.html", "previous")
    atomic_write(aside / "cache" / "k.nc", "cache")
    atomic_write(target / "report.html", "new")
    recover_folder(target, {"report.html"})
    assert (target / "report.html").read_text() == "new"
    assert (target / "cache" / "k.nc").read_text() == "cache" and not aside.exists()


def test_staged_folder_respects_the_umask_and_writes_nowhere_else(tmp_path):
    old = os.umask(0o027)
    try:
        with staged_folder(tmp_path / "out", {"a.txt"}) as stage:
            atomic_write(stage / "a.txt", "x")
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert oct((tmp_path / "out").stat().st_mode & 0o777) == oct(0o750)
    assert oct((tmp_path / "out" / "a.txt").stat().st_mode & 0o777) == oct(0o640)
