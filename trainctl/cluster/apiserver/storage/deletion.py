"""Deletion: preconditions, graceful deletion of pods, finalizers, propagation policies,
and what a removal sets in motion (garbage collection, namespace and CRD clean-up).

An object with finalizers or a grace period is first marked (``deletionTimestamp``) and
removed when the last finalizer goes or the kubelet confirms; one without is removed at
once. A namespace is marked Terminating, emptied in the background, then removed, as
kube-controller-manager's namespace controller does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from trainctl.cluster.apiserver.admission.admission import CRD_STORAGE_KEY
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType
from trainctl.cluster.apiserver.storage import namespace_conditions
from trainctl.cluster.apiserver.storage.gc import FOREGROUND, GarbageCollector
from trainctl.cluster.apiserver.storage.ipam import ClusterIPAllocator
from trainctl.cluster.apiserver.storage.store import Store, clone
from trainctl.kube.timestamps import now_rfc3339

Obj = dict[str, Any]
Spawn = Callable[[Coroutine[Any, Any, None]], None]

_UNDELETABLE_NAMESPACES = {"default", "kube-system", "kube-public"}
_TERMINAL_PHASES = {"Succeeded", "Failed"}


def existing(store: Store, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
    """The stored object, or 404."""
    obj = store.get(rtype.storage_key, namespace or "", name)
    if obj is None:
        raise errors.not_found(rtype.plural, rtype.group, name)
    return obj


def _check_preconditions(rtype: ResourceType, obj: Obj, options: Obj) -> None:
    name = obj["metadata"]["name"]
    pre = options.get("preconditions") or {}
    if pre.get("uid") and pre["uid"] != obj["metadata"].get("uid"):
        raise errors.conflict(rtype.plural, rtype.group, name,
                              f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {obj['metadata'].get('uid')}")
    if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
        raise errors.conflict(rtype.plural, rtype.group, name,
                              f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                              f"ResourceVersion in object meta: {obj['metadata']['resourceVersion']}")


def _propagation_policy(options: Obj, name: str) -> str | None:
    policy = options.get("propagationPolicy")
    if policy is None and options.get("orphanDependents") is not None:
        policy = "Orphan" if options["orphanDependents"] else "Background"
    if policy not in (None, "Background", "Foreground", "Orphan"):
        raise errors.invalid("DeleteOptions", "", name, [Cause("propagationPolicy", "FieldValueNotSupported",
                             f'Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"')])
    return policy


def grace_period(rtype: ResourceType, obj: Obj, requested: Any) -> int:
    """Seconds the object stays (terminating) before removal: only bound, running pods wait."""
    if rtype.group or rtype.plural != "pods":
        return 0
    if not obj.get("spec", {}).get("nodeName") or (obj.get("status") or {}).get("phase") in _TERMINAL_PHASES:
        return 0
    if isinstance(requested, int) and not isinstance(requested, bool) and requested >= 0:
        return requested
    default = obj.get("spec", {}).get("terminationGracePeriodSeconds", 30)
    return default if isinstance(default, int) and default >= 0 else 30


class Deletion:
    def __init__(self, store: Store, registry: Registry, gc: GarbageCollector,
                 cluster_ips: ClusterIPAllocator, spawn: Spawn) -> None:
        self.store = store
        self.registry = registry
        self.gc = gc
        self.cluster_ips = cluster_ips
        self._spawn = spawn

    async def delete(self, rtype: ResourceType, namespace: str | None, name: str, options: Obj | None = None,
                     dry_run: bool = False) -> tuple[Obj, bool]:
        """Returns (the object as it now is, whether it is gone)."""
        options = options or {}
        obj = existing(self.store, rtype, namespace, name)
        _check_preconditions(rtype, obj, options)
        if rtype.namespaced is False and rtype.plural == "namespaces" and name in _UNDELETABLE_NAMESPACES:
            raise errors.forbidden("namespaces", "", name, "this namespace may not be deleted")
        if dry_run:
            return rtype.view(obj), True
        policy = _propagation_policy(options, name)
        if policy == "Orphan":
            await self.gc.orphan_dependents(obj)
            obj = existing(self.store, rtype, namespace, name)  # it may have changed meanwhile
        new = clone(obj)
        meta = new["metadata"]
        changed = False
        if policy == "Foreground" and self.store.dependents(meta["uid"]) and FOREGROUND not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND]
            changed = True
        if rtype.plural == "namespaces" and not rtype.group:
            return await self._delete_namespace(rtype, new), False
        graceful = grace_period(rtype, obj, options.get("gracePeriodSeconds"))
        if meta.get("deletionTimestamp"):
            # Deleting again may only shorten a pod's grace period; zero removes it now.
            if not graceful and not meta.get("finalizers"):
                await self.remove(rtype, obj)
                return rtype.view(obj), True
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
            await self.remove(rtype, obj)
            return rtype.view(obj), True
        if not changed:
            return rtype.view(obj), False
        await self.store.put(rtype.storage_key, new)
        if FOREGROUND in (meta.get("finalizers") or []):
            self.gc.enqueue(meta["uid"])
        return rtype.view(new), False

    async def delete_collection(self, rtype: ResourceType, namespace: str | None, matches: Callable[[Obj], bool],
                                options: Obj | None = None) -> list[Obj]:
        deleted = []
        for obj in [o for o in self.store.list(rtype.storage_key, namespace) if matches(o)]:
            try:
                result, _gone = await self.delete(rtype, namespace or obj["metadata"].get("namespace"), obj["metadata"]["name"], options)
                deleted.append(result)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        return deleted

    async def remove(self, rtype: ResourceType, obj: Obj) -> None:
        """Remove ``obj`` from storage. What must follow (garbage collection, namespace and
        CRD clean-up) runs once the removal is durable, shielded, so that a client that hangs
        up meanwhile cannot leave it undone."""
        current = self.store.get(rtype.storage_key, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        if current is None:
            return
        committed = self.store.remove(rtype.storage_key, current)
        await asyncio.shield(self._after_removal(rtype, current, committed))

    async def _after_removal(self, rtype: ResourceType, gone: Obj, committed: asyncio.Future[None]) -> None:
        await committed
        meta = gone["metadata"]
        if rtype.is_service:
            self.cluster_ips.release(gone)
        if rtype.storage_key == CRD_STORAGE_KEY:
            self._remove_crd(gone)
        self.gc.enqueue(meta["uid"])
        for owner in meta.get("ownerReferences") or []:
            # An owner waiting in foreground deletion may now be free to go.
            self.gc.enqueue(owner.get("uid", ""))
        if meta.get("namespace"):
            ns = self.store.get("/namespaces", "", meta["namespace"])
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self._spawn(self._finish_namespace(meta["namespace"]))

    def _remove_crd(self, crd: Obj) -> None:
        """Stop serving a deleted CRD's kinds and remove its objects (not waiting for them)."""
        spec = crd["spec"]
        key = f"{spec['group']}/{spec['names']['plural']}"
        for obj in self.store.list(key):
            self._spawn(self._discard(self.store.remove(key, obj)))
            self.gc.enqueue(obj["metadata"]["uid"])
        self.registry.remove_crd(crd["metadata"]["name"])

    @staticmethod
    async def _discard(committed: asyncio.Future[None]) -> None:
        with contextlib.suppress(errors.ApiError):  # a failed commit has left the object in place
            await committed

    async def _delete_namespace(self, rtype: ResourceType, ns: Obj) -> Obj:
        """Mark the namespace Terminating; its contents go in the background, then it does."""
        name = ns["metadata"]["name"]
        if not ns["metadata"].get("deletionTimestamp"):
            ns.setdefault("status", {})["phase"] = "Terminating"
            ns["metadata"]["deletionTimestamp"] = now_rfc3339()
            ns["metadata"]["deletionGracePeriodSeconds"] = 0
            await self.store.put(rtype.storage_key, ns)
        self._spawn(self._empty_namespace(name))
        return rtype.view(ns)

    async def _empty_namespace(self, name: str) -> None:
        for resource, obj in list(self.store.namespaced_resources(name)):
            rtype_of = self.registry.type_for_storage(resource)
            if rtype_of is None:
                continue
            with contextlib.suppress(errors.ApiError):  # already gone, or held by a finalizer
                # Each with its own grace, as kube's namespace controller deletes: a running pod
                # is stopped by its kubelet, and the namespace stays Terminating until it is.
                await self.delete(rtype_of, name, obj["metadata"]["name"])
        await self._finish_namespace(name)

    async def _finish_namespace(self, name: str) -> None:
        """One pass of the namespace controller over a terminating namespace: its conditions
        say what remains; once nothing does, its ``kubernetes`` finalizer goes (as the
        controller's ``finalize``) and then the namespace, unless other finalizers hold it."""
        ns = self.store.get("/namespaces", "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        remaining = []
        for resource, obj in self.store.namespaced_resources(name):
            group, _, plural = resource.partition("/")
            remaining.append((namespace_conditions.group_resource(group, plural), obj))
        new = clone(ns)
        status = new.setdefault("status", {})
        status["conditions"] = namespace_conditions.deletion_conditions(remaining, status.get("conditions") or [],
                                                                       now_rfc3339())
        spec = new.setdefault("spec", {})
        if not remaining:
            spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != namespace_conditions.KUBERNETES_FINALIZER]
        ns_type = self.registry.get("", "v1", "namespaces")
        assert ns_type is not None
        if not remaining and not namespace_conditions.held(new):
            await self.remove(ns_type, new)
        elif new != ns:
            await self.store.put(ns_type.storage_key, new)
