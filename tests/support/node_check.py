"""The node check seen from outside: the jobs that opt in, the nodes it tainted and its
Events, for the e2e tests and ``hack/bench_health.py``."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from trainctl.kube.restmapper import NODES

from tests.support.cluster import E2E
from tests.support.samples import load_sample

DDP = "pytorch-ddp"
TAINT = "trainctl.io/unhealthy"


def node_names(env: E2E) -> list[str]:
    return sorted(n.metadata.name for n in client.CoreV1Api(env.api).list_node().items)


def tainted(env: E2E) -> dict[str, str]:
    """Each node tainted by the node check, and the taint's value."""
    out = {}
    for node in client.CoreV1Api(env.api).list_node().items:
        for t in node.spec.taints or []:
            if t.key == TAINT:
                out[node.metadata.name] = t.value
    return out


def job_events(env: E2E, reason: str, job: dict[str, Any]) -> list[str]:
    """The Events of this job (by uid: an earlier job of the same name left its own)."""
    events = client.CoreV1Api(env.api).list_namespaced_event("default").items
    return [e.message for e in events if e.involved_object.uid == job["metadata"]["uid"] and e.reason == reason]


def checked_job(exclude_stragglers: bool = True, workers: int = 2) -> dict[str, Any]:
    """The DDP sample (Master + ``workers`` Workers) with the node check on."""
    job = load_sample("pytorch/ddp.yaml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    job["metadata"]["annotations"] = {"trainctl.io/node-check": "true",
                                      "trainctl.io/exclude-stragglers": str(exclude_stragglers).lower()}
    return job


def heal(env: E2E) -> None:
    """Undo every node's degradation and the node check's taints."""
    kube = env.cluster.client()
    try:
        for name in node_names(env):
            try:
                env.cluster.fault("restore", name)
            except Exception:  # not degraded
                pass
            node = kube.get(NODES, None, name)
            taints = [t for t in node["spec"].get("taints") or [] if t["key"] != TAINT]
            if taints != (node["spec"].get("taints") or []):
                node["spec"]["taints"] = taints
                kube.replace(NODES, node)
    finally:
        kube.close()
