"""The ``scale`` subresource: a custom resource's or an apps/v1 workload's replica count seen
as an autoscaling/v1 ``Scale``, at the paths its CRD declares (``specReplicasPath``,
``statusReplicasPath``, ``labelSelectorPath``) or its built-in type names.

Pure functions: reading a Scale from an object and computing the object a written Scale
asks for; ``resources`` stores the result like any update of the main resource.
"""

from __future__ import annotations

from typing import Any, cast

from trainctl.cluster.apiserver.apimachinery import errors, jsonpath
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.storage import patch
from trainctl.cluster.apiserver.storage.store import clone
from trainctl.cluster.label_selectors import selector_string

Obj = dict[str, Any]


def _paths(rtype: ResourceType) -> dict[str, str]:
    if not rtype.scale:
        raise errors.page_not_found()
    return rtype.scale


def scale_of(rtype: ResourceType, obj: Obj) -> Obj:
    """The Scale of a stored object."""
    paths = _paths(rtype)
    spec = jsonpath.find(obj, paths["specReplicasPath"])
    status = jsonpath.find(obj, paths.get("statusReplicasPath", ""))
    scale: Obj = {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: obj["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in obj["metadata"]},
        "spec": {"replicas": spec[0] if spec and isinstance(spec[0], int) else 0},
        "status": {"replicas": status[0] if status and isinstance(status[0], int) else 0},
    }
    if paths.get("labelSelectorPath"):
        selector = jsonpath.find(obj, paths["labelSelectorPath"])
        if selector and isinstance(selector[0], str):
            scale["status"]["selector"] = selector[0]
        elif selector and isinstance(selector[0], dict):  # a built-in's LabelSelector, in its text form
            found = selector[0]
            if rtype.kind == "ReplicationController":  # a plain label map there
                found = {"matchLabels": found}
            scale["status"]["selector"] = selector_string(found)
    return scale


def patched(rtype: ResourceType, current: Obj, document: Any, content_type: str) -> Obj:
    """The Scale a patch of ``current``'s Scale gives."""
    scale = scale_of(rtype, current)
    if content_type == patch.JSON_PATCH:
        return patch.json_patch(scale, document)
    if isinstance(document, dict):
        return cast("dict[str, Any]", patch.merge_patch(scale, document))
    raise errors.bad_request("scale patch must be a JSON object")


def scaled(rtype: ResourceType, current: Obj, scale: Any) -> Obj:
    """A copy of ``current`` with the replicas ``scale`` asks for, or why it cannot be."""
    name = current["metadata"]["name"]
    if not isinstance(scale, dict):
        raise errors.bad_request("the body of the request was in an unknown format - expected a Scale object")
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv and rv != current["metadata"]["resourceVersion"]:
        raise errors.conflict(rtype.plural, rtype.group, name,
                              "the object has been modified; please apply your changes to the latest version and try again")
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid("Scale", "autoscaling", name, [Cause(
            "spec.replicas", "FieldValueInvalid", f"Invalid value: {replicas}: must be greater than or equal to 0")])
    fields = jsonpath.fields_of(_paths(rtype)["specReplicasPath"])
    new = clone(current)
    target = new
    for key in fields[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[fields[-1]] = replicas
    return cast("dict[str, Any]", new)
