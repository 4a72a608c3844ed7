"""What happens to objects: the REST semantics of every verb, independent of HTTP.

Create, update and patch end in the store's ``put``; in between, this module does what
kube-apiserver's registry strategies do for the kinds served here: naming (generateName),
identity (uid, creationTimestamp), optimistic concurrency, status isolation, generation,
pod binding and CRD registration. What a new state must pass is decided in ``admission``,
deletion and what follows it in ``deletion``, the scale subresource in ``scale``; Service
IPs come from ``ipam`` and dependents are collected by ``gc``.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import logging
import secrets
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import orjson

from trainctl.cluster.apiserver import bootstrap_policy, system_objects
from trainctl.cluster.apiserver.admission import crds
from trainctl.cluster.apiserver.admission.admission import CRD_STORAGE_KEY, Admission
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.registry import Registry, ResourceType
from trainctl.cluster.apiserver.serving.params import WriteOptions
from trainctl.cluster.apiserver.storage import deletion, patch, scale
from trainctl.cluster.apiserver.storage.gc import GarbageCollector
from trainctl.cluster.apiserver.storage.ipam import ClusterIPAllocator
from trainctl.cluster.apiserver.storage.store import Store, clone
from trainctl.kube.timestamps import now_rfc3339

Obj = dict[str, Any]
log = logging.getLogger(__name__)

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-node-lease", "kube-public")
_DEFAULT_WRITE = WriteOptions()
_SEPARATE_EVENTS_KEY = "events.k8s.io/events"


def _without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


class Resources:
    def __init__(self, store: Store, registry: Registry, service_cidr: str = "127.96.0.0/16") -> None:
        self.store = store
        self.registry = registry
        self.admission = Admission(registry)
        self.service_cidr = service_cidr
        self.cluster_ips = ClusterIPAllocator(
            service_cidr, ((svc.get("spec") or {}).get("clusterIP", "") for svc in store.list("/services")))
        self.gc = GarbageCollector(self, store, registry)
        self.deletion = deletion.Deletion(store, registry, self.gc, self.cluster_ips, self._spawn)
        self._background: set[asyncio.Task[Any]] = set()
        for crd in store.list(CRD_STORAGE_KEY):
            self._register_crd(crd)

    async def bootstrap(self) -> None:
        """Create what every cluster has (namespaces, their ServiceAccounts, the default RBAC
        policy: ``system_objects``) and start the garbage collector."""
        ns_type = self._type("namespaces")
        for name in _BOOTSTRAP_NAMESPACES:
            if self.store.get(ns_type.storage_key, "", name) is None:
                await self.create(ns_type, None, {"metadata": {"name": name}})
        for namespace in self.store.list(ns_type.storage_key):  # namespaces older than this rule
            await self._ensure_service_account(namespace)
        for plural, objects in (("clusterroles", bootstrap_policy.cluster_roles()),
                                ("clusterrolebindings", bootstrap_policy.cluster_role_bindings())):
            rtype = self._type(plural, "rbac.authorization.k8s.io")
            for obj in objects:
                if self.store.get(rtype.storage_key, "", obj["metadata"]["name"]) is None:
                    await self.create(rtype, None, obj)
        await self._join_event_stores()
        self._spawn(self.gc.run())

    def _type(self, plural: str, group: str = "") -> ResourceType:
        rtype = self.registry.get(group, "v1", plural)
        assert rtype is not None
        return rtype

    async def keep_publishing(self, host: str, port: int, period: float = 10.0) -> None:
        """Publish the server's address now and then every ``period`` seconds, putting back a
        deleted or changed ``kubernetes`` Service, as kube-apiserver's own controller does."""
        await self.publish_address(host, port)

        async def loop() -> None:
            while True:
                await asyncio.sleep(period)
                try:
                    await self.publish_address(host, port)
                except errors.ApiError as exc:
                    log.warning("cannot restore the kubernetes Service: %s", exc.message)

        self._spawn(loop())

    async def publish_address(self, host: str, port: int) -> None:
        """Point the ``kubernetes`` Service and its Endpoints at where this server listens now."""
        svc_type, ep_type = self._type("services"), self._type("endpoints")
        wanted = system_objects.service(self.service_cidr, port)
        current = self.store.get(svc_type.storage_key, system_objects.NAMESPACE, system_objects.NAME)
        if current is None:
            try:
                await self.create(svc_type, system_objects.NAMESPACE, wanted)
            except errors.ApiError as exc:  # its address taken by a Service made before this rule
                log.warning("the kubernetes Service cannot have %s: %s", wanted["spec"]["clusterIP"], exc)
                del wanted["spec"]["clusterIP"], wanted["spec"]["clusterIPs"]
                await self.create(svc_type, system_objects.NAMESPACE, wanted)
        elif current["spec"].get("ports") != wanted["spec"]["ports"]:
            await self.rewrite(svc_type, current, {**clone(current), "spec": {**current["spec"], "ports": wanted["spec"]["ports"]}})
        address = system_objects.endpoints(host, port)
        current = self.store.get(ep_type.storage_key, system_objects.NAMESPACE, system_objects.NAME)
        if current is None:
            await self.create(ep_type, system_objects.NAMESPACE, address)
        elif current.get("subsets") != address["subsets"]:
            await self.rewrite(ep_type, current, {**clone(current), "subsets": address["subsets"]})

    async def _ensure_service_account(self, namespace: Obj) -> None:
        name = namespace["metadata"]["name"]
        if namespace["metadata"].get("deletionTimestamp"):
            return
        sa_type = self._type("serviceaccounts")
        if self.store.get(sa_type.storage_key, name, system_objects.DEFAULT_SERVICE_ACCOUNT) is None:
            try:
                await self.create(sa_type, name, system_objects.service_account(name))
            except errors.ApiError as exc:
                if exc.reason != "AlreadyExists":
                    raise

    def _admit_service_account(self, pod: Obj) -> None:
        """kube's ServiceAccount admission: a pod runs as ``default`` unless it names another,
        and the account must exist."""
        spec, meta = pod.setdefault("spec", {}), pod["metadata"]
        if not isinstance(spec, dict):
            return
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or system_objects.DEFAULT_SERVICE_ACCOUNT
        spec["serviceAccountName"] = spec["serviceAccount"] = name
        if self.store.read("/serviceaccounts", meta.get("namespace") or "", name) is None:
            raise errors.ApiError(403, "Forbidden", f'pods "{meta.get("name")}" is forbidden: error looking up service '
                                  f'account {meta.get("namespace")}/{name}: serviceaccount "{name}" not found',
                                  {"name": meta.get("name"), "kind": "pods"})

    async def _join_event_stores(self) -> None:
        """Earlier versions of this server kept ``events.k8s.io`` Events apart from core
        Events; move any such Event into the one store, as a core Event."""
        events = self.registry.get("events.k8s.io", "v1", "events")
        assert events is not None
        for obj in self.store.list(_SEPARATE_EVENTS_KEY):
            meta = obj["metadata"]
            await self.store.remove(_SEPARATE_EVENTS_KEY, obj)
            if self.store.get(events.storage_key, meta.get("namespace") or "", meta["name"]) is None:
                await self.store.put(events.storage_key, events.stored(clone(obj)))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def _register_crd(self, crd: Obj) -> None:
        self.registry.serve_crd(crd, crds.resource_types(crd))

    # --- reads --------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.read(rtype.storage_key, namespace or "", name)
        if obj is None:
            raise errors.not_found(rtype.plural, rtype.group, name)
        return rtype.view(obj)

    # Past this method, ``list`` in an annotation means it: they spell the type ``builtins.list``.
    def list(self, rtype: ResourceType, namespace: str | None, matches: Callable[[Obj], bool],
             limit: int = 0, continue_token: str | None = None) -> tuple[list[Obj], Obj]:
        """Matching objects in (namespace, name) order and the list metadata."""
        objects = self.store.read_list(rtype.storage_key, namespace)
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
            items.append(rtype.view(obj))
            last = key
        meta: Obj = {"resourceVersion": str(self.store.committed_rv)}
        if remaining and last is not None:
            token = {"rv": self.store.committed_rv, "start": list(last)}
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
                                  f"{rtype.plural} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                                  {"group": rtype.group, "kind": rtype.plural})

    async def create(self, rtype: ResourceType, namespace: str | None, body: Any, *,
                     options: WriteOptions = _DEFAULT_WRITE) -> tuple[Obj, builtins.list[str]]:
        obj = self.admission.check_type(rtype, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        self.admission.check_name(rtype, obj)
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
        if rtype.plural == "pods" and not rtype.group:
            self._admit_service_account(obj)
        warnings = self._admit(rtype, obj, None, options.field_validation)
        if options.dry_run:
            return obj, warnings
        if rtype.is_service:
            self.cluster_ips.assign(obj, None)
        obj = rtype.stored(obj)
        committed = self.store.put(rtype.storage_key, obj)
        if rtype.storage_key == CRD_STORAGE_KEY:
            self._register_crd(obj)  # served from the moment it is stored, like the CRD itself
        try:
            await committed
        except errors.ApiError:  # not stored: take back what was set up for it
            if rtype.is_service:
                self.cluster_ips.release(obj)
            if rtype.storage_key == CRD_STORAGE_KEY:
                self.registry.remove_crd(meta["name"])
            raise
        if meta.get("ownerReferences"):
            self.gc.check_owners_exist(obj)
        if rtype.plural == "namespaces" and not rtype.group:
            await self._ensure_service_account(obj)
        return rtype.view(obj), warnings

    def _admit(self, rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str, *,
               subresource: str | None = None) -> builtins.list[str]:
        """Defaulting, pruning, validation and limits of a new state (``admission.Admission.admit``)."""
        return self.admission.admit(rtype, obj, old, field_validation, subresource=subresource)

    # --- update -------------------------------------------------------------------------

    async def update(self, rtype: ResourceType, namespace: str | None, name: str, body: Any, *,
                     subresource: str | None = None, options: WriteOptions = _DEFAULT_WRITE) -> tuple[Obj, builtins.list[str]]:
        old = deletion.existing(self.store, rtype, namespace, name)
        new = self.admission.check_type(rtype, body, namespace)
        if new["metadata"].get("name", name) != name:
            raise errors.bad_request(f"the name of the object ({new['metadata'].get('name')}) does not match the name on the URL ({name})")
        return await self._update(rtype, old, new, subresource=subresource, options=options)

    async def rewrite(self, rtype: ResourceType, current: Obj, new: Obj) -> Obj:
        """Write a new state of a stored object as an update of the main resource would."""
        obj, _ = await self._update(rtype, current, new)
        return obj

    async def _update(self, rtype: ResourceType, old: Obj, new: Obj, *, subresource: str | None = None,
                      options: WriteOptions = _DEFAULT_WRITE) -> tuple[Obj, builtins.list[str]]:
        old = rtype.view(old) if rtype.conversion is not None else old  # judged as the client writes it
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
        warnings = self._admit(rtype, new, old, options.field_validation, subresource=subresource)
        ignored = ("metadata", "status") if rtype.has_status else ("metadata",)
        if _without(new, *ignored, "apiVersion") != _without(old, *ignored, "apiVersion"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if rtype.is_service:
            self.cluster_ips.assign(new, old)
        if new == old:
            return rtype.view(old), warnings  # a no-op write changes nothing, not even resourceVersion
        if options.dry_run:
            return new, warnings
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            await self.deletion.remove(rtype, new)
            return rtype.view(new), warnings
        new = rtype.stored(new)
        committed = self.store.put(rtype.storage_key, new)
        if rtype.storage_key == CRD_STORAGE_KEY:
            self._register_crd(new)
        try:
            await committed
        except errors.ApiError:
            if rtype.storage_key == CRD_STORAGE_KEY:
                self._register_crd(old)
            raise
        return rtype.view(new), warnings

    # --- patch --------------------------------------------------------------------------

    async def patch(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes, *,
                    content_type: str, subresource: str | None = None,
                    options: WriteOptions = _DEFAULT_WRITE) -> tuple[Obj, bool, builtins.list[str]]:
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
                obj, warnings = await self.create(rtype, namespace, document, options=options)
                return obj, True, warnings
            raise errors.not_found(rtype.plural, rtype.group, name)
        if subresource == "scale":
            return await self._write_scale(rtype, current, scale.patched(rtype, current, document, content_type)), False, []
        base = rtype.view(current)
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
        patched = self.admission.check_type(rtype, clone(patched), namespace)
        if patched["metadata"].get("name") != name:
            raise errors.invalid(rtype.kind, rtype.group, name, [Cause("metadata.name", "FieldValueInvalid", "field is immutable")])
        obj, warnings = await self._update(rtype, current, patched, subresource=subresource, options=options)
        return obj, False, warnings

    # --- pods ---------------------------------------------------------------------------

    async def bind(self, rtype: ResourceType, namespace: str | None, name: str, binding: Any) -> None:
        pod = deletion.existing(self.store, rtype, namespace, name)
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

    # --- scale ---------------------------------------------------------------------------

    def get_scale(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        return scale.scale_of(rtype, self.get(rtype, namespace, name))

    async def update_scale(self, rtype: ResourceType, namespace: str | None, name: str, body: Any) -> Obj:
        current = deletion.existing(self.store, rtype, namespace, name)
        return await self._write_scale(rtype, current, body)

    async def _write_scale(self, rtype: ResourceType, current: Obj, new_scale: Any) -> Obj:
        obj = await self.rewrite(rtype, current, scale.scaled(rtype, current, new_scale))
        return scale.scale_of(rtype, obj)

    # --- delete ----------------------------------------------------------------------------

    async def delete(self, rtype: ResourceType, namespace: str | None, name: str, options: Obj | None = None,
                     dry_run: bool = False) -> tuple[Obj, bool]:
        """Returns (the object as it now is, whether it is gone); see ``deletion``."""
        return await self.deletion.delete(rtype, namespace, name, options, dry_run)
