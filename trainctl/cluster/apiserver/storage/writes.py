"""Writes: what create, update, patch and the pod and scale subresources do before the store's ``put``.

This is what kube-apiserver's registry strategies do for the kinds served here: naming
(generateName), identity (uid, creationTimestamp), optimistic concurrency, status isolation,
generation, pod binding, the ServiceAccount a pod runs as and CRD registration. What a new
state must pass is decided in ``admission``; a write that ends a deletion hands the object to
``deletion``; Service IPs come from ``ipam``.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from trainctl.cluster.apiserver import system_objects
from trainctl.cluster.apiserver.admission import crds, ephemeral_containers, limit_ranges, priority, resource_quotas
from trainctl.cluster.apiserver.admission.admission import CRD_STORAGE_KEY, Admission
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType
from trainctl.cluster.apiserver.storage import deletion, managed_fields, patch, scale_subresource
from trainctl.cluster.apiserver.storage.deletion import Deletion
from trainctl.cluster.apiserver.storage.gc import GarbageCollector
from trainctl.cluster.apiserver.storage.ipam import ClusterIPAllocator
from trainctl.cluster.apiserver.storage.store import Store, clone
from trainctl.kube.timestamps import now_rfc3339

Obj = dict[str, Any]

RESOURCE_QUOTAS = "/resourcequotas"
LIMIT_RANGES = "/limitranges"
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class WriteOptions:
    field_validation: str = "Warn"  # what unknown fields get: Ignore, Warn (a warning) or Strict (a 400)
    dry_run: bool = False  # admit, but store nothing
    force: bool = False  # server-side apply: take over conflicting fields
    field_manager: str = ""  # the fieldManager parameter
    user_agent_manager: str = ""  # who a write without one is recorded as (kube: the User-Agent's program)

    @property
    def manager(self) -> str:
        return self.field_manager or self.user_agent_manager


_DEFAULT_WRITE = WriteOptions()


def _without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


def v1_type(registry: Registry, plural: str, group: str = "") -> ResourceType:
    """A kind every cluster serves at ``v1``."""
    rtype = registry.get(group, "v1", plural)
    assert rtype is not None
    return rtype


def serve_crd(registry: Registry, crd: Obj) -> None:
    """Serve the kinds a stored CustomResourceDefinition defines, from the moment it is stored."""
    registry.serve_crd(crd, crds.resource_types(crd))


class Writes:
    def __init__(self, store: Store, registry: Registry, admission: Admission, cluster_ips: ClusterIPAllocator,
                 gc: GarbageCollector, deletion: Deletion) -> None:
        self.store = store
        self.registry = registry
        self.admission = admission
        self.cluster_ips = cluster_ips
        self.gc = gc
        self.deletion = deletion

    # --- create -------------------------------------------------------------------------

    def _check_namespace(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        if not rtype.namespaced:
            return
        ns = self.store.get("/namespaces", "", namespace or "")
        if ns is None:
            raise errors.not_found("namespaces", "", namespace or "")
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(rtype.plural, rtype.group, name, f"unable to create new content in namespace "
                                   f"{namespace} because it is being terminated")

    async def create(self, rtype: ResourceType, namespace: str | None, body: Any, *,
                     options: WriteOptions = _DEFAULT_WRITE, applied: Obj | None = None) -> tuple[Obj, list[str]]:
        """``applied``: the configuration of a server-side apply that creates the object."""
        obj = self.admission.check_type(rtype, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        self.admission.check_name(rtype, obj)
        self._check_namespace(rtype, meta.get("namespace"), meta["name"])
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
            priority.admit_pod(obj, self.store.list(priority.STORAGE_KEY))
            limit_ranges.admit_pod(obj, self.store.list(LIMIT_RANGES, meta["namespace"]))
        elif rtype.storage_key == priority.STORAGE_KEY:
            priority.check_default(obj, self.store.list(priority.STORAGE_KEY))
        warnings = self._admit(rtype, obj, None, options.field_validation)
        self._admit_quota(rtype, obj)
        shape = managed_fields.shape_of(rtype.is_custom, rtype.schema)
        if applied is not None:
            manager = managed_fields.Manager(options.manager, managed_fields.APPLY, rtype.api_version)
            managed = managed_fields.created_by_apply(applied, manager, shape, now_rfc3339())
        else:
            manager = managed_fields.Manager(options.manager, managed_fields.UPDATE, rtype.api_version)
            managed = managed_fields.after_update(None, obj, manager, shape, now_rfc3339())
        if managed:
            meta["managedFields"] = managed
        if options.dry_run:
            return obj, warnings
        if rtype.is_service:
            self.cluster_ips.assign(obj, None)
        obj = rtype.stored(obj)
        committed = self.store.put(rtype.storage_key, obj)
        if rtype.storage_key == CRD_STORAGE_KEY:
            serve_crd(self.registry, obj)  # served from the moment it is stored, like the CRD itself
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
            await self.ensure_service_account(obj)
        return rtype.view(obj), warnings

    def _admit_quota(self, rtype: ResourceType, obj: Obj) -> None:
        """ResourceQuota admission of a create. Nothing awaits between it and the store's
        ``put``, so two creates racing for a namespace's last room are judged one after the other."""
        namespace = obj["metadata"].get("namespace")
        if not rtype.namespaced or not namespace:
            return
        quotas = self.store.list(RESOURCE_QUOTAS, namespace)
        if quotas:
            resource_quotas.check_create(rtype.plural, rtype.group, obj, quotas,
                                         lambda key: self.store.list(key, namespace))

    def _admit(self, rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str, *,
               subresource: str | None = None) -> list[str]:
        """Defaulting, pruning, validation and limits of a new state (``admission.Admission.admit``)."""
        return self.admission.admit(rtype, obj, old, field_validation, subresource=subresource)

    # --- update -------------------------------------------------------------------------

    async def update(self, rtype: ResourceType, namespace: str | None, name: str, body: Any, *,
                     subresource: str | None = None, options: WriteOptions = _DEFAULT_WRITE) -> tuple[Obj, list[str]]:
        old = deletion.existing(self.store, rtype, namespace, name)
        new = self.admission.check_type(rtype, body, namespace)
        if new["metadata"].get("name", name) != name:
            raise errors.bad_request(f"the name of the object ({new['metadata'].get('name')}) does not match the name on the URL ({name})")
        return await self._update(rtype, old, new, subresource=subresource, options=options)

    async def rewrite(self, rtype: ResourceType, current: Obj, new: Obj, *, options: WriteOptions = _DEFAULT_WRITE,
                      recorded_as: str = "") -> Obj:
        """Write a new state of a stored object as an update of the main resource would
        (its fields recorded under the ``recorded_as`` subresource)."""
        obj, _ = await self._update(rtype, current, new, options=options, recorded_as=recorded_as)
        return obj

    async def _update(self, rtype: ResourceType, old: Obj, new: Obj, *, subresource: str | None = None,
                      options: WriteOptions = _DEFAULT_WRITE, applied_managed: list[Obj] | None = None,
                      recorded_as: str = "") -> tuple[Obj, list[str]]:
        """``applied_managed``: the managedFields a server-side apply computed (else the
        write is recorded as an Update by ``options.manager``)."""
        old = rtype.view(old) if rtype.conversion is not None else old  # judged as the client writes it
        name = old["metadata"]["name"]
        is_namespace = rtype.plural == "namespaces" and not rtype.group
        uid = new["metadata"].get("uid")
        if uid and uid != old["metadata"].get("uid"):  # written for an object that was deleted and recreated
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata'].get('uid')}")
        rv = new["metadata"].get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  "the object has been modified; please apply your changes to the latest version and try again")
        sent_managed: list[Obj] | None = None  # managedFields a main-resource update writes itself
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
            sent_managed = managed_fields.sent_entries(meta.pop("managedFields", None))
            meta.pop("selfLink", None)
            if is_namespace and subresource != "finalize":  # only namespaces/finalize changes them
                new.setdefault("spec", {})["finalizers"] = clone((old.get("spec") or {}).get("finalizers") or [])
            if rtype.has_status:
                if "status" in old:
                    new["status"] = clone(old["status"])
                else:
                    new.pop("status", None)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if rtype.plural == "pods" and not rtype.group:
            priority.keep_on_update(new, old)
            if subresource != "status":
                ephemeral_containers.keep_on_update(new, old, subresource)
        elif rtype.storage_key == priority.STORAGE_KEY:
            priority.check_default(new, self.store.list(priority.STORAGE_KEY))
        warnings = self._admit(rtype, new, old, options.field_validation, subresource=subresource)
        ignored = ("metadata", "status") if rtype.has_status else ("metadata",)
        if _without(new, *ignored, "apiVersion") != _without(old, *ignored, "apiVersion"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if rtype.is_service:
            self.cluster_ips.assign(new, old)
        if applied_managed is None:
            manager = managed_fields.Manager(options.manager, managed_fields.UPDATE, rtype.api_version, subresource or recorded_as)
            applied_managed = managed_fields.after_update(old, new, manager, managed_fields.shape_of(rtype.is_custom, rtype.schema),
                                                          now_rfc3339(), sent=sent_managed)
        if applied_managed:
            new["metadata"]["managedFields"] = applied_managed
        else:
            new["metadata"].pop("managedFields", None)
        if new == old:
            return rtype.view(old), warnings  # a no-op write changes nothing, not even resourceVersion
        if options.dry_run:
            return new, warnings
        meta = new["metadata"]
        if (meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds")
                and not (is_namespace and (new.get("spec") or {}).get("finalizers"))):
            await self.deletion.remove(rtype, new)
            return rtype.view(new), warnings
        new = rtype.stored(new)
        committed = self.store.put(rtype.storage_key, new)
        if rtype.storage_key == CRD_STORAGE_KEY:
            serve_crd(self.registry, new)
        try:
            await committed
        except errors.ApiError:
            if rtype.storage_key == CRD_STORAGE_KEY:
                serve_crd(self.registry, old)
            raise
        return rtype.view(new), warnings

    # --- patch --------------------------------------------------------------------------

    async def patch(self, rtype: ResourceType, namespace: str | None, name: str, body: bytes, *,
                    content_type: str, subresource: str | None = None,
                    options: WriteOptions = _DEFAULT_WRITE) -> tuple[Obj, bool, list[str]]:
        """Returns (object, created, warnings); only server-side apply creates."""
        if content_type not in patch.PATCH_TYPES:
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: {', '.join(patch.PATCH_TYPES)}")
        if content_type == patch.STRATEGIC_MERGE_PATCH and rtype.is_custom:
            raise errors.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{patch.JSON_PATCH}, {patch.MERGE_PATCH}, {patch.APPLY_PATCH}")
        if content_type == patch.APPLY_PATCH and not options.field_manager:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "",
                                 [Cause("fieldManager", "FieldValueRequired", "Required value: is required for apply patch")])
        document = await patch.decoded(body, content_type)
        current = self.store.get(rtype.storage_key, namespace or "", name)
        if current is None:
            if content_type == patch.APPLY_PATCH and subresource is None:
                if not isinstance(document, dict):
                    raise errors.bad_request("apply patch must be an object")
                document = patch.strip_directives(document)
                document.setdefault("metadata", {}).setdefault("name", name)
                applied = managed_fields.applied_part(document, "", rtype.has_status)
                obj, warnings = await self.create(rtype, namespace, document, options=options, applied=applied)
                return obj, True, warnings
            raise errors.not_found(rtype.plural, rtype.group, name)
        if subresource == "scale":
            scaled = scale_subresource.patched(rtype, current, document, content_type)
            return await self._write_scale(rtype, current, scaled, options), False, []
        base = rtype.view(current)
        applied_managed: list[Obj] | None = None
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
            manager = managed_fields.Manager(options.field_manager, managed_fields.APPLY, rtype.api_version, subresource or "")
            patched = managed_fields.apply(base, managed_fields.applied_part(applied, subresource or "", rtype.has_status),
                                           manager, managed_fields.shape_of(rtype.is_custom, rtype.schema),
                                           force=options.force, time=now_rfc3339())
            applied_managed = patched["metadata"]["managedFields"]
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        patched = self.admission.check_type(rtype, clone(patched), namespace)
        if patched["metadata"].get("name") != name:
            raise errors.invalid(rtype.kind, rtype.group, name, [Cause("metadata.name", "FieldValueInvalid", "field is immutable")])
        obj, warnings = await self._update(rtype, current, patched, subresource=subresource, options=options,
                                           applied_managed=applied_managed)
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

    async def update_scale(self, rtype: ResourceType, namespace: str | None, name: str, body: Any, *,
                           options: WriteOptions = _DEFAULT_WRITE) -> Obj:
        current = deletion.existing(self.store, rtype, namespace, name)
        return await self._write_scale(rtype, current, body, options)

    async def _write_scale(self, rtype: ResourceType, current: Obj, new_scale: Any, options: WriteOptions) -> Obj:
        obj = await self.rewrite(rtype, current, scale_subresource.scaled(rtype, current, new_scale),
                                 options=options, recorded_as="scale")
        return scale_subresource.scale_of(rtype, obj)

    # --- ServiceAccounts -----------------------------------------------------------------

    async def ensure_service_account(self, namespace: Obj) -> None:
        name = namespace["metadata"]["name"]
        if namespace["metadata"].get("deletionTimestamp"):
            return
        sa_type = v1_type(self.registry, "serviceaccounts")
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
