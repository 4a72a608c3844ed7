"""NodeRestriction: a node's identity writes only its own Node, Lease and the pods bound to it.

A kubelet authenticates as ``system:node:NAME`` in group ``system:nodes``. Whatever RBAC
grants that identity, kube-apiserver's NodeRestriction admission plugin keeps it to its own
node, so that one compromised kubelet cannot mark other nodes NotReady, take their pods' status
or delete them. The same limits apply here, with kube's 403 wording: the Node named ``NAME``
(object and status), the Lease ``NAME`` in ``kube-node-lease``, the status of pods whose
``spec.nodeName`` is ``NAME`` (labels unchanged) and deleting such pods; a node creates only
mirror pods bound to itself, and binds or adds ephemeral containers to none. Other users are
governed by RBAC alone.

Writes of a whole object are judged as an admission guard (``Admission.guards``), deletes and
the subresources that bypass admission at the request gate (``Access.admit``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.auth import authn

Obj = dict[str, Any]
Lookup = Callable[[str, str, str], "Obj | None"]  # (storage key, namespace, name) -> object

NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_GROUP = "coordination.k8s.io"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def node_of(user: Obj | None) -> str | None:
    """The node ``user`` is the kubelet of, or None for any other user."""
    if not user:
        return None
    name = user.get("user") or ""
    if name.startswith(NODE_PREFIX) and len(name) > len(NODE_PREFIX) and NODES_GROUP in (user.get("groups") or []):
        return str(name[len(NODE_PREFIX):])
    return None


def _meta(obj: Obj | None) -> Obj:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _bound_to(pod: Obj | None) -> str:
    spec = (pod or {}).get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""


class NodeRestriction:
    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup

    # --- at the request gate: deletes and the subresources admission does not see ----------

    def check_request(self, user: Obj, attributes: Obj) -> None:
        node = node_of(user)
        verb = attributes.get("verb")
        if node is None or "path" in attributes or verb not in _WRITES:
            return
        group, resource = attributes.get("group") or "", attributes.get("resource") or ""
        name, subresource = attributes.get("name") or "", attributes.get("subresource") or ""
        namespace = attributes.get("namespace") or ""
        if not group and resource == "pods":
            if subresource in ("binding", "ephemeralcontainers"):
                raise errors.forbidden("pods", "", name, f"unexpected pod subresource \"{subresource}\", only 'status' "
                                                          "and 'eviction' are allowed")
            pod = self.lookup("/pods", namespace, name) if name else None
            if verb in ("delete", "deletecollection") and not subresource and (
                    not name or pod is not None and _bound_to(pod) != node):
                raise errors.forbidden("pods", "", name,
                                       f'node "{node}" can only delete pods with spec.nodeName set to itself')
        elif verb in ("delete", "deletecollection"):
            self._own_object(node, group, resource, namespace, name)

    # --- as an admission guard: creates, updates and patches --------------------------------

    def __call__(self, rtype: ResourceType, obj: Obj, old: Obj | None, subresource: str | None) -> None:
        node = node_of(authn.REQUESTER.get())
        if node is None:
            return
        name, namespace = _meta(obj).get("name") or "", _meta(obj).get("namespace") or ""
        if rtype.group or rtype.plural != "pods":
            self._own_object(node, rtype.group, rtype.plural, namespace, name)
        elif subresource == "status":
            if _bound_to(old) != node:
                raise errors.forbidden("pods", "", name, f'node "{node}" can only update pod status for pods with '
                                                         "spec.nodeName set to itself")
            if (_meta(old).get("labels") or {}) != (_meta(obj).get("labels") or {}):
                raise errors.forbidden("pods", "", name, f'node "{node}" cannot update labels through pod status')
        elif old is not None:
            raise errors.forbidden("pods", "", name, f'unexpected operation "UPDATE", node "{node}" can only create '
                                                     "and delete mirror pods")
        elif MIRROR_ANNOTATION not in (_meta(obj).get("annotations") or {}):
            raise errors.forbidden("pods", "", name, f'pod does not have "{MIRROR_ANNOTATION}" annotation, node '
                                                     f'"{node}" can only create mirror pods')
        elif _bound_to(obj) != node:
            raise errors.forbidden("pods", "", name, f'node "{node}" can only create pods with spec.nodeName set to '
                                                     "itself")

    @staticmethod
    def _own_object(node: str, group: str, resource: str, namespace: str, name: str) -> None:
        if not group and resource == "nodes" and name != node:
            raise errors.forbidden("nodes", "", name, f'node "{node}" is not allowed to modify node "{name}"')
        if group == LEASE_GROUP and resource == "leases":
            if namespace != NODE_LEASE_NAMESPACE:
                raise errors.forbidden("leases", LEASE_GROUP, name,
                                       f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
            if name != node:
                raise errors.forbidden("leases", LEASE_GROUP, name,
                                       "can only access node lease with the same name as the requesting node")
