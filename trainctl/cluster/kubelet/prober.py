"""Container probes: liveness, readiness and startup, as the kubelet's prober runs them.

A container's spec may ask the kubelet to check it while it runs: a *startup* probe until it
has started (liveness and readiness wait for it), a *readiness* probe that decides whether the
container is ``ready`` (and with it the pod's ``Ready`` condition, which puts the pod behind
its Services), and a *liveness* probe whose failure kills the container so that the pod's
``restartPolicy`` restarts it. Each probe runs ``exec`` (a command in the container),
``httpGet`` (a request to the pod's address, 200-399 is healthy) or ``tcpSocket`` (a
connection to it), every ``periodSeconds`` after ``initialDelaySeconds``, each attempt
allowed ``timeoutSeconds``; a result counts once it repeated ``successThreshold`` or
``failureThreshold`` times in a row. Kube's defaults apply (10 s, 1 s, 1, 3).

:class:`ProbeState` and :class:`ContainerProbes` are that decision, pure (time is passed in);
:class:`ContainerProber` runs it on threads, one per probe as the kubelet's probe workers;
the checks themselves (:func:`exec_check`, :func:`http_check`, :func:`tcp_check`) reach the pod
the way ``kubectl exec`` and ``kubectl port-forward`` do, through the node's pod network.
Their messages are kube's, so ``Unhealthy`` Events read as on a real node.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from trainctl.cluster.kubelet.runtime import ContainerProcess
from trainctl.cluster.kubelet.streaming.remotecommand import unrunnable

Obj = dict[str, Any]

LIVENESS, READINESS, STARTUP = "Liveness", "Readiness", "Startup"
SPEC_FIELDS = {LIVENESS: "livenessProbe", READINESS: "readinessProbe", STARTUP: "startupProbe"}
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
MAX_OUTPUT = 10 * 1024  # what the kubelet keeps of a probe's output or response body
USER_AGENT = "kube-probe/1.32"


def _count(value: Any, default: int, least: int) -> int:
    """A probe field as the API server defaults it (0 or absent: the default)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return default
    return max(least, value)


@dataclass(frozen=True)
class ProbeSpec:
    """One probe of a container's spec, with kube's defaults filled in."""

    kind: str
    handler: str  # exec, httpGet, tcpSocket or grpc
    action: Obj
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace: Optional[int] = None

    @classmethod
    def parse(cls, kind: str, probe: Any) -> Optional["ProbeSpec"]:
        """The probe ``kind`` of a container spec's value, or None when there is none to run."""
        if not isinstance(probe, dict):
            return None
        handler = next((h for h in HANDLERS if isinstance(probe.get(h), dict)), None)
        if handler is None:
            return None
        delay = probe.get("initialDelaySeconds")
        grace = probe.get("terminationGracePeriodSeconds")
        return cls(kind, handler, probe[handler],
                   initial_delay=float(delay) if isinstance(delay, int) and delay > 0 else 0.0,
                   period=float(_count(probe.get("periodSeconds"), 10, 1)),
                   timeout=float(_count(probe.get("timeoutSeconds"), 1, 1)),
                   # liveness and startup results count at once when healthy (the API server insists)
                   success_threshold=_count(probe.get("successThreshold"), 1, 1) if kind == READINESS else 1,
                   failure_threshold=_count(probe.get("failureThreshold"), 3, 1),
                   termination_grace=grace if isinstance(grace, int) and grace > 0 else None)


@dataclass(frozen=True)
class Outcome:
    """One attempt: healthy or not, and what it said (a command's output, an error)."""

    success: bool
    message: str = ""
    errored: bool = False  # the probe could not be run (kube's "probe errored")

    def event_message(self, kind: str) -> str:
        return f"{kind} probe {'errored' if self.errored else 'failed'}: {self.message}"


