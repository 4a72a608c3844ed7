"""The timeline model: pod history rebuilt from plain API objects, no cluster, no clock."""

from __future__ import annotations

from trainctl.api import constants as c
from trainctl.timeline import model
from trainctl.timeline.live_recorder import TimelineRecorder

from .factories import EPOCH0, at, event, job, pod, running, terminated


def phases(row: model.Row) -> list[tuple[str, float, float]]:
    return [(s.phase, s.start - EPOCH0, s.end - EPOCH0) for s in row.spans]


def marks(row: model.Row) -> list[tuple[str, float, str]]:
    return [(m.kind, m.at - EPOCH0, m.reason) for m in row.marks]


def build(*pods, now: float = 100, **kwargs) -> model.Timeline:
    kwargs.setdefault("job", job())
    return model.build_timeline(pods=pods, now=EPOCH0 + now, container="pytorch", **kwargs)


def test_parse_time_reads_the_apis_timestamps():
    assert model.parse_time("2026-01-02T03:00:00Z") == EPOCH0
    assert model.parse_time(at(1.5)) == EPOCH0 + 1.5
    assert model.parse_time("2026-01-02T03:00:01.123456789Z") == EPOCH0 + 1.123456789
    assert model.parse_time("2026-01-02T04:00:00+01:00") == EPOCH0
    assert model.parse_time("") is None and model.parse_time(None) is None and model.parse_time("soon") is None
    assert model.split_timestamped(f"{at(2)} [step] world_size=2") == (EPOCH0 + 2, "[step] world_size=2")
    assert model.split_timestamped("no stamp here") == (None, "no stamp here")


def test_a_pod_that_ran_and_succeeded_is_pending_running_succeeded():
    (row,) = build(pod("mnist-master-0", replica_type="Master", phase="Succeeded", state=terminated(4, 60))).rows
    assert phases(row) == [("Pending", 1, 4), ("Running", 4, 60), ("Succeeded", 60, 100)]
    assert row.marks == () and row.restarts == 0
    assert row.label == "mnist-master-0 (node-a)"


def test_an_in_place_restart_is_marked_with_its_reason_and_the_back_off_shown():
    worker = pod("mnist-worker-0", state=running(25), last_state=terminated(4, 20, reason="Error", code=1), restarts=1)
    (row,) = build(worker).rows
    assert phases(row) == [("Pending", 1, 4), ("Running", 4, 20), ("Waiting", 20, 25), ("Running", 25, 100)]
    assert marks(row) == [("restart", 20, "Error (exit 1)")]
    assert row.restarts == 1


def test_a_container_waiting_to_restart_ends_in_waiting_with_its_mark():
    # restartCount moves on when the next run starts: waiting after its first run, it is 0.
    worker = pod("mnist-worker-0", state={"waiting": {"reason": "CrashLoopBackOff"}}, last_state=terminated(4, 20, reason="OOMKilled", code=137), restarts=0)
    (row,) = build(worker, now=30).rows
    assert phases(row) == [("Pending", 1, 4), ("Running", 4, 20), ("Waiting", 20, 30)]
    assert marks(row) == [("restart", 20, "OOMKilled (exit 137)")]


def test_a_container_waiting_after_its_second_run_lost_the_first_from_the_record():
    worker = pod("mnist-worker-0", state={"waiting": {"reason": "CrashLoopBackOff"}}, last_state=terminated(30, 40, reason="Error", code=1), restarts=1)
    (row,) = build(worker, now=50).rows
    assert phases(row) == [("Unknown", 1, 30), ("Running", 30, 40), ("Waiting", 40, 50)]


def test_runs_no_snapshot_recorded_are_unknown_not_pending():
    worker = pod("mnist-worker-0", state=running(50), last_state=terminated(30, 40, reason="Error", code=1), restarts=3)
    (row,) = build(worker).rows
    assert phases(row)[0] == ("Unknown", 1, 30)
    assert row.restarts == 3


def test_a_deleting_pod_is_terminating_from_its_deletion_timestamp():
    (row,) = build(pod("mnist-worker-0", state=running(5), deleting=70)).rows
    assert phases(row) == [("Pending", 1, 5), ("Running", 5, 70), ("Terminating", 70, 100)]


