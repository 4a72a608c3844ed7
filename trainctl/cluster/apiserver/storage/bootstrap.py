"""What every cluster has, made when the server starts and kept while it runs.

The namespaces every cluster has with their ``default`` ServiceAccounts, kube's bootstrap
RBAC policy (``bootstrap_policy``), the built-in PriorityClasses (``priority``), and the ``kubernetes`` Service and Endpoints pointing at
where this server listens (``system_objects``), put back if deleted or changed, as
kube-apiserver's own bootstrap controller does. Every object is written through ``writes``,
as a client's would be.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from trainctl.cluster.apiserver import bootstrap_policy, system_objects
from trainctl.cluster.apiserver.admission import priority
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import Registry
from trainctl.cluster.apiserver.storage.deletion import Spawn
from trainctl.cluster.apiserver.storage.store import Store, clone
from trainctl.cluster.apiserver.storage.writes import Writes, v1_type

Obj = dict[str, Any]
log = logging.getLogger(__name__)

_BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-node-lease", "kube-public")
_SEPARATE_EVENTS_KEY = "events.k8s.io/events"


class Bootstrap:
    def __init__(self, store: Store, registry: Registry, writes: Writes, service_cidr: str, spawn: Spawn) -> None:
        self.store = store
        self.registry = registry
        self.writes = writes
        self.service_cidr = service_cidr
        self._spawn = spawn

    async def create_system_objects(self) -> None:
        """Create what every cluster has (namespaces, their ServiceAccounts, the default RBAC
        policy: ``system_objects``)."""
        ns_type = v1_type(self.registry, "namespaces")
        for name in _BOOTSTRAP_NAMESPACES:
            if self.store.get(ns_type.storage_key, "", name) is None:
                await self.writes.create(ns_type, None, {"metadata": {"name": name}})
        for namespace in self.store.list(ns_type.storage_key):  # namespaces older than this rule
            await self.writes.ensure_service_account(namespace)
        for plural, objects in (("clusterroles", bootstrap_policy.cluster_roles()),
                                ("clusterrolebindings", bootstrap_policy.cluster_role_bindings())):
            rtype = v1_type(self.registry, plural, "rbac.authorization.k8s.io")
            for obj in objects:
                if self.store.get(rtype.storage_key, "", obj["metadata"]["name"]) is None:
                    await self.writes.create(rtype, None, obj)
        priority_classes = v1_type(self.registry, "priorityclasses", priority.GROUP)
        for obj in priority.system_priority_classes():
            if self.store.get(priority_classes.storage_key, "", obj["metadata"]["name"]) is None:
                await self.writes.create(priority_classes, None, obj)
        await self._join_event_stores()

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
        svc_type, ep_type = v1_type(self.registry, "services"), v1_type(self.registry, "endpoints")
        wanted = system_objects.service(self.service_cidr, port)
        current = self.store.get(svc_type.storage_key, system_objects.NAMESPACE, system_objects.NAME)
        if current is None:
            try:
                await self.writes.create(svc_type, system_objects.NAMESPACE, wanted)
            except errors.ApiError as exc:  # its address taken by a Service made before this rule
                log.warning("the kubernetes Service cannot have %s: %s", wanted["spec"]["clusterIP"], exc)
                del wanted["spec"]["clusterIP"], wanted["spec"]["clusterIPs"]
                await self.writes.create(svc_type, system_objects.NAMESPACE, wanted)
        elif current["spec"].get("ports") != wanted["spec"]["ports"]:
            await self.writes.rewrite(svc_type, current, {**clone(current), "spec": {**current["spec"], "ports": wanted["spec"]["ports"]}})
        if system_objects.has_cluster_dns(self.service_cidr) and self.store.get(
                svc_type.storage_key, system_objects.DNS_NAMESPACE, system_objects.DNS_NAME) is None:
            try:
                await self.writes.create(svc_type, system_objects.DNS_NAMESPACE, system_objects.dns_service(self.service_cidr))
            except errors.ApiError as exc:  # its address taken by a Service made before this rule
                log.warning("the kube-dns Service cannot be created: %s", exc.message)
        address = system_objects.endpoints(host, port)
        current = self.store.get(ep_type.storage_key, system_objects.NAMESPACE, system_objects.NAME)
        if current is None:
            await self.writes.create(ep_type, system_objects.NAMESPACE, address)
        elif current.get("subsets") != address["subsets"]:
            await self.writes.rewrite(ep_type, current, {**clone(current), "subsets": address["subsets"]})

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
