"""Fixtures for the API-server tests: kubectl as a subprocess, the Python client, CRDs.

Every client here is the real one, talking HTTPS to a real server process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from tests.support.kubectl import Kubectl
from tests.support.repo import CRDS


@pytest.fixture
def kubectl(kube_env: dict[str, str]) -> Kubectl:
    return Kubectl(kube_env)


@pytest.fixture
def api(apiserver: Any) -> Iterator[client.ApiClient]:
    """A Python ``kubernetes`` client configured from the server's kubeconfig."""
    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def crds(kubectl: Kubectl) -> None:
    """The project's CRDs, applied as a user would."""
    kubectl("apply", "-f", str(CRDS))
