"""A pod on a node that stays not Ready is force-deleted and replaced, with an Event (embedded API server).

No real node is needed: the test creates Node objects and writes their Ready condition, and
PodPhaseDriver plays the kubelet for the pods pinned to them. Run under the cluster lock.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from trainctl.controller.reconcile import ReconcileConfig
from trainctl.kube.restmapper import NODES, PYTORCHJOBS

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob
from tests.support.podphase import PodPhaseDriver


def set_ready(kube, name: str, status: str) -> None:
    node = kube.get(NODES, None, name)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    node["status"] = {"conditions": [{"type": "Ready", "status": status, "lastTransitionTime": now,
                                      "reason": "NodeStatusUnknown" if status != "True" else "KubeletReady"}]}
    kube.replace(NODES, node, subresource="status")


def test_a_pod_on_an_unknown_node_is_force_deleted_replaced_and_counted(kube, start_manager, pods, jobs, events):
    for name in ("lost-a", "lost-b"):
        kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        set_ready(kube, name, "True")
    start_manager(reconcile=ReconcileConfig(node_lost_grace_seconds=3.0))
    job: dict[str, Any] = pytorchjob("lost", master=False, workers=2, restart="OnFailure", uid=None,
                                     elasticPolicy={"minReplicas": 1, "maxReplicas": 2})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeName"] = "lost-b"
    driver = PodPhaseDriver(kube, "default", lambda pod, running: None).start()
    try:
        kube.create(PYTORCHJOBS, job)
        first = pods.wait(lambda: (p := pods.get("lost-worker-1")) and p["status"].get("phase") == "Running" and p,
                          what="lost-worker-1 running")
        set_ready(kube, "lost-b", "Unknown")
        deleted = events.wait(
            lambda: (found := [e for e in job_events(events, "lost") if e["reason"] == "SuccessfulDeletePod"])
            and len(found) == 2 and found,
            timeout=60, what="the force-delete Events of both workers",
        )
        set_ready(kube, "lost-b", "True")  # back, so the replacement stays
        replaced = pods.wait(
            lambda: (p := pods.get("lost-worker-1")) and p["metadata"]["uid"] != first["metadata"]["uid"] and p,
            timeout=60, what="the replacement of lost-worker-1",
        )
        status = jobs.wait(lambda: (j := jobs.get("lost")) and j.get("status", {}).get("restartCount") and j["status"],
                           what="restartCount")
    finally:
        driver.stop()
    messages = sorted(e["message"] for e in deleted)
    assert [m.split(" (")[0] for m in messages] == ["Deleted pod: lost-worker-0", "Deleted pod: lost-worker-1"]
    assert all("(force-deleted: on node lost-b, not Ready (Ready=Unknown) since " in m for m in messages), messages
    assert replaced["metadata"]["name"] == "lost-worker-1"
    # Both workers sat on lost-b: two lost pods, two restarts, each counted once.
    assert status["restartCount"] == 2
