"""Fixtures for the controller's integration tests on the embedded API server.

The API server is the real one (``apiserver`` fixture, tests/conftest.py; ``kube`` installs
the job CRDs into it); the controller is the real Manager, in-process when a test needs to
look inside it and as a ``trainctl controller`` subprocess when it must be killed (helpers
in tests/support/controller.py). Waiting is done on watch events, never on sleeps.
"""

from __future__ import annotations

import pathlib
from typing import Any, Callable, Iterator, Optional

import pytest
from kubernetes import client as k8s_client

from trainctl.cluster.local_cluster import install_crds
from trainctl.controller.manager import Manager
from trainctl.controller.options import ManagerOptions
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import EVENTS, PODS, PYTORCHJOBS, SERVICES

from tests.support.controller import ControllerProcess, Watcher, granted, load_rbac


@pytest.fixture
def kube(apiserver) -> KubeClient:
    """A client of the API server, with the job CRDs installed."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
    if not client.group_version_served("kubeflow.org", "v1"):
        install_crds(client)
    return client


@pytest.fixture
def jobs(kube) -> Iterator[Watcher]:
    w = Watcher(kube, PYTORCHJOBS)
    yield w
    w.stop()


@pytest.fixture
def pods(kube) -> Iterator[Watcher]:
    w = Watcher(kube, PODS)
    yield w
    w.stop()


@pytest.fixture
def services(kube) -> Iterator[Watcher]:
    w = Watcher(kube, SERVICES)
    yield w
    w.stop()


@pytest.fixture
def events(kube) -> Iterator[Watcher]:
    w = Watcher(kube, EVENTS)
    yield w
    w.stop()


@pytest.fixture
def start_manager(apiserver, kube) -> Iterator[Callable[..., Manager]]:
    """Start an in-process controller against ``server`` (default: the API server itself)."""
    started: list[Manager] = []

    def start(server_url: Optional[str] = None, **options: Any) -> Manager:
        if server_url:  # e.g. the fault proxy, plain HTTP on loopback
            configuration = k8s_client.Configuration()
            configuration.host = server_url
            configuration.api_key = {"authorization": f"Bearer {apiserver.token}"}
            client = KubeClient(configuration, qps=0)
        else:
            client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
        options.setdefault("watch_timeout", 30)
        manager = Manager(client, ManagerOptions(**options))
        client.on_response = manager.metrics.observe_api
        manager.start()
        started.append(manager)
        return manager

    yield start
    for manager in started:
        manager.stop(timeout=10)


@pytest.fixture
def controller_process(apiserver, kube, tmp_path) -> Iterator[Callable[..., ControllerProcess]]:
    procs: list[ControllerProcess] = []

    def make(*args: str) -> ControllerProcess:
        p = ControllerProcess(pathlib.Path(apiserver.kubeconfig), tmp_path, *args)
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.kill()


@pytest.fixture
def rbac_allowed() -> set[tuple[str, str, str]]:
    return granted(load_rbac())
