"""Field ownership and server-side apply's rules, on plain objects (managed_fields)."""

from __future__ import annotations

import copy
import json

import pytest

from trainctl.cluster.apiserver.apimachinery.errors import ApiError
from trainctl.cluster.apiserver.storage import managed_fields as mf

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
SHAPE = mf.builtin_shape


def apply_as(name: str, live: dict, config: dict, *, force: bool = False) -> dict:
    return mf.apply(live, config, mf.Manager(name, mf.APPLY, "apps/v1"), SHAPE, force=force, time=T1)


def deployment(replicas: int = 2, image: str = "nginx:1", **extra: object) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "app", "image": image,
                                                             "ports": [{"containerPort": 80}], **extra}]}}}}


def created(config: dict, manager: str = "kubectl") -> dict:
    obj = copy.deepcopy(config)
    obj["metadata"]["managedFields"] = mf.created_by_apply(config, mf.Manager(manager, mf.APPLY, "apps/v1"), SHAPE, T0)
    return obj


def test_fields_v1_spells_paths_as_kube_does():
    fields = created(deployment())["metadata"]["managedFields"][0]["fieldsV1"]
    assert fields["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert fields["f:spec"]["f:selector"] == {}  # a label selector is atomic
    container = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert container["."] == {} and container["f:image"] == {}
    assert container["f:ports"] == {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}
    assert mf.decode(fields) == mf.field_set(deployment(), SHAPE)


def test_conflict_names_the_owner_and_the_field_as_kube_does():
    live = created(deployment(replicas=2))
    with pytest.raises(ApiError) as refused:
        apply_as("other", live, {"spec": {"replicas": 5}})
    error = refused.value
    assert (error.code, error.reason) == (409, "Conflict")
    assert error.message == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert [c.to_wire() for c in error.causes] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"', "field": ".spec.replicas"}]


def test_conflicts_with_an_update_name_its_api_version_and_list_keys():
    live = deployment()
    update = mf.Manager("kubectl-edit", mf.UPDATE, "apps/v1")
    live["metadata"]["managedFields"] = mf.after_update(None, live, update, SHAPE, T0)
    with pytest.raises(ApiError) as refused:
        apply_as("ci", live, {"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}})
    assert refused.value.message == (
        'Apply failed with 2 conflicts: conflicts with "kubectl-edit" using apps/v1:\n'
        '- .spec.replicas\n- .spec.template.spec.containers[name="app"].image')


def test_force_takes_ownership_and_same_value_shares_it():
    live = created(deployment(replicas=2))
    shared = apply_as("other", live, {"spec": {"replicas": 2}})
    owners = {e["manager"]: mf.decode(e["fieldsV1"]) for e in shared["metadata"]["managedFields"]}
    assert ("f:spec", "f:replicas") in owners["kubectl"] and ("f:spec", "f:replicas") in owners["other"]
    forced = apply_as("other", live, {"spec": {"replicas": 5}}, force=True)
    assert forced["spec"]["replicas"] == 5
    owners = {e["manager"]: mf.decode(e["fieldsV1"]) for e in forced["metadata"]["managedFields"]}
    assert ("f:spec", "f:replicas") not in owners["kubectl"] and owners["other"] == {("f:spec", "f:replicas")}


def test_a_field_no_longer_applied_is_removed_unless_another_manager_owns_it():
    live = created(deployment(resources={"limits": {"cpu": "1"}}))
    live["metadata"]["labels"]["team"] = "ml"
    live["metadata"]["managedFields"] = mf.after_update(
        created(deployment(resources={"limits": {"cpu": "1"}})), live, mf.Manager("labeller", mf.UPDATE, "apps/v1"), SHAPE, T0)
    config = deployment()
    del config["metadata"]["labels"]
    result = apply_as("kubectl", live, config)
    container = result["spec"]["template"]["spec"]["containers"][0]
    assert "resources" not in container  # applied before, not now, owned by nobody else
    assert result["metadata"]["labels"] == {"team": "ml"}  # app removed; team is the labeller's


def test_associative_lists_merge_by_key_and_atomic_lists_are_replaced():
    live = created(deployment(args=["a", "b"]))
    result = apply_as("sidecar", live, {"spec": {"template": {"spec": {"containers": [{"name": "log", "image": "busybox"}]}}}})
    assert [c["name"] for c in result["spec"]["template"]["spec"]["containers"]] == ["app", "log"]
    replaced = apply_as("kubectl", live, deployment(args=["c"]))
    assert replaced["spec"]["template"]["spec"]["containers"][0]["args"] == ["c"]


def test_updates_move_ownership_and_keep_one_entry_per_manager():
    obj = deployment()
    status_writer = mf.Manager("kube-controller-manager", mf.UPDATE, "apps/v1", "status")
    obj["metadata"]["managedFields"] = mf.after_update(None, obj, mf.Manager("kubectl-create", mf.UPDATE, "apps/v1"), SHAPE, T0)
    for ready in range(5):
        new = copy.deepcopy(obj)
        new["status"] = {"readyReplicas": ready, "conditions": [{"type": "Available", "status": "True"}]}
        new["metadata"]["managedFields"] = mf.after_update(obj, new, status_writer, SHAPE, T1)
        obj = new
    entries = obj["metadata"]["managedFields"]
    assert [(e["manager"], e.get("subresource")) for e in entries] == [("kubectl-create", None), ("kube-controller-manager", "status")]
    assert ("f:status", "f:conditions", 'k:{"type":"Available"}') in mf.decode(entries[1]["fieldsV1"])


def test_an_update_takes_a_changed_field_from_the_applier():
    live = created(deployment(replicas=2))
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 4
    scaled["metadata"]["managedFields"] = mf.after_update(live, scaled, mf.Manager("kubectl-scale", mf.UPDATE, "apps/v1", "scale"), SHAPE, T1)
    owners = {e["manager"]: mf.decode(e["fieldsV1"]) for e in scaled["metadata"]["managedFields"]}
    assert owners["kubectl-scale"] == {("f:spec", "f:replicas")} and ("f:spec", "f:replicas") not in owners["kubectl"]
    with pytest.raises(ApiError) as refused:
        apply_as("kubectl", scaled, deployment(replicas=2))
    assert 'conflict with "kubectl-scale" with subresource "scale" using apps/v1: .spec.replicas' in refused.value.message


def test_applied_managed_fields_are_refused():
    with pytest.raises(ApiError) as refused:
        mf.applied_part({"metadata": {"name": "x", "managedFields": [{"manager": "root"}]}}, "", True)
    assert (refused.value.code, refused.value.message) == (400, "metadata.managedFields must be nil")


def test_custom_resources_use_the_schema_list_types():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "workers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "gpus": {"type": "integer"}}}},
        "tags": {"type": "array", "items": {"type": "string"}}}}}}
    shape = mf.schema_shape(schema)
    obj = {"spec": {"workers": [{"name": "a", "gpus": 1}], "tags": ["x"]}}
    assert mf.field_set(obj, shape) == {("f:spec", "f:workers", 'k:{"name":"a"}'), ("f:spec", "f:workers", 'k:{"name":"a"}', "f:name"),
                                        ("f:spec", "f:workers", 'k:{"name":"a"}', "f:gpus"), ("f:spec", "f:tags")}


