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
  (``trainctl.cluster.local_cluster.LocalCluster``: API server, kubelet and controller as
  processes), one job per repetition. Its phases are the ones the project promises:
  cold start (job applied → both workers train); the RANK 0 worker's training process
  SIGKILLed (not the agent) → every worker trains again; worker-1's pod deleted with
  ``--grace-period=0 --force`` → the survivor trains again, and the replacement pod trains
  with WORLD_SIZE=2, timed from the watch event that announced it (its creationTimestamp
  has whole-second precision); the same with worker-0, the pod plain torchrun would host
  the c10d store in.  With ``--mindspore-python`` the cluster also runs the CPU MSJob
  sample, timed from creation to its Succeeded condition, alternating with by-hand runs.

Fault phases (issue 13, ``--phase``; cluster back-end only): each repetition gets a fresh
three-node cluster, the kind ``trainctl local up --nodes 3 --node-monitor-grace-period 10s
--node-lost-grace 5s`` starts (2 CPUs per node, so a replacement fits on the survivors),
and is timed from the fault to training again, the first ``[step]`` at the new WORLD_SIZE:

- ``node-kill``: elastic sample, the node of worker-0 killed → the survivor trains again;
  the replacement trains at full size on another node;
- ``node-freeze``: the same node frozen for 60 s, then thawed → the job completes, and the
  frozen pod's processes neither print a step after the thaw nor share a rank;
- ``static-node-kill``: ``samples/pytorch/ddp.yaml`` (Master + 2 Workers), the node of a
  Worker killed → all three train again;
- ``store-lost``: the elastic job's ``<job>-rdzv`` pod force-deleted → both workers train again;
- ``oom``: ``samples/pytorch/elastic-oom.yaml``, timed from the OOMKilled status → the
  relaunched pod (more memory) trains;
- ``scale-in``: elastic job at 3, a chosen worker (``pod-deletion-cost``) scaled in → the
  survivors train at 2; scaled out again → it trains at 3;
- ``reclaim``: ``samples/pytorch/elastic-spot.yaml`` on nodes with room for one worker each, a
  worker's node reclaimed with ``--notice`` (``trainctl local node preempt``) → the survivors
  train at 2; the machine boots again → the worker trains there at 3.

Each phase also says where the seconds went: the milestones of MILESTONES, from watch events
(pods) and polling (Node Ready conditions), timed when the bench saw them, and the training
script's lines. ``--phase faults`` selects all five; the default is ``basic`` (the
measurements above).

Usage: ``python hack/bench_recovery.py [--runs 5] [--backend torchrun --backend cluster] [--phase basic|faults|NAME ...] [--notice 30s] [--mindspore-python PY] [--json FILE]``
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

from trainctl.api import constants as c  # noqa: E402

from tests.support.conditions import condition  # noqa: E402
from tests.support.net import free_port  # noqa: E402
from tests.support.observer import JobObserver, LogLine  # noqa: E402
from tests.support.pods import container_status  # noqa: E402

if TYPE_CHECKING:
    from tests.support.cluster import E2E

TRAIN_SCRIPT = REPO / "samples" / "pytorch" / "train.py"
MINDSPORE_SCRIPT = REPO / "samples" / "mindspore" / "train.py"
PHASES = ("cold start → 1st step", "worker SIGKILL → training again",
          "pod SIGKILL → survivor trains alone", "replacement start → both train")
RDZV_CONF = "is_host=0,last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=5"  # the elastic sample's
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
        self.log.wait_for(lambda line, _: line.event == "store", timeout=120)  # imports torch: over 30 s at load average 11

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
    job = _sample_job("pytorch/elastic.yaml", args)
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


# --- issue 13: faults on a three-node cluster ---------------------------------------------------
#
# Each repetition of a fault phase gets a fresh three-node cluster (a killed node stays dead),
# the kind `trainctl local up --nodes 3 --node-monitor-grace-period 10s --node-lost-grace 5s`
# starts, with 2 CPUs per node so that a replacement always fits on the survivors.
FAULT_CLUSTER = {"nodes": 3, "node_cpu": "2", "node_monitor_grace_period": "10s",
                 "controller_args": ["--node-lost-grace", "5s"]}
STATIC_JOB = "pytorch-ddp"
OOM_JOB = "pytorch-elastic-oom"
FREEZE_SECONDS = 60.0
# The milestones of a recovery, in the order they happen; a phase reports those it saw.
MILESTONES = ("detection", "deletion", "created", "scheduling", "start", "worker start", "rendezvous", "first step")
MILESTONE_HELP = {
    "detection": "the node seen not Ready (or the fault seen in a pod status)",
    "deletion": "the lost pod seen deleting or gone",
    "created": "its replacement seen",
    "scheduling": "the replacement bound to a node",
    "start": "its container running",
    "worker start": "train.py's [start] line (after torchrun's rendezvous, elastic)",
    "rendezvous": "the process group formed ([resume] line)",
    "first step": "the first [step] at the new WORLD_SIZE",
}


