"""Which parts of a pod's spec an update may change, as kube-apiserver's ``ValidatePodUpdate`` decides.

A pod's spec is fixed once it is created: the kubelet started its processes from it, the
scheduler placed it by it, and the ServiceAccount token it holds was issued for it. Only
what kube lets change may change: container and init container images, an
``activeDeadlineSeconds`` set where there was none or lowered, tolerations added (an existing
one may change only its ``tolerationSeconds``), a negative ``terminationGracePeriodSeconds``
raised to 1, and scheduling gates removed. ``spec.nodeName`` is set through the ``binding``
subresource, ephemeral containers through theirs. Anything else is kube's 422, with a short
diff of what changed. Metadata and status are not judged here.
"""

from __future__ import annotations

import json
from typing import Any

from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]

UPDATABLE = ("`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
             "`spec.tolerations` (only additions to existing tolerations),"
             "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


def _semantic(value: Any) -> Any:
    """``value`` with nulls and empty lists and maps left out, as kube's semantic equality
    does not tell an empty list from a missing one."""
    if isinstance(value, dict):
        kept = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _without_seconds(toleration: Any) -> Any:
    return {k: v for k, v in toleration.items() if k != "tolerationSeconds"} if isinstance(toleration, dict) else toleration


def _restore(munged: Obj, old: Obj, key: str) -> None:
    if key in old:
        munged[key] = old[key]
    else:
        munged.pop(key, None)


def _spec_diff(old: Obj, new: Obj) -> str:
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key in old:
                lines.append(f"-   {key}: {json.dumps(old[key], sort_keys=True)},")
            if key in new:
                lines.append(f"+   {key}: {json.dumps(new[key], sort_keys=True)},")
    lines.append("  }")
    return "\n".join(lines)


def validate(new: Obj, old: Obj) -> list[Cause]:
    """What is wrong with ``new`` as an update of pod ``old``."""
    new_spec, old_spec = new.get("spec"), old.get("spec")
    if not isinstance(new_spec, dict) or not isinstance(old_spec, dict):
        return []
    causes: list[Cause] = []
    munged = dict(new_spec)
    for key in ("containers", "initContainers"):  # images may change: compare the rest
        news, olds = munged.get(key), old_spec.get(key)
        if isinstance(news, list) and isinstance(olds, list) and len(news) == len(olds):
            munged[key] = [{**n, "image": o.get("image")} if isinstance(n, dict) and isinstance(o, dict) else n
                           for n, o in zip(news, olds, strict=True)]

    deadline, old_deadline = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if old_deadline is not None:
        if deadline is None:
            causes.append(Cause("spec.activeDeadlineSeconds", "FieldValueInvalid",
                                'Invalid value: "null": must not update from a positive integer to nil value'))
        elif isinstance(deadline, int) and isinstance(old_deadline, int) and deadline > old_deadline:
            causes.append(Cause("spec.activeDeadlineSeconds", "FieldValueInvalid",
                                f"Invalid value: {deadline}: must be less than or equal to previous value"))
    _restore(munged, old_spec, "activeDeadlineSeconds")

    tolerations = [_without_seconds(t) for t in new_spec.get("tolerations") or []]
    if any(_without_seconds(t) not in tolerations for t in old_spec.get("tolerations") or []):
        causes.append(Cause("spec.tolerations", "FieldValueForbidden",
                            "Forbidden: existing toleration can not be modified except its tolerationSeconds"))
    _restore(munged, old_spec, "tolerations")

    grace, old_grace = new_spec.get("terminationGracePeriodSeconds"), old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and grace == 1:
        _restore(munged, old_spec, "terminationGracePeriodSeconds")

    old_gates = old_spec.get("schedulingGates") or []
    added = [g for g in new_spec.get("schedulingGates") or [] if g not in old_gates]
    if added:
        name = added[0].get("name") if isinstance(added[0], dict) else added[0]
        causes.append(Cause("spec.schedulingGates", "FieldValueForbidden",
                            f"Forbidden: only deletion is allowed, but found new scheduling gate '{name}'"))
    _restore(munged, old_spec, "schedulingGates")
    _restore(munged, old_spec, "ephemeralContainers")  # the ephemeralcontainers subresource's

    munged, kept = _semantic(munged), _semantic(old_spec)
    if munged != kept:
        causes.append(Cause("spec", "FieldValueForbidden",
                            f"Forbidden: pod updates may not change fields other than {UPDATABLE}\n"
                            f"{_spec_diff(kept, munged)}"))
    return causes
