"""Checks of built-in kinds, standing in for the Go types' decoding and validation.

Custom resources are checked against their CRD's schema (``schema``); built-in kinds have no
schema here, so this module rejects what kube-apiserver's decoder would refuse outright
(metadata and fields of the wrong JSON type: 400) and what a pod cannot run without (422).
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.cron import schedule_problem
from trainctl.cluster.label_selectors import selector_matches

Obj = dict[str, Any]

_STRING_FIELDS = ("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")


def check_metadata_types(meta: Obj) -> None:
    """Reject metadata the Go types could not decode (a 400, as a decoding error is)."""
    problems = [f"metadata.{k} must be a string" for k in _STRING_FIELDS if k in meta and not isinstance(meta[k], (str, type(None)))]
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            problems.append(f"metadata.{key} must be a map of strings")
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)):
        problems.append("metadata.finalizers must be a list of strings")
    owners = meta.get("ownerReferences")
    if owners is not None and not (isinstance(owners, list) and all(
            isinstance(o, dict) and isinstance(o.get("uid"), str) and isinstance(o.get("name"), str) for o in owners)):
        problems.append("metadata.ownerReferences must be a list of references with name and uid")
    for key in ("generation", "deletionGracePeriodSeconds"):
        if key in meta and meta[key] is not None and (not isinstance(meta[key], int) or isinstance(meta[key], bool)):
            problems.append(f"metadata.{key} must be an integer")
    if problems:
        raise errors.bad_request("; ".join(problems))


_JSON_TYPE_NAMES = {str: "string", int: "integer", bool: "boolean"}


def shape_problem(value: Any, shape: Any, path: str) -> str | None:
    """Where ``value`` does not have the JSON types ``shape`` describes (see registry)."""
    if value is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{path or 'the body'} must be an object"
        for key, sub in shape.items():
            problem = shape_problem(value.get(key), sub, f"{path}.{key}" if path else key)
            if problem:
                return problem
    elif isinstance(shape, list):
        if not isinstance(value, list):
            return f"{path} must be an array"
        for i, item in enumerate(value):
            problem = shape_problem(item, shape[0], f"{path}[{i}]")
            if problem:
                return problem
    elif not isinstance(value, shape) or isinstance(value, bool) and shape is int:
        return f"{path} must be of type {_JSON_TYPE_NAMES.get(shape, shape.__name__)}"
    return None

def validate_pod(pod: Obj) -> list[Cause]:
    causes = []
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not containers:
        causes.append(Cause("spec.containers", "FieldValueRequired", "Required value"))
        return causes
    seen = set()
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            causes.append(Cause(f"spec.containers[{i}]", "FieldValueTypeInvalid", "Invalid value: must be an object"))
            continue
        name = container.get("name")
        if not name:
            causes.append(Cause(f"spec.containers[{i}].name", "FieldValueRequired", "Required value"))
        elif name in seen:
            causes.append(Cause(f"spec.containers[{i}].name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(name)
        if not container.get("image"):
            causes.append(Cause(f"spec.containers[{i}].image", "FieldValueRequired", "Required value"))
    return causes


def _prefixed(causes: list[Cause], prefix: str) -> list[Cause]:
    return [Cause(f"{prefix}{c.field}", c.reason, c.message) for c in causes]


def validate_job(job: Obj, old: Obj | None) -> list[Cause]:
    """kube's Job validation: what a Job's pods need, its counts, and what an update may not change."""
    spec = job.get("spec") or {}
    template = spec.get("template") or {}
    causes = _prefixed(validate_pod({"spec": template.get("spec") or {}}), "spec.template.")
    policy = (template.get("spec") or {}).get("restartPolicy")
    if policy not in ("OnFailure", "Never"):
        causes.append(Cause("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"'))
    for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        value = spec.get(key)
        if isinstance(value, int) and value < (1 if key == "activeDeadlineSeconds" else 0):
            bound = "must be greater than 0" if key == "activeDeadlineSeconds" else "must be greater than or equal to 0"
            causes.append(Cause(f"spec.{key}", "FieldValueInvalid", f"Invalid value: {value}: {bound}"))
    mode = spec.get("completionMode")
    if mode not in (None, "NonIndexed", "Indexed"):
        causes.append(Cause("spec.completionMode", "FieldValueNotSupported",
                            f'Unsupported value: "{mode}": supported values: "NonIndexed", "Indexed"'))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(Cause("spec.completions", "FieldValueRequired", "Required value: when completion mode is Indexed"))
    if spec.get("podFailurePolicy") and policy != "Never":
        causes.append(Cause("spec.template.spec.restartPolicy", "FieldValueInvalid",
                            f'Invalid value: "{policy}": only "Never" is supported when podFailurePolicy is specified'))
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and any(labels.get(k) != v for k, v in selector.items()):
        causes.append(Cause("spec.template.metadata.labels", "FieldValueInvalid",
                            "Invalid value: map[string]string(nil): `selector` does not match template `labels`"))
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("selector", "template", "completionMode", "podFailurePolicy"):
            if key == "template" and spec.get("suspend") and old_spec.get("suspend"):
                continue  # a suspended Job's template may change (kube allows its scheduling fields)
            if spec.get(key) != old_spec.get(key):
                causes.append(Cause(f"spec.{key}", "FieldValueInvalid", "Invalid value: field is immutable"))
        if spec.get("completions") != old_spec.get("completions") and mode != "Indexed":
            causes.append(Cause("spec.completions", "FieldValueInvalid", "Invalid value: field is immutable"))
    return causes


def validate_cronjob(cronjob: Obj, old: Obj | None) -> list[Cause]:
    """kube's CronJob validation: its schedule and time zone, its limits and the Jobs it makes."""
    spec = cronjob.get("spec") or {}
    causes = []
    problem = schedule_problem(spec.get("schedule"), spec.get("timeZone"))
    if problem:
        field = "spec.timeZone" if "time zone" in problem else "spec.schedule"
        causes.append(Cause(field, "FieldValueRequired" if problem == "Required value" else "FieldValueInvalid", problem))
    policy = spec.get("concurrencyPolicy")
    if policy not in (None, "Allow", "Forbid", "Replace"):
        causes.append(Cause("spec.concurrencyPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: "Allow", "Forbid", "Replace"'))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            causes.append(Cause(f"spec.{key}", "FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0"))
    template = spec.get("jobTemplate") or {}
    job = {"metadata": {}, "spec": {**(template.get("spec") or {}), "selector": None}}
    causes.extend(Cause(f"spec.jobTemplate.{c.field}", c.reason, c.message) for c in validate_job(job, None))
    return causes


def _go_labels(labels: Obj) -> str:
    """A label map as Go's ``%#v`` prints it in kube's messages."""
    if not labels:
        return "map[string]string(nil)"
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"


def _int_or_percent(value: Any, field: str) -> tuple[int | None, list[Cause]]:
    """An IntOrString's number (a percentage's too) and what kube refuses about it."""
    if isinstance(value, int):
        return value, [Cause(field, "FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0")] if value < 0 else []
    text = str(value)
    if text.endswith("%") and text[:-1].isdigit():
        number = int(text[:-1])
        return number, [Cause(field, "FieldValueInvalid", f'Invalid value: "{text}": must not be greater than 100%')] if number > 100 else []
    return None, [Cause(field, "FieldValueInvalid", f'Invalid value: "{text}": a valid percent string must be a numeric string followed by an ending \'%\'')]


def validate_workload(obj: Obj, old: Obj | None) -> list[Cause]:
    """kube's Deployment and ReplicaSet validation: a selector its pods match, pods that restart, counts, strategy."""
    spec = obj.get("spec") or {}
    kind = str(obj.get("kind") or "").lower() or "deployment"
    template = spec.get("template") or {}
    selector = spec.get("selector")
    causes = _prefixed(validate_pod({"spec": template.get("spec") or {}}), "spec.template.")
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, dict):
        causes.append(Cause("spec.selector", "FieldValueRequired", "Required value"))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(Cause("spec.selector", "FieldValueInvalid", f"Invalid value: \"null\": empty selector is invalid for {kind}"))
    elif not selector_matches(selector, labels):
        causes.append(Cause("spec.template.metadata.labels", "FieldValueInvalid",
                            f"Invalid value: {_go_labels(labels)}: `selector` does not match template `labels`"))
    policy = (template.get("spec") or {}).get("restartPolicy")
    if policy not in (None, "Always"):
        causes.append(Cause("spec.template.spec.restartPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: "Always"'))
    for key in ("replicas", "minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"):
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            causes.append(Cause(f"spec.{key}", "FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0"))
    strategy = spec.get("strategy") or {}
    kind_of_update = strategy.get("type")
    if kind_of_update not in (None, "RollingUpdate", "Recreate"):
        causes.append(_unsupported("spec.strategy.type", kind_of_update, ("Recreate", "RollingUpdate")))
    elif kind_of_update == "Recreate" and strategy.get("rollingUpdate"):
        causes.append(Cause("spec.strategy.rollingUpdate", "FieldValueForbidden",
                            "Forbidden: may not be specified when strategy `type` is 'Recreate'"))
    elif isinstance(strategy.get("rollingUpdate"), dict):
        rolling = strategy["rollingUpdate"]
        surge, surge_causes = _int_or_percent(rolling.get("maxSurge", 0), "spec.strategy.rollingUpdate.maxSurge")
        unavailable, unavailable_causes = _int_or_percent(rolling.get("maxUnavailable", 0), "spec.strategy.rollingUpdate.maxUnavailable")
        causes += surge_causes + unavailable_causes
        if surge == 0 and unavailable == 0:
            causes.append(Cause("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid",
                                "Invalid value: 0: may not be 0 when `maxSurge` is 0"))
    if old is not None and spec.get("selector") != (old.get("spec") or {}).get("selector"):
        causes.append(Cause("spec.selector", "FieldValueInvalid", "Invalid value: field is immutable"))
    if obj.get("kind") == "StatefulSet":
        causes += _validate_statefulset(spec, (old or {}).get("spec") if old is not None else None)
    return causes


def _unsupported(path: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    quoted = ", ".join(f'"{a}"' for a in allowed)
    return Cause(path, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {quoted}')


# The StatefulSet fields an update may change, as kube's validation lists them.
_STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds", "revisionHistoryLimit")


def _validate_statefulset(spec: Obj, old_spec: Obj | None) -> list[Cause]:
    """A StatefulSet's own rules. This cluster serves no PersistentVolumeClaims, so a set that
    asks for per-pod claims is refused rather than run without the storage it expects."""
    causes: list[Cause] = []
    if spec.get("volumeClaimTemplates"):
        causes.append(Cause("spec.volumeClaimTemplates", "FieldValueForbidden",
                            "Forbidden: PersistentVolumeClaims are not served by this cluster; mount a hostPath or "
                            "emptyDir volume from the pod template instead"))
    policy = spec.get("podManagementPolicy")
    if policy not in (None, "OrderedReady", "Parallel"):
        causes.append(_unsupported("spec.podManagementPolicy", policy, ("OrderedReady", "Parallel")))
    strategy = spec.get("updateStrategy") or {}
    kind = strategy.get("type")
    if kind not in (None, "RollingUpdate", "OnDelete"):
        causes.append(_unsupported("spec.updateStrategy.type", kind, ("OnDelete", "RollingUpdate")))
    elif kind == "OnDelete" and strategy.get("rollingUpdate"):
        causes.append(Cause("spec.updateStrategy.rollingUpdate", "FieldValueInvalid",
                            "Invalid value: only allowed for updateStrategy 'RollingUpdate'"))
    partition = (strategy.get("rollingUpdate") or {}).get("partition")
    if isinstance(partition, int) and partition < 0:
        causes.append(Cause("spec.updateStrategy.rollingUpdate.partition", "FieldValueInvalid",
                            f"Invalid value: {partition}: must be greater than or equal to 0"))
    if old_spec is not None and any(spec.get(k) != old_spec.get(k) for k in set(spec) | set(old_spec)
                                    if k not in _STATEFULSET_MUTABLE):
        causes.append(Cause("spec", "FieldValueForbidden",
                            "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                            "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                            "'minReadySeconds' are forbidden"))
    return causes