class TimedObserver(JobObserver):
    """A :class:`JobObserver` that also notes when each pod milestone was first seen.

    ``seen[(uid, milestone)]`` is the ``time.monotonic()`` of the watch event that first
    showed it: ``bound``, ``running/N`` and ``terminated/N`` (container instance N),
    ``deleting``, ``deleted``. API timestamps have whole-second precision; watch events
    arrive milliseconds after the API server stored the change.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self.seen: dict[tuple[str, str], float] = {}
        self.reasons: dict[tuple[str, int], str] = {}  # (uid, instance) -> why it terminated

    def _on_pod(self, event: str, pod: dict) -> None:
        with self._changed:
            super()._on_pod(event, pod)
            now, uid = time.monotonic(), pod["metadata"]["uid"]
            status = container_status(pod)
            restarts = int(status.get("restartCount") or 0)
            marks = []
            if (pod.get("spec") or {}).get("nodeName"):
                marks.append("bound")
            for instance, state in ((restarts, status.get("state") or {}),
                                    (restarts - 1, status.get("lastState") or {})):
                if "running" in state and instance == restarts:
                    marks.append(f"running/{instance}")
                if "terminated" in state and instance >= 0:
                    marks.append(f"terminated/{instance}")
                    self.reasons.setdefault((uid, instance), state["terminated"].get("reason") or "")
            if pod["metadata"].get("deletionTimestamp") or event == "DELETED":
                marks.append("deleting")
            if event == "DELETED":
                marks.append("deleted")
            for mark in marks:
                self.seen.setdefault((uid, mark), now)


class NodeWatch:
    """When each node was first seen not Ready, by polling the Nodes (a handful) 4 times a second."""

    def __init__(self, api) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api)
        self.not_ready: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="node-watch", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.25):
            with contextlib.suppress(Exception):  # the API server is busy: ask again
                for node in self._core.list_node(_request_timeout=5).items:
                    ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
                    if ready is not None and ready.status != "True":
                        self.not_ready.setdefault(node.metadata.name, time.monotonic())

    def since(self, start: float) -> str:
        """Which nodes went not Ready, seconds after ``start``: a node other than the one a phase
        broke is a flap (its lease renewed late), and skews the run."""
        seen = ", ".join(f"{node} {at - start:.1f} s" for node, at in sorted(self.not_ready.items()))
        return f"not Ready after the job was applied: {seen or 'none'}"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One repetition of a fault phase: its headline times, where they went, and what else was seen."""

    times: dict[str, float]  # headline -> seconds from the fault
    breakdown: dict[str, dict[str, float]]  # recovery -> milestone -> seconds from the fault
    notes: dict[str, object]
    verdict: Optional[bool] = None  # phases with a yes/no result


@dataclasses.dataclass(frozen=True)
class FaultPhase:
    """A fault phase: its CLI name, its headlines with their goals, and how to run it once."""

    name: str
    title: str
    goals: dict[str, Optional[float]]  # headline -> goal in seconds (None: no time goal)
    measure: Callable[[E2E, TimedObserver, NodeWatch, argparse.Namespace], Outcome]
    job: Callable[[argparse.Namespace], dict]
    question: str = ""  # a yes/no result (Outcome.verdict) besides the times; a stalled run is a no
    cluster: Optional[dict] = None  # scratch_cluster options (default FAULT_CLUSTER)


def _started(run: TimedObserver, pod: str, after: float, world_size: Optional[int] = None,
             uid: Optional[str] = None, event: str = "start") -> Optional[LogLine]:
    """The first ``event`` line of ``pod`` read after ``after`` (at ``world_size``, from ``uid``)."""
    for line in run.lines:
        if (line.pod == pod and line.event == event and line.at >= after and (uid is None or line.uid == uid)
                and (world_size is None or int(line.fields.get("world_size", line.fields.get("WORLD_SIZE", -1))) == world_size)):
            return line
    return None


def _wait(run: TimedObserver, what: str, check: Callable[[], object], timeout: float = PHASE_TIMEOUT):
    try:
        return run.wait_for(what, check, timeout)
    except AssertionError as e:  # the observer's timeout, with the job's status and log tails
        raise TimeoutError(str(e)) from None


def _training(run: TimedObserver, pods: list[str], world_size: int, began: float) -> None:
    for pod in pods:
        _wait(run, f"{pod} training at {world_size}", functools.partial(_fresh_step, run, pod, began, world_size))


def _node(run: TimedObserver, pod: str) -> str:
    return _wait(run, f"{pod} bound", lambda: (run.pods.get(pod) or {}).get("spec", {}).get("nodeName"))


def _new_uid(run: TimedObserver, pod: str, old: set[str], timeout: float = PHASE_TIMEOUT) -> str:
    return _wait(run, f"a replacement {pod}", lambda: next((u for u in run.uids(pod) if u not in old), None), timeout)


