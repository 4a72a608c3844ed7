"""A real API server (the shared ``apiserver`` fixture) and clients on it for the loop tests.

The Metrics API is not served by the embedded API server, so :class:`FakeMetricsClient`
answers ``metrics.k8s.io`` PodMetrics lists itself and sends everything else to the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable, Optional

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle
from trainctl.cluster.controlplane.api_resources import POD_METRICS
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import Resource

from tests.support.polling import poll

Obj = dict[str, Any]


class FakeMetricsClient(KubeClient):
    """``usage`` maps pod name to CPU usage; None means the Metrics API is not there."""

    usage: Optional[dict[str, str]] = None
    sampled_at: str = ""

    def list(self, resource: Resource, namespace: Optional[str] = None, **kwargs: Any) -> tuple[list[Obj], str]:
        if resource != POD_METRICS:
            return super().list(resource, namespace, **kwargs)
        if self.usage is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return [{"kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                 "metadata": {"name": name, "namespace": namespace}, "timestamp": self.sampled_at, "window": "15s",
                 "containers": [{"name": "pytorch", "usage": {"cpu": cpu, "memory": "10Mi"}}]}
                for name, cpu in self.usage.items()], "1"


@pytest.fixture
def client(apiserver: ApiServerHandle) -> Iterator[FakeMetricsClient]:
    fake = FakeMetricsClient.from_kubeconfig(str(apiserver.kubeconfig))
    try:
        yield fake
    finally:
        fake.close()


def eventually(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """``check()``'s first truthy result, polled (generous: a loaded 2-core machine)."""
    return poll(check, timeout, what, interval=0.1)