def test_kubectl_takes_over_only_what_its_client_side_apply_set():
    live = deployment(replicas=2)
    live["metadata"]["annotations"] = {mf.LAST_APPLIED: json.dumps({"spec": {"replicas": 2}})}
    live["metadata"]["managedFields"] = mf.after_update(None, live, mf.Manager("kubectl-client-side-apply", mf.UPDATE, "apps/v1"), SHAPE, T0)
    taken = apply_as("kubectl", live, {"spec": {"replicas": 3}})
    assert taken["spec"]["replicas"] == 3
    assert json.loads(taken["metadata"]["annotations"][mf.LAST_APPLIED]) == {"metadata": {"annotations": {}}, "spec": {"replicas": 3}}
    with pytest.raises(ApiError) as refused:
        apply_as("kubectl", live, {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}})
    assert refused.value.message.endswith('.spec.template.spec.containers[name="app"].image')  # not in its last-applied
    with pytest.raises(ApiError):
        apply_as("ci", live, {"spec": {"replicas": 3}})  # only kubectl's own apply takes over


def test_managed_fields_an_update_sends_replace_the_stored_ones_only_when_well_formed():
    entry = {"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    assert mf.sent_entries([entry]) == [entry]
    assert mf.sent_entries([{}]) == []  # a reset
    assert mf.sent_entries([]) is None and mf.sent_entries(None) is None and mf.sent_entries([{"operation": "Own"}]) is None


def test_a_create_records_in_one_pass_what_the_field_set_encodes():
    for obj in (deployment(args=["a"], env=[{"name": "A", "value": "1"}]), {"metadata": {"finalizers": ["x", "y"]}, "spec": {"ports": []}}):
        assert mf.decode(mf.fields_v1(obj, SHAPE)) == mf.field_set(obj, SHAPE)
        assert mf.fields_v1(obj, SHAPE) == mf.encode(mf.field_set(obj, SHAPE))
