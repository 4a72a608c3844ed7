"""What an update may change in a pod's spec, as kube's ValidatePodUpdate allows it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainctl.cluster.apiserver.admission import pod_update

Obj = dict[str, Any]

OLD: Obj = {"metadata": {"name": "p"}, "spec": {
    "containers": [{"name": "main", "image": "a:1", "command": ["run"]}],
    "initContainers": [{"name": "init", "image": "i:1"}],
    "nodeName": "node-a", "serviceAccountName": "default", "activeDeadlineSeconds": 100,
    "terminationGracePeriodSeconds": -1, "schedulingGates": [{"name": "one"}, {"name": "two"}],
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]}}


def updated(**spec: Any) -> Obj:
    new = copy.deepcopy(OLD)
    new["spec"].update(spec)
    return new


def messages(new: Obj) -> list[str]:
    return [f"{c.field}: {c.message}" for c in pod_update.validate(new, OLD)]


@pytest.mark.parametrize("spec", [
    {"containers": [{"name": "main", "image": "a:2", "command": ["run"]}]},
    {"initContainers": [{"name": "init", "image": "i:2"}]},
    {"activeDeadlineSeconds": 50},
    {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
                     {"key": "new", "operator": "Exists"}]},
    {"terminationGracePeriodSeconds": 1},
    {"schedulingGates": [{"name": "two"}]},
    {"schedulingGates": []},
    {"hostname": None},  # null and absent are one
])
def test_what_kube_lets_an_update_change(spec: Obj) -> None:
    assert messages(updated(**spec)) == []


def test_metadata_and_status_are_not_judged_here() -> None:
    new = copy.deepcopy(OLD)
    new["metadata"]["labels"] = {"a": "b"}
    new["status"] = {"phase": "Running"}
    assert messages(new) == []


@pytest.mark.parametrize(("spec", "field"), [
    ({"serviceAccountName": "admin"}, "serviceAccountName"),
    ({"nodeName": "node-b"}, "nodeName"),
    ({"containers": [{"name": "main", "image": "a:1", "command": ["sh"]}]}, "containers"),
    ({"containers": [{"name": "main", "image": "a:1", "command": ["run"]}, {"name": "x", "image": "x"}]}, "containers"),
    ({"terminationGracePeriodSeconds": 30}, "terminationGracePeriodSeconds"),
])
def test_anything_else_is_forbidden_with_a_diff(spec: Obj, field: str) -> None:
    [message] = messages(updated(**spec))
    assert message.startswith(f"spec: Forbidden: pod updates may not change fields other than {pod_update.UPDATABLE}\n")
    assert f"-   {field}: " in message and f"+   {field}: " in message


@pytest.mark.parametrize(("spec", "expected"), [
    ({"activeDeadlineSeconds": 200},
     "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"),
    ({"activeDeadlineSeconds": None},
     'spec.activeDeadlineSeconds: Invalid value: "null": must not update from a positive integer to nil value'),
    ({"tolerations": [{"key": "other", "operator": "Exists"}]},
     "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"),
    ({"schedulingGates": [{"name": "one"}, {"name": "two"}, {"name": "three"}]},
     "spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate 'three'"),
])
def test_limited_changes_outside_their_limits(spec: Obj, expected: str) -> None:
    assert messages(updated(**spec)) == [expected]
