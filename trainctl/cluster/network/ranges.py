"""The address ranges of a cluster's pods and Services on the loopback range, and its names.

Every cluster directory takes its own slice of the pod and Service spaces, and each node a
slice of its cluster's pod range, so clusters running side by side on one machine never hand
out the same address.
"""

import hashlib
import ipaddress
from pathlib import Path
from typing import Optional

# Pods get addresses from POD_SPACE and ClusterIPs come from SERVICE_SPACE. Every cluster
# directory takes its own slice of each (see cluster_ranges), so clusters running side by
# side on one machine (parallel test runs, several users) never hand out the same address.
POD_SPACE = "127.128.0.0/10"
POD_PREFIX = 20  # 4094 pods per cluster, 1024 slices
SERVICE_SPACE = "127.96.0.0/12"
SERVICE_PREFIX = 22  # 1022 ClusterIPs per cluster, 1024 slices
HOST_IP = "127.0.0.1"
CLUSTER_DOMAIN = "cluster.local"


def _slice(space: str, prefix: int, key: bytes, offset: int = 0) -> str:
    """The /``prefix`` slice of ``space`` that ``key`` hashes to, or the ``offset``-th after it."""
    network = ipaddress.ip_network(space)
    subnets = 2 ** (prefix - network.prefixlen)
    index = (int.from_bytes(hashlib.sha256(key).digest()[:8], "big") + offset) % subnets
    return str(ipaddress.ip_network((int(network.network_address) + index * 2 ** (32 - prefix), prefix)))


def cluster_ranges(directory: Path) -> tuple[str, str]:
    """(pod CIDR, service CIDR) of the cluster in ``directory``: stable for the directory, so
    the ClusterIPs the API server stored stay valid when the cluster starts again."""
    key = str(Path(directory).resolve()).encode()
    return _slice(POD_SPACE, POD_PREFIX, b"pods:" + key), _slice(SERVICE_SPACE, SERVICE_PREFIX, b"services:" + key)


NODE_POD_PREFIX = 24  # a node's share of its cluster's pod range: 254 pods, 16 nodes


def node_pod_cidr(directory: Path, index: int) -> str:
    """The pod range of the cluster's ``index``-th node (0-based), as a real cluster gives
    each Node a podCIDR of its own: kubelets on one machine must never hand two pods the
    same loopback address."""
    slices = list(ipaddress.ip_network(cluster_ranges(directory)[0]).subnets(new_prefix=NODE_POD_PREFIX))
    if not 0 <= index < len(slices):
        raise ValueError(f"a local cluster has at most {len(slices)} nodes")
    return str(slices[index])


# A node's own addresses for the cluster's ClusterIPs, as each real node has a kube-proxy of
# its own: kubelets on one machine cannot all listen on one ClusterIP, and the one that got
# it would carry every node's traffic (a frozen node would cut every Service). Each cluster
# takes a run of consecutive /22 slices of this space, one per node.
NODE_SERVICE_SPACE = "127.64.0.0/11"


def node_service_cidr(directory: Path, pod_cidr: str) -> Optional[str]:
    """Where the node whose pod range is ``pod_cidr`` serves its cluster's ClusterIPs; None
    for a cluster of one node (its pod range is the whole cluster's), which serves the
    ClusterIPs themselves."""
    pods, services = (ipaddress.IPv4Network(cidr) for cidr in cluster_ranges(directory))
    node = ipaddress.IPv4Network(pod_cidr)
    if node == pods or not node.subnet_of(pods):
        return None
    index = (int(node.network_address) - int(pods.network_address)) >> (32 - NODE_POD_PREFIX)
    key = b"node-services:" + str(Path(directory).resolve()).encode()
    return _slice(NODE_SERVICE_SPACE, services.prefixlen, key, offset=index)


def node_service_address(cluster_ip: str, service_cidr: str, node_cidr: Optional[str]) -> str:
    """The node's address for ``cluster_ip``: the same offset in the node's range (the
    ClusterIP itself without one, or for an address outside the cluster's service range)."""
    if node_cidr is None:
        return cluster_ip
    try:
        address, services = ipaddress.ip_address(cluster_ip), ipaddress.ip_network(service_cidr)
    except ValueError:
        return cluster_ip
    if address not in services:
        return cluster_ip
    return str(ipaddress.ip_network(node_cidr).network_address + (int(address) - int(services.network_address)))
