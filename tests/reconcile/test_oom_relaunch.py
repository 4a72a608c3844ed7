"""Out-of-memory relaunch: an OOMKilled replica comes back with more memory when the job opts in."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from trainctl.controller.reconcile import ReconcileConfig, oom
from trainctl.controller.reconcile.plan import delete_events

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at, conditions


def job(restart: str = "OnFailure", factor: Optional[str] = "1.5", maximum: Optional[str] = "1Gi",
        memory: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    out = pytorchjob(master=False, workers=2, restart=restart, **spec)
    resources = {"limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}} if memory is None else memory
    out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = resources
    annotations = {}
    if factor is not None:
        annotations["trainctl.io/oom-memory-factor"] = factor
    if maximum is not None:
        annotations["trainctl.io/oom-memory-max"] = maximum
    out["metadata"]["annotations"] = annotations
    return out


def killed(cluster: Cluster, name: str, *, in_place: bool) -> None:
    """The kubelet's report of an OOM kill: restarted in place (lastState) or the pod Failed."""
    terminated = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    if in_place:
        cs = {"name": "pytorch", "state": {"running": {}}, "lastState": terminated, "restartCount": 1}
        cluster.set_phase(name, "Running", containerStatuses=[cs])
    else:
        cluster.set_phase(name, "Failed", containerStatuses=[{"name": "pytorch", "state": terminated, "restartCount": 0}])


def started(spec: dict[str, Any], config: Optional[ReconcileConfig] = None) -> Cluster:
    cluster = Cluster(spec, config)
    cluster.step(at(0))
    cluster.step(at(0))
    cluster.set_all("Running")
    cluster.step(at(1))
    return cluster


def memory_of(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize(("restart", "in_place"), [("OnFailure", True), ("Always", True), ("Never", False), ("ExitCode", False),
                                                   ("OnFailure", False)])
def test_oom_killed_replica_is_relaunched_with_more_memory(restart: str, in_place: bool) -> None:
    cluster = started(job(restart))
    killed(cluster, "mnist-worker-1", in_place=in_place)
    plan = cluster.step(at(5))
    (deleted,) = plan.deletes
    assert deleted.name == "mnist-worker-1" and not deleted.force and deleted.grace_seconds == 1
    assert "OOMKilled at 512Mi" in delete_events(deleted).success.message
    increased = [e for e in plan.events if e.reason == "OOMMemoryIncreased"]
    assert [e.message for e in increased] == [
        "Pod mnist-worker-1 was OOMKilled with memory limit 512Mi: replica Worker-1 is relaunched with 768Mi"]
    assert cluster.job["status"]["restartCount"] == 1
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))
    plan = cluster.step(at(6))
    (pod,) = plan.creates
    assert pod["metadata"]["name"] == "mnist-worker-1"
    assert memory_of(pod) == {"limits": {"memory": "768Mi"}, "requests": {"memory": "384Mi"}}
    assert pod["metadata"]["annotations"]["trainctl.io/oom-memory"] == "512Mi -> 768Mi"
    assert cluster.job["status"]["restartCount"] == 1
    assert cluster.job["status"]["oomMemory"] == {"Worker-1": {"memory": "768Mi", "previous": "512Mi", "relaunches": 1}}
    # The other replica keeps its template's memory.
    assert memory_of(cluster.pods["mnist-worker-0"])["limits"]["memory"] == "512Mi"


def test_the_increase_persists_and_clamps_at_the_maximum_then_the_failure_names_memory() -> None:
    cluster = started(job("Never"))
    for expected in ("768Mi", "1Gi"):
        killed(cluster, "mnist-worker-1", in_place=False)
        cluster.step(at(5))
        cluster.step(at(6))
        assert memory_of(cluster.pods["mnist-worker-1"])["limits"]["memory"] == expected
        cluster.set_phase("mnist-worker-1", "Running")
        cluster.step(at(7))
    assert cluster.pods["mnist-worker-1"]["metadata"]["annotations"]["trainctl.io/oom-memory"] == "768Mi -> 1Gi"
    killed(cluster, "mnist-worker-1", in_place=False)  # at the maximum: the restart policy (Never) decides
    plan = cluster.step(at(8))
    assert plan.deletes == []
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert "replica Worker-1 was OOMKilled at the maximum memory 1Gi (trainctl.io/oom-memory-max)" in failed["message"]
    assert cluster.job["status"]["restartCount"] == 2


