"""The kinds the server serves: the built-in ones and those CustomResourceDefinitions add.

A ``ResourceType`` is everything the rest of the server needs to know about one
group/version/resource: how discovery names it, which subresources it has, how objects are
defaulted, pruned and validated (CRDs), which columns ``kubectl get`` shows and where the
``scale`` subresource reads and writes replicas. Objects of one resource are stored once,
whatever version they are read through (``storage_key``); a kind that shares another's
storage in a different shape (``events.k8s.io`` Events, stored as core Events; ``autoscaling/v1``
HPAs, stored as ``autoscaling/v2``) converts on the way in and out (``Conversion``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainctl.cluster.apiserver.apimachinery import event_conversion, hpa_conversion

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Conversion:
    """How a version whose objects are stored in another version's form reads and writes them."""

    storage_key: str  # the storage it shares
    to_storage: Callable[[dict[str, Any]], dict[str, Any]]
    from_storage: Callable[[dict[str, Any]], dict[str, Any]]  # an object already in this version as it is
    field_labels: dict[str, str]  # this version's field selector labels -> the stored form's


EVENTS_CONVERSION = Conversion("/events", event_conversion.to_core, event_conversion.to_events,
                               event_conversion.FIELD_LABELS)
HPA_V1_CONVERSION = Conversion("autoscaling/horizontalpodautoscalers", hpa_conversion.to_v2, hpa_conversion.to_v1, {})


