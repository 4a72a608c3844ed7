"""Reading container limits and reporting an OOM kill as Kubernetes does."""

from __future__ import annotations

import pytest

from trainctl.cluster.compute.container_limits import ContainerLimits, terminated_fields


@pytest.mark.parametrize(("resources", "expected"), [
    ({"limits": {"memory": "512Mi", "cpu": "500m"}}, ContainerLimits(memory_bytes=512 * 2**20, cpu_millicores=500)),
    ({"limits": {"memory": "1.5Gi", "cpu": "2"}}, ContainerLimits(memory_bytes=3 * 2**29, cpu_millicores=2000)),
    ({"limits": {"memory": "1G", "cpu": 1.5}}, ContainerLimits(memory_bytes=10**9, cpu_millicores=1500)),
    ({"limits": {"cpu": "0.0001"}}, ContainerLimits(cpu_millicores=1)),  # rounded up, as the kubelet does
    ({"requests": {"memory": "1Gi"}}, ContainerLimits()),
    (None, ContainerLimits()),
])
def test_limits_are_read_from_kubernetes_quantities(resources, expected) -> None:
    assert ContainerLimits.from_resources(resources) == expected


@pytest.mark.parametrize("memory", ["lots", "-1Gi", "0"])
def test_a_malformed_or_empty_limit_is_an_error(memory) -> None:
    with pytest.raises(ValueError):
        ContainerLimits.from_resources({"limits": {"memory": memory}})


def test_terminated_state_fields() -> None:
    assert terminated_fields(137, oom_killed=True) == {"exitCode": 137, "reason": "OOMKilled"}
    assert terminated_fields(137, oom_killed=False) == {"exitCode": 137, "reason": "Error"}
    assert terminated_fields(0, oom_killed=False) == {"exitCode": 0, "reason": "Completed"}
    # A child was killed for memory, the main process then failed on its own: still OOMKilled.
    assert terminated_fields(1, oom_killed=True) == {"exitCode": 1, "reason": "OOMKilled"}
