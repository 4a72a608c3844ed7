"""A kubelet's credentials, as ``kubeadm join`` leaves them on a node.

Before a node's kubelet starts, the cluster's CA signs its serving certificate (which the
API server checks when it dials the kubelet for exec, attach and port-forward) and its client
certificate (``system:node:NAME`` in ``system:nodes``), and ``DIR/kubelet/NAME/kubeconfig``
names the API server, the CA and that certificate: the kubelet is then one node to the API
server, kept to its own Node, Lease and pods by NodeRestriction and the node authorizer, and
never holds the admin token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainctl.cluster.apiserver.auth import pki


def kubeconfig_path(directory: Path, node: str) -> Path:
    return directory / "kubelet" / node / "kubeconfig"


def bootstrap(directory: Path, node: str, address: str) -> Path:
    """Issue (when missing) node ``node``'s certificates for a kubelet serving on ``address``
    and write its kubeconfig from the cluster's (``DIR/kubeconfig``: the server's URL); return
    the kubeconfig's path."""
    credentials = pki.ensure_node(directory / "pki", node, address)
    admin: dict[str, Any] = yaml.safe_load((directory / "kubeconfig").read_text())
    server = admin["clusters"][0]["cluster"]["server"]
    user = f"{pki.NODE_PREFIX}{node}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(credentials.ca_cert)}}],
        "users": [{"name": user, "user": {"client-certificate": str(credentials.client_cert),
                                          "client-key": str(credentials.client_key)}}],
        "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
        "current-context": user,
    }
    path = kubeconfig_path(directory, node)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    pki.write_atomically(path, yaml.safe_dump(config, sort_keys=False).encode(), private=True)
    return path
