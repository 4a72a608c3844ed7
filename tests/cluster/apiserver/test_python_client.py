"""The Python ``kubernetes`` client against the embedded API server: list + watch, bookmarks,
expired versions, conflicts and the durability a controller relies on."""

from __future__ import annotations

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from trainctl.cluster.apiserver.process import start_apiserver

NS = "default"


def pod(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}


def test_list_then_watch_from_the_list_version(api):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, pod("before"))
    listed = core.list_namespaced_pod(NS)
    assert [p.metadata.name for p in listed.items] == ["before"]
    core.create_namespaced_pod(NS, pod("after"))
    core.patch_namespaced_pod("before", NS, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("after", NS)
    events = []
    for event in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=listed.metadata.resource_version,
                                      timeout_seconds=1):
        events.append((event["type"], event["object"].metadata.name))
    assert events == [("ADDED", "after"), ("MODIFIED", "before"), ("DELETED", "after")]


def test_watch_from_zero_starts_with_synthetic_adds_and_honours_selectors(api):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(NS, pod("a", role="master"))
    core.create_namespaced_pod(NS, pod("b", role="worker"))
    stream = watch.Watch().stream(core.list_namespaced_pod, NS, resource_version="0", label_selector="role in (master)",
                                  timeout_seconds=1)
    assert [(e["type"], e["object"].metadata.name) for e in stream] == [("ADDED", "a")]


def test_bookmarks_carry_the_current_version(api):
    core = client.CoreV1Api(api)
    created = core.create_namespaced_pod(NS, pod("bm"))
    events = list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=created.metadata.resource_version,
                                       allow_watch_bookmarks=True, timeout_seconds=1))
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, events
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(created.metadata.resource_version)


def test_stale_update_is_a_conflict(api):
    core = client.CoreV1Api(api)
    first = core.create_namespaced_config_map(NS, {"metadata": {"name": "cm"}, "data": {"k": "1"}})
    core.replace_namespaced_config_map("cm", NS, {"metadata": {"name": "cm", "resourceVersion": first.metadata.resource_version},
                                                   "data": {"k": "2"}})
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map(
            "cm", NS, {"metadata": {"name": "cm", "resourceVersion": first.metadata.resource_version}, "data": {"k": "3"}}
        )
    assert stale.value.status == 409
    assert '"reason":"Conflict"' in stale.value.body
    assert core.read_namespaced_config_map("cm", NS).data == {"k": "2"}
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "cm"}})
    assert exists.value.status == 409 and '"reason":"AlreadyExists"' in exists.value.body


def test_a_write_for_a_recreated_object_fails_its_uid_precondition(api):
    # The kubelet reports a force-deleted pod's last status with its uid: the report must not
    # land on the new pod that took the same name.
    core = client.CoreV1Api(api)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    old_uid = core.create_namespaced_pod(NS, pod).metadata.uid
    core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    new_uid = core.create_namespaced_pod(NS, pod).metadata.uid
    with pytest.raises(ApiException) as stale:
        core.patch_namespaced_pod_status("p", NS, {"metadata": {"uid": old_uid}, "status": {"phase": "Failed"}})
    assert stale.value.status == 409 and "Precondition failed: UID in precondition" in stale.value.body
    assert core.read_namespaced_pod_status("p", NS).status.phase != "Failed"
    patched = core.patch_namespaced_pod_status("p", NS, {"metadata": {"uid": new_uid}, "status": {"phase": "Running"}})
    assert patched.status.phase == "Running"


def test_watch_of_a_compacted_version_gets_410(tmp_path):
    server = start_apiserver(tmp_path / "small-window", extra_args=["--watch-window", "3"])
    try:
        api = config.new_client_from_config(config_file=str(server.kubeconfig))
        core = client.CoreV1Api(api)
        first = core.create_namespaced_config_map(NS, {"metadata": {"name": "c0"}})
        for i in range(1, 6):
            core.create_namespaced_config_map(NS, {"metadata": {"name": f"c{i}"}})
        with pytest.raises(ApiException) as gone:
            list(watch.Watch().stream(core.list_namespaced_config_map, NS,
                                      resource_version=first.metadata.resource_version, timeout_seconds=1))
        assert gone.value.status == 410
        api.close()
    finally:
        server.stop()


def test_kill_9_keeps_every_object_and_old_watches_must_relist(apiserver, api):
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    ext = client.ApiextensionsV1Api(api)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}
    ext.create_custom_resource_definition(crd)
    for i in range(20):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
    custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets",
                                           {"apiVersion": "example.com/v1", "kind": "Widget",
                                            "metadata": {"name": "w"}, "spec": {"size": 3}})
    before = core.list_namespaced_pod(NS)
    old_version = int(before.metadata.resource_version)

    apiserver.kill()
    apiserver.start()

    after = core.list_namespaced_pod(NS)
    assert sorted(p.metadata.uid for p in after.items) == sorted(p.metadata.uid for p in before.items)
    assert custom.get_namespaced_custom_object("example.com", "v1", NS, "widgets", "w")["spec"] == {"size": 3}
    with pytest.raises(ApiException) as gone:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=str(old_version), timeout_seconds=1))
    assert gone.value.status == 410
    created = core.create_namespaced_pod(NS, pod("new"))
    assert int(created.metadata.resource_version) > old_version
    relisted = core.list_namespaced_pod(NS)
    stream = watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=relisted.metadata.resource_version,
                                  timeout_seconds=1)
    core.delete_namespaced_pod("new", NS)
    assert [(e["type"], e["object"].metadata.name) for e in stream] == [("DELETED", "new")]


def test_pagination_walks_every_item_once(api):
    core = client.CoreV1Api(api)
    for i in range(7):
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"page-{i}"}})
    names, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(NS, limit=3, _continue=token)
        names += [c.metadata.name for c in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
    assert names == [f"page-{i}" for i in range(7)] and pages == 3


def test_cluster_wide_watch_sees_every_namespace(api):
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "other"}})
    listed = core.list_pod_for_all_namespaces()
    core.create_namespaced_pod(NS, pod("here"))
    core.create_namespaced_pod("other", pod("there"))
    stream = watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=listed.metadata.resource_version,
                                  timeout_seconds=1)
    assert [(e["object"].metadata.namespace, e["object"].metadata.name) for e in stream] == [
        ("default", "here"), ("other", "there")]


def test_dry_run_validates_but_stores_nothing(api):
    core = client.CoreV1Api(api)
    preview = core.create_namespaced_config_map(NS, {"metadata": {"name": "dry"}, "data": {"a": "b"}}, dry_run="All")
    assert preview.metadata.name == "dry" and preview.metadata.uid
    assert core.list_namespaced_config_map(NS).items == []
    core.create_namespaced_config_map(NS, {"metadata": {"name": "real"}})
    core.delete_namespaced_config_map("real", NS, dry_run="All")
    assert [c.metadata.name for c in core.list_namespaced_config_map(NS).items] == ["real"]
