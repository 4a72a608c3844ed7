"""The node check before training: its init container, and what the pods' reports lead to."""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from trainctl.controller.reconcile import ReconcileConfig
from trainctl.controller.reconcile.node_check import INIT_CONTAINER, PROBE_SOURCE
from trainctl.controller.reconcile.plan import NodeTaint, Plan, delete_events

from tests.support.jobs import msjob, pytorchjob
from tests.support.reconcile import Cluster, at, conditions, env_dict, node


def job(annotations: Optional[dict[str, str]] = None, restart: str = "OnFailure", **spec: Any) -> dict[str, Any]:
    out = pytorchjob(workers=2, restart=restart, **spec)
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    return out


def elastic_job(annotations: dict[str, str]) -> dict[str, Any]:
    out = pytorchjob(master=False, workers=3, restart="OnFailure",
                     elasticPolicy={"minReplicas": 2, "maxReplicas": 3, "rdzvBackend": "c10d", "rdzvHost": "store"})
    out["metadata"]["annotations"] = annotations
    return out


CHECKED = {"trainctl.io/node-check": "true"}


def created(spec: dict[str, Any], config: Optional[ReconcileConfig] = None) -> Cluster:
    """The job's pods created, each placed on its own node."""
    cluster = Cluster(spec, config)
    for _ in range(3):
        cluster.step(at(0))
    for i, name in enumerate(sorted(cluster.pods)):
        cluster.pods[name]["spec"]["nodeName"] = f"node-{i}"
        cluster.nodes[f"node-{i}"] = node(f"node-{i}")
    return cluster


def check_of(pod: dict[str, Any]) -> Optional[dict[str, Any]]:
    return next((c for c in pod["spec"].get("initContainers") or [] if c["name"] == INIT_CONTAINER), None)


def rank_of(pod: dict[str, Any]) -> int:
    check = check_of(pod)
    assert check is not None
    return int(env_dict({"spec": {"containers": [check]}})["NODE_CHECK_RANK"])


def report(cluster: Cluster, name: str, verdict: str, *, phase: str = "Pending", host: int = 0, **fields: Any) -> None:
    """The kubelet's status of a pod whose check ended with ``verdict`` (exit 0 only if passed)."""
    message = json.dumps({"rank": rank_of(cluster.pods[name]), "host": host, "verdict": verdict, **fields})
    code = 0 if verdict == "passed" else 1
    status = {"name": INIT_CONTAINER, "state": {"terminated": {"exitCode": code, "message": message}}, "restartCount": 0}
    cluster.pods[name]["status"] = {"phase": phase, "initContainerStatuses": [status]}


def events(plan: Plan, reason: str) -> list[str]:
    return [e.message for e in plan.events if e.reason == reason]


def test_a_job_without_the_annotation_gets_exactly_the_pods_it_got_before() -> None:
    plain = created(job()).pods
    assert created(job({"trainctl.io/node-check": "false"})).pods == plain
    assert created(job(), ReconcileConfig(node_check=True, node_check_straggler_factor=3.0)).pods != plain
    assert created(job({"trainctl.io/node-check": "false"}), ReconcileConfig(node_check=True)).pods == plain
    for pod in plain.values():
        assert check_of(pod) is None
        assert not any("NODE_CHECK" in str(c.get("env")) for c in pod["spec"]["containers"])


