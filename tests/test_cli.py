"""The ``metricalc`` command, run as a user runs it: in a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import metricalc


def run(*args: str, executable: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    command = executable or [sys.executable, "-m", "metricalc"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


def console_script() -> list[str]:
    """The installed ``metricalc`` entry point next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("metricalc")
    found = str(beside) if beside.exists() else shutil.which("metricalc")
    if found is None:
        pytest.skip("the metricalc console script is not installed")
    return [found]


def test_version_matches_package_metadata():
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"metricalc {metricalc.__version__}"
    assert metricalc.__version__ != "0+unknown"


def test_help_lists_the_verbs():
    result = run("--help")
    assert result.returncode == 0
    assert "usage: metricalc" in result.stdout
    assert "demo" in result.stdout


def test_console_script_runs():
    result = run("--version", executable=console_script())
    assert result.returncode == 0
    assert result.stdout.startswith("metricalc ")


def test_demo_runs_and_says_what_it_does():
    result = run("demo")
    assert result.returncode == 0
    assert "built-in benchmark" in result.stdout


def test_unknown_verb_is_a_usage_error_without_traceback():
    result = run("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_verb_prints_help():
    result = run()
    assert result.returncode == 0
    assert "usage: metricalc" in result.stdout
