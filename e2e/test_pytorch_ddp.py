"""The static DDP sample, unchanged: every rank gets the right env and the loss goes down."""

from __future__ import annotations

import pytest

from tests.support.cluster import E2E
from tests.support.samples import load_sample

pytestmark = pytest.mark.e2e


def test_static_ddp_sample_trains_with_the_injected_ranks(e2e: E2E) -> None:
    job = load_sample("pytorch/ddp.yaml")
    with e2e.run(job) as run:
        run.wait_succeeded(timeout=120)
        starts = {ln.pod: ln for ln in run.events("start")}
        assert set(starts) == {"pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1"}, run.dump()
        ranks = {pod: (ln.int("RANK"), ln.int("WORLD_SIZE")) for pod, ln in starts.items()}
        assert ranks == {"pytorch-ddp-master-0": (0, 3), "pytorch-ddp-worker-0": (1, 3), "pytorch-ddp-worker-1": (2, 3)}
        assert {ln.fields["MASTER_ADDR"] for ln in starts.values()} != {""}

        losses = [float(ln.fields["loss"]) for ln in run.events("step", pod="pytorch-ddp-master-0")]
        assert len(losses) == 60, run.dump()
        first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
        assert last < 0.5 * first, f"loss did not go down: first steps {losses[:5]}, last {losses[-5:]}"
        done = run.events("done")
        assert len(done) == 3 and {ln.int("world_size") for ln in done} == {3}, run.dump()

    # What a user sees with kubectl once it is over: the start line in every pod's log.
    for pod, rank in (("pytorch-ddp-master-0", 0), ("pytorch-ddp-worker-0", 1), ("pytorch-ddp-worker-1", 2)):
        log = e2e.kubectl("logs", pod)
        assert f"[start] RANK={rank} WORLD_SIZE=3 " in log, log
        # c10d names every socket's ends; a lookup the pod network cannot answer warned here.
        assert "hostname of the client socket cannot be retrieved" not in log, log
