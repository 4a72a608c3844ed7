"""Real torch jobs on a three-node embedded cluster whose nodes die or freeze.

A node that stops renewing its Lease becomes Ready=Unknown after the node monitor grace
period; the controller then treats the job's pods on it as lost after ``--node-lost-grace``,
force-deletes them and creates replacements on the nodes that are still Ready. Each test
gets its own cluster (a killed node stays killed) with short grace periods, and every node
has room for two workers, so a replacement always fits on the survivors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.observer import JobObserver, LogLine
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

ELASTIC = "pytorch-elastic"
W0, W1 = f"{ELASTIC}-worker-0", f"{ELASTIC}-worker-1"
DETECT_BOUND = 90.0  # seconds: node grace + lost grace + a replacement training again, on a loaded machine


@pytest.fixture
def nodes_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, nodes=3, node_cpu="2", node_monitor_grace_period="10s",
                         controller_args=["--node-lost-grace", "5s"]) as env:
        yield env


def world_sizes(run: JobObserver, pods: set[str]) -> list[int]:
    """The WORLD_SIZE of every training round, in order, from the [start] lines of ``pods``."""
    history: list[int] = []
    for line in run.events("start"):
        if line.pod in pods and (not history or history[-1] != line.int("WORLD_SIZE")):
            history.append(line.int("WORLD_SIZE"))
    return history


def assert_no_duplicate_ranks(run: JobObserver) -> None:
    """No two processes claim one rank of one rendezvous round. A round is what its [start]
    lines share: the WORLD_SIZE and the fresh MASTER_PORT torchrun picks for it."""
    ranks: dict[tuple[str, int], list[int]] = {}
    for line in run.events("start"):
        ranks.setdefault((line.fields["MASTER_PORT"], line.int("WORLD_SIZE")), []).append(line.int("RANK"))
    clashes = {key: found for key, found in ranks.items() if len(found) != len(set(found)) or len(found) > key[1]}
    assert not clashes, f"duplicate ranks: {clashes}\n{run.dump()}"


def node_of(run: JobObserver, pod: str) -> str:
    return run.wait_for(f"{pod} scheduled", lambda: (run.pods.get(pod) or {}).get("spec", {}).get("nodeName"), 60)


def job_events(env: E2E, job: str) -> list[Any]:
    events = client.CoreV1Api(env.api).list_namespaced_event("default").items
    return [e for e in events if e.involved_object.name == job]


def elastic_job(steps: int) -> dict[str, Any]:
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", str(steps))
    return job


def step_of(pod: str, world_size: int, *, uid: str | None = None):
    def match(line: LogLine) -> bool:
        return (line.pod == pod and line.event == "step" and line.int("world_size") == world_size
                and (uid is None or line.uid == uid))
    return match


def test_elastic_job_survives_the_node_of_worker_0_dying(nodes_env: E2E) -> None:
    with nodes_env.run(elastic_job(600)) as run:
        run.wait_line("worker-1 training at world_size=2", lambda ln: step_of(W1, 2)(ln) and ln.int("step") >= 20, 180)
        lost_node, lost_uid = node_of(run, W0), run.pods[W0]["metadata"]["uid"]
        killed = time.monotonic()
        nodes_env.cluster.kill_node(lost_node)

        replacement = run.wait_for("a replacement worker-0",
                                   lambda: [u for u in run.uids(W0) if u != lost_uid], DETECT_BOUND)
        run.wait_line("the replacement training at world_size=2", step_of(W0, 2, uid=replacement[0]),
                      DETECT_BOUND, since=killed)
        assert run.pods[W0]["spec"]["nodeName"] != lost_node, run.dump()

        finished = run.wait_succeeded(timeout=400)
        assert condition(finished, "Succeeded")
        history = world_sizes(run, {W0, W1})
        assert history[0] == 2 and history[-1] == 2 and set(history) <= {1, 2}, f"{history}\n{run.dump()}"
        assert_no_duplicate_ranks(run)
        done = run.events("done")
        assert sorted(ln.int("rank") for ln in done) == [0, 1], run.dump()
        assert {ln.int("world_size") for ln in done} == {2}, run.dump()
        assert finished["status"].get("restartCount") == 1, finished["status"]
        assert len(run.uids(W0)) == 2 and len(run.uids(W1)) == 1, run.dump()
        named = [e for e in job_events(nodes_env, ELASTIC) if W0 in (e.message or "") and lost_node in (e.message or "")]
        assert named, [e.message for e in job_events(nodes_env, ELASTIC)]


def test_a_static_job_spread_over_three_nodes_trains_together(nodes_env: E2E) -> None:
    """Each node hands out addresses from its own slice of the pod range, and a kubelet
    resolves a Service whose pod runs on another node from that pod's reported address."""
    with nodes_env.run(load_sample("pytorch/ddp.yaml")) as run:
        finished = run.wait_succeeded(timeout=300)
        assert condition(finished, "Succeeded")
        pods = [run.pods[name] for name in ("pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1")]
        assert len({p["spec"]["nodeName"] for p in pods}) > 1, run.dump()
        assert len({p["status"]["podIP"] for p in pods}) == 3, run.dump()
        done = run.events("done")
        assert sorted(ln.int("rank") for ln in done) == [0, 1, 2], run.dump()
        assert {ln.int("world_size") for ln in done} == {3}, run.dump()
