"""One pod's life on this node: init containers, containers, restarts, status, termination.

A :class:`PodWorker` owns a pod from admission to its terminal phase (or its deletion). It
runs init containers in order, then every container at once, restarts them in place as the
pod's ``restartPolicy`` says (with CrashLoopBackOff back-off), and reports a status shaped
like the real kubelet's after every change. What it needs from the node (name rewriting,
ConfigMaps, the status writer) comes through :class:`PodContext`.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from trainctl.cluster.compute import container_limits
from trainctl.cluster.compute.accounting import ContainerGroup, Enforcer
from trainctl.cluster.kubelet import paths
from trainctl.cluster.kubelet.env import ConfigError, command_line, container_env, downward_api_names
from trainctl.cluster.kubelet.kubelet_events import NORMAL, WARNING, KubeletEvents, pod_label
from trainctl.cluster.kubelet.prober import ContainerProber, ProbeSpec, checker
from trainctl.cluster.kubelet.runtime import ContainerProcess, ProcessRegistry, Stdio, claim_pod_directory
from trainctl.cluster.kubelet.sandbox import PodSandbox, SandboxError
from trainctl.cluster.kubelet.serviceaccount import AccountMissing
from trainctl.cluster.kubelet.volumes import VolumeError
from trainctl.cluster.network.podnet import PodNetwork
from trainctl.kube.client import ApiError
from trainctl.kube.timestamps import now_rfc3339

log = logging.getLogger(__name__)

Obj = dict[str, Any]

FALLBACK_TO_LOGS = "FallbackToLogsOnError"
# The run is not in a container, so nothing can be mounted at the spec's terminationMessagePath:
# each run gets a file of its own, named to the process in this variable instead.
TERMINATION_MESSAGE_ENV = "TRAINCTL_TERMINATION_MESSAGE_PATH"
# Where a pod's containers write their termination messages: beside their logs, in a directory
# of the pod's own (writable inside its sandbox, unlike the logs); no container can be named so.
TERMINATION_MESSAGE_DIRECTORY = "termination_messages"
# What the real kubelet keeps of a termination message file.
TERMINATION_MESSAGE_LIMIT = 4096
DEVICE_ENV = {"nvidia.com/gpu": "CUDA_VISIBLE_DEVICES", "huawei.com/Ascend910": "ASCEND_VISIBLE_DEVICES"}


class PodContext(Protocol):
    """What a pod worker needs from its kubelet."""

    node_name: str
    host_ip: str
    allocatable: dict[str, Any]
    registry: ProcessRegistry
    enforcer: Enforcer
    pods_dir: Path
    backoff_base: float
    backoff_cap: float
    events: KubeletEvents
    network: PodNetwork

    def rewrite(self, text: str, pod: Obj, memo: Optional[dict[tuple[str, str], Any]] = None) -> tuple[str, list[str]]: ...
    def configmap(self, namespace: str, name: str) -> Optional[Obj]: ...
    def secret(self, namespace: str, name: str) -> Optional[Obj]: ...
    def base_env(self, namespace: str, pod_uid: str) -> dict[str, str]: ...
    def mount_service_account(self, pod: Obj) -> None:
        """Write the pod's ServiceAccount files; raises while they cannot be written yet."""
    def working_dir(self, container: Obj) -> str: ...
    def start_sandbox(self, pod: Obj) -> Optional[PodSandbox]:
        """The pod's sandbox, None where pods run without one; raises while it cannot be made."""
    def sandbox_workdir(self, container: Obj) -> str: ...
    def report(self, pod: Obj, status: Obj) -> None:
        """Write the pod's status; never raises (a failed write is retried by the kubelet)."""
    def wait_for_change(self, timeout: float) -> None: ...
    def record_error(self, what: str) -> None:
        """Note that the kubelet itself failed (a bug, never bad input); it is logged already."""


