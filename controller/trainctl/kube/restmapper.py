"""The API resources trainctl reads and writes, and how to address them.

One table maps an object's ``apiVersion``/``kind`` to its REST path, so that the client, the
informers and the plan applier never spell a URL by hand, and RBAC (verb, group, resource)
can be derived from the same place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from trainctl.api import kinds


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``/apis/<group>/<version>/[namespaces/<ns>/]<plural>``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: Optional[str] = None, name: Optional[str] = None, subresource: Optional[str] = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
EVENTS = Resource("", "v1", "events", "Event")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
SCHEDULER_PLUGINS_PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints")
# apps/v1 workloads: the owners of pods whose scale the HPA and disruption controllers read.
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
REPLICATIONCONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController")



def job_resource(kind: kinds.JobKind) -> Resource:
    return Resource(kind.group, kind.version, kind.plural, kind.kind)


def job_resources() -> tuple[Resource, ...]:
    """Every registered training-job kind's resource, in the registry's order."""
    return tuple(job_resource(kind) for kind in kinds.KINDS)


PYTORCHJOBS = job_resource(kinds.PYTORCHJOB)
MSJOBS = job_resource(kinds.MSJOB)

_BY_TYPE = {
    (r.api_version, r.kind): r
    for r in (
        PODS, SERVICES, EVENTS, CONFIGMAPS, SECRETS, NODES, NAMESPACES, CRDS, LEASES, HPAS, PDBS,
        VOLCANO_PODGROUPS, SCHEDULER_PLUGINS_PODGROUPS, DEPLOYMENTS, REPLICASETS,
    )
}


def resource_for(api_version: str, kind: str) -> Resource:
    """The resource of an object type the controller knows (any registered job kind); KeyError for any other."""
    found = _BY_TYPE.get((api_version, kind))
    if found is not None:
        return found
    job_kind = kinds.of({"apiVersion": api_version, "kind": kind})
    if job_kind is None:
        raise KeyError((api_version, kind))
    return job_resource(job_kind)


def resource_of(obj: dict[str, Any]) -> Resource:
    return resource_for(obj.get("apiVersion", ""), obj.get("kind", ""))


def controller_owner(obj: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The ownerReference with ``controller: true``, if any."""
    ref: dict[str, Any]
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None
