"""A real API server (the shared ``apiserver`` fixture) with an in-process kubelet on it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from trainctl.controller.kube.client import ApiError, KubeClient
from trainctl.controller.kube.resources import PODS, resource_of
from trainctl.controller.local.apiserver.process import ApiServerHandle, start_apiserver
from trainctl.controller.local.kubelet import Kubelet, KubeletConfig
from trainctl.controller.local.network import cluster_ranges

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
    # Bad input fails its pod with a reason; anything raised in a per-pod step is a kubelet bug.
    assert not node.step_errors, node.step_errors


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
    obj["metadata"].setdefault("namespace", "default")
    created = api.create(resource_of(obj), obj)
    assert not created.existed, f"{obj['kind']} {obj['metadata']['name']} already exists"
    return created.object


def wait_pod(api: KubeClient, name: str, until: Callable[[Obj], bool], timeout: float = 20.0,
             namespace: str = "default") -> Obj:
    """The pod once ``until(pod)`` holds, following a watch (no polling)."""
    deadline = time.monotonic() + timeout
    selector = f"metadata.name={name}"
    while True:
        items, version = api.list(PODS, namespace, field_selector=selector)
        if not items and until({}):
            return {}
        for item in items:
            if until(item):
                return item
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"pod {name} did not reach the state in {timeout:g}s: {items}")
        try:
            for event in api.watch(PODS, namespace, version, timeout_seconds=max(1, int(remaining)),
                                   field_selector=selector):
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
