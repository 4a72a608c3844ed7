"""The LimitRanger and ResourceQuota admission rules on plain objects: defaults, bounds, the
quota's count of a namespace and kube's words for each refusal."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.cluster.apiserver.admission import limit_ranges, resource_quotas
from trainctl.cluster.apiserver.apimachinery.errors import ApiError

Obj = dict[str, Any]


def pod(name: str = "p", phase: str = "Pending", **resources: Obj) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns"}, "status": {"phase": phase},
            "spec": {"containers": [{"name": "main", "resources": dict(resources)}]}}


def limit_range(*items: Obj) -> Obj:
    return {"metadata": {"name": "lr", "namespace": "ns"}, "spec": {"limits": list(items)}}


def quota(name: str = "q", **hard: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": {k.replace("_", "."): v for k, v in hard.items()}}}


def forbidden(call: Any) -> str:
    with pytest.raises(ApiError) as raised:
        call()
    assert raised.value.code == 403
    return str(raised.value.message)


def test_a_container_gets_the_limit_ranges_defaults_and_keeps_what_it_states() -> None:
    new = pod(limits={"memory": "1Gi"})
    new["spec"]["containers"].append({"name": "side"})
    item = {"type": "Container", "default": {"cpu": "1", "memory": "512Mi"}, "defaultRequest": {"cpu": "250m"}}
    limit_ranges.admit_pod(new, [limit_range(item)])
    main, side = (c["resources"] for c in new["spec"]["containers"])
    assert main == {"limits": {"memory": "1Gi", "cpu": "1"}, "requests": {"memory": "1Gi", "cpu": "250m"}}
    assert side == {"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "250m"}}
    assert "cpu request for container side" in new["metadata"]["annotations"]["kubernetes.io/limit-ranger"]


def test_container_bounds_are_enforced_in_kubes_words() -> None:
    bounds = limit_range({"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}})
    message = forbidden(lambda: limit_ranges.validate_pod(pod(limits={"cpu": "2"}, requests={"memory": "64Mi"}), [bounds]))
    assert message == 'pods "p" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    both = forbidden(lambda: limit_ranges.validate_pod(pod(requests={"memory": "32Mi"}), [bounds]))
    assert both == ('pods "p" is forbidden: [minimum memory usage per Container is 64Mi, but request is 32Mi, '
                    "maximum cpu usage per Container is 1.  No limit is specified]")
    limit_ranges.validate_pod(pod(limits={"cpu": "500m"}, requests={"memory": "128Mi"}), [bounds])


def test_the_limit_to_request_ratio_and_the_pod_total() -> None:
    ratio = limit_range({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}})
    message = forbidden(lambda: limit_ranges.validate_pod(pod(requests={"cpu": "1"}, limits={"cpu": "3"}), [ratio]))
    assert message == 'pods "p" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000'
    two = pod(limits={"cpu": "600m"})
    two["spec"]["containers"].append({"name": "b", "resources": {"limits": {"cpu": "600m"}}})
    per_pod = limit_range({"type": "Pod", "max": {"cpu": "1"}})
    assert forbidden(lambda: limit_ranges.validate_pod(two, [per_pod])).endswith(
        "maximum cpu usage per Pod is 1, but limit is 1200m")


def test_a_limit_ranges_defaults_come_from_max_and_min_as_kube_defaults_them() -> None:
    from trainctl.cluster.apiserver.apimachinery.resource_types import Registry
    rtype = Registry().get("", "v1", "limitranges")
    assert rtype is not None and rtype.defaulter is not None
    obj = limit_range({"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}})
    rtype.defaulter(obj)
    item = obj["spec"]["limits"][0]
    assert (item["default"], item["defaultRequest"]) == ({"cpu": "2"}, {"cpu": "2", "memory": "1Mi"})


def lister(objects: dict[str, list[Obj]]) -> Any:
    return lambda key: objects.get(key, [])


def test_a_create_past_the_hard_limit_is_refused_with_what_was_requested_used_and_limited() -> None:
    running = pod("a", requests={"cpu": "1"}, limits={"cpu": "1"})
    stored = lister({"/pods": [running, pod("done", phase="Succeeded", requests={"cpu": "4"}, limits={"cpu": "4"})]})
    new = pod("b", requests={"cpu": "2"}, limits={"cpu": "2"})
    message = forbidden(lambda: resource_quotas.check_create("pods", "", new, [quota(requests_cpu="2", pods="10")], stored))
    assert message == 'pods "b" is forbidden: exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=1, limited: requests.cpu=2'
    resource_quotas.check_create("pods", "", pod("c", requests={"cpu": "1"}, limits={"cpu": "1"}),
                                 [quota(requests_cpu="2")], stored)


def test_a_quota_on_cpu_or_memory_refuses_a_pod_that_does_not_state_them() -> None:
    message = forbidden(lambda: resource_quotas.check_create(
        "pods", "", pod(requests={"cpu": "1"}), [quota(**{"limits_cpu": "4", "requests_memory": "1Gi"})], lister({})))
    assert message == 'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: main; requests.memory for: main'


def test_object_counts_gpus_and_custom_resources_are_counted() -> None:
    stored = lister({"/configmaps": [{"metadata": {"name": "one"}}],
                     "kubeflow.org/pytorchjobs": [{"metadata": {"name": "j1"}}],
                     "/pods": [pod("g", requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})]})
    quotas = [quota("counts", configmaps="1", **{"count/pytorchjobs.kubeflow.org": "1", "requests.nvidia.com/gpu": "1"})]
    assert "requested: configmaps=1, used: configmaps=1, limited: configmaps=1" in forbidden(
        lambda: resource_quotas.check_create("configmaps", "", {"metadata": {"name": "two"}}, quotas, stored))
    assert "exceeded quota: counts, requested: count/pytorchjobs.kubeflow.org=1" in forbidden(
        lambda: resource_quotas.check_create("pytorchjobs", "kubeflow.org", {"metadata": {"name": "j2"}}, quotas, stored))
    assert "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1" in forbidden(
        lambda: resource_quotas.check_create("pods", "", pod("h", limits={"nvidia.com/gpu": "1"},
                                                             requests={"nvidia.com/gpu": "1"}), quotas, stored))
    resource_quotas.check_create("secrets", "", {"metadata": {"name": "s"}}, quotas, stored)


def test_memory_is_printed_as_kube_prints_it() -> None:
    stored = lister({"/pods": [pod("a", requests={"memory": "1536Mi"}, limits={"memory": "1536Mi"})]})
    new = pod("b", requests={"memory": "1Gi"}, limits={"memory": "1Gi"})
    assert forbidden(lambda: resource_quotas.check_create("pods", "", new, [quota(limits_memory="2Gi")], stored)).endswith(
        "requested: limits.memory=1Gi, used: limits.memory=1536Mi, limited: limits.memory=2Gi")


def test_quotas_and_limit_ranges_are_validated_as_kube_validates_them() -> None:
    from trainctl.cluster.apiserver.admission.resource_quotas import validate_limit_range, validate_quota
    assert [(c.field, c.message) for c in validate_quota(quota(cpu="-1", pods="lots"))] == [
        ("spec.hard[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
        ("spec.hard[pods]", "Invalid value: \"lots\": quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    inverted = limit_range({"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
                           {"type": "Pod", "default": {"cpu": "1"}})
    assert [(c.field, c.message) for c in validate_limit_range(inverted)] == [
        ("spec.limits[0].min[cpu]", 'Invalid value: "2": min value 2 is greater than max value 1'),
        ("spec.limits[1].default", "Forbidden: may not be specified when `type` is 'Pod'")]


def test_a_scoped_quota_judges_only_the_pods_its_scopes_take_in() -> None:
    high = {**quota("high", pods="1"), "spec": {"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}
    best_effort = {**quota("free", pods="1"), "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}}

    def with_class(name: str, cls: str | None, **resources: Obj) -> Obj:
        new = pod(name, **resources)
        if cls:
            new["spec"]["priorityClassName"] = cls
        return new

    stored = lister({"/pods": [with_class("a", "high", requests={"cpu": "1"}), with_class("b", None)]})
    assert "exceeded quota: high, requested: pods=1, used: pods=1" in forbidden(lambda: resource_quotas.check_create(
        "pods", "", with_class("c", "high", requests={"cpu": "1"}), [high], stored))
    resource_quotas.check_create("pods", "", with_class("d", "low", requests={"cpu": "1"}), [high, best_effort], stored)
    assert "exceeded quota: free" in forbidden(lambda: resource_quotas.check_create(
        "pods", "", with_class("e", None), [high, best_effort], stored))
    resource_quotas.check_create("configmaps", "", {"metadata": {"name": "cm"}}, [best_effort], stored)
