"""The work queue's promises: dedupe, one worker per key, back-off, delays that fire."""

from __future__ import annotations

import threading
import time

from trainctl.kube.workqueue import WorkQueue


def test_a_key_is_queued_once_however_often_it_is_added():
    q: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert q.get(timeout=0) == "a"
    assert q.get(timeout=0) == "b"
    assert q.get(timeout=0) is None


def test_a_key_in_progress_is_not_handed_to_a_second_worker_and_is_requeued_on_done():
    q: WorkQueue[str] = WorkQueue()
    q.add("job")
    assert q.get(timeout=0) == "job"
    q.add("job")  # an event arrives while a worker holds the key
    assert q.get(timeout=0.05) is None
    q.done("job")
    assert q.get(timeout=0) == "job"


def test_add_after_fires_at_the_deadline_and_the_earlier_deadline_wins():
    q: WorkQueue[str] = WorkQueue()
    start = time.monotonic()
    q.add_after("late", 2.0)
    q.add_after("late", 0.1)
    assert q.get(timeout=5) == "late"
    elapsed = time.monotonic() - start
    assert elapsed >= 0.09  # not before its deadline
    assert elapsed < 1.5  # the earlier deadline won (a generous margin below the later one)
    q.done("late")
    assert q.get(timeout=2.3 - elapsed) is None  # the superseded deadline does not fire again


def test_rate_limited_requeue_backs_off_exponentially_and_forget_resets():
    q: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.05)
    delays = [q.add_rate_limited("k") for _ in range(5)]
    assert delays == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert q.failures("k") == 5
    q.forget("k")
    assert q.failures("k") == 0
    assert q.add_rate_limited("k") == 0.01


def test_a_waiting_worker_wakes_on_add():
    q: WorkQueue[str] = WorkQueue()
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(q.get(timeout=5)))
    worker.start()
    q.add("x")
    worker.join(5)
    assert got == ["x"]


def test_shut_down_releases_waiting_workers_and_refuses_new_keys():
    q: WorkQueue[str] = WorkQueue()
    got: list[object] = []
    workers = [threading.Thread(target=lambda: got.append(q.get())) for _ in range(2)]
    for w in workers:
        w.start()
    q.shut_down()
    for w in workers:
        w.join(5)
    assert got == [None, None]
    q.add("y")
    assert len(q) == 0


def test_depth_is_reported():
    depths: list[int] = []
    q: WorkQueue[str] = WorkQueue(on_depth=depths.append)
    q.add("a")
    q.add("b")
    q.get(timeout=0)
    assert depths == [1, 2, 1]


def test_each_key_reports_how_long_it_waited_in_the_queue():
    waits: list[float] = []
    q: WorkQueue[str] = WorkQueue(on_wait=waits.append)
    q.add("a")
    time.sleep(0.2)
    assert q.get(timeout=0) == "a"
    q.add("a")  # again while held: it waits from done() on, not from now
    time.sleep(0.5)
    q.done("a")
    assert q.get(timeout=0) == "a"
    q.add_after("b", 0.5)  # a delayed key waits from when it is due
    assert q.get(timeout=2) == "b"
    assert len(waits) == 3
    assert waits[0] >= 0.2
    assert waits[1] < 0.5
    assert waits[2] < 0.5
