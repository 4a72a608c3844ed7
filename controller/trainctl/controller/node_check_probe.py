"""The node check that runs in a job's pods before the user's command: allgather and matmul in pairs.

The controller ships this file's source as ``python -c`` in an init container of the job's
own image, so it may use only the standard library and torch (never trainctl). The pods of one
check (``NODE_CHECK_PEERS``) meet at a TCPStore hosted by the lowest of them
(``NODE_CHECK_HOST``); that one also coordinates: it pairs the pods into worlds of two, each
pair runs a timed allgather over gloo and each pod a timed matmul, and a pair that fails is
re-paired with pods that passed, so only the broken one is blamed (a pod that fails beside a
pod that passed, or beside two different pods). Once every pod has an outcome, pods whose time
(allgather plus matmul) is more than ``NODE_CHECK_STRAGGLER_FACTOR`` times the median are
stragglers (once every pod has measured its matmul again, keeping its best, so a moment of
a crowded machine is not taken for a slow node), failed when ``NODE_CHECK_EXCLUDE_STRAGGLERS`` is set. A pod alone in its check
(a replacement joining pods that passed before) measures its matmul only.

Each pod writes its outcome as JSON to its termination message (the file Kubernetes reads into
``state.terminated.message``) and exits 0 only if it passed, so the user's command runs only on
a node that passed. A pod that cannot reach the host says so (``unreachable``); a host that no
other pod reached says so too (``isolated``): the controller, which sees every report, decides
from both which node is to blame.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed

# The store, prefix store and gloo group classes are not in torch's typed exports.
dist: Any = torch.distributed

PASSED, FAILED, STRAGGLER = "passed", "failed", "straggler"
UNREACHABLE, ISOLATED, INCONCLUSIVE = "unreachable", "isolated", "inconclusive"
MAX_ROUNDS = 4
ALLGATHER_ELEMENTS = 1 << 18
MATMUL_SIZE = 128
MATMUL_ROUNDS = 200
# Many short runs, the best of them: on a crowded machine one of them finds a free core, while
# a CPU cap below one core throttles every run (each needs more than a period's quota).
MATMUL_REPEATS = 15
# Below this much above the median, a slower pod is noise on a busy machine, not a straggler.
STRAGGLER_MARGIN_SECONDS = 0.05
REPEATS = 5


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


class Settings:
    def __init__(self) -> None:
        self.rank = int(os.environ["NODE_CHECK_RANK"])
        self.peers = sorted(int(r) for r in os.environ["NODE_CHECK_PEERS"].split(",") if r)
        self.host = os.environ.get("NODE_CHECK_HOST") or "127.0.0.1"
        self.port = int(os.environ.get("NODE_CHECK_PORT") or 29511)
        self.address = os.environ.get("NODE_CHECK_ADDR") or "127.0.0.1"
        self.join_timeout = _env_float("NODE_CHECK_JOIN_TIMEOUT", 60.0)
        self.pair_timeout = _env_float("NODE_CHECK_PAIR_TIMEOUT", 10.0)
        self.factor = _env_float("NODE_CHECK_STRAGGLER_FACTOR", 2.0)
        self.exclude = os.environ.get("NODE_CHECK_EXCLUDE_STRAGGLERS", "").lower() == "true"
        self.message_path = os.environ.get("TRAINCTL_TERMINATION_MESSAGE_PATH") or "/dev/termination-log"

    @property
    def host_rank(self) -> int:
        return self.peers[0]

    def plan_timeout(self) -> float:
        """How long a pod waits for the host's next word before giving up on the check."""
        return self.join_timeout + 3 * self.pair_timeout + 15.0


def matmul_seconds() -> float:
    """The best of many runs of a fixed single-threaded work (~35 ms each on a free core)."""
    torch.set_num_threads(1)
    b = torch.rand(MATMUL_SIZE, MATMUL_SIZE)
    best = float("inf")
    for _ in range(MATMUL_REPEATS):
        a = torch.rand(MATMUL_SIZE, MATMUL_SIZE)
        started = time.perf_counter()
        for _ in range(MATMUL_ROUNDS):
            a = torch.tanh(a @ b)
        best = min(best, time.perf_counter() - started)
    return best


