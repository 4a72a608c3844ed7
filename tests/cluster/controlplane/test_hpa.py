"""The HPA decision, with plain dicts and times: kube-controller-manager's arithmetic,
stabilization, limits, conditions and Events."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import hpa_decision as hpa
from trainctl.cluster.controlplane.units import format_time

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
LONG_AGO = format_time(NOW - timedelta(hours=1))


def cpu_utilization(target: int) -> list[Obj]:
    return [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}]


def autoscaler(*, minimum: int = 1, maximum: int = 10, metrics: Optional[list[Obj]] = None, behavior: Optional[Obj] = None,
               status: Optional[Obj] = None) -> Obj:
    spec: Obj = {"scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job"},
                 "minReplicas": minimum, "maxReplicas": maximum, "metrics": metrics or cpu_utilization(50)}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "job", "namespace": "default", "uid": "u1", "generation": 1}, "spec": spec,
            "status": status or {}}


def scale(replicas: int, selector: str = "job=job") -> Obj:
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "job", "namespace": "default"},
            "spec": {"replicas": replicas}, "status": {"replicas": replicas, "selector": selector}}


def pod(name: str, *, request: Optional[str] = "500m", phase: str = "Running", started: str = LONG_AGO,
        ready_since: str = LONG_AGO, ready: str = "True") -> Obj:
    resources = {"requests": {"cpu": request}} if request else {}
    return {"metadata": {"name": name, "namespace": "default", "labels": {"job": "job"}},
            "spec": {"containers": [{"name": "main", "resources": resources}]},
            "status": {"phase": phase, "startTime": started,
                       "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": ready_since}]}}


def usage(name: str, cpu: str, *, at: datetime = NOW, memory: str = "100Mi") -> Obj:
    return {"metadata": {"name": name, "namespace": "default"}, "timestamp": format_time(at), "window": "30s",
            "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": memory}}]}


def observed(replicas: int, pods: list[Obj], metrics: list[Obj], **kwargs: Any) -> hpa.Observed:
    return hpa.Observed(scale=scale(replicas), pods=tuple(pods), pod_metrics=tuple(metrics), **kwargs)


def loaded(cpus: list[str]) -> tuple[list[Obj], list[Obj]]:
    names = [f"p{i}" for i in range(len(cpus))]
    return [pod(n) for n in names], [usage(n, c) for n, c in zip(names, cpus, strict=True)]


def conditions(decision: hpa.Decision) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in decision.status["conditions"]}


def settled(history_replicas: int, age: float) -> hpa.History:
    """A History whose only recommendation is ``history_replicas``, ``age`` seconds old."""
    return hpa.History(recommendations=(hpa.Recommendation(history_replicas, NOW - timedelta(seconds=age)),))


# --- scaling up --------------------------------------------------------------------------------


def test_scale_up_to_ceil_of_ratio_with_status_conditions_and_event() -> None:
    pods, metrics = loaded(["500m", "500m"])  # 100 % of a 500m request, target 50 %
    decision = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4
    status = decision.status
    assert status["currentReplicas"] == 2 and status["desiredReplicas"] == 4
    assert status["lastScaleTime"] == format_time(NOW)
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 100, "averageValue": "500m"}}}]
    assert conditions(decision) == {"AbleToScale": ("True", "SucceededRescale"), "ScalingActive": ("True", "ValidMetricFound"),
                                    "ScalingLimited": ("False", "DesiredWithinRange")}
    active = next(c for c in status["conditions"] if c["type"] == "ScalingActive")
    assert active["message"] == "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
    assert [(e.type, e.reason, e.message) for e in decision.events] == [
        ("Normal", "SuccessfulRescale", "New size: 4; reason: cpu resource utilization (percentage of request) above target")]


def test_scale_up_clamped_at_max_replicas() -> None:
    pods, metrics = loaded(["500m", "500m"])
    decision = hpa.decide(autoscaler(maximum=3), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 3
    assert conditions(decision)["ScalingLimited"] == ("True", "TooManyReplicas")
    limited = next(c for c in decision.status["conditions"] if c["type"] == "ScalingLimited")
    assert limited["message"] == "the desired replica count is more than the maximum replica count"


def test_default_scale_up_rate_is_double_or_four() -> None:
    pods, metrics = loaded(["5"])  # 1000 % of request: wants 20
    decision = hpa.decide(autoscaler(maximum=50), observed(1, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4
    assert conditions(decision)["ScalingLimited"] == ("True", "ScaleUpLimit")


def test_within_tolerance_nothing_moves() -> None:
    pods, metrics = loaded(["270m", "270m"])  # 54 % against 50 %: ratio 1.08
    decision = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to is None
    assert decision.status["desiredReplicas"] == 2
    assert conditions(decision)["AbleToScale"] == ("True", "ReadyForNewScale")
    assert decision.events == ()
    pods, metrics = loaded(["280m", "280m"])  # 56 %: ratio 1.12, outside the tolerance
    assert hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW).scale_to == 3


def test_tolerance_is_settable() -> None:
    pods, metrics = loaded(["280m", "280m"])
    wide = hpa.HpaConfig(tolerance=0.2)
    assert hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW, wide).scale_to is None


def test_average_value_target_compares_raw_usage() -> None:
    metrics_spec = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "250m"}}}]
    pods, metrics = loaded(["500m", "500m"])
    decision = hpa.decide(autoscaler(metrics=metrics_spec), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4
    assert decision.status["currentMetrics"] == [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "500m"}}}]
    assert decision.events[0].message == "New size: 4; reason: cpu resource above target"


def test_memory_average_value_needs_no_requests() -> None:
    metrics_spec = [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}]
    names = ["p0", "p1"]
    pods = [pod(n, request=None, ready="False") for n in names]  # readiness only matters for CPU
    metrics = [usage(n, "1", memory="300Mi") for n in names]
    decision = hpa.decide(autoscaler(metrics=metrics_spec), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4  # 3x the target, but at most double per step
    assert decision.status["currentMetrics"][0]["resource"]["current"] == {"averageValue": str(300 * 1024 * 1024)}


def test_missing_metrics_count_as_zero_when_scaling_up() -> None:
    pods = [pod("p0"), pod("p1"), pod("p2")]
    metrics = [usage("p0", "500m"), usage("p1", "500m")]  # p2 has no sample yet
    decision = hpa.decide(autoscaler(), observed(3, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4  # (100+100+0)/3 = 66 % -> ratio 1.32 -> ceil(3.96)


def test_missing_metrics_count_as_full_request_when_scaling_down() -> None:
    pods = [pod("p0"), pod("p1"), pod("p2")]
    metrics = [usage("p0", "50m"), usage("p1", "50m")]  # 10 %: alone they would ask for 1
    decision = hpa.decide(autoscaler(), observed(3, pods, metrics), settled(3, 600), NOW)
    assert decision.scale_to is None  # (10+10+100)/3 = 40 % -> ceil(0.8 * 3) == 3


def test_pending_pods_count_as_zero_only_for_scale_up() -> None:
    pods = [pod("p0"), pod("p1"), pod("p2", phase="Pending")]
    metrics = [usage("p0", "500m"), usage("p1", "500m")]
    assert hpa.decide(autoscaler(), observed(3, pods, metrics), hpa.History(), NOW).scale_to == 4


def test_deleting_and_failed_pods_are_ignored() -> None:
    pods, metrics = loaded(["500m", "500m"])
    pods.append({**pod("p2", phase="Failed")})
    gone = pod("p3")
    gone["metadata"]["deletionTimestamp"] = format_time(NOW)
    pods.append(gone)
    metrics += [usage("p2", "0"), usage("p3", "0")]
    assert hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW).scale_to == 4


def ago(seconds: float) -> str:
    return format_time(NOW - timedelta(seconds=seconds))


def test_cpu_does_not_count_during_the_initialization_period_even_once_ready() -> None:
    # Ready for far longer than a metrics window, but started a minute ago: a start-up burst.
    starting = [pod(n, started=ago(60), ready_since=ago(59)) for n in ("p0", "p1")]
    metrics = [usage("p0", "1"), usage("p1", "1")]  # 200 % against 50 %
    decision = hpa.decide(autoscaler(), observed(2, starting, metrics), hpa.History(), NOW)
    assert decision.scale_to is None
    active = next(c for c in decision.status["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
    assert active["message"].endswith("did not receive metrics for targeted pods (pods might be unready)")
    # The period is the --horizontal-pod-autoscaler-cpu-initialization-period flag's.
    short = hpa.HpaConfig(cpu_initialization_period=30)
    assert hpa.decide(autoscaler(), observed(2, starting, metrics), hpa.History(), NOW, short).scale_to == 4


def test_a_starting_pod_counts_as_idle_when_scaling_up() -> None:
    # p0 runs at 120 % of a 50 % target on its own; the new p1 burns a core starting up.
    pods = [pod("p0"), pod("p1", started=ago(60), ready_since=ago(59))]
    metrics = [usage("p0", "300m"), usage("p1", "1")]
    decision = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW)
    # p1 as 0 %: (60 + 0) / 2 = 30 % would reverse the direction, so 2 stay; counting its
    # burst, (60 + 200) / 2 would ask for 6.
    assert decision.scale_to is None
    assert conditions(decision)["ScalingActive"] == ("True", "ValidMetricFound")


def test_initial_readiness_delay_tells_never_ready_from_lost_readiness() -> None:
    # Past the initialization period: a pod that went unready within the delay of its start
    # has never been ready and does not count; one that lost readiness later does.
    never_ready = pod("p1", started=ago(600), ready_since=ago(590), ready="False")
    lost_readiness = pod("p1", started=ago(600), ready_since=ago(60), ready="False")
    metrics = [usage("p0", "250m"), usage("p1", "1")]  # p0 at target; p1 at 400 %
    assert hpa.decide(autoscaler(), observed(2, [pod("p0"), never_ready], metrics), hpa.History(), NOW).scale_to is None
    assert hpa.decide(autoscaler(), observed(2, [pod("p0"), lost_readiness], metrics), hpa.History(), NOW).scale_to == 4
    # The delay is the --horizontal-pod-autoscaler-initial-readiness-delay flag's.
    short = hpa.HpaConfig(initial_readiness_delay=5)
    assert hpa.decide(autoscaler(), observed(2, [pod("p0"), never_ready], metrics), hpa.History(), NOW, short).scale_to == 4


def test_cpu_of_a_pod_that_just_became_ready_is_not_counted() -> None:
    fast = {"scaleUp": {"policies": [{"type": "Pods", "value": 100, "periodSeconds": 15}]}}
    fresh = pod("p1", started=format_time(NOW - timedelta(seconds=20)), ready_since=format_time(NOW - timedelta(seconds=10)))
    pods = [pod("p0"), fresh]
    # p1's startup burst was sampled before it had been ready for a whole metrics window.
    metrics = [usage("p0", "1"), usage("p1", "5")]
    decision = hpa.decide(autoscaler(maximum=50, behavior=fast), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4  # p0 at 200 %, p1 as 0 %: 100 % -> ceil(2 * 2); counting p1 would ask for 24
    settled_pod = pod("p1")
    decision = hpa.decide(autoscaler(maximum=50, behavior=fast), observed(2, [pod("p0"), settled_pod], metrics), hpa.History(), NOW)
    assert decision.scale_to == 24


# --- scaling down ------------------------------------------------------------------------------


def test_scale_down_is_stabilized_over_five_minutes() -> None:
    pods, metrics = loaded(["50m"] * 4)  # 10 %: wants 1
    decision = hpa.decide(autoscaler(), observed(4, pods, metrics), settled(4, 60), NOW)
    assert decision.scale_to is None
    assert decision.status["desiredReplicas"] == 4
    able = next(c for c in decision.status["conditions"] if c["type"] == "AbleToScale")
    assert (able["reason"], able["message"]) == (
        "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
    # The recommendation is remembered: five minutes on, the window holds only low ones.
    later = NOW + timedelta(seconds=301)
    decision = hpa.decide(autoscaler(), observed(4, pods, metrics), decision.history, later)
    assert decision.scale_to == 1
    assert decision.events[0].message == "New size: 1; reason: All metrics below target"


def test_first_sight_of_an_hpa_counts_as_a_recommendation_of_its_current_size() -> None:
    pods, metrics = loaded(["50m"] * 4)
    decision = hpa.decide(autoscaler(), observed(4, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to is None
    assert conditions(decision)["AbleToScale"] == ("True", "ScaleDownStabilized")


def idle_pair_a_minute_ago() -> hpa.History:
    """What the HPA remembers after its first sync of two idle pods (10 %: held at 2 by the window)."""
    pods, metrics = loaded(["50m", "50m"])
    first = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW - timedelta(seconds=60))
    assert first.scale_to is None
    return first.history


def test_a_manual_scale_down_holds_unless_load_asks_for_more() -> None:
    history = idle_pair_a_minute_ago()
    pods, metrics = loaded(["50m"])  # kubectl scale --replicas=1
    decision = hpa.decide(autoscaler(), observed(1, pods, metrics), history, NOW)
    assert decision.scale_to is None and decision.events == ()
    assert conditions(decision)["AbleToScale"] == ("True", "ReadyForNewScale")
    # ... but a lone pod at 200 % of its request is load.
    pods, metrics = loaded(["1"])
    decision = hpa.decide(autoscaler(), observed(1, pods, metrics), history, NOW)
    assert decision.scale_to == 4
    assert decision.events[0].message == "New size: 4; reason: cpu resource utilization (percentage of request) above target"


def test_a_manual_scale_up_holds_for_the_stabilization_window() -> None:
    pods, metrics = loaded(["50m"] * 3)  # kubectl scale --replicas=3, still idle
    decision = hpa.decide(autoscaler(), observed(3, pods, metrics), idle_pair_a_minute_ago(), NOW)
    assert decision.scale_to is None
    assert conditions(decision)["AbleToScale"] == ("True", "ScaleDownStabilized")
    later = NOW + timedelta(seconds=301)
    decision = hpa.decide(autoscaler(), observed(3, pods, metrics), decision.history, later)
    assert decision.scale_to == 1
    assert decision.events[0].message == "New size: 1; reason: All metrics below target"


def test_the_hpas_own_rescale_is_not_taken_for_a_manual_one() -> None:
    pods, metrics = loaded(["500m", "500m"])
    up = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW - timedelta(seconds=60))
    assert up.scale_to == 4 and up.history.size == 4
    pods, metrics = loaded(["50m"] * 4)
    # Still the 2 of the first sight and the 4 in the window: no scale down yet, and the
    # recommendations were not reset to 4 (a reset would forget the earlier ones).
    decision = hpa.decide(autoscaler(), observed(4, pods, metrics), up.history, NOW)
    assert decision.scale_to is None
    assert [r.replicas for r in decision.history.recommendations] == [2, 4, 1]


def test_a_rescale_moved_only_by_the_window_names_it_as_its_reason() -> None:
    # An earlier recommendation of 10 was limited to 4; at 4 the metric is on target, and the
    # window's 10 moves the size on (kube-controller-manager gives no reason here).
    pods, metrics = loaded(["250m"] * 4)
    history = hpa.History(recommendations=(hpa.Recommendation(10, NOW - timedelta(seconds=15)),))
    decision = hpa.decide(autoscaler(), observed(4, pods, metrics), history, NOW)
    assert decision.scale_to == 8
    assert decision.events[0].message == ("New size: 8; reason: recent recommendations were higher than current one, "
                                          "applying the highest recent recommendation")


def test_scale_down_window_is_settable() -> None:
    pods, metrics = loaded(["50m"] * 4)
    short = hpa.HpaConfig(downscale_stabilization=30)
    assert hpa.decide(autoscaler(), observed(4, pods, metrics), settled(4, 60), NOW, short).scale_to == 1


def test_min_replicas_floor() -> None:
    pods, metrics = loaded(["50m"] * 4)
    decision = hpa.decide(autoscaler(minimum=3), observed(4, pods, metrics), settled(4, 600), NOW)
    assert decision.scale_to == 3
    assert conditions(decision)["ScalingLimited"] == ("True", "TooFewReplicas")


def test_target_outside_the_range_is_brought_in_without_metrics() -> None:
    decision = hpa.decide(autoscaler(minimum=2), observed(1, [], []), hpa.History(), NOW)
    assert decision.scale_to == 2
    assert decision.events[0].message == "New size: 2; reason: Current number of replicas below Spec.MinReplicas"
    decision = hpa.decide(autoscaler(maximum=3), observed(5, [], []), hpa.History(), NOW)
    assert decision.scale_to == 3
    assert decision.events[0].message == "New size: 3; reason: Current number of replicas above Spec.MaxReplicas"


def test_target_scaled_to_zero_disables_autoscaling() -> None:
    decision = hpa.decide(autoscaler(), observed(0, [], []), hpa.History(), NOW)
    assert decision.scale_to is None
    assert conditions(decision)["ScalingActive"] == ("False", "ScalingDisabled")


# --- behavior ----------------------------------------------------------------------------------


def test_behavior_defaults_scale_up_by_four_pods_or_double() -> None:
    pods, metrics = loaded(["5"])
    decision = hpa.decide(autoscaler(maximum=50, behavior={}), observed(1, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 5  # max(1 + 4, 1 * 2)
    assert conditions(decision)["ScalingLimited"] == ("True", "ScaleUpLimit")
    # Within the same 15 s period the added pods count against the policy.
    pods, metrics = loaded(["5"] * 5)
    soon = NOW + timedelta(seconds=5)
    decision = hpa.decide(autoscaler(maximum=50, behavior={}), observed(5, pods, metrics), decision.history, soon)
    assert decision.scale_to is None
    assert conditions(decision)["ScalingLimited"] == ("True", "ScaleUpLimit")
    later = NOW + timedelta(seconds=16)
    assert hpa.decide(autoscaler(maximum=50, behavior={}), observed(5, pods, metrics), decision.history, later).scale_to == 10


def test_behavior_scale_down_policy_limits_the_rate() -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    pods, metrics = loaded(["50m"] * 4)
    decision = hpa.decide(autoscaler(behavior=behavior), observed(4, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 3
    limited = next(c for c in decision.status["conditions"] if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "ScaleDownLimit")
    pods, metrics = loaded(["50m"] * 3)
    soon = NOW + timedelta(seconds=30)
    assert hpa.decide(autoscaler(behavior=behavior), observed(3, pods, metrics), decision.history, soon).scale_to is None
    later = NOW + timedelta(seconds=61)
    assert hpa.decide(autoscaler(behavior=behavior), observed(3, pods, metrics), decision.history, later).scale_to == 2


def test_behavior_scale_up_stabilization_takes_the_lowest_recent_recommendation() -> None:
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 120}}
    pods, metrics = loaded(["500m", "500m"])
    decision = hpa.decide(autoscaler(behavior=behavior), observed(2, pods, metrics), settled(2, 60), NOW)
    assert decision.scale_to is None
    assert conditions(decision)["AbleToScale"] == ("True", "ScaleUpStabilized")


def test_disabled_scale_down() -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Disabled"}}
    pods, metrics = loaded(["50m"] * 4)
    assert hpa.decide(autoscaler(behavior=behavior), observed(4, pods, metrics), hpa.History(), NOW).scale_to is None


# --- failures ----------------------------------------------------------------------------------


def test_metrics_api_unavailable() -> None:
    previous = {"currentReplicas": 2, "desiredReplicas": 2}
    seen = hpa.Observed(scale=scale(2), pods=tuple(loaded(["0", "0"])[0]), metrics_error="the server could not find the requested resource")
    decision = hpa.decide(autoscaler(status=previous), seen, hpa.History(), NOW)
    assert decision.scale_to is None
    active = next(c for c in decision.status["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
    assert active["message"] == ("the HPA was unable to compute the replica count: failed to get cpu utilization: "
                                 "unable to get metrics for resource cpu: the server could not find the requested resource")
    assert [e.reason for e in decision.events] == ["FailedGetResourceMetric", "FailedComputeMetricsReplicas"]
    assert decision.events[1].message.startswith("invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization")
    assert decision.status["desiredReplicas"] == 2 and decision.status["currentMetrics"] == [{"type": ""}]


def test_no_metrics_returned() -> None:
    decision = hpa.decide(autoscaler(), observed(2, loaded(["0", "0"])[0], []), hpa.History(), NOW)
    active = next(c for c in decision.status["conditions"] if c["type"] == "ScalingActive")
    assert active["message"].endswith("unable to get metrics for resource cpu: no metrics returned from resource metrics API")


def test_missing_request_makes_utilization_fail() -> None:
    pods = [pod("p0", request=None)]
    decision = hpa.decide(autoscaler(), observed(1, pods, [usage("p0", "1")]), hpa.History(), NOW)
    active = next(c for c in decision.status["conditions"] if c["type"] == "ScalingActive")
    assert active["reason"] == "FailedGetResourceMetric"
    assert active["message"].endswith("failed to get cpu utilization: missing request for cpu in container main of Pod p0")


def test_one_failing_metric_does_not_block_a_scale_up() -> None:
    specs = cpu_utilization(50) + [{"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1"}}}]
    pods, metrics = loaded(["500m", "500m"])
    decision = hpa.decide(autoscaler(metrics=specs), observed(2, pods, metrics), hpa.History(), NOW)
    assert decision.scale_to == 4
    assert conditions(decision)["ScalingActive"] == ("True", "ValidMetricFound")
    assert decision.events[0].reason == "FailedGetPodsMetric"
    # ... but it does block a scale down.
    pods, metrics = loaded(["50m", "50m"])
    decision = hpa.decide(autoscaler(metrics=specs), observed(2, pods, metrics), settled(2, 600), NOW)
    assert decision.scale_to is None
    assert conditions(decision)["ScalingActive"] == ("False", "FailedGetPodsMetric")


def test_scale_without_selector() -> None:
    seen = hpa.Observed(scale=scale(2, selector=""))
    decision = hpa.decide(autoscaler(), seen, hpa.History(), NOW)
    assert conditions(decision)["ScalingActive"] == ("False", "InvalidSelector")
    assert decision.events[0].reason == "SelectorRequired"


def test_unreadable_scale() -> None:
    pods, metrics = loaded(["250m", "250m"])
    active = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW)
    assert conditions(active)["ScalingActive"] == ("True", "ValidMetricFound")
    gone = hpa.Observed(scale_error='pytorchjobs.kubeflow.org "job" not found')
    decision = hpa.decide(autoscaler(status=active.status), gone, active.history, NOW + timedelta(seconds=15))
    assert decision.scale_to is None
    assert conditions(decision) == {"AbleToScale": ("False", "FailedGetScale"), "ScalingActive": ("False", "FailedGetScale"),
                                    "ScalingLimited": ("False", "DesiredWithinRange")}
    scaling = next(c for c in decision.status["conditions"] if c["type"] == "ScalingActive")
    assert scaling["message"] == ("the HPA controller was unable to get the target's current scale: "
                                  'pytorchjobs.kubeflow.org "job" not found')
    assert [(e.type, e.reason) for e in decision.events] == [("Warning", "FailedGetScale")]


def test_failed_rescale_keeps_the_old_size_and_forgets_the_scale_event() -> None:
    pods, metrics = loaded(["5"])
    behavior: Obj = {}
    decision = hpa.decide(autoscaler(behavior=behavior), observed(1, pods, metrics), hpa.History(), NOW)
    failed = hpa.rescale_failed(decision, autoscaler(behavior=behavior), hpa.History(), "409 Conflict", NOW)
    assert failed.scale_to is None
    assert conditions(failed)["AbleToScale"] == ("False", "FailedUpdateScale")
    assert "lastScaleTime" not in failed.status and failed.status["desiredReplicas"] == 0
    assert [e.reason for e in failed.events] == ["FailedRescale"]
    assert failed.events[0].message.startswith("New size: 5; reason: cpu resource utilization")
    assert failed.history.scale_ups == ()


def test_condition_transition_time_moves_only_with_status() -> None:
    pods, metrics = loaded(["250m", "250m"])
    first = hpa.decide(autoscaler(), observed(2, pods, metrics), hpa.History(), NOW)
    later = NOW + timedelta(seconds=15)
    second = hpa.decide(autoscaler(status=first.status), observed(2, pods, metrics), first.history, later)
    times = {c["type"]: c["lastTransitionTime"] for c in second.status["conditions"]}
    assert set(times.values()) == {format_time(NOW)}
    assert second.status == first.status  # nothing to write
