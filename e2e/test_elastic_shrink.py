"""An elastic job that gives a worker up and goes on: a chosen worker out, and a spot reclaim.

- *A chosen worker out* (the session cluster): the spot sample's three workers train;
  ``kubectl annotate pod …-worker-1 controller.kubernetes.io/pod-deletion-cost=-100`` and
  ``kubectl scale --replicas=2`` remove worker-1, workers 0 and 2 keep their pods and train
  on at world size 2, nothing counts a restart; ``--replicas=3`` fills the hole with worker-1.
- *A staged reclaim* (three nodes, room for one worker each): ``node preempt`` with a notice
  evicts the worker on that node (SIGTERM, its grace period); the survivors train on at world
  size 2, the worker's replacement waits Pending, the job counts no failure and no restart and
  says why in an ElasticShrink Event; once the machine boots again as a new Node the
  replacement lands there and all three train together, then the job succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from trainctl.cluster.faults import NODE_FAULTS

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.observer import JobObserver, LogLine
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

JOB = "pytorch-elastic-spot"
W0, W1, W2 = (f"{JOB}-worker-{i}" for i in range(3))
COST = "controller.kubernetes.io/pod-deletion-cost"
TOGETHER_BOUND = 480.0  # seconds: workers train together after a membership change, on a loaded machine


def step(pod: str, world_size: int):
    def match(line: LogLine) -> bool:
        return line.pod == pod and line.event == "step" and line.int("world_size") == world_size
    return match


def together(run: JobObserver, pods: list[str], world_size: int, since: float) -> None:
    for pod in pods:
        run.wait_line(f"a step of {pod} at world_size={world_size}", step(pod, world_size), TOGETHER_BOUND, since=since)


def spot_job(steps: int) -> dict[str, Any]:
    job = load_sample("pytorch/elastic-spot.yaml")
    set_arg(job, "--steps", str(steps))
    return job


def not_failed_nor_restarted(job: dict[str, Any]) -> None:
    assert not job["status"].get("restartCount"), job["status"]
    assert condition(job, "Failed") is None, job["status"]


def job_events(env: E2E) -> list[Any]:
    return [e for e in client.CoreV1Api(env.api).list_namespaced_event("default").items if e.involved_object.name == JOB]


@pytest.mark.timeout(1800)  # three torchrun rounds on a loaded two-core machine
def test_the_annotated_worker_is_the_one_removed_and_a_scale_out_fills_its_place(e2e: E2E) -> None:
    with e2e.run(spot_job(900)) as run:
        together(run, [W0, W1, W2], 3, since=0.0)
        kept = {pod: run.uids(pod) for pod in (W0, W2)}
        e2e.kubectl("annotate", "pod", W1, f"{COST}=-100")
        e2e.kubectl("scale", "pytorchjob", JOB, "--replicas=2")
        scaled_in = time.monotonic()
        run.wait_for("worker-1 gone", lambda: W1 not in run.pods, 180)  # its grace period, on a loaded machine
        together(run, [W0, W2], 2, since=scaled_in)
        assert {pod: run.uids(pod) for pod in (W0, W2)} == kept, "the survivors keep their pods"
        assert W1 in run.deleted and sorted(run.pods) == sorted([W0, W2, f"{JOB}-rdzv"]), run.dump()
        not_failed_nor_restarted(e2e.kubectl.json("get", "pytorchjob", JOB))

        e2e.kubectl("scale", "pytorchjob", JOB, "--replicas=3")
        scaled_out = time.monotonic()
        together(run, [W0, W1, W2], 3, since=scaled_out)
        assert len(run.uids(W1)) == 2 and [name for name, _ in run.created if name.endswith("-worker-3")] == []

        finished = run.wait_succeeded(timeout=400)
        not_failed_nor_restarted(finished)
        assert {pod: run.uids(pod) for pod in (W0, W2)} == kept, run.dump()


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[E2E]:
    # One CPU a node and 700m a worker: one worker a node, so a reclaimed worker waits for room.
    with scratch_cluster(tmp_path, nodes=3, node_cpu="1", node_monitor_grace_period="10s",
                         controlplane_args=["--controllers", "node-lifecycle"]) as env:
        yield env


def one_worker_a_node(job: dict[str, Any]) -> dict[str, Any]:
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["requests"]["cpu"] = "700m"
    return job


@pytest.mark.timeout(1500)  # a cold start on three nodes, the notice, the shrink, the boot, the regrowth
def test_a_staged_reclaim_shrinks_the_job_which_trains_on_and_grows_back(three_nodes: E2E) -> None:
    env = three_nodes
    with env.run(one_worker_a_node(spot_job(1500))) as run:
        together(run, [W0, W1, W2], 3, since=0.0)
        store_node = run.pods[f"{JOB}-rdzv"]["spec"]["nodeName"]
        victim = next(pod for pod in (W1, W2, W0) if run.pods[pod]["spec"]["nodeName"] != store_node)
        node = run.pods[victim]["spec"]["nodeName"]
        survivors = [pod for pod in (W0, W1, W2) if pod != victim]
        kept = {pod: run.uids(pod) for pod in survivors}
        noticed = time.monotonic()
        NODE_FAULTS["preempt"](env.cluster, node, {"notice": "30s"})  # returns once the machine is gone
        together(run, survivors, 2, since=noticed)
        job = env.kubectl.json("get", "pytorchjob", JOB)
        not_failed_nor_restarted(job)
        assert run.deleted.get(victim) == "Running", run.dump()  # evicted while running, given its grace period
        run.wait_for("the replacement", lambda: run.uids(victim)[1:], 120)
        assert (run.pods[victim].get("status") or {}).get("phase") == "Pending", run.dump()  # no room until the node is back
        shrunk = [e.message for e in job_events(env) if e.reason == "ElasticShrink"]
        assert any(victim in m and f"node {node} was reclaimed" in m for m in shrunk), [e.message for e in job_events(env)]

        env.cluster.start_node(node)
        back = time.monotonic()
        together(run, [W0, W1, W2], 3, since=back)
        # The worker came back on the returned node (the first replacement may have been evicted
        # again by the new Node's not-ready taint before it was Ready: another replacement, no restart).
        assert run.pods[victim]["spec"]["nodeName"] == node, run.dump()

        finished = run.wait_succeeded(timeout=600)
        # Growing back counts no restart either: the replacement bound the moment the Node
        # came back is run by the new kubelet, not failed as a pod it ran before.
        not_failed_nor_restarted(finished)
        assert {pod: run.uids(pod) for pod in survivors} == kept, run.dump()
        done = run.events("done")
        assert {ln.int("world_size") for ln in done} == {3}, run.dump()
