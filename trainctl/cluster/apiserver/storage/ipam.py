"""ClusterIP allocation for Services (and their node ports, through :mod:`.nodeports`).

Every ClusterIP comes from the server's ``--service-cidr`` (default ``127.96.0.0/16``, a
loopback range, so the kubelet can proxy a Service on its ClusterIP without touching the
machine's network). Headless services (``clusterIP: None``) get none; a ClusterIP never
changes once set.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from trainctl.cluster.apiserver import system_objects
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.storage.nodeports import NodePortAllocator

Obj = dict[str, Any]


class ClusterIPAllocator:
    def __init__(self, cidr: str, services: Iterable[Obj] = ()) -> None:
        self._service_net = ipaddress.ip_network(cidr)
        services = list(services)
        in_use = ((svc.get("spec") or {}).get("clusterIP", "") for svc in services)
        self._allocated_ips = {ip for ip in in_use if ip and ip != "None"}
        self._node_ports = NodePortAllocator(services)

    def release(self, service: Obj) -> None:
        self._allocated_ips.discard((service.get("spec") or {}).get("clusterIP", ""))
        self._node_ports.release(service)

    def assign(self, obj: Obj, old: Obj | None) -> None:
        """Fill ``spec.clusterIP(s)`` and node ports of a Service being created (``old`` None) or updated."""
        self._node_ports.assign(obj, old)
        try:
            self._assign_ip(obj, old)
        except errors.ApiError:
            if old is None:
                self._node_ports.release(obj)
            raise

    def _assign_ip(self, obj: Obj, old: Obj | None) -> None:
        spec = obj.setdefault("spec", {})
        old_ip = (old.get("spec") or {}).get("clusterIP") if old else None
        requested = spec.get("clusterIP")
        if old is not None:
            if requested and requested != old_ip:
                raise errors.invalid("Service", "", obj["metadata"]["name"], [Cause(
                    "spec.clusterIPs[0]", "FieldValueInvalid", f'Invalid value: "{requested}": may not change once set')])
            ip = old_ip
        elif requested == "None":
            ip = "None"
        elif spec.get("type") == "ExternalName" and not requested:
            ip = ""  # a DNS alias: no address, as kube-apiserver allocates none
        elif requested:
            try:
                inside = ipaddress.ip_address(requested) in self._service_net
            except ValueError:
                inside = False
            if not inside or requested in self._allocated_ips:
                why = "provided IP is already allocated" if inside else f"provided IP is not in the valid range. The range of valid IPs is {self._service_net}"
                raise errors.invalid("Service", "", obj["metadata"]["name"], [Cause(
                    "spec.clusterIPs", "FieldValueInvalid", f'Invalid value: ["{requested}"]: failed to allocate IP {requested}: {why}')])
            ip = requested
        else:
            # The first address is the `kubernetes` Service's, as kube-apiserver reserves it
            # (and the tenth the cluster DNS's, where there is one).
            reserved = {*self._allocated_ips, system_objects.cluster_ip(str(self._service_net))}
            if system_objects.has_cluster_dns(str(self._service_net)):
                reserved.add(system_objects.dns_cluster_ip(str(self._service_net)))
            ip = next((str(a) for a in self._service_net.hosts() if str(a) not in reserved), None)
            if ip is None:
                raise errors.internal(f"range is full: no more ClusterIPs in {self._service_net}")
        if ip and ip != "None":
            self._allocated_ips.add(ip)
        if ip:
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
            if ip != "None":
                spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        obj.setdefault("status", {"loadBalancer": {}})
