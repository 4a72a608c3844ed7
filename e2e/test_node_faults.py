"""Real torch jobs on a three-node embedded cluster whose nodes die or freeze.

A node that stops renewing its Lease becomes Ready=Unknown after the node monitor grace
period; the controller then treats the job's pods on it as lost after ``--node-lost-grace``,
force-deletes them and creates replacements on the nodes that are still Ready. Each test
gets its own cluster (a killed node stays killed) with short grace periods, and every node
has room for two workers, so a replacement always fits on the survivors; the scheduler
spreads a job's pods (least requested first), so each worker starts on a node of its own.

Covered: an elastic job survives the node of worker-0 dying (the replacement rejoins, the
job ends at full size); an elastic job's node frozen for a minute and then thawed (its
pod is replaced while it is frozen; on thaw its kubelet kills the old processes before
they run again, so they never print a step, rejoin or write a checkpoint); a static job
(Master + 2 Workers) whose lone Worker's node dies (all pods are restarted and train
together again; the time from the kill to that is printed); a static job spread over the
three nodes trains together; an elastic job whose node dies after torchrun finished, during
the upload its command runs next (the replacement finds the rendezvous closed; the store is
replaced and the job succeeds without training again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from kubernetes import client

from trainctl.cluster.kubelet.kubelet import processes_dir
from trainctl.cluster.kubelet.runtime import ProcessRegistry, marked_processes, process_start_time

from tests.support.cluster import E2E, scratch_cluster
from tests.support.conditions import condition
from tests.support.observer import JobObserver, LogLine
from tests.support.samples import load_sample, set_arg
from tests.support.waiting import wait_on

pytestmark = pytest.mark.e2e

ELASTIC = "pytorch-elastic"
W0, W1 = f"{ELASTIC}-worker-0", f"{ELASTIC}-worker-1"
DETECT_BOUND = 90.0  # seconds: node grace + lost grace + a replacement training again, on a loaded machine
FREEZE_SECONDS = 60.0
# The freeze holds at least FREEZE_SECONDS and until the replacement trains; how long that
# takes depends on the machine's load, so it is bounded generously, not timed.
FREEZE_LIMIT_SECONDS = 240.0
FROZEN_JOB_STEPS = 1000  # ~20 steps/s: the job still trains for a while after the thaw
DDP = "pytorch-ddp"
DDP_PODS = (f"{DDP}-master-0", f"{DDP}-worker-0", f"{DDP}-worker-1")


@pytest.fixture
def nodes_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, nodes=3, node_cpu="2", node_monitor_grace_period="10s",
                         controller_args=["--node-lost-grace", "5s"]) as env:
        yield env


def world_sizes(run: JobObserver, pods: set[str]) -> list[int]:
    """The WORLD_SIZE of every training round, in order, from the [start] lines of ``pods``."""
    history: list[int] = []
    for line in run.events("start"):
        if line.pod in pods and (not history or history[-1] != line.int("WORLD_SIZE")):
            history.append(line.int("WORLD_SIZE"))
    return history


def node_of(run: JobObserver, pod: str) -> str:
    return run.wait_for(f"{pod} scheduled", lambda: (run.pods.get(pod) or {}).get("spec", {}).get("nodeName"), 60)


def job_events(env: E2E, job: str) -> list[Any]:
    events = client.CoreV1Api(env.api).list_namespaced_event("default").items
    return [e for e in events if e.involved_object.name == job]


def elastic_job(steps: int) -> dict[str, Any]:
    job = load_sample("pytorch/elastic.yaml")
    set_arg(job, "--steps", str(steps))
    return job


def step_of(pod: str, world_size: int, *, uid: str | None = None):
    def match(line: LogLine) -> bool:
        return (line.pod == pod and line.event == "step" and line.int("world_size") == world_size
                and (uid is None or line.uid == uid))
    return match


def test_elastic_job_survives_the_node_of_worker_0_dying(nodes_env: E2E) -> None:
    with nodes_env.run(elastic_job(600)) as run:
        run.wait_line("worker-1 training at world_size=2", lambda ln: step_of(W1, 2)(ln) and ln.int("step") >= 20, 180)
        lost_node, lost_uid = node_of(run, W0), run.pods[W0]["metadata"]["uid"]
        killed = time.monotonic()
        nodes_env.cluster.kill_node(lost_node)

        replacement = run.wait_for("a replacement worker-0",
                                   lambda: [u for u in run.uids(W0) if u != lost_uid], DETECT_BOUND)
        run.wait_line("the replacement training at world_size=2", step_of(W0, 2, uid=replacement[0]),
                      DETECT_BOUND, since=killed)
        assert run.pods[W0]["spec"]["nodeName"] != lost_node, run.dump()

        finished = run.wait_succeeded(timeout=400)
        assert condition(finished, "Succeeded")
        history = world_sizes(run, {W0, W1})
        assert history[0] == 2 and history[-1] == 2 and set(history) <= {1, 2}, f"{history}\n{run.dump()}"
        assert not run.duplicate_ranks(), f"duplicate ranks: {run.duplicate_ranks()}\n{run.dump()}"
        done = run.events("done")
        assert sorted(ln.int("rank") for ln in done) == [0, 1], run.dump()
        assert {ln.int("world_size") for ln in done} == {2}, run.dump()
        assert finished["status"].get("restartCount") == 1, finished["status"]
        assert len(run.uids(W0)) == 2 and len(run.uids(W1)) == 1, run.dump()
        named = [e for e in job_events(nodes_env, ELASTIC) if W0 in (e.message or "") and lost_node in (e.message or "")]
        assert named, [e.message for e in job_events(nodes_env, ELASTIC)]


def test_a_static_job_spread_over_three_nodes_trains_together(nodes_env: E2E) -> None:
    """Each node hands out addresses from its own slice of the pod range, and a kubelet
    resolves a Service whose pod runs on another node from that pod's reported address."""
    with nodes_env.run(load_sample("pytorch/ddp.yaml")) as run:
        finished = run.wait_succeeded(timeout=300)
        assert condition(finished, "Succeeded")
        pods = [run.pods[name] for name in ("pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1")]
        assert len({p["spec"]["nodeName"] for p in pods}) > 1, run.dump()
        assert len({p["status"]["podIP"] for p in pods}) == 3, run.dump()
        done = run.events("done")
        assert sorted(ln.int("rank") for ln in done) == [0, 1, 2], run.dump()
        assert {ln.int("world_size") for ln in done} == {3}, run.dump()


