"""Disruption budgets and priorities on a three-node embedded cluster, with kubectl as a user
runs it: a PodDisruptionBudget holds ``kubectl drain`` at its minimum until a replacement
pod is Ready, and a PriorityClass fills in a pod's ``spec.priority``.

Plain pods (``sleep``) keep it fast: no training controller runs. They name a ConfigMap as
their controller, as pods of a workload would name theirs, so ``kubectl drain`` takes them
without ``--force``; nothing recreates an evicted pod, so the test makes the replacement.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.polling import poll

pytestmark = pytest.mark.e2e

NS = "default"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def nodes_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, nodes=3, controller=False,
                         controlplane_args=["--controllers", "node-lifecycle,disruption"]) as env:
        yield env


def web_pod(env: E2E, name: str, node: str, owner: dict[str, Any]) -> None:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "web", "uid": owner["metadata"]["uid"], "controller": True}
    env.kubectl.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}, "ownerReferences": [ref]},
                       "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 5,
                                "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}})


def budget(env: E2E) -> dict[str, Any]:
    status: dict[str, Any] = env.kubectl.json("get", "pdb", "web").get("status") or {}
    return status


def test_a_budget_holds_a_drain_until_a_replacement_is_ready(nodes_env: E2E, tmp_path: Path) -> None:
    env = nodes_env
    nodes = env.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").split()
    assert len(nodes) == 3
    env.kubectl("create", "configmap", "web")
    owner = env.kubectl.json("get", "configmap", "web")
    for i, node in enumerate(nodes):
        web_pod(env, f"web-{i}", node, owner)
    env.kubectl("create", "pdb", "web", "--selector=app=web", "--min-available=2")
    env.kubectl("wait", "--for=condition=Ready", "pod", "-l", "app=web", "--timeout=120s", timeout=150)
    poll(lambda: budget(env).get("disruptionsAllowed") == 1, 60, "one disruption allowed")
    status = budget(env)
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"]) == (3, 2, 3)
    columns = env.kubectl("get", "pdb", "web", "--no-headers").split()
    assert columns[:4] == ["web", "2", "N/A", "1"]

    # The first drain takes the one disruption the budget allows: web-0 is evicted and gone.
    drained = env.kubectl.run("drain", nodes[0], "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s",
                              timeout=150)
    assert "evicting pod default/web-0" in drained.stderr + drained.stdout
    assert f"node/{nodes[0]} drained" in drained.stdout
    assert "SchedulingDisabled" in env.kubectl("get", "node", nodes[0], "--no-headers")
    assert env.kubectl.run("get", "pod", "web-0", check=False).returncode != 0
    poll(lambda: budget(env).get("expectedPods") == 2, 60, "the evicted pod gone from the budget")
    assert budget(env)["disruptionsAllowed"] == 0

    # The second drain is held at the minimum: kubectl retries the 429 and web-1 keeps running.
    log = tmp_path / "drain.err"
    with log.open("w") as err:
        second = subprocess.Popen(["kubectl", "drain", nodes[1], "--ignore-daemonsets", "--delete-emptydir-data",
                                   "--timeout=180s"], env=env.kubectl.env, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            poll(lambda: VIOLATION in log.read_text(), 60, "the drain refused by the budget")
            pod = env.kubectl.json("get", "pod", "web-1")
            assert pod["metadata"].get("deletionTimestamp") is None
            assert second.poll() is None  # still retrying
            # A replacement on the third node becomes Ready: the budget allows one disruption again.
            web_pod(env, "web-3", nodes[2], owner)
            out, _ = second.communicate(timeout=180)
        finally:
            if second.poll() is None:
                second.kill()
    assert second.returncode == 0, log.read_text()
    assert f"node/{nodes[1]} drained" in out
    assert env.kubectl.run("get", "pod", "web-1", check=False).returncode != 0
    assert json.loads(env.kubectl("get", "pod", "web-3", "-o", "json"))["status"]["phase"] == "Running"


def test_an_eviction_is_refused_then_allowed_and_a_priority_class_fills_in_priority(nodes_env: E2E) -> None:
    env = nodes_env
    env.kubectl("create", "priorityclass", "training-high", "--value=100000", "--description=jobs that must not wait")
    env.kubectl("run", "solo", "--image=busybox", "--labels=app=solo", "--overrides",
                json.dumps({"spec": {"priorityClassName": "training-high", "terminationGracePeriodSeconds": 3}}),
                "--command", "--", "sleep", "3600")
    spec = env.kubectl.json("get", "pod", "solo")["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (100000, "PreemptLowerPriority")
    assert env.kubectl.json("get", "priorityclass", "system-node-critical")["value"] == 2000001000

    env.kubectl("create", "pdb", "solo", "--selector=app=solo", "--min-available=1")
    env.kubectl("wait", "--for=condition=Ready", "pod/solo", "--timeout=120s", timeout=150)
    poll(lambda: env.kubectl.json("get", "pdb", "solo").get("status", {}).get("currentHealthy") == 1, 60,
         "the pod counted healthy")
    eviction = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "solo", "namespace": NS}})
    refused = env.kubectl.run("create", "--raw", f"/api/v1/namespaces/{NS}/pods/solo/eviction", "-f", "-",
                              input=eviction, check=False)
    assert refused.returncode != 0 and VIOLATION in refused.stderr
    env.kubectl("patch", "pdb", "solo", "--type=merge", "-p", '{"spec": {"minAvailable": 0}}')
    poll(lambda: env.kubectl.json("get", "pdb", "solo")["status"].get("disruptionsAllowed") == 1, 60,
         "the budget widened")
    env.kubectl("create", "--raw", f"/api/v1/namespaces/{NS}/pods/solo/eviction", "-f", "-", input=eviction)
    env.kubectl("wait", "--for=delete", "pod/solo", "--timeout=60s", timeout=90)
