"""Object semantics controllers depend on, through the Python client and plain HTTPS:
naming, selectors, generation, services, pod deletion, garbage collection, tables, metrics."""

from __future__ import annotations

import json
import time

import pytest
import requests
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

NS = "default"


def pod(name: str, node: str | None = None, **labels: str) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def owned(name: str, owner: dict, block: bool = False) -> dict:
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": block}
    return {"metadata": {"name": name, "ownerReferences": [ref]}}


@pytest.fixture
def core(api) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def http(apiserver):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"

    def call(method: str, path: str, **kwargs):
        return session.request(method, apiserver.url + path, timeout=10, verify=str(apiserver.ca_cert), **kwargs)

    yield call
    session.close()


def names(items) -> list[str]:
    return sorted(i.metadata.name for i in items)


def wait_deleted(core: client.CoreV1Api, kind: str, name: str, resource_version: str) -> None:
    """Block on a watch until ``name`` is DELETED (or already gone)."""
    lister = getattr(core, f"list_namespaced_{kind}")
    for event in watch.Watch().stream(lister, NS, field_selector=f"metadata.name={name}",
                                      resource_version=resource_version, timeout_seconds=10):
        if event["type"] == "DELETED":
            return
    raise AssertionError(f"{kind} {name} was not deleted")


def test_generate_name_uid_and_creation_timestamp(core):
    first = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "job-"}})
    second = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "job-"}})
    assert first.metadata.name.startswith("job-") and len(first.metadata.name) == 9
    assert first.metadata.name != second.metadata.name and first.metadata.uid != second.metadata.uid
    assert first.metadata.creation_timestamp.tzinfo is not None
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)


def test_label_selectors(core):
    core.create_namespaced_pod(NS, pod("m", role="master", job="a"))
    core.create_namespaced_pod(NS, pod("w0", role="worker", job="a"))
    core.create_namespaced_pod(NS, pod("w1", role="worker", job="b"))
    core.create_namespaced_pod(NS, pod("x"))
    cases = {
        "role=master": ["m"], "role==worker": ["w0", "w1"], "role!=worker": ["m", "x"],
        "job in (a,c)": ["m", "w0"], "job notin (a)": ["w1", "x"], "role": ["m", "w0", "w1"], "!role": ["x"],
        "role=worker,job=b": ["w1"],
    }
    for selector, expected in cases.items():
        assert names(core.list_namespaced_pod(NS, label_selector=selector).items) == expected, selector


def test_field_selectors(core, http):
    core.create_namespaced_pod(NS, pod("bound", node="local"))
    core.create_namespaced_pod(NS, pod("free"))
    core.patch_namespaced_pod_status("bound", NS, {"status": {"phase": "Running"}})
    assert names(core.list_namespaced_pod(NS, field_selector="status.phase=Running").items) == ["bound"]
    assert names(core.list_namespaced_pod(NS, field_selector="spec.nodeName=local").items) == ["bound"]
    assert names(core.list_namespaced_pod(NS, field_selector="spec.nodeName=").items) == ["free"]
    assert names(core.list_namespaced_pod(NS, field_selector="metadata.name!=bound,metadata.namespace=default").items) == ["free"]
    assert names(core.list_pod_for_all_namespaces(field_selector="metadata.namespace=kube-system").items) == []


def test_go_booleans_in_query_strings(core, http):
    core.create_namespaced_pod(NS, pod("b"))
    for value in ("true", "True", "1", "t"):
        with http("GET", f"/api/v1/namespaces/default/pods?watch={value}", stream=True) as watching:
            assert json.loads(next(watching.iter_lines()))["type"] == "ADDED", value
    assert http("GET", "/api/v1/namespaces/default/pods?watch=False").json()["kind"] == "PodList"


