"""``autoscaling/v1`` HorizontalPodAutoscalers as a view of the ``autoscaling/v2`` ones: one store.

kubectl 1.32's ``kubectl autoscale`` still writes v1, while ``kubectl get hpa`` and the
controller read v2; kube-apiserver serves both versions of one stored object, so an HPA made
either way is read, scaled on and deleted through the other. v1 has one target, a CPU
utilization percentage: it is v2's ``Resource`` metric named ``cpu`` with a ``Utilization``
target, and v1's ``status.currentCPUUtilizationPercentage`` is that metric's current average
utilization. What v1 cannot express (other metrics, their current values, conditions,
``behavior``) rides in annotations, as kube's conversion keeps it, so a v1 read-modify-write
does not lose it. Here the annotations hold the v2 shapes, where kube writes v1's older metric
shape (docs/compatibility.md).
"""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]

V1 = "autoscaling/v1"
V2 = "autoscaling/v2"
METRICS = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
_ANNOTATIONS = (METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR)


def _is_cpu(metric: Any) -> bool:
    return (isinstance(metric, dict) and metric.get("type") == "Resource"
            and (metric.get("resource") or {}).get("name") == "cpu")


def _cpu_utilization_target(metric: Any) -> bool:
    return _is_cpu(metric) and (metric["resource"].get("target") or {}).get("type") == "Utilization"


def _annotated(annotations: Obj, key: str, value: Any) -> None:
    if value:
        annotations[key] = json.dumps(value, separators=(",", ":"))


def _unannotated(annotations: Obj, key: str) -> Any:
    text = annotations.pop(key, None)
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # kube ignores an annotation it cannot read the same way


def to_v1(hpa: Obj) -> Obj:
    """A stored (v2) HPA as v1 reads it."""
    metadata = dict(hpa.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec = hpa.get("spec") or {}
    status = hpa.get("status") or {}
    v1_spec: Obj = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
    others = []
    for metric in spec.get("metrics") or []:
        if _cpu_utilization_target(metric) and "targetCPUUtilizationPercentage" not in v1_spec:
            v1_spec["targetCPUUtilizationPercentage"] = metric["resource"]["target"].get("averageUtilization")
        else:
            others.append(metric)
    _annotated(annotations, METRICS, others)
    _annotated(annotations, BEHAVIOR, spec.get("behavior"))
    v1_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")
                      if k in status}
    current_others = []
    for metric in status.get("currentMetrics") or []:
        utilization = (metric.get("resource") or {}).get("current", {}).get("averageUtilization") if _is_cpu(metric) else None
        if utilization is not None and "currentCPUUtilizationPercentage" not in v1_status:
            v1_status["currentCPUUtilizationPercentage"] = utilization
        else:
            current_others.append(metric)
    _annotated(annotations, CURRENT_METRICS, current_others)
    _annotated(annotations, CONDITIONS, status.get("conditions"))
    if annotations:
        metadata["annotations"] = annotations
    v1: Obj = {"kind": "HorizontalPodAutoscaler", "apiVersion": V1, "metadata": metadata, "spec": v1_spec}
    if status:
        v1["status"] = v1_status
    return v1


def to_v2(hpa: Obj) -> Obj:
    """A v1 HPA in the form it is stored in (v2)."""
    metadata = dict(hpa.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec = hpa.get("spec") or {}
    status = hpa.get("status")
    metrics = []
    target = spec.get("targetCPUUtilizationPercentage")
    if target is not None:
        metrics.append({"type": "Resource", "resource": {"name": "cpu",
                                                        "target": {"type": "Utilization", "averageUtilization": target}}})
    metrics += _unannotated(annotations, METRICS) or []
    v2_spec: Obj = {k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec}
    if metrics:
        v2_spec["metrics"] = metrics
    behavior = _unannotated(annotations, BEHAVIOR)
    if behavior:
        v2_spec["behavior"] = behavior
    current = []
    conditions = _unannotated(annotations, CONDITIONS)
    current_others = _unannotated(annotations, CURRENT_METRICS) or []
    for key in _ANNOTATIONS:
        annotations.pop(key, None)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    v2: Obj = {"kind": "HorizontalPodAutoscaler", "apiVersion": V2, "metadata": metadata, "spec": v2_spec}
    if isinstance(status, dict):
        v2_status = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")
                     if k in status}
        utilization = status.get("currentCPUUtilizationPercentage")
        if utilization is not None:
            current.append({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": utilization}}})
        current += current_others
        if current:
            v2_status["currentMetrics"] = current
        if conditions:
            v2_status["conditions"] = conditions
        v2["status"] = v2_status
    return v2
