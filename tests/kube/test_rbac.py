"""The ClusterRole grants exactly what the controller uses: no call refused, no grant unused.

One scenario drives every code path that talks to the API server: both job kinds through
success, cleanup and TTL deletion, a status write that conflicts, an elastic job whose HPA
is created, updated and removed on suspend, gang scheduling with both PodGroup flavours
(created, updated, deleted), Events, and leader election. The client records every
(verb, group, resource) it sends; the set must equal what the manifests grant.
"""

from __future__ import annotations

import ssl
from typing import Any, Callable

import pytest

from trainctl.kube.client import ApiError
from trainctl.kube.restmapper import (
    CRDS,
    HPAS,
    MSJOBS,
    NAMESPACES,
    NODES,
    PDBS,
    PODS,
    PYTORCHJOBS,
    SCHEDULER_PLUGINS_PODGROUPS,
    VOLCANO_PODGROUPS,
    Resource,
)

from tests.support.conditions import condition
from tests.support.faultproxy import FaultProxy
from tests.support.jobs import msjob, pytorchjob
from tests.support.podphase import PodPhaseDriver


def podgroup_crd(group: str, version: str) -> dict[str, Any]:
    """A minimal PodGroup CRD, standing in for Volcano's or scheduler-plugins' own."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "listKind": "PodGroupList"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


# Pods per job; the elastic job runs until it is suspended.
REPLICAS = {"rbac-ttl": 2, "rbac-ms": 1, "rbac-volcano": 3}


def every_pod_succeeds(pod: dict[str, Any], running: list[dict[str, Any]]) -> str | None:
    """All replicas finish together, once all are up: success for both job kinds."""
    expected = REPLICAS.get((pod["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name", ""))
    return "Succeeded" if expected and len(running) >= expected else None


def _node_check_taints_a_node(kube: Any, jobs: Any) -> None:
    """A pod whose node check failed: the controller taints its node (nodes get, update)."""
    kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "rbac-node"}})
    checked = pytorchjob("rbac-check", master=False, workers=1, restart="OnFailure", uid=None)
    checked["metadata"]["annotations"] = {"trainctl.io/node-check": "true"}
    checked["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeName"] = "rbac-node"
    kube.create(PYTORCHJOBS, checked)
    message = '{"rank": 0, "host": 0, "verdict": "failed", "error": "timed out"}'
    failed = [{"name": "node-check", "restartCount": 0, "state": {"terminated": {"exitCode": 1, "message": message}}}]

    def report() -> bool:
        pod = kube.get_or_none(PODS, "default", "rbac-check-worker-0")
        if pod is None or (pod.get("status") or {}).get("phase") != "Running":
            return False  # the driver has not started it yet
        pod["status"]["initContainerStatuses"] = failed
        try:
            kube.replace(PODS, pod, subresource="status")
        except ApiError as exc:
            if exc.code == 409:
                return False
            raise
        return True

    jobs.wait(report, what="the node check's report written")
    jobs.wait(lambda: any(t["key"] == "trainctl.io/unhealthy" for t in (kube.get(NODES, None, "rbac-node").get("spec") or {}).get("taints") or []),
              what="the node tainted")


def elastic_job(name: str) -> dict[str, Any]:
    job = pytorchjob(name, master=False, workers=1, restart="OnFailure", uid=None)
    job["spec"]["elasticPolicy"] = {
        "minReplicas": 1,
        "maxReplicas": 3,
        "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
        ],
    }
    return job


def update(kube, resource: Resource, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Read-modify-write that retries on a conflict with the controller's status writes."""
    for _ in range(10):
        live = kube.get(resource, namespace, name)
        change(live)
        try:
            kube.replace(resource, live)
            return
        except ApiError as exc:
            if exc.code != 409:
                raise
    raise AssertionError(f"could not update {name}")


def _set_workers(job: dict[str, Any], count: int) -> None:
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = count


def _grow_elastic(job: dict[str, Any]) -> None:
    job["spec"]["elasticPolicy"]["maxReplicas"] = 4
    job["spec"]["elasticPolicy"]["minReplicas"] = 2  # the PodDisruptionBudget follows
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    job["spec"].setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})["minAvailable"] = 2


def _suspend(job: dict[str, Any]) -> None:
    job["spec"].setdefault("runPolicy", {})["suspend"] = True


