"""A job deleted and applied again under the same name while its old pods still terminate.

``kubectl delete pytorchjob X --wait=false; kubectl apply -f X.yaml``: the new job's pods
have the old pods' names, and the API server answers AlreadyExists while the old ones drain.
The controller must take that for a failed create (Warning ``FailedCreatePod`` naming the old
job, retried with back-off) and create the new pods as soon as the old ones are gone: seconds,
not the five minutes of an expectation that only its own pod could meet.

The old pods drain until the test lets them go: the training command traps SIGTERM (sent to
the whole process group) and waits for a release file, as a job flushing its state would.
So the controller meets the old pods whatever the load, and the test releases them only once
it has reported the failed create.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from trainctl.api.constants import PYTORCH_PORT_NAME

from tests.support.cluster import E2E
from tests.support.net import free_port
from tests.support.pods import pod_scratch
from tests.support.samples import containers, load_sample, named, replica_specs, set_arg
from tests.support.waiting import wait_on

pytestmark = pytest.mark.e2e

JOB = "recreate"
PODS = (f"{JOB}-master-0", f"{JOB}-worker-0")
BOUND = 60.0  # seconds from the old pods' going to the new pods; the expectation timeout is 300
DRAIN_LIMIT = 300  # seconds a draining pod waits for its release at most


def draining(release: Path) -> str:
    """The sample's training behind a shell that, on SIGTERM, outlives the trainer until
    ``release`` exists."""
    return (
        f'drain() {{ echo "[draining]"; i=0; while [ ! -e {release} ] && [ "$i" -lt {DRAIN_LIMIT} ]; '
        'do sleep 1; i=$((i+1)); done; exit 143; }; '
        'trap drain TERM; python samples/pytorch/train.py "$@" & wait $!'
    )


def slow_to_terminate_job(release: Path) -> dict[str, Any]:
    job = named(load_sample("pytorch/ddp.yaml"), JOB)
    replica_specs(job)["Worker"]["replicas"] = 1
    set_arg(job, "--steps", "5000")  # still training when it is deleted
    set_arg(job, "--checkpoint-dir", f"checkpoints/{JOB}")
    port = free_port("0.0.0.0")  # torch's store binds every address; other clusters share them
    for container in containers(job):
        container["command"] = ["sh", "-c", draining(release), "train"]
        container["ports"] = [{"name": PYTORCH_PORT_NAME, "containerPort": port}]
    for spec in replica_specs(job).values():
        spec["template"]["spec"]["terminationGracePeriodSeconds"] = 2 * DRAIN_LIMIT
    return job


def failed_creates(e2e: E2E) -> list[dict[str, Any]]:
    listed = e2e.kubectl.json("get", "events")["items"]
    return [e for e in listed if e["involvedObject"].get("name") == JOB and e["reason"] == "FailedCreatePod"]


def test_a_job_applied_again_while_its_old_pods_terminate_starts_within_seconds(e2e: E2E) -> None:
    release = pod_scratch(e2e.cluster.directory) / f"{JOB}-{uuid.uuid4().hex[:6]}.release"  # the pods see it
    job = slow_to_terminate_job(release)
    gone: dict[str, float] = {}  # uid -> when its DELETED event came

    try:
        with e2e.run(job) as run:
            run.on_pod(lambda event, pod: event == "DELETED" and gone.setdefault(pod["metadata"]["uid"], time.monotonic()))
            run.wait_for("both replicas training", lambda: {ln.pod for ln in run.events("step")} >= set(PODS), 180)
            old = {name: run.uids(name)[0] for name in PODS}
            assert run.job is not None
            old_job_uid = run.job["metadata"]["uid"]

            e2e.kubectl("delete", "pytorchjob", JOB, "--wait=false")
            run.wait_for("the old pods terminating", lambda: all(
                (run.pods.get(name) or {}).get("metadata", {}).get("deletionTimestamp") for name in PODS), 60)
            e2e.kubectl.apply(job)

            # The old pods hold their names until released: the controller's create must fail, and say why.
            failed = wait_on(threading.Condition(), lambda: failed_creates(e2e), 180, recheck=1.0)
            assert failed, f"no FailedCreatePod while the old pods drained\n{run.dump()}"
            assert all(e["type"] == "Warning" for e in failed), failed
            assert any("already exists" in e["message"] and old_job_uid in e["message"] for e in failed), [e["message"] for e in failed]
            assert not gone, f"an old pod went before its release\n{run.dump()}"

            release.touch()
            new = run.wait_for("the new job's pods", lambda: (
                uids := {name: u for name in PODS for u in run.uids(name) if u != old[name]}) and len(uids) == len(PODS) and uids,
                DRAIN_LIMIT)
            vacated = max(gone[uid] for uid in old.values())
            started = max(run.first_seen[uid] for uid in new.values()) - vacated
            assert started < BOUND, f"new pods {started:.0f}s after the old ones went\n{run.dump()}"
    finally:
        release.touch()  # never leave a pod draining for the next test
    print(f"\nnew pods {started:.1f}s after the old ones went")
