"""The seam between a kubelet and the network its pods live in.

A kubelet starts processes in a pod (its containers, ``kubectl exec``) and opens connections
to a pod's addresses (``kubectl port-forward``, probes). How it does either depends on the
network mode: in *shared* mode every pod uses this machine's network stack, so a process is
started as it is and an address is dialed directly; in *isolated* mode each pod has network
and mount namespaces of its own, entered with a command prefix, and pod addresses are only
reachable from inside the cluster's network. Code that does either goes through a
:class:`PodNetwork`, never around it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional, Protocol

from trainctl.cluster.network import control
from trainctl.cluster.network.dns_records import Records


class PodNetwork(Protocol):
    """What a kubelet needs from the pod network."""

    mode: str

    def enter_argv(self, pod_uid: str) -> list[str]:
        """The prefix that runs a command inside pod ``pod_uid``'s namespaces ([] when the pod has none)."""

    def namespaces_argv(self, pod_uid: str) -> list[str]:
        """The prefix that puts a process in pod ``pod_uid``'s network, UTS and mount namespaces
        with the credentials it has (a pod sandbox is made there as an unprivileged user)."""

    def dial(self, host: str, port: int, timeout: float) -> socket.socket:
        """A TCP connection to ``host:port`` as seen from the pod network."""

    def setup_pod(self, pod_uid: str, ip: str, hostname: str = "", namespace: str = "default") -> None:
        """Give the pod its network (address ``ip``, ``hostname``, the DNS search path of
        ``namespace``) before its first process starts."""

    def teardown_pod(self, pod_uid: str) -> None:
        """The pod's processes are gone: release its network."""


class SharedNetwork:
    """Every pod on this machine's own network stack: nothing to enter, addresses dialed directly."""

    mode = "shared"

    def enter_argv(self, pod_uid: str) -> list[str]:
        return []

    def namespaces_argv(self, pod_uid: str) -> list[str]:
        return []

    def dial(self, host: str, port: int, timeout: float) -> socket.socket:
        return socket.create_connection((host, port), timeout=timeout)

    def setup_pod(self, pod_uid: str, ip: str, hostname: str = "", namespace: str = "default") -> None:
        pass

    def teardown_pod(self, pod_uid: str) -> None:
        pass


