"""How a launcher reaches a cluster: a kubeconfig on this machine, or a pod's service account.

The Python client reads ``KUBECONFIG`` once, at import time; these helpers read it when
they are called, so a process may point itself at a freshly started cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.config.incluster_config import SERVICE_TOKEN_FILENAME

SERVICE_ACCOUNT_NAMESPACE_FILE = Path(SERVICE_TOKEN_FILENAME).with_name("namespace")


class ClusterConfigError(Exception):
    """The cluster's configuration cannot be used; the message is one line for the user."""


class NoClusterConfigured(ClusterConfigError):
    """Neither a kubeconfig nor an in-cluster service account is available."""


def kubeconfig_path() -> str | None:
    """The kubeconfig a kubectl in this environment would use, if there is one."""
    env = os.environ.get("KUBECONFIG", "")
    if env.strip(os.pathsep):
        return env
    default = Path.home() / ".kube" / "config"
    return str(default) if default.is_file() else None


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and Path(SERVICE_TOKEN_FILENAME).is_file()


def connect(kubeconfig: str | None = None) -> client.ApiClient:
    """An API client for ``kubeconfig``, else the configured kubeconfig, else the pod's service account."""
    path = kubeconfig or kubeconfig_path()
    try:
        if path:
            return config.new_client_from_config(config_file=path)
        if in_cluster():
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
    except (config.ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())  # YAML errors span lines
        raise ClusterConfigError(f"cannot use kubeconfig {path}: {reason}" if path else f"cannot use the service account: {reason}") from None
    raise NoClusterConfigured("no cluster configured: set KUBECONFIG or create ~/.kube/config")


def default_namespace(kubeconfig: str | None = None) -> str:
    """The current context's namespace, the pod's own namespace in a cluster, else ``default``."""
    path = kubeconfig or kubeconfig_path()
    if path:
        try:
            _, active = config.list_kube_config_contexts(config_file=path)
            namespace = ((active or {}).get("context") or {}).get("namespace")
            if namespace:
                return namespace
        except (config.ConfigException, OSError, yaml.YAMLError):
            pass  # connect() reports a broken kubeconfig
        return "default"
    if SERVICE_ACCOUNT_NAMESPACE_FILE.is_file():
        return SERVICE_ACCOUNT_NAMESPACE_FILE.read_text().strip() or "default"
    return "default"
