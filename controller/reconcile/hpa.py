"""The HorizontalPodAutoscaler of a job whose kind asks for one (spec §4).

A PyTorchJob gets one when it is elastic and declares metrics. The HPA scales the job
through its scale subresource (``Worker.replicas``); the reconcile then adds or removes
pods by index. It exists while the job is not suspended.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.controller.frameworks.base import Autoscaling

HPA_API_VERSION = "autoscaling/v2"
HPA_KIND = "HorizontalPodAutoscaler"


def desired_hpa(scaling: Autoscaling, api_version: str, kind: str, name: str, namespace: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": HPA_API_VERSION,
        "kind": HPA_KIND,
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {
            "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": name},
            "minReplicas": scaling.min_replicas,
            "maxReplicas": scaling.max_replicas,
            "metrics": scaling.metrics,
        },
    }


def _differs(desired: dict[str, Any], observed: dict[str, Any]) -> bool:
    """Whether any field we set differs; fields the API server defaults are ignored."""
    return any(observed.get(key) != value for key, value in desired.items())


def hpa_update(desired: dict[str, Any], observed: dict[str, Any]) -> Optional[dict[str, Any]]:
    if not _differs(desired["spec"], observed.get("spec") or {}):
        return None
    return {**observed, "spec": {**(observed.get("spec") or {}), **desired["spec"]}}
