"""Hung jobs (``trainctl.io/hang-timeout``): found from the workers' progress, named, dumped,
restarted; a node that hangs twice is tainted; hangs past backoffLimit fail the job."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any, Optional

import pytest

from trainctl.controller.reconcile import hang
from trainctl.controller.reconcile.children import rfc3339
from trainctl.controller.reconcile.plan import Observed, Plan, PodProgress

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at, conditions, env_dict, node, terminated

TIMEOUT = 60.0
W0, W1 = "mnist-worker-0", "mnist-worker-1"


class WatchedCluster(Cluster):
    """A Cluster whose shell has seen pods' progress; ``watch`` records it, as the shell
    does, for the pod of that name now (its uid: a replacement is another pod)."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(job)
        self.progress: dict[str, PodProgress] = {}

    def watch(self, name: str, progress: PodProgress) -> None:
        self.progress[self.pods[name]["metadata"]["uid"]] = progress

    def observed(self) -> Observed:
        observed = super().observed()
        observed.progress = dict(self.progress)
        return observed

    def apply(self, plan: Plan) -> None:
        for update in plan.updates:
            if update["kind"] == "Node":
                self.nodes[update["metadata"]["name"]] = update
        plan = replace(plan, updates=[u for u in plan.updates if u["kind"] != "Node"])
        super().apply(plan)


def job(timeout: Optional[str] = "1m", backoff_limit: Optional[int] = None) -> dict[str, Any]:
    out = pytorchjob(master=False, workers=2, restart="OnFailure")
    if timeout is not None:
        out["metadata"]["annotations"] = {hang.ANNOTATION_HANG_TIMEOUT: timeout}
    if backoff_limit is not None:
        out["spec"].setdefault("runPolicy", {})["backoffLimit"] = backoff_limit
    return out


def running(spec: dict[str, Any], placement: Optional[dict[str, str]] = None) -> WatchedCluster:
    cluster = WatchedCluster(spec)
    cluster.step(at(0))
    cluster.step(at(0))
    cluster.set_all("Running")
    for name, pod in cluster.pods.items():
        pod["spec"]["nodeName"] = (placement or {}).get(name, f"node-{name[-1]}")
    cluster.nodes = {name: node(name) for name in ("node-0", "node-1", "node-2")}
    cluster.step(at(1))
    return cluster


def seen(last: float, observed: float, stopped: bool = False) -> PodProgress:
    return PodProgress(last_progress=at(last), observed_at=at(observed), stopped=stopped)


def idle_since(cluster: WatchedCluster, last: dict[str, float], now: float, stopped: tuple[str, ...] = ()) -> None:
    for name in cluster.pods:
        cluster.watch(name, seen(last[name], now - 5, name in stopped))


def hung_events(plan: Plan) -> list[str]:
    return [e.message for e in plan.events if e.reason == "JobHung"]


def test_workers_making_progress_are_left_alone() -> None:
    cluster = running(job())
    cluster.watch(W0, seen(100, 100))
    cluster.watch(W1, seen(100, 100))
    plan = cluster.step(at(1000))
    assert not plan.deletes and not plan.stack_captures and not hung_events(plan)


def test_no_progress_within_the_timeout_waits_and_comes_back_on_time() -> None:
    cluster = running(job())
    idle_since(cluster, {W0: 100, W1: 110}, now=150)
    plan = cluster.step(at(150))
    assert not plan.deletes and not hung_events(plan)
    assert plan.requeue_after == 20.0  # the least idle worker reaches the timeout at 170


def test_idle_without_a_reading_since_its_progress_is_not_judged() -> None:
    """A pod whose usage nobody read since it last worked (metrics not flowing) is no evidence."""
    cluster = running(job())
    cluster.watch(W0, seen(100, 100))
    cluster.watch(W1, seen(100, 300))
    plan = cluster.step(at(1000))
    assert not plan.deletes and not hung_events(plan)


def test_one_worker_alone_at_work_is_progress() -> None:
    cluster = running(job())
    cluster.watch(W0, seen(100, 900))
    cluster.watch(W1, seen(990, 995))
    plan = cluster.step(at(1000))
    assert not plan.deletes and not hung_events(plan)


def test_no_progress_past_the_timeout_dumps_names_and_restarts_all_workers() -> None:
    cluster = running(job())
    idle_since(cluster, {W0: 100, W1: 95}, now=170, stopped=(W1,))
    uids = {name: pod["metadata"]["uid"] for name, pod in cluster.pods.items()}
    plan = cluster.step(at(170))

    (message,) = hung_events(plan)
    assert f"rank 1, pod {W1} on node node-1" in message and "state T" in message, message
    assert "kubectl describe configmap mnist-hang-1" in message
    (capture,) = plan.stack_captures
    assert capture.config_map == "mnist-hang-1" and {pod for pod, _ in capture.pods} == {W0, W1}
    assert {ref.name for ref in plan.deletes if ref.kind == "Pod"} == {W0, W1}
    assert cluster.job["status"]["restartCount"] == 1
    assert ("Restarting", "True", "PyTorchJobRestarting") in conditions(cluster.job["status"])
    assert cluster.job["status"]["hangs"] == [
        {"time": "2024-05-01T12:02:50Z", "pod": W1, "rank": 1, "node": "node-1", "stacks": "mnist-hang-1",
         "replaced": [uids[W0], uids[W1]]}]
    assert not plan.updates, "a first hang taints nothing"


