"""Bounded work per job: slow-start creates and a status batch period (the Job controller's)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any, Optional

import pytest

from trainctl.controller.manager import Manager
from trainctl.controller.options import ManagerOptions
from trainctl.controller.plan_applier import ApplyError
from trainctl.controller.reconcile.plan import Plan
from trainctl.kube.client import ApiError, Created
from trainctl.kube.restmapper import EVENTS, PYTORCHJOBS

from tests.support.controller import expected_replicas, master_succeeds_when_all_run
from tests.support.jobs import pytorchjob
from tests.support.podphase import PodPhaseDriver

KEY = ("PyTorchJob", "default", "big")
JOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
       "metadata": {"name": "big", "namespace": "default", "uid": "u1", "resourceVersion": "1", "generation": 1}}


class FakeClient:
    """Answers creates of children (failing the ones ``fail`` picks) and status writes; counts
    both. Events are kept apart: they are not children and never fail here."""

    def __init__(self, fail=lambda n: False, delay: float = 0.0) -> None:
        self.fail, self.delay = fail, delay
        self.creates = self.status_writes = 0
        self.in_flight = self.most_in_flight = 0
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def create(self, resource: Any, obj: dict[str, Any], subresource: Optional[str] = None) -> Created:
        if resource is EVENTS:
            with self.lock:
                self.events.append(obj)
            return Created(obj)
        with self.lock:
            self.creates += 1
            n = self.creates
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        if self.fail(n):
            raise ApiError(503, "ServiceUnavailable", "down")
        return Created(obj)

    def patch(self, resource: Any, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        assert resource is EVENTS, resource  # only a repeated Event is patched here
        return patch

    def replace(self, resource: Any, obj: dict[str, Any], subresource: Optional[str] = None) -> dict[str, Any]:
        self.status_writes += subresource == "status"
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}


def pods(count: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"big-worker-{i}", "namespace": "default"}}
            for i in range(count)]


def manager(client: FakeClient, **options: Any) -> Manager:
    return Manager(client, ManagerOptions(**options), reconciler=lambda job, observed, now: Plan())  # type: ignore[arg-type]


def apply(m: Manager, plan: Plan) -> None:
    m.apply(KEY, JOB, plan, datetime.now(timezone.utc))


def test_a_server_refusing_everything_gets_one_create_not_a_burst():
    client = FakeClient(fail=lambda n: True)
    with pytest.raises(ApplyError) as caught:
        apply(manager(client), Plan(creates=pods(1000)))
    assert client.creates == 1
    assert "999 creates not attempted" in str(caught.value)


def test_batches_double_and_stop_after_the_batch_with_a_failure():
    client = FakeClient(fail=lambda n: n == 10)  # the 10th create falls in the batch of 8
    with pytest.raises(ApplyError):
        apply(manager(client), Plan(creates=pods(100)))
    assert client.creates == 1 + 2 + 4 + 8


def test_every_create_happens_when_none_fails_and_batches_stay_under_the_cap():
    client = FakeClient(delay=0.01)
    apply(manager(client, max_create_batch=4, create_concurrency=32), Plan(creates=pods(40)))
    assert client.creates == 40
    assert client.most_in_flight <= 4


def test_skipped_creates_are_not_expected_so_the_next_reconcile_is_not_held():
    client = FakeClient(fail=lambda n: n == 1)
    m = manager(client)
    with pytest.raises(ApplyError):
        apply(m, Plan(creates=pods(50)))
    assert m.expectations.satisfied(KEY, lambda child: None)


def status(active: int, *conditions: str) -> dict[str, Any]:
    return {"conditions": [{"type": c, "status": "True"} for c in conditions],
            "replicaStatuses": {"Worker": {"active": active}}}


def written(m: Manager, client: FakeClient, job_status: dict[str, Any], plan_status: dict[str, Any]) -> bool:
    before = client.status_writes
    m.apply(KEY, {**JOB, "status": job_status}, Plan(status=plan_status), datetime.now(timezone.utc))
    return client.status_writes > before


def test_replica_counts_after_a_status_write_wait_for_the_batch_period():
    client = FakeClient()
    m = manager(client, status_batch_period=1.0)
    assert written(m, client, status(0, "Created"), status(1, "Created"))  # no write yet: at once
    started = time.monotonic()
    assert not written(m, client, status(1, "Created"), status(2, "Created"))  # held
    assert not written(m, client, status(1, "Created"), status(3, "Created"))
    assert m.queue.get(timeout=0.5) is None
    assert m.queue.get(timeout=5.0) == KEY  # reconciled again when the period is over
    assert time.monotonic() - started >= 0.9
    assert len(m.queue) == 0  # the held writes became one reconcile


def test_a_transition_is_written_at_once_even_within_the_period():
    client = FakeClient()
    m = manager(client, status_batch_period=60.0)
    assert written(m, client, status(0, "Created"), status(1, "Created"))
    assert written(m, client, status(1, "Created"), status(2, "Created", "Running"))


def test_a_zero_batch_period_writes_every_status():
    client = FakeClient()
    m = manager(client, status_batch_period=0.0)
    assert written(m, client, status(0, "Created"), status(1, "Created"))
    assert written(m, client, status(1, "Created"), status(2, "Created"))


def count_status_writes(manager: Manager) -> list[float]:
    writes: list[float] = []
    replace = manager.client.replace

    def counting(resource, obj, subresource=None):
        if subresource == "status":
            writes.append(time.monotonic())
        return replace(resource, obj, subresource)

    manager.client.replace = counting  # type: ignore[method-assign]
    return writes


def test_a_large_job_costs_few_status_writes_against_the_api_server(kube, start_manager, jobs):
    workers = 40
    expected_replicas["batched"] = workers + 1
    manager = start_manager(status_batch_period=1.0)
    writes = count_status_writes(manager)
    driver = PodPhaseDriver(kube, "default", master_succeeds_when_all_run).start()
    try:
        started = time.monotonic()
        kube.create(PYTORCHJOBS, pytorchjob("batched", workers=workers, restart="OnFailure", uid=None))
        jobs.wait(lambda: any(c["type"] == "Succeeded" for c in ((jobs.get("batched") or {}).get("status") or {}).get("conditions") or ()),
                  timeout=120, what="job Succeeded")
        elapsed = time.monotonic() - started
    finally:
        driver.stop()
    # 41 pods going Pending -> Running cost a status write per burst of pod changes; batched,
    # replica counts are written about once per second, plus the transitions (Created,
    # Running, Succeeded).
    assert len(writes) <= elapsed / 1.0 + 4, (len(writes), elapsed)
