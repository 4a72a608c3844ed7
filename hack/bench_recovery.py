"""How long elastic PyTorch training takes to recover from failures (docs/benchmarks.md).

The numbers this project promises are relative to plain torchrun, so the benchmark runs the
same four measurements against interchangeable "pod" back-ends and prints them side by side:

1. cold start: two pods started together → the first step with WORLD_SIZE=2;
2. worker killed: SIGKILL the worker process of the pod whose worker has RANK 0 → the
   restarted workers train again with WORLD_SIZE=2;
3. pod lost: SIGKILL that pod (agent and worker) → the survivor trains alone (WORLD_SIZE=1);
4. replacement: start a new pod → both train (WORLD_SIZE=2).

Each phase starts a few seconds after the previous one ends; every repetition starts from
nothing; the table shows medians (min–max) over the repetitions.

With ``--mindspore-python`` (an interpreter that has MindSpore 2.10 and numpy<2; MindSpore is
not a dependency of trainctl) it also times the MindSpore data-parallel sample: a Scheduler
and two Workers with the env ms-operator injects, start to the last exit.

Back-ends:
- ``torchrun``: the baseline. Two torchrun agents started by hand on 127.0.0.1 with the
  settings the elastic sample uses (c10d rendezvous on a TCPStore hosted by a separate
  process, ``is_host=0``, short rendezvous timers, ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``),
  training ``samples/pytorch/train.py``.
- ``cluster``: the elastic sample (``samples/pytorch/elastic.yaml``) on the embedded cluster
  (``trainctl.controller.local.cluster.LocalCluster``: API server, kubelet and controller as
  processes), one job per repetition. Its phases are the ones the project promises:
  cold start (job applied → both workers train); the RANK 0 worker's training process
  SIGKILLed (not the agent) → every worker trains again; worker-1's pod deleted with
  ``--grace-period=0 --force`` → the survivor trains again, and the replacement pod trains
  with WORLD_SIZE=2, timed from the watch event that announced it (its creationTimestamp
  has whole-second precision); the same with worker-0, the pod plain torchrun would host
  the c10d store in.  With ``--mindspore-python`` the cluster also runs the CPU MSJob
  sample, timed from creation to its Succeeded condition, alternating with by-hand runs.

Usage: ``python hack/bench_recovery.py [--runs 5] [--backend torchrun --backend cluster] [--mindspore-python PY] [--json FILE]``
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Protocol

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.support, when run as `python hack/bench_recovery.py`

from tests.support.net import free_port  # noqa: E402

if TYPE_CHECKING:
    from tests.support.cluster import E2E

TRAIN_SCRIPT = REPO / "samples" / "pytorch" / "train.py"
MINDSPORE_SCRIPT = REPO / "samples" / "mindspore" / "train.py"
PHASES = ("cold start → 1st step", "worker SIGKILL → training again",
          "pod SIGKILL → survivor trains alone", "replacement start → both train")
RDZV_CONF = "is_host=0,last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=3"
PHASE_TIMEOUT = 120.0
CLUSTER_PHASES = ("cold start → both train", "RANK 0 worker SIGKILL → all train again",
                  "worker-1 pod lost → survivor trains", "worker-1 replacement created → trains at 2",
                  "worker-0 pod lost → survivor trains", "worker-0 replacement created → trains at 2")
ELASTIC_JOB = "pytorch-elastic"


@dataclasses.dataclass(frozen=True)
class Line:
    """One ``[event] key=value ...`` line of the training script, as a pod printed it."""

    at: float  # time.monotonic() when the line was read
    pod: str
    event: str
    fields: dict[str, str]

    @classmethod
    def parse(cls, at: float, pod: str, text: str) -> Optional["Line"]:
        if not text.startswith("[") or "]" not in text:
            return None
        event, _, rest = text[1:].partition("]")
        fields = dict(part.split("=", 1) for part in rest.split() if "=" in part)
        return cls(at, pod, event, fields)


class LogBook:
    """Every line every pod printed, and a way to wait for the one a phase is waiting for."""

    def __init__(self) -> None:
        self._lines: list[Line] = []
        self._changed = threading.Condition()

    def add(self, line: Line) -> None:
        with self._changed:
            self._lines.append(line)
            self._changed.notify_all()

    def follow(self, pod: str, stream) -> threading.Thread:
        def pump() -> None:
            for raw in stream:
                line = Line.parse(time.monotonic(), pod, raw.decode(errors="replace").strip())
                if line is not None:
                    self.add(line)
        thread = threading.Thread(target=pump, name=f"log-{pod}", daemon=True)
        thread.start()
        return thread

    def wait_for(self, match: Callable[[Line, list[Line]], bool], timeout: float = PHASE_TIMEOUT) -> Line:
        """The first line (in arrival order) for which ``match(line, lines before it)`` holds."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for i in range(seen, len(self._lines)):
                    if match(self._lines[i], self._lines[:i]):
                        return self._lines[i]
                seen = len(self._lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no matching line within %.0f s" % timeout)
                self._changed.wait(left)

    def lines(self) -> list[Line]:
        with self._changed:
            return list(self._lines)


class Pods(Protocol):
    """What a measurement needs from a back-end: start, break and observe "pods"."""

    log: LogBook

    def start(self, pod: str) -> None: ...
    def kill_worker(self, pod: str) -> None: ...
    def kill_pod(self, pod: str) -> None: ...
    def close(self) -> None: ...


def serve_store(port: int) -> None:
    """Host the rendezvous TCPStore until killed (a stand-in for a controller-hosted store)."""
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    print(f"[store] port={port}", flush=True)
    while store is not None:
        signal.pause()


class TorchrunPods:
    """Pods as plain torchrun agents on 127.0.0.1: the baseline the cluster is compared to."""

    def __init__(self, workdir: Path, steps: int, step_sleep: float, checkpoint_every: int) -> None:
        self.log = LogBook()
        self.workdir = workdir
        self.port = free_port()
        self.agents: dict[str, subprocess.Popen] = {}
        self.train_args = ["--steps", str(steps), "--step-sleep", str(step_sleep),
                           "--checkpoint-every", str(checkpoint_every),
                           "--checkpoint-dir", str(workdir / "checkpoints")]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
        self.store = subprocess.Popen([sys.executable, __file__, "--serve-store", str(self.port)],
                                      stdout=subprocess.PIPE, env=self.env)
        self.log.follow("store", self.store.stdout)
        self.log.wait_for(lambda line, _: line.event == "store", timeout=30)

    def start(self, pod: str) -> None:
        command = [
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes=1:3", "--nproc-per-node=1", "--max-restarts=100",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", "--rdzv-id=bench",
            f"--rdzv-conf={RDZV_CONF}", "--local-addr=127.0.0.1",
            str(TRAIN_SCRIPT), *self.train_args,
        ]
        with open(self.workdir / f"{pod}.agent.log", "ab") as agent_log:
            agent = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=agent_log)
        self.agents[pod] = agent
        self.log.follow(pod, agent.stdout)

    def worker_pid(self, pod: str) -> int:
        starts = [line for line in self.log.lines() if line.pod == pod and line.event == "start"]
        return int(starts[-1].fields["pid"])

    def kill_worker(self, pod: str) -> None:
        _kill(self.worker_pid(pod))

    def kill_pod(self, pod: str) -> None:
        # torchrun starts workers in their own session, so the agent's death would not reach
        # them; a container's death would, so kill both, as the kernel does for a pod.
        worker = self.worker_pid(pod)
        _kill(self.agents.pop(pod).pid)
        _kill(worker)

    def close(self) -> None:
        workers = {int(line.fields["pid"]) for line in self.log.lines() if line.event == "start"}
        for process in [*self.agents.values(), self.store]:
            _kill(process.pid)
            process.wait()
        for pid in workers:
            _kill(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def trains(world_size: int, pods: Optional[set[str]] = None, after: float = 0.0, restarted: bool = False):
    """Match a step at ``world_size`` (from ``pods``), read after ``after``.

    With ``restarted``, the step must come from a worker that started after ``after``, so
    that a step the old generation printed while dying does not count.
    """
    def match(line: Line, before: list[Line]) -> bool:
        if line.event != "step" or line.at < after or int(line.fields["world_size"]) != world_size:
            return False
        if pods is not None and line.pod not in pods:
            return False
        if restarted:
            return any(b.pod == line.pod and b.event == "start" and b.at >= after for b in before)
        return True
    return match


def rank0_pod(log: LogBook) -> str:
    """The pod whose current worker has RANK 0."""
    starts = [line for line in log.lines() if line.event == "start"]
    latest = {line.pod: line for line in starts}
    return next(pod for pod, line in latest.items() if line.fields["RANK"] == "0")


def measure_once(pods: Pods, pause: float) -> tuple[list[float], dict[str, object]]:
    """The four phase durations of one repetition, plus what resumed from where."""
    log = pods.log
    began = time.monotonic()
    pods.start("a")
    pods.start("b")
    first = log.wait_for(trains(2))
    durations = [first.at - began]

    time.sleep(pause)
    victim = rank0_pod(log)
    killed = time.monotonic()
    pods.kill_worker(victim)
    durations.append(log.wait_for(trains(2, after=killed, restarted=True)).at - killed)

    time.sleep(pause)
    victim = rank0_pod(log)
    survivor = ({"a", "b"} - {victim}).pop()
    killed = time.monotonic()
    pods.kill_pod(victim)
    durations.append(log.wait_for(trains(1, {survivor}, after=killed, restarted=True)).at - killed)

    time.sleep(pause)
    started = time.monotonic()
    pods.start("c")
    durations.append(log.wait_for(trains(2, after=started, restarted=True)).at - started)

    resumes = [int(line.fields["step"]) for line in log.lines() if line.event == "resume" and line.pod != "store"]
    return durations, {"resumed_from_steps": sorted(set(resumes))}


def _fresh_step(run, pod: str, after: float, world_size: Optional[int] = None, uid: Optional[str] = None):
    """A step of ``pod`` printed by a worker that started after ``after`` (None until there is one)."""
    started: set[tuple[str, int]] = set()
    for line in run.lines:
        if line.pod != pod or line.at < after or (uid is not None and line.uid != uid):
            continue
        instance = (line.uid, line.container_restart)
        if line.event == "start":
            started.add(instance)
        elif (line.event == "step" and instance in started
              and (world_size is None or int(line.fields["world_size"]) == world_size)):
            return line
    return None


def _rfc3339(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def measure_cluster_once(bench: E2E, args: argparse.Namespace) -> tuple[list[float], dict[str, object]]:
    """The six cluster phase durations of one repetition (see CLUSTER_PHASES)."""
    from tests.support.samples import load_sample, set_arg

    job = load_sample("pytorch/elastic.yaml")
    for flag, value in (("--steps", args.steps), ("--step-sleep", args.step_sleep),
                        ("--checkpoint-every", args.checkpoint_every)):
        set_arg(job, flag, str(value))
    w0, w1 = f"{ELASTIC_JOB}-worker-0", f"{ELASTIC_JOB}-worker-1"
    wall_offset = time.time() - time.monotonic()
    durations: list[float] = []
    notes: dict[str, object] = {}
    began = time.monotonic()
    run = bench.run(job)
    try:
        for pod in (w0, w1):
            run.wait_for(f"{pod} training at 2", lambda pod=pod: _fresh_step(run, pod, began, 2), PHASE_TIMEOUT)
        durations.append(time.monotonic() - began)

        time.sleep(args.pause)
        starts = [line for line in run.lines if line.event == "start"]
        rank0 = next(line for line in reversed(starts) if line.fields.get("RANK") == "0")
        killed = time.monotonic()
        _kill(int(rank0.fields["pid"]))
        lines = [run.wait_for(f"{pod} training again", lambda pod=pod: _fresh_step(run, pod, killed, 2), PHASE_TIMEOUT)
                 for pod in (w0, w1)]
        durations.append(max(line.at for line in lines) - killed)
        notes["killed_worker_of"] = rank0.pod

        for lost, survivor in ((w1, w0), (w0, w1)):
            time.sleep(args.pause)
            lost_uid = run.pods[lost]["metadata"]["uid"]
            killed = time.monotonic()
            bench.kubectl("delete", "pod", lost, "--grace-period=0", "--force", "--wait=false")
            survived = run.wait_for(f"{survivor} training again", functools.partial(_fresh_step, run, survivor, killed),
                                    PHASE_TIMEOUT)
            durations.append(survived.at - killed)

            # The replacement that trains need not be the first one created (the controller
            # may replace a replacement), so match any new uid and time the one that printed.
            rejoined = run.wait_for(
                f"a replacement {lost} training at 2",
                lambda lost=lost, lost_uid=lost_uid, killed=killed: next(
                    (
                        line
                        for uid in run.uids(lost)
                        if uid != lost_uid
                        for line in [_fresh_step(run, lost, killed, 2, uid=uid)]
                        if line
                    ),
                    None,
                ),
                PHASE_TIMEOUT,
            )
            pod = run.pods[lost]
            assert pod["metadata"]["uid"] == rejoined.uid, "the pod that printed the line is the current one"
            # Timed from the watch event that announced the pod (milliseconds after the API
            # server stored it), not creationTimestamp, which has whole-second precision.
            seen = run.first_seen[rejoined.uid]
            durations.append(rejoined.at - seen)
            created = _rfc3339(pod["metadata"]["creationTimestamp"])
            notes[f"{lost}_seen_after_s"] = round(seen - killed, 2)
            notes[f"{lost}_stamp_lag_s"] = round(seen + wall_offset - created, 2)
            notes[f"{lost}_replacements"] = len(run.uids(lost)) - 1
    except AssertionError as e:  # the observer's timeout, with the job's status and log tails
        raise TimeoutError(str(e)) from None
    finally:
        run.__exit__(None, None, None)
        bench.clean()
    resumes = sorted({int(line.fields["step"]) for line in run.lines if line.event == "resume"})
    notes["resumed_from_steps"] = resumes
    return durations, notes


def mindspore_on_cluster(bench: E2E) -> float:
    """Seconds from applying the CPU MSJob sample to its Succeeded condition."""
    from tests.support.samples import load_sample

    began = time.monotonic()
    run = bench.run(load_sample("mindspore/msjob-cpu.yaml"))
    try:
        outcome = run.wait_finished(PHASE_TIMEOUT)
        elapsed = time.monotonic() - began
    except AssertionError as e:
        raise RuntimeError(str(e)) from None
    finally:
        run.__exit__(None, None, None)
    bench.clean()
    if outcome != "Succeeded":
        raise RuntimeError(f"the MSJob {outcome}")
    return elapsed


def mindspore_by_hand(python: str, workdir: Path) -> tuple[float, float]:
    """Seconds from starting a Scheduler and two Workers to (both Workers exited, the last exit).

    All three must exit 0. The first number is what the MSJob's ``successPolicy: AllWorkers``
    waits for, so it is the one compared with the cluster's created → Succeeded.
    """
    env = {**os.environ, "MS_SCHED_HOST": "127.0.0.1", "MS_SCHED_PORT": str(free_port()),
           "MS_WORKER_NUM": "2", "MS_SERVER_NUM": "0", "GLOG_v": "2"}  # as the sample sets
    roles = {"ms-scheduler-0": "MS_SCHED", "ms-worker-0": "MS_WORKER", "ms-worker-1": "MS_WORKER"}
    began = time.monotonic()
    processes = {
        node: subprocess.Popen([python, str(MINDSPORE_SCRIPT), "--device-target", "CPU"], cwd=REPO,
                               env={**env, "MS_ROLE": role, "MS_NODE_ID": node},
                               stdout=open(workdir / f"{node}.log", "wb"), stderr=subprocess.STDOUT)
        for node, role in roles.items()
    }
    try:
        codes = {node: processes[node].wait(timeout=PHASE_TIMEOUT) for node in ("ms-worker-0", "ms-worker-1")}
        workers_done = time.monotonic() - began
        codes["ms-scheduler-0"] = processes["ms-scheduler-0"].wait(timeout=PHASE_TIMEOUT)
    finally:
        for process in processes.values():
            _kill(process.pid)
    elapsed = time.monotonic() - began
    if any(codes.values()):
        raise RuntimeError(f"MindSpore processes failed: {codes} (logs in {workdir})")
    weights = {
        (workdir / f"{node}.log").read_text().split("weights=")[-1].split()[0] for node in roles if node != "ms-scheduler-0"
    }
    if len(weights) != 1:
        raise RuntimeError(f"the workers ended with different weights: {weights}")
    return workers_done, elapsed


def mindspore_by_hand_once(python: str, run: int, walls: list[tuple[float, float]]) -> bool:
    """Append one by-hand MindSpore timing to ``walls``; False (and why, on stderr) on failure."""
    with tempfile.TemporaryDirectory(prefix="bench-mindspore-") as workdir:
        try:
            walls.append(mindspore_by_hand(python, Path(workdir)))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"mindspore run {run}: {e}", file=sys.stderr)
            return False
    print(f"mindspore by hand run {run}: workers done {walls[-1][0]:.2f}, last exit {walls[-1][1]:.2f}", flush=True)
    return True


def summarise(rows: list[list[float]]) -> list[str]:
    cells = []
    for column in zip(*rows, strict=True):
        cells.append(f"{statistics.median(column):.2f} ({min(column):.2f}–{max(column):.2f})")
    return cells


@contextlib.contextmanager
def backend(name: str, args: argparse.Namespace) -> Iterator[Pods]:
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as workdir:
        if name == "torchrun":
            pods: Pods = TorchrunPods(Path(workdir), args.steps, args.step_sleep, args.checkpoint_every)
        else:
            raise SystemExit(f"bench_recovery: unknown backend {name!r} (known: torchrun)")
        try:
            yield pods
        finally:
            pods.close()


def print_table(title: str, phases: tuple[str, ...], results: dict[str, list[list[float]]]) -> None:
    print()
    print(f"{title}, median (min–max) seconds")
    print("| back-end | " + " | ".join(phases) + " |")
    print("|---|" + "---|" * len(phases))
    for name, rows in results.items():
        print(f"| {name} | " + " | ".join(summarise(rows)) + " |")


def print_targets(torchrun: Optional[list[list[float]]], cluster: list[list[float]]) -> None:
    """The issue's bounds, each against this run's medians."""
    def verdict(got: float, bound: float) -> str:
        return "met" if got <= bound else f"missed by {got - bound:.2f} s"

    median = [statistics.median(column) for column in zip(*cluster, strict=True)]
    print()
    if torchrun:
        base = statistics.median(row[1] for row in torchrun)
        print(f"worker SIGKILL → training again: cluster {median[1]:.2f} s vs plain torchrun {base:.2f} s "
              f"(≤ {base + 1:.2f} s: {verdict(median[1], base + 1)})")
    for i, what in ((2, "worker-1 lost → survivor trains"), (3, "worker-1 replacement → trains"),
                    (4, "worker-0 lost → survivor trains"), (5, "worker-0 replacement → trains")):
        print(f"{what}: {median[i]:.2f} s (≤ 10 s: {verdict(median[i], 10.0)})")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--backend", action="append", choices=["torchrun", "cluster"], help="default: all")
    p.add_argument("--pause", type=float, default=5.0, help="seconds between phases")
    p.add_argument("--steps", type=int, default=1_000_000, help="training steps (the run is killed long before)")
    p.add_argument("--step-sleep", type=float, default=0.05)
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--mindspore-python", metavar="PY", help="interpreter with MindSpore 2.10: also time the MSJob sample")
    p.add_argument("--mindspore-only", action="store_true", help="skip the PyTorch measurements")
    p.add_argument("--json", type=Path, help="also write the raw durations here")
    p.add_argument("--serve-store", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_store:
        serve_store(args.serve_store)
        return 0
    if args.runs < 1:
        p.error("--runs must be >= 1")
    if args.mindspore_only and not args.mindspore_python:
        p.error("--mindspore-only needs --mindspore-python")
    backends = args.backend or ["torchrun", "cluster"]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    results: dict[str, list[list[float]]] = {}
    if not args.mindspore_only and "torchrun" in backends:
        results["torchrun"] = []
        for run in range(1, args.runs + 1):
            with backend("torchrun", args) as pods:
                try:
                    durations, notes = measure_once(pods, args.pause)
                except TimeoutError as e:
                    print(f"torchrun run {run}: {e}", file=sys.stderr)
                    return 1
            results["torchrun"].append(durations)
            print(f"torchrun run {run}: " + ", ".join(f"{d:.2f}" for d in durations) + f"  {notes}", flush=True)
    cluster_rows: list[list[float]] = []
    stalls = 0
    ms_cluster: list[float] = []
    walls: list[tuple[float, float]] = []  # MindSpore by hand: (workers done, last exit)
    if "cluster" in backends and (not args.mindspore_only or args.mindspore_python):
        from trainctl.controller.local.cluster import ClusterError

        from tests.support.cluster import scratch_cluster

        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as root, contextlib.ExitStack() as stack:
            try:
                bench = stack.enter_context(scratch_cluster(Path(root)))
            except ClusterError as e:
                print(f"bench_recovery: {e}", file=sys.stderr)
                return 1
            for run in range(1, args.runs + 1) if not args.mindspore_only else ():
                try:
                    durations, notes = measure_cluster_once(bench, args)
                except TimeoutError as e:
                    # A stall is a result, not a reason to stop: count it, keep the
                    # diagnosis (job status, pods, log tails) on stderr, run again.
                    stalls += 1
                    print(f"cluster run {run}: STALLED: {e}", file=sys.stderr, flush=True)
                    print(f"cluster run {run}: stalled ({str(e).splitlines()[0]})", flush=True)
                    continue
                cluster_rows.append(durations)
                print(f"cluster run {run}: " + ", ".join(f"{d:.2f}" for d in durations) + f"  {notes}", flush=True)
            # Cluster and by-hand MindSpore runs alternate, so a change in the machine's
            # load lands on both sides of the ratio.
            for run in range(1, args.runs + 1) if args.mindspore_python else ():
                try:
                    ms_cluster.append(mindspore_on_cluster(bench))
                except RuntimeError as e:
                    print(f"mindspore cluster run {run}: {e}", file=sys.stderr)
                    return 1
                print(f"mindspore on the cluster run {run}: {ms_cluster[-1]:.2f}", flush=True)
                if not mindspore_by_hand_once(args.mindspore_python, run, walls):
                    return 1
    if results:
        print_table("plain torchrun agents", PHASES, results)
    if cluster_rows:
        results["cluster"] = cluster_rows
        print_table("embedded cluster, elastic sample", CLUSTER_PHASES, {"cluster": cluster_rows})
    if stalls:
        results["cluster stalled runs"] = [[float(stalls)]]
        print(f"\nembedded cluster: {stalls} of {args.runs} runs stalled for {PHASE_TIMEOUT:.0f} s (see stderr)")
    if cluster_rows:
        print_targets(results.get("torchrun"), cluster_rows)
    if args.mindspore_python:
        for run in range(len(walls) + 1, args.runs + 1):  # when the cluster did not run
            if not mindspore_by_hand_once(args.mindspore_python, run, walls):
                return 1
        results["mindspore by hand"] = [list(w) for w in walls]
        print()
        print("| MindSpore data-parallel sample | median (min–max) s |")
        print("|---|---|")
        print(f"| by hand: start → both Workers exited | {summarise([[w[0]] for w in walls])[0]} |")
        print(f"| by hand: start → last exit (Scheduler too) | {summarise([[w[1]] for w in walls])[0]} |")
        if ms_cluster:
            results["mindspore on the cluster"] = [[w] for w in ms_cluster]
            print(f"| embedded cluster: created → Succeeded | {summarise([[w] for w in ms_cluster])[0]} |")
            ratio = statistics.median(ms_cluster) / statistics.median(w[0] for w in walls)
            print(f"\nMindSpore cluster / by hand (Workers done): {ratio:.2f}× (target ≤ 1.2×)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
