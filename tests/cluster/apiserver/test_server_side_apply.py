"""Server-side apply over HTTP: kubectl's managers, conflicts, --force-conflicts, removal of a
field no longer applied, and what a client may not write through an apply."""

from __future__ import annotations

import json

import pytest
import requests

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def deployment(*, replicas: int | None = 2, labels: dict[str, str] | None = None, cpu: str | None = "500m") -> dict:
    container: dict = {"name": "app", "image": "nginx:1.27"}
    if cpu:
        container["resources"] = {"limits": {"cpu": cpu}}
    spec: dict = {"selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": labels if labels is not None else {"app": "web", "tier": "front"}},
            "spec": spec}


@pytest.fixture
def call(apiserver):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"

    def request(method: str, path: str, body: object = None, content_type: str = "application/json",
                user_agent: str = "test-client/1.0") -> requests.Response:
        data = body if isinstance(body, str) or body is None else json.dumps(body)
        return session.request(method, apiserver.url + path, data=data, timeout=30, verify=str(apiserver.ca_cert),
                               headers={"Content-Type": content_type, "User-Agent": user_agent})

    yield request
    session.close()


def managers(obj: dict) -> dict[tuple[str, str, str], dict]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def server_side_apply(kubectl, obj: dict, *flags: str, check: bool = True):
    return kubectl.run("apply", "--server-side", *flags, "-f", "-", input=json.dumps(obj), check=check)


def test_two_managers_conflict_force_and_removal_with_kubectl(kubectl):
    server_side_apply(kubectl, deployment())
    live = kubectl.json("get", "deploy", "web", "--show-managed-fields")
    fields = managers(live)[("kubectl", "Apply", "")]
    assert fields["f:spec"]["f:replicas"] == {} and fields["f:metadata"]["f:labels"] == {"f:app": {}, "f:tier": {}}
    assert "managedFields" not in kubectl.json("get", "deploy", "web")["metadata"]  # kubectl hides them itself

    refused = server_side_apply(kubectl, deployment(replicas=3), "--field-manager=ci", check=False)
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in refused.stderr
    assert kubectl.json("get", "deploy", "web")["spec"]["replicas"] == 2

    mine = {"app": "web"}
    server_side_apply(kubectl, deployment(replicas=2, labels=mine), "--field-manager=ci")  # same values: shared, no conflict
    server_side_apply(kubectl, deployment(replicas=3, labels=mine), "--field-manager=ci", "--force-conflicts")
    live = kubectl.json("get", "deploy", "web", "--show-managed-fields")
    assert live["spec"]["replicas"] == 3
    assert "f:replicas" not in managers(live)[("kubectl", "Apply", "")]["f:spec"]

    # kubectl drops the tier label and the cpu limit; ci still applies the limit, nobody the label.
    server_side_apply(kubectl, deployment(replicas=None, labels=mine, cpu=None))
    live = kubectl.json("get", "deploy", "web")
    assert live["metadata"]["labels"] == {"app": "web"}
    assert live["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"}}
    server_side_apply(kubectl, deployment(replicas=3, labels=mine, cpu=None), "--field-manager=ci")
    container = kubectl.json("get", "deploy", "web")["spec"]["template"]["spec"]["containers"][0]
    assert container.get("resources") == {}  # the limit gone; {} is the server's default, as on kube


def test_update_managers_come_from_the_user_agent_and_status_writes_keep_one_entry(kubectl, call):
    kubectl("apply", "-f", "-", input=json.dumps(deployment()))  # client-side apply
    kubectl("label", "deploy", "web", "owner=ml")
    live = kubectl.json("get", "deploy", "web", "--show-managed-fields")
    assert "kubectl.kubernetes.io/last-applied-configuration" in live["metadata"]["annotations"]
    entries = managers(live)
    assert ("kubectl-client-side-apply", "Update", "") in entries
    assert entries[("kubectl-label", "Update", "")] == {"f:metadata": {"f:labels": {"f:owner": {}}}}
    for ready in range(4):
        current = call("GET", f"{DEPLOYMENTS}/web").json()
        current["status"] = {"replicas": 2, "readyReplicas": ready}
        assert call("PUT", f"{DEPLOYMENTS}/web/status", current, user_agent="trainctl-controller/0.1").status_code == 200
    entries = managers(call("GET", f"{DEPLOYMENTS}/web").json())
    assert [key for key in entries if key[0] == "trainctl-controller"] == [("trainctl-controller", "Update", "status")]

    refused = server_side_apply(kubectl, deployment(replicas=5), "--field-manager=ci", check=False)
    assert 'conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas' in refused.stderr


