"""A Service's Endpoints and EndpointSlices, computed from the pods it selects (kube's endpoint controllers)."""

from __future__ import annotations

from typing import Any

from trainctl.cluster.controlplane import endpoints as ep

Obj = dict[str, Any]


def service(name: str = "web", *, headless: bool = False, ports: list[Obj] | None = None, publish: bool = False) -> Obj:
    spec: Obj = {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}] if ports is None else ports}
    if headless:
        spec["clusterIP"] = "None"
    if publish:
        spec["publishNotReadyAddresses"] = True
    return {"metadata": {"name": name, "namespace": "default", "uid": "svc-uid", "labels": {"tier": "front"}}, "spec": spec}


def pod(name: str, ip: str, *, ready: bool = True, port: int = 8080, labels: Obj | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": "web"} if labels is None else labels}
    meta.update(extra.pop("meta", {}))
    phase = extra.pop("phase", "Running")
    return {"metadata": meta,
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": port}]}], **extra},
            "status": {"phase": phase, "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_ready_and_unready_pods_go_to_addresses_and_not_ready_addresses_with_named_ports_resolved() -> None:
    endpoints = ep.desired_endpoints(service(), [pod("b", "10.0.0.2", ready=False), pod("a", "10.0.0.1")])
    assert endpoints["metadata"] == {"name": "web", "namespace": "default", "labels": {"tier": "front"}}
    [subset] = endpoints["subsets"]
    assert [a["ip"] for a in subset["addresses"]] == ["10.0.0.1"]
    assert subset["addresses"][0]["targetRef"] == {"kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"}
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.0.0.2"]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]


def test_pods_outside_the_selector_finished_terminating_or_without_an_ip_are_left_out() -> None:
    pods = [pod("other", "10.0.0.9", labels={"app": "db"}), pod("done", "10.0.0.8", phase="Succeeded"),
            pod("going", "10.0.0.7", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}), pod("new", "")]
    assert "subsets" not in ep.desired_endpoints(service(), pods)
    [empty] = ep.desired_slices(service(), pods)
    assert empty["endpoints"] == []


def test_pods_with_different_ports_make_separate_subsets_and_slices() -> None:
    pods = [pod("a", "10.0.0.1", port=8080), pod("b", "10.0.0.2", port=9090)]
    assert [s["ports"][0]["port"] for s in ep.desired_endpoints(service(), pods)["subsets"]] == [8080, 9090]
    assert sorted(s["ports"][0]["port"] for s in ep.desired_slices(service(), pods)) == [8080, 9090]


def test_a_headless_service_without_ports_lists_addresses_with_the_pods_hostnames() -> None:
    svc = service("workers", headless=True, ports=[])
    p = pod("j-worker-0", "10.0.0.3", hostname="j-worker-0", subdomain="workers")
    endpoints = ep.desired_endpoints(svc, [p])
    assert endpoints["metadata"]["labels"][ep.HEADLESS_LABEL] == ""
    [subset] = endpoints["subsets"]
    assert "ports" not in subset and subset["addresses"][0]["hostname"] == "j-worker-0"


def test_publish_not_ready_addresses_lists_unready_pods_as_ready() -> None:
    endpoints = ep.desired_endpoints(service(publish=True), [pod("a", "10.0.0.1", ready=False)])
    assert [a["ip"] for a in endpoints["subsets"][0]["addresses"]] == ["10.0.0.1"]


def test_slices_are_owned_by_the_service_labelled_and_carry_conditions() -> None:
    [slice_] = ep.desired_slices(service(), [pod("a", "10.0.0.1"), pod("b", "10.0.0.2", ready=False)])
    assert slice_["addressType"] == "IPv4" and slice_["metadata"]["generateName"] == "web-"
    assert slice_["metadata"]["labels"] == {"tier": "front", ep.SERVICE_NAME_LABEL: "web", ep.MANAGED_BY_LABEL: ep.MANAGED_BY}
    assert slice_["metadata"]["ownerReferences"][0]["uid"] == "svc-uid" and slice_["metadata"]["ownerReferences"][0]["controller"]
    assert [(e["addresses"], e["conditions"]["ready"]) for e in slice_["endpoints"]] == [(["10.0.0.1"], True), (["10.0.0.2"], False)]
    assert slice_["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]


def test_an_unnamed_port_has_an_empty_name_in_slices_and_none_in_endpoints() -> None:
    svc = service(ports=[{"port": 80, "targetPort": 8080}])
    assert ep.desired_slices(svc, [pod("a", "10.0.0.1")])[0]["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]
    assert ep.desired_slices(svc, [])[0]["ports"] == [{"name": "", "port": 80, "protocol": "TCP"}]
    assert ep.desired_endpoints(svc, [pod("a", "10.0.0.1")])["subsets"][0]["ports"] == [{"port": 8080, "protocol": "TCP"}]


def test_a_slice_holds_at_most_a_hundred_endpoints() -> None:
    pods = [pod(f"p{i:03d}", f"10.0.{i // 250}.{i % 250 + 1}") for i in range(230)]
    assert [len(s["endpoints"]) for s in ep.desired_slices(service(), pods)] == [100, 100, 30]


def test_a_refused_write_is_logged_and_left_to_the_next_pass(caplog: Any) -> None:
    import logging

    from trainctl.cluster.controlplane.endpoints_controller import EndpointsController
    from trainctl.kube.client import ApiError

    class Refusing:
        def create(self, *_: Any) -> None:
            raise ApiError(503, "ServiceUnavailable", "the server is going away")

        replace = create

        def delete(self, *_: Any, **__: Any) -> None:
            raise ApiError(503, "ServiceUnavailable", "the server is going away")

    controller = EndpointsController.__new__(EndpointsController)
    controller.client = Refusing()  # type: ignore[assignment]
    slice_ = {"metadata": {"name": "web-abcde", "namespace": "default"}, "endpoints": [], "ports": []}
    caplog.set_level(logging.INFO, logger="trainctl.controlplane.endpoints")
    controller._write([("create", ep.desired_endpoints(service(), []))])
    controller._sync_slices(service(), [], [slice_])
    controller._sync_slices(service(), ep.desired_slices(service(), []), [])
    assert [r.getMessage() for r in caplog.records][-1] == "cannot create an EndpointSlice"