@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    singular: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # Built-ins reset status on create and keep it on main-resource writes when they have a
    # status subresource; CRDs only when the CRD declares one.
    status_on_create: bool = False
    # CRD-only behaviour.
    crd_name: str | None = None
    schema: dict[str, Any] | None = None
    printer_columns: list[dict[str, Any]] = field(default_factory=list)
    scale: dict[str, str] | None = None
    # Built-in defaulting hook: called on every create and update with the new object.
    defaulter: Callable[[dict[str, Any]], None] | None = None
    # Built-ins: the JSON types of the fields the server reads ({} object, [x] array of x,
    # str, int); anything else is a 400, as a Go decoding error is.
    shape: dict[str, Any] | None = None
    conversion: Conversion | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        return self.conversion.storage_key if self.conversion else f"{self.group}/{self.plural}"

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_service(self) -> bool:
        return not self.group and self.plural == "services"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def is_custom(self) -> bool:
        return self.crd_name is not None

    def view(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored object as read through this version."""
        if self.conversion is not None:
            return self.conversion.from_storage(obj)
        if obj.get("apiVersion") != self.api_version:
            return {**obj, "apiVersion": self.api_version}
        return obj

    def stored(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object written through this version, in the form it is stored in."""
        return self.conversion.to_storage(obj) if self.conversion is not None else obj


def _pod_defaults(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            image = str(container.get("image", ""))
            latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("resources", {})
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                _probe_defaults(container.get(probe))


def requests_from_limits(container: dict[str, Any]) -> None:
    """kube's defaulting of a new pod: a resource a container limits but does not request is
    requested at its limit (on create only, so that a pod stored without it stays updatable)."""
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, dict) else None
    if not isinstance(limits, dict) or not limits:
        return
    requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else {}  # type: ignore[union-attr]
    missing = {name: value for name, value in limits.items() if name not in requests}
    if missing:
        resources["requests"] = {**requests, **missing}  # type: ignore[index]


def _limit_range_defaults(limit_range: dict[str, Any]) -> None:
    """kube's SetDefaults_LimitRangeItem: a Container item's default limit is its max, its default
    request its default limit, else its min."""
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = item["default"] = dict(item.get("default") or {})
        request = item["defaultRequest"] = dict(item.get("defaultRequest") or {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)


def _probe_defaults(probe: Any) -> None:
    """kube's defaults of a probe (a zero is a field left out, as Go reads it)."""
    if not isinstance(probe, dict):
        return
    for name, default in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        if probe.get(name) in (None, 0):
            probe[name] = default
    if isinstance(probe.get("httpGet"), dict):
        probe["httpGet"].setdefault("path", "/")
        probe["httpGet"].setdefault("scheme", "HTTP")


def pod_qos_class(pod: dict[str, Any]) -> str:
    """The QoS class a pod's requests and limits give it (set in its status on create)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    requests = [c.get("resources", {}).get("requests") or {} for c in containers]
    limits = [c.get("resources", {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get("cpu") and lim.get("memory") and req.get("cpu", lim["cpu"]) == lim["cpu"]
        and req.get("memory", lim["memory"]) == lim["memory"]
        for req, lim in zip(requests, limits, strict=True)
    )
    return "Guaranteed" if guaranteed else "Burstable"


JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"


def _job_defaults(job: dict[str, Any]) -> None:
    """batch/v1 Job defaults, and the selector and pod labels kube's Job strategy adds on create."""
    spec = job.setdefault("spec", {})
    _job_spec_defaults(spec)
    meta = job.get("metadata") or {}
    template = spec.setdefault("template", {})
    if not spec.get("manualSelector") and meta.get("uid") and not spec.get("selector"):
        own = {JOB_CONTROLLER_UID: meta["uid"]}
        spec["selector"] = {"matchLabels": dict(own)}
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update({**own, JOB_NAME: meta.get("name", ""), "controller-uid": meta["uid"], "job-name": meta.get("name", "")})


def _job_spec_defaults(spec: dict[str, Any]) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    _pod_template_defaults(spec)


def _cronjob_defaults(cronjob: dict[str, Any]) -> None:
    spec = cronjob.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    _job_spec_defaults(spec.setdefault("jobTemplate", {}).setdefault("spec", {}))


def _pod_template_defaults(spec: dict[str, Any]) -> None:
    pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
    _pod_defaults({"spec": pod_spec})
    pod_spec.pop("priority", None)  # set by admission when a pod is made, not in a template
    pod_spec.pop("preemptionPolicy", None)


def _replicaset_defaults(replicaset: dict[str, Any]) -> None:
    spec = replicaset.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("minReadySeconds", 0)
    _pod_template_defaults(spec)


def _replication_controller_defaults(controller: dict[str, Any]) -> None:
    """core/v1 ReplicationController defaults: kube's, the selector and labels from the template's labels."""
    _replicaset_defaults(controller)
    spec = controller["spec"]
    labels = (spec["template"].get("metadata") or {}).get("labels") or {}
    if labels and not spec.get("selector"):
        spec["selector"] = dict(labels)
    meta = controller.setdefault("metadata", {})
    if labels and not meta.get("labels"):
        meta["labels"] = dict(labels)


def _daemonset_defaults(daemonset: dict[str, Any]) -> None:
    """apps/v1 DaemonSet defaults: a rolling update one node at a time, ten old revisions kept."""
    spec = daemonset.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("minReadySeconds", 0)
    _pod_template_defaults(spec)


def _statefulset_defaults(statefulset: dict[str, Any]) -> None:
    """apps/v1 StatefulSet defaults: one replica started in order, a rolling update from the
    highest ordinal, claims retained, ten old revisions kept."""
    spec = statefulset.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    spec["persistentVolumeClaimRetentionPolicy"].setdefault("whenDeleted", "Retain")
    spec["persistentVolumeClaimRetentionPolicy"].setdefault("whenScaled", "Retain")
    spec.setdefault("revisionHistoryLimit", 10)
    _pod_template_defaults(spec)


def _deployment_defaults(deployment: dict[str, Any]) -> None:
    """apps/v1 Deployment defaults: one replica, a 25%/25% rolling update, ten old ReplicaSets kept."""
    spec = deployment.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _pod_template_defaults(spec)


def _service_defaults(service: dict[str, Any]) -> None:
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))


def _namespace_defaults(namespace: dict[str, Any]) -> None:
    namespace.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    namespace.setdefault("status", {}).setdefault("phase", "Active")
    labels = namespace.setdefault("metadata", {}).setdefault("labels", {})
    labels.setdefault("kubernetes.io/metadata.name", namespace["metadata"].get("name", ""))


