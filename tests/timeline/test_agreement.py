"""``trainctl run --timeline`` and ``trainctl timeline`` tell one pod's story alike.

The recorder builds a row from every snapshot a watch delivered; ``trainctl timeline``
from the one pod the API holds afterwards. A pod's ``state`` and ``lastState`` keep its last two
runs, so while it has run at most twice (and is not waiting to run a third time) the two
hold the same runs and must draw the same phases, marks and restarts; after that the rebuilt
one lacks the older runs (Unknown) but must agree on the restarts and on how the pod ended.

The snapshots are written as the embedded kubelet writes them: a container's end is
reported before the pod's phase, so a watch sees a run that ended for good while the pod is
still Running, and a launcher that stops watching when the job finished may see nothing
after it.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from trainctl.timeline import model
from trainctl.timeline.live_recorder import TimelineRecorder

from .factories import EPOCH0, job, pod, running, terminated

NOW = 200.0


def kubelet_snapshots(policy: str, codes: tuple[int, ...]) -> list[tuple[float, dict[str, Any]]]:
    """(seconds, pod) for each status write of one pod whose runs exit with ``codes``."""
    def snapshot(phase: str, state: dict[str, Any] | None = None, last: dict[str, Any] | None = None, restarts: int = 0) -> dict[str, Any]:
        return pod("mnist-worker-0", created=1, phase=phase, state=state, last_state=last, restarts=restarts, restart_policy=policy)

    written = [(1.0, snapshot("Pending"))]
    at, last = 2.0, None
    for run, code in enumerate(codes):
        started, finished = at, at + 10
        ended = terminated(started, finished, reason="Completed" if code == 0 else "Error", code=code)
        written.append((started + 0.1, snapshot("Running", running(started), last, run)))
        written.append((finished + 0.1, snapshot("Running", ended, last, run)))  # the container's end first
        if run + 1 < len(codes):
            last = ended
            written.append((finished + 0.2, snapshot("Running", {"waiting": {"reason": "CrashLoopBackOff"}}, last, run)))
            at = finished + 5
        else:
            final = "Succeeded" if code == 0 else "Failed"
            if policy != "Always" and not (policy == "OnFailure" and code != 0):
                written.append((finished + 0.3, snapshot(final, ended, last, run)))
    return written


def histories() -> list[tuple[str, tuple[int, ...]]]:
    """Every run sequence of up to three runs that a restart policy allows."""
    found = []
    for policy, runs in itertools.product(("Always", "OnFailure", "Never"), (1, 2, 3)):
        for codes in itertools.product((0, 1), repeat=runs):
            restarted = codes[:-1]
            if policy == "Never" and restarted:
                continue
            if policy == "OnFailure" and any(code == 0 for code in restarted):
                continue
            found.append((policy, codes))
    return found


def recorded_and_rebuilt(written: list[tuple[float, dict[str, Any]]]) -> tuple[model.Row, model.Row]:
    times = iter([EPOCH0 + t for t, _ in written])
    recorder = TimelineRecorder(container="pytorch", clock=lambda: next(times))
    recorder.job(job("mnist"))  # the job is taken at the time its first snapshot came
    times = iter([EPOCH0 + t for t, _ in written])
    for _, snapshot in written:
        recorder.pod("MODIFIED", snapshot)
    (recorded,) = recorder.timeline(now=EPOCH0 + NOW).rows
    (rebuilt,) = model.build_timeline(job=job("mnist"), pods=[written[-1][1]], now=EPOCH0 + NOW, container="pytorch").rows
    return recorded, rebuilt


def all_runs_on_record(pod: dict[str, Any]) -> bool:
    """Whether the pod's ``state`` and ``lastState`` hold every run (``restartCount`` + 1 of them)."""
    statuses = pod["status"].get("containerStatuses") or [{}]
    kept = sum(1 for key in ("lastState", "state") if {"running", "terminated"} & set(statuses[0].get(key) or {}))
    return not kept or kept == statuses[0].get("restartCount", 0) + 1


def runs_again(pod: dict[str, Any], policy: str) -> int:
    """1 if the pod's container ended a run and will start another (back-off, or a restart policy that restarts it)."""
    state = (pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}
    if "waiting" in state:
        return 1
    code = (state.get("terminated") or {}).get("exitCode")
    return int(code is not None and (policy == "Always" or (policy == "OnFailure" and code != 0)))


def story(row: model.Row) -> tuple[list[tuple[str, float, float]], list[tuple[str, float, str]], int]:
    return ([(s.phase, s.start - EPOCH0, s.end - EPOCH0) for s in row.spans], [(m.kind, m.at - EPOCH0, m.reason) for m in row.marks], row.restarts)


@pytest.mark.parametrize(("policy", "codes"), histories())
def test_the_recorder_and_the_rebuilt_timeline_agree_on_every_pod_the_watch_could_have_seen_last(policy, codes):
    written = kubelet_snapshots(policy, codes)
    for seen in range(1, len(written) + 1):  # the watch may stop after any write
        recorded, rebuilt = recorded_and_rebuilt(written[:seen])
        last = written[seen - 1][1]
        # A restart mark for each restart, and one for the run that ended if the kubelet runs it again.
        assert sum(1 for m in recorded.marks if m.kind == "restart") == recorded.restarts + runs_again(last, policy), (seen, last["status"])
        if all_runs_on_record(last):
            assert story(recorded) == story(rebuilt), (seen, last["status"])
        else:
            assert recorded.restarts == rebuilt.restarts
            assert story(recorded)[0][-1][0] == story(rebuilt)[0][-1][0]  # how it ended (or is)
            assert model.UNKNOWN not in {s.phase for s in recorded.spans}  # the recorder saw every run


def test_a_worker_that_ran_once_and_succeeded_has_no_restart_and_no_waiting():
    """What ``run --timeline`` drew for an elastic job's worker: "Completed (exit 0)" as a restart, then Waiting."""
    written = kubelet_snapshots("OnFailure", (0,))
    for seen in (len(written) - 1, len(written)):  # the launcher stopped watching before the phase came, or after
        recorded, _ = recorded_and_rebuilt(written[:seen])
        phases, marks, restarts = story(recorded)
        assert phases == [("Pending", 1, 2), ("Running", 2, 12), ("Succeeded", 12, NOW)]
        assert marks == [] and restarts == 0


def test_the_pods_listed_at_the_end_finish_the_rows_a_watch_stopped_before():
    """``run --timeline`` lists the job's pods when it ends: a pod's last writes the watch missed still count."""
    written = kubelet_snapshots("Never", (1,))
    times = iter([EPOCH0 + t for t, _ in written[:2]])
    recorder = TimelineRecorder(container="pytorch", clock=lambda: next(times))
    recorder.job(job("mnist"))
    for _, snapshot in written[1:2]:  # the watch saw the run start, nothing after
        recorder.pod("MODIFIED", snapshot)
    (row,) = recorder.timeline(pods=[written[-1][1]], now=EPOCH0 + NOW).rows
    _, rebuilt = recorded_and_rebuilt(written)
    assert story(row) == story(rebuilt)
    assert story(row)[0][-1] == ("Failed", 12, NOW)
