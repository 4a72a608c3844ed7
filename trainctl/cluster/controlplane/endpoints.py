"""What a Service's Endpoints and EndpointSlices hold, from its selector and the pods it selects.

kube-controller-manager's ``endpoint`` and ``endpointslice`` controllers write, for every
Service with a selector, the addresses of the pods it selects: ready pods as addresses,
unready ones as ``notReadyAddresses`` (Endpoints) or with ``ready: false`` (EndpointSlices),
each port resolved against the pod's own container ports (a named ``targetPort`` is looked
up in the pod). kubectl (``get ep``, ``describe svc``), cluster DNS and anything that watches
them read these objects; this module computes them from plain dicts, with no I/O, so the
controller around it only compares and writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

from trainctl.cluster.podutil import is_terminal, metadata

Obj = dict[str, Any]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = "service.kubernetes.io/headless"
MAX_ENDPOINTS_PER_SLICE = 100


def selects(service: Obj, pod: Obj) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = metadata(pod).get("labels") or {}
    return bool(selector) and metadata(pod).get("namespace") == metadata(service).get("namespace") and all(
        labels.get(k) == v for k, v in selector.items())


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _container_port(pod: Obj, name: str, protocol: str) -> Optional[int]:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name and (port.get("protocol") or "TCP") == protocol:
                value = port.get("containerPort")
                return value if isinstance(value, int) else None
    return None


def endpoint_ports(service: Obj, pod: Obj) -> Optional[tuple[tuple[str, int, str], ...]]:
    """(name, port, protocol) of each Service port on this pod; None when a named target is missing.

    A headless Service without ports gives the empty tuple: its addresses carry no port.
    """
    ports = []
    for port in (service.get("spec") or {}).get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        target = port.get("targetPort", port.get("port"))
        if isinstance(target, str) and not target.isdigit():
            number = _container_port(pod, target, protocol)
            if number is None:
                continue  # kube leaves this port out for this pod
        else:
            number = int(target)
        ports.append((port.get("name") or "", number, protocol))
    if (service.get("spec") or {}).get("ports") and not ports:
        return None
    return tuple(ports)


def _candidates(service: Obj, pods: Iterable[Obj]) -> list[tuple[Obj, bool, tuple[tuple[str, int, str], ...]]]:
    """(pod, ready, ports) for every pod that belongs in the Service's endpoints, by name."""
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    found = []
    for pod in sorted(pods, key=lambda p: str(metadata(p).get("name"))):
        if not selects(service, pod) or is_terminal(pod) or not (pod.get("status") or {}).get("podIP"):
            continue
        if metadata(pod).get("deletionTimestamp") and not publish:
            continue
        ports = endpoint_ports(service, pod)
        if ports is None:
            continue
        found.append((pod, publish or is_ready(pod), ports))
    return found


def _address(service: Obj, pod: Obj) -> Obj:
    meta = metadata(pod)
    spec = pod.get("spec") or {}
    address: Obj = {"ip": (pod.get("status") or {}).get("podIP")}
    if spec.get("hostname") and spec.get("subdomain") == metadata(service).get("name"):
        address["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        address["nodeName"] = spec["nodeName"]
    address["targetRef"] = {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid")}
    return address


def _labels(service: Obj) -> dict[str, str]:
    labels = dict(metadata(service).get("labels") or {})
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def _port_list(ports: tuple[tuple[str, int, str], ...], *, always_named: bool = False) -> list[Obj]:
    """Endpoints leave an unnamed port's name out; an EndpointSlice's port always has one (``""``),
    as kube's controller writes it: kubectl's ``describe svc`` reads it without a nil check."""
    return [{**({"name": name} if name or always_named else {}), "port": port, "protocol": protocol}
            for name, port, protocol in ports]


def desired_endpoints(service: Obj, pods: Iterable[Obj]) -> Obj:
    """The Endpoints object kube's endpoint controller keeps for ``service`` (one subset per set of ports)."""
    subsets: dict[tuple[tuple[str, int, str], ...], Obj] = {}
    for pod, ready, ports in _candidates(service, pods):
        subset = subsets.setdefault(ports, {"addresses": [], "notReadyAddresses": []})
        subset["addresses" if ready else "notReadyAddresses"].append(_address(service, pod))
    meta = metadata(service)
    out = []
    for ports, subset in subsets.items():
        entry = {key: value for key, value in subset.items() if value}
        if ports:
            entry["ports"] = _port_list(ports)
        out.append(entry)
    endpoints: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                      "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"), "labels": _labels(service)}}
    if out:
        endpoints["subsets"] = out
    return endpoints


def desired_slices(service: Obj, pods: Iterable[Obj]) -> list[Obj]:
    """The EndpointSlices (without names) kube's endpointslice controller keeps for ``service``.

    One slice per set of ports, at most 100 endpoints each; a Service selecting nothing still
    has one empty slice, as kube keeps.
    """
    by_ports: dict[tuple[tuple[str, int, str], ...], list[Obj]] = {}
    for pod, ready, ports in _candidates(service, pods):
        address = _address(service, pod)
        terminating = bool(metadata(pod).get("deletionTimestamp"))
        endpoint: Obj = {"addresses": [address["ip"]],
                         "conditions": {"ready": ready and not terminating, "serving": ready, "terminating": terminating}}
        for key in ("hostname", "nodeName", "targetRef"):
            if key in address:
                endpoint[key] = address[key]
        by_ports.setdefault(ports, []).append(endpoint)
    if not by_ports:
        service_ports = tuple((p.get("name") or "", int(p["port"]), p.get("protocol") or "TCP")
                              for p in (service.get("spec") or {}).get("ports") or [] if isinstance(p.get("port"), int))
        by_ports[service_ports] = []
    meta = metadata(service)
    owner = {"apiVersion": "v1", "kind": "Service", "name": meta.get("name"), "uid": meta.get("uid"),
             "controller": True, "blockOwnerDeletion": True}
    labels = {**_labels(service), SERVICE_NAME_LABEL: meta.get("name"), MANAGED_BY_LABEL: MANAGED_BY}
    slices = []
    for ports, endpoints in sorted(by_ports.items()):
        for start in range(0, max(len(endpoints), 1), MAX_ENDPOINTS_PER_SLICE):
            slices.append({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{meta.get('name')}-", "namespace": meta.get("namespace"),
                             "labels": dict(labels), "ownerReferences": [dict(owner)]},
                "addressType": "IPv4",
                "endpoints": endpoints[start:start + MAX_ENDPOINTS_PER_SLICE],
                "ports": _port_list(ports, always_named=True),
            })
    return slices


def same_content(current: Obj, desired: Obj, keys: tuple[str, ...]) -> bool:
    """Whether ``current`` already holds what ``desired`` says, in ``keys`` and the labels."""
    return all(current.get(key) == desired.get(key) for key in keys) and (
        (metadata(current).get("labels") or {}) == (metadata(desired).get("labels") or {}))