def _pdb_defaults(pdb: dict[str, Any]) -> None:
    """A new PodDisruptionBudget's status is the zero one (its counts are never omitted), until
    the disruption controller writes the first."""
    pdb.setdefault("status", {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0})


def _priority_class_defaults(priority_class: dict[str, Any]) -> None:
    priority_class.setdefault("preemptionPolicy", "PreemptLowerPriority")


_CONTAINER = {"name": str, "image": str, "ports": [{"containerPort": int, "protocol": str}],
              "env": [{"name": str}], "resources": {}}
_POD_SHAPE: dict[str, Any] = {"spec": {"containers": [_CONTAINER], "initContainers": [_CONTAINER], "nodeName": str,
                       "terminationGracePeriodSeconds": int, "readinessGates": [{}]},
              "status": {"phase": str, "conditions": [{}], "containerStatuses": [{"state": {}}],
                         "initContainerStatuses": [{"state": {}}]}}
_SERVICE_SHAPE: dict[str, Any] = {"spec": {"ports": [{"port": int, "protocol": str}], "clusterIP": str, "selector": {}, "type": str},
                  "status": {}}
_JOB_SHAPE: dict[str, Any] = {"spec": {"template": {"metadata": {"labels": {}}, "spec": _POD_SHAPE["spec"]}, "selector": {},
                                       "parallelism": int, "completions": int, "backoffLimit": int}, "status": {}}
_WORKLOAD_SHAPE: dict[str, Any] = {"spec": {"template": _JOB_SHAPE["spec"]["template"], "selector": {}, "replicas": int,
                                            "minReadySeconds": int, "strategy": {"type": str, "rollingUpdate": {}}},
                                   "status": {}}
# apps/v1 workloads' scale subresource: spec.replicas, status.replicas and the selector's text form.
_REPLICAS_SCALE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                   "labelSelectorPath": ".spec.selector"}
_NAMESPACE_SHAPE: dict[str, Any] = {"spec": {"finalizers": [str]}, "status": {}}
_NODE_SHAPE: dict[str, Any] = {"spec": {}, "status": {"conditions": [{}], "nodeInfo": {}}}
_EVENT_SHAPE: dict[str, Any] = {"involvedObject": {}, "regarding": {}, "source": {}, "series": {}}
_CRD_SHAPE: dict[str, Any] = {"spec": {
    "group": str, "scope": str,
    "names": {"plural": str, "singular": str, "kind": str, "listKind": str, "shortNames": [str], "categories": [str]},
    "versions": [{"name": str, "served": bool, "storage": bool, "schema": {"openAPIV3Schema": {}},
                  "subresources": {"status": {}, "scale": {"specReplicasPath": str, "statusReplicasPath": str,
                                                           "labelSelectorPath": str}},
                  "additionalPrinterColumns": [{"name": str, "jsonPath": str, "type": str, "priority": int}]}]}}


