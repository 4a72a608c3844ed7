"""Per-child Events on the embedded API server: what ``kubectl describe`` shows, and their cost.

Run under the cluster lock: these start an API server and the controller.
"""

from __future__ import annotations

import subprocess
import time

from trainctl.kube.events import COMBINED_PREFIX, CorrelatorLimits
from trainctl.kube.restmapper import PYTORCHJOBS

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob
from tests.support.podphase import PodPhaseDriver


def test_kubectl_describe_shows_the_pods_and_services_created(kube, kube_env, start_manager, pods, events):
    start_manager()
    kube.create(PYTORCHJOBS, pytorchjob("described", workers=2, restart="OnFailure", uid=None))
    created = {"described-master-0", "described-worker-0", "described-worker-1"}
    events.wait(
        lambda: {e["message"] for e in job_events(events, "described")} >= {f"Created pod: {n}" for n in created},
        what="SuccessfulCreatePod events",
    )
    out = subprocess.run(
        ["kubectl", "describe", "pytorchjob", "described"], check=False, env=kube_env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.split("Events:", 1)[1].splitlines()]
    for name in sorted(created):
        for reason, message in (("SuccessfulCreatePod", f"Created pod: {name}"), ("SuccessfulCreateService", f"Created service: {name}")):
            row = next((r for r in rows if " ".join(r).endswith(message)), None)
            assert row is not None and row[:2] == ["Normal", reason] and "pytorchjob-controller" in row, out.stdout


def test_a_500_replica_job_costs_a_bounded_number_of_event_writes(kube, start_manager, pods, events):
    manager = start_manager()
    started = time.monotonic()
    kube.create(PYTORCHJOBS, pytorchjob("big", workers=499, restart="OnFailure", uid=None))
    pods.wait(lambda: sum(p["metadata"]["name"].startswith("big-") for p in pods.list()) == 500, timeout=600, what="500 pods")
    recorder = manager.events
    # 500 pods and 500 Services, one Event each, from one source about one object, under two
    # reasons: each reason's burst, then one write per reason per refill period.
    events.wait(lambda: recorder.writes + recorder.dropped >= 1000, timeout=120, what="1000 child events recorded")
    elapsed = time.monotonic() - started
    limits = CorrelatorLimits()
    reasons = 2  # SuccessfulCreatePod, SuccessfulCreateService
    assert recorder.writes <= reasons * (limits.burst + elapsed / limits.refill_seconds + 1), (recorder.writes, elapsed)

    def all_written():
        stored = job_events(events, "big")
        return stored if len(stored) >= recorder.created else None

    stored = events.wait(all_written, what="the Events written")
    assert len(stored) == recorder.created <= reasons * limits.burst
    combined = [e for e in stored if e["message"].startswith(COMBINED_PREFIX)]
    assert {e["reason"] for e in combined} <= {"SuccessfulCreatePod", "SuccessfulCreateService"} and combined
    print(f"\n500-replica job: {recorder.writes} Event writes ({recorder.created} Events), {recorder.dropped} dropped, in {elapsed:.1f}s")


def test_a_replaced_pod_says_why_and_where_and_its_recreation_is_counted(kube, start_manager, events):
    start_manager()
    failed: set[str] = set()

    def outcome(pod, running):
        if pod["metadata"]["name"] == "replaced-worker-0" and not failed:
            failed.add(pod["metadata"]["uid"])
            return "Failed"
        return None

    job = pytorchjob("replaced", workers=1, restart="OnFailure", uid=None)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeName"] = "node-a"
    driver = PodPhaseDriver(kube, "default", outcome).start()
    try:
        kube.create(PYTORCHJOBS, job)
        deleted = events.wait(
            lambda: [e for e in job_events(events, "replaced") if e["reason"] == "SuccessfulDeletePod"], what="SuccessfulDeletePod"
        )
        recreated = events.wait(
            lambda: [e for e in job_events(events, "replaced") if e["message"] == "Created pod: replaced-worker-0" and e["count"] == 2],
            what="the recreation counted on the first Event",
        )
    finally:
        driver.stop()
    assert [e["message"] for e in deleted] == [
        "Deleted pod: replaced-worker-0 (to be recreated: failed with exit code 1 (Error) on node node-a)"
    ]
    assert recreated[0]["type"] == "Normal" and recreated[0]["firstTimestamp"] <= recreated[0]["lastTimestamp"]
