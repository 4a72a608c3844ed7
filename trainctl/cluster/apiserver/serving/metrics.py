"""``/metrics``: request counts and latencies under the real API server's metric names, so a
benchmark or a test can count exactly what a controller asked for.

Verbs are named as kube-apiserver names them: GET, LIST, WATCH, CREATE, UPDATE, PATCH,
APPLY (server-side apply), DELETE, DELETECOLLECTION, and CONNECT for streaming
subresources such as ``pods/log``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, resource and HTTP response code.",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb and resource (watches: time to first byte).",
            ["verb", "resource"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.watchers = Gauge(
            "apiserver_registered_watchers",
            "Number of currently open watches.",
            registry=self.registry,
        )
        self.objects = Gauge(
            "apiserver_storage_objects",
            "Number of stored objects at the time of the last check, split by resource.",
            ["resource"],
            registry=self.registry,
        )

        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, verb: str, resource: str, code: int, seconds: float) -> None:
        children = self._children.get((verb, resource, code))
        if children is None:
            children = (self.requests.labels(verb, resource, str(code)), self.duration.labels(verb, resource))
            self._children[(verb, resource, code)] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
