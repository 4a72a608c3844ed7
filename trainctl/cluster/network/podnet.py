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
from typing import Protocol


class PodNetwork(Protocol):
    """What a kubelet needs from the pod network."""

    mode: str

    def enter_argv(self, pod_uid: str) -> list[str]:
        """The prefix that runs a command inside pod ``pod_uid``'s namespaces ([] when the pod has none)."""

    def dial(self, host: str, port: int, timeout: float) -> socket.socket:
        """A TCP connection to ``host:port`` as seen from the pod network."""


class SharedNetwork:
    """Every pod on this machine's own network stack: nothing to enter, addresses dialed directly."""

    mode = "shared"

    def enter_argv(self, pod_uid: str) -> list[str]:
        return []

    def dial(self, host: str, port: int, timeout: float) -> socket.socket:
        return socket.create_connection((host, port), timeout=timeout)
