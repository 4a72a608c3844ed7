"""restartPolicy ExitCode on real processes: retry what was killed, fail on what is broken.

The sample's worker 1 (RANK 2) leaves at step 25 with the exit code in ``INJECT_FAULT``; its
peers lose their gloo connection and leave with 143 (``--peer-failure-exit-code``).
"""

from __future__ import annotations

import pytest

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.pods import container_status
from tests.support.samples import load_sample, set_env

pytestmark = pytest.mark.e2e

JOB = "pytorch-exitcode"
MASTER, W0, W1 = f"{JOB}-master-0", f"{JOB}-worker-0", f"{JOB}-worker-1"


def test_a_worker_killed_with_137_is_recreated_and_the_job_finishes(e2e: E2E) -> None:
    job = load_sample("pytorch/exitcode.yaml")  # INJECT_FAULT rank=2,step=25,exit=137
    with e2e.run(job) as run:
        fault = run.wait_line("the injected fault", lambda ln: ln.event == "fault", timeout=120)
        assert (fault.pod, fault.fields["exit_code"]) == (W1, "137")
        run.wait_for("a new worker-1 pod", lambda: len(run.uids(W1)) >= 2, 60)

        finished = run.wait_succeeded(timeout=180)
        assert finished["status"].get("restartCount", 0) >= 1, run.dump()
        resumed = [ln for ln in run.events("resume", pod=W1)]
        assert resumed and resumed[-1].int("step") == 20, f"resumed from the step-20 checkpoint\n{run.dump()}"
        # The job succeeds when the Master does; a worker may still be printing its last lines.
        run.wait_for("a done line from every replica", lambda: len(run.events("done")) >= 3, 60)
        done = run.events("done")
        assert sorted(ln.pod for ln in done) == sorted([MASTER, W0, W1]), run.dump()
        assert {ln.int("world_size") for ln in done} == {3}
        run.wait_for("the recreated worker-1 to exit 0", lambda: (
            container_status(run.pods[W1]).get("state") or {}).get("terminated", {}).get("exitCode") == 0, 30)


def test_a_worker_exiting_1_fails_the_job_and_running_pods_are_cleaned(e2e: E2E) -> None:
    job = load_sample("pytorch/exitcode.yaml")
    set_env(job, "INJECT_FAULT", "rank=2,step=25,exit=1", rtype="Worker")
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "Running"}
    with e2e.run(job) as run:
        outcome = run.wait_finished(timeout=120)
        assert outcome == "Failed", run.dump()
        failed = condition(run.job, "Failed")
        assert failed and "Worker" in failed["message"], run.dump()
        assert run.job["status"].get("completionTime"), run.dump()
        assert not condition(run.job, "Succeeded")

        # cleanPodPolicy Running: whatever still ran is deleted; the failed worker stays.
        run.wait_for("the Running and Pending pods deleted", lambda: not any(
            pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") in ("Running", "Pending")
            for pod in run.pods.values()), 60)
        assert run.pods[W1]["status"]["phase"] == "Failed", run.dump()
        assert container_status(run.pods[W1])["state"]["terminated"]["exitCode"] == 1, run.dump()
        assert all(phase in ("Running", "Pending") for phase in run.deleted.values()), run.deleted
        assert len(run.uids(W1)) == 1, "a non-retryable exit is never retried"
