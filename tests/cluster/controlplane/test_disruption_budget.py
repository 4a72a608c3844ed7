"""The disruption controller's decision: a budget's status from its pods, as kube computes it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from trainctl.cluster.controlplane.disruption_budget import decide

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
Obj = dict[str, Any]


def pdb(status: Obj | None = None, generation: int = 1, **spec: Any) -> Obj:
    return {"metadata": {"name": "b", "namespace": "ns", "generation": generation},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec}, "status": status or {}}


def pod(name: str, ready: bool = True, owner: str | None = None, terminating: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "labels": {"app": "a"}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j", "uid": owner,
                                    "controller": True}]
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    return {"metadata": meta, "status": {"phase": "Running",
                                         "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def counts(status: Obj) -> tuple[int, int, int, int]:
    return status["expectedPods"], status["desiredHealthy"], status["currentHealthy"], status["disruptionsAllowed"]


def test_min_available_counts_the_ready_pods_it_covers() -> None:
    status = decide(pdb(minAvailable=2), [pod("a"), pod("b"), pod("c"), pod("d", ready=False)], {}, NOW).status
    assert status is not None
    assert counts(status) == (4, 2, 3, 1)
    assert status["observedGeneration"] == 1
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("DisruptionAllowed", "True", "SufficientPods", "")]


def test_a_budget_at_its_minimum_allows_nothing_and_a_terminating_pod_is_not_healthy() -> None:
    status = decide(pdb(minAvailable=2), [pod("a"), pod("b", terminating=True), pod("c")], {}, NOW).status
    assert status is not None
    assert counts(status) == (3, 2, 2, 0)
    assert status["conditions"][0]["reason"] == "InsufficientPods"


@pytest.mark.parametrize(("spec", "expected"), [
    ({"maxUnavailable": 1}, (4, 3, 3, 0)),
    ({"maxUnavailable": "50%"}, (4, 2, 3, 1)),
    ({"minAvailable": "30%"}, (4, 2, 3, 1)),  # 30 % of 4 rounds up to 2
])
def test_max_unavailable_and_percentages_count_from_the_controllers_scale(spec: Obj, expected: tuple[int, ...]) -> None:
    pods = [pod("a", owner="j1"), pod("b", owner="j1"), pod("c", owner="j1")]
    status = decide(pdb(**spec), pods, {"j1": 4}, NOW).status
    assert status is not None and counts(status) == expected


def test_a_controller_whose_scale_cannot_be_read_fails_safe() -> None:
    old = {"currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 1, "observedGeneration": 1}
    status = decide(pdb(old, maxUnavailable=1), [pod("a", owner="gone")], {"gone": None}, NOW).status
    assert status is not None
    assert status["disruptionsAllowed"] == 0
    assert [(c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("False", "SyncFailed", 'found no controllers for pod "a"')]


def test_a_pod_the_eviction_api_noted_is_not_healthy_until_the_note_expires() -> None:
    noted = {"disruptedPods": {"a": "2026-01-01T11:59:30Z"}, "observedGeneration": 1}
    decision = decide(pdb(noted, minAvailable=1), [pod("a"), pod("b")], {}, NOW)
    assert decision.status is not None
    assert counts(decision.status) == (2, 1, 1, 0)
    assert decision.status["disruptedPods"] == {"a": "2026-01-01T11:59:30Z"}
    assert decision.recheck_in == 90.0
    later = decide(pdb(decision.status, minAvailable=1), [pod("a"), pod("b")], {}, NOW + timedelta(minutes=2))
    assert later.status is not None and counts(later.status) == (2, 1, 2, 1)
    assert "disruptedPods" not in later.status


def test_a_current_status_is_not_written_again_and_a_new_generation_is() -> None:
    first = decide(pdb(minAvailable=1), [pod("a"), pod("b")], {}, NOW).status
    assert first is not None
    assert decide(pdb(first, minAvailable=1), [pod("a"), pod("b")], {}, NOW).status is None
    again = decide(pdb(first, generation=2, minAvailable=1), [pod("a"), pod("b")], {}, NOW + timedelta(seconds=5)).status
    assert again is not None and again["observedGeneration"] == 2
    assert again["conditions"] == first["conditions"]  # same status: the transition time stays


def test_kubes_events_say_what_the_status_cannot() -> None:
    empty = decide(pdb(minAvailable=1), [], {}, NOW)
    assert [(e.type, e.reason, e.message) for _, e in empty.events] == [("Normal", "NoPods", "No matching pods found")]
    bare = decide(pdb(maxUnavailable=1), [pod("a")], {}, NOW)
    assert [(e.type, e.reason) for _, e in bare.events] == [("Warning", "UnmanagedPods")]
    assert "(selector: app=a)" in bare.events[0][1].message
    assert bare.status is not None and bare.status["disruptionsAllowed"] == 0  # expected by no one
    stale = decide(pdb({"disruptedPods": {"a": "2026-01-01T11:50:00Z"}}, minAvailable=0), [pod("a")], {}, NOW)
    assert [(about["metadata"]["name"], e.reason, e.message) for about, e in stale.events] == [
        ("a", "NotDeleted", "Pod was expected by PDB ns/b to be deleted but it wasn't")]
