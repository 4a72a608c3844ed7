"""kube's Deployment rules, pure: ReplicaSets per template, rolling update and Recreate, revisions, status."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from trainctl.cluster.controlplane import deployment_decision as dd

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def deployment(replicas: int = 4, image: str = "python:3.11", strategy: Obj | None = None, generation: int = 1) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": generation},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "revisionHistoryLimit": 10,
                     "progressDeadlineSeconds": 600,
                     "strategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


class Cluster:
    """The Deployment controller's passes, with a ReplicaSet controller whose pods start at once (or, after
    ``pods_start`` is cleared, no new pod starts)."""

    def __init__(self, d: Obj, pods_start: bool = True) -> None:
        self.deployment = d
        self.replicasets: dict[str, Obj] = {}
        self.pods_start = pods_start
        self.now = NOW
        self.events: list[str] = []
        self.seen: list[tuple[int, int]] = []  # (pods, available pods) after every pass

    def step(self) -> dd.DeploymentDecision:
        decision = dd.decide(self.deployment, list(self.replicasets.values()), [], self.now)
        for i, rs in enumerate(decision.create):
            rs = copy.deepcopy(rs)
            rs["metadata"].update(uid=f"rs-{len(self.replicasets)}-{i}", creationTimestamp=self.now.strftime("%Y-%m-%dT%H:%M:%SZ"))
            self.replicasets[rs["metadata"]["name"]] = rs
        for rs in decision.update:
            self.replicasets[rs["metadata"]["name"]] = copy.deepcopy(rs)
        for name in decision.delete:
            del self.replicasets[name]
        for rs in self.replicasets.values():  # the ReplicaSet controller
            n = rs["spec"]["replicas"]
            ready = n if self.pods_start else min(n, rs.get("status", {}).get("availableReplicas", 0))  # no new pod starts
            rs["status"] = {"replicas": n, "readyReplicas": ready, "availableReplicas": ready}
        if decision.status is not None:
            self.deployment["status"] = decision.status
        if decision.revision is not None:
            self.deployment["metadata"].setdefault("annotations", {})[dd.REVISION] = decision.revision
        self.events += [message for _, _, message in decision.events]
        self.seen.append((sum(rs["spec"]["replicas"] for rs in self.replicasets.values()),
                          sum(rs["status"]["availableReplicas"] for rs in self.replicasets.values())))
        self.now += timedelta(seconds=1)
        return decision

    def settle(self, passes: int = 50) -> None:
        for _ in range(passes):
            before = copy.deepcopy((self.deployment, self.replicasets))
            self.step()
            if (self.deployment, self.replicasets) == before:
                return
        raise AssertionError("the rollout did not settle")

    def rollout(self, image: str) -> None:
        self.deployment["spec"]["template"]["spec"]["containers"][0]["image"] = image
        self.deployment["metadata"]["generation"] += 1
        self.settle()

    def condition(self, kind: str) -> Obj:
        return next(c for c in self.deployment["status"]["conditions"] if c["type"] == kind)

    def by_image(self) -> dict[str, int]:
        return {rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs["spec"]["replicas"] for rs in self.replicasets.values()}


def test_a_new_deployment_gets_one_replicaset_labelled_with_its_template_hash() -> None:
    cluster = Cluster(deployment(replicas=2))
    decision = cluster.step()
    (rs,) = decision.create
    pod_hash = rs["metadata"]["labels"][dd.HASH_LABEL]
    assert rs["metadata"]["name"] == f"web-{pod_hash}" and pod_hash == dd.template_hash(cluster.deployment["spec"]["template"])
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", dd.HASH_LABEL: pod_hash}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", dd.HASH_LABEL: pod_hash}
    assert rs["spec"]["replicas"] == 2 and rs["metadata"]["annotations"][dd.REVISION] == "1"
    assert rs["metadata"]["ownerReferences"][0]["uid"] == "d-uid" and rs["metadata"]["ownerReferences"][0]["controller"]
    assert cluster.condition("Progressing")["reason"] == "NewReplicaSetCreated"
    cluster.settle()
    assert cluster.deployment["status"] == {**cluster.deployment["status"], "replicas": 2, "updatedReplicas": 2,
                                            "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1}
    assert cluster.condition("Available")["status"] == "True"
    assert cluster.condition("Progressing")["reason"] == "NewReplicaSetAvailable"
    assert cluster.events == [f"Scaled up replica set web-{pod_hash} from 0 to 2"]


def test_a_rolling_update_stays_within_surge_and_unavailability() -> None:
    cluster = Cluster(deployment(replicas=4))
    cluster.settle()
    cluster.seen.clear()
    cluster.rollout("python:3.12")
    assert cluster.by_image() == {"python:3.11": 0, "python:3.12": 4}
    assert all(pods <= 5 for pods, _ in cluster.seen), cluster.seen  # 4 + 25% surge
    assert all(available >= 3 for _, available in cluster.seen), cluster.seen  # 4 - 25% unavailable
    new = next(rs for rs in cluster.replicasets.values() if rs["spec"]["replicas"] == 4)
    assert new["metadata"]["annotations"][dd.REVISION] == "2"
    assert cluster.deployment["status"]["updatedReplicas"] == 4 and cluster.deployment["status"]["observedGeneration"] == 2


def test_setting_the_template_back_makes_the_old_replicaset_the_newest_revision() -> None:
    cluster = Cluster(deployment(replicas=2))
    cluster.settle()
    cluster.rollout("python:3.12")
    cluster.rollout("python:3.11")  # what kubectl rollout undo does
    assert len(cluster.replicasets) == 2 and cluster.by_image() == {"python:3.11": 2, "python:3.12": 0}
    revisions = {rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs["metadata"]["annotations"][dd.REVISION]
                 for rs in cluster.replicasets.values()}
    assert revisions == {"python:3.11": "3", "python:3.12": "2"}
    assert cluster.deployment["metadata"]["annotations"][dd.REVISION] == "3"  # kubectl rollout undo's patch needs it


def test_recreate_stops_every_old_pod_before_the_new_replicaset_starts() -> None:
    cluster = Cluster(deployment(replicas=3, strategy={"type": "Recreate"}))
    cluster.settle()
    cluster.seen.clear()
    cluster.deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "python:3.12"
    cluster.step()
    assert cluster.by_image() == {"python:3.11": 0}  # old scaled down, nothing new yet
    old_pod = {"metadata": {"name": "old", "ownerReferences": [
        {"uid": next(iter(cluster.replicasets.values()))["metadata"]["uid"], "controller": True}]}, "status": {"phase": "Running"}}
    assert not dd.decide(cluster.deployment, list(cluster.replicasets.values()), [old_pod], cluster.now).create
    cluster.settle()
    assert cluster.by_image() == {"python:3.11": 0, "python:3.12": 3}


def test_scaling_grows_and_shrinks_the_one_replicaset() -> None:
    cluster = Cluster(deployment(replicas=2))
    cluster.settle()
    cluster.deployment["spec"]["replicas"] = 3
    cluster.settle()
    assert cluster.by_image() == {"python:3.11": 3}
    cluster.deployment["spec"]["replicas"] = 1
    cluster.settle()
    assert cluster.by_image() == {"python:3.11": 1} and cluster.deployment["status"]["replicas"] == 1


def test_a_paused_deployment_scales_but_does_not_roll_out() -> None:
    cluster = Cluster(deployment(replicas=2))
    cluster.settle()
    cluster.deployment["spec"]["paused"] = True
    cluster.deployment["spec"]["replicas"] = 3
    cluster.deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "python:3.12"
    cluster.settle()
    assert cluster.by_image() == {"python:3.11": 3}
    assert cluster.condition("Progressing")["reason"] == "DeploymentPaused"
    cluster.deployment["spec"]["paused"] = False
    cluster.settle()
    assert cluster.by_image() == {"python:3.11": 0, "python:3.12": 3}


def test_a_deployment_resized_mid_rollout_scales_its_replicasets_proportionally() -> None:
    cluster = Cluster(deployment(replicas=10))
    cluster.settle()
    cluster.pods_start = False  # the new pods never become available: the rollout stays half-way
    cluster.deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "python:3.12"
    for _ in range(5):
        cluster.step()
    assert cluster.by_image() == {"python:3.11": 8, "python:3.12": 5}  # 13 at most, 8 available at least
    cluster.deployment["spec"]["replicas"] = 20
    cluster.step()
    # 25 allowed (20 + 25% surge): the 12 more split 8:5 (7 and 4), the rounding's one to the larger.
    assert cluster.by_image() == {"python:3.11": 16, "python:3.12": 9}
    annotations = [rs["metadata"]["annotations"][dd.DESIRED_REPLICAS] for rs in cluster.replicasets.values()]
    assert annotations == ["20", "20"]


def test_a_rollout_whose_pods_never_start_times_out_and_keeps_the_old_pods() -> None:
    cluster = Cluster(deployment(replicas=4))
    cluster.settle()
    cluster.pods_start = False
    cluster.deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "python:broken"
    for _ in range(5):
        cluster.step()
    assert cluster.by_image()["python:3.11"] >= 3  # never below replicas - maxUnavailable
    assert cluster.condition("Progressing")["status"] == "True"
    cluster.now += timedelta(seconds=601)
    cluster.step()
    assert cluster.condition("Progressing")["reason"] == "ProgressDeadlineExceeded"
    assert cluster.condition("Progressing")["status"] == "False"


def test_old_replicasets_beyond_the_history_limit_are_deleted() -> None:
    d = deployment(replicas=1)
    d["spec"]["revisionHistoryLimit"] = 1
    cluster = Cluster(d)
    cluster.settle()
    for image in ("python:3.12", "python:3.13", "python:3.14"):
        cluster.rollout(image)
    assert cluster.by_image() == {"python:3.13": 0, "python:3.14": 1}


def test_an_orphan_replicaset_the_selector_matches_is_adopted() -> None:
    d = deployment(replicas=1)
    orphan = dd.new_replicaset(d, 1, 1)
    orphan["metadata"]["ownerReferences"] = []
    orphan["metadata"]["uid"] = "orphan-uid"
    decision = dd.decide(d, [orphan], [], NOW)
    assert not decision.create
    assert [rs["metadata"]["ownerReferences"][0]["uid"] for rs in decision.update] == ["d-uid"]


@pytest.mark.parametrize(("surge", "unavailable", "replicas", "expected"), [
    ("25%", "25%", 4, (1, 1)), ("25%", "25%", 3, (1, 0)), ("50%", "10%", 10, (5, 1)), (0, 0, 3, (0, 1)), (2, "100%", 1, (2, 1))])
def test_surge_rounds_up_and_unavailability_down(surge: Any, unavailable: Any, replicas: int, expected: tuple[int, int]) -> None:
    d = deployment(replicas=replicas, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
    assert dd.surge_and_unavailable(d) == expected
