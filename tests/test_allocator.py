"""keep_freed_memory: glibc's thresholds for the demo and keypoints eval."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

CALL = "from metricalc.allocator import keep_freed_memory; print(keep_freed_memory())"
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _run(env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", CALL], env=clean | env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_glibc_takes_every_setting():
    assert _run({}) == "True"


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_glibc_takes_the_heap_only_settings_of_trec_eval():
    heap_only = CALL.replace("keep_freed_memory()", "keep_freed_memory(heap_only=True)")
    done = subprocess.run([sys.executable, "-c", heap_only], capture_output=True, text=True,
                          check=True, env={k: v for k, v in os.environ.items()
                                           if not k.startswith("MALLOC_")})
    assert done.stdout.strip() == "True"


def test_a_malloc_environment_variable_wins():
    assert _run({"MALLOC_ARENA_MAX": "2"}) == "False"


def test_the_demo_calls_it_before_its_work(monkeypatch, tmp_path):
    from metricalc import allocator
    from metricalc.benchmarks.hpatches_sequences import demo
    from metricalc.cli import main

    calls = []
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: (_ for _ in ()).throw(SystemExit(7)))
    with pytest.raises(SystemExit):
        main(["demo", "--out", str(tmp_path / "d"), "--no-progress"])
    assert calls == [1]


def test_trec_eval_asks_for_the_heap_only_settings(monkeypatch, tmp_path):
    from metricalc import allocator
    from metricalc.cli import main

    calls = []
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda **k: calls.append(k) or True)
    assert main(["trec-eval", str(tmp_path / "no-qrels"), str(tmp_path / "no-run")]) == 2
    assert calls == [{"heap_only": True}]