# --- a frozen node thaws ---------------------------------------------------------------------

def last_starts(run: JobObserver, pods: set[str]) -> dict[str, LogLine]:
    """Each pod's latest [start] line: the rank and WORLD_SIZE it trains at now."""
    return {ln.pod: ln for ln in run.events("start") if ln.pod in pods}


def alone_on_its_node(run: JobObserver, pod: str) -> str:
    """The node of ``pod``, which must run no other pod of the job (the scheduler spreads them)."""
    node = node_of(run, pod)
    neighbours = [name for name, other in run.pods.items() if name != pod and other["spec"].get("nodeName") == node]
    assert not neighbours, f"{pod} shares node {node} with {neighbours}\n{run.dump()}"
    return node


def rank0_alone_on_a_node(run: JobObserver, timeout: float) -> tuple[dict[str, LogLine], str, str, str]:
    """Once both Workers train at world_size=2: their last [start] lines, the one holding rank
    0 (the c10d store's host, the victim of a node fault), its node and its pod's uid."""
    run.wait_for("both workers training at world_size=2", lambda: all(
        any(step_of(pod, 2)(ln) and ln.int("step") >= 20 for ln in run.events("step", pod)) for pod in (W0, W1)), timeout)
    starts = last_starts(run, {W0, W1})
    victim = next(pod for pod, ln in starts.items() if ln.int("RANK") == 0 and ln.int("WORLD_SIZE") == 2)
    return starts, victim, alone_on_its_node(run, victim), run.pods[victim]["metadata"]["uid"]