def builtin_types() -> list[ResourceType]:
    """The built-in kinds, in discovery order."""
    return [
        ResourceType("", "v1", "namespaces", "Namespace", "namespace", namespaced=False,
                     short_names=("ns",), subresources=("status", "finalize"),
                     defaulter=_namespace_defaults, shape=_NAMESPACE_SHAPE),
        ResourceType("", "v1", "pods", "Pod", "pod", short_names=("po",), categories=("all",),
                     subresources=("status", "log", "binding", "eviction", "ephemeralcontainers", "exec", "attach",
                                   "portforward", "proxy"), status_on_create=True,
                     defaulter=_pod_defaults, shape=_POD_SHAPE),
        ResourceType("", "v1", "services", "Service", "service", short_names=("svc",),
                     categories=("all",), subresources=("status", "proxy"), status_on_create=True,
                     defaulter=_service_defaults, shape=_SERVICE_SHAPE),
        ResourceType("", "v1", "endpoints", "Endpoints", "endpoints", short_names=("ep",)),
        ResourceType("", "v1", "events", "Event", "event", short_names=("ev",), shape=_EVENT_SHAPE),
        ResourceType("", "v1", "resourcequotas", "ResourceQuota", "resourcequota", short_names=("quota",),
                     subresources=("status",), status_on_create=True,
                     shape={"spec": {"hard": {}, "scopes": [str], "scopeSelector": {}}, "status": {"hard": {}, "used": {}}}),
        ResourceType("", "v1", "limitranges", "LimitRange", "limitrange", short_names=("limits",),
                     defaulter=_limit_range_defaults, shape={"spec": {"limits": [{"type": str}]}}),
        ResourceType("", "v1", "configmaps", "ConfigMap", "configmap", short_names=("cm",)),
        ResourceType("", "v1", "secrets", "Secret", "secret"),
        ResourceType("", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount", short_names=("sa",),
                     subresources=("token",)),
        ResourceType("", "v1", "nodes", "Node", "node", namespaced=False, short_names=("no",),
                     subresources=("status", "proxy"), shape=_NODE_SHAPE),
        ResourceType("events.k8s.io", "v1", "events", "Event", "event", short_names=("ev",), shape=_EVENT_SHAPE,
                     conversion=EVENTS_CONVERSION),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", "lease"),
        ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", "endpointslice"),
        ResourceType("batch", "v1", "jobs", "Job", "job", categories=("all",), subresources=("status",),
                     status_on_create=True, defaulter=_job_defaults, shape=_JOB_SHAPE),
        ResourceType("batch", "v1", "cronjobs", "CronJob", "cronjob", short_names=("cj",), categories=("all",),
                     subresources=("status",), status_on_create=True, defaulter=_cronjob_defaults,
                     shape={"spec": {"schedule": str, "jobTemplate": {"spec": _JOB_SHAPE["spec"]}}, "status": {}}),
        ResourceType("apps", "v1", "deployments", "Deployment", "deployment", short_names=("deploy",), categories=("all",),
                     subresources=("status", "scale"), status_on_create=True, scale=_REPLICAS_SCALE,
                     defaulter=_deployment_defaults, shape=_WORKLOAD_SHAPE),
        ResourceType("apps", "v1", "replicasets", "ReplicaSet", "replicaset", short_names=("rs",), categories=("all",),
                     subresources=("status", "scale"), status_on_create=True, scale=_REPLICAS_SCALE,
                     defaulter=_replicaset_defaults, shape=_WORKLOAD_SHAPE),
        ResourceType("", "v1", "replicationcontrollers", "ReplicationController", "replicationcontroller",
                     short_names=("rc",), categories=("all",), subresources=("status", "scale"), status_on_create=True,
                     scale=_REPLICAS_SCALE, defaulter=_replication_controller_defaults,
                     shape={"spec": {k: v for k, v in _WORKLOAD_SHAPE["spec"].items() if k != "strategy"}, "status": {}}),
        ResourceType("apps", "v1", "daemonsets", "DaemonSet", "daemonset", short_names=("ds",), categories=("all",),
                     subresources=("status",), status_on_create=True, defaulter=_daemonset_defaults,
                     shape={"spec": {k: v for k, v in _WORKLOAD_SHAPE["spec"].items() if k != "replicas"}, "status": {}}),
        ResourceType("apps", "v1", "statefulsets", "StatefulSet", "statefulset", short_names=("sts",), categories=("all",),
                     subresources=("status", "scale"), status_on_create=True, scale=_REPLICAS_SCALE,
                     defaulter=_statefulset_defaults, shape=_WORKLOAD_SHAPE),
        ResourceType("apps", "v1", "controllerrevisions", "ControllerRevision", "controllerrevision"),
        ResourceType("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
                     "horizontalpodautoscaler", short_names=("hpa",), categories=("all",),
                     subresources=("status",), status_on_create=True),
        ResourceType("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
                     "horizontalpodautoscaler", short_names=("hpa",), categories=("all",),
                     subresources=("status",), status_on_create=True, conversion=HPA_V1_CONVERSION),
        ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", "poddisruptionbudget",
                     short_names=("pdb",), subresources=("status",), status_on_create=True, defaulter=_pdb_defaults),
        ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", "priorityclass", namespaced=False,
                     short_names=("pc",), defaulter=_priority_class_defaults),
        ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                     "CustomResourceDefinition", "customresourcedefinition", namespaced=False,
                     short_names=("crd", "crds"), categories=("api-extensions",),
                     subresources=("status",), shape=_CRD_SHAPE),
        ResourceType("apiregistration.k8s.io", "v1", "apiservices", "APIService", "apiservice", namespaced=False,
                     categories=("api-extensions",), subresources=("status",), status_on_create=True),
        *identity_types(),
    ]


