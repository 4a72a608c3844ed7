"""Placement across three nodes as a user sees it with kubectl: inter-pod anti-affinity, topology
spreading over zones, and the scheduler's Events in ``kubectl describe pod``.

Covered: a PyTorchJob whose Master and Workers carry a required podAntiAffinity on
``kubernetes.io/hostname`` trains with one pod per node; a fourth such pod stays Pending with
``FailedScheduling`` and kube-scheduler's reason in ``kubectl describe pod`` (and a bound one
shows ``Scheduled``), and is bound once a node frees; pods spread over zones labelled with
``kubectl label node``; a pod that sets a placement field this scheduler does not implement
(``spec.resourceClaims``) is refused by name. One three-node cluster for the module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.api.constants import LABEL_JOB_NAME
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import PODS

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.pods import wait_pod, wait_pod_gone
from tests.support.samples import load_sample, replica_specs, set_arg

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SLEEP = ["python", "-c", "import time; time.sleep(600)"]


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("scheduling"), nodes=3, node_cpu="2",
                         controlplane_args=["--controllers", "node-lifecycle"]) as env:
        yield env


@pytest.fixture
def api(three_nodes: E2E) -> Iterator[KubeClient]:
    client = three_nodes.cluster.client()
    yield client
    three_nodes.kubectl("delete", "pods", "-l", "test=scheduling", "--grace-period=0", "--wait=false")
    for item in client.list(PODS, "default", label_selector="test=scheduling")[0]:
        wait_pod_gone(client, item["metadata"]["name"], timeout=60)
    three_nodes.clean()
    client.close()


def anti_affinity(key: str, value: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {key: value}}, "topologyKey": HOST}]}}


def sleeper(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A pod that sleeps, requesting nothing: to the resources rule every node is alike."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {**labels, "test": "scheduling"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "python:3.11", "command": SLEEP}], **spec}}


def bound_node(api: KubeClient, name: str) -> str:
    return wait_pod(api, name, lambda p: bool(p["spec"].get("nodeName")), timeout=60)["spec"]["nodeName"]


def described(env: E2E, pod: str, *wanted: str, timeout: float = 60.0) -> str:
    """``kubectl describe pod`` once its output holds every one of ``wanted`` (Events are
    written a moment after the decision); fails with the last output."""
    deadline = time.monotonic() + timeout
    while True:
        text = env.kubectl("describe", "pod", pod)
        if all(w in text for w in wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(w in text for w in wanted), text
    return text


def test_a_job_with_required_anti_affinity_trains_with_one_pod_per_node(three_nodes: E2E, api: KubeClient) -> None:
    job = load_sample("pytorch/ddp.yaml")
    set_arg(job, "--steps", "20")
    for spec in replica_specs(job).values():
        spec["template"]["spec"]["affinity"] = anti_affinity(LABEL_JOB_NAME, job["metadata"]["name"])
        for container in spec["template"]["spec"]["containers"]:
            container.pop("resources", None)  # no requests: the nodes look alike, only the rule spreads the pods
    with three_nodes.run(job) as run:
        finished = run.wait_succeeded(timeout=300)
        assert condition(finished, "Succeeded")
        names = ("pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1")
        nodes = {run.pods[name]["spec"]["nodeName"] for name in names}
        assert nodes == {"trainctl-local", "trainctl-local-2", "trainctl-local-3"}, run.dump()


def test_a_pod_that_fits_nowhere_says_why_in_describe_and_is_bound_once_a_node_frees(three_nodes: E2E,
                                                                                     api: KubeClient) -> None:
    for i in range(3):
        three_nodes.kubectl.apply(sleeper(f"spread-{i}", {"app": "spread"}, affinity=anti_affinity("app", "spread")))
    assert sorted(bound_node(api, f"spread-{i}") for i in range(3)) == ["trainctl-local", "trainctl-local-2",
                                                                       "trainctl-local-3"]
    node = bound_node(api, "spread-0")
    described(three_nodes, "spread-0", "Scheduled", "default-scheduler",
              f"Successfully assigned default/spread-0 to {node}")

    three_nodes.kubectl.apply(sleeper("spread-3", {"app": "spread"}, affinity=anti_affinity("app", "spread")))
    reason = ("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
              "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    text = described(three_nodes, "spread-3", "FailedScheduling", reason)
    assert "Warning" in text and "default-scheduler" in text
    pending = api.get(PODS, "default", "spread-3")
    assert not pending["spec"].get("nodeName")
    scheduled = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == ("False", "Unschedulable", reason)

    three_nodes.kubectl("delete", "pod", "spread-0", "--wait=true")
    assert bound_node(api, "spread-3") == node
    described(three_nodes, "spread-3", f"Successfully assigned default/spread-3 to {node}")


def test_pods_spread_over_zones_the_nodes_are_labelled_with(three_nodes: E2E, api: KubeClient) -> None:
    kubectl = three_nodes.kubectl
    zones = {"trainctl-local": "a", "trainctl-local-2": "a", "trainctl-local-3": "b"}
    for name, zone in zones.items():
        kubectl("label", "node", name, f"{ZONE}={zone}")
    try:
        constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                      "labelSelector": {"matchLabels": {"app": "zoned"}}}
        for i in range(4):
            kubectl.apply(sleeper(f"zoned-{i}", {"app": "zoned"}, topologySpreadConstraints=[constraint]))
        placed = [zones[bound_node(api, f"zoned-{i}")] for i in range(4)]
        assert sorted(placed) == ["a", "a", "b", "b"]
    finally:
        for name in zones:
            kubectl("label", "node", name, f"{ZONE}-")


def test_a_placement_field_this_scheduler_does_not_implement_is_refused_by_name(three_nodes: E2E,
                                                                               api: KubeClient) -> None:
    claims = sleeper("wants-a-claim", {"app": "dra"}, resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}])
    three_nodes.kubectl.apply(claims)
    described(three_nodes, "wants-a-claim", "FailedScheduling",
              "0/3 nodes are available: spec.resourceClaims is not implemented by this scheduler. "
              "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert not api.get(PODS, "default", "wants-a-claim")["spec"].get("nodeName")
