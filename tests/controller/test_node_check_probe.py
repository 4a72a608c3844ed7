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


class FakeStore:
    """The few TCPStore calls the coordinator makes, answered by a script of results."""

    def __init__(self, results: dict[str, dict[str, object]]) -> None:
        self.data: dict[str, str] = {key: json.dumps(value) for key, value in results.items()}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value

    def get(self, key: str) -> bytes:
        return self.data[key].encode()

    def check(self, keys: list[str]) -> bool:
        return all(key in self.data for key in keys)


def test_a_pod_slower_than_twice_the_median_is_a_straggler_only_if_it_stays_slow_when_measured_again(monkeypatch):
    monkeypatch.setenv("NODE_CHECK_RANK", "0")
    monkeypatch.setenv("NODE_CHECK_PEERS", "0,1,2,3,4,5")
    monkeypatch.setenv("NODE_CHECK_EXCLUDE_STRAGGLERS", "true")
    namespace: dict[str, object] = {"__name__": "probe"}
    exec(compile(PROBE_SOURCE, "node_check_probe.py", "exec"), namespace)
    settings = namespace["Settings"]()  # type: ignore[operator]
    # Ranks 2 and 3 are slow in their pairs; measured again, rank 2 stays slow (a capped CPU),
    # rank 3 is not (it was a busy moment).
    first = {f"result/0/{r}": {"ok": True, "allgather": 0.01, "matmul": 0.3 if r in (2, 3) else 0.04} for r in range(6)}
    again = {f"result/1/{r}": {"ok": True, "matmul": 0.28 if r == 2 else 0.04} for r in range(6)}
    store = FakeStore({**first, **again, **{f"join/{r}": {} for r in range(6)}})
    coordinator = namespace["Coordinator"](settings, store)  # type: ignore[operator]
    coordinator.run()
    final = json.loads(store.data["plan/2"])["final"]
    assert {rank: final[str(rank)]["verdict"] for rank in range(6)} == {
        0: "passed", 1: "passed", 2: "straggler", 3: "passed", 4: "passed", 5: "passed"}
    assert final["2"]["matmul"] == 0.28 and final["2"]["straggler"] is True and "straggler" not in final["3"]
    assert final["3"]["matmul"] == 0.04
    assert json.loads(store.data["plan/1"]) == {"pairs": [[r] for r in range(6)]}