def test_an_apply_cannot_write_what_an_update_could_not(call):
    apply_path = f"{DEPLOYMENTS}/web?fieldManager=attacker"
    apply_type = "application/apply-patch+yaml"
    spoofed = {**deployment(), "metadata": {"name": "web", "managedFields": [{"manager": "kubectl", "operation": "Apply"}]}}
    refused = call("PATCH", apply_path, spoofed, apply_type)
    assert (refused.status_code, refused.json()["message"]) == (400, "metadata.managedFields must be nil")
    nameless = call("PATCH", f"{DEPLOYMENTS}/web", deployment(), apply_type)
    assert nameless.status_code == 422 and "fieldManager: Required value" in nameless.json()["message"]

    created = call("PATCH", apply_path, {**deployment(), "status": {"readyReplicas": 9}}, apply_type)
    assert created.status_code == 201 and "readyReplicas" not in created.json().get("status", {})
    uid = created.json()["metadata"]["uid"]
    for meta in ({"uid": "00000000-0000-0000-0000-000000000000"}, {"resourceVersion": "1"}):
        body = deployment(replicas=4)
        body["metadata"].update(meta)
        assert call("PATCH", apply_path, body, apply_type).status_code == 409
    applied = call("PATCH", apply_path, {**deployment(replicas=4), "status": {"readyReplicas": 9}}, apply_type).json()
    assert applied["metadata"]["uid"] == uid and applied["spec"]["replicas"] == 4
    assert "readyReplicas" not in applied.get("status", {})
    assert "f:status" not in managers(applied)[("attacker", "Apply", "")]


def test_an_apply_through_status_writes_status_only(call):
    apply_type = "application/apply-patch+yaml"
    assert call("PATCH", f"{DEPLOYMENTS}/web?fieldManager=kubectl", deployment(), apply_type).status_code == 201
    body = {**deployment(replicas=7), "status": {"replicas": 2, "readyReplicas": 1}}
    answer = call("PATCH", f"{DEPLOYMENTS}/web/status?fieldManager=rollout-watcher", body, apply_type)
    assert answer.status_code == 200
    applied = answer.json()
    assert applied["spec"]["replicas"] == 2 and applied["status"]["readyReplicas"] == 1
    assert managers(applied)[("rollout-watcher", "Apply", "status")] == {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}}
    conflict = call("PATCH", f"{DEPLOYMENTS}/web/status?fieldManager=other", {**body, "status": {"readyReplicas": 2}}, apply_type)
    assert conflict.status_code == 409
    assert conflict.json()["message"] == ('Apply failed with 1 conflict: conflict with "rollout-watcher" with subresource "status": '
                                          '.status.readyReplicas')


def test_server_side_apply_after_client_side_apply_takes_over_as_kubectl_migrates_it(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(deployment()))
    server_side_apply(kubectl, deployment(replicas=4))  # kubectl first rewrites the managedFields, as on kube
    live = kubectl.json("get", "deploy", "web", "--show-managed-fields")
    assert live["spec"]["replicas"] == 4
    assert "f:replicas" in managers(live)[("kubectl", "Apply", "")]["f:spec"]
    last_applied = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last_applied["spec"]["replicas"] == 4  # kept in step, for a later client-side apply
    kubectl("apply", "-f", "-", input=json.dumps(deployment(replicas=5)))
    assert kubectl.json("get", "deploy", "web")["spec"]["replicas"] == 5


def test_an_update_may_reset_managed_fields_as_on_kube(call, kubectl):
    server_side_apply(kubectl, deployment())
    current = call("GET", f"{DEPLOYMENTS}/web").json()
    current["metadata"].pop("managedFields")  # a client that drops them drops nothing
    assert managers(call("PUT", f"{DEPLOYMENTS}/web", current).json()).keys() == {("kubectl", "Apply", "")}
    current["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in call("PUT", f"{DEPLOYMENTS}/web", current).json()["metadata"]
