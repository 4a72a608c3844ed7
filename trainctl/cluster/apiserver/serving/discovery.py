"""Discovery and OpenAPI: how clients learn what the server serves.

Both discovery forms are served: kubectl asks for the aggregated ``apidiscovery.k8s.io/v2``
form and recognises it by the response Content-Type alone; the Python dynamic client only
speaks the legacy ``APIVersions`` / ``APIGroupList`` / ``APIResourceList`` form. The OpenAPI
documents are built by ``openapi``.
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType

Obj = dict[str, Any]

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBERNETES_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0+trainctl", "gitCommit": "",
                      "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
                      "compiler": "gc", "platform": "linux/amd64"}

_SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
_SUBRESOURCE_KINDS = {
    "scale": _SCALE_KIND,
    "log": None,
    "binding": {"group": "", "version": "v1", "kind": "Binding"},
    "eviction": {"group": "policy", "version": "v1", "kind": "Eviction"},
    "token": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
    "exec": {"group": "", "version": "v1", "kind": "PodExecOptions"},
    "attach": {"group": "", "version": "v1", "kind": "PodAttachOptions"},
    "portforward": {"group": "", "version": "v1", "kind": "PodPortForwardOptions"},
}
_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"],
                      "log": ["get"], "binding": ["create"], "eviction": ["create"],
                      "finalize": ["update"], "token": ["create"], "exec": ["create", "get"],
                      "attach": ["create", "get"], "portforward": ["create", "get"],
                      "ephemeralcontainers": ["get", "patch", "update"],
                      "proxy": ["create", "delete", "get", "patch", "update"]}


def wants_aggregated(accept: str) -> bool:
    return "as=APIGroupDiscoveryList" in accept


def _types_by_group(registry: Registry) -> dict[str, dict[str, list[ResourceType]]]:
    groups: dict[str, dict[str, list[ResourceType]]] = {}
    order = registry.group_versions()
    for group, versions in order.items():
        groups[group] = {v: [] for v in versions}
    for rtype in registry:
        groups[rtype.group][rtype.version].append(rtype)
    return groups


def _aggregated_resource(rtype: ResourceType) -> Obj:
    resource: Obj = {
        "resource": rtype.plural,
        "responseKind": {"group": rtype.group, "version": rtype.version, "kind": rtype.kind},
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        "verbs": list(rtype.verbs),
    }
    if rtype.short_names:
        resource["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        resource["categories"] = list(rtype.categories)
    subresources = []
    for sub in rtype.subresources:
        kind = _SUBRESOURCE_KINDS.get(sub, {"group": rtype.group, "version": rtype.version, "kind": rtype.kind})
        entry: Obj = {"subresource": sub, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])}
        if kind:
            entry["responseKind"] = kind
        subresources.append(entry)
    if subresources:
        resource["subresources"] = subresources
    return resource


def aggregated(registry: Registry, core: bool) -> Obj:
    """The APIGroupDiscoveryList for ``/api`` (core) or ``/apis`` (every named group)."""
    items = []
    for group, versions in _types_by_group(registry).items():
        if (group == "") != core:
            continue
        items.append({
            "metadata": {"name": group} if group else {"creationTimestamp": None},
            "versions": [
                {"version": version, "freshness": "Current",
                 "resources": [_aggregated_resource(t) for t in sorted(types, key=lambda t: t.plural)]}
                for version, types in versions.items()
            ],
        })
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def legacy_core(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_entry(group: str, versions: list[str]) -> Obj:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def legacy_groups(registry: Registry) -> Obj:
    groups = [_group_entry(g, v) for g, v in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def legacy_group(registry: Registry, group: str) -> Obj | None:
    versions = registry.group_versions().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    types = sorted((t for t in registry if t.group == group and t.version == version), key=lambda t: t.plural)
    if not types:
        return None
    resources = []
    for rtype in types:
        entry: Obj = {"name": rtype.plural, "singularName": rtype.singular, "namespaced": rtype.namespaced,
                      "kind": rtype.kind, "verbs": list(rtype.verbs)}
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        if rtype.categories:
            entry["categories"] = list(rtype.categories)
        resources.append(entry)
        for sub in rtype.subresources:
            sub_entry: Obj = {"name": f"{rtype.plural}/{sub}", "singularName": "", "namespaced": rtype.namespaced,
                              "kind": rtype.kind, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])}
            kind = _SUBRESOURCE_KINDS.get(sub)
            if sub in _SUBRESOURCE_KINDS:
                if kind is None:
                    sub_entry["kind"] = "Pod"
                else:
                    sub_entry.update(kind)
            resources.append(sub_entry)
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