def pair_check(settings: Settings, store: Any, round_: int, pair: list[int]) -> dict[str, Any]:
    """This pod's half of one pair's check: gloo group of two, allgather, then matmul."""
    pair_rank = pair.index(settings.rank)
    prefix = dist.PrefixStore(f"pair/{round_}/{pair[0]}-{pair[1]}/", store)
    options = dist.ProcessGroupGloo._Options()
    options._timeout = timedelta(seconds=settings.pair_timeout)
    started = time.perf_counter()
    try:
        options._devices = [dist.ProcessGroupGloo.create_device(hostname=settings.address)]
        group = dist.ProcessGroupGloo(prefix, pair_rank, 2, options)
        tensor = torch.full((ALLGATHER_ELEMENTS,), float(settings.rank))
        outputs = [[torch.empty_like(tensor) for _ in range(2)]]
        group.allgather(outputs, [tensor]).wait()  # connects, and brings the two in step
        gathered = float("inf")
        for _ in range(REPEATS):
            started = time.perf_counter()
            group.allgather(outputs, [tensor]).wait()
            gathered = min(gathered, time.perf_counter() - started)
        if outputs[0][1 - pair_rank][0].item() != float(pair[1 - pair_rank]):
            raise RuntimeError("allgather returned the wrong data")
    except Exception as exc:  # a timeout, a refused or lost connection: the pair failed
        return {"ok": False, "error": str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__,
                "seconds": round(time.perf_counter() - started, 3)}
    return {"ok": True, "allgather": round(gathered, 4), "matmul": round(matmul_seconds(), 4)}


