"""The horizontal pod autoscaler's decision (autoscaling/v2), as kube-controller-manager makes it.

Pure: the HPA, its target's Scale, the selected pods and their PodMetrics (plain dicts),
the controller's memory of past recommendations and scale events (:class:`History`) and
``now`` go in; a :class:`Decision` (the replica count to write through the ``scale``
subresource, if any, the new status, Events and the new History) comes out.

The arithmetic is the documented algorithm: for each metric
``desired = ceil(current * currentValue / targetValue)``, skipped when the ratio is within
the tolerance (0.1); pods that are being deleted or failed are ignored; pods without
metrics count as 0 when scaling up and as 100 % of target when scaling down; Pending pods,
and for CPU pods still in their initialization period or never Ready, are left out, or count
as 0 when scaling up; none of these may reverse the direction. The largest proposal over the
metrics wins. The proposal is then stabilized over the recent recommendations and limited by
the scaling policies and min/maxReplicas, with ``spec.behavior`` when set, otherwise with the
controller's defaults (a 5-minute scale-down stabilization window and at most
max(2 x current, 4) replicas per step). Conditions, reasons and messages are
kube-controller-manager's, so ``kubectl describe hpa`` reads the same.

Four choices are the embedded cluster's own, for training pods (docs/compatibility.md):
a pod's CPU does not count for its whole initialization period (kube-controller-manager
trusts a Ready pod's sample once it has been Ready for a metrics window; these pods have
no readiness probes, so Ready only says a process started, and a torch start-up or an
elastic restart burns CPU for seconds); a size set from outside (``kubectl scale``) starts
the recommendations afresh, as a newly seen HPA does, so the stabilization window keeps it
unless load asks for more; a rescale that only the window causes names the window as its
reason (kube's is empty); and a target that cannot be read also makes ``ScalingActive``
False.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Optional, cast

from trainctl.cluster.controlplane import units
from trainctl.kube.events import Event

Obj = dict[str, Any]

DEFAULT_CPU_UTILIZATION = 80  # the API server's default metric when spec.metrics is empty

SCALE_UP_DEFAULTS: Obj = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}],
}
SCALE_DOWN_DEFAULTS: Obj = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


@dataclass(frozen=True)
class HpaConfig:
    """kube-controller-manager's ``--horizontal-pod-autoscaler-*`` settings."""

    tolerance: float = 0.1
    downscale_stabilization: float = 300.0
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0


@dataclass(frozen=True)
class Recommendation:
    replicas: int
    at: datetime


@dataclass(frozen=True)
class ScaleEvent:
    change: int
    at: datetime


@dataclass(frozen=True)
class History:
    """What the controller remembers about one HPA between syncs (in memory, as kube does).

    ``size`` is the target's size as the last sync left it: a different size at the next
    one was set by someone else.
    """

    recommendations: tuple[Recommendation, ...] = ()
    scale_ups: tuple[ScaleEvent, ...] = ()
    scale_downs: tuple[ScaleEvent, ...] = ()
    size: Optional[int] = None


@dataclass(frozen=True)
class Observed:
    """What the loop read for one HPA. An ``*_error`` says the read failed and why."""

    scale: Optional[Obj] = None
    scale_error: Optional[str] = None
    pods: tuple[Obj, ...] = ()
    pod_metrics: tuple[Obj, ...] = ()
    metrics_error: Optional[str] = None


@dataclass(frozen=True)
class Decision:
    """``scale_to`` is None when the target keeps its size; ``history`` assumes the write succeeds."""

    scale_to: Optional[int]
    status: Obj
    events: tuple[Event, ...] = ()
    history: History = field(default_factory=History)
    reason: str = ""


