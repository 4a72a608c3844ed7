"""PodDisruptionBudgets and the Eviction API, over HTTPS and kubectl against the real server:
the budget's wire form, validation and columns, and evictions refused (429) or carried out
(DisruptionTarget, graceful delete) as kube-apiserver decides them. The disruption
controller's part (the status) is written here by hand, as the controller would."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.cluster.apiserver.test_access import call
from tests.support.kubectl import Kubectl

NS = "default"
PDBS = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"
PODS = f"/api/v1/namespaces/{NS}/pods"


def running_pod(apiserver: ApiServerHandle, name: str, ready: bool = True, **labels: str) -> dict[str, Any]:
    """A pod bound to a node and reported Running (and Ready) as its kubelet would."""
    pod = {"metadata": {"name": name, "labels": labels},
           "spec": {"nodeName": "node-0", "terminationGracePeriodSeconds": 7,
                    "containers": [{"name": "c", "image": "x", "command": ["sleep", "1000"]}]}}
    code, created = call(apiserver, PODS, apiserver.token, "POST", pod)
    assert code == 201, created
    created["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastProbeTime": None,
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    code, written = call(apiserver, f"{PODS}/{name}/status", apiserver.token, "PUT", created)
    assert code == 200, written
    return written


def budget_status(apiserver: ApiServerHandle, name: str, **status: Any) -> dict[str, Any]:
    """Write a budget's status as the disruption controller would, observing its generation."""
    code, pdb = call(apiserver, f"{PDBS}/{name}", apiserver.token)
    assert code == 200, pdb
    pdb["status"] = {"observedGeneration": pdb["metadata"]["generation"], "currentHealthy": 0, "desiredHealthy": 0,
                     "expectedPods": 0, "disruptionsAllowed": 0, **status}
    code, written = call(apiserver, f"{PDBS}/{name}/status", apiserver.token, "PUT", pdb)
    assert code == 200, written
    return written