def test_a_hang_waits_a_little_for_the_look_at_idle_pods_then_is_judged_anyway() -> None:
    cluster = running(job())
    cluster.watch(W0, seen(100, 165))
    cluster.watch(W1, PodProgress(last_progress=at(95), observed_at=at(165), stopped=None))
    plan = cluster.step(at(170))
    assert not hung_events(plan) and plan.requeue_after == 5.0  # 60 s + the look's 15 s grace from 100
    (message,) = hung_events(cluster.step(at(175)))
    assert f"pod {W1}" in message and "state T" not in message


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "ExitCode"])
def test_the_restarted_pods_dead_of_their_dump_have_not_failed(policy: str) -> None:
    spec = job()
    spec["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = policy
    cluster = running(spec)
    idle_since(cluster, {W0: 100, W1: 100}, now=170)
    dumped = copy.deepcopy(cluster.pods)
    cluster.step(at(170))
    for name, pod in dumped.items():  # still in the API: deleted, and killed by SIGABRT
        pod["metadata"]["deletionTimestamp"] = rfc3339(at(200))
        pod["status"] = {"phase": "Failed", "containerStatuses": terminated(134)}
        cluster.pods[name] = pod
    cluster.step(at(171))
    assert ("Failed", "True", "PyTorchJobFailed") not in conditions(cluster.job["status"])
    assert ("Restarting", "True", "PyTorchJobRestarting") in conditions(cluster.job["status"])


def test_without_stopped_processes_the_worker_whose_progress_ended_first_is_named() -> None:
    cluster = running(job())
    idle_since(cluster, {W0: 90, W1: 100}, now=170)
    (message,) = hung_events(cluster.step(at(170)))
    assert f"rank 0, pod {W0}" in message and "before the others" in message


def test_the_restarted_workers_get_new_pods_and_are_judged_afresh() -> None:
    cluster = running(job())
    idle_since(cluster, {W0: 100, W1: 100}, now=170)
    cluster.step(at(170))
    plan = cluster.step(at(171))
    assert {pod["metadata"]["name"] for pod in plan.creates if pod["kind"] == "Pod"} == {W0, W1}
    cluster.set_all("Running")
    plan = cluster.step(at(172))  # the old progress was the old pods': the new ones are not seen yet
    assert not hung_events(plan) and not plan.deletes


def test_a_second_hang_on_the_same_node_taints_it_and_replaces_its_pod() -> None:
    cluster = running(job(), placement={W0: "node-0", W1: "node-1"})
    idle_since(cluster, {W0: 100, W1: 95}, now=170, stopped=(W1,))
    cluster.step(at(170))
    cluster.step(at(171))
    cluster.set_all("Running")
    for name, where in ((W0, "node-0"), (W1, "node-1")):
        cluster.pods[name]["spec"]["nodeName"] = where
    idle_since(cluster, {W0: 300, W1: 290}, now=400, stopped=(W1,))
    plan = cluster.step(at(400))

    (message,) = hung_events(plan)
    assert "node node-1 hung before: tainted trainctl.io/unhealthy=hang:NoSchedule" in message
    (tainted,) = plan.updates
    assert tainted["metadata"]["name"] == "node-1"
    assert {"key": "trainctl.io/unhealthy", "value": "hang", "effect": "NoSchedule"}.items() <= tainted["spec"]["taints"][0].items()
    assert W1 in {ref.name for ref in plan.deletes}
    assert cluster.job["status"]["restartCount"] == 2
    assert [h["node"] for h in cluster.job["status"]["hangs"]] == ["node-1", "node-1"]


def test_hangs_past_backoff_limit_fail_the_job_and_say_so() -> None:
    cluster = running(job(backoff_limit=2))
    idle_since(cluster, {W0: 100, W1: 100}, now=170)
    cluster.step(at(170))
    cluster.step(at(171))
    cluster.set_all("Running")
    idle_since(cluster, {W0: 300, W1: 300}, now=400)
    plan = cluster.step(at(400))

    assert hung_events(plan) and [c.config_map for c in plan.stack_captures] == ["mnist-hang-2"]
    failed = [c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["status"] == "True"
    assert "hung (2 hangs)" in failed[0]["message"] and "backoff limit of 2" in failed[0]["message"]
    assert cluster.job["status"]["restartCount"] == 1, "the failing hang restarts nothing"


def test_an_opted_in_job_dumps_stacks_on_sigabrt_and_others_are_as_before() -> None:
    with_timeout, without = running(job()), running(job(timeout=None))
    assert env_dict(with_timeout.pods[W0]).get("PYTHONFAULTHANDLER") == "1"
    assert "PYTHONFAULTHANDLER" not in env_dict(without.pods[W0])
    idle_since(without, {W0: 100, W1: 100}, now=1000)
    plan = without.step(at(1000))
    assert not plan.deletes and not hung_events(plan) and "hangs" not in without.job["status"]


def test_an_invalid_timeout_is_reported_and_nothing_is_judged() -> None:
    cluster = running(job(timeout="soon"))
    idle_since(cluster, {W0: 100, W1: 100}, now=1000)
    plan = cluster.step(at(1000))
    assert [p.reason for p in plan.problems] == ["InvalidHangTimeout"] and not plan.deletes