@dataclass
class ContainerState:
    """The kubelet's record of one container, rendered as a ``ContainerStatus``."""

    name: str
    image: str
    restart_count: int = 0
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last_state: Obj = field(default_factory=dict)
    container_id: str = ""
    created: bool = False  # an instance exists: the next one is a restart
    prober: Optional[ContainerProber] = None  # the current run's probes

    def running_and(self, probed: str) -> bool:
        """Whether the container runs and its probes say ``started`` (or ``ready``)."""
        return "running" in self.state and (self.prober is None or bool(getattr(self.prober, probed)))

    def next_instance(self) -> None:
        """A new instance of the container is about to start: ``restartCount`` counts the
        instances before it, as the real kubelet's (the first run is 0, its restart 1)."""
        if self.created:
            self.restart_count += 1
        self.created = True

    def render(self) -> Obj:
        status: Obj = {"name": self.name, "image": self.image, "imageID": "", "ready": self.running_and("ready"),
                       "started": self.running_and("started"), "restartCount": self.restart_count,
                       "state": copy.deepcopy(self.state), "lastState": copy.deepcopy(self.last_state)}
        if self.container_id:
            status["containerID"] = self.container_id
        return status

    def terminated(self) -> Optional[Obj]:
        return self.state.get("terminated")


def _terminated(code: int, started_at: str, finished_at: str, container_id: str, message: str = "",
                reason: Optional[str] = None) -> Obj:
    state: Obj = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                  "startedAt": started_at, "finishedAt": finished_at, "containerID": container_id}
    if message:
        state["message"] = message
    return {"terminated": state}


def termination_message(path: Path, spec: Obj, code: int, log_end: Callable[[], str]) -> str:
    """What the run wrote to its termination message file (its first 4096 bytes), else, when
    it failed and the spec asks for it (``FallbackToLogsOnError``), its log's end."""
    try:
        with path.open("rb") as file:
            written = file.read(TERMINATION_MESSAGE_LIMIT).decode("utf-8", "replace")
    except OSError:
        written = ""
    if written or code == 0 or spec.get("terminationMessagePolicy") != FALLBACK_TO_LOGS:
        return written
    return log_end()


KUBELET_CONDITIONS = {"Initialized", "Ready", "ContainersReady", "PodScheduled"}  # what status() writes