def evict(apiserver: ApiServerHandle, name: str, token: str | None = None,
          api_version: str = "policy/v1", **delete_options: Any) -> tuple[int, Any]:
    body: dict[str, Any] = {"apiVersion": api_version, "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    if delete_options:
        body["deleteOptions"] = delete_options
    return call(apiserver, f"{PODS}/{name}/eviction", token or apiserver.token, "POST", body)


def test_kubectl_creates_a_budget_with_kubes_wire_form_and_columns(kubectl: Kubectl) -> None:
    kubectl("create", "pdb", "web", "--selector=app=web", "--min-available=2")
    kubectl("create", "pdb", "half", "--selector=app=web", "--max-unavailable=50%")
    pdb = kubectl.json("get", "pdb", "web")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    assert pdb["status"] == {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}
    assert pdb["metadata"]["generation"] == 1
    lines = kubectl("get", "pdb").splitlines()
    assert lines[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert lines[1].split()[:4] == ["half", "N/A", "50%", "0"]
    assert lines[2].split()[:4] == ["web", "2", "N/A", "0"]
    resources = kubectl("api-resources", "--api-group=policy", "--no-headers").split()
    assert resources[:2] == ["poddisruptionbudgets", "pdb"]


@pytest.mark.parametrize(("spec", "message"), [
    ({"minAvailable": 1, "maxUnavailable": 1}, "spec: Invalid value: policy.PodDisruptionBudgetSpec{...}: "
                                               "minAvailable and maxUnavailable cannot be both set"),
    ({"minAvailable": -1}, "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
    ({"maxUnavailable": "150%"}, 'spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
                                 'StrVal:"150%"}: must not be greater than 100%'),
    ({"minAvailable": "half"}, "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, "
                               "StrVal:\"half\"}: a valid percent string must be a numeric string followed by an "
                               "ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"),
    ({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"},
     'spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget"'),
])
def test_an_invalid_budget_is_refused_with_kubes_message(apiserver: ApiServerHandle, spec: dict[str, Any],
                                                         message: str) -> None:
    code, status = call(apiserver, PDBS, apiserver.token, "POST",
                        {"metadata": {"name": "bad"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, **spec}})
    assert code == 422, status
    assert status["message"] == f'PodDisruptionBudget.policy "bad" is invalid: {message}'


def test_an_eviction_the_budget_does_not_allow_is_429_then_one_it_allows_takes_a_disruption(
        apiserver: ApiServerHandle) -> None:
    for name in ("web-0", "web-1"):
        running_pod(apiserver, name, app="web")
    call(apiserver, PDBS, apiserver.token, "POST",
         {"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})

    code, status = evict(apiserver, "web-0")  # the controller has not seen the budget yet
    assert (code, status["reason"]) == (429, "TooManyRequests")
    assert status["details"]["causes"] == [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget web is still being processed by the server."}]

    budget_status(apiserver, "web", currentHealthy=2, desiredHealthy=2, expectedPods=2, disruptionsAllowed=0)
    code, status = evict(apiserver, "web-0")
    assert code == 429
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]
    assert call(apiserver, f"{PODS}/web-0", apiserver.token)[1]["metadata"].get("deletionTimestamp") is None

    budget_status(apiserver, "web", currentHealthy=2, desiredHealthy=1, expectedPods=2, disruptionsAllowed=1)
    code, status = evict(apiserver, "web-0")
    assert (code, status["status"]) == (201, "Success")
    pod = call(apiserver, f"{PODS}/web-0", apiserver.token)[1]
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 7  # the pod's own terminationGracePeriodSeconds
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in target] == [
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")]
    pdb = call(apiserver, f"{PDBS}/web", apiserver.token)[1]
    assert pdb["status"]["disruptionsAllowed"] == 0
    assert list(pdb["status"]["disruptedPods"]) == ["web-0"]
    assert [(c["type"], c["status"], c["reason"]) for c in pdb["status"]["conditions"]] == [
        ("DisruptionAllowed", "False", "InsufficientPods")]
    assert evict(apiserver, "web-1")[0] == 429  # the one disruption allowed is taken


def test_pods_no_budget_protects_go_at_once_and_v1beta1_is_accepted(apiserver: ApiServerHandle) -> None:
    running_pod(apiserver, "free")
    code, _ = evict(apiserver, "free", api_version="policy/v1beta1", gracePeriodSeconds=0)
    assert code == 201
    assert call(apiserver, f"{PODS}/free", apiserver.token)[0] == 404
    # an unready pod under a budget that is met goes too (IfHealthyBudget)
    running_pod(apiserver, "sick", ready=False, app="db")
    call(apiserver, PDBS, apiserver.token, "POST",
         {"metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    budget_status(apiserver, "db", currentHealthy=1, desiredHealthy=1, expectedPods=2)
    assert evict(apiserver, "sick")[0] == 201


def test_an_eviction_naming_another_pod_or_two_budgets_is_refused(apiserver: ApiServerHandle) -> None:
    running_pod(apiserver, "p", app="x")
    code, status = call(apiserver, f"{PODS}/p/eviction", apiserver.token, "POST",
                        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "q"}})
    assert (code, status["message"]) == (400, "name in URL does not match name in Eviction object")
    for name in ("a", "b"):
        call(apiserver, PDBS, apiserver.token, "POST",
             {"metadata": {"name": name}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}})
    code, status = evict(apiserver, "p")
    assert code == 500
    assert status["message"] == "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def test_evicting_needs_create_on_pods_eviction(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    """An attacker holding a token that may only read pods cannot evict one, nor change a budget."""
    kubectl("create", "serviceaccount", "intruder")
    kubectl("create", "role", "pod-reader", "--verb=get,list,delete", "--resource=pods")
    kubectl("create", "rolebinding", "intruder", "--role=pod-reader", f"--serviceaccount={NS}:intruder")
    token = kubectl("create", "token", "intruder").strip()
    running_pod(apiserver, "victim")
    code, status = evict(apiserver, "victim", token=token)
    assert code == 403
    assert status["message"] == ('pods "victim" is forbidden: User "system:serviceaccount:default:intruder" cannot '
                                 'create resource "pods/eviction" in API group "" in the namespace "default"')
    assert call(apiserver, PDBS, token, "POST", {"metadata": {"name": "x"}, "spec": {"minAvailable": 0}})[0] == 403
    kubectl("create", "role", "evictor", "--verb=create", "--resource=pods/eviction")
    kubectl("create", "rolebinding", "evictor", "--role=evictor", f"--serviceaccount={NS}:intruder")
    assert evict(apiserver, "victim", token=token)[0] == 201


def test_a_dry_run_eviction_decides_and_changes_nothing(apiserver: ApiServerHandle) -> None:
    running_pod(apiserver, "kept", app="kept")
    call(apiserver, PDBS, apiserver.token, "POST",
         {"metadata": {"name": "kept"}, "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "kept"}}}})
    budget_status(apiserver, "kept", currentHealthy=1, expectedPods=1, disruptionsAllowed=1)
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "kept"}}
    assert call(apiserver, f"{PODS}/kept/eviction?dryRun=All", apiserver.token, "POST", body)[0] == 201
    assert evict(apiserver, "kept", dryRun=["All"])[0] == 201
    pod = call(apiserver, f"{PODS}/kept", apiserver.token)[1]
    assert pod["metadata"].get("deletionTimestamp") is None
    assert all(c["type"] != "DisruptionTarget" for c in pod["status"]["conditions"])
    assert call(apiserver, f"{PDBS}/kept", apiserver.token)[1]["status"]["disruptionsAllowed"] == 1


def test_a_spec_change_is_a_new_generation_and_leaves_the_status_to_the_controller(kubectl: Kubectl,
                                                                                   apiserver: ApiServerHandle) -> None:
    kubectl("create", "pdb", "web", "--selector=app=web", "--min-available=1")
    budget_status(apiserver, "web", currentHealthy=3, desiredHealthy=1, expectedPods=3, disruptionsAllowed=2)
    kubectl("patch", "pdb", "web", "--type=merge", "-p", '{"spec": {"minAvailable": 2}, "status": {"currentHealthy": 9}}')
    pdb = kubectl.json("get", "pdb", "web")
    assert pdb["metadata"]["generation"] == 2
    assert (pdb["status"]["currentHealthy"], pdb["status"]["observedGeneration"]) == (3, 1)
    running_pod(apiserver, "web-0", app="web")
    assert evict(apiserver, "web-0")[1]["details"]["causes"][0]["message"] == \
        "The disruption budget web is still being processed by the server."


def test_the_python_client_reads_budgets_and_evicts(apiserver: ApiServerHandle, api: Any) -> None:
    from kubernetes import client

    policy, core = client.PolicyV1Api(api), client.CoreV1Api(api)
    policy.create_namespaced_pod_disruption_budget(NS, client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1, selector=client.V1LabelSelector(match_labels={"app": "web"}))))
    read = policy.read_namespaced_pod_disruption_budget("web", NS)
    assert (read.spec.min_available, read.status.disruptions_allowed, read.status.expected_pods) == (1, 0, 0)
    running_pod(apiserver, "web-0", app="web")
    budget_status(apiserver, "web", currentHealthy=1, desiredHealthy=1, expectedPods=1)
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction("web-0", NS, client.V1Eviction(metadata=client.V1ObjectMeta(name="web-0")))
    assert refused.value.status == 429
    assert [b.metadata.name for b in policy.list_namespaced_pod_disruption_budget(NS).items] == ["web"]