def _recovery(run: TimedObserver, fault: float, pod: str, after: float, world_size: Optional[int], *,
              uid: Optional[str] = None, detected: Optional[float] = None, lost_uid: Optional[str] = None,
              step: Optional[LogLine] = None) -> dict[str, float]:
    """Seconds from ``fault`` to each milestone of ``pod``'s recovery that was seen."""
    at: dict[str, Optional[float]] = {"detection": detected}
    if lost_uid is not None:
        at["deletion"] = run.seen.get((lost_uid, "deleting"))
    if uid is not None:
        at["created"] = run.first_seen.get(uid)
        at["scheduling"] = run.seen.get((uid, "bound"))
        at["start"] = run.seen.get((uid, "running/0"))
    started = _started(run, pod, after, world_size, uid)
    at["worker start"] = started.at if started else None
    resumed = _started(run, pod, started.at if started else after, world_size, uid, event="resume")
    at["rendezvous"] = resumed.at if resumed else None
    step = step or _fresh_step(run, pod, after, world_size, uid=uid)
    at["first step"] = step.at if step else None
    return {name: round(when - fault, 2) for name, when in at.items() if when is not None}


def _layout(run: TimedObserver) -> dict[str, str]:
    return {pod: (obj.get("spec") or {}).get("nodeName", "") for pod, obj in sorted(run.pods.items())}


def _proxied_by(bench: E2E, service: str) -> str:
    """The node whose kubelet listens on ``service``'s ClusterIP. Every kubelet's userspace
    proxy tries to, but only one can bind an address, and a frozen one still accepts."""
    import psutil
    from kubernetes import client

    spec = client.CoreV1Api(bench.api).read_namespaced_service(service, "default").spec
    frontends = {(spec.cluster_ip, port.port) for port in spec.ports or []}
    kubelets = {kubelet.pid: name for name, kubelet in bench.cluster.kubelets.items()}
    owners = {kubelets.get(conn.pid, f"pid {conn.pid}") for conn in psutil.net_connections("tcp")
              if conn.status == psutil.CONN_LISTEN and (conn.laddr.ip, conn.laddr.port) in frontends}
    return ",".join(sorted(owners)) or "nobody"


def _before_fault(what: str, notes: dict[str, object]) -> None:
    """Say what is about to break, and how things stood: the explanation of a run that stalls."""
    print(f"  {what}: {notes}", flush=True)


def _sample_job(sample: str, args: argparse.Namespace, steps: Optional[int] = None, checkpoints: bool = True) -> dict:
    """``sample`` with the bench's training flags: ``steps`` (else ``--steps``), ``--step-sleep`` and,
    with ``checkpoints``, ``--checkpoint-every`` (else the sample's own)."""
    from tests.support.samples import load_sample, set_arg

    job = load_sample(sample)
    flags = {"--steps": args.steps if steps is None else steps, "--step-sleep": args.step_sleep}
    if checkpoints:
        flags["--checkpoint-every"] = args.checkpoint_every
    for flag, value in flags.items():
        set_arg(job, flag, str(value))
    return job


def _lose_worker_0_node(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace,
                        fault: Callable[[str], None]) -> tuple[float, str, dict[str, float], dict[str, object]]:
    """Break the node of worker-0 of a training elastic job; wait for the survivor and the
    replacement to train. The fault's time, the lost node, the headline times and notes."""
    w0, w1 = f"{ELASTIC_JOB}-worker-0", f"{ELASTIC_JOB}-worker-1"
    _training(run, [w0, w1], 2, 0.0)
    time.sleep(args.pause)
    lost, lost_uid = _node(run, w0), run.pods[w0]["metadata"]["uid"]
    notes: dict[str, object] = {"layout": _layout(run), "store_service_proxied_by": _proxied_by(bench, f"{ELASTIC_JOB}-rdzv")}
    if lost in (_node(run, w1), _node(run, f"{ELASTIC_JOB}-rdzv")):
        notes["shared_node"] = True  # the fault then takes more than worker-0
    _before_fault(f"breaking {lost}", notes)
    t0 = time.monotonic()
    fault(lost)
    # At any size: a dead peer's sockets close, so the survivor re-forms alone (WORLD_SIZE=1);
    # a frozen peer's stay open, so the survivor waits in its collective for the replacement.
    survived = _wait(run, f"{w1} training again", functools.partial(_fresh_step, run, w1, t0))
    notes["survivor_world_size"] = int(survived.fields["world_size"])
    # Whichever replacement trains (the controller may replace a replacement).
    rejoined = _wait(run, "a replacement training at 2", lambda: next(
        (step for uid in run.uids(w0) if uid != lost_uid for step in [_fresh_step(run, w0, t0, 2, uid=uid)] if step), None))
    uid = rejoined.uid
    notes["replacement_node"] = run.pods[w0]["spec"]["nodeName"]
    notes["replacements"] = len(run.uids(w0)) - 1
    if notes["replacement_node"] == lost:
        raise TimeoutError(f"the replacement {w0} landed on the lost node {lost}")
    breakdown = {
        "survivor": _recovery(run, t0, w1, t0, notes["survivor_world_size"], step=survived),
        "replacement": _recovery(run, t0, w0, t0, 2, uid=uid, detected=nodes.not_ready.get(lost),
                                 lost_uid=lost_uid, step=rejoined),
    }
    times = {"survivors train again": survived.at - t0, "replacement trains at full size": rejoined.at - t0}
    return t0, lost, times, {**notes, "breakdown": breakdown, "lost_uid": lost_uid}


