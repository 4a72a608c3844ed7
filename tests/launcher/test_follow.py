"""Which container instance of the lead pod has ended, as the log follower judges it."""

from __future__ import annotations

from typing import Any

from trainctl.launch.follow import LeadPodLogs


def lead_pod(restarts: int, state: dict[str, Any], last_state: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "job-master-0", "uid": "u1"},
            "spec": {"containers": [{"name": "pytorch"}]},
            "status": {"containerStatuses": [{"name": "pytorch", "restartCount": restarts, "state": state,
                                              "lastState": last_state}]}}


def test_a_run_waiting_to_restart_has_ended_as_a_real_kubelet_reports_it():
    logs = LeadPodLogs(None, "default", "pytorch", lambda pod, line: None, lambda note: None)  # type: ignore[arg-type]
    crashed = {"terminated": {"exitCode": 1}}
    logs.observe(lead_pod(1, {"running": {}}, crashed))
    assert not logs._exited(("u1", 1))
    # CrashLoopBackOff: restartCount still names the run that crashed; its log must be drained.
    logs.observe(lead_pod(1, {"waiting": {"reason": "CrashLoopBackOff"}}, crashed))
    assert logs._exited(("u1", 1))
    logs.observe(lead_pod(0, {"waiting": {"reason": "ContainerCreating"}}, {}))
    assert not logs._exited(("u1", 0))  # not started yet
    logs.observe(lead_pod(2, {"running": {}}, crashed))
    assert logs._exited(("u1", 1))
