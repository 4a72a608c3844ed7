"""A running pod's spec cannot be rewritten under it (kube's ValidatePodUpdate): patching the
ServiceAccount it runs as or the node it is on is refused, and its one process keeps running."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import PODS, SERVICE_ACCOUNTS

from tests.support.pods import container_status, main_pid, phase, running_sleeper, wait_pod


@pytest.mark.parametrize("change", [{"serviceAccountName": "powerful"}, {"nodeName": "elsewhere"},
                                    {"containers": [{"name": "main", "image": "x", "command": ["sh"]}]}])
def test_a_running_pods_spec_cannot_be_patched(api: KubeClient, tmp_path: Path, change: dict[str, object]) -> None:
    api.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                  "metadata": {"name": "powerful", "namespace": "default"}})
    running = running_sleeper(api, tmp_path, "victim")
    pid = main_pid(running)
    with pytest.raises(ApiError) as refused:
        api.patch(PODS, "default", "victim", {"spec": change})
    assert refused.value.code == 422, refused.value
    assert refused.value.message.startswith(
        'Pod "victim" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"), refused.value.message
    assert next(iter(change)) in refused.value.message  # the diff names the field

    # Metadata stays writable; the pod, its spec and its one process are as they were.
    api.patch(PODS, "default", "victim", {"metadata": {"labels": {"checked": "yes"}}})
    after = wait_pod(api, "victim", phase("Running"))
    assert after["spec"] == running["spec"]
    assert main_pid(after) == pid and container_status(after)["restartCount"] == 0
    assert [p["metadata"]["name"] for p in api.list(PODS, "default")[0]] == ["victim"]