def measure_node_kill(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """Elastic job, the node of worker-0 killed (kubelet and pod processes SIGKILLed)."""
    _, _, times, notes = _lose_worker_0_node(bench, run, nodes, args, bench.cluster.kill_node)
    return Outcome(times, notes.pop("breakdown"), notes)


def measure_node_freeze(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """Elastic job, the node of worker-0 frozen (SIGSTOP) for 60 s, then thawed: the job must
    finish, and the frozen pod's processes must neither print again nor share a rank."""
    t0, lost, times, notes = _lose_worker_0_node(bench, run, nodes, args, bench.cluster.freeze_node)
    time.sleep(max(0.0, t0 + FREEZE_SECONDS - time.monotonic()))
    thawed, thawed_wall = time.monotonic(), time.time()
    bench.cluster.thaw_node(lost)
    notes["running_at_thaw"] = run.job is not None and not any(
        condition(run.job, kind) for kind in ("Succeeded", "Failed"))
    try:
        outcome = run.wait_finished(PHASE_TIMEOUT * 3)
    except AssertionError as e:
        raise TimeoutError(str(e)) from None
    times["thawed → job finished"] = time.monotonic() - thawed
    lost_uid = notes["lost_uid"]
    # Steps the frozen pod's processes printed after the thaw (train.py stamps each with its
    # wall clock; lines printed before the freeze may still arrive late).
    ghosts = [line.text for line in run.lines if line.uid == lost_uid and line.event == "step"
              and float(line.fields.get("ts", 0)) >= thawed_wall]
    late = [line.text for line in run.lines if line.uid == lost_uid and line.at >= thawed]
    duplicates = run.duplicate_ranks()
    notes.update(outcome=outcome, steps_of_frozen_pod_after_thaw=len(ghosts), duplicate_ranks=duplicates,
                 lines_of_frozen_pod_read_after_thaw=len(late), first_late_lines=late[:3], last_late_line=late[-1:],
                 restart_count=(run.job or {}).get("status", {}).get("restartCount"),
                 pods_created=len(run.created))
    return Outcome(times, notes.pop("breakdown"), notes,
                   verdict=outcome == "Succeeded" and not ghosts and not duplicates)


def measure_static_node_kill(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """Static job (Master + 2 Workers), the node of a Worker killed: all three train again.
    The Worker is one that does not share its node with the Master, if there is one."""
    master = f"{STATIC_JOB}-master-0"
    workers = [f"{STATIC_JOB}-worker-0", f"{STATIC_JOB}-worker-1"]
    _training(run, [master, *workers], 3, 0.0)
    time.sleep(args.pause)
    layout = _layout(run)
    victim = next((w for w in workers if layout[w] != layout[master]), workers[0])
    lost, lost_uid = layout[victim], run.pods[victim]["metadata"]["uid"]
    notes: dict[str, object] = {"layout": layout, "victim": victim}
    before = {pod: set(run.uids(pod)) for pod in (master, *workers)}
    _before_fault(f"killing {lost}", notes)
    t0 = time.monotonic()
    bench.cluster.kill_node(lost)
    _new_uid(run, victim, {lost_uid})
    steps = {pod: _wait(run, f"{pod} training again", functools.partial(_fresh_step, run, pod, t0, 3))
             for pod in (master, *workers)}
    # The survivors' first collective after the loss fails or hangs; how they got out of it:
    notes["survivor_restarts"] = {pod: {"pods": len(run.uids(pod)), "container": container_status(run.pods[pod]).get(
        "restartCount", 0)} for pod in (master, *workers) if pod != victim}
    notes["replacement_node"] = run.pods[victim]["spec"]["nodeName"]
    breakdown = {"replacement": _recovery(run, t0, victim, t0, 3, uid=steps[victim].uid, detected=nodes.not_ready.get(lost),
                                          lost_uid=lost_uid, step=steps[victim])}
    for pod in (master, *workers):
        if pod != victim:
            fresh = steps[pod].uid if steps[pod].uid not in before[pod] else None  # recreated, or restarted in place
            breakdown[pod.removeprefix(STATIC_JOB + "-")] = _recovery(run, t0, pod, t0, 3, uid=fresh, step=steps[pod])
    return Outcome({"all train again": max(line.at for line in steps.values()) - t0}, breakdown, notes)


def measure_store_lost(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """Elastic job, its rendezvous store pod force-deleted: both workers train again.

    "Again" is the first step of a worker process that started after the loss; a worker that
    did not restart (its agent never needed the store) counts its longest pause between two
    steps in the window instead."""
    workers = [f"{ELASTIC_JOB}-worker-0", f"{ELASTIC_JOB}-worker-1"]
    store = f"{ELASTIC_JOB}-rdzv"
    _training(run, workers, 2, 0.0)
    time.sleep(args.pause)
    store_uid = _wait(run, "the store pod", lambda: run.pods.get(store))["metadata"]["uid"]
    notes: dict[str, object] = {"layout": _layout(run), "store_service_proxied_by": _proxied_by(bench, store)}
    _before_fault(f"deleting {store}", notes)
    t0 = time.monotonic()
    bench.kubectl("delete", "pod", store, "--force", "--grace-period=0", "--wait=false")
    uid = _new_uid(run, store, {store_uid})
    _wait(run, "the new store running", lambda: run.seen.get((uid, "running/0")))
    window = args.store_window
    steps: dict[str, LogLine] = {}
    for pod in workers:
        with contextlib.suppress(TimeoutError):
            steps[pod] = _wait(run, f"{pod} restarted and training", functools.partial(_fresh_step, run, pod, t0, 2),
                               max(0.0, t0 + window - time.monotonic()))
    times: dict[str, float] = {}
    breakdown: dict[str, dict[str, float]] = {}
    store_marks = {"deletion": run.seen.get((store_uid, "deleting")), "created": run.first_seen.get(uid),
                   "scheduling": run.seen.get((uid, "bound")), "start": run.seen.get((uid, "running/0"))}
    breakdown["store"] = {k: round(v - t0, 2) for k, v in store_marks.items() if v is not None}
    stalls: dict[str, float] = {}
    for pod in workers:
        if pod in steps:
            breakdown[pod.removeprefix(ELASTIC_JOB + "-")] = _recovery(run, t0, pod, t0, 2, step=steps[pod])
            stalls[pod] = steps[pod].at - t0
        else:  # never restarted: the longest pause between its steps around the loss
            at = [line.at for line in run.lines if line.pod == pod and line.event == "step" and line.at >= t0 - 1]
            stalls[pod] = max((b - a for a, b in zip(at, at[1:], strict=False)), default=float("nan"))
            notes[f"{pod}_restarted"] = False
    times["all workers train again"] = max(stalls.values())
    notes["worker_starts_after_loss"] = {pod: len(run.events("start", pod=pod, since=t0)) for pod in workers}
    return Outcome(times, breakdown, notes)


def _memory_limit(pod: dict) -> str:
    return ((pod["spec"]["containers"][0].get("resources") or {}).get("limits") or {}).get("memory", "")


def measure_oom(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """The OOM sample: each Worker holds more than its first memory limit, is OOMKilled, and
    (opted in) relaunched with more memory. Timed from the watch event that showed the
    OOMKilled status, per Worker; the headline is the slower Worker. A stall reports the
    milestones the relaunch did reach."""
    workers = [f"{OOM_JOB}-worker-0", f"{OOM_JOB}-worker-1"]
    times: dict[str, float] = {}
    breakdown: dict[str, dict[str, float]] = {}
    notes: dict[str, object] = {}

    def oom_killed(pod: str) -> Optional[tuple[float, str]]:
        uids = set(run.uids(pod))
        return next(((run.seen[(uid, f"terminated/{instance}")], uid) for (uid, instance), reason in run.reasons.items()
                     if uid in uids and reason == "OOMKilled"), None)

    killed_at = {pod: _wait(run, f"{pod} OOMKilled", functools.partial(oom_killed, pod)) for pod in workers}
    for pod in workers:
        t0, oom_uid = killed_at[pod]
        name = pod.removeprefix(OOM_JOB + "-")
        started = [line.at for line in run.lines if line.uid == oom_uid and line.event == "start" and line.at <= t0]
        if started:  # train.py allocates right after its [start] line: the kill is between the two
            notes[f"{name}_start_line_to_oom_seen_s"] = round(t0 - started[-1], 2)
        try:
            uid = _new_uid(run, pod, {oom_uid})
            step = _wait(run, f"{pod} relaunched and training", functools.partial(_fresh_step, run, pod, t0, uid=uid))
        except TimeoutError as e:
            fresh = [u for u in run.uids(pod) if u != oom_uid]
            reached = _recovery(run, t0, pod, t0, None, uid=fresh[0] if fresh else None, lost_uid=oom_uid)
            raise TimeoutError(f"{e}\n--- {pod} relaunch reached (seconds after OOMKilled seen): {reached}") from None
        relaunched = run.pods[pod]
        annotations = relaunched["metadata"].get("annotations") or {}
        notes[f"{name}_memory"] = f"{_memory_limit(relaunched)} ({annotations.get(c.ANNOTATION_OOM_MEMORY, 'no annotation')})"
        breakdown[name] = _recovery(run, t0, pod, t0, int(step.fields["world_size"]), uid=uid,
                                    lost_uid=oom_uid, step=step)
        times[f"{name} relaunched and training"] = step.at - t0
    times["OOMKilled → relaunched and training"] = max(times.values())
    notes["pods_created"] = [(name, uid[:8]) for name, uid in run.created]
    return Outcome(times, breakdown, notes)


def _last_step(run: TimedObserver, world_size: int, before: LogLine) -> int:
    """The highest step the workers printed at ``world_size`` before ``before`` was printed
    (the ``ts`` the script wrote, not when the line arrived: logs lag)."""
    until = float(before.fields["ts"])
    return max((line.int("step") for line in run.lines if line.event == "step" and line.int("world_size") == world_size
                and float(line.fields["ts"]) < until), default=0)


def _elastic_at_three(args: argparse.Namespace) -> dict:
    job = _sample_job("pytorch/elastic.yaml", args)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    return job


def measure_scale_in(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """Elastic job at 3 workers; worker-1 chosen (``pod-deletion-cost: -100``) and the job
    scaled to 2: the survivors train again at 2 (steps redone: from the last step before the
    scale back to the checkpoint they resumed from); then scaled to 3: worker-1 comes back.
    The verdict: worker-1, and only it, went; the survivors' pods were kept; no restart counted."""
    workers = [f"{ELASTIC_JOB}-worker-{i}" for i in range(3)]
    chosen, survivors = workers[1], [workers[0], workers[2]]
    _training(run, workers, 3, 0.0)
    time.sleep(args.pause)
    kept = {pod: run.pods[pod]["metadata"]["uid"] for pod in survivors}
    chosen_uid = run.pods[chosen]["metadata"]["uid"]
    bench.kubectl("annotate", "pod", chosen, "controller.kubernetes.io/pod-deletion-cost=-100")
    t0 = time.monotonic()
    bench.kubectl("scale", "pytorchjob", ELASTIC_JOB, "--replicas=2")
    steps = {pod: _wait(run, f"{pod} training at 2", functools.partial(_fresh_step, run, pod, t0, 2)) for pod in survivors}
    shrunk = max(step.at for step in steps.values())
    first = min(steps.values(), key=lambda step: float(step.fields["ts"]))
    redone = _last_step(run, 3, first) - first.int("step") + 1
    gone = _wait(run, f"{chosen} gone", lambda: chosen not in run.pods or None)
    time.sleep(args.pause)
    t1 = time.monotonic()
    bench.kubectl("scale", "pytorchjob", ELASTIC_JOB, "--replicas=3")
    back = _wait(run, f"{chosen} back at 3", lambda: next(
        (step for uid in run.uids(chosen) if uid != chosen_uid for step in [_fresh_step(run, chosen, t1, 3, uid=uid)] if step), None))
    restarts = (bench.kubectl.json("get", "pytorchjob", ELASTIC_JOB).get("status") or {}).get("restartCount") or 0
    verdict = bool(gone) and all(run.uids(pod)[-1] == uid for pod, uid in kept.items()) and not restarts
    times = {"scale in → survivors train at 2": shrunk - t0, "scale out → back at 3": back.at - t1}
    return Outcome(times, {}, {"steps_redone": redone, "restart_count": restarts,
                               "survivor_restarted_steps": {p: s.int("step") for p, s in steps.items()}}, verdict)


SPOT_JOB = "pytorch-elastic-spot"
# One CPU a node and 700m a worker: one worker a node, so a reclaimed worker waits for its
# machine to come back (as on a full spot pool) and the job trains on at the smaller size.
RECLAIM_CLUSTER = {**FAULT_CLUSTER, "node_cpu": "1", "controlplane_args": ["--controllers", "node-lifecycle"]}


def _spot_one_worker_a_node(args: argparse.Namespace) -> dict:
    job = _sample_job("pytorch/elastic-spot.yaml", args)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "700m"
    return job


def measure_reclaim(bench: E2E, run: TimedObserver, nodes: NodeWatch, args: argparse.Namespace) -> Outcome:
    """The spot sample at 3 workers, one a node; the node of a worker (not the store's) reclaimed
    with ``--notice`` (``trainctl local node preempt``): the survivors train again at 2 (steps
    redone: from the last step at 3 to the checkpoint they resumed from); then the machine boots
    again as a new Node and the worker trains there at 3. The verdict: the survivors kept their
    pods, the job counted no restart and did not fail."""
    from trainctl.cluster.faults import NODE_FAULTS

    workers = [f"{SPOT_JOB}-worker-{i}" for i in range(3)]
    _training(run, workers, 3, 0.0)
    time.sleep(args.pause)
    store_node = _node(run, f"{SPOT_JOB}-rdzv")
    victim = next(pod for pod in (workers[1], workers[2], workers[0]) if _node(run, pod) != store_node)
    node, victim_uid = _node(run, victim), run.pods[victim]["metadata"]["uid"]
    survivors = [pod for pod in workers if pod != victim]
    kept = {pod: run.pods[pod]["metadata"]["uid"] for pod in survivors}
    _before_fault(f"reclaiming {node} ({victim}) with {args.notice} notice", {"layout": _layout(run)})
    t0 = time.monotonic()
    NODE_FAULTS["preempt"](bench.cluster, node, {"notice": args.notice})  # returns once the machine is gone
    steps = {pod: _wait(run, f"{pod} training at 2", functools.partial(_fresh_step, run, pod, t0, 2)) for pod in survivors}
    shrunk = max(step.at for step in steps.values())
    first = min(steps.values(), key=lambda step: float(step.fields["ts"]))
    redone = _last_step(run, 3, first) - first.int("step") + 1
    time.sleep(args.pause)
    t1 = time.monotonic()
    bench.cluster.start_node(node)
    back = _wait(run, f"{victim} back at 3", lambda: next(
        (step for uid in run.uids(victim) if uid != victim_uid for step in [_fresh_step(run, victim, t1, 3, uid=uid)] if step), None))
    job = bench.kubectl.json("get", "pytorchjob", SPOT_JOB)
    restarts = (job.get("status") or {}).get("restartCount") or 0
    verdict = all(run.uids(pod)[-1] == uid for pod, uid in kept.items()) and not restarts and condition(job, "Failed") is None
    times = {"notice → survivors train at 2": shrunk - t0, "node back → trains at 3": back.at - t1}
    return Outcome(times, {}, {"steps_redone": redone, "restart_count": restarts, "victim": victim, "node": node,
                               "survivor_restarted_steps": {p: s.int("step") for p, s in steps.items()}}, verdict)


FAULT_PHASES = {phase.name: phase for phase in (
    FaultPhase("node-kill", "elastic job, node of worker-0 killed",
               {"survivors train again": 10.0, "replacement trains at full size": 25.0},
               measure_node_kill, lambda args: _sample_job("pytorch/elastic.yaml", args)),
    FaultPhase("node-freeze", f"elastic job, node of worker-0 frozen {FREEZE_SECONDS:.0f} s, then thawed",
               {"survivors train again": None, "replacement trains at full size": None, "thawed → job finished": None},
               measure_node_freeze, lambda args: _sample_job("pytorch/elastic.yaml", args, args.freeze_steps),
               "job completes, no duplicate rank"),
    FaultPhase("static-node-kill", "static job (Master + 2 Workers), node of a Worker killed",
               {"all train again": 30.0}, measure_static_node_kill,
               lambda args: _sample_job("pytorch/ddp.yaml", args)),
    FaultPhase("store-lost", "rendezvous store pod force-deleted",
               {"all workers train again": 10.0}, measure_store_lost,
               lambda args: _sample_job("pytorch/elastic.yaml", args)),
    FaultPhase("scale-in", "elastic job, a chosen worker scaled in (pod-deletion-cost), then out again",
               {"scale in → survivors train at 2": None, "scale out → back at 3": None}, measure_scale_in,
               lambda args: _elastic_at_three(args), "the chosen worker alone went, no restart counted"),
    FaultPhase("reclaim", "spot sample, one worker a node, a worker's node reclaimed with notice, then back",
               {"notice → survivors train at 2": None, "node back → trains at 3": None}, measure_reclaim,
               _spot_one_worker_a_node, "survivors kept their pods, no restart, no failure", RECLAIM_CLUSTER),
    FaultPhase("oom", "worker OOMKilled, opted in to a relaunch with more memory",
               {"OOMKilled → relaunched and training": 10.0}, measure_oom,
               lambda args: _sample_job("pytorch/elastic-oom.yaml", args, checkpoints=False)),
)}
BASIC_PHASES = "basic"  # the pod-level phases above (and MindSpore): cold start, worker SIGKILL, pod lost


def report_stall(what: str, error: TimeoutError) -> None:
    """A stall is a result, not a reason to stop: the caller counts it and runs again; the
    diagnosis (job status, pods, log tails) goes to stderr, its first line to stdout."""
    print(f"{what}: STALLED: {error}", file=sys.stderr, flush=True)
    print(f"{what}: stalled ({str(error).splitlines()[0]})", flush=True)


def run_fault_phase(phase: FaultPhase, args: argparse.Namespace) -> tuple[list[Outcome], int]:
    """``args.runs`` repetitions of ``phase``, each on a fresh three-node cluster; the outcomes
    and how many runs stalled (a stall is a result: its diagnosis goes to stderr)."""
    from trainctl.cluster.local_cluster import ClusterError
    from trainctl.launch.job_kinds import kind_of

    from tests.support.cluster import scratch_cluster

    outcomes: list[Outcome] = []
    stalls = 0
    for repetition in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="bench-faults-") as root, contextlib.ExitStack() as stack:
            try:
                bench = stack.enter_context(scratch_cluster(Path(root), **(phase.cluster or FAULT_CLUSTER)))
            except ClusterError as e:
                raise SystemExit(f"bench_recovery: {e}") from None
            nodes = NodeWatch(bench.api)
            stack.callback(nodes.close)
            job = phase.job(args)
            run = TimedObserver(bench.api, kind_of(job), job["metadata"]["name"]).start()
            stack.callback(run.__exit__, None, None, None)
            applied = time.monotonic()
            bench.kubectl.apply(job)
            try:
                outcome = phase.measure(bench, run, nodes, args)
            except TimeoutError as e:
                stalls += 1
                report_stall(f"{phase.name} run {repetition}", TimeoutError(f"{e}\n--- {nodes.since(applied)}"))
                continue
            outcome.notes["nodes"] = nodes.since(applied)
        outcomes.append(outcome)
        verdict = "" if outcome.verdict is None else f" ok={'yes' if outcome.verdict else 'no'}"
        print(f"{phase.name} run {repetition}:{verdict} " + ", ".join(f"{k} {v:.2f}" for k, v in outcome.times.items())
              + f"  {outcome.breakdown}  {outcome.notes}", flush=True)
    return outcomes, stalls


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})" if values else "–"


def print_fault_tables(results: dict[str, tuple[list[Outcome], int]], runs: int) -> None:
    """The results table (one row per headline) and, per phase, where the seconds went."""
    print()
    print(f"issue-13 fault phases on a 3-node cluster, median (min–max) seconds over {runs} run(s)")
    print("| phase | goal | measured | runs | |")
    print("|---|---|---|---|---|")
    for name, (outcomes, stalls) in results.items():
        phase = FAULT_PHASES[name]
        for headline, goal in phase.goals.items():
            values = [o.times[headline] for o in outcomes if headline in o.times]
            verdict = ""  # a stalled run misses every goal of its phase
            if goal is not None:
                verdict = "met" if values and not stalls and statistics.median(values) <= goal else "missed"
            print(f"| {phase.title}: {headline} | {'' if goal is None else f'≤ {goal:.0f} s'} | {_cell(values)} "
                  f"| {len(values)}{f' ({stalls} stalled)' if stalls else ''} | {verdict} |")
        if phase.question:
            yes = sum(bool(o.verdict) for o in outcomes)
            print(f"| {phase.title}: {phase.question} | yes | {yes} of {len(outcomes) + stalls} | "
                  f"{len(outcomes)}{f' ({stalls} stalled)' if stalls else ''} | "
                  f"{'met' if yes == len(outcomes) + stalls else 'missed'} |")
    rows = [(name, recovery, [o.breakdown.get(recovery, {}) for o in outcomes])
            for name, (outcomes, _) in results.items() for recovery in sorted({r for o in outcomes for r in o.breakdown})]
    if not rows:
        return
    print()
    print("where the seconds go: median seconds from the fault to each milestone (and since the one before)")
    print("| phase: recovery | " + " | ".join(MILESTONES) + " |")
    print("|---|" + "---|" * len(MILESTONES))
    for name, recovery, marks in rows:
        print(f"| {name}: {recovery} | " + " | ".join(_milestone_cell(marks, milestone) for milestone in MILESTONES) + " |")
    print()
    print("; ".join(f"{milestone}: {meaning}" for milestone, meaning in MILESTONE_HELP.items()))


def _milestone_cell(marks: list[dict[str, float]], milestone: str) -> str:
    """Median time of ``milestone`` over the runs that saw it, and the median gap to the milestone before it."""
    at = [m[milestone] for m in marks if milestone in m]
    if not at:
        return ""
    earlier = MILESTONES[:MILESTONES.index(milestone)]
    gaps = [m[milestone] - max((m[k] for k in earlier if k in m), default=m[milestone]) for m in marks if milestone in m]
    return f"{statistics.median(at):.2f} (+{statistics.median(gaps):.2f})" if any(k in m for m in marks for k in earlier) \
        else f"{statistics.median(at):.2f}"


def fault_results_json(results: dict[str, tuple[list[Outcome], int]]) -> dict[str, object]:
    return {name: {"stalled": stalls, "runs": [dataclasses.asdict(o) for o in outcomes]}
            for name, (outcomes, stalls) in results.items()}


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
    p.add_argument("--phase", action="append", choices=[BASIC_PHASES, "faults", *FAULT_PHASES],
                   help=f"what to measure, repeatable (default: {BASIC_PHASES}); {BASIC_PHASES}: cold start, worker "
                        "SIGKILL, pod lost, on torchrun and one cluster; faults: all of "
                        f"{', '.join(FAULT_PHASES)}, each run on a fresh 3-node cluster")
    p.add_argument("--freeze-steps", type=int, default=1400,
                   help="node-freeze: training steps, enough to outlast the freeze (the job must finish)")
    p.add_argument("--store-window", type=float, default=60.0,
                   help="store-lost: seconds to wait for a worker to restart before timing its longest pause instead")
    p.add_argument("--notice", default="30s", help="the reclaim phase's notice (trainctl local node preempt --notice)")
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
    chosen = set(args.phase or [BASIC_PHASES])
    if "faults" in chosen:
        chosen |= set(FAULT_PHASES)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    faults: dict[str, tuple[list[Outcome], int]] = {}
    if "cluster" in backends:
        for name in (name for name in FAULT_PHASES if name in chosen):
            faults[name] = run_fault_phase(FAULT_PHASES[name], args)
    elif chosen - {BASIC_PHASES, "faults"}:
        print("bench_recovery: the fault phases run on the cluster back-end only", file=sys.stderr)
    if faults:
        print_fault_tables(faults, args.runs)
    if BASIC_PHASES not in chosen:
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.json:
            args.json.write_text(json.dumps(fault_results_json(faults), indent=2))
        return 0
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
        from trainctl.cluster.local_cluster import ClusterError

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
                    stalls += 1
                    report_stall(f"cluster run {run}", e)
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
        args.json.write_text(json.dumps({**results, **fault_results_json(faults)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