class ProbeState:
    """One probe of one run of a container: when to probe, and the result that counts.

    Before any result counts, a readiness probe says *not ready*, a liveness probe *alive*
    and a startup probe nothing (the container has not started). Liveness and startup stop
    once they failed: the container is killed, and its next run has fresh states."""

    def __init__(self, spec: ProbeSpec) -> None:
        self.spec = spec
        self.result: Optional[bool] = {READINESS: False, LIVENESS: True}.get(spec.kind)
        self._last: Optional[bool] = None
        self._run = 0
        self.on_hold = False

    def due(self, running_for: float, started: bool) -> bool:
        """Whether to probe now, ``running_for`` seconds after the container started."""
        if self.on_hold:
            return False
        if (self.spec.kind == STARTUP) == started:  # startup probes until started; the others after
            return False
        return running_for >= self.spec.initial_delay

    def record(self, success: bool) -> bool:
        """Count one attempt; whether the result that counts changed."""
        self._run = self._run + 1 if success == self._last else 1
        self._last = success
        if self._run < (self.spec.success_threshold if success else self.spec.failure_threshold):
            return False
        changed = self.result != success
        self.result = success
        if not success and self.spec.kind in (LIVENESS, STARTUP):
            self.on_hold = True
        return changed


class ContainerProbes:
    """The probes of one run of a container and what they decide together."""

    def __init__(self, container: Obj) -> None:
        self.states = {kind: ProbeState(spec) for kind, field in SPEC_FIELDS.items()
                       if (spec := ProbeSpec.parse(kind, container.get(field))) is not None}

    @property
    def started(self) -> bool:
        startup = self.states.get(STARTUP)
        return startup is None or startup.result is True

    @property
    def ready(self) -> bool:
        readiness = self.states.get(READINESS)
        return self.started and (readiness is None or readiness.result is True)

    def failed(self) -> Optional[str]:
        """The probe (Liveness or Startup) whose failure means the container must be killed."""
        for kind in (STARTUP, LIVENESS):
            state = self.states.get(kind)
            if state is not None and state.result is False:
                return kind
        return None


Check = Callable[[ProbeSpec], Outcome]


