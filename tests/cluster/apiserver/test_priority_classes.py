"""PriorityClasses and the Priority admission plugin, through kubectl and HTTPS against the real
server: kube's built-in classes, globalDefault, immutability, and pods' resolved priority."""

from __future__ import annotations

import json

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.cluster.apiserver.test_access import call
from tests.support.kubectl import Kubectl

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def pod_spec(kubectl: Kubectl, name: str, **spec: object) -> dict:
    kubectl("run", name, "--image=busybox", "--overrides", json.dumps({"spec": spec}))
    return kubectl.json("get", "pod", name)["spec"]


def test_every_cluster_has_kubes_system_classes_in_kubes_columns(kubectl: Kubectl) -> None:
    lines = [line.split() for line in kubectl("get", "priorityclass").splitlines()]
    assert lines[0] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert [(row[0], row[1], row[2], row[4]) for row in lines[1:]] == [
        ("system-cluster-critical", "2000000000", "false", "PreemptLowerPriority"),
        ("system-node-critical", "2000001000", "false", "PreemptLowerPriority")]
    assert kubectl.json("get", "pc", "system-node-critical")["apiVersion"] == "scheduling.k8s.io/v1"


def test_classes_are_validated_as_kube_validates_them(kubectl: Kubectl, apiserver: ApiServerHandle) -> None:
    kubectl("create", "priorityclass", "high", "--value=1000", "--global-default", "--preemption-policy=Never")
    assert kubectl.json("get", "pc", "high")["preemptionPolicy"] == "Never"
    second = kubectl.run("create", "priorityclass", "other", "--value=5", "--global-default", check=False)
    assert 'priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass high is already marked as default. ' \
           "Only one default can exist" in second.stderr
    reserved = kubectl.run("create", "priorityclass", "system-mine", "--value=5", check=False)
    assert ("metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
            "error: system-mine is not a known system priority class") in reserved.stderr
    too_high = kubectl.run("create", "priorityclass", "huge", "--value=1000000001", check=False)
    assert "value: Forbidden: maximum allowed value of a user defined priority is 1000000000" in too_high.stderr
    changed = kubectl.run("patch", "pc", "high", "--type=merge", "-p", '{"value": 7}', check=False)
    assert "value: Forbidden: may not be changed in an update." in changed.stderr
    code, status = call(apiserver, CLASSES, apiserver.token, "POST",
                        {"metadata": {"name": "odd"}, "value": 1, "preemptionPolicy": "Sometimes"})
    assert code == 422
    assert 'preemptionPolicy: Unsupported value: "Sometimes": supported values: "Never", "PreemptLowerPriority"' \
        in status["message"]
    kubectl("patch", "pc", "high", "--type=merge", "-p", '{"description": "batch work"}')  # the rest may change


def test_admission_resolves_a_pods_priority_from_its_class(kubectl: Kubectl) -> None:
    plain = pod_spec(kubectl, "plain")
    assert (plain["priority"], plain["preemptionPolicy"], plain.get("priorityClassName")) == (0, "PreemptLowerPriority", None)
    critical = pod_spec(kubectl, "critical", priorityClassName="system-cluster-critical")
    assert (critical["priority"], critical["preemptionPolicy"]) == (2000000000, "PreemptLowerPriority")
    kubectl("create", "priorityclass", "batch", "--value=100", "--global-default", "--preemption-policy=Never")
    defaulted = pod_spec(kubectl, "defaulted")
    assert (defaulted["priorityClassName"], defaulted["priority"], defaulted["preemptionPolicy"]) == ("batch", 100, "Never")
    missing = kubectl.run("run", "lost", "--image=busybox", "--overrides",
                          json.dumps({"spec": {"priorityClassName": "nope"}}), check=False)
    assert 'Error from server (Forbidden): pods "lost" is forbidden: no PriorityClass with name nope was found' \
        in missing.stderr
    stated = kubectl.run("run", "liar", "--image=busybox", "--overrides",
                         json.dumps({"spec": {"priorityClassName": "batch", "priority": 5}}), check=False)
    assert ('pods "liar" is forbidden: the integer value of priority (5) must not be provided in pod spec; '
            "priority admission controller computed 100 from the given PriorityClass name") in stated.stderr
    # an update that leaves the resolved fields out keeps them
    kubectl("label", "pod", "critical", "tier=ops")
    assert kubectl.json("get", "pod", "critical")["spec"]["priority"] == 2000000000