def test_each_pod_checks_in_its_own_image_before_the_init_pytorch_wait_is_over_and_training_starts() -> None:
    pods = created(job(CHECKED)).pods
    assert sorted(pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    for name, rank in (("mnist-master-0", 0), ("mnist-worker-0", 1), ("mnist-worker-1", 2)):
        check = check_of(pods[name])
        assert check is not None and check["image"] == pods[name]["spec"]["containers"][0]["image"]
        assert check["command"] == ["python", "-c", PROBE_SOURCE]
        assert pods[name]["spec"]["initContainers"][-1] is check  # after init-pytorch
        env = env_dict({"spec": {"containers": [check]}})
        assert (env["NODE_CHECK_RANK"], env["NODE_CHECK_PEERS"], env["NODE_CHECK_HOST"]) == (str(rank), "0,1,2", "mnist-master-0")
        assert env["NODE_CHECK_EXCLUDE_STRAGGLERS"] == "false" and env["NODE_CHECK_STRAGGLER_FACTOR"] == "2"


def test_a_node_that_failed_is_tainted_named_with_its_times_and_the_static_job_restarts_checked_again() -> None:
    cluster = created(job(CHECKED))
    report(cluster, "mnist-master-0", "passed", allgather=0.01, matmul=0.05)
    report(cluster, "mnist-worker-0", "passed", allgather=0.02, matmul=0.05)
    report(cluster, "mnist-worker-1", "failed", partners=[[0, False], [1, False]], error="Connection closed by peer")
    plan = cluster.reconcile(at(10))
    cluster.job["status"] = plan.status
    assert plan.taints == [NodeTaint("node-2", "node-check-failed")]  # the healthy partners are not blamed
    (failed,) = events(plan, "NodeCheckFailed")
    assert "Node node-2 failed the node check of pod mnist-worker-1" in failed
    assert "rank 0 failed, rank 1 failed" in failed and "Connection closed by peer" in failed
    assert "trainctl.io/unhealthy=node-check-failed:NoSchedule" in failed
    assert len(events(plan, "NodeCheckPassed")) == 2
    # A static job's ranks cannot take a new member: all start again, and are checked again.
    assert sorted(ref.name for ref in plan.deletes) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert all("node node-2 failed the node check" in delete_events(ref).success.message for ref in plan.deletes)
    status = cluster.job["status"]
    assert status["nodeCheck"]["node-2"]["mnist-worker-1"]["result"] == "node-check-failed"
    assert status["nodeCheck"]["node-0"]["mnist-master-0"]["matmulSeconds"] == 0.05
    assert not [c for c in conditions(status) if c[0] in ("Failed", "Restarting") and c[1] == "True"]
    assert "restartCount" not in status
    assert status["nodeCheck"]["node-0"]["mnist-master-0"]["replaced"] is True
    # The pods that passed had started training: while they terminate they are no failed replicas.
    terminating = {"phase": "Running", "containerStatuses": [{"name": "pytorch", "state": {"running": {}}}]}
    for name, pod in list(cluster.pods.items()):
        pod = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:10Z"}, "status": terminating}
        cluster.pods[name] = pod
    cluster.pods.pop("mnist-worker-1")
    cluster.step(at(10.5))
    assert not [c for c in conditions(cluster.job["status"]) if c[0] in ("Failed", "Restarting") and c[1] == "True"]
    assert "failed" not in cluster.job["status"]["replicaStatuses"]["Worker"]
    cluster.pods.pop("mnist-master-0")
    cluster.pods.pop("mnist-worker-0")
    plan = cluster.step(at(11))
    pods = cluster.pods
    assert sorted(pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert {env_dict({"spec": {"containers": [check_of(p)]}})["NODE_CHECK_PEERS"] for p in pods.values()} == {"0,1,2"}


@pytest.mark.parametrize("restart", ["Never", "ExitCode"])
def test_a_pod_failed_by_its_check_fails_neither_the_job_nor_counts_as_a_failed_replica(restart: str) -> None:
    cluster = created(job(CHECKED, restart=restart))
    report(cluster, "mnist-worker-1", "failed", phase="Failed")
    cluster.step(at(10))
    status = cluster.job["status"]
    assert not [c for c in conditions(status) if c[0] == "Failed" and c[1] == "True"]
    assert "failed" not in status["replicaStatuses"]["Worker"]


def test_an_elastic_job_replaces_the_failed_pod_alone_and_its_replacement_checks_alone() -> None:
    cluster = created(elastic_job(CHECKED))
    report(cluster, "mnist-worker-0", "passed", phase="Running", allgather=0.01, matmul=0.05)
    report(cluster, "mnist-worker-1", "failed", partners=[[0, False], [2, False]])
    report(cluster, "mnist-worker-2", "passed", phase="Running", allgather=0.01, matmul=0.05)
    plan = cluster.step(at(10))
    assert [ref.name for ref in plan.deletes] == ["mnist-worker-1"]
    assert plan.taints == [NodeTaint("node-1", "node-check-failed")]
    plan = cluster.step(at(11))
    (replacement,) = plan.creates
    env = env_dict({"spec": {"containers": [check_of(replacement)]}})
    assert (env["NODE_CHECK_RANK"], env["NODE_CHECK_PEERS"]) == ("1", "1")


def test_a_pod_that_could_not_reach_the_host_is_blamed_once_the_host_says_the_others_did() -> None:
    cluster = created(job(CHECKED))
    report(cluster, "mnist-worker-1", "unreachable", error="cannot reach the check's host")
    plan = cluster.step(at(10))
    assert (plan.taints, plan.deletes) == ([], [])  # the host has not said yet
    report(cluster, "mnist-master-0", "passed", phase="Running", allgather=0.01, matmul=0.05)
    report(cluster, "mnist-worker-0", "passed", phase="Running", allgather=0.01, matmul=0.05)
    plan = cluster.step(at(11))
    assert plan.taints == [NodeTaint("node-2", "unreachable")]
    (failed,) = events(plan, "NodeCheckFailed")
    assert "could not reach the check's host on node node-0, which others reached" in failed


def test_a_host_nobody_reached_is_blamed_when_two_pods_on_other_nodes_could_not_and_they_are_not() -> None:
    cluster = created(job(CHECKED))
    report(cluster, "mnist-master-0", "isolated", error="no other pod of the check reached this one")
    report(cluster, "mnist-worker-0", "unreachable")
    plan = cluster.step(at(10))
    assert plan.taints == []  # one pod's word against the host's: not yet
    report(cluster, "mnist-worker-1", "unreachable")
    plan = cluster.step(at(11))
    assert plan.taints == [NodeTaint("node-0", "unreachable")]
    assert len(events(plan, "NodeCheckFailed")) == 1
    assert len(events(plan, "NodeCheckRetried")) == 2
    assert list(cluster.job["status"]["nodeCheck"]) == ["node-0"]


def test_with_two_pods_that_cannot_reach_each_other_neither_is_blamed() -> None:
    cluster = created(_two_workers())
    report(cluster, "mnist-worker-0", "isolated")
    report(cluster, "mnist-worker-1", "unreachable")
    plan = cluster.step(at(10))
    assert plan.taints == []
    assert sorted(ref.name for ref in plan.deletes) == ["mnist-worker-0", "mnist-worker-1"]


def _two_workers() -> dict[str, Any]:
    out = pytorchjob(master=False, workers=2, restart="OnFailure")
    out["metadata"]["annotations"] = CHECKED
    return out


def test_a_straggler_is_reported_and_kept_without_exclude_stragglers() -> None:
    cluster = created(job(CHECKED))
    report(cluster, "mnist-master-0", "passed", phase="Running", allgather=0.01, matmul=0.05, median=0.06)
    report(cluster, "mnist-worker-0", "passed", phase="Running", allgather=0.01, matmul=0.05, median=0.06)
    report(cluster, "mnist-worker-1", "passed", phase="Running", allgather=0.01, matmul=0.4, median=0.06, straggler=True)
    plan = cluster.step(at(10))
    (straggler,) = events(plan, "StragglerDetected")
    assert "Node node-2 (pod mnist-worker-1) is a straggler: allgather 0.010s, matmul 0.400s" in straggler
    assert "kept" in straggler
    assert (plan.taints, plan.deletes) == ([], [])
    assert cluster.job["status"]["nodeCheck"]["node-2"]["mnist-worker-1"]["result"] == "straggler"
    # Announced once.
    plan = cluster.step(at(11))
    assert not events(plan, "StragglerDetected") and not events(plan, "NodeCheckPassed")


def test_with_exclude_stragglers_a_straggler_is_tainted_and_replaced() -> None:
    cluster = created(job({**CHECKED, "trainctl.io/exclude-stragglers": "true"}))
    pod = cluster.pods["mnist-worker-1"]
    assert env_dict({"spec": {"containers": [check_of(pod)]}})["NODE_CHECK_EXCLUDE_STRAGGLERS"] == "true"
    report(cluster, "mnist-worker-1", "straggler", allgather=0.01, matmul=0.4, median=0.06, straggler=True)
    plan = cluster.step(at(10))
    assert plan.taints == [NodeTaint("node-2", "straggler")]
    (straggler,) = events(plan, "StragglerDetected")
    assert "matmul 0.400s (median allgather+matmul of the check 0.060s)" in straggler


def test_an_msjob_is_not_checked_even_with_the_flag() -> None:
    cluster = Cluster(msjob(), ReconcileConfig(node_check=True))
    for _ in range(3):
        cluster.step(at(0))
    assert cluster.pods and all(check_of(pod) is None for pod in cluster.pods.values())


def test_an_annotation_that_is_not_a_switch_is_a_problem_and_the_default_holds() -> None:
    cluster = created(job({"trainctl.io/node-check": "yes"}))
    plan = cluster.reconcile(at(1))
    assert [e.reason for e in plan.problems] == ["InvalidNodeCheck"]
    assert all(check_of(pod) is None for pod in cluster.pods.values())


def test_two_pods_that_passed_on_one_node_are_each_announced_once_and_kept_apart() -> None:
    cluster = created(job(CHECKED))
    cluster.pods["mnist-worker-1"]["spec"]["nodeName"] = "node-1"  # beside worker-0, as after a replacement
    for name in ("mnist-worker-0", "mnist-worker-1"):
        report(cluster, name, "passed", phase="Running", allgather=0.01, matmul=0.05)
    plan = cluster.step(at(10))
    assert sorted(m.split(" of pod ")[1].split(":")[0] for m in events(plan, "NodeCheckPassed")) == [
        "mnist-worker-0", "mnist-worker-1"]
    assert sorted(cluster.job["status"]["nodeCheck"]["node-1"]) == ["mnist-worker-0", "mnist-worker-1"]
    plan = cluster.step(at(11))
    assert events(plan, "NodeCheckPassed") == [] and plan.status is None