def test_generation_follows_spec_not_metadata_or_status(apiserver, api):
    ext = client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)
    ext.create_custom_resource_definition({
        "metadata": {"name": "podgroups.scheduling.example.com"},
        "spec": {"group": "scheduling.example.com", "scope": "Namespaced",
                 "names": {"plural": "podgroups", "kind": "PodGroup", "shortNames": ["pg"]},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "minMember": {"type": "integer", "default": 1},
                                       "queue": {"type": "string"}}},
                                   "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}})
    group = ("scheduling.example.com", "v1alpha1", NS, "podgroups")
    created = custom.create_namespaced_custom_object(*group, {"apiVersion": "scheduling.example.com/v1alpha1",
                                                              "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": {}})
    assert created["spec"] == {"minMember": 1} and created["metadata"]["generation"] == 1
    custom.patch_namespaced_custom_object(*group, "pg", {"metadata": {"labels": {"a": "b"}}})
    custom.patch_namespaced_custom_object_status(*group, "pg", {"status": {"phase": "Running"}})
    assert custom.get_namespaced_custom_object(*group, "pg")["metadata"]["generation"] == 1
    updated = custom.patch_namespaced_custom_object(*group, "pg", {"spec": {"minMember": 3}})
    assert updated["metadata"]["generation"] == 2 and updated["status"] == {"phase": "Running"}
    unchanged = custom.patch_namespaced_custom_object(*group, "pg", {"spec": {"minMember": 3}})
    assert unchanged["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]  # a no-op write


def test_services_get_loopback_cluster_ips(core):
    svc = core.create_namespaced_service(NS, {"metadata": {"name": "master"},
                                             "spec": {"selector": {"job": "a"}, "ports": [{"port": 23456}]}})
    assert svc.spec.cluster_ip.startswith("127.96.")
    assert svc.spec.ports[0].target_port == 23456 and svc.spec.ports[0].protocol == "TCP"
    other = core.create_namespaced_service(NS, {"metadata": {"name": "worker"}, "spec": {"ports": [{"port": 1}]}})
    assert other.spec.cluster_ip != svc.spec.cluster_ip
    headless = core.create_namespaced_service(NS, {"metadata": {"name": "h"},
                                                  "spec": {"clusterIP": "None", "ports": [{"port": 2222}]}})
    assert headless.spec.cluster_ip == "None"
    with pytest.raises(ApiException) as taken:
        core.create_namespaced_service(NS, {"metadata": {"name": "dup"},
                                           "spec": {"clusterIP": svc.spec.cluster_ip, "ports": [{"port": 1}]}})
    assert taken.value.status == 422


def test_node_port_services_get_node_ports_from_the_range_and_a_taken_one_is_refused(core):
    def node_port_service(name, *ports, kind="NodePort"):
        return {"metadata": {"name": name}, "spec": {"type": kind, "selector": {"app": name}, "ports": list(ports)}}

    first = core.create_namespaced_service(NS, node_port_service("np-a", {"name": "http", "port": 80}, {"name": "x", "port": 81}))
    given = [p.node_port for p in first.spec.ports]
    assert all(30000 <= port <= 32767 for port in given) and len(set(given)) == 2
    chosen = core.create_namespaced_service(NS, node_port_service("np-b", {"port": 80, "nodePort": 31555}))
    assert chosen.spec.ports[0].node_port == 31555
    for taken in (31555, given[0]):
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_service(NS, node_port_service("np-dup", {"port": 80, "nodePort": taken}))
        assert refused.value.status == 422 and "provided port is already allocated" in refused.value.body
    with pytest.raises(ApiException) as outside:
        core.create_namespaced_service(NS, node_port_service("np-low", {"port": 80, "nodePort": 8080}))
    assert outside.value.status == 422 and "30000-32767" in outside.value.body
    with pytest.raises(ApiException) as forbidden:
        core.create_namespaced_service(NS, node_port_service("np-cip", {"port": 80, "nodePort": 31000}, kind="ClusterIP"))
    assert forbidden.value.status == 422

    # An update keeps the node ports; dropping the type gives them back for another Service.
    kept = core.patch_namespaced_service("np-a", NS, {"metadata": {"labels": {"touched": "yes"}}})
    assert [p.node_port for p in kept.spec.ports] == given
    core.replace_namespaced_service("np-b", NS, {"metadata": {"name": "np-b", "resourceVersion": chosen.metadata.resource_version},
                                                 "spec": {**node_port_service("np-b", {"port": 80})["spec"], "type": "ClusterIP",
                                                          "clusterIP": chosen.spec.cluster_ip}})
    assert core.read_namespaced_service("np-b", NS).spec.ports[0].node_port is None
    again = core.create_namespaced_service(NS, node_port_service("np-c", {"port": 80, "nodePort": 31555}))
    assert again.spec.ports[0].node_port == 31555
    core.delete_namespaced_service("np-a", NS)
    reused = core.create_namespaced_service(NS, node_port_service("np-d", {"port": 80, "nodePort": given[0]}))
    assert reused.spec.ports[0].node_port == given[0]


def test_bound_pods_terminate_gracefully_unbound_pods_go_at_once(core):
    core.create_namespaced_pod(NS, pod("pending"))
    core.delete_namespaced_pod("pending", NS)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("pending", NS)
    assert gone.value.status == 404

    running = pod("running", node="local")
    running["spec"]["terminationGracePeriodSeconds"] = 12
    core.create_namespaced_pod(NS, running)
    core.patch_namespaced_pod_status("running", NS, {"status": {"phase": "Running"}})
    core.delete_namespaced_pod("running", NS)
    terminating = core.read_namespaced_pod("running", NS)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 12
    core.patch_namespaced_pod_status("running", NS, {"status": {"phase": "Running", "message": "stopping"}})
    assert core.read_namespaced_pod("running", NS).metadata.deletion_timestamp is not None  # updates keep it
    core.delete_namespaced_pod("running", NS, grace_period_seconds=0)  # what the kubelet does once stopped
    with pytest.raises(ApiException):
        core.read_namespaced_pod("running", NS)

    core.create_namespaced_pod(NS, pod("done", node="local"))
    core.patch_namespaced_pod_status("done", NS, {"status": {"phase": "Succeeded"}})
    core.delete_namespaced_pod("done", NS)
    assert names(core.list_namespaced_pod(NS).items) == []


def test_binding_assigns_a_node_once(core, http):
    core.create_namespaced_pod(NS, pod("bind-me"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bind-me"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "local"}}
    assert http("POST", "/api/v1/namespaces/default/pods/bind-me/binding", json=binding).status_code == 201
    bound = core.read_namespaced_pod("bind-me", NS)
    assert bound.spec.node_name == "local"
    assert [c.type for c in bound.status.conditions] == ["PodScheduled"]
    assert http("POST", "/api/v1/namespaces/default/pods/bind-me/binding", json=binding).status_code == 409


def test_finalizers_hold_deletion_until_removed(core):
    core.create_namespaced_config_map(NS, {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    core.delete_namespaced_config_map("held", NS)
    held = core.read_namespaced_config_map("held", NS)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", NS, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", NS)
    assert gone.value.status == 404


def test_garbage_collection_background_orphan_and_foreground(core):
    owner = core.create_namespaced_config_map(NS, {"metadata": {"name": "owner"}}).to_dict()
    owner = {"metadata": {"name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}}
    core.create_namespaced_config_map(NS, owned("child", owner))
    listed = core.list_namespaced_config_map(NS)
    core.delete_namespaced_config_map("owner", NS)  # Background by default
    wait_deleted(core, "config_map", "child", listed.metadata.resource_version)

    keeper = core.create_namespaced_config_map(NS, {"metadata": {"name": "keeper"}})
    keeper_ref = {"metadata": {"name": "keeper", "uid": keeper.metadata.uid}}
    core.create_namespaced_config_map(NS, owned("kept", keeper_ref))
    core.delete_namespaced_config_map("keeper", NS, propagation_policy="Orphan")
    assert core.read_namespaced_config_map("kept", NS).metadata.owner_references is None

    parent = core.create_namespaced_config_map(NS, {"metadata": {"name": "parent"}})
    parent_ref = {"metadata": {"name": "parent", "uid": parent.metadata.uid}}
    core.create_namespaced_config_map(NS, {**owned("blocker", parent_ref, block=True),
                                           "metadata": {**owned("blocker", parent_ref, block=True)["metadata"],
                                                        "finalizers": ["example.com/slow"]}})
    listed = core.list_namespaced_config_map(NS)
    core.delete_namespaced_config_map("parent", NS, propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("parent", NS)
    assert "foregroundDeletion" in waiting.metadata.finalizers and waiting.metadata.deletion_timestamp
    core.patch_namespaced_config_map("blocker", NS, {"metadata": {"finalizers": None}})
    wait_deleted(core, "config_map", "parent", listed.metadata.resource_version)
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("blocker", NS)


def test_dependents_of_a_missing_owner_are_collected(core):
    listed = core.list_namespaced_config_map(NS)
    core.create_namespaced_config_map(NS, owned("stray", {"metadata": {"name": "ghost", "uid": "00000000-dead"}}))
    wait_deleted(core, "config_map", "stray", listed.metadata.resource_version)


def test_namespace_deletion_removes_its_contents(core):
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "c"}})
    listed = core.list_namespace()
    core.delete_namespace("team")
    for event in watch.Watch().stream(core.list_namespace, field_selector="metadata.name=team",
                                      resource_version=listed.metadata.resource_version, timeout_seconds=10):
        if event["type"] == "DELETED":
            break
    else:
        raise AssertionError("namespace not deleted")
    assert core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=team").items == []
    with pytest.raises(ApiException) as forbidden:
        core.delete_namespace("default")
    assert forbidden.value.status == 403


def test_a_terminating_namespace_gives_its_running_pods_their_grace(core):
    core.create_namespace({"metadata": {"name": "graceful"}})
    running = pod("worker", node="local")
    running["metadata"]["namespace"] = "graceful"
    running["spec"]["terminationGracePeriodSeconds"] = 20
    core.create_namespaced_pod("graceful", running)
    core.patch_namespaced_pod_status("worker", "graceful", {"status": {"phase": "Running"}})
    core.delete_namespace("graceful")
    deadline = time.monotonic() + 30
    while core.read_namespaced_pod("worker", "graceful").metadata.deletion_timestamp is None:
        assert time.monotonic() < deadline, "the pod was never marked for deletion"
        time.sleep(0.1)
    assert core.read_namespaced_pod("worker", "graceful").metadata.deletion_grace_period_seconds == 20
    assert core.read_namespace("graceful").status.phase == "Terminating"
    core.delete_namespaced_pod("worker", "graceful", grace_period_seconds=0)  # its kubelet has stopped it
    while True:
        try:
            core.read_namespace("graceful")
        except ApiException as gone:
            assert gone.status == 404
            break
        assert time.monotonic() < deadline, "the namespace outlived its last pod"
        time.sleep(0.1)


def test_tables_render_columns_ages_and_include_object(core, http):
    core.create_namespaced_pod(NS, pod("t", node="local"))
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    table = http("GET", "/api/v1/namespaces/default/pods", headers=accept).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == ["Name", "Ready", "Status", "Restarts", "Age"]
    row = table["rows"][0]
    assert row["cells"][:4] == ["t", "0/1", "Pending", "0"] and row["cells"][4].endswith("s")  # RESTARTS is a string, as kube prints it
    assert row["cells"][6] == "local"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    full = http("GET", "/api/v1/namespaces/default/pods?includeObject=Object", headers=accept).json()
    assert full["rows"][0]["object"]["spec"]["nodeName"] == "local"


def test_metrics_count_requests_by_verb_resource_and_code(core, http):
    core.create_namespaced_pod(NS, pod("m1"))
    core.list_namespaced_pod(NS)
    with pytest.raises(ApiException):
        core.read_namespaced_pod("absent", NS)
    text = http("GET", "/metrics").text
    assert 'apiserver_request_total{code="201",resource="pods",verb="CREATE"} 1.0' in text
    assert 'apiserver_request_total{code="200",resource="pods",verb="LIST"} 1.0' in text
    assert 'apiserver_request_total{code="404",resource="pods",verb="GET"} 1.0' in text
    assert "apiserver_request_duration_seconds_bucket" in text


def test_discovery_both_forms_and_openapi(http):
    aggregated = http("GET", "/apis", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
    assert aggregated.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert {i["metadata"]["name"] for i in aggregated.json()["items"]} >= {"apiextensions.k8s.io", "coordination.k8s.io"}
    legacy = http("GET", "/apis").json()
    assert legacy["kind"] == "APIGroupList"
    core = http("GET", "/api/v1").json()
    assert {"pods", "pods/status", "pods/log", "services", "nodes/status"} <= {r["name"] for r in core["resources"]}
    index = http("GET", "/openapi/v3").json()
    hashed = http("GET", index["paths"]["api/v1"]["serverRelativeURL"])
    assert "immutable" in hashed.headers["Cache-Control"]
    assert "immutable" not in http("GET", "/openapi/v3/api/v1").headers["Cache-Control"]
    document = hashed.json()
    patch = document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert http("GET", "/version").json()["major"] == "1"


def test_event_table_shows_what_kubectl_get_events_prints(core, http):
    core.create_namespaced_event(NS, {
        "metadata": {"name": "job.1"}, "type": "Warning", "reason": "FailedCreatePod", "message": "quota exceeded",
        "involvedObject": {"kind": "PyTorchJob", "name": "job", "namespace": NS}, "count": 2,
        "source": {"component": "pytorchjob-controller"}})
    table = http("GET", "/api/v1/namespaces/default/events",
                 headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    visible = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert visible == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert table["rows"][0]["cells"][1:5] == ["Warning", "FailedCreatePod", "pytorchjob/job", "quota exceeded"]


def test_strategic_merge_patch_directives(core, http):
    body = pod("smp")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    core.create_namespaced_pod(NS, body)
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "smp", "finalizers": ["a.example.com/x", "b.example.com/y"]},
               "spec": {"selector": {"app": "x"}, "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}
    core.create_namespaced_service(NS, service)

    def smp(kind: str, patch: dict) -> dict:
        response = http("PATCH", f"/api/v1/namespaces/default/{kind}/smp", data=json.dumps(patch),
                        headers={"Content-Type": "application/strategic-merge-patch+json"})
        assert response.status_code == 200, response.text
        return response.json()

    # Containers merge by name (an image is what a pod's spec may change).
    patched = smp("pods", {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}})
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [("main", "busybox:1.36"),
                                                                               ("side", "busybox:1.37")]

    def ports(obj: dict) -> list[tuple[str, int]]:
        return [(p["name"], p["port"]) for p in obj["spec"]["ports"]]

    patched = smp("services", {"spec": {"ports": [{"port": 80, "$patch": "delete"}, {"name": "c", "port": 82}]}})
    assert ports(patched) == [("b", 81), ("c", 82)]

    patched = smp("services", {"spec": {"$setElementOrder/ports": [{"port": 82}, {"port": 81}],
                                        "ports": [{"port": 81, "targetPort": 8081}]}})
    assert ports(patched) == [("c", 82), ("b", 81)]
    assert patched["spec"]["ports"][1]["targetPort"] == 8081

    patched = smp("services", {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x"],
                                            "labels": {"$patch": "replace", "only": "this"}}})
    assert patched["metadata"]["finalizers"] == ["b.example.com/y"]
    assert patched["metadata"]["labels"] == {"only": "this"}

    patched = smp("services", {"spec": {"ports": [{"$patch": "replace"}, {"name": "only", "port": 90}]}})
    assert ports(patched) == [("only", 90)]


def test_deleting_a_crd_removes_its_kind_and_objects(api, http):
    ext = client.ApiextensionsV1Api(api)
    crd = {"metadata": {"name": "gadgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    ext.create_custom_resource_definition(crd)
    gadgets = "/apis/example.com/v1/namespaces/default/gadgets"
    assert http("POST", gadgets, json={"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
                                       "anything": {"goes": 1}}).status_code == 201
    ext.delete_custom_resource_definition("gadgets.example.com")
    assert http("GET", gadgets).status_code == 404
    ext.create_custom_resource_definition(crd)
    assert http("GET", gadgets).json()["items"] == []
