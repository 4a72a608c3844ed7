"""A headless Service's address as a starting container gets it: from the API, not a stale cache."""

from __future__ import annotations

from typing import Any, Optional

from trainctl.cluster.kubelet.service_names import ServiceNames
from trainctl.cluster.network.names import Pending
from trainctl.cluster.network.pod_ipam import PodIPAllocator
from trainctl.kube.informer import Store

Obj = dict[str, Any]
SELECTOR = {"training.kubeflow.org/job-name": "j", "training.kubeflow.org/replica-type": "master"}


def pod(uid: str, ip: str, *, deleting: bool = False) -> Obj:
    meta: Obj = {"name": "j-master-0", "namespace": "default", "uid": uid, "labels": dict(SELECTOR)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": "Running", "podIP": ip}}


class Api:
    """The API server's view: what a list with a label selector answers."""

    def __init__(self, pods: list[Obj]) -> None:
        self.pods = pods
        self.selectors: list[Optional[str]] = []

    def list(self, resource: Any, namespace: Optional[str] = None, *, label_selector: Optional[str] = None, **_: Any) -> tuple[list[Obj], str]:
        self.selectors.append(label_selector)
        wanted = dict(term.split("=", 1) for term in (label_selector or "").split(",") if term)
        return [p for p in self.pods if all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())], "1"

    def get_or_none(self, *_: Any) -> None:
        return None


def names(api: Api, cached: list[Obj]) -> ServiceNames:
    pods, services = Store(), Store()
    for obj in cached:
        pods.upsert(obj)
    services.upsert({"metadata": {"name": "j-master-0", "namespace": "default", "uid": "svc"},
                     "spec": {"clusterIP": "None", "selector": SELECTOR}})
    return ServiceNames(api, pods, services, PodIPAllocator("10.244.9.0/24"))  # type: ignore[arg-type]


def test_a_starting_container_never_gets_the_address_of_a_pod_the_cache_has_not_seen_replaced() -> None:
    stale = pod("old", "10.244.0.2")
    api = Api([pod("new", "10.244.0.4")])  # the old one is gone; the cache has not heard yet
    resolution = names(api, [stale]).resolve("default", "j-master-0", fresh=True)
    assert resolution == "10.244.0.4"
    assert api.selectors == ["training.kubeflow.org/job-name=j,training.kubeflow.org/replica-type=master"]


def test_a_replaced_pod_being_deleted_is_waited_past() -> None:
    api = Api([pod("old", "10.244.0.2", deleting=True)])
    assert isinstance(names(api, [pod("old", "10.244.0.2")]).resolve("default", "j-master-0", fresh=True), Pending)


def test_the_service_proxy_keeps_reading_the_cache() -> None:
    api = Api([])
    assert names(api, [pod("old", "10.244.0.2")]).resolve("default", "j-master-0") == "10.244.0.2"
    assert api.selectors == []
