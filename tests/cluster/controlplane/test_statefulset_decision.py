"""kube's StatefulSet rules, pure: stable names, ordered start and scale-down, rolling updates, revisions, status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import controller_history as ch
from trainctl.cluster.controlplane import statefulset_decision as sd

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
UID = "sts-uid"


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def statefulset(replicas: int = 3, image: str = "db:1", policy: str = "OrderedReady",
                strategy: Optional[Obj] = None, status: Optional[Obj] = None) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default", "uid": UID, "generation": 2},
            "spec": {"replicas": replicas, "serviceName": "db", "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": "db"}}, "revisionHistoryLimit": 10,
                     "updateStrategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "db", "image": image}]}}},
            "status": status or {}}


def revision_of(sts: Obj, number: int = 1) -> Obj:
    """The ControllerRevision the controller records for ``sts``'s template, as stored."""
    made = ch.plan(sts, "apps/v1", "StatefulSet", []).create
    assert made is not None
    return {**made, "metadata": {**made["metadata"], "uid": f"rev-{number}"}, "revision": number}


def pod(sts: Obj, ordinal: int, revision: Obj, *, ready: bool = True, phase: str = "Running",
        terminating: bool = False) -> Obj:
    made = sd.pod_for(sts, ordinal, revision)
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": stamp(50)}] if ready else []
    made["metadata"]["creationTimestamp"] = stamp(100)
    if terminating:
        made["metadata"]["deletionTimestamp"] = stamp(1)
    made["status"] = {"phase": phase, "conditions": conditions}
    return made


def test_pods_have_stable_names_labels_and_the_service_subdomain() -> None:
    sts = statefulset(replicas=1)
    decision = sd.decide(sts, [], [], NOW)
    [revision] = decision.revisions.create
    assert revision["revision"] == 1 and revision["metadata"]["name"].startswith("db-")
    assert revision["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    assert revision["metadata"]["labels"]["app"] == "db"  # the selector finds it (kubectl rollout history)
    [created] = decision.create
    meta, spec = created["metadata"], created["spec"]
    assert meta["name"] == "db-0"
    assert meta["labels"] == {"app": "db", sd.POD_NAME_LABEL: "db-0", sd.POD_INDEX_LABEL: "0",
                              sd.REVISION_LABEL: revision["metadata"]["name"]}
    assert (spec["hostname"], spec["subdomain"]) == ("db-0", "db")
    assert decision.status is not None and decision.status["updateRevision"] == revision["metadata"]["name"]


def test_ordered_ready_creates_the_next_pod_only_once_the_previous_is_ready() -> None:
    sts = statefulset()
    rev = revision_of(sts)
    assert [p["metadata"]["name"] for p in sd.decide(sts, [], [rev], NOW).create] == ["db-0"]
    assert sd.decide(sts, [pod(sts, 0, rev, ready=False)], [rev], NOW).create == []
    assert [p["metadata"]["name"] for p in sd.decide(sts, [pod(sts, 0, rev)], [rev], NOW).create] == ["db-1"]


def test_a_missing_lower_ordinal_is_recreated_first() -> None:
    sts = statefulset()
    rev = revision_of(sts)
    decision = sd.decide(sts, [pod(sts, 1, rev), pod(sts, 2, rev)], [rev], NOW)
    assert [p["metadata"]["name"] for p in decision.create] == ["db-0"]


def test_parallel_creates_every_pod_at_once() -> None:
    sts = statefulset(policy="Parallel")
    rev = revision_of(sts)
    decision = sd.decide(sts, [pod(sts, 1, rev, ready=False)], [rev], NOW)
    assert sorted(p["metadata"]["name"] for p in decision.create) == ["db-0", "db-2"]


def test_ordered_scale_down_removes_the_highest_ordinal_one_at_a_time() -> None:
    sts = statefulset(replicas=1)
    rev = revision_of(sts)
    pods = [pod(sts, i, rev) for i in range(3)]
    assert sd.decide(sts, pods, [rev], NOW).delete == ["db-2"]
    pods[2] = pod(sts, 2, rev, terminating=True)
    assert sd.decide(sts, pods, [rev], NOW).delete == []  # waits for db-2 to go


def test_ordered_scale_down_waits_while_a_kept_pod_is_unhealthy() -> None:
    sts = statefulset(replicas=1)
    rev = revision_of(sts)
    pods = [pod(sts, 0, rev, ready=False), pod(sts, 1, rev)]
    assert sd.decide(sts, pods, [rev], NOW).delete == []


def test_parallel_scale_down_removes_all_at_once() -> None:
    sts = statefulset(replicas=1, policy="Parallel")
    rev = revision_of(sts)
    pods = [pod(sts, i, rev) for i in range(3)]
    assert sorted(sd.decide(sts, pods, [rev], NOW).delete) == ["db-1", "db-2"]


def test_a_failed_pod_is_deleted_to_be_recreated_under_its_name() -> None:
    sts = statefulset(replicas=2)
    rev = revision_of(sts)
    decision = sd.decide(sts, [pod(sts, 0, rev, phase="Failed", ready=False), pod(sts, 1, rev)], [rev], NOW)
    assert (decision.delete, decision.create) == (["db-0"], [])


def rolled(**kwargs: Any) -> tuple[Obj, Obj, Obj, list[Obj]]:
    """A set of three pods at revision 1 whose template just changed to ``db:2``."""
    old = statefulset()
    rev1 = revision_of(old)
    sts = statefulset(image="db:2", status={"currentRevision": rev1["metadata"]["name"]}, **kwargs)
    rev2 = revision_of(sts, 2)
    return sts, rev1, rev2, [pod(old, i, rev1) for i in range(3)]


def test_rolling_update_replaces_the_highest_ordinal_first_one_at_a_time() -> None:
    sts, rev1, rev2, pods = rolled()
    assert sd.decide(sts, pods, [rev1, rev2], NOW).delete == ["db-2"]
    pods[2] = pod(sts, 2, rev2, ready=False)
    assert sd.decide(sts, pods, [rev1, rev2], NOW).delete == []  # the new db-2 is not ready yet
    pods[2] = pod(sts, 2, rev2)
    decision = sd.decide(sts, pods, [rev1, rev2], NOW)
    assert decision.delete == ["db-1"]
    assert decision.status is not None and decision.status["updatedReplicas"] == 1
    assert decision.status["currentRevision"] == rev1["metadata"]["name"]


def test_a_recreated_pod_takes_the_new_template() -> None:
    sts, rev1, rev2, pods = rolled()
    [created] = sd.decide(sts, pods[:2], [rev1, rev2], NOW).create
    assert created["spec"]["containers"][0]["image"] == "db:2"
    assert created["metadata"]["labels"][sd.REVISION_LABEL] == rev2["metadata"]["name"]


def test_partition_keeps_lower_ordinals_at_the_current_revision() -> None:
    sts, rev1, rev2, pods = rolled(strategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}})
    pods[2] = pod(sts, 2, rev2)
    assert sd.decide(sts, pods, [rev1, rev2], NOW).delete == []
    [created] = sd.decide(sts, pods[1:], [rev1, rev2], NOW).create  # db-0 went: back at revision 1
    assert created["spec"]["containers"][0]["image"] == "db:1"