def test_at_the_maximum_backoff_limit_fails_the_job_saying_memory_was_the_cause() -> None:
    cluster = started(job("OnFailure", maximum="512Mi", runPolicy={"backoffLimit": 1}))
    killed(cluster, "mnist-worker-0", in_place=True)
    plan = cluster.step(at(5))
    assert not [d for d in plan.deletes if d.name == "mnist-worker-0" and "memory" in (d.cause or "")]
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert "backoff limit" in failed["message"]
    assert failed["message"].endswith("replica Worker-0 was OOMKilled at the maximum memory 512Mi (trainctl.io/oom-memory-max)")


def test_in_place_oom_restarts_before_the_relaunch_do_not_use_up_the_backoff_limit() -> None:
    """OnFailure: the kubelet restarts an OOMKilled container in place with the old limit,
    maybe several times, before the controller replaces the pod. Both workers: the relaunch
    counts one restart each, not the kubelet's restarts on top."""
    cluster = started(job("OnFailure", runPolicy={"backoffLimit": 3}))
    terminated = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    for name in ("mnist-worker-0", "mnist-worker-1"):
        cs = {"name": "pytorch", "state": {"running": {}}, "lastState": terminated, "restartCount": 3}
        cluster.set_phase(name, "Running", containerStatuses=[cs])
    plan = cluster.step(at(5))
    assert sorted(d.name for d in plan.deletes) == ["mnist-worker-0", "mnist-worker-1"]
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))
    assert cluster.job["status"]["restartCount"] == 2


def running(cluster: Cluster, name: str, *, restarts: int, last: str = "OOMKilled", code: int = 137) -> None:
    cs = {"name": "pytorch", "state": {"running": {}}, "restartCount": restarts,
          "lastState": {"terminated": {"exitCode": code, "reason": last}}}
    cluster.set_phase(name, "Running", containerStatuses=[cs])


def test_relaunches_count_as_restarts_but_not_against_the_backoff_limit() -> None:
    """Both workers OOMKilled once: two restarts in status.restartCount, and a backoffLimit
    of 2 is still untouched; a crash after that counts as usual."""
    cluster = started(job("OnFailure", runPolicy={"backoffLimit": 2}))
    for name in ("mnist-worker-0", "mnist-worker-1"):
        killed(cluster, name, in_place=True)
    cluster.step(at(5))
    cluster.step(at(6))
    cluster.set_all("Running")
    cluster.step(at(7))
    status = cluster.job["status"]
    assert status["restartCount"] == 2
    assert {key: entry["relaunches"] for key, entry in status["oomMemory"].items()} == {"Worker-0": 1, "Worker-1": 1}
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(status))
    running(cluster, "mnist-worker-0", restarts=2, last="Error", code=1)
    cluster.step(at(8))
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and "backoff limit" in failed["message"]


def test_an_oom_killed_pod_being_deleted_for_its_relaunch_does_not_count_its_restarts() -> None:
    """The graceful delete takes a while; meanwhile the kubelet may restart the container in
    place again (the old limit, OOMKilled again): the pod is Terminating but still Running."""
    cluster = started(job("OnFailure", runPolicy={"backoffLimit": 2}))
    killed(cluster, "mnist-worker-1", in_place=True)
    plan = cluster.reconcile(at(5))
    assert [d.name for d in plan.deletes] == ["mnist-worker-1"]
    cluster.job["status"] = plan.status
    running(cluster, "mnist-worker-1", restarts=3)
    cluster.pods["mnist-worker-1"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    plan = cluster.step(at(6))
    assert plan.deletes == [] and plan.creates == []
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))
    assert cluster.job["status"]["restartCount"] == 1


