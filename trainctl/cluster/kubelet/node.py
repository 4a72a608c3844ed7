"""The Node object this kubelet registers, and the Lease that says it is alive.

Capacity is this machine's CPU count and memory plus the fake devices it was asked to
advertise; the node Lease in ``kube-node-lease`` is renewed every few seconds, as the
real kubelet's heartbeat, and the Ready condition is written when it changes.
"""

from __future__ import annotations

import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.network.ranges import HOST_IP
from trainctl.cluster.podutil import GPU_RESOURCE, NPU_RESOURCE

Obj = dict[str, Any]

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
KUBELET_VERSION = "v1.32.0-trainctl"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def micro_time() -> str:
    """metav1.MicroTime, as Leases carry it."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def memory_kib() -> int:
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return 0


def capacity(gpus: int = 0, npus: int = 0, *, cpu: Optional[str] = None, memory: Optional[str] = None) -> dict[str, str]:
    """What this node offers: the machine's CPUs and memory unless given (a node's share)."""
    resources = {"cpu": cpu or str(os.cpu_count() or 1), "memory": memory or f"{memory_kib()}Ki", "pods": "110"}
    if gpus:
        resources[GPU_RESOURCE] = str(gpus)
    if npus:
        resources[NPU_RESOURCE] = str(npus)
    return resources


def os_image(os_release: str = "/etc/os-release") -> str:
    """``PRETTY_NAME`` of os-release, as the kubelet reports ``nodeInfo.osImage``."""
    try:
        text = Path(os_release).read_text()
    except OSError:
        return platform.system()
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "PRETTY_NAME" and value.strip():
            return value.strip().strip("'\"")
    return platform.system()


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def role_labels(name: str, control_plane_node: str) -> dict[str, str]:
    """The control-plane role for the cluster's first node only, as kubeadm and kind label
    one control-plane node and leave the nodes that join it without a role."""
    return {CONTROL_PLANE_LABEL: ""} if name == control_plane_node else {}


def node_object(name: str, labels: Optional[dict[str, str]] = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": _arch(),
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": _arch(), **(labels or {}),
        }},
        "spec": {},
    }


def node_status(name: str, resources: dict[str, str], ready: bool, message: str,
                ready_since: str, kubelet_port: int = 0) -> Obj:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def condition(kind: str, status: str, reason: str, text: str, since: str) -> Obj:
        return {"type": kind, "status": status, "reason": reason, "message": text,
                "lastHeartbeatTime": now, "lastTransitionTime": since}

    return {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", ready_since),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", ready_since),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", ready_since),
            condition("Ready", "True" if ready else "False", "KubeletReady" if ready else "KubeletNotReady", message, ready_since),
        ],
        "addresses": [{"type": "InternalIP", "address": HOST_IP}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},  # the streaming server
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": platform.release(),
            "osImage": os_image(), "containerRuntimeVersion": "process://trainctl",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux", "architecture": _arch(),
        },
    }


def lease_object(node: Obj) -> Obj:
    meta = node["metadata"]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": meta["name"], "namespace": LEASE_NAMESPACE, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta.get("uid", "")}]},
        "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                 "renewTime": micro_time()},
    }