def identity_types() -> list[ResourceType]:
    """RBAC and the review kinds (``access``, ``reviews``): the reviews are only created, never stored."""
    rbac, authz, authn = "rbac.authorization.k8s.io", "authorization.k8s.io", "authentication.k8s.io"
    return [
        ResourceType(rbac, "v1", "clusterrolebindings", "ClusterRoleBinding", "clusterrolebinding", namespaced=False),
        ResourceType(rbac, "v1", "clusterroles", "ClusterRole", "clusterrole", namespaced=False),
        ResourceType(rbac, "v1", "rolebindings", "RoleBinding", "rolebinding"),
        ResourceType(rbac, "v1", "roles", "Role", "role"),
        ResourceType(authz, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", "localsubjectaccessreview",
                     verbs=("create",)),
        ResourceType(authz, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", "selfsubjectaccessreview",
                     namespaced=False, verbs=("create",)),
        ResourceType(authz, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", "selfsubjectrulesreview",
                     namespaced=False, verbs=("create",)),
        ResourceType(authz, "v1", "subjectaccessreviews", "SubjectAccessReview", "subjectaccessreview",
                     namespaced=False, verbs=("create",)),
        ResourceType(authn, "v1", "selfsubjectreviews", "SelfSubjectReview", "selfsubjectreview",
                     namespaced=False, verbs=("create",)),
        ResourceType(authn, "v1", "tokenreviews", "TokenReview", "tokenreview", namespaced=False, verbs=("create",)),
    ]


class Registry:
    """Lookup of served resource types by group/version/plural, kind, and CRD."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for rtype in builtin_types():
            self.add(rtype)

    def add(self, rtype: ResourceType) -> None:
        self._types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def remove_crd(self, crd_name: str) -> None:
        for key in [k for k, t in self._types.items() if t.crd_name == crd_name]:
            del self._types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def versions_of(self, group: str, plural: str) -> list[ResourceType]:
        return [t for t in self._types.values() if t.group == group and t.plural == plural]

    def type_for_storage(self, resource: str) -> ResourceType | None:
        """A type objects stored under ``resource`` (a storage key) can be read through."""
        group, _, plural = resource.partition("/")
        versions = self.versions_of(group, plural)
        return versions[0] if versions else None

    def serve_crd(self, crd: dict[str, Any], types: list[ResourceType]) -> None:
        """Serve ``types``, the kinds of ``crd``, in place of what it served before."""
        self.remove_crd(crd["metadata"]["name"])
        for rtype in types:
            self.add(rtype)

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions in preference order (the first one is preferred)."""
        groups: dict[str, list[str]] = {}
        for rtype in self._types.values():
            versions = groups.setdefault(rtype.group, [])
            if rtype.version not in versions:
                versions.append(rtype.version)
        for versions in groups.values():
            versions.sort(key=version_priority, reverse=True)
        return groups


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA > beta > alpha, higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (0, 0, 0)
    stability = {"alpha": 1, "beta": 2, None: 3}[match.group(2)]
    return (stability, int(match.group(1)), int(match.group(3) or 0))