def test_a_recreated_pod_is_one_row_across_nodes_with_why_it_was_replaced():
    first = pod("mnist-worker-1", uid="a", created=1, phase="Failed", state=terminated(5, 19, reason="Error", code=137))
    second = pod("mnist-worker-1", uid="b", created=27, node="node-b", state=running(30))
    observations = [
        model.PodObservation(EPOCH0 + 1, "ADDED", pod("mnist-worker-1", uid="a", created=1, phase="Pending")),
        model.PodObservation(EPOCH0 + 20, "MODIFIED", first),
        model.PodObservation(EPOCH0 + 22, "DELETED", first),
    ]
    (row,) = build(second, pod_observations=observations).rows
    assert phases(row) == [("Pending", 1, 5), ("Running", 5, 19), ("Failed", 19, 22), ("Pending", 27, 30), ("Running", 30, 100)]
    assert marks(row) == [("recreated", 27, "Failed: Error (exit 137)")]
    assert row.nodes == ("node-a", "node-b") and row.restarts == 1
    assert row.label == "mnist-worker-1 (node-a → node-b)"


def test_watch_observations_keep_every_restart_reason_the_api_overwrote():
    """lastState only holds the latest exit; a watch saw each one."""
    snapshots = [
        pod("w", state=running(2)),
        pod("w", state=running(12), last_state=terminated(2, 10, reason="Error", code=1), restarts=1),
        pod("w", state=running(22), last_state=terminated(12, 20, reason="OOMKilled", code=137), restarts=2),
    ]
    observations = [model.PodObservation(EPOCH0 + t, "MODIFIED", p) for t, p in zip((3, 11, 21), snapshots, strict=True)]
    (row,) = build(pod_observations=observations, now=30).rows
    assert marks(row) == [("restart", 10, "Error (exit 1)"), ("restart", 20, "OOMKilled (exit 137)")]
    assert [p for p, _, _ in phases(row)] == ["Pending", "Running", "Waiting", "Running", "Waiting", "Running"]


def test_rows_are_grouped_by_replica_type_then_index():
    pods = [pod(f"mnist-worker-{i}", index=i, state=running(3)) for i in (10, 2, 1)]
    pods.append(pod("mnist-master-0", replica_type="Master", state=running(3)))
    assert [r.pod for r in build(*pods).rows] == ["mnist-master-0", "mnist-worker-1", "mnist-worker-2", "mnist-worker-10"]


def test_warning_events_mark_their_pod_and_gone_pods_get_a_row_from_the_operators_events():
    events = [
        event("BackOff", "Back-off restarting failed container", 15, kind="Pod", name="mnist-worker-0", type_="Warning", count=3),
        event("Scheduled", "assigned", 2, kind="Pod", name="mnist-worker-0"),  # a Normal event: no mark
        event("SuccessfulCreatePod", "Created pod: mnist-worker-7", 2),
        event("SuccessfulDeletePod", "Deleted pod: mnist-worker-7", 40),
        event("FailedCreatePod", "quota exceeded", 5, type_="Warning"),
    ]
    timeline = build(pod("mnist-worker-0", state=running(3)), events=events)
    worker0, worker7 = timeline.rows
    assert marks(worker0) == [("event", 15, "BackOff ×3")]
    assert (worker7.pod, worker7.replica_type, worker7.replica_index) == ("mnist-worker-7", "Worker", 7)
    assert phases(worker7) == [("Unknown", 2, 40)]
    assert [(m.kind, m.at - EPOCH0, m.reason) for m in timeline.job_marks] == [("event", 5, "FailedCreatePod")]