def test_without_opt_in_the_reference_behaviour_stays() -> None:
    cluster = started(job("OnFailure", factor=None, maximum=None))
    killed(cluster, "mnist-worker-1", in_place=True)
    plan = cluster.step(at(5))
    assert plan.deletes == [] and not any(e.reason == "OOMMemoryIncreased" for e in plan.events)
    never = started(job("Never", factor=None, maximum=None))
    killed(never, "mnist-worker-1", in_place=False)
    never.step(at(5))
    failed = next(c for c in never.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and "OOMKilled" not in failed["message"]


def test_controller_flags_opt_every_job_in() -> None:
    cluster = started(job("OnFailure", factor=None, maximum=None),
                      ReconcileConfig(oom_memory_factor=2.0, oom_memory_max="800Mi"))
    killed(cluster, "mnist-worker-0", in_place=True)
    cluster.step(at(5))
    plan = cluster.step(at(6))
    assert memory_of(plan.creates[0]) == {"limits": {"memory": "800Mi"}, "requests": {"memory": "400Mi"}}


def test_a_kill_seen_in_two_passes_grows_memory_once() -> None:
    cluster = started(job("OnFailure"))
    killed(cluster, "mnist-worker-1", in_place=True)
    first = cluster.reconcile(at(5))
    cluster.job["status"] = first.status  # the status was written, the delete not yet seen
    second = cluster.reconcile(at(6))
    assert second.status is None or second.status["oomMemory"] == first.status["oomMemory"]
    assert (second.status or first.status)["oomMemory"]["Worker-1"]["memory"] == "768Mi"


def invalid(plan: Any) -> list[str]:
    """The InvalidOOMMemory Warnings of a plan: standing problems, which the shell records once."""
    assert not any(e.reason == "InvalidOOMMemory" for e in plan.events), "a problem is not an event of every pass"
    return [e.message for e in plan.problems if e.reason == "InvalidOOMMemory" and e.type == "Warning"]


@pytest.mark.parametrize("factor", ["inf", "-inf", "nan", "1e308", "0.5", "1", "17", "lots", ""])
def test_a_bad_factor_warns_naming_it_and_without_a_controller_factor_nothing_is_relaunched(factor: str) -> None:
    cluster = started(job("OnFailure", factor=factor))
    killed(cluster, "mnist-worker-1", in_place=True)
    plan = cluster.step(at(5))  # never raises
    assert plan.deletes == [] and not any(e.reason == "OOMMemoryIncreased" for e in plan.events)
    assert invalid(plan) == [
        f"annotation trainctl.io/oom-memory-factor={factor!r} is not a number above 1 and at most 16; "
        "no OOM relaunch (the controller's --oom-memory-factor is not set)"]
    assert invalid(cluster.reconcile(at(6))) == invalid(plan)  # stated again while it holds: the same problem
    assert "oomMemory" not in cluster.job["status"]


def test_a_bad_factor_gives_way_to_the_controllers() -> None:
    cluster = started(job("OnFailure", factor="inf", maximum=None), ReconcileConfig(oom_memory_factor=2.0))
    killed(cluster, "mnist-worker-0", in_place=True)
    plan = cluster.step(at(5))
    assert invalid(plan) == ["annotation trainctl.io/oom-memory-factor='inf' is not a number above 1 and at most 16; "
                             "the controller's --oom-memory-factor 2 applies"]
    assert memory_of(cluster.step(at(6)).creates[0])["limits"]["memory"] == "1Gi"


@pytest.mark.parametrize("maximum", ["-1Gi", "0", "lots", "1e400", "nan", "inf"])
def test_a_bad_maximum_warns_naming_it_and_the_controllers_applies(maximum: str) -> None:
    cluster = started(job("OnFailure", maximum=maximum), ReconcileConfig(oom_memory_max="640Mi"))
    killed(cluster, "mnist-worker-1", in_place=True)
    plan = cluster.step(at(5))
    assert invalid(plan) == [f"annotation trainctl.io/oom-memory-max={maximum!r} is not a positive memory quantity "
                             "(such as 8Gi); the controller's --oom-memory-max 640Mi applies"]
    assert [d.name for d in plan.deletes] == ["mnist-worker-1"]
    assert memory_of(cluster.step(at(6)).creates[0])["limits"]["memory"] == "640Mi"  # 512Mi * 1.5, at most 640Mi


def test_a_bad_maximum_without_a_controller_maximum_leaves_the_largest_node_as_the_bound() -> None:
    cluster = started(job("OnFailure", maximum="-1Gi"))
    cluster.node_memory = oom.parse_memory("700Mi")
    killed(cluster, "mnist-worker-1", in_place=True)
    plan = cluster.step(at(5))
    assert invalid(plan) == ["annotation trainctl.io/oom-memory-max='-1Gi' is not a positive memory quantity "
                             "(such as 8Gi); no maximum but the largest node's memory "
                             "(the controller's --oom-memory-max is not set)"]
    assert memory_of(cluster.step(at(6)).creates[0])["limits"]["memory"] == "700Mi"


def node(name: str, allocatable: Optional[str], capacity: Optional[str] = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if allocatable is not None:
        status["allocatable"] = {"cpu": "4", "memory": allocatable}
    if capacity is not None:
        status["capacity"] = {"cpu": "4", "memory": capacity}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


@pytest.mark.parametrize("restart", ["Never", "OnFailure"])
def test_without_a_maximum_the_ladder_stops_at_the_largest_node_and_the_failure_names_memory(restart: str) -> None:
    cluster = started(job(restart, factor="2", maximum=None, runPolicy={"backoffLimit": 0}))
    cluster.node_memory = oom.largest_node_memory([node("small", "1Gi"), node("big", "1536Mi"), node("new", None)])
    for expected in ("1Gi", "1536Mi"):  # 512Mi * 2, then 2Gi clamped to what the big node can hold
        killed(cluster, "mnist-worker-1", in_place=restart != "Never")
        cluster.step(at(5))
        plan = cluster.step(at(6))
        assert [memory_of(pod)["limits"]["memory"] for pod in plan.creates] == [expected]
        cluster.set_phase("mnist-worker-1", "Running")
        cluster.step(at(7))
    assert cluster.job["status"]["oomMemory"]["Worker-1"] == {"memory": "1536Mi", "previous": "1Gi", "relaunches": 2}
    killed(cluster, "mnist-worker-1", in_place=restart != "Never")  # no node holds more: the restart policy decides
    plan = cluster.step(at(8))
    assert not [d for d in plan.deletes if d.name == "mnist-worker-1" and "memory" in (d.cause or "")]
    assert not any(e.reason == "OOMMemoryIncreased" for e in plan.events)
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["message"].endswith("replica Worker-1 was OOMKilled at 1536Mi and no node can hold more than 1536Mi")


def test_a_replica_killed_above_every_node_gets_no_rung_and_the_failure_says_why() -> None:
    cluster = started(job("Never", factor="1.5", maximum="8Gi", memory={"limits": {"memory": "2Gi"}}))
    cluster.node_memory = oom.largest_node_memory([node("only", "1Gi")])
    killed(cluster, "mnist-worker-0", in_place=False)
    plan = cluster.step(at(5))
    assert not [d for d in plan.deletes if "memory" in (d.cause or "")]
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"].endswith("replica Worker-0 was OOMKilled at 2Gi and no node can hold more than 1Gi")


def test_a_rung_that_the_node_bounds_is_whole_mib_and_fits() -> None:
    cluster = started(job("OnFailure", factor="2", maximum=None))
    cluster.node_memory = oom.largest_node_memory([node("odd", "1048575Ki")])  # 1Gi less 1Ki
    killed(cluster, "mnist-worker-0", in_place=True)
    cluster.step(at(5))
    assert memory_of(cluster.step(at(6)).creates[0]) == {"limits": {"memory": "1023Mi"}, "requests": {"memory": "512Mi"}}


def test_the_largest_node_reads_allocatable_else_capacity() -> None:
    assert oom.largest_node_memory([]) is None
    assert oom.largest_node_memory([node("a", None), node("b", "lots")]) is None
    assert oom.largest_node_memory([node("a", "2Gi", "4Gi"), node("b", None, "3Gi")]) == 3 * 2**30
    assert oom.largest_node_memory([node("a", "-1Gi"), node("b", "1e400"), node("c", "512Mi")]) == 512 * 2**20


@pytest.mark.parametrize("text", ["inf", "nan", "-inf", "1e400", "1e999999999", "sNaN", "lots", None])
def test_a_quantity_that_is_no_memory_size_is_none(text: Optional[str]) -> None:
    assert oom.parse_memory(text) is None


@pytest.mark.parametrize(("size", "text"), [(512 * 2**20, "512Mi"), (2**30, "1Gi"), (1000, "1000")])
def test_format_memory(size: int, text: str) -> None:
    assert oom.format_memory(size) == text
    assert oom.parse_memory(text) == size


@pytest.mark.parametrize(("restart", "in_place", "backoff"), [("Never", False, 6), ("ExitCode", False, 6), ("OnFailure", True, 0)])
def test_an_oom_killed_pod_being_deleted_for_its_relaunch_is_neither_failed_nor_active(
        restart: str, in_place: bool, backoff: int) -> None:
    cluster = started(job(restart, runPolicy={"backoffLimit": backoff}))
    killed(cluster, "mnist-worker-1", in_place=in_place)
    plan = cluster.reconcile(at(5))
    assert [d.name for d in plan.deletes] == ["mnist-worker-1"]
    cluster.job["status"] = plan.status
    cluster.pods["mnist-worker-1"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z"
    cluster.step(at(6))
    status = cluster.job["status"]
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(status)), status["conditions"]
    assert status["replicaStatuses"]["Worker"].get("failed", 0) == 0, status["replicaStatuses"]


def climb_to_the_ceiling(cluster: Cluster, name: str, rungs: list[str]) -> None:
    """``name`` is OOMKilled in place at each rung and relaunched with the next."""
    for expected in rungs:
        killed(cluster, name, in_place=True)
        cluster.step(at(5))
        cluster.step(at(6))
        assert memory_of(cluster.pods[name])["limits"]["memory"] == expected
        cluster.set_phase(name, "Running")
        cluster.step(at(7))


@pytest.mark.parametrize("restart", ["OnFailure", "Always", "ExitCode"])
def test_a_replica_oom_killed_at_the_top_of_its_ladder_ends_the_job_whatever_restarts_it(restart: str) -> None:
    """256Mi, 1Gi, then 2Gi, all a 2Gi node can give: OOMKilled there too, it can never fit.
    Restarted in place at the same memory (no backoffLimit) it would loop for ever, so the
    job fails and says why."""
    cluster = started(job(restart, factor="4", maximum=None, memory={"limits": {"memory": "256Mi"}}))
    cluster.node_memory = 2 * 1024**3  # the largest node: 2Gi
    climb_to_the_ceiling(cluster, "mnist-worker-0", ["1Gi", "2Gi"])
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))

    killed(cluster, "mnist-worker-0", in_place=restart != "ExitCode")
    cluster.step(at(8))
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["message"] == (
        "Job mnist has failed: replica Worker-0 was OOMKilled at 2Gi and no node can hold more than 2Gi, after it "
        "was relaunched with more memory 2 times: it cannot get the memory it needs")
    assert cluster.job["status"]["oomMemory"] == {"Worker-0": {"memory": "2Gi", "previous": "1Gi", "relaunches": 2}}


