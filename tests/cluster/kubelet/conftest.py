"""A real API server (the shared ``apiserver`` fixture) with an in-process kubelet and
scheduler on it.

Pod builders and waits are in tests/support/pods.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle, start_apiserver
from trainctl.cluster.kubelet import Kubelet, KubeletConfig
from trainctl.cluster.network import cluster_ranges
from trainctl.cluster.scheduler.component import SchedulerComponent
from trainctl.kube.client import KubeClient


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServerHandle]:
    """The shared fixture's server, but with this directory's own ClusterIP range, as
    LocalCluster starts it: test runs in parallel on one machine must not share addresses."""
    directory = tmp_path / "apiserver"
    handle = start_apiserver(directory, extra_args=["--service-cidr", cluster_ranges(directory)[1]])
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def kubelet(request: pytest.FixtureRequest, apiserver: ApiServerHandle, tmp_path: Path) -> Iterator[Kubelet]:
    """Parametrize indirectly with a resource enforcer ("polling", ...) to force one."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    config = KubeletConfig(directory=apiserver.dir, kubeconfig=apiserver.kubeconfig, gpus=2, workdir=workdir,
                           backoff_base=0.2, metrics_interval=1.0,
                           resource_enforcer=getattr(request, "param", None))
    node = Kubelet(config)
    node.start()
    scheduler = SchedulerComponent(KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1))
    scheduler.start()
    try:
        yield node
    finally:
        scheduler.stop()
        scheduler.client.close()
        node.stop(grace_cap=2)
    # Bad input fails its pod with a reason; anything raised in a per-pod step is a kubelet bug.
    assert not node.step_errors, node.step_errors


@pytest.fixture
def api(kubelet: Kubelet) -> KubeClient:
    return kubelet.client