class ContainerProber:
    """Runs a container run's probes until :meth:`stop`: one thread per probe, each probing
    at once and then every ``periodSeconds``, as the kubelet's probe workers do.

    ``on_change`` hears that ``started`` or ``ready`` changed, ``on_unhealthy`` each failed
    attempt's Event message, and ``on_failed`` (once) which probe failed for good: the caller
    kills the container."""

    def __init__(self, container: Obj, check: Check, on_change: Callable[[], None],
                 on_unhealthy: Callable[[str], None], on_failed: Callable[[ProbeSpec], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.probes = ContainerProbes(container)
        self._check = check
        self._on_change, self._on_unhealthy, self._on_failed = on_change, on_unhealthy, on_failed
        self._clock = clock
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._begun = clock()
        self.killed: Optional[str] = None  # the probe that failed for good

    @property
    def ready(self) -> bool:
        with self._lock:
            return self.probes.ready

    @property
    def started(self) -> bool:
        with self._lock:
            return self.probes.started

    def start(self) -> None:
        for kind in self.probes.states:
            threading.Thread(target=self._work, args=(kind,), daemon=True, name=f"probe-{kind.lower()}").start()

    def stop(self) -> None:
        self._stopped.set()

    def _work(self, kind: str) -> None:
        state = self.probes.states[kind]
        while not self._stopped.is_set():
            with self._lock:
                due = state.due(self._clock() - self._begun, self.probes.started)
            if due:
                self._probe(state)
            self._stopped.wait(state.spec.period)

    def _probe(self, state: ProbeState) -> None:
        try:
            outcome = self._check(state.spec)
        except Exception as exc:  # a check that raised is an error of the probe, never the kubelet's end
            outcome = Outcome(False, str(exc), errored=True)
        if self._stopped.is_set():  # the run ended meanwhile: its result no longer counts
            return
        if not outcome.success:
            self._on_unhealthy(outcome.event_message(state.spec.kind))
        with self._lock:
            changed = state.record(outcome.success)
            failed = self.killed is None and self.probes.failed() is not None
            if failed:
                self.killed = state.spec.kind
        if changed:
            self._on_change()
        if failed:
            self._on_failed(state.spec)


# --- the checks ------------------------------------------------------------------------------
Dial = Callable[[str, int, float], socket.socket]


def container_port(port: Any, container: Obj) -> int:
    """A probe's ``port``: a number, or the name of one of the container's ports."""
    if isinstance(port, int) and not isinstance(port, bool):
        return port
    if isinstance(port, str) and port.isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if isinstance(declared, dict) and declared.get("name") == port and isinstance(declared.get("containerPort"), int):
            return int(declared["containerPort"])
    raise ValueError(f"couldn't find port: {port} in container {container.get('name', '')!r}")


def _dial_error(host: str, port: int, exc: BaseException) -> str:
    """A failed dial in Go's words (``dial tcp 10.0.0.5:80: connect: connection refused``)."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        why = "i/o timeout"
    elif isinstance(exc, ConnectionRefusedError):
        why = "connect: connection refused"
    else:
        why = "connect: " + str(getattr(exc, "strerror", None) or exc).lower()
    return f"dial tcp {host}:{port}: {why}"


def tcp_check(dial: Dial, host: str, port: int, timeout: float) -> Outcome:
    try:
        connection = dial(host, port, timeout)
    except OSError as exc:
        return Outcome(False, _dial_error(host, port, exc))
    connection.close()
    return Outcome(True)


class _DialedConnection(http.client.HTTPConnection):
    """An HTTP connection over a socket the pod network hands out (TLS unverified, as kube's
    prober does for ``scheme: HTTPS``)."""

    def __init__(self, dial: Dial, host: str, port: int, timeout: float, tls: bool) -> None:
        super().__init__(host, port, timeout=timeout)
        self._dial, self._tls = dial, tls

    def connect(self) -> None:
        sock = self._dial(self.host, self.port, self.timeout or 1.0)
        if self._tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            sock = context.wrap_socket(sock, server_hostname=self.host)
        self.sock = sock


def http_check(dial: Dial, host: str, port: int, action: Obj, timeout: float) -> Outcome:
    scheme = str(action.get("scheme") or "HTTP").upper()
    path = str(action.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    url = f"{scheme.lower()}://{host}:{port}{path}"
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
    for header in action.get("httpHeaders") or []:
        if isinstance(header, dict) and header.get("name"):
            headers[str(header["name"])] = str(header.get("value", ""))
    connection = _DialedConnection(dial, host, port, timeout, tls=scheme == "HTTPS")
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read(MAX_OUTPUT)
        status = response.status
    except OSError as exc:
        if connection.sock is None:
            return Outcome(False, f'Get "{url}": {_dial_error(host, port, exc)}')
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return Outcome(False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)')
        return Outcome(False, f'Get "{url}": {exc}')
    except http.client.HTTPException as exc:
        return Outcome(False, f'Get "{url}": malformed HTTP response: {exc!r}')
    finally:
        connection.close()
    if 200 <= status < 400:
        return Outcome(True)
    return Outcome(False, f"HTTP probe failed with statuscode: {status}")


def exec_check(process: ContainerProcess, enter: list[str], command: list[str], timeout: float) -> Outcome:
    """``command`` in the running container, as ``kubectl exec`` runs it (its environment,
    working directory, namespaces and resource group); exit 0 is healthy."""
    if not command:
        return Outcome(False, "no command given", errored=True)
    why = unrunnable(command, process.env, process.cwd)
    if why is not None:
        return Outcome(False, f'exec: "{command[0]}": {why}')
    child = subprocess.Popen(enter + command, env=process.env, cwd=process.cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                             preexec_fn=process.group.preexec())
    process.group.join(child.pid)
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return Outcome(False, f'command "{" ".join(command)}" timed out')
    text = output[:MAX_OUTPUT].decode("utf-8", errors="replace")
    return Outcome(child.returncode == 0, text)


def checker(dial: Dial, enter: Callable[[], list[str]], pod_ip: str, container: Obj,
            process: ContainerProcess) -> Check:
    """The check of a probe of ``container`` (running as ``process``) in the pod at ``pod_ip``."""
    def check(spec: ProbeSpec) -> Outcome:
        action = spec.action
        if spec.handler == "exec":
            command = action.get("command")
            return exec_check(process, enter(), [str(part) for part in command] if isinstance(command, list) else [],
                              spec.timeout)
        if spec.handler == "grpc":
            return Outcome(False, "gRPC probes are not supported by the local kubelet", errored=True)
        port = container_port(action.get("port"), container)
        host = str(action.get("host") or pod_ip)
        if spec.handler == "httpGet":
            return http_check(dial, host, port, action, spec.timeout)
        return tcp_check(dial, host, port, spec.timeout)
    return check
