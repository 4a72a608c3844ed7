"""The HPA loop on a real API server: it scales a PyTorchJob through its ``scale``
subresource, writes the HPA's status and Events, and reports a missing Metrics API (with the
Event writes client-go's correlator allows, however often it syncs)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.cluster.apiserver.process import ApiServerHandle
from trainctl.cluster.controlplane.hpa_controller import HorizontalPodAutoscalerController
from trainctl.cluster.controlplane.units import format_time
from trainctl.cluster.local_cluster import install_crds
from trainctl.kube import restmapper as r
from trainctl.kube.events import CorrelatorLimits
from trainctl.kube.restmapper import Resource

from .conftest import FakeMetricsClient, eventually

Obj = dict[str, Any]
SELECTOR = "training.kubeflow.org/job-name=elastic,training.kubeflow.org/replica-type=worker"
LONG_AGO = format_time(datetime.now(timezone.utc) - timedelta(hours=1))


def elastic_job(workers: int) -> Obj:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "trainctl/samples:0.1.0", "command": ["python", "train.py"],
                                         "resources": {"requests": {"cpu": "500m"}}}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "elastic", "namespace": "default"},
            "spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 4},
                     "pytorchReplicaSpecs": {"Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template}}}}


def worker_pod(index: int) -> Obj:
    labels = dict(item.split("=") for item in SELECTOR.split(","))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"elastic-worker-{index}", "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "pytorch", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}}


def running(client: FakeMetricsClient, pod: Obj) -> None:
    created = client.create(r.PODS, pod).object
    assert created is not None
    created["status"] = {"phase": "Running", "startTime": LONG_AGO,
                         "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": LONG_AGO}]}
    client.replace(r.PODS, created, subresource="status")


def autoscaler(maximum: int = 4) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "elastic", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "elastic"},
                     "minReplicas": 1, "maxReplicas": maximum,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}


def job_with_selector(client: FakeMetricsClient, workers: int) -> None:
    install_crds(client)
    job = client.create(r.PYTORCHJOBS, elastic_job(workers)).object
    assert job is not None
    job["status"] = {"replicaStatuses": {"Worker": {"active": workers, "selector": SELECTOR}}}
    client.replace(r.PYTORCHJOBS, job, subresource="status")


def condition(hpa: Obj, kind: str) -> Obj:
    return next(c for c in hpa.get("status", {}).get("conditions") or () if c["type"] == kind)


def condition_status(hpa: Obj, kind: str) -> Optional[str]:
    return next((c["status"] for c in hpa.get("status", {}).get("conditions") or () if c["type"] == kind), None)


def test_scales_a_pytorchjob_up_through_its_scale_subresource(client: FakeMetricsClient) -> None:
    job_with_selector(client, 1)
    running(client, worker_pod(0))
    client.sampled_at = format_time(datetime.now(timezone.utc))
    client.usage = {"elastic-worker-0": "1"}  # 200 % of the request against a 50 % target
    client.create(r.HPAS, autoscaler())
    controller = HorizontalPodAutoscalerController(client, sync_period=3600)  # only the HPA's arrival syncs
    controller.start()
    try:
        job = eventually(lambda: (j := client.get(r.PYTORCHJOBS, "default", "elastic"))["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4 and j,
                         what="Worker replicas 4")
        assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
        hpa = eventually(lambda: (h := client.get(r.HPAS, "default", "elastic")).get("status", {}).get("desiredReplicas") == 4 and h,
                         what="HPA status")
    finally:
        controller.stop()
    status = hpa["status"]
    assert status["currentReplicas"] == 1 and "lastScaleTime" in status
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 200, "averageValue": "1"}}}]
    assert (condition(hpa, "AbleToScale")["reason"], condition(hpa, "ScalingActive")["reason"]) == ("SucceededRescale", "ValidMetricFound")
    events, _ = client.list(r.EVENTS, "default")
    rescales = [e for e in events if e["involvedObject"]["kind"] == "HorizontalPodAutoscaler"]
    assert [(e["reason"], e["message"], e["source"]["component"]) for e in rescales] == [
        ("SuccessfulRescale", "New size: 4; reason: cpu resource utilization (percentage of request) above target", "horizontal-pod-autoscaler")]


def test_missing_metrics_api_is_reported_not_acted_on(client: FakeMetricsClient) -> None:
    job_with_selector(client, 2)
    running(client, worker_pod(0))
    running(client, worker_pod(1))
    client.usage = None
    client.create(r.HPAS, autoscaler())
    controller = HorizontalPodAutoscalerController(client, sync_period=0.5)
    controller.start()
    try:
        hpa = eventually(lambda: (h := client.get(r.HPAS, "default", "elastic")).get("status", {}).get("conditions") and h,
                         what="HPA conditions")
        eventually(lambda: controller.loop.passes >= 3, what="three passes")
    finally:
        controller.stop()
    active = condition(hpa, "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
    assert "unable to get metrics for resource cpu" in active["message"]
    assert client.get(r.PYTORCHJOBS, "default", "elastic")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert hpa["status"]["currentReplicas"] == 2
    # The same warning every sync is one Event with a count, as client-go's recorder makes it.
    events, _ = client.list(r.EVENTS, "default")
    warnings = [e for e in events if e["reason"] == "FailedGetResourceMetric"]
    assert len(warnings) == 1 and warnings[0]["count"] >= 3


def test_a_manual_scale_holds_and_a_deleted_target_stops_scaling(client: FakeMetricsClient) -> None:
    job_with_selector(client, 2)
    running(client, worker_pod(0))
    running(client, worker_pod(1))
    client.sampled_at = format_time(datetime.now(timezone.utc))
    client.usage = {"elastic-worker-0": "50m", "elastic-worker-1": "50m"}  # 10 %: wants 1, the window keeps 2
    client.create(r.HPAS, autoscaler())
    controller = HorizontalPodAutoscalerController(client, sync_period=0.5)
    controller.start()
    try:
        eventually(lambda: condition_status(client.get(r.HPAS, "default", "elastic"), "ScalingActive") == "True",
                   what="the HPA computing a size")
        # kubectl scale pytorchjob elastic --replicas=1 (the controller would then delete worker-1)
        scale = client.get(r.PYTORCHJOBS, "default", "elastic", subresource="scale")
        client.replace(r.PYTORCHJOBS, {**scale, "spec": {"replicas": 1}}, subresource="scale")
        client.delete(r.PODS, "default", "elastic-worker-1")
        client.usage = {"elastic-worker-0": "50m"}
        eventually(lambda: client.get(r.HPAS, "default", "elastic")["status"].get("currentReplicas") == 1,
                   what="the HPA seeing the new size")
        passes = controller.loop.passes
        eventually(lambda: controller.loop.passes >= passes + 3, what="three more passes")
        assert client.get(r.PYTORCHJOBS, "default", "elastic")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
        events, _ = client.list(r.EVENTS, "default")
        assert not [e for e in events if e["reason"] == "SuccessfulRescale"], events

        client.delete(r.PYTORCHJOBS, "default", "elastic")
        hpa = eventually(lambda: condition_status(h := client.get(r.HPAS, "default", "elastic"), "ScalingActive") == "False" and h,
                         what="ScalingActive=False")
    finally:
        controller.stop()
    assert (condition(hpa, "AbleToScale")["reason"], condition(hpa, "ScalingActive")["reason"]) == ("FailedGetScale", "FailedGetScale")


class EventWritesClient(FakeMetricsClient):
    """Counts the Event creates and PATCHes that reach the API server."""

    creates = 0
    patches = 0

    def create(self, resource: Resource, obj: Obj, *args: Any, **kwargs: Any) -> Any:
        self.creates += resource == r.EVENTS
        return super().create(resource, obj, *args, **kwargs)

    def patch(self, resource: Resource, *args: Any, **kwargs: Any) -> Any:
        self.patches += resource == r.EVENTS
        return super().patch(resource, *args, **kwargs)


def test_an_hpa_without_metrics_for_100_syncs_costs_the_correlators_writes(apiserver: ApiServerHandle) -> None:
    # The 1,000-job bench (docs/benchmarks.md) had 100 such HPAs warning every 15 s.
    client = EventWritesClient.from_kubeconfig(str(apiserver.kubeconfig))
    try:
        job_with_selector(client, 2)
        running(client, worker_pod(0))
        running(client, worker_pod(1))
        client.create(r.HPAS, autoscaler())
        start, period = datetime.now(timezone.utc), timedelta(seconds=15)
        now = [start]
        controller = HorizontalPodAutoscalerController(client, clock=lambda: now[0])  # synced by hand, not started
        syncs = 100
        for n in range(syncs):
            now[0] = start + n * period
            controller.sync(client.get(r.HPAS, "default", "elastic"))
        reasons = ("FailedGetResourceMetric", "FailedComputeMetricsReplicas")
        limits = CorrelatorLimits()
        refills = int((syncs - 1) * period.total_seconds() // limits.refill_seconds)
        assert client.creates == len(reasons)  # one Event per reason; every repeat is a PATCH
        assert client.patches <= len(reasons) * (limits.burst + refills)  # 25 at once, then 1 per 5 minutes
        # Occurrences the spam filter kept back are counted all the same: the next write carries them.
        now[0] += timedelta(seconds=limits.refill_seconds)
        controller.sync(client.get(r.HPAS, "default", "elastic"))
        events, _ = client.list(r.EVENTS, "default")
    finally:
        client.close()
    about_hpa = sorted((e["reason"], e["count"]) for e in events if e["involvedObject"]["kind"] == "HorizontalPodAutoscaler")
    assert about_hpa == sorted((reason, syncs + 1) for reason in reasons)


def test_scales_a_deployment_through_its_scale_subresource(client: FakeMetricsClient) -> None:
    template = {"metadata": {"labels": {"app": "board"}},
                "spec": {"containers": [{"name": "board", "image": "python:3.11", "resources": {"requests": {"cpu": "500m"}}}]}}
    client.create(r.DEPLOYMENTS, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "board", "namespace": "default"},
                                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "board"}}, "template": template}})
    running(client, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "board-0", "namespace": "default", "labels": {"app": "board"}},
                     "spec": template["spec"]})
    client.sampled_at = format_time(datetime.now(timezone.utc))
    client.usage = {"board-0": "1"}  # 200 % of the request against a 50 % target
    hpa = autoscaler(maximum=3)
    hpa["metadata"]["name"] = "board"
    hpa["spec"]["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "board"}
    client.create(r.HPAS, hpa)
    controller = HorizontalPodAutoscalerController(client, sync_period=3600)
    controller.start()
    try:
        eventually(lambda: client.get(r.DEPLOYMENTS, "default", "board")["spec"]["replicas"] == 3, what="the Deployment at 3 replicas")
    finally:
        controller.stop()