Process = tuple[int, str]  # pid and kernel start time: the same process, not a reused pid


def pod_processes(env: E2E, node: str, uid: str) -> set[Process]:
    """Every live process of the pod ``uid`` on ``node``: its containers' process groups and
    what left them (torchrun's workers)."""
    pids: list[int] = []
    for record in ProcessRegistry(processes_dir(env.cluster.directory, node)).records():
        if record.pod_uid == uid and record.alive():
            pids += [record.pid, *marked_processes(record.container_id)]
    return {(pid, start) for pid in pids if (start := process_start_time(pid)) is not None}


def pid_in_pod(pid: int) -> int:
    """``pid`` as the pod sees it: in the pod sandbox's PID namespace, the innermost of
    /proc/PID/status's ``NSpid`` (without the sandbox, the same number)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return pid


def still_running(processes: set[Process]) -> set[Process]:
    return {(pid, start) for pid, start in processes if process_start_time(pid) == start}


def open_logs(env: E2E, uid: str) -> list[IO[bytes]]:
    """The pod's container logs, opened now: whatever its processes print later can be read
    even after the kubelets removed the files with the pod."""
    return [open(path, "rb") for path in sorted((env.cluster.directory / "pods" / uid).glob("*/*.log"))]


def printed(logs: list[IO[bytes]], pod: str) -> list[LogLine]:
    """The lines in ``logs`` (CRI format: time, stream, tag, text)."""
    lines = []
    for log in logs:
        for record in log.read().decode("utf-8", errors="replace").splitlines():
            parts = record.split(" ", 3)
            if len(parts) == 4:
                lines.append(LogLine(pod, parts[3], 0.0))
    return lines


def saved_step(env: E2E, job: str) -> int:
    """The step of the job's checkpoint (which must load: nothing wrote half of it)."""
    import torch  # only here: the other tests need no torch in the test process

    return int(torch.load(env.checkpoints / job / "checkpoint.pt", map_location="cpu",
                          weights_only=True)["step"])


