"""What happens to objects: the REST semantics of every verb, independent of HTTP, put together.

``Resources`` wires the parts and owns their background tasks: ``reads`` (get, list pages),
``writes`` (create, update, patch, binding, scale), ``deletion`` (and what a removal sets in
motion), ``evictions`` (deletion under PodDisruptionBudgets), the garbage collector ``gc``,
and ``bootstrap`` (what every cluster has). Every part decides on its own; none reaches into
another's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from trainctl.cluster.apiserver.admission.admission import CRD_STORAGE_KEY, Admission
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry, ResourceType
from trainctl.cluster.apiserver.storage.bootstrap import Bootstrap
from trainctl.cluster.apiserver.storage.deletion import Deletion
from trainctl.cluster.apiserver.storage.eviction import Evictions
from trainctl.cluster.apiserver.storage.gc import GarbageCollector
from trainctl.cluster.apiserver.storage.ipam import ClusterIPAllocator
from trainctl.cluster.apiserver.storage.reads import Reads
from trainctl.cluster.apiserver.storage.store import Store
from trainctl.cluster.apiserver.storage.writes import Writes, serve_crd

Obj = dict[str, Any]


class Resources:
    def __init__(self, store: Store, registry: Registry, service_cidr: str = "127.96.0.0/16") -> None:
        self.store = store
        self.registry = registry
        cluster_ips = ClusterIPAllocator(service_cidr, store.list("/services"))
        self.gc = GarbageCollector(self, store, registry)
        self.deletion = Deletion(store, registry, self.gc, cluster_ips, self._spawn)
        self.evictions = Evictions(store, self.deletion)
        self.reads = Reads(store)
        self.writes = Writes(store, registry, Admission(registry), cluster_ips, self.gc, self.deletion)
        self.bootstrap = Bootstrap(store, registry, self.writes, service_cidr, self._spawn)
        self._background: set[asyncio.Task[Any]] = set()
        for crd in store.list(CRD_STORAGE_KEY):
            serve_crd(registry, crd)

    async def start(self) -> None:
        """Create what every cluster has and start the garbage collector."""
        await self.bootstrap.create_system_objects()
        self._spawn(self.gc.run())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    # --- the writes the garbage collector makes (gc.Writer) ---------------------------------

    async def rewrite(self, rtype: ResourceType, current: Obj, new: Obj) -> Obj:
        return await self.writes.rewrite(rtype, current, new)

    async def delete(self, rtype: ResourceType, namespace: str | None, name: str,
                     options: Obj | None = None) -> tuple[Obj, bool]:
        return await self.deletion.delete(rtype, namespace, name, options)
