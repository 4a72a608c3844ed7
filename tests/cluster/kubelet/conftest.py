"""A real API server (the shared ``apiserver`` fixture) with an in-process kubelet and
scheduler on it.

Pod builders and waits are in tests/support/pods.py.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from trainctl.cluster import node_credentials
from trainctl.cluster.apiserver.process import ApiServerHandle, start_apiserver
from trainctl.cluster.kubelet import DEFAULT_NODE_NAME, Kubelet, KubeletConfig
from trainctl.cluster.network import isolation
from trainctl.cluster.network.ranges import HOST_IP, cluster_ranges
from trainctl.cluster.scheduler.component import SchedulerComponent
from trainctl.kube.client import KubeClient

from tests.support.cluster import in_process_network

# TRAINCTL_TEST_NETWORK=isolated runs these tests on the isolated pod network, with a
# router of their own (as LocalCluster starts it); the default is the shared network.
NETWORK = in_process_network()


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServerHandle]:
    """The shared fixture's server, but with this directory's own ClusterIP range, as
    LocalCluster starts it: test runs in parallel on one machine must not share addresses."""
    directory = tmp_path / "apiserver"
    services = isolation.SERVICE_CIDR if NETWORK == isolation.ISOLATED else cluster_ranges(directory)[1]
    handle = start_apiserver(directory, extra_args=["--service-cidr", services])
    try:
        yield handle
    finally:
        handle.stop()


@contextlib.contextmanager
def router(directory: Path) -> Iterator[None]:
    """The isolated network's router on ``directory``, when the tests run on that network."""
    if NETWORK != isolation.ISOLATED:
        yield
        return
    read, write = os.pipe()
    process = subprocess.Popen(["unshare", "-U", "-r", "-n", "-m", "--", sys.executable, "-m", "trainctl.cluster.network",
                                "--dir", str(directory), "--service-cidr", isolation.SERVICE_CIDR,
                                "--ready-fd", str(write)], pass_fds=(write,),
                               env={**os.environ, "PATH": isolation.tool_path()})
    os.close(write)
    try:
        with os.fdopen(read, "rb") as ready:
            assert ready.readline() == b"ready\n", "the network router did not start"
        yield
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture
def kubelet(request: pytest.FixtureRequest, apiserver: ApiServerHandle, tmp_path: Path) -> Iterator[Kubelet]:
    """Parametrize indirectly with a resource enforcer ("polling", ...) to force one."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    kubeconfig = node_credentials.bootstrap(apiserver.dir, DEFAULT_NODE_NAME, HOST_IP)  # as LocalCluster does
    config = KubeletConfig(directory=apiserver.dir, kubeconfig=kubeconfig, gpus=2, workdir=workdir,
                           backoff_base=0.2, metrics_interval=1.0,
                           resource_enforcer=getattr(request, "param", None))
    stack = contextlib.ExitStack()
    stack.enter_context(router(apiserver.dir))
    config.network = NETWORK
    config.pod_cidr = isolation.node_cidr(0) if NETWORK == isolation.ISOLATED else None
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
        stack.close()
    # Bad input fails its pod with a reason; anything raised in a per-pod step is a kubelet bug.
    assert not node.step_errors, node.step_errors


@pytest.fixture
def api(kubelet: Kubelet, apiserver: ApiServerHandle) -> Iterator[KubeClient]:
    """The cluster's admin (the kubelet itself is only its node)."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    try:
        yield client
    finally:
        client.close()
