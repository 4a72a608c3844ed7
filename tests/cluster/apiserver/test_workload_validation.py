"""apps/v1 Deployments and ReplicaSets are checked as kube-apiserver checks them: a selector
their pods match (else a ReplicaSet would make pods it never counts), pods that restart,
counts, the rolling update's bounds, and a selector that never changes."""

from __future__ import annotations

from typing import Any

import yaml

from tests.support.kubectl import Kubectl


def deployment(**spec: Any) -> dict[str, Any]:
    base = {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "python:3.11", "command": ["sleep", "60"]}]}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {**base, **spec}}


def refused(kubectl: Kubectl, obj: dict[str, Any]) -> str:
    result = kubectl.run("create", "-f", "-", input=yaml.safe_dump(obj), check=False)
    assert result.returncode != 0, result.stdout
    return result.stderr


def test_a_selector_the_template_does_not_match_is_refused(kubectl: Kubectl) -> None:
    other = deployment(template={**deployment()["spec"]["template"], "metadata": {"labels": {"app": "db"}}})
    assert ('spec.template.metadata.labels: Invalid value: map[string]string{"app":"db"}: `selector` does not match template `labels`'
            in refused(kubectl, other))
    assert "spec.selector: Required value" in refused(kubectl, deployment(selector=None))
    replicaset = {**deployment(), "kind": "ReplicaSet"}
    replicaset["spec"] = {**replicaset["spec"], "selector": {"matchLabels": {"app": "other"}}}
    assert "`selector` does not match template `labels`" in refused(kubectl, replicaset)


def test_counts_restart_policy_and_rolling_update_bounds(kubectl: Kubectl) -> None:
    template = deployment()["spec"]["template"]
    never = {**template, "spec": {**template["spec"], "restartPolicy": "Never"}}
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"' in refused(kubectl, deployment(template=never))
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in refused(kubectl, deployment(replicas=-1))
    both_zero = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}
    assert "may not be 0 when `maxSurge` is 0" in refused(kubectl, deployment(strategy=both_zero))
    recreate = {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}
    assert "may not be specified when strategy `type` is 'Recreate'" in refused(kubectl, deployment(strategy=recreate))


def test_the_selector_is_immutable(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=yaml.safe_dump(deployment()))
    patch = '{"spec":{"selector":{"matchLabels":{"app":"web","tier":"x"}},"template":{"metadata":{"labels":{"tier":"x"}}}}}'
    result = kubectl.run("patch", "deployment", "web", "--type=merge", "-p", patch, check=False)
    assert result.returncode != 0 and "spec.selector: Invalid value: field is immutable" in result.stderr
    kubectl("scale", "deployment", "web", "--replicas=2")  # the rest of the spec may change
