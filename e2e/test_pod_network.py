"""Real torch jobs on the isolated pod network: a port space per pod, and a node cut off.

In isolated mode (``trainctl local up --network isolated``) every pod has a network
namespace of its own, so two jobs on the usual rendezvous port (23456, the samples'
default, deliberately not moved to a free port here) train at the same time; in shared
mode the second would wait for the first to release the port. ``node partition`` cuts a
node's kubelet and pods off while their processes run on: the node goes NotReady, the
controller replaces the job's pod on it, and on ``heal`` the node's kubelet kills the old
processes before any link comes back, so the old rank never rejoins the job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from e2e.test_node_faults import (
    ELASTIC,
    W0,
    W1,
    elastic_job,
    open_logs,
    pod_processes,
    printed,
    rank0_alone_on_a_node,
    step_of,
    still_running,
    world_sizes,
)

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.samples import load_sample, set_arg
from tests.support.waiting import wait_on

pytestmark = pytest.mark.e2e

DEFAULT_PORT = 23456
DETECT_BOUND = 90.0


def ddp_job(name: str, steps: int) -> dict[str, Any]:
    """The DDP sample as a Master and one Worker on the sample's own port."""
    job = load_sample("pytorch/ddp.yaml")
    job["metadata"]["name"] = name
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    set_arg(job, "--steps", str(steps))
    set_arg(job, "--checkpoint-dir", f"checkpoints/{name}")
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        container = spec["template"]["spec"]["containers"][0]
        container["ports"] = [{"name": "pytorchjob-port", "containerPort": DEFAULT_PORT}]
        container["resources"]["requests"]["cpu"] = "100m"
    return job


@pytest.mark.timeout(900)  # two jobs at once on a loaded two-core machine
def test_two_jobs_on_the_default_port_train_at_the_same_time(tmp_path: Path) -> None:
    with scratch_cluster(tmp_path, network="isolated") as env:
        assert env.cluster.network_mode == "isolated"
        first, second = ddp_job("ddp-a", 300), ddp_job("ddp-b", 300)
        with env.observe(first).start() as run_a, env.observe(second).start() as run_b:
            env.kubectl.apply(first)
            env.kubectl.apply(second)
            for run, name in ((run_a, "ddp-a"), (run_b, "ddp-b")):
                run.wait_line(f"{name} training", lambda ln, n=name: ln.pod == f"{n}-master-0" and ln.event == "step", 240)
            # Both jobs have stepped, each with its own store on 23456: neither waited for the other.
            assert not run_a.events("done") or not run_b.events("done"), run_a.dump() + run_b.dump()
            for run in (run_a, run_b):
                finished = run.wait_succeeded(timeout=400)
                assert condition(finished, "Succeeded")
                done = run.events("done")
                assert sorted(ln.int("rank") for ln in done) == [0, 1], run.dump()
            ips = {pod["status"]["podIP"] for run in (run_a, run_b) for pod in run.pods.values()}
            assert len(ips) == 4 and all(ip.startswith("10.244.") for ip in ips), ips


@pytest.fixture
def partition_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, network="isolated", nodes=3, node_cpu="2", node_monitor_grace_period="10s",
                         controller_args=["--node-lost-grace", "5s"]) as env:
        yield env


@pytest.mark.timeout(900)  # a cold start, the detection and replacement, the heal, the rest of the training
def test_a_partitioned_node_heals_without_its_old_rank_rejoining(partition_env: E2E) -> None:
    """Rank 0's node is partitioned: its processes run on, cut off; the pod is replaced and
    the job trains at full size again. On heal the node's kubelet lists its pods, kills the
    old pod's processes and only then gives the node's remaining pods their links back: the
    old rank never rejoins (no round of three, no duplicate rank)."""
    env = partition_env
    with env.run(elastic_job(1000)) as run:
        _, victim, node, old_uid = rank0_alone_on_a_node(run, 300)
        old_processes = pod_processes(env, node, old_uid)
        old_logs = open_logs(env, old_uid)

        cut = time.monotonic()
        env.cluster.partition_node(node)
        run.wait_for(f"node {node} NotReady", lambda: not _ready(env, node), DETECT_BOUND)
        replacement = run.wait_for(f"a replacement {victim}",
                                   lambda: [u for u in run.uids(victim) if u != old_uid], DETECT_BOUND)
        run.wait_line("the replacement training at world_size=2", step_of(victim, 2, uid=replacement[0]),
                      DETECT_BOUND, since=cut)
        assert run.pods[victim]["spec"]["nodeName"] != node, run.dump()
        assert still_running(old_processes), "a partition must leave the node's processes running"

        printed(old_logs, victim)  # what it printed until now
        healed_at, healed = time.time(), time.monotonic()
        env.cluster.heal_node(node)
        gone = wait_on(threading.Condition(), lambda: not still_running(old_processes), 60, recheck=0.1)
        assert gone, f"the healed node's kubelet left the old pod's processes running: {still_running(old_processes)}"
        run.wait_for(f"node {node} Ready again", lambda: _ready(env, node), DETECT_BOUND)

        finished = run.wait_succeeded(timeout=400)
        assert condition(finished, "Succeeded")
        late = [ln.text for ln in printed(old_logs, victim)
                if ln.event in ("start", "done") or (ln.event == "step" and float(ln.fields["ts"]) >= healed_at
                                                     and ln.int("world_size") > 1)]
        assert not late, f"the old {victim} rejoined after the heal: {late}"
        for log in old_logs:
            log.close()
        assert not run.events("start", since=healed), f"the survivors restarted after the heal\n{run.dump()}"
        history = world_sizes(run, {W0, W1})
        assert history[-1] == 2 and max(history) == 2, f"{history}\n{run.dump()}"
        assert not run.duplicate_ranks(), f"duplicate ranks: {run.duplicate_ranks()}\n{run.dump()}"
        done = run.events("done")
        assert {ln.uid for ln in done} == {run.pods[W0]["metadata"]["uid"], run.pods[W1]["metadata"]["uid"]}, run.dump()
        print(f"\n[partition] healed {healed - cut:.1f}s after the cut; the old processes were gone before its pods"
              f" got their links back ({ELASTIC})")


def _ready(env: E2E, node: str) -> bool:
    conditions = client.CoreV1Api(env.api).read_node(node).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
