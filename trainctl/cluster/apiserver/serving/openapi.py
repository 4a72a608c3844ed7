"""The OpenAPI documents clients read: ``/openapi/v3`` (index and one document per
group/version) and ``/openapi/v2``.

kubectl reads them for ``kubectl explain`` (field docs), to learn that the server validates
fields itself (a ``fieldValidation`` parameter on each kind's PATCH) and to compute
strategic merge patches for built-in kinds (the PATCH request body types and the
``x-kubernetes-patch-*`` extensions). Built-in kinds are described by Kubernetes' own
schemas (``builtin_schemas``); each CRD's kinds by the CRD's ``openAPIV3Schema``, with
``metadata`` pointing at ``ObjectMeta`` and a ``…List`` kind, as apiextensions-apiserver
publishes them. Documents are built when first asked for and kept while the served kinds of
their group/version stay the same; a hashed URL names content that never changes.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, cast

import orjson

from trainctl.cluster.apiserver.admission import builtin_schemas
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType
from trainctl.cluster.apiserver.serving import openapi_proto
from trainctl.cluster.apiserver.serving.discovery import KUBERNETES_VERSION

Obj = dict[str, Any]

V3_PREFIX = "#/components/schemas/"
V2_PREFIX = "#/definitions/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_ALWAYS = (_META + "ObjectMeta", _META + "ListMeta", _META + "Status")
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", "application/apply-patch+yaml")
_TYPE_META_DOCS = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an object. Servers should "
                  "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
                  "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
    "kind": "Kind is a string value representing the REST resource this object represents. Servers may infer this "
            "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
}
_METADATA_DOC = ("Standard object's metadata. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def document_hash(document: Obj) -> str:
    return hashlib.sha512(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32].upper()


# --- schemas in OpenAPI form ------------------------------------------------------------------


def _published(schema: Any, prefix: str) -> Any:
    """A JSON-schema node of ``builtin_schemas`` as OpenAPI writes it: one type (nullability is
    implied), references to ``prefix``, and in v3 a described reference wrapped in ``allOf``."""
    if not isinstance(schema, dict):
        return schema
    out: Obj = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str):
            continue
        if key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            if kept:
                out["type"] = kept[0]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _published(sub, prefix) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _published(value, prefix)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [_published(sub, prefix) for sub in value]
        else:
            out[key] = value
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = prefix + builtin_schemas.ref_name(ref)
        if not out:
            return {"$ref": target}
        if prefix == V3_PREFIX:
            return {"allOf": [{"$ref": target}], **out}
        return {"$ref": target, **out}
    return out


def _builtin_definition(name: str, prefix: str) -> Obj:
    definition = builtin_schemas.definitions()[name]
    if name == _QUANTITY:
        return {"description": "Quantity is a fixed-point representation of a number.", "type": "string"} \
            if prefix == V2_PREFIX else {"oneOf": [{"type": "string"}, {"type": "number"}]}
    if name == _INT_OR_STRING:
        return {"description": "IntOrString is a type that can hold an int32 or a string.", "type": "string",
                "format": "int-or-string"}
    published = _published(definition, prefix)
    if "x-kubernetes-group-version-kind" in definition:
        for key in _TYPE_META_DOCS:  # the packaged schemas pin these with an enum; Kubernetes does not
            published.get("properties", {}).get(key, {}).pop("enum", None)
    return cast("dict[str, Any]", published)


def _crd_name(rtype: ResourceType, kind: str) -> str:
    return ".".join([*reversed(rtype.group.split(".")), rtype.version, kind])


def _crd_definitions(rtype: ResourceType, prefix: str) -> dict[str, Obj]:
    """The kind and its list, from the CRD schema, as apiextensions-apiserver publishes them."""
    schema: Obj = copy.deepcopy(rtype.schema) if isinstance(rtype.schema, dict) else {"type": "object"}
    schema = _without_nullable(schema) if prefix == V2_PREFIX else schema
    properties = schema.setdefault("properties", {})
    for key, doc in _TYPE_META_DOCS.items():
        properties[key] = {**(properties.get(key) or {}), "description": doc, "type": "string"}
    properties["metadata"] = _described_ref(prefix + _META + "ObjectMeta", _METADATA_DOC, prefix)
    schema["type"] = "object"
    schema["x-kubernetes-group-version-kind"] = [{"group": rtype.group, "version": rtype.version, "kind": rtype.kind}]
    name = _crd_name(rtype, rtype.kind)
    return {name: schema, _crd_name(rtype, f"{rtype.kind}List"): _list_definition(rtype, name, prefix)}


def _described_ref(target: str, description: str, prefix: str) -> Obj:
    if prefix == V3_PREFIX:
        return {"allOf": [{"$ref": target}], "description": description}
    return {"$ref": target, "description": description}


def _without_nullable(schema: Any) -> Any:
    """Swagger 2.0 has no ``nullable``."""
    if isinstance(schema, dict):
        return {k: _without_nullable(v) if k != "properties" else {n: _without_nullable(s) for n, s in v.items()}
                for k, v in schema.items() if k != "nullable"}
    if isinstance(schema, list):
        return [_without_nullable(v) for v in schema]
    return schema


def _definitions(types: list[ResourceType], prefix: str) -> dict[str, Obj]:
    """Every schema the kinds of ``types`` need, built-in ones with what they reference."""
    builtin_names: list[str] = []
    custom: dict[str, Obj] = {}
    for rtype in types:
        if rtype.is_custom:
            custom.update(_crd_definitions(rtype, prefix))
            continue
        name = builtin_schemas.name_for(rtype.group, rtype.version, rtype.kind)
        if name is not None:
            builtin_names.append(name)
    schemas = {name: _builtin_definition(name, prefix) for name in builtin_schemas.referenced([*builtin_names, *_ALWAYS])}
    for rtype in types:
        name = builtin_schemas.name_for(rtype.group, rtype.version, rtype.kind)
        if not rtype.is_custom and name is not None:
            schemas[f"{name}List"] = _list_definition(rtype, name, prefix)
    schemas.update(custom)
    return schemas


def _list_definition(rtype: ResourceType, item: str, prefix: str) -> Obj:
    list_kind = f"{rtype.kind}List"
    return {
        "description": f"{list_kind} is a list of {rtype.kind}.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": _TYPE_META_DOCS["apiVersion"], "type": "string"},
            "items": {"description": f"List of {rtype.plural}.", "type": "array", "items": {"$ref": prefix + item}},
            "kind": {"description": _TYPE_META_DOCS["kind"], "type": "string"},
            "metadata": _described_ref(prefix + _META + "ListMeta", "Standard list metadata.", prefix),
        },
        "x-kubernetes-group-version-kind": [{"group": rtype.group, "version": rtype.version, "kind": list_kind}],
    }


def _schema_name(rtype: ResourceType) -> str | None:
    if rtype.is_custom:
        return _crd_name(rtype, rtype.kind)
    return builtin_schemas.name_for(rtype.group, rtype.version, rtype.kind)


# --- paths ------------------------------------------------------------------------------------


def _parameter(name: str, v3: bool, location: str = "query") -> Obj:
    if v3:
        return {"name": name, "in": location, "schema": {"type": "string", "uniqueItems": True}}
    return {"name": name, "in": location, "type": "string", "uniqueItems": True}


def _operation(rtype: ResourceType, action: str, schema_ref: str | None, v3: bool, *,
               params: tuple[str, ...] = (), body_types: tuple[str, ...] = ()) -> Obj:
    gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    operation: Obj = {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                      "parameters": [_parameter(p, v3) for p in params]}
    body_schema = {"$ref": schema_ref} if schema_ref else {"type": "object"}
    if v3:
        operation["responses"] = {"200": {"description": "OK", "content": {"application/json": {"schema": body_schema}}}}
        if body_types:
            operation["requestBody"] = {"required": True,
                                        "content": {t: {"schema": {"type": "object"}} for t in body_types}}
    else:
        operation["responses"] = {"200": {"description": "OK", "schema": body_schema}}
        if body_types:
            operation["consumes"] = list(body_types)
            operation["parameters"].append({"name": "body", "in": "body", "required": True,
                                            "schema": {"type": "object"}})
    return operation


_ACTION_VERBS = {"list": "list", "post": "create", "deletecollection": "deletecollection", "get": "get",
                 "put": "update", "patch": "patch", "delete": "delete"}


def _paths(rtype: ResourceType, prefix: str, v3: bool) -> Obj:
    schema = _schema_name(rtype)
    ref = prefix + schema if schema else None
    list_ref = prefix + (_crd_name(rtype, rtype.kind + "List") if rtype.is_custom else f"{schema}List") if schema else None
    base = f"/{_gv_path(rtype.group, rtype.version)}"
    scope = "/namespaces/{namespace}" if rtype.namespaced else ""
    collection = f"{base}{scope}/{rtype.plural}"
    item = f"{collection}/{{name}}"
    writes = ("dryRun", "fieldManager", "fieldValidation")
    patch_types = tuple(t for t in _PATCH_TYPES if not (rtype.is_custom and "strategic" in t))
    paths: Obj = {
        collection: {
            "get": _operation(rtype, "list", list_ref, v3, params=("labelSelector", "fieldSelector", "limit", "continue",
                                                                      "resourceVersion", "watch")),
            "post": _operation(rtype, "post", ref, v3, params=writes, body_types=("application/json",)),
            "delete": _operation(rtype, "deletecollection", None, v3),
        },
        item: {
            "get": _operation(rtype, "get", ref, v3),
            "put": _operation(rtype, "put", ref, v3, params=writes, body_types=("application/json",)),
            "patch": _operation(rtype, "patch", ref, v3, params=(*writes, "force"), body_types=patch_types),
            "delete": _operation(rtype, "delete", None, v3, params=("dryRun",)),
        },
    }
    for operations in paths.values():  # read-only kinds (metrics.k8s.io) offer only their verbs
        for method in [m for m, op in operations.items() if _ACTION_VERBS[op["x-kubernetes-action"]] not in rtype.verbs]:
            del operations[method]
    if rtype.has_status:
        paths[f"{item}/status"] = {
            "get": _operation(rtype, "get", ref, v3),
            "put": _operation(rtype, "put", ref, v3, params=writes, body_types=("application/json",)),
            "patch": _operation(rtype, "patch", ref, v3, params=(*writes, "force"), body_types=patch_types),
        }
    return paths


def _info() -> Obj:
    return {"title": "Kubernetes", "version": KUBERNETES_VERSION["gitVersion"]}


# --- the documents ----------------------------------------------------------------------------


class Documents:
    """The OpenAPI documents of what ``registry`` serves now, built on demand and cached."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._cache: dict[tuple[str, str] | str, tuple[list[ResourceType], Obj, str]] = {}
        self._v2_protobuf: tuple[str, bytes] = ("", b"")

    def _cached(self, key: tuple[str, str] | str, types: list[ResourceType], build: Any) -> tuple[Obj, str]:
        hit = self._cache.get(key)
        if hit is not None and len(hit[0]) == len(types) and all(a is b for a, b in zip(hit[0], types, strict=True)):
            return hit[1], hit[2]
        document = build(types)
        digest = document_hash(document)
        self._cache[key] = (types, document, digest)
        return document, digest

    def _types(self, group: str, version: str) -> list[ResourceType]:
        return sorted((t for t in self.registry if t.group == group and t.version == version), key=lambda t: t.plural)

    def v3(self, group: str, version: str) -> tuple[Obj, str] | None:
        """The group/version's document and its hash, or None if nothing is served there."""
        types = self._types(group, version)
        if not types:
            return None
        return self._cached((group, version), types, _v3_document)

    def v3_index(self) -> Obj:
        paths = {}
        for group, versions in self.registry.group_versions().items():
            for version in versions:
                found = self.v3(group, version)
                if found is not None:
                    gv = _gv_path(group, version)
                    paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={found[1]}"}
        return {"paths": paths}

    def v2(self) -> tuple[Obj, str]:
        types = sorted(self.registry, key=lambda t: (t.group, t.version, t.plural))
        return self._cached("v2", types, _v2_document)

    def v2_encoded(self, accept: str) -> tuple[bytes, str, str]:
        """The v2 document as (body, content type, hash) in the encoding ``accept`` asks for:
        protobuf (what kubectl asks for) or JSON; 406 for anything else."""
        document, digest = self.v2()
        if openapi_proto.ACCEPT in accept or openapi_proto.CONTENT_TYPE in accept:
            if self._v2_protobuf[0] != digest:
                self._v2_protobuf = (digest, openapi_proto.document(document))
            return self._v2_protobuf[1], openapi_proto.CONTENT_TYPE, digest
        if accepts_json(accept):
            return orjson.dumps(document), "application/json", digest
        raise errors.ApiError(406, "NotAcceptable",
                              "only application/json and protobuf are served for /openapi/v2")


def _v3_document(types: list[ResourceType]) -> Obj:
    paths: Obj = {}
    for rtype in types:
        paths.update(_paths(rtype, V3_PREFIX, v3=True))
    return {"openapi": "3.0.0", "info": _info(), "paths": paths,
            "components": {"schemas": _definitions(types, V3_PREFIX)}}


def _v2_document(types: list[ResourceType]) -> Obj:
    paths: Obj = {}
    for rtype in types:
        paths.update(_paths(rtype, V2_PREFIX, v3=False))
    return {"swagger": "2.0", "info": _info(), "paths": paths, "definitions": _definitions(types, V2_PREFIX)}


def accepts_json(accept: str) -> bool:
    """Whether a client's Accept header allows JSON (kubectl asks for /openapi/v2 as protobuf only)."""
    if not accept:
        return True
    kinds = [part.split(";")[0].strip() for part in accept.split(",")]
    return any(k in ("application/json", "application/*", "*/*") for k in kinds)