def test_a_gone_pod_is_drawn_from_its_own_events_with_its_node_and_phases():
    """An elastic job's rendezvous store: deleted when the job finished, so only Events are left of it."""
    started = event("Started", "Started container rendezvous", 3, kind="Pod", name="mnist-rdzv")
    started["source"] = {"component": "kubelet", "host": "node-b"}
    events = [
        event("SuccessfulCreatePod", "Created pod: mnist-rdzv", 1),
        event("Scheduled", "Successfully assigned default/mnist-rdzv to node-b", 2, kind="Pod", name="mnist-rdzv"),
        started,
        event("SuccessfulDeletePod", "Deleted pod: mnist-rdzv", 60),
        event("Killing", "Stopping container rendezvous", 61, kind="Pod", name="mnist-rdzv"),
    ]
    timeline = build(pod("mnist-worker-0", phase="Succeeded", state=terminated(3, 59)), events=events)
    store = next(row for row in timeline.rows if row.pod == "mnist-rdzv")
    assert phases(store) == [("Pending", 1, 3), ("Running", 3, 60), ("Terminating", 60, 61)]
    assert store.label == "mnist-rdzv (node-b)" and store.replica_type == "rendezvous"
    assert marks(store) == [("deleted", 60, "deleted by the operator"), ("event", 61, "Killing")]


def test_the_rendezvous_store_pod_is_a_group_of_its_own():
    store = pod("mnist-rdzv", state=running(2))
    store["metadata"]["labels"] = {c.LABEL_JOB_NAME: "mnist", c.LABEL_COMPONENT: "rendezvous"}
    worker = pod("mnist-worker-0", state=running(3))
    rows = build(store, worker).rows
    assert [(r.pod, r.replica_type, r.label) for r in rows] == [
        ("mnist-worker-0", "Worker", "mnist-worker-0 (node-a)"),
        ("mnist-rdzv", "rendezvous", "mnist-rdzv (node-a)"),
    ]


def test_conditions_become_changes_and_true_stretches():
    snapshots = [
        job("mnist", ("Created", "True", 0), ("Running", "True", 5)),
        job("mnist", ("Created", "True", 0), ("Running", "False", 20), ("Restarting", "True", 20)),
        job("mnist", ("Created", "True", 0), ("Running", "True", 30), ("Restarting", "False", 30)),
    ]
    # Succeeded flips Running to False and keeps its reason and times (kubeflow's filterOutCondition).
    final = job("mnist", ("Created", "True", 0), ("Running", "False", 30), ("Restarting", "False", 30), ("Succeeded", "True", 60))
    timeline = build(job=final, job_observations=[model.JobObservation(EPOCH0, j) for j in snapshots])
    stretches = [(t, s.start - EPOCH0, s.end - EPOCH0) for t, s in timeline.condition_spans()]
    assert stretches == [("Created", 0, 100), ("Running", 5, 20), ("Restarting", 20, 30), ("Running", 30, 60), ("Succeeded", 60, 100)]
    assert timeline.start == EPOCH0 and timeline.end == EPOCH0 + 100


def test_a_condition_that_becomes_true_ends_the_ones_it_replaces():
    """Kubeflow removes Restarting when the job runs again; no snapshot need show it False."""
    snapshots = [
        job("mnist", ("Created", "True", 0), ("Running", "True", 5)),
        job("mnist", ("Created", "True", 0), ("Running", "False", 20), ("Restarting", "True", 20)),
        job("mnist", ("Created", "True", 0), ("Running", "True", 30)),
        job("mnist", ("Created", "True", 0), ("Running", "True", 30), ("Failed", "True", 50)),
    ]
    timeline = build(job=snapshots[-1], job_observations=[model.JobObservation(EPOCH0, j) for j in snapshots])
    stretches = [(t, s.start - EPOCH0, s.end - EPOCH0) for t, s in timeline.condition_spans()]
    assert stretches == [("Created", 0, 100), ("Running", 5, 20), ("Restarting", 20, 30), ("Running", 30, 50), ("Failed", 50, 100)]