@pytest.mark.timeout(900)  # its waits add up past the default on a loaded machine
def test_a_frozen_node_thaws_after_its_pod_was_replaced_and_its_old_processes_never_run_again(nodes_env: E2E) -> None:
    """Rank 0's node freezes for a minute or more: its pod is replaced meanwhile and the job trains
    at full size again. On thaw that node's kubelet finds the pod gone from the API and
    kills its processes before they run again: no step, no checkpoint, no rejoining (which
    would restart the survivors into a round of three), and nothing counted twice."""
    with nodes_env.run(elastic_job(FROZEN_JOB_STEPS)) as run:
        starts, victim, frozen_node, old_uid = rank0_alone_on_a_node(run, 180)
        old_processes = pod_processes(nodes_env, frozen_node, old_uid)
        old_pid = starts[victim].int("pid")  # train.py's, under torchrun
        assert old_pid in {pid_in_pod(pid) for pid, _ in old_processes}, (old_pid, old_processes)
        old_logs = open_logs(nodes_env, old_uid)
        assert old_logs, run.dump()

        frozen = time.monotonic()
        nodes_env.cluster.freeze_node(frozen_node)
        replacement = run.wait_for(f"a replacement {victim} while its node is frozen",
                                   lambda: [u for u in run.uids(victim) if u != old_uid], FREEZE_LIMIT_SECONDS)
        run.wait_line("the replacement training at world_size=2 while the node is frozen",
                      step_of(victim, 2, uid=replacement[0]), frozen + FREEZE_LIMIT_SECONDS - time.monotonic(), since=frozen)
        assert run.pods[victim]["spec"]["nodeName"] != frozen_node, run.dump()
        assert still_running(old_processes) == old_processes, "the frozen node's processes must wait for the thaw"
        time.sleep(max(0.0, frozen + FREEZE_SECONDS - time.monotonic()))

        step_before_thaw = saved_step(nodes_env, ELASTIC)
        printed(old_logs, victim)  # what it printed before the freeze
        thawed_at, thawed = time.time(), time.monotonic()
        nodes_env.cluster.thaw_node(frozen_node)
        left = wait_on(threading.Condition(), lambda: not still_running(old_processes), 20, recheck=0.1)
        assert left, f"the thawed node's kubelet left the old pod's processes running: {still_running(old_processes)}"
        print(f"\n[frozen node] thawed {thawed - frozen:.1f}s after the freeze, at step {step_before_thaw};"
              f" the old processes were gone {time.monotonic() - thawed:.2f}s after the thaw")
        assert saved_step(nodes_env, ELASTIC) >= step_before_thaw, "the old rank 0 wrote an older checkpoint"
        checkpoints = nodes_env.checkpoints / ELASTIC
        assert not list(checkpoints.glob(f".*.{old_pid}.tmp")), "the old rank 0 began a checkpoint after the thaw"

        finished = run.wait_succeeded(timeout=400)
        assert condition(finished, "Succeeded")
        # Lines it printed just before the freeze may reach the log after the thaw; a step
        # says when it was taken, a (re)start or the end can only come from a process that ran.
        late = [ln.text for ln in printed(old_logs, victim)
                if ln.event in ("start", "done") or (ln.event == "step" and float(ln.fields["ts"]) >= thawed_at)]
        assert not late, f"the old {victim} ran after the thaw: {late}"
        for log in old_logs:
            log.close()
        assert not run.events("start", since=thawed), f"the survivors restarted after the thaw\n{run.dump()}"
        assert run.events("step", since=thawed), f"the job ended before the thaw: train longer\n{run.dump()}"
        history = world_sizes(run, {W0, W1})
        assert history[0] == 2 and history[-1] == 2 and set(history) <= {1, 2}, f"{history}\n{run.dump()}"
        assert not run.duplicate_ranks(), f"duplicate ranks: {run.duplicate_ranks()}\n{run.dump()}"
        done = run.events("done")
        assert sorted(ln.int("rank") for ln in done) == [0, 1] and {ln.int("world_size") for ln in done} == {2}, run.dump()
        assert {ln.uid for ln in done} == {run.pods[W0]["metadata"]["uid"], run.pods[W1]["metadata"]["uid"]}, run.dump()
        assert finished["status"].get("restartCount") == 1, finished["status"]
        assert len(run.uids(victim)) == 2 and len(run.uids(({W0, W1} - {victim}).pop())) == 1, run.dump()
        assert saved_step(nodes_env, ELASTIC) == FROZEN_JOB_STEPS


# --- a static job loses a node -----------------------------------------------------------------

def test_a_static_job_trains_again_after_a_lone_workers_node_dies(nodes_env: E2E) -> None:
    """Master + 2 Workers, one per node; the node of a Worker dies. The survivors' collectives
    fail, the controller restarts the job's pods (counted once) and the lost Worker's
    replacement lands on a node that is still Ready; all three train together again."""
    job = load_sample("pytorch/ddp.yaml")
    set_arg(job, "--steps", "400")
    with nodes_env.run(job) as run:
        run.wait_for("all pods training at world_size=3", lambda: all(
            any(step_of(pod, 3)(ln) and ln.int("step") >= 10 for ln in run.events("step", pod)) for pod in DDP_PODS), 180)
        victim = f"{DDP}-worker-1"
        lost_node, old_uids = alone_on_its_node(run, victim), {pod: run.pods[pod]["metadata"]["uid"] for pod in DDP_PODS}
        killed = time.monotonic()
        nodes_env.cluster.kill_node(lost_node)

        def training_again() -> dict[str, LogLine] | None:
            first = {pod: next((ln for ln in run.events("step", pod, since=killed)
                                if ln.uid != old_uids[pod] and ln.int("world_size") == 3), None) for pod in DDP_PODS}
            return first if all(first.values()) else None

        first_steps = run.wait_for("every pod training again at world_size=3", training_again, DETECT_BOUND)
        seconds = max(ln.at for ln in first_steps.values()) - killed
        print(f"\n[static job, node of {victim} killed] all pods training again after {seconds:.1f}s (goal <= 30 s)")
        assert run.pods[victim]["spec"]["nodeName"] != lost_node, run.dump()

        finished = run.wait_succeeded(timeout=300)
        assert condition(finished, "Succeeded")
        done = run.events("done")
        assert sorted(ln.int("rank") for ln in done) == [0, 1, 2] and {ln.int("world_size") for ln in done} == {3}, run.dump()
        assert finished["status"].get("restartCount") == 1, finished["status"]
        assert all(len(run.uids(pod)) == 2 for pod in DDP_PODS), run.dump()
        named = [e for e in job_events(nodes_env, DDP) if victim in (e.message or "") and lost_node in (e.message or "")]
        assert named, [e.message for e in job_events(nodes_env, DDP)]


