"""A closed rendezvous: a replica that joins it after its group ended gets a fresh store.

The scenario behind it: an elastic job's agents finish (torchrun closes the rendezvous on
trainctl's store) and the pod's node dies during what the command does next (an upload).
The replacement's torchrun finds the rendezvous closed and exits 1 at every restart. The
agents' container reports the end of a failed run's log, so the controller sees the
``RendezvousClosedError``, replaces the store, and the next run resumes from the job's
checkpoint; the job ends, and nothing is counted failed.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from trainctl.controller.reconcile import rendezvous
from trainctl.controller.reconcile.children import rfc3339
from trainctl.controller.reconcile.plan import delete_events

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at, by_name, conditions, node

CLOSED = """Traceback (most recent call last):
  File ".../torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", line 677, in run
    raise RendezvousClosedError
torch.distributed.elastic.rendezvous.api.RendezvousClosedError
"""
FAILED_GROUP = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED\n"
STORE = "el-rdzv"
W0, W1 = "el-worker-0", "el-worker-1"


def elastic(workers: int = 1, restart: str = "OnFailure", **policy: Any) -> dict[str, Any]:
    job = pytorchjob("el", master=False, workers=workers, restart=restart)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, **policy}
    return job


def run(started: float, *, code: Optional[int] = None, message: str = "") -> dict[str, Any]:
    """A container state: running since ``started``, or terminated with ``code`` and ``message``."""
    if code is None:
        return {"running": {"startedAt": rfc3339(at(started))}}
    terminated = {"exitCode": code, "reason": "Error", "startedAt": rfc3339(at(started)),
                  "finishedAt": rfc3339(at(started + 2))}
    if message:
        terminated["message"] = message
    return {"terminated": terminated}


def set_container(cluster: Cluster, name: str, phase: str, state: dict[str, Any],
                  last: Optional[dict[str, Any]] = None, container: str = "pytorch") -> None:
    status = {"name": container, "state": state, "lastState": last or {}, "restartCount": 1 if last else 0}
    cluster.pods[name]["status"] = {"phase": phase, "containerStatuses": [status]}


def store_running_since(cluster: Cluster, seconds: float) -> None:
    set_container(cluster, STORE, "Running", run(seconds), container="rendezvous")


def started_job(job: dict[str, Any]) -> Cluster:
    """Store and Service created, then the workers; the store runs since t=10."""
    cluster = Cluster(job)
    cluster.step(at(0))
    cluster.step(at(1))
    store_running_since(cluster, 10)
    return cluster


def failed(cluster: Cluster) -> bool:
    return any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))


# --- what the agents' pods ask of the kubelet ---------------------------------------------------

def test_agents_keep_the_end_of_a_failed_runs_log_as_their_termination_message() -> None:
    job = elastic(workers=2)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "side:1"})
    cluster = Cluster(job)
    cluster.step()
    pods = by_name(cluster.step().creates)
    for name in (W0, W1):
        containers = {c["name"]: c for c in pods[name]["spec"]["containers"]}
        assert containers["pytorch"]["terminationMessagePolicy"] == "FallbackToLogsOnError"
        assert "terminationMessagePolicy" not in containers["sidecar"]
    assert "terminationMessagePolicy" not in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("policy, annotations", [
    ({"rdzvHost": "etcd", "rdzvBackend": "etcd-v2"}, {}),  # the user's store: not ours to replace
    ({}, {"trainctl.io/reference-env": "true"}),
])
def test_jobs_without_trainctls_store_keep_the_template_as_it_is(policy: dict[str, Any], annotations: dict[str, str]) -> None:
    job = elastic(**policy)
    job["metadata"]["annotations"] = annotations
    cluster = Cluster(job)
    creates = cluster.step().creates + cluster.step().creates
    worker = by_name(creates)[W0]
    assert "terminationMessagePolicy" not in worker["spec"]["containers"][0]
    static = Cluster(pytorchjob("st"))
    assert all("terminationMessagePolicy" not in c for p in static.step().creates if p["kind"] == "Pod"
               for c in p["spec"]["containers"])


def test_a_policy_the_user_chose_is_kept() -> None:
    job = elastic()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"] = "File"
    cluster = Cluster(job)
    cluster.step()
    assert by_name(cluster.step().creates)[W0]["spec"]["containers"][0]["terminationMessagePolicy"] == "File"


# --- a run that found the rendezvous closed -----------------------------------------------------

def test_a_replica_that_found_the_rendezvous_closed_gets_the_store_replaced() -> None:
    """OnFailure: the kubelet restarts the agent in place; its last run's error names the closure."""
    cluster = started_job(elastic())
    set_container(cluster, W0, "Running", run(25), last=run(20, code=1, message=CLOSED))
    plan = cluster.step(at(26))
    (delete,) = plan.deletes
    assert (delete.kind, delete.name) == ("Pod", STORE) and delete.uid  # only the store found closed
    message = delete_events(delete).success.message
    assert W0 in message and "closed" in message, message
    assert not failed(cluster) and "restartCount" not in cluster.job["status"]
    assert {k: v for k, v in cluster.job["status"]["replicaStatuses"]["Worker"].items() if k != "selector"} == {"active": 1}
    # The store comes back once it is gone; the closure on record is older than the new store.
    assert [o["metadata"]["name"] for o in cluster.step(at(27)).creates] == [STORE]
    store_running_since(cluster, 30)
    assert cluster.step(at(31)).deletes == []


