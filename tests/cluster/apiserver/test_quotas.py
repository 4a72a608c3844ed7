"""ResourceQuota and LimitRange through kubectl and HTTPS against the real server: ``kubectl
create quota`` (sent as protobuf), the refusals' words, kube's columns and ``describe``,
racing creates, and who may change a quota."""

from __future__ import annotations

import json
import threading
from typing import Any

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.cluster.apiserver.test_access import call
from tests.support.kubectl import Kubectl

NS = "team"
PODS = f"/api/v1/namespaces/{NS}/pods"


def pod(name: str, cpu: str | None = None) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}} if cpu else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}


def test_kubectl_creates_a_quota_and_a_create_past_it_is_refused_in_kubes_words(kubectl: Kubectl,
                                                                                 apiserver: ApiServerHandle) -> None:
    kubectl("create", "namespace", NS)
    kubectl("create", "quota", "compute", "--hard=pods=10,requests.cpu=2,limits.cpu=2", "-n", NS)
    assert kubectl.json("get", "quota", "compute", "-n", NS)["spec"]["hard"] == {
        "pods": "10", "requests.cpu": "2", "limits.cpu": "2"}
    assert call(apiserver, PODS, apiserver.token, "POST", pod("a", "1500m"))[0] == 201
    code, status = call(apiserver, PODS, apiserver.token, "POST", pod("b", "1"))
    assert code == 403 and status["reason"] == "Forbidden"
    assert status["message"] == ('pods "b" is forbidden: exceeded quota: compute, requested: limits.cpu=1,requests.cpu=1, '
                                 "used: limits.cpu=1500m,requests.cpu=1500m, limited: limits.cpu=2,requests.cpu=2")
    unstated = kubectl.run("run", "bare", "--image=x", "-n", NS, check=False)
    assert 'pods "bare" is forbidden: failed quota: compute: must specify limits.cpu for: bare; requests.cpu for: bare' \
        in unstated.stderr
    assert call(apiserver, PODS, apiserver.token, "POST", pod("c", "500m"))[0] == 201
    kubectl("create", "quota", "scoped", "--hard=pods=5", "--scopes=NotBestEffort,NotTerminating", "-n", NS)
    assert kubectl.json("get", "quota", "scoped", "-n", NS)["spec"] == {"hard": {"pods": "5"},
                                                                       "scopes": ["NotBestEffort", "NotTerminating"]}
    negative = kubectl.run("create", "quota", "bad", "--hard=cpu=-1", "-n", NS, check=False)
    assert 'spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0' in negative.stderr


def test_a_limit_range_defaults_and_bounds_containers(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl.apply({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bounds", "namespace": NS},
                   "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "defaultRequest": {"cpu": "250m"},
                                        "default": {"memory": "256Mi"}}]}})
    stored = kubectl.json("get", "limits", "bounds", "-n", NS)["spec"]["limits"][0]
    assert stored["default"] == {"cpu": "1", "memory": "256Mi"}  # kube's defaulting: the default limit is the max
    kubectl("run", "small", "--image=x", "-n", NS)
    resources = kubectl.json("get", "pod", "small", "-n", NS)["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"cpu": "1", "memory": "256Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}}
    big = kubectl.run("run", "big", "--image=x", "-n", NS, "--overrides",
                      json.dumps({"spec": {"containers": [{"name": "big", "image": "x",
                                                           "resources": {"limits": {"cpu": "2"}}}]}}), check=False)
    assert 'Error from server (Forbidden): pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2' \
        in big.stderr
    described = [line.split() for line in kubectl("describe", "limits", "bounds", "-n", NS).splitlines()]
    assert ["Container", "cpu", "-", "1", "250m", "1", "-"] in described
    lines = kubectl("get", "limits", "-n", NS).splitlines()
    assert lines[0].split() == ["NAME", "CREATED", "AT"] and lines[1].split()[0] == "bounds"


def test_kubes_columns_and_describe_show_what_the_status_counts(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl("create", "quota", "q", "--hard=pods=10,requests.cpu=2,limits.memory=1Gi", "-n", NS)
    kubectl("patch", "quota", "q", "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"hard": {"pods": "10", "requests.cpu": "2", "limits.memory": "1Gi"},
                    "used": {"pods": "1", "requests.cpu": "500m", "limits.memory": "256Mi"}}}))
    header, row = (line.split(None, 2) for line in kubectl("get", "quota", "-n", NS).splitlines())
    assert header[:2] == ["NAME", "AGE"] and header[2].split() == ["REQUEST", "LIMIT"]
    assert row[0] == "q" and row[2].split("   ")[0].strip() == "pods: 1/10, requests.cpu: 500m/2"
    assert row[2].rstrip().endswith("limits.memory: 256Mi/1Gi")
    described = kubectl("describe", "quota", "q", "-n", NS)
    assert [line.split() for line in described.splitlines() if line.startswith("requests.cpu")] == [["requests.cpu", "500m", "2"]]


def test_racing_creates_for_the_last_room_do_not_both_pass(kubectl: Kubectl, apiserver: ApiServerHandle) -> None:
    kubectl("create", "namespace", NS)
    kubectl("create", "quota", "one", "--hard=pods=1", "-n", NS)
    codes: list[int] = []
    lock = threading.Lock()

    def create(index: int) -> None:
        code, _ = call(apiserver, PODS, apiserver.token, "POST", pod(f"racer-{index}"))
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(codes) == [201] + [403] * 7
    assert len(kubectl.json("get", "pods", "-n", NS)["items"]) == 1


def test_a_namespace_editor_cannot_change_or_delete_its_quota(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl("create", "quota", "cap", "--hard=pods=1", "-n", NS)
    kubectl("create", "rolebinding", "mallory-edits", "--clusterrole=edit", "--user=mallory", "-n", NS)
    as_mallory = ("-n", NS, "--as=mallory")
    assert "cap" in kubectl("get", "quota", *as_mallory)  # kube's edit role includes view's reads
    for attempt in (("delete", "quota", "cap"), ("patch", "quota", "cap", "--type=merge", "-p", '{"spec":{"hard":{"pods":"99"}}}'),
                    ("patch", "quota", "cap", "--subresource=status", "--type=merge", "-p", '{"status":{"hard":{"pods":"99"}}}'),
                    ("create", "quota", "more", "--hard=pods=99")):
        refused = kubectl.run(*attempt, *as_mallory, check=False)
        assert refused.returncode != 0 and 'is forbidden: User "mallory" cannot' in refused.stderr, attempt
    assert kubectl("auth", "can-i", "delete", "limitranges", *as_mallory, check=False).strip() == "no"
    assert kubectl.json("get", "quota", "cap", "-n", NS)["spec"]["hard"] == {"pods": "1"}
