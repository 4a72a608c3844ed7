"""Deleting a namespace as kube does: Terminating with the namespace controller's conditions
while content remains, its ``kubernetes`` finalizer removed only through
``namespaces/finalize`` (which RBAC guards), no new content meanwhile, then gone."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle
from trainctl.cluster.apiserver.storage.namespace_conditions import deletion_conditions

from tests.cluster.apiserver.test_access import call
from tests.support.kubectl import Kubectl

NS = "doomed"


def conditions_by_type(ns: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in ns["status"].get("conditions") or []}


def test_conditions_name_what_remains_and_the_finalizers_holding_it() -> None:
    remaining = [("pods", {"metadata": {"name": "a"}}), ("pods", {"metadata": {"name": "b"}}),
                 ("configmaps", {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}})]
    conditions = deletion_conditions(remaining, [], "2026-01-01T00:00:00Z")
    assert [c["type"] for c in conditions] == [
        "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure", "NamespaceContentRemaining", "NamespaceFinalizersRemaining"]
    by_type = {c["type"]: (c["status"], c["reason"], c["message"]) for c in conditions}
    assert by_type["NamespaceContentRemaining"] == (
        "True", "SomeResourcesRemain", "Some resources are remaining: configmaps has 1 resource instances, "
                                       "pods has 2 resource instances")
    assert by_type["NamespaceFinalizersRemaining"] == (
        "True", "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    assert by_type["NamespaceDeletionContentFailure"] == (
        "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization")
    later = deletion_conditions([], conditions, "2026-01-01T00:01:00Z")
    times = {c["type"]: c["lastTransitionTime"] for c in later}
    assert times["NamespaceDeletionDiscoveryFailure"] == "2026-01-01T00:00:00Z"  # unchanged status: same time
    assert times["NamespaceContentRemaining"] == "2026-01-01T00:01:00Z"
    assert {c["type"]: c["reason"] for c in later}["NamespaceContentRemaining"] == "ContentRemoved"


def eventually(what: str, check: Callable[[], Any], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} after {timeout:g}s"
        time.sleep(0.2)
    return found


def when(obj: dict[str, Any], ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    return obj if ok(obj) else None


def wait_gone(kubectl: Kubectl, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while kubectl.run("get", "namespace", name, check=False).returncode == 0:
        assert time.monotonic() < deadline, f"namespace {name} still there after {timeout:g}s"
        time.sleep(0.2)


def test_a_namespace_terminates_while_content_remains_and_refuses_new_content(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "held", "namespace": NS, "finalizers": ["example.com/hold"]}})
    assert kubectl.json("get", "namespace", NS)["spec"]["finalizers"] == ["kubernetes"]
    kubectl("delete", "namespace", NS, "--wait=false")
    ns = eventually("deletion conditions", lambda: when(kubectl.json("get", "namespace", NS),
                                                        lambda ns: "NamespaceFinalizersRemaining" in conditions_by_type(ns)))
    assert ns["status"]["phase"] == "Terminating" and ns["spec"]["finalizers"] == ["kubernetes"]
    conditions = conditions_by_type(ns)
    assert conditions["NamespaceContentRemaining"] == (
        "True", "SomeResourcesRemain", "Some resources are remaining: configmaps has 1 resource instances")
    assert conditions["NamespaceFinalizersRemaining"][:2] == ("True", "SomeFinalizersRemain")
    assert kubectl("get", "namespace", NS, "--no-headers").split()[1] == "Terminating"
    refused = kubectl.run("create", "configmap", "late", "-n", NS, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (f'error: failed to create configmap: configmaps "late" is forbidden: unable to '
                                      f"create new content in namespace {NS} because it is being terminated")
    kubectl("patch", "configmap", "held", "-n", NS, "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    wait_gone(kubectl, NS)


def test_only_namespaces_finalize_removes_the_kubernetes_finalizer_and_rbac_guards_it(
        apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    """The attacker may delete pods (and read namespaces) but not delete them: ``namespaces/finalize``
    is refused, so the namespace (and its content) stays until the controller is done."""
    kubectl("create", "namespace", NS)
    kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "held", "namespace": NS, "finalizers": ["example.com/hold"]}})
    # The account lives outside the namespace, which takes its Roles and accounts with it.
    kubectl("create", "serviceaccount", "pod-deleter", "-n", "default")
    kubectl("create", "clusterrole", "pod-deleter", "--verb=get,list,delete", "--resource=pods,namespaces")
    kubectl("create", "clusterrolebinding", "pod-deleter", "--clusterrole=pod-deleter",
            "--serviceaccount=default:pod-deleter")
    token = kubectl("create", "token", "pod-deleter", "-n", "default").strip()
    kubectl("delete", "namespace", NS, "--wait=false")

    ns = kubectl.json("get", "namespace", NS)
    ns["spec"]["finalizers"] = []
    code, status = call(apiserver, f"/api/v1/namespaces/{NS}/finalize", token, method="PUT", body=ns)
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (f'namespaces "{NS}" is forbidden: User "system:serviceaccount:default:pod-deleter" '
                                 f'cannot update resource "namespaces/finalize" in API group "" in the namespace "{NS}"')
    # An update of the namespace itself keeps spec.finalizers, as kube's namespace strategy.
    kubectl("replace", "-f", "-", input=json.dumps(ns))
    assert kubectl.json("get", "namespace", NS)["spec"]["finalizers"] == ["kubernetes"]

    # Through finalize (the admin may), an empty list ends the namespace whatever remains.
    ns = kubectl.json("get", "namespace", NS)
    ns["spec"]["finalizers"] = []
    kubectl("replace", "--raw", f"/api/v1/namespaces/{NS}/finalize", "-f", "-", input=json.dumps(ns))
    wait_gone(kubectl, NS)


@pytest.mark.parametrize("grace", [20])
def test_pods_of_a_deleted_namespace_get_their_grace(kubectl: Kubectl, grace: int) -> None:
    kubectl("create", "namespace", NS)
    kubectl.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": NS},
                   "spec": {"nodeName": "local", "terminationGracePeriodSeconds": grace,
                            "containers": [{"name": "main", "image": "busybox:1.36"}]}})
    kubectl("delete", "namespace", NS, "--wait=false")
    pod = eventually("deletion of the pod", lambda: when(kubectl.json("get", "pod", "worker", "-n", NS),
                                                         lambda pod: bool(pod["metadata"].get("deletionTimestamp"))))
    assert pod["metadata"]["deletionGracePeriodSeconds"] == grace
    remaining = eventually("NamespaceContentRemaining", lambda: conditions_by_type(
        kubectl.json("get", "namespace", NS)).get("NamespaceContentRemaining"))
    assert remaining[2] == "Some resources are remaining: pods has 1 resource instances"
    kubectl("delete", "pod", "worker", "-n", NS, "--grace-period=0", "--force")
    wait_gone(kubectl, NS)
