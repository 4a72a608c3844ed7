"""ClusterIP allocation for Services.

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

Obj = dict[str, Any]


class ClusterIPAllocator:
    def __init__(self, cidr: str, in_use: Iterable[str] = ()) -> None:
        self._service_net = ipaddress.ip_network(cidr)
        self._allocated_ips = {ip for ip in in_use if ip and ip != "None"}

    def release(self, service: Obj) -> None:
        self._allocated_ips.discard((service.get("spec") or {}).get("clusterIP", ""))

    def assign(self, obj: Obj, old: Obj | None) -> None:
        """Fill ``spec.clusterIP(s)`` of a Service being created (``old`` None) or updated."""
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
            # The first address is the `kubernetes` Service's, as kube-apiserver reserves it.
            reserved = {*self._allocated_ips, system_objects.cluster_ip(str(self._service_net))}
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
