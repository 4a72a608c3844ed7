"""What happens to objects: the REST semantics of every verb, independent of HTTP.

Create, update, patch and delete all end in the store's ``put`` / ``remove``; in between,
this module does what kube-apiserver's registry strategies do for the kinds served here:
naming (generateName), identity (uid, creationTimestamp), optimistic concurrency, status
isolation, generation, CRD schemas, the scale subresource, pod binding and graceful
deletion, finalizers and deletion propagation, and namespace and CRD clean-up. Service IPs
come from ``ipam``, dependents are collected by ``gc``, built-in kinds are checked by
``validation``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from . import builtin_validation, crds, errors, jsonpath, patch, schema, validation
from .errors import Cause
from .gc import FOREGROUND, GarbageCollector
from .ipam import ClusterIPAllocator
from .registry import Registry, ResourceType, pod_qos_class
from .store import Store, clone

Obj = dict[str, Any]
log = logging.getLogger(__name__)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-node-lease", "kube-public")
_UNDELETABLE_NAMESPACES = {"default", "kube-system", "kube-public"}
_TERMINAL_PHASES = {"Succeeded", "Failed"}


def now_rfc3339(offset_seconds: float = 0) -> str:
    moment = datetime.now(timezone.utc) + timedelta(seconds=offset_seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


class Resources:
    def __init__(self, store: Store, registry: Registry, service_cidr: str = "127.96.0.0/16") -> None:
        self.store = store
        self.registry = registry
        self.cluster_ips = ClusterIPAllocator(
            service_cidr, ((svc.get("spec") or {}).get("clusterIP", "") for svc in store.list("/services")))
        self.gc = GarbageCollector(self, store)
        self._background: set[asyncio.Task[Any]] = set()
        for crd in store.list(self._crd_type.storage_key):
            self._register_crd(crd)

    @property
    def _crd_type(self) -> ResourceType:
        rtype = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert rtype is not None
        return rtype

    async def bootstrap(self) -> None:
        """Create what every cluster has (namespaces) and start the garbage collector."""
        ns_type = self.registry.get("", "v1", "namespaces")
        assert ns_type is not None
        for name in _BOOTSTRAP_NAMESPACES:
            if self.store.get(ns_type.storage_key, "", name) is None:
                await self.create(ns_type, None, {"metadata": {"name": name}})
        self._spawn(self.gc.run())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    # --- reads --------------------------------------------------------------------------

    def _view(self, rtype: ResourceType, obj: Obj) -> Obj:
        """The stored object as read through ``rtype``'s version."""
        if obj.get("apiVersion") != rtype.api_version:
            return {**obj, "apiVersion": rtype.api_version}
        return obj

    def _existing(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(rtype.storage_key, namespace or "", name)
        if obj is None:
            raise errors.not_found(rtype.plural, rtype.group, name)
        return obj

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        return self._view(rtype, self._existing(rtype, namespace, name))

    def list(self, rtype: ResourceType, namespace: str | None, matches: Callable[[Obj], bool],
             limit: int = 0, continue_token: str | None = None) -> tuple[list[Obj], Obj]:
        """Matching objects in (namespace, name) order and the list metadata."""
        objects = self.store.list(rtype.storage_key, namespace)
        start: tuple[str, str] | None = None
        if continue_token:
            try:
                decoded = orjson.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start = (decoded["start"][0], decoded["start"][1])
            except (ValueError, KeyError, IndexError, TypeError):
                raise errors.bad_request("continue key is not valid: illegal base64 data") from None
        items: list[Obj] = []
        remaining = 0
        last: tuple[str, str] | None = None
        for obj in objects:
            key = (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
            if start is not None and key <= start:
                continue
            if not matches(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(self._view(rtype, obj))
            last = key
        meta: Obj = {"resourceVersion": str(self.store.rv)}
        if remaining and last is not None:
            token = {"rv": self.store.rv, "start": list(last)}
            meta["continue"] = base64.urlsafe_b64encode(orjson.dumps(token)).decode()
            meta["remainingItemCount"] = remaining
        return items, meta

    # --- create -------------------------------------------------------------------------

    def _check_namespace(self, rtype: ResourceType, namespace: str | None) -> None:
        if not rtype.namespaced:
            return
        ns = self.store.get("/namespaces", "", namespace or "")
        if ns is None:
            raise errors.not_found("namespaces", "", namespace or "")
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.ApiError(403, "Forbidden",
                                  f"{rtype.plural} is forbidden: unable to create new content in namespace {namespace} because it is being terminated")

    def _check_type(self, rtype: ResourceType, body: Any, namespace: str | None) -> Obj:
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

    def _check_name(self, rtype: ResourceType, obj: Obj) -> None:
        name = obj["metadata"].get("name")
        if not name:
            raise errors.invalid(rtype.kind, rtype.group, "", [Cause(
                "metadata.name", "FieldValueRequired", "Required value: name or generateName is required")])
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise errors.invalid(rtype.kind, rtype.group, name, [Cause(
                "metadata.name", "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
                "characters, '-' or '.', and must start and end with an alphanumeric character")])

    async def create(self, rtype: ResourceType, namespace: str | None, body: Any,
                     field_validation: str = "Warn", dry_run: bool = False) -> tuple[Obj, list[str]]:
        obj = self._check_type(rtype, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        self._check_name(rtype, obj)
        self._check_namespace(rtype, meta.get("namespace"))
        if self.store.get(rtype.storage_key, meta.get("namespace") or "", meta["name"]) is not None:
            raise errors.already_exists(rtype.plural, rtype.group, meta["name"])
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "managedFields", "selfLink"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        if rtype.status_on_create:
            obj.pop("status", None)
        warnings = self._admit(rtype, obj, None, field_validation)
        if dry_run:
            return obj, warnings
        if rtype.is_service:
            self.cluster_ips.assign(obj, None)
        committed = self.store.put(rtype.storage_key, obj)
        if rtype.storage_key == self._crd_type.storage_key:
            self._register_crd(obj)  # served from the moment it is stored, like the CRD itself
        await committed
        if meta.get("ownerReferences"):
            self.gc.check_owners_exist(obj)
        return self._view(rtype, obj), warnings

    def _admit(self, rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str) -> list[str]:
        """Defaulting, pruning and validation of a new state; returns warnings."""
        warnings: list[str] = []
        name = obj["metadata"].get("name", "")
        if rtype.defaulter is not None:
            rtype.defaulter(obj)
        if not rtype.is_custom:  # hook: built-in kinds checked against Kubernetes' schemas (builtin_validation)
            warnings += builtin_validation.admit(rtype, obj, old, field_validation)
        if rtype.plural == "pods" and not rtype.group:
            if old is None:
                obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(obj)}
            causes = validation.validate_pod(obj)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
        if rtype.storage_key == self._crd_type.storage_key:
            crds.crd_defaults(obj)
            causes = crds.validate_crd(obj)
            if causes:
                raise errors.invalid(rtype.kind, rtype.group, name, causes)
            if old is not None and old["spec"].get("names", {}).get("plural") != obj["spec"].get("names", {}).get("plural"):
                raise errors.invalid(rtype.kind, rtype.group, name, [Cause("spec.names.plural", "FieldValueInvalid", "field is immutable")])
            obj["status"] = crds.established_status(obj if old is None else {**obj, "status": old.get("status")}, now_rfc3339())
        if rtype.schema is not None:
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

    # --- update -------------------------------------------------------------------------

    async def update(self, rtype: ResourceType, namespace: str | None, name: str, body: Any,
                     subresource: str | None = None, field_validation: str = "Warn",
                     dry_run: bool = False) -> tuple[Obj, list[str]]:
        old = self._existing(rtype, namespace, name)
        new = self._check_type(rtype, body, namespace)
        if new["metadata"].get("name", name) != name:
            raise errors.bad_request(f"the name of the object ({new['metadata'].get('name')}) does not match the name on the URL ({name})")
        return await self._update(rtype, old, new, subresource, field_validation, dry_run)

    async def rewrite(self, rtype: ResourceType, current: Obj, new: Obj) -> Obj:
        """Write a new state of a stored object as an update of the main resource would."""
        obj, _ = await self._update(rtype, current, new, None)
        return obj

    async def _update(self, rtype: ResourceType, old: Obj, new: Obj, subresource: str | None,
                      field_validation: str = "Warn", dry_run: bool = False) -> tuple[Obj, list[str]]:
        name = old["metadata"]["name"]
        uid = new["metadata"].get("uid")
        if uid and uid != old["metadata"].get("uid"):  # written for an object that was deleted and recreated
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata'].get('uid')}")
        rv = new["metadata"].get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  "the object has been modified; please apply your changes to the latest version and try again")
        if subresource == "status":
            status = new.get("status")
            new = {k: v for k, v in clone(old).items() if k != "status"}
            if status is not None:
                new["status"] = status
        else:
            meta = new["metadata"]
            for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
                else:
                    meta.pop(key, None)
            meta["name"] = name
            meta.pop("managedFields", None)
            meta.pop("selfLink", None)
            if rtype.has_status:
                if "status" in old:
                    new["status"] = clone(old["status"])
                else:
                    new.pop("status", None)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        warnings = [] if subresource == "status" and rtype.schema is None else self._admit(rtype, new, old, field_validation)
        ignored = ("metadata", "status") if rtype.has_status else ("metadata",)
        if _without(new, *ignored, "apiVersion") != _without(old, *ignored, "apiVersion"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if rtype.is_service:
            self.cluster_ips.assign(new, old)
        if new == old:
            return self._view(rtype, old), warnings  # a no-op write changes nothing, not even resourceVersion
        if dry_run:
            return new, warnings
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            await self._remove(rtype, new)
            return self._view(rtype, new), warnings
        committed = self.store.put(rtype.storage_key, new)
        if rtype.storage_key == self._crd_type.storage_key:
            self._register_crd(new)
        await committed
        return self._view(rtype, new), warnings

    # --- patch --------------------------------------------------------------------------

    async def patch(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes,
                    content_type: str, subresource: str | None = None, field_validation: str = "Warn",
                    dry_run: bool = False, force: bool = False) -> tuple[Obj, bool, list[str]]:
        """Returns (object, created, warnings); only server-side apply creates."""
        if content_type not in patch.PATCH_TYPES:
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: {', '.join(patch.PATCH_TYPES)}")
        if content_type == patch.STRATEGIC_MERGE_PATCH and rtype.is_custom:
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{patch.JSON_PATCH}, {patch.MERGE_PATCH}, {patch.APPLY_PATCH}")
        document = patch.parse_body(body, content_type)
        current = self.store.get(rtype.storage_key, namespace or "", name)
        if current is None:
            if content_type == patch.APPLY_PATCH and subresource is None:
                if not isinstance(document, dict):
                    raise errors.bad_request("apply patch must be an object")
                document = patch.strip_directives(document)
                document.setdefault("metadata", {}).setdefault("name", name)
                obj, warnings = await self.create(rtype, namespace, document, field_validation, dry_run)
                return obj, True, warnings
            raise errors.not_found(rtype.plural, rtype.group, name)
        if subresource == "scale":
            return await self._patch_scale(rtype, current, document, content_type), False, []
        base = self._view(rtype, current)
        if content_type == patch.JSON_PATCH:
            patched = patch.json_patch(base, document)
        elif content_type == patch.MERGE_PATCH:
            if not isinstance(document, dict):
                raise errors.bad_request("merge patch must be a JSON object")
            patched = patch.merge_patch(base, document)
        elif content_type == patch.STRATEGIC_MERGE_PATCH:
            if not isinstance(document, dict):
                raise errors.bad_request("strategic merge patch must be a JSON object")
            patched = patch.strategic_merge(base, document)
        else:
            if not isinstance(document, dict):
                raise errors.bad_request("apply patch must be an object")
            applied = patch.strip_directives(document)
            meta = applied.get("metadata") or {}
            if meta.get("name", name) != name:
                raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
            patched = patch.strategic_merge(base, applied) if not rtype.is_custom else patch.merge_patch(base, applied)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        patched = self._check_type(rtype, clone(patched), namespace)
        if patched["metadata"].get("name") != name:
            raise errors.invalid(rtype.kind, rtype.group, name, [Cause("metadata.name", "FieldValueInvalid", "field is immutable")])
        obj, warnings = await self._update(rtype, current, patched, subresource, field_validation, dry_run)
        return obj, False, warnings

    # --- scale --------------------------------------------------------------------------

    def _scale_paths(self, rtype: ResourceType) -> dict[str, str]:
        if not rtype.scale:
            raise errors.page_not_found()
        return rtype.scale

    def get_scale(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        return self._scale_of(rtype, self._existing(rtype, namespace, name))

    def _scale_of(self, rtype: ResourceType, obj: Obj) -> Obj:
        paths = self._scale_paths(rtype)
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
        return scale

    async def update_scale(self, rtype: ResourceType, namespace: str | None, name: str, body: Any) -> Obj:
        current = self._existing(rtype, namespace, name)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was in an unknown format - expected a Scale object")
        return await self._write_scale(rtype, current, body)

    async def _patch_scale(self, rtype: ResourceType, current: Obj, document: Any, content_type: str) -> Obj:
        scale = self._scale_of(rtype, current)
        if content_type == patch.JSON_PATCH:
            new_scale = patch.json_patch(scale, document)
        elif isinstance(document, dict):
            new_scale = patch.merge_patch(scale, document)
        else:
            raise errors.bad_request("scale patch must be a JSON object")
        return await self._write_scale(rtype, current, new_scale)

    async def _write_scale(self, rtype: ResourceType, current: Obj, scale: Obj) -> Obj:
        name = current["metadata"]["name"]
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  "the object has been modified; please apply your changes to the latest version and try again")
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", name, [Cause(
                "spec.replicas", "FieldValueInvalid", f"Invalid value: {replicas}: must be greater than or equal to 0")])
        fields = jsonpath.fields_of(self._scale_paths(rtype)["specReplicasPath"])
        new = clone(current)
        target = new
        for key in fields[:-1]:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[fields[-1]] = replicas
        obj, _ = await self._update(rtype, current, new, None)
        return self._scale_of(rtype, obj)

    # --- pods ---------------------------------------------------------------------------

    async def bind(self, rtype: ResourceType, namespace: str | None, name: str, binding: Any) -> None:
        pod = self._existing(rtype, namespace, name)
        target = binding.get("target") if isinstance(binding, dict) else None
        node = target.get("name") if isinstance(target, dict) else None
        if not node:
            raise errors.invalid("Binding", "", name, [Cause("target.name", "FieldValueRequired", "Required value")])
        if pod.get("spec", {}).get("nodeName"):
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  f"pod {name} is already assigned to node \"{pod['spec']['nodeName']}\"")
        new = clone(pod)
        new["spec"]["nodeName"] = node
        conditions = [c for c in new.setdefault("status", {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now_rfc3339()})
        new["status"]["conditions"] = conditions
        await self.store.put(rtype.storage_key, new)

    # --- delete -------------------------------------------------------------------------

    async def delete(self, rtype: ResourceType, namespace: str | None, name: str, options: Obj | None = None,
                     dry_run: bool = False) -> tuple[Obj, bool]:
        """Returns (the object as it now is, whether it is gone)."""
        options = options or {}
        obj = self._existing(rtype, namespace, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"].get("uid"):
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {obj['metadata'].get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {obj['metadata']['resourceVersion']}")
        if rtype.namespaced is False and rtype.plural == "namespaces" and name in _UNDELETABLE_NAMESPACES:
            raise errors.ApiError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        if dry_run:
            return self._view(rtype, obj), True
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise errors.invalid("DeleteOptions", "", name, [Cause("propagationPolicy", "FieldValueNotSupported",
                                 f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"')])
        grace = options.get("gracePeriodSeconds")
        if policy == "Orphan":
            await self.gc.orphan_dependents(obj)
            obj = self._existing(rtype, namespace, name)  # it may have changed meanwhile
        new = clone(obj)
        meta = new["metadata"]
        changed = False
        if policy == "Foreground" and self.store.dependents(meta["uid"]) and FOREGROUND not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND]
            changed = True
        if rtype.plural == "namespaces" and not rtype.group:
            return await self._delete_namespace(rtype, new), False
        graceful = self._grace_period(rtype, obj, grace)
        if meta.get("deletionTimestamp"):
            # Deleting again may only shorten a pod's grace period; zero removes it now.
            if not graceful and not meta.get("finalizers"):
                await self._remove(rtype, obj)
                return self._view(rtype, obj), True
            if graceful < (meta.get("deletionGracePeriodSeconds") or 0):
                meta["deletionTimestamp"] = now_rfc3339(graceful)
                meta["deletionGracePeriodSeconds"] = graceful
                changed = True
        elif graceful or meta.get("finalizers"):
            meta["deletionTimestamp"] = now_rfc3339(graceful)
            meta["deletionGracePeriodSeconds"] = graceful
            meta["generation"] = meta.get("generation", 1) + 1
            changed = True
        else:
            await self._remove(rtype, obj)
            return self._view(rtype, obj), True
        if not changed:
            return self._view(rtype, obj), False
        await self.store.put(rtype.storage_key, new)
        if FOREGROUND in (meta.get("finalizers") or []):
            self.gc.enqueue(meta["uid"])
        return self._view(rtype, new), False

    def _grace_period(self, rtype: ResourceType, obj: Obj, requested: Any) -> int:
        """Seconds the object stays (terminating) before removal: only bound, running pods wait."""
        if rtype.group or rtype.plural != "pods":
            return 0
        if not obj.get("spec", {}).get("nodeName") or (obj.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            return 0
        if isinstance(requested, int) and not isinstance(requested, bool) and requested >= 0:
            return requested
        default = obj.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        return default if isinstance(default, int) and default >= 0 else 30

    async def delete_collection(self, rtype: ResourceType, namespace: str | None, matches: Callable[[Obj], bool],
                                options: Obj | None = None) -> list[Obj]:
        items, _ = self.list(rtype, namespace, matches)
        deleted = []
        for obj in items:
            try:
                result, _gone = await self.delete(rtype, namespace or obj["metadata"].get("namespace"), obj["metadata"]["name"], options)
                deleted.append(result)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        return deleted

    async def _remove(self, rtype: ResourceType, obj: Obj) -> None:
        """Remove ``obj`` from storage. What must follow (garbage collection, namespace and
        CRD clean-up) is set in motion before waiting for the commit, so a client that hangs
        up meanwhile cannot leave it undone."""
        current = self.store.get(rtype.storage_key, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        if current is None:
            return
        committed = self.store.remove(rtype.storage_key, current)
        meta = current["metadata"]
        if rtype.is_service:
            self.cluster_ips.release(current)
        if rtype.storage_key == self._crd_type.storage_key:
            self._remove_crd(current)
        self.gc.enqueue(meta["uid"])
        for owner in meta.get("ownerReferences") or []:
            # An owner waiting in foreground deletion may now be free to go.
            self.gc.enqueue(owner.get("uid", ""))
        if meta.get("namespace"):
            ns = self.store.get("/namespaces", "", meta["namespace"])
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self._spawn(self._finish_namespace(meta["namespace"]))
        await committed

    async def _delete_namespace(self, rtype: ResourceType, ns: Obj) -> Obj:
        """Mark the namespace Terminating; its contents go in the background, then it does."""
        name = ns["metadata"]["name"]
        ns["status"] = {"phase": "Terminating"}
        if not ns["metadata"].get("deletionTimestamp"):
            ns["metadata"]["deletionTimestamp"] = now_rfc3339()
            ns["metadata"]["deletionGracePeriodSeconds"] = 0
        committed = self.store.put(rtype.storage_key, ns)
        self._spawn(self._empty_namespace(name))
        await committed
        return self._view(rtype, ns)

    async def _empty_namespace(self, name: str) -> None:
        for resource, obj in list(self.store.namespaced_resources(name)):
            rtype_of = self.type_for_storage(resource)
            if rtype_of is None:
                continue
            with contextlib.suppress(errors.ApiError):  # already gone, or held by a finalizer
                await self.delete(rtype_of, name, obj["metadata"]["name"], {"gracePeriodSeconds": 0})
        await self._finish_namespace(name)

    async def _finish_namespace(self, name: str) -> None:
        ns = self.store.get("/namespaces", "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if any(True for _ in self.store.namespaced_resources(name)):
            return
        ns_type = self.registry.get("", "v1", "namespaces")
        assert ns_type is not None
        await self._remove(ns_type, ns)

    def type_for_storage(self, resource: str) -> ResourceType | None:
        group, _, plural = resource.partition("/")
        versions = self.registry.versions_of(group, plural)
        return versions[0] if versions else None

    # --- custom resource definitions ------------------------------------------------------

    def _register_crd(self, crd: Obj) -> None:
        self.registry.remove_crd(crd["metadata"]["name"])
        for rtype in crds.resource_types(crd):
            self.registry.add(rtype)

    def _remove_crd(self, crd: Obj) -> None:
        """Stop serving a deleted CRD's kinds and remove its objects (not waiting for them)."""
        spec = crd["spec"]
        key = f"{spec['group']}/{spec['names']['plural']}"
        for obj in self.store.list(key):
            self.store.remove(key, obj)
            self.gc.enqueue(obj["metadata"]["uid"])
        self.registry.remove_crd(crd["metadata"]["name"])
