"""RBAC escalation prevention: nobody grants, through a Role or a binding, what they do not hold.

kube-apiserver's RBAC storage refuses a Role or ClusterRole whose rules its writer does not
hold (in the role's namespace, cluster-wide for a ClusterRole) unless the writer may
``escalate`` roles/clusterroles, and a RoleBinding or ClusterRoleBinding unless its writer may
``bind`` the role it references (``resourceNames`` honoured) or holds every rule of that role.
Without this, whoever may create RoleBindings makes themselves cluster-admin. Members of
``system:masters`` pass, and so do writes the server makes itself (no request behind them), as
kube's loopback client does. A write that only changes ``ownerReferences`` or ``finalizers``
is the garbage collector's and is not checked, as in kube.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.auth import authn, rbac

Obj = dict[str, Any]

ROLE_KINDS = {"roles": "Role", "clusterroles": "ClusterRole"}
BINDING_KINDS = {"rolebindings", "clusterrolebindings"}


def _only_gc_fields_change(obj: Obj, old: Obj) -> bool:
    ignored = ("ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation")

    def rest(o: Obj) -> Obj:
        return {**o, "metadata": {k: v for k, v in (o.get("metadata") or {}).items() if k not in ignored}}
    return rest(obj) == rest(old)


class EscalationCheck:
    """An admission guard (``Admission.guards``) for the RBAC kinds."""

    def __init__(self, decide: Callable[[Obj, Obj], rbac.Decision], policy: Callable[[str], rbac.Policy]) -> None:
        self.decide = decide
        self.policy = policy

    def __call__(self, rtype: ResourceType, obj: Obj, old: Obj | None, subresource: str | None) -> None:
        if rtype.group != rbac.RBAC_GROUP or subresource is not None:
            return
        if rtype.plural not in ROLE_KINDS and rtype.plural not in BINDING_KINDS:
            return
        user = authn.REQUESTER.get()
        if user is None or rbac.MASTERS in (user.get("groups") or []):
            return
        if old is not None and _only_gc_fields_change(obj, old):
            return
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        if rtype.plural in ROLE_KINDS:
            escalate = {"verb": "escalate", "group": rbac.RBAC_GROUP, "resource": rtype.plural, "namespace": namespace,
                        "name": name if old is not None else ""}
            if self.decide(user, escalate).allowed:
                return
            rules = [r for r in obj.get("rules") or [] if isinstance(r, dict)]
        else:
            ref: Obj = obj["roleRef"] if isinstance(obj.get("roleRef"), dict) else {}
            resource = {"ClusterRole": "clusterroles", "Role": "roles"}.get(ref.get("kind") or "")
            if resource is None:
                return  # validation refuses the kind
            bind = {"verb": "bind", "group": ref.get("apiGroup") or "", "resource": resource, "namespace": namespace,
                    "name": ref.get("name") or ""}
            if self.decide(user, bind).allowed:
                return
            rules = self._referenced_rules(ref, resource, namespace)
        missing = rbac.not_held(rbac.held_rules(self.policy(namespace), user, namespace), rules)
        if missing:
            raise errors.forbidden(rtype.plural, rtype.group, name, rbac.escalation_message(user, missing))

    def _referenced_rules(self, ref: Obj, resource: str, namespace: str) -> list[Obj]:
        policy = self.policy(namespace)
        name = ref.get("name") or ""
        role = policy.cluster_role(name) if resource == "clusterroles" else policy.role(namespace, name)
        if role is None:  # kube: the rule resolver's NotFound, as a bad request
            raise errors.bad_request(f'{resource}.{rbac.RBAC_GROUP} "{name}" not found')
        return [r for r in role.get("rules") or [] if isinstance(r, dict)]
