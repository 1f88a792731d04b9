"""What ``metricalc trec-eval`` loads: the libraries it uses, not the rest of metricalc's (the
command starts in a fraction of a second; benchmarks/bench_trec_eval.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import metricalc
from metricalc.cli import VERBS, build_parser

UNUSED = ("xarray", "pandas", "scipy", "dask", "cv2", "matplotlib", "sklearn", "statsmodels",
          "seaborn", "h5py", "sqlite3", "metricalc.cube", "metricalc.stats", "metricalc.report")
"""Loaded by other verbs; ``trec-eval`` on one run needs none of them."""


def loaded_after(code: str) -> list[str]:
    """The modules of :data:`UNUSED` (or below them) that a fresh interpreter loaded running
    ``code``."""
    probe = (
        f"import sys, json\n{code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] if not m.startswith('metricalc') else m "
        f"for m in sys.modules if any(m == u or m.startswith(u + '.') for u in {UNUSED!r})}})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_import_metricalc_loads_none_of_them():
    assert loaded_after("import metricalc") == []


def test_trec_eval_loads_none_of_them(tmp_path):
    (tmp_path / "qrels.txt").write_text("q1 1.5  d1 1\nq1 1.5  d2 0\nq2 0 d3 2\n")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d3 2 1.0 r\nq2 Q0 d3 1 0.5 r\n")
    code = (
        "from metricalc.cli import main\n"
        f"main(['trec-eval', {str(tmp_path / 'qrels.txt')!r}, {str(tmp_path / 'run.txt')!r}, "
        "'-m', 'all_trec', '-q'])"
    )
    assert loaded_after(code) == []


def test_trec_eval_help_loads_no_array_library():
    probe = (
        "import sys, json\nfrom metricalc.cli import main\n"
        "try:\n    main(['trec-eval', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps([m for m in ('numpy', 'pyarrow', 'metricalc.retrieval') "
        "if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_every_public_name_is_listed_and_imports():
    assert set(metricalc.__all__) <= set(dir(metricalc))
    namespace: dict[str, object] = {}
    exec(f"from metricalc import {', '.join(metricalc.__all__)}", namespace)
    assert all(namespace[name] is getattr(metricalc, name) for name in metricalc.__all__)


def test_the_parser_of_one_verb_has_that_verb_only():
    def verbs(parser):
        (action,) = [a for a in parser._actions if a.dest == "verb"]
        return list(action.choices)

    assert verbs(build_parser()) == list(VERBS)
    for verb in VERBS:
        assert verbs(build_parser(verb)) == [verb]


@pytest.mark.parametrize("argv", [["--version"], ["trec-eval", "--help"]])
def test_version_and_help_print_on_stdout(argv, capsys):
    from metricalc.cli import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    out = capsys.readouterr().out
    expected = "metricalc 0" if argv == ["--version"] else "usage: metricalc trec-eval"
    assert out.startswith(expected)
