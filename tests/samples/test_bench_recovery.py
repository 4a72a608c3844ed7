"""The recovery benchmark's bookkeeping: reading the training log and deciding when a phase ends.

The timings themselves are the benchmark's business (docs/benchmarks.md); these tests pin
the rules that turn log lines into those timings, so a number can't come from the wrong line.
"""

from __future__ import annotations

import itertools
import threading

import pytest


def line(bench, at, pod, text):
    return bench.Line.parse(at, pod, text)


def test_training_lines_are_parsed_and_other_output_is_ignored(bench):
    parsed = line(bench, 1.5, "a", "[step] step=3 loss=0.5 rank=1 world_size=2 restart=0")
    assert (parsed.at, parsed.pod, parsed.event) == (1.5, "a", "step")
    assert parsed.fields == {"step": "3", "loss": "0.5", "rank": "1", "world_size": "2", "restart": "0"}
    assert line(bench, 0, "a", "W1122 10:19:32 api.py:1028] Sending process 1 closing signal") is None
    assert line(bench, 0, "a", "") is None


def test_a_restart_counts_only_steps_of_workers_started_after_the_kill(bench):
    match = bench.trains(2, after=10.0, restarted=True)
    old_start = line(bench, 5.0, "a", "[start] RANK=0 WORLD_SIZE=2 pid=1")
    late_old_step = line(bench, 10.2, "a", "[step] step=9 world_size=2")
    assert not match(late_old_step, [old_start])
    new_start = line(bench, 11.0, "a", "[start] RANK=0 WORLD_SIZE=2 pid=2")
    assert match(line(bench, 12.0, "a", "[step] step=9 world_size=2"), [old_start, new_start])
    # ... and only from a pod whose own worker restarted.
    assert not match(line(bench, 12.0, "b", "[step] step=9 world_size=2"), [old_start, new_start])


def test_world_size_and_pod_filters(bench):
    start = line(bench, 0.0, "b", "[start] RANK=0 WORLD_SIZE=1 pid=3")
    step = line(bench, 1.0, "b", "[step] step=1 world_size=1")
    assert bench.trains(1, {"b"})(step, [start])
    assert not bench.trains(1, {"a"})(step, [start])
    assert not bench.trains(2)(step, [start])


def test_rank0_pod_follows_the_latest_start_of_each_pod(bench):
    log = bench.LogBook()
    for at, pod, rank in [(0, "a", 0), (0, "b", 1), (5, "a", 1), (5, "b", 0)]:
        log.add(line(bench, at, pod, f"[start] RANK={rank} WORLD_SIZE=2 pid={at}"))
    assert bench.rank0_pod(log) == "b"


def test_wait_for_wakes_on_the_matching_line(bench):
    log = bench.LogBook()
    log.add(line(bench, 0.0, "a", "[step] step=1 world_size=1"))
    feeder = threading.Thread(target=lambda: [log.add(line(bench, t, "a", f"[step] step={t} world_size=2")) for t in (2, 3)])
    feeder.start()
    found = log.wait_for(bench.trains(2), timeout=10)
    feeder.join()
    assert found.fields["step"] == "2"


def test_wait_for_gives_up_at_the_timeout(bench):
    log = bench.LogBook()
    with pytest.raises(TimeoutError):
        log.wait_for(bench.trains(2), timeout=0.05)


def test_summary_is_median_with_range(bench):
    assert bench.summarise([[1.0, 10.0], [3.0, 30.0], [2.0, 20.0]]) == ["2.00 (1.00–3.00)", "20.00 (10.00–30.00)"]


# --- the issue-13 fault phases: milestones from watch events and log lines -----------------------


def observer(bench):
    from kubernetes import client

    from trainctl.launch.job_kinds import kind_of

    return bench.TimedObserver(client.ApiClient(), kind_of({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}),
                               "job")


