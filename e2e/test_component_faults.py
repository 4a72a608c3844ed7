"""The cluster's own processes fail under a training job: the controller, the API server.

A controller killed with SIGKILL loses its caches and expectations; when it comes back it
must adopt the pods that exist and create only the missing ones (each pod name gets exactly
one uid). The embedded API server killed and restarted on the same directory must come
back with everything it had acknowledged; the job then completes.
"""

from __future__ import annotations

import pytest

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

JOB = "pytorch-ddp"
PODS = {f"{JOB}-master-0", f"{JOB}-worker-0", f"{JOB}-worker-1"}


def longer_ddp() -> dict:
    job = load_sample("pytorch/ddp.yaml")
    set_arg(job, "--steps", "200")  # ~13 s of training: room for a fault in the middle
    return job


def test_controller_killed_twice_mid_job_creates_no_duplicate_pods(e2e: E2E) -> None:
    controller = e2e.cluster.controller
    assert controller is not None
    with e2e.run(longer_ddp()) as run:
        # First while it is creating the pods, then while they train.
        run.wait_for("a first pod", lambda: run.created, 60)
        controller.kill()
        controller.start()
        run.wait_line("step 20", lambda ln: ln.event == "step" and ln.int("step") >= 20, 120)
        controller.kill()
        controller.start()

        finished = run.wait_succeeded(timeout=180)
        assert condition(finished, "Succeeded")
        assert {name for name, _ in run.created} == PODS, run.dump()
        assert len(run.created) == len(PODS), f"duplicate pod creations: {run.created}"
        assert not finished["status"].get("restartCount"), run.dump()
        assert {ln.pod for ln in run.events("done")} == PODS, run.dump()


def test_api_server_killed_and_restarted_loses_nothing(e2e: E2E) -> None:
    apiserver = e2e.cluster.apiserver
    with e2e.run(longer_ddp()) as run:
        run.wait_line("step 20", lambda ln: ln.event == "step" and ln.int("step") >= 20, 120)
        before_job = run.job
        assert before_job is not None
        before_pods = {name: pod["metadata"]["uid"] for name, pod in run.pods.items()}
        assert set(before_pods) == PODS, run.dump()

        apiserver.kill()
        apiserver.start()

        finished = run.wait_succeeded(timeout=180)
        assert finished["metadata"]["uid"] == before_job["metadata"]["uid"]
        assert finished["status"]["startTime"] == before_job["status"]["startTime"]
        created = condition(before_job, "Created")
        assert created is not None and condition(finished, "Created") == created, "conditions written before the crash are kept"
        assert {name: pod["metadata"]["uid"] for name, pod in run.pods.items()} == before_pods, run.dump()
        assert len(run.created) == len(PODS), f"pods recreated: {run.created}"
        assert {ln.pod for ln in run.events("done")} == PODS, run.dump()
    # kubectl, with a cold discovery cache, sees the same objects.
    assert e2e.kubectl("get", "pytorchjob", JOB, "-o", "jsonpath={.metadata.uid}") == before_job["metadata"]["uid"]
