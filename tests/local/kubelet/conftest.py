"""A real API server (the shared ``apiserver`` fixture) with an in-process kubelet on it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from controller.local.apiserver.process import ApiServerHandle, start_apiserver
from controller.local.kubelet import Kubelet, KubeletConfig
from controller.local.kubelet.client import ApiError, KubeClient
from controller.local.network import cluster_ranges

Obj = dict[str, Any]


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
def kubelet(apiserver: ApiServerHandle, tmp_path: Path) -> Iterator[Kubelet]:
    workdir = tmp_path / "work"
    workdir.mkdir()
    config = KubeletConfig(directory=apiserver.dir, kubeconfig=apiserver.kubeconfig, gpus=2, workdir=workdir,
                           backoff_base=0.2)
    node = Kubelet(config)
    node.start()
    try:
        yield node
    finally:
        node.stop(grace_cap=2)


@pytest.fixture
def api(kubelet: Kubelet) -> KubeClient:
    return kubelet.client


def pod(name: str, script: str, restart_policy: str = "Never", **container: Any) -> Obj:
    """A pod whose one container runs ``python -c script``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": restart_policy,
                     "containers": [{"name": "main", "image": "python:3.11", "command": ["python", "-c", script],
                                     **container}]}}


def create(api: KubeClient, obj: Obj) -> Obj:
    kind = obj["kind"].lower() + "s"
    return api.create(f"/api/v1/namespaces/{obj['metadata'].get('namespace', 'default')}/{kind}", obj)


def wait_pod(api: KubeClient, name: str, until: Callable[[Obj], bool], timeout: float = 20.0,
             namespace: str = "default") -> Obj:
    """The pod once ``until(pod)`` holds, following a watch (no polling)."""
    deadline = time.monotonic() + timeout
    path = f"/api/v1/namespaces/{namespace}/pods"
    while True:
        listing = api.get(path, fieldSelector=f"metadata.name={name}")
        if not listing["items"] and until({}):
            return {}
        for item in listing["items"]:
            if until(item):
                return item
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"pod {name} did not reach the state in {timeout:g}s: {listing['items']}")
        try:
            for event in api.watch(path, listing["metadata"]["resourceVersion"], timeout_seconds=max(1, int(remaining)),
                                   fieldSelector=f"metadata.name={name}"):
                if event["type"] in ("ADDED", "MODIFIED") and until(event["object"]):
                    return event["object"]
                if event["type"] == "DELETED" and until({}):
                    return {}
        except ApiError as exc:
            if exc.code != 410:
                raise


def phase(*phases: str) -> Callable[[Obj], bool]:
    return lambda p: p.get("status", {}).get("phase") in phases


def gone(p: Obj) -> bool:
    return not p


def container_state(p: Obj) -> Obj:
    return p["status"]["containerStatuses"][0]
