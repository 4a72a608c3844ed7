"""How a kubelet of the embedded cluster feeds the Metrics API (``metrics.k8s.io``).

In a real cluster metrics-server scrapes each kubelet; here each kubelet pushes its node's
NodeMetrics and the PodMetrics of the pods it runs to the API server in one request, every
``interval`` seconds, so the API server stays the only hub. The server keeps them in memory
and forgets them after three intervals without a refresh (see ``apiserver.metrics_api``).
This module only speaks HTTP through ``KubeClient``: the kubelet imports it without
importing the server.
"""

from __future__ import annotations

from typing import Any

from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import Resource

API_VERSION = "metrics.k8s.io/v1beta1"
NODE_METRICS = Resource("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", namespaced=False)
POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics")
USAGE_SUBRESOURCE = "usage"  # private: the server's discovery does not list it
DEFAULT_INTERVAL_SECONDS = 15.0


def usage_report(node: str, node_metrics: dict[str, Any], pod_metrics: list[dict[str, Any]], *,
                 interval: float = DEFAULT_INTERVAL_SECONDS) -> dict[str, Any]:
    """The ``NodeUsage`` document one publication sends."""
    return {"apiVersion": API_VERSION, "kind": "NodeUsage", "metadata": {"name": node},
            "intervalSeconds": interval, "node": node_metrics, "pods": list(pod_metrics)}


def publish(client: KubeClient, node: str, node_metrics: dict[str, Any], pod_metrics: list[dict[str, Any]], *,
            interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
    """Replace what the API server serves for ``node``: its NodeMetrics and its pods' PodMetrics.

    ``interval`` is how often the caller publishes; the server expires these metrics after
    three intervals without a new publication. Pods missing from ``pod_metrics`` that this
    node published before are no longer served. Raises ``ApiError`` (404 if the Node object
    does not exist).
    """
    client.replace(NODE_METRICS, usage_report(node, node_metrics, pod_metrics, interval=interval),
                   subresource=USAGE_SUBRESOURCE)
