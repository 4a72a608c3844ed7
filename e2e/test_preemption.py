"""A high-priority job takes the extra workers of a low-priority elastic job, as kube-scheduler's
preemption does, and the low one trains on at its minimum, then grows back and succeeds.

Three nodes with room for one worker each (one CPU a node, 700m a worker). The low job (the
spot sample, ``priorityClassName: batch-low``, minReplicas 1) trains on all three; the high
job (``batch-high``, two workers) fits nowhere, so the scheduler nominates it to nodes and
preempts two low workers: each is marked ``DisruptionTarget`` (``PreemptionByScheduler``),
deleted with its grace period and gets a ``Preempted`` Event. The low job counts no failure
and no restart (an ElasticShrink Event says why), its last worker trains on at world size 1,
the high job runs and succeeds, and the low job grows back to three and succeeds.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.observer import LogLine
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

LOW, HIGH = "pytorch-elastic-spot", "urgent"
LOW_WORKERS = [f"{LOW}-worker-{i}" for i in range(3)]
HIGH_WORKERS = [f"{HIGH}-worker-{i}" for i in range(2)]
TOGETHER_BOUND = 480.0  # seconds: workers train together after a membership change, on a loaded machine


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, nodes=3, node_cpu="1", controlplane_args=["--controllers", "disruption"]) as env:
        yield env


def step_at(pod: str, world_size: int) -> Any:
    def match(line: LogLine) -> bool:
        return line.pod == pod and line.event == "step" and line.int("world_size") == world_size
    return match


def job_at(name: str, priority_class: str, replicas: int, minimum: int, steps: int) -> dict[str, Any]:
    job = copy.deepcopy(load_sample("pytorch/elastic-spot.yaml"))
    job["metadata"]["name"] = name
    job["spec"]["elasticPolicy"].update(minReplicas=minimum, maxReplicas=replicas)
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    worker["replicas"] = replicas
    worker["template"]["spec"]["priorityClassName"] = priority_class
    worker["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "700m"  # one worker a node
    set_arg(job, "--steps", str(steps))
    set_arg(job, "--checkpoint-dir", f"checkpoints/{name}")
    return job


def events_about(env: E2E, name: str) -> list[Any]:
    return [e for e in client.CoreV1Api(env.api).list_namespaced_event("default").items if e.involved_object.name == name]


@pytest.mark.timeout(1800)  # two jobs' torchrun rounds on three nodes of a loaded two-core machine
def test_a_high_priority_job_preempts_the_extra_workers_of_a_low_priority_elastic_job(three_nodes: E2E) -> None:
    env = three_nodes
    env.kubectl("create", "priorityclass", "batch-low", "--value=100")
    env.kubectl("create", "priorityclass", "batch-high", "--value=1000")
    with env.run(job_at(LOW, "batch-low", 3, 1, 1200)) as low:
        for pod in LOW_WORKERS:
            low.wait_line(f"a step of {pod} at world_size=3", step_at(pod, 3), TOGETHER_BOUND)
        with env.run(job_at(HIGH, "batch-high", 2, 2, 40)) as high:
            started = time.monotonic()
            def two_preempted() -> list[str] | None:
                found = [pod for pod in LOW_WORKERS if any(e.reason == "Preempted" for e in events_about(env, pod))]
                return found if len(found) >= 2 else None
            preempted = low.wait_for("two workers preempted", two_preempted, 300)
            assert len(preempted) == 2, preempted  # two high workers take two low ones, no more
            survivor = next(pod for pod in LOW_WORKERS if pod not in preempted)
            low.wait_line(f"{survivor} training alone", step_at(survivor, 1), TOGETHER_BOUND, since=started)
            for pod in HIGH_WORKERS:
                high.wait_line(f"a step of {pod} at world_size=2", step_at(pod, 2), TOGETHER_BOUND)
            job = env.kubectl.json("get", "pytorchjob", LOW)
            assert not job["status"].get("restartCount") and condition(job, "Failed") is None, job["status"]
            messages = [e.message for e in events_about(env, LOW) if e.reason == "ElasticShrink"]
            assert any("preempted by the scheduler" in m for m in messages), messages
            urgent = env.kubectl.json("get", "pod", HIGH_WORKERS[0])
            preempted_event = next(e for e in events_about(env, preempted[0]) if e.reason == "Preempted")
            assert preempted_event.message.startswith("Preempted by pod ") and preempted_event.source.component == "default-scheduler"
            assert urgent["spec"]["priority"] == 1000
            high.wait_succeeded(timeout=600)
        preemptions = [e for pod in LOW_WORKERS for e in events_about(env, pod) if e.reason == "Preempted"]
        assert len(preemptions) == 2, [(e.involved_object.name, e.message) for e in preemptions]
        for pod in LOW_WORKERS:  # room again: the low job grows back to the size it asked for
            low.wait_line(f"a step of {pod} at world_size=3 again", step_at(pod, 3), TOGETHER_BOUND, since=started)
        finished = low.wait_succeeded(timeout=900)
        assert not finished["status"].get("restartCount") and condition(finished, "Failed") is None, finished["status"]

