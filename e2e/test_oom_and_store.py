"""Faults beyond a killed process, with real torch: a worker out of memory, a lost rendezvous store.

An elastic job that opts into OOM relaunch (samples/pytorch/elastic-oom.yaml) needs more
memory than its first limit: the kubelet kills its container as OOMKilled, and the controller
replaces the pod with 1.5 times the limit whatever the restart policy (OnFailure, Never): an
annotation on the new pod, an OOMMemoryIncreased Event, status.oomMemory, and again 1.5 times
if that is not enough, up to the maximum. Then the job finishes at
WORLD_SIZE=2 with no duplicate rank, each relaunch counted once in status.restartCount and
none of them failing the job. The test prints the seconds from the OOM kill to the relaunched
worker's first step at WORLD_SIZE=2, and where they go. Without the opt-in, or with the
maximum already reached, an OOMKilled worker keeps its limit and backoffLimit fails the job
(naming memory in the second case). The store pod trainctl hosts for an elastic job
(``<job>-rdzv``), force-deleted mid-training, costs each worker at most one restart, and the
job finishes at WORLD_SIZE=2 with no duplicate rank. All of it runs on a three-node cluster,
as on a real one: the store, the workers and their replacements land on different nodes and
find each other through the Services. test_pytorch_elastic.py covers killed worker
processes and pods, and scaling; test_node_faults.py lost and frozen nodes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.api import constants as c

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.observer import JobObserver, LogLine
from tests.support.pods import container_status
from tests.support.samples import load_sample, set_arg, set_restart_policy

pytestmark = pytest.mark.e2e

OOM_JOB = "pytorch-elastic-oom"
STORE_JOB = "pytorch-elastic"
RELAUNCH_BOUND = 120.0  # seconds: an OOM kill, a new pod, torch imports and a rendezvous on a loaded machine
RECOVERY_BOUND = 60.0  # seconds: the workers train again after the store pod is lost
LADDER = ["512Mi", "768Mi", "1Gi"]  # the sample's first limit, times 1.5, up to its maximum


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("faults"), nodes=3, node_cpu="2",
                         controlplane_args=["--controllers", "node-lifecycle"]) as env:
        yield env


@pytest.fixture
def e2e(three_nodes: E2E) -> Iterator[E2E]:
    """This module's jobs run on three nodes, not on the shared one-node cluster."""
    yield three_nodes
    three_nodes.clean()


def _step(pod: str, world_size: int):
    def match(line: LogLine) -> bool:
        return line.pod == pod and line.event == "step" and line.int("world_size") == world_size
    return match