class Coordinator:
    """The host's side: who joined, the pairs of each round, and every pod's outcome."""

    def __init__(self, settings: Settings, store: Any) -> None:
        self.settings = settings
        self.store = store
        self.status: dict[int, str] = {}  # new, suspect, passed, failed
        self.failed_with: dict[int, set[int]] = {}
        self.results: dict[int, dict[str, Any]] = {}
        self.partners: dict[int, list[list[Any]]] = {}

    def run(self) -> None:
        joined = self._wait_for_joins()
        self.status = {rank: "new" for rank in joined}
        self.failed_with = {rank: set() for rank in joined}
        round_ = 0
        while round_ < MAX_ROUNDS:
            pairs = self._pairs()
            if not pairs:
                break
            self._publish(round_, {"pairs": pairs})
            self._judge(pairs, self._collect(round_, [r for pair in pairs for r in pair]))
            round_ += 1
        if self._stragglers():
            round_ = self._measure_again(round_)
        final = self._final(joined)
        self._publish(round_, {"final": final})

    def _wait_for_joins(self) -> list[int]:
        deadline = time.monotonic() + self.settings.join_timeout
        joined: list[int] = []
        while time.monotonic() < deadline:
            joined = [r for r in self.settings.peers if self.store.check([f"join/{r}"])]
            if len(joined) == len(self.settings.peers):
                break
            time.sleep(0.1)
        return joined

    def _pairs(self) -> list[list[int]]:
        """Suspects beside pods that passed first, then the new ones among themselves; never
        two pods that failed together before."""
        passed = [r for r, s in self.status.items() if s == PASSED]
        waiting = [r for r, s in sorted(self.status.items()) if s in ("suspect", "new")]
        waiting.sort(key=lambda r: self.status[r] != "suspect")
        if len(self.status) == 1 and waiting:
            return [[waiting[0]]]  # alone: matmul only
        pairs: list[list[int]] = []
        busy: set[int] = set()
        for rank in waiting:
            if rank in busy:
                continue
            partner = next((h for h in passed if h not in busy and h not in self.failed_with[rank]), None)
            if partner is None and self.status[rank] == "new":
                partner = next((r for r in waiting if r != rank and r not in busy and self.status[r] == "new"), None)
            if partner is None:
                partner = next((r for r in waiting if r != rank and r not in busy
                                and r not in self.failed_with[rank]), None)
            if partner is not None:
                pairs.append(sorted((rank, partner)))
                busy |= {rank, partner}
        return pairs

    def _publish(self, round_: int, plan: dict[str, Any]) -> None:
        self.store.set(f"plan/{round_}", json.dumps(plan))

    def _collect(self, round_: int, ranks: list[int]) -> dict[int, dict[str, Any]]:
        deadline = time.monotonic() + 2 * self.settings.pair_timeout + 10.0
        got: dict[int, dict[str, Any]] = {}
        while time.monotonic() < deadline and len(got) < len(ranks):
            for rank in ranks:
                if rank not in got and self.store.check([f"result/{round_}/{rank}"]):
                    got[rank] = json.loads(self.store.get(f"result/{round_}/{rank}"))
            time.sleep(0.05)
        return got

    def _judge(self, pairs: list[list[int]], got: dict[int, dict[str, Any]]) -> None:
        trusted = {r for r, s in self.status.items() if s == PASSED}
        for pair in pairs:
            outcomes = {r: got.get(r) or {"ok": False, "error": "no result"} for r in pair}
            if all(o.get("ok") for o in outcomes.values()):
                for rank, outcome in outcomes.items():
                    self.status[rank] = PASSED
                    self.results[rank] = outcome
                    for other in pair:
                        if other != rank:
                            self.partners.setdefault(rank, []).append([other, True])
                continue
            for rank, outcome in outcomes.items():
                other = next(r for r in pair if r != rank)
                self.partners.setdefault(rank, []).append([other, False])
                if rank in trusted:
                    continue  # it passed beside another pod before: the other one is to blame
                self.failed_with[rank].add(other)
                self.results.setdefault(rank, {}).update({"error": outcome.get("error", "")})
                if other in trusted or len(self.failed_with[rank]) >= 2:
                    self.status[rank] = FAILED
                else:
                    self.status[rank] = "suspect"

    def _times(self) -> dict[int, float]:
        """Each passed pod's time: allgather plus matmul."""
        return {r: self.results[r].get("allgather", 0.0) + self.results[r].get("matmul", 0.0)
                for r, s in self.status.items() if s == PASSED}

    def _stragglers(self) -> list[int]:
        times = self._times()
        if len(times) < 2:
            return []
        median = statistics.median(times.values())
        limit = max(self.settings.factor * median, median + STRAGGLER_MARGIN_SECONDS)
        return [rank for rank, seconds in times.items() if seconds > limit]

    def _measure_again(self, round_: int) -> int:
        """Every passed pod runs its matmul once more, at once, and keeps its best: a busy
        moment passes, a capped CPU stays capped. Returns the next round's number."""
        passed = sorted(r for r, s in self.status.items() if s == PASSED)
        self._publish(round_, {"pairs": [[rank] for rank in passed]})
        for rank, outcome in self._collect(round_, passed).items():
            if outcome.get("ok") and isinstance(outcome.get("matmul"), float):
                self.results[rank]["matmul"] = min(self.results[rank].get("matmul", outcome["matmul"]), outcome["matmul"])
        return round_ + 1

    def _final(self, joined: list[int]) -> dict[str, Any]:
        times = self._times()
        median = statistics.median(times.values()) if len(times) >= 2 else None
        stragglers = self._stragglers()
        final: dict[str, Any] = {}
        for rank in joined:
            state = self.status.get(rank, "new")
            verdict = state if state in (PASSED, FAILED) else INCONCLUSIVE
            entry: dict[str, Any] = {"verdict": verdict, "partners": self.partners.get(rank, [])}
            entry.update(self.results.get(rank, {}))
            if median is not None and verdict == PASSED:
                entry["median"] = round(median, 4)
                if rank in stragglers:
                    entry["straggler"] = True
                    if self.settings.exclude:
                        entry["verdict"] = STRAGGLER
            final[str(rank)] = entry
        final["absent"] = [r for r in self.settings.peers if r not in joined]
        return final


