"""The node check's probe as the pods run it: real processes, real TCPStore and gloo pairs.

Four ranks on loopback, one of which cannot use its address for gloo (a broken data link
while the store is reachable): the probe pairs, re-pairs the failed pair with ranks that
passed, and blames that rank alone. Each rank's outcome is read from the termination
message file the kubelet names in TRAINCTL_TERMINATION_MESSAGE_PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trainctl.controller.reconcile.node_check import PROBE_SOURCE

from tests.support.net import free_port

# An address of TEST-NET-1: no interface has it, so gloo cannot bind it.
UNUSABLE = "192.0.2.1"


def run_check(tmp_path: Path, ranks: int, broken: set[int]) -> dict[int, tuple[int, dict[str, object]]]:
    port = free_port()
    procs = {}
    for rank in range(ranks):
        env = {**os.environ, "NODE_CHECK_RANK": str(rank), "NODE_CHECK_PEERS": ",".join(map(str, range(ranks))),
               "NODE_CHECK_HOST": "127.0.0.1", "NODE_CHECK_PORT": str(port),
               "NODE_CHECK_ADDR": UNUSABLE if rank in broken else "127.0.0.1",
               "NODE_CHECK_JOIN_TIMEOUT": "120", "NODE_CHECK_PAIR_TIMEOUT": "10",
               "TRAINCTL_TERMINATION_MESSAGE_PATH": str(tmp_path / f"{rank}.msg")}
        procs[rank] = subprocess.Popen([sys.executable, "-c", PROBE_SOURCE], env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE)
    out = {}
    for rank, proc in procs.items():
        _, err = proc.communicate(timeout=280)
        message = (tmp_path / f"{rank}.msg").read_text()
        out[rank] = (proc.returncode, json.loads(message))
        assert out[rank][1]["rank"] == rank, err
    return out


def test_a_rank_that_fails_every_pair_is_blamed_and_its_partners_pass(tmp_path: Path) -> None:
    outcomes = run_check(tmp_path, 4, broken={2})
    verdicts = {rank: (code, report["verdict"]) for rank, (code, report) in outcomes.items()}
    assert verdicts == {0: (0, "passed"), 1: (0, "passed"), 2: (1, "failed"), 3: (0, "passed")}
    # Rank 2 failed beside its first partner and beside one that had passed; the first
    # partner passed once re-paired.
    broken = outcomes[2][1]
    assert [ok for _, ok in broken["partners"]] == [False, False]  # type: ignore[union-attr]
    partner = broken["partners"][0][0]  # type: ignore[index]
    assert [ok for _, ok in outcomes[partner][1]["partners"]] == [False, True]  # type: ignore[union-attr,index]
    for rank in (0, 1, 3):
        report = outcomes[rank][1]
        assert isinstance(report["allgather"], float) and isinstance(report["matmul"], float)
