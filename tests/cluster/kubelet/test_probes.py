"""A liveness probe's kill on an in-process kubelet: the restart is the probe's, not the exit code's."""

from __future__ import annotations

from pathlib import Path

from trainctl.kube.client import KubeClient

from tests.support.pods import container_status, create, pod, wait_pod

# Exits 0 on SIGTERM, and says when it is ready to (its probe fails from then on).
GRACEFUL = ("import pathlib, signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
            "pathlib.Path(sys.argv[1]).touch()\nwhile True: time.sleep(1)")


def test_on_failure_restarts_a_container_its_liveness_probe_killed_even_when_it_exits_0(api: KubeClient,
                                                                                        tmp_path: Path):
    handling = tmp_path / "handling-sigterm"
    create(api, pod("graceful", GRACEFUL, restart_policy="OnFailure", args=[str(handling)], livenessProbe={
        "exec": {"command": ["sh", "-c", f"! test -e {handling}"]}, "periodSeconds": 1, "failureThreshold": 1}))
    restarted = wait_pod(api, "graceful", lambda p: bool(p.get("status", {}).get("containerStatuses"))
                         and container_status(p).get("restartCount", 0) >= 1, timeout=60)
    assert container_status(restarted)["lastState"]["terminated"]["exitCode"] == 0
    assert restarted["status"]["phase"] == "Running"
