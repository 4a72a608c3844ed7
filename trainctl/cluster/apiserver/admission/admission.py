"""Admission: what a new state of an object must pass before it may be stored.

Every create, update, patch and subresource write of a whole object goes through
``Admission``: ``check_type`` (the body is an object of the kind the URL names, with
metadata of the right JSON types), ``check_name``, and ``admit`` (defaulting, pruning and
validation: CRD schemas for custom resources, Kubernetes' own schemas
(``builtin_validation``) and ``validation`` for built-in kinds, then the
size and depth ``limits``); a new pod first gets the default ``tolerations``, as
kube-apiserver's DefaultTolerationSeconds plugin gives it. ``admit`` is the one place that
decides whether a state may be stored, like kube-apiserver's decoding, defaulting and
validating admission chain; the ``guards`` judge a write by who makes it. Bodies were
already bounded when they were read (``body``, ``patch``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trainctl.cluster.apiserver.admission import (
    apiservices,
    builtin_validation,
    crds,
    ephemeral_containers,
    pod_update,
    resource_quotas,
    schema,
    tolerations,
    validation,
)
from trainctl.cluster.apiserver.apimachinery import errors, request_limits
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType, pod_qos_class, requests_from_limits
from trainctl.kube.timestamps import now_rfc3339

Obj = dict[str, Any]

# A check of a write by who makes it (``auth`` supplies them: RBAC escalation, NodeRestriction):
# (type, new state, old state or None, subresource) -> None, or raises the refusal.
Guard = Callable[[ResourceType, "Obj", "Obj | None", "str | None"], None]

CRD_STORAGE_KEY = "apiextensions.k8s.io/customresourcedefinitions"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class Admission:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.guards: list[Guard] = []

    def check_type(self, rtype: ResourceType, body: Any, namespace: str | None) -> Obj:
        """``body`` as an object of ``rtype`` in ``namespace``, or a 400 saying why it is not."""
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request was in an unknown format - expected a {rtype.kind} object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != rtype.api_version:
            versions = {t.api_version for t in self.registry.versions_of(rtype.group, rtype.plural)}
            if api_version not in versions:
                raise errors.bad_request(
                    f"the API version in the data ({api_version}) does not match the expected API version ({rtype.api_version})")
        if kind and kind != rtype.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})")
        if next(iter(body), None) != "apiVersion" or api_version != rtype.api_version or kind != rtype.kind:
            rest = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
            body.clear()
            body.update({"apiVersion": rtype.api_version, "kind": rtype.kind, **rest})
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        validation.check_metadata_types(meta)
        if rtype.shape is not None:
            problem = validation.shape_problem(body, rtype.shape, "")
            if problem:
                raise errors.bad_request(f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: {problem}')
        if rtype.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        return body

    @staticmethod
    def check_name(rtype: ResourceType, obj: Obj) -> None:
        name = obj["metadata"].get("name")
        if not name:
            raise errors.invalid(rtype.kind, rtype.group, "", [Cause(
                "metadata.name", "FieldValueRequired", "Required value: name or generateName is required")])
        if rtype.group == "rbac.authorization.k8s.io":  # kube's ValidatePathSegmentName (system:discovery)
            if name in (".", "..") or "/" in name or "%" in name:
                raise errors.invalid(rtype.kind, rtype.group, name, [Cause(
                    "metadata.name", "FieldValueInvalid",
                    f'Invalid value: "{name}": may not be \'.\' or \'..\' and may not contain \'/\' or \'%\'')])
            return
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise errors.invalid(rtype.kind, rtype.group, name, [Cause(
                "metadata.name", "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
                "characters, '-' or '.', and must start and end with an alphanumeric character")])

    def admit(self, rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str, *,
              subresource: str | None = None) -> list[str]:
        """The one place a new state (``old`` None: a create) is judged before it is stored:
        defaulting, pruning and validation, then the size and depth limits. Returns warnings."""
        for guard in self.guards:
            guard(rtype, obj, old, subresource)
        warnings: list[str] = []
        if subresource != "status" or rtype.schema is not None:  # built-in status is the kubelet's
            if rtype.defaulter is not None:
                rtype.defaulter(obj)
            if rtype.is_custom:
                warnings = self._admit_custom(rtype, obj, old, field_validation)
            else:
                warnings = self._admit_builtin(rtype, obj, old, field_validation, subresource)
        request_limits.check_object(rtype.kind, rtype.group, obj)
        return warnings

    def _admit_builtin(self, rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str,
                       subresource: str | None) -> list[str]:
        """Validation of the kinds the server itself defines; returns warnings."""
        name = obj["metadata"].get("name", "")
        is_pod = rtype.plural == "pods" and not rtype.group
        if is_pod and old is None:
            tolerations.add_defaults(obj)
            for key in ("initContainers", "containers"):
                for container in (obj.get("spec") or {}).get(key) or []:
                    if isinstance(container, dict):
                        requests_from_limits(container)
        warnings = builtin_validation.admit(rtype, obj, old, field_validation)
        if is_pod:
            if old is None:
                obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(obj)}
            causes = validation.validate_pod(obj)
            if old is None:
                causes += ephemeral_containers.validate_create(obj)
            elif subresource == ephemeral_containers.SUBRESOURCE:
                causes += ephemeral_containers.validate_update(obj, old)
            else:
                causes += pod_update.validate(obj, old)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
        if rtype.group == "batch" and rtype.plural in ("jobs", "cronjobs"):
            causes = (validation.validate_job if rtype.plural == "jobs" else validation.validate_cronjob)(obj, old)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
        if rtype.group == "" and rtype.plural == "replicationcontrollers":
            # A ReplicaSet with a label map for selector, which (unlike the ReplicaSet's) may change.
            spec = obj.get("spec") or {}
            causes = validation.validate_workload({**obj, "spec": {**spec, "selector": {"matchLabels": spec.get("selector") or {}}}},
                                                  None)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
        if rtype.group == "apps" and rtype.plural in ("deployments", "replicasets", "daemonsets", "statefulsets"):
            causes = validation.validate_workload(obj, old)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
        if not rtype.group and rtype.plural in ("resourcequotas", "limitranges"):
            causes = (resource_quotas.validate_quota if rtype.plural == "resourcequotas"
                      else resource_quotas.validate_limit_range)(obj)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
        if rtype.group == "apiregistration.k8s.io":
            causes = apiservices.validate(obj)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
            if old is None:
                obj["status"] = apiservices.initial_status(obj, now_rfc3339())
        if rtype.storage_key == CRD_STORAGE_KEY:
            crds.crd_defaults(obj)
            causes = crds.validate_crd(obj)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
            if old is not None and old["spec"].get("names", {}).get("plural") != obj["spec"].get("names", {}).get("plural"):
                raise errors.invalid(rtype.kind, rtype.group, name, [Cause("spec.names.plural", "FieldValueInvalid", "field is immutable")])
            obj["status"] = crds.established_status(obj if old is None else {**obj, "status": old.get("status")}, now_rfc3339())
        return warnings

    @staticmethod
    def _admit_custom(rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str) -> list[str]:
        """Pruning, defaulting and validation by the CRD's structural schema."""
        warnings: list[str] = []
        if rtype.schema is None:
            return warnings
        name = obj["metadata"].get("name", "")
        dropped = schema.prune(obj, rtype.schema)
        dropped = [p for p in dropped if not p.startswith("status")] if rtype.has_status else dropped
        if dropped and field_validation == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in dropped))
        if field_validation != "Ignore":
            warnings += [f'unknown field "{p}"' for p in dropped]
        schema.apply_defaults(obj, rtype.schema)
        causes = schema.validate(obj, rtype.schema, old)
        if causes:
            raise errors.invalid(f"{rtype.kind}", rtype.group, name, causes)
        return warnings
