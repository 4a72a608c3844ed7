"""The ResourceQuota controller's decision on plain objects: status.hard copies spec.hard,
status.used counts what admission counts, and a status already right is left alone."""

from __future__ import annotations

from typing import Any

from trainctl.cluster.controlplane import resourcequota_decision

Obj = dict[str, Any]


def pod(name: str, phase: str = "Running", memory: str = "1Gi", best_effort: bool = False) -> Obj:
    resources = {} if best_effort else {"requests": {"memory": memory}, "limits": {"memory": memory}}
    return {"metadata": {"name": name}, "status": {"phase": phase},
            "spec": {"containers": [{"name": "c", "resources": resources}, {"name": "side", "resources": resources}]}}


OBJECTS = {"/pods": [pod("a"), pod("b", memory="512Mi"), pod("done", phase="Succeeded"), pod("free", best_effort=True)],
           "apps/deployments": [{"metadata": {"name": "web"}}]}


def objects(key: str) -> list[Obj]:
    return OBJECTS.get(key, [])


def test_used_counts_running_pods_and_other_kinds_in_the_quotas_own_units() -> None:
    quota = {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10", "limits.memory": "8Gi", "count/deployments.apps": "2"}}}
    assert resourcequota_decision.counted_keys(quota) == {"/pods", "apps/deployments"}
    status = resourcequota_decision.decide(quota, objects)
    assert status == {"hard": {"pods": "10", "limits.memory": "8Gi", "count/deployments.apps": "2"},
                      "used": {"count/deployments.apps": "1", "limits.memory": "3Gi", "pods": "3"}}
    assert resourcequota_decision.decide({**quota, "status": status}, objects) is None


def test_a_scoped_quota_counts_only_its_pods() -> None:
    quota = {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}, "scopes": ["NotBestEffort"]}}
    assert resourcequota_decision.status(quota, objects)["used"] == {"pods": "2"}
