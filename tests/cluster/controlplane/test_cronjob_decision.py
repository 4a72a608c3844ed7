"""kube's CronJob rules, as cronjob_decision applies them to plain dicts (no server, no clock)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from trainctl.cluster.controlplane import cronjob_decision as cd
from trainctl.cluster.controlplane.job_decision import rfc3339
from trainctl.cluster.cron import schedule_problem

Obj = dict[str, Any]
CREATED = datetime(2026, 1, 1, 11, 58, 30, tzinfo=timezone.utc)


def cronjob(schedule: str = "*/5 * * * *", status: Obj | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "refresh", "namespace": "default", "uid": "cj-uid", "creationTimestamp": rfc3339(CREATED)},
            "spec": {"schedule": schedule, "concurrencyPolicy": "Allow", "successfulJobsHistoryLimit": 3,
                     "failedJobsHistoryLimit": 1, "jobTemplate": {"metadata": {"labels": {"app": "refresh"}},
                                                                  "spec": {"template": {"spec": {"restartPolicy": "Never"}}}},
                     **spec},
            "status": status or {}}


def job(name: str, *, done: str | None = None, completed: datetime | None = None, uid: str | None = None) -> Obj:
    status: Obj = {}
    if done:
        status = {"conditions": [{"type": done, "status": "True"}]}
        if completed:
            status["completionTime"] = rfc3339(completed)
    return {"metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}",
                         "ownerReferences": [{"uid": "cj-uid", "controller": True, "kind": "CronJob", "name": "refresh"}]},
            "status": status}


def test_nothing_runs_before_the_first_schedule_time_and_the_next_pass_is_timed_for_it() -> None:
    decision = cd.decide(cronjob(), [], CREATED + timedelta(seconds=10))
    assert decision.create is None and decision.requeue_after is not None and 80 <= decision.requeue_after <= 81


def test_a_due_schedule_time_creates_its_job_named_after_the_minute() -> None:
    now = datetime(2026, 1, 1, 12, 0, 20, tzinfo=timezone.utc)
    decision = cd.decide(cronjob(), [], now)
    assert decision.create is not None
    scheduled = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    assert decision.create["metadata"]["name"] == f"refresh-{int(scheduled.timestamp()) // 60}"
    assert decision.create["metadata"]["annotations"][cd.SCHEDULED_TIMESTAMP] == "2026-01-01T12:00:00Z"
    assert decision.create["metadata"]["labels"] == {"app": "refresh"}
    assert decision.create["metadata"]["ownerReferences"][0]["uid"] == "cj-uid"
    assert decision.status is not None and decision.status["lastScheduleTime"] == "2026-01-01T12:00:00Z"
    # The same time again (a second pass before the cache shows the Job) names the same Job.
    again = cd.decide(cronjob(status=decision.status), [job(decision.create["metadata"]["name"])], now)
    assert again.create is None


def test_forbid_skips_while_a_job_runs_and_replace_deletes_it() -> None:
    now = datetime(2026, 1, 1, 12, 5, 5, tzinfo=timezone.utc)
    last = {"lastScheduleTime": "2026-01-01T12:00:00Z"}
    running = job("refresh-old")
    forbid = cd.decide(cronjob(concurrencyPolicy="Forbid", status=last), [running], now)
    assert forbid.create is None and ("Normal", "JobAlreadyActive",
                                      "Not starting job because prior execution is running and concurrency policy is Forbid") in forbid.events
    replace = cd.decide(cronjob(concurrencyPolicy="Replace", status=last), [running], now)
    assert replace.create is not None and replace.delete == ["refresh-old"]
    allow = cd.decide(cronjob(status=last), [running], now)
    assert allow.create is not None and allow.delete == []


def test_a_time_missed_past_the_starting_deadline_is_not_run() -> None:
    now = datetime(2026, 1, 1, 12, 3, 0, tzinfo=timezone.utc)  # 12:00 was due 180 s ago
    assert cd.decide(cronjob(startingDeadlineSeconds=60), [], now).create is None
    assert cd.decide(cronjob(startingDeadlineSeconds=200), [], now).create is not None


def test_suspended_cronjobs_start_nothing() -> None:
    assert cd.decide(cronjob(suspend=True), [], datetime(2026, 1, 2, tzinfo=timezone.utc)).create is None


def test_time_zones_move_the_schedule() -> None:
    now = datetime(2026, 1, 1, 17, 0, 30, tzinfo=timezone.utc)  # noon in New York (UTC-5)
    new_york = cd.decide(cronjob("0 12 * * *", timeZone="America/New_York", status={"lastScheduleTime": "2025-12-31T17:00:00Z"}), [], now)
    assert new_york.create is not None and new_york.create["metadata"]["annotations"][cd.SCHEDULED_TIMESTAMP] == "2026-01-01T17:00:00Z"
    assert cd.decide(cronjob("0 12 * * *", status={"lastScheduleTime": "2026-01-01T12:00:00Z"}), [], now).create is None


def test_status_lists_running_jobs_and_the_last_success_and_history_is_trimmed() -> None:
    base = datetime(2026, 1, 1, 11, 0, tzinfo=timezone.utc)
    done = [job(f"ok-{i}", done="Complete", completed=base + timedelta(minutes=i)) for i in range(5)]
    failed = [job(f"bad-{i}", done="Failed", completed=base + timedelta(minutes=i)) for i in range(2)]
    decision = cd.decide(cronjob(status={"lastScheduleTime": rfc3339(CREATED)}), [*done, *failed, job("now")],
                         datetime(2026, 1, 1, 11, 59, tzinfo=timezone.utc))
    assert sorted(decision.delete) == ["bad-0", "ok-0", "ok-1"]
    assert decision.status is not None and [ref["name"] for ref in decision.status["active"]] == ["now"]
    assert decision.status["lastSuccessfulTime"] == "2026-01-01T11:04:00Z"


def test_a_job_that_finished_is_reported_once() -> None:
    status = {"active": [{"kind": "Job", "name": "refresh-1", "uid": "u1"}], "lastScheduleTime": rfc3339(CREATED)}
    decision = cd.decide(cronjob(status=status), [job("refresh-1", done="Complete", uid="u1", completed=CREATED)],
                         CREATED + timedelta(seconds=5))
    assert ("Normal", "SawCompletedJob", "Saw completed job: refresh-1, status: Complete") in decision.events
    assert decision.status is not None and "active" not in decision.status


def test_schedules_kube_refuses_are_refused() -> None:
    assert schedule_problem("*/5 * * * *", None) is None and schedule_problem("@hourly", "Europe/Paris") is None
    assert schedule_problem("TZ=UTC 0 * * * *", None) == \
        'Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead'
    assert schedule_problem("61 * * * *", None) == 'Invalid value: "61 * * * *": unparseable schedule'
    assert schedule_problem("0 0 * * * *", None) == 'Invalid value: "0 0 * * * *": unparseable schedule'
    assert schedule_problem("@daily", "Mars/Olympus") == 'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus'
    assert schedule_problem("", None) == "Required value"
