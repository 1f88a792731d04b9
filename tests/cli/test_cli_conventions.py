"""What every verb of the ``metricalc`` command does alike: help that shows the defaults, and a
quiet stop when the reader of its output goes away (``metricalc ... --json | head``)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from metricalc.benchmarks.hpatches_sequences import cli as keypoints
from metricalc.cli import SIGPIPE_EXIT, build_parser, main
from tests.store_cases import make_cube


def all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every sub-command parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += all_parsers(sub)
    return found


def test_every_help_shows_every_default():
    parsers = all_parsers(build_parser())
    assert len(parsers) > 20  # the verbs and their sub-verbs
    checked = 0
    for parser in parsers:
        formatter = parser._get_formatter()
        for action in parser._actions:
            default = action.default
            if not action.option_strings or default is None or default is False:
                continue
            if default == argparse.SUPPRESS:
                continue
            paragraph = " ".join(formatter._format_action(action).split())  # the --help lines
            assert "default" in paragraph, (parser.prog, paragraph)
            if "(default: " in paragraph:
                assert f"(default: {default}" in paragraph, (parser.prog, paragraph)
            checked += 1
    assert checked > 30


def test_a_closed_output_stops_quietly_in_process(capsys, monkeypatch):
    def closed(args: argparse.Namespace) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(keypoints, "_metrics", closed)  # the verb's output finds no reader
    assert main(["metrics", "cube.nc"]) == SIGPIPE_EXIT
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("verb", ["metrics"])
def test_json_into_a_closed_pipe_exits_quietly(tmp_path, verb):
    path = tmp_path / "cube.nc"
    make_cube().to_netcdf(path, engine="h5netcdf")
    ks = ",".join(str(k) for k in range(1, 400))  # about 200 kB of JSON: more than a pipe holds
    process = subprocess.Popen(
        [sys.executable, "-m", "metricalc", verb, str(path), "--json", "--k", ks],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(1) == b"{"  # like head -c 1
    process.stdout.close()
    error = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == SIGPIPE_EXIT
    assert error == ""  # no BrokenPipeError traceback


def test_a_file_system_error_is_one_line_naming_the_path(tmp_path, capsys):
    """An OSError of a verb (here: a file where a parent folder of the output should be) is a
    one-line error naming the path, exit 2, no traceback."""
    taken = tmp_path / "taken"
    taken.write_text("a file, not a folder")
    assert main(["keypoints", "make-dataset", str(taken / "data"), "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"metricalc: error: cannot use {taken}") and "Not a directory" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "prog", "unknown"),
    [
        (["keypoints", "eval", "--data", "d", "--out", "c.nc", "--varient"],
         "metricalc keypoints eval", "--varient"),
        (["compare", "cube.nc", "--metirc", "ap"], "metricalc compare", "--metirc ap"),
        (["db", "list", "--tga", "x"], "metricalc db list", "--tga x"),
    ],
)
def test_an_unknown_option_shows_the_usage_of_its_verb(argv, prog, unknown, capsys):
    """A typo is the verb's usage error, not the top-level usage of every verb."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"usage: {prog} ")
    assert err[-1] == f"{prog}: error: unrecognized arguments: {unknown}"


def test_no_two_verbs_differ_only_in_word_order():
    parser = build_parser()
    verbs = {name: sub for action in parser._actions
             if isinstance(action, argparse._SubParsersAction)
             for name, sub in action.choices.items()}
    commands = {(verb, kind) for verb, sub in verbs.items() for action in sub._actions
                if isinstance(action, argparse._SubParsersAction) for kind in action.choices}
    assert ("run", "hpatches") in commands and ("keypoints", "eval") in commands
    assert not [(a, b) for a, b in commands if (b, a) in commands]


def test_the_old_spelling_eval_runs_run_with_a_note(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["eval", "hpatches", "--help"])
    captured = capsys.readouterr()
    assert stop.value.code == 0
    assert captured.err == "metricalc: note: `metricalc eval` is now `metricalc run`\n"
    assert captured.out.startswith("usage: metricalc run hpatches")
