"""The cluster's DNS records, computed from Services and Endpoints as CoreDNS's kubernetes plugin does.

A pure function of the objects a kubelet already watches (no I/O): the kubelet sends the
result to the router, whose DNS server (:mod:`.cluster_dns`) answers from it. The names:

- ``<svc>.<ns>.svc.cluster.local``: A, the ClusterIP; for a headless Service, one A per
  address of its Endpoints (the ready pods, and the unready ones too when the Service says
  ``publishNotReadyAddresses``: the endpoints controller already put them among the
  addresses); for an ExternalName Service, a CNAME to the external name;
- ``<hostname>.<svc>.<ns>.svc.cluster.local``: a headless Service's pod, by the hostname its
  Endpoints address carries (a pod with ``hostname`` and ``subdomain`` equal to the Service
  name), else by its IP with dashes (``10-244-0-5``);
- ``_<port>._<proto>.<svc>.<ns>.svc.cluster.local``: SRV for every named port;
- PTR records for the addresses above (``5.0.244.10.in-addr.arpa``).

Names are lower case and end without a dot.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from trainctl.cluster.network.ranges import CLUSTER_DOMAIN

Obj = dict[str, Any]


@dataclass
class Records:
    """What the DNS server answers: per name, its addresses, SRV targets or CNAME."""

    a: dict[str, list[str]] = field(default_factory=dict)
    srv: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # name -> [(port, target)]
    cname: dict[str, str] = field(default_factory=dict)
    ptr: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> Obj:
        return {"a": self.a, "srv": {k: [list(v) for v in vs] for k, vs in self.srv.items()},
                "cname": self.cname, "ptr": self.ptr}

    @classmethod
    def from_json(cls, data: Obj) -> "Records":
        return cls(a={str(k): [str(v) for v in vs] for k, vs in (data.get("a") or {}).items()},
                   srv={str(k): [(int(p), str(t)) for p, t in vs] for k, vs in (data.get("srv") or {}).items()},
                   cname={str(k): str(v) for k, v in (data.get("cname") or {}).items()},
                   ptr={str(k): str(v) for k, v in (data.get("ptr") or {}).items()})

    def add_a(self, name: str, ip: str) -> None:
        addresses = self.a.setdefault(name, [])
        if ip not in addresses:
            addresses.append(ip)
        self.ptr.setdefault(reverse_name(ip), name)


def reverse_name(ip: str) -> str:
    """``10.0.244.5`` -> ``5.244.0.10.in-addr.arpa`` (an IPv4 address, as :func:`_ipv4` gives)."""
    return ".".join(reversed(ip.split("."))) + ".in-addr.arpa"


def _ipv4(value: Any) -> Optional[str]:
    """``value`` when it is an IPv4 address, else None."""
    try:
        return value if isinstance(value, str) and socket.inet_pton(socket.AF_INET, value) else None
    except OSError:  # not an address
        return None


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _srv(records: Records, base: str, ports: Iterable[Any], target: str) -> None:
    for port in ports:
        if not isinstance(port, dict) or not port.get("name"):
            continue
        number = port.get("port")
        if isinstance(number, int) and not isinstance(number, bool) and 0 < number <= 65535:
            name = f"_{port['name']}._{str(port.get('protocol') or 'TCP').lower()}.{base}".lower()
            records.srv.setdefault(name, []).append((number, target))


def cluster_records(services: Iterable[Obj], endpoints: Iterable[Obj]) -> Records:
    """The records of every Service in ``services``, headless ones from their ``endpoints``."""
    records = Records()
    by_name = {(_meta(e).get("namespace", "default"), _meta(e).get("name")): e for e in endpoints}
    for service in services:
        meta, spec = _meta(service), service.get("spec") or {}
        name, namespace = meta.get("name"), meta.get("namespace", "default")
        if not isinstance(name, str) or not isinstance(namespace, str) or not isinstance(spec, dict):
            continue
        base = f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}".lower()
        cluster_ip = spec.get("clusterIP")
        address = _ipv4(cluster_ip)
        if spec.get("type") == "ExternalName":
            if isinstance(spec.get("externalName"), str):
                records.cname[base] = spec["externalName"].lower().rstrip(".")
        elif cluster_ip == "None":
            _headless(records, base, by_name.get((namespace, name)) or {})
        elif address is not None:
            records.add_a(base, address)
            _srv(records, base, spec.get("ports") or [], base)
    return records


def _headless(records: Records, base: str, endpoints: Obj) -> None:
    for subset in endpoints.get("subsets") or []:
        if not isinstance(subset, dict):
            continue
        ports = [p for p in subset.get("ports") or [] if isinstance(p, dict)]
        for address in subset.get("addresses") or []:
            ip = _ipv4(address.get("ip")) if isinstance(address, dict) else None
            if ip is None:
                continue
            hostname = address.get("hostname") or ip.replace(".", "-")
            host = f"{hostname}.{base}".lower()
            records.add_a(base, ip)
            records.add_a(host, ip)
            records.ptr[reverse_name(ip)] = host
            _srv(records, base, ports, host)
