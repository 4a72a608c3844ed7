"""The recovery benchmark's bookkeeping: reading the training log and deciding when a phase ends.

The timings themselves are the benchmark's business (docs/benchmarks.md); these tests pin
the rules that turn log lines into those timings, so a number can't come from the wrong line.
"""

from __future__ import annotations

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