class PodWorker:
    """Runs one admitted pod in background threads."""

    def __init__(self, context: PodContext, pod: Obj, pod_ip: str, devices: dict[str, list[int]],
                 on_done: Callable[[str], None]) -> None:
        self.ctx = context
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.namespace: str = pod["metadata"].get("namespace", "default")
        self.pod_ip = pod_ip
        self.devices = devices
        self._on_done = on_done
        spec = pod.get("spec", {})
        self.restart_policy: str = spec.get("restartPolicy") or "Always"
        self.init_specs: list[Obj] = spec.get("initContainers") or []
        self.specs: list[Obj] = spec.get("containers") or []
        self.init_states = [ContainerState(c.get("name", ""), c.get("image", "")) for c in self.init_specs]
        # Until they start, the containers of a pod without init containers are being
        # created; those behind init containers wait for them (PodInitializing), as kube says.
        first_wait = "PodInitializing" if self.init_specs else "ContainerCreating"
        self.states = [ContainerState(c.get("name", ""), c.get("image", ""), state={"waiting": {"reason": first_wait}})
                       for c in self.specs]
        # Added later through the pods/ephemeralcontainers subresource (kubectl debug): each
        # is started once, when the pod's containers run, and is never restarted or probed.
        self.ephemeral_specs: list[Obj] = []
        self.ephemeral_states: list[ContainerState] = []
        self._ephemeral_started: set[str] = set()
        self.start_time = now_rfc3339()
        self.phase = "Pending"
        self.initialized = not self.init_specs
        self._transitions: dict[str, tuple[str, str]] = {}
        self._lock = threading.RLock()
        self._report_lock = threading.Lock()
        self._processes: dict[str, ContainerProcess] = {}
        self._pod_sandbox: Optional[PodSandbox] = None
        self.stopping = threading.Event()
        self.deadline_exceeded = False
        self._grace = 30.0
        self._thread = threading.Thread(target=self._run, name=f"pod-{pod['metadata'].get('name')}", daemon=True)
        self.done = threading.Event()
        self._take_ephemeral(pod)

    def container_groups(self) -> dict[str, ContainerGroup]:
        """The resource groups of the containers running now, by container name (a snapshot)."""
        with self._lock:
            return {name: process.group for name, process in self._processes.items()}

    def running(self, container: str) -> Optional[ContainerProcess]:
        """The current run of ``container`` while it runs (what ``kubectl exec`` and ``attach`` reach)."""
        with self._lock:
            return self._processes.get(container)

    # --- control --------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, grace_seconds: float) -> None:
        """Graceful termination: SIGTERM every container, SIGKILL after the grace period. Blocks."""
        with self._lock:
            self._grace = max(0.0, grace_seconds)
            self.stopping.set()
            processes = list(self._processes.values())
            for name in self._processes:
                self._event(name, NORMAL, "Killing", f"Stopping container {name}")
        stoppers = [threading.Thread(target=p.stop, args=(self._grace,), daemon=True) for p in processes]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        self.done.wait(timeout=self._grace + 10)

    def update(self, pod: Obj) -> None:
        """The latest API object (labels, annotations and status feed the downward API; an
        ephemeral container added to it starts)."""
        with self._lock:
            self.pod = pod
            self._take_ephemeral(pod)
        self._start_ephemeral()

    def _take_ephemeral(self, pod: Obj) -> None:
        """Record the ephemeral containers ``pod`` names that this worker does not know yet.
        One its status says has started before (a kubelet restarted) keeps that state and is
        not started again: an ephemeral container runs once."""
        known = {s.get("name") for s in self.ephemeral_specs}
        reported = {s.get("name"): s for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or []
                    if isinstance(s, dict)}
        for spec in (pod.get("spec") or {}).get("ephemeralContainers") or []:
            if isinstance(spec, dict) and spec.get("name") and spec.get("name") not in known:
                state = ContainerState(spec["name"], spec.get("image", ""),
                                       state={"waiting": {"reason": "ContainerCreating"}})
                before = (reported.get(spec["name"]) or {}).get("state") or {}
                if "running" in before or "terminated" in before:
                    state.state = {"terminated": before["terminated"]} if "terminated" in before else {
                        "terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                       "message": "The container could not be located when the kubelet restarted"}}
                    self._ephemeral_started.add(spec["name"])
                self.ephemeral_specs.append(spec)
                self.ephemeral_states.append(state)

    def _start_ephemeral(self) -> None:
        """Start the ephemeral containers not started yet, once the pod's containers run (in
        the pod's sandbox and network, as its other containers: :meth:`_run_once`)."""
        with self._lock:
            if not self.initialized or self.stopping.is_set() or self.phase != "Running":
                return
            pending = [s for s in self.ephemeral_specs if s["name"] not in self._ephemeral_started]
            self._ephemeral_started.update(s["name"] for s in pending)
        for spec in pending:
            threading.Thread(target=self._run_ephemeral, args=(spec,), daemon=True,
                             name=f"ephemeral-{spec['name']}").start()

    def _run_ephemeral(self, spec: Obj) -> None:
        try:
            self._run_once(spec)
        except _Stopped:
            pass
        except Exception as exc:  # a bug must not leave the container without a state
            log.exception("ephemeral container %s of pod %s/%s", spec.get("name"), self.namespace,
                          self.pod["metadata"].get("name"))
            with self._lock:
                self._state_of(spec).state = _terminated(128, now_rfc3339(), now_rfc3339(), "",
                                                         f"the local kubelet failed to run the container: {exc!r}",
                                                         reason="StartError")
        finally:
            self._report()

    # --- status ---------------------------------------------------------------------------
    def _condition(self, kind: str, ok: bool, reason: str = "", message: str = "") -> Obj:
        value = "True" if ok else "False"
        previous = self._transitions.get(kind)
        if previous is None or previous[0] != value:
            self._transitions[kind] = (value, now_rfc3339())
        condition: Obj = {"type": kind, "status": value, "lastProbeTime": None,
                          "lastTransitionTime": self._transitions[kind][1]}
        if not ok and reason:
            condition["reason"] = reason
        if not ok and message:
            condition["message"] = message
        return condition

    def status(self) -> Obj:
        with self._lock:
            scheduled = next((c for c in self.pod.get("status", {}).get("conditions") or []
                              if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
            not_initialized = [s.name for s in self.init_states if (s.terminated() or {}).get("exitCode") != 0]
            not_ready = [s.name for s in self.states if not s.running_and("ready")]
            terminal = self.phase in ("Succeeded", "Failed")
            conditions = [
                self._condition("Initialized", self.initialized or not not_initialized, "ContainersNotInitialized",
                                f"containers with incomplete status: [{' '.join(not_initialized)}]"),
                self._condition("Ready", not not_ready and not terminal,
                                "PodCompleted" if terminal else "ContainersNotReady",
                                "" if terminal else f"containers with unready status: [{' '.join(not_ready)}]"),
                self._condition("ContainersReady", not not_ready and not terminal,
                                "PodCompleted" if terminal else "ContainersNotReady",
                                "" if terminal else f"containers with unready status: [{' '.join(not_ready)}]"),
                scheduled or {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                              "lastTransitionTime": self.start_time},
            ]
            # Conditions other writers own (DisruptionTarget from an eviction or a preemption,
            # readiness gates) are kept, as the real kubelet's status manager merges them.
            conditions += [c for c in self.pod.get("status", {}).get("conditions") or []
                           if isinstance(c, dict) and c.get("type") not in KUBELET_CONDITIONS]
            status: Obj = {
                "phase": self.phase,
                "conditions": conditions,
                "hostIP": self.ctx.host_ip,
                "hostIPs": [{"ip": self.ctx.host_ip}],
                "podIP": self.pod_ip,
                "podIPs": [{"ip": self.pod_ip}],
                "startTime": self.start_time,
                "qosClass": qos_class(self.pod),
                "containerStatuses": [s.render() for s in self.states],
            }
            if self.init_states:
                status["initContainerStatuses"] = [s.render() for s in self.init_states]
            if self.ephemeral_states:
                status["ephemeralContainerStatuses"] = [s.render() for s in self.ephemeral_states]
            if self.deadline_exceeded:
                status["reason"] = "DeadlineExceeded"
                status["message"] = "Pod was active on the node longer than the specified deadline"
            return status

    def _report(self) -> None:
        # Computing and handing over under one lock keeps the writes in the order of the
        # states they describe, whichever container thread reports.
        with self._report_lock:
            with self._lock:
                pod, status = self.pod, self.status()
            self.ctx.report(pod, status)

    # --- running containers -------------------------------------------------------------
    def _environment(self, spec: Obj) -> tuple[list[str], dict[str, str]]:
        """argv and env for one start, waiting (interruptibly) for Service names to resolve."""
        state = self._state_of(spec)
        downward = downward_api_names(spec)
        while not self.stopping.is_set():
            try:
                with self._lock:
                    pod = copy.deepcopy(self.pod)
                pod.setdefault("status", {}).update({"podIP": self.pod_ip, "podIPs": [{"ip": self.pod_ip}],
                                                     "hostIP": self.ctx.host_ip, "hostIPs": [{"ip": self.ctx.host_ip}]})
                pod["spec"]["nodeName"] = self.ctx.node_name
                declared = container_env(pod, spec, self.ctx.configmap, self.ctx.secret, self.ctx.allocatable)
                argv, env, pending = _resolve_names(self.ctx, pod, command_line(spec, declared), declared, downward)
                if not pending:
                    return argv, _process_env(self.ctx.base_env(self.namespace, self.uid), pod, self.devices, env)
                waiting = {"reason": "ContainerCreating", "message": "waiting for " + "; ".join(sorted(set(pending)))}
            except ConfigError as exc:
                waiting = {"reason": "CreateContainerConfigError", "message": str(exc)}
            except ApiError as exc:  # a ConfigMap, Secret or Service could not be read: try again
                waiting = {"reason": "ContainerCreating", "message": f"waiting for the API server: {exc}"}
            if state.state.get("waiting") != waiting:
                with self._lock:
                    state.state = {"waiting": waiting}
                if waiting["reason"] == "CreateContainerConfigError":
                    self._event(state.name, WARNING, "Failed", f"Error: {waiting['message']}")
                self._report()
            self.ctx.wait_for_change(5.0)
        raise _Stopped()

    def _state_of(self, spec: Obj) -> ContainerState:
        for specs, states in ((self.init_specs, self.init_states), (self.specs, self.states),
                              (self.ephemeral_specs, self.ephemeral_states)):
            for s, st in zip(specs, states, strict=True):
                if s is spec:
                    return st
        raise KeyError(spec.get("name"))

    def _run_once(self, spec: Obj) -> int:
        """Start the container once and wait for it; return its exit code."""
        state = self._state_of(spec)
        argv, env = self._environment(spec)
        with self._lock:
            state.next_instance()
            state.prober = None
        started = now_rfc3339()
        try:
            claim_pod_directory(self.ctx.pods_dir, self.uid, self.ctx.node_name)
            log_path = paths.inside(self.ctx.pods_dir, self.uid, state.name, f"{state.restart_count}.log")
            message_path = paths.inside(self.ctx.pods_dir, self.uid, TERMINATION_MESSAGE_DIRECTORY,
                                        f"{state.name}.{state.restart_count}")
            message_path.parent.mkdir(exist_ok=True)
        except (paths.OutsideDirectory, OSError) as exc:
            return self._start_failed(state, started, f"no log file for container {state.name!r}: {exc}")
        try:
            with self._lock:
                if self.stopping.is_set():
                    raise _Stopped()
                group = self.ctx.enforcer.container(
                    self.uid, state.name, container_limits.ContainerLimits.from_resources(spec.get("resources")))
                sandboxed, workdir = self._pod_sandbox, self.ctx.sandbox_workdir(spec)
                process = ContainerProcess(
                    argv, {**env, TERMINATION_MESSAGE_ENV: str(message_path)}, self.ctx.working_dir(spec), log_path,
                    self.ctx.registry, self.uid, state.name, group, Stdio.of(spec),
                    enter=sandboxed.enter_argv(workdir) if sandboxed else self.ctx.network.enter_argv(self.uid),
                    enter_tty=sandboxed.enter_argv(workdir, terminal=True) if sandboxed else None,
                    relay=sandboxed is not None)
                self._processes[state.name] = process
                state.container_id = f"process://{process.pid}"
                state.state = {"running": {"startedAt": process.started_at}}
                state.prober = prober = self._prober(spec, state, process)
                if self.initialized and self.phase == "Pending":  # the first container runs
                    self.phase = "Running"
        except (OSError, ValueError, paths.OutsideDirectory) as exc:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            return self._start_failed(state, started, f"failed to start {argv[0]!r}: "
                                      f"{getattr(exc, 'strerror', None) or exc}")
        self._started_events(spec, state.name)
        prober.start()
        self._report()
        self._start_ephemeral()  # those added before the pod ran
        code = process.wait()
        assert code is not None
        prober.stop()
        if process.oom_killed():
            self.ctx.events.node(WARNING, "OOMKilling", f"Memory cgroup out of memory: killed process {process.pid} "
                                 f"({os.path.basename(argv[0])}) of container {state.name} in pod {pod_label(self.pod)}")
        message = termination_message(message_path, spec, code, process.last_output)
        with self._lock:
            self._processes.pop(state.name, None)
            state.state = _terminated(code, process.started_at, process.finished_at or now_rfc3339(),
                                      state.container_id, message,
                                      reason=container_limits.terminated_fields(code, oom_killed=process.oom_killed())["reason"])
        return code

    # --- probes -----------------------------------------------------------------------------
    def _prober(self, spec: Obj, state: ContainerState, process: ContainerProcess) -> ContainerProber:
        check = checker(self.ctx.network.dial, lambda: process.enter, self.pod_ip, spec, process)  # in the pod's sandbox too
        probed = spec if any(spec is s for s in self.specs) else {}  # init containers are not probed
        return ContainerProber(probed, check, self._report,
                               lambda message: self._event(state.name, WARNING, "Unhealthy", message),
                               lambda probe: self._kill_unhealthy(state.name, process, probe))

    def _kill_unhealthy(self, name: str, process: ContainerProcess, probe: ProbeSpec) -> None:
        """A liveness or startup probe failed for good: stop the run, as the kubelet kills a
        container for a restart (with the probe's grace period, if it has one)."""
        if self.stopping.is_set():
            return
        restarted = ", will be restarted" if self.restart_policy != "Never" else ""
        self._event(name, NORMAL, "Killing", f"Container {name} failed {probe.kind.lower()} probe{restarted}")
        grace = probe.termination_grace
        if grace is None:
            pod_grace = self.pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
            grace = pod_grace if isinstance(pod_grace, int) and pod_grace >= 0 else 30
        process.stop(float(grace))

    def _start_failed(self, state: ContainerState, started: str, message: str) -> int:
        with self._lock:
            state.state = _terminated(128, started, now_rfc3339(), state.container_id, message, reason="StartError")
        self._event(state.name, WARNING, "Failed", f"Error: {message}")
        self._report()
        return 128

    # --- events -----------------------------------------------------------------------------
    def _event(self, container: str, type_: str, reason: str, message: str) -> None:
        self.ctx.events.container(self.pod, container, type_, reason, message)

    def _started_events(self, spec: Obj, name: str) -> None:
        """What a real kubelet says as a container starts (images are not pulled here: none is)."""
        if spec.get("image"):
            self._event(name, NORMAL, "Pulled", f'Container image "{spec["image"]}" already present on machine')
        self._event(name, NORMAL, "Created", f"Created container: {name}")
        self._event(name, NORMAL, "Started", f"Started container {name}")

    def _back_off(self, state: ContainerState) -> None:
        """CrashLoopBackOff: the first restart is immediate, then base, 2*base, ... up to the cap.
        While it waits, ``restartCount`` still names the run that ended (its log is the one
        ``kubectl logs`` shows); it moves on when the next run starts."""
        delay = 0.0 if state.restart_count == 0 else min(self.ctx.backoff_cap,
                                                          self.ctx.backoff_base * 2 ** (state.restart_count - 1))
        with self._lock:
            state.last_state = state.state
            if delay > 0:
                state.state = {"waiting": {"reason": "CrashLoopBackOff", "message":
                               f"back-off {delay:g}s restarting failed container={state.name} pod={pod_label(self.pod)}"}}
                self._event(state.name, WARNING, "BackOff",
                            f"Back-off restarting failed container {state.name} in pod {pod_label(self.pod)}")
        if delay > 0:
            self._report()
            self.stopping.wait(delay)
        if self.stopping.is_set():
            raise _Stopped()

    def _should_restart(self, code: int) -> bool:
        return self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)

    def _run_container(self, spec: Obj) -> None:
        state = self._state_of(spec)
        try:
            while True:
                code = self._run_once(spec)
                self._report()  # the run's end (STATUS Error or Completed) before any back-off
                unhealthy = state.prober is not None and state.prober.killed is not None
                if self.stopping.is_set() or not (self._should_restart(code) or
                                                  (unhealthy and self.restart_policy != "Never")):
                    break
                self._back_off(state)
        except _Stopped:
            pass
        except Exception as exc:  # a bug must not leave the container without a state
            log.exception("container %s of pod %s/%s", state.name, self.namespace, self.pod["metadata"].get("name"))
            self.ctx.record_error(f"container {state.name} of pod {self.namespace}/{self.pod['metadata'].get('name')}")
            with self._lock:
                state.state = _terminated(128, now_rfc3339(), now_rfc3339(), state.container_id,
                                          f"the local kubelet failed to run the container: {exc!r}",
                                          reason="StartError")
        finally:
            self._report()

    def _watch_deadline(self) -> None:
        """``activeDeadlineSeconds``: stop the pod and fail it when it has run that long."""
        deadline = self.pod.get("spec", {}).get("activeDeadlineSeconds")
        if not isinstance(deadline, int) or deadline <= 0:
            return
        if self.done.wait(deadline) or self.stopping.is_set():
            return
        with self._lock:
            self.deadline_exceeded = True
        self.ctx.events.pod(self.pod, NORMAL, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
        grace = self.pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        self.stop(float(grace if isinstance(grace, (int, float)) else 30))

    def _mount_service_account(self) -> None:
        """The pod's token files before any container starts, waiting (interruptibly) while
        its ServiceAccount is missing or the API server does not answer, as a kubelet waits
        on a volume it cannot set up."""
        while not self.stopping.is_set():
            try:
                self.ctx.mount_service_account(self.pod)
                return
            except (AccountMissing, ApiError) as exc:
                waiting = {"reason": "ContainerCreating",
                           "message": f'MountVolume.SetUp failed for volume "kube-api-access": {exc}'}
            with self._lock:
                for state in self.init_states + self.states:
                    state.state = {"waiting": waiting}
            self._report()
            self.ctx.wait_for_change(5.0)
        raise _Stopped()

    def _sandbox(self) -> None:
        """The pod's network before its first process (a real kubelet's pod sandbox); while
        it cannot be made, the containers wait in ContainerCreating and it is tried again."""
        delay = 1.0
        while not self.stopping.is_set():
            try:
                spec = self.pod.get("spec", {})
                self.ctx.network.setup_pod(self.uid, self.pod_ip, spec.get("hostname") or self.pod["metadata"].get("name", ""),
                                           self.namespace)
                return
            except Exception as exc:  # the router refused, or is restarting
                log.warning("pod %s/%s: no network sandbox yet: %s", self.namespace, self.pod["metadata"].get("name"), exc)
                self._creating(f"failed to create the pod's network sandbox: {exc}")
            self.stopping.wait(delay)
            delay = min(delay * 2, 10.0)
        raise _Stopped()

    def _creating(self, why: str) -> None:
        """Report every container waiting in ContainerCreating, for ``why``."""
        with self._lock:
            for state in self.init_states + self.states:
                state.state = {"waiting": {"reason": "ContainerCreating", "message": why}}
        self._report()

    def _start_pod_sandbox(self) -> None:
        """The pod's volumes and sandbox before its first container (None without one); while
        they cannot be made (a ConfigMap not there yet), the containers wait in ContainerCreating."""
        while not self.stopping.is_set():
            try:
                self._pod_sandbox = self.ctx.start_sandbox(self.pod)
                return
            except (VolumeError, SandboxError, OSError, paths.OutsideDirectory) as exc:
                log.warning("pod %s/%s: no sandbox yet: %s", self.namespace, self.pod["metadata"].get("name"), exc)
                self._creating(f"MountVolume.SetUp failed: {exc}")
            self.ctx.wait_for_change(5.0)
        raise _Stopped()

    def _release_sandbox(self) -> None:
        if self._pod_sandbox is not None:
            self._pod_sandbox.stop()
            self._pod_sandbox = None
        try:
            self.ctx.network.teardown_pod(self.uid)
        except Exception as exc:  # the router is away: it drops the sandbox when the node restarts
            log.warning("pod %s/%s: releasing its network: %s", self.namespace, self.pod["metadata"].get("name"), exc)

    def _run(self) -> None:
        threading.Thread(target=self._watch_deadline, daemon=True, name=f"deadline-{self.uid}").start()
        try:
            self._report()
            self._mount_service_account()
            self._sandbox()  # after the token files: the sandbox shows their directory in the pod
            self._start_pod_sandbox()  # in the pod's network
            for spec, state in zip(self.init_specs, self.init_states, strict=True):
                while True:
                    code = self._run_once(spec)
                    if code == 0 or self.stopping.is_set():
                        break
                    if self.restart_policy == "Never":
                        with self._lock:
                            self.phase = "Failed"
                            for other in self.states:
                                other.state = {"waiting": {"reason": "PodInitializing"}}
                        return
                    self._back_off(state)
                if self.stopping.is_set():
                    raise _Stopped()
                self._report()
            with self._lock:
                self.initialized = True
                for state in self.states:
                    state.state = {"waiting": {"reason": "ContainerCreating"}}
            runners = [threading.Thread(target=self._run_container, args=(spec,), daemon=True,
                                        name=f"container-{spec.get('name')}") for spec in self.specs]
            for runner in runners:
                runner.start()
            self._report()
            for runner in runners:
                runner.join()
            with self._lock:
                codes = [(s.terminated() or {}).get("exitCode", 1) for s in self.states]
                succeeded = all(code == 0 for code in codes) and not self.deadline_exceeded
                self.phase = "Succeeded" if succeeded else "Failed"
        except _Stopped:
            with self._lock:
                if self.phase != "Succeeded":
                    self.phase = "Failed"
                for state in self.init_states + self.states + self.ephemeral_states:
                    if "terminated" not in state.state:
                        state.state = {"waiting": state.state.get("waiting", {"reason": "PodInitializing"})}
        except Exception:  # a bug here must not leave processes behind unreported
            log.exception("pod worker %s/%s failed", self.namespace, self.pod["metadata"].get("name"))
            self.ctx.record_error(f"pod worker {self.namespace}/{self.pod['metadata'].get('name')}")
            with self._lock:
                self.phase = "Failed"
        finally:
            with self._lock:
                debuggers = [self._processes.get(s["name"]) for s in self.ephemeral_specs]
            for process in debuggers:  # they end with the pod, as the real kubelet kills them
                if process is not None:
                    process.stop(0.0)
            self._release_sandbox()  # every process of the pod is gone by now
            self._report()
            self.done.set()
            self._on_done(self.uid)


def _resolve_names(ctx: PodContext, pod: Obj, argv: list[str], declared: dict[str, str],
                   downward: set[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """argv and env with Service names rewritten, and the names still pending."""
    pending: list[str] = []
    env = {}
    memo: dict[tuple[str, str], Any] = {}  # one lookup per name in this attempt
    for name, value in declared.items():
        if name in downward:
            env[name] = value
            continue
        env[name], waits = ctx.rewrite(value, pod, memo)
        pending += waits
    rewritten = argv[:1]  # the executable itself is never a Service name
    for part in argv[1:]:
        text, waits = ctx.rewrite(part, pod, memo)
        rewritten.append(text)
        pending += waits
    return rewritten, env, pending


def _process_env(base: dict[str, str], pod: Obj, devices: dict[str, list[int]], env: dict[str, str]) -> dict[str, str]:
    """The process's whole environment: the kubelet's, the devices, then the container's own."""
    full = dict(base)
    full["HOSTNAME"] = pod["metadata"].get("name", "")
    for resource, variable in DEVICE_ENV.items():
        if resource in devices:
            full[variable] = ",".join(str(i) for i in devices[resource])
    resolver_path = full.get("PYTHONPATH", "").split(os.pathsep)[0]
    full.update(env)
    if "PYTHONPATH" in env and resolver_path:  # keep the Service-name resolver first
        full["PYTHONPATH"] = os.pathsep.join(p for p in (resolver_path, env["PYTHONPATH"]) if p)
    return full


class _Stopped(Exception):
    """The pod is being terminated while a container was about to start."""


def qos_class(pod: Obj) -> str:
    containers = pod.get("spec", {}).get("containers") or []
    requests = [(c.get("resources") or {}).get("requests") or {} for c in containers]
    limits = [(c.get("resources") or {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(lim.get("cpu") and lim.get("memory") and (not r or (r.get("cpu") in (None, lim["cpu"]) and
                     r.get("memory") in (None, lim["memory"]))) for r, lim in zip(requests, limits, strict=True))
    return "Guaranteed" if guaranteed else "Burstable"
