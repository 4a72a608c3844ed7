"""An embedded cluster to run the samples on, as the e2e suite and the recovery benchmark use it.

Pods run in a scratch working directory that holds nothing but a link to ``samples/``, so
the samples' relative paths work unchanged; their checkpoints land in the cluster's own
directory (``$TRAINCTL_DATA_DIR``), never in the repository. ``E2E`` is the handle: the API client, kubectl, the controller's metrics port and
that working directory, with a way to run a job and to clean up after it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from trainctl.cluster.kubelet.kubelet import namespace_data_dir
from trainctl.cluster.local_cluster import LocalCluster
from trainctl.cluster.network import isolation
from trainctl.launch import connect
from trainctl.launch.job_kinds import kind_of

from .kubectl import Kubectl
from .net import free_port, with_free_port
from .observer import JobObserver
from .repo import SAMPLES

TEST_NETWORK_VARIABLE = "TRAINCTL_TEST_NETWORK"


def in_process_network() -> str:
    """The pod network of the tests' in-process kubelets: TRAINCTL_TEST_NETWORK, else shared."""
    return os.environ.get(TEST_NETWORK_VARIABLE, isolation.SHARED)


def machine_port(port: int) -> dict[str, int]:
    """A container port the scheduler treats as the machine's: any declared port on the
    shared network, a hostPort on the isolated one (each pod has its own ports there)."""
    if in_process_network() == isolation.ISOLATED:
        return {"containerPort": port, "hostPort": port}
    return {"containerPort": port}


@dataclass
class E2E:
    cluster: LocalCluster
    api: client.ApiClient
    kubectl: Kubectl
    metrics_port: int
    workdir: Path

    @property
    def checkpoints(self) -> Path:
        """Where the samples' relative ``--checkpoint-dir=checkpoints/JOB`` lands for jobs of
        the default namespace."""
        return namespace_data_dir(self.cluster.directory, "default") / "checkpoints"

    def observe(self, job: dict[str, Any]) -> JobObserver:
        return JobObserver(self.api, kind_of(job), job["metadata"]["name"])

    def run(self, job: dict[str, Any]) -> JobObserver:
        """Start following ``job``, then apply it with kubectl on a free port; use as a context manager."""
        observer = self.observe(job).start()
        try:
            self.kubectl.apply(with_free_port(job))
        except BaseException:
            observer.__exit__(None, None, None)
            raise
        return observer

    def clean(self) -> None:
        self.kubectl("delete", "pytorchjobs,msjobs", "--all", "--wait=true", "--timeout=60s", timeout=90)
        self.kubectl("wait", "--for=delete", "pods", "--all", "--timeout=60s", timeout=90)
        shutil.rmtree(self.checkpoints, ignore_errors=True)


def trainctl_local(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``trainctl local ARGS`` as a user runs it: exit code, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "trainctl.cli.main", "local", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


def scratch_workdir(root: Path) -> Path:
    """``root/work``, the pods' working directory with ``samples/`` in it, and ``root/home``
    for kubectl; returns the working directory."""
    workdir = root / "work"
    workdir.mkdir()
    (workdir / "samples").symlink_to(SAMPLES, target_is_directory=True)
    (root / "home").mkdir()
    return workdir


@contextlib.contextmanager
def scratch_cluster(root: Path, **cluster_options: Any) -> Iterator[E2E]:
    """A started embedded cluster under ``root`` (state, pods' working directory, kubectl's
    home), with the controller's metrics on a free loopback port; stopped on exit.
    ``cluster_options`` are more ``LocalCluster`` keyword arguments (``controller_args`` are
    added to the metrics port's)."""
    workdir = scratch_workdir(root)
    metrics_port = free_port()
    # The pod network the suite runs in: the default (auto: isolated where the machine allows
    # it), or TRAINCTL_TEST_NETWORK=shared|isolated to run the same tests in another mode.
    cluster_options.setdefault("network", os.environ.get(TEST_NETWORK_VARIABLE, isolation.AUTO))
    controller_args = ["--metrics-port", str(metrics_port), *cluster_options.pop("controller_args", [])]
    with LocalCluster(root / "cluster", workdir=workdir, controller_args=controller_args, **cluster_options) as cluster:
        api = connect(str(cluster.kubeconfig))
        try:
            yield E2E(cluster, api, Kubectl.for_kubeconfig(cluster.kubeconfig, root / "home"), metrics_port, workdir)
        finally:
            api.close()
