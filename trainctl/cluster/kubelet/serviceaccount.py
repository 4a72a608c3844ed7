"""A pod's identity: its ServiceAccount token files and the API server's address in its env.

What a real kubelet gives every pod, so that in-cluster clients
(``kubernetes.config.load_incluster_config()``, client-go's ``rest.InClusterConfig``) work:

- ``KUBERNETES_SERVICE_HOST``/``_PORT`` (and the docker-link forms ``KUBERNETES_PORT_443_TCP…``)
  from the ``kubernetes`` Service in ``default``: its ClusterIP as the pod reaches it (the
  node's own address for it on a cluster of several nodes), port 443, which the node's Service
  proxy forwards to the API server. Port 443 is a privileged port: where this kubelet may not
  listen on it (neither root nor a lowered ``net.ipv4.ip_unprivileged_port_start``), the pod
  is given the API server's own address from the Service's Endpoints instead.
- unless ``automountServiceAccountToken`` is false (the pod's, else its account's), the files
  ``token`` (a TokenRequest bound to the pod), ``ca.crt`` (the cluster's CA) and ``namespace``
  in ``DIR/pods/<uid>/serviceaccount/``, written before its first container starts. In the
  isolated network mode the pod sees that directory at
  ``/var/run/secrets/kubernetes.io/serviceaccount``; in the shared mode it is only there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.kubelet import paths
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import SERVICE_ACCOUNTS

Obj = dict[str, Any]

DIRECTORY = "serviceaccount"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
KUBELET_TOKEN_SECONDS = 3607  # what a kubelet asks; the API server extends it (tokens.KUBELET_EXPIRATION)
SERVICE_NAMESPACE, SERVICE_NAME = "default", "kubernetes"


class AccountMissing(Exception):
    """The pod's ServiceAccount (or the pod itself) is not there to get a token for."""


def automount(pod: Obj, account: Optional[Obj]) -> bool:
    """Whether the pod gets token files: the pod's setting, else its account's, else yes."""
    setting = (pod.get("spec") or {}).get("automountServiceAccountToken")
    if setting is None and account is not None:
        setting = account.get("automountServiceAccountToken")
    return setting is not False


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    # 0644 as kube's kube-api-access volume (defaultMode 420): the pod's sandboxed user reads
    # it; on the machine the cluster directory keeps everyone else out.
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(partial, path)


def account_name(pod: Obj) -> str:
    spec = pod.get("spec") or {}
    return spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"


class ServiceAccountFiles:
    """Writes pods' token files; ``ca`` is the cluster CA bundle (PEM)."""

    def __init__(self, client: KubeClient, pods_dir: Path, ca: bytes) -> None:
        self._client = client
        self._pods_dir = pods_dir
        self._ca = ca

    def directory(self, pod_uid: str) -> Path:
        return paths.inside(self._pods_dir, pod_uid, DIRECTORY)

    def write(self, pod: Obj) -> Optional[Path]:
        """The pod's token files, written (None when it asks for none); ``AccountMissing``
        when there is no account or pod to bind a token to; ApiError when the API server
        did not answer."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace") or "default", account_name(pod)
        account = self._client.get_or_none(SERVICE_ACCOUNTS, namespace, name)
        if account is None:
            raise AccountMissing(f'serviceaccount "{name}" not found')
        if not automount(pod, account):
            return None
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": {"expirationSeconds": KUBELET_TOKEN_SECONDS,
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                               "uid": meta["uid"]}}}
        answered = self._client.create(SERVICE_ACCOUNTS, request, subresource="token").object
        token = ((answered or {}).get("status") or {}).get("token")
        if not token:
            raise AccountMissing(f'no token for serviceaccount "{name}"')
        directory = self.directory(meta["uid"])
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o755)  # for the pod's sandboxed user, as _write's mode
        _write(directory / "token", token.encode())
        _write(directory / "ca.crt", self._ca)
        _write(directory / "namespace", namespace.encode())
        return directory


def may_listen_on(port: int) -> bool:
    """Whether this process may listen on ``port`` (a port below 1024 needs root or a lowered
    ``ip_unprivileged_port_start``)."""
    if port >= 1024 or os.geteuid() == 0:
        return True
    try:
        return int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text()) <= port
    except (OSError, ValueError):
        return False


def api_server_env(service: Optional[Obj], endpoints: Optional[Obj], node_address: Callable[[str], str],
                   through_proxy: bool) -> dict[str, str]:
    """The ``KUBERNETES_*`` variables for the ``kubernetes`` Service ({} without it)."""
    spec = (service or {}).get("spec") or {}
    cluster_ip = spec.get("clusterIP")
    port = next((p for p in spec.get("ports") or [] if isinstance(p, dict) and isinstance(p.get("port"), int)), None)
    if not cluster_ip or cluster_ip == "None" or port is None:
        return {}
    host, number = node_address(cluster_ip), port["port"]
    if not through_proxy:
        subset: Obj = next(iter((endpoints or {}).get("subsets") or []), {})
        first: Obj = next(iter(subset.get("addresses") or []), {})
        address = first.get("ip")
        target = next((p.get("port") for p in subset.get("ports") or [] if p.get("name") == port.get("name")), None)
        if not address or not isinstance(target, int):
            return {}
        host, number = address, target
    link = f"tcp://{host}:{number}"
    prefix = f"KUBERNETES_PORT_{number}_TCP"
    env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": str(number),
           "KUBERNETES_PORT": link, prefix: link, f"{prefix}_PROTO": "tcp", f"{prefix}_PORT": str(number),
           f"{prefix}_ADDR": host}
    if port.get("name"):
        env[f"KUBERNETES_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(number)
    return env
