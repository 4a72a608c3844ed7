"""Pod IP address management: one loopback address per pod, from the pod range.

Linux routes all of 127.0.0.0/8 to the loopback interface, so any address in the pod
range can be bound without configuring anything. Addresses are handed out lowest-free
first and given back when a pod ends, like a CNI plugin's host-local IPAM.
"""

from __future__ import annotations

import ipaddress
import threading
from typing import Optional


class PodIPAllocator:
    """Thread-safe uid -> address bookkeeping over one range."""

    def __init__(self, cidr: str) -> None:
        self._network = ipaddress.ip_network(cidr)
        self._lock = threading.Lock()
        self._by_uid: dict[str, str] = {}
        self._next = 0

    def allocate(self, uid: str) -> str:
        """The pod's address, allocating one on first use."""
        with self._lock:
            if uid in self._by_uid:
                return self._by_uid[uid]
            taken = set(self._by_uid.values())
            hosts = self._network.num_addresses - 2
            # Start after the last handed-out address so a freed one is not reused at once
            # (a late client of a finished pod must not reach the next pod by accident).
            for step in range(hosts):
                candidate = str(self._network.network_address + 2 + (self._next + step) % hosts)
                if candidate not in taken:
                    self._next = (self._next + step + 1) % hosts
                    self._by_uid[uid] = candidate
                    return candidate
            raise RuntimeError(f"pod address range {self._network} is exhausted")

    def lookup(self, uid: str) -> Optional[str]:
        with self._lock:
            return self._by_uid.get(uid)

    def release(self, uid: str) -> None:
        with self._lock:
            self._by_uid.pop(uid, None)
