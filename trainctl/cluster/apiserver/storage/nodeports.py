"""NodePort allocation for Services, as kube-apiserver's service allocation does it.

A Service of type NodePort or LoadBalancer gets a ``spec.ports[].nodePort`` from 30000-32767
for each port that has none; a requested one must lie in the range and be free (for its
protocol), else the write is refused with 422 as kube refuses it. An update keeps the node
ports a port already had; a Service that stops needing them (type ClusterIP) gives them back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]
FIRST, LAST = 30000, 32767
_TYPES = ("NodePort", "LoadBalancer")
Key = tuple[int, str]  # (node port, protocol)


def _ports(service: Optional[Obj]) -> list[Obj]:
    ports = ((service or {}).get("spec") or {}).get("ports") or []
    return [p for p in ports if isinstance(p, dict)]


def _protocol(port: Obj) -> str:
    return str(port.get("protocol") or "TCP")


def node_ports(service: Optional[Obj]) -> set[Key]:
    return {(p["nodePort"], _protocol(p)) for p in _ports(service) if isinstance(p.get("nodePort"), int)}


class NodePortAllocator:
    def __init__(self, services: Iterable[Obj] = ()) -> None:
        self._allocated: set[Key] = set()
        for service in services:
            self._allocated |= node_ports(service)

    def release(self, service: Obj) -> None:
        self._allocated -= node_ports(service)

    def assign(self, obj: Obj, old: Optional[Obj]) -> None:
        """Fill or check the node ports of a Service being created (``old`` None) or updated."""
        spec = obj.setdefault("spec", {})
        ports, mine = _ports(obj), node_ports(old)
        name = (obj.get("metadata") or {}).get("name", "")
        if spec.get("type") not in _TYPES:
            for index, port in enumerate(ports):
                if port.get("nodePort") is not None and (port.get("nodePort"), _protocol(port)) in mine:
                    del port["nodePort"]  # the type no longer has node ports: they go with it
                elif port.get("nodePort") is not None:
                    raise errors.invalid("Service", "", name, [Cause(
                        f"spec.ports[{index}].nodePort", "FieldValueForbidden",
                        f"Forbidden: may not be used when `type` is '{spec.get('type') or 'ClusterIP'}'")])
            self._allocated -= mine
            return
        kept = {(p.get("port"), _protocol(p)): p["nodePort"] for p in _ports(old) if isinstance(p.get("nodePort"), int)}
        wanted: dict[int, Key] = {}
        for index, port in enumerate(ports):
            requested = port.get("nodePort")
            if requested is None:
                requested = kept.get((port.get("port"), _protocol(port)))
            if requested is None:
                continue
            key = (requested, _protocol(port))
            why = None
            if not isinstance(requested, int) or isinstance(requested, bool) or not FIRST <= requested <= LAST:
                why = f"provided port is not in the valid range. The range of valid ports is {FIRST}-{LAST}"
            elif (key in self._allocated and key not in mine) or key in wanted.values():
                why = "provided port is already allocated"
            if why:
                raise errors.invalid("Service", "", name, [Cause(
                    f"spec.ports[{index}].nodePort", "FieldValueInvalid", f"Invalid value: {requested}: {why}")])
            wanted[index] = key
        taken = (self._allocated - mine) | set(wanted.values())
        for index, port in enumerate(ports):
            if index not in wanted:
                free = next((n for n in range(FIRST, LAST + 1) if (n, _protocol(port)) not in taken), None)
                if free is None:
                    raise errors.internal(f"range is full: no more node ports in {FIRST}-{LAST}")
                wanted[index] = (free, _protocol(port))
                taken.add(wanted[index])
            port["nodePort"] = wanted[index][0]
        self._allocated = (self._allocated - mine) | set(wanted.values())
