"""The node check before training, on a three-node cluster with the isolated pod network.

A static PyTorchJob (Master + 2 Workers, one pod per node: the scheduler spreads them) opts in
with ``trainctl.io/node-check: "true"``. A healthy job passes the check on every node and
trains; a node whose pods' data link is dead (``degrade --net-loss 100``: the node stays
Ready) and a node whose CPU is capped (``degrade --cpu 20``, with
``trainctl.io/exclude-stragglers``) are found, tainted ``trainctl.io/unhealthy`` and named in
a Warning Event, and the job trains on the two healthy nodes; neither healthy node is blamed.
What is asserted is outcomes (Events, taints, where the pods end, the job's success), never
a duration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.node_check import DDP, checked_job, heal, job_events, node_names, tainted

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]  # torch starts slowly on a loaded machine

PODS = (f"{DDP}-master-0", f"{DDP}-worker-0", f"{DDP}-worker-1")
TIMEOUT = 600.0  # torch imports take tens of seconds each on a loaded two-core machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    # A pod on a CPU-capped node imports torch slowly: the pods of a check wait longer to meet.
    with scratch_cluster(tmp_path_factory.mktemp("nodecheck"), nodes=3, node_cpu="2", network="isolated",
                         controller_args=["--node-check-join-timeout", "180"]) as env:
        yield env


@pytest.fixture
def env(cluster: E2E) -> Iterator[E2E]:
    yield cluster
    heal(cluster)
    cluster.clean()


def run_with_a_bad_node(env: E2E, fault: dict[str, Any], exclude_stragglers: bool) -> tuple[str, dict[str, Any], list[str]]:
    """Degrade the last node with ``fault``, run the job, and return the node, the finished
    job and the NodeCheckFailed/StragglerDetected Events once it succeeded."""
    bad = node_names(env)[-1]
    env.cluster.fault("degrade", bad, **fault)
    with env.run(checked_job(exclude_stragglers)) as run:
        placed = run.wait_for("the three pods placed", lambda: len({
            (run.pods.get(name) or {}).get("spec", {}).get("nodeName") for name in PODS} - {None}) == 3 or None, 120)
        assert placed
        assert bad in {run.pods[name]["spec"]["nodeName"] for name in PODS}, run.dump()
        run.wait_for(f"{bad} tainted", lambda: bad in tainted(env) or None, TIMEOUT)
        finished = run.wait_succeeded(timeout=TIMEOUT)
        final_nodes = {run.pods[name]["spec"]["nodeName"] for name in PODS if name in run.pods}
    assert condition(finished, "Succeeded")
    assert bad not in final_nodes  # the job trained on the nodes that passed
    blamed = job_events(env, "NodeCheckFailed", finished) + [
        m for m in job_events(env, "StragglerDetected", finished) if "kept" not in m]
    return bad, finished, blamed


def test_a_healthy_job_with_the_check_passes_on_every_node_and_trains(env: E2E) -> None:
    # Stragglers reported, not excluded: on a crowded machine one node may be slower by chance.
    with env.run(checked_job(exclude_stragglers=False)) as run:
        finished = run.wait_succeeded(timeout=TIMEOUT)
        done = run.events("done")
    assert condition(finished, "Succeeded")
    assert sorted(ln.int("rank") for ln in done) == [0, 1, 2]
    passed = job_events(env, "NodeCheckPassed", finished)
    assert len(passed) == 3 and all("allgather" in m and "matmul" in m for m in passed), passed
    assert tainted(env) == {} and job_events(env, "NodeCheckFailed", finished) == []
    outcomes = [entry["result"] for pods in finished["status"]["nodeCheck"].values() for entry in pods.values()]
    assert len(outcomes) == 3 and set(outcomes) <= {"passed", "straggler"}, finished["status"]["nodeCheck"]


def test_a_node_with_a_dead_data_link_is_tainted_and_the_job_trains_on_the_others(env: E2E) -> None:
    bad, finished, blamed = run_with_a_bad_node(env, {"net_loss": 100}, exclude_stragglers=False)
    assert list(tainted(env)) == [bad]  # no healthy partner is blamed
    assert blamed and all(f"Node {bad} failed the node check" in m for m in blamed), blamed
    assert {e["result"] for e in finished["status"]["nodeCheck"][bad].values()} <= {"node-check-failed", "unreachable"}


def test_a_cpu_capped_node_is_a_straggler_tainted_and_the_job_trains_on_the_others(env: E2E) -> None:
    # 3 % of its CPU limit: on a crowded two-core machine a pod gets little more than 20 % of a
    # core anyway, so a 20 % cap would not slow it (the bench measures 20 % on a quiet machine).
    bad, finished, blamed = run_with_a_bad_node(env, {"cpu": 3}, exclude_stragglers=True)
    assert tainted(env) == {bad: "straggler"}
    assert blamed and all(f"Node {bad} failed the node check" in m and "matmul" in m for m in blamed), blamed
    assert {e["result"] for e in finished["status"]["nodeCheck"][bad].values()} == {"straggler"}
