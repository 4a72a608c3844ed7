"""How every trainctl component reaches an API server: one rule, the one kubectl follows.

The controller, the launcher (``trainctl run``), the pipeline step and the kubelet all
connect through :func:`connect`, so they agree on which cluster they talk to. The rule,
first match wins (client-go's, with in-cluster placed where a pod expects it):

1. an explicit kubeconfig (``--kubeconfig``);
2. ``$KUBECONFIG`` (a list of files, merged as kubectl merges them);
3. the pod's service account, when running in a pod (``KUBERNETES_SERVICE_HOST`` set and
   the token mounted);
4. ``~/.kube/config``.

Nothing found is :class:`NoClusterConfigured` (``trainctl run`` then starts a throwaway
local cluster); a configuration that cannot be used is :class:`ClusterConfigError`, whose
message is one line for the user.

``$KUBECONFIG`` is read when :func:`connect` is called, not at import time as the
``kubernetes`` package does, so a process may point itself at a cluster it just started.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Optional

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config import incluster_config

IN_CLUSTER = None  # what :func:`source` answers for the pod's service account


class ClusterConfigError(Exception):
    """The cluster's configuration cannot be used; the message is one line for the user."""


class NoClusterConfigured(ClusterConfigError):
    """No kubeconfig and no service account: there is no cluster to talk to."""


def service_account_file(name: str) -> Path:
    """A file of the pod's mounted service account (``token``, ``namespace``, ``ca.crt``)."""
    return Path(incluster_config.SERVICE_TOKEN_FILENAME).with_name(name)


def in_cluster() -> bool:
    """Whether this process runs in a pod with a mounted service account token."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and service_account_file("token").is_file()


def source(kubeconfig: Optional[str] = None) -> Optional[str]:
    """The kubeconfig the rule picks, or :data:`IN_CLUSTER` (None) for the service account."""
    if kubeconfig:
        return kubeconfig
    env = os.environ.get("KUBECONFIG", "")
    if env.strip(os.pathsep):
        return env
    if in_cluster():
        return IN_CLUSTER
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return str(default)
    raise NoClusterConfigured("no cluster configured: set KUBECONFIG, pass --kubeconfig or create ~/.kube/config")


def load_configuration(kubeconfig: Optional[str] = None, *, context: Optional[str] = None) -> k8s_client.Configuration:
    """The configuration (server, credentials, TLS) the rule picks."""
    path = source(kubeconfig)
    configuration = k8s_client.Configuration()
    try:
        if path is IN_CLUSTER:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    except (k8s_config.ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())  # YAML errors span lines
        what = "the service account" if path is IN_CLUSTER else f"kubeconfig {path}"
        raise ClusterConfigError(f"cannot use {what}: {reason}") from None
    return configuration


def connect(kubeconfig: Optional[str] = None, *, context: Optional[str] = None) -> k8s_client.ApiClient:
    """An API client (``kubernetes.client.ApiClient``) on the configuration the rule picks."""
    return k8s_client.ApiClient(load_configuration(kubeconfig, context=context))


def default_namespace(kubeconfig: Optional[str] = None) -> str:
    """The current context's namespace, the pod's own namespace in a cluster, else ``default``."""
    try:
        path = source(kubeconfig)
    except NoClusterConfigured:
        return "default"
    if path is IN_CLUSTER:
        with contextlib.suppress(OSError):
            return service_account_file("namespace").read_text(encoding="utf-8").strip() or "default"
        return "default"
    try:
        _, active = k8s_config.list_kube_config_contexts(config_file=path)
    except (k8s_config.ConfigException, OSError, yaml.YAMLError):
        return "default"  # connect() reports a broken kubeconfig
    return ((active or {}).get("context") or {}).get("namespace") or "default"
