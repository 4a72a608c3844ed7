"""Two controllers with leader election: one acts, the other takes over when the lease lapses."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from trainctl.kube.client import ApiError
from trainctl.kube.restmapper import LEASES, PYTORCHJOBS

from tests.support.conditions import condition
from tests.support.controller import expected_replicas, master_succeeds_when_all_run
from tests.support.jobs import pytorchjob
from tests.support.net import free_port
from tests.support.podphase import PodPhaseDriver

LEASE = ("default", "trainctl-controller")
FAST_LEASE = ("--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.3", "--leader-elect-namespace", "default")


def _metrics(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return {}
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


def _holder(kube) -> str:
    lease = kube.get_or_none(LEASES, *LEASE)
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def test_one_leader_acts_and_a_standby_takes_over(kube, controller_process, jobs):
    ports = [free_port(), free_port()]
    a, b = (
        controller_process(
            "--leader-elect", *FAST_LEASE, "--metrics-port", str(p), "--health-port", "0", "--bind-address", "127.0.0.1"
        ).start()
        for p in ports
    )
    procs = {ports[0]: a, ports[1]: b}
    driver = PodPhaseDriver(kube, "default", master_succeeds_when_all_run).start()
    try:
        jobs.wait(lambda: _holder(kube), timeout=30, what="a lease holder")
        expected_replicas["elected-1"] = 2
        kube.create(PYTORCHJOBS, pytorchjob("elected-1", workers=1, restart="OnFailure", uid=None))
        jobs.wait(lambda: condition(jobs.get("elected-1"), "Succeeded"), timeout=60, what="elected-1 Succeeded")

        leaders = {p: _metrics(p).get("trainctl_leader", 0.0) for p in ports}
        assert sorted(leaders.values()) == [0.0, 1.0], leaders
        leader_port = max(leaders, key=leaders.get)
        standby_port = min(leaders, key=leaders.get)
        assert _metrics(leader_port).get("trainctl_reconcile_duration_seconds_count", 0) > 0
        assert _metrics(standby_port).get("trainctl_reconcile_duration_seconds_count", 0) == 0, "the standby acted"

        # The leader dies without a word: the standby must wait out the lease, then lead.
        first_holder = _holder(kube)
        killed_at = time.monotonic()
        procs[leader_port].kill()
        jobs.wait(lambda: _holder(kube) not in ("", first_holder), timeout=30, what="a new holder")
        assert time.monotonic() - killed_at >= 2.0, "took over before the lease expired"
        expected_replicas["elected-2"] = 2
        kube.create(PYTORCHJOBS, pytorchjob("elected-2", workers=1, restart="OnFailure", uid=None))
        jobs.wait(lambda: condition(jobs.get("elected-2"), "Succeeded"), timeout=60, what="elected-2 Succeeded")
        assert _metrics(standby_port).get("trainctl_leader") == 1.0

        # SIGTERM: in-flight work finishes, the lease is released at once.
        assert procs[standby_port].terminate() == 0
        assert _holder(kube) == ""
    finally:
        driver.stop()


def test_a_leader_whose_lease_is_taken_steps_down(kube):
    """After a partition another replica may hold the Lease: the old leader must notice
    within its renew deadline and stop, never act alongside the new one."""
    import threading

    from trainctl.kube.leader import LeaderElector

    lost = threading.Event()
    elector = LeaderElector(
        kube, "default", "stolen", "first", lease_duration=2.0, renew_deadline=1.0, retry_period=0.1, on_lost=lost.set
    )
    elector.start()
    try:
        assert elector.is_leader.wait(10)
        lease = kube.get(LEASES, "default", "stolen")
        assert lease["spec"]["holderIdentity"] == "first"
        assert lease["spec"]["leaseTransitions"] == 0
        while True:  # another replica takes over (it may race with a renewal: retry)
            lease = kube.get(LEASES, "default", "stolen")
            lease["spec"]["holderIdentity"] = "second"
            lease["spec"]["leaseDurationSeconds"] = 30
            try:
                kube.replace(LEASES, lease)
                break
            except ApiError as exc:
                assert exc.code == 409
        assert lost.wait(10), "the old leader did not step down"
        assert not elector.is_leader.is_set()
        assert kube.get(LEASES, "default", "stolen")["spec"]["holderIdentity"] == "second"
    finally:
        elector.stop()
