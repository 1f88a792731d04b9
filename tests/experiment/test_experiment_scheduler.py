"""Dask scheduling of the per-pair work: every scheduler gives identical results."""

from __future__ import annotations

import threading

import pytest
from dask import delayed

from metricalc.errors import InvalidInputError
from metricalc.experiment import Scheduler, run
from metricalc.experiment.scheduler import check_scheduler
from tests.experiment_helpers import assert_same_run

SMALL = ["data.scenes=[camera]", "data.size=256", "model.max_keypoints=150"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    outputs = tmp_path_factory.mktemp("outputs")
    result = run("hpatches", "orb", overrides=SMALL, outputs=outputs, scheduler="synchronous")
    assert result.status == "ok", result.error
    return outputs, result


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_local_schedulers_give_identical_results(reference, scheduler):
    outputs, expected = reference
    result = run(
        "hpatches",
        "orb",
        tag=scheduler,
        overrides=SMALL,
        outputs=outputs,
        scheduler=scheduler,
        workers=2,
    )
    assert result.status == "ok", result.error
    assert_same_run(result, expected)


def test_a_distributed_cluster_gives_identical_results(reference):
    distributed = pytest.importorskip("distributed")
    outputs, expected = reference
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, protocol="tcp", dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://")
        result = run(
            "hpatches", "orb", tag="cluster", overrides=SMALL, outputs=outputs, scheduler=address
        )
    assert result.status == "ok", result.error
    assert_same_run(result, expected)


def test_results_are_handed_over_in_the_calling_thread_as_they_finish():
    main = threading.get_ident()
    seen = []

    def record(name, value):
        seen.append((name, value, threading.get_ident()))

    with Scheduler("threads", workers=2) as scheduler:
        tasks = {
            f"t{i}": delayed(pow)(i, 2, dask_key_name=scheduler.key("t", i)) for i in range(6)
        }
        scheduler.run(tasks, record)
    assert sorted((n, v) for n, v, _ in seen) == [(f"t{i}", i * i) for i in range(6)]
    assert {thread for _, _, thread in seen} == {main}


def _fail(x):
    raise ValueError(f"task {x} failed")


@pytest.mark.parametrize("spec", ["synchronous", "threads"])
def test_a_failing_task_raises_after_the_finished_ones_were_handed_over(spec):
    seen = []
    with Scheduler(spec, workers=1) as scheduler:
        tasks = {"ok": delayed(abs)(-3, dask_key_name=scheduler.key("ok"))}
        tasks["bad"] = delayed(_fail)(1, dask_key_name=scheduler.key("bad"))
        with pytest.raises(ValueError, match="task 1 failed"):
            scheduler.run(tasks, lambda name, value: seen.append(name))
    assert seen == ["ok"]  # the task before the failing one (one worker, graph order)


@pytest.mark.parametrize("spec", ["threads", "processes", "synchronous", "tcp://10.0.0.1:8786"])
def test_scheduler_names(spec):
    assert check_scheduler(spec) == spec


@pytest.mark.parametrize("spec", ["thread", "", "local", "http:/x", 3])
def test_bad_scheduler_names(spec):
    with pytest.raises(InvalidInputError, match="scheduler"):
        check_scheduler(spec)
    with pytest.raises(InvalidInputError, match="scheduler"):
        run("hpatches", "sift", scheduler=spec)


def test_bad_worker_counts():
    with pytest.raises(InvalidInputError, match="workers"):
        Scheduler("threads", workers=0)
