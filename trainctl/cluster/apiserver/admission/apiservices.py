"""APIServices (apiregistration.k8s.io/v1): registered, validated, never proxied.

kube-apiserver's aggregation layer forwards a group version named by an APIService to the
Service behind it (an extension API server such as metrics-server). This server does not
aggregate, so an APIService is kept and shown for what it is: one with a ``service`` is
``Available: False`` from the moment it is created, with the reason kube's availability
controller gives an extension server it cannot discover, and its group is not served; one
without (``Local``, the group served by this server itself) is ``Available: True``, as kube
reports its own.
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]
NOT_AGGREGATED = "this API server does not proxy to extension API servers (no API aggregation)"


def validate(service: Obj) -> list[Cause]:
    """kube's ``ValidateAPIService`` rules for the name and the priorities."""
    spec = service.get("spec") or {}
    causes = []
    name = (service.get("metadata") or {}).get("name", "")
    expected = f"{spec.get('version', '')}.{spec.get('group', '')}"
    if name != expected:
        causes.append(Cause("metadata.name", "FieldValueInvalid",
                            f'Invalid value: "{name}": must be `spec.version+"."+spec.group`: "{expected}"'))
    for key, bound in (("groupPriorityMinimum", 20000), ("versionPriority", 1000)):
        value = spec.get(key)
        if not isinstance(value, int) or not 0 < value <= bound:
            causes.append(Cause(f"spec.{key}", "FieldValueInvalid",
                                f"Invalid value: {value}: {key} must be positive and less than {bound}"))
    return causes


def initial_status(service: Obj, now: str) -> Obj:
    """The ``Available`` condition of a new APIService."""
    if (service.get("spec") or {}).get("service") is None:
        condition = {"status": "True", "reason": "Local", "message": "Local APIServices are always available"}
    else:
        condition = {"status": "False", "reason": "FailedDiscoveryCheck", "message": NOT_AGGREGATED}
    return {"conditions": [{"type": "Available", **condition, "lastTransitionTime": now}]}
