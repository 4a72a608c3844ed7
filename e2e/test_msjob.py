"""The MSJob data-parallel sample on CPU: real MindSpore, ms-operator's policies on real pods.

Both Workers must end with identical weights (the gradients were all-reduced). The success
policy decides when the job is over, and the clean-pod policy which pods are left then:
``None`` keeps every pod, ``Running`` deletes only the ones still Running or Pending at
that moment (typically the Scheduler, which exits a few seconds after the Workers), ``All``
deletes them all (msjob-mindspore spec §2.6, §2.8).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.observer import JobObserver
from tests.support.samples import load_sample

pytestmark = pytest.mark.e2e

JOB = "ms-dataparallel-cpu"
SCHEDULER, W0, W1 = f"{JOB}-scheduler-0", f"{JOB}-worker-0", f"{JOB}-worker-1"


@pytest.fixture(autouse=True)
def mindspore_installed() -> None:
    """The pods run the interpreter that runs the tests: say so at once rather than time out."""
    assert importlib.util.find_spec("mindspore"), "MindSpore is not installed here: pip install -e '.[mindspore]'"


def check_training(run: JobObserver) -> None:
    done = {ln.pod: ln for ln in run.events("done")}
    assert set(done) == {W0, W1}, run.dump()
    assert done[W0].fields["weights"] == done[W1].fields["weights"], run.dump()
    assert done[W0].fields["bias"] == done[W1].fields["bias"], run.dump()
    assert {ln.fields["world_size"] for ln in done.values()} == {"2"}
    assert {ln.fields["rank"] for ln in done.values()} == {"0", "1"}
    assert [ln.fields["allreduced_weights_match"] for ln in run.events("check")] == ["True", "True"], run.dump()


def phases(run: JobObserver) -> dict[str, str]:
    return {name: (pod.get("status") or {}).get("phase", "") for name, pod in run.pods.items()}


@pytest.mark.parametrize(
    "success_policy, clean_pod_policy",
    [("AllWorkers", "None"), ("", "Running"), ("AllWorkers", "All")],
    ids=["AllWorkers-None", "default-Running", "AllWorkers-All"],
)
def test_data_parallel_sample_trains_identical_weights_and_honours_the_policies(
        e2e: E2E, success_policy: str, clean_pod_policy: str) -> None:
    job = load_sample("mindspore/msjob-cpu.yaml")
    if success_policy:
        job["spec"]["successPolicy"] = success_policy
    else:
        job["spec"].pop("successPolicy", None)  # the default: worker 0 (or all workers) succeeded
    job["spec"]["runPolicy"]["cleanPodPolicy"] = clean_pod_policy

    with e2e.run(job) as run:
        at_success: dict[str, str] = {}

        def succeeded() -> bool:
            if condition(run.job, "Succeeded") and not at_success:
                at_success.update(phases(run))
            return bool(at_success) or bool(condition(run.job, "Failed"))

        run.wait_for("Succeeded condition", succeeded, timeout=180)
        finished = run.wait_succeeded(timeout=5)
        assert finished["status"].get("completionTime"), run.dump()
        if success_policy == "AllWorkers":
            assert at_success.get(W0) == at_success.get(W1) == "Succeeded", f"{at_success}\n{run.dump()}"
        else:
            assert at_success.get(W0) == "Succeeded", f"{at_success}\n{run.dump()}"

        if clean_pod_policy == "All":
            run.wait_for("every pod deleted", lambda: not run.pods, 60)
            assert set(run.deleted) == {SCHEDULER, W0, W1}
        elif clean_pod_policy == "Running":
            run.wait_for("the Running and Pending pods deleted", lambda: not any(
                pod["metadata"].get("deletionTimestamp") or phase in ("Running", "Pending")
                for pod, phase in zip(run.pods.values(), phases(run).values(), strict=True)), 60)
            assert all(phase in ("Running", "Pending") for phase in run.deleted.values()), run.deleted
            assert set(phases(run).values()) == {"Succeeded"} and W0 in run.pods, run.dump()
        else:
            run.wait_for("every pod finished", lambda: set(phases(run).values()) == {"Succeeded"}, 60)
            assert set(run.pods) == {SCHEDULER, W0, W1} and not run.deleted, run.dump()
        run.wait_logs_drained()
        check_training(run)
