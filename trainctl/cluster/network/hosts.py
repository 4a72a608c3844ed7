"""The cluster's hosts file and the Python resolver hook that reads it.

Rewriting names in env and arguments covers what a pod is started with; a Python process
that builds a Service name at run time (``socket.create_connection(("db", 5432))``) needs
a resolver. We keep ``DIR/network/hosts`` (one line per Service, its fully qualified name
and address) and put a ``sitecustomize`` on the pod's PYTHONPATH that answers
``getaddrinfo``/``gethostbyname`` from it, with the pod namespace's DNS search list. The
machine's /etc/hosts is never touched.

Every kubelet of a cluster on the shared network writes the one hosts file, and several
start at once: each write goes through a temporary file of its own in the same directory,
renamed over the file, so writers never trip over each other and a reader sees a whole
file. A write that fails anyway is logged and tried again on the next sync: a kubelet
never dies of it.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from trainctl.cluster.network.ranges import CLUSTER_DOMAIN

HOSTS_FILE_ENV = "TRAINCTL_HOSTS_FILE"
NAMESPACE_ENV = "TRAINCTL_POD_NAMESPACE"
log = logging.getLogger(__name__)
_RESOLVER_SOURCE = Path(__file__).with_name("resolver") / "sitecustomize.py"


def replace_file(path: Path, data: bytes) -> None:
    """Put ``data`` at ``path`` in one rename, through a temporary file no other writer uses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def service_fqdn(name: str, namespace: str) -> str:
    return f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}"


class HostsFile:
    """``DIR/network/hosts`` plus the resolver directory pods put on PYTHONPATH."""

    def __init__(self, network_dir: Path) -> None:
        self.path = network_dir / "hosts"
        self.python_dir = network_dir / "python"
        self._content: str | None = None

    def install_resolver(self) -> None:
        replace_file(self.python_dir / "sitecustomize.py", _RESOLVER_SOURCE.read_bytes())
        if not self.path.exists():
            self.write({})

    def write(self, addresses: dict[str, str]) -> None:
        """Replace the file with ``fqdn -> address`` (atomically, and only when it changed);
        a failure is logged, and the next write tries again."""
        content = "".join(f"{address} {name}\n" for name, address in sorted(addresses.items()))
        if content == self._content:
            return
        try:
            replace_file(self.path, content.encode())
        except OSError as exc:
            log.warning("writing %s failed (tried again on the next sync): %s", self.path, exc)
            return
        self._content = content

    def pod_env(self, namespace: str) -> dict[str, str]:
        """What a pod's processes need to use the resolver."""
        return {"PYTHONPATH": str(self.python_dir), HOSTS_FILE_ENV: str(self.path), NAMESPACE_ENV: namespace}