@pytest.mark.parametrize("run_started", [5, 10])
def test_a_closure_from_before_the_store_started_changes_nothing(run_started: float) -> None:
    """Times have a second's precision: a run of the store's own second talked to the old one."""
    cluster = started_job(elastic())
    set_container(cluster, W0, "Running", run(run_started + 3), last=run(run_started, code=1, message=CLOSED))
    assert cluster.step(at(30)).deletes == []


def test_other_failures_and_a_store_not_running_change_nothing() -> None:
    cluster = started_job(elastic())
    set_container(cluster, W0, "Running", run(25), last=run(20, code=1, message=FAILED_GROUP))
    assert cluster.step(at(26)).deletes == []
    set_container(cluster, W0, "Running", run(25), last=run(20, code=1, message=CLOSED))
    cluster.pods[STORE]["status"] = {"phase": "Pending"}
    assert cluster.step(at(26)).deletes == []
    store_running_since(cluster, 10)
    cluster.pods[STORE]["metadata"]["deletionTimestamp"] = rfc3339(at(25))
    assert cluster.step(at(26)).deletes == []


@pytest.mark.parametrize("restart", ["ExitCode", "Never"])
def test_a_closed_out_replica_is_neither_a_failure_nor_left_failed_whatever_the_restart_policy(restart: str) -> None:
    """Exit code 1 fails a job under ExitCode and Never; a closed rendezvous must not: the pod
    never trained. It waits for a fresh store, then is recreated (and not counted a restart)."""
    cluster = started_job(elastic(restart=restart))
    set_container(cluster, W0, "Failed", run(20, code=1, message=CLOSED))
    plan = cluster.step(at(23))
    assert [d.name for d in plan.deletes] == [STORE]  # first a fresh store; the replica waits for it
    assert not failed(cluster), conditions(cluster.job["status"])
    assert "failed" not in cluster.job["status"]["replicaStatuses"]["Worker"]
    assert cluster.step(at(24)).creates[0]["metadata"]["name"] == STORE
    store_running_since(cluster, 30)
    plan = cluster.step(at(31))
    (delete,) = plan.deletes
    assert delete.name == W0 and "closed" in (delete.cause or "")
    assert [o["metadata"]["name"] for o in cluster.step(at(32)).creates] == [W0]
    assert not failed(cluster) and "restartCount" not in cluster.job["status"]


def test_under_exit_code_a_failed_group_still_fails_the_job() -> None:
    cluster = started_job(elastic(workers=2, restart="ExitCode"))
    set_container(cluster, W0, "Failed", run(20, code=1, message=FAILED_GROUP))
    set_container(cluster, W1, "Failed", run(20, code=1, message=CLOSED))
    cluster.step(at(23))
    assert failed(cluster), conditions(cluster.job["status"])


# --- the whole story, pass by pass ---------------------------------------------------------------

def test_training_finished_then_the_node_died_the_job_succeeds() -> None:
    cluster = started_job(elastic())
    set_container(cluster, W0, "Running", run(12))
    cluster.pods[W0]["spec"]["nodeName"] = "node-b"
    cluster.nodes = {"node-b": node("node-b")}
    cluster.step(at(40))
    # torchrun exited 0 (the rendezvous is closed), the upload runs, node-b dies at t=50.
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=50)
    lost = cluster.step(at(85))
    assert [d.name for d in lost.deletes if d.force] == [W0]
    assert [o["metadata"]["name"] for o in cluster.step(at(86)).creates] == [W0]
    # The replacement joins the closed rendezvous, exits 1, is restarted in place by the kubelet.
    set_container(cluster, W0, "Running", run(95), last=run(90, code=1, message=CLOSED))
    cluster.pods[W0]["spec"]["nodeName"] = "node-c"
    assert [d.name for d in cluster.step(at(95)).deletes] == [STORE]
    assert [o["metadata"]["name"] for o in cluster.step(at(96)).creates] == [STORE]
    store_running_since(cluster, 97)
    # Its next run resumes from the final checkpoint, has nothing left to train, and uploads.
    set_container(cluster, W0, "Succeeded", run(100, code=0), last=run(90, code=1, message=CLOSED))
    cluster.step(at(130))
    assert ("Succeeded", "True", "PyTorchJobSucceeded") in conditions(cluster.job["status"])
    assert not failed(cluster)
    assert cluster.job["status"]["replicaStatuses"]["Worker"].get("failed") is None
    assert cluster.job["status"]["restartCount"] == 1  # the lost node's replacement, nothing more


# --- the pure functions ------------------------------------------------------------------------

def test_found_closed_reads_the_current_and_the_last_run() -> None:
    store = {"metadata": {"name": STORE}, "status": {"containerStatuses": [
        {"name": "rendezvous", "state": run(10)}]}}

    def replica(state: dict[str, Any], last: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        return {"metadata": {"name": W0}, "status": {"containerStatuses": [
            {"name": "pytorch", "state": state, "lastState": last or {}}]}}

    assert rendezvous.found_closed(store, [replica(run(11, code=1, message=CLOSED))], "pytorch") is not None
    assert rendezvous.found_closed(store, [replica(run(12), run(11, code=1, message=CLOSED))], "pytorch") is not None
    assert rendezvous.found_closed(store, [replica(run(12), run(11, code=1, message=CLOSED))], "other") is None
    assert rendezvous.found_closed(store, [replica(run(10, code=1, message=CLOSED))], "pytorch") is None
    assert rendezvous.found_closed(store, [replica(run(11, code=1))], "pytorch") is None
    assert rendezvous.ended_on_closed(replica(run(12), run(11, code=1, message=CLOSED)), "pytorch") is None
    assert rendezvous.ended_on_closed(replica(run(11, code=1, message=CLOSED)), "pytorch") == at(11)
