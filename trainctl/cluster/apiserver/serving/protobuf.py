"""Request bodies in Kubernetes' protobuf encoding, for the kinds kubectl sends that way.

kubectl's typed commands (``kubectl create namespace|configmap|secret|serviceaccount|service|
job|cronjob|deployment|pdb|priorityclass|quota``, ``kubectl autoscale``, ``kubectl drain``'s evictions) send ``application/vnd.kubernetes.protobuf`` bodies; ``apply``, ``get``, ``patch`` and the
clients in Python all use JSON. This module turns those few kinds back into the JSON shape
the rest of the server works on. There is no Python package carrying the generated
Kubernetes messages, so the field numbers below are transcribed from the ``generated.proto``
files of k8s.io/api and k8s.io/apimachinery; fields not listed are skipped, as protobuf
readers do with unknown fields.

Envelope: the 4 bytes ``k8s\\0``, then a ``runtime.Unknown`` message whose ``typeMeta``
names the kind and whose ``raw`` holds the object.
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
Schema = dict[int, tuple[str, str, Any]]

_TIME: Schema = {1: ("seconds", "int", None), 2: ("nanos", "int", None)}
_OWNER_REFERENCE: Schema = {
    1: ("kind", "string", None), 3: ("name", "string", None), 4: ("uid", "string", None),
    5: ("apiVersion", "string", None), 6: ("controller", "bool", None), 7: ("blockOwnerDeletion", "bool", None),
}
_OBJECT_META: Schema = {
    1: ("name", "string", None), 2: ("generateName", "string", None), 3: ("namespace", "string", None),
    5: ("uid", "string", None), 6: ("resourceVersion", "string", None), 7: ("generation", "int", None),
    8: ("creationTimestamp", "time", None), 9: ("deletionTimestamp", "time", None),
    10: ("deletionGracePeriodSeconds", "int", None), 11: ("labels", "map", "string"),
    12: ("annotations", "map", "string"), 13: ("ownerReferences", "messages", _OWNER_REFERENCE),
    14: ("finalizers", "strings", None),
}
_OBJECT_REFERENCE: Schema = {
    1: ("kind", "string", None), 2: ("namespace", "string", None), 3: ("name", "string", None),
    4: ("uid", "string", None), 5: ("apiVersion", "string", None), 6: ("resourceVersion", "string", None),
    7: ("fieldPath", "string", None),
}
_INT_OR_STRING: Schema = {1: ("type", "int", None), 2: ("intVal", "int", None), 3: ("strVal", "string", None)}
_SERVICE_PORT: Schema = {
    1: ("name", "string", None), 2: ("protocol", "string", None), 3: ("port", "int", None),
    4: ("targetPort", "intorstring", _INT_OR_STRING), 5: ("nodePort", "int", None), 6: ("appProtocol", "string", None),
}
_SERVICE_SPEC: Schema = {
    1: ("ports", "messages", _SERVICE_PORT), 2: ("selector", "map", "string"), 3: ("clusterIP", "string", None),
    4: ("type", "string", None), 5: ("externalIPs", "strings", None), 7: ("sessionAffinity", "string", None),
    10: ("externalName", "string", None), 11: ("externalTrafficPolicy", "string", None),
    18: ("clusterIPs", "strings", None), 19: ("ipFamilies", "strings", None), 17: ("ipFamilyPolicy", "string", None),
}
# Pods and Jobs (kubectl create job, kubectl debug --copy-to): the fields those commands set,
# and the ones a pod is commonly written with.
_QUANTITY_MAP = "quantity"
_LABEL_SELECTOR: Schema = {
    1: ("matchLabels", "map", "string"),
    2: ("matchExpressions", "messages", {1: ("key", "string", None), 2: ("operator", "string", None),
                                         3: ("values", "strings", None)}),
}
_ENV_VAR: Schema = {1: ("name", "string", None), 2: ("value", "string", None), 3: ("valueFrom", "message", {
    1: ("fieldRef", "message", {1: ("apiVersion", "string", None), 2: ("fieldPath", "string", None)}),
    3: ("configMapKeyRef", "message", {1: ("localObjectReference", "message", {1: ("name", "string", None)}),
                                       2: ("key", "string", None)}),
    4: ("secretKeyRef", "message", {1: ("localObjectReference", "message", {1: ("name", "string", None)}),
                                    2: ("key", "string", None)})})}
_LOCAL_NAME: Schema = {1: ("localObjectReference", "inline", {1: ("name", "string", None)})}
_KEY_TO_PATH: Schema = {1: ("key", "string", None), 2: ("path", "string", None), 3: ("mode", "int", None)}
_OBJECT_FIELD: Schema = {1: ("apiVersion", "string", None), 2: ("fieldPath", "string", None)}
_RESOURCE_FIELD: Schema = {1: ("containerName", "string", None), 2: ("resource", "string", None),
                           3: ("divisor", "quantity", None)}
_DOWNWARD_FILES: Schema = {1: ("items", "messages", {
    1: ("path", "string", None), 2: ("fieldRef", "message", _OBJECT_FIELD),
    3: ("resourceFieldRef", "message", _RESOURCE_FIELD), 4: ("mode", "int", None)})}
_OBJECT_PROJECTION: Schema = {**_LOCAL_NAME, 2: ("items", "messages", _KEY_TO_PATH), 4: ("optional", "bool", None)}
# A pod copied by ``kubectl debug --copy-to`` keeps its volumes, the service account token's
# projected one among them; ``kubectl debug node/X`` mounts the node's root as a hostPath.
_VOLUME: Schema = {1: ("name", "string", None), 2: ("volumeSource", "inline", {
    1: ("hostPath", "message", {1: ("path", "string", None), 2: ("type", "string", None)}),
    2: ("emptyDir", "message", {1: ("medium", "string", None), 2: ("sizeLimit", "quantity", None)}),
    6: ("secret", "message", {1: ("secretName", "string", None), 2: ("items", "messages", _KEY_TO_PATH),
                              3: ("defaultMode", "int", None), 4: ("optional", "bool", None)}),
    10: ("persistentVolumeClaim", "message", {1: ("claimName", "string", None), 2: ("readOnly", "bool", None)}),
    16: ("downwardAPI", "message", {**_DOWNWARD_FILES, 2: ("defaultMode", "int", None)}),
    19: ("configMap", "message", {**_OBJECT_PROJECTION, 3: ("defaultMode", "int", None)}),
    26: ("projected", "message", {2: ("defaultMode", "int", None), 1: ("sources", "messages", {
        1: ("secret", "message", _OBJECT_PROJECTION), 2: ("downwardAPI", "message", _DOWNWARD_FILES),
        3: ("configMap", "message", _OBJECT_PROJECTION),
        4: ("serviceAccountToken", "message", {1: ("audience", "string", None), 2: ("expirationSeconds", "int", None),
                                               3: ("path", "string", None)})})}),
})}
_PORT_ACTION: Schema = {1: ("port", "intorstring", _INT_OR_STRING)}
_PROBE: Schema = {
    1: ("handler", "inline", {
        1: ("exec", "message", {1: ("command", "strings", None)}),
        2: ("httpGet", "message", {1: ("path", "string", None), 2: ("port", "intorstring", _INT_OR_STRING),
                                   3: ("host", "string", None), 4: ("scheme", "string", None),
                                   5: ("httpHeaders", "messages", {1: ("name", "string", None),
                                                                   2: ("value", "string", None)})}),
        3: ("tcpSocket", "message", {**_PORT_ACTION, 2: ("host", "string", None)}),
        4: ("grpc", "message", {1: ("port", "zero_int", None), 2: ("service", "string", None)})}),
    2: ("initialDelaySeconds", "int", None), 3: ("timeoutSeconds", "int", None), 4: ("periodSeconds", "int", None),
    5: ("successThreshold", "int", None), 6: ("failureThreshold", "int", None),
}
_SECURITY_CONTEXT: Schema = {
    1: ("capabilities", "message", {1: ("add", "strings", None), 2: ("drop", "strings", None)}),
    2: ("privileged", "bool", None), 4: ("runAsUser", "int", None), 8: ("runAsGroup", "int", None),
    5: ("runAsNonRoot", "bool", None), 6: ("readOnlyRootFilesystem", "bool", None),
    7: ("allowPrivilegeEscalation", "bool", None), 9: ("procMount", "string", None),
}
_CONTAINER: Schema = {
    1: ("name", "string", None), 2: ("image", "string", None), 3: ("command", "strings", None),
    4: ("args", "strings", None), 5: ("workingDir", "string", None),
    6: ("ports", "messages", {1: ("name", "string", None), 2: ("hostPort", "int", None),
                              3: ("containerPort", "int", None), 4: ("protocol", "string", None)}),
    7: ("env", "messages", _ENV_VAR),
    8: ("resources", "message", {1: ("limits", "map", _QUANTITY_MAP), 2: ("requests", "map", _QUANTITY_MAP)}),
    9: ("volumeMounts", "messages", {1: ("name", "string", None), 2: ("readOnly", "bool", None),
                                     3: ("mountPath", "string", None), 4: ("subPath", "string", None)}),
    13: ("terminationMessagePath", "string", None), 14: ("imagePullPolicy", "string", None),
    16: ("stdin", "bool", None), 17: ("stdinOnce", "bool", None), 18: ("tty", "bool", None),
    20: ("terminationMessagePolicy", "string", None),
    19: ("envFrom", "messages", {1: ("prefix", "string", None),
                                 2: ("configMapRef", "message", {**_LOCAL_NAME, 2: ("optional", "bool", None)}),
                                 3: ("secretRef", "message", {**_LOCAL_NAME, 2: ("optional", "bool", None)})}),
    10: ("livenessProbe", "message", _PROBE), 11: ("readinessProbe", "message", _PROBE),
    22: ("startupProbe", "message", _PROBE), 15: ("securityContext", "message", _SECURITY_CONTEXT),
}
_POD_SPEC: Schema = {
    2: ("containers", "messages", _CONTAINER), 3: ("restartPolicy", "string", None),
    4: ("terminationGracePeriodSeconds", "int", None), 5: ("activeDeadlineSeconds", "int", None),
    6: ("dnsPolicy", "string", None), 7: ("nodeSelector", "map", "string"), 8: ("serviceAccountName", "string", None),
    10: ("nodeName", "string", None), 11: ("hostNetwork", "bool", None), 12: ("hostPID", "bool", None),
    16: ("hostname", "string", None), 17: ("subdomain", "string", None), 19: ("schedulerName", "string", None),
    20: ("initContainers", "messages", _CONTAINER),
    22: ("tolerations", "messages", {1: ("key", "string", None), 2: ("operator", "string", None),
                                     3: ("value", "string", None), 4: ("effect", "string", None),
                                     5: ("tolerationSeconds", "int", None)}),
    24: ("priorityClassName", "string", None), 27: ("shareProcessNamespace", "bool", None),
    1: ("volumes", "messages", _VOLUME), 13: ("hostIPC", "bool", None), 9: ("serviceAccount", "string", None),
    21: ("automountServiceAccountToken", "bool", None), 30: ("enableServiceLinks", "bool", None),
    31: ("preemptionPolicy", "string", None), 25: ("priority", "int", None),
    15: ("imagePullSecrets", "messages", {1: ("name", "string", None)}),
    14: ("securityContext", "message", {2: ("runAsUser", "int", None), 6: ("runAsGroup", "int", None),
                                        3: ("runAsNonRoot", "bool", None), 4: ("supplementalGroups", "ints", None),
                                        5: ("fsGroup", "int", None)}),
    34: ("ephemeralContainers", "messages", {1: ("ephemeralContainerCommon", "inline", _CONTAINER),
                                             2: ("targetContainerName", "string", None)}),
}
_POD_TEMPLATE: Schema = {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", _POD_SPEC)}
_JOB_SPEC: Schema = {
    1: ("parallelism", "int", None), 2: ("completions", "int", None), 3: ("activeDeadlineSeconds", "int", None),
    4: ("selector", "message", _LABEL_SELECTOR), 5: ("manualSelector", "bool", None), 6: ("template", "message", _POD_TEMPLATE),
    7: ("backoffLimit", "int", None), 8: ("ttlSecondsAfterFinished", "int", None), 9: ("completionMode", "string", None),
    10: ("suspend", "bool", None),
}
_DELETE_OPTIONS: Schema = {
    1: ("gracePeriodSeconds", "zero_int", None),
    2: ("preconditions", "message", {1: ("uid", "string", None), 2: ("resourceVersion", "string", None)}),
    3: ("orphanDependents", "bool", None), 4: ("propagationPolicy", "string", None), 5: ("dryRun", "strings", None),
}
KINDS: dict[str, Schema] = {
    "Pod": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", _POD_SPEC)},
    "Job": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", _JOB_SPEC)},
    "CronJob": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("schedule", "string", None), 2: ("startingDeadlineSeconds", "int", None), 3: ("concurrencyPolicy", "string", None),
        4: ("suspend", "bool", None), 5: ("jobTemplate", "message", {1: ("metadata", "message", _OBJECT_META),
                                                                   2: ("spec", "message", _JOB_SPEC)}),
        6: ("successfulJobsHistoryLimit", "int", None), 7: ("failedJobsHistoryLimit", "int", None),
        8: ("timeZone", "string", None)})},
    "ConfigMap": {1: ("metadata", "message", _OBJECT_META), 2: ("data", "map", "string"),
                  3: ("binaryData", "map", "bytes"), 4: ("immutable", "bool", None)},
    "Secret": {1: ("metadata", "message", _OBJECT_META), 2: ("data", "map", "bytes"), 3: ("type", "string", None),
               4: ("stringData", "map", "string"), 5: ("immutable", "bool", None)},
    "Namespace": {1: ("metadata", "message", _OBJECT_META),
                  2: ("spec", "message", {1: ("finalizers", "strings", None)})},
    "ServiceAccount": {1: ("metadata", "message", _OBJECT_META), 2: ("secrets", "messages", _OBJECT_REFERENCE),
                       3: ("imagePullSecrets", "messages", {1: ("name", "string", None)}),
                       4: ("automountServiceAccountToken", "bool", None)},
    "Service": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", _SERVICE_SPEC)},
    # kubectl create deployment (apps/v1 generated.proto).
    "Deployment": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("replicas", "zero_int", None), 2: ("selector", "message", _LABEL_SELECTOR), 3: ("template", "message", _POD_TEMPLATE),
        4: ("strategy", "message", {1: ("type", "string", None), 2: ("rollingUpdate", "message", {
            1: ("maxUnavailable", "intorstring", _INT_OR_STRING), 2: ("maxSurge", "intorstring", _INT_OR_STRING)})}),
        5: ("minReadySeconds", "int", None), 6: ("revisionHistoryLimit", "int", None), 7: ("paused", "bool", None),
        9: ("progressDeadlineSeconds", "int", None)})},
    "ReplicaSet": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("replicas", "zero_int", None), 2: ("selector", "message", _LABEL_SELECTOR), 3: ("template", "message", _POD_TEMPLATE),
        4: ("minReadySeconds", "int", None)})},
    # kubectl autoscale (autoscaling/v1 generated.proto; only v1 is sent this way).
    "HorizontalPodAutoscaler": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("scaleTargetRef", "message", {1: ("kind", "string", None), 2: ("name", "string", None),
                                          3: ("apiVersion", "string", None)}),
        2: ("minReplicas", "int", None), 3: ("maxReplicas", "zero_int", None),
        4: ("targetCPUUtilizationPercentage", "int", None)})},
    # kubectl create pdb|priorityclass, and kubectl drain's evictions.
    "PodDisruptionBudget": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("minAvailable", "intorstring", _INT_OR_STRING), 2: ("selector", "message", _LABEL_SELECTOR),
        3: ("maxUnavailable", "intorstring", _INT_OR_STRING), 4: ("unhealthyPodEvictionPolicy", "string", None)})},
    "PriorityClass": {1: ("metadata", "message", _OBJECT_META), 2: ("value", "zero_int", None),
                      3: ("globalDefault", "bool", None), 4: ("description", "string", None),
                      5: ("preemptionPolicy", "string", None)},
    "Eviction": {1: ("metadata", "message", _OBJECT_META), 2: ("deleteOptions", "message", _DELETE_OPTIONS)},
    # kubectl create quota (core/v1 generated.proto).
    "ResourceQuota": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("hard", "map", _QUANTITY_MAP), 2: ("scopes", "strings", None),
        3: ("scopeSelector", "message", {1: ("matchExpressions", "messages", {
            1: ("scopeName", "string", None), 2: ("operator", "string", None), 3: ("values", "strings", None)})})})},
}
_RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string", None), 2: ("verb", "string", None), 3: ("group", "string", None),
    4: ("version", "string", None), 5: ("resource", "string", None), 6: ("subresource", "string", None),
    7: ("name", "string", None),
}
_NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string", None), 2: ("verb", "string", None)}
_SUBJECT_ACCESS_REVIEW_SPEC: Schema = {
    1: ("resourceAttributes", "message", _RESOURCE_ATTRIBUTES),
    2: ("nonResourceAttributes", "message", _NON_RESOURCE_ATTRIBUTES),
    3: ("user", "string", None), 4: ("groups", "strings", None), 6: ("uid", "string", None),
}
_POLICY_RULE: Schema = {
    1: ("verbs", "strings", None), 2: ("apiGroups", "strings", None), 3: ("resources", "strings", None),
    4: ("resourceNames", "strings", None), 5: ("nonResourceURLs", "strings", None),
}
_BINDING: Schema = {
    1: ("metadata", "message", _OBJECT_META),
    2: ("subjects", "messages", {1: ("kind", "string", None), 2: ("apiGroup", "string", None),
                                 3: ("name", "string", None), 4: ("namespace", "string", None)}),
    3: ("roleRef", "message", {1: ("apiGroup", "string", None), 2: ("kind", "string", None), 3: ("name", "string", None)}),
}
# The identity kinds kubectl sends as protobuf (auth can-i, auth whoami, create token, create role...).
KINDS.update({
    "SelfSubjectAccessReview": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("resourceAttributes", "message", _RESOURCE_ATTRIBUTES),
        2: ("nonResourceAttributes", "message", _NON_RESOURCE_ATTRIBUTES)})},
    "SubjectAccessReview": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", _SUBJECT_ACCESS_REVIEW_SPEC)},
    "LocalSubjectAccessReview": {1: ("metadata", "message", _OBJECT_META),
                                 2: ("spec", "message", _SUBJECT_ACCESS_REVIEW_SPEC)},
    "SelfSubjectRulesReview": {1: ("metadata", "message", _OBJECT_META),
                               2: ("spec", "message", {1: ("namespace", "string", None)})},
    "SelfSubjectReview": {1: ("metadata", "message", _OBJECT_META)},
    "TokenReview": {1: ("metadata", "message", _OBJECT_META),
                    2: ("spec", "message", {1: ("token", "string", None), 2: ("audiences", "strings", None)})},
    "TokenRequest": {1: ("metadata", "message", _OBJECT_META), 2: ("spec", "message", {
        1: ("audiences", "strings", None), 4: ("expirationSeconds", "int", None),
        3: ("boundObjectRef", "message", {1: ("kind", "string", None), 2: ("apiVersion", "string", None),
                                          3: ("name", "string", None), 4: ("uid", "string", None)})})},
    "Role": {1: ("metadata", "message", _OBJECT_META), 2: ("rules", "messages", _POLICY_RULE)},
    "ClusterRole": {1: ("metadata", "message", _OBJECT_META), 2: ("rules", "messages", _POLICY_RULE)},
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
})
_UNKNOWN: Schema = {1: ("typeMeta", "message", {1: ("apiVersion", "string", None), 2: ("kind", "string", None)}),
                    2: ("raw", "raw", None)}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of every field of one message."""
    fields = []
    pos = 0
    value: int | bytes
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
            if pos > len(data):
                raise ValueError("truncated field")
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.append((number, wire, value))
    return fields


