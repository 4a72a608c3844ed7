"""The state a pod's containers report before they first run, as kubectl's STATUS shows it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from trainctl.cluster.apiserver.serving.tables import pod_status
from trainctl.cluster.kubelet.pod_worker import PodContext, PodWorker


def _worker(spec: dict[str, Any]) -> PodWorker:
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": spec}
    context = cast(PodContext, SimpleNamespace(host_ip="127.0.0.1"))
    return PodWorker(context, pod, "127.128.0.5", {}, lambda uid: None)


def _waiting(status: dict[str, Any], key: str = "containerStatuses") -> list[str]:
    return [cs["state"]["waiting"]["reason"] for cs in status[key]]


def test_a_new_pod_is_container_creating() -> None:
    worker = _worker({"containers": [{"name": "a"}, {"name": "b"}]})
    status = worker.status()
    assert _waiting(status) == ["ContainerCreating", "ContainerCreating"]
    assert pod_status({"metadata": {"name": "p"}, "spec": worker.pod["spec"], "status": status})[0] == "ContainerCreating"


def test_containers_behind_init_containers_wait_for_them() -> None:
    worker = _worker({"initContainers": [{"name": "init"}], "containers": [{"name": "a"}]})
    status = worker.status()
    assert _waiting(status) == ["PodInitializing"]
    assert _waiting(status, "initContainerStatuses") == ["PodInitializing"]
    assert pod_status({"metadata": {"name": "p"}, "spec": worker.pod["spec"], "status": status})[0] == "Init:0/1"
