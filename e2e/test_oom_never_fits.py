"""A job that can never fit ends: OOMKilled at every rung of its ladder up to the node's memory,
restarted in place under OnFailure with no backoffLimit, it fails saying it cannot get the
memory it needs instead of looping in CrashLoopBackOff for ever.

A one-node cluster whose node offers 2Gi and a PyTorchJob whose Worker takes memory until it
is killed, opted into OOM relaunch with a factor of 4 and no maximum: 256Mi, 1Gi, then 2Gi
(4Gi is more than the node holds). The Worker is a few lines of Python, not torch: what is
under test is the kubelet's OOM kill and the controller's ladder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.api import constants as c

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.net import free_port

pytestmark = pytest.mark.e2e

JOB = "never-fits"
WORKER = f"{JOB}-worker-0"
LADDER = ["256Mi", "1Gi", "2Gi"]
BOUND = 400.0  # seconds: three pods and a restart in place, each killed once it has taken its limit, on a loaded machine
# Takes memory 32 MiB at a time (bytearray fills it with zeros: every page is touched) until killed.
GREEDY = "import time\nheld = []\nwhile True:\n    held.append(bytearray(32 << 20))\n    time.sleep(0.01)\n"


@pytest.fixture(scope="module")
def small_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("never-fits"), node_memory="2Gi") as env:
        yield env


def greedy_job() -> dict[str, Any]:
    container = {
        "name": "pytorch", "image": "trainctl/samples:0.1.0", "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", GREEDY],
        # A port of its own: the default 23456 may be held by another cluster on this machine.
        "ports": [{"name": "pytorchjob-port", "containerPort": free_port("0.0.0.0")}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": LADDER[0]}},
    }
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": JOB, "annotations": {c.ANNOTATION_OOM_MEMORY_FACTOR: "4"}},
        "spec": {"pytorchReplicaSpecs": {"Worker": {  # no runPolicy.backoffLimit
            "replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}}},
    }


def test_a_worker_oom_killed_at_the_top_of_its_ladder_fails_the_job(small_node: E2E) -> None:
    seen: dict[str, dict[str, Any]] = {}  # every Worker pod instance, as last seen
    with small_node.run(greedy_job()) as run:
        run.on_pod(lambda event, pod: seen.__setitem__(pod["metadata"]["uid"], pod))
        outcome = run.wait_finished(BOUND)

        assert outcome == "Failed", run.dump()
        limits = [seen[uid]["spec"]["containers"][0]["resources"]["limits"]["memory"] for uid in run.uids(WORKER)]
        assert limits == LADDER, run.dump()
        assert run.job["status"]["oomMemory"] == {"Worker-0": {"memory": "2Gi", "previous": "1Gi", "relaunches": 2}}

    job = small_node.kubectl.json("get", "pytorchjob", JOB)
    failed = condition(job, "Failed")
    assert failed is not None, job["status"]
    assert failed["message"] == (
        f"Job {JOB} has failed: replica Worker-0 was OOMKilled at 2Gi and no node can hold more than 2Gi, after it "
        "was relaunched with more memory 2 times: it cannot get the memory it needs"), failed
