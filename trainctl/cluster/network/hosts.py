"""The cluster's hosts file and the Python resolver hook that reads it.

Rewriting names in env and arguments covers what a pod is started with; a Python process
that builds a Service name at run time (``socket.create_connection(("db", 5432))``) needs
a resolver. We keep ``DIR/network/hosts`` (one line per Service, its fully qualified name
and address) and put a ``sitecustomize`` on the pod's PYTHONPATH that answers
``getaddrinfo``/``gethostbyname`` from it, with the pod namespace's DNS search list. The
machine's /etc/hosts is never touched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .ranges import CLUSTER_DOMAIN

HOSTS_FILE_ENV = "TRAINCTL_HOSTS_FILE"
NAMESPACE_ENV = "TRAINCTL_POD_NAMESPACE"
_RESOLVER_SOURCE = Path(__file__).with_name("resolver") / "sitecustomize.py"


def service_fqdn(name: str, namespace: str) -> str:
    return f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}"


class HostsFile:
    """``DIR/network/hosts`` plus the resolver directory pods put on PYTHONPATH."""

    def __init__(self, network_dir: Path) -> None:
        self.path = network_dir / "hosts"
        self.python_dir = network_dir / "python"
        self._content: str | None = None

    def install_resolver(self) -> None:
        self.python_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_RESOLVER_SOURCE, self.python_dir / "sitecustomize.py")
        if not self.path.exists():
            self.write({})

    def write(self, addresses: dict[str, str]) -> None:
        """Replace the file with ``fqdn -> address`` (atomically, and only when it changed)."""
        content = "".join(f"{address} {name}\n" for name, address in sorted(addresses.items()))
        if content == self._content:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(content)
        os.replace(tmp, self.path)
        self._content = content

    def pod_env(self, namespace: str, inherited_pythonpath: str | None) -> dict[str, str]:
        """What a pod's processes need to use the resolver."""
        pythonpath = str(self.python_dir) + (os.pathsep + inherited_pythonpath if inherited_pythonpath else "")
        return {"PYTHONPATH": pythonpath, HOSTS_FILE_ENV: str(self.path), NAMESPACE_ENV: namespace}