def test_max_unavailable_replaces_several_at_once() -> None:
    sts, rev1, rev2, pods = rolled(strategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 2}})
    assert sd.decide(sts, pods, [rev1, rev2], NOW).delete == ["db-2", "db-1"]


def test_on_delete_leaves_old_pods_running() -> None:
    sts, rev1, rev2, pods = rolled(strategy={"type": "OnDelete"})
    assert sd.decide(sts, pods, [rev1, rev2], NOW).delete == []


def test_a_finished_rollout_makes_the_update_revision_current() -> None:
    sts, rev1, rev2, _ = rolled()
    status = sd.decide(sts, [pod(sts, i, rev2) for i in range(3)], [rev1, rev2], NOW).status
    assert status is not None
    assert status["currentRevision"] == status["updateRevision"] == rev2["metadata"]["name"]
    assert (status["replicas"], status["readyReplicas"], status["currentReplicas"], status["updatedReplicas"],
            status["availableReplicas"], status["observedGeneration"]) == (3, 3, 3, 3, 3, 2)


def test_undo_renumbers_the_old_revision_as_the_newest() -> None:
    sts, rev1, rev2, _ = rolled()
    back = statefulset(status={"currentRevision": rev2["metadata"]["name"]})  # the template of revision 1 again
    decision = sd.decide(back, [], [rev1, rev2], NOW)
    assert decision.revisions.create == []
    [renumbered] = decision.revisions.rewrite
    assert (renumbered["metadata"]["name"], renumbered["revision"]) == (rev1["metadata"]["name"], 3)


def test_revisions_beyond_the_history_limit_are_pruned_oldest_first() -> None:
    revisions = [revision_of(statefulset(image=f"db:{i}"), i) for i in range(1, 5)]
    sts = statefulset(image="db:4", status={"currentRevision": revisions[-1]["metadata"]["name"]})
    sts["spec"]["revisionHistoryLimit"] = 1
    assert sd.decide(sts, [], revisions, NOW).revisions.delete == [r["metadata"]["name"] for r in revisions[:2]]


def test_a_name_taken_by_other_data_raises_the_collision_count() -> None:
    sts = statefulset()
    squatter = {**revision_of(statefulset(image="db:9")), "metadata": {**revision_of(sts)["metadata"], "ownerReferences": []}}
    history = ch.plan(sts, "apps/v1", "StatefulSet", [squatter])
    assert history.collision_count == 1 and history.create is not None
    assert history.create["metadata"]["name"] != squatter["metadata"]["name"]


def test_pods_of_other_sets_are_not_adopted() -> None:
    sts = statefulset(replicas=1)
    rev = revision_of(sts)
    stray = pod(sts, 0, rev)
    stray["metadata"].update(name="other-0", ownerReferences=[])
    assert sd.decide(sts, [stray], [rev], NOW).rewrite == []
