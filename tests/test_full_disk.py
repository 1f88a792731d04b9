"""A full disk is a one-line error that leaves the previous output intact, never a crash.

The HDF5 library ends in a segmentation fault when a write fails for lack of space, so these
tests write onto a real, small tmpfs (mounted for the test; skipped where mounting is not
allowed) in a separate process, which would die with SIGSEGV (exit -11) if it crashed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metricalc.fileio import hdf5_target

DATA = Path(__file__).parent / "data"
EXPORT = DATA / "descriptorworkbench-export" / "descriptor_performance_analysis.csv"


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs at ``tmp_path / "disk"``."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until about ``leave`` bytes are free."""
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * max(0, free - leave))


def _run(*code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent("\n".join(code))
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _names(disk: Path) -> list[str]:
    return sorted(p.name for p in disk.iterdir() if p.name != "lost+found")


def test_a_cube_onto_a_full_disk_is_an_oserror_and_no_crash(small_disk):
    _fill(small_disk, leave=64 * 1024)
    done = _run(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from conftest import _random_query_cube
        from metricalc import cube as qc
        cube = _random_query_cube({{f"d{{i}}": 0.5 for i in range(8)}}, per_pair=400)
        try:
            qc.save(cube, {str(small_disk / "cube.nc")!r})
        except OSError as error:
            print("OSError", error.errno)
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "OSError 28"
    assert _names(small_disk) == ["filler"]  # no cube, no temporary file


def test_a_large_file_is_refused_before_writing_when_the_disk_lacks_room(small_disk, monkeypatch):
    monkeypatch.setenv("METRICALC_MEMORY_LIMIT", "1M")  # too large to be written in memory first
    _fill(small_disk, leave=256 * 1024)
    target = small_disk / "big.h5"
    with (
        pytest.raises(OSError, match=r"needs up to 3\.0 MiB") as caught,
        hdf5_target(target, estimate=3 * 2**20),
    ):
        raise AssertionError("not refused")  # pragma: no cover
    assert caught.value.errno == 28
    assert _names(small_disk) == ["filler"]


def test_cli_writes_onto_a_full_disk_end_in_one_line_and_keep_the_old_file(small_disk):
    out = small_disk / "cube.nc"
    command = f"['db', 'import-workbench', {str(EXPORT)!r}, '--out', {str(out)!r}]"
    imported = _run("from metricalc.cli import main", f"raise SystemExit(main({command}))")
    assert imported.returncode == 0, imported.stderr[-2000:]
    before = out.read_bytes()
    for limit in ("", "64K"):  # written in memory first, or directly after a free-space check
        _fill(small_disk, leave=4 * 1024)
        again = _run(
            "from metricalc.cli import main",
            f"raise SystemExit(main({command}))",
            env={"METRICALC_MEMORY_LIMIT": limit} if limit else None,
        )
        assert again.returncode == 2, (limit, again.returncode, again.stderr[-2000:])
        lines = again.stderr.strip().splitlines()
        assert len(lines) == 1 and "No space left on device" in lines[0], lines
        assert str(out) in lines[0]
        assert out.read_bytes() == before
        assert _names(small_disk) == ["cube.nc", "filler"]
        (small_disk / "filler").unlink()


def test_a_report_onto_a_full_disk_keeps_the_previous_report(small_disk, tmp_path):
    study = tmp_path / "mine.yaml"
    study.write_text(
        "data: {cube: cube.nc}\nbaseline: d0\nfigures: [forest]\noutputs: [html, csv]\n"
        "tests: {n_resamples: 99, rank: false}\n"
    )
    make = _run(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from conftest import _random_query_cube
        from metricalc import cube as qc
        qc.save(_random_query_cube({{"d0": 0.6, "d1": 0.4}}), {str(tmp_path / "cube.nc")!r})
        """
    )
    assert make.returncode == 0, make.stderr[-2000:]
    command = f"['report', {str(study)!r}, '--out', {str(small_disk)!r}, '--no-progress']"
    first = _run("from metricalc.cli import main", f"raise SystemExit(main({command}))")
    assert first.returncode == 0, first.stderr[-2000:]
    report = small_disk / "mine" / "report"  # --out DIR: DIR/<study>/report
    before = {p.name: p.read_bytes() for p in report.iterdir() if p.is_file()}
    _fill(small_disk, leave=8 * 1024)
    again = _run("from metricalc.cli import main", f"raise SystemExit(main({command}))")
    assert again.returncode == 2, again.stderr[-2000:]
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], lines
    assert {p.name: p.read_bytes() for p in report.iterdir() if p.is_file()} == before
    assert _names(small_disk) == ["filler", "mine"]


def test_an_injected_enospc_is_an_oserror_naming_the_file_and_keeps_the_old_one(
    tmp_path, monkeypatch, make_query_cube
):
    """The same promise where no tmpfs can be mounted: the disk fills while the cube's bytes are
    written (the HDF5 file itself is built in memory, so the library never sees the error)."""
    import errno

    from metricalc import cube as qc
    from metricalc.cli import main

    path = tmp_path / "cube.nc"
    qc.save(make_query_cube({"a": 0.5, "b": 0.4}), path)
    before = path.read_bytes()

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError, match="No space left") as caught:
        qc.save(make_query_cube({"a": 0.6, "b": 0.3}, seed=4), path)
    assert caught.value.filename == str(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.nc"]
    monkeypatch.setattr(Path, "write_bytes", full)
    argv = ["db", "import-workbench", str(EXPORT), "--db", str(tmp_path / "r.sqlite"),
            "--out", str(path)]  # fmt: skip
    assert main(argv) == 2
    monkeypatch.undo()
    assert path.read_bytes() == before