# --- training finished, then the node died -----------------------------------------------------

UPLOAD_SECONDS = 15  # what the command does after training (an upload, say): the node dies meanwhile
FINISHED_BOUND = 150.0  # seconds from the kill to the job's end: grace periods, a crash loop's back-off, the upload


def with_upload_after_training(job: dict[str, Any]) -> dict[str, Any]:
    """Each Worker runs ``torchrun train.py ... && <upload>``: the pod outlives its training."""
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    script = f'torchrun "$@" && echo "[upload] seconds={UPLOAD_SECONDS}" && sleep {UPLOAD_SECONDS}'
    container["args"] = [*container["command"][1:], *container.get("args", [])]
    container["command"] = ["sh", "-c", script, "sh"]
    return job


def test_a_job_whose_training_finished_before_its_node_died_succeeds(nodes_env: E2E) -> None:
    """The lone Worker's torchrun exited 0, which closed the rendezvous on the store pod (on
    another node); then its node died during the upload. The replacement finds the rendezvous
    closed: the controller replaces the store, the replacement's next run resumes from the
    final checkpoint with nothing left to train, uploads, and the job succeeds, with nothing
    counted failed. (Before, the replacement crash-looped and the job ran for ever.)"""
    job = with_upload_after_training(elastic_job(60))
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    with nodes_env.run(job) as run:
        run.wait_line("torchrun done, the upload running", lambda ln: ln.pod == W0 and ln.event == "upload", 180)
        lost_node, lost_uid = node_of(run, W0), run.pods[W0]["metadata"]["uid"]
        store = f"{ELASTIC}-rdzv"
        assert run.pods[store]["spec"].get("nodeName") != lost_node, f"the store shares the worker's node\n{run.dump()}"
        killed = time.monotonic()
        nodes_env.cluster.kill_node(lost_node)

        finished = run.wait_succeeded(timeout=FINISHED_BOUND)
        print(f"\n[training finished, then the node of {W0} died] Succeeded {time.monotonic() - killed:.1f}s after the kill")
        assert run.deleted.get(W0) == "Running", f"the upload ended before the kill: {run.deleted}\n{run.dump()}"
        assert condition(finished, "Succeeded") and not condition(finished, "Failed")
        assert "failed" not in finished["status"]["replicaStatuses"]["Worker"], finished["status"]
        assert finished["status"].get("restartCount") == 1, finished["status"]  # the lost pod's replacement
        (replacement,) = [uid for uid in run.uids(W0) if uid != lost_uid]
        mine = [ln for ln in run.lines if ln.uid == replacement]
        assert any(ln.event == "resume" and ln.int("step") == 60 for ln in mine), run.dump()
        assert not [ln for ln in mine if ln.event == "step"], f"the replacement trained again\n{run.dump()}"
        assert len(run.uids(store)) == 2, f"the closed store was not replaced\n{run.dump()}"
        fresh = [e.message for e in job_events(nodes_env, ELASTIC) if store in (e.message or "") and "closed" in (e.message or "")]
        assert fresh, [e.message for e in job_events(nodes_env, ELASTIC)]
