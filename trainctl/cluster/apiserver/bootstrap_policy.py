"""The ClusterRoles and ClusterRoleBindings every cluster starts with, as kube-apiserver's
bootstrap policy makes them (the ones that matter for the kinds served here).

``cluster-admin`` (bound to ``system:masters``), the user-facing ``admin``, ``edit`` and
``view`` (meant for RoleBindings; their rules name the resources this server serves, as
kube's aggregated roles end up naming theirs), and what every authenticated user needs:
discovery, health and version (``system:discovery``, ``system:public-info-viewer``) and asking
about itself (``system:basic-user``: ``auth can-i``, ``auth whoami``), and the kubelets'
``system:node`` (bound to ``system:nodes``, where kube leaves its binding empty and its Node
authorizer grants the same; see ``_NODE``). They are written at
start-up when missing, carrying kube's ``kubernetes.io/bootstrapping`` label; a changed one is
left as the user made it, as kube leaves roles whose ``rbac.authorization.kubernetes.io/autoupdate``
annotation is ``false``.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _non_resource(urls: list[str], verbs: list[str]) -> Obj:
    return {"nonResourceURLs": urls, "verbs": verbs}


# What a namespace's users read (view), change (edit) and manage (admin).
_VIEW = [
    _rule([""], ["configmaps", "endpoints", "persistentvolumeclaims", "pods", "replicationcontrollers",
                 "serviceaccounts", "services", "events", "pods/log", "pods/status", "services/status"], _READ),
    _rule([""], ["namespaces"], _READ),
    _rule([""], ["limitranges", "resourcequotas", "resourcequotas/status"], _READ),  # read, never written, below admin
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], _READ),
    _rule(["events.k8s.io"], ["events"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule(["batch"], ["jobs", "jobs/status", "cronjobs", "cronjobs/status"], _READ),
    _rule(["apps"], ["deployments", "deployments/status", "deployments/scale", "replicasets", "replicasets/status",
                     "replicasets/scale", "daemonsets", "daemonsets/status", "statefulsets", "statefulsets/status",
                     "statefulsets/scale", "controllerrevisions"], _READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], _READ),
    _rule(["kubeflow.org"], ["pytorchjobs", "pytorchjobs/status"], _READ),
    _rule(["mindspore.gitee.com"], ["msjobs", "msjobs/status"], _READ),
    _rule(["metrics.k8s.io"], ["pods", "nodes"], _READ),
]
_EDIT = [
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "pods/eviction"], _WRITE),
    _rule([""], ["configmaps", "endpoints", "persistentvolumeclaims", "replicationcontrollers", "secrets",
                 "serviceaccounts", "services", "services/proxy"], _WRITE),
    _rule([""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], _READ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], _WRITE),
    _rule(["batch"], ["jobs", "cronjobs"], _WRITE),
    _rule(["apps"], ["deployments", "deployments/scale", "replicasets", "replicasets/scale", "daemonsets",
                     "statefulsets", "statefulsets/scale"], _WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], _WRITE),
    _rule(["kubeflow.org"], ["pytorchjobs", "pytorchjobs/scale"], _WRITE),
    _rule(["mindspore.gitee.com"], ["msjobs", "msjobs/scale"], _WRITE),
    _rule(["coordination.k8s.io"], ["leases"], _READ + _WRITE),
    *_VIEW,
]
_ADMIN = [
    _rule(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], _READ + _WRITE),
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    *_EDIT,
]

# A kubelet's rights (kube's ``system:node`` role, and ``system:node-proxier``'s reads: the
# local kubelet is its node's service proxy too; and the metrics it publishes, as
# metrics-server would). Which Secrets, ConfigMaps, ServiceAccounts and tokens a node may get
# is the node authorizer's question (``auth.node_authorizer``: those of its own pods), and
# which Node, Lease and pods it may write NodeRestriction's.
_NODE = [
    _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
    _rule(["authorization.k8s.io"], ["subjectaccessreviews", "localsubjectaccessreviews"], ["create"]),
    _rule([""], ["services", "endpoints"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule([""], ["nodes"], ["create", *_READ, "delete", "patch", "update"]),
    _rule([""], ["nodes/status"], ["patch", "update"]),
    _rule([""], ["events"], ["create", "patch", "update"]),
    _rule(["events.k8s.io"], ["events"], ["create", "patch", "update"]),
    _rule([""], ["pods"], [*_READ, "create", "delete"]),
    _rule([""], ["pods/status"], ["patch", "update"]),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update", "patch", "delete"]),
    _rule(["metrics.k8s.io"], ["nodes", "nodes/usage", "pods"], ["get", "create", "update"]),
]

_CLUSTER_ROLES: dict[str, list[Obj]] = {
    "cluster-admin": [_rule(["*"], ["*"], ["*"]), _non_resource(["*"], ["*"])],
    "admin": _ADMIN,
    "edit": _EDIT,
    "view": _VIEW,
    "system:discovery": [_non_resource(["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*",
                                        "/version", "/version/", "/healthz", "/livez", "/readyz"], ["get"])],
    "system:public-info-viewer": [_non_resource(["/healthz", "/livez", "/readyz", "/version", "/version/"], ["get"])],
    "system:basic-user": [_rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
                          _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                                ["create"])],
    "system:node": _NODE,
}

_BINDINGS: dict[str, list[Obj]] = {
    "cluster-admin": [{"kind": "Group", "name": "system:masters"}],
    "system:discovery": [{"kind": "Group", "name": "system:authenticated"}],
    "system:basic-user": [{"kind": "Group", "name": "system:authenticated"}],
    "system:public-info-viewer": [{"kind": "Group", "name": "system:authenticated"},
                                  {"kind": "Group", "name": "system:unauthenticated"}],
    "system:node": [{"kind": "Group", "name": "system:nodes"}],
}


def _metadata(name: str) -> Obj:
    return {"name": name, "labels": dict(_LABELS), "annotations": dict(_ANNOTATIONS)}


def cluster_roles() -> list[Obj]:
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _metadata(name),
             "rules": [dict(rule) for rule in rules]} for name, rules in _CLUSTER_ROLES.items()]


def cluster_role_bindings() -> list[Obj]:
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _metadata(name),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", **s} for s in subjects]}
            for name, subjects in _BINDINGS.items()]