class IsolatedNetwork:
    """Every pod in network and mount namespaces of its own, built by the cluster's router
    (:mod:`.router`): this side asks for a pod's sandbox, enters it with ``nsenter`` and
    gets connections into the pod network through the router."""

    mode = "isolated"

    def __init__(self, directory: Path, node_name: str, pod_cidr: str) -> None:
        self.directory = directory
        self.node_name = node_name
        self.pod_cidr = pod_cidr
        self._lock = threading.Lock()
        self._pauses: dict[str, int] = {}
        self._published: Optional[list[Any]] = None
        self._published_names: Optional[dict[str, Any]] = None
        self.kubernetes_ip = ""
        self.healing = threading.Event()  # the node's partition healed: the kubelet checks its pods
        self.on_healing: Callable[[], None] = lambda: None

    def attach(self) -> None:
        """The kubelet starts: the node's bridge exists, what a previous kubelet left is gone."""
        answer, _ = control.request(self.directory, {"op": "node", "node": self.node_name, "cidr": self.pod_cidr})
        self.kubernetes_ip = str(answer.get("kubernetes") or "")

    def _for_node(self, message: dict[str, Any], timeout: float = 30.0) -> tuple[dict[str, Any], Optional[socket.socket]]:
        """A request about this node; a router that does not know the node (it restarted, and
        its pods' sandboxes went with it) is told about it again first."""
        try:
            return control.request(self.directory, message, timeout)
        except control.RouterError as exc:
            if control.UNKNOWN_NODE not in str(exc):
                raise
        self.attach()
        self._published = self._published_names = None
        return control.request(self.directory, message, timeout)

    def setup_pod(self, pod_uid: str, ip: str, hostname: str = "", namespace: str = "default") -> None:
        """The pod's sandbox, with ``ip`` on its ``eth0``, ``hostname`` and a resolv.conf
        naming the cluster DNS (idempotent)."""
        answer, _ = self._for_node({
            "op": "sandbox", "uid": pod_uid, "node": self.node_name, "ip": ip, "hostname": hostname,
            "namespace": namespace,
            "serviceaccount": str(self.directory / "pods" / pod_uid / "serviceaccount")})
        with self._lock:
            self._pauses[pod_uid] = int(answer["pid"])

    def teardown_pod(self, pod_uid: str) -> None:
        with self._lock:
            self._pauses.pop(pod_uid, None)
        control.request(self.directory, {"op": "teardown", "uid": pod_uid})

    def _pause(self, pod_uid: str) -> int:
        with self._lock:
            pid = self._pauses.get(pod_uid)
        if pid is None:
            raise OSError(f"pod {pod_uid} has no network sandbox on this node")
        return pid

    def namespaces_argv(self, pod_uid: str) -> list[str]:
        return ["nsenter", "-t", str(self._pause(pod_uid)), "-n", "-u", "-m", "--"]

    def enter_argv(self, pod_uid: str) -> list[str]:
        pid = self._pause(pod_uid)
        # --wd=. keeps the working directory the process was started in (the pod's mount
        # namespace is a copy of the machine's, so the same path is there).
        return ["nsenter", "-t", str(pid), "-U", "-n", "-m", "-u", "--preserve-credentials", "--wd=.", "--"]

    def dial(self, host: str, port: int, timeout: float) -> socket.socket:
        try:
            _, connection = control.request(self.directory, {"op": "dial", "host": host, "port": port,
                                                             "timeout": timeout}, timeout=timeout + 5)
        except control.RouterError as exc:
            raise ConnectionRefusedError(str(exc)) from None
        if connection is None:
            raise ConnectionRefusedError(f"no connection to {host}:{port}")
        connection.settimeout(timeout)
        return connection

    def dial_apiserver(self) -> socket.socket:
        """This node's kubelet's connection to the API server (cut while it is partitioned)."""
        answer, connection = self._for_node({"op": "apiserver", "node": self.node_name}, timeout=15)
        if answer.get("healing") and not self.healing.is_set():
            self.healing.set()
            self.on_healing()
        if connection is None:
            raise ConnectionRefusedError("the router handed over no connection")
        return connection

    def restore(self, pod_uids: set[str]) -> None:
        """After a heal: links back for the pods this node still runs."""
        self._for_node({"op": "restore", "node": self.node_name, "uids": sorted(pod_uids)})

    def publish_names(self, records: Records) -> None:
        """The cluster's DNS records, for the DNS server the router runs (sent only on change)."""
        data = records.to_json()
        if data == self._published_names:
            return
        self._for_node({"op": "names", "node": self.node_name, "records": data})
        self._published_names = data

    def publish_services(self, rules: dict[tuple[str, int], list[tuple[str, int]]]) -> None:
        """This node's ClusterIP rules, for the proxy the router runs (sent only on change)."""
        listed = sorted([list(frontend), sorted(list(b) for b in backends)] for frontend, backends in rules.items())
        if listed == self._published:
            return
        self._for_node({"op": "services", "node": self.node_name, "rules": listed})
        self._published = listed


class RouterServices:
    """The kubelet's Service proxy in isolated mode: its rules go to the router, which serves
    the ClusterIPs inside the pod network (the drop-in for :class:`.proxy.ServiceProxy`)."""

    def __init__(self, network: IsolatedNetwork) -> None:
        self._network = network

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def update(self, rules: dict[tuple[str, int], list[tuple[str, int]]]) -> None:
        self._network.publish_services(rules)

    def update_names(self, records: Records) -> None:
        self._network.publish_names(records)