class MetricError(Exception):
    """A metric that could not be evaluated: the ScalingActive=False reason and the error."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


# --- conditions -------------------------------------------------------------------------------


def set_condition(conditions: list[Obj], kind: str, status: str, reason: str, message: str, now: datetime) -> None:
    """Update (or add) one condition in place; the transition time moves only with the status."""
    for condition in conditions:
        if condition.get("type") == kind:
            break
    else:
        condition = {"type": kind}
        conditions.append(condition)
    if condition.get("status") != status:
        condition["lastTransitionTime"] = units.format_time(now)
    condition.update(status=status, reason=reason, message=message)


# --- reading pods and metrics -----------------------------------------------------------------


def _pod_condition(pod: Obj, kind: str) -> Optional[Obj]:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return cast("dict[str, Any] | None", condition)
    return None


def _usage_by_pod(pod_metrics: tuple[Obj, ...], resource: str, container: Optional[str]) -> dict[str, int]:
    """Pod name -> usage in milli-units; pods missing the resource are left out."""
    usage: dict[str, int] = {}
    for item in pod_metrics:
        total, complete, seen = 0, True, False
        for entry in item.get("containers") or ():
            if container and entry.get("name") != container:
                continue
            value = units.milli_value(((entry.get("usage") or {}).get(resource)))
            if value is None:
                complete = False
                break
            total += value
            seen = True
        if complete and seen:
            usage[item["metadata"]["name"]] = total
    return usage


def _requests_by_pod(pods: list[Obj], resource: str, container: Optional[str]) -> dict[str, int]:
    requests: dict[str, int] = {}
    for pod in pods:
        total = 0
        for entry in (pod.get("spec") or {}).get("containers") or ():
            if container and entry.get("name") != container:
                continue
            value = units.milli_value(((entry.get("resources") or {}).get("requests") or {}).get(resource))
            if value is None:
                raise MetricError("", f"missing request for {resource} in container {entry.get('name')} of Pod {pod['metadata']['name']}")
            total += value
        requests[pod["metadata"]["name"]] = total
    return requests


@dataclass(frozen=True)
class _Groups:
    ready: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def _group_pods(pods: list[Obj], usage: dict[str, int], resource: str, now: datetime, config: HpaConfig) -> _Groups:
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        if name not in usage:
            missing.add(name)
            continue
        if resource == "cpu" and _cpu_sample_unready(pod, now, config):
            unready.add(name)
            continue
        ready += 1
    return _Groups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def _cpu_sample_unready(pod: Obj, now: datetime, config: HpaConfig) -> bool:
    """Whether a CPU sample must not count: a starting pod's burst is not its load.

    Within the initialization period after the pod started, never (Ready or not); after it,
    not while the pod is unready and has never been Ready (it went unready within the
    initial readiness delay of its start).
    """
    condition = _pod_condition(pod, "Ready")
    started = units.parse_time((pod.get("status") or {}).get("startTime"))
    if condition is None or started is None:
        return True
    if started + timedelta(seconds=config.cpu_initialization_period) > now:
        return True
    transition = units.parse_time(condition.get("lastTransitionTime")) or started
    return condition.get("status") == "False" and started + timedelta(seconds=config.initial_readiness_delay) > transition


# --- one metric -------------------------------------------------------------------------------


def _replicas_for_ratio(
    current_replicas: int,
    samples: dict[str, int],
    groups: _Groups,
    fallback: Callable[[str, bool], int],
    ratio_of: Callable[[dict[str, int]], float],
    tolerance: float,
) -> int:
    """The replica-calculator core shared by Utilization and AverageValue targets.

    ``fallback(pod, scaling_down)`` is the value a pod without metrics is assumed to have.
    """
    ratio = ratio_of(samples)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if abs(1.0 - ratio) <= tolerance:
            return current_replicas
        return math.ceil(ratio * groups.ready)
    filled = dict(samples)
    for name in groups.missing:
        filled[name] = fallback(name, ratio < 1.0)
    if scale_up_with_unready:
        for name in groups.unready:
            filled[name] = 0
    new_ratio = ratio_of(filled)
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (new_ratio < 1.0 < ratio):
        return current_replicas
    proposal = math.ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and proposal > current_replicas) or (new_ratio > 1.0 and proposal < current_replicas):
        return current_replicas
    return proposal


def _resource_proposal(
    source: Obj, current_replicas: int, observed: Observed, now: datetime, config: HpaConfig, container: Optional[str]
) -> tuple[int, Obj, str]:
    """(replicas, MetricValueStatus, metric name) for a Resource/ContainerResource metric."""
    resource = source.get("name") or ""
    target = source.get("target") or {}
    if target.get("averageValue") is not None:
        return _average_value_proposal(resource, target, current_replicas, observed, now, config, container)
    if target.get("averageUtilization") is None:
        raise MetricError("", "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
    if int(target["averageUtilization"]) <= 0:
        raise MetricError("", f"invalid resource metric source: averageUtilization {target['averageUtilization']} must be positive")
    try:
        return _utilization_proposal(resource, int(target["averageUtilization"]), current_replicas, observed, now, config, container)
    except MetricError as exc:
        raise MetricError("", f"failed to get {resource} utilization: {exc.message}") from None


def _observed_samples(resource: str, observed: Observed, now: datetime, config: HpaConfig, container: Optional[str]) -> tuple[list[Obj], dict[str, int], _Groups]:
    if observed.metrics_error is not None:
        raise MetricError("", f"unable to get metrics for resource {resource}: {observed.metrics_error}")
    usage = _usage_by_pod(observed.pod_metrics, resource, container)
    if not observed.pod_metrics:
        raise MetricError("", f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API")
    pods = list(observed.pods)
    if not pods:
        raise MetricError("", "no pods returned by selector while calculating replica count")
    groups = _group_pods(pods, usage, resource, now, config)
    selected = {pod["metadata"]["name"] for pod in pods} - groups.ignored - groups.unready
    samples = {name: value for name, value in usage.items() if name in selected}
    if not samples:
        raise MetricError("", "did not receive metrics for targeted pods (pods might be unready)")
    return pods, samples, groups


def _utilization_proposal(
    resource: str, target: int, current_replicas: int, observed: Observed, now: datetime, config: HpaConfig, container: Optional[str]
) -> tuple[int, Obj, str]:
    pods, samples, groups = _observed_samples(resource, observed, now, config, container)
    requests = _requests_by_pod(pods, resource, container)

    def utilization(values: dict[str, int]) -> tuple[int, int]:
        used = [(value, requests[name]) for name, value in values.items() if name in requests]
        total_request = sum(r for _, r in used)
        if total_request == 0:
            raise MetricError("", "no metrics returned matched known pods")
        total_usage = sum(v for v, _ in used)
        return int(total_usage * 100 // total_request), total_usage // len(used)

    current, raw_average = utilization(samples)
    replicas = _replicas_for_ratio(
        current_replicas, samples, groups,
        fallback=lambda name, down: requests[name] if down else 0,
        ratio_of=lambda values: utilization(values)[0] / target,
        tolerance=config.tolerance,
    )
    status = {"averageUtilization": current, "averageValue": units.format_milli(raw_average)}
    return replicas, status, f"{resource} resource utilization (percentage of request)"


def _average_value_proposal(
    resource: str, target: Obj, current_replicas: int, observed: Observed, now: datetime, config: HpaConfig, container: Optional[str]
) -> tuple[int, Obj, str]:
    target_milli = units.milli_value(target.get("averageValue"))
    if not target_milli:
        raise MetricError("", f"invalid resource metric source: averageValue {target.get('averageValue')!r} is not a positive quantity")
    try:
        _, samples, groups = _observed_samples(resource, observed, now, config, container)
    except MetricError as exc:
        raise MetricError("", f"failed to get {resource} usage: {exc.message}") from None

    def average(values: dict[str, int]) -> int:
        return sum(values.values()) // len(values)

    replicas = _replicas_for_ratio(
        current_replicas, samples, groups,
        fallback=lambda _name, down: target_milli if down else 0,
        ratio_of=lambda values: average(values) / target_milli,
        tolerance=config.tolerance,
    )
    return replicas, {"averageValue": units.format_milli(average(samples))}, f"{resource} resource"


_FAILED_REASON = {"Resource": "FailedGetResourceMetric", "ContainerResource": "FailedGetContainerResourceMetric",
                  "Pods": "FailedGetPodsMetric", "Object": "FailedGetObjectMetric", "External": "FailedGetExternalMetric"}


def _metric_proposal(spec: Obj, current_replicas: int, observed: Observed, now: datetime, config: HpaConfig) -> tuple[int, Obj, str]:
    kind = spec.get("type") or ""
    reason = _FAILED_REASON.get(kind, "InvalidMetricSourceType")
    try:
        if kind == "Resource":
            source = spec.get("resource") or {}
            replicas, current, name = _resource_proposal(source, current_replicas, observed, now, config, None)
            return replicas, {"type": kind, "resource": {"name": source.get("name"), "current": current}}, name
        if kind == "ContainerResource":
            source = spec.get("containerResource") or {}
            replicas, current, name = _resource_proposal(source, current_replicas, observed, now, config, source.get("container"))
            status = {"name": source.get("name"), "container": source.get("container"), "current": current}
            return replicas, {"type": kind, "containerResource": status}, name
        if kind in _FAILED_REASON:
            raise MetricError("", f"unable to get {kind} metric: the custom and external metrics APIs are not served by this cluster")
        raise MetricError("", f"unknown metric source type {kind!r}")
    except MetricError as exc:
        raise MetricError(reason, exc.message) from None


# --- stabilization and limits -----------------------------------------------------------------


def _rules(behavior: Optional[Obj], direction: str, config: HpaConfig) -> Obj:
    defaults = SCALE_UP_DEFAULTS if direction == "scaleUp" else SCALE_DOWN_DEFAULTS
    given = (behavior or {}).get(direction) or {}
    rules = {**defaults, **{k: v for k, v in given.items() if v is not None}}
    if rules.get("stabilizationWindowSeconds") is None:
        rules["stabilizationWindowSeconds"] = config.downscale_stabilization
    return rules


def _change_in_period(events: tuple[ScaleEvent, ...], period: float, now: datetime) -> int:
    cutoff = now - timedelta(seconds=period)
    return sum(e.change for e in events if e.at > cutoff)


def _policy_limit(current: int, rules: Obj, history: History, now: datetime, *, up: bool) -> int:
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    # Max picks the largest change: the highest limit going up, the lowest going down.
    pick = max if (select == "Max") == up else min
    limit: Optional[int] = None
    for policy in rules.get("policies") or ():
        period = float(policy.get("periodSeconds") or 0)
        start = current - _change_in_period(history.scale_ups, period, now) + _change_in_period(history.scale_downs, period, now)
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value if up else start - value
        elif up:
            proposed = math.ceil(start * (1 + value / 100))
        else:
            proposed = int(start * (1 - value / 100))
        limit = proposed if limit is None else pick(limit, proposed)
    return current if limit is None else limit


@dataclass(frozen=True)
class _Normalized:
    replicas: int
    stabilized: tuple[str, str]
    limited: tuple[str, str, str]  # (status, reason, message)
    recommendations: tuple[Recommendation, ...]


_WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
_TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
_TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
_SCALE_UP_LIMIT = ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
_SCALE_DOWN_LIMIT = ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
_READY = ("ReadyForNewScale", "recommended size matches current size")
_DOWN_STABILIZED = ("ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
_UP_STABILIZED = ("ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation")


def _normalize_default(current: int, desired: int, minimum: int, maximum: int, history: History, now: datetime, config: HpaConfig) -> _Normalized:
    """Without ``spec.behavior``: scale-down stabilization, scale up at most to max(2 x current, 4)."""
    cutoff = now - timedelta(seconds=config.downscale_stabilization)
    recent = tuple(r for r in history.recommendations if r.at >= cutoff)
    stabilized = max([desired, *(r.replicas for r in recent)])
    scale_up_limit = max(2 * current, 4)
    ceiling, over = (scale_up_limit, _SCALE_UP_LIMIT) if maximum > scale_up_limit else (maximum, _TOO_MANY)
    if stabilized < minimum:
        replicas, limit = minimum, _TOO_FEW
    elif stabilized > ceiling:
        replicas, limit = ceiling, over
    else:
        replicas, limit = stabilized, _WITHIN_RANGE
    return _Normalized(
        replicas,
        _DOWN_STABILIZED if stabilized != desired else _READY,
        ("False" if replicas == stabilized else "True", *limit),
        (*recent, Recommendation(desired, now)),
    )


def _normalize_with_behavior(current: int, desired: int, minimum: int, maximum: int, behavior: Obj, history: History, now: datetime, config: HpaConfig) -> _Normalized:
    up_rules, down_rules = _rules(behavior, "scaleUp", config), _rules(behavior, "scaleDown", config)
    up_cutoff = now - timedelta(seconds=float(up_rules["stabilizationWindowSeconds"]))
    down_cutoff = now - timedelta(seconds=float(down_rules["stabilizationWindowSeconds"]))
    up_floor, down_ceiling = desired, desired
    for rec in history.recommendations:
        if rec.at > up_cutoff:
            up_floor = min(up_floor, rec.replicas)
        if rec.at > down_cutoff:
            down_ceiling = max(down_ceiling, rec.replicas)
    stabilized = min(max(current, up_floor), down_ceiling)
    moved = _UP_STABILIZED if desired >= current else _DOWN_STABILIZED

    replicas, limit = stabilized, _WITHIN_RANGE
    if stabilized > current:
        rate = max(_policy_limit(current, up_rules, history, now, up=True), current)
        ceiling, over = (rate, _SCALE_UP_LIMIT) if maximum > rate else (maximum, _TOO_MANY)
        if stabilized > ceiling:
            replicas, limit = ceiling, over
    elif stabilized < current:
        rate = min(_policy_limit(current, down_rules, history, now, up=False), current)
        floor, under = (rate, _SCALE_DOWN_LIMIT) if minimum < rate else (minimum, _TOO_FEW)
        if stabilized < floor:
            replicas, limit = floor, under
    oldest = min(up_cutoff, down_cutoff)
    return _Normalized(
        replicas,
        moved if stabilized != desired else _READY,
        ("False" if replicas == stabilized else "True", *limit),
        (*(r for r in history.recommendations if r.at > oldest), Recommendation(desired, now)),
    )


def _record_scale(history: History, behavior: Optional[Obj], current: int, new: int, now: datetime, config: HpaConfig) -> History:
    """Remember a rescale for the rate policies (only ``spec.behavior`` uses them)."""
    if behavior is None:
        return history
    periods = [float(p.get("periodSeconds") or 0) for d in ("scaleUp", "scaleDown") for p in _rules(behavior, d, config).get("policies") or ()]
    cutoff = now - timedelta(seconds=max(periods, default=0.0))
    ups = tuple(e for e in history.scale_ups if e.at > cutoff)
    downs = tuple(e for e in history.scale_downs if e.at > cutoff)
    if new > current:
        ups += (ScaleEvent(new - current, now),)
    else:
        downs += (ScaleEvent(current - new, now),)
    return replace(history, scale_ups=ups, scale_downs=downs)


# --- the decision -----------------------------------------------------------------------------


def _status(conditions: list[Obj], *, current: int, desired: int, metrics: Optional[list[Obj]], last_scale: Optional[str]) -> Obj:
    status: Obj = {"currentReplicas": current, "desiredReplicas": desired, "conditions": conditions}
    if metrics:
        status["currentMetrics"] = metrics
    if last_scale:
        status["lastScaleTime"] = last_scale
    return status


def target_name(hpa: Obj) -> str:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def decide(hpa: Obj, observed: Observed, history: History, now: datetime, config: HpaConfig = HpaConfig()) -> Decision:
    """One sync of one HPA (kube's ``reconcileAutoscaler``)."""
    if observed.scale is None:
        return _target_unreadable(hpa, observed.scale_error or "", history, now)
    current = int((observed.scale.get("spec") or {}).get("replicas") or 0)
    if not history.recommendations or history.size not in (None, current):
        # First sight of the HPA, or a size someone else set: the recommendations start there.
        history = replace(history, recommendations=(Recommendation(current, now),))
    decision = _decide(hpa, observed, observed.scale, current, history, now, config)
    size = current if decision.scale_to is None else decision.scale_to
    return replace(decision, history=replace(decision.history, size=size))


def _target_unreadable(hpa: Obj, error: str, history: History, now: datetime) -> Decision:
    """No Scale, so nothing to compute from: neither able to scale nor scaling."""
    old_status = hpa.get("status") or {}
    conditions = [dict(c) for c in old_status.get("conditions") or ()]
    message = f"the HPA controller was unable to get the target's current scale: {error}"
    set_condition(conditions, "AbleToScale", "False", "FailedGetScale", message, now)
    set_condition(conditions, "ScalingActive", "False", "FailedGetScale", message, now)
    return Decision(None, {**old_status, "conditions": conditions}, (Event("Warning", "FailedGetScale", error),), history)


def _decide(hpa: Obj, observed: Observed, scale: Obj, current: int, history: History, now: datetime, config: HpaConfig) -> Decision:
    spec = hpa.get("spec") or {}
    old_status = hpa.get("status") or {}
    conditions = [dict(c) for c in old_status.get("conditions") or ()]
    last_scale = old_status.get("lastScaleTime")
    min_replicas = spec.get("minReplicas")
    minimum: int = min_replicas if min_replicas is not None else 1
    maximum = int(spec.get("maxReplicas") or 0)
    behavior = spec.get("behavior")
    set_condition(conditions, "AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale", now)

    events: list[Event] = []
    metric_statuses: Optional[list[Obj]] = None
    reason = ""
    if current == 0 and minimum != 0:
        set_condition(conditions, "ScalingActive", "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero", now)
        return Decision(None, _status(conditions, current=0, desired=0, metrics=None, last_scale=last_scale), (), history)
    if current > maximum:
        desired, reason = maximum, "Current number of replicas above Spec.MaxReplicas"
    elif current < minimum:
        desired, reason = minimum, "Current number of replicas below Spec.MinReplicas"
    else:
        selector = (scale.get("status") or {}).get("selector")
        if not selector:
            set_condition(conditions, "ScalingActive", "False", "InvalidSelector", "the HPA target's scale is missing a selector", now)
            status = _status(conditions, current=current, desired=old_status.get("desiredReplicas", 0), metrics=None, last_scale=last_scale)
            return Decision(None, status, (Event("Warning", "SelectorRequired", "selector is required"),), history)
        specs = spec.get("metrics") or [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
        proposal, proposal_metric, metric_statuses = 0, "", []
        failures: list[MetricError] = []
        for metric in specs:
            try:
                replicas, metric_status, name = _metric_proposal(metric, current, observed, now, config)
            except MetricError as exc:
                failures.append(exc)
                events.append(Event("Warning", exc.reason, exc.message))
                metric_statuses.append({"type": ""})
                continue
            metric_statuses.append(metric_status)
            if replicas > proposal:
                proposal, proposal_metric = replicas, name
        if failures and (len(failures) == len(specs) or proposal < current):
            first = failures[0]
            set_condition(conditions, "ScalingActive", "False", first.reason, f"the HPA was unable to compute the replica count: {first.message}", now)
            message = f"invalid metrics ({len(failures)} invalid out of {len(specs)}), first error is: {first.message}"
            events.append(Event("Warning", "FailedComputeMetricsReplicas", message))
            status = _status(conditions, current=current, desired=old_status.get("desiredReplicas", 0),
                             metrics=metric_statuses, last_scale=last_scale)
            return Decision(None, status, tuple(events), history)
        set_condition(conditions, "ScalingActive", "True", "ValidMetricFound",
                      f"the HPA was able to successfully calculate a replica count from {proposal_metric}", now)
        if proposal > current:
            reason = f"{proposal_metric} above target"
        elif proposal < current:
            reason = "All metrics below target"
        if behavior is None:
            normalized = _normalize_default(current, proposal, minimum, maximum, history, now, config)
        else:
            normalized = _normalize_with_behavior(current, proposal, minimum, maximum, behavior, history, now, config)
        set_condition(conditions, "AbleToScale", "True", *normalized.stabilized, now)
        set_condition(conditions, "ScalingLimited", *normalized.limited, now)
        history = replace(history, recommendations=normalized.recommendations)
        desired = normalized.replicas
        if desired != current and not reason:
            # Only the window moved the size (kube-controller-manager leaves the reason empty).
            reason = normalized.stabilized[1]

    if desired == current:
        status = _status(conditions, current=current, desired=current, metrics=metric_statuses, last_scale=last_scale)
        return Decision(None, status, tuple(events), history)
    set_condition(conditions, "AbleToScale", "True", "SucceededRescale", f"the HPA controller was able to update the target scale to {desired}", now)
    events.append(Event("Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}"))
    status = _status(conditions, current=current, desired=desired, metrics=metric_statuses, last_scale=units.format_time(now))
    return Decision(desired, status, tuple(events), _record_scale(history, behavior, current, desired, now, config), reason)


def rescale_failed(decision: Decision, hpa: Obj, previous: History, error: str, now: datetime) -> Decision:
    """The decision once writing the Scale failed: the target keeps its size, nothing is remembered."""
    assert decision.scale_to is not None
    conditions = [dict(c) for c in decision.status.get("conditions") or ()]
    set_condition(conditions, "AbleToScale", "False", "FailedUpdateScale", f"the HPA controller was unable to update the target scale: {error}", now)
    old_status = hpa.get("status") or {}
    status = {**decision.status, "conditions": conditions, "desiredReplicas": old_status.get("desiredReplicas", 0)}
    old_last = old_status.get("lastScaleTime")
    if old_last:
        status["lastScaleTime"] = old_last
    else:
        status.pop("lastScaleTime", None)
    events = tuple(e for e in decision.events if e.reason != "SuccessfulRescale")
    failed = Event("Warning", "FailedRescale", f"New size: {decision.scale_to}; reason: {decision.reason}; error: {error}")
    recommendations = decision.history.recommendations
    current = decision.status["currentReplicas"]
    return Decision(None, status, (*events, failed), replace(previous, recommendations=recommendations, size=current))
