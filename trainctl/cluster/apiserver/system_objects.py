"""The objects a cluster has from its first moment: the ``kubernetes`` Service, the default
RBAC policy (``bootstrap_policy``) and each namespace's ``default`` ServiceAccount.

On the isolated network, ``kube-system/kube-dns`` names the cluster DNS (see
:func:`dns_service`).

The ``kubernetes`` Service in ``default`` is how a pod finds the API server, as kube-apiserver
keeps it: the first address of the service range as its ClusterIP, port 443 named ``https``,
no selector, and Endpoints naming the server's own address and port (which the local server
learns only once it listens, and which may change at every start). The kubelet's Service proxy
forwards the ClusterIP there, and pods get ``KUBERNETES_SERVICE_HOST``/``_PORT`` from it.

Every namespace gets its ``default`` ServiceAccount the moment it is created: kube's
ServiceAccount controller does it a moment later, and pods created in between are refused;
here there is no in between (the control plane's ServiceAccount controller puts back one
that is deleted).
"""

from __future__ import annotations

import ipaddress
from typing import Any

Obj = dict[str, Any]

NAMESPACE = "default"
NAME = "kubernetes"
PORT = 443
PORT_NAME = "https"
_LABELS = {"component": "apiserver", "provider": "kubernetes"}
DEFAULT_SERVICE_ACCOUNT = "default"


def cluster_ip(service_cidr: str) -> str:
    """The ``kubernetes`` Service's ClusterIP: the first address of the service range."""
    return str(next(ipaddress.ip_network(service_cidr).hosts()))


DNS_NAMESPACE = "kube-system"
DNS_NAME = "kube-dns"
_DNS_LABELS = {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"}


def dns_cluster_ip(service_cidr: str) -> str:
    """The cluster DNS's ClusterIP: the tenth address of the service range, as kubeadm gives it."""
    return str(ipaddress.ip_network(service_cidr).network_address + 10)


def has_cluster_dns(service_cidr: str) -> bool:
    """Whether pods get a DNS server: on the isolated network (its own service range); a
    loopback range is the shared network's, where pods use the machine's resolver."""
    return not ipaddress.ip_network(service_cidr).is_loopback


def dns_service(service_cidr: str) -> Obj:
    """``kube-system/kube-dns`` as kubeadm creates it. It has no selector and no Endpoints:
    the network's router answers on the ClusterIP itself."""
    ip = dns_cluster_ip(service_cidr)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": DNS_NAME, "namespace": DNS_NAMESPACE, "labels": dict(_DNS_LABELS)},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "sessionAffinity": "None",
                     "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                               {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}}


def service(service_cidr: str, target_port: int) -> Obj:
    ip = cluster_ip(service_cidr)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(_LABELS)},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "sessionAffinity": "None",
                     "ports": [{"name": PORT_NAME, "port": PORT, "protocol": "TCP", "targetPort": target_port}]}}


def endpoints(host: str, port: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": host}], "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}]}


def service_account(namespace: str, name: str = DEFAULT_SERVICE_ACCOUNT) -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
