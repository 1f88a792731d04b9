"""``pip install metricalc`` without extras: every metric works, the rest names its extra.

The optional dependencies (OpenCV, scikit-image, dask, OmegaConf, matplotlib, seaborn, Jinja2)
are marked absent in a fresh interpreter (tests/light_core_calls.py says how); every public
metric computed there must equal the same call with them installed and the values worked out
by hand below; every public name of a subpackage either resolves or raises the one-line
:class:`~metricalc.errors.MissingExtraError` naming its extra, and so does a command-line verb.
``pyproject.toml``'s extras must install what :data:`metricalc.lazy.EXTRAS` says they do.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions, requires
from pathlib import Path
from typing import Any

import pytest

from metricalc.cli import VERB_EXTRAS
from metricalc.lazy import EXTRAS
from tests.light_core_calls import BLOCKED, CALLS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("light_core_calls.py")


def run_calls(*flags: str) -> dict[str, Any]:
    """The output of tests/light_core_calls.py run in a fresh interpreter with ``flags``."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *flags], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    output: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return output


@pytest.fixture(scope="module")
def without_extras() -> dict[str, Any]:
    return run_calls("--without-extras")


def test_every_public_function_of_metricalc_is_called():
    import inspect
    from importlib.util import find_spec

    import metricalc

    names = [n for n in metricalc.__all__ if n.startswith("_") or not find_spec(f"metricalc.{n}")]
    functions = {n for n in names if inspect.isfunction(getattr(metricalc, n))}
    assert functions, "found no public function: the test looks in the wrong place"
    assert functions <= set(CALLS), f"add {sorted(functions - set(CALLS))} to CALLS"


def test_every_metric_without_the_extras_equals_the_metric_with_them(without_extras):
    assert without_extras["loaded"] == []  # nothing imported an extra's module after all
    assert without_extras["results"] == run_calls("--calls-only")["results"]


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval, by its formula."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_the_metrics_without_the_extras_are_right(without_extras):
    got = without_extras["results"]
    # tp 3, fp 1, fn 1, tn 5
    rates = {"tpr": 3 / 4, "fpr": 1 / 6, "tnr": 5 / 6, "precision": 3 / 4, "recall": 3 / 4,
             "accuracy": 8 / 10, "f1": 3 / 4, "youden_j": 3 / 4 - 1 / 6}
    assert {name: got[name] for name in rates} == pytest.approx(rates)
    low, high = wilson(3, 4)
    assert got["rate_confint"] == pytest.approx({"estimate": 0.75, "low": low, "high": high})
    assert got["auc"] == pytest.approx(0.75)  # trapezoids (0, 0)-(0.5, 1)-(1, 1)
    # positives 0.9, 0.7, 0.7 against negatives 0.8, 0.2: 4 of 6 pairs ordered
    assert got["roc_auc"] == pytest.approx(4 / 6)
    assert got["average_precision"][0] == pytest.approx((1 + 2 / 3) / 2)
    # distances 0.1, 0.5, 0.3, 0.3 and the relevant one 0.3: one better, one tied
    assert got["rank_stats"] == [[1], [1]]
    # better 1, ties 1: the mean of 1/2 and 1/3, rank 1 + 1 + 1/2
    assert got["ap_from_rank_stats"][1] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert got["rank_from_rank_stats"][1] == 2.5
    # the small cube's APs are 1 / (better + 1): a 1, 1/2, 1/3 (and no relevant); b 1/2, 1, 1, 1/4
    assert got["metric_set"]["true_map_micro"] == pytest.approx([11 / 18, 0.6875])
    assert got["cube.save+open_cube"][0] == pytest.approx([1, 1 / 2, 1 / 3, None])
    assert got["cube.save+open_cube"][1] == pytest.approx([1 / 2, 1, 1, 1 / 4])
    # q1: relevant at ranks 1 and 3 -> (1 + 2/3) / 2; q2: relevant at rank 1
    assert got["retrieval.evaluate"] == pytest.approx({"map": (5 / 6 + 1) / 2, "P_2": 0.5})
    # 7 scenes favour a, one ties: the exact sign-flip p-value is 2 / 2**7
    assert got["stats.compare"]["pvalue"] == pytest.approx([2 / 2**7])
    # errors 0, 2 (of 4) below 5 degrees: (2 * (1/4 + 1/2) / 2 + 3 * 1/2) / 5
    assert got["pose.pose_auc"][0] == pytest.approx(0.45)


NEEDS = {"keypoints": "vision", "experiment": "experiments"}
"""Subpackages that cannot be imported without an extra, and that extra."""

LIGHT = ("cube", "decompose", "detection", "retrieval", "stats", "store")
"""Subpackages of which every public name works without an extra."""