def _packed(data: bytes) -> list[int]:
    values, pos = [], 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        values.append(_signed(value))
    return values


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, _wire, value in _fields(data):
        if number not in schema:
            continue
        name, kind, sub = schema[number]
        if kind == "string":
            obj[name] = value.decode("utf-8")
        elif kind == "raw":
            obj[name] = value
        elif kind in ("int", "zero_int"):
            obj[name] = _signed(value)
        elif kind == "bool":
            obj[name] = bool(value)
        elif kind == "message":
            obj[name] = _message(value, sub)
        elif kind == "inline":  # embedded in Go, its fields the parent's in JSON
            obj.update(_message(value, sub))
        elif kind == "quantity":  # a resource.Quantity message: its string form in field 1
            obj[name] = {n: v for n, _, v in _fields(value)}.get(1, b"").decode("utf-8")
        elif kind == "ints":  # packed (wire type 2) or one by one
            obj.setdefault(name, []).extend(_packed(value) if isinstance(value, bytes) else [_signed(value)])
        elif kind == "messages":
            obj.setdefault(name, []).append(_message(value, sub))
        elif kind == "strings":
            obj.setdefault(name, []).append(value.decode("utf-8"))
        elif kind == "time":
            moment = _message(value, _TIME)
            stamp = datetime.fromtimestamp(moment.get("seconds", 0), timezone.utc)
            obj[name] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        elif kind == "intorstring":
            parsed = _message(value, sub)
            obj[name] = parsed.get("strVal", "") if parsed.get("type") == 1 else parsed.get("intVal", 0)
        elif kind == "map":
            entry = {n: v for n, _, v in _fields(value)}
            key = entry.get(1, b"").decode("utf-8")
            raw = entry.get(2, b"")
            if sub == _QUANTITY_MAP:  # a resource.Quantity message: its string form in field 1
                raw = {n: v for n, _, v in _fields(raw)}.get(1, b"")
            obj.setdefault(name, {})[key] = base64.b64encode(raw).decode() if sub == "bytes" else raw.decode("utf-8")
    # Go writes every scalar, empty or not; its JSON omits the empty ones (omitempty), except
    # the numbers that are never omitted (``zero_int``) and an IntOrString that was set.
    shown = {name for name, kind, _ in schema.values() if kind in ("zero_int", "intorstring")}
    return {k: v for k, v in obj.items() if k in shown or v not in ("", 0, [], {}) or isinstance(v, bool) and v}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or a 415 for kinds not listed here."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("protobuf body without the k8s envelope")
    try:
        envelope = _message(body[len(MAGIC):], _UNKNOWN)
        type_meta = envelope.get("typeMeta") or {}
        kind = type_meta.get("kind", "")
        schema = KINDS.get(kind)
        if schema is None:
            raise errors.unsupported_media_type(
                f"protobuf is supported for {', '.join(sorted(KINDS))} only; send {kind or 'this object'} as application/json")
        obj = _message(envelope.get("raw", b""), schema)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"the body of the request was in an unknown format - protobuf: {exc}") from None
    return {"apiVersion": type_meta.get("apiVersion", "v1"), "kind": kind, **obj}