def pod_obj(uid, *, node=None, state=None, last=None, restarts=0, deleting=False):
    status = {"name": "pytorch", "restartCount": restarts, "state": state or {"waiting": {}}}
    if last:
        status["lastState"] = last
    meta = {"name": "job-worker-0", "uid": uid, "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T00:00:00Z"
    return {"metadata": meta, "spec": {"containers": [{"name": "pytorch"}], **({"nodeName": node} if node else {})},
            "status": {"containerStatuses": [status]}}


def test_pod_milestones_keep_the_time_they_were_first_seen(bench, monkeypatch):
    run = observer(bench)
    clock = itertools.count(1.0)  # every reading of the clock is a second later
    monkeypatch.setattr(bench.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(run, "_follow_logs", lambda *_: None)  # no API server to stream logs from
    run._on_pod("ADDED", pod_obj("u1"))
    run._on_pod("MODIFIED", pod_obj("u1", node="n1"))
    run._on_pod("MODIFIED", pod_obj("u1", node="n1", state={"running": {}}))
    run._on_pod("MODIFIED", pod_obj("u1", node="n1", state={"running": {}}, restarts=1,
                                    last={"terminated": {"reason": "OOMKilled"}}))
    run._on_pod("DELETED", pod_obj("u1", node="n1", deleting=True))
    assert run.seen[("u1", "bound")] < run.seen[("u1", "running/0")] < run.seen[("u1", "terminated/0")]
    assert run.seen[("u1", "running/1")] == run.seen[("u1", "terminated/0")]
    assert run.reasons == {("u1", 0): "OOMKilled"}
    assert run.seen[("u1", "deleting")] == run.seen[("u1", "deleted")]
    assert ("u1", "running/0") in run.seen and ("u1", "terminated/1") not in run.seen


def logline(pod, text, at, uid="new"):
    from tests.support.observer import LogLine

    return LogLine(pod, text, at, uid, 0)


def test_a_recovery_is_timed_from_the_fault_through_each_milestone(bench):
    run = observer(bench)
    run.first_seen["new"] = 12.0
    run.seen.update({("old", "deleting"): 11.5, ("new", "bound"): 12.5, ("new", "running/0"): 13.0})
    run.lines.extend([
        logline("w0", "[step] step=5 world_size=2", 9.0, uid="old"),  # before the fault
        logline("w0", "[start] RANK=1 WORLD_SIZE=2 MASTER_PORT=1 pid=7", 16.0),
        logline("w0", "[resume] step=20 world_size=2", 18.0),
        logline("w0", "[step] step=21 world_size=2", 19.0),
    ])
    marks = bench._recovery(run, 10.0, "w0", 10.0, 2, uid="new", detected=11.0, lost_uid="old")
    assert marks == {"detection": 1.0, "deletion": 1.5, "created": 2.0, "scheduling": 2.5, "start": 3.0,
                     "worker start": 6.0, "rendezvous": 8.0, "first step": 9.0}
    assert list(marks) == [m for m in bench.MILESTONES if m in marks]


def test_two_processes_claiming_one_rank_of_a_round_are_duplicates(bench):
    run = observer(bench)
    run.lines.extend([logline("a", "[start] RANK=0 WORLD_SIZE=2 MASTER_PORT=5 pid=1", 1.0),
                      logline("b", "[start] RANK=1 WORLD_SIZE=2 MASTER_PORT=5 pid=2", 1.0),
                      logline("b", "[start] RANK=0 WORLD_SIZE=1 MASTER_PORT=6 pid=3", 2.0)])
    assert run.duplicate_ranks() == {}
    run.lines.append(logline("ghost", "[start] RANK=1 WORLD_SIZE=2 MASTER_PORT=5 pid=4", 3.0))
    assert run.duplicate_ranks() == {"5/2": [0, 1, 1]}


def test_the_fault_tables_show_medians_goals_and_the_breakdown(bench, capsys):
    outcomes = [bench.Outcome({"all workers train again": t}, {"worker-0": {"worker start": t - 2, "first step": t}}, {})
                for t in (4.0, 12.0, 6.0)]
    bench.print_fault_tables({"store-lost": (outcomes, 0)}, 3)
    out = capsys.readouterr().out
    assert "| ≤ 10 s | 6.00 (4.00–12.00) | 3 | met |" in out
    assert "| store-lost: worker-0 |  |  |  |  |  | 4.00 |  | 6.00 (+2.00) |" in out


def test_a_stalled_run_misses_the_goal_and_answers_no(bench, capsys):
    done = bench.Outcome({"survivors train again": 5.0}, {}, {}, verdict=True)
    bench.print_fault_tables({"node-freeze": ([done], 1), "store-lost": ([], 2)}, 2)
    out = capsys.readouterr().out
    assert "job completes, no duplicate rank | yes | 1 of 2 | 1 (1 stalled) | missed |" in out
    assert "all workers train again | ≤ 10 s | – | 0 (2 stalled) | missed |" in out
