"""Fixtures for the launcher's tests: the bare API server with the CRDs, a stand-in controller, a view.

The stand-in controller (``StatusDriver``) and the view (``RecordingView``) are in
tests/support/launch.py.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from kubernetes import client

from trainctl.cluster.local_cluster import install_crds
from trainctl.kube.client import KubeClient
from trainctl.launch import connect

from tests.support.launch import RecordingView, StatusDriver


@pytest.fixture
def kube(apiserver: Any) -> Iterator[client.ApiClient]:
    """A Python client for the bare API server, with trainctl's CRDs installed."""
    kube = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
    if not kube.group_version_served("kubeflow.org", "v1"):
        install_crds(kube)
    api = connect(str(apiserver.kubeconfig))
    yield api
    api.close()


@pytest.fixture
def driver(kube: client.ApiClient) -> StatusDriver:
    return StatusDriver(kube)


@pytest.fixture
def view() -> RecordingView:
    return RecordingView()
