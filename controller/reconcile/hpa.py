"""The HorizontalPodAutoscaler of an elastic PyTorchJob that declares metrics (spec §4).

The HPA scales the job through its scale subresource (``Worker.replicas``); the reconcile
then adds or removes Worker pods by index. It exists while the job is not suspended.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.api.defaults import Job

HPA_API_VERSION = "autoscaling/v2"
HPA_KIND = "HorizontalPodAutoscaler"


def desired_hpa(job: Job, name: str, namespace: str, owner: dict[str, Any]) -> Optional[dict[str, Any]]:
    elastic = getattr(job.spec, "elastic_policy", None)
    if elastic is None or elastic.metrics is None:
        return None
    return {
        "apiVersion": HPA_API_VERSION,
        "kind": HPA_KIND,
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        "spec": {
            "scaleTargetRef": {"apiVersion": job.api_version, "kind": job.kind, "name": name},
            "minReplicas": elastic.min_replicas,
            "maxReplicas": elastic.max_replicas,
            "metrics": elastic.metrics,
        },
    }


def _differs(desired: dict[str, Any], observed: dict[str, Any]) -> bool:
    """Whether any field we set differs; fields the API server defaults are ignored."""
    return any(observed.get(key) != value for key, value in desired.items())


def hpa_update(desired: dict[str, Any], observed: dict[str, Any]) -> Optional[dict[str, Any]]:
    if not _differs(desired["spec"], observed.get("spec") or {}):
        return None
    return {**observed, "spec": {**(observed.get("spec") or {}), **desired["spec"]}}
