"""kube's Job rules, as job_decision applies them to plain dicts (no server, no clock)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from trainctl.cluster.controlplane import job_decision as jd

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def job(**spec: Any) -> Obj:
    status = spec.pop("status", {})
    base: Obj = {"parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
                 "template": {"metadata": {"labels": {jd.CONTROLLER_UID_LABEL: "job-uid"}},
                              "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}
    base.update(spec)
    return {"metadata": {"name": "prep", "namespace": "default", "uid": "job-uid"}, "spec": base, "status": status}


def pod(name: str, phase: str = "Running", *, exit_code: int | None = None, index: int | None = None,
        ended: datetime | None = None, restarts: int = 0, created: str = "2026-01-01T11:00:00Z") -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "creationTimestamp": created,
                 "ownerReferences": [{"uid": "job-uid", "controller": True, "kind": "Job", "name": "prep"}]}
    if index is not None:
        meta["annotations"] = {jd.COMPLETION_INDEX: str(index)}
    status: Obj = {"phase": phase, "containerStatuses": [{"name": "main", "restartCount": restarts, "state": {"running": {}}}]}
    if exit_code is not None:
        status["containerStatuses"][0]["state"] = {"terminated": {"exitCode": exit_code, "finishedAt": jd.rfc3339(ended or NOW - timedelta(minutes=5))}}
    return {"metadata": meta, "status": status}


def conditions(decision: jd.JobDecision) -> dict[str, str]:
    return {c["type"]: c.get("reason", "") for c in (decision.status or {}).get("conditions") or [] if c["status"] == "True"}


def test_a_new_job_starts_its_first_pod_owned_and_labelled() -> None:
    decision = jd.decide(job(), [], NOW)
    [created] = decision.create
    assert created["metadata"]["generateName"] == "prep-"
    assert created["metadata"]["ownerReferences"][0] == {"apiVersion": "batch/v1", "kind": "Job", "name": "prep", "uid": "job-uid",
                                                         "controller": True, "blockOwnerDeletion": True}
    assert created["metadata"]["labels"][jd.CONTROLLER_UID_LABEL] == "job-uid"
    assert decision.status is not None and decision.status["startTime"] == "2026-01-01T12:00:00Z"


def test_parallel_completions_run_at_most_parallelism_pods_until_enough_succeed() -> None:
    spec = {"completions": 5, "parallelism": 2}
    assert len(jd.decide(job(**spec), [pod("a")], NOW).create) == 1
    done = [pod(f"s{i}", "Succeeded", exit_code=0) for i in range(4)]
    assert len(jd.decide(job(**spec), done, NOW).create) == 1  # one completion left
    decision = jd.decide(job(**spec), [*done, pod("s4", "Succeeded", exit_code=0)], NOW)
    assert conditions(decision) == {"Complete": ""} and decision.status and decision.status["succeeded"] == 5
    assert decision.status["completionTime"] == "2026-01-01T12:00:00Z" and not decision.create


def test_a_work_queue_job_completes_when_one_pod_succeeded_and_none_runs() -> None:
    spec = {"completions": None, "parallelism": 3}
    running = [pod("a"), pod("b", "Succeeded", exit_code=0)]
    assert not jd.decide(job(**spec), running, NOW).create  # a success means no new pods
    assert "Complete" not in conditions(jd.decide(job(**spec), running, NOW))
    assert "Complete" in conditions(jd.decide(job(**spec), [pod("b", "Succeeded", exit_code=0)], NOW))


def test_failures_past_the_backoff_limit_fail_the_job_and_its_running_pods_go() -> None:
    failed = [pod(f"f{i}", "Failed", exit_code=1) for i in range(3)]
    decision = jd.decide(job(backoffLimit=2, parallelism=2, completions=2), [*failed, pod("r")], NOW)
    assert conditions(decision) == {"Failed": "BackoffLimitExceeded"}
    assert decision.delete == ["r"] and not decision.create
    assert ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit") in decision.events


def test_under_on_failure_container_restarts_count_against_the_backoff_limit() -> None:
    spec = job(backoffLimit=2)
    spec["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert "Failed" not in conditions(jd.decide(spec, [pod("a", restarts=2)], NOW))
    assert conditions(jd.decide(spec, [pod("a", restarts=3)], NOW)) == {"Failed": "BackoffLimitExceeded"}


def test_a_failed_pod_is_replaced_after_the_back_off() -> None:
    recent = pod("f", "Failed", exit_code=1, ended=NOW - timedelta(seconds=3))
    decision = jd.decide(job(), [recent], NOW)
    assert not decision.create and decision.requeue_after == 7.0
    assert len(jd.decide(job(), [recent], NOW + timedelta(seconds=8)).create) == 1
    assert jd.backoff_delay(1) == 10 and jd.backoff_delay(3) == 40 and jd.backoff_delay(20) == 360


def test_the_active_deadline_fails_the_job() -> None:
    started = {"startTime": jd.rfc3339(NOW - timedelta(seconds=61))}
    decision = jd.decide(job(activeDeadlineSeconds=60, status=started), [pod("a")], NOW)
    assert conditions(decision) == {"Failed": "DeadlineExceeded"} and decision.delete == ["a"]
    early = jd.decide(job(activeDeadlineSeconds=60, status={"startTime": jd.rfc3339(NOW - timedelta(seconds=10))}), [pod("a")], NOW)
    assert "Failed" not in conditions(early) and early.requeue_after == 50


def test_pod_failure_policy_fail_job_ignore_and_count() -> None:
    rules = {"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
                       {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    decision = jd.decide(job(podFailurePolicy=rules), [pod("a", "Failed", exit_code=42)], NOW)
    assert conditions(decision) == {"Failed": "PodFailurePolicy"}
    assert decision.status and "failed with exit code 42 matching FailJob rule at index 0" in decision.status["conditions"][-1]["message"]
    evicted = [pod(f"e{i}", "Failed", exit_code=137) for i in range(3)]
    for p in evicted:
        p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    assert "Failed" not in conditions(jd.decide(job(podFailurePolicy=rules, backoffLimit=1), evicted, NOW))
    assert conditions(jd.decide(job(backoffLimit=1), evicted, NOW)) == {"Failed": "BackoffLimitExceeded"}


def test_indexed_jobs_run_each_missing_index_once_and_report_completed_indexes() -> None:
    spec = {"completionMode": "Indexed", "completions": 4, "parallelism": 2}
    decision = jd.decide(job(**spec), [pod("p0", "Succeeded", exit_code=0, index=0), pod("p1", index=1)], NOW)
    [created] = decision.create
    assert created["metadata"]["annotations"][jd.COMPLETION_INDEX] == "2" and created["metadata"]["generateName"] == "prep-2-"
    assert created["spec"]["hostname"] == "prep-2"
    assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{jd.COMPLETION_INDEX}']"}}} \
        in created["spec"]["containers"][0]["env"]
    assert decision.status and decision.status["completedIndexes"] == "0"
    all_done = [pod(f"p{i}", "Succeeded", exit_code=0, index=i) for i in (0, 1, 2, 3)]
    finished = jd.decide(job(**spec), all_done, NOW)
    assert "Complete" in conditions(finished) and finished.status and finished.status["completedIndexes"] == "0-3"
    assert jd.compress_indexes({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7"


def test_suspend_deletes_the_running_pods_and_resume_starts_again() -> None:
    decision = jd.decide(job(suspend=True), [pod("a")], NOW)
    assert decision.delete == ["a"] and not decision.create and conditions(decision) == {"Suspended": "JobSuspended"}
    suspended = job(status=decision.status)
    resumed = jd.decide(suspended, [], NOW)
    assert len(resumed.create) == 1
    assert resumed.status and {c["type"]: c["status"] for c in resumed.status["conditions"]} == {"Suspended": "False"}


def test_a_finished_job_is_deleted_when_its_ttl_has_passed() -> None:
    done = {"conditions": [{"type": "Complete", "status": "True"}], "completionTime": jd.rfc3339(NOW - timedelta(seconds=30))}
    assert jd.decide(job(ttlSecondsAfterFinished=100, status=done), [], NOW).requeue_after == 70
    assert jd.decide(job(ttlSecondsAfterFinished=10, status=done), [], NOW).delete_job
    assert not jd.decide(job(status=done), [], NOW).delete_job


def test_a_job_that_has_not_changed_writes_no_status() -> None:
    first = jd.decide(job(), [pod("a")], NOW)
    again = jd.decide(job(status=first.status), [pod("a")], NOW)
    assert again.status is None and not again.create