def test_replica_types_are_spelled_as_in_the_spec_whatever_the_labels_case():
    (row,) = build(pod("mnist-worker-3", index=3, state=running(2))).rows
    assert (row.replica_type, row.replica_index) == ("Worker", 3)
    assert pod("x")["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"


def test_world_size_is_read_from_the_sample_script_and_torchrun_and_kept_only_when_it_changes():
    lines = [
        model.LogLine("m", EPOCH0 + 5, "[start] RANK=0 WORLD_SIZE=2 MASTER_ADDR=x"),
        model.LogLine("m", EPOCH0 + 6, "[step] step=1 loss=0.5 rank=0 world_size=2 restart=0"),
        model.LogLine("w", EPOCH0 + 20, "[resume] step=4 saved_world_size=2 rank=0 world_size=3"),
        model.LogLine("w", EPOCH0 + 30, "Rendezvous complete for workers. Result: restart_count=1 group_world_size=1 global_world_sizes=[1]"),
        model.LogLine("w", EPOCH0 + 31, "[fresh] reason=previous-run-finished saved_step=60"),
    ]
    assert [(p.at - EPOCH0, p.size, p.source) for p in model.world_size_series(lines)] == [(5, 2, "m"), (20, 3, "w"), (30, 1, "w")]


def test_the_recorder_builds_the_timeline_from_what_the_watches_delivered():
    clock = iter([EPOCH0 + t for t in (0, 1, 4, 6, 60, 61)]).__next__
    recorder = TimelineRecorder(container="pytorch", clock=clock)
    recorder.job(job("mnist", ("Created", "True", 0)))  # t=0
    recorder.pod("ADDED", pod("mnist-master-0", replica_type="Master", phase="Pending"))  # t=1
    recorder.pod("MODIFIED", pod("mnist-master-0", replica_type="Master", state=running(3)))  # t=4
    recorder.log("mnist-master-0", "[start] RANK=0 WORLD_SIZE=1")  # t=6
    recorder.pod("MODIFIED", pod("mnist-master-0", replica_type="Master", phase="Succeeded", state=terminated(3, 58)))  # t=60
    timeline = recorder.timeline()  # now = t=61
    (row,) = timeline.rows
    assert phases(row) == [("Pending", 1, 3), ("Running", 3, 58), ("Succeeded", 58, 61)]
    assert [(w.at - EPOCH0, w.size) for w in timeline.world_size] == [(6, 1)]
    assert timeline.title == "PyTorchJob default/mnist"


def test_a_finished_job_still_shows_when_it_ran_though_its_running_condition_is_false():
    """The terminal condition flips Running to False but keeps the time it became True."""
    final = job("mnist", ("Created", "True", 0), ("Running", "False", 5), ("Succeeded", "True", 60))
    running_then = job("mnist", ("Created", "True", 0), ("Running", "True", 5))
    for observed in ([], [model.JobObservation(EPOCH0 + 5, running_then)]):  # trainctl timeline; run --timeline
        timeline = build(job=final, job_observations=observed)
        stretches = [(t, s.start - EPOCH0, s.end - EPOCH0) for t, s in timeline.condition_spans()]
        assert stretches == [("Created", 0, 100), ("Running", 5, 60), ("Succeeded", 60, 100)]


def test_a_running_condition_set_false_by_suspension_is_not_taken_for_a_run():
    final = job("mnist", ("Created", "True", 0), ("Suspended", "True", 20), ("Failed", "True", 50))
    final["status"]["conditions"].insert(1, {"type": "Running", "status": "False", "reason": "PyTorchJobSuspended", "lastTransitionTime": at(20)})
    stretches = [(t, s.start - EPOCH0, s.end - EPOCH0) for t, s in build(job=final).condition_spans()]
    assert stretches == [("Created", 0, 100), ("Suspended", 20, 100), ("Failed", 50, 100)]


def test_a_job_recreated_under_the_same_name_shows_only_its_own_pods_events_and_marks():
    """An earlier job "mnist" ran from 0 to 50; this one was created at 100 and owns two pods."""
    earlier = "earlier-uid"
    new = job("mnist", ("Created", "True", 100), uid="job-uid", created=100)
    pods = [
        pod("mnist-master-0", replica_type="Master", created=101, state=running(104)),
        pod("mnist-worker-0", created=101, state=running(105)),
        # The earlier job's worker, still terminating; same labels, same name scheme.
        pod("mnist-worker-1", index=1, uid="old-w1", owner=earlier, created=2, state=running(4), deleting=99),
    ]
    events = [
        event("SuccessfulCreatePod", "Created pod: mnist-worker-0", 1, uid=earlier),
        event("SuccessfulCreatePod", "Created pod: mnist-worker-2", 1, uid=earlier),
        event("FailedCreatePod", "quota exceeded", 3, uid=earlier, type_="Warning"),
        event("SuccessfulDeletePod", "Deleted pod: mnist-worker-0", 50, uid=earlier),
        event("SuccessfulDeletePod", "Deleted pod: mnist-worker-2", 50, uid=earlier),
        event("BackOff", "Back-off restarting failed container", 30, kind="Pod", name="mnist-worker-0", uid="old-w0", type_="Warning"),
        event("Scheduled", "assigned", 2, kind="Pod", name="mnist-worker-1", uid="old-w1"),
        event("Killing", "Stopping container pytorch", 102, kind="Pod", name="mnist-worker-1", uid="old-w1"),
        event("SuccessfulCreatePod", "Created pod: mnist-master-0", 101),
        event("SuccessfulCreatePod", "Created pod: mnist-worker-0", 101),
        event("BackOff", "Back-off restarting failed container", 110, kind="Pod", name="mnist-worker-0", type_="Warning"),
    ]
    timeline = build(*pods, job=new, events=events, now=200)
    assert [r.pod for r in timeline.rows] == ["mnist-master-0", "mnist-worker-0"]
    master, worker = timeline.rows
    assert marks(master) == []
    assert marks(worker) == [("event", 110, "BackOff")]
    assert phases(worker) == [("Pending", 101, 105), ("Running", 105, 200)]
    assert timeline.start == EPOCH0 + 100 and timeline.job_marks == ()


def test_a_pod_re_created_within_the_job_keeps_the_events_of_its_earlier_instance():
    """The earlier instance is gone (its uid unknown to a listing), but its Events came after the job's creation."""
    new = job("mnist", uid="job-uid", created=100)
    events = [
        event("Scheduled", "assigned", 101, kind="Pod", name="mnist-worker-0", uid="first-instance"),
        event("BackOff", "Back-off restarting failed container", 120, kind="Pod", name="mnist-worker-0", uid="first-instance", type_="Warning"),
    ]
    (row,) = build(pod("mnist-worker-0", created=130, state=running(131)), job=new, events=events, now=200).rows
    assert marks(row) == [("event", 120, "BackOff")]


def test_the_recorder_ignores_what_belongs_to_an_earlier_job_of_the_same_name():
    clock = iter([EPOCH0 + t for t in (100, 101, 102, 103, 104, 105, 150)]).__next__
    recorder = TimelineRecorder(container="pytorch", clock=clock)
    recorder.job(job("mnist", ("Created", "True", 100), created=100))  # t=100
    leftover = pod("mnist-worker-1", index=1, uid="old-w1", owner="earlier-uid", created=2, state=running(4), deleting=99)
    recorder.pod("MODIFIED", leftover)  # t=101
    recorder.pod("DELETED", leftover)  # t=102
    recorder.job(job("mnist", ("Created", "True", 0), ("Running", "True", 5), uid="earlier-uid"))  # t=103
    recorder.pod("ADDED", pod("mnist-master-0", replica_type="Master", created=104, phase="Pending"))  # t=104
    recorder.pod("MODIFIED", pod("mnist-master-0", replica_type="Master", created=104, state=running(105)))  # t=105
    timeline = recorder.timeline()  # now = t=150
    assert [r.pod for r in timeline.rows] == ["mnist-master-0"]
    assert timeline.start == EPOCH0 + 100
    assert [(t, s.start - EPOCH0) for t, s in timeline.condition_spans()] == [("Created", 100)]


def test_the_node_check_is_drawn_as_its_own_phase_before_training():
    checked = pod("mnist-master-0", replica_type="Master", phase="Succeeded", state=terminated(30, 60))
    checked["status"]["initContainerStatuses"] = [
        {"name": "init-pytorch", "state": terminated(2, 3)},
        {"name": "node-check", "state": terminated(4, 28)},
    ]
    (row,) = build(checked).rows
    assert phases(row) == [("Pending", 1, 4), ("Node check", 4, 28), ("Pending", 28, 30), ("Running", 30, 60),
                           ("Succeeded", 60, 100)]


def test_a_node_check_still_running_reaches_now_and_one_restarted_in_place_spans_both_runs():
    checking = pod("mnist-worker-0", phase="Pending", state=None)
    checking["status"]["initContainerStatuses"] = [{"name": "node-check", "state": running(10),
                                                    "lastState": terminated(4, 8, code=1, reason="Error")}]
    (row,) = build(checking).rows
    assert phases(row) == [("Pending", 1, 4), ("Node check", 4, 100)]