def report(settings: Settings, outcome: dict[str, Any]) -> int:
    """Write the outcome where Kubernetes reads the termination message; 0 only if passed."""
    outcome = {"rank": settings.rank, "host": settings.host_rank, **outcome}
    text = json.dumps(outcome, separators=(",", ":"))
    print(f"node check: {text}", flush=True)
    try:
        with open(settings.message_path, "w") as file:
            file.write(text[:4096])
    except OSError as exc:
        print(f"node check: cannot write the termination message: {exc}", file=sys.stderr)
    return 0 if outcome.get("verdict") == PASSED else 1


def run_rank(settings: Settings, store: Any) -> dict[str, Any]:
    """This pod's part: join, run the pairs the host names, until the host's final word."""
    store.set(f"join/{settings.rank}", settings.address)
    round_ = 0
    while True:
        key = f"plan/{round_}"
        try:
            store.wait([key], timedelta(seconds=settings.plan_timeout()))
        except Exception as exc:
            return {"verdict": INCONCLUSIVE, "error": f"no word from the host: {str(exc).splitlines()[0][:200]}"}
        plan = json.loads(store.get(key))
        if "final" in plan:
            mine = plan["final"].get(str(settings.rank)) or {"verdict": INCONCLUSIVE, "error": "not judged"}
            store.add("left", 1)
            return dict(mine)
        pair = next((p for p in plan["pairs"] if settings.rank in p), None)
        if pair is not None:
            result = {"ok": True, "matmul": round(matmul_seconds(), 4)} if len(pair) == 1 else \
                pair_check(settings, store, round_, pair)
            store.set(f"result/{round_}/{settings.rank}", json.dumps(result))
        round_ += 1


def main() -> int:
    settings = Settings()
    timeout = timedelta(seconds=settings.join_timeout)
    if settings.rank == settings.host_rank:
        # Bound to the pod's own address: pods that share a host network must not collide.
        family = socket.AF_INET6 if ":" in settings.address else socket.AF_INET
        listener = socket.create_server((settings.address, settings.port), family=family, backlog=256)
        store = dist.TCPStore(settings.address, settings.port, is_master=True, timeout=timeout,
                              wait_for_workers=False, master_listen_fd=listener.detach())
        coordinator = Coordinator(settings, store)
        thread = threading.Thread(target=coordinator.run, daemon=True)
        thread.start()
        client = dist.TCPStore(settings.address, settings.port, is_master=False, timeout=timeout)
        outcome = run_rank(settings, client)
        thread.join(settings.plan_timeout())
        others = len(settings.peers) - 1
        if others and not [r for r in settings.peers[1:] if store.check([f"join/{r}"])]:
            outcome = {"verdict": ISOLATED, "error": f"no other pod of the check reached this one in {settings.join_timeout:g}s"}
        deadline = time.monotonic() + settings.pair_timeout + 5.0
        joined_others = sum(1 for r in settings.peers[1:] if store.check([f"join/{r}"]))
        while time.monotonic() < deadline and store.add("left", 0) < joined_others + 1:
            time.sleep(0.05)  # keep the store up until every pod has read its outcome
        return report(settings, outcome)
    try:
        client = dist.TCPStore(settings.host, settings.port, is_master=False, timeout=timeout)
    except Exception as exc:
        return report(settings, {"verdict": UNREACHABLE,
                                 "error": f"cannot reach the check's host {settings.host}:{settings.port}: "
                                          f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"})
    return report(settings, run_rank(settings, client))


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Straight out: a store client that never connected can hold the interpreter's teardown
    # for minutes, and the outcome is written already.
    os._exit(code)
