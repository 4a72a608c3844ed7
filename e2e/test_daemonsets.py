"""A DaemonSet on a two-node embedded cluster, driven with kubectl: a pod on each node (bound
by the scheduler through the pod's node affinity, run by that node's kubelet), a cordoned node
keeping its daemon, a new image rolled out node by node, ``rollout history`` and ``rollout
undo`` back to the first template (its ControllerRevision), and the pods collected with the
DaemonSet. The pods ``sleep``: no port, no training controller; the control plane runs only
the DaemonSet controller."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.polling import poll

pytestmark = pytest.mark.e2e

DAEMONSET = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "template": {"metadata": {"labels": {"app": "agent"}},
                          "spec": {"terminationGracePeriodSeconds": 2,
                                   "containers": [{"name": "agent", "image": "python:3.11", "command": ["sleep", "3600"]}]}}}}


@pytest.fixture
def ds_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, nodes=2, controller=False, controlplane_args=["--controllers", "daemonset"]) as env:
        yield env


def running(env: E2E) -> dict[str, str]:
    """node -> image of the running, not deleted agent pods."""
    pods = env.kubectl.json("get", "pods", "-l", "app=agent")["items"]
    return {p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"] for p in pods
            if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"}


def rollout_status(env: E2E) -> None:
    out = env.kubectl("rollout", "status", "ds/agent", "--timeout=180s", timeout=200)
    assert 'daemon set "agent" successfully rolled out' in out


def test_a_daemonset_runs_a_pod_per_node_and_rolls_out_node_by_node(ds_env: E2E) -> None:
    env = ds_env
    nodes = sorted(n["metadata"]["name"] for n in env.kubectl.json("get", "nodes")["items"])
    assert len(nodes) == 2
    env.kubectl("apply", "-f", "-", input=json.dumps(DAEMONSET))
    rollout_status(env)
    poll(lambda: running(env) == {n: "python:3.11" for n in nodes}, 120, "a running pod on each node")
    row = env.kubectl("get", "ds", "agent", "--no-headers").split()
    assert row[:7] == ["agent", "2", "2", "2", "2", "2", "<none>"]

    env.kubectl("cordon", nodes[1])
    env.kubectl("set", "image", "ds/agent", "agent=python:3.12")
    rollout_status(env)
    poll(lambda: running(env) == {n: "python:3.12" for n in nodes}, 120, "every node's pod replaced, the cordoned one's too")
    history = env.kubectl("rollout", "history", "ds/agent")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    env.kubectl("rollout", "undo", "ds/agent")
    rollout_status(env)
    poll(lambda: running(env) == {n: "python:3.11" for n in nodes}, 120, "every node's pod back on the first template")

    env.kubectl("delete", "ds", "agent")
    poll(lambda: not env.kubectl.json("get", "pods", "-l", "app=agent")["items"], 120, "the pods collected with the DaemonSet")
