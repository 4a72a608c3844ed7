"""The garbage collector: what happens to objects whose owners go.

It follows ``metadata.ownerReferences`` like kube-controller-manager's collector, but inside
the server and without delay: when an owner is removed its dependents are deleted
(Background) unless other owners are still alive (then only the dangling reference goes);
an owner in foreground deletion (``foregroundDeletion`` finalizer) has its dependents
deleted and stays until none that sets ``blockOwnerDeletion`` is left; Orphan strips the
references at once. Work arrives as owner uids on a queue, so a delete never waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType
from trainctl.cluster.apiserver.storage.store import Store, clone

Obj = dict[str, Any]
log = logging.getLogger(__name__)
FOREGROUND = "foregroundDeletion"


class Writer(Protocol):
    """The writes the collector makes, with the semantics of the API (``resources``)."""

    async def rewrite(self, rtype: ResourceType, current: Obj, new: Obj) -> Obj: ...

    async def delete(self, rtype: ResourceType, namespace: str | None, name: str,
                     options: Obj | None = None) -> tuple[Obj, bool]: ...


class GarbageCollector:
    def __init__(self, writer: Writer, store: Store, registry: Registry) -> None:
        self._writer = writer
        self._store = store
        self._registry = registry
        self._queue: asyncio.Queue[str] = asyncio.Queue()

    def enqueue(self, uid: str) -> None:
        """Look at the dependents of ``uid`` (an owner that is gone or in foreground deletion)."""
        if uid:
            self._queue.put_nowait(uid)

    def _owners_to_check(self) -> set[str]:
        uids: set[str] = set()
        for rtype in self._registry:
            for obj in self._store.list(rtype.storage_key):
                for owner in obj["metadata"].get("ownerReferences") or []:
                    if self._store.by_uid(owner.get("uid", "")) is None:
                        uids.add(owner.get("uid", ""))
                if FOREGROUND in (obj["metadata"].get("finalizers") or []):
                    uids.add(obj["metadata"]["uid"])
        return uids

    def check_owners_exist(self, obj: Obj) -> None:
        for owner in obj["metadata"].get("ownerReferences") or []:
            if self._store.by_uid(owner.get("uid", "")) is None:
                self.enqueue(owner.get("uid", ""))

    async def run(self) -> None:
        for uid in self._owners_to_check():  # owners that vanished while the server was down
            self.enqueue(uid)
        while True:
            uid = await self._queue.get()
            try:
                await self._collect(uid)
            except errors.ApiError as exc:
                log.debug("garbage collection of dependents of %s: %s", uid, exc.message)
            except Exception:  # keep collecting whatever one object does
                log.exception("garbage collection of dependents of %s failed", uid)

    async def _collect(self, uid: str) -> None:
        owner_ref = self._store.by_uid(uid)
        owner = self._store.get(*owner_ref) if owner_ref else None
        if owner is not None and FOREGROUND in (owner["metadata"].get("finalizers") or []):
            await self._foreground_step(owner_ref[0], owner)  # type: ignore[index]
            return
        if owner is not None:
            return
        for resource, namespace, name in self._store.dependents(uid):
            dependent = self._store.get(resource, namespace, name)
            rtype = self._registry.type_for_storage(resource)
            if dependent is None or rtype is None:
                continue
            live = [o for o in dependent["metadata"].get("ownerReferences") or []
                    if o.get("uid") != uid and self._store.by_uid(o.get("uid", "")) is not None]
            if live:
                new = clone(dependent)
                new["metadata"]["ownerReferences"] = [o for o in new["metadata"]["ownerReferences"] if o.get("uid") != uid]
                await self._writer.rewrite(rtype, dependent, new)
            elif not dependent["metadata"].get("deletionTimestamp"):
                await self._writer.delete(rtype, namespace or None, name, {"propagationPolicy": "Background"})

    async def _foreground_step(self, resource: str, owner: Obj) -> None:
        """Delete the dependents of an owner in foreground deletion; once none that blocks
        its deletion is left, drop its ``foregroundDeletion`` finalizer."""
        uid = owner["metadata"]["uid"]
        for dep_resource, namespace, name in self._store.dependents(uid):
            dependent = self._store.get(dep_resource, namespace, name)
            rtype = self._registry.type_for_storage(dep_resource)
            if dependent is not None and rtype is not None and not dependent["metadata"].get("deletionTimestamp"):
                await self._writer.delete(rtype, namespace or None, name, {"propagationPolicy": "Foreground"})
        for ref in self._store.dependents(uid):
            dependent = self._store.get(*ref)
            owners = (dependent or {"metadata": {}})["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid and o.get("blockOwnerDeletion") for o in owners):
                return  # woken again when that dependent is removed
        rtype = self._registry.type_for_storage(resource)
        current = self._store.get(resource, owner["metadata"].get("namespace") or "", owner["metadata"]["name"])
        if rtype is None or current is None:
            return
        new = clone(current)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or [] if f != FOREGROUND]
        await self._writer.rewrite(rtype, current, new)

    async def orphan_dependents(self, owner: Obj) -> None:
        """Remove ``owner`` from its dependents' ownerReferences (propagationPolicy Orphan)."""
        uid = owner["metadata"]["uid"]
        for resource, namespace, name in self._store.dependents(uid):
            dependent = self._store.get(resource, namespace, name)
            rtype = self._registry.type_for_storage(resource)
            if dependent is None or rtype is None:
                continue
            new = clone(dependent)
            new["metadata"]["ownerReferences"] = [o for o in new["metadata"].get("ownerReferences") or [] if o.get("uid") != uid]
            if not new["metadata"]["ownerReferences"]:
                del new["metadata"]["ownerReferences"]
            await self._writer.rewrite(rtype, dependent, new)


