"""The Node authorizer: a kubelet reads the Secrets, ConfigMaps, claims and ServiceAccounts of
its own pods, and of no other.

RBAC cannot say "the objects a pod on this node refers to", so kube-apiserver asks its Node
authorizer first for ``system:node:NAME`` in ``system:nodes``: ``get`` of a Secret,
ConfigMap or PersistentVolumeClaim is allowed when a pod bound to the node names it (in a
volume, a projected source, an env or envFrom reference, an image pull secret), and a
ServiceAccount token (``create`` of ``serviceaccounts/token``) when a pod bound to the node
runs as that account. Here the kubelet also reads that account (whether to mount its token).
What else a node may do is the ``system:node`` ClusterRole's (``bootstrap_policy``), and which
objects it may write NodeRestriction's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from trainctl.cluster.apiserver.auth import node_restriction

Obj = dict[str, Any]
ListPods = Callable[[str], list[Obj]]  # namespace -> its pods

_REFERENCED = {"secrets", "configmaps", "persistentvolumeclaims"}


def _spec(pod: Obj) -> Obj:
    """A pod's spec, or an empty one when a malformed object (stored before validation) has none."""
    spec = pod.get("spec")
    return spec if isinstance(spec, dict) else {}


def _dicts(value: Any) -> Iterator[Obj]:
    """The objects of a list field; nothing when it is not a list."""
    return (item for item in value if isinstance(item, dict)) if isinstance(value, list) else iter(())


def _object(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from _dicts(spec.get(key))


def references(pod: Obj) -> set[tuple[str, str]]:
    """``(resource, name)`` of every Secret, ConfigMap and claim ``pod`` names."""
    spec = _spec(pod)
    found: set[tuple[str, str]] = set()

    def add(resource: str, ref: Any, key: str = "name") -> None:
        if isinstance(ref, dict) and isinstance(ref.get(key), str):
            found.add((resource, ref[key]))

    for secret in _dicts(spec.get("imagePullSecrets")):
        add("secrets", secret)
    for volume in _dicts(spec.get("volumes")):
        add("secrets", volume.get("secret"), "secretName")
        add("configmaps", volume.get("configMap"))
        add("persistentvolumeclaims", volume.get("persistentVolumeClaim"), "claimName")
        for source in _dicts(_object(volume.get("projected")).get("sources")):
            add("secrets", source.get("secret"))
            add("configmaps", source.get("configMap"))
    for container in _containers(spec):
        for env in _dicts(container.get("env")):
            value_from = _object(env.get("valueFrom"))
            add("secrets", value_from.get("secretKeyRef"))
            add("configmaps", value_from.get("configMapKeyRef"))
        for source in _dicts(container.get("envFrom")):
            add("secrets", source.get("secretRef"))
            add("configmaps", source.get("configMapRef"))
    return found


class NodeAuthorizer:
    def __init__(self, list_pods: ListPods) -> None:
        self._list_pods = list_pods

    def allows(self, user: Obj, attributes: Obj) -> bool:
        """Whether ``user``, a node, may do what ``attributes`` ask for one of its pods."""
        node = node_restriction.node_of(user)
        if node is None or "path" in attributes or attributes.get("group"):
            return False
        resource, subresource = attributes.get("resource") or "", attributes.get("subresource") or ""
        name, verb = attributes.get("name") or "", attributes.get("verb")
        if not name:
            return False
        if not (resource in _REFERENCED or resource == "serviceaccounts"):
            return False
        pods = [p for p in self._list_pods(attributes.get("namespace") or "") if _spec(p).get("nodeName") == node]
        if resource in _REFERENCED and not subresource and verb == "get":
            return any((resource, name) in references(pod) for pod in pods)
        if resource == "serviceaccounts" and (verb, subresource) in (("get", ""), ("create", "token")):
            return any((_spec(pod).get("serviceAccountName") or "default") == name for pod in pods)
        return False
