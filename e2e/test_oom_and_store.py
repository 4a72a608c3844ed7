"""Faults beyond a killed process, with real torch: a lost rendezvous store.

The store pod trainctl hosts for an elastic job (``<job>-rdzv``), force-deleted
mid-training, costs each worker at most one restart, and the job finishes at WORLD_SIZE=2
with no duplicate rank. test_pytorch_elastic.py covers killed worker processes and pods,
and scaling.
"""

from __future__ import annotations

import time

import pytest

from tests.support.cluster import E2E
from tests.support.conditions import condition
from tests.support.observer import LogLine
from tests.support.pods import container_status
from tests.support.samples import load_sample, set_arg

pytestmark = pytest.mark.e2e

STORE_JOB = "pytorch-elastic"
RECOVERY_BOUND = 60.0  # seconds: the workers train again after the store pod is lost


def _step(pod: str, world_size: int):
    def match(line: LogLine) -> bool:
        return line.pod == pod and line.event == "step" and line.int("world_size") == world_size
    return match


def test_losing_the_rendezvous_store_pod_costs_each_worker_at_most_one_restart(e2e: E2E) -> None:
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", "300")
    workers = [f"{STORE_JOB}-worker-0", f"{STORE_JOB}-worker-1"]
    store = f"{STORE_JOB}-rdzv"
    with e2e.run(job) as run:
        for worker in workers:
            run.wait_line(f"{worker} at step 25 with world_size=2",
                          lambda ln, w=worker: _step(w, 2)(ln) and ln.int("step") >= 25, 180)
        store_uid = run.wait_for("the store pod", lambda: run.pods.get(store), 10)["metadata"]["uid"]
        worker_uids = {w: run.uids(w) for w in workers}
        lost = time.monotonic()
        e2e.kubectl("delete", "pod", store, "--force", "--grace-period=0")

        run.wait_for("a new store pod", lambda: [u for u in run.uids(store) if u != store_uid], 60)
        for worker in workers:
            again = run.wait_line(f"{worker} training again at world_size=2",
                                  lambda ln, w=worker: _step(w, 2)(ln), RECOVERY_BOUND, since=lost + 5)
            print(f"\n[e2e] store pod lost -> {worker} trains at world_size=2: {again.at - lost:.1f}s")
        finished = run.wait_succeeded(timeout=300)

        assert condition(finished, "Succeeded")
        for worker in workers:
            starts = run.events("start", pod=worker, since=lost)
            assert len(starts) <= 1, f"{worker} restarted {len(starts)} times after the store was lost\n{run.dump()}"
            assert run.uids(worker) == worker_uids[worker], f"{worker} was not recreated\n{run.dump()}"
            assert container_status(run.pods[worker]).get("restartCount", 0) <= 1, run.dump()
        done = run.events("done")
        assert {ln.pod for ln in done} == set(workers) and {ln.int("world_size") for ln in done} == {2}, run.dump()
        ranks = [ln.int("rank") for ln in done if "rank" in ln.fields]
        assert len(ranks) == len(set(ranks)), f"duplicate ranks {ranks}"
