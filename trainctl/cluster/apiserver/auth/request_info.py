"""What a request asks to do, in the authorizer's terms, read from its method and path alone.

kube-apiserver decides authorization before it routes, from a ``RequestInfo`` parsed out of
the URL: a user who may not list pods is refused (403) whether or not the resource exists.
This module is that parser: ``/api/v1/namespaces/ns/pods/p/log`` is ``get`` on ``pods/log``
named ``p`` in ``ns``; ``/apis``, ``/version`` or ``/openapi/v3`` are non-resource paths. The
result is a SubjectAccessReview's ``resourceAttributes`` or ``nonResourceAttributes`` dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
# Connecting to a pod's processes is a create whatever the method (kube's websocket GETs too).
_CREATE_ALWAYS = {"exec", "attach", "portforward"}
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def _true(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def attributes(method: str, path: str, query: Mapping[str, str]) -> Obj:
    """The request as authorizer attributes (resource or non-resource)."""
    parts = [p for p in path.split("/") if p]
    method = method.upper()
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return {"path": "/" + "/".join(parts), "verb": method.lower() if method != "HEAD" else "get"}
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""  # what follows (a proxy's path) is not part of it
    if subresource in _CREATE_ALWAYS:
        verb = "create"
    elif method in ("GET", "HEAD"):
        verb = "get" if name else ("watch" if _true(query.get("watch")) else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return {"namespace": namespace, "verb": verb, "group": group, "version": version,
            "resource": resource, "subresource": subresource, "name": name}
