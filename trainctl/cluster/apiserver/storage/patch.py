"""The four PATCH content types: JSON patch, JSON merge patch, strategic merge patch and
server-side apply.

JSON patch (RFC 6902) is delegated to ``jsonpatch``. Merge patch (RFC 7386) is a few lines.
Strategic merge patch is Kubernetes' own: lists of objects merge by a key the Go types
declare (containers by ``name``, volumeMounts by ``mountPath`` ...) and the patch carries
directives (``$patch``, ``$setElementOrder/…``, ``$retainKeys``, ``$deleteFromPrimitiveList/…``).
Only built-in kinds accept it; custom resources answer 415, as a real server does.
"""

from __future__ import annotations

import copy
from typing import Any, cast

import jsonpatch
import orjson
import yaml

from trainctl.cluster.apiserver.apimachinery import errors, request_limits

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)

# Field name -> merge key, from the Go types' patchMergeKey tags. Lists not named here (or
# whose items lack the key) are replaced wholesale, which is their strategy in Kubernetes.
_MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "ports": ("containerPort", "port"),  # container ports, then service ports
    "conditions": ("type",),
    "imagePullSecrets": ("name",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey",),
    "resourceClaims": ("name",),
    "containerStatuses": ("name",),
    "initContainerStatuses": ("name",),
    "podIPs": ("ip",),
    "addresses": ("type",),
    "taints": ("key",),
    "subsets": (),
}
# Primitive lists with patchStrategy "merge": merged as sets, in order.
_MERGED_PRIMITIVE_LISTS = {"finalizers"}


async def decoded(body: bytes, content_type: str) -> Any:
    """The patch document, decoded as request bodies are: off the event loop but for small
    JSON (an apply patch is YAML, whose parse a crafted body could make long)."""
    if content_type != APPLY_PATCH and len(body) <= request_limits.INLINE_JSON_BYTES:
        return parse_body(body, content_type)
    return await request_limits.off_loop(parse_body, body, content_type)


def parse_body(body: bytes, content_type: str) -> Any:
    try:
        if content_type == APPLY_PATCH:
            return request_limits.decode_yaml(body.decode("utf-8")) if body.strip() else None
        return request_limits.decode_json(body, "the patch")
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Obj, operations: Any) -> Obj:
    if not isinstance(operations, list):
        raise errors.bad_request("json patch must be a list of operations")
    try:
        return cast("dict[str, Any]", jsonpatch.apply_patch(target, operations))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise errors.ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {exc}") from None
    except (TypeError, KeyError, IndexError, ValueError) as exc:
        raise errors.bad_request(f"invalid json patch: {exc}") from None


def strategic_merge(target: Any, patch: Any, field_name: str = "") -> Any:
    """Apply a strategic merge patch to ``target`` (not modified); returns the result."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if key.startswith("$setElementOrder/") or key.startswith("$deleteFromPrimitiveList/"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, key)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            doomed = set(map(_hashable, value or []))
            if isinstance(result.get(name), list):
                result[name] = [v for v in result[name] if _hashable(v) not in doomed]
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list):
                result[name] = _reorder(result[name], value, name)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _hashable(value: Any) -> Any:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS) if isinstance(value, (dict, list)) else value


def _merge_key(field_name: str, items: list[Any]) -> str | None:
    for key in _MERGE_KEYS.get(field_name, ()):
        if any(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def _merge_list(target: Any, patch: list[Any], field_name: str) -> list[Any]:
    current = list(target) if isinstance(target, list) else []
    if field_name in _MERGED_PRIMITIVE_LISTS:
        merged = list(current)
        for value in patch:
            if value not in merged:
                merged.append(value)
        return merged
    directives = [p for p in patch if isinstance(p, dict) and "$patch" in p and len(p) == 1]
    if any(d["$patch"] == "replace" for d in directives):
        return [copy.deepcopy(p) for p in patch if p not in directives]
    key = _merge_key(field_name, patch + current)
    if key is None:
        return [copy.deepcopy(p) for p in patch if p not in directives]
    merged = list(current)
    for item in patch:
        if not isinstance(item, dict) or item in directives:
            continue
        index = next((i for i, c in enumerate(merged) if isinstance(c, dict) and c.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
            continue
        if index is None:
            merged.append(strategic_merge({}, item, field_name))
        else:
            merged[index] = strategic_merge(merged[index], item, field_name)
    return merged


def _reorder(items: list[Any], order: list[Any], field_name: str) -> list[Any]:
    key = _merge_key(field_name, items)

    def identity(value: Any) -> Any:
        return _hashable(value.get(key) if key and isinstance(value, dict) else value)

    rank = {identity(v): i for i, v in enumerate(order)}
    return sorted(items, key=lambda v: rank.get(identity(v), len(rank)))


def strip_directives(value: Any) -> Any:
    """Remove patch directives from an object used as a whole (apply that creates)."""
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value if not (isinstance(v, dict) and set(v) == {"$patch"})]
    return value
