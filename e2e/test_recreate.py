"""A job deleted and applied again under the same name while its old pods still terminate.

``kubectl delete pytorchjob X --wait=false; kubectl apply -f X.yaml``: the new job's pods
have the old pods' names, and the API server answers AlreadyExists while the old ones drain.
The controller must take that for a failed create (Warning ``FailedCreatePod``, retried with
back-off) and create the new pods as soon as the old ones are gone: seconds, not the five
minutes of an expectation that only its own pod could meet.

The old pods are made slow to go: the training command traps SIGTERM and drains for
``DRAIN_SECONDS`` before exiting, well inside the termination grace period.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from trainctl.api.constants import PYTORCH_PORT_NAME

from tests.support.cluster import E2E
from tests.support.net import free_port
from tests.support.samples import containers, load_sample, named, replica_specs, set_arg

pytestmark = pytest.mark.e2e

JOB = "recreate"
PODS = (f"{JOB}-master-0", f"{JOB}-worker-0")
DRAIN_SECONDS = 15
BOUND = 60.0  # seconds from the apply to the new pods; the expectation timeout is 300

# The sample's training behind a shell that, on SIGTERM (sent to the whole process group),
# outlives the trainer by DRAIN_SECONDS, as a job flushing its state would.
DRAINING = (
    f'trap "echo [draining] seconds={DRAIN_SECONDS}; sleep {DRAIN_SECONDS}; exit 143" TERM; '
    'python samples/pytorch/train.py "$@" & wait $!'
)


def slow_to_terminate_job() -> dict[str, Any]:
    job = named(load_sample("pytorch/ddp.yaml"), JOB)
    replica_specs(job)["Worker"]["replicas"] = 1
    set_arg(job, "--steps", "5000")  # still training when it is deleted
    set_arg(job, "--checkpoint-dir", f"checkpoints/{JOB}")
    port = free_port("0.0.0.0")  # torch's store binds every address; other clusters share them
    for container in containers(job):
        container["command"] = ["sh", "-c", DRAINING, "train"]
        container["ports"] = [{"name": PYTORCH_PORT_NAME, "containerPort": port}]
    for spec in replica_specs(job).values():
        spec["template"]["spec"]["terminationGracePeriodSeconds"] = 4 * DRAIN_SECONDS
    return job


def test_a_job_applied_again_while_its_old_pods_terminate_starts_within_seconds(e2e: E2E) -> None:
    job = slow_to_terminate_job()
    gone: dict[str, float] = {}  # uid -> when its DELETED event came

    with e2e.run(job) as run:
        run.on_pod(lambda event, pod: event == "DELETED" and gone.setdefault(pod["metadata"]["uid"], time.monotonic()))
        run.wait_for("both replicas training", lambda: {ln.pod for ln in run.events("step")} >= set(PODS), 180)
        old = {name: run.uids(name)[0] for name in PODS}
        assert run.job is not None
        old_job_uid = run.job["metadata"]["uid"]

        e2e.kubectl("delete", "pytorchjob", JOB, "--wait=false")
        run.wait_for("the old pods terminating", lambda: all(
            (run.pods.get(name) or {}).get("metadata", {}).get("deletionTimestamp") for name in PODS), 60)
        applied = time.monotonic()
        e2e.kubectl.apply(job)

        new = run.wait_for("the new job's pods", lambda: (
            uids := {name: u for name in PODS for u in run.uids(name) if u != old[name]}) and len(uids) == len(PODS) and uids,
            4 * BOUND)
        started = max(run.first_seen[uid] for uid in new.values()) - applied
        # The old pods really were in the way: they drained after the new job was applied.
        assert all(gone[uid] >= applied for uid in old.values()), run.dump()
        assert started < BOUND, f"new pods {started:.0f}s after the apply\n{run.dump()}"

    listed = e2e.kubectl.json("get", "events")["items"]
    failed = [e for e in listed if e["involvedObject"].get("name") == JOB and e["reason"] == "FailedCreatePod"]
    assert failed and all(e["type"] == "Warning" for e in failed), [e["reason"] for e in listed]
    assert any("already exists" in e["message"] and old_job_uid in e["message"] for e in failed), [e["message"] for e in failed]
    print(f"\nnew pods {started:.1f}s after the apply (old pods drained {DRAIN_SECONDS}s)")