def test_a_replica_at_its_templates_memory_is_not_given_up_on_at_the_first_oom() -> None:
    """Never relaunched (its template is at the maximum already): an OOM kill is a failure like
    any other, left to the restart policy and backoffLimit."""
    cluster = started(job("OnFailure", maximum="512Mi"))
    killed(cluster, "mnist-worker-0", in_place=True)
    cluster.step(at(5))
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))


def test_a_replica_whose_allocation_is_refused_at_the_top_of_its_ladder_ends_the_job_too() -> None:
    """At the top rung the process may get a refused allocation (MemoryError, exit 1) rather
    than an OOM kill: restarted in place it would loop for ever just the same. Below the top,
    or with a failure that is not about memory, the restart policy decides."""
    cluster = started(job("OnFailure", factor="4", maximum=None, memory={"limits": {"memory": "256Mi"}}))
    cluster.node_memory = 2 * 1024**3
    climb_to_the_ceiling(cluster, "mnist-worker-0", ["1Gi", "2Gi"])
    running(cluster, "mnist-worker-0", restarts=1, last="Error", code=1)
    cluster.step(at(8))
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))

    memory_error = {"exitCode": 1, "reason": "Error",
                    "message": 'File "train.py", line 382, in train\n    ballast = bytearray(n)\nMemoryError\n'}
    cs = {"name": "pytorch", "state": {"running": {}}, "restartCount": 2, "lastState": {"terminated": memory_error}}
    cluster.set_phase("mnist-worker-1", "Running", containerStatuses=[cs])  # not relaunched: its template's memory
    cluster.step(at(9))
    assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"]))
    cluster.set_phase("mnist-worker-0", "Running", containerStatuses=[cs])
    cluster.step(at(10))
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"] == (
        "Job mnist has failed: replica Worker-0 ran out of memory (exit code 1, not OOMKilled) at 2Gi and no node "
        "can hold more than 2Gi, after it was relaunched with more memory 2 times: it cannot get the memory it needs")
