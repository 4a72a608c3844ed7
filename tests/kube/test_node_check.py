"""A node the node check blames is tainted through the API server, with the Event on the job.

No kubelet runs: the test writes the check's report (its init container's termination
message) into a pod's status as a kubelet would, and watches the Node and the Events.
"""

from __future__ import annotations

import json
from typing import Any

from trainctl.controller.reconcile import ReconcileConfig
from trainctl.controller.reconcile.node_check import INIT_CONTAINER
from trainctl.kube.restmapper import NODES, PODS, PYTORCHJOBS

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob


def test_a_node_that_failed_the_check_is_tainted_and_its_pod_deleted_alone(kube, start_manager, pods, events):
    kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "nc-a"},
                        "spec": {"taints": [{"key": "example.com/other", "effect": "PreferNoSchedule"}]}})
    start_manager(reconcile=ReconcileConfig(node_check=True))
    job: dict[str, Any] = pytorchjob("nc", master=False, workers=2, restart="OnFailure", uid=None,
                                     elasticPolicy={"minReplicas": 1, "maxReplicas": 2})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeName"] = "nc-a"
    kube.create(PYTORCHJOBS, job)
    first = pods.wait(lambda: pods.get("nc-worker-1"), what="nc-worker-1")
    message = json.dumps({"rank": 1, "host": 0, "verdict": "failed", "partners": [[0, False]], "error": "timed out"})
    first["status"] = {"phase": "Pending", "initContainerStatuses": [
        {"name": INIT_CONTAINER, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "message": message}}}]}
    kube.replace(PODS, first, subresource="status")
    failed = events.wait(lambda: [e for e in job_events(events, "nc") if e["reason"] == "NodeCheckFailed"],
                         timeout=60, what="the NodeCheckFailed Event")
    assert failed[0]["type"] == "Warning" and "Node nc-a failed the node check of pod nc-worker-1" in failed[0]["message"]
    taints = kube.get(NODES, None, "nc-a")["spec"]["taints"]
    assert [(t["key"], t.get("value"), t["effect"]) for t in taints] == [
        ("example.com/other", None, "PreferNoSchedule"), ("trainctl.io/unhealthy", "node-check-failed", "NoSchedule")]
    # No kubelet confirms the graceful delete here: the pod being deleted is the replacement's start.
    pods.wait(lambda: (p := pods.get("nc-worker-1")) and p["metadata"].get("deletionTimestamp"),
              timeout=60, what="nc-worker-1 deleted to be replaced")
    assert "deletionTimestamp" not in (pods.get("nc-worker-0") or {}).get("metadata", {})  # an elastic job keeps the others
