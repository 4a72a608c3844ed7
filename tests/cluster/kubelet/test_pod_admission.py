"""A restarted kubelet fails the pods it ran before, and only those."""

from __future__ import annotations

from typing import Any, cast

from trainctl.cluster.kubelet.pod_admission import Admission
from trainctl.cluster.kubelet.pod_worker import PodContext

Obj = dict[str, Any]


class Statuses:
    def __init__(self) -> None:
        self.patched: dict[str, Obj] = {}

    def patch(self, meta: Obj, patch: Obj) -> None:
        self.patched[meta["name"]] = patch


def pod(name: str, node: str, **status: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "python"}]},
            "status": {"phase": "Pending", **status}}


def test_only_pods_a_kubelet_took_up_before_are_failed_as_orphans() -> None:
    statuses = Statuses()
    admission = Admission(cast(PodContext, object()), statuses, cast(Any, object()), lambda: None)
    ran = pod("ran", "node-a", phase="Running", startTime="2026-11-28T10:00:00Z",
              containerStatuses=[{"name": "main", "state": {"running": {"startedAt": "2026-11-28T10:00:01Z"}}}])
    just_bound = pod("just-bound", "node-a")  # bound while the kubelet registered: never started
    elsewhere = pod("elsewhere", "node-b", startTime="2026-11-28T10:00:00Z")
    done = pod("done", "node-a", phase="Succeeded", startTime="2026-11-28T10:00:00Z")
    admission.fail_orphans([ran, just_bound, elsewhere, done], "node-a")
    assert list(statuses.patched) == ["ran"]
    assert statuses.patched["ran"]["status"]["phase"] == "Failed"
    assert statuses.patched["ran"]["status"]["reason"] == "KubeletRestarted"
