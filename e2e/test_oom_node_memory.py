"""An OOM relaunch ladder with no maximum stops at the largest node's memory, and the job fails
saying so.

A one-node cluster whose node offers 1Gi (``trainctl local up --node-memory 1Gi``), and a
PyTorchJob whose Master takes memory until it is killed: it opts into OOM relaunch with a
factor of 1.5 and no maximum. The ladder is 512Mi, 768Mi, then 1Gi (768Mi times 1.5 is
1152Mi, more than the node can hold: a pod asking for it would stay Pending for ever); at
1Gi no node can give more, so the kill follows the restart policy (Never: the job fails)
and the Failed condition names the memory. The Master is a few lines of Python, not torch:
what is under test is the kubelet's OOM kill and the controller's ladder, and three torch
start-ups would only make it slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.api import constants as c

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.net import free_port
from tests.support.pods import container_status

pytestmark = pytest.mark.e2e

JOB = "oom-node-bound"
MASTER = f"{JOB}-master-0"
NODE_MEMORY = "1Gi"
LADDER = ["512Mi", "768Mi", "1Gi"]
BOUND = 180.0  # seconds: three pods, each killed once it has taken its limit, on a loaded machine
# Takes memory 32 MiB at a time (bytearray fills it with zeros: every page is touched) until killed.
GREEDY = "import time\nheld = []\nwhile True:\n    held.append(bytearray(32 << 20))\n    time.sleep(0.01)\n"


@pytest.fixture(scope="module")
def small_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("oom-node"), node_memory=NODE_MEMORY) as env:
        yield env


def greedy_job() -> dict[str, Any]:
    container = {
        "name": "pytorch", "image": "trainctl/samples:0.1.0", "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", GREEDY],
        # A port of its own: the default 23456 may be held by another cluster on this machine.
        "ports": [{"name": "pytorchjob-port", "containerPort": free_port("0.0.0.0")}],
        "resources": {"requests": {"cpu": "100m", "memory": LADDER[0]}, "limits": {"memory": LADDER[0]}},
    }
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": JOB, "annotations": {c.ANNOTATION_OOM_MEMORY_FACTOR: "1.5"}},
        "spec": {"pytorchReplicaSpecs": {"Master": {
            "replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}}},
    }


def test_the_ladder_stops_at_the_nodes_memory_and_the_job_fails_naming_it(small_node: E2E) -> None:
    e2e = small_node
    seen: dict[str, dict[str, Any]] = {}  # every Master pod instance, as last seen
    with e2e.run(greedy_job()) as run:
        run.on_pod(lambda event, pod: seen.__setitem__(pod["metadata"]["uid"], pod))
        outcome = run.wait_finished(BOUND)

        assert outcome == "Failed", run.dump()
        uids = run.uids(MASTER)
        limits = [seen[uid]["spec"]["containers"][0]["resources"]["limits"]["memory"] for uid in uids]
        assert limits == LADDER, run.dump()
        last = run.pods[MASTER]
        terminated = (container_status(last).get("state") or {}).get("terminated") or {}
        assert (last["status"]["phase"], terminated.get("reason")) == ("Failed", "OOMKilled"), run.dump()
        assert run.job["status"]["oomMemory"] == {"Master-0": {"memory": "1Gi", "previous": "768Mi", "relaunches": 2}}

    # As a user sees it, with kubectl.
    job = e2e.kubectl.json("get", "pytorchjob", JOB)
    failed = condition(job, "Failed")
    assert failed is not None, job["status"]
    assert failed["message"].endswith("replica Master-0 was OOMKilled at 1Gi and no node can hold more than 1Gi"), failed
    uid = job["metadata"]["uid"]
    events = e2e.kubectl.json("get", "events", "--field-selector", f"involvedObject.uid={uid}")["items"]
    assert sorted(e["message"] for e in events if e["reason"] == "OOMMemoryIncreased") == [
        f"Pod {MASTER} was OOMKilled with memory limit 512Mi: replica Master-0 is relaunched with 768Mi",
        f"Pod {MASTER} was OOMKilled with memory limit 768Mi: replica Master-0 is relaunched with 1Gi",
    ], events
