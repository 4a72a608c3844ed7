"""Fixtures shared by every test package.

``apiserver`` is a real embedded API server (a subprocess on loopback, HTTPS with its own
CA, fresh state) per test; ``kube_env`` is the environment to run kubectl or any other
client against it without touching the user's own ``~/.kube``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle, start_apiserver

from tests.support.kubectl import client_env


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServerHandle]:
    """A fresh API server in a temporary directory, stopped after the test.

    The handle has ``url``, ``kubeconfig``, ``token``, ``ca_cert``, ``pid``, ``stop()``,
    ``kill()`` (SIGKILL) and ``restart()``.
    """
    handle = start_apiserver(tmp_path / "apiserver")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def kube_env(tmp_path: Path, apiserver: ApiServerHandle) -> dict[str, str]:
    """Environment for client processes: KUBECONFIG is the fixture server's, HOME is an
    empty temporary directory (so kubectl's discovery cache starts cold)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return client_env(apiserver.kubeconfig, home)
