"""One embedded cluster for the whole e2e session, and a clean namespace for every test.

The cluster runs the real API server, kubelet and controller as processes, with the
controller's metrics on a free loopback port. Pods run in a scratch working directory that
holds nothing but a link to ``samples/``, so the samples' relative paths work unchanged and
their checkpoints never land in the repository. Tests run one at a time (the machine has
two cores); after each, every job is deleted, its pods are waited for, and the checkpoints
are removed so the next job starts from step 0.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from trainctl.controller.launch import connect
from trainctl.controller.launch.kinds import kind_of
from trainctl.controller.local.cluster import LocalCluster

from .harness import SAMPLES, JobObserver, Kubectl

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class E2E:
    cluster: LocalCluster
    api: client.ApiClient
    kubectl: Kubectl
    metrics_port: int
    workdir: Path

    def observe(self, job: dict[str, Any]) -> JobObserver:
        return JobObserver(self.api, kind_of(job), job["metadata"]["name"])

    def run(self, job: dict[str, Any]) -> JobObserver:
        """Start following ``job``, then apply it with kubectl; use as a context manager."""
        observer = self.observe(job).start()
        try:
            self.kubectl.apply(job)
        except BaseException:
            observer.__exit__(None, None, None)
            raise
        return observer

    def clean(self) -> None:
        self.kubectl("delete", "pytorchjobs,msjobs", "--all", "--wait=true", "--timeout=60s", timeout=90)
        self.kubectl("wait", "--for=delete", "pods", "--all", "--timeout=60s", timeout=90)
        shutil.rmtree(self.workdir / "checkpoints", ignore_errors=True)


@pytest.fixture(scope="session")
def cluster_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    root = tmp_path_factory.mktemp("e2e")
    workdir = root / "work"
    workdir.mkdir()
    (workdir / "samples").symlink_to(SAMPLES, target_is_directory=True)
    (root / "home").mkdir()
    metrics_port = free_port()
    with LocalCluster(root / "cluster", workdir=workdir,
                      controller_args=["--metrics-port", str(metrics_port)]) as cluster:
        api = connect(str(cluster.kubeconfig))
        try:
            yield E2E(cluster, api, Kubectl(cluster.kubeconfig, root / "home"), metrics_port, workdir)
        finally:
            api.close()


@pytest.fixture
def e2e(cluster_env: E2E) -> Iterator[E2E]:
    for component in cluster_env.cluster.components:
        if not component.alive:  # a fault test that failed half-way left it down
            component.start()
    yield cluster_env
    cluster_env.clean()