def test_every_public_name_resolves_or_names_its_extra(without_extras):
    names = without_extras["names"]
    assert set(NEEDS) | set(LIGHT) <= set(names)
    message = re.compile(
        r'MissingExtraError: metricalc\.\S+ needs .+ \(module (\w+)\), which is not installed: '
        r'pip install "metricalc\[(\w+)\]"'
    )
    for package, outcomes in names.items():
        for name, outcome in outcomes.items():
            where = f"metricalc.{package}.{name}"
            if outcome != "ok":
                found = message.fullmatch(outcome)
                assert found, f"{where}: {outcome}"
                assert EXTRAS[found[1]][0] == found[2], f"{where}: {outcome}"
    for package, extra in NEEDS.items():
        assert names[package][""].endswith(f'"metricalc[{extra}]"')
    for package in LIGHT:
        assert set(names[package].values()) == {"ok"}, package


def without_extras_run(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter with the extras' modules marked absent."""
    block = f"import sys\nfor name in {BLOCKED!r}:\n    sys.modules[name] = None\n"
    return subprocess.run(
        [sys.executable, "-c", block + code], capture_output=True, text=True, cwd=ROOT
    )


def test_a_verb_that_needs_an_extra_says_which_in_one_line(tmp_path):
    code = (
        "from metricalc.cli import main\n"
        f"raise SystemExit(main(['demo', '--quick', '--out', {str(tmp_path)!r}]))"
    )
    done = without_extras_run(code)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "metricalc: error: metricalc demo needs OpenCV (module cv2), which is not installed: "
        'pip install "metricalc[demo]"\n'
    )
    assert list(tmp_path.iterdir()) == []  # stopped before writing anything


def test_chunks_without_dask_say_which_extra(tmp_path):
    code = (
        "from metricalc import cube as qc\n"
        "from metricalc.cli import main\n"
        "from tests.light_core_calls import small_cube\n"
        f"qc.save(small_cube(), {str(tmp_path / 'c.nc')!r})\n"
        f"raise SystemExit(main(['metrics', {str(tmp_path / 'c.nc')!r}, '--chunks', '2']))"
    )
    done = without_extras_run(code)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "metricalc: error: --chunks 2 needs dask (module dask), which is not installed: "
        'pip install "metricalc[distributed]"\n'
    )


def test_import_metricalc_and_a_metric_load_no_extra():
    code = (
        "import sys, json, metricalc\n"
        "metricalc.average_precision([1, 0, 1], [0.9, 0.8, 0.7])\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.partition('.')[0] in {BLOCKED!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


# ---------------------------------------------------------------------------------------------
# pyproject.toml: the extras install what metricalc.lazy.EXTRAS and the CLI say they do


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> tuple[str, set[str]]:
    """The normalized distribution name of a requirement string and the extras it asks for."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
    assert found, requirement
    return normalized(found[1]), {e.strip() for e in (found[2] or "").split(",") if e.strip()}


def extra_requirements(distribution: str, extras: set[str]) -> set[str]:
    """The distributions that ``extras`` of the installed ``distribution`` add (from its
    metadata): ``dask[distributed]`` adds ``distributed``."""
    added = set()
    for requirement in requires(distribution) or []:
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if marker and normalized(marker[1]) in {normalized(e) for e in extras}:
            added.add(requirement_name(requirement)[0])
    return added


@cache
def project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def installs(extra: str) -> set[str]:
    """The distributions ``pip install "metricalc[extra]"`` asks for (``""``: no extra),
    following the extras that name metricalc's own."""
    extras = project()["optional-dependencies"]
    asked = [*project()["dependencies"], *(extras[extra] if extra else [])]
    names: set[str] = set()
    for requirement in asked:
        name, wanted = requirement_name(requirement)
        if name == "metricalc":
            for other in wanted:
                names |= installs(other)
        else:
            names |= {name} | extra_requirements(name, wanted)
    return names


@cache
def installed_modules() -> dict[str, list[str]]:
    """Top-level module -> the installed distributions providing it (read once: it scans every
    installed distribution)."""
    return dict(packages_distributions())


def distributions(module: str) -> set[str]:
    """The installed distributions that provide the top-level ``module``."""
    provided = installed_modules().get(module, [])
    return {normalized(d) for d in provided}


@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_the_extra_named_for_a_module_installs_it_and_the_core_does_not(module):
    extra = EXTRAS[module][0]
    assert distributions(module), f"{module} is not installed here: is the test extra installed?"
    assert distributions(module) & installs(extra), f"[{extra}] does not install {module}"
    assert not distributions(module) & installs(""), f"the core installs {module}"


def test_the_test_extra_and_all_install_every_extra():
    every = set().union(*(installs(extra) for extra, _ in EXTRAS.values()))
    assert every <= installs("all")
    assert installs("all") <= installs("test")


@pytest.mark.parametrize(("verb", "extra"), sorted(VERB_EXTRAS.items()))
def test_a_verb_s_extra_installs_every_extra_it_needs(verb, extra):
    experiments = ("omegaconf", "vision", "distributed", "reports")  # the package imports them
    needs = {"demo": ("vision", "reports"), "run": experiments, "inspect": experiments}
    for part in needs[verb]:
        wanted = installs(part) if part in project()["optional-dependencies"] else {part}
        assert wanted <= installs(extra), (verb, part)


def test_the_readme_s_first_command_installs_the_demo_extra():
    first = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)[0]
    assert 'pip install ".[demo]"' in first and "metricalc demo" in first
