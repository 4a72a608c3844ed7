"""The node's view of Services: proxy rules and the hosts file, rebuilt from the caches.

kube-proxy's job on this machine: every ClusterIP Service port forwards to its ready
endpoints (pod IP and target port), and every Service with an address gets a line in the
hosts file that Python processes resolve names from; on the isolated network, the records
the cluster DNS answers from (:mod:`..network.dns_records`). A Service the kubelet cannot read
(a port that is not a number in range, say) is skipped with a warning; it never stops
the other Services or the pods from being served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Optional, Protocol, cast

from trainctl.cluster.kubelet.service_names import PodIndex, ServiceNames
from trainctl.cluster.network.dns_records import Records, cluster_records
from trainctl.cluster.network.hosts import HostsFile, service_fqdn
from trainctl.cluster.network.proxy import Backend, Frontend

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MAX_PORT = 65535


def _meta(obj: Obj) -> Obj:
    return cast("dict[str, Any]", obj.get("metadata", {}))


def _is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions") or [])


def _port_number(value: Any) -> Optional[int]:
    """``value`` as a port (1..65535), or None for anything else."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_PORT:
        return value
    return None


def target_port(port: Obj, pod: Obj) -> Optional[int]:
    """The pod port a Service port forwards to: a number, or the name of a container port."""
    target = port.get("targetPort", port.get("port"))
    number = _port_number(target)
    if number is not None or not isinstance(target, str):
        return number
    for container in pod.get("spec", {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return _port_number(declared.get("containerPort"))
    return None


def endpoint_backends(endpoints: Optional[Obj], port: Obj) -> list[Backend]:
    """The addresses an Endpoints object gives a Service port (matched by name)."""
    backends: list[Backend] = []
    for subset in (endpoints or {}).get("subsets") or []:
        number = next((_port_number(p.get("port")) for p in subset.get("ports") or []
                       if isinstance(p, dict) and p.get("name", "") == port.get("name", "")), None)
        if number is None:
            continue
        backends += [(a["ip"], number) for a in subset.get("addresses") or [] if isinstance(a, dict) and a.get("ip")]
    return backends


class Proxy(Protocol):
    """Who serves the rules: the kubelet's own proxy, or the isolated network's router."""

    def update(self, rules: dict[Frontend, list[Backend]]) -> None: ...


class ServiceRules:
    """Owns the Service proxy and the hosts file and keeps both in step with the caches."""

    def __init__(self, names: ServiceNames, hosts: HostsFile, proxy: Proxy,
                 publish_names: Optional[Callable[[Records], None]] = None) -> None:
        self._names = names
        self._hosts = hosts
        self._proxy = proxy
        self._publish_names = publish_names  # where the cluster DNS's records go (isolated network)

    def sync(self, pods: list[Obj], services: list[Obj], endpoints: Sequence[Obj] = ()) -> None:
        rules: dict[Frontend, list[Backend]] = {}
        addresses: dict[str, str] = {}
        index = PodIndex(pods)
        by_name = {(_meta(e).get("namespace", "default"), _meta(e).get("name")): e for e in endpoints}
        for service in services:
            meta, spec = _meta(service), service.get("spec", {})
            namespace = meta.get("namespace", "default")
            resolved = self._names.resolve(namespace, meta["name"], index=index)
            if isinstance(resolved, str):
                addresses[service_fqdn(meta["name"], namespace)] = resolved
            cluster_ip = spec.get("clusterIP")
            if not cluster_ip or cluster_ip == "None" or spec.get("type") == "ExternalName":
                continue
            selected = sorted((p for p in index.select(namespace, spec.get("selector"))
                                if _is_ready(p) and not _meta(p).get("deletionTimestamp")
                                and p.get("status", {}).get("podIP")), key=lambda p: _meta(p).get("name", ""))
            for port in spec.get("ports") or []:
                if not isinstance(port, dict) or (port.get("protocol") or "TCP") != "TCP":
                    continue
                number = _port_number(port.get("port"))
                if number is None:
                    log.warning("Service %s/%s: port %r is not a port number; skipped",
                                namespace, meta["name"], port.get("port"))
                    continue
                backends = []
                for pod in selected:
                    target = target_port(port, pod)
                    if target:
                        backends.append((pod["status"]["podIP"], target))
                if not spec.get("selector"):  # its Endpoints are written by someone else (the kubernetes Service)
                    backends = endpoint_backends(by_name.get((namespace, meta["name"])), port)
                # This node's address for the ClusterIP is its own; the ClusterIP itself goes
                # to whichever node's proxy listens first (for clients outside the pods).
                rules[(self._names.service_address(cluster_ip), number)] = backends
                rules[(cluster_ip, number)] = backends
        self._hosts.write(addresses)
        self._proxy.update(rules)
        if self._publish_names is not None:
            self._publish_names(cluster_records(services, endpoints))