def _oom_killed(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The container's OOMKilled termination (its state, or lastState after a restart in place)."""
    status = container_status(pod)
    for key in ("state", "lastState"):
        terminated = (status.get(key) or {}).get("terminated") or {}
        if terminated.get("reason") == "OOMKilled":
            return terminated
    return None


def _memory(pod: dict[str, Any], kind: str = "limits") -> str:
    return pod["spec"]["containers"][0]["resources"][kind]["memory"]


def _job_events(e2e: E2E, run: JobObserver, reason: str) -> list[dict[str, Any]]:
    """This run's job's Events of ``reason`` (an earlier test's job of the same name had its own)."""
    uid = run.job["metadata"]["uid"]
    events = e2e.kubectl.json("get", "events", "--field-selector", f"involvedObject.uid={uid}")["items"]
    return [e for e in events if e.get("reason") == reason]


class OOMKills:
    """Every pod instance the test saw OOMKilled, when, and when its deletion was seen to
    start (the controller deletes it soon after) and to end: from every watch event."""

    def __init__(self, run: JobObserver) -> None:
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> the pod as first seen OOMKilled
        self.instances: dict[str, dict[str, Any]] = {}  # every pod instance seen, as last seen
        self.seen_at: dict[str, float] = {}
        self.deleting_at: dict[str, float] = {}
        self.gone_at: dict[str, float] = {}
        self.grace: dict[str, int | None] = {}  # the delete's gracePeriodSeconds
        run.on_pod(self._event)

    def _event(self, event: str, pod: dict[str, Any]) -> None:
        now, uid = time.monotonic(), pod["metadata"]["uid"]
        self.instances[uid] = pod
        if uid not in self.pods and _oom_killed(pod):
            self.pods[uid], self.seen_at[uid] = pod, now
        if uid in self.pods and pod["metadata"].get("deletionTimestamp") and uid not in self.deleting_at:
            self.deleting_at[uid], self.grace[uid] = now, pod["metadata"].get("deletionGracePeriodSeconds")
        if uid in self.pods and event == "DELETED":  # a failed pod can go at once, never seen deleting
            self.deleting_at.setdefault(uid, now)
        if uid in self.pods and event == "DELETED":
            self.gone_at.setdefault(uid, now)

    def timeline(self, uid: str) -> str:
        def since_seen(moments: dict[str, float]) -> str:
            return f"+{moments[uid] - self.seen_at[uid]:.1f}s" if uid in moments else "not seen"
        return f"deleting {since_seen(self.deleting_at)}, gone {since_seen(self.gone_at)}"

    def of(self, name: str) -> list[dict[str, Any]]:
        """The OOMKilled instances of pod ``name``, in the order they were seen."""
        return sorted((pod for pod in self.pods.values() if pod["metadata"]["name"] == name),
                      key=lambda pod: self.seen_at[pod["metadata"]["uid"]])


@pytest.mark.parametrize("restart_policy", ["OnFailure", "Never"])
def test_oom_killed_workers_are_relaunched_with_more_memory_and_the_job_succeeds(e2e: E2E, restart_policy: str) -> None:
    """OnFailure: the kubelet restarts the container in place with the old limit, the
    controller replaces the pod all the same. Never: the pod fails, and is replaced.

    With torch's CPU build, 768Mi is enough; a CUDA build of torch needs more memory even on
    a CPU (it maps its CUDA libraries), and its workers climb one more step, to 1Gi. Either
    way every step is the one below times 1.5, capped at the maximum."""
    job = load_sample("pytorch/elastic-oom.yaml")
    set_arg(job, "--steps", "150")
    set_restart_policy(job, restart_policy)
    workers = [f"{OOM_JOB}-worker-0", f"{OOM_JOB}-worker-1"]
    with e2e.run(job) as run:
        kills = OOMKills(run)
        finished = run.wait_succeeded(timeout=300)  # and every exited container's log read

        relaunches = {}
        for worker in workers:
            uids = run.uids(worker)
            relaunches[worker] = len(uids) - 1
            assert 1 <= relaunches[worker] < len(LADDER), f"{worker}: {len(uids)} pods\n{run.dump()}"
            assert [p["metadata"]["uid"] for p in kills.of(worker)] == uids[:-1], run.dump()
            for step, uid in enumerate(uids):
                pod = kills.instances[uid]
                assert (_memory(pod), _memory(pod, "requests")) == (LADDER[step], LADDER[step]), pod["spec"]
                annotation = (pod["metadata"].get("annotations") or {}).get(c.ANNOTATION_OOM_MEMORY)
                assert annotation == (f"{LADDER[step - 1]} -> {LADDER[step]}" if step else None), pod["metadata"]
                if uid != uids[-1]:
                    killed = kills.pods[uid]  # as first seen OOMKilled: its delete may stop a restart in place
                    terminated = _oom_killed(killed)
                    assert terminated and terminated["exitCode"] == 137, container_status(killed)
                    # the relaunch does not wait for the pod's own 30 s grace period (a restart in place at the old limit)
                    assert kills.grace.get(uid, 1) == 1, kills.grace
            last, before = uids[-1], uids[-2]
            holding = [ln.uid for ln in run.events("holding", pod=worker)]
            assert holding and holding[-1] == last, f"{worker} holding memory: {holding}, last pod {last}\n{run.dump()}"
            kill = kills.seen_at[before]
            start = [ln for ln in run.events("start", pod=worker) if ln.uid == last][0]
            trains = [ln for ln in run.lines if _step(worker, 2)(ln) and ln.uid == last][0]
            print(f"\n[e2e] {restart_policy}: {worker} at {LADDER[relaunches[worker] - 1]} OOMKilled (seen) -> "
                  f"old pod {kills.timeline(before)}, relaunched pod at {LADDER[relaunches[worker]]} seen "
                  f"+{run.first_seen[last] - kill:.1f}s, train.py started +{start.at - kill:.1f}s, "
                  f"first step at world_size=2 +{trains.at - kill:.1f}s")
            assert trains.at - kill < RELAUNCH_BOUND

        status = finished["status"]
        assert status["oomMemory"] == {
            f"Worker-{i}": {"memory": LADDER[n], "previous": LADDER[n - 1], "relaunches": n}
            for i, n in enumerate(relaunches[w] for w in workers)}, status
        assert status["restartCount"] == sum(relaunches.values()), status  # each relaunch once, and nothing else
        events = _job_events(e2e, run, "OOMMemoryIncreased")
        assert sorted(e["message"] for e in events) == sorted(
            f"Pod {w} was OOMKilled with memory limit {LADDER[k]}: replica Worker-{i} is relaunched with {LADDER[k + 1]}"
            for i, w in enumerate(workers) for k in range(relaunches[w])), events
        done = run.events("done")
        assert {ln.pod for ln in done} == set(workers) and {ln.int("world_size") for ln in done} == {2}, run.dump()
        assert all(ln.uid == run.uids(ln.pod)[-1] for ln in done), run.dump()
        ranks = [ln.int("rank") for ln in done]
        assert sorted(ranks) == [0, 1], f"ranks {ranks}"


@pytest.mark.parametrize("opt_in", ["none", "at-maximum"])
def test_an_oom_killed_worker_without_room_to_grow_keeps_its_limit_and_fails_the_job(e2e: E2E, opt_in: str) -> None:
    """No opt-in: the reference behaviour. A maximum of 512Mi, the first limit: the OOM follows
    the restart policy and backoffLimit, and the failure says memory was the cause."""
    job = load_sample("pytorch/elastic-oom.yaml")
    annotations = job["metadata"]["annotations"]
    if opt_in == "none":
        del annotations[c.ANNOTATION_OOM_MEMORY_FACTOR], annotations[c.ANNOTATION_OOM_MEMORY_MAX]
    else:
        annotations[c.ANNOTATION_OOM_MEMORY_MAX] = "512Mi"
    job["spec"]["runPolicy"]["backoffLimit"] = 1
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    worker = f"{OOM_JOB}-worker-0"
    with e2e.run(job) as run:
        kills = OOMKills(run)
        outcome = run.wait_finished(RELAUNCH_BOUND)

        assert outcome == "Failed", run.dump()
        [killed] = kills.of(worker) or [None]
        assert killed is not None, f"{worker} was seen OOMKilled\n{run.dump()}"
        assert run.uids(worker) == [killed["metadata"]["uid"]], f"{worker} was replaced\n{run.dump()}"
        assert _memory(killed) == "512Mi" and _oom_killed(killed)["exitCode"] == 137, killed
        assert c.ANNOTATION_OOM_MEMORY not in (killed["metadata"].get("annotations") or {})
        assert not _job_events(e2e, run, "OOMMemoryIncreased")
        assert not run.job["status"].get("oomMemory"), run.job["status"]
        failed = next(cd for cd in run.job["status"]["conditions"] if cd["type"] == "Failed")
        assert "backoff limit" in failed["message"]
        names_memory = "replica Worker-0 was OOMKilled at the maximum memory 512Mi (trainctl.io/oom-memory-max)"
        assert (names_memory in failed["message"]) == (opt_in == "at-maximum"), failed["message"]


def test_losing_the_rendezvous_store_pod_costs_each_worker_at_most_one_restart(e2e: E2E) -> None:
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", "300")
    workers = [f"{STORE_JOB}-worker-0", f"{STORE_JOB}-worker-1"]
    store = f"{STORE_JOB}-rdzv"
    with e2e.run(job) as run:
        for worker in workers:
            run.wait_line(f"{worker} at step 25 with world_size=2",
                          lambda ln, w=worker: _step(w, 2)(ln) and ln.int("step") >= 25, 180)
        store_uid = run.wait_for("the store pod", lambda: run.pods.get(store), 10)["metadata"]["uid"]
        worker_uids = {w: run.uids(w) for w in workers}
        lost = time.monotonic()
        e2e.kubectl("delete", "pod", store, "--force", "--grace-period=0")

        run.wait_for("a new store pod", lambda: [u for u in run.uids(store) if u != store_uid], 60)
        for worker in workers:
            again = run.wait_line(f"{worker} training again at world_size=2",
                                  lambda ln, w=worker: _step(w, 2)(ln), RECOVERY_BOUND, since=lost + 5)
            print(f"\n[e2e] store pod lost -> {worker} trains at world_size=2: {again.at - lost:.1f}s")
        finished = run.wait_succeeded(timeout=300)

        assert condition(finished, "Succeeded")
        for worker in workers:
            starts = run.events("start", pod=worker, since=lost)
            assert len(starts) <= 1, f"{worker} restarted {len(starts)} times after the store was lost\n{run.dump()}"
            assert run.uids(worker) == worker_uids[worker], f"{worker} was not recreated\n{run.dump()}"
            assert container_status(run.pods[worker]).get("restartCount", 0) <= 1, run.dump()
        done = run.events("done")
        assert {ln.pod for ln in done} == set(workers) and {ln.int("world_size") for ln in done} == {2}, run.dump()
        ranks = [ln.int("rank") for ln in done if "rank" in ln.fields]
        assert len(ranks) == len(set(ranks)), f"duplicate ranks {ranks}"