@pytest.mark.timeout(180)
def test_the_cluster_role_grants_exactly_the_calls_the_controller_makes(apiserver, kube, start_manager, jobs, rbac_allowed):
    for group, version in (("scheduling.x-k8s.io", "v1alpha1"), ("scheduling.volcano.sh", "v1beta1")):
        kube.create(CRDS, podgroup_crd(group, version))
    jobs.wait(
        lambda: (
            kube.group_version_served("scheduling.volcano.sh", "v1beta1")
            and kube.group_version_served("scheduling.x-k8s.io", "v1alpha1")
        ),
        what="PodGroup CRDs",
    )
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gang"}})

    # Every first status write of a job conflicts, so the controller re-reads and re-applies.
    tls = ssl.create_default_context(cafile=kube.configuration.ssl_ca_cert)
    with FaultProxy(apiserver.url, status_conflicts=1, ssl_context=tls) as proxy:
        plugins = start_manager(
            server_url=proxy.url,
            namespace="default",
            gang_scheduler="scheduler-plugins",
            leader_elect=True,
            lease_namespace="default",
            identity="rbac-test",
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.1,
        )
        volcano = start_manager(server_url=proxy.url, namespace="gang", gang_scheduler="volcano")
        drivers = [PodPhaseDriver(kube, ns, every_pod_succeeds).start() for ns in ("default", "gang")]
        try:
            # Ten Workers: from the 10th "Created pod: …" the Events combine and are PATCHed.
            kube.create(
                PYTORCHJOBS,
                pytorchjob(
                    "rbac-ttl",
                    workers=10,
                    restart="OnFailure",
                    uid=None,
                    runPolicy={"ttlSecondsAfterFinished": 0, "cleanPodPolicy": "All"},
                ),
            )
            kube.create(
                MSJOBS,
                msjob(
                    "rbac-ms",
                    ["python", "train.py"],
                    scheduler=False,
                    workers=1,
                    restart="Never",
                    image="mindspore/mindspore:2.10.0",
                    uid=None,
                    runPolicy={"ttlSecondsAfterFinished": 0, "cleanPodPolicy": "All"},
                ),
            )
            kube.create(PYTORCHJOBS, elastic_job("rbac-elastic"))
            _node_check_taints_a_node(kube, jobs)
            volcano_job = pytorchjob("rbac-volcano", workers=1, restart="OnFailure", uid=None)
            volcano_job["metadata"]["namespace"] = "gang"
            kube.create(PYTORCHJOBS, volcano_job)

            # A scale-up while Volcano holds the gang makes the controller update the PodGroup;
            # then Volcano admits it and the pods start.
            jobs.wait(lambda: kube.get_or_none(VOLCANO_PODGROUPS, "gang", "rbac-volcano"), what="volcano PodGroup")
            update(kube, PYTORCHJOBS, "gang", "rbac-volcano", lambda job: _set_workers(job, 2))
            jobs.wait(
                lambda: (kube.get_or_none(VOLCANO_PODGROUPS, "gang", "rbac-volcano") or {}).get("spec", {}).get("minMember") == 3,
                what="PodGroup update",
            )
            update(kube, VOLCANO_PODGROUPS, "gang", "rbac-volcano", lambda g: g.update(status={"phase": "Inqueue"}))

            # The elastic job: its HPA and PodDisruptionBudget follow the elastic policy, and go on suspend.
            jobs.wait(lambda: kube.get_or_none(HPAS, "default", "rbac-elastic"), what="HPA created")
            jobs.wait(lambda: kube.get_or_none(PDBS, "default", "rbac-elastic"), what="PodDisruptionBudget created")
            first = jobs.wait(
                lambda: kube.get_or_none(SCHEDULER_PLUGINS_PODGROUPS, "default", "rbac-elastic"),
                what="scheduler-plugins PodGroup",
            )
            update(kube, PYTORCHJOBS, "default", "rbac-elastic", _grow_elastic)
            jobs.wait(
                lambda: (kube.get_or_none(HPAS, "default", "rbac-elastic") or {}).get("spec", {}).get("maxReplicas") == 4,
                what="HPA update",
            )
            jobs.wait(
                lambda: kube.get(SCHEDULER_PLUGINS_PODGROUPS, "default", "rbac-elastic")["spec"] != first["spec"],
                what="scheduler-plugins PodGroup update",
            )
            jobs.wait(
                lambda: (kube.get_or_none(PDBS, "default", "rbac-elastic") or {}).get("spec", {}).get("minAvailable") == 2,
                what="PodDisruptionBudget update",
            )
            update(kube, PYTORCHJOBS, "default", "rbac-elastic", _suspend)
            jobs.wait(lambda: kube.get_or_none(HPAS, "default", "rbac-elastic") is None, what="HPA deleted on suspend")
            jobs.wait(lambda: kube.get_or_none(PDBS, "default", "rbac-elastic") is None, what="PodDisruptionBudget deleted")

            # Both TTL jobs succeed, are cleaned up and deleted.
            jobs.wait(
                lambda: kube.get_or_none(PYTORCHJOBS, "default", "rbac-ttl") is None,
                timeout=60,
                what="rbac-ttl deleted by its TTL",
            )
            jobs.wait(
                lambda: kube.get_or_none(MSJOBS, "default", "rbac-ms") is None, timeout=60, what="rbac-ms deleted by its TTL"
            )
            jobs.wait(
                lambda: condition(kube.get(PYTORCHJOBS, "gang", "rbac-volcano"), "Succeeded"),
                timeout=60,
                what="rbac-volcano Succeeded",
            )
            jobs.wait(
                lambda: kube.get_or_none(VOLCANO_PODGROUPS, "gang", "rbac-volcano") is None, what="volcano PodGroup deleted"
            )
        finally:
            for driver in drivers:
                driver.stop()
            for manager in (plugins, volcano):
                manager.stop()
        assert proxy.status_conflicts_sent >= 3

    used = plugins.client.calls | volcano.client.calls
    assert used - rbac_allowed == set(), "calls the ClusterRole does not allow"
    assert rbac_allowed - used - HANG_GRANTS == set(), "grants the controller never used"


# What only a hung job uses (trainctl.io/hang-timeout): usage metrics, exec into a worker,
# its log, the stacks' ConfigMap and a node's taint need kubelets running real workers, so
# e2e/test_hang.py exercises them, not this test.
HANG_GRANTS = {
    ("list", "metrics.k8s.io", "pods"), ("get", "", "pods/exec"), ("create", "", "pods/exec"), ("get", "", "pods/log"),
    ("create", "", "configmaps"), ("update", "", "nodes"),
}
